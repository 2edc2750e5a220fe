//! A capture records each module's MVID: an assembly at a module's recorded
//! path that was rebuilt since the run is passed over with a note (no line, no name from it), and
//! the build that ran answers. Needs .NET 3.1.23 and 8.0.4, and the profiler built by
//! `cargo build --workspace`.

use std::path::{Path, PathBuf};

use crate::support::*;

const DEBUG: &str = "tests/fixtures/frames/debug-portable";
const RELEASE: &str = "tests/fixtures/frames/release-portable";

fn profiler() -> String {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    so.to_string_lossy().into_owned()
}

/// Copy a fixture build's Frames.dll and Frames.pdb (and its runtimeconfig) into `dir`.
fn put(build: &str, dir: &Path) {
    for f in ["Frames.dll", "Frames.pdb", "Frames.runtimeconfig.json"] {
        let from = repo_root().join(build).join(f);
        if from.is_file() {
            std::fs::copy(&from, dir.join(f)).unwrap();
        }
    }
}

/// Nested::Recurse's first return address in the run and what the program's own `StackTrace`
/// printed for it (`Type::Method`, `file:line:column`): the independent answer. (The Release
/// build's PDB gives this frame another line.)
fn recurse_frame(cap: &str, program_stdout: &str) -> (String, String, String) {
    let o = clrmap(&["il", "dump", cap, "--json", "--module", "Frames.dll"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let start = v["methods"].as_array().unwrap().iter().find(|m| m["token"] == 0x0600_0009).unwrap()["start"].as_u64().unwrap();
    let f: Vec<&str> = program_stdout.lines().map(|l| l.split('\t').collect::<Vec<_>>()).find(|f| f[0] == "F" && f[3] == "0x06000009").unwrap();
    let address = start + f[5].parse::<u64>().unwrap();
    (format!("0x{address:x}"), f[10].to_owned(), format!("{}:{}:{}", f[7], f[8], f[9]))
}

#[test]
#[ignore = "needs .NET"]
fn a_rebuilt_assembly_at_a_captured_modules_path_is_passed_over() {
    let so = profiler();
    for rt in all_runtimes() {
        let dotnet = rt.dotnet.to_string_lossy().into_owned();
        let host = rt.label();
        let dir: PathBuf = std::env::temp_dir().join(format!("clrmap-capture-identity-{}-{}", std::process::id(), host.replace('/', "_")));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        put(DEBUG, &dir);
        let cap = dir.join("run.capture");
        let cap = cap.to_str().unwrap();
        let o = clrmap(&["profile", "-o", cap, "--profiler", &so, "--", &dotnet, dir.join("Frames.dll").to_str().unwrap()]);
        assert_eq!(code(&o), Some(0), "{host}: {}", stderr(&o));
        // The capture records the MVID of the module the runtime loaded.
        let text = std::fs::read_to_string(cap).unwrap();
        assert!(text.lines().any(|l| l.contains("/Frames.dll\"") && l.contains("\"mvid\":\"")), "{host}: no MVID recorded");
        let (address, method, line) = recurse_frame(cap, &stdout(&o));
        let answer = |o: &std::process::Output| (code(o), stdout(o), stderr(o));
        // The build that ran answers as the runtime did.
        let o = clrmap(&["symbolize", cap, "--return-address", &address]);
        assert_eq!(answer(&o), (Some(0), format!("{method}\n{line}\n\n"), String::new()), "{host}");
        // Rebuilt since the run (another build at the recorded path): no line from it, and a note
        // naming the file passed over. The name is the one `profile` wrote into the capture at the
        // run, from the build that ran. Before, the Release build's line and names were given
        // silently.
        put(RELEASE, &dir);
        let o = clrmap(&["symbolize", cap, "--return-address", &address]);
        let (status, out, err) = answer(&o);
        assert_eq!((status, out.as_str()), (Some(0), format!("{method}\n??:0:0\n\n").as_str()), "{host}: {err}");
        let frames = dir.join("Frames.dll");
        // The capture's module record names the PDB id of the build that ran (pdb_only.rs).
        let note = format!("note: Frames.dll: {} is another build (PDB GUID ", frames.display());
        assert!(err.contains(&note) && err.contains(" wanted); not used\n"), "{host}: {err}");
        // A capture with MVIDs but no module records (written before them): the MVID tells.
        let mvid_only = dir.join("mvid-only.capture");
        std::fs::write(&mvid_only, text.lines().filter(|l| !l.contains("\"kind\":\"module\"")).map(|l| format!("{l}\n")).collect::<String>()).unwrap();
        let o = clrmap(&["symbolize", mvid_only.to_str().unwrap(), "--return-address", &address]);
        let (status, out, err) = answer(&o);
        assert_eq!((status, out.as_str()), (Some(0), format!("{method}\n??:0:0\n\n").as_str()), "{host}: {err}");
        // A capture without the names (written before `profile` wrote them): no name from the
        // other build either.
        let nameless = dir.join("nameless.capture");
        std::fs::write(&nameless, text.lines().filter(|l| !l.contains("\"kind\":\"module\"")).map(|l| format!("{}\n", strip_names(l))).collect::<String>()).unwrap();
        let o = clrmap(&["symbolize", nameless.to_str().unwrap(), "--return-address", &address]);
        let (status, out, err) = answer(&o);
        assert_eq!((status, out.as_str()), (Some(0), "??\n??:0:0\n\n"), "{host}: {err}");
        let note = format!("note: Frames.dll: {} is another build (MVID ", frames.display());
        assert!(err.contains(&note) && err.contains(" the capture recorded); not used\n"), "{host}: {err}");
        // What happened before (and still does for a capture written before MVIDs were
        // recorded): the Release build answers, with a line the runtime did not give.
        let old = dir.join("old.capture");
        let stripped: String = text.lines().filter(|l| !l.contains("\"kind\":\"module\"")).map(|l| format!("{}\n", strip_mvid(l))).collect();
        std::fs::write(&old, stripped).unwrap();
        let o = clrmap(&["symbolize", old.to_str().unwrap(), "--return-address", &address]);
        let (status, out, _) = answer(&o);
        assert_eq!(status, Some(0), "{host}");
        let old_line = out.lines().nth(1).unwrap().to_owned();
        assert!(old_line != line && old_line != "??:0:0", "{host}: {out}");
        // The Debug build back in place answers again.
        put(DEBUG, &dir);
        let o = clrmap(&["symbolize", cap, "--return-address", &address]);
        assert_eq!(answer(&o), (Some(0), format!("{method}\n{line}\n\n"), String::new()), "{host}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A capture line without its `name` and `full_name` members (what `profile` wrote before it
/// named bodies), through the library's own record type.
fn strip_names(line: &str) -> String {
    match serde_json::from_str::<clrmap::capture::Record>(line) {
        Ok(clrmap::capture::Record::Jit(mut b)) => {
            (b.name, b.full_name) = (None, None);
            serde_json::to_string(&clrmap::capture::Record::Jit(b)).unwrap()
        }
        _ => line.to_owned(),
    }
}

/// A capture line without its `"mvid":"..."` member (what profilers before it wrote).
fn strip_mvid(line: &str) -> String {
    match line.find(",\"mvid\":\"") {
        Some(at) => {
            let rest = &line[at + 9..];
            let end = rest.find('"').unwrap();
            format!("{}{}", &line[..at], &rest[end + 1..])
        }
        None => line.to_owned(),
    }
}

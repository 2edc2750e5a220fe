//! Which PDB answers, through the real binary: `--pdb` for a recording from
//! another machine, another build in `--symbol-path`, an unreadable `--pdb` named with its
//! reason, `pdb lines X.pdb` naming methods from the assembly beside it or `--assembly`, and one
//! module named by many paths held once.
//!
//! `examples/frames.nettrace` is a .NET 8.0.4 trace of tests/fixtures/frames/debug-embedded run
//! from a directory that no longer exists; `examples/frames.stdout` is what the program's own
//! `StackTrace` printed in that run (see symbolize.rs).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::*;

const TRACE: &str = "examples/frames.nettrace";
const DEBUG_PDB: &str = "tests/fixtures/frames/debug-portable/Frames.pdb";
const RELEASE_PDB: &str = "tests/fixtures/frames/release-portable/Frames.pdb";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-cli-pdb-identity-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Nested::Inner's return address in capture 3 of the run, and the line the runtime printed for
/// it (examples/frames.stdout: token 0x06000008, native offset 0x26 from its code start).
pub(crate) fn inner_frame() -> (String, String) {
    let o = clrmap(&["il", "dump", TRACE, "--json", "--module", "Frames.dll"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let start = v["methods"].as_array().unwrap().iter().find(|m| m["token"] == 0x0600_0008).unwrap()["start"].as_u64().unwrap();
    let text = std::fs::read_to_string(repo_root().join("examples/frames.stdout")).unwrap();
    let f: Vec<&str> = text.lines().map(|l| l.split('\t').collect::<Vec<_>>()).find(|f| f[0] == "F" && f[3] == "0x06000008").unwrap();
    let address = start + f[5].parse::<u64>().unwrap();
    (format!("0x{address:x}"), format!("{}\n{}:{}:{}\n\n", f[10], f[7], f[8], f[9]))
}

#[test]
fn pdb_for_a_recording_from_another_machine_answers() {
    let (address, expected) = inner_frame();
    // Before: pdb_mismatch, because the module was looked for only at its recorded path.
    let o = clrmap(&["symbolize", TRACE, "--pdb", DEBUG_PDB, "--return-address", &address]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), expected);
    // The other build's PDB is still refused, at its id (the #Pdb stream's first bytes).
    let o = clrmap(&["symbolize", TRACE, "--pdb", RELEASE_PDB, "--return-address", &address]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).starts_with("error: pdb_mismatch at offset "), "{}", stderr(&o));
}

#[test]
fn a_pdb_of_no_module_names_its_id_and_the_modules_ids() {
    // The release PDB under another name belongs to no module of the trace: the error names its
    // id and the ids the modules recorded (Frames.dll's is the debug build's).
    let other = tmp("no-module").join("Other.pdb");
    std::fs::copy(repo_root().join(RELEASE_PDB), &other).unwrap();
    let o = clrmap(&["symbolize", TRACE, "--pdb", other.to_str().unwrap(), "--return-address", "0x1"]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    let expected = "error: pdb_mismatch: expected a module of the source that this PDB belongs to; this PDB's id is 9ED8E112586740F1BB0468042B4A8251; the source's modules: ";
    assert!(stderr(&o).starts_with(expected), "{}", stderr(&o));
    assert!(stderr(&o).contains("Frames.dll (PDB Frames.pdb 647EB43C81D2457284149EDC98BD7DB7)"), "{}", stderr(&o));
    assert!(stderr(&o).contains("System.Private.CoreLib.dll (PDB System.Private.CoreLib.pdb "), "{}", stderr(&o));
    // In JSON: the same kind and no offset, the ids in the message.
    let o = clrmap(&["symbolize", TRACE, "--pdb", other.to_str().unwrap(), "--return-address", "0x1", "--json"]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim_end()).unwrap();
    assert_eq!((&v["error"]["kind"], &v["error"]["offset"]), (&serde_json::json!("pdb_mismatch"), &serde_json::Value::Null), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("this PDB's id is 9ED8E112586740F1BB0468042B4A8251"), "{v}");
}

#[test]
fn another_build_in_the_symbol_path_gives_no_line() {
    let (address, expected) = inner_frame();
    // Before: the Release build's line, silently.
    let o = clrmap(&["symbolize", TRACE, "--symbol-path", "tests/fixtures/frames/release-portable", "--return-address", &address]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let method = expected.lines().next().unwrap();
    assert_eq!(stdout(&o), format!("{method}\n??:0:0\n\n"));
    // Not silently: stderr names what was passed over.
    assert!(stderr(&o).contains("note: Frames.dll: tests/fixtures/frames/release-portable/Frames.dll is another build (PDB GUID 9ED8E112586740F1BB0468042B4A8251, not the 647EB43C81D2457284149EDC98BD7DB7 wanted); not used\n"), "{}", stderr(&o));
    // `il at` says so too.
    let o = clrmap(&["il", "at", TRACE, &address, "--symbol-path", "tests/fixtures/frames/release-portable", "--return-address"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(!stdout(&o).contains(" at /_/src/") && stderr(&o).contains("release-portable/Frames.dll is another build"), "{}{}", stdout(&o), stderr(&o));
    // `perf jitdump` says so too (it used to write the file with no word on why Frames.dll's
    // bodies carry no lines).
    let out = tmp("perf-notes").join("jit.dump");
    let o = clrmap(&["perf", "jitdump", TRACE, "--symbol-path", "tests/fixtures/frames/release-portable", "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("release-portable/Frames.dll is another build"), "{}", stderr(&o));
    // The Debug PDB alone in a directory answers (the assembly is nowhere).
    let dir = tmp("alone");
    std::fs::copy(repo_root().join(DEBUG_PDB), dir.join("Frames.pdb")).unwrap();
    let o = clrmap(&["symbolize", TRACE, "--symbol-path", dir.to_str().unwrap(), "--return-address", &address]);
    assert_eq!(stdout(&o), expected, "{}", stderr(&o));
}

#[test]
fn an_unreadable_pdb_is_named_with_its_reason() {
    let dir = tmp("unreadable");
    let fifo = dir.join("fifo.pdb");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let looped = dir.join("loop.pdb");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let huge = dir.join("huge.pdb");
    std::fs::File::create(&huge).unwrap().set_len((4 << 30) + 1).unwrap();
    let cases: [(PathBuf, &str); 6] = [
        (PathBuf::from("/dev/null"), "a character device"),
        (fifo, "a FIFO"),
        (dir.clone(), "a directory"),
        (looped, "symbolic links"),
        (dir.join("missing.pdb"), "No such file"),
        (huge, "file too large: 4294967297 bytes"),
    ];
    for (pdb, reason) in &cases {
        let pdb = pdb.to_str().unwrap();
        for args in [
            vec!["pdb", "lines", "tests/fixtures/frames/debug-portable/Frames.dll", "--pdb", pdb],
            vec!["symbolize", TRACE, "--pdb", pdb, "0x10"],
            // The source itself, the same way (before: `not a regular file`, for every kind).
            vec!["symbolize", pdb, "0x10"],
        ] {
            // Before: `not_found: expected a readable PDB file` for `pdb lines`, no path, no reason.
            let o = clrmap(&args);
            assert_eq!(code(&o), Some(1), "{args:?}");
            let err = stderr(&o);
            assert!(err.starts_with(&format!("error: io: cannot read {pdb}: ")) && err.contains(reason), "{args:?}: {err}");
            let mut json = args.clone();
            json.push("--json");
            let o = clrmap(&json);
            let v: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
            assert_eq!(v["error"]["kind"], "io", "{json:?}");
            assert!(v["error"]["message"].as_str().unwrap().contains(pdb));
        }
    }
}

#[test]
fn pdb_lines_names_methods_from_the_assembly_beside_the_pdb() {
    // Before: `?` for every method, so `--method NAME` found nothing.
    let o = clrmap(&["pdb", "lines", DEBUG_PDB, "--method", "Nested::Inner"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("0x06000008 Frames.Nested::Inner\n  IL 0x0000  /_/src/Frames.cs:104:9-104:10\n"), "{}", stdout(&o));
    // Another build beside it is not its assembly: no names.
    let dir = tmp("beside");
    std::fs::copy(repo_root().join(DEBUG_PDB), dir.join("Frames.pdb")).unwrap();
    std::fs::copy(repo_root().join("tests/fixtures/frames/release-portable/Frames.dll"), dir.join("Frames.dll")).unwrap();
    let pdb = dir.join("Frames.pdb");
    let o = clrmap(&["pdb", "lines", pdb.to_str().unwrap(), "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains(r#"{"token":100663304,"name":null,"#), "{}", stdout(&o));
    // --method by name then finds nothing, and says why.
    let o = clrmap(&["pdb", "lines", pdb.to_str().unwrap(), "--method", "Nested::Inner"]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).starts_with("note: no assembly with this PDB's id beside it"), "{}", stderr(&o));
    // --assembly names it: used when its id matches.
    let named = ["pdb", "lines", pdb.to_str().unwrap(), "--method", "Nested::Inner", "--assembly", "tests/fixtures/frames/debug-embedded/Frames.dll"];
    let o = clrmap(&named);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("0x06000008 Frames.Nested::Inner\n  IL 0x0000  /_/src/Frames.cs:104:9-104:10\n"), "{}", stdout(&o));
    let o = clrmap(&["pdb", "lines", pdb.to_str().unwrap(), "--assembly", "tests/fixtures/frames/release-portable/Frames.dll"]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("pdb_mismatch"), "{}", stderr(&o));
    let o = clrmap(&["pdb", "lines", pdb.to_str().unwrap(), "--assembly", "/dev/null"]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("cannot read /dev/null: not a regular file but a character device"), "{}", stderr(&o));
    // For an assembly FILE, --assembly is bad usage.
    let o = clrmap(&["pdb", "lines", "tests/fixtures/frames/debug-portable/Frames.dll", "--assembly", "tests/fixtures/frames/debug-portable/Frames.dll"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
}

/// Run `clrmap ARGS` under `ulimit -v` (256 MB + 4× `input`) and a 20 s `timeout`.
fn limited(args: &[&str], input: u64) -> Output {
    let kb = (256 << 20) / 1024 + 4 * input / 1024 + 1;
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!("ulimit -v {kb}; exec timeout 20 '{}' {}", env!("CARGO_BIN_EXE_clrmap"), quoted.join(" "));
    let t = Instant::now();
    let o = Command::new("sh").arg("-c").arg(&script).current_dir(repo_root()).output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(20), "{args:?} took {:?}", t.elapsed());
    o
}

#[test]
fn one_module_named_by_twenty_paths_is_held_once() {
    // Frames.dll beside its PDB, both grown to 100 MB (zeros after their tables and sections:
    // still the same assembly and PDB).
    let dir = tmp("spellings");
    let d = dir.join("m");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::copy(repo_root().join("tests/fixtures/frames/debug-portable/Frames.dll"), d.join("Frames.dll")).unwrap();
    std::fs::copy(repo_root().join(DEBUG_PDB), d.join("Frames.pdb")).unwrap();
    let size: u64 = 100 << 20;
    std::fs::OpenOptions::new().write(true).open(d.join("Frames.pdb")).unwrap().set_len(size).unwrap();
    std::fs::OpenOptions::new().write(true).open(d.join("Frames.dll")).unwrap().set_len(size).unwrap();
    let base = d.to_str().unwrap().to_owned();
    let mut spellings = vec![format!("{base}/Frames.dll"), format!("{base}/./Frames.dll"), format!("{base}//Frames.dll"), format!("{base}/sub/../Frames.dll")];
    for i in 0..16 {
        let link = dir.join(format!("link{i}"));
        std::os::unix::fs::symlink(&d, &link).unwrap();
        spellings.push(format!("{}/Frames.dll", link.display()));
    }
    assert_eq!(spellings.len(), 20);
    // A capture with Nested::Inner's body once per spelling, each at its own address.
    let mut capture = String::from("{\"format\":\"clrmap-capture\",\"version\":1,\"pid\":7}\n");
    let mut addresses = Vec::new();
    for (i, m) in spellings.iter().enumerate() {
        let start = 0x10_0000 * (i as u64 + 1);
        capture.push_str(&format!(
            "{{\"kind\":\"jit\",\"pid\":7,\"function_id\":{start},\"module\":\"{m}\",\"token\":100663304,\"start\":{start},\"rva\":null,\"code_size\":64,\"body\":0,\"map\":[[0,0,64]],\"map1\":null}}\n"
        ));
        addresses.push(format!("0x{start:x}"));
    }
    let path = dir.join("app.capture");
    std::fs::write(&path, &capture).unwrap();
    let mut args = vec!["symbolize", path.to_str().unwrap()];
    args.extend(addresses.iter().map(String::as_str));
    // Before: one copy per path, 2 GB; and names for the first ten paths only (the module
    // bytes a naming pass reads are bounded). The limit allows the module and its PDB a few times.
    let o = limited(&args, 2 * size);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    // Every spelling answers, from the one PDB (IL 0 of Inner: line 104, as `pdb lines` says).
    assert_eq!(stdout(&o), "Frames.Nested::Inner\n/_/src/Frames.cs:104:9\n\n".repeat(20));
}

#[test]
fn a_huge_assembly_of_another_build_is_passed_over_from_its_headers() {
    // The Release Frames.dll grown to 4 GiB (sparse) in the symbol path, and beside a PDB: its
    // CodeView GUID is not the recorded one (nor the PDB's), and it is never read whole.
    let dir = tmp("huge-assembly");
    let dll = dir.join("Frames.dll");
    std::fs::copy(repo_root().join("tests/fixtures/frames/release-portable/Frames.dll"), &dll).unwrap();
    std::fs::OpenOptions::new().write(true).open(&dll).unwrap().set_len(4 << 30).unwrap();
    let (address, expected) = inner_frame();
    let method = expected.lines().next().unwrap().to_owned();
    // Before: the whole 4 GiB read (killed under the limit).
    let o = limited(&["symbolize", TRACE, "--symbol-path", dir.to_str().unwrap(), "--return-address", &address], 0);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{method}\n??:0:0\n\n"));
    assert!(stderr(&o).contains("is another build"), "{}", stderr(&o));
    std::fs::copy(repo_root().join(DEBUG_PDB), dir.join("Frames.pdb")).unwrap();
    let o = limited(&["pdb", "lines", dir.join("Frames.pdb").to_str().unwrap(), "--method", "0x06000008"], 0);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("0x06000008 ?\n"), "{}", stdout(&o));
}

//! One symbol locator: the service, `stacktrace` and `symbolize` find the same files for the same
//! module and symbol paths. The oracle is the runtime's own `StackTrace` of the Frames fixture
//! (`examples/frames.stdout`: token, IL offset, file, line and column of every frame).

use std::path::PathBuf;

use crate::serve::{check_answers, post_json, runtime_frames, Serve};
use crate::support::{clrmap, code, repo_root, stderr, stdout};

const DEBUG: &str = "tests/fixtures/frames/debug-portable";

/// A scratch folder holding only `files` of the debug fixture.
fn folder_with(name: &str, files: &[&str]) -> PathBuf {
    let dir = repo_root().join("target/tmp").join(format!("one-locator-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in files {
        std::fs::copy(repo_root().join(DEBUG).join(f), dir.join(f)).unwrap();
    }
    dir
}

/// Every runtime frame as the printed line .NET writes without a PDB, and the `in FILE:line N`
/// the runtime printed with it (None: it printed no line).
fn printed_frames() -> Vec<(String, Option<String>)> {
    runtime_frames()
        .into_iter()
        .map(|(token, il, file, line, _, method)| {
            let (ty, name) = method.rsplit_once("::").unwrap();
            let text = format!("   at {}.{}() in Frames.dll:token 0x{token:x}+0x{il:x}", ty.replace('+', "."), name);
            (text, (!file.is_empty()).then(|| format!("in {file}:line {line}")))
        })
        .collect()
}

#[test]
fn a_folder_with_only_the_pdb_answers_the_service_and_stacktrace_alike() {
    let dir = folder_with("pdb-only", &["Frames.pdb"]);
    let frames = runtime_frames();
    let ask: Vec<_> = frames.iter().map(|f| serde_json::json!({"module": 0, "token": f.0, "il_offset": f.1})).collect();
    let s = Serve::start(&["--symbol-path", dir.to_str().unwrap()]);
    // The assembly's name alone, the name and the PDB's name, and the PDB's name alone: each
    // finds Frames.pdb by name, as `clrmap stacktrace` does. No assembly, so no method names.
    for module in [serde_json::json!({"name": "Frames.dll"}), serde_json::json!({"name": "Frames.dll", "pdb": "Frames.pdb"})] {
        let req = serde_json::json!({"modules": [module], "frames": ask});
        let (status, v) = post_json(&s, "/symbolicate", &req.to_string());
        assert_eq!(status, 200, "{v}");
        check_answers(v["frames"].as_array().unwrap(), "Frames.dll", false);
    }
    // An id the missing assembly would have proven: the PDB by name is not taken on trust.
    let req = serde_json::json!({"modules": [{"name": "Frames.dll", "mvid": "00000000-0000-0000-0000-000000000001"}], "frames": [ask[0]]});
    let (_, v) = post_json(&s, "/symbolicate", &req.to_string());
    assert_eq!(v["frames"][0]["error"]["kind"], "not_found", "{v}");
    drop(s);
    // `clrmap stacktrace` over the same folder: the runtime's lines.
    let printed = printed_frames();
    let text: String = printed.iter().map(|(t, _)| format!("{t}\n")).collect();
    let input = dir.join("trace.txt");
    std::fs::write(&input, &text).unwrap();
    let o = clrmap(&["stacktrace", input.to_str().unwrap(), "--symbol-path", dir.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), printed.len());
    // (A frame the runtime printed with no line, an async kickoff method, is printed in its
    // real trace beside the builder's frames that this list lacks: not compared.)
    let mut compared = 0;
    for (line, (_, want)) in out.lines().zip(&printed) {
        if let Some(want) = want {
            assert!(line.ends_with(want.as_str()), "{line:?} (runtime: {want})");
            compared += 1;
        }
    }
    assert!(compared > 40, "{compared}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_assembly_and_its_pdb_give_names_in_the_service_and_lines_in_stacktrace() {
    let dir = folder_with("both", &["Frames.dll", "Frames.pdb"]);
    let frames = runtime_frames();
    let ask: Vec<_> = frames.iter().map(|f| serde_json::json!({"module": 0, "token": f.0, "il_offset": f.1})).collect();
    let s = Serve::start(&["--symbol-path", dir.to_str().unwrap()]);
    let req = serde_json::json!({"modules": [{"name": "Frames.dll"}], "frames": ask});
    let (status, v) = post_json(&s, "/symbolicate", &req.to_string());
    assert_eq!(status, 200, "{v}");
    check_answers(v["frames"].as_array().unwrap(), "Frames.dll", true);
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stacktrace_says_when_it_changed_nothing_and_when_a_pdb_went_unused() {
    let dir = folder_with("silent", &[]);
    let pdb = repo_root().join(DEBUG).join("Frames.pdb");
    // No frame of the `MODULE:token` form at all.
    let plain = dir.join("plain.txt");
    std::fs::write(&plain, "Unhandled exception. System.Exception: boom\n   at Other.Main() in /src/Other.cs:line 3\n").unwrap();
    let o = clrmap(&["stacktrace", plain.to_str().unwrap(), "--pdb", pdb.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), std::fs::read_to_string(&plain).unwrap());
    let err = stderr(&o);
    assert!(err.contains("note: no frame printed without its PDB"), "{err}");
    assert!(err.contains("note: the PDB given for Frames.dll (or Frames.exe) was not used"), "{err}");
    // A frame of a module the --pdb is not for: it says so, and that nothing got a line.
    let other = dir.join("other.txt");
    std::fs::write(&other, "   at Other.Main() in Other.dll:token 0x6000001+0x0\n").unwrap();
    let o = clrmap(&["stacktrace", other.to_str().unwrap(), "--pdb", pdb.to_str().unwrap()]);
    let err = stderr(&o);
    assert!(err.contains("note: none of the 1 frames printed without a PDB got a line"), "{err}");
    assert!(err.contains("was not used"), "{err}");
    // A frame of its module: no note at all.
    let ours = dir.join("ours.txt");
    std::fs::write(&ours, "   at Frames.Program.Main(String[] args) in Frames.dll:token 0x600003e+0x6\n").unwrap();
    let o = clrmap(&["stacktrace", ours.to_str().unwrap(), "--pdb", pdb.to_str().unwrap()]);
    assert_eq!(stderr(&o), "");
    assert!(stdout(&o).ends_with(":line 696\n"), "{}", stdout(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A module whose assembly is found but no PDB of its build, with a symbol server that refuses
/// connections: `stacktrace`'s note and the service's `not_found` message give the same reasons,
/// each once (the place looked in, and the server's failure), not a shorter story from one of
/// them.
#[test]
fn a_module_without_its_pdb_gets_the_same_reasons_from_the_service_and_stacktrace() {
    let dir = folder_with("no-pdb", &["Frames.dll"]);
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = format!("http://127.0.0.1:{port}");
    let found = format!("{}", dir.join("Frames.dll").display());
    let input = dir.join("trace.txt");
    std::fs::write(&input, "   at Frames.Program.Main(String[] args) in Frames.dll:token 0x600003e+0x6\n").unwrap();
    let o = clrmap(&["stacktrace", input.to_str().unwrap(), "--symbol-path", dir.to_str().unwrap(), "--symbol-server", &server]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let head = format!("note: Frames.dll: found {found}, but no PDB of its build, so its frames are kept; ");
    let note = err.lines().find_map(|l| l.strip_prefix(head.as_str())).unwrap_or_else(|| panic!("{err}"));
    let s = Serve::start(&["--symbol-path", dir.to_str().unwrap(), "--symbol-server", &server]);
    let req = serde_json::json!({"modules": [{"name": "Frames.dll"}], "frames": [{"module": 0, "token": 0x0600_003E, "il_offset": 6}]});
    let (status, v) = post_json(&s, "/symbolicate", &req.to_string());
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["frames"][0]["error"]["kind"], "not_found", "{v}");
    let message = v["frames"][0]["error"]["message"].as_str().unwrap();
    let reasons = message.strip_prefix(&format!("{found} was found, but no PDB of its build; ")).unwrap_or_else(|| panic!("{message}"));
    assert_eq!(reasons, note, "the service and stacktrace give the same reasons");
    // Each place once, the server's failure once.
    let pdb = format!("{}", dir.join("Frames.pdb").display());
    assert_eq!(note.matches(pdb.as_str()).count(), 1, "{note}");
    assert_eq!(note.matches("unreachable").count(), 1, "{note}");
    assert!(note.contains("Frames.pdb (PDB GUID 647EB43C81D2457284149EDC98BD7DB7) was looked for at"), "{note}");
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

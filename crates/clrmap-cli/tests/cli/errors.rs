//! Errors point to the right place: a byte offset inside the input, or say plainly
//! that the location is an RVA or an address, in text and in JSON.

use crate::support::*;

#[test]
fn a_missing_rva_is_named_as_an_rva() {
    let o = clrmap(&["dict", "lookup", "examples/two-lists.gdmap", "0x9999"]);
    assert_eq!(code(&o), Some(1));
    assert_eq!(stderr(&o), "error: not_found at RVA 0x9999: expected an entry with this RVA\n");
    let o = clrmap(&["dict", "lookup", "examples/two-lists.gdmap", "0x9999", "--json"]);
    assert_eq!(stderr(&o), "{\"error\":{\"kind\":\"not_found\",\"offset\":null,\"rva\":39321,\"message\":\"expected an entry with this RVA\"}}\n");
}

#[test]
fn an_address_in_no_method_is_named_as_an_address() {
    let o = clrmap(&["il", "at", "examples/frames.nettrace", "0x10"]);
    assert_eq!(code(&o), Some(1));
    assert_eq!(stderr(&o), "error: not_found at address 0x10: expected an address inside a method with a map\n");
}

#[test]
fn a_truncated_image_fails_inside_the_file() {
    // Frames.dll cut at 3,341 bytes: its sections' data lie past the end, and the error says so
    // at the end of the file, not at an RVA taken for an offset.
    let bytes = std::fs::read(repo_root().join("tests/fixtures/frames/debug-portable/Frames.dll")).unwrap();
    let dir = std::env::temp_dir().join("clrmap-errors-test");
    std::fs::create_dir_all(&dir).unwrap();
    for cut in [3341usize, 1000, 600] {
        let p = dir.join(format!("cut{cut}.dll"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let o = clrmap(&["meta", "specs", p.to_str().unwrap()]);
        assert_eq!(code(&o), Some(1), "{}", stderr(&o));
        let text = stderr(&o);
        let offset: u64 = text.split(" at offset ").nth(1).and_then(|t| t.split(':').next()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{text}"));
        assert!(offset <= cut as u64, "cut {cut}: {text}");
    }
}

#[test]
fn with_json_every_input_error_is_a_json_line_with_a_kind() {
    // A file that is no known source, and one that does not exist: their kinds, in text and JSON.
    let o = clrmap(&["il", "dump", "README.md", "--json"]);
    assert_eq!(code(&o), Some(1));
    assert_eq!(stderr(&o), "{\"error\":{\"kind\":\"unrecognized_source\",\"offset\":null,\"message\":\"README.md: neither a ReadyToRun image, a .nettrace trace nor a clrmap capture\"}}\n");
    let o = clrmap(&["il", "dump", "no-such-file.dll"]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).starts_with("error: io: cannot read no-such-file.dll: "), "{}", stderr(&o));
    let o = clrmap(&["il", "dump", "no-such-file.dll", "--json"]);
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
    assert_eq!((v["error"]["kind"].as_str(), v["error"]["offset"].is_null()), (Some("io"), true), "{v}");
    // A module that names no body: its own message with the modules there are.
    let o = clrmap(&["il", "dump", "examples/frames.nettrace", "--module", "app.dll", "--json"]);
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
    assert_eq!(code(&o), Some(1));
    assert!(v["error"]["message"].as_str().unwrap().contains("its modules: Frames.dll, "), "{v}");
}

#[test]
fn json_output_into_a_closed_pipe_ends_quietly() {
    // `clrmap ... --json | head -c 10`: the reader has what it wants; like the text forms, no error.
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_clrmap")).args(["il", "dump", "examples/frames.nettrace", "--json"]).current_dir(repo_root()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap(); // then the pipe closes
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!((status.code(), err.as_str()), (Some(0), ""));
}

#[test]
fn il_at_with_pid_asks_for_the_address() {
    let o = clrmap(&["il", "at", "--pid", "4194304"]);
    assert_eq!(code(&o), Some(2));
    assert!(stderr(&o).contains("with --pid, give the ADDRESS"), "{}", stderr(&o));
    let o = clrmap(&["il", "at", "--help"]);
    assert!(stdout(&o).contains("clrmap il at [OPTIONS] --pid PID ADDRESS"), "{}", stdout(&o));
}

/// A command that reads several files (an assembly and its PDB) names the file an offset is in:
/// `pdb_mismatch at offset 124` alone could be the assembly's. 124 is where the release PDB's
/// #Pdb stream, which starts with the PDB id, begins (its stream header says so; checked with a
/// few lines of Python reading the metadata root).
#[test]
fn an_offset_names_the_file_it_is_in() {
    let pdb = "tests/fixtures/frames/release-portable/Frames.pdb";
    let o = clrmap(&["pdb", "lines", "tests/fixtures/frames/debug-portable/Frames.dll", "--pdb", pdb]);
    assert_eq!(code(&o), Some(1));
    assert_eq!(stderr(&o), format!("error: pdb_mismatch at offset 124: expected the PDB id the assembly's CodeView entry names\nnote: the offset is in {pdb}\n"));
    let o = clrmap(&["pdb", "lines", "tests/fixtures/frames/debug-portable/Frames.dll", "--pdb", pdb, "--json"]);
    assert_eq!(code(&o), Some(1));
    let e: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
    assert_eq!(e["error"]["offset"], 124);
    assert!(e["error"]["message"].as_str().unwrap().ends_with(&format!("note: the offset is in {pdb}")), "{e}");
}

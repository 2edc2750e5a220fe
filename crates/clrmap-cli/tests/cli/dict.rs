//! `clrmap dict show | lookup | validate | build`.

use crate::support::*;

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
}

fn temp(name: &str, bytes: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("clrmap-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn show_json_is_the_contract_example() {
    // docs/format-notes.md#generic-dictionary-map worked example; docs/output.md#generic-dictionary-maps gives this exact JSON for it.
    let f = temp("worked.gdmap", &hex("02 00 00 80 00 10 00 00 00 00 00 00 00 20 00 00 00 00 00 00 02 01 08"));
    let o = clrmap(&["dict", "show", &f, "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), r#"{"sorted":true,"count":2,"heap_size":3,"entries":[{"rva":4096,"offset":0,"types":["int32"]},{"rva":8192,"offset":0,"types":["int32"]}]}"#.to_owned() + "\n");
}

#[test]
fn shipped_example_is_what_its_manifest_builds() {
    let f = temp("rebuilt.gdmap", b"");
    let o = clrmap(&["dict", "build", "examples/two-lists.manifest", "-o", &f, "--sort"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let shipped = std::fs::read(repo_root().join("examples/two-lists.gdmap")).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), shipped);
    let o = clrmap(&["dict", "lookup", "examples/two-lists.gdmap", "0x2020"]);
    assert_eq!(stdout(&o), "valuetype 0x02000002\nclass 0x01000007<string,class 0x01000005<int32>>\n");
    let o = clrmap(&["dict", "show", "examples/two-lists.gdmap"]);
    assert_eq!(code(&o), Some(0));
    assert!(stdout(&o).starts_with("sorted: yes  entries: 7  heap: 48 bytes\n"));
    // The JSON of `dict show` is itself a manifest: show -> build gives the same map.
    let o = clrmap(&["dict", "show", "examples/two-lists.gdmap", "--json"]);
    let m = temp("shown.json", &o.stdout);
    let f2 = temp("from-json.gdmap", b"");
    assert_eq!(code(&clrmap(&["dict", "build", &m, "-o", &f2])), Some(0));
    assert_eq!(std::fs::read(&f2).unwrap(), shipped);
}

#[test]
fn faults_exit_1_with_kind_and_offset() {
    let cases = [
        ("01 00", "truncated_header", 0),
        ("FF FF FF 7F 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00", "truncated_directory", 20),
        ("02 00 00 80 20 00 00 00 00 00 00 00 10 00 00 00 00 00 00 00 02 01 08", "unsorted", 12),
        ("01 00 00 00 10 00 00 00 03 00 00 00 02 01 08", "offset_out_of_heap", 8),
        ("01 00 00 00 10 00 00 00 00 00 00 00 02 00 08", "empty_instantiation", 13),
    ];
    for (bytes, kind, offset) in cases {
        let f = temp(&format!("{kind}.gdmap"), &hex(bytes));
        for cmd in ["show", "validate"] {
            let o = clrmap(&["dict", cmd, &f, "--json"]);
            assert_eq!(code(&o), Some(1), "{kind}");
            let v: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
            assert_eq!(v["error"]["kind"], kind);
            assert_eq!(v["error"]["offset"], offset, "{kind}");
            let o = clrmap(&["dict", cmd, &f]);
            assert_eq!(code(&o), Some(1));
            assert!(stderr(&o).contains(&format!("{kind} at offset {offset}")), "{}", stderr(&o));
        }
    }
}

#[test]
fn validate_lint_and_usage_errors() {
    let f = temp("lint.gdmap", &hex("01 00 00 00 10 00 00 00 00 00 00 00 02 01 08 FF"));
    let o = clrmap(&["dict", "validate", &f, "--lint"]);
    assert_eq!(code(&o), Some(0));
    assert_eq!(stdout(&o), "valid: 1 entries, heap 4 bytes\nlint: unreferenced_bytes at offset 15 (1 bytes)\n");
    assert_eq!(code(&clrmap(&["dict", "lookup", &f, "notanumber"])), Some(2));
    assert_eq!(code(&clrmap(&["dict", "lookup", &f, "0x99"])), Some(1));
    assert_eq!(code(&clrmap(&["dict", "show", "/nonexistent/file"])), Some(1));
    let bad = temp("bad.manifest", b"0x10: int33\n");
    let o = clrmap(&["dict", "build", &bad, "-o", &temp("x.gdmap", b"")]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("bad_notation"), "{}", stderr(&o));
}

/// `dict build -o` and `dict from-assembly -o` write whole or not at all, through no planted link
/// and into no FIFO: a FIFO output is refused at once (it used to block in open() for ever), a
/// symbolic link at the output is replaced and its target left alone (it used to be written
/// through).
#[test]
fn dict_outputs_are_never_written_through_a_link_or_into_a_fifo() {
    let dir = std::env::temp_dir().join(format!("clrmap-cli-dict-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo.gdmap");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let fifo = fifo.to_string_lossy().into_owned();
    // Bounded: a hang would be killed by `timeout` and fail the status check.
    let o = std::process::Command::new("timeout").args(["10", env!("CARGO_BIN_EXE_clrmap"), "dict", "build", "examples/two-lists.manifest", "-o", &fifo]).current_dir(repo_root()).output().unwrap();
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("io") && stderr(&o).contains(&fifo), "{}", stderr(&o));

    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let link = dir.join("link.gdmap");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let link_s = link.to_string_lossy().into_owned();
    let o = clrmap(&["dict", "build", "examples/two-lists.manifest", "-o", &link_s]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(!std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&link).unwrap(), std::fs::read(repo_root().join("examples/two-lists.gdmap")).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

//! Errors point to the right place (issue 14): a byte offset inside the input, or say plainly
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

//! Malformed metadata through the real binary: `meta specs` prints `!error <kind>` for
//! a row that is there but cannot be named, in text and JSON, and exits 0; `sig decode
//! --metadata` fails with the kind before printing anything. The fixtures are Frames.dll patched
//! as in the library's tests (crates/clrmap/tests/integration/spec_errors.rs, where the same
//! lines are checked against System.Reflection.Metadata).

use std::path::PathBuf;

use clrmap::metadata::{table, Metadata};

use super::support::{clrmap, code, repo_root, stderr, stdout};

pub(super) fn frames() -> Vec<u8> {
    std::fs::read(repo_root().join("tests/fixtures/frames/debug-portable/Frames.dll")).unwrap()
}

pub(super) fn temp(name: &str, bytes: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("clrmap-cli-meta-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p: PathBuf = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_owned()
}

/// The MethodDef of MethodSpec 1 (`Frames.Generic::Pass<string>(!!0)`), and the TypeSpec that
/// is the parent of MethodSpec 12's MemberRef (`class Frames.Box`1<string>::Map<int32>`).
pub(super) fn targets() -> (u32, u32) {
    let bytes = frames();
    let md = Metadata::parse(&bytes).unwrap();
    let pass = md.method_spec(1).unwrap().method & 0x00FF_FFFF;
    let member = md.method_spec(0xC).unwrap().method & 0x00FF_FFFF;
    let class = md.tables().row(table::MEMBER_REF, member).unwrap().get(0).unwrap();
    assert_eq!(class & 7, 4);
    (pass, class >> 3)
}

/// Pass's parameter type (`!!0`, byte 5 of `10 01 01 1E 00 1E 00`) set to 0x22.
fn bad_method_signature() -> Vec<u8> {
    let mut bytes = frames();
    let at = {
        let md = Metadata::parse(&bytes).unwrap();
        let sig = md.blobs().get(md.tables().row(table::METHOD_DEF, targets().0).unwrap().get(4).unwrap()).unwrap();
        assert_eq!(sig.as_slice(), [0x10, 0x01, 0x01, 0x1E, 0x00, 0x1E, 0x00]);
        sig.offset() as usize + 5
    };
    bytes[at] = 0x22;
    bytes
}

/// The Box`1<string> TypeSpec's first byte set to 0x22.
pub(super) fn bad_typespec() -> Vec<u8> {
    let mut bytes = frames();
    let at = Metadata::parse(&bytes).unwrap().type_spec(targets().1).unwrap().offset() as usize;
    bytes[at] = 0x22;
    bytes
}

/// TypeSpec 1 pointed at a 5-byte TypeSpec blob rewritten as `int32[][] modreq(TS#1)`.
pub(super) fn cyclic_typespec() -> Vec<u8> {
    let blob = [0x1F, 0x06, 0x1D, 0x1D, 0x08];
    let mut bytes = frames();
    let (heap, blobs) = {
        let md = Metadata::parse(&bytes).unwrap();
        let heap = md.blobs().0.offset() as usize;
        let blobs: Vec<(usize, usize)> = (1..=md.tables().rows(table::TYPE_SPEC)).map(|r| md.type_spec(r).unwrap()).map(|r| (r.offset() as usize, r.len())).collect();
        (heap, blobs)
    };
    let column: Vec<u8> = blobs.iter().flat_map(|&(at, _)| ((at - 1 - heap) as u16).to_le_bytes()).collect();
    let (at, _) = *blobs.iter().find(|&&(_, len)| len == blob.len()).unwrap();
    bytes[at..at + blob.len()].copy_from_slice(&blob);
    let hits: Vec<usize> = bytes.windows(column.len()).enumerate().filter(|(_, w)| *w == column).map(|(i, _)| i).collect();
    assert_eq!(hits.len(), 1);
    bytes[hits[0]..hits[0] + 2].copy_from_slice(&((at - 1 - heap) as u16).to_le_bytes());
    bytes
}

/// No TypeDef owns MethodDefs 1..=Pass: every MethodList that starts at or before it starts after.
fn unowned_methods() -> Vec<u8> {
    let last = targets().0;
    let mut bytes = frames();
    let patches: Vec<usize> = {
        let md = Metadata::parse(&bytes).unwrap();
        let types = md.tables().table(table::TYPE_DEF);
        (1..=types.len()).map(|rid| types.row(rid).unwrap()).filter(|row| row.get(5).unwrap() <= last).map(|row| (row.offset() + u64::from(types.row_size()) - 2) as usize).collect()
    };
    for at in patches {
        bytes[at..at + 2].copy_from_slice(&((last + 1) as u16).to_le_bytes());
    }
    bytes
}

/// `meta specs` text lines with `!error`, and the JSON lines with `"error"`.
fn errors(dll: &str) -> (Vec<String>, Vec<String>) {
    let text = clrmap(&["meta", "specs", dll]);
    assert_eq!(code(&text), Some(0), "{}", stderr(&text));
    let json = clrmap(&["meta", "specs", dll, "--json"]);
    assert_eq!(code(&json), Some(0), "{}", stderr(&json));
    let pick = |s: String, what: &str| s.lines().filter(|l| l.contains(what)).map(str::to_owned).collect::<Vec<_>>();
    (pick(stdout(&text), "!error"), pick(stdout(&json), "\"error\""))
}

#[test]
fn a_methodspec_whose_method_signature_does_not_decode_prints_error() {
    // MethodSpecs 7 and 8 instantiate methods that share Pass's signature blob.
    let (text, json) = errors(&temp("bad-method-sig.dll", &bad_method_signature()));
    assert_eq!(text, ["0x2B000001\t!error bad_element_type", "0x2B000007\t!error bad_element_type", "0x2B000008\t!error bad_element_type"]);
    // The method is still named in JSON: its name is sound, its parameters are not.
    assert_eq!(json.len(), 3);
    assert!(json[0].starts_with("{\"token\":721420289,\"error\":\"bad_element_type\",\"method\":"), "{}", json[0]);
    assert!(json[0].ends_with(",\"name\":\"Frames.Generic::Pass\"}"), "{}", json[0]);
}

#[test]
fn a_typespec_row_that_does_not_decode_prints_error_where_it_is_named() {
    let ts = targets().1;
    let dll = temp("bad-typespec.dll", &bad_typespec());
    let (text, json) = errors(&dll);
    assert_eq!(text, [format!("0x{:08X}\t!error bad_element_type", 0x1B00_0000 | ts), "0x2B00000C\t!error bad_element_type".to_owned()]);
    assert_eq!(json[0], format!("{{\"token\":{},\"error\":\"bad_element_type\"}}", 0x1B00_0000 | ts));
    // The MemberRef is there, its parent cannot be named: no `name`.
    assert!(json[1].starts_with("{\"token\":721420300,\"error\":\"bad_element_type\",\"method\":") && !json[1].contains("name"), "{}", json[1]);
    // In a modifier: the kind, and nothing on stdout.
    let coded = format!("{:02X}", ts << 2 | 2);
    let o = clrmap(&["sig", "decode", "1F", &coded, "08", "--metadata", &dll]);
    assert_eq!((code(&o), stdout(&o).as_str()), (Some(1), ""));
    assert!(stderr(&o).starts_with("error: bad_element_type at offset "), "{}", stderr(&o));
    let o = clrmap(&["sig", "decode", "1F", &coded, "08", "--metadata", &dll, "--json"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (Some(1), ""));
    assert!(stderr(&o).starts_with("{\"error\":{\"kind\":\"bad_element_type\",\"offset\":"), "{}", stderr(&o));
    // A TypeSpec token that names no row still prints raw.
    let o = clrmap(&["sig", "decode", "1F", "7E", "08", "--metadata", &dll]);
    assert_eq!(stdout(&o), "int32 modreq(0x1B00001F)\n");
}

#[test]
fn a_cyclic_typespec_prints_too_deep() {
    let dll = temp("cyclic-typespec.dll", &cyclic_typespec());
    let (text, json) = errors(&dll);
    assert_eq!(text, ["0x1B000001\t!error too_deep"]);
    assert_eq!(json, ["{\"token\":452984833,\"error\":\"too_deep\"}"]);
    let o = clrmap(&["sig", "decode", "1F", "06", "08", "--metadata", &dll]);
    assert_eq!((code(&o), stdout(&o).as_str()), (Some(1), ""));
    assert!(stderr(&o).contains("too_deep"), "{}", stderr(&o));
}

#[test]
fn a_methoddef_that_no_typedef_owns_prints_bad_metadata() {
    let (text, json) = errors(&temp("unowned-method.dll", &unowned_methods()));
    assert_eq!(text, ["0x2B000001\t!error bad_metadata", "0x2B000007\t!error bad_metadata", "0x2B000008\t!error bad_metadata"]);
    assert_eq!(json.len(), 3);
    assert!(json.iter().all(|l| l.contains("\"error\":\"bad_metadata\"") && !l.contains("name")), "{json:?}");
}

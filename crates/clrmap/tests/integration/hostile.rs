//! Hostile metadata: names that would explode (a TypeSpec that names itself twice through
//! modifiers, a TypeDef nested in itself) are bounded per top-level name and fall back to the raw
//! token past the bound. The fixture is a real assembly (Frames.dll) patched in a copy.

use std::time::{Duration, Instant};

use clrmap::metadata::{spec_lines, table, Metadata, MAX_NAME_BYTES};
use clrmap::signature::{render, TypeNames};
use clrmap::ErrorKind;

use super::support;

/// Frames.dll, a small real assembly.
fn frames() -> Vec<u8> {
    std::fs::read(support::fixture("tests/fixtures/frames/debug-portable/Frames.dll")).unwrap()
}

/// The only place `needle` occurs in `hay`.
fn find_once(hay: &[u8], needle: &[u8]) -> usize {
    let hits: Vec<usize> = hay.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect();
    assert_eq!(hits.len(), 1, "pattern {needle:02X?} found {} times", hits.len());
    hits[0]
}

/// Frames.dll with TypeSpec row 1's blob set to `blob` (the Mix.dll patch): row 1 is
/// pointed at the first TypeSpec blob of the same length, which is overwritten.
pub fn with_typespec1(blob: &[u8]) -> Vec<u8> {
    let mut bytes = frames();
    let (heap_start, blobs, table) = {
        let md = Metadata::parse(&bytes).unwrap();
        let heap_start = md.blobs().0.offset() as usize;
        let rows = md.tables().rows(table::TYPE_SPEC);
        let blobs: Vec<(usize, usize)> = (1..=rows).map(|rid| md.type_spec(rid).unwrap()).map(|r| (r.offset() as usize, r.len())).collect();
        // The TypeSpec table: one 2-byte #Blob index per row (the heap is under 64 KB).
        let table: Vec<u8> = blobs.iter().flat_map(|&(at, _)| ((at - 1 - heap_start) as u16).to_le_bytes()).collect();
        (heap_start, blobs, table)
    };
    let (at, _) = *blobs.iter().find(|&&(_, len)| len == blob.len()).expect("a TypeSpec blob of that length");
    bytes[at..at + blob.len()].copy_from_slice(blob);
    let row1 = find_once(&bytes, &table);
    bytes[row1..row1 + 2].copy_from_slice(&((at - 1 - heap_start) as u16).to_le_bytes());
    bytes
}

/// Frames.dll with TypeDef `rid` nested in itself (its NestedClass row's EnclosingClass patched).
pub fn with_self_nested_typedef(rid: u32) -> Vec<u8> {
    let mut bytes = frames();
    let pairs: Vec<(u32, u32)> = {
        let md = Metadata::parse(&bytes).unwrap();
        (1..=md.tables().rows(table::TYPE_DEF)).filter_map(|r| md.enclosing(r).map(|e| (r, e))).collect()
    };
    let pattern: Vec<u8> = pairs.iter().flat_map(|&(n, e)| [(n as u16).to_le_bytes(), (e as u16).to_le_bytes()].concat()).collect();
    let start = find_once(&bytes, &pattern);
    let i = pairs.iter().position(|&(n, _)| n == rid).unwrap();
    let at = start + 4 * i + 2;
    bytes[at..at + 2].copy_from_slice(&(rid as u16).to_le_bytes());
    bytes
}

/// The patch: `int32[] modreq(TS#1) modreq(TS#1)`.
const SELF_TWICE: [u8; 6] = [0x1F, 0x06, 0x1F, 0x06, 0x1D, 0x08];

fn quick<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let v = f();
    assert!(t.elapsed() < Duration::from_secs(3), "{what} took {:?}", t.elapsed());
    v
}

#[test]
fn self_referential_typespec_names_are_too_deep() {
    let bytes = with_typespec1(&SELF_TWICE);
    let md = Metadata::parse(&bytes).unwrap();
    assert_eq!(md.type_spec(1).unwrap().as_slice(), SELF_TWICE);
    // Its name branches twice at every level, and contains itself: no name, at once.
    assert!(quick("type_name", || md.type_name(0x1B00_0001)).is_err());
    let lines = quick("spec_lines", || spec_lines(&md, &md));
    assert_eq!(lines[0].text.as_ref().unwrap_err().kind, ErrorKind::TooDeep);
    // `sig decode 1F 06 08 --metadata`: the row is there, so not the raw token either.
    assert_eq!(quick("render", || render(&[0x1F, 0x06, 0x08], &md)).unwrap_err().kind, ErrorKind::TooDeep);
    // A fresh Metadata (no remembered failure) says the same.
    let md = Metadata::parse(&bytes).unwrap();
    assert_eq!(render(&[0x1F, 0x06, 0x1F, 0x06, 0x08], &md).unwrap_err().kind, ErrorKind::TooDeep);
    // A token that names no row still prints raw.
    assert_eq!(render(&[0x1F, 0x7E, 0x08], &md).unwrap(), "int32 modreq(0x1B00001F)");
    // Every other name of the file is untouched. TypeSpec 3 had the blob that the patch
    // overwrote (row 1 now points at it too).
    let clean_bytes = frames();
    let clean = Metadata::parse(&clean_bytes).unwrap();
    for (a, b) in spec_lines(&md, &md).iter().zip(spec_lines(&clean, &clean)).skip(1) {
        if a.token == 0x1B00_0003 {
            assert_eq!(a.text.as_ref().unwrap_err().kind, ErrorKind::TooDeep);
        } else {
            assert_eq!(a, &b);
        }
    }
}

#[test]
fn a_chain_that_does_not_branch_is_too_deep() {
    // `int32[][] modreq(TS#1)`: one branch, but it contains itself: too_deep where it used to
    // print 65 levels and then the raw token.
    let bytes = with_typespec1(&[0x1F, 0x06, 0x1D, 0x1D, 0x08]);
    let md = Metadata::parse(&bytes).unwrap();
    assert!(md.type_name(0x1B00_0001).is_err());
    let e = spec_lines(&md, &md)[0].text.clone().unwrap_err();
    assert_eq!(e.kind, ErrorKind::TooDeep);
    // At the blob that names itself.
    assert_eq!(e.offset(), Some(md.type_spec(1).unwrap().offset()));
    assert_eq!(render(&[0x1F, 0x06, 0x08], &md).unwrap_err().kind, ErrorKind::TooDeep, "deterministic");
}

#[test]
fn branching_typespecs_are_bounded_by_work_and_output() {
    // Three branches at every level.
    let bytes = with_typespec1(&[0x1F, 0x06, 0x1F, 0x06, 0x1F, 0x06, 0x1D, 0x08]);
    let md = Metadata::parse(&bytes).unwrap();
    let mut out = String::new();
    let r = quick("write_type_name", || md.write_type_name(0x1B00_0001, &mut out));
    assert!(r.is_err() && out.is_empty(), "nothing written for a failed name");
    let lines = quick("spec_lines", || spec_lines(&md, &md));
    for line in &lines {
        assert!(line.text.as_ref().map_or(0, |t| t.len()) <= MAX_NAME_BYTES);
    }
    assert_eq!(lines[0].text.as_ref().unwrap_err().kind, ErrorKind::TooDeep);
}

#[test]
fn a_typedef_nested_in_itself_is_bad_metadata() {
    // TypeDef 15 (`Frames.More/<>c`) made its own enclosing type.
    let bytes = with_self_nested_typedef(15);
    let md = Metadata::parse(&bytes).unwrap();
    assert_eq!(md.enclosing(15), Some(15));
    assert!(quick("type_name", || md.type_name(0x0200_000F)).is_err());
    let e = render(&[0x12, 15 << 2], &md).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BadMetadata);
    // At the TypeDef row.
    assert_eq!(e.offset(), Some(md.tables().row(table::TYPE_DEF, 15).unwrap().offset()));
    assert_eq!(render(&[0x12, 13 << 2], &md).unwrap(), "class Frames.Program");
    // Cached, and the same the second time.
    assert_eq!(render(&[0x15, 0x12, 15 << 2, 0x01, 0x08], &md).unwrap_err().kind, ErrorKind::BadMetadata);
    // A TypeDef row that is not there prints raw.
    assert_eq!(render(&[0x12, 0x81, 0xFC], &md).unwrap(), "class 0x0200007F");
}

#[test]
fn a_methodspec_whose_method_names_no_row_prints_the_raw_token() {
    // MethodSpec row 1 is `Frames.Generic::Pass<string>(!!0)`. Its Method column (MethodDefOrRef,
    // 2 bytes here) is pointed at MemberRef 0x7FFF, then at MethodDef 0: neither is a row.
    let clean = frames();
    let md = Metadata::parse(&clean).unwrap();
    let at = md.tables().row(table::METHOD_SPEC, 1).unwrap().offset() as usize;
    assert_eq!(spec_lines(&md, &md)[md.tables().rows(table::TYPE_SPEC) as usize].full_text().unwrap(), "Frames.Generic::Pass<string>(!!0)");
    for (coded, token) in [(0xFFFFu16, 0x0A00_7FFFu32), (0, 0x0600_0000)] {
        let mut bytes = clean.clone();
        bytes[at..at + 2].copy_from_slice(&coded.to_le_bytes());
        let md = Metadata::parse(&bytes).unwrap();
        assert_eq!(md.method_spec(1).unwrap().method, token);
        let lines = quick("spec_lines", || spec_lines(&md, &md));
        let line = &lines[md.tables().rows(table::TYPE_SPEC) as usize];
        assert_eq!(line.token, 0x2B00_0001);
        let method = line.method.as_ref().unwrap();
        assert_eq!((method.token, method.params.clone()), (token, Ok(None)));
        assert_eq!(line.full_text().unwrap(), format!("0x{token:08X}<string>"));
    }
}

//! Malformed metadata prints `!error <kind>`, never a half-truth: a raw `0x...` token
//! stands only for a token that names no row. Each fixture is Frames.dll patched in a copy: a
//! MethodSpec's method whose signature does not decode, a TypeSpec row that does not decode named
//! as a MemberRef's parent and inside a modifier, a cyclic TypeSpec, and MethodDefs that no
//! TypeDef owns. The lines that change are checked against System.Reflection.Metadata (needs .NET).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clrmap::metadata::{spec_lines, table, Metadata, SpecLine};
use clrmap::signature::render;
use clrmap::ErrorKind;

use super::hostile::with_typespec1;
use super::support::{self, run};

/// Frames.dll, a small real assembly.
pub fn frames() -> Vec<u8> {
    std::fs::read(support::fixture("tests/fixtures/frames/debug-portable/Frames.dll")).unwrap()
}

/// The MethodDef that MethodSpec 1 instantiates (`Frames.Generic::Pass<string>(!!0)`).
fn pass_rid(md: &Metadata<'_>) -> u32 {
    let method = md.method_spec(1).unwrap().method;
    assert_eq!(method >> 24, 0x06);
    method & 0x00FF_FFFF
}

/// Frames.dll with the first byte of MethodDef `rid`'s parameter list (after its calling
/// convention, generic count, parameter count and return type, which are one byte each here)
/// set to 0x22, a runtime-internal element type (`bad_element_type`, docs/output.md#strictness).
pub fn with_bad_method_signature(rid: u32) -> (Vec<u8>, u64) {
    let mut bytes = frames();
    let md = Metadata::parse(&bytes).unwrap();
    let sig = md.blobs().get(md.tables().row(table::METHOD_DEF, rid).unwrap().get(4).unwrap()).unwrap();
    // `10 01 01 1E 00 1E 00`: GENERIC, 1 generic parameter, 1 parameter, returns !!0, takes !!0.
    assert_eq!(sig.as_slice(), [0x10, 0x01, 0x01, 0x1E, 0x00, 0x1E, 0x00]);
    let at = sig.offset() as usize + 5;
    bytes[at] = 0x22;
    (bytes, at as u64)
}

/// Frames.dll with TypeSpec `rid`'s first byte set to 0x22 (`bad_element_type`).
pub fn with_bad_typespec(rid: u32) -> (Vec<u8>, u64) {
    let mut bytes = frames();
    let at = Metadata::parse(&bytes).unwrap().type_spec(rid).unwrap().offset() as usize;
    bytes[at] = 0x22;
    (bytes, at as u64)
}

/// Frames.dll where no TypeDef owns MethodDefs 1..=`last`: every MethodList (II.22.37) that
/// starts at or before `last` starts after it.
pub fn with_unowned_methods(last: u32) -> Vec<u8> {
    let mut bytes = frames();
    let patches: Vec<usize> = {
        let md = Metadata::parse(&bytes).unwrap();
        let types = md.tables().table(table::TYPE_DEF);
        (1..=types.len())
            .map(|rid| types.row(rid).unwrap())
            .filter(|row| row.get(5).unwrap() <= last)
            // MethodList is the last column, 2 bytes wide in a file this small.
            .map(|row| (row.offset() + u64::from(types.row_size()) - 2) as usize)
            .collect()
    };
    for at in patches {
        bytes[at..at + 2].copy_from_slice(&((last + 1) as u16).to_le_bytes());
    }
    let md = Metadata::parse(&bytes).unwrap();
    assert_eq!(md.method_owner(last), None);
    assert!(md.method_owner(last + 1).is_some());
    bytes
}

/// `meta specs`' text lines.
fn lines(md: &Metadata<'_>) -> Vec<String> {
    spec_lines(md, md)
        .iter()
        .map(|l: &SpecLine| match l.full_text() {
            Ok(t) => format!("0x{:08X}\t{t}", l.token),
            Err(e) => format!("0x{:08X}\t!error {}", l.token, e.kind),
        })
        .collect()
}

/// The lines of `patched` that differ from the clean file's (same tokens, same order).
fn changed(patched: &[String]) -> Vec<String> {
    let clean = frames();
    let clean = lines(&Metadata::parse(&clean).unwrap());
    assert_eq!(clean.len(), patched.len());
    patched.iter().zip(&clean).filter(|(a, b)| a != b).map(|(a, _)| a.clone()).collect()
}

#[test]
fn a_methodspec_whose_method_signature_does_not_decode_is_an_error() {
    let clean = frames();
    let rid = pass_rid(&Metadata::parse(&clean).unwrap());
    let (bytes, at) = with_bad_method_signature(rid);
    let md = Metadata::parse(&bytes).unwrap();
    let specs = spec_lines(&md, &md);
    let line = specs.iter().find(|l| l.token == 0x2B00_0001).unwrap();
    // The arguments are fine; the method's parameter list is not, and the line says so (it used
    // to print without its parameter list).
    assert_eq!(line.text.as_deref(), Ok("<string>"));
    let e = line.full_text().unwrap_err();
    assert_eq!((e.kind, e.offset()), (ErrorKind::BadElementType, Some(at)));
    let m = line.method.as_ref().unwrap();
    assert_eq!(m.name.as_deref(), Ok("Frames.Generic::Pass"));
    assert_eq!(m.params.as_ref().unwrap_err().kind, ErrorKind::BadElementType);
    // Every MethodSpec of a method that shares that signature blob fails alike, and no other.
    let got = changed(&lines(&md));
    assert!(got.contains(&"0x2B000001\t!error bad_element_type".to_owned()), "{got:?}");
    for l in &got {
        assert!(l.ends_with("\t!error bad_element_type"), "{l}");
        let token = u32::from_str_radix(&l[2..10], 16).unwrap();
        let method = md.method_spec(token & 0x00FF_FFFF).unwrap().method;
        let blob = |rid: u32| md.tables().row(table::METHOD_DEF, rid).unwrap().get(4).unwrap();
        assert_eq!(blob(method & 0x00FF_FFFF), blob(rid), "{l}");
    }
}

#[test]
fn a_typespec_row_that_does_not_decode_is_an_error_where_it_is_named() {
    // 0x2B00000C is `class Frames.Box`1<string>::Map<int32>(...)`: a MemberRef whose parent is
    // a TypeSpec. That TypeSpec's row is there but does not decode: its own line and the
    // MethodSpec's are errors (the MethodSpec used to print `0x1B0000NN::Map<int32>(...)`).
    let clean = frames();
    let parent = {
        let md = Metadata::parse(&clean).unwrap();
        let method = md.method_spec(0xC).unwrap().method;
        assert_eq!(method >> 24, 0x0A);
        let class = md.tables().row(table::MEMBER_REF, method & 0x00FF_FFFF).unwrap().get(0).unwrap();
        assert_eq!(class & 7, 4, "a TypeSpec parent");
        class >> 3
    };
    let (bytes, at) = with_bad_typespec(parent);
    let md = Metadata::parse(&bytes).unwrap();
    let got = changed(&lines(&md));
    assert_eq!(got, [format!("0x{:08X}\t!error bad_element_type", 0x1B00_0000 | parent), "0x2B00000C\t!error bad_element_type".to_owned()]);
    let specs = spec_lines(&md, &md);
    let m = specs.iter().find(|l| l.token == 0x2B00_000C).unwrap().method.clone().unwrap();
    assert_eq!(m.name.unwrap_err().offset(), Some(at));
    // Inside a modifier (`sig decode 1F <TS> 08 --metadata`): the error, not the raw token.
    let coded = (parent << 2 | 2) as u8;
    assert!(parent < 32);
    let e = render(&[0x1F, coded, 0x08], &md).unwrap_err();
    assert_eq!((e.kind, e.offset()), (ErrorKind::BadElementType, Some(at)));
    // A TypeSpec token that names no row still prints raw.
    assert_eq!(render(&[0x1F, 0x7E, 0x08], &md).unwrap(), "int32 modreq(0x1B00001F)");
}

#[test]
fn a_cyclic_typespec_is_too_deep_not_66_levels() {
    // `int32[][] modreq(TS#1)`: it used to expand 66 levels deep and end in its raw token.
    let bytes = with_typespec1(&[0x1F, 0x06, 0x1D, 0x1D, 0x08]);
    let md = Metadata::parse(&bytes).unwrap();
    let got = changed(&lines(&md));
    assert!(got.contains(&"0x1B000001\t!error too_deep".to_owned()), "{got:?}");
    assert!(got.iter().all(|l| l.ends_with("\t!error too_deep")), "{got:?}");
    assert_eq!(render(&[0x1F, 0x06, 0x08], &md).unwrap_err().kind, ErrorKind::TooDeep);
}

#[test]
fn a_methoddef_that_no_typedef_owns_is_bad_metadata() {
    let clean = frames();
    let rid = pass_rid(&Metadata::parse(&clean).unwrap());
    let bytes = with_unowned_methods(rid);
    let md = Metadata::parse(&bytes).unwrap();
    // No name rather than a name without its owner (it used to print `Pass<string>(!!0)`).
    assert_eq!(md.method_name(0x0600_0000 | rid), None);
    let e = md.member_name(0x0600_0000 | rid).unwrap_err();
    let row = md.tables().row(table::METHOD_DEF, rid).unwrap().offset();
    assert_eq!((e.kind, e.offset()), (ErrorKind::BadMetadata, Some(row)));
    let got = changed(&lines(&md));
    assert!(got.contains(&"0x2B000001\t!error bad_metadata".to_owned()), "{got:?}");
    assert!(got.iter().all(|l| l.ends_with("\t!error bad_metadata")), "{got:?}");
    // A MethodDef row that is not there still prints raw.
    assert_eq!(md.member_name(0x0600_7FFF).unwrap(), None);
}

/// The fixtures of this file, written to a directory, by name.
pub fn write_fixtures(dir: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let clean = frames();
    let md = Metadata::parse(&clean).unwrap();
    let rid = pass_rid(&md);
    let parent = md.tables().row(table::MEMBER_REF, md.method_spec(0xC).unwrap().method & 0x00FF_FFFF).unwrap().get(0).unwrap() >> 3;
    let files = [
        ("bad-method-sig.dll", with_bad_method_signature(rid).0),
        ("bad-typespec.dll", with_bad_typespec(parent).0),
        ("cyclic-typespec.dll", with_typespec1(&[0x1F, 0x06, 0x1D, 0x1D, 0x08])),
        ("self-twice-typespec.dll", with_typespec1(&[0x1F, 0x06, 0x1F, 0x06, 0x1D, 0x08])),
        ("unowned-method.dll", with_unowned_methods(rid)),
    ];
    files
        .into_iter()
        .map(|(name, bytes)| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        })
        .collect()
}

#[test]
#[ignore = "needs .NET"]
fn the_srm_oracle_fails_the_same_lines() {
    // System.Reflection.Metadata prints `!error` (no kind) where it throws BadImageFormatException;
    // every other line must be equal, text for text.
    let (_, mcs) = support::runtimes_and_mcs("spec_errors::the_srm_oracle_fails_the_same_lines");
    let rt31 = support::runtime31().unwrap();
    let oracle = support::srm_oracle(&rt31, &mcs);
    let files = write_fixtures(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("spec-errors"));
    let text = run(Command::new(&rt31.dotnet).arg(&oracle).args(&files));
    let mut theirs: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("== ") {
            current = Some(PathBuf::from(p));
        } else if let Some(p) = &current {
            theirs.entry(p.clone()).or_default().push(line.to_owned());
        }
    }
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let ours = lines(&Metadata::parse(&bytes).unwrap());
        let theirs = &theirs[f];
        assert_eq!(ours.len(), theirs.len(), "{}", f.display());
        let mut errors = 0;
        for (a, b) in ours.iter().zip(theirs) {
            match a.split_once("\t!error ") {
                Some((token, _)) => {
                    assert_eq!(b, &format!("{token}\t!error"), "{}", f.display());
                    errors += 1;
                }
                None => assert_eq!(a, b, "{}", f.display()),
            }
        }
        assert!(errors > 0, "{}: no line failed", f.display());
    }
}

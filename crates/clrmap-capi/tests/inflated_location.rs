//! An error inside a PDB embedded (deflated) in an image has its place in the inflated PDB, not in
//! the image: `clrmap_last_error` gives `CLRMAP_LOCATION_INFLATED` and that offset, while an error
//! in the embedded entry itself (in the image's bytes) stays `CLRMAP_LOCATION_OFFSET`.
//!
//! The images are the runtimes' ReadyToRun CoreLib (3.1.23 and 8.0.4) with their CodeView entry
//! turned into an embedded-PDB entry (type 17) whose data is appended: `#[ignore = "needs .NET"]`.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::arithmetic_side_effects, unsafe_code)]

use std::ffi::{CStr, CString};
use std::path::Path;

use clrmap::pdb::writer::PdbWriter;
use clrmap::pe::{PeImage, DEBUG_TYPE_CODEVIEW};
use clrmap_capi::*;

mod support;
use support::corelibs;

/// The image with its CodeView debug entry made an embedded-PDB entry (type 17) over `data`,
/// appended at the end of the file. Gives the image and the data's file offset.
fn with_embedded(image: &[u8], data: &[u8]) -> (Vec<u8>, u32) {
    let entry = PeImage::parse(image).unwrap().debug_entries().unwrap().into_iter().find(|e| e.kind == DEBUG_TYPE_CODEVIEW).unwrap();
    // The 28-byte IMAGE_DEBUG_DIRECTORY as it is in the file (PE-COFF): found by its whole bytes.
    let mut raw = vec![0u8; 4];
    raw.extend_from_slice(&entry.stamp.to_le_bytes());
    raw.extend_from_slice(&entry.major.to_le_bytes());
    raw.extend_from_slice(&entry.minor.to_le_bytes());
    raw.extend_from_slice(&entry.kind.to_le_bytes());
    raw.extend_from_slice(&entry.size.to_le_bytes());
    raw.extend_from_slice(&entry.rva.to_le_bytes());
    raw.extend_from_slice(&entry.file_offset.to_le_bytes());
    let at = image.windows(28).position(|w| w[4..] == raw[4..]).unwrap();
    let mut out = image.to_vec();
    while out.len() % 16 != 0 {
        out.push(0);
    }
    let pointer = out.len() as u32;
    out[at + 12..at + 16].copy_from_slice(&17u32.to_le_bytes());
    out[at + 16..at + 20].copy_from_slice(&(data.len() as u32).to_le_bytes());
    out[at + 20..at + 24].copy_from_slice(&0u32.to_le_bytes());
    out[at + 24..at + 28].copy_from_slice(&pointer.to_le_bytes());
    out.extend_from_slice(data);
    (out, pointer)
}

/// `clrmap_symbolizer_open` on the file must fail with `CLRMAP_E_BAD_PDB`; gives its last error's (location kind,
/// location, kind, message).
fn open_fails(path: &Path) -> (u32, u64, String, String) {
    let c = CString::new(path.to_str().unwrap()).unwrap();
    let mut sym = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path, no PDB, no symbol paths, a valid out-pointer.
    let hr = unsafe { clrmap_symbolizer_open(c.as_ptr(), std::ptr::null(), std::ptr::null(), 0, &mut sym) };
    assert_eq!(hr, CLRMAP_E_BAD_PDB, "{}", path.display());
    assert!(sym.is_null());
    let mut e = std::mem::MaybeUninit::<ClrmapError>::uninit();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { clrmap_last_error(e.as_mut_ptr()) }, CLRMAP_S_OK);
    // SAFETY: clrmap_last_error filled it.
    let e = unsafe { e.assume_init() };
    assert_eq!(e.hr, hr);
    // SAFETY: `kind` is a static string and `message` lives until the next failing call.
    let (kind, message) = unsafe { (CStr::from_ptr(e.kind).to_string_lossy().into_owned(), CStr::from_ptr(e.message).to_string_lossy().into_owned()) };
    (e.location_kind, e.location, kind, message)
}

#[test]
#[ignore = "needs .NET"]
fn an_error_in_an_embedded_pdb_is_located_in_the_inflated_pdb() {
    for (i, rel) in corelibs().iter().enumerate() {
        let corelib = std::fs::read(rel).unwrap();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-inflated-location-{i}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();

        // A portable PDB cut right after its metadata root's stream count (ECMA-335 II.24.2.1:
        // BSJB, major, minor, reserved, the version string's length and bytes, flags, streams):
        // its first stream header, at that offset of the inflated PDB, is missing.
        let mut w = PdbWriter::new([7; 20]);
        let name = w.document_name("a.cs");
        w.document(name);
        let pdb = w.build();
        assert_eq!(&pdb[..4], b"BSJB");
        let version_len = u32::from_le_bytes(pdb[12..16].try_into().unwrap()) as usize;
        let first_header = 16 + version_len + 4;
        assert!(u16::from_le_bytes(pdb[first_header - 2..first_header].try_into().unwrap()) >= 1);
        let cut = &pdb[..first_header];
        let (image, _) = with_embedded(&corelib, &clrmap::pdb::writer::embedded_entry(cut));
        let path = dir.join("System.Private.CoreLib.dll");
        std::fs::write(&path, &image).unwrap();
        let (location_kind, location, kind, message) = open_fails(&path);
        assert_eq!((location_kind, location, kind.as_str()), (CLRMAP_LOCATION_INFLATED, first_header as u64, "bad_pdb"), "{}: {message}", rel.display());
        assert!(message.contains(&format!(" at offset {first_header} of the embedded PDB, inflated")), "{}: {message}", rel.display());

        // A fault in the entry itself is in the image: its signature, at the data's file offset.
        let mut bad = clrmap::pdb::writer::embedded_entry(&pdb);
        bad[..4].copy_from_slice(b"XPDB");
        let (image, pointer) = with_embedded(&corelib, &bad);
        std::fs::write(&path, &image).unwrap();
        let (location_kind, location, kind, message) = open_fails(&path);
        assert_eq!((location_kind, location, kind.as_str()), (CLRMAP_LOCATION_OFFSET, u64::from(pointer), "bad_pdb"), "{}: {message}", rel.display());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! The C ABI's SourceLink URLs: `clrmap_symbolizer_source_link` by the two-call
//! protocol, on the Frames trace with a PDB of the same id that carries a SourceLink map (built
//! from Frames.pdb's own rows by clrmap's test writer), answering as the library's frames do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::arithmetic_side_effects, unsafe_code)]

use std::ffi::CString;
use std::path::{Path, PathBuf};

use clrmap::pdb::sources::SOURCE_LINK;
use clrmap::pdb::writer::{PdbWriter, Point};
use clrmap::pdb::PortablePdb;
use clrmap::symbolizer::{FrameKind, Options, Symbolizer};
use clrmap_capi::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Frames.pdb again, each method's points in its own document, with a SourceLink map.
fn frames_pdb_with_source_link() -> Vec<u8> {
    let bytes = std::fs::read(repo().join("tests/fixtures/frames/debug-embedded/Frames.pdb")).unwrap_or_else(|_| {
        let dll = std::fs::read(repo().join("tests/fixtures/frames/debug-embedded/Frames.dll")).unwrap();
        clrmap::pdb::embedded::embedded_pdb(&clrmap::pe::PeImage::parse(&dll).unwrap()).unwrap().unwrap()
    });
    let pdb = PortablePdb::parse(&bytes).unwrap();
    let mut w = PdbWriter::new(pdb.id().0);
    let docs: Vec<u32> = pdb.documents().map(|d| d.unwrap().name).map(|n| w.document_name(&n)).collect::<Vec<_>>().into_iter().map(|b| w.document(b)).collect();
    for rid in 1..=pdb.method_count() {
        let points: Vec<_> = pdb.sequence_points(0x0600_0000 | rid).unwrap().map(|p| p.unwrap()).collect();
        let doc = points.first().map_or(docs[0], |p| docs[p.document as usize - 1]);
        let own: Vec<Point> = points
            .iter()
            .filter(|p| docs[p.document as usize - 1] == doc)
            .map(|p| if p.is_hidden() { Point::hidden(p.il_offset) } else { Point::visible(p.il_offset, p.start_line, p.start_column, p.end_line, p.end_column) })
            .collect();
        let blob = w.points_blob(&own);
        w.method(doc, blob);
    }
    // The Module (tag 7, row 1).
    w.custom_debug_information(1 << 5 | 7, SOURCE_LINK, br#"{"documents":{"/_/src/*":"https://example.invalid/frames/*"}}"#);
    w.build()
}

#[test]
fn source_links_through_the_c_abi_are_the_librarys() {
    let dir = std::env::temp_dir().join(format!("clrmap-capi-sourcelink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pdb = dir.join("Frames.pdb");
    std::fs::write(&pdb, frames_pdb_with_source_link()).unwrap();
    let trace = repo().join("examples/frames.nettrace");
    let options = Options { symbols: clrmap::locate::SymbolPaths { pdb: Some(pdb.clone()), dirs: Vec::new(), servers: None } };
    let lib = Symbolizer::open(&trace, options).unwrap();
    let (source, pdb_c) = (CString::new(trace.to_str().unwrap()).unwrap(), CString::new(pdb.to_str().unwrap()).unwrap());
    let mut sym = std::ptr::null_mut();
    // SAFETY: NUL-terminated paths, no symbol paths, a valid out-pointer.
    assert_eq!(unsafe { clrmap_symbolizer_open(source.as_ptr(), pdb_c.as_ptr(), std::ptr::null(), 0, &mut sym,) }, CLRMAP_S_OK);
    let mut urls = 0;
    for body in lib.store().bodies().iter().filter(|b| b.module.as_deref() == Some("Frames.dll")) {
        let address = body.start.unwrap() + u64::from(body.code_size / 2);
        let want = lib.symbolize(address, FrameKind::Leaf);
        let mut need = 0u32;
        // SAFETY: the symbolizer is live; no buffer.
        let hr = unsafe { clrmap_symbolizer_source_link(sym, address, CLRMAP_FRAME_LEAF, std::ptr::null_mut(), 0, &mut need) };
        let Some(url) = want.source_link else {
            assert_eq!((hr, need), (CLRMAP_E_NOT_FOUND, 0), "{address:#x}");
            continue;
        };
        assert_eq!(url, format!("https://example.invalid/frames/{}", want.at.file.unwrap().strip_prefix("/_/src/").unwrap()));
        assert_eq!((hr, need as usize), (CLRMAP_S_FALSE, url.len() + 1));
        let mut buf = vec![0 as std::os::raw::c_char; need as usize];
        // SAFETY: room for `need` bytes.
        let hr = unsafe { clrmap_symbolizer_source_link(sym, address, CLRMAP_FRAME_LEAF, buf.as_mut_ptr(), need, &mut need) };
        assert_eq!(hr, CLRMAP_S_OK);
        // SAFETY: NUL-terminated by the call.
        assert_eq!(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap(), url);
        urls += 1;
    }
    assert!(urls > 10, "{urls}");
    // SAFETY: made by clrmap_symbolizer_open, released once.
    unsafe { clrmap_symbolizer_release(sym) };
    std::fs::remove_dir_all(&dir).unwrap();
}

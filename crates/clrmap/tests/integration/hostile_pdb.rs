//! Hostile portable PDBs in the library, built by `clrmap::pdb::writer`: line tables
//! are decoded per method and once per shared blob, names once per shared name, local names are
//! bounded, a candidate's id is read from its header alone; and the structure-aware fuzz target's
//! seeds and regressions replay through its checks on stable.

use std::time::{Duration, Instant};

use clrmap::pdb::writer::{PdbWriter, Point};
use clrmap::pdb::{peek_id, PdbId, PortablePdb};
use clrmap::read::ErrorKind;
use clrmap::symbolizer::ModuleSymbols;

use crate::support::repo_root;

#[test]
fn a_blob_shared_by_every_row_costs_one_decoding() {
    // 100,000 rows, one blob of 200,000 points: the eager table held 2x10^10 points.
    let mut w = PdbWriter::new([1; 20]);
    let a = w.document_name("/src/a.cs");
    let doc = w.document(a);
    let blob = w.many_points_blob(200_000);
    w.methods_sharing(100_000, doc, blob);
    let bytes = w.build();
    let t = Instant::now();
    let lines = ModuleSymbols::from_pdb(bytes).unwrap();
    for rid in (1..=100_000).step_by(97) {
        assert_eq!(lines.line(0x0600_0000 | rid, 199_999), Some((200_000, 1, Some("/src/a.cs"))));
        assert_eq!(lines.line(0x0600_0000 | rid, 5), Some((6, 1, Some("/src/a.cs"))));
    }
    assert_eq!(lines.line(0x0600_0000 | 100_001, 5), None);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn a_name_shared_by_every_document_row_is_read_once() {
    let mut w = PdbWriter::new([1; 20]);
    let part = w.blob(&[b'x'; 100]);
    let name = w.document_name_of_parts(b'/', &[part; 600]);
    for _ in 0..100_000 {
        w.document(name);
    }
    let blob = w.points_blob(&[Point::visible(0, 1, 1, 1, 2)]);
    for d in (1..=100_000).step_by(7) {
        w.method(d, blob);
    }
    let bytes = w.build();
    let t = Instant::now();
    let lines = ModuleSymbols::from_pdb(bytes).unwrap();
    let mut total = 0usize;
    for rid in 1..=14_286 {
        let (_, _, file) = lines.line(0x0600_0000 | rid, 0).unwrap();
        total += file.unwrap().len();
    }
    assert_eq!(total, 14_286 * (600 * 100 + 599));
    // One name string for all of them: 14,286 copies would be 866 MB.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn local_names_are_read_once_and_bounded_per_method() {
    // 100,000 locals of one method, all named by one 1 MiB string: 100 GB as copies.
    let mut w = PdbWriter::new([1; 20]);
    let long = w.string(&"n".repeat(1 << 20));
    let first = w.variable_count() + 1;
    for i in 0..100_000u32 {
        w.variable(0, (i % 8) as u16, long);
    }
    w.scope(1, first, 0, 100);
    let short = w.string("i");
    let second = w.variable_count() + 1;
    for i in 0..100_000u32 {
        w.variable(0, (i % 8) as u16, short);
    }
    w.scope(2, second, 0, 100);
    let doc = w.document_name("a.cs");
    let doc = w.document(doc);
    let blob = w.points_blob(&[]);
    w.method(doc, blob);
    w.method(doc, blob);
    let bytes = w.build();
    let pdb = PortablePdb::parse(&bytes).unwrap();
    let t = Instant::now();
    let e = pdb.local_scopes(0x0600_0001).unwrap_err();
    assert_eq!((e.kind, e.expected), (ErrorKind::BadPdb, "local names of at most 16 MiB per method"));
    let scopes = pdb.local_scopes(0x0600_0002).unwrap();
    assert_eq!(scopes[0].variables.len(), 100_000);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[test]
fn a_pdb_id_is_read_from_the_header_alone() {
    let mut w = PdbWriter::new([0x42; 20]);
    let name = w.document_name("a.cs");
    w.document(name);
    let bytes = w.build();
    assert_eq!(peek_id(&mut std::io::Cursor::new(&bytes)), Some(PdbId([0x42; 20])));
    // The real fixtures: what the full parser reads.
    for rel in ["tests/fixtures/frames/debug-portable/Frames.pdb", "tests/fixtures/frames/release-portable/Frames.pdb"] {
        let real = std::fs::read(repo_root().join(rel)).unwrap();
        assert_eq!(peek_id(&mut std::io::Cursor::new(&real)), Some(PortablePdb::parse(&real).unwrap().id()), "{rel}");
    }
    // Not a PDB, cut short, a #Pdb stream past the end: none.
    assert_eq!(peek_id(&mut std::io::Cursor::new(vec![0u8; 10_000])), None);
    assert_eq!(peek_id(&mut std::io::Cursor::new(&bytes[..40])), None);
    let mut moved = bytes.clone();
    let at = moved.windows(4).position(|w| w == b"#Pdb").unwrap() - 8;
    moved[at..at + 4].copy_from_slice(&0x7FFF_FFFFu32.to_le_bytes());
    assert_eq!(peek_id(&mut std::io::Cursor::new(&moved)), None);
}

#[test]
fn pdb_structured_inputs() {
    // The `pdb_structured` fuzz target's checks (`clrmap::symbolizer::fuzzcheck`), on stable.
    let mut n = 0;
    for dir in ["regressions", "seeds"] {
        let Ok(rd) = std::fs::read_dir(repo_root().join("fuzz").join(dir).join("pdb_structured")) else { continue };
        for e in rd {
            let data = std::fs::read(e.unwrap().path()).unwrap();
            match data.split_first() {
                Some((mode, rest)) if mode % 2 == 1 => clrmap::symbolizer::fuzzcheck::fuzz_check_capture_pdb(rest),
                Some((_, rest)) => clrmap::symbolizer::fuzzcheck::fuzz_check_pdb_structured(rest),
                None => {}
            }
            n += 1;
        }
    }
    assert!(n >= 2, "no inputs kept for pdb_structured");
}

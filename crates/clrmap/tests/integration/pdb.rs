//! Portable PDBs: clrmap's sequence points against two independent readers — the runtime's own
//! System.Reflection.Metadata (the SRM oracle's `--pdb` mode) and Sentry's `symbolic-ppdb` — on
//! the four Roslyn-built fixtures (debug/release × standalone/embedded), and hostile inputs.

use std::path::PathBuf;
use std::process::Command;

use clrmap::pdb::embedded::embedded_pdb;
use clrmap::pdb::{PortablePdb, SequencePoint};
use clrmap::pe::{PeImage, DEBUG_TYPE_EMBEDDED_PORTABLE_PDB};
use clrmap::ErrorKind;

use crate::support::{self, run, runtime31};

/// The four fixture variants: (name, the file the oracle reads).
const VARIANTS: [(&str, &str); 4] = [("debug-portable", "Frames.pdb"), ("release-portable", "Frames.pdb"), ("debug-embedded", "Frames.dll"), ("release-embedded", "Frames.dll")];

fn variant_file(variant: &str, file: &str) -> PathBuf {
    support::fixture(&format!("tests/fixtures/frames/{variant}/{file}"))
}

/// The PDB bytes of a variant: the standalone file, or the PDB inflated from the assembly.
fn pdb_bytes(variant: &str, file: &str) -> Vec<u8> {
    let bytes = std::fs::read(variant_file(variant, file)).unwrap();
    if file.ends_with(".pdb") {
        return bytes;
    }
    let image = PeImage::parse(&bytes).unwrap_or_else(|e| panic!("{variant}: {e}"));
    embedded_pdb(&image).unwrap_or_else(|e| panic!("{variant}: {e}")).unwrap_or_else(|| panic!("{variant}: no embedded PDB"))
}

/// Every method's points, in MethodDebugInformation row order: (token, points).
fn all_points(pdb: &PortablePdb<'_>) -> Vec<(u32, Vec<SequencePoint>)> {
    (1..=pdb.method_count())
        .map(|rid| {
            let token = 0x0600_0000 | rid;
            let points = pdb.sequence_points(token).unwrap_or_else(|e| panic!("0x{token:08X}: {e}")).collect::<clrmap::Result<Vec<_>>>().unwrap_or_else(|e| panic!("0x{token:08X}: {e}"));
            (token, points)
        })
        .collect()
}

/// clrmap's points printed the way the oracle's `--pdb` mode prints SRM's.
fn clrmap_lines(pdb: &PortablePdb<'_>) -> Vec<String> {
    let mut lines = Vec::new();
    for (token, points) in all_points(pdb) {
        for p in points {
            let doc = pdb.document(p.document).unwrap_or_else(|e| panic!("0x{token:08X} document {}: {e}", p.document)).name;
            let place = if p.is_hidden() { "hidden".to_owned() } else { format!("{}:{}-{}:{}", p.start_line, p.start_column, p.end_line, p.end_column) };
            lines.push(format!("0x{token:08X}\t{}\t{doc}\t{place}", p.il_offset));
        }
    }
    // LocalScope rows are sorted by method, so walking the methods in order walks the rows.
    let mut scopes = 0;
    for rid in 1..=pdb.method_count() {
        let token = 0x0600_0000 | rid;
        for scope in pdb.local_scopes(token).unwrap_or_else(|e| panic!("0x{token:08X} scopes: {e}")) {
            scopes += 1;
            lines.push(format!("scope 0x{token:08X} {} {}", scope.start_offset, scope.length));
            for v in scope.variables {
                lines.push(format!("  var {} {} {}", v.index, v.attributes, v.name));
            }
        }
    }
    assert_eq!(scopes, pdb.tables().rows(clrmap::metadata::table::LOCAL_SCOPE), "every LocalScope row belongs to a method");
    lines
}

#[test]
#[ignore = "needs .NET"]
fn sequence_points_equal_system_reflection_metadata() {
    let test = "pdb::sequence_points_equal_system_reflection_metadata";
    // Both runtimes must be there (as for every .NET test), though only 3.1 hosts the oracle.
    let (_, mcs) = support::runtimes_and_mcs(test);
    let rt31 = runtime31().unwrap();
    let oracle = support::srm_oracle(&rt31, &mcs);
    for (variant, file) in VARIANTS {
        let path = variant_file(variant, file);
        let theirs: Vec<String> = run(Command::new(&rt31.dotnet).arg(&oracle).arg("--pdb").arg(&path)).lines().map(str::to_owned).collect();
        let bytes = pdb_bytes(variant, file);
        let pdb = PortablePdb::parse(&bytes).unwrap_or_else(|e| panic!("{variant}: {e}"));
        let ours = clrmap_lines(&pdb);
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a, b, "{variant}: line {i} differs (clrmap, SRM)");
        }
        assert_eq!(ours.len(), theirs.len(), "{variant}: clrmap has {} lines, SRM {}", ours.len(), theirs.len());
        let hidden = ours.iter().filter(|l| l.ends_with("\thidden")).count();
        let scopes = ours.iter().filter(|l| l.starts_with("scope ")).count();
        let vars = ours.iter().filter(|l| l.starts_with("  var ")).count();
        println!("{variant}: {} lines ({hidden} hidden points, {scopes} local scopes, {vars} variables) equal to SRM", ours.len());
        assert!(ours.len() > 100 && hidden > 0 && scopes > 10 && vars > 10, "{variant}: too little data");
    }
}

/// clrmap's rule for an IL offset: the last visible point (in blob order) whose IL offset is at
/// or below it; `None` before the first visible point.
fn clrmap_line(pdb: &PortablePdb<'_>, points: &[SequencePoint], il: u32) -> Option<(String, u32)> {
    points.iter().rfind(|p| !p.is_hidden() && p.il_offset <= il).map(|p| (pdb.document(p.document).unwrap().name, p.start_line))
}

/// symbolic-ppdb 12 builds a cache of (method row, IL offset) → (file, start line) from the
/// *visible* points only (hidden points are skipped, a later point at the same IL offset replaces
/// an earlier one) and looks an offset up as the greatest key at or below it within the same
/// method, `None` before the method's first visible point or for a method without one. That is
/// exactly clrmap's rule above, so the two are compared everywhere, `None`s included.
#[test]
fn lines_equal_symbolic_ppdb() {
    let (mut pairs, mut defined) = (0usize, 0usize);
    for (variant, file) in VARIANTS {
        let bytes = pdb_bytes(variant, file);
        let ours = PortablePdb::parse(&bytes).unwrap();
        let theirs = symbolic_ppdb::PortablePdb::parse(&bytes).unwrap_or_else(|e| panic!("{variant}: symbolic-ppdb: {e}"));
        let mut converter = symbolic_ppdb::PortablePdbCacheConverter::new();
        converter.process_portable_pdb(&theirs).unwrap_or_else(|e| panic!("{variant}: symbolic-ppdb: {e}"));
        let mut cache_bytes = Vec::new();
        converter.serialize(&mut cache_bytes).unwrap();
        let cache = symbolic_ppdb::PortablePdbCache::parse(&cache_bytes).unwrap();
        let (mut v_pairs, mut v_defined) = (0usize, 0usize);
        for (token, points) in all_points(&ours) {
            let max_il = points.iter().map(|p| p.il_offset).max().unwrap_or(0);
            for il in 0..=max_il + 8 {
                let a = clrmap_line(&ours, &points, il);
                let b = cache.lookup(token & 0x00FF_FFFF, il).map(|l| (l.file_name.to_owned(), l.line));
                assert_eq!(a, b, "{variant}: 0x{token:08X} IL_{il:04X} (clrmap, symbolic-ppdb)");
                v_pairs += 1;
                v_defined += usize::from(a.is_some());
            }
        }
        println!("{variant}: {v_pairs} (method, IL offset) pairs equal to symbolic-ppdb, {v_defined} with a line");
        assert!(v_pairs > 3_000 && v_defined > 3_000, "{variant}: too little data");
        pairs += v_pairs;
        defined += v_defined;
    }
    assert!(pairs > 5_000 && defined > 5_000, "too little data: {pairs} pairs, {defined} with a line");
}

/// Parse and walk everything a PDB holds; errors are fine, panics are not. Every error offset
/// must lie inside the bytes.
fn walk(bytes: &[u8]) -> usize {
    let within = |e: &clrmap::Error| assert!(e.offset().unwrap() <= bytes.len() as u64, "offset {} past {} bytes: {e}", e.offset().unwrap(), bytes.len());
    let pdb = match PortablePdb::parse(bytes) {
        Ok(p) => p,
        Err(e) => {
            within(&e);
            return 0;
        }
    };
    let mut points = 0;
    for d in pdb.documents() {
        if let Err(e) = d {
            within(&e);
        }
    }
    for rid in 1..=pdb.method_count().min(1 << 16) {
        let token = 0x0600_0000 | rid;
        match pdb.sequence_points(token) {
            Ok(it) => {
                for p in it {
                    match p {
                        Ok(p) => {
                            points += 1;
                            let _ = pdb.document(p.document);
                        }
                        Err(e) => within(&e),
                    }
                }
            }
            Err(e) => within(&e),
        }
        if let Err(e) = pdb.local_scopes(token) {
            within(&e);
        }
    }
    points
}

#[test]
fn truncated_pdbs_never_panic() {
    for (variant, file) in VARIANTS {
        let bytes = pdb_bytes(variant, file);
        assert!(walk(&bytes) > 100, "{variant}: the whole PDB walks");
        let mut cuts = 0;
        for cut in (0..bytes.len()).step_by(97) {
            walk(&bytes[..cut]);
            cuts += 1;
        }
        assert!(cuts > 10, "{variant}");
    }
}

#[test]
fn a_windows_pdb_is_unsupported() {
    let mut msf = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0".to_vec();
    msf.resize(4096, 0);
    let e = PortablePdb::parse(&msf).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnsupportedPdbFormat, "{e}");
    assert_eq!(e.offset().unwrap(), 0);
    // Garbage and an empty file are not portable PDBs either.
    for junk in [&b""[..], b"BSJ", b"MZ\x90\0garbage garbage", &[0xFFu8; 64]] {
        let e = PortablePdb::parse(junk).unwrap_err();
        assert_eq!(e.kind, ErrorKind::UnsupportedPdb, "{junk:?}: {e}");
        assert_eq!(e.offset().unwrap(), 0);
    }
}

/// The file offset of the row count of table `id` in a portable PDB's `#~` stream.
fn row_count_offset(pdb: &[u8], id: u32) -> usize {
    let u32_at = |at: usize| u32::from_le_bytes(pdb[at..at + 4].try_into().unwrap());
    assert_eq!(&pdb[..4], b"BSJB");
    let version_len = u32_at(12) as usize;
    let mut at = 16 + version_len + 2;
    let streams = u16::from_le_bytes([pdb[at], pdb[at + 1]]);
    at += 2;
    for _ in 0..streams {
        let (offset, name_at) = (u32_at(at) as usize, at + 8);
        let name_len = pdb[name_at..].iter().position(|&b| b == 0).unwrap();
        let name = &pdb[name_at..name_at + name_len];
        at = name_at + (name_len + 4) / 4 * 4;
        if name == b"#~" {
            let valid = u64::from_le_bytes(pdb[offset + 8..offset + 16].try_into().unwrap());
            assert!(valid & (1 << id) != 0, "table 0x{id:02X} is present");
            let index = (valid & ((1u64 << id) - 1)).count_ones() as usize;
            return offset + 24 + 4 * index;
        }
    }
    panic!("no #~ stream");
}

#[test]
fn a_huge_method_debug_information_row_count_is_bad_pdb() {
    let good = pdb_bytes("debug-portable", "Frames.pdb");
    let at = row_count_offset(&good, 0x31);
    let rows = u32::from_le_bytes(good[at..at + 4].try_into().unwrap());
    assert_eq!(rows, PortablePdb::parse(&good).unwrap().method_count(), "the patch finds the row count");
    for huge in [0x00FF_FFFFu32, 0x7FFF_FFFF, u32::MAX, rows + 1_000] {
        let mut bad = good.clone();
        bad[at..at + 4].copy_from_slice(&huge.to_le_bytes());
        let e = PortablePdb::parse(&bad).expect_err("a row count past the stream");
        println!("row count {huge:#X}: {e}");
        assert_eq!(e.kind, ErrorKind::BadPdb, "{huge:#X}: {e}");
        assert!(e.offset().unwrap() < bad.len() as u64, "{huge:#X}: {e}");
        walk(&bad);
    }
}

#[test]
fn a_truncated_embedded_deflate_stream_is_bad_pdb() {
    let dll = std::fs::read(variant_file("debug-embedded", "Frames.dll")).unwrap();
    let image = PeImage::parse(&dll).unwrap();
    let entry = image.debug_entries().unwrap().into_iter().find(|e| e.kind == DEBUG_TYPE_EMBEDDED_PORTABLE_PDB).expect("an MPDB entry");
    let (start, size) = (entry.file_offset as usize, entry.size as usize);
    assert_eq!(&dll[start..start + 4], b"MPDB");
    assert!(embedded_pdb(&image).unwrap().is_some());
    let check = |patched: &[u8], what: &str| {
        let image = PeImage::parse(patched).unwrap_or_else(|e| panic!("{what}: {e}"));
        let e = embedded_pdb(&image).expect_err(what);
        println!("{what}: {e}");
        assert_eq!(e.kind, ErrorKind::BadPdb, "{what}: {e}");
        assert!((start as u64..(start + size) as u64).contains(&e.offset().unwrap()), "{what}: offset {} outside the entry: {e}", e.offset().unwrap());
    };

    // The stream's tail zeroed: the deflate stream breaks off (or decodes to garbage of the
    // wrong size).
    for keep in [8 + 1, 8 + (size - 8) / 2, size - 16, size - 1] {
        let mut zeroed = dll.clone();
        zeroed[start + keep..start + size].fill(0);
        check(&zeroed, &format!("tail zeroed from {keep}"));
    }

    // The entry's SizeOfData shrunk: the stream is cut short. The 28-byte directory record is
    // Characteristics, TimeDateStamp, Major, Minor, Type, SizeOfData, AddressOfRawData,
    // PointerToRawData; find it by its fields.
    let mut record = Vec::new();
    record.extend_from_slice(&entry.stamp.to_le_bytes());
    record.extend_from_slice(&entry.major.to_le_bytes());
    record.extend_from_slice(&entry.minor.to_le_bytes());
    record.extend_from_slice(&entry.kind.to_le_bytes());
    record.extend_from_slice(&entry.size.to_le_bytes());
    record.extend_from_slice(&entry.rva.to_le_bytes());
    record.extend_from_slice(&entry.file_offset.to_le_bytes());
    let at = dll.windows(record.len()).position(|w| w == record.as_slice()).expect("the debug directory record");
    let size_at = at + 12;
    for new_size in [9u32, 64, entry.size / 2, entry.size - 1] {
        let mut cut = dll.clone();
        cut[size_at..size_at + 4].copy_from_slice(&new_size.to_le_bytes());
        check(&cut, &format!("SizeOfData {new_size}"));
    }
}

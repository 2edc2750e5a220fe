//! Real assemblies whose PDB was not found. Two debug-directory layouts that .NET's own
//! reader handles, built from the project's fixtures, and the messages that say why a PDB is not
//! used.
//! - The portable CodeView entry behind a Windows one (as in the Windows-built ReadyToRun
//!   framework, whose real `System.Threading.Thread.dll` is read too).
//! - The debug directory at a file offset that is not a multiple of 4 (as in real test binaries of
//!   a binary-rewriting library: 0x872, 0x7BE).

use std::path::{Path, PathBuf};

use clrmap::pe::{PeImage, DEBUG_TYPE_CODEVIEW, DEBUG_TYPE_EMBEDDED_PORTABLE_PDB, PORTABLE_CODEVIEW_MINOR};

use crate::support::{clrmap, code, repo_root, stderr, stdout};

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Where a PE image's debug data directory is, and its entries' raw bytes (28 each).
struct DebugDir {
    /// File offset of data directory 6 (RVA, size).
    field: usize,
    /// The entries, as stored.
    entries: Vec<[u8; 28]>,
}

/// The section headers' file offset and count.
fn sections(b: &[u8]) -> (usize, usize) {
    let nt = u32_at(b, 0x3C) as usize;
    (nt + 24 + usize::from(u16_at(b, nt + 20)), usize::from(u16_at(b, nt + 6)))
}

fn debug_dir(b: &[u8]) -> DebugDir {
    let nt = u32_at(b, 0x3C) as usize;
    let dirs = nt + 24 + if u16_at(b, nt + 24) == 0x10B { 96 } else { 112 };
    let field = dirs + 6 * 8;
    let (rva, size) = (u32_at(b, field), u32_at(b, field + 4));
    let (table, n) = sections(b);
    let at = (0..n)
        .map(|i| table + 40 * i)
        .find_map(|s| {
            let (vs, va, rs, rp) = (u32_at(b, s + 8), u32_at(b, s + 12), u32_at(b, s + 16), u32_at(b, s + 20));
            (va <= rva && rva < va + vs.max(rs)).then(|| (rp + rva - va) as usize)
        })
        .unwrap();
    let entries = (0..size as usize / 28).map(|i| b[at + 28 * i..at + 28 * i + 28].try_into().unwrap()).collect();
    DebugDir { field, entries }
}

/// `bytes` with its debug directory replaced by `entries`, written `misalign` bytes past a 16-byte
/// boundary in new raw data appended to the last section (which is made to cover it), followed by
/// `extra` (data an entry may point at: its file offset is returned). The old directory's bytes
/// are zeroed, so only the new one can be read.
fn with_directory(bytes: &[u8], entries: &[[u8; 28]], extra: &[u8], misalign: usize) -> (Vec<u8>, usize) {
    let mut b = bytes.to_vec();
    let old = debug_dir(&b);
    let (table, n) = sections(&b);
    let last = table + 40 * (n - 1);
    let (va, rs, rp) = (u32_at(&b, last + 12), u32_at(&b, last + 16), u32_at(&b, last + 20));
    assert_eq!((rp + rs) as usize, b.len(), "the last section ends the file");
    // Zero the old directory where it was.
    let old_rva = u32_at(&b, old.field);
    let old_at = (0..n)
        .map(|i| table + 40 * i)
        .find_map(|s| {
            let (vs, sva, srs, srp) = (u32_at(&b, s + 8), u32_at(&b, s + 12), u32_at(&b, s + 16), u32_at(&b, s + 20));
            (sva <= old_rva && old_rva < sva + vs.max(srs)).then(|| (srp + old_rva - sva) as usize)
        })
        .unwrap();
    let old_len = old.entries.len() * 28;
    b[old_at..old_at + old_len].fill(0);
    let start = b.len();
    b.resize(start + misalign, 0);
    let dir_at = b.len();
    assert_eq!(dir_at % 4, misalign % 4);
    for e in entries {
        b.extend_from_slice(e);
    }
    let extra_at = b.len();
    b.extend_from_slice(extra);
    // Whole file alignment for the section's raw size.
    b.resize(b.len().div_ceil(512) * 512, 0);
    let added = (b.len() - start) as u32;
    put_u32(&mut b, last + 8, rs + added); // VirtualSize
    put_u32(&mut b, last + 16, rs + added); // SizeOfRawData
    let dir_rva = va + rs + misalign as u32;
    put_u32(&mut b, old.field, dir_rva);
    put_u32(&mut b, old.field + 4, (entries.len() * 28) as u32);
    (b, extra_at)
}

/// A Windows (MSF) CodeView entry and its RSDS record for `pdb_name`, with GUID `guid`, to be
/// placed at `data_at` (file offset).
fn windows_codeview(guid: [u8; 16], pdb_name: &str, data_at: usize) -> ([u8; 28], Vec<u8>) {
    let mut data = b"RSDS".to_vec();
    data.extend_from_slice(&guid);
    data.extend_from_slice(&1u32.to_le_bytes());
    data.extend_from_slice(pdb_name.as_bytes());
    data.push(0);
    let mut e = [0u8; 28];
    e[4..8].copy_from_slice(&0xB1CE_28BCu32.to_le_bytes()); // TimeDateStamp
    e[8..10].copy_from_slice(&0x100u16.to_le_bytes()); // MajorVersion; MinorVersion 0: not portable
    e[12..16].copy_from_slice(&DEBUG_TYPE_CODEVIEW.to_le_bytes());
    e[16..20].copy_from_slice(&(data.len() as u32).to_le_bytes());
    e[24..28].copy_from_slice(&(data_at as u32).to_le_bytes()); // PointerToRawData
    (e, data)
}

/// The release-portable Frames.dll with a Windows CodeView entry (another GUID, `Frames.ni.pdb`)
/// placed before its portable one, directory at `misalign`.
fn windows_entry_first(misalign: usize) -> Vec<u8> {
    let bytes = std::fs::read(fixture("release-portable/Frames.dll")).unwrap();
    let old = debug_dir(&bytes);
    // The Windows entry's data goes right after the new directory, which has one entry more.
    let probe = with_directory(&bytes, &vec![[0u8; 28]; old.entries.len() + 1], &[], misalign).1;
    let (entry, data) = windows_codeview([0x5A; 16], "C:\\src\\obj\\Frames.ni.pdb", probe);
    let mut entries = vec![entry];
    entries.extend(old.entries.iter().copied());
    let (b, at) = with_directory(&bytes, &entries, &data, misalign);
    assert_eq!(at, probe);
    b
}

fn fixture(rel: &str) -> PathBuf {
    repo_root().join("tests/fixtures/frames").join(rel)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-debug-layouts-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `pdb lines` on the fixture's own assembly and PDB: what every layout must give.
fn expected_lines() -> String {
    let o = clrmap(&["pdb", "lines", s(&fixture("release-portable/Frames.dll"))]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("Frames.Nested::Inner"), "{}", stdout(&o));
    stdout(&o)
}

/// The three ways a PDB is found for an assembly: beside it, `--pdb`, and `--symbol-path`.
fn finds_its_pdb_three_ways(assembly: &[u8], name: &str) {
    let want = expected_lines();
    let pdb = fixture("release-portable/Frames.pdb");
    // Beside the assembly.
    let beside = scratch(&format!("{name}-beside"));
    std::fs::write(beside.join("Frames.dll"), assembly).unwrap();
    std::fs::copy(&pdb, beside.join("Frames.pdb")).unwrap();
    let o = clrmap(&["pdb", "lines", s(&beside.join("Frames.dll"))]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), want.clone()), "{name} beside: {}", stderr(&o));
    // Alone, with --pdb.
    let alone = scratch(&format!("{name}-alone"));
    std::fs::write(alone.join("Frames.dll"), assembly).unwrap();
    let o = clrmap(&["pdb", "lines", s(&alone.join("Frames.dll")), "--pdb", s(&pdb)]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), want.clone()), "{name} --pdb: {}", stderr(&o));
    // Alone, with a symbol directory that holds only the PDB.
    let symbols = scratch(&format!("{name}-symbols"));
    std::fs::copy(&pdb, symbols.join("Frames.pdb")).unwrap();
    let o = clrmap(&["pdb", "lines", s(&alone.join("Frames.dll")), "--symbol-path", s(&symbols)]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), want), "{name} --symbol-path: {}", stderr(&o));
    for d in [beside, alone, symbols] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn the_portable_codeview_entry_is_found_behind_a_windows_one() {
    let b = windows_entry_first(0);
    // The library chooses by kind, not position.
    let image = PeImage::parse(&b).unwrap();
    let kinds: Vec<(u32, u16)> = image.debug_entries().unwrap().iter().map(|e| (e.kind, e.minor)).collect();
    assert_eq!(kinds[..2], [(DEBUG_TYPE_CODEVIEW, 0), (DEBUG_TYPE_CODEVIEW, PORTABLE_CODEVIEW_MINOR)]);
    let cv = image.codeview().unwrap().unwrap();
    assert!(cv.is_portable());
    assert_eq!(cv.file_name(), "Frames.pdb");
    finds_its_pdb_three_ways(&b, "windows-first");
}

#[test]
fn a_debug_directory_at_any_alignment_is_read() {
    for misalign in 0..4 {
        let bytes = std::fs::read(fixture("release-portable/Frames.dll")).unwrap();
        let entries = debug_dir(&bytes).entries;
        let (b, _) = with_directory(&bytes, &entries, &[], misalign);
        let at = {
            let image = PeImage::parse(&b).unwrap();
            image.rva_to_offset(u32_at(&b, debug_dir(&b).field)).unwrap()
        };
        assert_eq!(at as usize % 4, misalign);
        finds_its_pdb_three_ways(&b, &format!("misaligned-{misalign}"));
        // Both at once: a Windows entry first, in a directory at an odd offset.
        finds_its_pdb_three_ways(&windows_entry_first(misalign), &format!("both-{misalign}"));
    }
}

/// Every fixture assembly's debug directory, moved to each alignment from 0 to 3, reads the same
/// entries, the same CodeView entry and the same embedded PDB.
#[test]
fn every_fixture_assembly_reads_its_debug_directory_at_every_alignment() {
    let mut assemblies: Vec<PathBuf> = ["release-portable", "release-embedded", "debug-portable", "debug-embedded"].iter().map(|d| fixture(&format!("{d}/Frames.dll"))).collect();
    assemblies.push(repo_root().join("tests/fixtures/perf/Hot.dll"));
    for path in assemblies {
        let bytes = std::fs::read(&path).unwrap();
        let original = PeImage::parse(&bytes).unwrap();
        let want_entries = original.debug_entries().unwrap();
        let want_cv = original.codeview().unwrap().map(|cv| (cv.guid, cv.age, cv.path.to_owned()));
        let want_embedded = clrmap::pdb::embedded::embedded_pdb(&original).unwrap();
        assert!(want_cv.is_some(), "{}", path.display());
        for misalign in 0..4 {
            let (b, _) = with_directory(&bytes, &debug_dir(&bytes).entries, &[], misalign);
            let image = PeImage::parse(&b).unwrap_or_else(|e| panic!("{} at {misalign}: {e}", path.display()));
            assert_eq!(image.debug_entries().unwrap(), want_entries, "{} at {misalign}", path.display());
            assert_eq!(image.codeview().unwrap().map(|cv| (cv.guid, cv.age, cv.path.to_owned())), want_cv, "{} at {misalign}", path.display());
            assert_eq!(clrmap::pdb::embedded::embedded_pdb(&image).unwrap(), want_embedded, "{} at {misalign}", path.display());
            if want_embedded.is_some() {
                assert!(want_entries.iter().any(|e| e.kind == DEBUG_TYPE_EMBEDDED_PORTABLE_PDB));
            }
        }
    }
}

#[test]
fn a_pdb_of_another_build_beside_the_assembly_is_named_with_both_ids() {
    let dir = scratch("another-build");
    std::fs::copy(fixture("release-portable/Frames.dll"), dir.join("Frames.dll")).unwrap();
    // The Debug build's PDB: same name, another id.
    std::fs::copy(fixture("debug-portable/Frames.pdb"), dir.join("Frames.pdb")).unwrap();
    let guid = |p: &Path| clrmap::pdb::PortablePdb::parse(&std::fs::read(p).unwrap()).unwrap().id().guid_hex();
    let (have, want) = (guid(&fixture("debug-portable/Frames.pdb")), guid(&fixture("release-portable/Frames.pdb")));
    assert_ne!(have, want);
    let o = clrmap(&["pdb", "lines", s(&dir.join("Frames.dll"))]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.starts_with("error: not_found"), "{err}");
    let note = format!("note: {} is another build (PDB GUID {have}, not the {want} wanted); not used\n", dir.join("Frames.pdb").display());
    assert!(err.contains(&note), "{err}\nwanted: {note}");
    assert!(err.contains(&format!("note: Frames.pdb (PDB GUID {want}) was looked for at {}", dir.join("Frames.pdb").display())), "{err}");
    // In JSON the notes go into the message.
    let o = clrmap(&["pdb", "lines", s(&dir.join("Frames.dll")), "--json"]);
    let err = stderr(&o);
    assert_eq!(code(&o), Some(1));
    let v: serde_json::Value = serde_json::from_str(err.trim()).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["error"]["kind"], "not_found");
    assert!(v["error"]["message"].as_str().unwrap().contains(&format!("another build (PDB GUID {have}, not the {want} wanted)")), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_assembly_that_names_only_a_windows_pdb_says_so() {
    let bytes = std::fs::read(fixture("release-portable/Frames.dll")).unwrap();
    let old = debug_dir(&bytes);
    // The only CodeView entry is a Windows one (the portable one is dropped).
    let probe = with_directory(&bytes, &vec![[0u8; 28]; old.entries.len()], &[], 0).1;
    let guid: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
    let (entry, data) = windows_codeview(guid, "C:\\src\\obj\\Frames.ni.pdb", probe);
    let entries: Vec<[u8; 28]> = std::iter::once(entry).chain(old.entries.iter().copied().filter(|e| u32_at(e, 12) != DEBUG_TYPE_CODEVIEW)).collect();
    let (b, _) = with_directory(&bytes, &entries, &data, 0);
    let dir = scratch("windows-only");
    std::fs::write(dir.join("Frames.dll"), &b).unwrap();
    // Even with the right portable PDB beside it, it names none.
    std::fs::copy(fixture("release-portable/Frames.pdb"), dir.join("Frames.pdb")).unwrap();
    let o = clrmap(&["pdb", "lines", s(&dir.join("Frames.dll"))]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    // GUID byte order: the first three fields are little-endian.
    assert!(
        err.contains("note: the assembly names only a Windows PDB, C:\\src\\obj\\Frames.ni.pdb (GUID 0403020106050807090A0B0C0D0E0F10, age 1), which clrmap does not read: it reads portable PDBs\n"),
        "{err}"
    );
    // And --pdb with it is a mismatch that says what the assembly names.
    let o = clrmap(&["pdb", "lines", s(&dir.join("Frames.dll")), "--pdb", s(&fixture("release-portable/Frames.pdb"))]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("pdb_mismatch"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(dir);
}

/// The real case: 3.1.23's Windows-built ReadyToRun `System.Threading.Thread.dll` (win-x64 and
/// win-x86, from scripts/install-r2r-images.sh) names its `.ni.pdb` first and its portable PDB
/// second. The portable one is chosen, and without the PDB the note names it and its id. On the SDK
/// machine NuGet serves no 3.1 Windows pack; 10.0.12's Windows images do the same (measured:
/// win-x64 and win-x86 `System.Linq.dll` name `System.Linq.ni.pdb`, then the portable PDB; its
/// `System.Threading.Thread.dll` is a facade without ReadyToRun code or a `.ni.pdb`).
#[test]
#[ignore = "needs .NET"]
fn the_windows_built_framework_names_its_portable_pdb_second() {
    let home = std::env::var_os("CLRMAP_DOTNET_HOME").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".dotnet"));
    let version = ["3.1.23", "10.0.12"].into_iter().find(|v| home.join("win/x64").join(v).join(".complete").is_file());
    let version = version.expect("no Windows framework: run scripts/install-r2r-images.sh");
    // 10.0's System.Threading.Thread.dll is a facade with no ReadyToRun code: System.Linq.dll there.
    let name = if version == "3.1.23" { "System.Threading.Thread" } else { "System.Linq" };
    for arch in ["x64", "x86"] {
        let path = home.join("win").join(arch).join(version).join(format!("{name}.dll"));
        assert!(path.is_file(), "{} is missing: run scripts/install-r2r-images.sh", path.display());
        let bytes = std::fs::read(&path).unwrap();
        let image = PeImage::parse(&bytes).unwrap();
        let cvs: Vec<u16> = image.debug_entries().unwrap().iter().filter(|e| e.kind == DEBUG_TYPE_CODEVIEW).map(|e| e.minor).collect();
        assert_eq!(cvs, [0, PORTABLE_CODEVIEW_MINOR], "{arch} {version}: a Windows entry, then the portable one");
        let cv = image.codeview().unwrap().unwrap();
        assert!(cv.is_portable(), "{arch}");
        assert_eq!(cv.file_name(), format!("{name}.pdb"));
        // With no PDB anywhere, an address in a method says why it has no line: the note names
        // the portable PDB and its id (not the .ni.pdb).
        let rva = clrmap::r2r::ReadyToRunImage::parse(&bytes).unwrap().code_bodies().unwrap()[0].rva.unwrap();
        let o = clrmap(&["symbolize", s(&path), &format!("{:#x}", rva + 1)]);
        let err = stderr(&o);
        assert_eq!(code(&o), Some(0), "{err}");
        let guid = clrmap::pdb::PdbId(cv.pdb_id()).guid_hex();
        assert!(err.contains(&format!("note: {name}.dll: {name}.pdb (PDB GUID {guid}) was looked for at ")), "{arch}: {err}");
        assert!(!err.contains("ni.pdb"), "{err}");
    }
}

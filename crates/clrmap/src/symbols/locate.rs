//! Finding a module's portable PDB, and proving it is the right one.
//!
//! For an assembly, candidates in order (SRM's `PEReader.TryOpenAssociatedPortablePdb`
//! does the first and third):
//! 1. the PDB embedded in the assembly (debug directory entry 17);
//! 2. a PDB the user named (`--pdb FILE`);
//! 3. beside the assembly, by the file name in its CodeView entry;
//! 4. each symbol directory (`--symbol-path DIR`), flat (`DIR/name.pdb`) and in the symbol-server
//!    layout (`DIR/name.pdb/<GUID><stamp>/name.pdb`, also with `FFFFFFFF` for the stamp).
//!
//! A file PDB is used only if its id equals the CodeView entry's GUID and stamp. A PDB the user
//! named that does not match is a `pdb_mismatch` error; any other candidate that does not match,
//! or does not parse, is skipped. A line from the wrong PDB is never given.
//!
//! A recording (an EventPipe trace's ModuleLoad events) names each module's PDB by the CodeView
//! GUID of the image the runtime loaded ([`RecordedPdb`]). [`find_recorded_pdb`] finds that PDB
//! without the assembly: the PDB the user named, beside the module's recorded path, at the path
//! the build wrote into the image, and in each symbol directory (flat, and in the symbol-server
//! layout under any key that starts with the GUID). A candidate is used only if its id starts
//! with that GUID (a portable PDB's id is the GUID and a stamp).
//!
//! The other way round, [`open_pdb_with`] finds the assembly of a PDB, for method names: the one
//! the user named, or one beside the PDB (or in a symbol directory) with the PDB's stem and
//! `.dll` or `.exe`, whose CodeView entry asks for exactly this PDB's id.

use std::path::{Path, PathBuf};

use super::source::{guid_hex, PdbQuery, SymbolSource};
pub use super::source::{FoundPdb, PassedOver, PdbOrigin, SymbolPaths};
use super::why::Why;
use crate::base::fs::plain_file_name;
use crate::base::fs::{read_input, read_regular, OpenError, MAX_FILE};
use crate::base::read::{Error, ErrorKind, Result};
use crate::formats::pdb::embedded::embedded_pdb;
pub use crate::formats::pdb::RecordedPdb;
use crate::formats::pdb::{PdbId, PortablePdb};
use crate::formats::pe::PeImage;

/// The GUID of the portable CodeView entry of the PE image in `file`, read from its headers, its
/// debug directory and the entry's first bytes alone: a few KiB, whatever the file's size.
/// `None` when the file is not a PE image with a CodeView `RSDS` entry, or cannot be read. A
/// candidate assembly is checked this way before it is read whole.
pub fn peek_codeview_guid<F: std::io::Read + std::io::Seek>(file: &mut F) -> Option<[u8; 16]> {
    use crate::base::read::Reader;
    use std::io::SeekFrom;
    // Reads `len` bytes at `at`, or `None`.
    fn read_at<F: std::io::Read + std::io::Seek>(file: &mut F, at: u64, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; len];
        file.seek(SeekFrom::Start(at)).ok()?;
        file.read_exact(&mut buf).ok()?;
        Some(buf)
    }
    let dos = read_at(file, 0, 64)?;
    let mut r = Reader::new(&dos, 0);
    if r.u16("MZ").ok()? != 0x5A4D {
        return None;
    }
    r.skip(0x3A, "the DOS header").ok()?;
    let pe = u64::from(r.u32("e_lfanew").ok()?);
    let head = read_at(file, pe, 24)?;
    let mut r = Reader::new(&head, pe);
    if r.u32("PE").ok()? != 0x0000_4550 {
        return None;
    }
    r.skip(2, "Machine").ok()?;
    let sections = usize::from(r.u16("NumberOfSections").ok()?);
    r.skip(12, "the COFF header").ok()?;
    let optional_size = usize::from(r.u16("SizeOfOptionalHeader").ok()?);
    let optional = read_at(file, pe.checked_add(24)?, optional_size)?;
    let mut r = Reader::new(&optional, 0);
    // The debug directory is data directory 6: at 144 in a PE32 optional header, 160 in PE32+.
    let debug_at = match r.u16("Magic").ok()? {
        0x10B => 144,
        0x20B => 160,
        _ => return None,
    };
    let mut r = Reader::new(optional.get(debug_at..)?, 0);
    let (debug_rva, debug_size) = (r.u32("the debug directory RVA").ok()?, r.u32("its size").ok()?);
    let table = read_at(file, pe.checked_add(24)?.checked_add(u64::try_from(optional_size).ok()?)?, sections.checked_mul(40)?)?;
    // The section holding the debug directory gives its file offset.
    let debug_file = table.chunks_exact(40).find_map(|s| {
        let mut r = Reader::new(s, 0);
        r.skip(8, "Name").ok()?;
        let (vsize, va, raw_size, raw) = (r.u32("VirtualSize").ok()?, r.u32("VirtualAddress").ok()?, r.u32("SizeOfRawData").ok()?, r.u32("PointerToRawData").ok()?);
        let within = debug_rva.checked_sub(va)?;
        (within < vsize.max(raw_size)).then(|| u64::from(raw).checked_add(u64::from(within))).flatten()
    })?;
    // At most 64 entries of 28 bytes are looked at.
    let whole = usize::try_from(debug_size.min(64 * 28)).ok()?;
    let entries = read_at(file, debug_file, whole.checked_sub(whole.checked_rem(28)?)?)?;
    let data = entries.chunks_exact(28).find_map(|e| {
        let mut r = Reader::new(e, 0);
        r.skip(10, "Characteristics, TimeDateStamp, MajorVersion").ok()?;
        let minor = r.u16("MinorVersion").ok()?;
        let kind = r.u32("Type").ok()?;
        r.skip(8, "SizeOfData, AddressOfRawData").ok()?;
        // The portable CodeView entry, wherever it stands (`PeImage::codeview`'s rule).
        (kind == crate::formats::pe::DEBUG_TYPE_CODEVIEW && minor == crate::formats::pe::PORTABLE_CODEVIEW_MINOR).then(|| r.u32("PointerToRawData").ok()).flatten()
    })?;
    let cv = read_at(file, u64::from(data), 20)?;
    let mut r = Reader::new(&cv, 0);
    if r.u32("RSDS").ok()? != 0x5344_5352 {
        return None;
    }
    r.array::<16>("the PDB GUID").ok()
}

/// A candidate assembly's bytes, read whole only once its CodeView GUID (peeked from its
/// headers, [`peek_codeview_guid`]) is `guid`; one with another is noted in `passed`. `None` also
/// when it cannot be read or has no CodeView entry.
pub fn read_candidate_assembly(path: &Path, guid: &[u8; 16], passed: &mut Vec<PassedOver>) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    read_candidate_assembly_into(path, guid, passed, &mut bytes).then_some(bytes)
}

/// [`read_candidate_assembly`] into `bytes` (cleared, its memory reused: [`crate::base::fs::read_regular_into`]);
/// `false` where that gives `None` (a candidate is a guess: one that cannot be read is no error).
pub fn read_candidate_assembly_into(path: &Path, guid: &[u8; 16], passed: &mut Vec<PassedOver>, bytes: &mut Vec<u8>) -> bool {
    bytes.clear();
    let Some(mut file) = crate::base::fs::open_regular(path).ok() else { return false };
    let Some(found) = peek_codeview_guid(&mut file) else { return false };
    if &found != guid {
        passed.push(PassedOver { path: path.to_owned(), guid: found, wanted: *guid, windows_pdb: false });
        return false;
    }
    crate::base::fs::read_regular_into(path, MAX_FILE, bytes).is_ok()
}

/// Check that a PDB the user named belongs to an image: `pdb_mismatch` at the PDB's id if not,
/// and at offset 0 if the image names no portable PDB at all.
pub fn check_explicit(image: &PeImage<'_>, pdb_bytes: &[u8]) -> Result<()> {
    let pdb = PortablePdb::parse(pdb_bytes)?;
    let want = image.codeview()?.filter(|cv| cv.is_portable()).map(|cv| cv.pdb_id());
    match want {
        Some(id) if id == pdb.id().0 => Ok(()),
        Some(_) => Err(Error::new(ErrorKind::PdbMismatch, pdb.id_offset(), "the PDB id the assembly's CodeView entry names")),
        None => Err(Error::nowhere(ErrorKind::PdbMismatch, "an assembly with a portable CodeView entry")),
    }
}

/// Check that a PDB the user named is the one a recording names for a module: `pdb_mismatch` at
/// the PDB's id if its GUID is another.
pub fn check_recorded(recorded: &RecordedPdb, pdb_bytes: &[u8]) -> Result<()> {
    let pdb = PortablePdb::parse(pdb_bytes)?;
    if pdb.id().guid() == recorded.guid {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::PdbMismatch, pdb.id_offset(), "the PDB id the recording names for the module"))
    }
}

/// Find the PDB of an assembly. `assembly_path` is where the assembly was read from (for the
/// beside-the-assembly candidate). `Ok(None)` when no matching PDB exists; `Err` only for a PDB
/// the user named that is not this assembly's (`pdb_mismatch`) or cannot be parsed, or a
/// malformed embedded PDB. A PDB the user named that cannot be read is `not_found`, with no
/// path: [`locate_pdb`] says which file and why.
pub fn find_pdb(image: &PeImage<'_>, assembly_path: Option<&Path>, paths: &SymbolPaths) -> Result<Option<FoundPdb>> {
    locate_pdb(image, assembly_path, paths).map_err(|e| match e {
        OpenError::Input { error, .. } | OpenError::NoModule { error, .. } => error,
        OpenError::Io { .. } | OpenError::Unrecognized { .. } => Error::nowhere(ErrorKind::NotFound, "a readable PDB file"),
    })
}

/// [`find_pdb`], with errors that name their file: a PDB the user named that cannot be read is
/// [`OpenError::Io`] with its path and the reason (missing, a directory, a FIFO, a device, too
/// large, a symbolic-link loop); one that is malformed or not this assembly's is
/// [`OpenError::Input`] at its path; a malformed embedded PDB is [`OpenError::Input`] at
/// `assembly_path`.
pub fn locate_pdb(image: &PeImage<'_>, assembly_path: Option<&Path>, paths: &SymbolPaths) -> core::result::Result<Option<FoundPdb>, OpenError> {
    locate_pdb_noting(image, assembly_path, paths, &mut Vec::new())
}

/// [`locate_pdb`], noting in `passed` each candidate PDB of another build it passed over.
pub fn locate_pdb_noting(image: &PeImage<'_>, assembly_path: Option<&Path>, paths: &SymbolPaths, passed: &mut Vec<PassedOver>) -> core::result::Result<Option<FoundPdb>, OpenError> {
    let at_assembly = |error: Error| OpenError::Input { path: assembly_path.map(Path::to_owned).unwrap_or_default(), error };
    if let Some(bytes) = embedded_pdb(image).map_err(at_assembly)? {
        return Ok(Some(FoundPdb { bytes, origin: PdbOrigin::Embedded }));
    }
    if let Some(explicit) = &paths.pdb {
        let bytes = read_input(explicit, MAX_FILE)?;
        check_explicit(image, &bytes).map_err(|error| OpenError::Input { path: explicit.clone(), error })?;
        return Ok(Some(FoundPdb { bytes, origin: PdbOrigin::Explicit(explicit.clone()) }));
    }
    let Some(cv) = image.codeview().ok().flatten().filter(|cv| cv.is_portable()) else { return Ok(None) };
    let name = cv.file_name();
    // A name with a path separator or `..` left in it would leave the directory searched.
    if !plain_file_name(name) {
        return Ok(None);
    }
    // The symbol servers are asked with the image's PdbChecksum entries as the `SymbolChecksum`
    // header, and only a file with exactly this id is kept.
    let checksums: Vec<String> = image.pdb_checksums().iter().map(|(alg, sum)| format!("{alg}:{}", upper_hex(sum))).collect();
    let query = PdbQuery { name, guid: cv.guid, stamp: Some(PdbId(cv.pdb_id()).stamp()), checksums: &checksums };
    Ok(paths.sources(assembly_path.and_then(Path::parent), None).iter().find_map(|source| source.find(&query, passed)))
}

/// Bytes as upper-case hex (a `SymbolChecksum` header's checksum, as .NET's tools send it).
fn upper_hex(bytes: &[u8]) -> String {
    use core::fmt::Write;
    let mut s = String::with_capacity(bytes.len().saturating_mul(2));
    for b in bytes {
        let _ = write!(s, "{b:02X}");
    }
    s
}

/// Why an image's PDB was not found, one line each, for a user who wonders why there are no
/// lines: the image names no PDB, or only a Windows (MSF) PDB, which clrmap does not
/// read; a name that is not a plain file name; each file passed over as another build, with both
/// ids; and otherwise where the PDB was looked for.
pub fn why_no_pdb(image: &PeImage<'_>, assembly_path: Option<&Path>, paths: &SymbolPaths, passed: &[PassedOver]) -> Vec<String> {
    why_no_pdb_structured(image, assembly_path, paths, passed).iter().map(ToString::to_string).collect()
}

/// [`why_no_pdb`], as values with fields (for JSON).
pub fn why_no_pdb_structured(image: &PeImage<'_>, assembly_path: Option<&Path>, paths: &SymbolPaths, passed: &[PassedOver]) -> Vec<Why> {
    why_no_pdb_with(image, assembly_path, paths, passed, ServerNotes::All)
}

/// [`why_no_pdb`] for a long-lived process (the service): of the symbol servers' failures, only
/// those for this PDB's own key, so one module's answer never lists what other modules' keys met.
pub fn why_no_pdb_of_its_key(image: &PeImage<'_>, assembly_path: Option<&Path>, paths: &SymbolPaths, passed: &[PassedOver]) -> Vec<String> {
    why_no_pdb_with(image, assembly_path, paths, passed, ServerNotes::ItsKey).iter().map(ToString::to_string).collect()
}

/// Which of the symbol servers' failures a [`why_no_pdb`] lists.
#[derive(Clone, Copy)]
enum ServerNotes {
    /// Every failure of the run, in order (a one-shot command: an unreachable server is asked
    /// once, for the first key, and is still why the later modules have no PDB).
    All,
    /// The failures for the PDB's own key.
    ItsKey,
}

fn why_no_pdb_with(image: &PeImage<'_>, assembly_path: Option<&Path>, paths: &SymbolPaths, passed: &[PassedOver], server_notes: ServerNotes) -> Vec<Why> {
    let cv = match image.codeview() {
        Ok(Some(cv)) => cv,
        Ok(None) => return vec![Why::NoPdbNamed],
        Err(e) => return vec![Why::BadDebugDirectory { message: format!("{}{}: {}", e.kind, e.location, e.message()) }],
    };
    if !cv.is_portable() {
        return vec![Why::WindowsPdb { pdb: cv.path.to_owned(), pdb_id: guid_hex(&cv.guid), age: cv.age }];
    }
    let name = cv.file_name();
    if !plain_file_name(name) {
        return vec![Why::NotAFileName { pdb: cv.path.to_owned() }];
    }
    let mut why: Vec<Why> = passed.iter().map(PassedOver::why).collect();
    if let Some(servers) = &paths.servers {
        match server_notes {
            ServerNotes::All => why.extend(servers.failures()),
            ServerNotes::ItsKey => {
                if let Some(key) = crate::symbols::symsrv::key::portable_pdb(name, &cv.guid) {
                    why.extend(servers.failures_for(&key));
                }
            }
        }
    }
    let query = PdbQuery { name, guid: cv.guid, stamp: Some(PdbId(cv.pdb_id()).stamp()), checksums: &[] };
    let places = paths.sources(assembly_path.and_then(Path::parent), None).iter().flat_map(|s| s.places(&query)).collect();
    why.push(Why::LookedFor { pdb: name.to_owned(), pdb_id: guid_hex(&cv.guid), places: distinct_places(places) });
    why
}

/// Places in order, each once: the assembly's folder is often a symbol directory too, and a
/// recorded path is often beside the module. Of two entries for one file, the one that says more
/// (`(flat and by key)`) is kept, where the first stood.
fn distinct_places(places: Vec<String>) -> Vec<String> {
    const KEYED: &str = " (flat and by key)";
    let mut out: Vec<String> = Vec::with_capacity(places.len());
    for p in places {
        let file = p.strip_suffix(KEYED).unwrap_or(&p);
        match out.iter_mut().find(|q| q.strip_suffix(KEYED).unwrap_or(q) == file) {
            Some(q) if p.ends_with(KEYED) => *q = p,
            Some(_) => {}
            None => out.push(p),
        }
    }
    out
}

/// Where [`find_recorded_pdb`] looked for a recorded module's PDB, as a [`Why::LookedFor`]
/// (`None` when the recording names no file name to look for).
pub fn recorded_looked_for(recorded: &RecordedPdb, module_path: Option<&Path>, paths: &SymbolPaths) -> Option<Why> {
    let name = recorded_pdb_name(recorded, module_path)?;
    let query = recorded_query(recorded, &name, &[]);
    let mut places: Vec<String> = paths.pdb.iter().map(|p| p.display().to_string()).collect();
    places.extend(recorded_sources(recorded, module_path, paths).iter().flat_map(|s| s.places(&query)));
    Some(Why::LookedFor { pdb: name, pdb_id: recorded.guid_hex(), places: distinct_places(places) })
}

/// What a recording asks for: its module's PDB by GUID alone (any stamp).
fn recorded_query<'a>(recorded: &RecordedPdb, name: &'a str, checksums: &'a [String]) -> PdbQuery<'a> {
    PdbQuery { name, guid: recorded.guid, stamp: None, checksums }
}

/// Where a recorded module's PDB is looked for, in order: beside the module's recorded path (the
/// runtime records absolute paths; one that is not, a Windows path read here, names no directory
/// of this machine), the recorded build path, the symbol directories and servers.
fn recorded_sources<'a>(recorded: &'a RecordedPdb, module_path: Option<&'a Path>, paths: &'a SymbolPaths) -> Vec<Box<dyn SymbolSource + 'a>> {
    paths.sources(module_path.filter(|p| p.is_absolute()).and_then(Path::parent), Some(Path::new(&recorded.path)))
}

/// [`why_no_pdb`] for the assembly at `path`, read again (a failure path only); nothing when it
/// cannot be read or parsed, which its own error already says.
pub fn explain_missing_pdb(path: &Path, paths: &SymbolPaths) -> Vec<String> {
    let Ok(bytes) = read_regular(path, MAX_FILE) else { return Vec::new() };
    let Ok(image) = PeImage::parse(&bytes) else { return Vec::new() };
    let mut passed = Vec::new();
    match locate_pdb_noting(&image, Some(path), paths, &mut passed) {
        Ok(None) => why_no_pdb(&image, Some(path), paths, &passed),
        _ => Vec::new(),
    }
}

/// The file name of a recorded module's PDB: the recorded build path's, else the module's stem
/// with `.pdb`; `None` when neither is a plain file name.
fn recorded_pdb_name(recorded: &RecordedPdb, module_path: Option<&Path>) -> Option<String> {
    if plain_file_name(recorded.file_name()) {
        return Some(recorded.file_name().to_owned());
    }
    // The module's file name after either separator (a Windows path is read here too).
    let file = module_path.map(|p| p.to_string_lossy().rsplit(['/', '\\']).next().unwrap_or_default().to_owned());
    let stem_name = file.as_deref().and_then(|f| Path::new(f).file_stem()).map(|s| format!("{}.pdb", s.to_string_lossy()));
    stem_name.filter(|n| plain_file_name(n))
}

/// Find a module's PDB from what a recording says about it, without its assembly.
/// `module_path` is where the module was loaded from (a candidate PDB may lie beside it).
/// Candidates: the PDB the user named (`paths.pdb`: an error unless it is readable and has the
/// recorded GUID); beside `module_path`; the recorded build path; then each symbol directory,
/// flat and in the symbol-server layout. Only a PDB whose id starts with the recorded GUID is
/// used; `Ok(None)` when there is none.
pub fn find_recorded_pdb(recorded: &RecordedPdb, module_path: Option<&Path>, paths: &SymbolPaths) -> core::result::Result<Option<FoundPdb>, OpenError> {
    find_recorded_pdb_noting(recorded, module_path, paths, &mut Vec::new())
}

/// [`find_recorded_pdb`], noting in `passed` each candidate PDB of another build it passed over.
pub fn find_recorded_pdb_noting(recorded: &RecordedPdb, module_path: Option<&Path>, paths: &SymbolPaths, passed: &mut Vec<PassedOver>) -> core::result::Result<Option<FoundPdb>, OpenError> {
    if let Some(explicit) = &paths.pdb {
        let bytes = read_input(explicit, MAX_FILE)?;
        check_recorded(recorded, &bytes).map_err(|error| OpenError::Input { path: explicit.clone(), error })?;
        return Ok(Some(FoundPdb { bytes, origin: PdbOrigin::Explicit(explicit.clone()) }));
    }
    let Some(name) = recorded_pdb_name(recorded, module_path) else { return Ok(None) };
    let checksums: Vec<String> = recorded.checksums.iter().map(|(alg, sum)| format!("{alg}:{}", upper_hex(sum))).collect();
    let query = recorded_query(recorded, &name, &checksums);
    Ok(recorded_sources(recorded, module_path, paths).iter().find_map(|source| source.find(&query, passed)))
}

/// A PDB opened for reading, with the assembly it belongs to when one is known.
#[derive(Clone, Debug)]
pub struct OpenedPdb {
    /// The portable PDB's bytes.
    pub pdb: FoundPdb,
    /// The assembly's bytes (for method names): the assembly the path named, the one the user
    /// named beside a PDB, or one found beside the PDB with its id.
    pub assembly: Option<Vec<u8>>,
}

/// Open the PDB at `path`, or, when `path` is an assembly (`MZ`), the PDB found for it. For a
/// PDB, the assembly is looked for beside it (see [`open_pdb_with`]).
pub fn open_pdb(path: &Path, paths: &SymbolPaths) -> core::result::Result<OpenedPdb, OpenError> {
    open_pdb_with(path, paths, None)
}

/// [`open_pdb`], with the assembly of a PDB named by the user (`assembly`, used when `path` is a
/// PDB): it must be readable and its CodeView entry must ask for this PDB's id, or opening fails
/// (`pdb_mismatch`). Without it, the assembly is the first file with the PDB's stem and `.dll` or
/// `.exe` (also upper case), beside the PDB and then in each symbol directory, whose CodeView
/// entry asks for exactly this PDB's id; none is found: no assembly (no method names).
pub fn open_pdb_with(path: &Path, paths: &SymbolPaths, assembly: Option<&Path>) -> core::result::Result<OpenedPdb, OpenError> {
    let bytes = read_input(path, MAX_FILE)?;
    let input = |error: Error| OpenError::Input { path: path.to_owned(), error };
    if !bytes.starts_with(b"MZ") {
        // A PDB itself: parse it once now so that a bad one fails here, with its kind.
        PortablePdb::parse(&bytes).map_err(input)?;
        let assembly = match assembly {
            Some(a) => {
                let image_bytes = read_input(a, MAX_FILE)?;
                let image = PeImage::parse(&image_bytes).map_err(|error| OpenError::Input { path: a.to_owned(), error })?;
                check_explicit(&image, &bytes).map_err(input)?;
                Some(image_bytes)
            }
            None => assembly_of(path, &bytes, paths),
        };
        return Ok(OpenedPdb { pdb: FoundPdb { bytes, origin: PdbOrigin::Explicit(path.to_owned()) }, assembly });
    }
    let image = PeImage::parse(&bytes).map_err(input)?;
    let found = locate_pdb(&image, Some(path), paths)?;
    let Some(pdb) = found else {
        return Err(input(Error::nowhere(ErrorKind::NotFound, "a portable PDB for this assembly (embedded, --pdb, beside it, or in --symbol-path)")));
    };
    Ok(OpenedPdb { pdb, assembly: Some(bytes) })
}

/// The assembly a PDB belongs to, by the rule of [`open_pdb_with`].
fn assembly_of(pdb_path: &Path, pdb_bytes: &[u8], paths: &SymbolPaths) -> Option<Vec<u8>> {
    let stem = pdb_path.file_stem()?.to_string_lossy().into_owned();
    let guid = PortablePdb::parse(pdb_bytes).ok()?.id().guid();
    let dirs = pdb_path.parent().map(|d| if d.as_os_str().is_empty() { Path::new(".") } else { d }).into_iter().chain(paths.dirs.iter().map(PathBuf::as_path));
    for dir in dirs {
        for ext in ["dll", "exe", "DLL", "EXE"] {
            let Some(bytes) = read_candidate_assembly(&dir.join(format!("{stem}.{ext}")), &guid, &mut Vec::new()) else { continue };
            if PeImage::parse(&bytes).is_ok_and(|image| check_explicit(&image, pdb_bytes).is_ok()) {
                return Some(bytes);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_place_is_named_once() {
        let got = distinct_places(vec!["/a/X.pdb".into(), "/b/X.pdb".into(), "/a/X.pdb (flat and by key)".into(), "/b/X.pdb".into(), "symbol server s".into()]);
        assert_eq!(got, ["/a/X.pdb (flat and by key)", "/b/X.pdb", "symbol server s"]);
    }

    #[test]
    fn a_recorded_path_that_is_not_absolute_names_no_directory() {
        let recorded = RecordedPdb { guid: [7; 16], age: 1, path: "C:\\src\\obj\\Frames.pdb".to_owned(), checksums: Vec::new() };
        let paths = SymbolPaths { pdb: None, dirs: vec![PathBuf::from("/symbols")], servers: None };
        let places = |recorded: &RecordedPdb, module: &str| match recorded_looked_for(recorded, Some(Path::new(module)), &paths) {
            Some(Why::LookedFor { places, .. }) => places,
            other => panic!("{other:?}"),
        };
        // A Windows path read on Linux: neither it nor its "parent" is a place here.
        assert_eq!(places(&recorded, "C:\\app\\Frames.dll"), ["/symbols/Frames.pdb (flat and by key)"]);
        // With no usable PDB name recorded, the module's own name gives it.
        let nameless = RecordedPdb { path: String::new(), ..recorded.clone() };
        assert_eq!(places(&nameless, "C:\\app\\Frames.dll"), ["/symbols/Frames.pdb (flat and by key)"]);
        // An absolute one: beside it first, then the build's own path.
        let recorded = RecordedPdb { path: "/_/obj/Frames.pdb".to_owned(), ..recorded };
        assert_eq!(places(&recorded, "/app/Frames.dll"), ["/app/Frames.pdb", "/_/obj/Frames.pdb", "/symbols/Frames.pdb (flat and by key)"]);
    }
}

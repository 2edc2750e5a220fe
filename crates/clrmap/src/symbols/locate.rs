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

use super::why::Why;
use crate::base::fs::plain_file_name;
use crate::base::fs::{read_input, read_regular, OpenError, MAX_FILE};
use crate::base::read::{Error, ErrorKind, Result};
use crate::formats::pdb::embedded::embedded_pdb;
pub use crate::formats::pdb::RecordedPdb;
use crate::formats::pdb::{PdbId, PortablePdb};
use crate::formats::pe::PeImage;
use crate::symbols::symsrv::SymbolServers;

/// Where to look for PDBs besides the assembly itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymbolPaths {
    /// A PDB the user named. It must match, or finding fails with `pdb_mismatch`.
    pub pdb: Option<PathBuf>,
    /// Symbol directories, searched in order.
    pub dirs: Vec<PathBuf>,
    /// Symbol servers and their cache, asked after every directory (`None`: no server). Shared,
    /// so what one lookup learns (a 404, a server that is down) holds for the whole run.
    pub servers: Option<std::sync::Arc<SymbolServers>>,
}

/// Where a PDB was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PdbOrigin {
    /// Embedded in the assembly.
    Embedded,
    /// Named by the user.
    Explicit(PathBuf),
    /// Beside the assembly.
    BesideAssembly(PathBuf),
    /// In a symbol directory.
    SymbolPath(PathBuf),
    /// From a symbol server, or its cache: the cache entry.
    SymbolServer(PathBuf),
    /// At the path the build wrote into the image's CodeView entry, as a recording gives it.
    BuildPath(PathBuf),
}

impl PdbOrigin {
    /// The file the PDB was read from; `None` when it is embedded in its assembly.
    pub fn path(&self) -> Option<&Path> {
        match self {
            PdbOrigin::Embedded => None,
            PdbOrigin::Explicit(p) | PdbOrigin::BesideAssembly(p) | PdbOrigin::SymbolPath(p) | PdbOrigin::SymbolServer(p) | PdbOrigin::BuildPath(p) => Some(p),
        }
    }
}

/// A PDB's bytes, proven to belong to the assembly, and where they came from.
#[derive(Clone, Debug)]
pub struct FoundPdb {
    /// The whole portable PDB.
    pub bytes: Vec<u8>,
    /// Where it was found.
    pub origin: PdbOrigin,
}

/// Does the PDB at `bytes` have the id this assembly's CodeView entry asks for?
fn matches(bytes: &[u8], want: &[u8; 20]) -> Result<bool> {
    let pdb = PortablePdb::parse(bytes)?;
    Ok(&pdb.id().0 == want)
}

/// Does the PDB at `bytes` have an id that starts with this GUID?
fn guid_matches(bytes: &[u8], guid: &[u8; 16]) -> bool {
    PortablePdb::parse(bytes).is_ok_and(|pdb| &pdb.id().guid() == guid)
}

/// A candidate's bytes, or `None` if it cannot be read for any reason (candidates are guesses;
/// only the files the user named are errors when unreadable).
fn read_candidate(path: &Path) -> Option<Vec<u8>> {
    read_regular(path, MAX_FILE).ok()
}

/// A candidate PDB's bytes, read whole only once its header's id passes `check` (a few KiB read
/// first, so a huge file of another build, or a sparse one, costs nothing). A portable PDB whose
/// id fails the check is noted in `passed`.
fn read_candidate_pdb(path: &Path, wanted: [u8; 16], check: impl Fn(&PdbId) -> bool, passed: &mut Vec<PassedOver>) -> Option<Vec<u8>> {
    let mut file = crate::base::fs::open_regular(path).ok()?;
    let Some(id) = crate::formats::pdb::peek_id(&mut file) else {
        if is_windows_pdb_file(&mut file) {
            passed.push(PassedOver { path: path.to_owned(), guid: [0; 16], wanted, windows_pdb: true });
        }
        return None;
    };
    if !check(&id) {
        passed.push(PassedOver { path: path.to_owned(), guid: id.guid(), wanted, windows_pdb: false });
        return None;
    }
    read_candidate(path)
}

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
    let mut file = crate::base::fs::open_regular(path).ok()?;
    let found = peek_codeview_guid(&mut file)?;
    if &found != guid {
        passed.push(PassedOver { path: path.to_owned(), guid: found, wanted: *guid, windows_pdb: false });
        return None;
    }
    read_candidate(path)
}

/// Whether the file starts as a Windows (MSF) PDB.
fn is_windows_pdb_file<F: std::io::Read + std::io::Seek>(file: &mut F) -> bool {
    use std::io::{Read, SeekFrom};
    let mut head = Vec::new();
    file.seek(SeekFrom::Start(0)).is_ok() && file.by_ref().take(64).read_to_end(&mut head).is_ok() && crate::formats::pdb::is_windows_pdb(&head)
}

/// A file found where a module's PDB or assembly was looked for, but of another build (another
/// PDB GUID), or a Windows PDB, and so not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassedOver {
    /// The file.
    pub path: PathBuf,
    /// The PDB GUID it has (a PDB's id, or an assembly's CodeView entry), in GUID byte order.
    pub guid: [u8; 16],
    /// The PDB GUID that was looked for (the assembly's CodeView entry, or the recording's).
    pub wanted: [u8; 16],
    /// The file is a Windows (MSF) PDB, which clrmap does not read (`guid` is then zero).
    pub windows_pdb: bool,
}

impl PassedOver {
    /// The GUID as the symbol-server key writes it (32 upper-case hex digits).
    pub fn guid_hex(&self) -> String {
        guid_hex(&self.guid)
    }

    /// What a user is told about it: the file, the id it has and the id that was wanted.
    pub fn note(&self) -> String {
        self.why().to_string()
    }

    /// [`Self::note`], with fields.
    pub fn why(&self) -> Why {
        if self.windows_pdb {
            return Why::WindowsPdbFile { path: self.path.display().to_string() };
        }
        Why::AnotherBuild { path: self.path.display().to_string(), pdb_id: self.guid_hex(), wanted: guid_hex(&self.wanted) }
    }
}

/// A GUID (GUID byte order) as the symbol-server key writes it.
fn guid_hex(guid: &[u8; 16]) -> String {
    let mut id = [0u8; 20];
    for (d, s) in id.iter_mut().zip(guid.iter()) {
        *d = *s;
    }
    PdbId(id).guid_hex()
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
    let want = cv.pdb_id();
    let name = cv.file_name();
    // A name with a path separator or `..` left in it would leave the directory searched.
    if !plain_file_name(name) {
        return Ok(None);
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = assembly_path.and_then(Path::parent) {
        candidates.push(dir.join(name));
    }
    let id = PdbId(want);
    let guid = id.guid_hex();
    let keys = [format!("{guid}{:08X}", id.stamp()), format!("{guid}FFFFFFFF")];
    // The key layout also with the name lowercased, as SSQP keys (and clrmap's cache) write it.
    let lower = name.to_ascii_lowercase();
    let names: &[&str] = if lower == name { &[name] } else { &[name, &lower] };
    for dir in &paths.dirs {
        candidates.push(dir.join(name));
        for n in names {
            for key in &keys {
                candidates.push(dir.join(n).join(key).join(n));
                candidates.push(dir.join(n).join(key.to_ascii_lowercase()).join(n));
            }
        }
    }
    let beside = usize::from(assembly_path.and_then(Path::parent).is_some());
    for (i, path) in candidates.into_iter().enumerate() {
        let Some(bytes) = read_candidate_pdb(&path, cv.guid, |id| id.0 == want, passed) else { continue };
        if matches(&bytes, &want).unwrap_or(false) {
            let origin = if i < beside { PdbOrigin::BesideAssembly(path) } else { PdbOrigin::SymbolPath(path) };
            return Ok(Some(FoundPdb { bytes, origin }));
        }
    }
    // Last, the symbol servers: by the PDB's SSQP key, with the image's PdbChecksum entries as
    // the `SymbolChecksum` header, and only a file with exactly this id is kept.
    let checksums: Vec<String> = image.pdb_checksums().iter().map(|(alg, sum)| format!("{alg}:{}", upper_hex(sum))).collect();
    Ok(from_servers(paths, name, &cv.guid, &checksums, &|id| id.0 == want))
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

/// A PDB named `name` with this GUID from the symbol servers (or their cache), if any has one
/// whose id passes `check`.
fn from_servers(paths: &SymbolPaths, name: &str, guid: &[u8; 16], checksums: &[String], check: &dyn Fn(&PdbId) -> bool) -> Option<FoundPdb> {
    let servers = paths.servers.as_ref()?;
    let key = crate::symbols::symsrv::key::portable_pdb(name, guid)?;
    let headers: Vec<(&str, String)> = if checksums.is_empty() { Vec::new() } else { vec![("SymbolChecksum", checksums.join(";"))] };
    // Whether a file is the one the key names: the header's id first (a few KiB), so junk or
    // another build costs nothing; then the whole PDB must parse with that GUID. What the caller
    // asks beyond the key (the stamp) is checked after: a PDB of the key is never junk.
    let good = |p: &Path| {
        let id_ok = crate::base::fs::open_regular(p).ok().and_then(|mut f| crate::formats::pdb::peek_id(&mut f)).is_some_and(|id| &id.guid() == guid);
        id_ok && read_candidate(p).is_some_and(|b| PortablePdb::parse(&b).is_ok_and(|pdb| &pdb.id().guid() == guid))
    };
    let entry = servers.fetch(&key, &headers, &good)?;
    let bytes = read_candidate(&entry)?;
    PortablePdb::parse(&bytes).ok().filter(|pdb| check(&pdb.id()))?;
    Some(FoundPdb { bytes, origin: PdbOrigin::SymbolServer(entry) })
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
    let mut places: Vec<String> = assembly_path.and_then(Path::parent).map(|d| d.join(name).display().to_string()).into_iter().collect();
    places.extend(paths.dirs.iter().map(|d| format!("{} (flat and by key)", d.join(name).display())));
    if let Some(servers) = &paths.servers {
        why.extend(servers.failures());
        places.extend(servers.config().servers.iter().map(|s| format!("symbol server {s}")));
    }
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
    // Where `recorded_candidates` looks, a place per directory (its key layouts are implied).
    let mut places: Vec<String> = paths.pdb.iter().map(|p| p.display().to_string()).collect();
    if let Some(dir) = module_path.filter(|p| p.is_absolute()).and_then(Path::parent) {
        places.push(dir.join(&name).display().to_string());
    }
    if Path::new(&recorded.path).is_absolute() {
        places.push(recorded.path.clone());
    }
    places.extend(paths.dirs.iter().map(|d| format!("{} (flat and by key)", d.join(&name).display())));
    if let Some(servers) = &paths.servers {
        places.extend(servers.config().servers.iter().map(|s| format!("symbol server {s}")));
    }
    Some(Why::LookedFor { pdb: name, pdb_id: recorded.guid_hex(), places: distinct_places(places) })
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

/// The symbol-server directories under `dir/name` whose key starts with `guid` (32 hex digits,
/// either case) and has 8 more hex digits (the stamp, or `FFFFFFFF`), at most a few thousand
/// entries read.
fn keyed_dirs(dir: &Path, name: &str, guid: &str) -> Vec<PathBuf> {
    const MAX_ENTRIES: usize = 4096;
    let Ok(entries) = std::fs::read_dir(dir.join(name)) else { return Vec::new() };
    entries
        .take(MAX_ENTRIES)
        .filter_map(|e| e.ok())
        .filter(|e| {
            let key = e.file_name();
            let key = key.to_string_lossy();
            key.len() == 40 && key.get(..32).is_some_and(|g| g.eq_ignore_ascii_case(guid)) && key.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .map(|e| e.path().join(name))
        .collect()
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

/// A candidate PDB's path, and what its origin is called if it matches.
type Candidate = (PathBuf, fn(PathBuf) -> PdbOrigin);

/// Where [`find_recorded_pdb`] looks, in order (not the PDB the user named).
fn recorded_candidates(recorded: &RecordedPdb, module_path: Option<&Path>, paths: &SymbolPaths) -> Vec<Candidate> {
    let Some(name) = recorded_pdb_name(recorded, module_path) else { return Vec::new() };
    let mut candidates: Vec<Candidate> = Vec::new();
    // The runtime records absolute paths; one that is not (a Windows path read here) names no
    // directory of this machine.
    if let Some(dir) = module_path.filter(|p| p.is_absolute()).and_then(Path::parent) {
        candidates.push((dir.join(&name), PdbOrigin::BesideAssembly));
    }
    let build = Path::new(&recorded.path);
    if build.is_absolute() {
        candidates.push((build.to_owned(), PdbOrigin::BuildPath));
    }
    let guid = recorded.guid_hex();
    // The key layout also with the name lowercased, as SSQP keys (and clrmap's cache) write it.
    let lower = name.to_ascii_lowercase();
    let names: Vec<&str> = if lower == name { vec![&name] } else { vec![&name, &lower] };
    for dir in &paths.dirs {
        candidates.push((dir.join(&name), PdbOrigin::SymbolPath));
        for n in &names {
            for key in [format!("{guid}FFFFFFFF"), format!("{}ffffffff", guid.to_ascii_lowercase())] {
                candidates.push((dir.join(n).join(key).join(n), PdbOrigin::SymbolPath));
            }
            candidates.extend(keyed_dirs(dir, n, &guid).into_iter().map(|p| (p, PdbOrigin::SymbolPath as fn(PathBuf) -> PdbOrigin)));
        }
    }
    candidates
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
    for (path, origin) in recorded_candidates(recorded, module_path, paths) {
        let Some(bytes) = read_candidate_pdb(&path, recorded.guid, |id| id.guid() == recorded.guid, passed) else { continue };
        if guid_matches(&bytes, &recorded.guid) {
            return Ok(Some(FoundPdb { bytes, origin: origin(path) }));
        }
    }
    let name = recorded_pdb_name(recorded, module_path);
    let checksums: Vec<String> = recorded.checksums.iter().map(|(alg, sum)| format!("{alg}:{}", upper_hex(sum))).collect();
    Ok(name.and_then(|name| from_servers(paths, &name, &recorded.guid, &checksums, &|id| id.guid() == recorded.guid)))
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
        // A Windows path read on Linux: neither it nor its "parent" is a place here.
        let got: Vec<PathBuf> = recorded_candidates(&recorded, Some(Path::new("C:\\app\\Frames.dll")), &paths).into_iter().map(|c| c.0).collect();
        assert!(got.iter().all(|p| p.starts_with("/symbols")), "{got:?}");
        assert_eq!(got.first(), Some(&PathBuf::from("/symbols/Frames.pdb")));
        // With no usable PDB name recorded, the module's own name gives it.
        let nameless = RecordedPdb { path: String::new(), ..recorded.clone() };
        let got = recorded_candidates(&nameless, Some(Path::new("C:\\app\\Frames.dll")), &paths);
        assert_eq!(got.first().map(|c| c.0.clone()), Some(PathBuf::from("/symbols/Frames.pdb")));
        // An absolute one: beside it first, then the build's own path.
        let recorded = RecordedPdb { path: "/_/obj/Frames.pdb".to_owned(), ..recorded };
        let got: Vec<PathBuf> = recorded_candidates(&recorded, Some(Path::new("/app/Frames.dll")), &paths).into_iter().map(|c| c.0).collect();
        assert_eq!(got.get(..3), Some(&[PathBuf::from("/app/Frames.pdb"), PathBuf::from("/_/obj/Frames.pdb"), PathBuf::from("/symbols/Frames.pdb")][..]));
    }
}

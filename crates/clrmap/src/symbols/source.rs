//! Symbol sources: the places a portable PDB is looked for, one type each, in the order
//! [`SymbolPaths::sources`] gives them.
//!
//! A source is asked for one PDB by its file name and id ([`PdbQuery`]) and answers with the
//! PDB's bytes, proven to carry that id, or nothing. It also says where it looked, for the note a
//! user reads when no PDB was found. The two places whose failure is an error rather than a miss,
//! the PDB embedded in an assembly and the PDB the user named, are not sources: the locator
//! (`locate`) tries them first.
//!
//! To add a source (a debuginfod client, a build-artifact store), write a type here that
//! implements [`SymbolSource`] and put it in its place in [`SymbolPaths::sources`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::why::Why;
use crate::base::fs::{open_regular, read_regular, MAX_FILE};
use crate::formats::pdb::{PdbId, PortablePdb};
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
pub(crate) fn guid_hex(guid: &[u8; 16]) -> String {
    crate::base::guid::Guid(*guid).key_hex()
}

/// One portable PDB, as a source is asked for it.
#[derive(Clone, Copy, Debug)]
pub struct PdbQuery<'a> {
    /// Its file name: a plain name (no separator, no `..`), checked by whoever builds the query.
    pub name: &'a str,
    /// The GUID of its id (GUID byte order).
    pub guid: [u8; 16],
    /// The stamp of its id, when the asker knows the whole id (an assembly's CodeView entry).
    /// `None` when only the GUID is known (a recording), and any stamp is taken.
    pub stamp: Option<u32>,
    /// `algorithm:HEX` checksums of the PDB (the image's PdbChecksum entries), sent to symbol
    /// servers as the `SymbolChecksum` header.
    pub checksums: &'a [String],
}

impl PdbQuery<'_> {
    /// Whether a PDB with this id is the one asked for.
    pub fn accepts(&self, id: &PdbId) -> bool {
        id.guid() == self.guid && self.stamp.is_none_or(|s| id.stamp() == s)
    }

    /// The GUID as symbol-server keys write it (32 upper-case hex digits).
    fn guid_hex(&self) -> String {
        guid_hex(&self.guid)
    }
}

/// A place a PDB may be found.
pub trait SymbolSource {
    /// The PDB asked for, if this source has it: a file whose id `query` accepts. A candidate of
    /// another build (or a Windows PDB) is noted in `passed` and skipped.
    fn find(&self, query: &PdbQuery<'_>, passed: &mut Vec<PassedOver>) -> Option<FoundPdb>;

    /// Where it looks for `query`, as a user is told, one entry per place.
    fn places(&self, query: &PdbQuery<'_>) -> Vec<String>;
}

impl SymbolPaths {
    /// The sources a PDB is looked for in, in order: beside the module (`module_dir`), at the
    /// path the build wrote (`build_path`, a recording's; only when absolute), each symbol
    /// directory, then the symbol servers.
    pub fn sources<'a>(&'a self, module_dir: Option<&'a Path>, build_path: Option<&'a Path>) -> Vec<Box<dyn SymbolSource + 'a>> {
        let mut out: Vec<Box<dyn SymbolSource + 'a>> = Vec::new();
        if let Some(dir) = module_dir {
            out.push(Box::new(BesideModule(dir)));
        }
        if let Some(path) = build_path.filter(|p| p.is_absolute()) {
            out.push(Box::new(BuildPath(path)));
        }
        out.extend(self.dirs.iter().map(|d| Box::new(SymbolDir(d)) as Box<dyn SymbolSource + 'a>));
        if let Some(servers) = &self.servers {
            out.push(Box::new(Servers(servers)));
        }
        out
    }
}

/// A candidate file's bytes if its id is the one asked for: the header's id is read first (a few
/// KiB), so a huge file of another build costs nothing; then the whole PDB must parse with it.
fn candidate(path: &Path, query: &PdbQuery<'_>, passed: &mut Vec<PassedOver>) -> Option<Vec<u8>> {
    let mut file = open_regular(path).ok()?;
    let Some(id) = crate::formats::pdb::peek_id(&mut file) else {
        if is_windows_pdb_file(&mut file) {
            passed.push(PassedOver { path: path.to_owned(), guid: [0; 16], wanted: query.guid, windows_pdb: true });
        }
        return None;
    };
    if !query.accepts(&id) {
        passed.push(PassedOver { path: path.to_owned(), guid: id.guid(), wanted: query.guid, windows_pdb: false });
        return None;
    }
    let bytes = read_regular(path, MAX_FILE).ok()?;
    PortablePdb::parse(&bytes).is_ok_and(|pdb| query.accepts(&pdb.id())).then_some(bytes)
}

/// Whether the file starts as a Windows (MSF) PDB.
fn is_windows_pdb_file<F: std::io::Read + std::io::Seek>(file: &mut F) -> bool {
    use std::io::{Read, SeekFrom};
    let mut head = Vec::new();
    file.seek(SeekFrom::Start(0)).is_ok() && file.by_ref().take(64).read_to_end(&mut head).is_ok() && crate::formats::pdb::is_windows_pdb(&head)
}

/// The folder the module (the assembly, or the recorded module path) was loaded from.
struct BesideModule<'a>(&'a Path);

impl SymbolSource for BesideModule<'_> {
    fn find(&self, query: &PdbQuery<'_>, passed: &mut Vec<PassedOver>) -> Option<FoundPdb> {
        let path = self.0.join(query.name);
        let bytes = candidate(&path, query, passed)?;
        Some(FoundPdb { bytes, origin: PdbOrigin::BesideAssembly(path) })
    }

    fn places(&self, query: &PdbQuery<'_>) -> Vec<String> {
        vec![self.0.join(query.name).display().to_string()]
    }
}

/// The path the build wrote into the image's CodeView entry, as a recording gives it: on the
/// machine that built the module, often the one that runs it.
struct BuildPath<'a>(&'a Path);

impl SymbolSource for BuildPath<'_> {
    fn find(&self, query: &PdbQuery<'_>, passed: &mut Vec<PassedOver>) -> Option<FoundPdb> {
        let bytes = candidate(self.0, query, passed)?;
        Some(FoundPdb { bytes, origin: PdbOrigin::BuildPath(self.0.to_owned()) })
    }

    fn places(&self, _: &PdbQuery<'_>) -> Vec<String> {
        vec![self.0.display().to_string()]
    }
}

/// A symbol directory (`--symbol-path`): flat (`DIR/name.pdb`), and in the symbol-server layout
/// (`DIR/name.pdb/<GUID><stamp>/name.pdb`, the stamp also `FFFFFFFF`, the key and the name in
/// either case, as SSQP keys and clrmap's cache write them). Asked by GUID alone, any directory
/// whose key starts with the GUID is tried.
struct SymbolDir<'a>(&'a Path);

impl SymbolDir<'_> {
    fn candidates(&self, query: &PdbQuery<'_>) -> Vec<PathBuf> {
        let dir = self.0;
        let name = query.name;
        let mut out = vec![dir.join(name)];
        let lower = name.to_ascii_lowercase();
        let names: &[&str] = if lower == name { &[name] } else { &[name, &lower] };
        let guid = query.guid_hex();
        let keys: Vec<String> = match query.stamp {
            Some(stamp) => vec![format!("{guid}{stamp:08X}"), format!("{guid}FFFFFFFF")],
            None => vec![format!("{guid}FFFFFFFF")],
        };
        for n in names {
            for key in &keys {
                out.push(dir.join(n).join(key).join(n));
                out.push(dir.join(n).join(key.to_ascii_lowercase()).join(n));
            }
            if query.stamp.is_none() {
                out.extend(keyed_dirs(dir, n, &guid));
            }
        }
        out
    }
}

impl SymbolSource for SymbolDir<'_> {
    fn find(&self, query: &PdbQuery<'_>, passed: &mut Vec<PassedOver>) -> Option<FoundPdb> {
        self.candidates(query).into_iter().find_map(|path| {
            let bytes = candidate(&path, query, passed)?;
            Some(FoundPdb { bytes, origin: PdbOrigin::SymbolPath(path) })
        })
    }

    fn places(&self, query: &PdbQuery<'_>) -> Vec<String> {
        vec![format!("{} (flat and by key)", self.0.join(query.name).display())]
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

/// SSQP symbol servers and their cache: asked by the PDB's key, with the checksums as the
/// `SymbolChecksum` header; only a file with the asked id is kept.
struct Servers<'a>(&'a Arc<SymbolServers>);

impl SymbolSource for Servers<'_> {
    fn find(&self, query: &PdbQuery<'_>, _: &mut Vec<PassedOver>) -> Option<FoundPdb> {
        let key = crate::symbols::symsrv::key::portable_pdb(query.name, &query.guid)?;
        let headers: Vec<(&str, String)> = if query.checksums.is_empty() { Vec::new() } else { vec![("SymbolChecksum", query.checksums.join(";"))] };
        // Whether a file is the one the key names: the header's id first (a few KiB), so junk or
        // another build costs nothing; then the whole PDB must parse with that GUID. What the
        // query asks beyond the key (the stamp) is checked after: a PDB of the key is never junk.
        let guid = query.guid;
        let good = |p: &Path| {
            let id_ok = open_regular(p).ok().and_then(|mut f| crate::formats::pdb::peek_id(&mut f)).is_some_and(|id| id.guid() == guid);
            id_ok && read_regular(p, MAX_FILE).is_ok_and(|b| PortablePdb::parse(&b).is_ok_and(|pdb| pdb.id().guid() == guid))
        };
        let entry = self.0.fetch(&key, &headers, &good)?;
        let bytes = read_regular(&entry, MAX_FILE).ok()?;
        PortablePdb::parse(&bytes).ok().filter(|pdb| query.accepts(&pdb.id()))?;
        Some(FoundPdb { bytes, origin: PdbOrigin::SymbolServer(entry) })
    }

    fn places(&self, _: &PdbQuery<'_>) -> Vec<String> {
        self.0.config().servers.iter().map(|s| format!("symbol server {s}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(stamp: Option<u32>) -> PdbQuery<'static> {
        PdbQuery { name: "Frames.pdb", guid: [0x11; 16], stamp, checksums: &[] }
    }

    #[test]
    fn a_query_by_guid_takes_any_stamp_and_one_by_id_only_its_own() {
        let mut id = [0x11u8; 20];
        id[16..].copy_from_slice(&7u32.to_le_bytes());
        assert!(query(None).accepts(&PdbId(id)));
        assert!(query(Some(7)).accepts(&PdbId(id)));
        assert!(!query(Some(8)).accepts(&PdbId(id)));
        id[0] = 0x12;
        assert!(!query(None).accepts(&PdbId(id)));
    }

    #[test]
    fn sources_come_in_order_and_a_build_path_only_when_absolute() {
        let paths = SymbolPaths { pdb: None, dirs: vec![PathBuf::from("/s1"), PathBuf::from("/s2")], servers: None };
        let q = query(None);
        let places = |module: Option<&Path>, build: Option<&Path>| paths.sources(module, build).iter().flat_map(|s| s.places(&q)).collect::<Vec<_>>();
        assert_eq!(
            places(Some(Path::new("/app")), Some(Path::new("/_/obj/Frames.pdb"))),
            ["/app/Frames.pdb", "/_/obj/Frames.pdb", "/s1/Frames.pdb (flat and by key)", "/s2/Frames.pdb (flat and by key)"]
        );
        assert_eq!(places(None, Some(Path::new("C:\\obj\\Frames.pdb"))), ["/s1/Frames.pdb (flat and by key)", "/s2/Frames.pdb (flat and by key)"]);
    }

    #[test]
    fn a_symbol_directory_tries_flat_then_keys_in_both_cases() {
        let dir = SymbolDir(Path::new("/s"));
        let by_id = dir.candidates(&PdbQuery { name: "Frames.PDB", ..query(Some(0xAB)) });
        let g = "11".repeat(16);
        assert_eq!(by_id.first(), Some(&PathBuf::from("/s/Frames.PDB")));
        assert!(by_id.contains(&PathBuf::from(format!("/s/Frames.PDB/{g}000000AB/Frames.PDB"))));
        assert!(by_id.contains(&PathBuf::from(format!("/s/frames.pdb/{g}ffffffff/frames.pdb"))));
        // By GUID alone there is no stamp to build a key from but FFFFFFFF.
        let by_guid = dir.candidates(&query(None));
        assert!(by_guid.iter().all(|p| !p.to_string_lossy().contains("000000AB")));
    }
}

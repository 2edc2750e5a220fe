//! Finding a module's files by what a front end knows of it: its file name, where a process
//! loaded it, the ids a recording or a request gives. The symbolizer, printed stack traces and
//! the service all come here, so the same module and symbol paths find the same files and give
//! the same notes wherever they are asked.
//!
//! The sources, in order, for a module's PDB:
//! 1. the module's assembly, where the process loaded it, else by file name (and PE key) in each
//!    symbol directory, else in the same shared framework of each .NET installed here, else from
//!    a symbol server by its PE key; then that assembly's PDB by
//!    [`crate::symbols::locate::locate_pdb_noting`] (embedded, the user's, beside it, symbol directories,
//!    symbol servers);
//! 2. with a recorded CodeView id, the PDB without any assembly
//!    ([`crate::symbols::locate::find_recorded_pdb_noting`]);
//! 3. the PDB by file name (the module's stem with `.pdb`) in each symbol directory.
//!
//! A new place for assemblies is one more step in [`RecordedModule::assembly_candidates`]; a new
//! place for PDBs is a source in `source.rs`, which every step above goes through.

use std::path::{Path, PathBuf};

use super::locate::{locate_pdb_noting, open_pdb_with, read_candidate_assembly_into, FoundPdb, PassedOver, SymbolPaths};
use crate::base::fs::{read_regular, MAX_FILE};
use crate::formats::metadata::Metadata;
use crate::formats::pdb::RecordedPdb;
use crate::formats::pe::PeImage;

pub use crate::base::fs::plain_file_name;

/// A module's file name without `.dll` or `.exe` (either case): its PDB's stem.
pub fn module_stem(module: &str) -> &str {
    let n = module.len();
    match n.checked_sub(4).and_then(|i| module.get(i..).map(|ext| (i, ext))) {
        Some((i, ext)) if ext.eq_ignore_ascii_case(".dll") || ext.eq_ignore_ascii_case(".exe") => module.get(..i).unwrap_or(module),
        _ => module,
    }
}

/// The PDB file name of a module: its stem with `.pdb`.
pub fn pdb_name_of(module: &str) -> String {
    format!("{}.pdb", module_stem(module))
}

/// The .NET installations of this machine, each once, in order: `DOTNET_ROOT` (and
/// `DOTNET_ROOT_X64`), the folder of the `dotnet` on `PATH` (its links followed), then the usual
/// places (`/usr/share/dotnet`, `/usr/lib/dotnet`, `/usr/local/share/dotnet`, `/opt/dotnet`,
/// `~/.dotnet`). Read once per process.
pub fn installed_dotnet_roots() -> &'static [PathBuf] {
    static ROOTS: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots: Vec<PathBuf> = Vec::new();
        roots.extend(["DOTNET_ROOT", "DOTNET_ROOT_X64"].iter().filter_map(std::env::var_os).map(PathBuf::from));
        let on_path = std::env::var_os("PATH").into_iter().flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).map(|d| d.join("dotnet")).find(|f| f.is_file());
        roots.extend(on_path.and_then(|f| std::fs::canonicalize(f).ok()).and_then(|f| f.parent().map(Path::to_owned)));
        roots.extend(["/usr/share/dotnet", "/usr/lib/dotnet", "/usr/local/share/dotnet", "/opt/dotnet"].map(PathBuf::from));
        roots.extend(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".dotnet")));
        let mut seen = std::collections::HashSet::new();
        roots.retain(|r| r.is_absolute() && seen.insert(r.clone()));
        roots
    })
}

/// For a path inside a shared framework (`ROOT/shared/FRAMEWORK/VERSION/FILE`, either separator),
/// the same framework, version and file under each installed root; nothing for any other path.
pub fn in_installed_runtimes(path: &Path) -> Vec<PathBuf> {
    in_roots(path, installed_dotnet_roots())
}

fn in_roots(path: &Path, roots: &[PathBuf]) -> Vec<PathBuf> {
    let text = path.to_string_lossy();
    let parts: Vec<&str> = text.split(['/', '\\']).collect();
    let Some(at) = parts.iter().rposition(|p| *p == "shared") else { return Vec::new() };
    let (Some(framework), Some(version), Some(file), None) = (parts.get(at.saturating_add(1)), parts.get(at.saturating_add(2)), parts.get(at.saturating_add(3)), parts.get(at.saturating_add(4)))
    else {
        return Vec::new();
    };
    if ![framework, version, file].iter().all(|p| plain_file_name(p)) {
        return Vec::new();
    }
    roots.iter().map(|r| r.join("shared").join(framework).join(version).join(file)).filter(|p| p.as_path() != path).collect()
}

/// What is known of a module of a recording (a trace, a capture, a process snapshot).
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordedModule<'a> {
    /// Its file name.
    pub name: Option<&'a str>,
    /// Where the process loaded it.
    pub path: Option<&'a Path>,
    /// The CodeView entry of the image the runtime loaded.
    pub recorded: Option<&'a RecordedPdb>,
    /// The MVID of the image the runtime loaded (a capture's).
    pub mvid: Option<[u8; 16]>,
}

/// What a lookup of a recorded module found, and what it learned on the way.
#[derive(Debug, Default)]
pub struct Lookup {
    /// Candidate PDBs and assemblies of another build, passed over.
    pub passed: Vec<PassedOver>,
    /// Assemblies with the module's name but another MVID: path and MVID.
    pub other_builds: Vec<(PathBuf, [u8; 16])>,
    /// Why no PDB was found, where none was.
    pub why: Vec<super::why::Why>,
}

impl RecordedModule<'_> {
    /// Where the module's assembly may be: where the process loaded it, then, for a recording
    /// made on another machine, a file of the same name in each symbol directory.
    ///
    /// A module the recording machine loaded from a shared framework
    /// (`.../shared/Microsoft.NETCore.App/8.0.31/System.Linq.dll`) is then looked for in the same
    /// framework and version of each .NET installed here ([`installed_dotnet_roots`]): a recording
    /// read on another machine, or after its runtime moved, still finds the framework's files
    /// where that runtime is installed. Identity is checked by the caller, as for every candidate.
    pub fn assembly_candidates<'p>(&self, symbols: &'p SymbolPaths) -> impl Iterator<Item = PathBuf> + 'p {
        let name = self.name.filter(|n| plain_file_name(n)).map(str::to_owned);
        let elsewhere = name.into_iter().flat_map(move |n| symbols.dirs.iter().map(move |d| d.join(&n)));
        let installed = self.path.map(in_installed_runtimes).unwrap_or_default();
        self.path.map(Path::to_owned).into_iter().chain(elsewhere).chain(installed)
    }

    /// A candidate assembly's bytes: with a recorded id, a file of another build is passed over
    /// from its headers alone.
    fn read_assembly(&self, path: &Path, passed: &mut Vec<PassedOver>) -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        self.read_assembly_into(path, passed, &mut bytes).then_some(bytes)
    }

    /// [`Self::read_assembly`] into `bytes` (cleared, its memory reused); `false` where that gives `None`.
    fn read_assembly_into(&self, path: &Path, passed: &mut Vec<PassedOver>, bytes: &mut Vec<u8>) -> bool {
        match self.recorded {
            Some(recorded) => read_candidate_assembly_into(path, &recorded.guid, passed, bytes),
            None => crate::base::fs::read_regular_into(path, MAX_FILE, bytes).is_ok(),
        }
    }

    /// The module's PDB. Without a recorded id, the first assembly found decides (its CodeView
    /// entry names the PDB). With one, an assembly of another build is passed over, and the PDB is
    /// also looked for without any assembly. With a recorded MVID (a capture's), only an assembly
    /// with that MVID is the module's: one of another build is passed over (noted), and without the
    /// right one there are no lines.
    pub fn pdb(&self, symbols: &SymbolPaths, lookup: &mut Lookup) -> Option<FoundPdb> {
        for path in self.assembly_candidates(symbols) {
            let Some(bytes) = self.read_assembly(&path, &mut lookup.passed) else { continue };
            let Ok(image) = PeImage::parse(&bytes) else { continue };
            if let Some(want) = self.mvid {
                match Metadata::from_pe(&image).ok().and_then(|md| md.mvid()) {
                    Some(mvid) if mvid == want => {}
                    Some(mvid) => {
                        lookup.other_builds.push((path, mvid));
                        continue;
                    }
                    None => continue,
                }
                let found = locate_pdb_noting(&image, Some(&path), symbols, &mut lookup.passed).ok().flatten();
                if found.is_none() {
                    lookup.why.extend(super::locate::why_no_pdb_structured(&image, Some(&path), symbols, &[]));
                }
                return found;
            }
            let found = locate_pdb_noting(&image, Some(&path), symbols, &mut lookup.passed).ok().flatten();
            if found.is_none() && self.recorded.is_none() {
                lookup.why.extend(super::locate::why_no_pdb_structured(&image, Some(&path), symbols, &[]));
            }
            if found.is_some() || self.recorded.is_none() {
                return found;
            }
            break;
        }
        let recorded = self.recorded?;
        let found = super::locate::find_recorded_pdb_noting(recorded, self.path, symbols, &mut lookup.passed).ok().flatten();
        if found.is_none() {
            lookup.why.extend(super::locate::recorded_looked_for(recorded, self.path, symbols));
        }
        found
    }

    /// The bytes of the module's assembly of the recorded build: its CodeView GUID is the
    /// recorded PDB's (traces), its MVID the recorded one (captures).
    pub fn assembly(&self, symbols: &SymbolPaths) -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        self.assembly_into(symbols, &mut bytes).then_some(bytes)
    }

    /// [`Self::assembly`] into `bytes`, which is cleared and keeps its memory (a caller reading
    /// many modules' assemblies one after another pays for fresh pages once); `false` where that
    /// gives `None`, with `bytes` then holding no module's assembly.
    pub fn assembly_into(&self, symbols: &SymbolPaths, bytes: &mut Vec<u8>) -> bool {
        for path in self.assembly_candidates(symbols) {
            if !self.read_assembly_into(&path, &mut Vec::new(), bytes) {
                continue;
            }
            if let Some(want) = self.mvid {
                let Ok(image) = PeImage::parse(bytes) else {
                    bytes.clear();
                    return false;
                };
                if Metadata::from_pe(&image).ok().and_then(|md| md.mvid()) != Some(want) {
                    continue;
                }
            }
            return true;
        }
        bytes.clear();
        false
    }
}

/// A module's image's PE key: the COFF header's time stamp and the optional header's
/// `SizeOfImage`, as the symbol-server key of an image writes them.
pub fn pe_key_of(bytes: &[u8]) -> Option<(u32, u32)> {
    let u32_at = |at: usize| -> Option<u32> { Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?)) };
    let pe = usize::try_from(u32_at(0x3c)?).ok()?;
    if bytes.get(pe..pe.checked_add(4)?)? != b"PE\0\0" {
        return None;
    }
    let ts = u32_at(pe.checked_add(8)?)?;
    let size = u32_at(pe.checked_add(24 + 56)?)?;
    Some((ts, size))
}

/// A module's MVID, from its metadata.
pub fn mvid_of(bytes: &[u8]) -> Option<[u8; 16]> {
    PeImage::parse(bytes).ok().and_then(|pe| Metadata::from_pe(&pe).ok()).and_then(|md| md.mvid())
}

/// Why [`find_image`] found no image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageMiss {
    /// No candidate at all.
    NotFound,
    /// A symbol server's image under the PE key has another MVID than the one asked for.
    OtherMvid {
        /// The image's symbol-server key.
        key: String,
        /// Its MVID, if it has one.
        has: Option<[u8; 16]>,
    },
}

/// Find a module's image (an assembly, or a ReadyToRun image) by file name: in each symbol
/// directory, flat (`DIR/name`) and in the symbol-server layout under its PE key, then from the
/// symbol servers by that key. Only a file whose MVID and PE key match the ones given (where
/// given) is taken. A server's file (and its cache's) is checked against its key alone, so a
/// wrong MVID never makes a good cache entry junk: it is this module's answer
/// ([`ImageMiss::OtherMvid`]).
pub fn find_image(name: &str, mvid: Option<[u8; 16]>, pe_key: Option<(u32, u32)>, paths: &SymbolPaths) -> Result<(PathBuf, Vec<u8>), ImageMiss> {
    if !plain_file_name(name) {
        return Err(ImageMiss::NotFound);
    }
    let of_key = |bytes: &[u8]| bytes.starts_with(b"MZ") && pe_key.is_none_or(|k| pe_key_of(bytes) == Some(k));
    let of_mvid = |bytes: &[u8]| mvid.is_none_or(|m| mvid_of(bytes) == Some(m));
    let key = pe_key.and_then(|(t, s)| crate::symbols::symsrv::key::pe_image(name, t, s));
    for dir in &paths.dirs {
        let mut candidates = vec![dir.join(name)];
        if let (Some(key), Some((t, s))) = (&key, pe_key) {
            candidates.push(dir.join(key.as_str()));
            candidates.push(dir.join(name).join(format!("{t:08X}{s:x}")).join(name));
        }
        for c in candidates {
            if let Ok(bytes) = read_regular(&c, MAX_FILE) {
                if of_key(&bytes) && of_mvid(&bytes) {
                    return Ok((c, bytes));
                }
            }
        }
    }
    let (Some(servers), Some(key)) = (paths.servers.as_ref(), key) else { return Err(ImageMiss::NotFound) };
    let check = |p: &Path| read_regular(p, MAX_FILE).is_ok_and(|b| of_key(&b));
    let entry = servers.fetch(&key, &[], &check).ok_or(ImageMiss::NotFound)?;
    let bytes = read_regular(&entry, MAX_FILE).ok().filter(|b| of_key(b)).ok_or(ImageMiss::NotFound)?;
    if !of_mvid(&bytes) {
        return Err(ImageMiss::OtherMvid { key: key.as_str().to_owned(), has: mvid_of(&bytes) });
    }
    Ok((entry, bytes))
}

/// A PDB found by its file name alone in the symbol directories: the first regular file
/// `DIR/pdb_name`, with its bytes or why they cannot be read. Used when a module's assembly is
/// nowhere to be found, so nothing proves the PDB's build: the caller says so.
pub fn pdb_by_name(pdb_name: &str, paths: &SymbolPaths) -> Option<(PathBuf, Result<Vec<u8>, crate::base::fs::OpenError>)> {
    if !plain_file_name(pdb_name) {
        return None;
    }
    paths.dirs.iter().map(|d| d.join(pdb_name)).find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file())).map(|p| {
        let bytes = crate::base::fs::read_input(&p, MAX_FILE);
        (p, bytes)
    })
}

/// The assembly of a found PDB, for method names: one with the PDB's stem beside it or in a
/// symbol directory whose CodeView id asks for exactly this PDB (never from a server).
pub fn assembly_of_pdb(found: &FoundPdb, paths: &SymbolPaths) -> Option<Vec<u8>> {
    let path = found.origin.path()?;
    let local = SymbolPaths { pdb: None, dirs: paths.dirs.clone(), servers: None };
    open_pdb_with(path, &local, None).ok()?.assembly
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_framework_file_is_looked_for_in_each_installed_root() {
        let roots = [PathBuf::from("/usr/share/dotnet"), PathBuf::from("/home/u/.dotnet")];
        let recorded = Path::new("/build/agent/.dotnet/shared/Microsoft.NETCore.App/8.0.31/System.Linq.dll");
        assert_eq!(
            in_roots(recorded, &roots),
            [PathBuf::from("/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.31/System.Linq.dll"), PathBuf::from("/home/u/.dotnet/shared/Microsoft.NETCore.App/8.0.31/System.Linq.dll")]
        );
        // A Windows path from the recording machine too.
        assert_eq!(in_roots(Path::new("C:\\Program Files\\dotnet\\shared\\Microsoft.AspNetCore.App\\8.0.4\\Microsoft.AspNetCore.dll"), &roots[..1]).len(), 1);
        // Not a shared framework, or a path that would leave the root: nothing.
        assert!(in_roots(Path::new("/app/bin/App.dll"), &roots).is_empty());
        assert!(in_roots(Path::new("/x/shared/../8.0/App.dll"), &roots).is_empty());
        assert!(in_roots(Path::new("/x/shared/Microsoft.NETCore.App/8.0.31/sub/App.dll"), &roots).is_empty());
        // The recorded file itself is not repeated.
        assert_eq!(in_roots(recorded, &[PathBuf::from("/build/agent/.dotnet")]), Vec::<PathBuf>::new());
    }

    #[test]
    fn only_a_plain_name_is_a_file_name() {
        for bad in ["", ".", "..", "a/b", "a\\b", "a\0b", "../x.dll", &"x".repeat(256)] {
            assert!(!plain_file_name(bad), "{bad:?}");
        }
        for good in ["App.dll", "..App.dll", "a b.pdb", &"x".repeat(255)] {
            assert!(plain_file_name(good), "{good:?}");
        }
    }

    #[test]
    fn the_stem_drops_dll_and_exe_in_either_case() {
        assert_eq!(module_stem("App.dll"), "App");
        assert_eq!(module_stem("App.EXE"), "App");
        assert_eq!(module_stem("App.Core"), "App.Core");
        assert_eq!(module_stem(".dll"), "");
        assert_eq!(pdb_name_of("System.Linq.dll"), "System.Linq.pdb");
    }
}

//! Finding a module's portable PDB, and proving it is the right one.
//!
//! Candidates, in order (issue 12; SRM's `PEReader.TryOpenAssociatedPortablePdb` does the first
//! and third):
//! 1. the PDB embedded in the assembly (debug directory entry 17);
//! 2. a PDB the user named (`--pdb FILE`);
//! 3. beside the assembly, by the file name in its CodeView entry;
//! 4. each symbol directory (`--symbol-path DIR`), flat (`DIR/name.pdb`) and in the symbol-server
//!    layout (`DIR/name.pdb/<GUID><stamp>/name.pdb`, also with `FFFFFFFF` for the stamp).
//!
//! A file PDB is used only if its id equals the CodeView entry's GUID and stamp. A PDB the user
//! named that does not match is a `pdb_mismatch` error; any other candidate that does not match,
//! or does not parse, is skipped. A line from the wrong PDB is never given.

use std::path::{Path, PathBuf};

use super::embedded::embedded_pdb;
use super::PortablePdb;
use crate::fs::{read_regular, MAX_FILE};
use crate::pe::PeImage;
use crate::read::{Error, ErrorKind, Result};

/// Where to look for PDBs besides the assembly itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymbolPaths {
    /// A PDB the user named. It must match, or finding fails with `pdb_mismatch`.
    pub pdb: Option<PathBuf>,
    /// Symbol directories, searched in order.
    pub dirs: Vec<PathBuf>,
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

/// Find the PDB of an assembly. `assembly_path` is where the assembly was read from (for the
/// beside-the-assembly candidate). `Ok(None)` when no matching PDB exists; `Err` only for a PDB
/// the user named that is not this assembly's (`pdb_mismatch`) or cannot be parsed, or a
/// malformed embedded PDB.
pub fn find_pdb(image: &PeImage<'_>, assembly_path: Option<&Path>, paths: &SymbolPaths) -> Result<Option<FoundPdb>> {
    if let Some(bytes) = embedded_pdb(image)? {
        return Ok(Some(FoundPdb { bytes, origin: PdbOrigin::Embedded }));
    }
    if let Some(explicit) = &paths.pdb {
        let bytes = read_regular(explicit, MAX_FILE).map_err(|_| Error::nowhere(ErrorKind::NotFound, "a readable PDB file"))?;
        check_explicit(image, &bytes)?;
        return Ok(Some(FoundPdb { bytes, origin: PdbOrigin::Explicit(explicit.clone()) }));
    }
    let Some(cv) = image.codeview().ok().flatten().filter(|cv| cv.is_portable()) else { return Ok(None) };
    let want = cv.pdb_id();
    let name = cv.file_name();
    // A name with a path separator or `..` left in it would leave the directory searched.
    if name.is_empty() || name == "." || name == ".." {
        return Ok(None);
    }
    let mut candidates: Vec<(PathBuf, bool)> = Vec::new();
    if let Some(dir) = assembly_path.and_then(Path::parent) {
        candidates.push((dir.join(name), false));
    }
    let id = super::PdbId(want);
    let guid = id.guid_hex();
    let keys = [format!("{guid}{:08X}", id.stamp()), format!("{guid}FFFFFFFF")];
    for dir in &paths.dirs {
        candidates.push((dir.join(name), true));
        for key in &keys {
            candidates.push((dir.join(name).join(key).join(name), true));
            candidates.push((dir.join(name).join(key.to_ascii_lowercase()).join(name), true));
        }
    }
    for (path, in_symbol_dir) in candidates {
        let Ok(bytes) = read_regular(&path, MAX_FILE) else { continue };
        if matches(&bytes, &want).unwrap_or(false) {
            let origin = if in_symbol_dir { PdbOrigin::SymbolPath(path) } else { PdbOrigin::BesideAssembly(path) };
            return Ok(Some(FoundPdb { bytes, origin }));
        }
    }
    Ok(None)
}

/// A PDB opened for reading, with the assembly it belongs to when the user named an assembly.
#[derive(Clone, Debug)]
pub struct OpenedPdb {
    /// The portable PDB's bytes.
    pub pdb: FoundPdb,
    /// The assembly's bytes (for method names), when the path named one.
    pub assembly: Option<Vec<u8>>,
}

/// Open the PDB at `path`, or, when `path` is an assembly (`MZ`), the PDB found for it.
pub fn open_pdb(path: &Path, paths: &SymbolPaths) -> core::result::Result<OpenedPdb, crate::symbolizer::OpenError> {
    use crate::symbolizer::OpenError;
    let bytes = read_regular(path, MAX_FILE).map_err(|error| OpenError::Io { path: path.to_owned(), error })?;
    let input = |error: Error| OpenError::Input { path: path.to_owned(), error };
    if !bytes.starts_with(b"MZ") {
        // A PDB itself: parse it once now so that a bad one fails here, with its kind.
        PortablePdb::parse(&bytes).map_err(input)?;
        return Ok(OpenedPdb { pdb: FoundPdb { bytes, origin: PdbOrigin::Explicit(path.to_owned()) }, assembly: None });
    }
    let image = PeImage::parse(&bytes).map_err(input)?;
    let found = find_pdb(&image, Some(path), paths).map_err(|error| OpenError::Input { path: paths.pdb.clone().unwrap_or_else(|| path.to_owned()), error })?;
    let Some(pdb) = found else {
        return Err(input(Error::nowhere(ErrorKind::NotFound, "a portable PDB for this assembly (embedded, --pdb, beside it, or in --symbol-path)")));
    };
    Ok(OpenedPdb { pdb, assembly: Some(bytes) })
}

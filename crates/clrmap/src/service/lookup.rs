//! How the service finds a module's symbols: its PDB (by PDB id, by its assembly, or by PDB
//! name) and its image (for ReadyToRun frames), through the symbol paths and the symbol servers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{ident_note, mvid_of, pe_key_of, plain, server_notes, windows_pdb_note, Ident, PdbModule, Service, Slot};
use crate::fs::{read_regular, MAX_FILE};
use crate::locate::{find_recorded_pdb_noting, locate_pdb_noting, open_pdb_with, FoundPdb, PdbOrigin, RecordedPdb, SymbolPaths};
use crate::pdb::{PortablePdb, WINDOWS_PDB_MESSAGE};
use crate::pe::PeImage;
use crate::symbolizer::ModuleSymbols;

impl Service {
    /// Find and parse a module's PDB (and its assembly, for names).
    pub(super) fn load_pdb(&self, ident: &Ident) -> Result<(Slot, u64), String> {
        let paths = &self.config.paths;
        let (found, assembly) = if let Some(guid) = ident.guid {
            let name = ident.pdb_name().ok_or("the module names no PDB file (pdb, debug_file or name)")?;
            // A plain file name: never a path of its own to read (find_recorded_pdb reads an
            // absolute recorded path as the build's).
            let name = plain(&name).ok_or_else(|| format!("the PDB name {name:?} is not a file name"))?.to_owned();
            let recorded = RecordedPdb { guid, age: 1, path: name.clone(), checksums: Vec::new() };
            let mut passed = Vec::new();
            let found = find_recorded_pdb_noting(&recorded, None, paths, &mut passed).map_err(|e| e.to_string())?;
            let key = crate::symsrv::key::portable_pdb(&name, &guid);
            if found.is_none() {
                if let Some(note) = windows_pdb_note(&passed, paths, key.as_ref()) {
                    return Err(note);
                }
            }
            let found = found.ok_or_else(|| format!("no PDB {name} with id {} in the symbol paths or on a symbol server{}", crate::symsrv::key::guid_n(&guid), server_notes(paths, key.as_ref())))?;
            if let Some(stamp) = ident.stamp {
                let id = PortablePdb::parse(&found.bytes).map_err(|e| e.to_string())?.id();
                // Sentry's rule: the age asked for is a lower bound (a symbol server may hold a
                // later age of the same GUID), and a portable PDB's age is its stamp.
                if id.stamp() < stamp {
                    return Err(format!("the PDB found for {name} has stamp {:08x}, below the age {stamp:x} the module gives", id.stamp()));
                }
            }
            let assembly = assembly_of(&found, paths);
            (found, assembly)
        } else if let Some(name) = &ident.name {
            self.pdb_by_assembly(ident, name)?
        } else if let Some(pdb) = ident.pdb_name() {
            let found = paths.dirs.iter().find_map(|d| {
                let bytes = read_regular(&d.join(plain(&pdb)?), MAX_FILE).ok()?;
                PortablePdb::parse(&bytes).ok()?;
                Some(FoundPdb { bytes, origin: PdbOrigin::SymbolPath(d.join(&pdb)) })
            });
            let windows = paths.dirs.iter().find(|d| plain(&pdb).is_some_and(|p| read_regular(&d.join(p), MAX_FILE).is_ok_and(|b| crate::pdb::is_windows_pdb(&b))));
            let found = found.ok_or_else(|| match windows {
                Some(d) => format!("{WINDOWS_PDB_MESSAGE}: {} is a Windows (MSF) PDB", d.join(&pdb).display()),
                None => format!("no PDB {pdb} in the symbol paths"),
            })?;
            let assembly = assembly_of(&found, paths);
            (found, assembly)
        } else {
            return Err("the module names neither an assembly nor a PDB".to_owned());
        };
        let size = u64::try_from(found.bytes.len().saturating_mul(2).saturating_add(assembly.as_ref().map_or(0, Vec::len))).unwrap_or(u64::MAX);
        let lines = ModuleSymbols::from_pdb(found.bytes).map_err(|e| format!("{}{}: {}", e.kind, e.location, e.message()))?;
        Ok((Slot::Pdb(Arc::new(PdbModule::new(lines, assembly))), size))
    }

    /// A module named by its assembly: the assembly in a symbol path (its MVID or PE key
    /// checked when given), then its own PDB (embedded, beside it, in a symbol path, or from a
    /// symbol server by its CodeView id).
    pub(super) fn pdb_by_assembly(&self, ident: &Ident, name: &str) -> Result<(FoundPdb, Option<Vec<u8>>), String> {
        let paths = &self.config.paths;
        let (path, bytes) = self.find_image(ident, name).map_err(|why| why.unwrap_or_else(|| format!("no assembly {name}{} in the symbol paths", ident_note(ident))))?;
        let image = PeImage::parse(&bytes).map_err(|e| format!("{}: {}{}: {}", path.display(), e.kind, e.location, e.message()))?;
        let mut passed = Vec::new();
        let found = locate_pdb_noting(&image, Some(&path), paths, &mut passed).map_err(|e| e.to_string())?;
        let found = found.ok_or_else(|| {
            let cv = image.codeview().ok().flatten();
            let key = cv.as_ref().filter(|cv| cv.is_portable()).and_then(|cv| crate::symsrv::key::portable_pdb(cv.file_name(), &cv.guid));
            match (windows_pdb_note(&passed, paths, key.as_ref()), cv) {
                (Some(note), _) => note,
                (None, Some(cv)) if !cv.is_portable() => format!("{WINDOWS_PDB_MESSAGE}: {} names only a Windows PDB, {}", path.display(), cv.path),
                _ => format!("{} was found, but no PDB of its build", path.display()),
            }
        })?;
        Ok((found, Some(bytes)))
    }

    /// Find an image: each symbol path, flat (`DIR/name`) and in the SSQP layout under its PE key,
    /// then the symbol servers by that key. Only a file whose MVID and PE key match what the
    /// module gives is taken. A server's file (and the cache's) is checked against its key alone,
    /// so a client's wrong MVID never makes a good cache entry junk: it is this module's answer
    /// (`Err(Some(why))`). `Err(None)`: nothing found.
    pub(super) fn find_image(&self, ident: &Ident, name: &str) -> Result<(PathBuf, Vec<u8>), Option<String>> {
        let name = plain(name).ok_or(None)?;
        let of_key = |bytes: &[u8]| bytes.starts_with(b"MZ") && ident.pe_key.is_none_or(|k| pe_key_of(bytes) == Some(k));
        let of_mvid = |bytes: &[u8]| ident.mvid.is_none_or(|m| mvid_of(bytes) == Some(m));
        let key = ident.pe_key.and_then(|(t, s)| crate::symsrv::key::pe_image(name, t, s));
        for dir in &self.config.paths.dirs {
            let mut candidates = vec![dir.join(name)];
            if let (Some(key), Some((t, s))) = (&key, ident.pe_key) {
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
        let (Some(servers), Some(key)) = (self.config.paths.servers.as_ref(), key) else { return Err(None) };
        let check = |p: &Path| read_regular(p, MAX_FILE).is_ok_and(|b| of_key(&b));
        let entry = servers.fetch(&key, &[], &check).ok_or(None)?;
        let bytes = read_regular(&entry, MAX_FILE).ok().filter(|b| of_key(b)).ok_or(None)?;
        if !of_mvid(&bytes) {
            let has = mvid_of(&bytes).map_or_else(|| "none".to_owned(), |m| crate::metadata::mvid_text(&m));
            return Err(Some(format!("the image {name} under PE key {} has MVID {has}, not the{} the module gives", key.as_str(), ident_note(ident))));
        }
        Ok((entry, bytes))
    }
}

/// The assembly of a found PDB, for method names: one with the PDB's stem beside it or in a
/// symbol path whose CodeView id asks for exactly this PDB.
pub(super) fn assembly_of(found: &FoundPdb, paths: &SymbolPaths) -> Option<Vec<u8>> {
    let path = match &found.origin {
        PdbOrigin::Explicit(p) | PdbOrigin::BesideAssembly(p) | PdbOrigin::SymbolPath(p) | PdbOrigin::SymbolServer(p) | PdbOrigin::BuildPath(p) => p,
        PdbOrigin::Embedded => return None,
    };
    let local = SymbolPaths { pdb: None, dirs: paths.dirs.clone(), servers: None };
    open_pdb_with(path, &local, None).ok()?.assembly
}

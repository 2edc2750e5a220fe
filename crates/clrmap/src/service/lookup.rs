//! How the service finds a module's symbols: its PDB (by PDB id, by its assembly, or by PDB
//! name) and its image (for ReadyToRun frames), through the symbol paths and the symbol servers.

use std::path::PathBuf;
use std::sync::Arc;

use super::{ident_note, server_notes, windows_pdb_note, Ident, PdbModule, Service, Slot};
use crate::answers::symbolizer::ModuleSymbols;
use crate::formats::pdb::{PortablePdb, WINDOWS_PDB_MESSAGE};
use crate::formats::pe::PeImage;
use crate::symbols::locate::{find_recorded_pdb_noting, locate_pdb_noting, FoundPdb, PdbOrigin, RecordedPdb};
use crate::symbols::module::{assembly_of_pdb, pdb_by_name, plain_file_name, ImageMiss};

/// A module's PDB, and its assembly where one of its build is at hand (for method names).
type Found = (FoundPdb, Option<Vec<u8>>);

impl Service {
    /// Find and parse a module's PDB (and its assembly, for names).
    pub(super) fn load_pdb(&self, ident: &Ident) -> Result<(Slot, u64), String> {
        let paths = &self.config.paths;
        let (found, assembly) = if let Some(guid) = ident.guid {
            let name = ident.pdb_name().ok_or("the module names no PDB file (pdb, debug_file or name)")?;
            // A plain file name: never a path of its own to read (find_recorded_pdb reads an
            // absolute recorded path as the build's).
            if !plain_file_name(&name) {
                return Err(format!("the PDB name {name:?} is not a file name"));
            }
            let recorded = RecordedPdb { guid, age: 1, path: name.clone(), checksums: Vec::new() };
            let mut passed = Vec::new();
            let found = find_recorded_pdb_noting(&recorded, None, paths, &mut passed).map_err(|e| e.to_string())?;
            let key = crate::symbols::symsrv::key::portable_pdb(&name, &guid);
            if found.is_none() {
                if let Some(note) = windows_pdb_note(&passed, paths, key.as_ref()) {
                    return Err(note);
                }
            }
            let found =
                found.ok_or_else(|| format!("no PDB {name} with id {} in the symbol paths or on a symbol server{}", crate::symbols::symsrv::key::guid_n(&guid), server_notes(paths, key.as_ref())))?;
            if let Some(stamp) = ident.stamp {
                let id = PortablePdb::parse(&found.bytes).map_err(|e| e.to_string())?.id();
                // Sentry's rule: the age asked for is a lower bound (a symbol server may hold a
                // later age of the same GUID), and a portable PDB's age is its stamp.
                if id.stamp() < stamp {
                    return Err(format!("the PDB found for {name} has stamp {:08x}, below the age {stamp:x} the module gives", id.stamp()));
                }
            }
            let assembly = assembly_of_pdb(&found, paths);
            (found, assembly)
        } else if let Some(name) = &ident.name {
            match self.pdb_by_assembly(ident, name)? {
                Some(found) => found,
                // No assembly anywhere: its PDB by name, as printed stack traces find it; but
                // only where the module gives no id that the missing assembly would have proven.
                None if ident.mvid.is_some() || ident.pe_key.is_some() => return Err(format!("no assembly {name}{} in the symbol paths", ident_note(ident))),
                None => match self.pdb_named(ident)? {
                    Some(found) => found,
                    None => return Err(format!("no assembly {name}{} and no PDB {} in the symbol paths", ident_note(ident), ident.pdb_name().unwrap_or_default())),
                },
            }
        } else if ident.pdb_name().is_some() {
            let pdb = ident.pdb_name().unwrap_or_default();
            self.pdb_named(ident)?.ok_or_else(|| format!("no PDB {pdb} in the symbol paths"))?
        } else {
            return Err("the module names neither an assembly nor a PDB".to_owned());
        };
        let size = u64::try_from(found.bytes.len().saturating_mul(2).saturating_add(assembly.as_ref().map_or(0, Vec::len))).unwrap_or(u64::MAX);
        let lines = ModuleSymbols::from_pdb(found.bytes).map_err(|e| format!("{}{}: {}", e.kind, e.location, e.message()))?;
        let module = PdbModule::new(lines, assembly);
        let size = size.saturating_add(module.slots_size());
        Ok((Slot::Pdb(Arc::new(module)), size))
    }

    /// A module named by its assembly: the assembly in a symbol path (its MVID or PE key
    /// checked when given), then its own PDB (embedded, beside it, in a symbol path, or from a
    /// symbol server by its CodeView id).
    /// `Ok(None)`: no assembly of that name (and ids) anywhere.
    pub(super) fn pdb_by_assembly(&self, ident: &Ident, name: &str) -> Result<Option<Found>, String> {
        let paths = &self.config.paths;
        let (path, bytes) = match self.find_image(ident, name) {
            Ok(found) => found,
            Err(None) => return Ok(None),
            Err(Some(why)) => return Err(why),
        };
        let image = PeImage::parse(&bytes).map_err(|e| format!("{}: {}{}: {}", path.display(), e.kind, e.location, e.message()))?;
        let mut passed = Vec::new();
        let found = locate_pdb_noting(&image, Some(&path), paths, &mut passed).map_err(|e| e.to_string())?;
        let found = found.ok_or_else(|| {
            let cv = image.codeview().ok().flatten();
            let key = cv.as_ref().filter(|cv| cv.is_portable()).and_then(|cv| crate::symbols::symsrv::key::portable_pdb(cv.file_name(), &cv.guid));
            match (windows_pdb_note(&passed, paths, key.as_ref()), cv) {
                (Some(note), _) => note,
                (None, Some(cv)) if !cv.is_portable() => format!("{WINDOWS_PDB_MESSAGE}: {} names only a Windows PDB, {}", path.display(), cv.path),
                // The same reasons every command gives: files of another build passed over,
                // this key's symbol-server failures, and each place looked in.
                _ => {
                    let why = crate::symbols::locate::why_no_pdb_of_its_key(&image, Some(&path), paths, &passed);
                    std::iter::once(format!("{} was found, but no PDB of its build", path.display())).chain(why).collect::<Vec<_>>().join("; ")
                }
            }
        })?;
        Ok(Some((found, Some(bytes))))
    }

    /// A module's PDB by its file name alone (`pdb`, else the assembly's stem with `.pdb`) in the
    /// symbol paths, with its assembly beside it where one of its build is. `Ok(None)`: none.
    fn pdb_named(&self, ident: &Ident) -> Result<Option<Found>, String> {
        let paths = &self.config.paths;
        let Some(pdb) = ident.pdb_name() else { return Ok(None) };
        let Some((path, bytes)) = pdb_by_name(&pdb, paths) else { return Ok(None) };
        let bytes = bytes.map_err(|e| e.to_string())?;
        if crate::formats::pdb::is_windows_pdb(&bytes) {
            return Err(format!("{WINDOWS_PDB_MESSAGE}: {} is a Windows (MSF) PDB", path.display()));
        }
        PortablePdb::parse(&bytes).map_err(|e| format!("{}: {}{}: {}", path.display(), e.kind, e.location, e.message()))?;
        let found = FoundPdb { bytes, origin: PdbOrigin::SymbolPath(path) };
        let assembly = assembly_of_pdb(&found, paths);
        Ok(Some((found, assembly)))
    }

    /// Find an image: each symbol path, flat (`DIR/name`) and in the SSQP layout under its PE key,
    /// then the symbol servers by that key. Only a file whose MVID and PE key match what the
    /// module gives is taken. A server's file (and the cache's) is checked against its key alone,
    /// so a client's wrong MVID never makes a good cache entry junk: it is this module's answer
    /// (`Err(Some(why))`). `Err(None)`: nothing found.
    pub(super) fn find_image(&self, ident: &Ident, name: &str) -> Result<(PathBuf, Vec<u8>), Option<String>> {
        crate::symbols::module::find_image(name, ident.mvid, ident.pe_key, &self.config.paths).map_err(|miss| match miss {
            ImageMiss::NotFound => None,
            ImageMiss::OtherMvid { key, has } => {
                let has = has.map_or_else(|| "none".to_owned(), |m| crate::formats::metadata::mvid_text(&m));
                Some(format!("the image {name} under PE key {key} has MVID {has}, not the{} the module gives", ident_note(ident)))
            }
        })
    }
}

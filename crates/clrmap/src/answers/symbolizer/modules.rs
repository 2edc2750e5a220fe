//! The modules of a source and their line tables: each module's PDB is looked for when an address
//! in it first wants a line (a trace names hundreds of modules, a command asks about a few), and
//! what was found instead of it is kept as notes for the user.
//!
//! This is apart from the code index (which body holds an address) and the inline index (which
//! inlinees a body's code is): those say *which* module an answer is in; this alone knows where
//! that module's files are, which PDB the user named belongs to it, and why it has no lines.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::base::fs::{read_input, read_regular, OpenError, MAX_FILE};
use crate::base::read::{Error, ErrorKind};
use crate::formats::pdb::PortablePdb;
use crate::formats::pe::PeImage;
use crate::symbols::locate::{check_explicit, check_recorded, locate_pdb_noting, why_no_pdb_structured, FoundPdb, PassedOver, PdbOrigin, RecordedPdb, SymbolPaths};
use crate::symbols::why::{Note, Why};

use super::lines::ModuleLines;

/// One module of the source: where its file is, the PDB the recording names for it, and its line
/// table once first needed.
#[derive(Debug)]
pub(super) struct Module {
    pub(super) name: Option<String>,
    pub(super) path: Option<PathBuf>,
    pub(super) recorded: Option<RecordedPdb>,
    /// The MVID a capture recorded for it: only an assembly with this MVID is the module's.
    pub(super) mvid: Option<[u8; 16]>,
    pub(super) lines: OnceLock<Option<Arc<ModuleLines>>>,
}

impl Module {
    /// A module of a trace or capture, its lines not looked for yet.
    pub(super) fn recorded(name: Option<String>, path: &str, recorded: Option<RecordedPdb>, mvid: Option<[u8; 16]>) -> Module {
        Module { name, path: Some(PathBuf::from(path)), recorded, mvid, lines: OnceLock::new() }
    }

    /// The module as the symbol locator asks for it.
    pub(super) fn query(&self) -> crate::symbols::module::RecordedModule<'_> {
        crate::symbols::module::RecordedModule { name: self.name.as_deref(), path: self.path.as_deref(), recorded: self.recorded.as_ref(), mvid: self.mvid }
    }
}

/// The source's modules, each one's line table loaded lazily, and why those hit have none.
#[derive(Debug)]
pub(super) struct Modules {
    list: Vec<Module>,
    /// Where PDBs are looked for (the user's options).
    symbols: SymbolPaths,
    /// Line tables by PDB id: modules that find the same PDB (one file named by several paths,
    /// or copies of one build) share one table and one copy of its bytes.
    by_pdb: Mutex<HashMap<[u8; 20], Arc<ModuleLines>>>,
    /// The GUID of the PDB the user named, for a many-module source: it belongs to each module
    /// that recorded this GUID (whatever its name), and to a module that recorded none whose
    /// file name has its stem.
    explicit_guid: Option<[u8; 16]>,
    /// Why modules hit have no lines ([`Modules::why_notes`]).
    notes: Mutex<Vec<Note>>,
    /// For an image source: why it has no PDB, said once an address in it wanted a line.
    image_why: Vec<Note>,
    /// An address in a body whose module has no lines was answered.
    missed_lines: AtomicBool,
}

impl Modules {
    fn new(list: Vec<Module>, symbols: SymbolPaths) -> Modules {
        Modules { list, symbols, by_pdb: Mutex::new(HashMap::new()), explicit_guid: None, notes: Mutex::new(Vec::new()), image_why: Vec::new(), missed_lines: AtomicBool::new(false) }
    }

    /// The one module of an image source: the image itself. Its lines are loaded now, so a PDB
    /// the user named that is not its own fails here.
    pub(super) fn of_image(bytes: &[u8], path: Option<&Path>, symbols: SymbolPaths) -> Result<Modules, OpenError> {
        let mut passed = Vec::new();
        // Why the image has no PDB (notes for the user).
        let mut why = Vec::new();
        let name = path.and_then(Path::file_name).map(|f| f.to_string_lossy().into_owned());
        let image = PeImage::parse(bytes).map_err(|error| OpenError::Input { path: path.map(Path::to_owned).unwrap_or_default(), error })?;
        let lines = match locate_pdb_noting(&image, path, &symbols, &mut passed)? {
            Some(found) => {
                let at = match &found.origin {
                    PdbOrigin::Explicit(p) => p.clone(),
                    _ => path.map(Path::to_owned).unwrap_or_default(),
                };
                // An embedded PDB's offsets are into its inflated bytes, not the image's.
                let embedded = found.origin == PdbOrigin::Embedded;
                let located = |error| if embedded { crate::formats::pdb::embedded::inflated(error) } else { error };
                Some(ModuleLines::new(found.bytes).map_err(|error| OpenError::Input { path: at, error: located(error) })?)
            }
            None => {
                why = why_no_pdb_structured(&image, path, &symbols, &passed);
                None
            }
        };
        let image_why = why.into_iter().map(|why| Note { module: Some(name.as_deref().unwrap_or("the image").to_owned()), why }).collect();
        let module = Module { name, path: path.map(Path::to_owned), recorded: None, mvid: None, lines: OnceLock::from(lines.map(Arc::new)) };
        Ok(Modules { image_why, ..Modules::new(vec![module], symbols) })
    }

    /// The modules of a trace or capture. A PDB the user named is checked now: it must belong to
    /// one of them ([`check_explicit_for`]).
    pub(super) fn of_recording(list: Vec<Module>, symbols: SymbolPaths) -> Result<Modules, OpenError> {
        let explicit_guid = match &symbols.pdb {
            Some(pdb) => Some(check_explicit_for(&list, &symbols, pdb)?),
            None => None,
        };
        Ok(Modules { explicit_guid, ..Modules::new(list, symbols) })
    }

    /// Where PDBs and assemblies are looked for.
    pub(super) fn symbols(&self) -> &SymbolPaths {
        &self.symbols
    }

    /// The module at `index`.
    pub(super) fn get(&self, index: usize) -> Option<&Module> {
        self.list.get(index)
    }

    /// The modules, in index order.
    pub(super) fn iter(&self) -> std::slice::Iter<'_, Module> {
        self.list.iter()
    }

    /// Add a module (an inlinee's that has no body in the source); gives its index.
    pub(super) fn push(&mut self, module: Module) -> usize {
        self.list.push(module);
        self.list.len().saturating_sub(1)
    }

    /// An address in a module without lines was answered: the image's notes are now worth saying.
    pub(super) fn missed_lines(&self) {
        // Read first: a store per answer would write the shared line every time.
        if !self.missed_lines.load(Ordering::Relaxed) {
            self.missed_lines.store(true, Ordering::Relaxed);
        }
    }

    /// A module's line table, loaded when first asked for: from the PDB [`crate::symbols::module`]
    /// finds for it, noting what it passed over.
    pub(super) fn lines<'s>(&'s self, module: &'s Module) -> Option<&'s ModuleLines> {
        module
            .lines
            .get_or_init(|| {
                // The PDB the user named belongs to the modules that recorded its id, or, where
                // none is recorded, to the module named like it; to no other.
                let mut symbols = self.symbols.clone();
                let belongs = match &module.recorded {
                    Some(r) => self.explicit_guid == Some(r.guid),
                    None => symbols.pdb.as_deref().is_some_and(|pdb| same_stem(pdb, module.name.as_deref())),
                };
                if !belongs {
                    symbols.pdb = None;
                }
                let mut lookup = crate::symbols::module::Lookup::default();
                let found = module.query().pdb(&symbols, &mut lookup);
                self.note(module, lookup.passed);
                self.note_mvids(module, lookup.other_builds);
                if found.is_none() {
                    self.push_notes(module, lookup.why);
                }
                let found = found?;
                let id = PortablePdb::parse(&found.bytes).ok()?.id().0;
                // A PDB another module already holds is not kept twice.
                let mut shared = self.by_pdb.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(lines) = shared.get(&id) {
                    return Some(Arc::clone(lines));
                }
                let lines = Arc::new(build_lines(found)?);
                shared.insert(id, Arc::clone(&lines));
                Some(lines)
            })
            .as_deref()
    }

    /// Note the files of another build passed over while looking for a module's PDB.
    fn note(&self, module: &Module, passed: Vec<PassedOver>) {
        self.push_notes(module, passed.iter().map(PassedOver::why).collect());
    }

    /// Note the assemblies passed over because their MVID is not the one the capture recorded.
    fn note_mvids(&self, module: &Module, passed: Vec<(PathBuf, [u8; 16])>) {
        let Some(want) = module.mvid else { return };
        let wanted = crate::formats::metadata::mvid_text(&want);
        let why = passed.into_iter().map(|(path, mvid)| Why::AnotherBuildMvid { path: path.display().to_string(), mvid: crate::formats::metadata::mvid_text(&mvid), wanted: wanted.clone() });
        self.push_notes(module, why.collect());
    }

    /// Note that no assembly of a module's recorded build was found at `places`.
    pub(super) fn note_missing_assembly(&self, module: &Module, places: &[String]) {
        self.push_notes(module, vec![Why::NoAssembly { places: places.to_vec() }]);
    }

    /// Keep each reason once, with the module's name.
    fn push_notes(&self, module: &Module, why: Vec<Why>) {
        let mut notes = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        for why in why {
            let note = Note { module: Some(module.name.clone().unwrap_or_else(|| "a module".to_owned())), why };
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }

    /// Why the modules hit so far have no lines (see [`super::Symbolizer::notes`]).
    pub(super) fn why_notes(&self) -> Vec<Note> {
        let mut notes = Vec::new();
        if self.missed_lines.load(Ordering::Relaxed) {
            notes.extend(self.image_why.iter().cloned());
        }
        notes.extend(self.notes.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned());
        // What the symbol servers said (each names its server and key), once: a module's own
        // notes may already hold what a server said of its key.
        if let Some(servers) = &self.symbols.servers {
            for why in servers.failures() {
                if !notes.iter().any(|n| n.why == why) {
                    notes.push(Note { module: None, why });
                }
            }
        }
        notes
    }
}

/// A module's line table from its PDB; `None` if the PDB does not parse.
fn build_lines(found: FoundPdb) -> Option<ModuleLines> {
    ModuleLines::new(found.bytes).ok()
}

/// `Frames.pdb` and `Frames.dll`: the same name before the extension, ignoring case.
fn same_stem(pdb: &Path, module: Option<&str>) -> bool {
    let stem = |p: &Path| p.file_stem().map(|s| s.to_string_lossy().to_lowercase());
    module.is_some_and(|m| stem(Path::new(m)) == stem(pdb))
}

/// For a many-module source: the PDB the user named must belong to a module: one whose recorded
/// id it has (whatever the file names), or one whose file name has its stem (`Frames.pdb` →
/// `Frames.dll`) and whose id it has: the one the source recorded, or else the CodeView id of the
/// module's assembly (where the process loaded it, or in a symbol directory). A PDB that cannot
/// be read is an error naming it and why. Gives the PDB's GUID.
fn check_explicit_for(modules: &[Module], symbols: &SymbolPaths, pdb: &Path) -> Result<[u8; 16], OpenError> {
    let bytes = read_input(pdb, MAX_FILE)?;
    let input = |error: Error| OpenError::Input { path: pdb.to_owned(), error };
    let id = PortablePdb::parse(&bytes).map_err(input)?.id();
    let guid = id.guid();
    if modules.iter().any(|m| m.recorded.as_ref().is_some_and(|r| r.guid == guid)) {
        return Ok(guid);
    }
    let named: Vec<&Module> = modules.iter().filter(|m| same_stem(pdb, m.name.as_deref())).collect();
    if named.is_empty() {
        // Neither its id nor its name is a module's: the ids say which build each is.
        let error = Error::nowhere(ErrorKind::PdbMismatch, "a module of the source that this PDB belongs to");
        return Err(OpenError::NoModule { path: pdb.to_owned(), error, detail: no_module_detail(&id.guid_hex(), modules) });
    }
    let mut last = Error::nowhere(ErrorKind::PdbMismatch, "a module of the source that this PDB belongs to");
    for m in named {
        // Matched: the module's lines come from this PDB when first needed.
        if let Some(recorded) = &m.recorded {
            match check_recorded(recorded, &bytes) {
                Ok(()) => return Ok(guid),
                Err(e) => last = e,
            }
            continue;
        }
        // No recorded id: the first assembly found is the module's, and names its PDB.
        let image = m.query().assembly_candidates(symbols).find_map(|path| read_regular(&path, MAX_FILE).ok().filter(|b| PeImage::parse(b).is_ok()));
        let Some(assembly) = image else {
            last = Error::nowhere(ErrorKind::PdbMismatch, "the module's assembly, at its recorded path or in a symbol directory, to check the PDB against (the source records no PDB id)");
            continue;
        };
        let image = PeImage::parse(&assembly).map_err(input)?;
        match check_explicit(&image, &bytes) {
            Ok(()) => return Ok(guid),
            Err(e) => last = e,
        }
    }
    Err(input(last))
}

/// The most modules a `pdb_mismatch` names: a trace records hundreds (the framework's too).
const NAMED_MODULES: usize = 8;

/// What a PDB that belongs to no module is told: its id, and each module's name with the PDB
/// file and id it recorded (at most [`NAMED_MODULES`], then how many more).
fn no_module_detail(pdb_id: &str, modules: &[Module]) -> String {
    let mut listed: Vec<String> = modules
        .iter()
        .take(NAMED_MODULES)
        .map(|m| {
            let name = m.name.clone().or_else(|| m.path.as_ref().map(|p| p.display().to_string())).unwrap_or_else(|| "a module".to_owned());
            match &m.recorded {
                Some(r) => format!("{name} (PDB {} {})", r.file_name(), r.guid_hex()),
                None => format!("{name} (no PDB id recorded)"),
            }
        })
        .collect();
    let more = modules.len().saturating_sub(NAMED_MODULES);
    if more > 0 {
        listed.push(format!("and {more} more"));
    }
    if listed.is_empty() {
        return format!("this PDB's id is {pdb_id}; the source names no module");
    }
    format!("this PDB's id is {pdb_id}; the source's modules: {}", listed.join(", "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn a_pdb_of_no_module_names_eight_modules_then_how_many_more() {
        let recorded = RecordedPdb { guid: [1, 0, 0, 0, 2, 0, 3, 0, 4, 5, 6, 7, 8, 9, 10, 11], age: 1, path: "C:\\build\\M0.pdb".to_owned(), checksums: Vec::new() };
        let modules: Vec<Module> = (0..11).map(|i| Module::recorded(Some(format!("M{i}.dll")), &format!("/app/M{i}.dll"), (i == 0).then(|| recorded.clone()), None)).collect();
        let detail = no_module_detail("ABCD", &modules);
        let expected = "this PDB's id is ABCD; the source's modules: M0.dll (PDB M0.pdb 00000001000200030405060708090A0B), M1.dll (no PDB id recorded), M2.dll (no PDB id recorded), \
                        M3.dll (no PDB id recorded), M4.dll (no PDB id recorded), M5.dll (no PDB id recorded), M6.dll (no PDB id recorded), M7.dll (no PDB id recorded), and 3 more";
        assert_eq!(detail, expected);
        // Eight or fewer: all of them, and no count.
        assert!(no_module_detail("ABCD", &modules[..8]).ends_with("M7.dll (no PDB id recorded)"));
        assert_eq!(no_module_detail("ABCD", &[]), "this PDB's id is ABCD; the source names no module");
    }
}

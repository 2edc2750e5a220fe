//! Names for captured bodies, in the notation every source shares (docs/output.md#type-signatures and #il-to-native-maps): `name`
//! from the MethodDef, `full_name` with the owner's and the method's type arguments as the
//! runtime instantiated them (the profiler records them by ClassID: module and TypeDef token)
//! and the parameter types from the signature. Each module's metadata is read once, one module
//! at a time.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::CapturedBody;
use crate::base::ilmap::CodeKind;
use crate::formats::metadata::runtime_type::{collect, render_all, render_types, RtType};
use crate::formats::metadata::{Metadata, ModuleFiles, TypeDefInfo};
use crate::formats::r2r::ReadyToRunImage;

/// Name each body from its module's metadata: `name` and `full_name` (with the type arguments
/// the profiler recorded; a capture without them names the generic definition). A module that
/// cannot be read costs only its bodies' names.
pub fn name_captured(bodies: &mut [CapturedBody]) {
    // The MVID each module path was recorded with: a file with another is of another build, and
    // names nothing.
    let recorded: HashMap<String, [u8; 16]> = bodies.iter().filter_map(|b| Some((b.module_path.clone(), b.mvid?))).collect();
    let same_build = |path: &str, md: &Metadata<'_>| recorded.get(path).is_none_or(|want| md.mvid() == Some(*want));
    let lists: Vec<&[RtType]> = bodies.iter().flat_map(|b| [b.class_args.as_slice(), b.method_args.as_slice()]).collect();
    let mut rendered = render_types(&lists, &recorded).into_iter();
    let args: Vec<(Vec<String>, Vec<String>)> = bodies.iter().map(|_| (rendered.next().unwrap_or_default(), rendered.next().unwrap_or_default())).collect();
    let mut files = ModuleFiles::default();
    // The bodies, by module: paths that name one file (links, `..`, `//`) are one module, read
    // once (crate::base::fs::file_id).
    let mut by_module: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut by_file: HashMap<(u64, u64), String> = HashMap::new();
    let mut same: HashMap<&str, String> = HashMap::new();
    for (i, b) in bodies.iter().enumerate() {
        let path = same.entry(&b.module_path).or_insert_with(|| match crate::base::fs::file_id(std::path::Path::new(&b.module_path)) {
            Some(id) => by_file.entry(id).or_insert_with(|| b.module_path.clone()).clone(),
            None => b.module_path.clone(),
        });
        by_module.entry(path.clone()).or_default().push(i);
    }
    for (module, list) in by_module {
        let Some(bytes) = files.read(&module) else { continue };
        let Ok(md) = Metadata::parse(&bytes) else { continue };
        if list.iter().filter_map(|&i| bodies.get(i)).any(|b| !same_build(&b.module_path, &md)) {
            continue;
        }
        // ReadyToRun code is named as the image names the body at its RVA: the image's method
        // entry carries the exact instantiation, which the runtime does not tell a profiler for
        // code shared by reference-type instantiations.
        let image_names = if list.iter().any(|&i| bodies.get(i).is_some_and(|b| b.kind == CodeKind::R2r)) { image_names(&bytes, &md) } else { HashMap::new() };
        for i in list {
            let (Some(b), Some((owner, method))) = (bodies.get_mut(i), args.get(i)) else { continue };
            if let Some((name, full)) = md.body_names(b.body.token, owner, method) {
                b.body.name = Some(name);
                b.body.full_name = full;
            }
            if let Some(name) = b.body.rva.filter(|_| b.kind == CodeKind::R2r).and_then(|rva| image_names.get(&rva)) {
                b.body.full_name = Some(name.clone());
            }
        }
    }
}

/// A module file's bytes, however the caller holds them (read whole, or mapped).
pub type ModuleBytes = Box<dyn AsRef<[u8]> + Send>;

/// How a [`BodyNamer`] gets a module file's bytes by its path; `None` where it cannot.
pub type ModuleLoader = Box<dyn FnMut(&str) -> Option<ModuleBytes> + Send>;

/// A module file as the namer keeps it: its bytes, whether they are of the build that ran, and
/// (once asked) the names its ReadyToRun method entries give, by RVA.
struct NamerModule {
    bytes: ModuleBytes,
    image_names: Option<HashMap<u32, String>>,
}

/// Names bodies one at a time as they are recorded, by the rules of [`name_captured`], so a
/// capture carries each body's `name` and `full_name` (the profiler writes them into its
/// records) and a capture read without its assemblies names every body as one read with them.
/// Each module file is asked of the loader once, and kept.
pub struct BodyNamer {
    load: ModuleLoader,
    /// Path → the module, `None` where it could not be had or is of another build.
    modules: HashMap<String, Option<NamerModule>>,
    /// The MVID each module path was recorded with.
    mvids: HashMap<String, [u8; 16]>,
    infos: HashMap<(String, u32), TypeDefInfo>,
    /// TypeDefs asked for already (named or not).
    asked: BTreeSet<(String, u32)>,
}

impl std::fmt::Debug for BodyNamer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyNamer").field("modules", &self.modules.len()).finish()
    }
}

impl BodyNamer {
    /// A namer that reads module files through `load`.
    pub fn new(load: ModuleLoader) -> Self {
        BodyNamer { load, modules: HashMap::new(), mvids: HashMap::new(), infos: HashMap::new(), asked: BTreeSet::new() }
    }

    /// A namer that reads each module file whole, within the bounds of [`ModuleFiles`].
    pub fn reading_files() -> Self {
        let mut files = ModuleFiles::default();
        Self::new(Box::new(move |path: &str| files.read(path).map(|b| Box::new(b) as ModuleBytes)))
    }

    /// Forget every module and type (a new recording).
    pub fn clear(&mut self) {
        self.modules.clear();
        self.mvids.clear();
        self.infos.clear();
        self.asked.clear();
    }

    fn module(&mut self, path: &str) -> Option<&mut NamerModule> {
        if !self.modules.contains_key(path) {
            let loaded = (self.load)(path).filter(|bytes| {
                let Ok(md) = Metadata::parse(bytes.as_ref().as_ref()) else { return false };
                self.mvids.get(path).is_none_or(|want| md.mvid() == Some(*want))
            });
            self.modules.insert(path.to_owned(), loaded.map(|bytes| NamerModule { bytes, image_names: None }));
        }
        self.modules.get_mut(path)?.as_mut()
    }

    fn type_infos(&mut self, t: &RtType) {
        let mut wanted = BTreeMap::new();
        collect(t, &mut wanted);
        for (module, tokens) in wanted {
            for token in tokens {
                if !self.asked.insert((module.to_owned(), token)) || token >> 24 != 0x02 {
                    continue;
                }
                let Some(m) = self.module(module) else { continue };
                let Ok(md) = Metadata::parse(m.bytes.as_ref().as_ref()) else { continue };
                if let Some(info) = md.type_def_info(token & 0x00FF_FFFF) {
                    self.infos.insert((module.to_owned(), token), info);
                }
            }
        }
    }

    /// `name` and `full_name` of one body, as [`name_captured`] names it: `None` where its module
    /// file cannot be read or is not of the build recorded (`mvid`).
    #[allow(clippy::too_many_arguments)]
    pub fn name(&mut self, module: &str, mvid: Option<[u8; 16]>, token: u32, kind: CodeKind, rva: Option<u32>, class_args: &[RtType], method_args: &[RtType]) -> Option<(String, Option<String>)> {
        if let Some(m) = mvid {
            if self.mvids.insert(module.to_owned(), m).is_some_and(|old| old != m) {
                // Another build at the same path: what was read of it names nothing now.
                self.modules.remove(module);
            }
        }
        for t in class_args.iter().chain(method_args) {
            self.type_infos(t);
        }
        let owner = render_all(class_args, &self.infos);
        let method = render_all(method_args, &self.infos);
        let m = self.module(module)?;
        let bytes = m.bytes.as_ref().as_ref();
        let md = Metadata::parse(bytes).ok()?;
        let (name, mut full) = md.body_names(token, &owner, &method)?;
        if let Some(rva) = rva.filter(|_| kind == CodeKind::R2r) {
            let names = m.image_names.get_or_insert_with(|| image_names(bytes, &md));
            if let Some(n) = names.get(&rva) {
                full = Some(n.clone());
            }
        }
        Some((name, full))
    }
}

/// The names a ReadyToRun image's method entries give their code, by RVA: the exact
/// instantiation, which the runtime does not tell a profiler for shared code.
fn image_names(bytes: &[u8], md: &Metadata<'_>) -> HashMap<u32, String> {
    let mut names = HashMap::new();
    if let Ok(image) = ReadyToRunImage::parse(bytes) {
        for b in image.code_bodies().unwrap_or_default() {
            if let (Some(rva), Some(at)) = (b.rva, b.signature) {
                if let Some(name) = crate::formats::r2r::instantiation_name(bytes, at, md) {
                    names.insert(rva, name);
                }
            }
        }
    }
    names
}

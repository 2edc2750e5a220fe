//! Names for captured bodies, in the notation every source shares (docs/output.md#type-signatures and #il-to-native-maps): `name`
//! from the MethodDef, `full_name` with the owner's and the method's type arguments as the
//! runtime instantiated them (the profiler records them by ClassID: module and TypeDef token)
//! and the parameter types from the signature. Each module's metadata is read once, one module
//! at a time.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{CapturedBody, RtType};
use crate::ilmap::CodeKind;
use crate::metadata::{Metadata, ModuleFiles, TypeDefInfo};
use crate::r2r::ReadyToRunImage;

/// The notation's keyword of a primitive CorElementType (an array element the runtime gave no class for).
fn element_keyword(code: u8) -> Option<&'static str> {
    Some(match code {
        0x02 => "bool",
        0x03 => "char",
        0x04 => "int8",
        0x05 => "uint8",
        0x06 => "int16",
        0x07 => "uint16",
        0x08 => "int32",
        0x09 => "uint32",
        0x0A => "int64",
        0x0B => "uint64",
        0x0C => "float32",
        0x0D => "float64",
        0x0E => "string",
        0x18 => "native int",
        0x19 => "native uint",
        0x1C => "object",
        _ => return None,
    })
}

/// An array suffix in the notation for `rank`: `[]` for a vector, `[0...,0...]` for rank 2 (the lower
/// bounds C# compilers write for a multi-dimensional array).
pub(crate) fn array_suffix(rank: u32) -> String {
    if rank <= 1 {
        return "[]".to_owned();
    }
    let dims: Vec<&str> = (0..rank.min(32)).map(|_| "0...").collect();
    format!("[{}]", dims.join(","))
}

fn collect<'t>(t: &'t RtType, out: &mut BTreeMap<&'t str, BTreeSet<u32>>) {
    if let Some(m) = &t.module {
        out.entry(m.as_str()).or_default().insert(t.token);
    }
    for a in &t.args {
        collect(a, out);
    }
}

/// A runtime type in the type notation; `None` where a TypeDef could not be named.
fn render(t: &RtType, infos: &HashMap<(String, u32), TypeDefInfo>) -> Option<String> {
    if let Some(rank) = t.rank {
        let element = match (t.args.first(), t.element) {
            (Some(e), _) => render(e, infos)?,
            (None, Some(code)) => element_keyword(code)?.to_owned(),
            (None, None) => return None,
        };
        return Some(format!("{element}{}", array_suffix(rank)));
    }
    let info = infos.get(&(t.module.clone()?, t.token))?;
    let args = t.args.iter().map(|a| render(a, infos)).collect::<Option<Vec<String>>>()?;
    Some(info.as_argument(&args))
}

fn render_all(list: &[RtType], infos: &HashMap<(String, u32), TypeDefInfo>) -> Vec<String> {
    list.iter().map(|t| render(t, infos)).collect::<Option<Vec<String>>>().unwrap_or_default()
}

/// Name each body from its module's metadata: `name` and `full_name` (with the type arguments
/// the profiler recorded; a capture without them names the generic definition). A module that
/// cannot be read costs only its bodies' names.
pub fn name_captured(bodies: &mut [CapturedBody]) {
    // The TypeDefs the type arguments name, by module.
    let mut wanted: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for b in bodies.iter() {
        for t in b.class_args.iter().chain(&b.method_args) {
            collect(t, &mut wanted);
        }
    }
    // The MVID each module path was recorded with: a file with another is of another build, and
    // names nothing.
    let recorded: HashMap<String, [u8; 16]> = bodies.iter().filter_map(|b| Some((b.module_path.clone(), b.mvid?))).collect();
    let same_build = |path: &str, md: &Metadata<'_>| recorded.get(path).is_none_or(|want| md.mvid() == Some(*want));
    let mut infos: HashMap<(String, u32), TypeDefInfo> = HashMap::new();
    let mut files = ModuleFiles::default();
    for (module, tokens) in &wanted {
        files.with(module, |md| {
            if !same_build(module, md) {
                return;
            }
            for &token in tokens {
                if token >> 24 == 0x02 {
                    if let Some(info) = md.type_def_info(token & 0x00FF_FFFF) {
                        infos.insert(((*module).to_owned(), token), info);
                    }
                }
            }
        });
    }
    let args: Vec<(Vec<String>, Vec<String>)> = bodies.iter().map(|b| (render_all(&b.class_args, &infos), render_all(&b.method_args, &infos))).collect();
    // The bodies, by module: paths that name one file (links, `..`, `//`) are one module, read
    // once (crate::fs::file_id).
    let mut by_module: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut by_file: HashMap<(u64, u64), String> = HashMap::new();
    let mut same: HashMap<&str, String> = HashMap::new();
    for (i, b) in bodies.iter().enumerate() {
        let path = same.entry(&b.module_path).or_insert_with(|| match crate::fs::file_id(std::path::Path::new(&b.module_path)) {
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
        let mut image_names: HashMap<u32, String> = HashMap::new();
        if list.iter().any(|&i| bodies.get(i).is_some_and(|b| b.kind == CodeKind::R2r)) {
            if let Ok(image) = ReadyToRunImage::parse(&bytes) {
                for b in image.code_bodies().unwrap_or_default() {
                    if let (Some(rva), Some(at)) = (b.rva, b.signature) {
                        if let Some(name) = crate::r2r::instantiation_name(&bytes, at, &md) {
                            image_names.insert(rva, name);
                        }
                    }
                }
            }
        }
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

//! Runtime types (a type as the runtime describes a ClassID or TypeID: module, TypeDef token,
//! type arguments, array rank) and their names in the notation every source shares
//! (docs/names.md), from the defining modules' metadata. Captures record them; traces build them
//! from BulkType events; both name them here, by one rule.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{ModuleFiles, TypeDefInfo};

/// A type as the runtime describes it: a TypeDef of a module with its type arguments, or an array
/// of an element type, or a primitive array element. A capture records it by ClassID (the
/// profiler's `GetClassIDInfo2`, `IsArrayClass`); a trace's BulkType events describe a TypeID the
/// same way (module and TypeDef token).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RtType {
    /// The defining module's path (`GetModuleInfo`); absent for an array or a primitive element.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub module: Option<String>,
    /// The TypeDef token; 0 for an array or a primitive element.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "is_zero"))]
    pub token: u32,
    /// The type arguments of a generic instantiation, or an array's one element type.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Vec::is_empty"))]
    pub args: Vec<RtType>,
    /// An array's rank (1 for `T[]`).
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub rank: Option<u32>,
    /// A primitive array element's CorElementType (`int32[]`: 8), when the runtime gave no class.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub element: Option<u8>,
}

#[cfg(feature = "serde")]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

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

pub(crate) fn collect<'t>(t: &'t RtType, out: &mut BTreeMap<&'t str, BTreeSet<u32>>) {
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

pub(crate) fn render_all(list: &[RtType], infos: &HashMap<(String, u32), TypeDefInfo>) -> Vec<String> {
    list.iter().map(|t| render(t, infos)).collect::<Option<Vec<String>>>().unwrap_or_default()
}

/// Lists of runtime types (type arguments, by module and TypeDef token) in the type notation, each
/// module's metadata read once; a list with a type that cannot be named comes back empty (its
/// body is named as the generic definition). A module path recorded with an MVID (`recorded`)
/// names types only from a file of that build. Shared by captures and traces (whose BulkType
/// events describe types the same way).
pub fn render_types(lists: &[&[RtType]], recorded: &HashMap<String, [u8; 16]>) -> Vec<Vec<String>> {
    // The TypeDefs the type arguments name, by module.
    let mut wanted: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for t in lists.iter().flat_map(|l| l.iter()) {
        collect(t, &mut wanted);
    }
    let mut infos: HashMap<(String, u32), TypeDefInfo> = HashMap::new();
    let mut files = ModuleFiles::default();
    for (module, tokens) in &wanted {
        files.with(module, |md| {
            if recorded.get(*module).is_some_and(|want| md.mvid() != Some(*want)) {
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
    lists.iter().map(|l| render_all(l, &infos)).collect()
}

//! Names of trace bodies in the notation every source shares (docs/output.md#type-signatures and #il-to-native-maps). The runtime's
//! method events print the owner type with its instantiation (`Box`1[System.Int32]`,
//! `Outer+Inner`) and the signature in its own style (`class System.String[]`); a body is named
//! instead from its module's metadata (read from the path the trace gives, where it exists), with
//! the owner's type arguments taken from the runtime's text and written in the type notation. The
//! method events carry no method-level instantiation: a generic method's arguments come from its
//! MethodDetails event where the trace has one (bulk_type.rs), else it is named without `<...>`.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::base::ilmap::CodeBody;
use crate::formats::metadata::{primitive_keyword, ModuleFiles};

/// The deepest nesting of type arguments parsed; deeper text is not parsed (the owner keeps no
/// arguments).
const MAX_DEPTH: u32 = 32;

/// A type as the runtime prints it: `Ns.Outer+Inner`2[Arg,Arg][]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct TextType {
    /// `Ns.Outer+Inner`2`.
    pub name: String,
    /// The type arguments.
    pub args: Vec<TextType>,
    /// What follows: `[]` and `[,]` (as their ranks, 0 for a vector), `*` and `&` (as u32::MAX
    /// and u32::MAX - 1).
    pub suffix: Vec<u32>,
}

const POINTER: u32 = u32::MAX;
const BYREF: u32 = u32::MAX - 1;

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn bump(&mut self) {
        self.at = self.at.saturating_add(1);
    }

    fn ty(&mut self, depth: u32) -> Option<TextType> {
        if depth > MAX_DEPTH {
            return None;
        }
        let start = self.at;
        while let Some(c) = self.peek() {
            if matches!(c, b'[' | b']' | b',' | b'*' | b'&') {
                break;
            }
            self.bump();
        }
        let name = String::from_utf8(self.s.get(start..self.at)?.to_vec()).ok()?.trim().to_owned();
        if name.is_empty() {
            return None;
        }
        let mut t = TextType { name, ..TextType::default() };
        loop {
            match self.peek() {
                Some(b'[') => {
                    let next = self.s.get(self.at.saturating_add(1)).copied();
                    if matches!(next, Some(b']' | b',' | b'*')) {
                        // An array: `[]`, `[,]`, `[*]`.
                        self.bump();
                        let mut rank = 1u32;
                        let mut star = false;
                        loop {
                            match self.peek()? {
                                b']' => break,
                                b',' => rank = rank.saturating_add(1),
                                b'*' => star = true,
                                _ => return None,
                            }
                            self.bump();
                        }
                        self.bump();
                        t.suffix.push(if rank == 1 && !star { 0 } else { rank });
                    } else if t.args.is_empty() && t.suffix.is_empty() {
                        self.bump();
                        loop {
                            let arg = if self.peek() == Some(b'[') {
                                // `[Name, Assembly, ...]`: the type, then the assembly is skipped.
                                self.bump();
                                let a = self.ty(depth.saturating_add(1))?;
                                let mut level = 0u32;
                                loop {
                                    match self.peek()? {
                                        b'[' => level = level.saturating_add(1),
                                        b']' if level == 0 => break,
                                        b']' => level = level.saturating_sub(1),
                                        _ => {}
                                    }
                                    self.bump();
                                }
                                self.bump();
                                a
                            } else {
                                self.ty(depth.saturating_add(1))?
                            };
                            t.args.push(arg);
                            match self.peek()? {
                                b',' => self.bump(),
                                b']' => {
                                    self.bump();
                                    break;
                                }
                                _ => return None,
                            }
                        }
                    } else {
                        return None;
                    }
                }
                Some(b'*') => {
                    self.bump();
                    t.suffix.push(POINTER);
                }
                Some(b'&') => {
                    self.bump();
                    t.suffix.push(BYREF);
                }
                _ => return Some(t),
            }
        }
    }
}

/// The owner type of a method event, parsed; `None` for text that is not a type.
pub(super) fn parse_owner(text: &str) -> Option<TextType> {
    let mut p = Parser { s: text.as_bytes(), at: 0 };
    let t = p.ty(0)?;
    (p.at == text.len()).then_some(t)
}

/// `Ns.Name` or `Ns.Outer/Inner`: the notation's form of a runtime type name.
fn def_name(name: &str) -> String {
    name.replace('+', "/")
}

/// Every TypeDef name (the notation's form) that naming `t`'s arguments needs looked up.
fn wanted(t: &TextType, out: &mut HashSet<String>) {
    for a in &t.args {
        if !is_primitive(a) {
            out.insert(def_name(&a.name));
        }
        wanted(a, out);
    }
}

fn is_primitive(t: &TextType) -> bool {
    t.args.is_empty() && t.name.strip_prefix("System.").is_some_and(|n| primitive_keyword("System", n).is_some())
}

/// A type argument in the type notation: a primitive's keyword, else `class N` or `valuetype N` as
/// the defining module says (`class` where no module at hand defines it), then its arguments
/// and suffixes.
pub(super) fn render_text(t: &TextType, value_types: &HashMap<String, bool>) -> String {
    let mut s = match t.name.strip_prefix("System.").and_then(|n| primitive_keyword("System", n)).filter(|_| t.args.is_empty()) {
        Some(p) => p.to_owned(),
        None => {
            let name = def_name(&t.name);
            let keyword = if value_types.get(&name).copied().unwrap_or(false) { "valuetype " } else { "class " };
            let mut s = format!("{keyword}{name}");
            if !t.args.is_empty() {
                let args: Vec<String> = t.args.iter().map(|a| render_text(a, value_types)).collect();
                s.push('<');
                s.push_str(&args.join(","));
                s.push('>');
            }
            s
        }
    };
    for &x in &t.suffix {
        match x {
            POINTER => s.push('*'),
            BYREF => s.push('&'),
            0 => s.push_str("[]"),
            rank => {
                let dims: Vec<&str> = (0..rank.min(32)).map(|_| "0...").collect();
                s.push('[');
                s.push_str(&dims.join(","));
                s.push(']');
            }
        }
    }
    s
}

/// The runtime's parameter list (`(class System.String[],unsigned int8&)`) in the type notation as far
/// as the text allows (`(string[],uint8&)`): for a body whose module is not at hand.
pub(super) fn params_from_text(params: &str) -> String {
    let mut out = params.to_owned();
    for (from, to) in [
        ("class System.String", "string"),
        ("class System.Object", "object"),
        ("value class ", "valuetype "),
        ("unsigned int8", "uint8"),
        ("unsigned int16", "uint16"),
        ("unsigned int32", "uint32"),
        ("unsigned int64", "uint64"),
        ("unsigned int", "native uint"),
        ("float32", "float32"),
    ] {
        out = out.replace(from, to);
    }
    // The runtime prints ELEMENT_TYPE_I as a bare `int`.
    let mut fixed = String::with_capacity(out.len());
    let bytes = out.as_bytes();
    let mut i = 0usize;
    while let Some(rest) = out.get(i..) {
        if rest.is_empty() {
            break;
        }
        let before = i.checked_sub(1).and_then(|j| bytes.get(j)).copied();
        let after = bytes.get(i.saturating_add(3)).copied();
        let word_start = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b' ' && fixed.ends_with("native "));
        if rest.starts_with("int") && word_start && !after.is_some_and(|c| c.is_ascii_alphanumeric()) {
            fixed.push_str("native int");
            i = i.saturating_add(3);
            continue;
        }
        let Some(c) = rest.chars().next() else { break };
        fixed.push(c);
        i = i.saturating_add(c.len_utf8());
    }
    fixed
}

/// Name each body from its module's metadata, with the owner's type arguments from the runtime's
/// text (`owners`, one per body) and the method's own from its MethodDetails (`method_args`, one
/// per body, empty for none). Value-typeness of argument types is looked up in the trace's
/// modules (`modules`), the core library first, one module read at a time. A body whose module
/// cannot be read keeps the name from the text.
pub(super) fn name_from_modules(bodies: &mut [CodeBody], owners: &[String], method_args: &[Vec<String>], modules: &[String]) {
    let parsed: Vec<Option<TextType>> = owners.iter().map(|o| parse_owner(o)).collect();
    let mut want = HashSet::new();
    for t in parsed.iter().flatten() {
        wanted(t, &mut want);
    }
    let mut value_types: HashMap<String, bool> = HashMap::new();
    let mut files = ModuleFiles::default();
    if !want.is_empty() {
        let mut order: Vec<&String> = modules.iter().collect();
        order.sort_by_key(|p| !p.ends_with("System.Private.CoreLib.dll"));
        for path in order {
            files.with(path, |md| {
                for info in md.type_defs_named(&want) {
                    value_types.entry(info.name.clone()).or_insert(info.value_type);
                }
            });
            want.retain(|w| !value_types.contains_key(w));
            if want.is_empty() {
                break;
            }
        }
    }
    let mut by_module: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, b) in bodies.iter().enumerate() {
        if let Some(p) = &b.module_path {
            by_module.entry(p.clone()).or_default().push(i);
        }
    }
    // The module read last for the value types first: it is still in memory.
    let mut by_module: Vec<(String, Vec<usize>)> = by_module.into_iter().collect();
    if let Some(head) = by_module.iter().position(|(m, _)| Some(m.as_str()) == files.last_path()).and_then(|at| by_module.get_mut(..=at)) {
        head.rotate_right(1);
    }
    for (module, list) in by_module {
        files.with(&module, |md| {
            for i in list {
                let owner_args: Vec<String> = match parsed.get(i) {
                    Some(Some(t)) => t.args.iter().map(|a| render_text(a, &value_types)).collect(),
                    _ => Vec::new(),
                };
                let own: &[String] = method_args.get(i).map_or(&[], Vec::as_slice);
                let Some(b) = bodies.get_mut(i) else { continue };
                if let Some((name, full)) = md.body_names(b.token, &owner_args, own) {
                    b.name = Some(name);
                    b.full_name = full;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_files_are_read_within_a_budget() {
        let dir = std::env::temp_dir().join(format!("clrmap-module-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("M.dll");
        std::fs::write(&file, vec![0u8; 1000]).unwrap();
        let path = file.to_str().unwrap();
        // One file named again and again costs its size each time, until the budget is spent.
        let mut files = ModuleFiles::with_budget(2500);
        assert!(files.read(path).is_some() && files.read(path).is_some());
        assert!(files.read(path).is_none());
        // Not a regular file: nothing read.
        assert!(ModuleFiles::default().read("/dev/zero").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Naming reads only the headers and the metadata of a module: the same names as the whole
    /// file gives, for fewer bytes of the budget than the file holds.
    #[test]
    fn module_metadata_is_read_in_part_with_the_names_of_the_whole_file() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/frames/release-portable/Frames.dll");
        let whole = std::fs::read(path).unwrap();
        let md = crate::formats::metadata::Metadata::parse(&whole).unwrap();
        let names = |md: &crate::formats::metadata::Metadata<'_>| (1..400u32).map(|row| md.method_name(0x0600_0000 | row)).collect::<Vec<_>>();
        let want = names(&md);
        assert!(want.iter().filter(|n| n.is_some()).count() > 10);
        let size = whole.len() as u64;
        let mut files = ModuleFiles::with_budget(size - 1);
        assert_eq!(files.with(path, names), Some(want.clone()));
        // Named again, the file is not read again; a whole read no longer fits what is left.
        assert_eq!(files.with(path, names), Some(want));
        assert!(files.read(path).is_none());
        // Too small a budget for the headers and the metadata: nothing.
        assert!(ModuleFiles::with_budget(4096).with(path, names).is_none());
    }

    #[test]
    fn runtime_type_text_parses_and_renders_in_contract_notation() {
        let t = parse_owner("System.Linq.EnumerableSorter`1+<>c[System.Int32]").unwrap();
        assert_eq!((t.name.as_str(), t.args.len()), ("System.Linq.EnumerableSorter`1+<>c", 1));
        let vt: HashMap<String, bool> = [("System.Collections.Generic.KeyValuePair`2".to_owned(), true)].into_iter().collect();
        let t = parse_owner("Pair`2[System.Collections.Generic.KeyValuePair`2[System.Int32,System.String],System.__Canon]").unwrap();
        let args: Vec<String> = t.args.iter().map(|a| render_text(a, &vt)).collect();
        assert_eq!(args, ["valuetype System.Collections.Generic.KeyValuePair`2<int32,string>", "class System.__Canon"]);
        let t = parse_owner("Box`1[System.Int32[][,]]").unwrap();
        assert_eq!(render_text(&t.args[0], &vt), "int32[][0...,0...]");
        // Assembly-qualified arguments.
        let t = parse_owner("Box`1[[System.Guid, System.Private.CoreLib, Version=8.0.0.0]]").unwrap();
        assert_eq!(render_text(&t.args[0], &vt), "class System.Guid");
        assert!(parse_owner("Box`1[System.Int32").is_none());
        assert_eq!(params_from_text("(class System.String[],unsigned int8&,int,int32,unsigned int,value class X)"), "(string[],uint8&,native int,int32,native uint,valuetype X)");
    }
}

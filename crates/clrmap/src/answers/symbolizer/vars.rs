//! Names for the variables of a method's native debug info (ICorDebugInfo::NativeVarInfo).
//!
//! The JIT numbers IL variables as arguments first (`this`, then the declared parameters), then
//! locals (cordebuginfo.h, `VarNumber`); negative numbers are special: −1 the varargs cookie, −2
//! the return buffer, −3 the generic context, −4 unknown. Argument names come from the assembly's
//! Param table, local names from the PDB's LocalScope and LocalVariable rows.

use std::collections::{HashMap, HashSet};

use crate::formats::metadata::MethodArgs;
use crate::formats::pdb::LocalScope;

/// What a variable number names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum VarKind {
    /// An IL argument (`this` included).
    Arg,
    /// An IL local.
    Local,
    /// `VARARGS_HANDLE` (−1).
    VarargsHandle,
    /// `RETBUF_ILNUM` (−2).
    ReturnBuffer,
    /// `TYPECTXT_ILNUM` (−3).
    GenericContext,
    /// `UNKNOWN_ILNUM` (−4), or another negative number.
    Unknown,
}

/// A variable number, named.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VarName {
    /// Argument, local, or a special variable.
    pub kind: VarKind,
    /// The argument or local slot (0 for special variables).
    pub index: u32,
    /// Its name where known. A local slot reused under several names in different scopes
    /// gives them all, joined with `/`, in scope order.
    pub name: Option<String>,
}

/// The most bytes of one slot's joined local names: a PDB that gives one slot thousands of names
/// gets the first ones, then `/...`.
pub const MAX_SLOT_NAMES: usize = 4096;

/// A method's local names by slot, indexed once from its scopes, so naming each variable is a
/// look-up (not a walk over every local of the method).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalNames {
    by_slot: HashMap<u16, String>,
}

impl LocalNames {
    /// Index the names of every scope's variables: a slot reused under several names in
    /// different scopes gives them all, joined with `/`, in scope order, each once, up to
    /// `MAX_SLOT_NAMES` bytes.
    pub fn new(scopes: &[LocalScope]) -> Self {
        let mut seen: HashSet<(u16, &str)> = HashSet::new();
        let mut full: HashSet<u16> = HashSet::new();
        let mut by_slot: HashMap<u16, String> = HashMap::new();
        for v in scopes.iter().flat_map(|s| &s.variables) {
            if full.contains(&v.index) || !seen.insert((v.index, v.name.as_str())) {
                continue;
            }
            let joined = by_slot.entry(v.index).or_default();
            let extra = if joined.is_empty() { 0 } else { 1 };
            if joined.len().saturating_add(extra).saturating_add(v.name.len()) > MAX_SLOT_NAMES {
                joined.push_str("/...");
                full.insert(v.index);
                continue;
            }
            if extra == 1 {
                joined.push('/');
            }
            joined.push_str(&v.name);
        }
        LocalNames { by_slot }
    }

    /// The joined names of a slot, if any local has it.
    pub fn get(&self, slot: u32) -> Option<&str> {
        self.by_slot.get(&u16::try_from(slot).ok()?).map(String::as_str)
    }
}

impl From<&[LocalScope]> for LocalNames {
    fn from(scopes: &[LocalScope]) -> Self {
        LocalNames::new(scopes)
    }
}

/// Name variable `number`. Without `args` (no metadata), every non-negative number is taken as
/// unknown, since where arguments end cannot be told. `locals`: the method's local names,
/// indexed once per method ([`LocalNames::new`]).
pub fn name_var(number: i32, args: Option<&MethodArgs<'_>>, locals: &LocalNames) -> VarName {
    let special = |kind| VarName { kind, index: 0, name: None };
    let Ok(n) = u32::try_from(number) else {
        return match number {
            -1 => special(VarKind::VarargsHandle),
            -2 => special(VarKind::ReturnBuffer),
            -3 => special(VarKind::GenericContext),
            _ => special(VarKind::Unknown),
        };
    };
    let Some(args) = args else { return VarName { kind: VarKind::Unknown, index: n, name: None } };
    let argc = u32::try_from(args.names.len()).unwrap_or(u32::MAX);
    if n < argc {
        let name = args.names.get(n as usize).copied().flatten().map(str::to_owned);
        return VarName { kind: VarKind::Arg, index: n, name };
    }
    let slot = n.saturating_sub(argc);
    VarName { kind: VarKind::Local, index: slot, name: locals.get(slot).map(str::to_owned) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::pdb::LocalVariable;

    #[test]
    fn arguments_then_locals_then_specials() {
        let args = MethodArgs { has_this: true, names: vec![Some("this"), Some("x"), None] };
        let var = |index, name: &str| LocalVariable { index, attributes: 0, name: name.to_owned() };
        let scopes = [LocalScope { start_offset: 0, length: 10, variables: vec![var(0, "sum"), var(1, "i")] }, LocalScope { start_offset: 4, length: 2, variables: vec![var(1, "j")] }];
        let locals = LocalNames::new(&scopes);
        let n = |number| name_var(number, Some(&args), &locals);
        assert_eq!(n(0), VarName { kind: VarKind::Arg, index: 0, name: Some("this".into()) });
        assert_eq!(n(2), VarName { kind: VarKind::Arg, index: 2, name: None });
        assert_eq!(n(3), VarName { kind: VarKind::Local, index: 0, name: Some("sum".into()) });
        assert_eq!(n(4), VarName { kind: VarKind::Local, index: 1, name: Some("i/j".into()) });
        assert_eq!(n(9).name, None);
        assert_eq!(n(-3).kind, VarKind::GenericContext);
        assert_eq!(name_var(3, None, &locals).kind, VarKind::Unknown);
    }

    #[test]
    fn many_names_for_one_slot_are_indexed_once_and_bounded() {
        // 100,000 distinct names for slot 0 and 100,000 more locals: the old walk compared each
        // name with every name kept so far (quadratic; 22 s for 100,000 locals).
        let var = |index, name: String| LocalVariable { index, attributes: 0, name };
        let variables: Vec<LocalVariable> = (0..100_000).map(|i| var(0, format!("v{i}"))).chain((0..100_000).map(|i| var(1 + (i % 60_000) as u16, format!("w{i}")))).collect();
        let scopes = [LocalScope { start_offset: 0, length: 10, variables }];
        let t = std::time::Instant::now();
        let locals = LocalNames::new(&scopes);
        let args = MethodArgs { has_this: false, names: vec![] };
        let names: Vec<VarName> = (0..100_000).map(|n| name_var(n, Some(&args), &locals)).collect();
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
        let first = names[0].name.as_deref().unwrap();
        assert!(first.starts_with("v0/v1/v2/") && first.ends_with("/...") && first.len() <= MAX_SLOT_NAMES + 4, "{}", first.len());
        assert_eq!(names[2].name.as_deref(), Some("w1/w60001"));
    }
}

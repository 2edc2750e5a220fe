//! Names for the variables of a method's native debug info (ICorDebugInfo::NativeVarInfo).
//!
//! The JIT numbers IL variables as arguments first (`this`, then the declared parameters), then
//! locals (cordebuginfo.h, `VarNumber`); negative numbers are special: −1 the varargs cookie, −2
//! the return buffer, −3 the generic context, −4 unknown. Argument names come from the assembly's
//! Param table, local names from the PDB's LocalScope and LocalVariable rows.

use crate::metadata::MethodArgs;
use crate::pdb::LocalScope;

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

/// Name variable `number`. Without `args` (no metadata), every non-negative number is taken as
/// unknown, since where arguments end cannot be told.
pub fn name_var(number: i32, args: Option<&MethodArgs<'_>>, scopes: &[LocalScope]) -> VarName {
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
    let mut names: Vec<&str> = Vec::new();
    for v in scopes.iter().flat_map(|s| &s.variables) {
        if u32::from(v.index) == slot && !names.contains(&v.name.as_str()) {
            names.push(&v.name);
        }
    }
    VarName { kind: VarKind::Local, index: slot, name: (!names.is_empty()).then(|| names.join("/")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdb::LocalVariable;

    #[test]
    fn arguments_then_locals_then_specials() {
        let args = MethodArgs { has_this: true, names: vec![Some("this"), Some("x"), None] };
        let var = |index, name: &str| LocalVariable { index, attributes: 0, name: name.to_owned() };
        let scopes = [
            LocalScope { start_offset: 0, length: 10, variables: vec![var(0, "sum"), var(1, "i")] },
            LocalScope { start_offset: 4, length: 2, variables: vec![var(1, "j")] },
        ];
        let n = |number| name_var(number, Some(&args), &scopes);
        assert_eq!(n(0), VarName { kind: VarKind::Arg, index: 0, name: Some("this".into()) });
        assert_eq!(n(2), VarName { kind: VarKind::Arg, index: 2, name: None });
        assert_eq!(n(3), VarName { kind: VarKind::Local, index: 0, name: Some("sum".into()) });
        assert_eq!(n(4), VarName { kind: VarKind::Local, index: 1, name: Some("i/j".into()) });
        assert_eq!(n(9).name, None);
        assert_eq!(n(-3).kind, VarKind::GenericContext);
        assert_eq!(name_var(3, None, &scopes).kind, VarKind::Unknown);
    }
}

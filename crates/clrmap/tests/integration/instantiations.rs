//! ReadyToRun instantiations (section 109) are named with their type and method arguments
//! (names that tell bodies apart), on the real CoreLib and every R2R assembly of both
//! shared frameworks.
//!
//! The argument lists are read from the instantiation signatures; they are checked against what
//! the signatures do not hold: how many generic parameters the owner type and the method have
//! (the GenericParam table, II.22.20), and the owner's name from the MethodDef's TypeDef.

use std::collections::{BTreeSet, HashMap};

use clrmap::metadata::{table, Metadata};
use clrmap::r2r::ReadyToRunImage;
use clrmap::symbolizer::open_source;

use crate::support::runtimes;

/// The top-level items of an argument list `<A,B<C,D>,E[0...,0...]>` (the text between the
/// outer angle brackets), and the rest after its closing bracket.
fn split_args(text: &str) -> Option<(Vec<&str>, &str)> {
    let body = text.strip_prefix('<')?;
    let (mut depth, mut start, mut items) = (0i32, 0usize, Vec::new());
    for (i, c) in body.char_indices() {
        match c {
            '<' | '[' | '(' => depth += 1,
            ',' if depth == 0 => {
                items.push(&body[start..i]);
                start = i + 1;
            }
            '>' if depth == 0 => {
                items.push(&body[start..i]);
                return Some((items, &body[i + 1..]));
            }
            '>' | ']' | ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// `full` without the return type that leads it: from the last ` Owner` outside any brackets
/// (the return type's own mentions of the owner come before it; the arguments' are inside).
fn without_return_type<'a>(full: &'a str, owner: &str) -> &'a str {
    let (mut depth, mut last) = (0i32, None);
    for (i, c) in full.char_indices() {
        match c {
            '<' | '[' | '(' => depth += 1,
            '>' | ']' | ')' => depth -= 1,
            ' ' if depth == 0 && full[i + 1..].starts_with(owner) => last = Some(i + 1),
            _ => {}
        }
    }
    last.map_or(full, |i| &full[i..])
}

/// GenericParam rows per owner (TypeOrMethodDef coded index: tag 0 TypeDef, 1 MethodDef).
fn generic_arity(md: &Metadata<'_>) -> HashMap<u32, usize> {
    let mut out = HashMap::new();
    for row in md.tables().table(table::GENERIC_PARAM).iter() {
        let owner = row.get(2).unwrap();
        let token = if owner & 1 == 0 { 0x0200_0000 | (owner >> 1) } else { 0x0600_0000 | (owner >> 1) };
        *out.entry(token).or_insert(0) += 1;
    }
    out
}

/// The TypeDef that owns a MethodDef: the last type whose MethodList starts at or before it.
fn owner_of(md: &Metadata<'_>, method: u32) -> u32 {
    let rid = method & 0x00FF_FFFF;
    let types = md.tables().table(table::TYPE_DEF);
    let mut owner = 0;
    for (i, row) in types.iter().enumerate() {
        if row.get(5).unwrap() <= rid {
            owner = i as u32 + 1;
        }
    }
    0x0200_0000 | owner
}

#[test]
#[ignore = "needs .NET"]
fn instantiations_carry_their_type_and_method_arguments() {
    for rt in runtimes("instantiations::instantiations_carry_their_type_and_method_arguments") {
        let (mut checked, mut with_method_args) = (0usize, 0usize);
        for f in rt.assemblies() {
            let bytes = std::fs::read(&f).unwrap();
            if ReadyToRunImage::parse(&bytes).is_err() {
                continue; // IL-only
            }
            let md = Metadata::parse(&bytes).unwrap();
            let arity = generic_arity(&md);
            let opened = open_source(&f).unwrap();
            let mut owners: HashMap<u32, u32> = HashMap::new();
            for b in opened.bodies.iter().filter(|b| b.signature.is_some()) {
                let (name, full) = (b.name.as_deref().unwrap(), b.full_name.as_deref());
                let full = full.unwrap_or_else(|| panic!("{}: {name} has no full name", f.display()));
                let (owner_name, method) = name.rsplit_once("::").unwrap();
                // A conversion operator's return type leads (Metadata::method_full_name).
                let full = if method.starts_with("op_") && !full.starts_with(owner_name) { without_return_type(full, owner_name) } else { full };
                let rest = full.strip_prefix(owner_name).unwrap_or_else(|| panic!("{full} is not a body of {owner_name}"));
                // The owner's arguments, one per generic parameter of its TypeDef.
                let owner = *owners.entry(b.token).or_insert_with(|| owner_of(&md, b.token));
                let type_params = arity.get(&owner).copied().unwrap_or(0);
                let rest = if type_params > 0 {
                    let (args, rest) = split_args(rest).unwrap_or_else(|| panic!("{full}: no type arguments"));
                    assert_eq!(args.len(), type_params, "{full}");
                    assert!(args.iter().all(|a| !a.is_empty() && !a.starts_with('!')), "{full}: open arguments");
                    rest
                } else {
                    rest
                };
                let rest = rest.strip_prefix("::").and_then(|r| r.strip_prefix(method)).unwrap_or_else(|| panic!("{full}"));
                // The method's arguments, one per generic parameter of its MethodDef.
                let method_params = arity.get(&b.token).copied().unwrap_or(0);
                if method_params > 0 {
                    let (args, after) = split_args(rest).unwrap_or_else(|| panic!("{full}: no method arguments"));
                    assert_eq!(args.len(), method_params, "{full}");
                    assert!(after.starts_with('('), "{full}");
                    with_method_args += 1;
                } else {
                    assert!(rest.starts_with('('), "{full}");
                }
                checked += 1;
            }
        }
        assert!(checked > 10_000 && with_method_args > 1_000, "{}: {checked} instantiations, {with_method_args} generic methods", rt.version);
        eprintln!("{}: {checked} instantiations named, {with_method_args} with method arguments", rt.version);
    }
}

#[test]
#[ignore = "needs .NET"]
fn corelib_instantiations_are_told_apart() {
    for rt in runtimes("instantiations::corelib_instantiations_are_told_apart") {
        let corelib = rt.framework.join("System.Private.CoreLib.dll");
        let opened = open_source(&corelib).unwrap();
        let full: BTreeSet<&str> = opened.bodies.iter().filter_map(|b| b.full_name.as_deref()).collect();
        // Known uses in the runtime's own sources: AppContext keeps its switches in a
        // Dictionary<string, object> and reads them with TryGetValue (shared code over __Canon);
        // StringBuilder and String allocate with GC.AllocateUninitializedArray<char>, whose
        // `bool pinned` parameter came with .NET 5.
        let alloc = if rt.version.starts_with("3.") { "System.GC::AllocateUninitializedArray<char>(int32)" } else { "System.GC::AllocateUninitializedArray<char>(int32,bool)" };
        for want in [
            "System.Collections.Generic.Dictionary`2<class System.__Canon,class System.__Canon>::TryGetValue(!0,!1&)",
            "System.Collections.Generic.List`1<class System.__Canon>::Add(!0)",
            "System.Collections.Generic.List`1<int32>::Add(!0)",
            alloc,
        ] {
            assert!(full.contains(want), "{}: {want} is missing", rt.version);
        }
        // Every body has a name of its own: instantiations by their arguments, overloads by their
        // parameters, conversion operators also by their return types.
        let mut seen = BTreeSet::new();
        for b in &opened.bodies {
            let name = b.full_name.as_deref().unwrap();
            assert!(seen.insert(name), "{}: two bodies are named {name}", rt.version);
        }
        assert!(full.contains("uint8 System.Decimal::op_Explicit(valuetype System.Decimal)"), "{}", rt.version);
        // Every List`1::Add body has a name of its own.
        let adds: Vec<&str> = opened.bodies.iter().filter(|b| b.name.as_deref() == Some("System.Collections.Generic.List`1::Add")).map(|b| b.full_name.as_deref().unwrap()).collect();
        let distinct: BTreeSet<&str> = adds.iter().copied().collect();
        assert!(adds.len() > 5, "{}: {} List`1::Add bodies", rt.version, adds.len());
        assert_eq!(distinct.len(), adds.len(), "{}: {adds:#?}", rt.version);
        // Entry points without debug info have no map, so `il dump` does not list them.
        let add = opened.bodies.iter().find(|b| b.name.as_deref() == Some("System.Collections.Generic.List`1::Add")).unwrap().token;
        let bytes = std::fs::read(&corelib).unwrap();
        let entries = ReadyToRunImage::parse(&bytes).unwrap().entry_points().unwrap().iter().filter(|e| e.token == add).count();
        eprintln!("{}: {} List`1::Add bodies with maps ({entries} entry points), {} distinct names", rt.version, adds.len(), distinct.len());
    }
}

//! What a method's IL holds at one offset: the evidence that recovers a dotnet/runtime#98755 orphan's parent
//! (docs/rich-debug-info.md, sections 6 and 7). A node's ILOffset is the offset of the `call`,
//! `callvirt` or `newobj` in its parent's IL; so a candidate parent is the parent only if its IL
//! has such an instruction there, to the orphan's method.
//!
//! The instructions are walked from the start of the body (ECMA-335 III: each opcode's operand
//! size), so an offset inside another instruction's operand is never taken for a call.

use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::metadata::schema::table;
use crate::formats::metadata::Metadata;
use crate::formats::pe::PeImage;

/// The instruction at an IL offset, as far as recovery needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IlCallSite {
    /// A `call` (0x28), `callvirt` (0x6F) or `newobj` (0x73).
    Call {
        /// The opcode.
        opcode: u8,
        /// Prefixed by `constrained.` (ECMA-335 III.2.1): the runtime resolves the method through
        /// the constraint type, so a `call` of a static abstract interface member
        /// (`IMinMaxValue<T>.get_MaxValue`) runs, and is inlined as, the type's implementation, whose
        /// name differs (`System.Numerics.IMinMaxValue<System.Char>.get_MaxValue`, seen in 9.0.20's
        /// trees).
        constrained: bool,
        /// The method token, a MethodSpec resolved to its method (II.22.29): a MethodDef of the
        /// caller's module or a MemberRef.
        token: u32,
        /// The called member's simple name, if it can be read.
        name: Option<String>,
        /// The MethodDef of the caller's module the token stands for: the token itself, or a
        /// MemberRef on a type of this module (a generic instantiation `List<int>::Add` is a
        /// MemberRef whose parent is a TypeSpec) matched by name and identical signature blob.
        def: Option<u32>,
        /// For a MemberRef on another module's type (a TypeRef, or a TypeSpec instantiating one)
        /// that is not nested: that type's namespace and name.
        ext: Option<(String, String)>,
    },
    /// No instruction starts at the offset, or the one there is no call.
    NotACall,
}

/// What names a method across modules: its owner's namespace and name (an owner that is not
/// nested), its own name, and whether the owner has other methods of that name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodKey {
    /// The owner's namespace.
    pub namespace: String,
    /// The owner's name (`List`1`).
    pub type_name: String,
    /// The method's name.
    pub name: String,
    /// The owner has more than one method of this name: a name alone does not pick it.
    pub overloaded: bool,
}

/// The callee of a question to [`IlCallSite::calls`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Callee {
    /// Defined in the caller's own module.
    pub in_callers_module: bool,
    /// Its MethodDef token (in its own module).
    pub token: u32,
    /// Its name and owner ([`method_key`]), if they can be read.
    pub key: Option<MethodKey>,
}

impl IlCallSite {
    /// Whether this site is where the JIT inlined `callee`. The JIT does not always inline the
    /// method the IL names: it devirtualizes `callvirt`, and it replaces a delegate's
    /// `newobj .ctor` by the runtime's own constructor (`Delegate.CtorOpened`, seen in real 8.0.4
    /// trees). So only these answers are certain:
    /// - `Some(true)`: a call of that very method: the same MethodDef of the caller's module, or
    ///   a MemberRef on another module's type whose namespace, name and method name are the
    ///   callee's, where its owner has no other method of that name;
    /// - `Some(false)`: no call instruction there, or a plain `call` (neither virtual, nor
    ///   `constrained.`, nor a constructor) of a member with another name;
    /// - `None` otherwise (another method the JIT may have substituted, or an overload that only
    ///   a signature could tell): recovery never guesses.
    pub fn calls(&self, callee: &Callee) -> Option<bool> {
        let IlCallSite::Call { opcode, constrained, name, def, ext, .. } = self else { return Some(false) };
        if callee.in_callers_module && *def == Some(callee.token) {
            return Some(true);
        }
        let key = callee.key.as_ref()?;
        if let (false, Some((ns, ty)), Some(n)) = (callee.in_callers_module, ext, name) {
            if *ns == key.namespace && *ty == key.type_name && *n == key.name && !key.overloaded {
                return Some(true);
            }
        }
        match name {
            Some(n) if *opcode == 0x28 && !*constrained && *n != key.name => Some(false),
            _ => None,
        }
    }
}

/// [`MethodKey`] of a MethodDef (`None` for a nested owner, or names that cannot be read).
pub fn method_key(md: &Metadata<'_>, method: u32) -> Option<MethodKey> {
    if method >> 24 != u32::from(table::METHOD_DEF) {
        return None;
    }
    let rid = method & 0x00FF_FFFF;
    let name = method_simple_name(md, method)?;
    let owner = md.method_owner(rid)?;
    // TypeDef (II.22.37): Flags, TypeName, TypeNamespace, Extends, FieldList, MethodList. A
    // nested type has visibility 2-7 (II.23.1.15).
    let row = md.tables().row(table::TYPE_DEF, owner).ok()?;
    if row.get(0).ok()? & 7 >= 2 {
        return None;
    }
    let type_name = md.strings().get(row.get(1).ok()?).ok()?.to_owned();
    let namespace = md.strings().get(row.get(2).ok()?).ok()?.to_owned();
    let (first, end) = method_range(md, owner)?;
    let mut same = 0u32;
    for r in first..end {
        let m = md.tables().row(table::METHOD_DEF, r).ok()?;
        if md.strings().get(m.get(3).ok()?).ok()? == name {
            same = same.saturating_add(1);
        }
    }
    Some(MethodKey { namespace, type_name, name, overloaded: same != 1 })
}

/// The MethodDef rows of a TypeDef: its MethodList (column 5) up to the next TypeDef's, or to
/// the end of the table; `None` with a MethodPtr table (a `#-` stream's indirection).
fn method_range(md: &Metadata<'_>, type_def: u32) -> Option<(u32, u32)> {
    if md.tables().rows(table::METHOD_PTR) != 0 {
        return None;
    }
    let methods = md.tables().rows(table::METHOD_DEF);
    let first = md.tables().row(table::TYPE_DEF, type_def).ok()?.get(5).ok()?;
    let end = match md.tables().row(table::TYPE_DEF, type_def.saturating_add(1)) {
        Ok(next) => next.get(5).ok()?,
        Err(_) => methods.saturating_add(1),
    };
    Some((first, end.min(methods.saturating_add(1))))
}

/// The IL code of a MethodDef: its body's code bytes, after the tiny or fat header (ECMA-335
/// II.25.4). `not_found` for a method without a body (RVA 0: abstract, extern, runtime);
/// `bad_image` for a body that does not fit.
pub fn il_code<'a>(pe: &PeImage<'a>, md: &Metadata<'a>, method: u32) -> Result<Reader<'a>> {
    if method >> 24 != u32::from(table::METHOD_DEF) {
        return Err(Error::nowhere(ErrorKind::NotFound, "a MethodDef token"));
    }
    // MethodDef (II.22.26): RVA u32, ImplFlags, Flags, Name, Signature, ParamList.
    let rva = md.tables().row(table::METHOD_DEF, method & 0x00FF_FFFF)?.get(0)?;
    if rva == 0 {
        return Err(Error::nowhere(ErrorKind::NotFound, "a method with an IL body"));
    }
    let mut r = pe.reader_from(rva)?;
    let head = r;
    let bad = |e: Error| e.with_kind(ErrorKind::BadImage);
    let first = r.u8("a method header").map_err(bad)?;
    let size = match first & 3 {
        // CorILMethod_TinyFormat: the code size in the upper 6 bits, code right after.
        2 => u32::from(first >> 2),
        // CorILMethod_FatFormat: u16 Flags (low 12 bits) and Size (upper 4, in dwords), u16
        // MaxStack, u32 CodeSize, u32 LocalVarSigTok; the code starts Size·4 bytes in.
        3 => {
            let second = r.u8("a fat method header").map_err(bad)?;
            let header = usize::from(second >> 4).saturating_mul(4);
            let _max_stack = r.u16("MaxStack").map_err(bad)?;
            let code_size = r.u32("CodeSize").map_err(bad)?;
            r = head;
            if header < 12 {
                return Err(head.error(ErrorKind::BadImage, "a fat method header of at least 12 bytes"));
            }
            r.skip(header, "a fat method header").map_err(bad)?;
            code_size
        }
        _ => return Err(head.error(ErrorKind::BadImage, "a tiny or fat method header")),
    };
    r.split(size as usize, "a method's IL code").map_err(bad)
}

/// The operand size of the instruction whose opcode is at the reader, and the opcode (one byte,
/// or 0xFE00 | second), per ECMA-335 III; `None` for an unknown opcode.
fn opcode(r: &mut Reader<'_>) -> Result<Option<(u16, usize)>> {
    let b = r.u8("an opcode")?;
    let size = match b {
        0xFE => {
            let s = r.u8("a two-byte opcode")?;
            let size = match s {
                0x00..=0x05 | 0x0F | 0x11 | 0x13 | 0x14 | 0x17 | 0x18 | 0x1A | 0x1D | 0x1E => 0,
                0x12 | 0x19 => 1,
                0x09..=0x0E => 2,
                0x06 | 0x07 | 0x15 | 0x16 | 0x1C => 4,
                _ => return Ok(None),
            };
            return Ok(Some((0xFE00 | u16::from(s), size)));
        }
        0x0E..=0x13 | 0x1F | 0x2B..=0x37 | 0xDE => 1,
        0x20 | 0x22 | 0x27..=0x29 | 0x38..=0x44 | 0x6F..=0x75 | 0x79 | 0x7B..=0x81 | 0x8C | 0x8D | 0x8F | 0xA3..=0xA5 | 0xC2 | 0xC6 | 0xD0 | 0xDD => 4,
        0x21 | 0x23 => 8,
        // switch: u32 N, then N u32 targets.
        0x45 => {
            let n = r.u32("a switch's count")?;
            return Ok(Some((0x45, (n as usize).saturating_mul(4))));
        }
        0x00..=0x0D | 0x14..=0x1E | 0x25 | 0x26 | 0x2A | 0x46..=0x6E | 0x76 | 0x7A | 0x82..=0x8B | 0x8E | 0x90..=0xA2 | 0xB3..=0xBA | 0xC3 | 0xD1..=0xDC | 0xDF | 0xE0 => 0,
        _ => return Ok(None),
    };
    Ok(Some((u16::from(b), size)))
}

/// The instruction at `il_offset` of `method`'s IL (see [`IlCallSite`]). Walks the instructions
/// from 0; an unknown opcode or a body cut short before the offset is `bad_image` at that byte
/// (the evidence is then missing: the caller should answer "cannot tell").
pub fn call_site<'a>(pe: &PeImage<'a>, md: &Metadata<'a>, method: u32, il_offset: u32) -> Result<IlCallSite> {
    let code = il_code(pe, md, method)?;
    let start = code.offset();
    let mut r = code;
    // Whether the instruction before is the `constrained.` prefix (0xFE 0x16).
    let mut constrained = false;
    loop {
        let at = r.offset().saturating_sub(start);
        if at > u64::from(il_offset) || r.is_empty() {
            return Ok(IlCallSite::NotACall);
        }
        let here = r;
        let Some((op, size)) = opcode(&mut r).map_err(|e| e.with_kind(ErrorKind::BadImage))? else {
            return Err(here.error(ErrorKind::BadImage, "a known IL opcode"));
        };
        if at == u64::from(il_offset) {
            // call 0x28, callvirt 0x6F, newobj 0x73: a method token follows.
            let opcode = match op {
                0x28 => 0x28,
                0x6F => 0x6F,
                0x73 => 0x73,
                _ => return Ok(IlCallSite::NotACall),
            };
            let token = r.u32("a call's method token").map_err(|e| e.with_kind(ErrorKind::BadImage))?;
            return resolve(md, opcode, constrained, token);
        }
        constrained = op == 0xFE16;
        r.skip(size, "an instruction's operand").map_err(|e| e.with_kind(ErrorKind::BadImage))?;
    }
}

/// A call's token as a site: a MethodSpec goes to its method (II.22.29); a MethodDef or
/// MemberRef (II.22.25: Class, Name, Signature) is named.
fn resolve(md: &Metadata<'_>, opcode: u8, constrained: bool, token: u32) -> Result<IlCallSite> {
    let token = if token >> 24 == u32::from(table::METHOD_SPEC) { md.method_spec(token & 0x00FF_FFFF)?.method } else { token };
    let (name, def) = match (token >> 24) as u8 {
        table::METHOD_DEF => (method_simple_name(md, token), Some(token)),
        table::MEMBER_REF => {
            let row = md.tables().row(table::MEMBER_REF, token & 0x00FF_FFFF)?;
            let name = md.strings().get(row.get(1)?).ok();
            let class = row.get(0)?;
            let def = name.and_then(|n| member_ref_def(md, class, n, row.get(2).ok()?));
            (name.map(str::to_owned), def)
        }
        _ => return Ok(IlCallSite::NotACall),
    };
    let ext = if token >> 24 == u32::from(table::MEMBER_REF) { member_ref_type_ref(md, token) } else { None };
    Ok(IlCallSite::Call { opcode, constrained, token, name, def, ext })
}

/// A MemberRef's parent as a TypeDefOrRef token: directly (MemberRefParent tags 0 TypeDef, 1
/// TypeRef) or through a TypeSpec `GENERICINST (CLASS|VALUETYPE) T ...` (tag 4).
fn member_ref_parent_type(md: &Metadata<'_>, class: u32) -> Option<u32> {
    let (tag, rid) = (class & 7, class >> 3);
    match tag {
        0 => Some(u32::from(table::TYPE_DEF) << 24 | rid),
        1 => Some(u32::from(table::TYPE_REF) << 24 | rid),
        4 => {
            // TypeSpec (II.22.39): one column, the signature blob (II.23.2.14).
            let spec = md.tables().row(table::TYPE_SPEC, rid).ok()?;
            let mut r = md.blobs().get(spec.get(0).ok()?).ok()?;
            if r.u8("").ok()? != 0x15 || !matches!(r.u8("").ok()?, 0x11 | 0x12) {
                return None;
            }
            r.coded_type_token("").ok()
        }
        _ => None,
    }
}

/// The namespace and name of a MemberRef's parent when it is a TypeRef (II.22.38:
/// ResolutionScope, TypeName, TypeNamespace) that is not nested (its scope is no TypeRef).
fn member_ref_type_ref(md: &Metadata<'_>, token: u32) -> Option<(String, String)> {
    let row = md.tables().row(table::MEMBER_REF, token & 0x00FF_FFFF).ok()?;
    let t = member_ref_parent_type(md, row.get(0).ok()?)?;
    if t >> 24 != u32::from(table::TYPE_REF) {
        return None;
    }
    let tr = md.tables().row(table::TYPE_REF, t & 0x00FF_FFFF).ok()?;
    // ResolutionScope: 2 tag bits; 3 is a TypeRef (a nested type).
    if tr.get(0).ok()? & 3 == 3 {
        return None;
    }
    let name = md.strings().get(tr.get(1).ok()?).ok()?.to_owned();
    let namespace = md.strings().get(tr.get(2).ok()?).ok()?.to_owned();
    Some((namespace, name))
}

/// The MethodDef a MemberRef stands for when its parent is a type of the same module: a TypeDef
/// (tag 0 of MemberRefParent, II.24.2.6), or a TypeSpec `GENERICINST (CLASS|VALUETYPE) TypeDef
/// ...` (II.23.2.14). The method is the one of that type with the same name and a byte-identical
/// signature blob (a MemberRef on a generic instantiation keeps the definition's `!0` form).
/// `None` when it cannot be told: another module's type, a `#-` stream with a MethodPtr table,
/// no such method, or more than one.
fn member_ref_def(md: &Metadata<'_>, class: u32, name: &str, sig_index: u32) -> Option<u32> {
    let t = member_ref_parent_type(md, class)?;
    if t >> 24 != u32::from(table::TYPE_DEF) {
        return None;
    }
    let (first, end) = method_range(md, t & 0x00FF_FFFF)?;
    let want = md.blobs().get(sig_index).ok()?.as_slice();
    let mut found = None;
    for rid in first..end {
        // MethodDef (II.22.26): Name column 3, Signature column 4.
        let row = md.tables().row(table::METHOD_DEF, rid).ok()?;
        if md.strings().get(row.get(3).ok()?).ok()? != name {
            continue;
        }
        if md.blobs().get(row.get(4).ok()?).ok()?.as_slice() == want {
            if found.is_some() {
                return None;
            }
            found = Some(u32::from(table::METHOD_DEF) << 24 | rid);
        }
    }
    found
}

/// A method's simple name (the MethodDef's Name), for [`IlCallSite::calls`].
pub fn method_simple_name(md: &Metadata<'_>, method: u32) -> Option<String> {
    if method >> 24 != u32::from(table::METHOD_DEF) {
        return None;
    }
    let row = md.tables().row(table::METHOD_DEF, method & 0x00FF_FFFF).ok()?;
    md.strings().get(row.get(3).ok()?).ok().map(str::to_owned)
}

/// Parsed modules, by path, for [`recover_tree`]: each image read once and parsed once, however
/// many trees ask about it. A file that cannot be read or parsed is kept as `None` (its methods'
/// IL is then not at hand: "cannot tell").
#[derive(Debug, Default)]
pub struct IlModules<'a> {
    by_path: std::collections::HashMap<std::path::PathBuf, Option<(PeImage<'a>, Metadata<'a>)>>,
}

impl<'a> IlModules<'a> {
    /// Parse every image in `bytes` (path → the file's bytes).
    pub fn new(bytes: &'a std::collections::HashMap<std::path::PathBuf, Vec<u8>>) -> Self {
        let by_path = bytes
            .iter()
            .map(|(p, b)| {
                let parsed = PeImage::parse(b).ok().and_then(|pe| Metadata::from_pe(&pe).ok().map(|md| (pe, md)));
                (p.clone(), parsed)
            })
            .collect();
        IlModules { by_path }
    }

    fn get(&self, path: &std::path::Path) -> Option<&(PeImage<'a>, Metadata<'a>)> {
        self.by_path.get(path).and_then(Option::as_ref)
    }
}

/// Read the files [`recover_tree`] will need (each once, each at most `limit` bytes): `paths`
/// in, path → bytes out; files that cannot be read are left out.
pub fn read_modules<'p>(paths: impl IntoIterator<Item = &'p std::path::Path>, limit: u64) -> std::collections::HashMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::HashMap::new();
    for p in paths {
        if out.contains_key(p) {
            continue;
        }
        if let Ok(b) = crate::base::fs::read_regular(p, limit) {
            out.insert(p.to_path_buf(), b);
        }
    }
    out
}

/// Recover `tree`'s orphans from the IL ([`super::InlineTree::recover_parents`] with [`call_site`] as
/// the evidence). `method_at(method_id)` says where a node's method is defined: the module's
/// path and its MethodDef token (for node 0, the body's own; for inlinees, MethodDetails' token
/// in the module that defines the method). A method it cannot place, or whose module is not in
/// `modules`, answers "cannot tell". Returns how many nodes got a parent.
pub fn recover_tree(tree: &mut super::InlineTree, modules: &IlModules<'_>, method_at: impl Fn(u64) -> Option<(std::path::PathBuf, u32)>) -> usize {
    if tree.unknown_parents() == 0 {
        return 0;
    }
    tree.recover_parents(|caller, il_offset, callee| {
        let (caller_path, caller_token) = method_at(caller)?;
        let (callee_path, callee_token) = method_at(callee)?;
        let (pe, md) = modules.get(&caller_path)?;
        let site = call_site(pe, md, caller_token, il_offset).ok()?;
        let key = modules.get(&callee_path).and_then(|(_, md)| method_key(md, callee_token));
        site.calls(&Callee { in_callers_module: caller_path == callee_path, token: callee_token, key })
    })
}

/// The IL offsets of the `call`, `callvirt` and `newobj` instructions of `method` that call
/// `callee` by [`IlCallSite::calls`]; `None` when any such instruction cannot be decided, or the
/// IL cannot be read.
pub fn calls_to(pe: &PeImage<'_>, md: &Metadata<'_>, method: u32, callee: &Callee) -> Option<Vec<u32>> {
    let code = il_code(pe, md, method).ok()?;
    let start = code.offset();
    let mut r = code;
    let mut offsets = Vec::new();
    while !r.is_empty() {
        let at = u32::try_from(r.offset().saturating_sub(start)).ok()?;
        let (op, size) = opcode(&mut r).ok()??;
        if matches!(op, 0x28 | 0x6F | 0x73) {
            offsets.push(at);
        }
        r.skip(size, "").ok()?;
    }
    let mut found = Vec::new();
    for at in offsets {
        match call_site(pe, md, method, at).ok()?.calls(callee) {
            Some(true) => found.push(at),
            Some(false) => {}
            None => return None,
        }
    }
    Some(found)
}

/// Give `tree` back the call sites its runtime did not fill in
/// ([`super::InlineTree::recover_call_sites`] with [`calls_to`] as the evidence); `method_at` as
/// for [`recover_tree`]. Returns how many nodes got one.
pub fn recover_call_sites(tree: &mut super::InlineTree, modules: &IlModules<'_>, method_at: impl Fn(u64) -> Option<(std::path::PathBuf, u32)>) -> usize {
    tree.recover_call_sites(|caller, callee| {
        let (caller_path, caller_token) = method_at(caller)?;
        let (callee_path, callee_token) = method_at(callee)?;
        let (pe, md) = modules.get(&caller_path)?;
        let key = modules.get(&callee_path).and_then(|(_, md)| method_key(md, callee_token));
        calls_to(pe, md, caller_token, &Callee { in_callers_module: caller_path == callee_path, token: callee_token, key })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(constrained: bool) -> IlCallSite {
        let ext = Some(("System.Numerics".to_owned(), "IMinMaxValue`1".to_owned()));
        IlCallSite::Call { opcode: 0x28, constrained, token: 0x0A00_11D9, name: Some("get_MaxValue".to_owned()), def: None, ext }
    }

    /// 9.0.20's CoreLib: `constrained. !!T call IMinMaxValue<T>::get_MaxValue` inlined as Char's
    /// explicit implementation. A plain `call` of another name is certainly not the callee; a
    /// constrained one may be its implementation, so it cannot be told.
    #[test]
    fn a_constrained_call_may_run_an_implementation_of_another_name() {
        let key = MethodKey { namespace: "System".into(), type_name: "Char".into(), name: "System.Numerics.IMinMaxValue<System.Char>.get_MaxValue".into(), overloaded: false };
        let callee = Callee { in_callers_module: true, token: 0x0600_0001, key: Some(key) };
        assert_eq!(site(false).calls(&callee), Some(false));
        assert_eq!(site(true).calls(&callee), None);
    }
}

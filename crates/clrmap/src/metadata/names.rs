//! Type and method names from metadata, in the notation of `contract.md` §1.

use core::fmt;

use super::schema::table;
use super::Metadata;
use crate::read::{Error, ErrorKind, Reader, Result};
use crate::signature::{decode_type, Renderer, TypeNames};

/// Nesting deeper than this (enclosing types, TypeRef scopes, TypeSpecs inside modifiers) is
/// refused: hostile metadata can make any of them a cycle (Augments item 3 warns of TypeSpec cycles).
const MAX_NAME_DEPTH: u32 = 64;

/// `Ns.Name`, or `Name` when the namespace is empty.
fn qualified(out: &mut dyn fmt::Write, ns: &str, name: &str) -> fmt::Result {
    if !ns.is_empty() {
        out.write_str(ns)?;
        out.write_char('.')?;
    }
    out.write_str(name)
}

impl Metadata<'_> {
    fn typedef_name(&self, rid: u32, out: &mut dyn fmt::Write, depth: u32) -> fmt::Result {
        if depth > MAX_NAME_DEPTH {
            return Err(fmt::Error);
        }
        let row = self.tables.row(table::TYPE_DEF, rid).map_err(|_| fmt::Error)?;
        let name = self.strings.get(row.get(1)).map_err(|_| fmt::Error)?;
        match self.enclosing(rid) {
            // II.22.32: a nested type is named by its enclosing type; its own namespace is empty.
            Some(outer) => {
                self.typedef_name(outer, out, depth.saturating_add(1))?;
                out.write_char('/')?;
                out.write_str(name)
            }
            None => {
                let ns = self.strings.get(row.get(2)).map_err(|_| fmt::Error)?;
                qualified(out, ns, name)
            }
        }
    }

    fn typeref_name(&self, rid: u32, out: &mut dyn fmt::Write, depth: u32) -> fmt::Result {
        if depth > MAX_NAME_DEPTH {
            return Err(fmt::Error);
        }
        let row = self.tables.row(table::TYPE_REF, rid).map_err(|_| fmt::Error)?;
        let scope = row.get(0);
        let name = self.strings.get(row.get(1)).map_err(|_| fmt::Error)?;
        let ns = self.strings.get(row.get(2)).map_err(|_| fmt::Error)?;
        // ResolutionScope (II.24.2.6): tag 0 Module, 1 ModuleRef, 2 AssemblyRef, 3 TypeRef.
        let (tag, scope_rid) = (scope & 3, scope >> 2);
        if scope_rid == 0 {
            return qualified(out, ns, name);
        }
        match tag {
            1 => {
                let m = self.tables.row(table::MODULE_REF, scope_rid).map_err(|_| fmt::Error)?;
                write!(out, "[.module {}]", self.strings.get(m.get(0)).map_err(|_| fmt::Error)?)?;
                qualified(out, ns, name)
            }
            2 => {
                let a = self.tables.row(table::ASSEMBLY_REF, scope_rid).map_err(|_| fmt::Error)?;
                write!(out, "[{}]", self.strings.get(a.get(6)).map_err(|_| fmt::Error)?)?;
                qualified(out, ns, name)
            }
            3 => {
                self.typeref_name(scope_rid, out, depth.saturating_add(1))?;
                out.write_char('/')?;
                out.write_str(name)
            }
            _ => qualified(out, ns, name),
        }
    }

    fn typespec_name(&self, rid: u32, out: &mut dyn fmt::Write) -> fmt::Result {
        let depth = self.name_depth.get();
        if depth > MAX_NAME_DEPTH {
            return Err(fmt::Error);
        }
        self.name_depth.set(depth.saturating_add(1));
        let text = self.type_spec(rid).and_then(|mut blob| decode_type(&mut blob, &mut Renderer::new(self)));
        self.name_depth.set(depth);
        out.write_str(&text.map_err(|_| fmt::Error)?)
    }

    /// The TypeDef row that encloses TypeDef `rid`, if it is nested (II.22.32).
    pub fn enclosing(&self, rid: u32) -> Option<u32> {
        self.nested.get(rid as usize).copied().filter(|&r| r != 0)
    }

    /// The TypeDef that owns MethodDef `rid`: the last type whose MethodList starts at or
    /// before it (II.22.37: method lists are contiguous runs in type order).
    pub fn method_owner(&self, rid: u32) -> Option<u32> {
        let types = self.tables.table(table::TYPE_DEF);
        let (mut lo, mut hi) = (1u32, types.len().saturating_add(1));
        while lo < hi {
            let mid = lo.midpoint(hi);
            let start = types.row(mid).ok()?.get(5);
            if start <= rid {
                lo = mid.saturating_add(1);
            } else {
                hi = mid;
            }
        }
        let owner = lo.saturating_sub(1);
        (owner >= 1).then_some(owner)
    }

    /// `Ns.Type::Method` for a MethodDef token (0x06......), with nested types as `Ns.Outer/Inner`.
    pub fn method_name(&self, token: u32) -> Option<String> {
        if token >> 24 != u32::from(table::METHOD_DEF) {
            return None;
        }
        let rid = token & 0x00FF_FFFF;
        let row = self.tables.row(table::METHOD_DEF, rid).ok()?;
        let name = self.strings.get(row.get(3)).ok()?;
        let mut out = String::new();
        if let Some(owner) = self.method_owner(rid) {
            self.typedef_name(owner, &mut out, 0).ok()?;
            out.push_str("::");
        }
        out.push_str(name);
        Some(out)
    }

    /// A TypeSpec row's signature blob.
    pub fn type_spec(&self, rid: u32) -> Result<Reader<'_>> {
        let row = self.tables.row(table::TYPE_SPEC, rid)?;
        self.blobs.get(row.get(0))
    }

    /// A type token's name as a string (`class`/`valuetype` not included).
    pub fn type_name(&self, token: u32) -> Result<String> {
        let mut s = String::new();
        self.write_type_name(token, &mut s)
            .map_err(|_| Error::new(ErrorKind::BadMetadata, 0, "a token that names a type"))?;
        Ok(s)
    }
}

/// Names for the signature printer (contract §1): TypeDef `Ns.Name` / `Ns.Outer/Inner`; TypeRef
/// `[Asm]Ns.Name`, `[.module M]Ns.Name`, `<outer>/Inner`, or `Ns.Name` for the Module row or a nil
/// scope; TypeSpec as its own signature. A token that names no row fails, and the printer then
/// falls back to the raw `0x...` token.
impl TypeNames for Metadata<'_> {
    fn write_type_name(&self, token: u32, out: &mut dyn fmt::Write) -> fmt::Result {
        let rid = token & 0x00FF_FFFF;
        let kind = (token >> 24) as u8;
        if kind == table::TYPE_SPEC {
            return self.typespec_name(rid, out);
        }
        if let Ok(cache) = self.name_cache.try_borrow() {
            if let Some(name) = cache.get(&token) {
                return out.write_str(name);
            }
        }
        let mut name = String::new();
        match kind {
            table::TYPE_DEF => self.typedef_name(rid, &mut name, 0)?,
            table::TYPE_REF => self.typeref_name(rid, &mut name, 0)?,
            _ => return Err(fmt::Error),
        }
        out.write_str(&name)?;
        if let Ok(mut cache) = self.name_cache.try_borrow_mut() {
            cache.insert(token, name.into_boxed_str());
        }
        Ok(())
    }
}

/// A method's IL arguments, as the JIT numbers them: `this` first when the method has one, then
/// the declared parameters (ICorDebugInfo variable numbers 0..count; locals follow).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MethodArgs<'a> {
    /// True when argument 0 is `this` (HASTHIS without EXPLICITTHIS, II.23.2.1).
    pub has_this: bool,
    /// Each argument's name, in argument order (`this` for argument 0 of an instance method;
    /// `None` where the Param table names none).
    pub names: Vec<Option<&'a str>>,
}

impl<'a> Metadata<'a> {
    /// The arguments of a MethodDef: its signature's parameter count (II.23.2.1) and the names
    /// in its Param rows (II.22.33, by Sequence). `None` for another token or a bad signature.
    pub fn method_args(&self, token: u32) -> Option<MethodArgs<'a>> {
        if token >> 24 != u32::from(table::METHOD_DEF) {
            return None;
        }
        let rid = token & 0x00FF_FFFF;
        let methods = self.tables.table(table::METHOD_DEF);
        let row = methods.row(rid).ok()?;
        let mut sig = self.blobs.get(row.get(4)).ok()?;
        // MethodDefSig: calling convention, [GenParamCount], ParamCount, RetType, Param*.
        let cc = sig.u8("a calling convention").ok()?;
        if cc & 0x10 != 0 {
            sig.compressed_u32("a generic parameter count").ok()?;
        }
        let count = sig.compressed_u32("a parameter count").ok()?;
        // Each parameter costs at least one byte of the signature: a count beyond it is bogus.
        if count as usize > sig.len() {
            return None;
        }
        let has_this = cc & 0x20 != 0 && cc & 0x40 == 0;
        let mut names: Vec<Option<&'a str>> = vec![None; count as usize];
        let params = self.tables.table(table::PARAM);
        let first = row.get(5);
        let end = methods.row(rid.saturating_add(1)).map_or(params.len().saturating_add(1), |next| next.get(5));
        for p in first..end.min(params.len().saturating_add(1)) {
            let Ok(param) = params.row(p) else { break };
            let sequence = param.get(1);
            if let (Some(slot), Ok(name)) = (names.get_mut((sequence as usize).wrapping_sub(1)), self.strings.get(param.get(2))) {
                *slot = Some(name);
            }
        }
        if has_this {
            names.insert(0, Some("this"));
        }
        Some(MethodArgs { has_this, names })
    }
}

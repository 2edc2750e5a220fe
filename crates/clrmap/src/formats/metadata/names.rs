//! Type and method names from metadata, in the notation of docs/output.md#type-signatures.
//!
//! Naming one token is bounded: hostile metadata can make TypeSpecs refer to themselves through
//! modifiers (`int32[] modreq(TS#1) modreq(TS#1)`), a tree that branches at every level, so a
//! depth limit alone still allows 2^64 nodes. Each top-level name gets a budget of work
//! ([`MAX_NAME_WORK`]) and of output ([`MAX_NAME_BYTES`]); a name that runs past either fails, and
//! the printer fails with `too_deep` ([`TypeNames::name_fault`]; a token with no row prints raw).

use core::fmt;

use super::schema::table;
use super::Metadata;
use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::pe::PeImage;
use crate::formats::signature::{skip_type, stream_one, TypeNames};

/// Nesting deeper than this (enclosing types, TypeRef scopes, TypeSpecs inside modifiers) is
/// refused: hostile metadata can make any of them a cycle (Augments item 3 warns of TypeSpec cycles).
const MAX_NAME_DEPTH: u32 = 64;

/// The most text one top-level name may produce. The longest names of the 3.1 and 8.0 frameworks
/// are well under a kilobyte; past this the token prints raw.
pub const MAX_NAME_BYTES: usize = 64 * 1024;

/// The most work one top-level name may do: TypeSpec blob bytes walked plus tokens named inside
/// TypeSpecs. Past this the token prints raw.
pub const MAX_NAME_WORK: u32 = 64 * 1024;

/// The most bytes of TypeDef and TypeRef names kept in the cache; past this, names are rendered
/// again each time instead of being kept.
const MAX_CACHE_BYTES: usize = 16 << 20;

/// What a cache entry costs beyond its text (the map's slot and the box), roughly.
const CACHE_ENTRY_OVERHEAD: usize = 32;

/// A `String` writer that refuses (for good) to grow past a limit.
struct Bounded<'s> {
    out: &'s mut String,
    left: usize,
    over: bool,
}

impl<'s> Bounded<'s> {
    fn new(out: &'s mut String, limit: usize) -> Self {
        Bounded { out, left: limit, over: false }
    }
}

impl fmt::Write for Bounded<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        match self.left.checked_sub(s.len()) {
            Some(left) if !self.over => {
                self.left = left;
                self.out.push_str(s);
                Ok(())
            }
            _ => {
                self.over = true;
                Err(fmt::Error)
            }
        }
    }
}

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
        let name = row.get(1).and_then(|i| self.strings.get(i)).map_err(|_| fmt::Error)?;
        match self.enclosing(rid) {
            // II.22.32: a nested type is named by its enclosing type; its own namespace is empty.
            Some(outer) => {
                self.typedef_name(outer, out, depth.saturating_add(1))?;
                out.write_char('/')?;
                out.write_str(name)
            }
            None => {
                let ns = row.get(2).and_then(|i| self.strings.get(i)).map_err(|_| fmt::Error)?;
                qualified(out, ns, name)
            }
        }
    }

    fn typeref_name(&self, rid: u32, out: &mut dyn fmt::Write, depth: u32) -> fmt::Result {
        if depth > MAX_NAME_DEPTH {
            return Err(fmt::Error);
        }
        let row = self.tables.row(table::TYPE_REF, rid).map_err(|_| fmt::Error)?;
        let scope = row.get(0).map_err(|_| fmt::Error)?;
        let name = row.get(1).and_then(|i| self.strings.get(i)).map_err(|_| fmt::Error)?;
        let ns = row.get(2).and_then(|i| self.strings.get(i)).map_err(|_| fmt::Error)?;
        // ResolutionScope (II.24.2.6): tag 0 Module, 1 ModuleRef, 2 AssemblyRef, 3 TypeRef.
        let (tag, scope_rid) = (scope & 3, scope >> 2);
        if scope_rid == 0 {
            return qualified(out, ns, name);
        }
        match tag {
            1 => {
                let m = self.tables.row(table::MODULE_REF, scope_rid).map_err(|_| fmt::Error)?;
                write!(out, "[.module {}]", m.get(0).and_then(|i| self.strings.get(i)).map_err(|_| fmt::Error)?)?;
                qualified(out, ns, name)
            }
            2 => {
                let a = self.tables.row(table::ASSEMBLY_REF, scope_rid).map_err(|_| fmt::Error)?;
                write!(out, "[{}]", a.get(6).and_then(|i| self.strings.get(i)).map_err(|_| fmt::Error)?)?;
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

    /// Spend `units` of the current top-level name's work budget. Only names rendered inside a
    /// TypeSpec count (the budget is reset when a top-level TypeSpec name starts); running out is
    /// sticky, so the top-level name fails even where the printer fell back for an inner token.
    fn charge(&self, units: usize) -> fmt::Result {
        if self.name_depth.get() == 0 {
            return Ok(());
        }
        let left = u32::try_from(units).ok().and_then(|u| self.name_work.get().checked_sub(u));
        match left {
            Some(left) if !self.name_exhausted.get() => {
                self.name_work.set(left);
                Ok(())
            }
            _ => {
                self.name_exhausted.set(true);
                Err(fmt::Error)
            }
        }
    }

    /// A TypeSpec's name: its own signature, named through `self`. At the top level (not inside
    /// another TypeSpec) this starts a fresh budget, renders into a bounded buffer, and writes
    /// nothing unless the whole name fits; a TypeSpec that fails there is remembered.
    fn typespec_name(&self, rid: u32, out: &mut dyn fmt::Write) -> fmt::Result {
        let depth = self.name_depth.get();
        if depth > 0 {
            return self.typespec_body(rid, out, depth);
        }
        if self.spec_failed.try_borrow().is_ok_and(|f| f.contains(&rid)) {
            return Err(fmt::Error);
        }
        self.name_work.set(MAX_NAME_WORK);
        self.name_exhausted.set(false);
        let mut text = String::new();
        let mut bounded = Bounded::new(&mut text, MAX_NAME_BYTES);
        let r = self.typespec_body(rid, &mut bounded, 0);
        let failed = r.is_err() || bounded.over || self.name_exhausted.get();
        self.name_exhausted.set(false);
        if failed {
            // The failure does not depend on what was named before: the budget starts afresh.
            if let Ok(mut f) = self.spec_failed.try_borrow_mut() {
                f.insert(rid);
            }
            return Err(fmt::Error);
        }
        out.write_str(&text)
    }

    /// Stream TypeSpec `rid`'s signature into `out`, at TypeSpec nesting `depth`. A blob that
    /// does not decode fails before anything is written.
    fn typespec_body(&self, rid: u32, out: &mut dyn fmt::Write, depth: u32) -> fmt::Result {
        if depth > MAX_NAME_DEPTH {
            return Err(fmt::Error);
        }
        let blob = self.type_spec(rid).map_err(|_| fmt::Error)?;
        self.name_depth.set(depth.saturating_add(1));
        let r = self.charge(blob.len().saturating_add(1)).and_then(|()| {
            skip_type(&mut blob.clone()).map_err(|_| fmt::Error)?;
            stream_one(&mut blob.clone(), self, out).map_err(|_| fmt::Error)?
        });
        self.name_depth.set(depth);
        r
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
            let start = types.row(mid).and_then(|row| row.get(5)).ok()?;
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
        let name = row.get(3).and_then(|i| self.strings.get(i)).ok()?;
        let mut out = String::new();
        // A MethodDef that no TypeDef owns (II.22.37) cannot be named.
        let owner = self.method_owner(rid)?;
        // Through the name cache: the methods of one type share their owner's name.
        self.write_type_name(u32::from(table::TYPE_DEF) << 24 | owner, &mut out).ok()?;
        out.push_str("::");
        out.push_str(name);
        Some(out)
    }

    /// A TypeSpec row's signature blob.
    pub fn type_spec(&self, rid: u32) -> Result<Reader<'_>> {
        let row = self.tables.row(table::TYPE_SPEC, rid)?;
        self.blobs.get(row.get(0)?)
    }

    /// A type token's name as a string (`class`/`valuetype` not included).
    pub fn type_name(&self, token: u32) -> Result<String> {
        let mut s = String::new();
        self.write_type_name(token, &mut s).map_err(|_| Error::nowhere(ErrorKind::BadMetadata, "a token that names a type"))?;
        Ok(s)
    }
}

/// Names for the signature printer (docs/output.md#type-signatures): TypeDef `Ns.Name` / `Ns.Outer/Inner`; TypeRef
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
        self.charge(1)?;
        if let Ok(cache) = self.name_cache.try_borrow() {
            if let Some(name) = cache.get(&token) {
                return match name {
                    Some(name) => out.write_str(name),
                    None => Err(fmt::Error),
                };
            }
        }
        let mut name = String::new();
        let mut bounded = Bounded::new(&mut name, MAX_NAME_BYTES);
        let r = match kind {
            table::TYPE_DEF => self.typedef_name(rid, &mut bounded, 0),
            table::TYPE_REF => self.typeref_name(rid, &mut bounded, 0),
            _ => return Err(fmt::Error),
        };
        let written = match r {
            Ok(()) => out.write_str(&name),
            Err(e) => Err(e),
        };
        // A TypeDef or TypeRef name does not depend on where it is asked for: keep it (or that it
        // cannot be named), while the cache stays within its bound.
        let cost = name.len().saturating_add(CACHE_ENTRY_OVERHEAD);
        let used = self.name_cache_bytes.get();
        if let (Ok(mut cache), Some(total)) = (self.name_cache.try_borrow_mut(), used.checked_add(cost)) {
            if total <= MAX_CACHE_BYTES {
                cache.insert(token, r.is_ok().then(|| name.into_boxed_str()));
                self.name_cache_bytes.set(total);
            }
        }
        written
    }

    /// A row that is there but cannot be named (see `specs`).
    fn name_fault(&self, token: u32) -> Option<Error> {
        self.name_fault_of(token)
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
        let mut sig = row.get(4).and_then(|i| self.blobs.get(i)).ok()?;
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
        let first = row.get(5).ok()?;
        // The last method's list runs to the end of the Param table (II.22.26).
        let end = match methods.row(rid.saturating_add(1)) {
            Ok(next) => next.get(5).ok()?,
            Err(_) => params.len().saturating_add(1),
        };
        for p in first..end.min(params.len().saturating_add(1)) {
            let Ok(param) = params.row(p) else { break };
            let Ok(sequence) = param.get(1) else { break };
            let name = param.get(2).and_then(|i| self.strings.get(i));
            if let (Some(slot), Ok(name)) = (names.get_mut((sequence as usize).wrapping_sub(1)), name) {
                *slot = Some(name);
            }
        }
        if has_this {
            names.insert(0, Some("this"));
        }
        Some(MethodArgs { has_this, names })
    }
}

/// The notation's keyword of a core library primitive, by its namespace and name (`System`, `Int32`).
pub fn primitive_keyword(ns: &str, name: &str) -> Option<&'static str> {
    if ns != "System" {
        return None;
    }
    Some(match name {
        "Void" => "void",
        "Boolean" => "bool",
        "Char" => "char",
        "SByte" => "int8",
        "Byte" => "uint8",
        "Int16" => "int16",
        "UInt16" => "uint16",
        "Int32" => "int32",
        "UInt32" => "uint32",
        "Int64" => "int64",
        "UInt64" => "uint64",
        "Single" => "float32",
        "Double" => "float64",
        "IntPtr" => "native int",
        "UIntPtr" => "native uint",
        "String" => "string",
        "Object" => "object",
        "TypedReference" => "typedref",
        _ => return None,
    })
}

/// What naming a type argument needs of its TypeDef: its name in the notation and whether it is a value type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeDefInfo {
    /// `Ns.Name`, or `Ns.Outer/Inner`.
    pub name: String,
    /// It extends `System.ValueType` or `System.Enum` (II.13), and is not `System.Enum` itself.
    pub value_type: bool,
    /// The notation's keyword when this is a core library primitive (`int32`, `string`, `object`).
    pub primitive: Option<&'static str>,
}

impl TypeDefInfo {
    /// The type as a type argument, in the notation: a primitive's keyword, else `class N` or
    /// `valuetype N`, with `<A1,A2>` when it is a generic instantiation.
    pub fn as_argument(&self, args: &[String]) -> String {
        if let (Some(p), true) = (self.primitive, args.is_empty()) {
            return p.to_owned();
        }
        let mut s = String::from(if self.value_type { "valuetype " } else { "class " });
        s.push_str(&self.name);
        push_args(&mut s, args);
        s
    }
}

/// `<A1,A2>` after `s`, nothing for no arguments.
fn push_args(s: &mut String, args: &[String]) {
    if args.is_empty() {
        return;
    }
    s.push('<');
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(a);
    }
    s.push('>');
}

impl Metadata<'_> {
    /// Whether this module is the core library (its Assembly row is `System.Private.CoreLib`
    /// or `mscorlib`): only its `System.Int32` is `int32`.
    pub fn is_core_library(&self) -> bool {
        let name = self.tables.row(table::ASSEMBLY, 1).and_then(|r| r.get(7)).and_then(|i| self.strings.get(i));
        matches!(name, Ok("System.Private.CoreLib" | "mscorlib"))
    }

    /// Whether TypeDef `rid` is a value type: its Extends names `System.ValueType` or
    /// `System.Enum` (a TypeRef or, in the core library, a TypeDef), and it is not `System.Enum`.
    pub fn is_value_type(&self, rid: u32) -> bool {
        let Ok(row) = self.tables.row(table::TYPE_DEF, rid) else { return false };
        let names = |r: &crate::formats::metadata::Row<'_>, name: usize, ns: usize| -> Option<(String, String)> {
            let n = r.get(name).and_then(|i| self.strings.get(i)).ok()?;
            let s = r.get(ns).and_then(|i| self.strings.get(i)).ok()?;
            Some((s.to_owned(), n.to_owned()))
        };
        let Ok(extends) = row.get(3) else { return false };
        // TypeDefOrRef (II.24.2.6): 2 tag bits; TypeDef, TypeRef, TypeSpec.
        let base = match extends & 3 {
            0 => self.tables.row(table::TYPE_DEF, extends >> 2).ok().and_then(|r| names(&r, 1, 2)),
            1 => self.tables.row(table::TYPE_REF, extends >> 2).ok().and_then(|r| names(&r, 1, 2)),
            _ => None,
        };
        let own = names(&row, 1, 2);
        let is = |n: &Option<(String, String)>, name: &str| n.as_ref().is_some_and(|(s, x)| s == "System" && x == name);
        (is(&base, "ValueType") || is(&base, "Enum")) && !is(&own, "Enum")
    }

    /// TypeDef `rid`'s name, value-typeness and primitive keyword.
    pub fn type_def_info(&self, rid: u32) -> Option<TypeDefInfo> {
        let mut name = String::new();
        self.write_type_name(u32::from(table::TYPE_DEF) << 24 | rid, &mut name).ok()?;
        let primitive = if self.enclosing(rid).is_none() && self.is_core_library() {
            let row = self.tables.row(table::TYPE_DEF, rid).ok()?;
            let n = row.get(1).and_then(|i| self.strings.get(i)).ok()?;
            let ns = row.get(2).and_then(|i| self.strings.get(i)).ok()?;
            primitive_keyword(ns, n)
        } else {
            None
        };
        Some(TypeDefInfo { name, value_type: self.is_value_type(rid), primitive })
    }

    /// The TypeDefs of this module whose names in the notation (`Ns.Outer/Inner`) are in `wanted`.
    pub fn type_defs_named(&self, wanted: &std::collections::HashSet<String>) -> Vec<TypeDefInfo> {
        let mut out = Vec::new();
        if wanted.is_empty() {
            return out;
        }
        // Their simple names (after the last `.` or `/`): most TypeDefs are not wanted, and are
        // passed over without naming them in full.
        let simple_names: std::collections::HashSet<&str> = wanted.iter().map(|w| w.rsplit(['.', '/']).next().unwrap_or(w)).collect();
        for rid in 1..=self.tables.rows(table::TYPE_DEF) {
            let simple = self.tables.row(table::TYPE_DEF, rid).and_then(|r| r.get(1)).and_then(|i| self.strings.get(i));
            let Ok(simple) = simple else { continue };
            if !simple_names.contains(simple.rsplit('.').next().unwrap_or(simple)) {
                continue;
            }
            if let Some(info) = self.type_def_info(rid).filter(|i| wanted.contains(&i.name)) {
                out.push(info);
            }
        }
        out
    }

    /// A body's `name` (`Ns.Type::Method`, docs/output.md#il-to-native-maps) and `full_name`
    /// (`Ns.Type<A1>::Method<B1>(P1,P2)`): the owner's and the method's type arguments where the
    /// source knows them, already in the type notation, and the parameter types from the MethodDef's
    /// signature. `None` for a token this module does not define.
    pub fn body_names(&self, token: u32, owner_args: &[String], method_args: &[String]) -> Option<(String, Option<String>)> {
        let name = self.method_name(token)?;
        let mut display = match (owner_args.is_empty(), name.rsplit_once("::")) {
            (false, Some((owner, method))) => {
                let mut d = owner.to_owned();
                push_args(&mut d, owner_args);
                d.push_str("::");
                d.push_str(method);
                d
            }
            _ => name.clone(),
        };
        push_args(&mut display, method_args);
        let full = self.method_full_name(token, &display);
        Some((name, full))
    }
}

/// The largest module file read for names (the largest framework assemblies, composite images
/// included, are well under it): a recording names module paths, and a hostile one may name any
/// file.
const MAX_MODULE_FILE: u64 = 256 << 20;

/// The most module bytes one naming pass reads in all: a recording may name any number of paths
/// (a hostile one, the same large file under many names); past this, bodies keep the names their
/// source alone gives.
const MAX_MODULE_BYTES: u64 = 1 << 30;

/// Reads the module files a recording names, one at a time, within a budget of bytes
/// (`MAX_MODULE_BYTES` in all, 256 MiB per file).
#[derive(Debug)]
pub struct ModuleFiles {
    left: u64,
    /// The last file [`Self::with`] read (its path and bytes), kept for the next call.
    last: Option<(String, Vec<u8>)>,
}

impl Default for ModuleFiles {
    fn default() -> Self {
        ModuleFiles { left: MAX_MODULE_BYTES, last: None }
    }
}

impl ModuleFiles {
    /// A reader with a budget of `bytes` in all.
    pub fn with_budget(bytes: u64) -> Self {
        ModuleFiles { left: bytes.min(MAX_MODULE_BYTES), last: None }
    }

    /// The path of the file [`Self::with`] read last: named again next, it is not read again.
    pub fn last_path(&self) -> Option<&str> {
        self.last.as_ref().map(|(p, _)| p.as_str())
    }

    /// The bytes of the regular file at `path`, if it fits the budget (which it then spends).
    pub fn read(&mut self, path: &str) -> Option<Vec<u8>> {
        let path = std::path::Path::new(path);
        let size = std::fs::metadata(path).ok().filter(|m| m.is_file())?.len();
        if size > MAX_MODULE_FILE || size > self.left {
            return None;
        }
        let bytes = crate::base::fs::read_regular(path, MAX_MODULE_FILE.min(self.left)).ok()?;
        self.left = self.left.saturating_sub(bytes.len() as u64);
        Some(bytes)
    }

    /// Run `f` on the metadata of the module file at `path` (kept until another file is read);
    /// `None` when it cannot be read, does not fit the budget, or holds no metadata. Only what the metadata's
    /// parse looks at is read (the PE headers, the CLI header and the metadata), into a buffer of
    /// the file's size whose other bytes stay zero and cost no memory; the budget is spent by the
    /// bytes read.
    pub fn with<T>(&mut self, path: &str, f: impl FnOnce(&Metadata<'_>) -> T) -> Option<T> {
        if self.last_path() != Some(path) {
            self.last = None;
            let bytes = self.read_metadata(path)?;
            self.last = Some((path.to_owned(), bytes));
        }
        let (_, bytes) = self.last.as_ref()?;
        let md = Metadata::parse(bytes).ok()?;
        Some(f(&md))
    }

    /// The file at `path` as [`Self::with`] reads it: zeros, except the PE headers, the CLI
    /// header and the metadata, each read where the bytes read before place it.
    fn read_metadata(&mut self, path: &str) -> Option<Vec<u8>> {
        let file = crate::base::fs::open_regular(std::path::Path::new(path)).ok()?;
        let size = file.metadata().ok().filter(|m| m.is_file())?.len();
        if size > MAX_MODULE_FILE {
            return None;
        }
        let mut sparse = Sparse { file, bytes: vec![0; usize::try_from(size).ok()?], prefix: 0 };
        // The DOS header and, in every image clrmap has seen, the NT headers and section table.
        self.left = sparse.read(0, HEADERS_GUESS, self.left)?;
        let le16 = |b: &[u8], at: u64| usize::try_from(at).ok().and_then(|i| b.get(i..i.checked_add(2)?)).map_or(0, |v| v.iter().rev().fold(0u64, |a, &x| a << 8 | u64::from(x)));
        let nt = le16(&sparse.bytes, 0x3c) | le16(&sparse.bytes, 0x3e) << 16;
        // PE signature (4), file header (20: sections at +2, optional header size at +16), the
        // optional header, the section table (40 bytes a section).
        let nt_end = nt.saturating_add(24);
        self.left = sparse.read(0, nt_end, self.left)?;
        let sections = le16(&sparse.bytes, nt.saturating_add(6));
        let optional = le16(&sparse.bytes, nt.saturating_add(20));
        self.left = sparse.read(0, nt_end.saturating_add(optional).saturating_add(sections.saturating_mul(40)), self.left)?;
        let (at, len) = PeImage::parse(&sparse.bytes).ok()?.cli_header_range()?;
        self.left = sparse.read(u64::from(at), u64::from(at).saturating_add(u64::from(len)), self.left)?;
        let (at, len) = {
            let pe = PeImage::parse(&sparse.bytes).ok()?;
            let metadata = pe.require_cor20().ok()?.metadata;
            (pe.rva_to_offset(metadata.rva)?, metadata.size)
        };
        self.left = sparse.read(u64::from(at), u64::from(at).saturating_add(u64::from(len)), self.left)?;
        Some(sparse.bytes)
    }
}

/// The first read of a module file: its headers, in one read.
const HEADERS_GUESS: u64 = 4096;

/// A file read in parts into a buffer of its size.
struct Sparse {
    file: std::fs::File,
    bytes: Vec<u8>,
    /// The bytes from the start already read.
    prefix: u64,
}

impl Sparse {
    /// Read `start..end` (within the file, past the prefix already read when it starts at 0),
    /// spending `left`: what is left, or `None` when the bytes do not fit it or cannot be read.
    fn read(&mut self, start: u64, end: u64, left: u64) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let size = self.bytes.len() as u64;
        let end = end.min(size);
        let start = if start == 0 { self.prefix } else { start };
        if start >= end {
            return Some(left);
        }
        let n = end.checked_sub(start)?;
        let left = left.checked_sub(n)?;
        let buf = self.bytes.get_mut(usize::try_from(start).ok()?..usize::try_from(end).ok()?)?;
        self.file.read_exact_at(buf, start).ok()?;
        if start == self.prefix {
            self.prefix = end;
        }
        Some(left)
    }
}

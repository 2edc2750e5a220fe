//! Every TypeSpec and MethodSpec of an assembly, rendered: what `clrmap meta specs` prints, and
//! the instantiations that `gdmap::instantiation_map` turns into a dictionary map (docs/format-notes.md#dictionary-maps-from-assemblies).
//! A MethodSpec prints with the method it instantiates, `Owner::Name<A1,A2>(P1,P2)`: its
//! arguments alone do not say which method they are for.
//!
//! A line is the rendering or an error, never a half-truth: a token that names no row prints as
//! its raw `0x...` token, but one whose row is there and cannot be named fails the line. That is
//! a TypeSpec whose signature does not decode (its own error), one that contains itself or nests
//! more than 64 deep (`too_deep`), a name past the printer's bounds (`too_deep`), a type whose
//! name cannot be read and a MethodDef that no TypeDef owns (`bad_metadata`), and a method whose
//! signature does not decode (its error).

use std::collections::HashMap;
use std::sync::Arc;

use super::schema::table;
use super::Metadata;
use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::signature::{decode_type, render_one, ArrayShape, MethodSignature, Primitive, SpanRenderer, TypeNames, TypeProvider};

/// One line of `meta specs`: a token and its rendering (or why it failed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecLine {
    /// The TypeSpec (0x1B) or MethodSpec (0x2B) token.
    pub token: u32,
    /// TypeSpec: the type. MethodSpec: `<A1,A2,...>`.
    pub text: Result<String>,
    /// MethodSpec: the method it instantiates. `None` for a TypeSpec, or a MethodSpec whose row
    /// cannot be read.
    pub method: Option<SpecMethod>,
}

/// The method a MethodSpec instantiates. Its texts are shared (`Arc`): many MethodSpecs
/// instantiate the same method, and [`spec_lines`] names each method once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecMethod {
    /// Its MethodDef (0x06) or MemberRef (0x0A) token.
    pub token: u32,
    /// `Owner::Name` ([`Metadata::member_name`]), or the raw `0x...` token when it names no row;
    /// the error when its row is there but cannot be named.
    pub name: Result<Arc<str>>,
    /// Its parameter types, `(P1,P2)`; `Ok(None)` when the token names no row; the error when its
    /// signature does not decode or is not a method's.
    pub params: Result<Option<Arc<str>>>,
}

impl SpecMethod {
    /// `method` (a MethodSpec's Method column), named through `md`.
    pub fn new(md: &Metadata<'_>, method: u32) -> Self {
        SpecMethod { token: method, name: md.member_name(method).map(|n| n.unwrap_or_else(|| format!("0x{method:08X}")).into()), params: md.member_params(method).map(|p| p.map(Into::into)) }
    }

    /// The first fault of its name or its parameters, in the order the line prints them.
    pub fn fault(&self) -> Option<Error> {
        self.name.as_ref().err().or(self.params.as_ref().err()).copied()
    }

    /// `Owner::Name` and `(P1,P2)` (empty for a token that names no row).
    pub fn texts(&self) -> Result<(&str, &str)> {
        let name = self.name.as_deref().map_err(|e| *e)?;
        let params = self.params.as_ref().map_err(|e| *e)?;
        Ok((name, params.as_deref().unwrap_or("")))
    }
}

impl SpecLine {
    /// The text `meta specs` prints after the token: a TypeSpec's type, or a MethodSpec's
    /// `Owner::Name<A1,A2>(P1,P2)`. The first fault in that order fails the line.
    pub fn full_text(&self) -> Result<String> {
        let Some(m) = &self.method else { return self.text.clone() };
        let name = m.name.as_deref().map_err(|e| *e)?;
        let text = self.text.as_deref().map_err(|e| *e)?;
        let params = m.params.as_ref().map_err(|e| *e)?;
        Ok(format!("{name}{text}{}", params.as_deref().unwrap_or("")))
    }
}

/// A MethodSpec blob's header (II.23.2.15): the 0x0A byte and GenArgCount (≥ 1). Leaves `r` at
/// the first argument.
pub fn method_spec_header(r: &mut Reader<'_>) -> Result<u32> {
    let at = r.offset();
    if r.u8("the MethodSpec header 0x0A")? != 0x0A {
        return Err(Error::new(ErrorKind::BadCallingConvention, at, "the MethodSpec header 0x0A"));
    }
    let count_at = r.offset();
    let count = r.compressed_u32("a generic argument count")?;
    if count == 0 {
        return Err(Error::new(ErrorKind::EmptyInstantiation, count_at, "at least one generic argument"));
    }
    Ok(count)
}

/// A MethodSpec blob's arguments (II.23.2.15: `0x0A GenArgCount Type+`), rendered. The payload
/// after 0x0A is exactly a dictionary-map heap item's body.
pub fn method_spec_args(blob: Reader<'_>, names: &dyn TypeNames) -> Result<Vec<String>> {
    let mut r = blob;
    let count = method_spec_header(&mut r)?;
    let mut out = Vec::with_capacity((count as usize).min(r.len()));
    let mut renderer = SpanRenderer::new(names);
    for _ in 0..count {
        out.push(render_one(&mut r, &mut renderer)?);
    }
    if !r.is_empty() {
        return Err(r.error(ErrorKind::ItemLengthMismatch, "no bytes after the arguments"));
    }
    Ok(out)
}

/// `<A1,A2,...>` for a MethodSpec blob, built from spans of one reused renderer.
fn method_spec_text(blob: Reader<'_>, renderer: &mut SpanRenderer<'_>) -> Result<String> {
    let mut r = blob;
    let count = method_spec_header(&mut r)?;
    renderer.clear();
    let mut spans = Vec::with_capacity((count as usize).min(r.len()));
    for _ in 0..count {
        spans.push(decode_type(&mut r, renderer)?);
    }
    if !r.is_empty() {
        return Err(r.error(ErrorKind::ItemLengthMismatch, "no bytes after the arguments"));
    }
    if let Some(e) = renderer.fault() {
        return Err(e);
    }
    let mut text = String::with_capacity(spans.iter().map(|s| renderer.text(*s).len().saturating_add(1)).sum::<usize>().saturating_add(2));
    text.push('<');
    for (i, s) in spans.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(renderer.text(*s));
    }
    text.push('>');
    Ok(text)
}

/// Every TypeSpec, then every MethodSpec, in token order, rendered with `names`.
pub fn spec_lines(md: &Metadata<'_>, names: &dyn TypeNames) -> Vec<SpecLine> {
    let (specs, methods) = (md.tables().rows(table::TYPE_SPEC), md.tables().rows(table::METHOD_SPEC));
    let mut out = Vec::with_capacity((specs as usize).saturating_add(methods as usize));
    let mut renderer = SpanRenderer::new(names);
    for rid in 1..=specs {
        let text = md.type_spec(rid).and_then(|blob| {
            let mut r = blob;
            let t = render_one(&mut r, &mut renderer)?;
            if !r.is_empty() {
                return Err(r.error(ErrorKind::ItemLengthMismatch, "no bytes after the type"));
            }
            Ok(t)
        });
        out.push(SpecLine { token: 0x1B00_0000 | rid, text, method: None });
    }
    // Many MethodSpecs instantiate the same method (149 of CoreLib 3.1's 1,095 are `Unsafe::As`):
    // each method is named once.
    let mut named: HashMap<u32, SpecMethod> = HashMap::new();
    for rid in 1..=methods {
        let (text, method) = match md.method_spec(rid) {
            Ok(row) => {
                let method = named.entry(row.method).or_insert_with(|| SpecMethod::new(md, row.method)).clone();
                (method_spec_text(row.instantiation, &mut renderer), Some(method))
            }
            Err(e) => (Err(e), None),
        };
        out.push(SpecLine { token: 0x2B00_0000 | rid, text, method });
    }
    out
}

/// How deep TypeSpecs may stand inside each other (through modifiers): the name printer's bound.
const MAX_SPEC_NESTING: usize = 64;

/// The tokens a type names (CLASS, VALUETYPE, a GENERICINST's type, modifiers), in byte order.
struct Tokens(Vec<u32>);

impl TypeProvider for Tokens {
    type Type = ();
    fn primitive(&mut self, _: Primitive) {}
    fn named(&mut self, _: bool, token: u32) {
        self.0.push(token);
    }
    fn generic_inst(&mut self, _: bool, _: u32, _: Vec<()>) {}
    fn begin_generic_inst(&mut self, _: bool, token: u32) {
        self.0.push(token);
    }
    fn sz_array(&mut self, _: ()) {}
    fn array(&mut self, _: (), _: ArrayShape) {}
    fn ptr(&mut self, _: ()) {}
    fn by_ref(&mut self, _: ()) {}
    fn pinned(&mut self, _: ()) {}
    fn modified(&mut self, _: bool, modifier: u32, _: ()) {
        self.0.push(modifier);
    }
    fn var(&mut self, _: u32) {}
    fn mvar(&mut self, _: u32) {}
    fn fn_ptr(&mut self, _: MethodSignature<()>) {}
}

impl Metadata<'_> {
    /// Why `token`, which the name printer could not name, names a row that is there but cannot
    /// be named ([`TypeNames::name_fault`]); `None` for a token that names no row (it prints raw).
    pub(super) fn name_fault_of(&self, token: u32) -> Option<Error> {
        let (kind, rid) = ((token >> 24) as u8, token & 0x00FF_FFFF);
        if !matches!(kind, table::TYPE_DEF | table::TYPE_REF | table::TYPE_SPEC) {
            return None;
        }
        let row = self.tables.row(kind, rid).ok()?;
        if kind != table::TYPE_SPEC {
            return Some(Error::new(ErrorKind::BadMetadata, row.offset(), "a type whose name can be read"));
        }
        // A TypeSpec whose own signatures are sound failed by the printer's bounds.
        Some(self.type_spec_fault(rid).unwrap_or(Error::new(ErrorKind::TooDeep, row.offset(), "a TypeSpec name within 64 KB of text and 64 Ki steps of work")))
    }

    /// The fault of TypeSpec `rid` and of the TypeSpecs it names, remembered per row.
    fn type_spec_fault(&self, rid: u32) -> Option<Error> {
        if let Some(known) = self.spec_faults.try_borrow().ok().and_then(|m| m.get(&rid).copied()) {
            return known;
        }
        let fault = self.type_spec_walk(rid).err();
        if let Ok(mut m) = self.spec_faults.try_borrow_mut() {
            m.insert(rid, fault);
        }
        fault
    }

    /// One TypeSpec's blob, decoded whole: the tokens it names.
    fn type_spec_tokens(&self, rid: u32, work: &mut usize) -> Result<(u64, Vec<u32>)> {
        let blob = self.type_spec(rid)?;
        *work = work.saturating_add(blob.len()).saturating_add(1);
        if *work > super::MAX_NAME_WORK as usize {
            return Err(Error::new(ErrorKind::TooDeep, blob.offset(), "TypeSpecs within 64 Ki bytes of signatures"));
        }
        let mut r = blob;
        let mut tokens = Tokens(Vec::new());
        decode_type(&mut r, &mut tokens)?;
        if !r.is_empty() {
            return Err(r.error(ErrorKind::ItemLengthMismatch, "no bytes after the type"));
        }
        Ok((blob.offset(), tokens.0))
    }

    /// Walk TypeSpec `root` and every TypeSpec it names, depth first: each must decode, none may
    /// contain itself, and they nest at most [`MAX_SPEC_NESTING`] deep (`too_deep` otherwise, at
    /// the blob that names the next one). Bounded by [`super::MAX_NAME_WORK`] bytes of blobs.
    fn type_spec_walk(&self, root: u32) -> Result<()> {
        let rows = self.tables.rows(table::TYPE_SPEC);
        let mut work = 0usize;
        // Per row: `false` while on the path, `true` when done.
        let mut seen: HashMap<u32, bool> = HashMap::new();
        let (at, tokens) = self.type_spec_tokens(root, &mut work)?;
        let mut path: Vec<(u32, u64, std::vec::IntoIter<u32>)> = vec![(root, at, tokens.into_iter())];
        seen.insert(root, false);
        while let Some((rid, at, tokens)) = path.last_mut() {
            let (rid, at) = (*rid, *at);
            let Some(token) = tokens.next() else {
                seen.insert(rid, true);
                path.pop();
                continue;
            };
            let next = token & 0x00FF_FFFF;
            // A token of another table, or one that names no row, is the printer's to name.
            if token >> 24 != u32::from(table::TYPE_SPEC) || next == 0 || next > rows {
                continue;
            }
            match seen.get(&next) {
                Some(false) => return Err(Error::new(ErrorKind::TooDeep, at, "a TypeSpec that does not contain itself")),
                Some(true) => continue,
                None => {}
            }
            if path.len() > MAX_SPEC_NESTING {
                return Err(Error::new(ErrorKind::TooDeep, at, "TypeSpecs nested at most 64 deep"));
            }
            let (next_at, next_tokens) = self.type_spec_tokens(next, &mut work)?;
            seen.insert(next, false);
            path.push((next, next_at, next_tokens.into_iter()));
        }
        Ok(())
    }
}

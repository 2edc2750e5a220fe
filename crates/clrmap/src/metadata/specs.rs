//! Every TypeSpec and MethodSpec of an assembly, rendered: what `clrmap meta specs` prints, and
//! the instantiations that `gdmap::instantiation_map` turns into a dictionary map (gdmap.md §7).
//! A MethodSpec prints with the method it instantiates, `Owner::Name<A1,A2>(P1,P2)`: its
//! arguments alone do not say which method they are for.

use std::collections::HashMap;
use std::sync::Arc;

use super::schema::table;
use super::Metadata;
use crate::read::{Error, ErrorKind, Reader, Result};
use crate::signature::{decode_type, render_one, SpanRenderer, TypeNames};

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
    /// `Owner::Name` ([`Metadata::member_name`]), or the raw `0x...` token when it names no row.
    pub name: Arc<str>,
    /// Its parameter types, `(P1,P2)`; `None` when its signature does not decode.
    pub params: Option<Arc<str>>,
}

impl SpecMethod {
    /// `method` (a MethodSpec's Method column), named through `md`.
    pub fn new(md: &Metadata<'_>, method: u32) -> Self {
        SpecMethod {
            token: method,
            name: md.member_name(method).unwrap_or_else(|| format!("0x{method:08X}")).into(),
            params: md.member_params(method).map(Into::into),
        }
    }
}

impl SpecLine {
    /// The text `meta specs` prints after the token: a TypeSpec's type, or a MethodSpec's
    /// `Owner::Name<A1,A2>(P1,P2)` (the parameter list left out when the method's signature
    /// does not decode).
    pub fn full_text(&self) -> Result<String> {
        let text = self.text.clone()?;
        Ok(match &self.method {
            Some(m) => format!("{}{text}{}", m.name, m.params.as_deref().unwrap_or("")),
            None => text,
        })
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


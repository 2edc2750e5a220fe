//! The ILAsm-notation printer (`contract.md` §1).
//!
//! [`Renderer`] is a [`TypeProvider`] whose types are strings, so decoding and printing happen in
//! one walk. Modifiers and array forms are suffixes (`int32 modreq(N)`, `int32[]`), which is why
//! the text is built bottom-up.

use core::fmt::Write as _;

use super::decode::decode_type;
use super::names::TypeNames;
use super::provider::TypeProvider;
use super::types::{ArrayShape, MethodSignature, Primitive, Type};
use crate::read::{Reader, Result};

/// A provider that renders each type as ILAsm text, naming tokens through a [`TypeNames`].
pub struct Renderer<'n> {
    names: &'n dyn TypeNames,
}

impl core::fmt::Debug for Renderer<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Renderer")
    }
}

impl<'n> Renderer<'n> {
    /// A renderer naming tokens through `names` ([`super::HexTokens`] for `0x01000012`).
    pub fn new(names: &'n dyn TypeNames) -> Self {
        Renderer { names }
    }

    fn push_name(&self, out: &mut String, token: u32) {
        let mark = out.len();
        if self.names.write_type_name(token, out).is_err() {
            // A resolver that cannot name a token must not lose it: fall back to the raw token.
            out.truncate(mark);
            let _ = write!(out, "0x{token:08X}");
        }
    }
}

/// The text of one ARRAY dimension (contract §1): `L...H` with H = L+S-1, `0...H` for a size
/// alone, `L...` for a bound alone, `...` for neither.
fn push_dimension(out: &mut dyn core::fmt::Write, size: Option<u32>, lower: Option<i32>) {
    let _ = match (lower, size) {
        (Some(l), Some(s)) => write!(out, "{}...{}", l, i64::from(l).saturating_add(i64::from(s)).saturating_sub(1)),
        (None, Some(s)) => write!(out, "0...{}", i64::from(s).saturating_sub(1)),
        (Some(l), None) => write!(out, "{l}..."),
        (None, None) => write!(out, "..."),
    };
}

/// The calling-convention word of an FNPTR (contract §1), with its trailing space.
fn calling_convention_word(kind: u8) -> &'static str {
    match kind {
        1 => "unmanaged cdecl ",
        2 => "unmanaged stdcall ",
        3 => "unmanaged thiscall ",
        4 => "unmanaged fastcall ",
        5 => "vararg ",
        9 => "unmanaged ",
        _ => "",
    }
}

impl TypeProvider for Renderer<'_> {
    type Type = String;

    fn primitive(&mut self, primitive: Primitive) -> String {
        primitive.keyword().to_owned()
    }

    fn named(&mut self, value_type: bool, token: u32) -> String {
        let mut s = String::from(if value_type { "valuetype " } else { "class " });
        self.push_name(&mut s, token);
        s
    }

    fn generic_inst(&mut self, value_type: bool, token: u32, args: Vec<String>) -> String {
        let mut s = self.named(value_type, token);
        s.push('<');
        s.push_str(&args.join(","));
        s.push('>');
        s
    }

    fn sz_array(&mut self, mut element: String) -> String {
        element.push_str("[]");
        element
    }

    fn array(&mut self, mut element: String, shape: ArrayShape) -> String {
        element.push('[');
        for i in 0..shape.rank as usize {
            if i > 0 {
                element.push(',');
            }
            push_dimension(&mut element, shape.sizes.get(i).copied(), shape.lower_bounds.get(i).copied());
        }
        element.push(']');
        element
    }

    fn ptr(&mut self, mut element: String) -> String {
        element.push('*');
        element
    }

    fn by_ref(&mut self, mut element: String) -> String {
        element.push('&');
        element
    }

    fn pinned(&mut self, mut element: String) -> String {
        element.push_str(" pinned");
        element
    }

    fn modified(&mut self, required: bool, modifier: u32, mut element: String) -> String {
        element.push_str(if required { " modreq(" } else { " modopt(" });
        self.push_name(&mut element, modifier);
        element.push(')');
        element
    }

    fn var(&mut self, index: u32) -> String {
        format!("!{index}")
    }

    fn mvar(&mut self, index: u32) -> String {
        format!("!!{index}")
    }

    fn fn_ptr(&mut self, sig: MethodSignature<String>) -> String {
        let cc = sig.calling_convention;
        let mut s = String::from("method ");
        if cc.has_this() {
            s.push_str("instance ");
        }
        if cc.explicit_this() {
            s.push_str("explicit ");
        }
        s.push_str(calling_convention_word(cc.kind()));
        s.push_str(&sig.return_type);
        s.push_str(" *(");
        let mut first = true;
        for (i, p) in sig.parameters.iter().enumerate() {
            if sig.sentinel == Some(i) {
                if !first {
                    s.push(',');
                }
                s.push_str("...");
                first = false;
            }
            if !first {
                s.push(',');
            }
            s.push_str(p);
            first = false;
        }
        s.push(')');
        s
    }
}

/// A span of [`SpanRenderer`]'s buffer: one rendered type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    start: usize,
    end: usize,
}

/// A renderer that writes every type into one growing buffer and hands back spans of it, so a
/// whole signature renders with one allocation instead of one per node. When a suffix applies to
/// the span at the end of the buffer (the usual case) it is appended in place; otherwise the
/// pieces are copied to the end.
pub struct SpanRenderer<'n> {
    names: &'n dyn TypeNames,
    /// Always UTF-8: only `str`s are ever appended, and spans start and end at their boundaries.
    buf: Vec<u8>,
}

/// `fmt::Write` into the byte buffer.
struct Sink<'b>(&'b mut Vec<u8>);

impl core::fmt::Write for Sink<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl core::fmt::Debug for SpanRenderer<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("SpanRenderer")
    }
}

impl<'n> SpanRenderer<'n> {
    /// A renderer naming tokens through `names`.
    pub fn new(names: &'n dyn TypeNames) -> Self {
        SpanRenderer { names, buf: Vec::with_capacity(256) }
    }

    /// The text of a span.
    pub fn text(&self, s: Span) -> &str {
        self.buf.get(s.start..s.end).and_then(|b| core::str::from_utf8(b).ok()).unwrap_or("")
    }

    fn push_str(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// Forget all spans, keeping the buffer's capacity.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    fn open(&self) -> usize {
        self.buf.len()
    }

    fn close(&self, start: usize) -> Span {
        Span { start, end: self.buf.len() }
    }

    /// Make `s` the last thing in the buffer (copying it there if it is not) and return its start.
    fn move_to_end(&mut self, s: Span) -> usize {
        if s.end == self.buf.len() {
            return s.start;
        }
        let start = self.buf.len();
        self.push_span(s);
        start
    }

    fn push_name(&mut self, token: u32) {
        let mark = self.buf.len();
        if self.names.write_type_name(token, &mut Sink(&mut self.buf)).is_err() {
            self.buf.truncate(mark);
            let _ = write!(Sink(&mut self.buf), "0x{token:08X}");
        }
    }

    fn push_span(&mut self, s: Span) {
        // Copy within the buffer: the span lies before the current end.
        if s.start <= s.end && s.end <= self.buf.len() {
            self.buf.extend_from_within(s.start..s.end);
        }
    }
}

impl TypeProvider for SpanRenderer<'_> {
    type Type = Span;

    fn primitive(&mut self, primitive: Primitive) -> Span {
        let start = self.open();
        self.push_str(primitive.keyword());
        self.close(start)
    }

    fn named(&mut self, value_type: bool, token: u32) -> Span {
        let start = self.open();
        self.push_str(if value_type { "valuetype " } else { "class " });
        self.push_name(token);
        self.close(start)
    }

    fn generic_inst(&mut self, value_type: bool, token: u32, args: Vec<Span>) -> Span {
        let start = self.open();
        self.push_str(if value_type { "valuetype " } else { "class " });
        self.push_name(token);
        self.buf.push(b'<');
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            self.push_span(*a);
        }
        self.buf.push(b'>');
        self.close(start)
    }

    fn sz_array(&mut self, element: Span) -> Span {
        let start = self.move_to_end(element);
        self.push_str("[]");
        self.close(start)
    }

    fn array(&mut self, element: Span, shape: ArrayShape) -> Span {
        let start = self.move_to_end(element);
        self.buf.push(b'[');
        for i in 0..shape.rank as usize {
            if i > 0 {
                self.buf.push(b',');
            }
            push_dimension(&mut Sink(&mut self.buf), shape.sizes.get(i).copied(), shape.lower_bounds.get(i).copied());
        }
        self.buf.push(b']');
        self.close(start)
    }

    fn ptr(&mut self, element: Span) -> Span {
        let start = self.move_to_end(element);
        self.buf.push(b'*');
        self.close(start)
    }

    fn by_ref(&mut self, element: Span) -> Span {
        let start = self.move_to_end(element);
        self.buf.push(b'&');
        self.close(start)
    }

    fn pinned(&mut self, element: Span) -> Span {
        let start = self.move_to_end(element);
        self.push_str(" pinned");
        self.close(start)
    }

    fn modified(&mut self, required: bool, modifier: u32, element: Span) -> Span {
        let start = self.move_to_end(element);
        self.push_str(if required { " modreq(" } else { " modopt(" });
        self.push_name(modifier);
        self.buf.push(b')');
        self.close(start)
    }

    fn var(&mut self, index: u32) -> Span {
        let start = self.open();
        let _ = write!(Sink(&mut self.buf), "!{index}");
        self.close(start)
    }

    fn mvar(&mut self, index: u32) -> Span {
        let start = self.open();
        let _ = write!(Sink(&mut self.buf), "!!{index}");
        self.close(start)
    }

    fn fn_ptr(&mut self, sig: MethodSignature<Span>) -> Span {
        let start = self.open();
        let cc = sig.calling_convention;
        self.push_str("method ");
        if cc.has_this() {
            self.push_str("instance ");
        }
        if cc.explicit_this() {
            self.push_str("explicit ");
        }
        self.push_str(calling_convention_word(cc.kind()));
        self.push_span(sig.return_type);
        self.push_str(" *(");
        let mut first = true;
        for (i, p) in sig.parameters.iter().enumerate() {
            if sig.sentinel == Some(i) {
                if !first {
                    self.buf.push(b',');
                }
                self.push_str("...");
                first = false;
            }
            if !first {
                self.buf.push(b',');
            }
            self.push_span(*p);
            first = false;
        }
        self.buf.push(b')');
        self.close(start)
    }
}

/// A provider that prints each type as it is decoded, straight into a [`core::fmt::Write`]: the
/// text is the same as [`Renderer`]'s, but nothing is held in memory beyond the decoder's stack, so
/// a type of any size streams in constant space.
///
/// The first write error stops the output and is kept ([`StreamRenderer::finish`]). A token that
/// `names` cannot name falls back to the raw `0x...` token when the resolver wrote nothing for it;
/// a resolver that fails after writing part of a name fails the output (nothing can be taken back).
/// A type that does not decode leaves partial text behind: validate first ([`super::skip_type`])
/// when that matters.
pub struct StreamRenderer<'n, 'w> {
    names: &'n dyn TypeNames,
    out: &'w mut dyn core::fmt::Write,
    failed: bool,
}

impl core::fmt::Debug for StreamRenderer<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StreamRenderer").field("failed", &self.failed).finish()
    }
}

/// Counts what a resolver writes, and whether the writer under it failed.
struct Watch<'w> {
    out: &'w mut dyn core::fmt::Write,
    written: bool,
    failed: bool,
}

impl core::fmt::Write for Watch<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        if !s.is_empty() {
            self.written = true;
        }
        let r = self.out.write_str(s);
        if r.is_err() {
            self.failed = true;
        }
        r
    }
}

impl<'n, 'w> StreamRenderer<'n, 'w> {
    /// A renderer naming tokens through `names` and writing to `out`.
    pub fn new(names: &'n dyn TypeNames, out: &'w mut dyn core::fmt::Write) -> Self {
        StreamRenderer { names, out, failed: false }
    }

    /// `Ok` unless a write failed (or a name failed after part of it was written).
    pub fn finish(&self) -> core::fmt::Result {
        if self.failed {
            Err(core::fmt::Error)
        } else {
            Ok(())
        }
    }

    fn put(&mut self, s: &str) {
        if !self.failed && self.out.write_str(s).is_err() {
            self.failed = true;
        }
    }

    fn put_fmt(&mut self, args: core::fmt::Arguments<'_>) {
        if !self.failed && self.out.write_fmt(args).is_err() {
            self.failed = true;
        }
    }

    fn put_name(&mut self, token: u32) {
        if self.failed {
            return;
        }
        let mut w = Watch { out: &mut *self.out, written: false, failed: false };
        if self.names.write_type_name(token, &mut w).is_ok() {
            return;
        }
        if w.written || w.failed {
            self.failed = true;
        } else {
            self.put_fmt(format_args!("0x{token:08X}"));
        }
    }
}

impl TypeProvider for StreamRenderer<'_, '_> {
    type Type = ();

    fn primitive(&mut self, primitive: Primitive) {
        self.put(primitive.keyword());
    }

    fn named(&mut self, value_type: bool, token: u32) {
        self.put(if value_type { "valuetype " } else { "class " });
        self.put_name(token);
    }

    fn begin_generic_inst(&mut self, value_type: bool, token: u32) {
        self.named(value_type, token);
        self.put("<");
    }

    fn begin_generic_arg(&mut self, index: u32) {
        if index > 0 {
            self.put(",");
        }
    }

    fn generic_inst(&mut self, _: bool, _: u32, _: Vec<()>) {
        self.put(">");
    }

    fn sz_array(&mut self, _: ()) {
        self.put("[]");
    }

    fn array(&mut self, _: (), shape: ArrayShape) {
        self.put("[");
        for i in 0..shape.rank as usize {
            if i > 0 {
                self.put(",");
            }
            if !self.failed {
                let mut w = Watch { out: &mut *self.out, written: false, failed: false };
                push_dimension(&mut w, shape.sizes.get(i).copied(), shape.lower_bounds.get(i).copied());
                self.failed = w.failed;
            }
        }
        self.put("]");
    }

    fn ptr(&mut self, _: ()) {
        self.put("*");
    }

    fn by_ref(&mut self, _: ()) {
        self.put("&");
    }

    fn pinned(&mut self, _: ()) {
        self.put(" pinned");
    }

    fn modified(&mut self, required: bool, modifier: u32, _: ()) {
        self.put(if required { " modreq(" } else { " modopt(" });
        self.put_name(modifier);
        self.put(")");
    }

    fn var(&mut self, index: u32) {
        self.put_fmt(format_args!("!{index}"));
    }

    fn mvar(&mut self, index: u32) {
        self.put_fmt(format_args!("!!{index}"));
    }

    fn begin_fn_ptr(&mut self, cc: super::types::CallingConvention) {
        self.put("method ");
        if cc.has_this() {
            self.put("instance ");
        }
        if cc.explicit_this() {
            self.put("explicit ");
        }
        self.put(calling_convention_word(cc.kind()));
    }

    fn begin_fn_ptr_param(&mut self, index: u32, sentinel: bool) {
        if index == 0 {
            self.put(" *(");
        }
        if sentinel {
            if index > 0 {
                self.put(",");
            }
            self.put("...");
        }
        if index > 0 || sentinel {
            self.put(",");
        }
    }

    fn fn_ptr(&mut self, sig: MethodSignature<()>) {
        if sig.parameters.is_empty() {
            self.put(" *(");
        }
        self.put(")");
    }
}

/// Decode one type from `r` and print it into `out` as it is decoded (see [`StreamRenderer`]).
/// The outer result is the decoder's; the inner one the writer's.
pub fn stream_one(r: &mut Reader<'_>, names: &dyn TypeNames, out: &mut dyn core::fmt::Write) -> Result<core::fmt::Result> {
    let mut s = StreamRenderer::new(names, out);
    decode_type(r, &mut s)?;
    Ok(s.finish())
}

/// Decode one type from `r` and render it with a reusable [`SpanRenderer`]: one allocation for
/// the returned string.
pub fn render_one(r: &mut Reader<'_>, renderer: &mut SpanRenderer<'_>) -> Result<String> {
    renderer.clear();
    let span = decode_type(r, renderer)?;
    Ok(renderer.text(span).to_owned())
}

/// Decode exactly one type from `bytes` and render it. Trailing bytes are an error
/// (`item_length_mismatch` at the first one): a signature is all of its bytes.
pub fn render(bytes: &[u8], names: &dyn TypeNames) -> Result<String> {
    let mut r = Reader::new(bytes, 0);
    let s = render_one(&mut r, &mut SpanRenderer::new(names))?;
    if !r.is_empty() {
        return Err(r.error(crate::ErrorKind::ItemLengthMismatch, "no bytes after the type"));
    }
    Ok(s)
}

/// Rebuild an owned tree through any provider (for example a [`Renderer`]).
pub fn fold<P: TypeProvider>(ty: &Type, p: &mut P) -> P::Type {
    match ty {
        Type::Primitive { primitive } => p.primitive(*primitive),
        Type::Named { value_type, token } => p.named(*value_type, *token),
        Type::GenericInst { value_type, token, args } => {
            let args = args.iter().map(|a| fold(a, p)).collect();
            p.generic_inst(*value_type, *token, args)
        }
        Type::SzArray { element } => {
            let e = fold(element, p);
            p.sz_array(e)
        }
        Type::Array { element, shape } => {
            let e = fold(element, p);
            p.array(e, shape.clone())
        }
        Type::Ptr { element } => {
            let e = fold(element, p);
            p.ptr(e)
        }
        Type::ByRef { element } => {
            let e = fold(element, p);
            p.by_ref(e)
        }
        Type::Pinned { element } => {
            let e = fold(element, p);
            p.pinned(e)
        }
        Type::Modified { required, modifier, element } => {
            let e = fold(element, p);
            p.modified(*required, *modifier, e)
        }
        Type::Var { index } => p.var(*index),
        Type::MVar { index } => p.mvar(*index),
        Type::FnPtr { signature } => {
            let return_type = fold(&signature.return_type, p);
            let parameters = signature.parameters.iter().map(|a| fold(a, p)).collect();
            p.fn_ptr(MethodSignature {
                calling_convention: signature.calling_convention,
                generic_parameter_count: signature.generic_parameter_count,
                return_type,
                parameters,
                sentinel: signature.sentinel,
            })
        }
    }
}

/// Render an owned tree in ILAsm notation.
pub fn write_type(ty: &Type, names: &dyn TypeNames) -> String {
    fold(ty, &mut Renderer::new(names))
}

impl core::fmt::Display for Type {
    /// ILAsm notation with tokens as `0x01000012`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&write_type(self, &super::HexTokens))
    }
}

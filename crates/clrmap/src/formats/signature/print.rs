//! The ILAsm-notation printer (docs/output.md#type-signatures): one printer, two places for its text.
//!
//! The decoder hands productions over in byte order, and in that order every production's text
//! is its parts' texts, plus prefixes and separators (given through the provider's `begin_*`
//! hooks) and suffixes (`int32 modreq(N)`, `int32[]`, `int32*`). So the notation is written once,
//! as a [`TypeProvider`] over any [`Print`] target, and the text only ever grows at its end:
//!
//! * [`SpanRenderer`] appends to one growing buffer and hands back [`Span`]s of it: a whole
//!   signature renders with one allocation.
//! * [`StreamRenderer`] writes straight into a [`core::fmt::Write`], in constant space.
//!
//! The two differ only where a resolver fails to name a token: a buffer can take back what a
//! resolver wrote half-way and print the raw token instead; a stream cannot, and fails.
//!
//! The raw token stands only for a token that names no row. Where the resolver says the row is
//! there but cannot be named ([`TypeNames::name_fault`]: a TypeSpec that does not decode or
//! contains itself), the whole text fails with that error: [`render_one`], [`render`] and
//! [`stream_one`] return it, and [`SpanRenderer::fault`] / [`StreamRenderer::fault`] keep it.

use core::fmt::{self, Write as _};

use super::decode::decode_type;
use super::names::TypeNames;
use super::provider::TypeProvider;
use super::types::{ArrayShape, CallingConvention, MethodSignature, Primitive, Type};
use super::zapsig::ZapsigProvider;
use crate::base::read::{Error, Reader, Result};

/// The text of one ARRAY dimension (docs/output.md#type-signatures): `L...H` with H = L+S-1, `0...H` for a size
/// alone, `L...` for a bound alone, `...` for neither.
fn write_dimension(out: &mut dyn fmt::Write, size: Option<u32>, lower: Option<i32>) -> fmt::Result {
    match (lower, size) {
        (Some(l), Some(s)) => write!(out, "{}...{}", l, i64::from(l).saturating_add(i64::from(s)).saturating_sub(1)),
        (None, Some(s)) => write!(out, "0...{}", i64::from(s).saturating_sub(1)),
        (Some(l), None) => write!(out, "{l}..."),
        (None, None) => out.write_str("..."),
    }
}

/// The calling-convention word of an FNPTR (docs/output.md#type-signatures), with its trailing space.
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

/// `class ` or `valuetype `.
fn kind_word(value_type: bool) -> &'static str {
    if value_type {
        "valuetype "
    } else {
        "class "
    }
}

/// Where the printer's text goes. Sealed: the two targets are [`SpanRenderer`] and
/// [`StreamRenderer`].
pub trait Print: sealed::Sealed {
    /// What a printed type is to the caller: a [`Span`] of a buffer, or nothing for a stream.
    type Mark: Copy;
    /// Append text.
    fn put(&mut self, s: &str);
    /// Append a token's name, or the raw token where the target can fall back to it.
    fn put_name(&mut self, token: u32);
    /// An empty mark at the end of the text.
    fn here(&self) -> Self::Mark;
    /// `from` grown to take in all the text written after it.
    fn through(&self, from: Self::Mark) -> Self::Mark;
    /// A production with a `begin_*` hook starts here ([`Print::close`] ends it).
    fn open(&mut self);
    /// The mark of the most recently opened production, through the end of the text.
    fn close(&mut self) -> Self::Mark;
    /// Tokens named from here on belong to module `index` of a ReadyToRun image's reference
    /// table (`None`: to the names' own module).
    fn set_module(&mut self, index: Option<u32>);
}

/// A token of another module (a zapsig MODULE_ZAPSIG override): the resolver names this module's
/// tokens only, so it prints raw, after the module's index: `[#2]0x01000003`.
fn write_foreign_token(out: &mut dyn fmt::Write, module: u32, token: u32) -> fmt::Result {
    write!(out, "[#{module}]0x{token:08X}")
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::SpanRenderer<'_> {}
    impl Sealed for super::StreamRenderer<'_, '_> {}
}

/// `fmt::Write` onto a print target, for formatted pieces (numbers, dimensions).
struct Via<'p, P: Print>(&'p mut P);

impl<P: Print> fmt::Write for Via<'_, P> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.put(s);
        Ok(())
    }
}

/// The notation, written once for both targets. Prefixes and separators come in the `begin_*`
/// hooks; every other production appends its suffix to its parts, which end the text already.
impl<P: Print> TypeProvider for P {
    type Type = P::Mark;

    fn primitive(&mut self, primitive: Primitive) -> P::Mark {
        let at = self.here();
        self.put(primitive.keyword());
        self.through(at)
    }

    fn named(&mut self, value_type: bool, token: u32) -> P::Mark {
        let at = self.here();
        self.put(kind_word(value_type));
        self.put_name(token);
        self.through(at)
    }

    fn begin_generic_inst(&mut self, value_type: bool, token: u32) {
        self.open();
        self.put(kind_word(value_type));
        self.put_name(token);
        self.put("<");
    }

    fn begin_generic_arg(&mut self, index: u32) {
        if index > 0 {
            self.put(",");
        }
    }

    fn generic_inst(&mut self, _: bool, _: u32, _: Vec<P::Mark>) -> P::Mark {
        self.put(">");
        self.close()
    }

    fn sz_array(&mut self, element: P::Mark) -> P::Mark {
        self.put("[]");
        self.through(element)
    }

    fn array(&mut self, element: P::Mark, shape: ArrayShape) -> P::Mark {
        self.put("[");
        for i in 0..shape.rank as usize {
            if i > 0 {
                self.put(",");
            }
            let _ = write_dimension(&mut Via(self), shape.sizes.get(i).copied(), shape.lower_bounds.get(i).copied());
        }
        self.put("]");
        self.through(element)
    }

    fn ptr(&mut self, element: P::Mark) -> P::Mark {
        self.put("*");
        self.through(element)
    }

    fn by_ref(&mut self, element: P::Mark) -> P::Mark {
        self.put("&");
        self.through(element)
    }

    fn pinned(&mut self, element: P::Mark) -> P::Mark {
        self.put(" pinned");
        self.through(element)
    }

    fn modified(&mut self, required: bool, modifier: u32, element: P::Mark) -> P::Mark {
        self.put(if required { " modreq(" } else { " modopt(" });
        self.put_name(modifier);
        self.put(")");
        self.through(element)
    }

    fn var(&mut self, index: u32) -> P::Mark {
        let at = self.here();
        let _ = write!(Via(self), "!{index}");
        self.through(at)
    }

    fn mvar(&mut self, index: u32) -> P::Mark {
        let at = self.here();
        let _ = write!(Via(self), "!!{index}");
        self.through(at)
    }

    fn begin_fn_ptr(&mut self, cc: CallingConvention) {
        self.open();
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

    fn fn_ptr(&mut self, sig: MethodSignature<P::Mark>) -> P::Mark {
        if sig.parameters.is_empty() {
            self.put(" *(");
        }
        self.put(")");
        self.close()
    }
}

/// The zapsig productions (ReadyToRun signatures), in the same notation.
impl<P: Print> ZapsigProvider for P {
    /// `System.__Canon` is a class of CoreLib; the runtime and R2RDump print it by that name.
    fn canon(&mut self) -> P::Mark {
        let at = self.here();
        self.put("class System.__Canon");
        self.through(at)
    }

    /// The GenericParam row's token (0x2A), which resolvers name as they can.
    fn generic_param(&mut self, rid: u32) -> P::Mark {
        let at = self.here();
        self.put_name(0x2A00_0000 | (rid & 0x00FF_FFFF));
        self.through(at)
    }

    fn module(&mut self, index: Option<u32>) {
        self.set_module(index);
    }
}

/// A span of [`SpanRenderer`]'s buffer: one rendered type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    start: usize,
    end: usize,
}

/// The printer into one growing buffer: every type is a [`Span`] of it, so a whole signature
/// renders with one allocation instead of one per node.
pub struct SpanRenderer<'n> {
    names: &'n dyn TypeNames,
    /// Always UTF-8: only `str`s are ever appended, and spans start and end at their boundaries.
    buf: Vec<u8>,
    /// Where each open GENERICINST or FNPTR started.
    open: Vec<usize>,
    /// The module of the tokens being named, when not the names' own (zapsig only).
    module: Option<u32>,
    /// The first token that named a row the resolver could not name ([`TypeNames::name_fault`]).
    fault: Option<Error>,
}

/// `fmt::Write` into the byte buffer.
struct Sink<'b>(&'b mut Vec<u8>);

impl fmt::Write for Sink<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl fmt::Debug for SpanRenderer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SpanRenderer")
    }
}

impl<'n> SpanRenderer<'n> {
    /// A renderer naming tokens through `names` ([`super::HexTokens`] for `0x01000012`).
    pub fn new(names: &'n dyn TypeNames) -> Self {
        SpanRenderer { names, buf: Vec::with_capacity(256), open: Vec::new(), module: None, fault: None }
    }

    /// Why the text since the last [`SpanRenderer::clear`] is not a true rendering: a token named
    /// a row that the resolver could not name ([`TypeNames::name_fault`]). The text then holds
    /// that token raw, and is to be thrown away.
    pub fn fault(&self) -> Option<Error> {
        self.fault
    }

    /// The text of a span.
    pub fn text(&self, s: Span) -> &str {
        self.buf.get(s.start..s.end).and_then(|b| core::str::from_utf8(b).ok()).unwrap_or("")
    }

    /// Forget all spans, keeping the buffer's capacity.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.open.clear();
        self.module = None;
        self.fault = None;
    }
}

impl Print for SpanRenderer<'_> {
    type Mark = Span;

    fn put(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    fn put_name(&mut self, token: u32) {
        if let Some(module) = self.module {
            let _ = write_foreign_token(&mut Sink(&mut self.buf), module, token);
            return;
        }
        let mark = self.buf.len();
        // After a fault the text is thrown away: names cost nothing more.
        if self.fault.is_some() || self.names.write_type_name(token, &mut Sink(&mut self.buf)).is_err() {
            // A resolver that cannot name a token must not lose it: take back what it wrote and
            // print the raw token. A row that is there but cannot be named fails the text.
            self.buf.truncate(mark);
            if self.fault.is_none() {
                self.fault = self.names.name_fault(token);
            }
            let _ = write!(Sink(&mut self.buf), "0x{token:08X}");
        }
    }

    fn here(&self) -> Span {
        Span { start: self.buf.len(), end: self.buf.len() }
    }

    fn through(&self, from: Span) -> Span {
        Span { start: from.start, end: self.buf.len() }
    }

    fn open(&mut self) {
        self.open.push(self.buf.len());
    }

    fn close(&mut self) -> Span {
        // The decoder closes what it opened; an empty stack (a provider misused) spans nothing.
        let start = self.open.pop().unwrap_or(self.buf.len());
        Span { start, end: self.buf.len() }
    }

    fn set_module(&mut self, index: Option<u32>) {
        self.module = index;
    }
}

/// The printer straight into a [`core::fmt::Write`]: nothing is held in memory beyond the
/// decoder's stack, so a type of any size streams in constant space.
///
/// The first write error stops the output and is kept ([`StreamRenderer::finish`]). A token that
/// `names` cannot name falls back to the raw `0x...` token when the resolver wrote nothing for it;
/// a resolver that fails after writing part of a name fails the output (nothing can be taken back).
/// A token whose row is there but cannot be named ([`TypeNames::name_fault`]) stops the output
/// and is kept ([`StreamRenderer::fault`]). A type that does not decode, or names such a row,
/// leaves partial text behind: check first ([`super::skip_type`], [`check_names`]) when that
/// matters.
pub struct StreamRenderer<'n, 'w> {
    names: &'n dyn TypeNames,
    out: &'w mut dyn fmt::Write,
    failed: bool,
    /// The module of the tokens being named, when not the names' own (zapsig only).
    module: Option<u32>,
    /// The first token that named a row the resolver could not name; nothing is written after it.
    fault: Option<Error>,
}

impl fmt::Debug for StreamRenderer<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamRenderer").field("failed", &self.failed).finish()
    }
}

/// Counts what a resolver writes, and whether the writer under it failed.
struct Watch<'w> {
    out: &'w mut dyn fmt::Write,
    written: bool,
    failed: bool,
}

impl fmt::Write for Watch<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
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
    pub fn new(names: &'n dyn TypeNames, out: &'w mut dyn fmt::Write) -> Self {
        StreamRenderer { names, out, failed: false, module: None, fault: None }
    }

    /// The first token that named a row the resolver could not name ([`TypeNames::name_fault`]):
    /// the output stopped there.
    pub fn fault(&self) -> Option<Error> {
        self.fault
    }

    /// `Ok` unless a write failed (or a name failed after part of it was written).
    pub fn finish(&self) -> fmt::Result {
        if self.failed {
            Err(fmt::Error)
        } else {
            Ok(())
        }
    }
}

impl Print for StreamRenderer<'_, '_> {
    type Mark = ();

    fn put(&mut self, s: &str) {
        if !self.failed && self.fault.is_none() && self.out.write_str(s).is_err() {
            self.failed = true;
        }
    }

    fn put_name(&mut self, token: u32) {
        if self.failed || self.fault.is_some() {
            return;
        }
        if let Some(module) = self.module {
            let _ = write_foreign_token(&mut Via(self), module, token);
            return;
        }
        let mut w = Watch { out: &mut *self.out, written: false, failed: false };
        if self.names.write_type_name(token, &mut w).is_ok() {
            return;
        }
        let (written, failed) = (w.written, w.failed);
        if let Some(e) = self.names.name_fault(token) {
            self.fault = Some(e);
        } else if written || failed {
            self.failed = true;
        } else {
            let _ = write!(Via(self), "0x{token:08X}");
        }
    }

    fn here(&self) {}

    fn through(&self, _: ()) {}

    fn open(&mut self) {}

    fn close(&mut self) {}

    fn set_module(&mut self, index: Option<u32>) {
        self.module = index;
    }
}

/// Decode one type from `r` and print it into `out` as it is decoded (see [`StreamRenderer`]).
/// The outer result is the decoder's, or the fault of a token whose row cannot be named (the
/// output stopped there); the inner one the writer's.
pub fn stream_one(r: &mut Reader<'_>, names: &dyn TypeNames, out: &mut dyn core::fmt::Write) -> Result<core::fmt::Result> {
    let mut s = StreamRenderer::new(names, out);
    decode_type(r, &mut s)?;
    if let Some(e) = s.fault() {
        return Err(e);
    }
    Ok(s.finish())
}

/// A writer that keeps nothing.
struct Discard;

impl fmt::Write for Discard {
    fn write_str(&mut self, _: &str) -> fmt::Result {
        Ok(())
    }
}

/// Decode one type from `r` and name every token in it, writing nothing: the error
/// [`stream_one`] would meet, found before anything is streamed. Leaves `r` after the type.
pub fn check_names(r: &mut Reader<'_>, names: &dyn TypeNames) -> Result<()> {
    stream_one(r, names, &mut Discard).map(|_| ())
}

/// Decode one type from `r` and render it with a reusable [`SpanRenderer`]: one allocation for
/// the returned string. A token whose row cannot be named fails it ([`SpanRenderer::fault`]).
pub fn render_one(r: &mut Reader<'_>, renderer: &mut SpanRenderer<'_>) -> Result<String> {
    renderer.clear();
    let span = decode_type(r, renderer)?;
    if let Some(e) = renderer.fault() {
        return Err(e);
    }
    Ok(renderer.text(span).to_owned())
}

/// Decode exactly one type from `bytes` and render it. Trailing bytes are an error
/// (`item_length_mismatch` at the first one): a signature is all of its bytes.
pub fn render(bytes: &[u8], names: &dyn TypeNames) -> Result<String> {
    let mut r = Reader::new(bytes, 0);
    let s = render_one(&mut r, &mut SpanRenderer::new(names))?;
    if !r.is_empty() {
        return Err(r.error(crate::base::read::ErrorKind::ItemLengthMismatch, "no bytes after the type"));
    }
    Ok(s)
}

/// Rebuild an owned tree through any provider, calling its hooks in decoding order (so a
/// printer gets the same calls as from the bytes).
pub fn fold<P: TypeProvider>(ty: &Type, p: &mut P) -> P::Type {
    match ty {
        Type::Primitive { primitive } => p.primitive(*primitive),
        Type::Named { value_type, token } => p.named(*value_type, *token),
        Type::GenericInst { value_type, token, args } => {
            p.begin_generic_inst(*value_type, *token);
            let args = args
                .iter()
                .zip(0u32..)
                .map(|(a, i)| {
                    p.begin_generic_arg(i);
                    fold(a, p)
                })
                .collect();
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
            p.begin_fn_ptr(signature.calling_convention);
            let return_type = fold(&signature.return_type, p);
            let parameters = signature
                .parameters
                .iter()
                .zip(0u32..)
                .map(|(a, i)| {
                    p.begin_fn_ptr_param(i, signature.sentinel == Some(i as usize));
                    fold(a, p)
                })
                .collect();
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
    let mut printer = SpanRenderer::new(names);
    let span = fold(ty, &mut printer);
    printer.text(span).to_owned()
}

impl core::fmt::Display for Type {
    /// ILAsm notation with tokens as `0x01000012`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&write_type(self, &super::HexTokens))
    }
}

//! The strict type-signature decoder (ECMA-335 II.23.2.12, with the Augments corrections and the
//! strictness rules of docs/output.md#strictness).
//!
//! One recursive-descent walk, guarded by a depth limit, hands every production to a
//! [`TypeProvider`]. The walk is generic over a [`Grammar`]: [`Ecma`] adds no code to the
//! standard's, the zapsig grammar (`zapsig.rs`) adds the runtime's. Nothing is allocated in proportion to an untrusted count: list capacities are
//! capped by the bytes left, because every element takes at least one byte.

use super::position::Position;
use super::provider::TypeProvider;
use super::types::{ArrayShape, CallingConvention, MethodSignature, Primitive};
use crate::base::read::{token_table, Error, ErrorKind, Reader, Result};

/// Types nested deeper than this are `too_deep` (docs/output.md#strictness). A top-level type is depth 1.
pub const MAX_DEPTH: u32 = 100;

/// The largest ARRAY rank accepted. The runtime's limit is 32 (MAX_RANK); dnlib caps parsing at 64
/// (`MaxArrayRank`). Without a cap, a 5-byte shape could ask a printer for a gigabyte of commas.
pub const MAX_ARRAY_RANK: u32 = 64;

// Element type codes (II.23.1.16; CoreCLR corhdr.h `CorElementType`).
pub(super) const PTR: u8 = 0x0F;
pub(super) const BYREF: u8 = 0x10;
pub(super) const VALUETYPE: u8 = 0x11;
pub(super) const CLASS: u8 = 0x12;
pub(super) const VAR: u8 = 0x13;
pub(super) const ARRAY: u8 = 0x14;
pub(super) const GENERICINST: u8 = 0x15;
pub(super) const FNPTR: u8 = 0x1B;
pub(super) const SZARRAY: u8 = 0x1D;
pub(super) const MVAR: u8 = 0x1E;
pub(super) const CMOD_REQD: u8 = 0x1F;
pub(super) const CMOD_OPT: u8 = 0x20;
const SENTINEL: u8 = 0x41;
const PINNED: u8 = 0x45;

/// The codes a grammar adds to ECMA-335's. The strict grammar ([`Ecma`]) adds none; the
/// runtime's zapsig flavour (`super::zapsig`) adds its own. Everything else (the walk, the depth
/// limit, the VOID rule, the ECMA productions) is the one decoder's.
pub(super) trait Grammar<P: TypeProvider>: Sized {
    /// A type whose element type `code` (at `at`) ECMA-335 does not define.
    fn extra(d: &mut Decoder<'_, P, Self>, r: &mut Reader<'_>, code: u8, at: u64, depth: u32, pos: Position) -> Result<P::Type>;

    /// GENERICINST's generic type: `CLASS | VALUETYPE` and a TypeDefOrRefEncoded token
    /// (Augments items 1, 2). Returns whether it is a value type, and the token.
    fn generic_type(d: &mut Decoder<'_, P, Self>, r: &mut Reader<'_>) -> Result<(bool, u32)> {
        let _ = d;
        class_or_value_type(r)
    }

    /// The provider has named GENERICINST's generic type; its arguments follow.
    #[inline]
    fn generic_type_named(d: &mut Decoder<'_, P, Self>) {
        let _ = d;
    }
}

/// ECMA-335 with the Augments and the contract's rules, and no other code: what dictionary maps,
/// metadata blobs and the CLI read.
pub(super) struct Ecma;

impl<P: TypeProvider> Grammar<P> for Ecma {
    // END 0x00, the obsolete 0x17/0x1A, the runtime-internal 0x21/0x22/0x3B-0x3F, SENTINEL
    // outside a parameter list, PINNED in a type, and everything unknown (docs/output.md#strictness).
    fn extra(_: &mut Decoder<'_, P, Self>, _: &mut Reader<'_>, _: u8, at: u64, _: u32, _: Position) -> Result<P::Type> {
        Err(bad_element_type(at))
    }
}

/// `bad_element_type` at `at`: a code the grammar does not have.
pub(super) fn bad_element_type(at: u64) -> Error {
    Error::new(ErrorKind::BadElementType, at, "an element type legal here")
}

/// `CLASS | VALUETYPE` then a TypeDefOrRefEncoded token: GENERICINST's generic type.
pub(super) fn class_or_value_type(r: &mut Reader<'_>) -> Result<(bool, u32)> {
    let kind_at = r.offset();
    let kind = r.u8("CLASS or VALUETYPE")?;
    if kind != CLASS && kind != VALUETYPE {
        return Err(Error::new(ErrorKind::BadElementType, kind_at, "CLASS or VALUETYPE after GENERICINST"));
    }
    Ok((kind == VALUETYPE, type_def_or_ref(r)?))
}

/// Decode one type (depth 1) from `r`, strictly, through `provider`.
///
/// On success the reader stands right after the type. Errors carry the contract's kind and the
/// absolute offset of the field at fault; the cursor's generic [`ErrorKind::Truncated`] is left for
/// the caller to map (a heap item maps it to `item_length_mismatch`).
pub fn decode_type<P: TypeProvider>(r: &mut Reader<'_>, provider: &mut P) -> Result<P::Type> {
    Decoder::<P, Ecma>::new(provider).ty(r, 1, Position::Plain)
}

/// Decode a method's return type (RetType, II.23.2.11): like [`decode_type`], but VOID is legal
/// here (also after custom modifiers).
pub fn decode_return_type<P: TypeProvider>(r: &mut Reader<'_>, provider: &mut P) -> Result<P::Type> {
    Decoder::<P, Ecma>::new(provider).ty(r, 1, Position::Return)
}

/// Decode a local variable's type (II.23.2.6): like [`decode_type`], but a leading PINNED is
/// allowed (`PINNED? BYREF? Type`, with custom modifiers first).
pub fn decode_local_type<P: TypeProvider>(r: &mut Reader<'_>, provider: &mut P) -> Result<P::Type> {
    let mut d = Decoder::<P, Ecma>::new(provider);
    if r.peek_u8("an element type")? == PINNED {
        r.u8("PINNED")?;
        let inner = d.ty(r, 2, Position::Plain)?;
        return Ok(d.provider.pinned(inner));
    }
    d.ty(r, 1, Position::Plain)
}

/// Skip one type: validate it and move past it, allocating nothing.
pub fn skip_type(r: &mut Reader<'_>) -> Result<()> {
    decode_type(r, &mut ())
}

/// The one recursive-descent walk, for a grammar `G`.
pub(super) struct Decoder<'p, P, G> {
    pub(super) provider: &'p mut P,
    grammar: core::marker::PhantomData<G>,
}

/// `depth + 1`, saturating (the limit check stops the walk long before overflow).
#[inline]
pub(super) fn deeper(depth: u32) -> u32 {
    depth.saturating_add(1)
}

impl<'p, P: TypeProvider, G: Grammar<P>> Decoder<'p, P, G> {
    pub(super) fn new(provider: &'p mut P) -> Self {
        Decoder { provider, grammar: core::marker::PhantomData }
    }

    pub(super) fn ty(&mut self, r: &mut Reader<'_>, depth: u32, pos: Position) -> Result<P::Type> {
        let start = r.offset();
        if depth > MAX_DEPTH {
            return Err(Error::new(ErrorKind::TooDeep, start, "types nested at most 100 deep"));
        }
        // II.23.2.12: the element type is one byte (SRM reads a compressed integer here; CoreCLR,
        // dnlib, Cecil and ildasm read one byte, and so do we).
        let code = r.u8("an element type")?;
        if let Some(p) = Primitive::from_code(code) {
            pos.check(p, start)?;
            return Ok(self.provider.primitive(p));
        }
        match code {
            // PTR CustomMod* Type | PTR CustomMod* VOID. The modifiers are read as types wrapping
            // the pointee, so VOID stays legal beneath them.
            PTR => {
                let inner = self.ty(r, deeper(depth), Position::Pointee)?;
                Ok(self.provider.ptr(inner))
            }
            BYREF => {
                let inner = self.ty(r, deeper(depth), Position::Plain)?;
                Ok(self.provider.by_ref(inner))
            }
            // CLASS / VALUETYPE TypeDefOrRefEncoded: Augments item 1 forbids TypeSpec here.
            CLASS | VALUETYPE => {
                let token = type_def_or_ref(r)?;
                Ok(self.provider.named(code == VALUETYPE, token))
            }
            VAR => {
                let index = r.compressed_u32("a generic parameter index")?;
                Ok(self.provider.var(index))
            }
            MVAR => {
                let index = r.compressed_u32("a generic parameter index")?;
                Ok(self.provider.mvar(index))
            }
            // ARRAY Type ArrayShape (II.23.2.13).
            ARRAY => {
                let element = self.ty(r, deeper(depth), Position::Plain)?;
                let shape = array_shape(r)?;
                Ok(self.provider.array(element, shape))
            }
            // GENERICINST (CLASS | VALUETYPE) TypeDefOrRefEncoded GenArgCount Type+ (Augments 1, 2).
            GENERICINST => {
                let (value_type, token) = G::generic_type(self, r)?;
                let count_at = r.offset();
                let count = r.compressed_u32("a generic argument count")?;
                if count == 0 {
                    return Err(Error::new(ErrorKind::EmptyInstantiation, count_at, "at least one generic argument"));
                }
                self.provider.begin_generic_inst(value_type, token);
                G::generic_type_named(self);
                let mut args = list(count, r);
                for i in 0..count {
                    self.provider.begin_generic_arg(i);
                    args.push(self.ty(r, deeper(depth), Position::Plain)?);
                }
                Ok(self.provider.generic_inst(value_type, token, args))
            }
            FNPTR => {
                let sig = self.method_signature(r, depth)?;
                Ok(self.provider.fn_ptr(sig))
            }
            // SZARRAY CustomMod* Type.
            SZARRAY => {
                let inner = self.ty(r, deeper(depth), Position::Plain)?;
                Ok(self.provider.sz_array(inner))
            }
            // CMOD_REQD / CMOD_OPT TypeDefOrRefOrSpecEncoded, then the modified type (Augments 3, 4:
            // a modifier may name a TypeSpec and may stand before any type).
            CMOD_REQD | CMOD_OPT => {
                let modifier = r.coded_type_token("a modifier's TypeDefOrRefOrSpecEncoded token")?;
                let inner = self.ty(r, deeper(depth), pos)?;
                Ok(self.provider.modified(code == CMOD_REQD, modifier, inner))
            }
            _ => G::extra(self, r, code, start, depth, pos),
        }
    }

    /// An FNPTR's method signature (II.23.2.1-3): calling convention, [GenParamCount],
    /// ParamCount, RetType, Param* with at most one SENTINEL before the vararg tail.
    fn method_signature(&mut self, r: &mut Reader<'_>, depth: u32) -> Result<MethodSignature<P::Type>> {
        let cc_at = r.offset();
        let calling_convention = CallingConvention(r.u8("a calling convention")?);
        if !calling_convention.is_valid_method() {
            return Err(Error::new(ErrorKind::BadCallingConvention, cc_at, "a method calling convention"));
        }
        let generic_parameter_count = if calling_convention.is_generic() { r.compressed_u32("a generic parameter count")? } else { 0 };
        let count = r.compressed_u32("a parameter count")?;
        self.provider.begin_fn_ptr(calling_convention);
        let return_type = self.ty(r, deeper(depth), Position::Return)?;
        let mut parameters = list(count, r);
        let mut sentinel = None;
        for i in 0..count {
            let at = r.offset();
            if r.peek_u8("a parameter")? == SENTINEL {
                if sentinel.is_some() {
                    return Err(Error::new(ErrorKind::BadElementType, at, "at most one SENTINEL"));
                }
                r.u8("SENTINEL")?;
                sentinel = Some(i as usize);
            }
            self.provider.begin_fn_ptr_param(i, sentinel == Some(i as usize));
            parameters.push(self.ty(r, deeper(depth), Position::Plain)?);
        }
        Ok(MethodSignature { calling_convention, generic_parameter_count, return_type, parameters, sentinel })
    }
}

/// A list for `count` elements of at least one byte each: capacity capped by the bytes left, and
/// no allocator call at all for zero-sized element types (validation with the `()` provider).
#[inline]
fn list<T>(count: u32, r: &Reader<'_>) -> Vec<T> {
    if core::mem::size_of::<T>() == 0 {
        Vec::new()
    } else {
        Vec::with_capacity((count as usize).min(r.len()))
    }
}

/// TypeDefOrRefEncoded: a coded token that must name a TypeDef or TypeRef (Augments item 1).
pub(super) fn type_def_or_ref(r: &mut Reader<'_>) -> Result<u32> {
    let at = r.offset();
    let token = r.coded_type_token("a TypeDefOrRefEncoded token")?;
    if token_table(token) == 0x1B {
        return Err(Error::new(ErrorKind::BadToken, at, "a TypeDef or TypeRef token, not a TypeSpec"));
    }
    Ok(token)
}

/// ArrayShape (II.23.2.13): Rank NumSizes Size* NumLoBounds LoBound*.
fn array_shape(r: &mut Reader<'_>) -> Result<ArrayShape> {
    let rank_at = r.offset();
    let rank = r.compressed_u32("an array rank")?;
    if rank == 0 || rank > MAX_ARRAY_RANK {
        return Err(Error::new(ErrorKind::BadArrayShape, rank_at, "an array rank from 1 to 64"));
    }
    let num_sizes_at = r.offset();
    let num_sizes = r.compressed_u32("NumSizes")?;
    if num_sizes > rank {
        return Err(Error::new(ErrorKind::BadArrayShape, num_sizes_at, "NumSizes no greater than the rank"));
    }
    let mut sizes = Vec::with_capacity(num_sizes as usize);
    for _ in 0..num_sizes {
        sizes.push(r.compressed_u32("an array size")?);
    }
    let num_lo_at = r.offset();
    let num_lo = r.compressed_u32("NumLoBounds")?;
    if num_lo > rank {
        return Err(Error::new(ErrorKind::BadArrayShape, num_lo_at, "NumLoBounds no greater than the rank"));
    }
    let mut lower_bounds = Vec::with_capacity(num_lo as usize);
    for _ in 0..num_lo {
        lower_bounds.push(r.compressed_i32("a lower bound")?);
    }
    Ok(ArrayShape { rank, sizes, lower_bounds })
}

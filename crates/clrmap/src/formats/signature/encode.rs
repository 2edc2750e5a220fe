//! The canonical encoder: owned [`Type`] trees to signature bytes (II.23.2.12).
//!
//! Every integer is written in its shortest compressed form, so decode → encode → decode
//! round-trips to the same tree and encode → decode → encode to the same bytes. The encoder
//! enforces the same rules as the strict decoder, so it never writes a signature clrmap would
//! reject.

use super::decode::{MAX_ARRAY_RANK, MAX_DEPTH};
use super::position::Position;
use super::types::{MethodSignature, Type};
use crate::base::read::write::{push_coded_type_token, push_compressed_i32, push_compressed_u32};
use crate::base::read::{token_table, Error, ErrorKind, Result};

/// Append the canonical encoding of `ty`.
pub fn encode_type(ty: &Type, out: &mut Vec<u8>) -> Result<()> {
    encode(ty, out, 1, Position::Plain)
}

fn fail(kind: ErrorKind, expected: &'static str) -> Error {
    Error::nowhere(kind, expected)
}

fn type_def_or_ref(token: u32, out: &mut Vec<u8>) -> Result<()> {
    if token_table(token) == 0x1B {
        return Err(fail(ErrorKind::BadToken, "a TypeDef or TypeRef token, not a TypeSpec"));
    }
    push_coded_type_token(out, token)
}

fn encode(ty: &Type, out: &mut Vec<u8>, depth: u32, pos: Position) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(fail(ErrorKind::TooDeep, "types nested at most 100 deep"));
    }
    let next = depth.saturating_add(1);
    match ty {
        Type::Primitive { primitive } => {
            pos.check_nowhere(*primitive)?;
            out.push(primitive.code());
        }
        Type::Named { value_type, token } => {
            out.push(if *value_type { 0x11 } else { 0x12 });
            type_def_or_ref(*token, out)?;
        }
        Type::GenericInst { value_type, token, args } => {
            if args.is_empty() {
                return Err(fail(ErrorKind::EmptyInstantiation, "at least one generic argument"));
            }
            out.push(0x15);
            out.push(if *value_type { 0x11 } else { 0x12 });
            type_def_or_ref(*token, out)?;
            push_compressed_u32(out, u32::try_from(args.len()).map_err(|_| fail(ErrorKind::OutOfRange, "fewer arguments"))?)?;
            for a in args {
                encode(a, out, next, Position::Plain)?;
            }
        }
        Type::SzArray { element } => {
            out.push(0x1D);
            encode(element, out, next, Position::Plain)?;
        }
        Type::Array { element, shape } => {
            if shape.rank == 0 || shape.rank > MAX_ARRAY_RANK || shape.sizes.len() > shape.rank as usize || shape.lower_bounds.len() > shape.rank as usize {
                return Err(fail(ErrorKind::BadArrayShape, "rank 1-64 with no more sizes or bounds than the rank"));
            }
            out.push(0x14);
            encode(element, out, next, Position::Plain)?;
            push_compressed_u32(out, shape.rank)?;
            // Both lists are at most the rank (≤ 64) long, checked above.
            push_compressed_u32(out, u32::try_from(shape.sizes.len()).unwrap_or(u32::MAX))?;
            for &s in &shape.sizes {
                push_compressed_u32(out, s)?;
            }
            push_compressed_u32(out, u32::try_from(shape.lower_bounds.len()).unwrap_or(u32::MAX))?;
            for &l in &shape.lower_bounds {
                push_compressed_i32(out, l)?;
            }
        }
        Type::Ptr { element } => {
            out.push(0x0F);
            encode(element, out, next, Position::Pointee)?;
        }
        Type::ByRef { element } => {
            out.push(0x10);
            encode(element, out, next, Position::Plain)?;
        }
        Type::Pinned { .. } => {
            return Err(fail(ErrorKind::BadElementType, "no PINNED inside a type"));
        }
        Type::Modified { required, modifier, element } => {
            out.push(if *required { 0x1F } else { 0x20 });
            push_coded_type_token(out, *modifier)?;
            encode(element, out, next, pos)?;
        }
        Type::Var { index } => {
            out.push(0x13);
            push_compressed_u32(out, *index)?;
        }
        Type::MVar { index } => {
            out.push(0x1E);
            push_compressed_u32(out, *index)?;
        }
        Type::FnPtr { signature } => {
            out.push(0x1B);
            encode_method(signature, out, next)?;
        }
    }
    Ok(())
}

fn encode_method(sig: &MethodSignature<Type>, out: &mut Vec<u8>, next: u32) -> Result<()> {
    let cc = sig.calling_convention;
    if !cc.is_valid_method() {
        return Err(fail(ErrorKind::BadCallingConvention, "a method calling convention"));
    }
    out.push(cc.0);
    if cc.is_generic() {
        push_compressed_u32(out, sig.generic_parameter_count)?;
    }
    let count = u32::try_from(sig.parameters.len()).map_err(|_| fail(ErrorKind::OutOfRange, "fewer parameters"))?;
    push_compressed_u32(out, count)?;
    if let Some(s) = sig.sentinel {
        if s >= sig.parameters.len() {
            return Err(fail(ErrorKind::BadElementType, "a SENTINEL before at least one parameter"));
        }
    }
    encode(&sig.return_type, out, next, Position::Return)?;
    for (i, p) in sig.parameters.iter().enumerate() {
        if sig.sentinel == Some(i) {
            out.push(0x41);
        }
        encode(p, out, next, Position::Plain)?;
    }
    Ok(())
}

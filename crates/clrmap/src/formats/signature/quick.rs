//! A fast acceptor for the plain type shapes that make up nearly every real instantiation.
//!
//! It answers one question: "is this certainly a well-formed sequence of exactly `count` types?"
//! `true` is a proof; `false` only means "not proven here", and the caller then runs the strict
//! decoder ([`super::skip_type`]), which alone decides faults, their kinds and their offsets. So
//! the two cannot disagree on an error; they could only disagree on acceptance, and the property
//! tests below and the `gdmap` fuzz target check that every sequence accepted here is accepted by
//! the strict decoder too.
//!
//! Covered (II.23.2.12, with the contract's rules): the primitives other than VOID, CLASS and
//! VALUETYPE with a TypeDef or TypeRef token, VAR and MVAR, SZARRAY, GENERICINST, FNPTR without a
//! SENTINEL (VOID as its return), and ARRAY of a one-token element. Everything else (PTR, BYREF,
//! modifiers, other ARRAY elements, unknown codes) is left to the strict decoder. Instead of
//! recursing, it counts the types still owed: a GENERICINST owes its arguments, an SZARRAY its
//! element, an FNPTR its return type and parameters.

use super::decode::{ARRAY, CLASS, FNPTR, GENERICINST, MVAR, SZARRAY, VALUETYPE, VAR};
use super::position::Position;
use super::{CallingConvention, MAX_ARRAY_RANK};
use crate::base::read::Reader;

/// Compound types (SZARRAY, GENERICINST, FNPTR, ARRAY) allowed in one sequence. The nesting depth of any type is
/// at most this count, well under [`super::MAX_DEPTH`], so no depth fault can be missed.
const MAX_COMPOUND: u32 = 64;

/// A compressed unsigned integer (II.23.2), all three widths, read by the project's one cursor;
/// `None` for `111xxxxx` or too few bytes (the strict reader then names the fault).
#[inline(always)]
pub(crate) fn compressed(b: &mut &[u8]) -> Option<u32> {
    let mut r = Reader::new(b, 0);
    let v = r.compressed_u32("a compressed integer").ok()?;
    *b = r.as_slice();
    Some(v)
}

/// TypeDefOrRefEncoded (II.23.2.8): table tag 0 (TypeDef) or 1 (TypeRef), row 1 to 0xFFFFFF.
#[inline(always)]
fn type_def_or_ref(b: &mut &[u8]) -> bool {
    compressed(b).is_some_and(|c| c & 2 == 0 && (1..=0xFF_FFFF).contains(&(c >> 2)))
}

/// A type that is one element code and at most one compressed operand (a primitive other than
/// VOID, CLASS/VALUETYPE with a TypeDef or TypeRef token, VAR/MVAR): an ARRAY's element.
#[inline]
fn one_token_type(b: &mut &[u8]) -> bool {
    let Some((&code, rest)) = b.split_first() else { return false };
    *b = rest;
    match code {
        CLASS | VALUETYPE => type_def_or_ref(b),
        VAR | MVAR => compressed(b).is_some(),
        _ => is_covered_primitive(code),
    }
}

/// ArrayShape (II.23.2.13): rank 1 to [`MAX_ARRAY_RANK`], at most rank sizes, at most rank lower
/// bounds (signed compressed: any well-formed compressed integer).
#[inline]
fn array_shape(b: &mut &[u8]) -> bool {
    let Some(rank) = compressed(b).filter(|r| (1..=MAX_ARRAY_RANK).contains(r)) else { return false };
    for _ in 0..2 {
        let Some(n) = compressed(b).filter(|&n| n <= rank) else { return false };
        for _ in 0..n {
            if compressed(b).is_none() {
                return false;
            }
        }
    }
    true
}

/// The primitives the acceptors take in a plain position: every one but VOID (see
/// [`Position`]). Only an FNPTR's return is covered as a place where VOID may stand.
#[inline(always)]
const fn is_covered_primitive(code: u8) -> bool {
    Position::Plain.allows_primitive_code(code)
}

/// True if `bytes` is exactly `count` well-formed types of the covered shapes.
pub(crate) fn plain_types(mut bytes: &[u8], count: u32) -> bool {
    let mut owed = count as usize;
    let mut compound = 0u32;
    // Where the next type stands: an FNPTR's return type follows its parameter count.
    let mut next = Position::Plain;
    while owed > 0 {
        // Every type takes at least one byte: a count beyond the bytes left is a fault.
        if owed > bytes.len() {
            return false;
        }
        owed = owed.wrapping_sub(1);
        let Some((&code, rest)) = bytes.split_first() else { return false };
        bytes = rest;
        let here = next;
        next = Position::Plain;
        match code {
            CLASS | VALUETYPE => {
                if !type_def_or_ref(&mut bytes) {
                    return false;
                }
            }
            VAR | MVAR => {
                if compressed(&mut bytes).is_none() {
                    return false;
                }
            }
            SZARRAY => {
                compound = compound.wrapping_add(1);
                owed = owed.wrapping_add(1);
            }
            GENERICINST => {
                compound = compound.wrapping_add(1);
                let Some((&kind, rest)) = bytes.split_first() else { return false };
                bytes = rest;
                if kind != CLASS && kind != VALUETYPE || !type_def_or_ref(&mut bytes) {
                    return false;
                }
                match compressed(&mut bytes) {
                    // The check at the loop's top bounds `owed` by the bytes left.
                    Some(n) if n > 0 && (n as usize) <= bytes.len() => owed = owed.wrapping_add(n as usize),
                    _ => return false,
                }
            }
            // FNPTR MethodDefSig (II.23.2.1): the calling convention, a generic parameter count
            // if GENERIC, the parameter count, then the return type and the parameters. A
            // SENTINEL among the parameters is not covered (it is not a type code here).
            FNPTR => {
                compound = compound.wrapping_add(1);
                let Some((&cc, rest)) = bytes.split_first() else { return false };
                bytes = rest;
                let cc = CallingConvention(cc);
                if !cc.is_valid_method() || cc.is_generic() && compressed(&mut bytes).is_none() {
                    return false;
                }
                match compressed(&mut bytes) {
                    Some(n) if (n as usize) < bytes.len() => owed = owed.wrapping_add(n as usize).wrapping_add(1),
                    _ => return false,
                }
                next = Position::Return;
            }
            ARRAY => {
                compound = compound.wrapping_add(1);
                if !one_token_type(&mut bytes) || !array_shape(&mut bytes) {
                    return false;
                }
            }
            _ if here.allows_primitive_code(code) => {}
            _ => return false,
        }
        if compound > MAX_COMPOUND {
            return false;
        }
    }
    bytes.is_empty()
}

// ----------------------------------------------------------------------------------------------
// Short counted lists, branch-free: `T` then T types, in at most 32 bytes.
//
// The branchy walk above mispredicts about once per type on real, mixed data: that, not the
// work, is most of its cost. Bodies of up to 32 bytes (nearly all dictionary items) go through a
// byte automaton instead: a table gives each (state, byte) its next state and its change to the
// number of types still owed; there is no data-dependent branch, so the processor overlaps
// consecutive items. It covers the shapes of `plain_types` with 1- and 2-byte tokens and numbers
// (tokens up to row 4095), counts up to 127, FNPTR with up to 126 parameters, and ARRAY of a
// primitive, class or value type with rank 1 or 2 and one-byte sizes and bounds; anything else is
// "not proven".

/// Automaton states. FAIL absorbs.
const S_FAIL: u16 = 0;
const S_COUNT: u16 = 1; // T or a GENERICINST count: 1..=127, one byte; adds it to the owed types
const S_TYPE: u16 = 2; // an element type code
const S_TOK: u16 = 3; // a TypeDefOrRefEncoded token's lead byte, then a type
const S_TOK2: u16 = 4; // its second byte (the first had value bits)
const S_TOK2Z: u16 = 5; // its second byte after a lead of 0x80 (row 0 possible)
const S_NUM: u16 = 6; // a VAR/MVAR number's lead byte
const S_NUM2: u16 = 7; // its second byte
const S_GKIND: u16 = 8; // CLASS or VALUETYPE after GENERICINST
const S_GTOK: u16 = 9; // the generic type's token lead byte, then its count
const S_GTOK2: u16 = 10;
const S_GTOK2Z: u16 = 11;
const S_ELEM: u16 = 12; // an SZARRAY's element type: already paid for when SZARRAY was read
const S_FNCC: u16 = 13; // an FNPTR's calling convention
const S_FNGEN: u16 = 14; // its generic parameter count (one byte)
const S_FNPC: u16 = 15; // its parameter count n ≤ 126 (one byte): owes n + 1 types
const S_RET: u16 = 16; // its return type: a type code, or VOID
const S_AEL: u16 = 17; // an ARRAY's element: a primitive, or CLASS/VALUETYPE and a token
const S_ATOK: u16 = 18; // the element's token, then the shape
const S_ATOK2: u16 = 19;
const S_ATOK2Z: u16 = 20;
const S_RANK: u16 = 21; // the shape (II.23.2.13), rank 1 or 2, one-byte values
const S_NS1: u16 = 22; // NumSizes ≤ 1 for rank 1
const S_NS2: u16 = 23; // NumSizes ≤ 2 for rank 2
const S_SZ11: u16 = 24; // rank 1, one size left
const S_SZ21: u16 = 25; // rank 2, one size left
const S_SZ22: u16 = 26; // rank 2, two sizes left
const S_NL1: u16 = 27; // NumLoBounds ≤ 1
const S_NL2: u16 = 28; // NumLoBounds ≤ 2
const S_LB1: u16 = 29; // one lower bound left
const S_LB2: u16 = 30; // two left
const STATES: usize = 32;

/// A TypeDefOrRefEncoded token read byte by byte: the lead byte in a `lead` state, then `after`.
/// 1-byte: a TypeDef/TypeRef tag and row ≥ 1. 2-byte: the tag is in the second byte, and after a
/// lead of 0x80 the row (value >> 2) is that byte >> 2, which must not be 0.
const fn token_lead(b: u8, after: u16, second: u16, second_zero: u16) -> (u16, i32) {
    if b < 0x80 {
        if b & 2 == 0 && b >> 2 >= 1 {
            (after, 0)
        } else {
            (S_FAIL, 0)
        }
    } else if b & 0xC0 == 0x80 {
        if b & 0x3F == 0 {
            (second_zero, 0)
        } else {
            (second, 0)
        }
    } else {
        (S_FAIL, 0)
    }
}

const fn token_second(b: u8, after: u16, zero_lead: bool) -> (u16, i32) {
    if b & 2 == 0 && (!zero_lead || b >= 4) {
        (after, 0)
    } else {
        (S_FAIL, 0)
    }
}

/// One transition: the next state and the change to the owed count.
const fn step(state: u16, b: u8) -> (u16, i32) {
    let one_byte = b < 0x80;
    match state {
        S_COUNT if b >= 1 && one_byte => (S_TYPE, b as i32),
        // Each type pays for itself when its code is read, so a type read when none is owed
        // drives the count below zero at once. SZARRAY pays for itself and its element at once
        // (the element's code, read in S_ELEM, costs nothing).
        S_TYPE | S_ELEM | S_RET => {
            let cost = if state == S_ELEM { 0 } else { -1 };
            let pos = if state == S_RET { Position::Return } else { Position::Plain };
            match b {
                _ if pos.allows_primitive_code(b) => (S_TYPE, cost),
                CLASS | VALUETYPE => (S_TOK, cost),
                VAR | MVAR => (S_NUM, cost),
                SZARRAY => (S_ELEM, cost),
                GENERICINST => (S_GKIND, cost),
                FNPTR => (S_FNCC, cost),
                ARRAY => (S_AEL, cost),
                _ => (S_FAIL, 0),
            }
        }
        S_TOK => token_lead(b, S_TYPE, S_TOK2, S_TOK2Z),
        S_TOK2 => token_second(b, S_TYPE, false),
        S_TOK2Z => token_second(b, S_TYPE, true),
        S_GTOK => token_lead(b, S_COUNT, S_GTOK2, S_GTOK2Z),
        S_GTOK2 => token_second(b, S_COUNT, false),
        S_GTOK2Z => token_second(b, S_COUNT, true),
        S_ATOK => token_lead(b, S_RANK, S_ATOK2, S_ATOK2Z),
        S_ATOK2 => token_second(b, S_RANK, false),
        S_ATOK2Z => token_second(b, S_RANK, true),
        S_NUM if one_byte => (S_TYPE, 0),
        S_NUM if b & 0xC0 == 0x80 => (S_NUM2, 0),
        S_NUM2 => (S_TYPE, 0),
        S_GKIND if b == CLASS || b == VALUETYPE => (S_GTOK, 0),
        // MethodDefSig (II.23.2.1): the calling convention as the strict decoder checks it.
        S_FNCC => {
            let cc = CallingConvention(b);
            if !cc.is_valid_method() {
                (S_FAIL, 0)
            } else if cc.is_generic() {
                (S_FNGEN, 0)
            } else {
                (S_FNPC, 0)
            }
        }
        S_FNGEN if one_byte => (S_FNPC, 0),
        S_FNPC if b <= 126 => (S_RET, (b as i32).wrapping_add(1)),
        S_AEL => match b {
            _ if is_covered_primitive(b) => (S_RANK, 0),
            CLASS | VALUETYPE => (S_ATOK, 0),
            _ => (S_FAIL, 0),
        },
        S_RANK if b == 1 => (S_NS1, 0),
        S_RANK if b == 2 => (S_NS2, 0),
        S_NS1 if b == 0 => (S_NL1, 0),
        S_NS1 if b == 1 => (S_SZ11, 0),
        S_NS2 if b == 0 => (S_NL2, 0),
        S_NS2 if b == 1 => (S_SZ21, 0),
        S_NS2 if b == 2 => (S_SZ22, 0),
        S_SZ11 if one_byte => (S_NL1, 0),
        S_SZ21 if one_byte => (S_NL2, 0),
        S_SZ22 if one_byte => (S_SZ21, 0),
        S_NL1 | S_NL2 if b == 0 => (S_TYPE, 0),
        S_NL1 | S_NL2 if b == 1 => (S_LB1, 0),
        S_NL2 if b == 2 => (S_LB2, 0),
        // Lower bounds are signed compressed integers: every one-byte form is one.
        S_LB1 if one_byte => (S_TYPE, 0),
        S_LB2 if one_byte => (S_LB1, 0),
        _ => (S_FAIL, 0),
    }
}

/// The automaton: index (state << 9) | symbol, where symbols 0-255 are bytes and 256-511 mean
/// "past the end" (stay, owe nothing). Entry: (next state << 9) | (change as i8 as u8), so the
/// next index is one mask and one OR away.
// Built at compile time: an index out of range here fails the build, it cannot panic at run time.
// The casts (`try_from` is not `const`) are of a state below STATES and a byte below 256, and the
// change's `as i8 as u8` keeps its two's-complement byte on purpose.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects, clippy::cast_possible_truncation)]
static TABLE: [u16; 65536] = {
    // Only the first STATES × 512 entries are reachable; the rest make any u16 index valid.
    let mut t = [0u16; 65536];
    let mut state = 0;
    while state < STATES {
        let mut sym = 0;
        while sym < 512 {
            let (next, delta) = if sym < 256 { step(state as u16, sym as u8) } else { (state as u16, 0) };
            t[(state << 9) | sym] = (next << 9) | (delta as i8 as u8 as u16);
            sym += 1;
        }
        state += 1;
    }
    t
};

/// One item's symbols for the automaton: its body's first `N` bytes, then "past the end" from
/// byte `len` on (see [`TABLE`]).
#[inline(always)]
pub(crate) fn symbols<const N: usize>(body: &[u8], len: usize) -> [u16; N] {
    // Whole arrays and a table of "past the end" masks, so that this compiles to a few vector
    // operations (a computed mask made the compiler build it lane by lane).
    let bytes: [u8; N] = match body.first_chunk::<N>() {
        Some(w) => *w,
        None => {
            let mut w = [0u8; N];
            for (d, s) in w.iter_mut().zip(body) {
                *d = *s;
            }
            w
        }
    };
    let ends = PAST_END.get(len).and_then(|m| m.first_chunk::<N>()).copied().unwrap_or([0x100; N]);
    let mut out = [0u16; N];
    for ((o, b), e) in out.iter_mut().zip(bytes).zip(ends) {
        *o = u16::from(b) | e;
    }
    out
}

/// `PAST_END[len][i]` is 0x100 for i ≥ len: the "past the end" bit of symbol i. Built at compile
/// time, like [`TABLE`].
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
static PAST_END: [[u16; 32]; 33] = {
    let mut t = [[0u16; 32]; 33];
    let mut len = 0;
    while len < 33 {
        let mut i = len;
        while i < 32 {
            t[len][i] = 0x100;
            i += 1;
        }
        len += 1;
    }
    t
};

/// For each lane k: true if the symbols `lanes[k]` (made by [`symbols`] with 1 ≤ len ≤ `N`) are a
/// compressed count T ≥ 1 followed by exactly T types of the covered shapes.
///
/// `N` steps run whatever the lengths are (steps past a length change nothing), and the `K` lanes
/// run in lockstep: each step's table look-up waits on the previous one, so independent lanes are
/// what keep the processor busy during that wait. A step is a load, a mask, an OR, a load, and
/// two adds.
#[inline(always)]
pub(crate) fn short_counted_types<const N: usize, const K: usize>(lanes: &[[u16; N]; K]) -> [bool; K] {
    // u16 indexes into a table of 65,536 entries: always in bounds, so no check and no mask.
    let mut index = [S_COUNT << 9; K];
    let mut owed = [0i32; K];
    // The OR of every owed count seen: its sign bit is set if one was negative, that is, if a
    // type was read when none was owed (a byte after the list).
    let mut seen = [0i32; K];
    for i in 0..N {
        for k in 0..K {
            let (Some(syms), Some(x), Some(o), Some(n)) = (lanes.get(k), index.get_mut(k), owed.get_mut(k), seen.get_mut(k)) else { continue };
            let sym = syms.get(i).copied().unwrap_or(0x100);
            let e = TABLE.get(usize::from(*x | sym)).copied().unwrap_or(0);
            *x = e & 0x3E00;
            // The entry's low byte is the change in the owed count, a two's-complement i8.
            let [_, change] = e.to_be_bytes();
            *o = o.wrapping_add(i32::from(i8::from_be_bytes([change])));
            *n |= *o;
        }
    }
    let mut out = [false; K];
    for (k, r) in out.iter_mut().enumerate() {
        let (Some(&x), Some(&o), Some(&n)) = (index.get(k), owed.get(k), seen.get(k)) else { continue };
        *r = x == S_TYPE << 9 && o == 0 && n >= 0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::signature::Primitive;
    use proptest::prelude::*;

    /// The strict decoder's verdict on "exactly `count` types, nothing after".
    fn strict(bytes: &[u8], count: u32) -> bool {
        let mut r = Reader::new(bytes, 0);
        (0..count).all(|_| super::super::skip_type(&mut r).is_ok()) && r.is_empty()
    }

    #[test]
    fn primitives_are_the_decoders() {
        for code in 0..=255u8 {
            let p = Primitive::from_code(code).filter(|p| *p != Primitive::Void).is_some();
            assert_eq!(is_covered_primitive(code), p, "code {code:#04x}");
        }
    }

    #[test]
    fn accepts_plain_shapes_and_defers_the_rest() {
        let yes: &[(&[u8], u32)] = &[
            (&[0x08], 1),
            (&[0x08, 0x0E, 0x1C], 3),
            (&[0x12, 0x09], 1),                                     // class TypeRef row 2
            (&[0x15, 0x12, 0x15, 0x02, 0x08, 0x1D, 0x11, 0x08], 1), // GENERICINST with 2 args
            (&[0x1D, 0x1D, 0x13, 0x00], 1),
            (&[0x1E, 0x81, 0x00], 1),
            (&[0x12, 0xC0, 0x3F, 0xFF, 0xFD], 1),                         // row 0xFFFFFF, TypeRef
            (&[0x14, 0x08, 0x02, 0x02, 0x03, 0x04, 0x02, 0x00, 0x00], 1), // int32[0...2,0...3]
            (&[0x14, 0x12, 0x09, 0x01, 0x00, 0x01, 0x7F], 1),             // ARRAY of a class, lower bound
            (&[0x1B, 0x00, 0x02, 0x01, 0x08, 0x0E], 1),                   // method void *(int32, string)
            (&[0x1B, 0x10, 0x01, 0x00, 0x1E, 0x00], 1),                   // generic, returns !!0
            (&[0x1B, 0x00, 0x00, 0x1B, 0x00, 0x00, 0x01], 1),             // returns an FNPTR returning void
        ];
        for &(b, n) in yes {
            assert!(plain_types(b, n), "{b:02X?}");
            assert!(strict(b, n), "{b:02X?}");
        }
        let no: &[(&[u8], u32)] = &[
            (&[0x01], 1),                         // VOID
            (&[0x08], 2),                         // too few
            (&[0x08, 0x08], 1),                   // trailing
            (&[0x12, 0x0A], 1),                   // TypeSpec
            (&[0x12, 0x03], 1),                   // tag 3
            (&[0x12, 0x00], 1),                   // row 0
            (&[0x12, 0xC4, 0x00, 0x00, 0x00], 1), // row 0x1000000
            (&[0x15, 0x12, 0x09, 0x00], 1),       // no arguments
            (&[0x15, 0x08, 0x09, 0x01, 0x08], 1),
            (&[0x0F, 0x01], 1),                               // PTR to void: valid, but not covered
            (&[0x14, 0x1D, 0x08, 0x01, 0x00, 0x00], 1),       // ARRAY of an SZARRAY: valid, not covered
            (&[0x14, 0x08, 0x00, 0x00, 0x00], 1),             // rank 0
            (&[0x14, 0x08, 0x01, 0x02, 0x03, 0x04, 0x00], 1), // 2 sizes for rank 1
            (&[0x1B, 0x00, 0x01, 0x01, 0x41, 0x08], 1),       // SENTINEL: valid, not covered
            (&[0x1B, 0x00, 0x01, 0x08, 0x01], 1),             // VOID as a parameter
            (&[0x1B, 0x06, 0x00, 0x08], 1),                   // calling convention 6 (a field)
            (&[0x08, 0x01], 2),                               // VOID as a plain type
        ];
        for &(b, n) in no {
            assert!(!plain_types(b, n), "{b:02X?}");
        }
        // 65 nested SZARRAYs are valid, but more than the acceptor's compound limit.
        let mut deep = vec![0x1D; 65];
        deep.push(0x08);
        assert!(!plain_types(&deep, 1) && strict(&deep, 1));
    }

    fn plain_bytes() -> impl Strategy<Value = Vec<u8>> {
        // Bytes biased towards the covered codes, so that most inputs get far.
        let byte = prop_oneof![
            3 => prop::sample::select(vec![0x00u8, 0x01, 0x02, 0x08, 0x0E, 0x1C, 0x11, 0x12, 0x13, 0x15, 0x1D, 0x1E, 0x0F, 0x14, 0x1B, 0x41, 0x10, 0x20]),
            2 => any::<u8>(),
        ];
        prop::collection::vec(byte, 0..24)
    }

    /// `short_counted_types` over a byte slice of 1-8 bytes, with 8 and with 16 steps (the
    /// two must agree), the bytes past the slice set to junk.
    fn short(bytes: &[u8]) -> bool {
        let n = bytes.len();
        let mut w32 = [0x08u8; 32];
        w32[..n].copy_from_slice(bytes);
        let [a] = short_counted_types(&[symbols::<32>(&w32, n)]);
        let mut w16 = [0x15u8; 16];
        if n <= 16 {
            w16[..n].copy_from_slice(bytes);
            assert_eq!([a], short_counted_types(&[symbols::<16>(&w16, n)]), "{bytes:02X?}");
        }
        if n <= 8 {
            let mut w8 = [0xFFu8; 8];
            w8[..n].copy_from_slice(bytes);
            assert_eq!([a], short_counted_types(&[symbols::<8>(&w8, n)]), "{bytes:02X?}");
            // Lanes do not disturb each other.
            let [x, b, y] = short_counted_types(&[symbols::<8>(&[0x01, 0x08, 0xFF], 2), symbols::<8>(&w8, n), symbols::<8>(&[0xFF; 8], 8)]);
            assert!(x && !y && a == b, "{bytes:02X?}");
        }
        a
    }

    /// The strict verdict on "a compressed count T ≥ 1, then exactly T types".
    fn strict_counted(bytes: &[u8]) -> bool {
        let mut r = Reader::new(bytes, 0);
        match r.compressed_u32("T") {
            Ok(t) if t > 0 => (0..t).all(|_| super::super::skip_type(&mut r).is_ok()) && r.is_empty(),
            _ => false,
        }
    }

    #[test]
    fn short_lists_of_plain_shapes() {
        let yes: &[&[u8]] = &[
            &[0x01, 0x08],
            &[0x03, 0x08, 0x0E, 0x1C],
            &[0x01, 0x12, 0x09],
            &[0x01, 0x12, 0x80, 0x05],                                    // 2-byte token, lead 0x80, row 1
            &[0x01, 0x11, 0x8F, 0xA0],                                    // row 0xFA8 TypeDef
            &[0x01, 0x15, 0x12, 0x15, 0x02, 0x08, 0x1D, 0x11, 0x08][..8], // cut: must fail below
        ];
        for b in &yes[..5] {
            assert!(short(b), "{b:02X?}");
            assert!(strict_counted(b), "{b:02X?}");
        }
        assert!(!short(yes[5]));
        assert!(short(&[0x01, 0x15, 0x12, 0x15, 0x02, 0x08, 0x1D, 0x08]));
        assert!(short(&[0x01, 0x1D, 0x1D, 0x08]) && short(&[0x02, 0x1D, 0x08, 0x0E]));
        // ARRAY and FNPTR shapes the automaton covers, each also valid for the strict decoder.
        let covered: &[&[u8]] = &[
            &[0x01, 0x14, 0x08, 0x02, 0x02, 0x03, 0x04, 0x02],             // cut short: see below
            &[0x01, 0x14, 0x08, 0x01, 0x00, 0x00],                         // int32[]
            &[0x02, 0x14, 0x12, 0x09, 0x01, 0x01, 0x05, 0x01, 0x7F, 0x08], // class[..], int32
            &[0x01, 0x1B, 0x00, 0x02, 0x01, 0x08, 0x0E],                   // method void *(int32, string)
            &[0x01, 0x1B, 0x10, 0x01, 0x00, 0x1E, 0x00],                   // generic, returns !!0
            &[0x01, 0x1D, 0x1B, 0x00, 0x00, 0x01],                         // SZARRAY of FNPTR
        ];
        assert!(!short(covered[0]));
        for b in &covered[1..] {
            assert!(short(b), "{b:02X?}");
            assert!(strict_counted(b), "{b:02X?}");
        }
        let mut long = [0u8; 16];
        long[..11].copy_from_slice(&[0x01, 0x14, 0x08, 0x02, 0x02, 0x03, 0x04, 0x02, 0x00, 0x00, 0xAA]);
        let [ok] = short_counted_types(&[symbols::<16>(&long, 10)]);
        assert!(ok && strict_counted(&long[..10]));
        let not: &[&[u8]] = &[
            &[0x01, 0x14, 0x08, 0x03, 0x00, 0x00],       // rank 3: valid, not covered
            &[0x01, 0x14, 0x08, 0x01, 0x02, 0x00, 0x00], // two sizes for rank 1
            &[0x01, 0x14, 0x01, 0x01, 0x00, 0x00],       // ARRAY of VOID
            &[0x01, 0x1B, 0x00, 0x01, 0x08, 0x01],       // VOID as a parameter
            &[0x01, 0x1B, 0x06, 0x00, 0x08],             // calling convention 6
            &[0x01, 0x1B, 0x00, 0x00, 0x01, 0x08],       // a byte after the FNPTR
            &[0x01, 0x01],                               // VOID outside a return
        ];
        for b in not {
            assert!(!short(b), "{b:02X?}");
        }
        let no: &[&[u8]] = &[
            &[0x00],                      // T = 0
            &[0x02, 0x08],                // one type short
            &[0x01, 0x08, 0x08],          // a byte after
            &[0x01, 0x12, 0x80, 0x03],    // row 0 in the over-long form
            &[0x01, 0x12, 0x0A],          // TypeSpec
            &[0x01, 0x01],                // VOID
            &[0x01, 0x12, 0xC0, 0, 0, 5], // 4-byte token: valid, not covered
            &[0x01, 0x13, 0x08, 0x1D],    // an SZARRAY after the last type (proptest find)
        ];
        for b in no {
            assert!(!short(b), "{b:02X?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        /// The automaton proves only what the strict decoder accepts (with 8, 16 and 32 steps,
        /// and in a lane beside others: see `short`).
        #[test]
        fn short_accepted_implies_strictly_valid(bytes in plain_bytes()) {
            if !bytes.is_empty() && short(&bytes) {
                prop_assert!(strict_counted(&bytes), "{:02X?}", bytes);
            }
        }

        /// Acceptance here implies acceptance by the strict decoder.
        #[test]
        fn accepted_implies_strictly_valid(bytes in plain_bytes(), count in 0u32..4) {
            if plain_types(&bytes, count) {
                prop_assert!(strict(&bytes, count), "{:02X?} x{}", bytes, count);
            }
        }
    }
}

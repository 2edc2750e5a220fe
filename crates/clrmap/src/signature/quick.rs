//! A fast acceptor for the plain type shapes that make up nearly every real instantiation.
//!
//! It answers one question: "is this certainly a well-formed sequence of exactly `count` types?"
//! `true` is a proof; `false` only means "not proven here", and the caller then runs the strict
//! decoder ([`super::skip_type`]), which alone decides faults, their kinds and their offsets. So
//! the two cannot disagree on an error; they could only disagree on acceptance, and the property
//! test in `tests.rs` and the `gdmap` fuzz target check that every sequence accepted here is
//! accepted by the strict decoder too.
//!
//! Covered (II.23.2.12, with the contract's rules): the primitives other than VOID, CLASS and
//! VALUETYPE with a TypeDef or TypeRef token, VAR and MVAR, SZARRAY, GENERICINST, FNPTR without a
//! SENTINEL (VOID as its return), and ARRAY of a one-token element. Everything else (PTR, BYREF,
//! modifiers, other ARRAY elements, unknown codes) is left to the strict decoder. Instead of
//! recursing, it counts the types still owed: a GENERICINST owes its arguments, an SZARRAY its
//! element, an FNPTR its return type and parameters.

use super::decode::{ARRAY, CLASS, FNPTR, GENERICINST, MVAR, SZARRAY, VALUETYPE, VAR, VOID};
use super::{CallingConvention, MAX_ARRAY_RANK};

/// Compound types (SZARRAY, GENERICINST) allowed in one sequence. The nesting depth of any type is
/// at most this count, well under [`super::MAX_DEPTH`], so no depth fault can be missed.
const MAX_COMPOUND: u32 = 64;

/// A compressed unsigned integer (II.23.2), all three widths; `None` for `111xxxxx` or too few
/// bytes (the strict reader then names the fault).
#[inline(always)]
pub(crate) fn compressed(b: &mut &[u8]) -> Option<u32> {
    match **b {
        [a, ref rest @ ..] if a & 0x80 == 0 => {
            *b = rest;
            Some(u32::from(a))
        }
        [a, c, ref rest @ ..] if a & 0xC0 == 0x80 => {
            *b = rest;
            Some((u32::from(a & 0x3F) << 8) | u32::from(c))
        }
        [a, c, d, e, ref rest @ ..] if a & 0xE0 == 0xC0 => {
            *b = rest;
            Some((u32::from(a & 0x1F) << 24) | (u32::from(c) << 16) | (u32::from(d) << 8) | u32::from(e))
        }
        _ => None,
    }
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

/// The primitives the acceptors take: every one but VOID (legal only as an FNPTR return, or under
/// PTR).
#[inline(always)]
const fn is_covered_primitive(code: u8) -> bool {
    matches!(code, 0x02..=0x0E | 0x16 | 0x18 | 0x19 | 0x1C)
}

/// True if `bytes` is exactly `count` well-formed types of the covered shapes.
pub(crate) fn plain_types(mut bytes: &[u8], count: u32) -> bool {
    let mut owed = count as usize;
    let mut compound = 0u32;
    // The next type is an FNPTR's return type, where VOID is legal.
    let mut void_ok = false;
    while owed > 0 {
        // Every type takes at least one byte: a count beyond the bytes left is a fault.
        if owed > bytes.len() {
            return false;
        }
        owed = owed.wrapping_sub(1);
        let Some((&code, rest)) = bytes.split_first() else { return false };
        bytes = rest;
        let void_here = void_ok;
        void_ok = false;
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
                void_ok = true;
            }
            ARRAY => {
                compound = compound.wrapping_add(1);
                if !one_token_type(&mut bytes) || !array_shape(&mut bytes) {
                    return false;
                }
            }
            VOID if void_here => {}
            _ if is_covered_primitive(code) => {}
            _ => return false,
        }
        if compound > MAX_COMPOUND {
            return false;
        }
    }
    bytes.is_empty()
}

// ----------------------------------------------------------------------------------------------
// Short counted lists, branch-free: `T` then T types, in at most 8 bytes.
//
// The branchy walk above mispredicts about once per type on real, mixed data: that, not the
// work, is most of its cost. Bodies of up to 8 bytes (nearly all dictionary items) go through a
// byte automaton instead: a table gives each (state, byte) its next state and its change to the
// number of types still owed; there is no data-dependent branch, so the processor overlaps
// consecutive items. It covers the same shapes as `plain_types`, with 1- and 2-byte compressed
// integers (tokens up to row 4095, counts up to 127); anything else is "not proven".

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
const STATES: usize = 16;

/// One transition: the next state and the change to the owed count.
const fn step(state: u16, b: u8) -> (u16, i32) {
    let tok_ok1 = b & 2 == 0 && b >> 2 >= 1; // 1-byte token: a TypeDef/TypeRef tag, row ≥ 1
    let lead2 = b & 0xC0 == 0x80;
    match state {
        S_COUNT if b >= 1 && b < 0x80 => (S_TYPE, b as i32),
        // Each type pays for itself when its code is read, so a type read when none is owed
        // drives the count below zero at once. SZARRAY pays for itself and its element at once
        // (the element's code, read in S_ELEM, costs nothing).
        S_TYPE | S_ELEM => {
            let cost = if state == S_TYPE { -1 } else { 0 };
            match b {
                0x02..=0x0E | 0x16 | 0x18 | 0x19 | 0x1C => (S_TYPE, cost),
                CLASS | VALUETYPE => (S_TOK, cost),
                VAR | MVAR => (S_NUM, cost),
                SZARRAY => (S_ELEM, cost),
                GENERICINST => (S_GKIND, cost),
                _ => (S_FAIL, 0),
            }
        }
        S_TOK | S_GTOK => {
            let after = if state == S_TOK { S_TYPE } else { S_COUNT };
            if b < 0x80 {
                if tok_ok1 { (after, 0) } else { (S_FAIL, 0) }
            } else if lead2 {
                let z = b & 0x3F == 0;
                match (state == S_TOK, z) {
                    (true, false) => (S_TOK2, 0),
                    (true, true) => (S_TOK2Z, 0),
                    (false, false) => (S_GTOK2, 0),
                    (false, true) => (S_GTOK2Z, 0),
                }
            } else {
                (S_FAIL, 0)
            }
        }
        // The token's value ends in this byte: its tag is the low two bits; after a lead of 0x80
        // the row (value >> 2) is b >> 2, which must not be 0.
        S_TOK2 | S_GTOK2 | S_TOK2Z | S_GTOK2Z => {
            let after = if state == S_TOK2 || state == S_TOK2Z { S_TYPE } else { S_COUNT };
            let zero_lead = state == S_TOK2Z || state == S_GTOK2Z;
            if b & 2 == 0 && (!zero_lead || b >= 4) { (after, 0) } else { (S_FAIL, 0) }
        }
        S_NUM => {
            if b < 0x80 {
                (S_TYPE, 0)
            } else if lead2 {
                (S_NUM2, 0)
            } else {
                (S_FAIL, 0)
            }
        }
        S_NUM2 => (S_TYPE, 0),
        S_GKIND if b == CLASS || b == VALUETYPE => (S_GTOK, 0),
        _ => (S_FAIL, 0),
    }
}

/// The automaton: index (state << 9) | symbol, where symbols 0-255 are bytes and 256-511 mean
/// "past the end" (stay, owe nothing). Entry: (next state << 9) | (change as i8 as u8), so the
/// next index is one mask and one OR away.
// Built at compile time: an index out of range here fails the build, it cannot panic at run time.
#[allow(clippy::indexing_slicing)]
static TABLE: [u16; STATES * 512] = {
    let mut t = [0u16; STATES * 512];
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
    // Whole arrays, no per-byte bound checks, so that this compiles to a few vector operations.
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
    // Lengths are at most 32 here; a larger one marks nothing past the end, as it should.
    let len = u16::try_from(len).unwrap_or(u16::MAX);
    let mut out = [0u16; N];
    let mut i = 0u16;
    for (o, b) in out.iter_mut().zip(bytes) {
        *o = u16::from(b) | (u16::from(i >= len) << 8);
        i = i.wrapping_add(1);
    }
    out
}

/// For each lane k: true if the symbols `lanes[k]` (made by [`symbols`] with 1 ≤ len ≤ `N`) are a
/// compressed count T ≥ 1 followed by exactly T types of the covered shapes.
///
/// `N` steps run whatever the lengths are (steps past a length change nothing), and the `K` lanes
/// run in lockstep: each step's table look-up waits on the previous one, so independent lanes are
/// what keep the processor busy during that wait. A step is a load, a mask, an OR, a load, and
/// two adds.
#[inline(always)]
pub(crate) fn short_counted_types<const N: usize, const K: usize>(lanes: &[[u16; N]; K]) -> [bool; K] {
    let mut index = [usize::from(S_COUNT) << 9; K];
    let mut owed = [0i32; K];
    // The OR of every owed count seen: its sign bit is set if one was negative, that is, if a
    // type was read when none was owed (a byte after the list).
    let mut seen = [0i32; K];
    for i in 0..N {
        for k in 0..K {
            let (Some(syms), Some(x), Some(o), Some(n)) = (lanes.get(k), index.get_mut(k), owed.get_mut(k), seen.get_mut(k)) else { continue };
            let sym = usize::from(syms.get(i).copied().unwrap_or(0x100));
            // The mask keeps the index inside the table (16 states): no bound check.
            let e = TABLE.get((*x | sym) & (STATES * 512 - 1)).copied().unwrap_or(0);
            *x = usize::from(e & 0x1E00);
            *o = o.wrapping_add(i32::from(e as u8 as i8));
            *n |= *o;
        }
    }
    let mut out = [false; K];
    for (k, r) in out.iter_mut().enumerate() {
        let (Some(&x), Some(&o), Some(&n)) = (index.get(k), owed.get(k), seen.get(k)) else { continue };
        *r = x == usize::from(S_TYPE) << 9 && o == 0 && n >= 0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::Reader;
    use crate::signature::Primitive;
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
            (&[0x12, 0x09], 1),                                  // class TypeRef row 2
            (&[0x15, 0x12, 0x15, 0x02, 0x08, 0x1D, 0x11, 0x08], 1), // GENERICINST with 2 args
            (&[0x1D, 0x1D, 0x13, 0x00], 1),
            (&[0x1E, 0x81, 0x00], 1),
            (&[0x12, 0xC0, 0x3F, 0xFF, 0xFD], 1),                // row 0xFFFFFF, TypeRef
            (&[0x14, 0x08, 0x02, 0x02, 0x03, 0x04, 0x02, 0x00, 0x00], 1), // int32[0...2,0...3]
            (&[0x14, 0x12, 0x09, 0x01, 0x00, 0x01, 0x7F], 1),    // ARRAY of a class, lower bound
            (&[0x1B, 0x00, 0x02, 0x01, 0x08, 0x0E], 1),          // method void *(int32, string)
            (&[0x1B, 0x10, 0x01, 0x00, 0x1E, 0x00], 1),          // generic, returns !!0
            (&[0x1B, 0x00, 0x00, 0x1B, 0x00, 0x00, 0x01], 1),    // returns an FNPTR returning void
        ];
        for &(b, n) in yes {
            assert!(plain_types(b, n), "{b:02X?}");
            assert!(strict(b, n), "{b:02X?}");
        }
        let no: &[(&[u8], u32)] = &[
            (&[0x01], 1),                   // VOID
            (&[0x08], 2),                   // too few
            (&[0x08, 0x08], 1),             // trailing
            (&[0x12, 0x0A], 1),             // TypeSpec
            (&[0x12, 0x03], 1),             // tag 3
            (&[0x12, 0x00], 1),             // row 0
            (&[0x12, 0xC4, 0x00, 0x00, 0x00], 1), // row 0x1000000
            (&[0x15, 0x12, 0x09, 0x00], 1), // no arguments
            (&[0x15, 0x08, 0x09, 0x01, 0x08], 1),
            (&[0x0F, 0x01], 1),             // PTR to void: valid, but not covered
            (&[0x14, 0x1D, 0x08, 0x01, 0x00, 0x00], 1), // ARRAY of an SZARRAY: valid, not covered
            (&[0x14, 0x08, 0x00, 0x00, 0x00], 1), // rank 0
            (&[0x14, 0x08, 0x01, 0x02, 0x03, 0x04, 0x00], 1), // 2 sizes for rank 1
            (&[0x1B, 0x00, 0x01, 0x01, 0x41, 0x08], 1), // SENTINEL: valid, not covered
            (&[0x1B, 0x00, 0x01, 0x08, 0x01], 1), // VOID as a parameter
            (&[0x1B, 0x06, 0x00, 0x08], 1), // calling convention 6 (a field)
            (&[0x08, 0x01], 2),             // VOID as a plain type
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
        let mut w8 = [0x15u8; 8];
        w8[..bytes.len()].copy_from_slice(bytes);
        let mut w16 = [0x08u8; 16];
        w16[..bytes.len()].copy_from_slice(bytes);
        let n = bytes.len();
        let [a] = short_counted_types(&[symbols::<8>(&w8, n)]);
        assert_eq!([a], short_counted_types(&[symbols::<16>(&w16, n)]), "{bytes:02X?}");
        // Lanes do not disturb each other.
        let [x, b, y] = short_counted_types(&[symbols::<8>(&[0x01, 0x08, 0xFF], 2), symbols::<8>(&w8, n), symbols::<8>(&[0xFF; 8], 8)]);
        assert!(x && !y && a == b, "{bytes:02X?}");
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
            &[0x01, 0x12, 0x80, 0x05],                   // 2-byte token, lead 0x80, row 1
            &[0x01, 0x11, 0x8F, 0xA0],                   // row 0xFA8 TypeDef
            &[0x01, 0x15, 0x12, 0x15, 0x02, 0x08, 0x1D, 0x11, 0x08][..8], // cut: must fail below
        ];
        for b in &yes[..5] {
            assert!(short(b), "{b:02X?}");
            assert!(strict_counted(b), "{b:02X?}");
        }
        assert!(!short(yes[5]));
        assert!(short(&[0x01, 0x15, 0x12, 0x15, 0x02, 0x08, 0x1D, 0x08]));
        assert!(short(&[0x01, 0x1D, 0x1D, 0x08]) && short(&[0x02, 0x1D, 0x08, 0x0E]));
        let no: &[&[u8]] = &[
            &[0x00],                   // T = 0
            &[0x02, 0x08],             // one type short
            &[0x01, 0x08, 0x08],       // a byte after
            &[0x01, 0x12, 0x80, 0x03], // row 0 in the over-long form
            &[0x01, 0x12, 0x0A],       // TypeSpec
            &[0x01, 0x01],             // VOID
            &[0x01, 0x12, 0xC0, 0, 0, 5], // 4-byte token: valid, not covered
            &[0x01, 0x13, 0x08, 0x1D],    // an SZARRAY after the last type (proptest find)
        ];
        for b in no {
            assert!(!short(b), "{b:02X?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        /// The automaton proves only what the strict decoder accepts, and proves the same as
        /// the branchy walk on what both cover.
        #[test]
        fn short_accepted_implies_strictly_valid(bytes in plain_bytes().prop_filter("1-8 bytes", |b| (1..=8).contains(&b.len()))) {
            if short(&bytes) {
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

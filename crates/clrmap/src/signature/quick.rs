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
//! VALUETYPE with a TypeDef or TypeRef token, VAR and MVAR, SZARRAY, and GENERICINST. Everything
//! else (VOID, PTR, BYREF, ARRAY, FNPTR, modifiers, unknown codes) is left to the strict decoder.
//! Instead of recursing, it counts the types still owed: a GENERICINST owes its arguments, an
//! SZARRAY its element.

use super::decode::{CLASS, GENERICINST, MVAR, SZARRAY, VALUETYPE, VAR};

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

/// True if `bytes` is exactly `count` well-formed types of the covered shapes.
pub(crate) fn plain_types(mut bytes: &[u8], count: u32) -> bool {
    let mut owed = count as usize;
    let mut compound = 0u32;
    while owed > 0 {
        // Every type takes at least one byte: a count beyond the bytes left is a fault.
        if owed > bytes.len() {
            return false;
        }
        owed = owed.wrapping_sub(1);
        let Some((&code, rest)) = bytes.split_first() else { return false };
        bytes = rest;
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
            // VOID (0x01) is legal only under PTR or as an FNPTR return: not covered.
            0x02..=0x0E | 0x16 | 0x18 | 0x19 | 0x1C => {}
            _ => return false,
        }
        if compound > MAX_COMPOUND {
            return false;
        }
    }
    bytes.is_empty()
}

/// The primitive codes the match above accepts, for the test that they are `Primitive`'s.
#[cfg(test)]
pub(crate) fn covered_primitive(code: u8) -> bool {
    matches!(code, 0x02..=0x0E | 0x16 | 0x18 | 0x19 | 0x1C)
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
            assert_eq!(covered_primitive(code), p, "code {code:#04x}");
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
            (&[0x14, 0x08, 0x01, 0x00, 0x00], 1), // ARRAY: valid, not covered
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
            3 => prop::sample::select(vec![0x08u8, 0x0E, 0x1C, 0x11, 0x12, 0x13, 0x15, 0x1D, 0x1E, 0x01, 0x0F, 0x14]),
            2 => any::<u8>(),
        ];
        prop::collection::vec(byte, 0..24)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        /// Acceptance here implies acceptance by the strict decoder.
        #[test]
        fn accepted_implies_strictly_valid(bytes in plain_bytes(), count in 0u32..4) {
            if plain_types(&bytes, count) {
                prop_assert!(strict(&bytes, count), "{:02X?} x{}", bytes, count);
            }
        }
    }
}

//! Encoders for the ECMA-335 compressed integers (II.23.2): always the canonical, shortest form.

use super::error::{Error, ErrorKind, Result};

/// The largest value a compressed unsigned integer can hold.
pub const MAX_COMPRESSED_U32: u32 = 0x1FFF_FFFF;

/// Number of bytes the canonical compressed form of `v` takes (1, 2 or 4).
pub const fn compressed_u32_len(v: u32) -> usize {
    if v <= 0x7F {
        1
    } else if v <= 0x3FFF {
        2
    } else {
        4
    }
}

/// Append the canonical compressed form of `v`; `out_of_range` above 0x1FFFFFFF.
pub fn push_compressed_u32(out: &mut Vec<u8>, v: u32) -> Result<()> {
    // The value's low bytes, most significant first: the ranges below say how many it needs.
    let [_, _, high, low] = v.to_be_bytes();
    if v <= 0x7F {
        out.push(low);
    } else if v <= 0x3FFF {
        out.extend_from_slice(&[0x80 | high, low]);
    } else if v <= MAX_COMPRESSED_U32 {
        out.extend_from_slice(&(v | 0xC000_0000).to_be_bytes());
    } else {
        return Err(Error::nowhere(ErrorKind::OutOfRange, "a value of at most 0x1FFFFFFF"));
    }
    Ok(())
}

/// Append the canonical compressed signed form of `v` (II.23.2); `out_of_range` outside
/// −2^28..2^28−1. The width is chosen by the *signed* range, as cor.h `CorSigCompressSignedInt`
/// insists: −64..63 in 1 byte, −8192..8191 in 2, the rest in 4.
pub fn push_compressed_i32(out: &mut Vec<u8>, v: i32) -> Result<()> {
    let (bits, width_mask) = if (-64..=63).contains(&v) {
        (7u32, 0x7Fu32)
    } else if (-8192..=8191).contains(&v) {
        (14, 0x3FFF)
    } else if (-0x1000_0000..=0x0FFF_FFFF).contains(&v) {
        (29, 0x1FFF_FFFF)
    } else {
        return Err(Error::nowhere(ErrorKind::OutOfRange, "a lower bound in -2^28..2^28-1"));
    };
    // Rotate the `bits`-wide two's-complement value left by one: the sign lands in bit 0.
    let raw = (v as u32) & width_mask;
    let sign = u32::from(v < 0);
    let rotated = ((raw << 1) & width_mask) | sign;
    let [_, _, high, low] = rotated.to_be_bytes();
    match bits {
        7 => out.push(low),
        14 => out.extend_from_slice(&[0x80 | high, low]),
        _ => out.extend_from_slice(&(rotated | 0xC000_0000).to_be_bytes()),
    }
    Ok(())
}

/// Append a TypeDefOrRefOrSpecEncoded form of a TypeDef, TypeRef or TypeSpec token (II.23.2.8).
pub fn push_coded_type_token(out: &mut Vec<u8>, token: u32) -> Result<()> {
    let tag = match token >> 24 {
        0x02 => 0,
        0x01 => 1,
        0x1B => 2,
        _ => return Err(Error::nowhere(ErrorKind::BadToken, "a TypeDef, TypeRef or TypeSpec token")),
    };
    let row = token & 0x00FF_FFFF;
    if row == 0 {
        return Err(Error::nowhere(ErrorKind::BadToken, "a non-nil token"));
    }
    push_compressed_u32(out, (row << 2) | tag)
}

#[cfg(test)]
mod tests {
    use super::super::Reader;
    use super::*;

    #[test]
    fn unsigned_vectors() {
        for &(v, b) in crate::base::read::cursor::tests::UNSIGNED_SPEC_VECTORS {
            let mut out = Vec::new();
            push_compressed_u32(&mut out, v).unwrap();
            assert_eq!(out, b);
            assert_eq!(compressed_u32_len(v), b.len());
        }
        assert_eq!(push_compressed_u32(&mut Vec::new(), 0x2000_0000).unwrap_err().kind, ErrorKind::OutOfRange);
    }

    #[test]
    fn signed_vectors() {
        let cases = crate::base::read::cursor::tests::SIGNED_SPEC_VECTORS;
        for &(v, b) in cases {
            let mut out = Vec::new();
            push_compressed_i32(&mut out, v).unwrap();
            assert_eq!(out, b, "{v}");
        }
        assert!(push_compressed_i32(&mut Vec::new(), 0x1000_0000).is_err());
        assert!(push_compressed_i32(&mut Vec::new(), -0x1000_0001).is_err());
    }

    proptest::proptest! {
        #[test]
        fn unsigned_round_trip(v in 0u32..=MAX_COMPRESSED_U32) {
            let mut out = Vec::new();
            push_compressed_u32(&mut out, v).unwrap();
            let mut r = Reader::new(&out, 0);
            proptest::prop_assert_eq!(r.compressed_u32("v").unwrap(), v);
            proptest::prop_assert!(r.is_empty());
        }

        #[test]
        fn signed_round_trip(v in -0x1000_0000i32..=0x0FFF_FFFF) {
            let mut out = Vec::new();
            push_compressed_i32(&mut out, v).unwrap();
            let mut r = Reader::new(&out, 0);
            proptest::prop_assert_eq!(r.compressed_i32("v").unwrap(), v);
            proptest::prop_assert!(r.is_empty());
        }
    }
}

//! The panic-free byte cursor: the only way library code touches input.
//!
//! A [`Reader`] borrows a slice and knows the absolute offset of its first byte, so every error
//! names an absolute file offset even when the reader is a bounded sub-view (a heap item, a
//! section). Every read is `get()`-based and returns a [`Result`]. A failed read leaves the
//! cursor empty, so a caller that ignores an error cannot go on to read garbage after it.

use super::error::{Error, ErrorKind, Result};

/// A borrowed, panic-free byte cursor with absolute offsets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reader<'a> {
    data: &'a [u8],
    /// Absolute offset one past the last byte of `data`. Keeping the *end* means a read only
    /// shrinks the slice; the current offset is `end - data.len()`, computed when asked.
    end: u64,
}

impl<'a> Reader<'a> {
    /// A reader over `data`, whose first byte is at absolute offset `offset`.
    #[inline]
    pub const fn new(data: &'a [u8], offset: u64) -> Self {
        Reader { data, end: offset.saturating_add(data.len() as u64) }
    }

    /// Absolute offset of the next byte to be read.
    #[inline]
    pub const fn offset(&self) -> u64 {
        self.end.saturating_sub(self.data.len() as u64)
    }

    /// Bytes left.
    #[inline]
    pub const fn len(&self) -> usize {
        self.data.len()
    }

    /// True when no bytes are left.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The bytes left, without consuming them.
    #[inline]
    pub const fn as_slice(&self) -> &'a [u8] {
        self.data
    }

    /// An error of `kind` at the current offset.
    #[inline]
    pub const fn error(&self, kind: ErrorKind, expected: &'static str) -> Error {
        Error::new(kind, self.offset(), expected)
    }

    /// Fail at the current offset and empty the cursor.
    #[inline]
    fn fail<T>(&mut self, kind: ErrorKind, expected: &'static str) -> Result<T> {
        let e = self.error(kind, expected);
        self.data = &[];
        Err(e)
    }

    /// Consume `n` bytes and return them; `Truncated` (at the current offset) if fewer are left.
    #[inline]
    pub fn bytes(&mut self, n: usize, expected: &'static str) -> Result<&'a [u8]> {
        match (self.data.get(..n), self.data.get(n..)) {
            (Some(head), Some(tail)) => {
                self.data = tail;
                Ok(head)
            }
            _ => self.fail(ErrorKind::Truncated, expected),
        }
    }

    /// Consume `n` bytes as a bounded sub-reader that keeps absolute offsets.
    #[inline]
    pub fn split(&mut self, n: usize, expected: &'static str) -> Result<Reader<'a>> {
        let offset = self.offset();
        let data = self.bytes(n, expected)?;
        Ok(Reader::new(data, offset))
    }

    /// Skip `n` bytes.
    #[inline]
    pub fn skip(&mut self, n: usize, expected: &'static str) -> Result<()> {
        self.bytes(n, expected).map(|_| ())
    }

    /// Consume exactly `N` bytes as an array.
    #[inline]
    pub fn array<const N: usize>(&mut self, expected: &'static str) -> Result<[u8; N]> {
        let b = self.bytes(N, expected)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    /// The next byte, without consuming it.
    #[inline]
    pub fn peek_u8(&self, expected: &'static str) -> Result<u8> {
        match self.data.first() {
            Some(&b) => Ok(b),
            None => Err(self.error(ErrorKind::Truncated, expected)),
        }
    }

    /// One byte.
    #[inline]
    pub fn u8(&mut self, expected: &'static str) -> Result<u8> {
        match self.data.split_first() {
            Some((&b, tail)) => {
                self.data = tail;
                Ok(b)
            }
            None => self.fail(ErrorKind::Truncated, expected),
        }
    }

    /// A little-endian `u16`.
    #[inline]
    pub fn u16(&mut self, expected: &'static str) -> Result<u16> {
        self.array::<2>(expected).map(u16::from_le_bytes)
    }

    /// A little-endian `u32`.
    #[inline]
    pub fn u32(&mut self, expected: &'static str) -> Result<u32> {
        self.array::<4>(expected).map(u32::from_le_bytes)
    }

    /// A little-endian `u64`.
    #[inline]
    pub fn u64(&mut self, expected: &'static str) -> Result<u64> {
        self.array::<8>(expected).map(u64::from_le_bytes)
    }

    /// An ECMA-335 compressed unsigned integer (II.23.2), and the number of bytes it used.
    ///
    /// Lead byte `0xxxxxxx`: 1 byte, 7 bits. `10xxxxxx`: 2 bytes, 14 bits, big-endian.
    /// `110xxxxx`: 4 bytes, 29 bits, big-endian. `111xxxxx` is not a compressed integer:
    /// [`ErrorKind::BadCompressedInteger`] at the lead byte (docs/output.md#strictness; CoreCLR's fast path and
    /// dnlib would mask it, SRM rejects it, we reject it). Over-long but well-formed encodings
    /// (`80 05` for 5) are accepted, as every peer accepts them; the width returned is the number
    /// of bytes actually consumed, never a recomputed one.
    #[inline]
    pub fn compressed_u32_sized(&mut self, expected: &'static str) -> Result<(u32, u8)> {
        // One slice pattern per form: the length check and the read are one step.
        match *self.data {
            [a, ref rest @ ..] if a & 0x80 == 0 => {
                self.data = rest;
                Ok((u32::from(a), 1))
            }
            [a, b, ref rest @ ..] if a & 0xC0 == 0x80 => {
                self.data = rest;
                Ok(((u32::from(a & 0x3F) << 8) | u32::from(b), 2))
            }
            [a, b, c, d, ref rest @ ..] if a & 0xE0 == 0xC0 => {
                self.data = rest;
                let v = (u32::from(a & 0x1F) << 24) | (u32::from(b) << 16) | (u32::from(c) << 8) | u32::from(d);
                Ok((v, 4))
            }
            [a, ..] if a & 0xE0 == 0xE0 => self.fail(ErrorKind::BadCompressedInteger, expected),
            _ => self.fail(ErrorKind::Truncated, expected),
        }
    }

    /// An ECMA-335 compressed unsigned integer (II.23.2).
    #[inline]
    pub fn compressed_u32(&mut self, expected: &'static str) -> Result<u32> {
        self.compressed_u32_sized(expected).map(|(v, _)| v)
    }

    /// An ECMA-335 compressed signed integer (II.23.2), used for ArrayShape lower bounds.
    ///
    /// The value is a 7-, 14- or 29-bit two's-complement number rotated left by one, so the sign
    /// sits in bit 0. The sign extension depends on the encoded *width*, not on the value:
    /// CoreCLR `CorSigUncompressSignedInt` (cor.h) and SRM `TryReadCompressedSignedInteger` do the
    /// same.
    #[inline]
    pub fn compressed_i32(&mut self, expected: &'static str) -> Result<i32> {
        let (u, width) = self.compressed_u32_sized(expected)?;
        let magnitude = u >> 1;
        let v = if u & 1 == 0 {
            magnitude
        } else {
            let ext = match width {
                1 => 0xFFFF_FFC0u32,
                2 => 0xFFFF_E000,
                _ => 0xF000_0000,
            };
            magnitude | ext
        };
        Ok(v as i32)
    }

    /// A TypeDefOrRefOrSpecEncoded coded token (II.23.2.8), returned as a full metadata token.
    ///
    /// The compressed value carries the table in its two low bits (0 TypeDef, 1 TypeRef,
    /// 2 TypeSpec) and the row above them. Tag 3 is not a table, and row 0 is the nil token: both
    /// are [`ErrorKind::BadToken`] at the token's first byte. So is a row above 0xFFFFFF: the
    /// compressed form can carry rows up to 0x07FFFFFF (docs/format-notes.md#compressed-integers), but a metadata token has
    /// 24 bits of row, and such a row would spill into the table byte. Whether TypeSpec is
    /// allowed depends on the position, so callers check [`token_table`] themselves.
    #[inline]
    pub fn coded_type_token(&mut self, expected: &'static str) -> Result<u32> {
        let start = self.offset();
        let c = self.compressed_u32(expected)?;
        let table = match c & 3 {
            0 => 0x0200_0000,
            1 => 0x0100_0000,
            2 => 0x1B00_0000,
            _ => {
                self.data = &[];
                return Err(Error::new(ErrorKind::BadToken, start, expected));
            }
        };
        let row = c >> 2;
        if row == 0 || row > 0x00FF_FFFF {
            self.data = &[];
            return Err(Error::new(ErrorKind::BadToken, start, expected));
        }
        Ok(table | row)
    }
}

/// The table byte of a metadata token (`token >> 24`).
#[inline]
pub const fn token_table(token: u32) -> u8 {
    (token >> 24) as u8
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn u(bytes: &[u8]) -> Result<(u32, u8)> {
        Reader::new(bytes, 0).compressed_u32_sized("value")
    }

    /// ECMA-335 II.23.2's unsigned examples and the width edges (docs/format-notes.md#compressed-integers): the decoder's and
    /// the encoder's tests share them.
    pub(crate) const UNSIGNED_SPEC_VECTORS: &[(u32, &[u8])] =
        &[(0x03, &[0x03]), (0x7F, &[0x7F]), (0x80, &[0x80, 0x80]), (0x2E57, &[0xAE, 0x57]), (0x3FFF, &[0xBF, 0xFF]), (0x4000, &[0xC0, 0x00, 0x40, 0x00]), (0x1FFF_FFFF, &[0xDF, 0xFF, 0xFF, 0xFF])];

    #[test]
    fn unsigned_spec_vectors() {
        for &(v, b) in UNSIGNED_SPEC_VECTORS {
            assert_eq!(u(b).unwrap(), (v, b.len() as u8), "{b:02X?}");
        }
    }

    /// ECMA-335 II.23.2's signed examples and the width edges (docs/format-notes.md#compressed-integers): the decoder's and
    /// the encoder's tests share them.
    pub(crate) const SIGNED_SPEC_VECTORS: &[(i32, &[u8])] = &[
        (3, &[0x06]),
        (-3, &[0x7B]),
        (64, &[0x80, 0x80]),
        (-64, &[0x01]),
        (8192, &[0xC0, 0x00, 0x40, 0x00]),
        (-8192, &[0x80, 0x01]),
        (268_435_455, &[0xDF, 0xFF, 0xFF, 0xFE]),
        (-268_435_456, &[0xC0, 0x00, 0x00, 0x01]),
        (-1, &[0x7F]),
        (63, &[0x7E]),
        (-65, &[0xBF, 0x7F]),
    ];

    #[test]
    fn signed_spec_vectors() {
        // docs/format-notes.md#compressed-integers.
        let cases = SIGNED_SPEC_VECTORS;
        for &(v, b) in cases {
            let mut r = Reader::new(b, 0);
            assert_eq!(r.compressed_i32("lb").unwrap(), v, "{b:02X?}");
            assert!(r.is_empty());
        }
    }

    #[test]
    fn overlong_is_accepted_and_counted() {
        assert_eq!(u(&[0x80, 0x05]).unwrap(), (5, 2));
        assert_eq!(u(&[0xC0, 0, 0, 5]).unwrap(), (5, 4));
    }

    #[test]
    fn bad_lead_and_truncation() {
        for lead in 0xE0..=0xFFu8 {
            let e = Reader::new(&[lead, 0, 0, 0], 10).compressed_u32("x").unwrap_err();
            assert_eq!((e.kind, e.offset().unwrap()), (ErrorKind::BadCompressedInteger, 10));
        }
        for b in [&[][..], &[0x80], &[0xC0, 0, 0]] {
            let mut r = Reader::new(b, 7);
            let e = r.compressed_u32("x").unwrap_err();
            assert_eq!((e.kind, e.offset().unwrap()), (ErrorKind::Truncated, 7));
            assert!(r.is_empty(), "a failed read empties the cursor");
        }
    }

    #[test]
    fn coded_tokens() {
        assert_eq!(Reader::new(&[0x49], 0).coded_type_token("t").unwrap(), 0x0100_0012);
        assert_eq!(Reader::new(&[0x08], 0).coded_type_token("t").unwrap(), 0x0200_0002);
        assert_eq!(Reader::new(&[0x06], 0).coded_type_token("t").unwrap(), 0x1B00_0001);
        // Row 0x03A3A3AE does not fit a token's 24 bits (found by the signature fuzzer).
        let err = Reader::new(&[0xCE, 0x8E, 0x8E, 0xB9], 0).coded_type_token("t").unwrap_err();
        assert_eq!((err.kind, err.offset().unwrap()), (ErrorKind::BadToken, 0));
        assert_eq!(Reader::new(&[0xC3, 0xFF, 0xFF, 0xFD], 0).coded_type_token("t").unwrap(), 0x0100_0000 | 0x00FF_FFFF);
        for bad in [0x03u8, 0x00, 0x01, 0x02] {
            let bytes = [0x55, bad];
            let mut e = Reader::new(&bytes, 0);
            e.u8("skip").unwrap();
            let err = e.coded_type_token("t").unwrap_err();
            assert_eq!((err.kind, err.offset().unwrap()), (ErrorKind::BadToken, 1));
        }
    }

    #[test]
    fn sub_reader_keeps_absolute_offsets() {
        let data = [1u8, 2, 3, 4, 5, 6];
        let mut r = Reader::new(&data, 100);
        r.u8("a").unwrap();
        let mut sub = r.split(3, "sub").unwrap();
        assert_eq!(sub.offset(), 101);
        sub.u16("b").unwrap();
        let e = sub.u16("c").unwrap_err();
        assert_eq!((e.kind, e.offset().unwrap()), (ErrorKind::Truncated, 103));
        assert_eq!(r.offset(), 104);
    }
}

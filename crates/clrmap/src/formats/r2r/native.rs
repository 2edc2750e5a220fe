//! NativeFormat primitives (dotnet/runtime `src/coreclr/vm/nativeformatreader.h`; docs/format-notes.md#varints):
//! the varint whose *low* bits give the length, NativeArray, and NativeHashtable. Not to be
//! confused with ECMA compressed integers (high bits give the length) or the nibble stream.

use crate::base::read::{Error, ErrorKind, Reader, Result};

fn bad(at: u64, expected: &'static str) -> Error {
    Error::new(ErrorKind::BadReadyToRun, at, expected)
}

/// `DecodeUnsigned`: `xxxxxxx0` 1 byte, `xxxxxx01` 2, `xxxxx011` 3, `xxxx0111` 4, `xxx01111`
/// then a little-endian u32; anything else is malformed.
pub fn unsigned(r: &mut Reader<'_>) -> Result<u32> {
    let at = r.offset();
    let b0 = u32::from(r.u8("a NativeFormat unsigned")?);
    Ok(if b0 & 1 == 0 {
        b0 >> 1
    } else if b0 & 2 == 0 {
        (b0 >> 2) | u32::from(r.u8("a NativeFormat unsigned")?) << 6
    } else if b0 & 4 == 0 {
        let [b1, b2] = r.array::<2>("a NativeFormat unsigned")?;
        (b0 >> 3) | u32::from(b1) << 5 | u32::from(b2) << 13
    } else if b0 & 8 == 0 {
        let [b1, b2, b3] = r.array::<3>("a NativeFormat unsigned")?;
        (b0 >> 4) | u32::from(b1) << 4 | u32::from(b2) << 12 | u32::from(b3) << 20
    } else if b0 & 16 == 0 {
        r.u32("a NativeFormat unsigned")?
    } else {
        return Err(bad(at, "a NativeFormat unsigned (lead byte xxx01111 at most)"));
    })
}

/// `DecodeSigned`: the same lengths, sign-extended from the value's width.
pub fn signed(r: &mut Reader<'_>) -> Result<i32> {
    let at = r.offset();
    let b0 = i32::from(r.u8("a NativeFormat signed")? as i8);
    Ok(if b0 & 1 == 0 {
        b0 >> 1
    } else if b0 & 2 == 0 {
        let b1 = i32::from(r.u8("a NativeFormat signed")? as i8);
        ((b0 >> 2) & 0x3F) | b1 << 6
    } else if b0 & 4 == 0 {
        let [b1, b2] = r.array::<2>("a NativeFormat signed")?;
        ((b0 >> 3) & 0x1F) | i32::from(b1) << 5 | i32::from(b2 as i8) << 13
    } else if b0 & 8 == 0 {
        let [b1, b2, b3] = r.array::<3>("a NativeFormat signed")?;
        ((b0 >> 4) & 0x0F) | i32::from(b1) << 4 | i32::from(b2) << 12 | i32::from(b3 as i8) << 20
    } else if b0 & 16 == 0 {
        r.u32("a NativeFormat signed")? as i32
    } else {
        return Err(bad(at, "a NativeFormat signed (lead byte xxx01111 at most)"));
    })
}

/// A reader positioned at `offset` within `section` (offsets inside NativeFormat structures are
/// relative to the section start here; the section is one contiguous blob).
pub fn at<'a>(section: Reader<'a>, offset: u64) -> Result<Reader<'a>> {
    let mut r = section;
    let skip = offset.checked_sub(section.offset()).ok_or(bad(offset, "an offset inside the section"))?;
    r.skip(usize::try_from(skip).unwrap_or(usize::MAX), "an offset inside the section").map_err(|_| bad(offset, "an offset inside the section"))?;
    Ok(r)
}

/// A NativeArray: `count` elements reached through 16-element blocks of a 4-level binary tree.
#[derive(Clone, Copy, Debug)]
pub struct NativeArray<'a> {
    section: Reader<'a>,
    /// Absolute offset of the block-offset table.
    base: u64,
    count: u32,
    width: u8,
}

impl<'a> NativeArray<'a> {
    /// The array whose header is at absolute offset `offset` of `section`.
    pub fn parse(section: Reader<'a>, offset: u64) -> Result<Self> {
        let mut r = at(section, offset)?;
        let header = unsigned(&mut r)?;
        let width = (header & 3) as u8;
        if width > 2 {
            return Err(bad(offset, "a NativeArray entry width of 1, 2 or 4 bytes"));
        }
        Ok(NativeArray { section, base: r.offset(), count: header >> 2, width })
    }

    /// Number of elements (some may be absent).
    pub fn len(&self) -> u32 {
        self.count
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The absolute offset of element `index`'s data, or `None` if it is absent.
    pub fn get(&self, index: u32) -> Result<Option<u64>> {
        if index >= self.count {
            return Ok(None);
        }
        let block = u64::from(index / 16);
        let entry_size = 1u64 << self.width;
        let mut r = at(self.section, self.base.saturating_add(block.saturating_mul(entry_size)))?;
        let block_offset = match self.width {
            0 => u32::from(r.u8("a block offset")?),
            1 => u32::from(r.u16("a block offset")?),
            _ => r.u32("a block offset")?,
        };
        let mut node = self.base.saturating_add(u64::from(block_offset));
        // Four levels, bits 8, 4, 2, 1 of the index within its block.
        let mut bit = 8u32;
        while bit > 0 {
            let mut r = at(self.section, node)?;
            let val = unsigned(&mut r)?;
            if index & bit != 0 {
                if val & 2 != 0 {
                    node = node.saturating_add(u64::from(val >> 2));
                    bit >>= 1;
                    continue;
                }
            } else if val & 1 != 0 {
                node = r.offset();
                bit >>= 1;
                continue;
            }
            // A special leaf: the element, if it is the one asked for.
            if val & 3 == 0 && (val >> 2) == index & 15 {
                return Ok(Some(r.offset()));
            }
            return Ok(None);
        }
        Ok(Some(node))
    }
}

/// A NativeHashtable (docs/format-notes.md#readytorun-images): header byte, bucket table,
/// buckets of (low hash byte, signed relative offset) entries.
#[derive(Clone, Copy, Debug)]
pub struct NativeHashtable<'a> {
    section: Reader<'a>,
    base: u64,
    buckets: u32,
    width: u8,
}

impl<'a> NativeHashtable<'a> {
    /// The table at absolute offset `offset` of `section`.
    pub fn parse(section: Reader<'a>, offset: u64) -> Result<Self> {
        let mut r = at(section, offset)?;
        let header = r.u8("a NativeHashtable header")?;
        let shift = u32::from(header >> 2);
        if shift > 24 {
            return Err(bad(offset, "a plausible NativeHashtable bucket count"));
        }
        let width = header & 3;
        if width > 2 {
            return Err(bad(offset, "a bucket offset width of 1, 2 or 4 bytes"));
        }
        Ok(NativeHashtable { section, base: r.offset(), buckets: 1 << shift, width })
    }

    fn bucket_offset(&self, b: u32) -> Result<u64> {
        let size = 1u64 << self.width;
        let mut r = at(self.section, self.base.saturating_add(u64::from(b).saturating_mul(size)))?;
        let o = match self.width {
            0 => u32::from(r.u8("a bucket offset")?),
            1 => u32::from(r.u16("a bucket offset")?),
            _ => r.u32("a bucket offset")?,
        };
        Ok(self.base.saturating_add(u64::from(o)))
    }

    /// The absolute offsets of every entry's data, bucket by bucket.
    pub fn entries(&self) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        for b in 0..self.buckets {
            let (start, end) = (self.bucket_offset(b)?, self.bucket_offset(b.saturating_add(1))?);
            let mut r = at(self.section, start)?;
            while r.offset() < end {
                let _low_hash = r.u8("an entry's hash byte")?;
                let at_offset = r.offset();
                let rel = signed(&mut r)?;
                out.push(at_offset.saturating_add_signed(i64::from(rel)));
            }
        }
        Ok(out)
    }
}

/// The nibble stream (coreclr `nibblestream.h`; docs/format-notes.md#varints): low nibble first; each nibble is
/// 3 data bits and a "more" bit; groups are most significant first.
#[derive(Clone, Debug)]
pub struct Nibbles<'a> {
    data: &'a [u8],
    /// Absolute offset of `data[0]`.
    base: u64,
    /// Nibbles consumed.
    pos: usize,
}

impl<'a> Nibbles<'a> {
    /// A nibble reader over `r`.
    pub fn new(r: Reader<'a>) -> Self {
        Nibbles { data: r.as_slice(), base: r.offset(), pos: 0 }
    }

    /// The next nibble: the low half of a byte first (nibblestream.h `ReadNibble`).
    #[inline(always)]
    fn nibble(&mut self) -> Option<u8> {
        let byte = *self.data.get(self.pos >> 1)?;
        let n = (byte >> ((self.pos & 1) << 2)) & 0x0F;
        // `pos` < 2·len ≤ usize::MAX, so this cannot wrap.
        self.pos = self.pos.wrapping_add(1);
        Some(n)
    }

    /// An unsigned value; more than 11 nibbles is corruption (a u32 needs at most 11).
    #[inline]
    pub fn unsigned(&mut self) -> Result<u32> {
        // Most values in bounds and headers are below 8: one nibble, no loop (this is the hot
        // path of decoding a whole image's debug info).
        let at = self.next_byte();
        match self.nibble() {
            Some(n) if n & 8 == 0 => Ok(u32::from(n)),
            Some(n) => self.unsigned_rest(at, u64::from(n & 7)),
            None => Err(Error::new(ErrorKind::Truncated, at, "a nibble value inside its bound")),
        }
    }

    /// The nibbles after a first one with its "more" bit set.
    #[inline(never)]
    fn unsigned_rest(&mut self, at: u64, mut v: u64) -> Result<u32> {
        for _ in 1..11 {
            let Some(n) = self.nibble() else {
                return Err(Error::new(ErrorKind::Truncated, at, "a nibble value inside its bound"));
            };
            v = (v << 3) | u64::from(n & 7);
            if n & 8 == 0 {
                return u32::try_from(v).map_err(|_| Error::new(ErrorKind::BadDebugInfo, at, "a nibble value that fits 32 bits"));
            }
        }
        Err(Error::new(ErrorKind::BadDebugInfo, at, "a nibble value of at most 11 nibbles"))
    }

    /// A signed value: x ≥ 0 as 2x, x < 0 as 2(−x)+1.
    pub fn signed(&mut self) -> Result<i32> {
        let u = self.unsigned()?;
        let mag = (u >> 1) as i32;
        Ok(if u & 1 == 0 { mag } else { mag.wrapping_neg() })
    }

    /// A value written whole, not compressed: eight nibbles, the lowest first (nibblestream.h
    /// `ReadUnencodedU32`).
    pub fn fixed_u32(&mut self) -> Result<u32> {
        let at = self.next_byte();
        let mut v = 0u32;
        for i in 0..8u32 {
            let n = self.nibble().ok_or(Error::new(ErrorKind::Truncated, at, "eight nibbles of a whole value inside its bound"))?;
            v |= u32::from(n) << i.wrapping_mul(4);
        }
        Ok(v)
    }

    /// How many nibbles are left.
    pub fn nibbles_left(&self) -> usize {
        self.data.len().saturating_mul(2).saturating_sub(self.pos)
    }

    /// Absolute offset of the next whole byte (a half-read byte counts as read: `Flush`).
    pub fn next_byte(&self) -> u64 {
        self.base.saturating_add(self.pos.div_ceil(2) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibble_examples_of_nibblestream_h() {
        // 0 -> X0, 7 -> X7, 8 -> 09 (nibbles 9 then 0), 63 -> 7F, 511 -> FF X7, 512 -> 89 08.
        // 64 is not F9 X0, as it was once written down: F9 X0 reads 1,7,0 = 120; 64 is 1,0,0 -> nibbles
        // 9,8,0 -> 89 X0, consistent with its own 512 -> 89 08 (1,0,0,0).
        let cases: &[(u32, &[u8])] = &[(0, &[0x00]), (7, &[0x07]), (8, &[0x09]), (63, &[0x7F]), (64, &[0x89, 0x00]), (120, &[0xF9, 0x00]), (511, &[0xFF, 0x07]), (512, &[0x89, 0x08])];
        for &(v, b) in cases {
            assert_eq!(Nibbles::new(Reader::new(b, 0)).unsigned().unwrap(), v, "{b:02X?}");
        }
        let mut n = Nibbles::new(Reader::new(&[0xFF; 8], 0));
        assert_eq!(n.unsigned().unwrap_err().kind, ErrorKind::BadDebugInfo);
        assert_eq!(Nibbles::new(Reader::new(&[0x03], 0)).signed().unwrap(), -1);
        assert_eq!(Nibbles::new(Reader::new(&[0x04], 0)).signed().unwrap(), 2);
    }

    #[test]
    fn native_unsigned_and_signed() {
        assert_eq!(unsigned(&mut Reader::new(&[0x0A], 0)).unwrap(), 5);
        assert_eq!(unsigned(&mut Reader::new(&[0x05, 0x01], 0)).unwrap(), 1 | (1 << 6));
        assert_eq!(unsigned(&mut Reader::new(&[0x0F, 1, 2, 3, 4], 0)).unwrap(), 0x0403_0201);
        assert_eq!(unsigned(&mut Reader::new(&[0x1F], 0)).unwrap_err().kind, ErrorKind::BadReadyToRun);
        assert_eq!(signed(&mut Reader::new(&[0xFE], 0)).unwrap(), -1);
        assert_eq!(signed(&mut Reader::new(&[0x04], 0)).unwrap(), 2);
        assert_eq!(signed(&mut Reader::new(&[0xFD, 0xFF], 0)).unwrap(), -1);
    }

    #[test]
    fn native_array_lookups() {
        // 3 elements, 1-byte block offsets: header unsigned (3 << 2 | 0) = 12 -> byte 0x18.
        // Block table: one entry (offset 1 from the table start). Block root at table+1:
        // a tree for indexes 0..2. Hand-built: root node for bit 8: val with "left inline" (1) ->
        // next level bit 4: left inline -> bit 2: val = 1|2 with right child jump... Instead use the
        // special-leaf form for a single element: a block whose root is a leaf for index 0.
        let bytes = [0x18u8, 0x01, 0x00, 0xAA];
        // Root at offset 2: val = 0 -> (val & 3) == 0 and (val >> 2) == 0: element 0 at offset 3.
        let arr = NativeArray::parse(Reader::new(&bytes, 0), 0).unwrap();
        assert_eq!(arr.len(), 3);
        assert_eq!(arr.get(0).unwrap(), Some(3));
        assert_eq!(arr.get(1).unwrap(), None, "absent elements are normal");
        assert_eq!(arr.get(7).unwrap(), None);
    }
}

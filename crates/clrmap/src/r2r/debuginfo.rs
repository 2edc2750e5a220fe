//! Debug info blobs (ilmap.md §2.3-2.6): bounds and variables of one method, by R2R major.

use super::native::Nibbles;
use crate::ilmap::{Bound, IlOffset, SourceTypes};
use crate::read::{Error, ErrorKind, Reader, Result};

fn bad(at: u64, expected: &'static str) -> Error {
    Error::new(ErrorKind::BadDebugInfo, at, expected)
}

/// A variable's location (`ICorDebugInfo::VarLoc`, cordebuginfo.h), as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
#[allow(missing_docs)]
pub enum VarLoc {
    Reg { reg: u32 },
    RegByRef { reg: u32 },
    RegFp { reg: u32 },
    Stack { base_reg: u32, offset: i32 },
    StackByRef { base_reg: u32, offset: i32 },
    RegReg { reg1: u32, reg2: u32 },
    RegStack { reg: u32, base_reg: u32, offset: i32 },
    StackReg { offset: i32, base_reg: u32, reg: u32 },
    Stack2 { base_reg: u32, offset: i32 },
    FpStack { reg: u32 },
    FixedVa { offset: u32 },
}

/// One variable's live range and location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Var {
    /// Native start offset.
    pub start: u32,
    /// Native end offset.
    pub end: u32,
    /// Variable number: IL argument/local number, or a special value (−1 varargs handle,
    /// −2 return buffer, −3 generic context, −4 unknown).
    pub number: i32,
    /// Where it lives.
    pub loc: VarLoc,
}

/// The bounds and variables of one method, as stored (native order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugInfo {
    /// Raw bounds, native order.
    pub bounds: Vec<Bound>,
    /// Variables.
    pub vars: Vec<Var>,
}

/// The IL field as stored: EPILOG 0, PROLOG 1, NO_MAPPING 2, IL n as n + 3 (§2.3).
fn il_from_biased(v: u32) -> IlOffset {
    IlOffset::from_raw(v.wrapping_add(0xFFFF_FFFD))
}

/// Decode a method's blob for R2R `major`, starting at `blob` (bounded by the section).
pub fn decode(blob: Reader<'_>, major: u16) -> Result<DebugInfo> {
    decode_parts(blob, major, true)
}

/// Like [`decode`], but variables are decoded only when `with_vars`.
pub fn decode_parts(blob: Reader<'_>, major: u16, with_vars: bool) -> Result<DebugInfo> {
    let (bounds_bytes, vars_bytes) = split(blob, major)?;
    let mut bounds = Vec::new();
    bounds_into(bounds_bytes, major, &mut bounds)?;
    let vars = if !with_vars || vars_bytes.is_empty() || major >= 16 { Vec::new() } else { nibble_vars(vars_bytes)? };
    Ok(DebugInfo { bounds, vars })
}

/// A method's blob split into its bounds and its variables, after the header of sizes (§2.3;
/// the fat header of majors ≥ 17, §2.4).
pub fn split(blob: Reader<'_>, major: u16) -> Result<(Reader<'_>, Reader<'_>)> {
    let mut header = Nibbles::new(blob);
    let at = blob.offset();
    let (cb_bounds, cb_vars) = if major >= 17 {
        // §2.4: a first value 0 marks the fat header (six sizes); otherwise the slim one.
        let first = header.unsigned()?;
        if first == 0 {
            let bounds = header.unsigned()?;
            let vars = header.unsigned()?;
            for _ in 0..4 {
                header.unsigned()?;
            }
            (bounds, vars)
        } else {
            (first, header.unsigned()?)
        }
    } else if major >= 3 {
        (header.unsigned()?, header.unsigned()?)
    } else {
        return Err(Error::new(ErrorKind::UnsupportedVersion, at, "a ReadyToRun major of 3 or more"));
    };
    let mut r = blob;
    r.skip(usize::try_from(header.next_byte().saturating_sub(at)).unwrap_or(usize::MAX), "the debug info header")?;
    let bounds = r.split(cb_bounds as usize, "the bounds").map_err(|_| bad(at, "bounds inside the section"))?;
    let vars = r.split(cb_vars as usize, "the variables").map_err(|_| bad(at, "variables inside the section"))?;
    Ok((bounds, vars))
}

/// Decode the bounds part of a blob for R2R `major` into `out` (cleared first), so that a caller
/// decoding many methods reuses one buffer.
pub fn bounds_into(bytes: Reader<'_>, major: u16, out: &mut Vec<Bound>) -> Result<()> {
    out.clear();
    if bytes.is_empty() {
        Ok(())
    } else if major >= 16 {
        bitpacked_bounds_into(bytes, if major >= 17 { 3 } else { 2 }, out)
    } else {
        nibble_bounds_into(bytes, out)
    }
}

/// §2.3: count, then (native delta, biased IL, source) per entry.
pub fn nibble_bounds(bytes: Reader<'_>) -> Result<Vec<Bound>> {
    let mut out = Vec::new();
    nibble_bounds_into(bytes, &mut out)?;
    Ok(out)
}

fn nibble_bounds_into(bytes: Reader<'_>, out: &mut Vec<Bound>) -> Result<()> {
    let mut n = Nibbles::new(bytes);
    let count = n.unsigned()?;
    // Each entry takes at least three nibbles.
    out.reserve((count as usize).min(bytes.len().saturating_mul(2) / 3));
    let mut native = 0u32;
    for _ in 0..count {
        let at = n.next_byte();
        // Deltas are unsigned: offsets only grow. A sum past 32 bits is corruption.
        native = native.checked_add(n.unsigned()?).ok_or(bad(at, "native offsets that fit 32 bits"))?;
        let il = il_from_biased(n.unsigned()?);
        let source = SourceTypes(n.unsigned()?);
        out.push(Bound { native_offset: native, il_offset: il, source });
    }
    Ok(())
}

/// §2.5: count, N−1, I−1 as nibbles, then count records of S+N+I bits, LSB first.
pub fn bitpacked_bounds(bytes: Reader<'_>, source_bits: u32) -> Result<Vec<Bound>> {
    let mut out = Vec::new();
    bitpacked_bounds_into(bytes, source_bits, &mut out)?;
    Ok(out)
}

fn bitpacked_bounds_into(bytes: Reader<'_>, source_bits: u32, out: &mut Vec<Bound>) -> Result<()> {
    let at = bytes.offset();
    let mut n = Nibbles::new(bytes);
    let count = n.unsigned()?;
    let native_bits = n.unsigned()?.saturating_add(1);
    let il_bits = n.unsigned()?.saturating_add(1);
    if count == 0 || native_bits > 32 || il_bits > 32 {
        return Err(bad(at, "a bit-packed header with count ≥ 1 and widths of 1-32 bits"));
    }
    let mut r = bytes;
    r.skip(usize::try_from(n.next_byte().saturating_sub(at)).unwrap_or(usize::MAX), "the bounds header")?;
    let record = source_bits.saturating_add(native_bits).saturating_add(il_bits);
    let needed = u64::from(count).saturating_mul(u64::from(record)).div_ceil(8);
    if needed > r.len() as u64 {
        return Err(bad(r.offset(), "bit-packed records inside the bounds"));
    }
    let data = r.as_slice();
    out.reserve(count as usize);
    let mut native = 0u32;
    let mut bit = 0u64;
    let field = |bit: u64, width: u32| -> u32 {
        // Up to 32 bits starting anywhere: gather 5 bytes into a u64.
        let byte = (bit / 8) as usize;
        let mut acc = 0u64;
        for (i, shift) in [0u32, 8, 16, 24, 32].into_iter().enumerate() {
            acc |= u64::from(data.get(byte.saturating_add(i)).copied().unwrap_or(0)) << shift;
        }
        let v = acc >> (bit % 8);
        let mask = u64::MAX.checked_shr(64u32.saturating_sub(width)).unwrap_or(0);
        (v & mask) as u32
    };
    for _ in 0..count {
        let source = field(bit, source_bits);
        let delta = field(bit.saturating_add(u64::from(source_bits)), native_bits);
        let il = field(bit.saturating_add(u64::from(source_bits.saturating_add(native_bits))), il_bits);
        bit = bit.saturating_add(u64::from(record));
        native = native.checked_add(delta).ok_or(bad(at, "native offsets that fit 32 bits"))?;
        // S=2/3 flags: bit0 CALL_INSTRUCTION, bit1 STACK_EMPTY, bit2 ASYNC.
        let mut flags = 0;
        if source & 1 != 0 {
            flags |= SourceTypes::CALL_INSTRUCTION;
        }
        if source & 2 != 0 {
            flags |= SourceTypes::STACK_EMPTY;
        }
        if source & 4 != 0 {
            flags |= SourceTypes::ASYNC;
        }
        out.push(Bound { native_offset: native, il_offset: il_from_biased(il), source: SourceTypes(flags) });
    }
    Ok(())
}

/// §2.3 vars (3.1 layout): start, length, number + 4, location kind and its fields.
pub fn nibble_vars(bytes: Reader<'_>) -> Result<Vec<Var>> {
    let at = bytes.offset();
    let mut n = Nibbles::new(bytes);
    let count = n.unsigned()?;
    let mut out = Vec::with_capacity((count as usize).min(bytes.len().saturating_mul(2) / 4));
    for _ in 0..count {
        let start = n.unsigned()?;
        let end = start.wrapping_add(n.unsigned()?);
        let number = (n.unsigned()? as i32).wrapping_sub(4);
        let loc = match n.unsigned()? {
            0 => VarLoc::Reg { reg: n.unsigned()? },
            1 => VarLoc::RegByRef { reg: n.unsigned()? },
            2 => VarLoc::RegFp { reg: n.unsigned()? },
            3 => VarLoc::Stack { base_reg: n.unsigned()?, offset: n.signed()? },
            4 => VarLoc::StackByRef { base_reg: n.unsigned()?, offset: n.signed()? },
            5 => VarLoc::RegReg { reg1: n.unsigned()?, reg2: n.unsigned()? },
            6 => VarLoc::RegStack { reg: n.unsigned()?, base_reg: n.unsigned()?, offset: n.signed()? },
            7 => VarLoc::StackReg { offset: n.signed()?, base_reg: n.unsigned()?, reg: n.unsigned()? },
            8 => VarLoc::Stack2 { base_reg: n.unsigned()?, offset: n.signed()? },
            9 => VarLoc::FpStack { reg: n.unsigned()? },
            10 => VarLoc::FixedVa { offset: n.unsigned()? },
            _ => return Err(bad(at, "a variable location kind 0-10")),
        };
        out.push(Var { start, end, number, loc });
    }
    Ok(out)
}

/// Writes the nibble stream (§2.2): low nibble first; 3 data bits per nibble, most significant
/// group first, bit 3 = "more follows".
#[derive(Debug, Default)]
pub struct NibbleWriter {
    bytes: Vec<u8>,
    half: bool,
}

impl NibbleWriter {
    fn nibble(&mut self, n: u8) {
        if self.half {
            if let Some(last) = self.bytes.last_mut() {
                *last |= n << 4;
            }
        } else {
            self.bytes.push(n & 0x0F);
        }
        self.half = !self.half;
    }

    /// Append an unsigned value.
    pub fn unsigned(&mut self, v: u32) {
        let groups = (32u32.saturating_sub(v.leading_zeros())).div_ceil(3).max(1);
        for i in (0..groups).rev() {
            let data = ((v >> i.saturating_mul(3)) & 7) as u8;
            self.nibble(if i > 0 { data | 8 } else { data });
        }
    }

    /// The bytes, the last half byte padded with 0 (`Flush`).
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

fn biased(il: IlOffset) -> u32 {
    il.to_raw().wrapping_add(3)
}

/// Encode bounds in the 3.x nibble format (§2.3): count, then (native delta, IL + 3, source).
pub fn encode_nibble_bounds(bounds: &[Bound]) -> Vec<u8> {
    let mut w = NibbleWriter::default();
    w.unsigned(u32::try_from(bounds.len()).unwrap_or(u32::MAX));
    let mut prev = 0u32;
    for b in bounds {
        w.unsigned(b.native_offset.wrapping_sub(prev));
        w.unsigned(biased(b.il_offset));
        w.unsigned(b.source.0);
        prev = b.native_offset;
    }
    w.finish()
}

/// Encode bounds in the bit-packed format of R2R ≥ 16 (§2.5), with `source_bits` of 2 or 3:
/// N and I are the bit lengths of the largest native delta and biased IL value (at least 1).
pub fn encode_bitpacked_bounds(bounds: &[Bound], source_bits: u32) -> Vec<u8> {
    let bits = |v: u32| (32u32.saturating_sub(v.leading_zeros())).max(1);
    let mut prev = 0u32;
    let mut records = Vec::with_capacity(bounds.len());
    for b in bounds {
        let mut flags = 0u32;
        if b.source.0 & SourceTypes::CALL_INSTRUCTION != 0 {
            flags |= 1;
        }
        if b.source.0 & SourceTypes::STACK_EMPTY != 0 {
            flags |= 2;
        }
        if b.source.0 & SourceTypes::ASYNC != 0 {
            flags |= 4;
        }
        records.push((flags, b.native_offset.wrapping_sub(prev), biased(b.il_offset)));
        prev = b.native_offset;
    }
    let n = records.iter().map(|r| bits(r.1)).max().unwrap_or(1);
    let i = records.iter().map(|r| bits(r.2)).max().unwrap_or(1);
    let mut w = NibbleWriter::default();
    w.unsigned(u32::try_from(bounds.len()).unwrap_or(u32::MAX));
    w.unsigned(n.saturating_sub(1));
    w.unsigned(i.saturating_sub(1));
    let mut out = w.finish();
    // Records LSB-first across bytes: [S bits source][N bits delta][I bits IL].
    let (mut acc, mut used) = (0u128, 0u32);
    for (s, d, il) in records {
        let record = u128::from(s) | u128::from(d) << source_bits | u128::from(il) << (source_bits.saturating_add(n));
        acc |= record << used;
        used = used.saturating_add(source_bits.saturating_add(n).saturating_add(i));
        while used >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            used = used.saturating_sub(8);
        }
    }
    if used > 0 {
        out.push(acc as u8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prolog_example() -> Vec<Bound> {
        let b = |native_offset, il_offset, source| Bound { native_offset, il_offset, source: SourceTypes(source) };
        vec![
            b(0, IlOffset::Prolog, 0),
            b(8, IlOffset::Il(0), SourceTypes::STACK_EMPTY),
            b(0x14, IlOffset::Il(6), 0),
            b(0x20, IlOffset::Epilog, SourceTypes::STACK_EMPTY),
        ]
    }

    #[test]
    fn worked_blob_of_section_2_3() {
        let blob = [0x19, 0x00, 0x04, 0x01, 0x09, 0x23, 0x49, 0x19, 0x90, 0x04, 0x02];
        let d = decode(Reader::new(&blob, 100), 3).unwrap();
        assert_eq!(d.bounds, prolog_example());
        assert!(d.vars.is_empty());
    }

    #[test]
    fn worked_blob_of_section_2_5() {
        let blob = [0x07, 0x34, 0x03, 0x40, 0x88, 0x03, 0xa7, 0x0c];
        let d = decode(Reader::new(&blob, 0), 16).unwrap();
        assert_eq!(d.bounds, prolog_example());
    }

    #[test]
    fn encoders_write_the_worked_blobs() {
        // §2.3: bounds bytes `04 01 09 23 49 19 90 04 02`; §2.5: `34 03 40 88 03 a7 0c`.
        assert_eq!(encode_nibble_bounds(&prolog_example()), [0x04, 0x01, 0x09, 0x23, 0x49, 0x19, 0x90, 0x04, 0x02]);
        assert_eq!(encode_bitpacked_bounds(&prolog_example(), 2), [0x34, 0x03, 0x40, 0x88, 0x03, 0xa7, 0x0c]);
    }

    proptest::proptest! {
        #[test]
        fn bounds_round_trip(
            raw in proptest::collection::vec((0u32..5000, 0u32..0x2_0000, 0usize..4, 0u32..8), 1..40),
            three in proptest::bool::ANY,
        ) {
            let mut native = 0u32;
            let bounds: Vec<Bound> = raw.iter().map(|&(delta, il, special, flags)| {
                native += delta;
                let il_offset = match special { 0 => IlOffset::Prolog, 1 => IlOffset::Epilog, 2 => IlOffset::NoMapping, _ => IlOffset::Il(il) };
                let mut source = 0;
                if flags & 1 != 0 { source |= SourceTypes::CALL_INSTRUCTION; }
                if flags & 2 != 0 { source |= SourceTypes::STACK_EMPTY; }
                if three && flags & 4 != 0 { source |= SourceTypes::ASYNC; }
                Bound { native_offset: native, il_offset, source: SourceTypes(source) }
            }).collect();
            let nibbles = encode_nibble_bounds(&bounds);
            proptest::prop_assert_eq!(&nibble_bounds(Reader::new(&nibbles, 0)).unwrap(), &bounds);
            let s = if three { 3 } else { 2 };
            let packed = encode_bitpacked_bounds(&bounds, s);
            proptest::prop_assert_eq!(&bitpacked_bounds(Reader::new(&packed, 0), s).unwrap(), &bounds);
        }
    }

    #[test]
    fn truncated_and_unknown() {
        let blob = [0x19, 0x00, 0x04, 0x01];
        assert!(decode(Reader::new(&blob, 0), 3).is_err());
        assert_eq!(decode(Reader::new(&[0x00], 0), 2).unwrap_err().kind, ErrorKind::UnsupportedVersion);
    }
}

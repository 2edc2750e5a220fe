//! Debug info blobs (docs/readytorun.md): bounds, variables and the fat header's extra chunks of
//! one method, read in the [`DebugInfoLayout`] that the image's ReadyToRun major selects.
//!
//! The layouts were measured on the real framework images (docs/readytorun.md): R2R 10.1 (.NET
//! 9.0.20) nibble bounds; 16.0 (10.0.12) bit-packed bounds with 2 source bits; 26.1 (11.0.0)
//! bit-packed bounds with 3 source bits, the fat-or-slim header and variables with their number
//! first.

use super::native::Nibbles;
use crate::base::ilmap::{Bound, IlOffset, SourceTypes};
use crate::base::read::{Error, ErrorKind, Reader, Result};

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
    /// For a call's return value (number −5, `CALL_RETURN_ILNUM`, layout `number_first` only):
    /// the IL offset of the call. Its range is then `[start, start + 1)`.
    pub call_return_il: Option<u32>,
}

/// How a method's blob starts (docs/readytorun.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeaderLayout {
    /// `cbBounds, cbVars` (majors 3-16).
    Slim,
    /// Majors ≥ 17: a first value 0 marks the fat header (six sizes: bounds, vars,
    /// uninstrumented bounds, patchpoint info, rich debug info, async info; the cDAC's
    /// `DebugInfo.md`, "Header Encoding"); any other first value is the slim header's cbBounds.
    FatOrSlim,
}

/// How the bounds are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoundsLayout {
    /// Nibble: count, then (native delta, IL + 3, raw `SourceTypes`) as nibble values (majors 3-15).
    Nibble,
    /// Bit-packed: fixed-width records of `source_bits` + N + I bits: 2 source bits at major 16 (0, 1
    /// CALL_INSTRUCTION, 2 STACK_EMPTY, 3 both), 3 independent ones from 17 (bit 0
    /// CALL_INSTRUCTION, bit 1 STACK_EMPTY, bit 2 ASYNC; `DebugInfo.md`, "Bounds Entry Encoding").
    BitPacked {
        /// 2 or 3.
        source_bits: u32,
    },
}

/// How the variables are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VarsLayout {
    /// Start first: start, length, number + 4 (`MAX_ILNUM` −4), location (majors 3-16; on 10.0.12's
    /// images the first value is 0, a prolog start, for most variables).
    StartFirst,
    /// `DebugInfo.md`, "Vars Data Encoding": number + 6 (`MAX_ILNUM` −6), start, then the length,
    /// or for number −5 (`CALL_RETURN_ILNUM`) the call's IL offset; then the location. Measured
    /// on 11.0.0 (R2R 26): the first value is never below 2 and is mostly 6-8 (arguments 0-2), so
    /// it is the number, not a start offset.
    NumberFirst,
    /// Not known for this major (17-25, .NET 11 previews: the layout changed in one of them and
    /// no image of theirs was read): variables are not decoded.
    Unknown,
}

/// The layout of a method's debug info for one ReadyToRun major: the one place that turns a
/// major into decoding decisions (the reader and the synthetic-image writer both use it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DebugInfoLayout {
    /// The header.
    pub header: HeaderLayout,
    /// The bounds.
    pub bounds: BoundsLayout,
    /// The variables.
    pub vars: VarsLayout,
}

/// The newest ReadyToRun major whose images were read here (11.0.0's, R2R 26.1): images above
/// it are `unsupported_version` unless the user assumes a layout.
pub const NEWEST_PROVEN_MAJOR: u16 = 26;

impl DebugInfoLayout {
    /// Majors 3-15 (3.1 is R2R 3.1, .NET 8 9.1, .NET 9 10.1).
    pub const NIBBLE: Self = DebugInfoLayout { header: HeaderLayout::Slim, bounds: BoundsLayout::Nibble, vars: VarsLayout::StartFirst };
    /// Major 16 (.NET 10): `readytorun.h` "R2R Version 16 replaces the compression format for
    /// debug boundaries".
    pub const BITPACKED2: Self = DebugInfoLayout { header: HeaderLayout::Slim, bounds: BoundsLayout::BitPacked { source_bits: 2 }, vars: VarsLayout::StartFirst };
    /// Majors 17-25 (.NET 11 previews): the fat header and 3 source bits (dotnet/runtime#120303,
    /// #121418); variables unknown.
    pub const FAT3_PREVIEW: Self = DebugInfoLayout { header: HeaderLayout::FatOrSlim, bounds: BoundsLayout::BitPacked { source_bits: 3 }, vars: VarsLayout::Unknown };
    /// Major 26 (.NET 11.0.0), measured.
    pub const FAT3: Self = DebugInfoLayout { header: HeaderLayout::FatOrSlim, bounds: BoundsLayout::BitPacked { source_bits: 3 }, vars: VarsLayout::NumberFirst };

    /// The layout of `major`; `None` below 3 (2.x images predate the nibble format) and above
    /// [`NEWEST_PROVEN_MAJOR`] (a future major may change it again: refused, never misread).
    pub const fn for_major(major: u16) -> Option<Self> {
        match major {
            3..=15 => Some(Self::NIBBLE),
            16 => Some(Self::BITPACKED2),
            17..=25 => Some(Self::FAT3_PREVIEW),
            26 => Some(Self::FAT3),
            _ => None,
        }
    }

    /// The layout of the debug info the runtime keeps for code it jitted, by the runtime's major
    /// version, read after the blob's flag byte ([`jitted_debug_info`](super::jitted_debug_info)): the JIT's and crossgen's blobs
    /// share one encoder, so .NET 10's is major 16's ([`Self::BITPACKED2`], checked against the
    /// runtime's own stack traces in a core). `None` for any other runtime (no reader of a
    /// jitted blob was checked there).
    pub const fn for_jitted_code(runtime_major: u16) -> Option<Self> {
        match runtime_major {
            10 => Some(Self::BITPACKED2),
            // 11.0.0's: the images' major 26, with no flag byte (checked in the same way on an
            // 11.0.0 core).
            11 => Some(Self::FAT3),
            _ => None,
        }
    }

    /// Whether the runtime puts a flag byte before the debug info it keeps for jitted code
    /// ([`jitted_debug_info`](super::jitted_debug_info)). A slim header has no room for the extras (OSR patchpoint info, rich
    /// debug info), so the byte says which follow (.NET 10); the fat header of major 26 sizes
    /// them itself, and 11.0.0 writes no flag byte (measured in a core: its blobs start with the
    /// header's first nibble, and decode to the runtime's own IL offsets and lines).
    pub const fn jitted_flag_byte(self) -> bool {
        matches!(self.header, HeaderLayout::Slim)
    }

    /// The layout a user names with `--assume-layout`: a major's number (`26`) whose layout is
    /// known.
    pub fn parse(text: &str) -> Option<Self> {
        text.trim().parse::<u16>().ok().and_then(Self::for_major)
    }
}

/// The bounds, variables and extra chunks of one method, as stored (native order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugInfo {
    /// Raw bounds, native order.
    pub bounds: Vec<Bound>,
    /// Variables (empty where the layout's variables are [`VarsLayout::Unknown`]).
    pub vars: Vec<Var>,
    /// The fat header's uninstrumented bounds (same encoding as the bounds), if any.
    pub uninstrumented_bounds: Vec<Bound>,
    /// The fat header's async suspension points, if any.
    pub async_points: Vec<AsyncSuspension>,
    /// The sizes of the fat header's opaque chunks: patchpoint info and rich debug info (their
    /// bytes are inside the blob, checked to fit; their contents are not read).
    pub opaque_sizes: (u32, u32),
}

/// A native offset where an async method may suspend, and the locals its continuation keeps
/// (`DebugInfo.md`, "AsyncInfo Data Encoding").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct AsyncSuspension {
    /// The diagnostic native offset.
    pub native_offset: i64,
    /// (IL variable number, offset in the continuation's data).
    pub locals: Vec<(i32, u32)>,
}

/// A method's blob cut into its chunks, after its header (absent chunks are empty).
#[derive(Clone, Copy, Debug)]
pub struct Chunks<'a> {
    /// The bounds.
    pub bounds: Reader<'a>,
    /// The variables.
    pub vars: Reader<'a>,
    /// Uninstrumented bounds (fat only).
    pub uninstrumented: Reader<'a>,
    /// Patchpoint info (fat only).
    pub patchpoint: Reader<'a>,
    /// Rich debug info (fat only).
    pub rich: Reader<'a>,
    /// Async info (fat only).
    pub async_info: Reader<'a>,
}

/// The IL field as stored: EPILOG 0, PROLOG 1, NO_MAPPING 2, IL n as n + 3, in every layout.
fn il_from_biased(v: u32) -> IlOffset {
    IlOffset::from_raw(v.wrapping_add(0xFFFF_FFFD))
}

/// Decode a whole blob in `layout`, starting at `blob` (bounded by the section).
pub fn decode(blob: Reader<'_>, layout: DebugInfoLayout) -> Result<DebugInfo> {
    decode_parts(blob, layout, true)
}

/// Like [`decode`], but variables and the extra chunks are decoded only when `with_vars`.
pub fn decode_parts(blob: Reader<'_>, layout: DebugInfoLayout, with_vars: bool) -> Result<DebugInfo> {
    let chunks = split(blob, layout)?;
    let mut info = DebugInfo::default();
    bounds_into(chunks.bounds, layout.bounds, &mut info.bounds)?;
    if !with_vars {
        return Ok(info);
    }
    info.vars = vars(chunks.vars, layout.vars)?;
    bounds_into(chunks.uninstrumented, layout.bounds, &mut info.uninstrumented_bounds)?;
    info.async_points = async_info(chunks.async_info)?;
    // Chunks the blob's u32 sizes delimit.
    info.opaque_sizes = (u32::try_from(chunks.patchpoint.len()).unwrap_or(u32::MAX), u32::try_from(chunks.rich.len()).unwrap_or(u32::MAX));
    Ok(info)
}

/// A method's blob split into its chunks, after the header of sizes (slim; or fat, from
/// major 17). Chunks follow the header in the header's order (`DebugInfo.md`: "chunk start addresses
/// are computed by linear accumulation").
pub fn split(blob: Reader<'_>, layout: DebugInfoLayout) -> Result<Chunks<'_>> {
    let mut header = Nibbles::new(blob);
    let at = blob.offset();
    let mut sizes = [0u32; 6];
    let first = header.unsigned()?;
    if layout.header == HeaderLayout::FatOrSlim && first == 0 {
        // `DEBUG_INFO_FAT`: six sizes follow.
        for s in &mut sizes {
            *s = header.unsigned()?;
        }
    } else {
        sizes[0] = first;
        sizes[1] = header.unsigned()?;
    }
    let mut r = blob;
    r.skip(usize::try_from(header.next_byte().saturating_sub(at)).unwrap_or(usize::MAX), "the debug info header")?;
    let [b, v, u, p, rich, a] = sizes;
    let mut take = |n: u32, what: &'static str| r.split(n as usize, what).map_err(|_| bad(at, what));
    Ok(Chunks {
        bounds: take(b, "bounds inside the section")?,
        vars: take(v, "variables inside the section")?,
        uninstrumented: take(u, "uninstrumented bounds inside the section")?,
        patchpoint: take(p, "patchpoint info inside the section")?,
        rich: take(rich, "rich debug info inside the section")?,
        async_info: take(a, "async info inside the section")?,
    })
}

/// Decode a bounds chunk in `layout` into `out` (cleared first), so that a caller decoding many
/// methods reuses one buffer. The chunk must be exactly the entries its count announces.
pub fn bounds_into(bytes: Reader<'_>, layout: BoundsLayout, out: &mut Vec<Bound>) -> Result<()> {
    out.clear();
    match layout {
        _ if bytes.is_empty() => Ok(()),
        BoundsLayout::Nibble => nibble_bounds_into(bytes, out),
        BoundsLayout::BitPacked { source_bits } => bitpacked_bounds_into(bytes, source_bits, out),
    }
}

/// Decode a variables chunk in `layout`; empty for an empty chunk or an unknown layout.
pub fn vars(bytes: Reader<'_>, layout: VarsLayout) -> Result<Vec<Var>> {
    match layout {
        _ if bytes.is_empty() => Ok(Vec::new()),
        VarsLayout::StartFirst => nibble_vars(bytes),
        VarsLayout::NumberFirst => number_first_vars(bytes),
        VarsLayout::Unknown => Ok(Vec::new()),
    }
}

/// A nibble-coded chunk must end where its last value ends, but for the flush's padding nibble.
fn whole(n: &Nibbles<'_>, bytes: Reader<'_>, what: &'static str) -> Result<()> {
    let end = bytes.offset().saturating_add(bytes.len() as u64);
    if n.next_byte() == end {
        Ok(())
    } else {
        Err(bad(n.next_byte(), what))
    }
}

/// Nibble bounds: count, then (native delta, biased IL, source) per entry.
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
    // The writer (`CompressBoundaries`) writes exactly cbBounds bytes: anything after the last
    // entry means the count or the sizes are wrong.
    whole(&n, bytes, "the end of the bounds after their last entry")
}

/// Bit-packed bounds: count, N−1, I−1 as nibbles, then count records of S+N+I bits, LSB first.
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
    // The records fill the chunk, the last byte zero-padded. Measured: 10.0.12's crossgen2 wrote
    // 32 more zero bytes after the records of 273 of CoreLib's 48,655 bounds (never 11.0.0's), so
    // what follows the records must be zeros; anything else is a wrong count or width.
    let rest = usize::try_from(needed).ok().and_then(|n| r.as_slice().get(n..));
    match rest {
        Some(tail) if tail.iter().all(|&b| b == 0) => {}
        Some(_) => return Err(bad(r.offset(), "zeros after the bit-packed records")),
        None => return Err(bad(r.offset(), "bit-packed records inside the bounds")),
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
        // `width` ≤ 32 (checked above, and `source_bits` is a format's constant): the field fits.
        u32::try_from(v & mask).unwrap_or(u32::MAX)
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

/// A location kind and its fields (`VarLocType`; the same in both variable layouts).
fn var_loc(n: &mut Nibbles<'_>) -> Result<VarLoc> {
    let at = n.next_byte();
    Ok(match n.unsigned()? {
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
    })
}

/// Start-first variables ([`VarsLayout::StartFirst`]): start, length, number + 4, location kind and its
/// fields.
pub fn nibble_vars(bytes: Reader<'_>) -> Result<Vec<Var>> {
    let mut n = Nibbles::new(bytes);
    let count = n.unsigned()?;
    let mut out = Vec::with_capacity((count as usize).min(bytes.len().saturating_mul(2) / 4));
    for _ in 0..count {
        let start = n.unsigned()?;
        let end = start.wrapping_add(n.unsigned()?);
        let number = (n.unsigned()? as i32).wrapping_sub(4);
        let loc = var_loc(&mut n)?;
        out.push(Var { start, end, number, loc, call_return_il: None });
    }
    whole(&n, bytes, "the end of the variables after their last entry")?;
    Ok(out)
}

/// x86 stores stack offsets divided by 4 (`DoEncodedStackOffset`: "Stack offsets are aligned on
/// a DWORD boundary"; `DebugInfo.md`: "x86: ×4"): restore them, for an x86 image's variables.
pub fn scale_x86_stack_offsets(vars: &mut [Var]) {
    for v in vars {
        match &mut v.loc {
            VarLoc::Stack { offset, .. } | VarLoc::StackByRef { offset, .. } | VarLoc::RegStack { offset, .. } | VarLoc::StackReg { offset, .. } | VarLoc::Stack2 { offset, .. } => {
                *offset = offset.wrapping_mul(4)
            }
            _ => {}
        }
    }
}

/// `MAX_ILNUM` of [`VarsLayout::NumberFirst`] (`DebugInfo.md`, constants): numbers are stored
/// biased by 6.
const NUMBER_FIRST_BIAS: i32 = 6;
/// `CALL_RETURN_ILNUM`: a call's return value.
const CALL_RETURN_ILNUM: i32 = -5;

/// [`VarsLayout::NumberFirst`] (`DebugInfo.md`, "Vars Data Encoding"): number + 6, start, then
/// the length or (a call's return value) the call's IL offset, then the location.
pub fn number_first_vars(bytes: Reader<'_>) -> Result<Vec<Var>> {
    let mut n = Nibbles::new(bytes);
    let count = n.unsigned()?;
    let mut out = Vec::with_capacity((count as usize).min(bytes.len().saturating_mul(2) / 4));
    for _ in 0..count {
        let number = (n.unsigned()? as i32).wrapping_sub(NUMBER_FIRST_BIAS);
        let start = n.unsigned()?;
        let (end, call_return_il) = if number == CALL_RETURN_ILNUM {
            // "endOffset is implicit and equals startOffset + 1".
            (start.wrapping_add(1), Some(n.unsigned()?))
        } else {
            (start.wrapping_add(n.unsigned()?), None)
        };
        let loc = var_loc(&mut n)?;
        out.push(Var { start, end, number, loc, call_return_il });
    }
    whole(&n, bytes, "the end of the variables after their last entry")?;
    Ok(out)
}

/// The async info chunk (`DebugInfo.md`, "AsyncInfo Data Encoding"): the suspension-point count,
/// the total variable count, per point a signed native-offset delta and its variable count, then
/// every variable as (number + 6, offset in the continuation's data).
pub fn async_info(bytes: Reader<'_>) -> Result<Vec<AsyncSuspension>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let mut n = Nibbles::new(bytes);
    let count_at = n.next_byte();
    let points = n.unsigned()?;
    let total = n.unsigned()?;
    // Each point takes at least two nibbles, each variable two: bounded by the chunk's size.
    let room = bytes.len().saturating_mul(2) as u64;
    if u64::from(points).saturating_mul(2) > room || u64::from(total).saturating_mul(2) > room {
        return Err(bad(count_at, "async counts whose entries fit in the chunk"));
    }
    let mut out = Vec::with_capacity(points as usize);
    let mut counts = Vec::with_capacity(points as usize);
    let mut native = 0i64;
    for _ in 0..points {
        // "Deltas are not required to be monotonic".
        native = native.saturating_add(i64::from(n.signed()?));
        counts.push(n.unsigned()?);
        out.push(AsyncSuspension { native_offset: native, locals: Vec::new() });
    }
    let sum: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    if sum != u64::from(total) {
        return Err(bad(count_at, "a total variable count equal to the sum of the points' counts"));
    }
    for (point, &c) in out.iter_mut().zip(&counts) {
        for _ in 0..c {
            let number = (n.unsigned()? as i32).wrapping_sub(NUMBER_FIRST_BIAS);
            point.locals.push((number, n.unsigned()?));
        }
    }
    whole(&n, bytes, "the end of the async info after its last variable")?;
    Ok(out)
}

/// Writes the nibble stream (docs/format-notes.md#varints): low nibble first; 3 data bits per nibble, most significant
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

    /// Append a value whole: eight nibbles, the lowest first (`WriteUnencodedU32`).
    pub fn fixed_u32(&mut self, v: u32) {
        for i in 0..8u32 {
            self.nibble(u8::try_from((v >> i.wrapping_mul(4)) & 0xF).unwrap_or(0));
        }
    }

    /// Append a signed value: x ≥ 0 as 2x, x < 0 as 2(−x)+1.
    pub fn signed(&mut self, v: i32) {
        let mag = v.unsigned_abs();
        self.unsigned(if v < 0 { mag.wrapping_shl(1) | 1 } else { mag.wrapping_shl(1) });
    }

    /// The bytes, the last half byte padded with 0 (`Flush`).
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

fn biased(il: IlOffset) -> u32 {
    il.to_raw().wrapping_add(3)
}

/// Encode bounds in the 3.x nibble format: count, then (native delta, IL + 3, source).
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

/// Encode bounds in the bit-packed format of R2R ≥ 16, with `source_bits` of 2 or 3:
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
            let [low, ..] = acc.to_le_bytes();
            out.push(low);
            acc >>= 8;
            used = used.saturating_sub(8);
        }
    }
    if used > 0 {
        let [low, ..] = acc.to_le_bytes();
        out.push(low);
    }
    out
}

fn encode_loc(w: &mut NibbleWriter, loc: &VarLoc) {
    match *loc {
        VarLoc::Reg { reg } => [0, reg].iter().for_each(|&v| w.unsigned(v)),
        VarLoc::RegByRef { reg } => [1, reg].iter().for_each(|&v| w.unsigned(v)),
        VarLoc::RegFp { reg } => [2, reg].iter().for_each(|&v| w.unsigned(v)),
        VarLoc::Stack { base_reg, offset } => {
            w.unsigned(3);
            w.unsigned(base_reg);
            w.signed(offset);
        }
        VarLoc::StackByRef { base_reg, offset } => {
            w.unsigned(4);
            w.unsigned(base_reg);
            w.signed(offset);
        }
        VarLoc::RegReg { reg1, reg2 } => [5, reg1, reg2].iter().for_each(|&v| w.unsigned(v)),
        VarLoc::RegStack { reg, base_reg, offset } => {
            [6, reg, base_reg].iter().for_each(|&v| w.unsigned(v));
            w.signed(offset);
        }
        VarLoc::StackReg { offset, base_reg, reg } => {
            w.unsigned(7);
            w.signed(offset);
            w.unsigned(base_reg);
            w.unsigned(reg);
        }
        VarLoc::Stack2 { base_reg, offset } => {
            w.unsigned(8);
            w.unsigned(base_reg);
            w.signed(offset);
        }
        VarLoc::FpStack { reg } => [9, reg].iter().for_each(|&v| w.unsigned(v)),
        VarLoc::FixedVa { offset } => [10, offset].iter().for_each(|&v| w.unsigned(v)),
    }
}

/// Encode variables in `layout` (the inverse of the reader's `vars`); nothing for [`VarsLayout::Unknown`].
pub fn encode_vars(vars: &[Var], layout: VarsLayout) -> Vec<u8> {
    if vars.is_empty() || layout == VarsLayout::Unknown {
        return Vec::new();
    }
    let mut w = NibbleWriter::default();
    w.unsigned(u32::try_from(vars.len()).unwrap_or(u32::MAX));
    for v in vars {
        if layout == VarsLayout::StartFirst {
            w.unsigned(v.start);
            w.unsigned(v.end.wrapping_sub(v.start));
            w.unsigned(v.number.wrapping_add(4) as u32);
        } else {
            w.unsigned(v.number.wrapping_add(NUMBER_FIRST_BIAS) as u32);
            w.unsigned(v.start);
            match v.call_return_il {
                Some(il) if v.number == CALL_RETURN_ILNUM => w.unsigned(il),
                _ => w.unsigned(v.end.wrapping_sub(v.start)),
            }
        }
        encode_loc(&mut w, &v.loc);
    }
    w.finish()
}

/// Encode async suspension points (the inverse of [`async_info`]).
pub fn encode_async_info(points: &[AsyncSuspension]) -> Vec<u8> {
    if points.is_empty() {
        return Vec::new();
    }
    let mut w = NibbleWriter::default();
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    w.unsigned(count(points.len()));
    w.unsigned(count(points.iter().map(|p| p.locals.len()).sum()));
    let mut prev = 0i64;
    for p in points {
        w.signed(i32::try_from(p.native_offset.saturating_sub(prev)).unwrap_or(0));
        prev = p.native_offset;
        w.unsigned(count(p.locals.len()));
    }
    for &(number, offset) in points.iter().flat_map(|p| &p.locals) {
        w.unsigned(number.wrapping_add(NUMBER_FIRST_BIAS) as u32);
        w.unsigned(offset);
    }
    w.finish()
}

impl DebugInfoLayout {
    /// Encode a whole blob in this layout (the writer of synthetic images and tests): the slim
    /// header, or the fat one where the layout has it and `info` needs it (an extra chunk, or no
    /// bounds: a slim cbBounds of 0 would read as the fat marker). Opaque chunks are zeros.
    pub fn encode(&self, info: &DebugInfo) -> Vec<u8> {
        let bounds = |b: &[Bound]| match self.bounds {
            _ if b.is_empty() => Vec::new(),
            BoundsLayout::Nibble => encode_nibble_bounds(b),
            BoundsLayout::BitPacked { source_bits } => encode_bitpacked_bounds(b, source_bits),
        };
        let chunks = [
            bounds(&info.bounds),
            encode_vars(&info.vars, self.vars),
            bounds(&info.uninstrumented_bounds),
            vec![0; info.opaque_sizes.0 as usize],
            vec![0; info.opaque_sizes.1 as usize],
            encode_async_info(&info.async_points),
        ];
        let size = |c: &Vec<u8>| u32::try_from(c.len()).unwrap_or(u32::MAX);
        let mut w = NibbleWriter::default();
        let fat = self.header == HeaderLayout::FatOrSlim && (chunks[0].is_empty() || chunks.iter().skip(2).any(|c| !c.is_empty()));
        if fat {
            w.unsigned(0);
            chunks.iter().for_each(|c| w.unsigned(size(c)));
        } else {
            w.unsigned(size(&chunks[0]));
            w.unsigned(size(&chunks[1]));
        }
        let mut out = w.finish();
        let used = if fat { 6 } else { 2 };
        chunks.iter().take(used).for_each(|c| out.extend_from_slice(c));
        out
    }
}

#[cfg(test)]
#[path = "debuginfo_tests.rs"]
mod tests;

//! Code addresses to methods (ExecutionManager contract) and the unwinding of managed frames by
//! the code's own unwind data.
//!
//! ExecutionManager (dotnet/runtime `docs/design/datacontracts/ExecutionManager.md`): the global
//! `ExecutionManagerCodeRangeMapAddress` is a map of five levels on 64-bit targets (address bits
//! 56-49, 48-41, 40-33, 32-25, 24-17; bit 0 of each entry is a flag), whose last level points at
//! a list of range section fragments. A fragment's range section is either a code heap (jitted
//! code: the heap's nibble map finds the method's start, the pointer just before the start is
//! its `RealCodeHeader`) or a ReadyToRun image (its `RUNTIME_FUNCTION` table).
//!
//! Unwind data on x64 is Windows' `UNWIND_INFO` (the runtime's amd64 unwinder uses the same
//! format on Linux), with `RUNTIME_FUNCTION` addresses relative to the range section's start.

use super::target::{Context, Target};
use crate::base::read::{Error, ErrorKind, Result};

/// How many levels the range section map has on a 64-bit target, and the bits below level 1.
const MAP_LEVELS: u32 = 5;
const BITS_AT_LAST_LEVEL: u32 = 17;
/// The most fragments in one chunk's list, and the most map words scanned backwards.
const MAX_FRAGMENTS: usize = 4096;
const MAX_NIBBLE_WORDS: u64 = 1 << 16;
/// The most chained unwind infos followed.
const MAX_CHAIN: usize = 32;

/// Where a code address is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeBlock {
    /// The method's code start (jitted) or its function's begin (ReadyToRun).
    pub start: u64,
    /// The base the unwind data's addresses are relative to.
    pub unwind_base: u64,
    /// The `RUNTIME_FUNCTION` that covers the address: begin, end, unwind data (relative).
    pub function: Option<(u32, u32, u32)>,
    /// The MethodDesc, for jitted code.
    pub method_desc: Option<u64>,
    /// The ReadyToRun module (a `Module` address), for precompiled code.
    pub r2r_module: Option<u64>,
    /// Jitted code: its debug info (the runtime's compressed bounds and variables) and the size
    /// of its code (to the end of its last funclet).
    pub debug_info: Option<(u64, u32)>,
}

/// Find the code block that holds `ip`, or `None` when `ip` is not managed code.
pub fn find(t: Target<'_, '_>, ip: u64) -> Result<Option<CodeBlock>> {
    let map = t.global("ExecutionManagerCodeRangeMapAddress")?;
    let top = t.at(map, "RangeSectionMap", "TopLevelData")?;
    let index = |level: u32| (ip >> (BITS_AT_LAST_LEVEL.wrapping_add((level.wrapping_sub(1)).wrapping_mul(8)))) & 0xFF;
    let mut slot = top.wrapping_add(index(MAP_LEVELS).wrapping_mul(8));
    for level in (1..MAP_LEVELS).rev() {
        let entry = t.core.u64(slot)? & !1;
        if entry == 0 {
            return Ok(None);
        }
        slot = entry.wrapping_add(index(level).wrapping_mul(8));
    }
    let mut fragment = t.core.u64(slot)? & !1;
    let mut section = None;
    for _ in 0..MAX_FRAGMENTS {
        if fragment == 0 {
            break;
        }
        let begin = t.ptr(fragment, "RangeSectionFragment", "RangeBegin")?;
        let end = t.ptr(fragment, "RangeSectionFragment", "RangeEndOpen")?;
        if begin <= ip && ip < end {
            section = Some(t.ptr(fragment, "RangeSectionFragment", "RangeSection")?);
            break;
        }
        fragment = t.ptr(fragment, "RangeSectionFragment", "Next")? & !1;
    }
    let Some(section) = section.filter(|&s| s != 0) else { return Ok(None) };
    let base = t.ptr(section, "RangeSection", "RangeBegin")?;
    let r2r = t.ptr(section, "RangeSection", "R2RModule")?;
    if r2r != 0 {
        return r2r_block(t, r2r, base, ip);
    }
    let heap = t.ptr(section, "RangeSection", "HeapList")?;
    if heap == 0 {
        return Ok(None);
    }
    let map_base = t.ptr(heap, "CodeHeapListNode", "MapBase")?;
    let header_map = t.ptr(heap, "CodeHeapListNode", "HeaderMap")?;
    let Some(start) = nibble_find(t, map_base, header_map, ip)? else { return Ok(None) };
    let indirect = start.wrapping_sub(8);
    let header = t.core.u64(indirect)?;
    // A header value at or below StubCodeBlockLast marks a stub, not a method.
    if header <= t.d.global("StubCodeBlockLast").unwrap_or(0xF) {
        return Ok(None);
    }
    let method_desc = t.ptr(header, "RealCodeHeader", "MethodDesc")?;
    let count = t.u32(header, "RealCodeHeader", "NumUnwindInfos")?.min(4096);
    let infos = t.at(header, "RealCodeHeader", "UnwindInfos")?;
    let size = t.d.size("RuntimeFunction").unwrap_or(12);
    let rel = ip.wrapping_sub(base);
    let mut function = None;
    for i in 0..u64::from(count) {
        let f = read_function(t, infos.wrapping_add(i.wrapping_mul(size)))?;
        if u64::from(f.0) <= rel && rel < u64::from(f.1) {
            function = Some(f);
            break;
        }
    }
    // The code's size: to the end of the last of its functions (the method and its funclets).
    let mut end = 0u32;
    for i in 0..u64::from(count) {
        if let Ok(f) = read_function(t, infos.wrapping_add(i.wrapping_mul(size))) {
            end = end.max(f.1);
        }
    }
    let code_size = u64::from(end).checked_sub(start.wrapping_sub(base)).and_then(|n| u32::try_from(n).ok());
    let debug_info = debug_info_pointer(t, header).ok().filter(|&p| p != 0).zip(code_size);
    Ok(Some(CodeBlock { start, unwind_base: base, function, method_desc: Some(method_desc), r2r_module: None, debug_info }))
}

/// A `RealCodeHeader`'s debug info pointer. .NET 11's descriptor names the field (`DebugInfo`,
/// offset 0). .NET 10's names the header's `GCInfo` at 16 and `MethodDesc` at 24 but not the
/// debug info: that is 11's layout (`DebugInfo` 0, `EHInfo` 8, `GCInfo` 16, `MethodDesc` 24, as
/// codeman.h's `_hpRealCodeHdr` has it in both), so the pointer is read at 0 only when those two
/// offsets say the layout is that one.
fn debug_info_pointer(t: Target<'_, '_>, header: u64) -> Result<u64> {
    if t.d.field("RealCodeHeader", "DebugInfo").is_some() {
        return t.ptr(header, "RealCodeHeader", "DebugInfo");
    }
    if t.d.field("RealCodeHeader", "GCInfo") == Some(16) && t.d.field("RealCodeHeader", "MethodDesc") == Some(24) {
        return t.core.u64(header);
    }
    Ok(0)
}

fn read_function(t: Target<'_, '_>, at: u64) -> Result<(u32, u32, u32)> {
    Ok((t.u32(at, "RuntimeFunction", "BeginAddress")?, t.u32(at, "RuntimeFunction", "EndAddress")?, t.u32(at, "RuntimeFunction", "UnwindData")?))
}

/// ReadyToRun code: the image's `RUNTIME_FUNCTION` table (sorted), binary-searched.
fn r2r_block(t: Target<'_, '_>, module: u64, base: u64, ip: u64) -> Result<Option<CodeBlock>> {
    let info = t.ptr(module, "Module", "ReadyToRunInfo")?;
    if info == 0 {
        return Ok(None);
    }
    let table = t.ptr(info, "ReadyToRunInfo", "RuntimeFunctions")?;
    let count = u64::from(t.u32(info, "ReadyToRunInfo", "NumRuntimeFunctions")?).min(1 << 24);
    let size = t.d.size("RuntimeFunction").unwrap_or(12);
    let rel = ip.wrapping_sub(base);
    let (mut lo, mut hi) = (0u64, count);
    while lo < hi {
        let mid = lo.wrapping_add(hi.wrapping_sub(lo) / 2);
        let begin = u64::from(t.u32(table.wrapping_add(mid.wrapping_mul(size)), "RuntimeFunction", "BeginAddress")?);
        if begin <= rel {
            lo = mid.wrapping_add(1);
        } else {
            hi = mid;
        }
    }
    let Some(index) = lo.checked_sub(1) else { return Ok(None) };
    let f = read_function(t, table.wrapping_add(index.wrapping_mul(size)))?;
    if rel >= u64::from(f.1) {
        return Ok(None);
    }
    Ok(Some(CodeBlock { start: base.wrapping_add(u64::from(f.0)), unwind_base: base, function: Some(f), method_desc: None, r2r_module: Some(module), debug_info: None }))
}

/// The nibble map look-up (ExecutionManager's NibbleMap, versions 1 and 2): 32-byte buckets,
/// eight 4-bit nibbles a 32-bit word, the first bucket in the word's top nibble; a nibble
/// `n` in 1-8 marks a method starting at `(n - 1) * 4` in its bucket; a word whose low nibble is
/// 9-12 is a pointer to a method start that covers the whole word (version 2).
fn nibble_find(t: Target<'_, '_>, map_base: u64, header_map: u64, ip: u64) -> Result<Option<u64>> {
    let Some(delta) = ip.checked_sub(map_base) else { return Ok(None) };
    let pos = delta >> 5;
    let mut word_index = pos >> 3;
    let word = t.core.u32(header_map.wrapping_add(word_index.wrapping_mul(4)))?;
    if let Some(p) = pointer_word(word) {
        return Ok(Some(map_base.wrapping_add(p)));
    }
    // Nibbles of this word at or before `pos`.
    let offset_in_bucket = ((delta & 31) >> 2).wrapping_add(1);
    let mut p = pos & 7;
    loop {
        let nibble = u64::from((word >> (28u64.wrapping_sub(p.wrapping_mul(4)))) & 0xF);
        let here = p == (pos & 7);
        if nibble != 0 && (!here || nibble <= offset_in_bucket) {
            let bucket = (word_index << 3).wrapping_add(p);
            return Ok(Some(map_base.wrapping_add(bucket << 5).wrapping_add(nibble.wrapping_sub(1) << 2)));
        }
        let Some(q) = p.checked_sub(1) else { break };
        p = q;
    }
    // Earlier words: the last non-zero nibble of the first non-empty one, or its pointer.
    for _ in 0..MAX_NIBBLE_WORDS {
        let Some(i) = word_index.checked_sub(1) else { return Ok(None) };
        word_index = i;
        let word = t.core.u32(header_map.wrapping_add(word_index.wrapping_mul(4)))?;
        if word == 0 {
            continue;
        }
        if let Some(p) = pointer_word(word) {
            return Ok(Some(map_base.wrapping_add(p)));
        }
        let mut w = word;
        let mut p = 7u64;
        while w & 0xF == 0 {
            w >>= 4;
            p = p.wrapping_sub(1);
        }
        let bucket = (word_index << 3).wrapping_add(p);
        return Ok(Some(map_base.wrapping_add(bucket << 5).wrapping_add(u64::from((w & 0xF).wrapping_sub(1)) << 2)));
    }
    Ok(None)
}

/// A version-2 pointer word: low nibble 9-12, the offset in the top 28 bits plus
/// `(nibble - 9) << 2`.
fn pointer_word(word: u32) -> Option<u64> {
    let n = word & 0xF;
    (9..=12).contains(&n).then(|| u64::from(word & !0xF).wrapping_add(u64::from(n.wrapping_sub(9)) << 2))
}

/// Unwind one managed frame on x64: `ctx` at `block`'s code, to its caller's context.
///
/// UNWIND_INFO (Windows x64 exception handling, "Struct UNWIND_INFO"): version and flags,
/// prolog size, code count, frame register and scaled offset, then the unwind codes in reverse
/// prolog order, then a chained RUNTIME_FUNCTION when flag 4 (UNW_FLAG_CHAININFO) is set.
/// Codes past the instruction's offset in the prolog have not run and are skipped.
pub fn unwind_x64(t: Target<'_, '_>, block: &CodeBlock, ctx: &Context) -> Result<Context> {
    let bad = |what: &'static str| Error::at_address(ErrorKind::BadImage, ctx.ip, what);
    let (begin, _, mut data) = block.function.ok_or(bad("unwind data for managed code"))?;
    let mut c = *ctx;
    let mut offset = ctx.ip.wrapping_sub(block.unwind_base.wrapping_add(u64::from(begin)));
    for _ in 0..MAX_CHAIN {
        let at = block.unwind_base.wrapping_add(u64::from(data));
        let head = t.core.bytes(at, 4)?;
        let (vf, count, frame) = match head {
            [vf, _prolog, count, frame] => (*vf, *count, *frame),
            _ => return Err(bad("an UNWIND_INFO header")),
        };
        let codes = t.core.bytes(at.wrapping_add(4), usize::from(count).wrapping_mul(2))?;
        let slot = |i: usize| -> Option<u16> { Some(u16::from_le_bytes([*codes.get(i.checked_mul(2)?)?, *codes.get(i.checked_mul(2)?.checked_add(1)?)?])) };
        let mut i = 0usize;
        while i < usize::from(count) {
            let code = slot(i).ok_or(bad("an unwind code"))?;
            let (code_offset, op, info) = (u64::from(code & 0xFF), (code >> 8) & 0xF, usize::from(code >> 12));
            let applies = code_offset <= offset;
            let sp = c.regs[4];
            match op {
                0 => {
                    // UWOP_PUSH_NONVOL
                    if applies {
                        let v = t.core.u64(sp)?;
                        if let Some(r) = c.regs.get_mut(info) {
                            *r = v;
                        }
                        c.regs[4] = sp.wrapping_add(8);
                    }
                    i = i.wrapping_add(1);
                }
                1 => {
                    // UWOP_ALLOC_LARGE: scaled 16-bit size in the next slot, or 32-bit in two.
                    let (size, used) = if info == 0 {
                        (u64::from(slot(i.wrapping_add(1)).ok_or(bad("an unwind code"))?).wrapping_mul(8), 2)
                    } else {
                        let lo = u64::from(slot(i.wrapping_add(1)).ok_or(bad("an unwind code"))?);
                        let hi = u64::from(slot(i.wrapping_add(2)).ok_or(bad("an unwind code"))?);
                        (lo | (hi << 16), 3)
                    };
                    if applies {
                        c.regs[4] = sp.wrapping_add(size);
                    }
                    i = i.wrapping_add(used);
                }
                2 => {
                    // UWOP_ALLOC_SMALL
                    if applies {
                        c.regs[4] = sp.wrapping_add((info as u64).wrapping_mul(8).wrapping_add(8));
                    }
                    i = i.wrapping_add(1);
                }
                3 => {
                    // UWOP_SET_FPREG: the stack pointer was the frame register minus 16 * offset.
                    if applies {
                        let fr = usize::from(frame & 0xF);
                        let base = c.regs.get(fr).copied().ok_or(bad("a frame register"))?;
                        c.regs[4] = base.wrapping_sub(u64::from(frame >> 4).wrapping_mul(16));
                    }
                    i = i.wrapping_add(1);
                }
                4 | 5 => {
                    // UWOP_SAVE_NONVOL(_FAR): saved at the stack pointer plus a scaled 16-bit or a
                    // 32-bit offset.
                    let (off, used) = if op == 4 {
                        (u64::from(slot(i.wrapping_add(1)).ok_or(bad("an unwind code"))?).wrapping_mul(8), 2)
                    } else {
                        let lo = u64::from(slot(i.wrapping_add(1)).ok_or(bad("an unwind code"))?);
                        let hi = u64::from(slot(i.wrapping_add(2)).ok_or(bad("an unwind code"))?);
                        (lo | (hi << 16), 3)
                    };
                    if applies {
                        let v = t.core.u64(sp.wrapping_add(off))?;
                        if let Some(r) = c.regs.get_mut(info) {
                            *r = v;
                        }
                    }
                    i = i.wrapping_add(used);
                }
                6 | 8 => i = i.wrapping_add(2),
                7 | 9 => i = i.wrapping_add(3),
                10 => {
                    // UWOP_PUSH_MACHFRAME: a machine frame (RIP, CS, EFLAGS, RSP, SS), after an
                    // error code when the info is 1.
                    if applies {
                        let frame_at = sp.wrapping_add(if info == 1 { 8 } else { 0 });
                        c.ip = t.core.u64(frame_at)?;
                        c.regs[4] = t.core.u64(frame_at.wrapping_add(24))?;
                        return Ok(c);
                    }
                    i = i.wrapping_add(1);
                }
                11 => {
                    // The runtime's UWOP_SET_FPREG_LARGE: a 32-bit offset (scaled by 16) in two slots.
                    if applies {
                        let lo = u64::from(slot(i.wrapping_add(1)).ok_or(bad("an unwind code"))?);
                        let hi = u64::from(slot(i.wrapping_add(2)).ok_or(bad("an unwind code"))?);
                        let fr = usize::from(frame & 0xF);
                        let base = c.regs.get(fr).copied().ok_or(bad("a frame register"))?;
                        c.regs[4] = base.wrapping_sub((lo | (hi << 16)).wrapping_mul(16));
                    }
                    i = i.wrapping_add(3);
                }
                _ => return Err(bad("a known unwind operation")),
            }
        }
        if (vf >> 3) & 4 == 0 {
            // The return address is at the stack pointer the prolog started with.
            let sp = c.regs[4];
            c.ip = t.core.u64(sp)?;
            c.regs[4] = sp.wrapping_add(8);
            return Ok(c);
        }
        // UNW_FLAG_CHAININFO: the chained function's unwind data follows the (even) code array.
        let chained = at.wrapping_add(4).wrapping_add((u64::from(count).wrapping_add(1) & !1).wrapping_mul(2));
        data = t.core.u32(chained.wrapping_add(8))?;
        // The chained (primary) prolog ran entirely.
        offset = u64::MAX;
    }
    Err(bad("a chain of unwind infos that ends"))
}

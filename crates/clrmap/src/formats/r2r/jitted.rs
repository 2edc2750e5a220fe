//! The debug info the runtime keeps beside jitted code (`RealCodeHeader`'s), as a dump reads
//! it: what comes before the encoding [`decode_debug_info`](super::decode_debug_info) reads (a flag byte and its extras on .NET 10),
//! and where the rich debug info is.

use super::debuginfo::{split, DebugInfoLayout};
use crate::base::read::Reader;

/// The part of a jitted method's debug info (`RealCodeHeader`'s) that [`decode_debug_info`](super::decode_debug_info) reads: the
/// runtime puts a flag byte first (bit 0: OSR patchpoint info follows, bit 1: rich debug info
/// follows; the cDAC's DebugInfo contract, version 1, `hasFlagByte`), then the header and chunks
/// as in an image. A blob with either extra is not read (`None`): its chunks' sizes are in
/// layouts this reader does not decode, and no IL offset is better than a wrong one.
pub fn jitted_blob(blob: &[u8]) -> Option<&[u8]> {
    match blob.split_first() {
        Some((0, rest)) => Some(rest),
        _ => None,
    }
}

/// A jitted body's debug info as the runtime keeps it ([`jitted_debug_info`]).
#[derive(Clone, Copy, Debug)]
pub struct JittedDebugInfo<'a> {
    /// From the header of sizes on: what [`decode_debug_info`](super::decode_debug_info) reads in the runtime's layout.
    pub info: Reader<'a>,
    /// The rich debug info chunk (the JIT's inline tree and rich mappings, stored when the process
    /// ran with `DOTNET_RichDebugInfo=1`), where there is one: decoded by the inline trees'
    /// reader (`formats::inlines`, `InlineTree::parse_stored`).
    pub rich: Option<Reader<'a>>,
}

/// The fixed part of the JIT's `PatchpointInfo` record in 10.0 (dotnet/runtime
/// `src/coreclr/inc/patchpointinfo.h`): one `int` per local follows it. The cDAC sizes it from its
/// descriptor, but 10.0's descriptor does not describe the type (11.0's fat header sizes the
/// record itself), so it is measured. 8.0's header declares 32 bytes (a `u64` register mask, the
/// `u32` local count, five `int`s). 10.0.12 writes 40: two `u64`s (the first the callee-saved
/// register mask, 0x20 for RBP), the local count at 16, the total frame size, the four offsets
/// (-1 where absent), then the locals' offsets. Checked on a 10.0.12 core of a tier-0 method with
/// a loop: after 40 + 4 × locals bytes its debug info decodes to the IL offsets and lines the
/// runtime's own stack trace printed.
pub const PATCHPOINT_INFO_SIZE: usize = 40;
/// Where the record's local count is.
const PATCHPOINT_LOCAL_COUNT_AT: usize = 16;
/// The most locals a patchpoint record may name (an IL method has at most 65,535).
const MAX_PATCHPOINT_LOCALS: u32 = 0xFFFF;

/// A jitted body's debug info split into the part [`decode_debug_info`](super::decode_debug_info) reads and its rich debug info.
///
/// With a flag byte ([`DebugInfoLayout::jitted_flag_byte`], .NET 10; dotnet/runtime
/// `debuginfostore.cpp`, `CompressBoundariesAndVars` and `RestoreRichDebugInfo`): the byte's bit
/// 0 says OSR patchpoint info follows, bit 1 (`EXTRA_DEBUG_INFO_RICH`) that rich debug info
/// follows, as a little-endian u32 size and that many bytes; the header and chunks come after.
/// Patchpoint info (a tier-0 body with loops, which on-stack replacement may leave) is the JIT's
/// `PatchpointInfo` record ([`PATCHPOINT_INFO_SIZE`]), skipped. An unknown flag bit is not read
/// (`None`): no IL offset is better than a wrong one. Without a flag byte (the fat header, .NET
/// 11), the rich chunk is the header's own (`None` when the header cannot be read). A size past
/// the blob is `None` too.
pub fn jitted_debug_info(blob: Reader<'_>, layout: DebugInfoLayout) -> Option<JittedDebugInfo<'_>> {
    if !layout.jitted_flag_byte() {
        let rich = split(blob, layout).ok()?.rich;
        return Some(JittedDebugInfo { info: blob, rich: (!rich.is_empty()).then_some(rich) });
    }
    let mut r = blob;
    let flags = r.u8("the debug info's flag byte").ok()?;
    if flags & !3 != 0 {
        return None;
    }
    if flags & 1 != 0 {
        // `PatchpointInfo::PatchpointInfoSize()`: the fixed part, then one int per local.
        let mut at = r;
        at.skip(PATCHPOINT_LOCAL_COUNT_AT, "the patchpoint info's register masks").ok()?;
        let locals = at.u32("the patchpoint info's local count").ok()?;
        if locals > MAX_PATCHPOINT_LOCALS {
            return None;
        }
        r.skip(PATCHPOINT_INFO_SIZE.checked_add(usize::try_from(locals).ok()?.checked_mul(4)?)?, "the patchpoint info inside the debug info").ok()?;
    }
    let rich = if flags & 2 != 0 {
        let size = r.u32("the rich debug info's size").ok()?;
        Some(r.split(usize::try_from(size).ok()?, "the rich debug info inside the debug info").ok()?)
    } else {
        None
    };
    Some(JittedDebugInfo { info: r, rich })
}

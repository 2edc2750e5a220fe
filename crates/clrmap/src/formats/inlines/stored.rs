//! The inline tree and rich mappings as the runtime stores them with a jitted body's debug info
//! (its rich chunk: `EXTRA_DEBUG_INFO_RICH` on .NET 10, the fat header's rich debug info chunk on
//! .NET 11; where the chunk is, is `formats/r2r/debuginfo.rs`'s business). This is not the event
//! 189 blob (blob.rs): the same records, compressed differently.
//!
//! Source: dotnet/runtime `src/coreclr/vm/debuginfostore.cpp`, `CompressRichDebugInfo` and
//! `RestoreRichDebugInfo` with their transfer helpers `DoInlineTreeNodes` and
//! `DoRichOffsetMappings`, over the nibble stream of `src/coreclr/inc/nibblestream.h`:
//! * the node count, then the mapping count, each a nibble-coded unsigned value;
//! * each node: `Method` as two whole 32-bit values (eight nibbles each, lowest nibble first;
//!   the handle's low half first: 64-bit targets), then `ILOffset`, `Child` and `Sibling`, each
//!   a signed nibble-coded delta from the previous node's field (the first `ILOffset`'s from
//!   `PROLOG`, 0xFFFFFFFE; the first links' from 0), added with 32-bit wrap-around;
//! * each mapping: `NativeOffset` as an unsigned delta from the previous mapping's (the first
//!   from 0), `Inlinee` and `ILOffset` as signed deltas (from 0 and from `PROLOG`), then
//!   `Source` as an unsigned value.
//!
//! The records then mean what the wire's mean, and go through the same checks ([`InlineTree`]).

use super::blob::{Blob, NodeAt};
use super::raw::{RawMapping, RawNode};
use super::InlineTree;
use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::r2r::native::Nibbles;

/// `ICorDebugInfo::PROLOG` as a u32: where the IL offset deltas start.
const PROLOG: u32 = 0xFFFF_FFFE;

/// The fewest nibbles a node takes: two whole u32 (16) and three one-nibble deltas.
const MIN_NODE_NIBBLES: u64 = 19;
/// The fewest nibbles a mapping takes: four one-nibble values.
const MIN_MAPPING_NIBBLES: u64 = 4;

impl InlineTree {
    /// Decode a stored rich chunk (the whole chunk: the runtime sizes it) and check the tree as
    /// [`InlineTree::parse`] does. Every fault is `bad_debug_info` (or `too_deep`) at the byte of
    /// the value at fault: counts whose records cannot fit in the nibbles left (checked before
    /// anything is allocated, so a hostile count costs nothing), a value cut off by the chunk's
    /// end, a `Source` wider than a byte, bytes left after the last mapping (the writer flushes
    /// its last half byte and nothing more), and every fault of the tree itself.
    pub fn parse_stored(chunk: Reader<'_>) -> Result<InlineTree> {
        let head = chunk.offset();
        let bad = |e: Error| e.with_kind(ErrorKind::BadDebugInfo);
        let mut r = Nibbles::new(chunk);
        let n_nodes = r.unsigned().map_err(bad)?;
        let n_maps = r.unsigned().map_err(bad)?;
        let need = u64::from(n_nodes).saturating_mul(MIN_NODE_NIBBLES).saturating_add(u64::from(n_maps).saturating_mul(MIN_MAPPING_NIBBLES));
        if need > r.nibbles_left() as u64 {
            return Err(Error::new(ErrorKind::BadDebugInfo, head, "node and mapping counts whose records fit in the rich chunk"));
        }
        // Both counts are bounded by the chunk's size now.
        let mut nodes = Vec::with_capacity(n_nodes as usize);
        let (mut il, mut child, mut sibling) = (PROLOG, 0u32, 0u32);
        for _ in 0..n_nodes {
            let lo = r.fixed_u32().map_err(bad)?;
            let hi = r.fixed_u32().map_err(bad)?;
            il = delta(il, r.signed().map_err(bad)?);
            let child_at = r.next_byte();
            child = delta(child, r.signed().map_err(bad)?);
            let sibling_at = r.next_byte();
            sibling = delta(sibling, r.signed().map_err(bad)?);
            let method = u64::from(lo) | (u64::from(hi) << 32);
            nodes.push((NodeAt { child: child_at, sibling: sibling_at }, RawNode { method, il_offset: il, child, sibling }));
        }
        let mut mappings = Vec::with_capacity(n_maps as usize);
        let (mut native, mut inlinee, mut il) = (0u32, 0u32, PROLOG);
        for _ in 0..n_maps {
            native = native.wrapping_add(r.unsigned().map_err(bad)?);
            let inlinee_at = r.next_byte();
            inlinee = delta(inlinee, r.signed().map_err(bad)?);
            il = delta(il, r.signed().map_err(bad)?);
            let source_at = r.next_byte();
            let source = u8::try_from(r.unsigned().map_err(bad)?).map_err(|_| Error::new(ErrorKind::BadDebugInfo, source_at, "a mapping's Source that fits a byte"))?;
            mappings.push((inlinee_at, RawMapping { il_offset: il, inlinee, native_offset: native, source }));
        }
        let end = head.saturating_add(chunk.len() as u64);
        if r.next_byte() != end {
            return Err(Error::new(ErrorKind::BadDebugInfo, r.next_byte(), "the end of the rich chunk after its last mapping"));
        }
        InlineTree::from_records(head, Blob { nodes, mappings })
    }
}

/// `DoEncodedDeltaU32NonMonotonic`'s reading: the previous value plus a signed delta, in 32 bits.
fn delta(last: u32, d: i32) -> u32 {
    last.wrapping_add_signed(d)
}

/// Write a stored rich chunk as the runtime does: for tests, fuzzing and the synthetic cores of
/// tests. (Counts past `u32::MAX`, which no runtime writes, are written as `u32::MAX`.)
pub fn encode_stored(nodes: &[RawNode], mappings: &[RawMapping]) -> Vec<u8> {
    let mut w = crate::formats::r2r::NibbleWriter::default();
    w.unsigned(u32::try_from(nodes.len()).unwrap_or(u32::MAX));
    w.unsigned(u32::try_from(mappings.len()).unwrap_or(u32::MAX));
    let (mut il, mut child, mut sibling) = (PROLOG, 0u32, 0u32);
    for n in nodes {
        w.fixed_u32(u32::try_from(n.method & 0xFFFF_FFFF).unwrap_or(0));
        w.fixed_u32(u32::try_from(n.method >> 32).unwrap_or(0));
        w.signed(n.il_offset.wrapping_sub(il) as i32);
        w.signed(n.child.wrapping_sub(child) as i32);
        w.signed(n.sibling.wrapping_sub(sibling) as i32);
        (il, child, sibling) = (n.il_offset, n.child, n.sibling);
    }
    let (mut native, mut inlinee, mut il) = (0u32, 0u32, PROLOG);
    for m in mappings {
        w.unsigned(m.native_offset.wrapping_sub(native));
        w.signed(m.inlinee.wrapping_sub(inlinee) as i32);
        w.signed(m.il_offset.wrapping_sub(il) as i32);
        w.unsigned(u32::from(m.source));
        (native, inlinee, il) = (m.native_offset, m.inlinee, m.il_offset);
    }
    w.finish()
}

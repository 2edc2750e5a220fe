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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::inlines::{Parent, NO_CALL_SITE};

    /// One node and one mapping, written by hand from the layout (not by [`encode_stored`]):
    /// counts 1, 1; Method 0x12345678 as eight nibbles lowest first and a zero high half;
    /// ILOffset +1 from PROLOG (0xFFFFFFFF, signed 2), Child and Sibling 0; NativeOffset 5,
    /// Inlinee 0, ILOffset 3 (+5 from PROLOG: signed 10, nibbles 9 2), Source 1.
    #[test]
    fn a_chunk_written_by_hand_reads() {
        let bytes = [0x11, 0x78, 0x56, 0x34, 0x12, 0, 0, 0, 0, 0x02, 0x50, 0x90, 0x12];
        let t = InlineTree::parse_stored(Reader::new(&bytes, 0x100)).unwrap();
        assert_eq!(t.nodes().len(), 1);
        assert_eq!((t.nodes()[0].method_id, t.nodes()[0].il_offset, t.nodes()[0].parent), (0x1234_5678, NO_CALL_SITE, Parent::Root));
        assert_eq!(t.mappings(), &[RichMapping { native_offset: 5, inlinee: 0, il_offset: 3, source: 1 }]);
        assert_eq!(encode_stored(&[RawNode { method: 0x1234_5678, il_offset: NO_CALL_SITE, child: 0, sibling: 0 }], &[RawMapping { il_offset: 3, inlinee: 0, native_offset: 5, source: 1 }]), bytes);
    }

    use crate::formats::inlines::RichMapping;

    fn two_levels() -> (Vec<RawNode>, Vec<RawMapping>) {
        let nodes = vec![
            RawNode { method: 0x7f4b_48ca_4000, il_offset: NO_CALL_SITE, child: 1, sibling: 0 },
            RawNode { method: 0x7f4b_48ca_4100, il_offset: 8, child: 2, sibling: 3 },
            RawNode { method: 0x7f4b_48ca_4200, il_offset: 3, child: 0, sibling: 0 },
            RawNode { method: 0x7f4b_48ca_4300, il_offset: 0x20, child: 0, sibling: 0 },
        ];
        let mappings = vec![
            RawMapping { il_offset: 0, inlinee: 0, native_offset: 0, source: 0 },
            RawMapping { il_offset: 0x10, inlinee: 2, native_offset: 0x30, source: 4 },
            RawMapping { il_offset: 0, inlinee: 1, native_offset: 0x3d, source: 1 },
            RawMapping { il_offset: 2, inlinee: 3, native_offset: 0x50, source: 1 },
            RawMapping { il_offset: 0xFFFF_FFFD, inlinee: 0, native_offset: 0x60, source: 0 },
        ];
        (nodes, mappings)
    }

    /// Deltas that go down as well as up (IL offsets, links, and the EPILOG sentinel) read back
    /// as written, and the chain is the tree's.
    #[test]
    fn a_tree_of_two_levels_reads_back_with_its_chain() {
        let (nodes, mappings) = two_levels();
        let t = InlineTree::parse_stored(Reader::new(&encode_stored(&nodes, &mappings), 0)).unwrap();
        assert_eq!(t.nodes().iter().map(|n| (n.method_id, n.il_offset)).collect::<Vec<_>>(), nodes.iter().map(|n| (n.method, n.il_offset)).collect::<Vec<_>>());
        assert_eq!(t.nodes()[2].parent, Parent::Node(1));
        assert_eq!(t.nodes()[3].parent, Parent::Node(0));
        assert_eq!(t.mappings().len(), 5);
        assert_eq!(t.mappings()[4].il_offset, 0xFFFF_FFFD);
        let chain = t.chain(0x35);
        assert_eq!(chain.steps.iter().map(|s| (s.node, s.il_offset)).collect::<Vec<_>>(), [(2, 0x10), (1, 3), (0, 8)]);
    }

    /// A hostile count is refused at the count, before anything is allocated for it.
    #[test]
    fn a_count_past_the_chunk_is_refused_at_the_count() {
        let mut w = crate::formats::r2r::NibbleWriter::default();
        w.unsigned(u32::MAX);
        w.unsigned(0);
        let mut bytes = w.finish();
        bytes.extend_from_slice(&[0; 32]);
        let e = InlineTree::parse_stored(Reader::new(&bytes, 0x40)).unwrap_err();
        assert_eq!((e.kind, e.offset()), (ErrorKind::BadDebugInfo, Some(0x40)));
        // Mappings too: 4 nibbles each at the least.
        let mut w = crate::formats::r2r::NibbleWriter::default();
        w.unsigned(0);
        w.unsigned(17);
        let mut bytes = w.finish();
        bytes.extend_from_slice(&[0; 33]);
        assert_eq!(InlineTree::parse_stored(Reader::new(&bytes, 0)).unwrap_err().kind, ErrorKind::BadDebugInfo);
    }

    /// A chunk cut short, one with a byte after its last mapping, a Source wider than a byte and
    /// a link into a node that does not exist are each an error, never a panic.
    #[test]
    fn faults_are_errors() {
        let (nodes, mappings) = two_levels();
        let whole = encode_stored(&nodes, &mappings);
        for cut in 0..whole.len() {
            assert!(InlineTree::parse_stored(Reader::new(&whole[..cut], 0)).is_err(), "cut at {cut}");
        }
        let mut longer = whole.clone();
        longer.push(0);
        assert_eq!(InlineTree::parse_stored(Reader::new(&longer, 0)).unwrap_err().offset(), Some(whole.len() as u64));
        // One node, one mapping whose Source is 0x100.
        let mut w = crate::formats::r2r::NibbleWriter::default();
        w.unsigned(1);
        w.unsigned(1);
        w.fixed_u32(0x1000);
        w.fixed_u32(0);
        for v in [2, 0, 0, 0, 0, 4, 0x100] {
            w.unsigned(v);
        }
        let wide = w.finish();
        let e = InlineTree::parse_stored(Reader::new(&wide, 0)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadDebugInfo);
        assert!(e.message().contains("Source"), "{}", e.message());
        let mut bad_link = nodes.clone();
        bad_link[2].child = 9;
        assert_eq!(InlineTree::parse_stored(Reader::new(&encode_stored(&bad_link, &mappings), 0)).unwrap_err().kind, ErrorKind::BadDebugInfo);
    }
}

//! The reassembled blob: `u32 nodes; u32 mappings; nodes × node; mappings × mapping`
//! (raw.rs, docs/rich-debug-info.md §2). Only the bytes are read here; what they mean as a tree
//! is checked in tree.rs.

use super::raw::{RawMapping, RawNode, MAPPING_INLINEE_AT, MAPPING_SIZE, NODE_CHILD_AT, NODE_SIBLING_AT, NODE_SIZE};
use crate::base::read::{ErrorKind, Reader, Result};

/// The records of a tree, whatever their encoding (this wire blob, or the stored chunk of
/// stored.rs), with the absolute offsets of the fields the tree's checks may name at fault.
#[derive(Debug, Default)]
pub(crate) struct Blob {
    /// Each node and where its `Child` and `Sibling` fields are.
    pub nodes: Vec<(NodeAt, RawNode)>,
    /// Each mapping and where its `Inlinee` field is.
    pub mappings: Vec<(u64, RawMapping)>,
}

/// Where a node's link fields are (absolute offsets).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NodeAt {
    pub child: u64,
    pub sibling: u64,
}

/// Read a whole blob. Every fault is `bad_debug_info` at the field's first byte:
/// - a count whose records do not fit in the bytes left, at the count (checked before anything is
///   allocated, so a hostile count costs nothing);
/// - bytes left after the last mapping, at the first of them (the runtime writes exactly
///   `8 + nodes·20 + mappings·13` bytes: `_ASSERTE(pBuffer - &buffer[0] == dataSize)`).
pub(crate) fn read_blob(blob: Reader<'_>) -> Result<Blob> {
    let mut r = blob;
    let bad = |e: crate::base::read::Error| e.with_kind(ErrorKind::BadDebugInfo);
    // `WriteToBuffer(&pBuffer, numInlineTree); WriteToBuffer(&pBuffer, numMappings);`
    let head = r;
    let n_nodes = r.u32("the inline tree's node count").map_err(bad)?;
    let n_maps = r.u32("the rich mapping count").map_err(bad)?;
    let left = r.len() as u64;
    let node_bytes = u64::from(n_nodes).saturating_mul(NODE_SIZE as u64);
    if node_bytes > left {
        return Err(head.error(ErrorKind::BadDebugInfo, "a node count whose nodes fit in the blob"));
    }
    let map_bytes = u64::from(n_maps).saturating_mul(MAPPING_SIZE as u64);
    if map_bytes > left.saturating_sub(node_bytes) {
        let mut at = head;
        let _ = at.skip(4, "");
        return Err(at.error(ErrorKind::BadDebugInfo, "a mapping count whose mappings fit in the blob"));
    }
    // Both counts fit in the bytes at hand: the vectors are bounded by the input's size.
    let mut nodes = Vec::with_capacity(n_nodes as usize);
    for _ in 0..n_nodes {
        let at = r.offset();
        // `Method, ILOffset, Child, Sibling` (`InlineTreeNode`, cordebuginfo.h).
        let method = r.u64("an inline tree node's Method").map_err(bad)?;
        let il_offset = r.u32("an inline tree node's ILOffset").map_err(bad)?;
        let child = r.u32("an inline tree node's Child").map_err(bad)?;
        let sibling = r.u32("an inline tree node's Sibling").map_err(bad)?;
        nodes.push((NodeAt { child: at.saturating_add(NODE_CHILD_AT), sibling: at.saturating_add(NODE_SIBLING_AT) }, RawNode { method, il_offset, child, sibling }));
    }
    let mut mappings = Vec::with_capacity(n_maps as usize);
    for _ in 0..n_maps {
        let at = r.offset();
        // `ILOffset, Inlinee, NativeOffset, (uint8_t)Source` (`RichOffsetMapping`).
        let il_offset = r.u32("a rich mapping's ILOffset").map_err(bad)?;
        let inlinee = r.u32("a rich mapping's Inlinee").map_err(bad)?;
        let native_offset = r.u32("a rich mapping's NativeOffset").map_err(bad)?;
        let source = r.u8("a rich mapping's Source").map_err(bad)?;
        mappings.push((at.saturating_add(MAPPING_INLINEE_AT), RawMapping { il_offset, inlinee, native_offset, source }));
    }
    if !r.is_empty() {
        return Err(r.error(ErrorKind::BadDebugInfo, "the end of the blob after its last mapping"));
    }
    Ok(Blob { nodes, mappings })
}

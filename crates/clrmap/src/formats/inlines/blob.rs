//! The reassembled blob: `u32 nodes; u32 mappings; nodes × node; mappings × mapping`
//! (raw.rs, docs/rich-debug-info.md §2). Only the bytes are read here; what they mean as a tree
//! is checked in tree.rs.

use super::raw::{RawMapping, RawNode, MAPPING_SIZE, NODE_SIZE};
use crate::base::read::{ErrorKind, Reader, Result};

/// The blob's records with the absolute offset of each record's first byte, so that the tree's
/// checks can name the field at fault.
#[derive(Debug, Default)]
pub(crate) struct Blob {
    pub nodes: Vec<(u64, RawNode)>,
    pub mappings: Vec<(u64, RawMapping)>,
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
        nodes.push((at, RawNode { method, il_offset, child, sibling }));
    }
    let mut mappings = Vec::with_capacity(n_maps as usize);
    for _ in 0..n_maps {
        let at = r.offset();
        // `ILOffset, Inlinee, NativeOffset, (uint8_t)Source` (`RichOffsetMapping`).
        let il_offset = r.u32("a rich mapping's ILOffset").map_err(bad)?;
        let inlinee = r.u32("a rich mapping's Inlinee").map_err(bad)?;
        let native_offset = r.u32("a rich mapping's NativeOffset").map_err(bad)?;
        let source = r.u8("a rich mapping's Source").map_err(bad)?;
        mappings.push((at, RawMapping { il_offset, inlinee, native_offset, source }));
    }
    if !r.is_empty() {
        return Err(r.error(ErrorKind::BadDebugInfo, "the end of the blob after its last mapping"));
    }
    Ok(Blob { nodes, mappings })
}

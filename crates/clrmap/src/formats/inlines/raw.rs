//! The wire records of the JIT's rich debug info, as the runtime writes them (docs/rich-debug-info.md).
//!
//! These are the spec's structs, kept apart from the parsing and the validation so each field's
//! source is in one place. Everything is little endian and packed (no padding between fields).

/// The fixed head of one `JittedMethodRichDebugInfo` event payload (provider
/// Microsoft-Windows-DotNETRuntimePrivate, event 189, version 0), before the chunk's bytes.
///
/// Source: dotnet/runtime v8.0.4 `src/coreclr/vm/eventtrace.cpp`, `SendMethodRichDebugInfo`
/// (`FireEtwJittedMethodRichDebugInfo(GetClrInstanceId(), pMethodDesc, nativeCodeId, ilCodeId,
/// chunkIndex | finalChunkFlag, chunkSizeToEmit, data)`), and the event's template in
/// `src/coreclr/vm/ClrEtwAll.man`. EventPipe metadata carries no field list for runtime events,
/// so the layout is fixed here (checked against real 8.0.4 traces, docs/rich-debug-info.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    /// `ClrInstanceID` (u16, offset 0).
    pub clr_instance_id: u16,
    /// `MethodID` (u64, offset 2): the root method's MethodDesc, as in MethodLoadVerbose.
    pub method_id: u64,
    /// `NativeCodeId` (u64, offset 10): 0 for a method's first body; MethodLoadVerbose V2's
    /// `ReJITID` for later ones (tier-up, OSR).
    pub native_code_id: u64,
    /// `ILVersionId` (u64, offset 18): the IL code version (ReJIT's), 0 without ReJIT.
    pub il_version_id: u64,
    /// `ChunkIndex` (u32, offset 26) without its last-chunk bit.
    pub index: u32,
    /// Bit 31 of `ChunkIndex`: this is the body's last chunk.
    pub last: bool,
    /// `ChunkLength` (u32, offset 30): how many blob bytes follow.
    pub length: u32,
}

/// Bytes of [`ChunkHeader`] on the wire: 2 + 8 + 8 + 8 + 4 + 4.
pub const CHUNK_HEADER_SIZE: usize = 34;

/// `finalChunkFlag` in `SendMethodRichDebugInfo`: set in `ChunkIndex` on the last chunk.
pub const LAST_CHUNK_FLAG: u32 = 0x8000_0000;

/// `chunkSize` in `SendMethodRichDebugInfo`: every chunk but the last carries exactly this many
/// bytes (the runtime cuts the blob at this size, at arbitrary offsets within records).
pub const CHUNK_SIZE: u32 = 40_000;

/// One node of the inline tree, as written by `SendMethodRichDebugInfo` from
/// `ICorDebugInfo::InlineTreeNode` (`src/coreclr/inc/cordebuginfo.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawNode {
    /// `Method` (u64): the inlinee's MethodDesc (`CORINFO_METHOD_HANDLE`); node 0's is the root.
    pub method: u64,
    /// `ILOffset` (u32): the IL offset of the call instruction in the parent's method;
    /// `0xFFFFFFFF` on node 0.
    pub il_offset: u32,
    /// `Child` (u32): the ordinal of the first child, 0 for none.
    pub child: u32,
    /// `Sibling` (u32): the ordinal of the next sibling, 0 for none.
    pub sibling: u32,
}

/// Bytes of one [`RawNode`] on the wire: `sizeof(CORINFO_METHOD_HANDLE) + sizeof(uint32_t) * 3`
/// (`inlineTreeNodeDataSize`; the handle is written as 8 bytes on 64-bit runtimes).
pub const NODE_SIZE: usize = 8 + 4 * 3;

/// Offsets of the link fields inside a [`RawNode`] record (for errors that name them).
pub const NODE_CHILD_AT: u64 = 12;
/// See [`NODE_CHILD_AT`].
pub const NODE_SIBLING_AT: u64 = 16;

/// One rich mapping, as written by `SendMethodRichDebugInfo` from
/// `ICorDebugInfo::RichOffsetMapping` (`cordebuginfo.h`): the fields in this order, with the
/// source narrowed to one byte (dotnet/runtime PR #73373).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawMapping {
    /// `ILOffset` (u32): the IL offset in the inlinee's method (or a `MappingTypes` value).
    pub il_offset: u32,
    /// `Inlinee` (u32): the ordinal of the node (inline context) the code belongs to.
    pub inlinee: u32,
    /// `NativeOffset` (u32): the native offset from the body's start where this mapping begins.
    pub native_offset: u32,
    /// `Source` (u8): `ICorDebugInfo::SourceTypes` (SEQUENCE_POINT 1, STACK_EMPTY 2, CALL_SITE 4,
    /// NATIVE_END_OFFSET_UNKNOWN 8, CALL_INSTRUCTION 0x10).
    pub source: u8,
}

/// Bytes of one [`RawMapping`] on the wire (`richOffsetMappingDataSize`: three u32 and a byte).
pub const MAPPING_SIZE: usize = 4 * 3 + 1;

/// Offset of `Inlinee` inside a [`RawMapping`] record.
pub const MAPPING_INLINEE_AT: u64 = 4;

/// Bytes of the blob's head: `u32 numInlineTree, u32 numMappings`.
pub const BLOB_HEADER_SIZE: usize = 8;

/// `MethodDetails` (Microsoft-Windows-DotNETRuntime, event 72, keyword MethodDiagnostic
/// `0x4000000000`): `u64 MethodID, u64 TypeID, u32 MethodToken, u32 TypeParameterCount, u64
/// LoaderModuleID, u64 TypeParameters[TypeParameterCount]` (ClrEtwAll.man's `MethodDetails`
/// template; fired by `ETW::MethodLog::SendNonDuplicateMethodDetailsEvent` in eventtrace.cpp, once
/// per inlinee after a body's rich debug info).
pub const METHOD_DETAILS_FIXED_SIZE: usize = 8 + 8 + 4 + 4 + 8;

/// Write a blob as the runtime does (`u32 nodes, u32 mappings`, the nodes, the mappings): for
/// tests, fuzzing and tools that hold the records themselves. (Counts past `u32::MAX`, which no
/// runtime writes, are written as `u32::MAX`.)
pub fn encode_blob(nodes: &[RawNode], mappings: &[RawMapping]) -> Vec<u8> {
    let mut out = Vec::with_capacity(BLOB_HEADER_SIZE.saturating_add(nodes.len().saturating_mul(NODE_SIZE)).saturating_add(mappings.len().saturating_mul(MAPPING_SIZE)));
    out.extend_from_slice(&u32::try_from(nodes.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&u32::try_from(mappings.len()).unwrap_or(u32::MAX).to_le_bytes());
    for n in nodes {
        out.extend_from_slice(&n.method.to_le_bytes());
        out.extend_from_slice(&n.il_offset.to_le_bytes());
        out.extend_from_slice(&n.child.to_le_bytes());
        out.extend_from_slice(&n.sibling.to_le_bytes());
    }
    for m in mappings {
        out.extend_from_slice(&m.il_offset.to_le_bytes());
        out.extend_from_slice(&m.inlinee.to_le_bytes());
        out.extend_from_slice(&m.native_offset.to_le_bytes());
        out.push(m.source);
    }
    out
}

/// Write one event 189 payload: `h` (its `length` is ignored: the data's is written) and `data`.
pub fn encode_chunk(h: &ChunkHeader, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CHUNK_HEADER_SIZE.saturating_add(data.len()));
    out.extend_from_slice(&h.clr_instance_id.to_le_bytes());
    out.extend_from_slice(&h.method_id.to_le_bytes());
    out.extend_from_slice(&h.native_code_id.to_le_bytes());
    out.extend_from_slice(&h.il_version_id.to_le_bytes());
    let index = if h.last { h.index | LAST_CHUNK_FLAG } else { h.index & !LAST_CHUNK_FLAG };
    out.extend_from_slice(&index.to_le_bytes());
    out.extend_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// Cut a blob into event 189 payloads as the runtime does: [`CHUNK_SIZE`] bytes each, the last
/// flagged (`SendMethodRichDebugInfo`'s loop; an empty blob gives no event, as there).
pub fn encode_chunks(method_id: u64, native_code_id: u64, blob: &[u8]) -> Vec<Vec<u8>> {
    let pieces: Vec<&[u8]> = blob.chunks(CHUNK_SIZE as usize).collect();
    let n = pieces.len();
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, data)| {
            let h = ChunkHeader {
                clr_instance_id: 0,
                method_id,
                native_code_id,
                il_version_id: 0,
                index: u32::try_from(i).unwrap_or(u32::MAX),
                last: i.saturating_add(1) == n,
                length: u32::try_from(data.len()).unwrap_or(u32::MAX),
            };
            encode_chunk(&h, data)
        })
        .collect()
}

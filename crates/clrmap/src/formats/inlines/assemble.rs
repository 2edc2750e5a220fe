//! Reassembling a body's blob from its event 189 chunks (raw.rs `ChunkHeader`).
//!
//! The runtime writes a body's chunks in order on the compiling thread, index 0 up, the last
//! with bit 31 set (`SendMethodRichDebugInfo`). A reader may still see them torn: a trace cut
//! mid-body, a chunk lost with a dropped buffer, the same index twice, or a new compilation of
//! the same (MethodID, NativeCodeId) starting over. Nothing here trusts the order: chunks are
//! kept by index until every index up to the last is present.

use std::collections::BTreeMap;

use super::raw::{ChunkHeader, LAST_CHUNK_FLAG};
use crate::base::read::{Error, ErrorKind, Reader, Result};

/// Decode one payload's header; the rest of the payload is returned as the chunk's bytes
/// (`ChunkLength` of them). A header cut short, or a `ChunkLength` beyond the payload, is
/// `bad_trace` at that field. Bytes after the chunk are left alone: a later version of the event
/// may append fields.
pub(crate) fn chunk(payload: Reader<'_>) -> Result<(ChunkHeader, Reader<'_>)> {
    let mut r = payload;
    let bad = |e: Error| e.with_kind(ErrorKind::BadTrace);
    let clr_instance_id = r.u16("the rich debug info's ClrInstanceID").map_err(bad)?;
    let method_id = r.u64("the rich debug info's MethodID").map_err(bad)?;
    let native_code_id = r.u64("the rich debug info's NativeCodeId").map_err(bad)?;
    let il_version_id = r.u64("the rich debug info's ILVersionId").map_err(bad)?;
    let raw_index = r.u32("the rich debug info's ChunkIndex").map_err(bad)?;
    let length_at = r;
    let length = r.u32("the rich debug info's ChunkLength").map_err(bad)?;
    let Ok(data) = r.split(length as usize, "") else {
        return Err(length_at.error(ErrorKind::BadTrace, "a ChunkLength within the event"));
    };
    let header = ChunkHeader { clr_instance_id, method_id, native_code_id, il_version_id, index: raw_index & !LAST_CHUNK_FLAG, last: raw_index & LAST_CHUNK_FLAG != 0, length };
    Ok((header, data))
}

/// One chunk's bytes and the absolute offset of the first (for errors).
#[derive(Debug)]
struct Piece {
    data: Vec<u8>,
    offset: u64,
}

/// The chunks of one body seen so far.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    pieces: BTreeMap<u32, Piece>,
    last: Option<u32>,
}

/// What one chunk did to its body's set.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The set so far could not be completed as it stood (two last chunks, an index past the
    /// last, the same index with other bytes): it was dropped, and this chunk began a new one.
    pub torn: bool,
    /// The same index again with the same bytes: ignored.
    pub duplicate: bool,
    /// Every chunk is here: the blob, and where each piece came from.
    pub complete: Option<Assembled>,
}

/// A whole blob, with the absolute offset of each piece so an error inside it can name the byte
/// in the trace.
#[derive(Debug, Default)]
pub(crate) struct Assembled {
    pub bytes: Vec<u8>,
    /// (offset in `bytes`, absolute offset of that byte), ascending.
    segments: Vec<(u64, u64)>,
}

impl Assembled {
    /// An error's offset inside `bytes` (read with base 0) as the trace's absolute offset.
    pub fn locate(&self, e: Error) -> Error {
        let Some(o) = e.offset() else { return e };
        let i = self.segments.partition_point(|&(start, _)| start <= o);
        match i.checked_sub(1).and_then(|i| self.segments.get(i)) {
            Some(&(start, abs)) => Error::new(e.kind, abs.saturating_add(o.saturating_sub(start)), e.expected),
            None => e,
        }
    }
}

impl Pending {
    /// Add one chunk.
    pub fn add(&mut self, h: &ChunkHeader, data: Reader<'_>) -> Outcome {
        let torn = if let Some(old) = self.pieces.get(&h.index) {
            if old.data == data.as_slice() && h.last == (self.last == Some(h.index)) {
                return Outcome { duplicate: true, ..Outcome::default() };
            }
            true
        } else {
            let past_last = self.last.is_some_and(|l| h.index > l);
            let below_seen = h.last && self.pieces.keys().next_back().is_some_and(|&k| k > h.index);
            past_last || (h.last && self.last.is_some()) || below_seen
        };
        if torn {
            *self = Pending::default();
        }
        self.pieces.insert(h.index, Piece { data: data.as_slice().to_vec(), offset: data.offset() });
        if h.last {
            self.last = Some(h.index);
        }
        Outcome { torn, duplicate: false, complete: self.complete() }
    }

    /// Whether a set was begun and not completed.
    pub fn is_started(&self) -> bool {
        !self.pieces.is_empty()
    }

    /// The blob, once every index 0..=last is present (the map's keys are unique and none is
    /// past the last, so a count of last + 1 means all are there); the set is then emptied.
    fn complete(&mut self) -> Option<Assembled> {
        let last = self.last?;
        if self.pieces.len() as u64 != u64::from(last) + 1 {
            return None;
        }
        let mut out = Assembled::default();
        for (_, p) in std::mem::take(&mut self.pieces) {
            out.segments.push((out.bytes.len() as u64, p.offset));
            out.bytes.extend_from_slice(&p.data);
        }
        self.last = None;
        Some(out)
    }
}

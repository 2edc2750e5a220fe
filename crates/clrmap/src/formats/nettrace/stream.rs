//! The `.nettrace` container (V4/V5; microsoft/perfview `NetTraceFormat_v5.md`, docs/format-notes.md#eventpipe-traces):
//! the `Nettrace` magic, FastSerialization objects, and the events inside Metadata and Event
//! blocks. Streaming: one block is in memory at a time, so memory is bounded by the largest block.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Read;

use crate::base::read::{Error, ErrorKind, Reader, Result};

/// A multiplicative hash for integer keys (keys the trace chose: a collision costs time
/// only, every map here is bounded).
#[derive(Default, Clone, Copy)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        // Folded multiply: the low bits (the bucket) depend on every bit of the key.
        let m = u128::from(self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        // Both halves fit: the low one is masked, the high one shifted down.
        u64::try_from(m & u128::from(u64::MAX)).unwrap_or(0) ^ u64::try_from(m >> 64).unwrap_or(0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(23) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

pub(crate) type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

use super::container::{block_padding, check_type_version, MAGIC, MAX_BLOCK, MAX_TYPE_NAME, SERIALIZATION, TAG_BEGIN_PRIVATE_OBJECT, TAG_END_OBJECT, TAG_NULL};

fn bad(at: u64, expected: &'static str) -> Error {
    Error::new(ErrorKind::BadTrace, at, expected)
}

/// How a stream is encoded, read once from its header (the `Trace` object's type and body) and
/// branched on by the readers of its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoding {
    /// The `Trace` object's type version (the format version).
    pub version: u32,
    /// The oldest reader version that can read it, as the writer says.
    pub min_reader_version: u32,
    /// The traced process's pointer size (4 or 8): stack blocks hold addresses of this size.
    pub pointer_size: u32,
}

/// What a metadata record says about an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventMeta {
    /// Provider name.
    pub provider: String,
    /// Event id.
    pub event_id: u32,
    /// Event version.
    pub version: u32,
}

/// One event: its metadata, header fields, and payload (borrowed from the current block).
#[derive(Clone, Copy, Debug)]
pub struct Event<'a> {
    /// Provider, id and version.
    pub meta: &'a EventMeta,
    /// The capture thread.
    pub capture_thread_id: u64,
    /// The thread.
    pub thread_id: u64,
    /// Timestamp (QPC ticks).
    pub timestamp: u64,
    /// The event's stack, by its id in the stack blocks since the last sequence point (0: none
    /// recorded; see [`crate::formats::nettrace::read_samples`]).
    pub stack_id: u32,
    /// The payload, with absolute offsets.
    pub payload: Reader<'a>,
}

/// Counts of what was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events decoded, by (provider, event id, version).
    pub events: HashMap<(String, u32, u32), u64>,
    /// Blocks read, by type name.
    pub blocks: HashMap<String, u64>,
    /// Events whose metadata id is unknown (skipped).
    pub unknown_events: u64,
    /// Bytes read.
    pub bytes: u64,
    /// The traced process, from the Trace object at the stream's start.
    pub process_id: Option<u32>,
    /// The traced process's pointer size in bytes (4 or 8), from the Trace object.
    pub pointer_size: Option<u32>,
    /// The stream's encoding, from its Trace object.
    pub encoding: Option<Encoding>,
    /// The sample profiler's interval in nanoseconds (`expectedCPUSamplingRate`), from the
    /// Trace object; 0 or absent when the trace does not say.
    pub sampling_rate_ns: Option<u32>,
    /// Timestamp ticks per second (the QPC frequency), from the Trace object.
    pub qpc_frequency: Option<u64>,
    /// [`crate::formats::nettrace::read_samples`]: ThreadSample events delivered with their stacks.
    pub samples: u64,
    /// ThreadSample events whose stack id names no stack read before them (since the last
    /// sequence point): not delivered.
    pub unknown_stack_ids: u64,
    /// ThreadSample events with an empty stack (no managed frame): not delivered.
    pub empty_samples: u64,
    /// Stacks read from stack blocks.
    pub stacks: u64,
    /// Stacks dropped: torn entries, or entries past the stack table's bound (the table is
    /// emptied when full; later references to the dropped ids count as unknown).
    pub stacks_dropped: u64,
}

/// A block the event reader does not decode itself, for [`read_with`]'s caller.
pub(crate) enum Side<'a> {
    /// A StackBlock's body (first id, count, stacks), and the trace's pointer size (4 or 8).
    Stacks { body: Reader<'a>, pointer_size: usize },
    /// A sequence point: stack ids start again after it.
    SequencePoint,
}

struct Input<R> {
    r: R,
    offset: u64,
}

impl<R: Read> Input<R> {
    fn exact(&mut self, buf: &mut [u8], expected: &'static str) -> Result<()> {
        let at = self.offset;
        self.r.read_exact(buf).map_err(|_| Error::new(ErrorKind::Truncated, at, expected))?;
        self.offset = self.offset.saturating_add(buf.len() as u64);
        Ok(())
    }
    fn u8(&mut self, expected: &'static str) -> Result<u8> {
        let mut b = [0u8; 1];
        self.exact(&mut b, expected)?;
        let [v] = b;
        Ok(v)
    }
    fn i32(&mut self, expected: &'static str) -> Result<i32> {
        let mut b = [0u8; 4];
        self.exact(&mut b, expected)?;
        Ok(i32::from_le_bytes(b))
    }
    fn skip(&mut self, n: u64, expected: &'static str) -> Result<()> {
        let at = self.offset;
        let copied = std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink()).map_err(|_| Error::new(ErrorKind::Truncated, at, expected))?;
        self.offset = self.offset.saturating_add(copied);
        if copied != n {
            return Err(Error::new(ErrorKind::Truncated, at, expected));
        }
        Ok(())
    }
    fn tag(&mut self, want: u8, expected: &'static str) -> Result<()> {
        let at = self.offset;
        if self.u8(expected)? != want {
            return Err(bad(at, expected));
        }
        Ok(())
    }
}

/// LEB128 unsigned (7 bits per byte, least significant first), at most 10 bytes.
fn varint(r: &mut Reader<'_>) -> Result<u64> {
    // The common cases, one or two bytes (ids, small deltas, sizes), and then any varint whole
    // in the bytes left: read from the slice, one skip.
    match r.as_slice() {
        [b, ..] if b & 0x80 == 0 => {
            let v = u64::from(*b);
            r.skip(1, "a varint")?;
            return Ok(v);
        }
        [b0, b1, ..] if b1 & 0x80 == 0 => {
            let v = u64::from(b0 & 0x7F) | u64::from(*b1) << 7;
            r.skip(2, "a varint")?;
            return Ok(v);
        }
        _ => {}
    }
    let mut v = 0u64;
    for (i, &b) in r.as_slice().iter().take(10).enumerate() {
        v |= u64::from(b & 0x7F).checked_shl(u32::try_from(i).unwrap_or(0).saturating_mul(7)).unwrap_or(0);
        if b & 0x80 == 0 {
            r.skip(i.saturating_add(1), "a varint")?;
            return Ok(v);
        }
    }
    // Cut or too long: the byte-by-byte reading names the fault.
    let at = r.offset();
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let b = r.u8("a varint")?;
        v |= u64::from(b & 0x7F).checked_shl(shift).unwrap_or(0);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(bad(at, "a varint of at most 10 bytes"))
}

/// A NUL-terminated UTF-16 string.
pub fn utf16z(r: &mut Reader<'_>) -> Result<String> {
    let mut units = Vec::new();
    loop {
        let u = r.u16("a UTF-16 string")?;
        if u == 0 {
            return Ok(String::from_utf16_lossy(&units));
        }
        units.push(u);
    }
}

/// Read a whole trace, calling `f` for every event in file order. On a truncated file every whole
/// event before the cut has been delivered when the error (`truncated` or `bad_trace`, with the
/// absolute offset) is returned.
pub fn read_events<R: Read>(r: R, f: impl FnMut(&Event<'_>)) -> Result<Stats> {
    let mut stats = Stats::default();
    read_with(r, |_| true, f, |_| {}, &mut stats)?;
    Ok(stats)
}

/// [`read_events`], returning what was counted (the process id included) also when the stream
/// ends in a fault, with the fault beside it.
pub fn read_events_partial<R: Read>(r: R, f: impl FnMut(&Event<'_>)) -> (Stats, Option<Error>) {
    read_events_partial_where(r, |_| true, f)
}

/// [`read_events_partial`], showing `f` only the events whose metadata `want` accepts (asked
/// once per metadata record, not per event); every event is still read and counted.
pub(crate) fn read_events_partial_where<R: Read>(r: R, want: impl Fn(&EventMeta) -> bool, f: impl FnMut(&Event<'_>)) -> (Stats, Option<Error>) {
    let mut stats = Stats::default();
    let fault = read_with(r, want, f, |_| {}, &mut stats).err();
    (stats, fault)
}

/// An event's metadata, and whether its events go to the reader's callback.
struct Known {
    meta: EventMeta,
    wanted: bool,
}

/// The stream's objects: events whose metadata `want` accepts to `f`, stack blocks and sequence
/// points to `side`.
pub(crate) fn read_with<R: Read>(r: R, want: impl Fn(&EventMeta) -> bool, mut f: impl FnMut(&Event<'_>), mut side: impl FnMut(Side<'_>), stats: &mut Stats) -> Result<()> {
    let mut input = Input { r, offset: 0 };
    let mut magic = [0u8; 8];
    input.exact(&mut magic, "the Nettrace magic")?;
    if magic != MAGIC {
        return Err(bad(0, "the Nettrace magic"));
    }
    let at = input.offset;
    let len = input.i32("the serialization signature length")?;
    if usize::try_from(len).ok() != Some(SERIALIZATION.len()) {
        return Err(bad(at, "!FastSerialization.1"));
    }
    let mut sig = [0u8; 20];
    input.exact(&mut sig, "!FastSerialization.1")?;
    if sig != SERIALIZATION {
        return Err(bad(at, "!FastSerialization.1"));
    }
    let mut metadata: IntMap<u32, Known> = IntMap::default();
    // Events counted by metadata id while reading (no allocation per event), named at the end.
    let mut counts: IntMap<u32, u64> = IntMap::default();
    // One block's body at a time, in one buffer kept from block to block.
    let mut body = Vec::new();
    loop {
        // An object: BeginPrivateObject, its type (BeginPrivateObject NullReference version
        // minReaderVersion name EndObject), its payload, EndObject. A lone NullReference ends it.
        let at = input.offset;
        let tag = input.u8("an object or the end of the stream")?;
        if tag == TAG_NULL {
            stats.bytes = input.offset;
            for (id, n) in counts {
                if let Some(Known { meta: m, .. }) = metadata.get(&id) {
                    let c = stats.events.entry((m.provider.clone(), m.event_id, m.version)).or_default();
                    *c = c.saturating_add(n);
                }
            }
            return Ok(());
        }
        if tag != TAG_BEGIN_PRIVATE_OBJECT {
            return Err(bad(at, "BeginPrivateObject"));
        }
        input.tag(TAG_BEGIN_PRIVATE_OBJECT, "the type's BeginPrivateObject")?;
        input.tag(TAG_NULL, "the type's NullReference")?;
        let version_at = input.offset;
        let version = input.i32("the type version")?;
        let min_reader = input.i32("the minimum reader version")?;
        let name_at = input.offset;
        let name_len = input.i32("the type name length")?;
        let name_len = usize::try_from(name_len).ok().filter(|&n| n <= MAX_TYPE_NAME).ok_or(bad(name_at, "a type name of at most 64 bytes"))?;
        let mut name = vec![0u8; name_len];
        input.exact(&mut name, "the type name")?;
        check_type_version(&name, version, min_reader, version_at)?;
        let name = String::from_utf8_lossy(&name).into_owned();
        input.tag(TAG_END_OBJECT, "the type's EndObject")?;
        if name == "Trace" {
            // SYSTEMTIME (16), syncTimeQPC, qpcFrequency (16), pointerSize, processId,
            // numProcessors, expectedCPUSamplingRate (16).
            input.skip(24, "the Trace object")?;
            let mut q = [0u8; 8];
            input.exact(&mut q, "the Trace object's QPC frequency")?;
            stats.qpc_frequency = Some(u64::from_le_bytes(q));
            let pointer_size_at = input.offset;
            let pointer_size = input.i32("the Trace object's pointer size")?;
            let pointer_size = u32::try_from(pointer_size).ok().filter(|p| matches!(p, 4 | 8)).ok_or(bad(pointer_size_at, "a pointer size of 4 or 8"))?;
            stats.pointer_size = Some(pointer_size);
            stats.encoding = Some(Encoding { version: version as u32, min_reader_version: min_reader as u32, pointer_size });
            stats.process_id = u32::try_from(input.i32("the Trace object's process id")?).ok();
            input.skip(4, "the Trace object")?;
            stats.sampling_rate_ns = u32::try_from(input.i32("the Trace object's sampling rate")?).ok();
        } else {
            // Every other V4/V5 object is a block: i32 size, padding to a 4-byte file offset, body.
            let size_at = input.offset;
            let size = input.i32("a block size")?;
            let size = u32::try_from(size).ok().filter(|&s| s <= MAX_BLOCK).ok_or(bad(size_at, "a block size under 256 MiB"))?;
            let pad = block_padding(input.offset);
            input.skip(pad, "block padding")?;
            let body_at = input.offset;
            // Read what there is: a file cut inside a block still yields that block's whole events.
            body.clear();
            (&mut input.r).take(u64::from(size)).read_to_end(&mut body).map_err(|_| Error::new(ErrorKind::Truncated, body_at, "a block body"))?;
            input.offset = input.offset.saturating_add(body.len() as u64);
            let cut = body.len() < size as usize;
            let c = stats.blocks.entry(name.clone()).or_default();
            *c = c.saturating_add(1);
            let r = Reader::new(&body, body_at);
            match name.as_str() {
                "MetadataBlock" => {
                    let mut fresh = Vec::new();
                    let done = block_events(r, &metadata, &mut counts, stats, |e| fresh.extend(parse_metadata(e.payload).ok()), true);
                    metadata.extend(fresh.into_iter().map(|(id, meta)| (id, Known { wanted: want(&meta), meta })));
                    if !cut {
                        done?;
                    }
                }
                "EventBlock" => {
                    let done = block_events(r, &metadata, &mut counts, stats, &mut f, false);
                    if !cut {
                        done?;
                    }
                }
                // Addresses of the encoding's pointer size (8 when no Trace object came first).
                "StackBlock" => side(Side::Stacks { body: r, pointer_size: stats.encoding.map_or(8, |e| e.pointer_size as usize) }),
                "SPBlock" => side(Side::SequencePoint),
                _ => {} // Unknown blocks are skipped.
            }
            if cut {
                return Err(Error::new(ErrorKind::Truncated, input.offset, "the rest of a block (the file is cut)"));
            }
        }
        input.tag(TAG_END_OBJECT, "the object's EndObject")?;
    }
}

/// A metadata event's payload: metadata id, provider, event id, name, keywords, version, level...
fn parse_metadata(p: Reader<'_>) -> Result<(u32, EventMeta)> {
    let mut r = p;
    let id = r.u32("a metadata id")?;
    let provider = utf16z(&mut r)?;
    let event_id = r.u32("an event id")?;
    let _name = utf16z(&mut r)?;
    let _keywords = r.u64("keywords")?;
    let version = r.u32("an event version")?;
    Ok((id, EventMeta { provider, event_id, version }))
}

static METADATA_META: std::sync::OnceLock<EventMeta> = std::sync::OnceLock::new();

/// A run of events of one metadata id, counted here and added to the counts when the id
/// changes or the block ends (however it ends).
struct Run<'a> {
    counts: &'a mut IntMap<u32, u64>,
    id: u32,
    n: u64,
}

impl Run<'_> {
    fn add(&mut self, id: u32) {
        if id != self.id {
            self.flush();
            self.id = id;
        }
        self.n = self.n.saturating_add(1);
    }

    fn flush(&mut self) {
        if self.n > 0 {
            let c = self.counts.entry(self.id).or_default();
            *c = c.saturating_add(self.n);
            self.n = 0;
        }
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// The header fields an event carries over from the one before it (compressed headers).
#[derive(Clone, Copy, Default)]
struct Header {
    metadata_id: u32,
    capture_thread_id: u64,
    thread_id: u64,
    timestamp: u64,
    payload_size: u32,
    stack_id: u32,
}

/// A LEB128 unsigned at `*at` of `b` (as [`varint`] reads it), moving `*at` past it; `None` when
/// it is cut or longer than 10 bytes.
#[inline(always)]
fn leb(b: &[u8], at: &mut usize) -> Option<u64> {
    let x = *b.get(*at)?;
    *at = at.wrapping_add(1);
    if x & 0x80 == 0 {
        return Some(u64::from(x));
    }
    let mut v = u64::from(x & 0x7F);
    let mut shift = 7u32;
    while shift < 70 {
        let x = *b.get(*at)?;
        *at = at.wrapping_add(1);
        v |= u64::from(x & 0x7F).wrapping_shl(shift);
        if x & 0x80 == 0 {
            return Some(v);
        }
        shift = shift.wrapping_add(7);
    }
    None
}

/// An event's compressed header from the start of `b`, after `prev`: the header and its length.
/// `None` for anything [`header_checked`] would refuse (a cut, a varint too long, an id or size
/// past 32 bits), which then reads it again to name the fault.
#[inline(always)]
fn header(b: &[u8], prev: &Header) -> Option<(Header, usize)> {
    let mut h = *prev;
    let flags = *b.first()?;
    let mut at = 1usize;
    if flags & 0x01 != 0 {
        h.metadata_id = u32::try_from(leb(b, &mut at)?).ok()?;
    }
    if flags & 0x02 != 0 {
        leb(b, &mut at)?; // sequence number delta
        h.capture_thread_id = leb(b, &mut at)?;
        leb(b, &mut at)?; // processor number
    }
    if flags & 0x04 != 0 {
        h.thread_id = leb(b, &mut at)?;
    }
    if flags & 0x08 != 0 {
        h.stack_id = u32::try_from(leb(b, &mut at)?).unwrap_or(u32::MAX);
    }
    h.timestamp = h.timestamp.wrapping_add(leb(b, &mut at)?);
    if flags & 0x10 != 0 {
        at = at.checked_add(16)?; // an activity id
    }
    if flags & 0x20 != 0 {
        at = at.checked_add(16)?; // a related activity id
    }
    if flags & 0x80 != 0 {
        h.payload_size = u32::try_from(leb(b, &mut at)?).ok()?;
    }
    (at <= b.len()).then_some((h, at))
}

/// [`header`] through the reader, naming the fault (kind and offset) where it fails.
#[cold]
fn header_checked(r: &mut Reader<'_>, h: &mut Header) -> Result<()> {
    let flags = r.u8("event header flags")?;
    if flags & 0x01 != 0 {
        let at = r.offset();
        h.metadata_id = u32::try_from(varint(r)?).map_err(|_| bad(at, "a metadata id of 32 bits"))?;
    }
    if flags & 0x02 != 0 {
        varint(r)?; // sequence number delta
        h.capture_thread_id = varint(r)?;
        varint(r)?; // processor number
    }
    if flags & 0x04 != 0 {
        h.thread_id = varint(r)?;
    }
    if flags & 0x08 != 0 {
        h.stack_id = u32::try_from(varint(r)?).unwrap_or(u32::MAX);
    }
    h.timestamp = h.timestamp.wrapping_add(varint(r)?);
    if flags & 0x10 != 0 {
        r.skip(16, "an activity id")?;
    }
    if flags & 0x20 != 0 {
        r.skip(16, "a related activity id")?;
    }
    if flags & 0x80 != 0 {
        let at = r.offset();
        h.payload_size = u32::try_from(varint(r)?).map_err(|_| bad(at, "a payload size of 32 bits"))?;
    }
    Ok(())
}

/// The events of one Metadata or Event block (compressed headers; docs/format-notes.md#eventpipe-traces).
/// Events whose metadata is not wanted are counted and not shown to `f`.
fn block_events(body: Reader<'_>, metadata: &IntMap<u32, Known>, counts: &mut IntMap<u32, u64>, stats: &mut Stats, mut f: impl FnMut(&Event<'_>), is_metadata: bool) -> Result<()> {
    let mut r = body;
    let at = r.offset();
    let header_size = r.u16("the block header size")?;
    let flags = r.u16("the block flags")?;
    r.skip(usize::from(header_size).saturating_sub(4), "the block header")?;
    if flags & 1 == 0 {
        // Uncompressed headers (not written by 3.1 or 8.0): skip the block.
        let _ = at;
        return Ok(());
    }
    let meta_meta = METADATA_META.get_or_init(|| EventMeta { provider: String::new(), event_id: 0, version: 0 });
    let mut h = Header::default();
    // Events of one kind come in runs: the last kind's metadata and count are kept at hand.
    let mut last: Option<(u32, &EventMeta, bool)> = None;
    let mut run = Run { counts, id: 0, n: 0 };
    while !r.is_empty() {
        match header(r.as_slice(), &h) {
            Some((next, n)) => {
                h = next;
                r.skip(n, "an event header")?;
            }
            None => header_checked(&mut r, &mut h)?,
        }
        let payload = r.split(h.payload_size as usize, "an event payload").map_err(|e| e.with_kind(ErrorKind::BadTrace))?;
        let known = match last {
            _ if is_metadata => Some((meta_meta, true)),
            Some((id, m, wanted)) if id == h.metadata_id => Some((m, wanted)),
            _ => {
                let k = metadata.get(&h.metadata_id).map(|k| (&k.meta, k.wanted));
                last = k.map(|(m, wanted)| (h.metadata_id, m, wanted));
                k
            }
        };
        match known {
            Some((m, wanted)) => {
                if !is_metadata {
                    run.add(h.metadata_id);
                }
                if wanted {
                    f(&Event { meta: m, capture_thread_id: h.capture_thread_id, thread_id: h.thread_id, timestamp: h.timestamp, stack_id: h.stack_id, payload });
                }
            }
            None => stats.unknown_events = stats.unknown_events.saturating_add(1),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::container::{NEWEST_BLOCK_VERSION, NEWEST_TRACE_VERSION};
    use super::*;

    /// `Nettrace`, the serialization signature, a Trace object of type version `trace`, an
    /// SPBlock of version `block` with an empty body, and the closing NullReference.
    fn trace(trace: i32, block: i32) -> Vec<u8> {
        let mut v = b"Nettrace".to_vec();
        v.extend_from_slice(&20i32.to_le_bytes());
        v.extend_from_slice(SERIALIZATION);
        let object = |v: &mut Vec<u8>, name: &[u8], version: i32| {
            v.extend_from_slice(&[5, 5, 1]);
            v.extend_from_slice(&version.to_le_bytes());
            v.extend_from_slice(&version.min(4).to_le_bytes());
            v.extend_from_slice(&(name.len() as i32).to_le_bytes());
            v.extend_from_slice(name);
            v.push(6);
        };
        object(&mut v, b"Trace", trace);
        // SYSTEMTIME, syncTimeQPC, qpcFrequency, pointerSize, processId, numProcessors, rate.
        v.extend_from_slice(&[0; 24]);
        v.extend_from_slice(&1_000_000u64.to_le_bytes());
        for x in [8i32, 42, 2, 1_000_000] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.push(6);
        object(&mut v, b"SPBlock", block);
        v.extend_from_slice(&0i32.to_le_bytes());
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v.push(6);
        v.push(1);
        v
    }

    /// Random event headers, whole, cut and malformed: the slice reader and the checked reader
    /// agree on each (the fields, the length read), and the slice reader gives up exactly where
    /// the checked one names a fault.
    #[test]
    fn the_fast_header_reader_agrees_with_the_checked_one() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut whole, mut refused) = (0, 0);
        for _ in 0..200_000 {
            let mut b = vec![next() as u8];
            // Fields as varints of 1 to 11 bytes (11: too long), values of any width.
            for _ in 0..(next() % 9) {
                let len = 1 + (next() % 11) as usize;
                for i in 0..len {
                    let byte = next() as u8 & 0x7F;
                    b.push(if i + 1 < len { byte | 0x80 } else { byte });
                }
            }
            let cut = (next() % (b.len() as u64 + 40)) as usize;
            b.extend((0..40).map(|_| next() as u8));
            b.truncate(cut.min(b.len()));
            let prev = Header { metadata_id: 7, capture_thread_id: 8, thread_id: 9, timestamp: 10, payload_size: 11, stack_id: 12 };
            let fast = header(&b, &prev);
            let mut checked = prev;
            let mut r = Reader::new(&b, 100);
            let slow = header_checked(&mut r, &mut checked).map(|()| b.len() - r.len());
            match (fast, slow) {
                (Some((h, n)), Ok(m)) => {
                    whole += 1;
                    assert_eq!(n, m, "{b:02x?}");
                    let f = |h: &Header| (h.metadata_id, h.capture_thread_id, h.thread_id, h.timestamp, h.payload_size, h.stack_id);
                    assert_eq!(f(&h), f(&checked), "{b:02x?}");
                }
                (None, Err(_)) => refused += 1,
                (fast, slow) => panic!("{b:02x?}: slice reader {:?}, checked reader {slow:?}", fast.map(|(_, n)| n)),
            }
        }
        assert!(whole > 10_000 && refused > 10_000, "{whole} read, {refused} refused");
    }

    #[test]
    fn the_header_is_read_once_into_an_encoding() {
        let stats = read_events(&trace(4, 2)[..], |_| {}).unwrap();
        assert_eq!(stats.encoding, Some(Encoding { version: 4, min_reader_version: 4, pointer_size: 8 }));
    }

    #[test]
    fn a_version_above_the_newest_known_is_refused() {
        // Versions read on purpose: the Trace object one version above, at its version field
        // (after the 8 + 4 + 20 bytes of the prelude and the 3 tags).
        let e = read_events(&trace(5, 2)[..], |_| {}).unwrap_err();
        assert_eq!((e.kind, e.offset(), e.versions), (ErrorKind::UnsupportedVersion, Some(35), Some((5, NEWEST_TRACE_VERSION))));
        assert!(e.to_string().contains("found version 5, the newest known is 4"), "{e}");
        // A block one version above.
        let e = read_events(&trace(4, 3)[..], |_| {}).unwrap_err();
        assert_eq!((e.kind, e.versions), (ErrorKind::UnsupportedVersion, Some((3, NEWEST_BLOCK_VERSION))));
    }
}

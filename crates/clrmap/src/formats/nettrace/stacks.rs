//! The sample profiler's stacks in a `.nettrace`: StackBlocks, each event's stack id, and the
//! `Microsoft-DotNETCore-SampleProfiler` provider's ThreadSample events (event id 0).
//!
//! A StackBlock's body is the id of its first stack and a count, then per stack a u32 size and
//! that many bytes of instruction pointers (the trace's pointer size each, leaf first: the
//! interrupted instruction, then return addresses). Ids count up from 1 after every sequence
//! point (SPBlock), where the writer forgets its stacks; an event names its stack by id in its
//! compressed header (flag 0x08; the id carries over to the next event when the flag is clear).
//!
//! Streaming: the table of stacks holds those since the last sequence point, bounded
//! ([`MAX_STACK_WORDS`] addresses, [`MAX_STACKS`] ids); a sample whose id names no stack read
//! before it is counted ([`Stats::unknown_stack_ids`]), never guessed.

use std::cell::RefCell;
use std::io::Read;

use super::stream::{read_with, Side, Stats};
use crate::base::read::{Error, Reader, Result};

/// The provider of the runtime's sampler.
pub const SAMPLE_PROFILER: &str = "Microsoft-DotNETCore-SampleProfiler";
/// The bound on addresses kept in the stack table (64 MiB); past it the table is emptied.
pub const MAX_STACK_WORDS: usize = 8 << 20;
/// The bound on stacks kept in the table; past it the table is emptied.
pub const MAX_STACKS: usize = 2 << 20;
const EMPTY: u32 = u32::MAX;
/// The bound on the words of distinct stacks remembered for keys (32 MiB).
const MAX_CANON_WORDS: usize = 4 << 20;
/// The top bit of a key given without the canonical table (full): unique to its id and window.
const FRESH: u64 = 1 << 63;

/// Distinct stacks by content: a stack seen before gets the key it got then.
#[derive(Debug, Default)]
struct Canon {
    words: Vec<u64>,
    spans: Vec<(usize, usize)>,
    by_hash: super::IntMap<u64, u32>,
}

impl Canon {
    fn key(&mut self, frames: &[u64]) -> Option<u64> {
        let mut h = 0x243f_6a88_85a3_08d3u64;
        for &w in frames {
            h = (h.rotate_left(23) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        h ^= frames.len() as u64;
        if let Some(&c) = self.by_hash.get(&h) {
            let &(start, len) = self.spans.get(c as usize)?;
            if self.words.get(start..start.checked_add(len)?) == Some(frames) {
                return Some(u64::from(c));
            }
            // Another stack with this hash: keyed apart, without the table.
            return None;
        }
        if self.words.len().saturating_add(frames.len()) > MAX_CANON_WORDS {
            return None;
        }
        let c = u32::try_from(self.spans.len()).ok()?;
        self.spans.push((self.words.len(), frames.len()));
        self.words.extend_from_slice(frames);
        self.by_hash.insert(h, c);
        Some(u64::from(c))
    }
}

/// A ThreadSample's type for a thread the runtime stopped in cooperative mode, running managed
/// code (`EventPipeSampleProfilerSampleType` in the runtime's eventpipe/ep-types.h: 0 error,
/// 1 external, 2 managed).
const SAMPLE_MANAGED: u32 = 2;

/// One ThreadSample event with its stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample<'a> {
    /// The sampled thread (OS id).
    pub thread_id: u64,
    /// Timestamp (QPC ticks).
    pub timestamp: u64,
    /// The stack, leaf first: the leaf's instruction address, then its callers' return addresses.
    pub frames: &'a [u64],
    /// True when the thread was running managed code (payload 2, the runtime's
    /// `EP_SAMPLE_PROFILER_SAMPLE_TYPE_MANAGED`); false for external code (1) and anything else.
    pub managed: bool,
    /// The stack's identity in the trace: samples with the same key have the same frames, and
    /// equal stacks have one key across sequence points (while a bounded table of the distinct
    /// stacks has room). A cache key, nothing more.
    pub stack_key: u64,
}

/// Stacks by id, in one arena.
#[derive(Debug, Default)]
struct StackTable {
    words: Vec<u64>,
    /// Indexed by id (ids count up from 1; an id past [`MAX_STACKS`] is dropped): where the
    /// stack's words start and how many, `EMPTY` for none.
    by_id: Vec<(u32, u32, u64)>,
    /// Stacks held.
    held: usize,
    /// Every distinct stack seen (bounded), so equal stacks get one key across sequence points.
    canon: Canon,
    /// Bumped whenever ids start again (a sequence point, or the table emptied at its bound).
    generation: u32,
}

impl StackTable {
    fn clear(&mut self) {
        self.words.clear();
        self.by_id.clear();
        self.held = 0;
        self.generation = self.generation.wrapping_add(1);
    }

    /// A stack's frames and its key.
    fn get(&self, id: u32) -> Option<(&[u64], u64)> {
        let &(start, len, key) = self.by_id.get(id as usize)?;
        if start == EMPTY {
            return None;
        }
        let start = start as usize;
        Some((self.words.get(start..start.checked_add(len as usize)?)?, key))
    }

    /// A StackBlock's body: every whole stack is kept; a torn one is counted and dropped.
    fn read_block(&mut self, body: Reader<'_>, pointer_size: usize, stats: &mut Stats) -> Result<()> {
        let mut r = body;
        let first = r.u32("a stack block's first id")?;
        let count = r.u32("a stack block's count")?;
        for i in 0..count {
            let size_at = r.offset();
            let size = match r.u32("a stack's size") {
                Ok(s) => s as usize,
                Err(e) => {
                    stats.stacks_dropped = stats.stacks_dropped.saturating_add(u64::from(count.saturating_sub(i)));
                    return Err(e);
                }
            };
            let bytes = match r.bytes(size, "a stack's addresses") {
                Ok(b) => b,
                Err(e) => {
                    stats.stacks_dropped = stats.stacks_dropped.saturating_add(u64::from(count.saturating_sub(i)));
                    return Err(e.with_kind(crate::base::read::ErrorKind::BadTrace));
                }
            };
            if size.checked_rem(pointer_size) != Some(0) {
                stats.stacks_dropped = stats.stacks_dropped.saturating_add(1);
                let _ = size_at;
                continue;
            }
            let n = size.checked_div(pointer_size).unwrap_or(0);
            let id = first.wrapping_add(i);
            if id as usize >= MAX_STACKS {
                stats.stacks_dropped = stats.stacks_dropped.saturating_add(1);
                continue;
            }
            if self.words.len().saturating_add(n) > MAX_STACK_WORDS {
                stats.stacks_dropped = stats.stacks_dropped.saturating_add(self.held as u64);
                self.clear();
                if n > MAX_STACK_WORDS {
                    stats.stacks_dropped = stats.stacks_dropped.saturating_add(1);
                    continue;
                }
            }
            let start = self.words.len();
            if pointer_size == 8 {
                self.words.extend(bytes.chunks_exact(8).map(|c| c.try_into().map(u64::from_le_bytes).unwrap_or(0)));
            } else {
                self.words.extend(bytes.chunks_exact(4).map(|c| c.try_into().map(u32::from_le_bytes).map(u64::from).unwrap_or(0)));
            }
            if self.by_id.len() <= id as usize {
                self.by_id.resize((id as usize).saturating_add(1), (EMPTY, 0, 0));
            }
            let key = match self.words.get(start..) {
                Some(w) => self.canon.key(w).unwrap_or(FRESH | u64::from(self.generation) << 32 | u64::from(id)),
                None => FRESH | u64::from(self.generation) << 32 | u64::from(id),
            };
            let (Ok(start32), Ok(n32), Some(slot)) = (u32::try_from(start), u32::try_from(n), self.by_id.get_mut(id as usize)) else { continue };
            let old = std::mem::replace(slot, (start32, n32, key));
            self.held = self.held.saturating_add(1);
            if old.0 != EMPTY {
                self.held = self.held.saturating_sub(1);
                // An id given twice before a sequence point: the later stack wins (the earlier
                // one's words stay in the arena until the next clear); keys cached for the id
                // are stale, so ids start a new generation.
                self.generation = self.generation.wrapping_add(1);
                stats.stacks_dropped = stats.stacks_dropped.saturating_add(1);
            }
            stats.stacks = stats.stacks.saturating_add(1);
        }
        Ok(())
    }
}

/// Read a trace's ThreadSample events, each with its stack, in file order (the runtime writes
/// each thread's events in order; threads interleave by block). `Err` when the input is no
/// trace at all (its header is wrong or cut); otherwise what was counted, and the fault that
/// ended the stream early beside it (a torn trace: every whole sample before the cut was
/// delivered). A stack block cut or broken inside keeps its whole stacks.
pub fn read_samples<R: Read>(r: R, mut f: impl FnMut(&Sample<'_>)) -> Result<(Stats, Option<Error>)> {
    let mut stats = Stats::default();
    let table = RefCell::new(StackTable::default());
    let side_stats = RefCell::new(Stats::default());
    let (mut samples, mut empty, mut unknown) = (0u64, 0u64, 0u64);
    // Only ThreadSample events reach `on_event` (asked once per metadata record).
    let is_sample = |m: &super::EventMeta| m.event_id == 0 && m.provider == SAMPLE_PROFILER;
    let on_event = |e: &super::Event<'_>| {
        let managed = e.payload.clone().u32("a ThreadSample's type").map(|t| t == SAMPLE_MANAGED).unwrap_or(false);
        let t = table.borrow();
        match t.get(e.stack_id) {
            Some(([], _)) => empty = empty.saturating_add(1),
            Some((frames, stack_key)) => {
                samples = samples.saturating_add(1);
                f(&Sample { thread_id: e.thread_id, timestamp: e.timestamp, frames, managed, stack_key });
            }
            None if e.stack_id == 0 => empty = empty.saturating_add(1),
            None => unknown = unknown.saturating_add(1),
        }
    };
    let on_side = |s: Side<'_>| match s {
        Side::SequencePoint => table.borrow_mut().clear(),
        Side::Stacks { body, pointer_size } => {
            // A torn block keeps its whole stacks; the stream reader reports the cut itself.
            let _ = table.borrow_mut().read_block(body, pointer_size, &mut side_stats.borrow_mut());
        }
    };
    let fault = read_with(r, is_sample, on_event, on_side, &mut stats).err();
    let c = side_stats.into_inner();
    stats.samples = samples;
    stats.empty_samples = empty;
    stats.unknown_stack_ids = unknown;
    stats.stacks = c.stacks;
    stats.stacks_dropped = c.stacks_dropped;
    match fault {
        Some(e) if stats.pointer_size.is_none() && stats.blocks.is_empty() => Err(e),
        fault => Ok((stats, fault)),
    }
}

/// A writer of small `.nettrace` files with samples, for tests and benchmarks (the layout of
/// NetTraceFormat V5 as the runtime writes it: compressed headers, stack blocks, sequence
/// points). Not a general trace writer.
#[doc(hidden)]
#[derive(Debug)]
pub struct TraceWriter<W: std::io::Write> {
    out: W,
    at: u64,
}

impl<W: std::io::Write> TraceWriter<W> {
    /// The magic, the serialization header and the Trace object.
    pub fn new(out: W, pointer_size: u32, sampling_rate_ns: u32, pid: u32) -> std::io::Result<Self> {
        let mut w = TraceWriter { out, at: 0 };
        w.put(b"Nettrace")?;
        w.put(&20i32.to_le_bytes())?;
        w.put(b"!FastSerialization.1")?;
        let mut trace = vec![0u8; 16];
        trace.extend(0u64.to_le_bytes()); // syncTimeQPC
        trace.extend(1_000_000_000u64.to_le_bytes()); // QPC frequency
        for v in [pointer_size, pid, 1, sampling_rate_ns] {
            trace.extend(v.to_le_bytes());
        }
        w.type_header(b"Trace", 4)?;
        w.put(&trace)?;
        w.put(&[6])?;
        Ok(w)
    }

    /// Go on writing blocks after `at` bytes of a trace already in `out` (a whole trace with its
    /// final NullReference byte taken off).
    pub fn resume(out: W, at: u64) -> Self {
        TraceWriter { out, at }
    }

    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.out.write_all(b)?;
        self.at = self.at.saturating_add(b.len() as u64);
        Ok(())
    }

    fn type_header(&mut self, name: &[u8], version: i32) -> std::io::Result<()> {
        self.put(&[5, 5, 1])?;
        self.put(&version.to_le_bytes())?;
        self.put(&version.to_le_bytes())?;
        self.put(&u32::try_from(name.len()).unwrap_or(0).to_le_bytes())?;
        self.put(name)?;
        self.put(&[6])
    }

    /// Any block: type header, size, padding to 4, body, EndObject.
    pub fn block(&mut self, name: &str, body: &[u8]) -> std::io::Result<()> {
        self.type_header(name.as_bytes(), 2)?;
        self.put(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes())?;
        let pad = 4u64.wrapping_sub(self.at & 3) & 3;
        self.put([0u8; 3].get(..pad as usize).unwrap_or(&[]))?;
        self.put(body)?;
        self.put(&[6])
    }

    /// A MetadataBlock naming `(metadata id, provider, event id)`s.
    pub fn metadata(&mut self, events: &[(u32, &str, u32)]) -> std::io::Result<()> {
        let mut body = event_block_header();
        for &(id, provider, event_id) in events {
            let mut p = Vec::new();
            p.extend(id.to_le_bytes());
            p.extend(provider.encode_utf16().chain([0]).flat_map(u16::to_le_bytes));
            p.extend(event_id.to_le_bytes());
            p.extend([0u8, 0]); // empty name
            p.extend(0u64.to_le_bytes());
            p.extend(0u32.to_le_bytes()); // version
            p.extend(4u32.to_le_bytes()); // level
            body.extend([0x80, 0]); // payload size follows; timestamp delta 0
            push_varint(&mut body, p.len() as u64);
            body.extend(p);
        }
        self.block("MetadataBlock", &body)
    }

    /// A StackBlock: stacks `first..` in order, each leaf first, at the pointer size given.
    pub fn stacks(&mut self, first: u32, stacks: &[&[u64]], pointer_size: u32) -> std::io::Result<()> {
        self.block("StackBlock", &stack_block(first, stacks, pointer_size))
    }

    /// An EventBlock of events `(metadata id, thread, stack id, timestamp delta, payload)`.
    pub fn events(&mut self, events: &[(u32, u64, u32, u64, &[u8])]) -> std::io::Result<()> {
        let mut body = event_block_header();
        for &(meta, thread, stack, dt, payload) in events {
            body.push(0x01 | 0x04 | 0x08 | 0x80);
            push_varint(&mut body, u64::from(meta));
            push_varint(&mut body, thread);
            push_varint(&mut body, u64::from(stack));
            push_varint(&mut body, dt);
            push_varint(&mut body, payload.len() as u64);
            body.extend(payload);
        }
        self.block("EventBlock", &body)
    }

    /// A sequence point: stack ids start again from 1 after it.
    pub fn sequence_point(&mut self) -> std::io::Result<()> {
        let mut body = 0u64.to_le_bytes().to_vec();
        body.extend(0u32.to_le_bytes());
        self.block("SPBlock", &body)
    }

    /// The NullReference that ends the stream; the sink back.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.put(&[1])?;
        Ok(self.out)
    }
}

/// A StackBlock's body.
#[doc(hidden)]
pub fn stack_block(first: u32, stacks: &[&[u64]], pointer_size: u32) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(first.to_le_bytes());
    body.extend(u32::try_from(stacks.len()).unwrap_or(u32::MAX).to_le_bytes());
    for s in stacks {
        body.extend(u32::try_from(s.len().saturating_mul(pointer_size as usize)).unwrap_or(u32::MAX).to_le_bytes());
        for &a in s.iter() {
            if pointer_size == 4 {
                // A 4-byte process's addresses: the low half, as its stacks hold them.
                body.extend(u32::try_from(a & u64::from(u32::MAX)).unwrap_or(u32::MAX).to_le_bytes());
            } else {
                body.extend(a.to_le_bytes());
            }
        }
    }
    body
}

fn event_block_header() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(20u16.to_le_bytes());
    b.extend(1u16.to_le_bytes()); // compressed headers
    b.extend(0u64.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7F) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

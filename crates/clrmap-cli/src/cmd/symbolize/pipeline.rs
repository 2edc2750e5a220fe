//! `symbolize`'s two halves on two threads: one reads the addresses and looks each one up, the
//! other writes the answers. On a stream of addresses writing the answers (JSON above all) costs
//! about as much as finding them, so with two cores free the stream takes the longer half's time,
//! not the sum. The answers stay in input order, and every flush point of the one-thread loop
//! (no more input waiting, a bad input, the end) is kept, in order, by the writing half.

use std::io::Write;
use std::ops::Range;
use std::sync::mpsc::{Receiver, SyncSender};

use clrmap::symbolizer::Frame;

use super::Batched;

/// Answers handed over at once: enough that handing over costs nothing next to the answers, few
/// enough that memory stays small (a [`Batch`] of frames is some 100 KiB).
const FRAMES_PER_BATCH: usize = 1024;

/// Bytes of written answers (errors, inlined or context answers) handed over at once.
const BYTES_PER_BATCH: usize = 1 << 16;

/// Batches in flight: the reading half waits when the writing half is this far behind.
pub(super) const BATCHES_IN_FLIGHT: usize = 4;

/// One thing for the writing half to do, in order.
enum Item<'s> {
    /// An answer in `write_frame`'s plain layout.
    Frame(Frame<'s>),
    /// Bytes already written (these bytes of [`Batch::bytes`]).
    Bytes(Range<usize>),
    /// Pass everything so far on to the output and flush it.
    Flush,
    /// Flush, then print this line on stderr (so that a reader of both sees them in order).
    Stderr(String),
}

/// What the reading half hands over at once.
pub(super) struct Batch<'s> {
    items: Vec<Item<'s>>,
    bytes: Vec<u8>,
}

impl Batch<'_> {
    fn new() -> Self {
        Batch { items: Vec::with_capacity(FRAMES_PER_BATCH), bytes: Vec::new() }
    }

    fn full(&self) -> bool {
        self.items.len() >= FRAMES_PER_BATCH || self.bytes.len() >= BYTES_PER_BATCH
    }
}

/// The reading half's output: answers gathered into batches for the writing half.
pub(super) struct Pipe<'s> {
    batch: Batch<'s>,
    to: SyncSender<Batch<'s>>,
}

impl<'s> Pipe<'s> {
    pub(super) fn new(to: SyncSender<Batch<'s>>) -> Self {
        Pipe { batch: Batch::new(), to }
    }

    /// One answer in the plain layout.
    pub(super) fn frame(&mut self, f: Frame<'s>) -> std::io::Result<()> {
        self.push(Item::Frame(f))
    }

    /// A line for stderr, printed after every answer before it has reached the output.
    pub(super) fn stderr(&mut self, line: String) -> std::io::Result<()> {
        self.batch.items.push(Item::Stderr(line));
        self.send()
    }

    fn push(&mut self, item: Item<'s>) -> std::io::Result<()> {
        self.batch.items.push(item);
        if self.batch.full() {
            self.send()?;
        }
        Ok(())
    }

    /// Hand the batch over, if it holds anything.
    pub(super) fn send(&mut self) -> std::io::Result<()> {
        if self.batch.items.is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut self.batch, Batch::new());
        // The writing half stops only on an error of its own, which is the one reported.
        self.to.send(batch).map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the answers' writer stopped"))
    }
}

impl Write for Pipe<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let start = self.batch.bytes.len();
        self.batch.bytes.extend_from_slice(bytes);
        let end = self.batch.bytes.len();
        // Bytes written one after another are one item.
        match self.batch.items.last_mut() {
            Some(Item::Bytes(range)) if range.end == start => range.end = end,
            _ => self.batch.items.push(Item::Bytes(start..end)),
        }
        if self.batch.full() {
            self.send()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.batch.items.push(Item::Flush);
        self.send()
    }
}

/// The writing half: every batch's items, in order, into `out`, until the reading half is done
/// (or an error writing, which is returned at once).
pub(super) fn write_all(from: Receiver<Batch<'_>>, out: &mut Batched<'_>, json: bool) -> std::io::Result<()> {
    for batch in from {
        for item in &batch.items {
            match item {
                Item::Frame(f) => out.frame(f, json)?,
                Item::Bytes(range) => out.write_all(batch.bytes.get(range.clone()).unwrap_or_default())?,
                Item::Flush => out.flush()?,
                Item::Stderr(line) => {
                    out.flush()?;
                    eprintln!("{line}");
                }
            }
        }
    }
    Ok(())
}

//! The nettrace container followed as bytes stream by, for a diagnostics session: where the last
//! whole object ended, so a session cut short is saved as a valid trace of every whole block.
//!
//! The push-driven twin of `stream`'s reader: the same container (`container`), the same
//! version rule, fed in chunks of any size instead of pulling from a `Read`.

use super::container::{block_padding, check_type_version, MAX_BLOCK, MAX_TYPE_NAME, PRELUDE, TAG_BEGIN_PRIVATE_OBJECT, TAG_END_OBJECT, TAG_NULL, TRACE_BODY};

/// Follows the nettrace container's objects as bytes stream by, without keeping them: where the
/// last whole object (the header, the Trace object, a block) ended, and whether the stream's
/// closing NullReference tag came. A file cut at [`Framer::whole`] and given that tag is a valid
/// trace holding every whole block received.
#[derive(Debug)]
pub struct Framer {
    offset: u64,
    whole: u64,
    phase: Phase,
    /// Bytes of the current fixed-size part.
    pending: Vec<u8>,
    fault: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// `Nettrace`, i32 20, `!FastSerialization.1`.
    Prelude,
    /// BeginPrivateObject or the final NullReference.
    Tag,
    /// The type: BeginPrivateObject, NullReference, i32 version, i32 min version, i32 name length.
    TypeFixed,
    /// The type's name and its EndObject; the type's version and minimum reader version, and the
    /// offset of the version.
    TypeName(usize, i32, i32, u64),
    /// The Trace object's 48 bytes and EndObject.
    TraceBody,
    /// A block's i32 size.
    BlockSize,
    /// Padding and body, skipped.
    Skip(u64),
    /// The object's EndObject.
    End,
    /// The NullReference came: the stream is complete.
    Done,
    /// Not a nettrace: nothing more is followed.
    Broken,
}

impl Default for Framer {
    fn default() -> Self {
        Framer { offset: 0, whole: 0, phase: Phase::Prelude, pending: Vec::new(), fault: None }
    }
}

impl Framer {
    /// How many bytes the current phase still needs, beyond `pending`.
    fn need(&self) -> usize {
        let want = match self.phase {
            Phase::Prelude => PRELUDE.len(),
            Phase::Tag | Phase::End => 1,
            // BeginPrivateObject, NullReference, version, minimum reader version, name length.
            Phase::TypeFixed => 14,
            Phase::TypeName(n, ..) => n.saturating_add(1),
            Phase::TraceBody => TRACE_BODY.saturating_add(1),
            Phase::BlockSize => 4,
            Phase::Skip(_) | Phase::Done | Phase::Broken => 0,
        };
        want.saturating_sub(self.pending.len())
    }

    /// Follow these bytes, the next of the stream.
    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            match self.phase {
                Phase::Done | Phase::Broken => {
                    self.offset = self.offset.saturating_add(data.len() as u64);
                    return;
                }
                Phase::Skip(n) => {
                    let take = usize::try_from(n).unwrap_or(usize::MAX).min(data.len());
                    self.offset = self.offset.saturating_add(take as u64);
                    data = data.get(take..).unwrap_or(&[]);
                    let left = n.saturating_sub(take as u64);
                    self.phase = if left == 0 { Phase::End } else { Phase::Skip(left) };
                }
                _ => {
                    let take = self.need().min(data.len());
                    let (head, rest) = data.split_at(take);
                    self.pending.extend_from_slice(head);
                    self.offset = self.offset.saturating_add(take as u64);
                    data = rest;
                    if self.need() == 0 {
                        self.step();
                    }
                }
            }
        }
    }

    fn fail(&mut self, what: &str) {
        self.fault = Some(format!("{what} at offset {}", self.offset));
        self.phase = Phase::Broken;
    }

    /// A fixed part is complete: check it and move on.
    fn step(&mut self) {
        let part = std::mem::take(&mut self.pending);
        match self.phase {
            Phase::Prelude => {
                if part != PRELUDE {
                    return self.fail("the stream does not start with Nettrace and !FastSerialization.1");
                }
                self.whole = self.offset;
                self.phase = Phase::Tag;
            }
            Phase::Tag => match part.first() {
                Some(&TAG_NULL) => {
                    self.whole = self.offset;
                    self.phase = Phase::Done;
                }
                Some(&TAG_BEGIN_PRIVATE_OBJECT) => self.phase = Phase::TypeFixed,
                _ => self.fail("BeginPrivateObject or NullReference"),
            },
            Phase::TypeFixed => {
                let (version, min_reader, len) = match part.as_slice() {
                    [TAG_BEGIN_PRIVATE_OBJECT, TAG_NULL, v0, v1, v2, v3, m0, m1, m2, m3, a, b, c, d] => {
                        (i32::from_le_bytes([*v0, *v1, *v2, *v3]), i32::from_le_bytes([*m0, *m1, *m2, *m3]), i32::from_le_bytes([*a, *b, *c, *d]))
                    }
                    _ => return self.fail("a type header"),
                };
                // The version is 12 bytes before the end of this part.
                let version_at = self.offset.saturating_sub(12);
                match usize::try_from(len).ok().filter(|&n| n <= MAX_TYPE_NAME) {
                    Some(n) => self.phase = Phase::TypeName(n, version, min_reader, version_at),
                    None => self.fail("a type name of at most 64 bytes"),
                }
            }
            Phase::TypeName(n, version, min_reader, version_at) => {
                if part.get(n) != Some(&TAG_END_OBJECT) {
                    return self.fail("the type's EndObject");
                }
                // The same version rule as the file reader's.
                if let Err(e) = check_type_version(part.get(..n).unwrap_or(&[]), version, min_reader, version_at) {
                    self.fault = Some(e.to_string());
                    self.phase = Phase::Broken;
                    return;
                }
                self.phase = if part.get(..n) == Some(b"Trace".as_slice()) { Phase::TraceBody } else { Phase::BlockSize };
            }
            Phase::TraceBody => {
                if part.last() != Some(&TAG_END_OBJECT) {
                    return self.fail("the Trace object's EndObject");
                }
                self.whole = self.offset;
                self.phase = Phase::Tag;
            }
            Phase::BlockSize => {
                let size = match part.as_slice() {
                    [a, b, c, d] => i32::from_le_bytes([*a, *b, *c, *d]),
                    _ => return self.fail("a block size"),
                };
                match u32::try_from(size).ok().filter(|&s| s <= MAX_BLOCK) {
                    Some(s) => {
                        let pad = block_padding(self.offset);
                        self.phase = Phase::Skip(pad.saturating_add(u64::from(s)));
                        if pad.saturating_add(u64::from(s)) == 0 {
                            self.phase = Phase::End;
                        }
                    }
                    None => self.fail("a block size under 256 MiB"),
                }
            }
            Phase::End => {
                if part.first() != Some(&TAG_END_OBJECT) {
                    return self.fail("the object's EndObject");
                }
                self.whole = self.offset;
                self.phase = Phase::Tag;
            }
            Phase::Skip(_) | Phase::Done | Phase::Broken => {}
        }
    }

    /// Bytes followed.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Where the last whole object ended (after the final NullReference once complete).
    pub fn whole(&self) -> u64 {
        self.whole
    }

    /// True when the stream's closing NullReference came.
    pub fn complete(&self) -> bool {
        self.phase == Phase::Done
    }

    /// What was not a nettrace, if anything.
    pub fn fault(&self) -> Option<&str> {
        self.fault.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &[u8], body: &[u8], at: usize) -> Vec<u8> {
        let mut v = vec![5, 5, 1];
        // As the runtimes write: Trace 4 (min reader 4), blocks 2 (min reader 2).
        let version: i32 = if name == b"Trace" { 4 } else { 2 };
        v.extend_from_slice(&version.to_le_bytes());
        v.extend_from_slice(&version.to_le_bytes());
        v.extend_from_slice(&(name.len() as i32).to_le_bytes());
        v.extend_from_slice(name);
        v.push(6);
        if name == b"Trace" {
            v.extend_from_slice(&[0; 48]);
        } else {
            v.extend_from_slice(&(body.len() as i32).to_le_bytes());
            let pad = (4 - (at + v.len()) % 4) % 4;
            v.extend(std::iter::repeat_n(0, pad));
            v.extend_from_slice(body);
        }
        v.push(6);
        v
    }

    #[test]
    fn the_framer_refuses_a_version_above_the_newest_known() {
        // The same rule as the file reader's: a Trace object of version 5 stops the framer.
        let mut t = PRELUDE.to_vec();
        t.extend_from_slice(&[5, 5, 1]);
        t.extend_from_slice(&5i32.to_le_bytes());
        t.extend_from_slice(&4i32.to_le_bytes());
        t.extend_from_slice(&5i32.to_le_bytes());
        t.extend_from_slice(b"Trace\x06");
        let mut f = Framer::default();
        f.feed(&t);
        let fault = f.fault().unwrap();
        assert!(fault.starts_with("unsupported_version at offset 35"), "{fault}");
        assert!(fault.contains("found version 5, the newest known is 4"), "{fault}");
        assert!(!f.complete());
    }

    #[test]
    fn framer_follows_objects_in_any_chunking() {
        let mut t = PRELUDE.to_vec();
        let trace = object(b"Trace", &[], t.len());
        t.extend_from_slice(&trace);
        let after_trace = t.len();
        let block = object(b"EventBlock", &[7; 37], t.len());
        t.extend_from_slice(&block);
        let after_block = t.len();
        t.push(1);
        for chunk in [1, 3, 7, 1000] {
            let mut f = Framer::default();
            let mut wholes = Vec::new();
            for c in t.chunks(chunk) {
                f.feed(c);
                wholes.push(f.whole());
            }
            assert!(f.complete() && f.fault().is_none(), "chunk {chunk}");
            assert_eq!(f.whole(), t.len() as u64);
            assert!(wholes.iter().all(|w| [0, PRELUDE.len(), after_trace, after_block, t.len()].contains(&(*w as usize))));
        }
        // Cut inside the block: the last whole object is the Trace object.
        let mut f = Framer::default();
        f.feed(&t[..after_block - 3]);
        assert_eq!((f.whole(), f.complete()), (after_trace as u64, false));
        // Not a trace.
        let mut f = Framer::default();
        f.feed(b"HTTP/1.1 200 OK\r\n\r\n0123456789abcdef");
        assert!(f.fault().is_some() && f.whole() == 0);
    }
}

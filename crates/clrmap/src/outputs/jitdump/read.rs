//! Reading a jitdump: clrmap's own, or one the runtime wrote (`DOTNET_PerfMapEnabled=1`), to
//! enrich it. Little-endian files only (every .NET platform perf runs on).
//!
//! Like perf, the reader takes every whole record and stops at a torn one (a process killed while
//! writing): the fault is returned as a warning with its offset, not as an error.

use crate::base::read::{Error, ErrorKind};

use super::{FileHeader, LineEntry, HEADER_SIZE, JIT_CODE_DEBUG_INFO, JIT_CODE_LOAD, MAGIC, PREFIX_SIZE, VERSION};

/// A parsed code load (its bytes stay in the file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadInfo {
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// vma.
    pub vma: u64,
    /// Code address.
    pub code_address: u64,
    /// Code size.
    pub code_size: u64,
    /// Code index.
    pub code_index: u64,
    /// Name (lossy UTF-8).
    pub name: String,
}

/// One record: where it is in the file, and what it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Record id (`JIT_CODE_LOAD`, ...).
    pub id: u32,
    /// Timestamp.
    pub timestamp: u64,
    /// Byte range of the whole record in the file.
    pub range: std::ops::Range<usize>,
    /// A code load's fields (`None` for other records, or a malformed code load).
    pub load: Option<LoadInfo>,
    /// A debug-info record's code address and entries.
    pub debug: Option<(u64, Vec<LineEntry>)>,
}

/// A whole jitdump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JitDump {
    /// The header.
    pub header: FileHeader,
    /// The header's size as the file gives it (records start there).
    pub header_size: u32,
    /// Every whole record, in file order.
    pub records: Vec<Record>,
    /// Where reading stopped before the end of the file (a torn record), if it did.
    pub warning: Option<Error>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at.checked_add(4)?).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at.checked_add(8)?).and_then(|s| s.try_into().ok()).map(u64::from_le_bytes)
}

/// A NUL-terminated string at `at`: the text and the offset after the NUL.
fn cstr_at(b: &[u8], at: usize) -> Option<(String, usize)> {
    let rest = b.get(at..)?;
    let n = rest.iter().position(|&c| c == 0)?;
    let s = String::from_utf8_lossy(rest.get(..n)?).into_owned();
    Some((s, at.checked_add(n)?.checked_add(1)?))
}

/// The header, from the file's first bytes (40 are enough) and its length `len`: the header and
/// its size.
pub fn parse_header(bytes: &[u8], len: u64) -> Result<(FileHeader, u32), Error> {
    let magic = u32_at(bytes, 0).ok_or(Error::new(ErrorKind::TruncatedHeader, 0, "a 40-byte jitdump header"))?;
    if magic != MAGIC {
        return Err(Error::new(ErrorKind::BadTrace, 0, "the jitdump magic JiTD (little-endian)"));
    }
    if u32_at(bytes, 4) != Some(VERSION) {
        return Err(Error::new(ErrorKind::UnsupportedVersion, 4, "jitdump version 1"));
    }
    let header_size = u32_at(bytes, 8).ok_or(Error::new(ErrorKind::TruncatedHeader, 8, "a 40-byte jitdump header"))?;
    let fields = (u32_at(bytes, 12), u32_at(bytes, 20), u64_at(bytes, 24), u64_at(bytes, 32));
    let (Some(elf_machine), Some(pid), Some(timestamp), Some(flags)) = fields else {
        return Err(Error::new(ErrorKind::TruncatedHeader, 0, "a 40-byte jitdump header"));
    };
    if header_size < HEADER_SIZE || u64::from(header_size) > len {
        return Err(Error::new(ErrorKind::BadTrace, 8, "a header size of at least 40, within the file"));
    }
    Ok((FileHeader { elf_machine, pid, timestamp, flags }, header_size))
}

/// Parse a jitdump.
pub fn parse(bytes: &[u8]) -> Result<JitDump, Error> {
    let (header, header_size) = parse_header(bytes, bytes.len() as u64)?;
    let mut records = Vec::new();
    let mut at = header_size as usize;
    let mut warning = None;
    while at < bytes.len() {
        let (Some(id), Some(total), Some(timestamp)) = (u32_at(bytes, at), u32_at(bytes, at.saturating_add(4)), u64_at(bytes, at.saturating_add(8))) else {
            warning = Some(Error::new(ErrorKind::Truncated, at as u64, "a whole 16-byte record prefix"));
            break;
        };
        let end = at.checked_add(total as usize).filter(|&e| e <= bytes.len() && total >= PREFIX_SIZE);
        let Some(end) = end else {
            warning = Some(Error::new(ErrorKind::Truncated, at.saturating_add(4) as u64, "a record whose size fits the file"));
            break;
        };
        let body = bytes.get(at..end).unwrap_or(&[]);
        let load = if id == JIT_CODE_LOAD { parse_load(body) } else { None };
        let debug = if id == JIT_CODE_DEBUG_INFO { parse_debug(body) } else { None };
        records.push(Record { id, timestamp, range: at..end, load, debug });
        at = end;
    }
    Ok(JitDump { header, header_size, records, warning })
}

/// What [`scan`] keeps of a record: where it is, and the fields enrichment needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scanned {
    /// Record id (`JIT_CODE_LOAD`, ...).
    pub id: u32,
    /// Timestamp.
    pub timestamp: u64,
    /// Byte range of the whole record in the file.
    pub range: std::ops::Range<u64>,
    /// A well-formed code load's code address and code index (as [`parse`] reads them: the name
    /// ends with a NUL and the code fills the rest of the record); `None` for other records.
    pub load: Option<(u64, u64)>,
}

/// A jitdump as [`scan`] reads it: its header and where each whole record is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedDump {
    /// The header.
    pub header: FileHeader,
    /// The header's size as the file gives it (records start there).
    pub header_size: u32,
    /// Every whole record, in file order.
    pub records: Vec<Scanned>,
    /// Where reading stopped before the end of the file (a torn record), if it did.
    pub warning: Option<Error>,
}

/// Why [`scan`] (or a streaming enrich) failed: the file could not be read, or it is no jitdump.
#[derive(Debug)]
pub enum StreamError {
    /// Reading or writing failed.
    Io(std::io::Error),
    /// The file is not a jitdump clrmap reads (its header): a kind and a location.
    Input(Error),
}

impl From<std::io::Error> for StreamError {
    fn from(e: std::io::Error) -> Self {
        StreamError::Io(e)
    }
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Io(e) => write!(f, "{e}"),
            StreamError::Input(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StreamError {}

/// The longest code-load name [`scan`] looks through for its NUL (a longer one makes the record a
/// malformed code load, as a name with no NUL does).
const MAX_NAME: u64 = 1 << 20;

/// Read exactly `buf.len()` bytes, or as many as there are: the count read.
fn read_full<R: std::io::Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while let Some(rest) = buf.get_mut(n..).filter(|b| !b.is_empty()) {
        match r.read(rest) {
            Ok(0) => break,
            Ok(k) => n = n.saturating_add(k),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Skip `n` bytes; false if the reader ended first.
fn skip<R: std::io::Read>(r: &mut R, n: u64) -> std::io::Result<bool> {
    Ok(std::io::copy(&mut std::io::Read::take(&mut *r, n), &mut std::io::sink())? == n)
}

/// Read a jitdump of `len` bytes from `r` as [`parse`] does, in one pass, keeping only where each
/// record is and what enrichment needs: memory follows the number of records, not the file's
/// size (code bytes and line entries are skipped). A record that claims more bytes than the file
/// has is a torn tail, as in [`parse`].
pub fn scan<R: std::io::Read>(r: &mut R, len: u64) -> Result<ScannedDump, StreamError> {
    use std::io::Read;
    let mut head = [0u8; HEADER_SIZE as usize];
    let n = read_full(r, &mut head)?;
    let (header, header_size) = parse_header(head.get(..n).unwrap_or(&[]), len).map_err(StreamError::Input)?;
    if !skip(r, u64::from(header_size.saturating_sub(HEADER_SIZE)))? {
        return Err(StreamError::Input(Error::new(ErrorKind::BadTrace, 8, "a header size of at least 40, within the file")));
    }
    let mut records = Vec::new();
    let mut at = u64::from(header_size);
    let mut warning = None;
    while at < len {
        let mut prefix = [0u8; PREFIX_SIZE as usize];
        let got = read_full(r, &mut prefix)?;
        let (Some(id), Some(total), Some(timestamp)) = (u32_at(&prefix, 0), u32_at(&prefix, 4), u64_at(&prefix, 8)) else {
            warning = Some(Error::new(ErrorKind::Truncated, at, "a whole 16-byte record prefix"));
            break;
        };
        if got < prefix.len() {
            warning = Some(Error::new(ErrorKind::Truncated, at, "a whole 16-byte record prefix"));
            break;
        }
        let end = at.checked_add(u64::from(total)).filter(|&e| e <= len && total >= PREFIX_SIZE);
        let Some(end) = end else {
            warning = Some(Error::new(ErrorKind::Truncated, at.saturating_add(4), "a record whose size fits the file"));
            break;
        };
        // The rest of the record after its prefix, read as far as needed and then skipped.
        let mut rest = u64::from(total.saturating_sub(PREFIX_SIZE));
        let mut load = None;
        if id == JIT_CODE_LOAD && rest >= 40 {
            let mut fixed = [0u8; 40];
            let got = read_full(r, &mut fixed)?;
            rest = rest.saturating_sub(got as u64);
            // pid, tid, vma, code address, code size, code index.
            if let (Some(code_address), Some(code_size), Some(code_index)) = (u64_at(&fixed, 16), u64_at(&fixed, 24), u64_at(&fixed, 32)) {
                let mut name_len = 0u64;
                let mut found = false;
                let mut byte = [0u8; 1];
                let mut reader = Read::take(&mut *r, rest.min(MAX_NAME));
                // Names are short: a byte at a time through a buffered reader.
                while read_full(&mut reader, &mut byte)? == 1 {
                    name_len = name_len.saturating_add(1);
                    if byte == [0] {
                        found = true;
                        break;
                    }
                }
                rest = rest.saturating_sub(name_len);
                if found && rest == code_size {
                    load = Some((code_address, code_index));
                }
            }
        }
        if !skip(r, rest)? {
            // The file ended before `len`: it shrank while being read.
            warning = Some(Error::new(ErrorKind::Truncated, at.saturating_add(4), "a record whose size fits the file"));
            break;
        }
        records.push(Scanned { id, timestamp, range: at..end, load });
        at = end;
    }
    Ok(ScannedDump { header, header_size, records, warning })
}

fn parse_load(r: &[u8]) -> Option<LoadInfo> {
    let (name, after) = cstr_at(r, 56)?;
    let code_size = u64_at(r, 40)?;
    // The code is the record's last `code_size` bytes, right after the name.
    if (after as u64).checked_add(code_size)? != r.len() as u64 {
        return None;
    }
    Some(LoadInfo { pid: u32_at(r, 16)?, tid: u32_at(r, 20)?, vma: u64_at(r, 24)?, code_address: u64_at(r, 32)?, code_size, code_index: u64_at(r, 48)?, name })
}

fn parse_debug(r: &[u8]) -> Option<(u64, Vec<LineEntry>)> {
    let code_address = u64_at(r, 16)?;
    let count = u64_at(r, 24)?;
    let mut at = 32usize;
    let mut entries = Vec::new();
    for _ in 0..count {
        let address = u64_at(r, at)?;
        let line = u32_at(r, at.checked_add(8)?)?;
        let column = u32_at(r, at.checked_add(12)?)?;
        let (file, next) = cstr_at(r, at.checked_add(16)?)?;
        entries.push(LineEntry { address, line, column, file });
        at = next;
    }
    Some((code_address, entries))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::super::*;
    use super::*;

    #[test]
    fn round_trip_and_torn_tail() {
        let mut f = FileHeader { elf_machine: EM_X86_64, pid: 9, timestamp: 1, flags: 0 }.encode().to_vec();
        let e = vec![LineEntry { address: 0x10, line: 3, column: 5, file: "a.cs".into() }, LineEntry { address: 0x14, line: 3, column: 5, file: "a.cs".into() }];
        f.extend(encode_debug_info(2, 0x10, &e).unwrap());
        let code = [1u8, 2, 3, 4];
        f.extend(encode_code_load(&CodeLoad { timestamp: 2, pid: 9, tid: 10, address: 0x10, code_size: 4, code_index: 1, name: "M", code: Some(&code) }).unwrap());
        let whole = f.len();
        f.extend(encode_code_load(&CodeLoad { timestamp: 3, pid: 9, tid: 10, address: 0x20, code_size: 4, code_index: 2, name: "N", code: None }).unwrap());
        let d = parse(&f).unwrap();
        assert_eq!(d.records.len(), 3);
        assert_eq!(d.records[0].debug.as_ref().unwrap().1, e);
        assert_eq!(d.records[1].load.as_ref().unwrap().name, "M");
        assert_eq!(&f[d.records[1].range.end - 4..d.records[1].range.end], &code);
        assert!(d.warning.is_none());
        for cut in whole + 1..f.len() {
            let d = parse(&f[..cut]).unwrap();
            assert_eq!(d.records.len(), 2);
            assert_eq!(d.warning.unwrap().offset().unwrap() as usize, whole + if cut >= whole + 16 { 4 } else { 0 });
        }
        assert!(parse(&f[..39]).is_err());
    }

    /// `scan` reads what `parse` reads, in one pass over a reader: the same header, records
    /// (ranges, ids, timestamps, well-formed code loads' addresses and indexes) and torn-tail
    /// warning at every cut, and the same header errors.
    #[test]
    fn scan_agrees_with_parse() {
        let mut f = FileHeader { elf_machine: EM_X86_64, pid: 9, timestamp: 1, flags: 0 }.encode().to_vec();
        f[8..12].copy_from_slice(&48u32.to_le_bytes()); // a longer header, as a newer writer's
        f.extend([0xEEu8; 8]);
        let e = vec![LineEntry { address: 0x10, line: 3, column: 5, file: "a.cs".into() }];
        f.extend(encode_debug_info(2, 0x10, &e).unwrap());
        f.extend(encode_code_load(&CodeLoad { timestamp: 2, pid: 9, tid: 10, address: 0x10, code_size: 4, code_index: 1, name: "M", code: Some(&[1, 2, 3, 4]) }).unwrap());
        // A malformed code load (its code size disagrees with its record size), then a good one.
        let mut bad = encode_code_load(&CodeLoad { timestamp: 3, pid: 9, tid: 10, address: 0x30, code_size: 4, code_index: 2, name: "B", code: None }).unwrap();
        bad[40..48].copy_from_slice(&9u64.to_le_bytes());
        f.extend(bad);
        f.extend(encode_code_load(&CodeLoad { timestamp: 4, pid: 9, tid: 10, address: 0x20, code_size: 4, code_index: 3, name: "N", code: None }).unwrap());
        for cut in 0..=f.len() {
            let bytes = &f[..cut];
            let scanned = scan(&mut std::io::Cursor::new(bytes), cut as u64);
            match parse(bytes) {
                Err(e) => assert!(matches!(scanned, Err(StreamError::Input(s)) if s == e), "cut {cut}"),
                Ok(d) => {
                    let s = scanned.unwrap();
                    assert_eq!((s.header, s.header_size, &s.warning), (d.header, d.header_size, &d.warning), "cut {cut}");
                    let from_parse: Vec<Scanned> = d
                        .records
                        .iter()
                        .map(|r| Scanned { id: r.id, timestamp: r.timestamp, range: r.range.start as u64..r.range.end as u64, load: r.load.as_ref().map(|l| (l.code_address, l.code_index)) })
                        .collect();
                    assert_eq!(s.records, from_parse, "cut {cut}");
                }
            }
        }
        let whole = scan(&mut std::io::Cursor::new(&f), f.len() as u64).unwrap();
        assert_eq!(whole.records.iter().map(|r| r.load.map(|l| l.0)).collect::<Vec<_>>(), vec![None, Some(0x10), None, Some(0x20)]);
    }
}

//! Reading a jitdump: clrmap's own, or one the runtime wrote (`DOTNET_PerfMapEnabled=1`), to
//! enrich it. Little-endian files only (every .NET platform perf runs on).
//!
//! Like perf, the reader takes every whole record and stops at a torn one (a process killed while
//! writing): the fault is returned as a warning with its offset, not as an error.

use crate::read::{Error, ErrorKind};

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

/// Parse a jitdump.
pub fn parse(bytes: &[u8]) -> Result<JitDump, Error> {
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
    if header_size < HEADER_SIZE || header_size as usize > bytes.len() {
        return Err(Error::new(ErrorKind::BadTrace, 8, "a header size of at least 40, within the file"));
    }
    let header = FileHeader { elf_machine, pid, timestamp, flags };
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
}

//! Linux perf's jitdump format (`jit-PID.dump`) with source lines, and perf maps
//! (`perf-PID.map`), for .NET code: jitted bodies and ReadyToRun methods alike.
//!
//! The format is Linux `tools/perf/Documentation/jitdump-specification.txt`, as
//! `tools/perf/util/jitdump.c` and `genelf_debug.c` read it (docs/perf.md#format-notes):
//!
//! * a 40-byte header: magic `JiTD` (0x4A695444, native order), version 1, header size, ELF
//!   machine, a reserved word, pid, timestamp, flags;
//! * records with a 16-byte prefix: id, total size, timestamp (CLOCK_MONOTONIC ns, which
//!   `perf record -k 1` records too);
//! * `JIT_CODE_LOAD` (0): pid, tid, vma, code address, code size, code index, the name
//!   (NUL-terminated), then the code bytes. perf finds the bytes at the **end** of the record
//!   (`total_size − code_size`), and other readers right after the name, so a code load is never
//!   padded (the runtime and perf's own JVMTI agent do not pad it either);
//! * `JIT_CODE_DEBUG_INFO` (2): code address, entry count, then entries (address, line,
//!   discriminator, file name NUL-terminated). It applies to the **next** code load, so it is
//!   written just before it. Its size is padded to a multiple of 8 (perf counts entries, not
//!   bytes). clrmap puts the sequence point's column in the discriminator field, which perf
//!   ignores and other readers (`linux-perf-data`, samply) show as the column.
//!
//! perf ends each generated line table at its last entry's address, so every table clrmap
//! writes ends with an entry at the end of the code ([`crate::answers::symbolizer::LineRow`]). Each code
//! load gets its own code index: `perf inject --jit` names its ELF file `jitted-PID-INDEX.so`.
//!
//! [`build`] turns a [`crate::answers::symbolizer::Symbolizer`]'s bodies (a capture or a trace) into records,
//! writes a whole file, enriches a jitdump the runtime wrote (`DOTNET_PerfMapEnabled=1`) and writes
//! perf maps. The live profiler (`crates/clrmap-profiler`) encodes its records with the same
//! functions.

pub mod build;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod fuzzcheck;
pub mod read;

use crate::answers::symbolizer::LineRow;

/// The header's magic, `JiTD` as a native-order `u32`.
pub const MAGIC: u32 = 0x4A69_5444;
/// The format version.
pub const VERSION: u32 = 1;
/// The header's size.
pub const HEADER_SIZE: u32 = 40;
/// A record's common prefix: id, total size, timestamp.
pub const PREFIX_SIZE: u32 = 16;
/// `JIT_CODE_LOAD`.
pub const JIT_CODE_LOAD: u32 = 0;
/// `JIT_CODE_MOVE`.
pub const JIT_CODE_MOVE: u32 = 1;
/// `JIT_CODE_DEBUG_INFO`.
pub const JIT_CODE_DEBUG_INFO: u32 = 2;
/// `JIT_CODE_CLOSE`.
pub const JIT_CODE_CLOSE: u32 = 3;
/// `JIT_CODE_UNWINDING_INFO`.
pub const JIT_CODE_UNWINDING_INFO: u32 = 4;
/// ELF `e_machine` of x86-64.
pub const EM_X86_64: u32 = 62;
/// ELF `e_machine` of AArch64.
pub const EM_AARCH64: u32 = 183;
/// The fixed part of a code load after the prefix: pid, tid, vma, code address, size, index.
const LOAD_FIXED: u32 = 40;

/// The ELF machine of the host this library was built for (x86-64 or AArch64; 0 otherwise).
pub const fn host_machine() -> u32 {
    if cfg!(target_arch = "x86_64") {
        EM_X86_64
    } else if cfg!(target_arch = "aarch64") {
        EM_AARCH64
    } else {
        0
    }
}

/// The file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// ELF `e_machine` of the code ([`EM_X86_64`], [`EM_AARCH64`]).
    pub elf_machine: u32,
    /// The process that ran the code: perf only reads `jit-PID.dump` for the process that
    /// mapped it.
    pub pid: u32,
    /// When the file was started (CLOCK_MONOTONIC ns).
    pub timestamp: u64,
    /// Flags (bit 0: timestamps are the CPU's; clrmap writes 0, CLOCK_MONOTONIC).
    pub flags: u64,
}

impl FileHeader {
    /// The 40 bytes of the header, little-endian (the only order clrmap writes).
    pub fn encode(&self) -> [u8; HEADER_SIZE as usize] {
        let mut b = [0u8; HEADER_SIZE as usize];
        let words = [MAGIC, VERSION, HEADER_SIZE, self.elf_machine, 0, self.pid];
        for (chunk, w) in b.chunks_exact_mut(4).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        for (chunk, w) in b.chunks_exact_mut(8).skip(3).zip([self.timestamp, self.flags]) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        b
    }
}

/// One entry of a debug-info record: from `address` on, the code is `file:line`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LineEntry {
    /// Absolute address.
    pub address: u64,
    /// Line (0: none).
    pub line: u32,
    /// The discriminator field: clrmap writes the column.
    pub column: u32,
    /// The document name (a NUL in it ends it).
    pub file: String,
}

/// A body's line table as debug-info entries at absolute addresses.
pub fn line_entries(code_start: u64, rows: &[LineRow]) -> Vec<LineEntry> {
    rows.iter().map(|r| LineEntry { address: code_start.saturating_add(u64::from(r.native_offset)), line: r.line, column: r.column, file: r.file.clone() }).collect()
}

/// A code load to encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeLoad<'a> {
    /// Record timestamp (CLOCK_MONOTONIC ns).
    pub timestamp: u64,
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// The code's address (clrmap writes it as both vma and code address, as the runtime does).
    pub address: u64,
    /// The code's size.
    pub code_size: u64,
    /// A number unique in the file.
    pub code_index: u64,
    /// The symbol name (a NUL in it ends it).
    pub name: &'a str,
    /// The code bytes: `code_size` bytes, or `None` for zeros (a writer without the process's
    /// memory: perf then shows samples and lines, but `perf annotate` shows no instructions).
    pub code: Option<&'a [u8]>,
}

fn until_nul(s: &str) -> &[u8] {
    let b = s.as_bytes();
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    b.get(..end).unwrap_or(b)
}

fn push_prefix(out: &mut Vec<u8>, id: u32, total: u32, timestamp: u64) {
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(&timestamp.to_le_bytes());
}

/// Encode a `JIT_CODE_LOAD` record, unpadded. `None` when it would not fit the 32-bit size field,
/// or when the given bytes are not `code_size` long.
pub fn encode_code_load(load: &CodeLoad<'_>) -> Option<Vec<u8>> {
    let name = until_nul(load.name);
    if load.code.is_some_and(|c| c.len() as u64 != load.code_size) {
        return None;
    }
    let size = u64::from(PREFIX_SIZE + LOAD_FIXED).checked_add(name.len() as u64)?.checked_add(1)?.checked_add(load.code_size)?;
    let total = u32::try_from(size).ok()?;
    let mut out = Vec::with_capacity(total as usize);
    push_prefix(&mut out, JIT_CODE_LOAD, total, load.timestamp);
    out.extend_from_slice(&load.pid.to_le_bytes());
    out.extend_from_slice(&load.tid.to_le_bytes());
    for w in [load.address, load.address, load.code_size, load.code_index] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.extend_from_slice(name);
    out.push(0);
    match load.code {
        Some(code) => out.extend_from_slice(code),
        None => out.resize(total as usize, 0),
    }
    Some(out)
}

/// Encode a `JIT_CODE_DEBUG_INFO` record for the code at `code_address`, padded to 8 bytes.
/// `None` when it would not fit the 32-bit size field.
pub fn encode_debug_info(timestamp: u64, code_address: u64, entries: &[LineEntry]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    push_prefix(&mut out, JIT_CODE_DEBUG_INFO, 0, timestamp);
    out.extend_from_slice(&code_address.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for e in entries {
        out.extend_from_slice(&e.address.to_le_bytes());
        out.extend_from_slice(&e.line.to_le_bytes());
        out.extend_from_slice(&e.column.to_le_bytes());
        out.extend_from_slice(until_nul(&e.file));
        out.push(0);
    }
    let padded = out.len().checked_add(7)? & !7;
    out.resize(padded, 0);
    let total = u32::try_from(out.len()).ok()?;
    if let Some(field) = out.get_mut(4..8) {
        field.copy_from_slice(&total.to_le_bytes());
    }
    Some(out)
}

/// One line of a perf map: `START SIZE NAME` in hex without `0x`, as perf reads
/// `/tmp/perf-PID.map`. Newlines in the name become spaces.
pub fn perf_map_line(start: u64, size: u64, name: &str) -> String {
    let name: String = name.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }).collect();
    format!("{start:x} {size:x} {name}\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn header_layout() {
        let h = FileHeader { elf_machine: EM_X86_64, pid: 0x1234, timestamp: 0x0102_0304_0506_0708, flags: 0 }.encode();
        assert_eq!(&h[..4], b"DTiJ");
        assert_eq!(u32::from_le_bytes(h[8..12].try_into().unwrap()), 40);
        assert_eq!(u32::from_le_bytes(h[12..16].try_into().unwrap()), 62);
        assert_eq!(u32::from_le_bytes(h[20..24].try_into().unwrap()), 0x1234);
        assert_eq!(u64::from_le_bytes(h[24..32].try_into().unwrap()), 0x0102_0304_0506_0708);
    }

    #[test]
    fn code_load_puts_the_code_at_the_end_unpadded() {
        let code = [0xC3u8, 0x90, 0x90];
        let r = encode_code_load(&CodeLoad { timestamp: 5, pid: 1, tid: 2, address: 0x1000, code_size: 3, code_index: 7, name: "A::B\0junk", code: Some(&code) }).unwrap();
        assert_eq!(r.len(), 16 + 40 + 5 + 3);
        assert_eq!(u32::from_le_bytes(r[4..8].try_into().unwrap()) as usize, r.len());
        assert_eq!(&r[r.len() - 3..], &code);
        assert_eq!(&r[56..61], b"A::B\0");
        assert!(encode_code_load(&CodeLoad { code: Some(&code[..2]), ..CodeLoad { timestamp: 0, pid: 0, tid: 0, address: 0, code_size: 3, code_index: 0, name: "", code: None } }).is_none());
    }

    #[test]
    fn debug_info_is_padded_and_counts_entries() {
        let e = vec![LineEntry { address: 0x1000, line: 10, column: 9, file: "/_/a.cs".into() }, LineEntry { address: 0x1010, line: 10, column: 9, file: "/_/a.cs".into() }];
        let r = encode_debug_info(1, 0x1000, &e).unwrap();
        assert_eq!(r.len() % 8, 0);
        assert_eq!(u32::from_le_bytes(r[4..8].try_into().unwrap()) as usize, r.len());
        assert_eq!(u64::from_le_bytes(r[24..32].try_into().unwrap()), 2);
    }

    #[test]
    fn perf_map_line_is_hex() {
        assert_eq!(perf_map_line(0x7f00, 0x20, "A::B\nC"), "7f00 20 A::B C\n");
    }
}

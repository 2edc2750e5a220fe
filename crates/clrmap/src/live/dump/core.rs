//! An ELF core file (`ET_CORE`) over its bytes, which the caller maps: the process's memory as
//! the `PT_LOAD` segments hold it, each thread's registers (`NT_PRSTATUS`) and the files the
//! process had mapped (`NT_FILE`).
//!
//! The layouts are the Linux kernel's (`include/uapi/linux/elfcore.h`, `fs/binfmt_elf.c`): a core
//! has one `PT_NOTE` segment of notes named `CORE`, and one `PT_LOAD` segment per memory mapping,
//! whose `p_filesz` is what was written (zero or less than `p_memsz` where the dumper skipped
//! memory). createdump writes the same layout.
//!
//! Every read of process memory is bounded by the segment that holds it; a read of memory the
//! core lacks fails with the address, and the first few such ranges are kept for the report.

use std::cell::RefCell;

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;

use crate::base::read::{Error, ErrorKind, Result};

/// The most threads read from the notes: a core with more is hostile or beyond what a report
/// lists.
const MAX_THREADS: usize = 100_000;
/// The most `NT_FILE` entries kept.
const MAX_FILES: usize = 1_000_000;
/// The most missing ranges remembered for notes.
const MAX_MISSING: usize = 64;

/// The machine a core comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Machine {
    /// x86-64.
    X64,
    /// AArch64.
    Arm64,
    /// Another machine (its `e_machine`).
    Other(u16),
}

/// One thread's registers from its `NT_PRSTATUS` note.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreThread {
    /// The thread's id (`pr_pid`, the kernel's TID).
    pub tid: u32,
    /// The signal that stopped it (`pr_cursig`).
    pub signal: u16,
    /// The general registers in the kernel's `user_regs_struct` order (x86-64: r15, r14, r13, r12,
    /// rbp, rbx, r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi, orig_rax, rip, cs, eflags, rsp, ...;
    /// AArch64: x0-x30, sp, pc, pstate).
    pub regs: Vec<u64>,
}

impl CoreThread {
    /// The instruction pointer, stack pointer and frame pointer, on a machine this reader knows.
    pub fn ip_sp_fp(&self, machine: Machine) -> Option<(u64, u64, u64)> {
        let r = |i: usize| self.regs.get(i).copied();
        match machine {
            Machine::X64 => Some((r(16)?, r(19)?, r(4)?)),
            Machine::Arm64 => Some((r(32)?, r(31)?, r(29)?)),
            Machine::Other(_) => None,
        }
    }
}

/// A file mapping from the `NT_FILE` note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file, in bytes.
    pub file_offset: u64,
    /// The file's path as the process saw it.
    pub path: String,
}

/// One `PT_LOAD` segment: `[vaddr, vaddr + memsz)`, of which the first `filesz` bytes are at
/// `offset` in the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
}

/// An ELF core over its bytes.
#[derive(Debug)]
pub struct Core<'a> {
    data: &'a [u8],
    machine: Machine,
    segments: Vec<Segment>,
    threads: Vec<CoreThread>,
    files: Vec<FileMapping>,
    notes: Vec<String>,
    missing: RefCell<Vec<(u64, u64)>>,
}

impl<'a> Core<'a> {
    /// Parse a core's headers and notes. Memory is read later, on demand.
    pub fn parse(data: &'a [u8]) -> Result<Self> {
        let bad = |what: &'static str| Error::new(ErrorKind::BadImage, 0, what);
        let header = elf::FileHeader64::<Endianness>::parse(data).map_err(|_| bad("a 64-bit ELF header"))?;
        let endian = header.endian().map_err(|_| bad("a known ELF byte order"))?;
        if header.e_type(endian) != elf::ET_CORE {
            return Err(bad("an ELF core file (e_type ET_CORE)"));
        }
        let machine = match header.e_machine(endian) {
            elf::EM_X86_64 => Machine::X64,
            elf::EM_AARCH64 => Machine::Arm64,
            m => Machine::Other(m),
        };
        let phdrs = header.program_headers(endian, data).map_err(|_| Error::new(ErrorKind::BadImage, header.e_phoff(endian), "program headers inside the file"))?;
        let mut core = Core { data, machine, segments: Vec::new(), threads: Vec::new(), files: Vec::new(), notes: Vec::new(), missing: RefCell::new(Vec::new()) };
        for ph in phdrs {
            match ph.p_type(endian) {
                elf::PT_LOAD => {
                    let seg = Segment { vaddr: ph.p_vaddr(endian), memsz: ph.p_memsz(endian), offset: ph.p_offset(endian), filesz: ph.p_filesz(endian).min(ph.p_memsz(endian)) };
                    if seg.memsz > 0 {
                        core.segments.push(seg);
                    }
                }
                elf::PT_NOTE => core.read_notes(ph, endian),
                _ => {}
            }
        }
        core.segments.sort_by_key(|s| s.vaddr);
        // Overlapping segments would make a read's answer depend on which one is found; a core
        // never has them, so the later one is dropped.
        let mut end = 0u64;
        core.segments.retain(|s| {
            let keep = s.vaddr >= end;
            if keep {
                end = s.vaddr.saturating_add(s.memsz);
            }
            keep
        });
        let truncated = core.segments.iter().filter(|s| s.offset.saturating_add(s.filesz) > data.len() as u64).count();
        if truncated > 0 {
            core.notes.push(format!("the core is truncated: {truncated} memory segment(s) end past its {} bytes", data.len()));
        }
        Ok(core)
    }

    fn read_notes(&mut self, ph: &elf::ProgramHeader64<Endianness>, endian: Endianness) {
        let Ok(Some(mut notes)) = ph.notes(endian, self.data) else {
            self.notes.push(format!("a note segment at offset {} cannot be read", ph.p_offset(endian)));
            return;
        };
        loop {
            let note = match notes.next() {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(_) => {
                    self.notes.push("the core's notes end in a malformed note".to_owned());
                    break;
                }
            };
            if note.name() != b"CORE" {
                continue;
            }
            match note.n_type(endian) {
                elf::NT_PRSTATUS if self.threads.len() < MAX_THREADS => {
                    if let Some(t) = prstatus(note.desc(), self.machine, endian) {
                        self.threads.push(t);
                    }
                }
                elf::NT_FILE => self.files = nt_file(note.desc(), endian),
                _ => {}
            }
        }
    }

    /// The machine.
    pub fn machine(&self) -> Machine {
        self.machine
    }

    /// The threads, in note order (the first is the one that crashed, in kernel cores).
    pub fn threads(&self) -> &[CoreThread] {
        &self.threads
    }

    /// The file mappings, in note order (ascending addresses).
    pub fn files(&self) -> &[FileMapping] {
        &self.files
    }

    /// What the headers say is missing or malformed.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The first ranges of memory that reads asked for and the core lacks.
    pub fn missing(&self) -> Vec<(u64, u64)> {
        self.missing.borrow().clone()
    }

    /// The size of the process memory the core describes (the sum of its segments' sizes).
    pub fn memory_size(&self) -> u64 {
        self.segments.iter().fold(0u64, |a, s| a.saturating_add(s.memsz))
    }

    /// The mapping that holds `addr`.
    pub fn file_at(&self, addr: u64) -> Option<&FileMapping> {
        self.files.iter().find(|f| f.start <= addr && addr < f.end)
    }

    fn segment(&self, addr: u64) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.vaddr <= addr);
        let s = self.segments.get(i.checked_sub(1)?)?;
        (addr.wrapping_sub(s.vaddr) < s.memsz).then_some(s)
    }

    fn note_missing(&self, addr: u64, len: u64) {
        let Ok(mut m) = self.missing.try_borrow_mut() else { return };
        let end = addr.saturating_add(len);
        if m.iter().any(|&(a, e)| a <= addr && end <= e) || m.len() >= MAX_MISSING {
            return;
        }
        m.push((addr, end));
    }

    /// The bytes `[addr, addr + len)` when one segment of the core holds them all, without a copy.
    pub fn bytes(&self, addr: u64, len: usize) -> Result<&'a [u8]> {
        let missing = || Error::at_address(ErrorKind::Truncated, addr, "process memory that the core holds");
        let Some(seg) = self.segment(addr) else {
            self.note_missing(addr, len as u64);
            return Err(missing());
        };
        let rel = addr.wrapping_sub(seg.vaddr);
        let end = rel.checked_add(len as u64).ok_or_else(missing)?;
        if end > seg.filesz {
            self.note_missing(addr, len as u64);
            return Err(missing());
        }
        let start = seg.offset.checked_add(rel).and_then(|o| usize::try_from(o).ok()).ok_or_else(missing)?;
        let stop = start.checked_add(len).ok_or_else(missing)?;
        self.data.get(start..stop).ok_or_else(|| {
            self.note_missing(addr, len as u64);
            missing()
        })
    }

    /// The bytes from `addr` to the end of the segment that holds it, at most `max`: for a blob
    /// whose length only its own encoding tells.
    pub fn bytes_up_to(&self, addr: u64, max: usize) -> Result<&'a [u8]> {
        let Some(seg) = self.segment(addr) else {
            self.note_missing(addr, 1);
            return Err(Error::at_address(ErrorKind::Truncated, addr, "process memory that the core holds"));
        };
        let left = seg.filesz.saturating_sub(addr.wrapping_sub(seg.vaddr));
        self.bytes(addr, usize::try_from(left).unwrap_or(usize::MAX).min(max))
    }

    /// Fill `buf` from `addr`, across segments where it spans several.
    pub fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        if let Ok(b) = self.bytes(addr, buf.len()) {
            buf.copy_from_slice(b);
            return Ok(());
        }
        let mut at = addr;
        let mut rest = &mut buf[..];
        while !rest.is_empty() {
            let seg = self.segment(at).ok_or_else(|| Error::at_address(ErrorKind::Truncated, at, "process memory that the core holds"))?;
            let left = seg.filesz.saturating_sub(at.wrapping_sub(seg.vaddr));
            let n = usize::try_from(left).unwrap_or(usize::MAX).min(rest.len());
            if n == 0 {
                self.note_missing(at, rest.len() as u64);
                return Err(Error::at_address(ErrorKind::Truncated, at, "process memory that the core holds"));
            }
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
            head.copy_from_slice(self.bytes(at, n)?);
            rest = tail;
            at = at.checked_add(n as u64).ok_or_else(|| Error::at_address(ErrorKind::Truncated, addr, "an address range that does not wrap"))?;
        }
        Ok(())
    }

    /// A little-endian `u64` at `addr`.
    pub fn u64(&self, addr: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read_into(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// A little-endian `u32` at `addr`.
    pub fn u32(&self, addr: u64) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read_into(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// A little-endian `u16` at `addr`.
    pub fn u16(&self, addr: u64) -> Result<u16> {
        let mut b = [0u8; 2];
        self.read_into(addr, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    /// A byte at `addr`.
    pub fn u8(&self, addr: u64) -> Result<u8> {
        let mut b = [0u8; 1];
        self.read_into(addr, &mut b)?;
        Ok(b[0])
    }

    /// A NUL-terminated byte string at `addr`, of at most `max` bytes (without the NUL).
    pub fn c_string(&self, addr: u64, max: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = addr;
        // Read in pieces that stay inside one page, so a string near the end of a segment does
        // not fail for bytes past its NUL.
        while out.len() < max {
            let chunk = usize::try_from(4096u64.wrapping_sub(at & 0xFFF)).unwrap_or(4096);
            let chunk = chunk.min(max.saturating_sub(out.len()));
            let b = self.bytes(at, chunk)?;
            if let Some(n) = b.iter().position(|&c| c == 0) {
                out.extend_from_slice(b.get(..n).unwrap_or_default());
                return Ok(out);
            }
            out.extend_from_slice(b);
            at = at.checked_add(chunk as u64).ok_or_else(|| Error::at_address(ErrorKind::Truncated, addr, "a string that ends"))?;
        }
        Err(Error::at_address(ErrorKind::OutOfRange, addr, "a string within its length limit"))
    }

    /// A NUL-terminated UTF-16LE string at `addr`, of at most `max` code units.
    pub fn utf16_string(&self, addr: u64, max: usize) -> Result<String> {
        let mut units = Vec::new();
        let mut at = addr;
        while units.len() < max {
            let u = self.u16(at)?;
            if u == 0 {
                return Ok(String::from_utf16_lossy(&units));
            }
            units.push(u);
            at = at.checked_add(2).ok_or_else(|| Error::at_address(ErrorKind::Truncated, addr, "a string that ends"))?;
        }
        Err(Error::at_address(ErrorKind::OutOfRange, addr, "a string within its length limit"))
    }
}

/// `struct elf_prstatus` (64-bit): `pr_pid` at 32, `pr_cursig` at 12, `pr_reg` at 112.
fn prstatus(desc: &[u8], machine: Machine, endian: Endianness) -> Option<CoreThread> {
    let word = |at: usize| -> Option<u64> {
        let b: [u8; 8] = desc.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(match endian {
            Endianness::Little => u64::from_le_bytes(b),
            Endianness::Big => u64::from_be_bytes(b),
        })
    };
    let tid = u32::try_from(word(32)? & 0xFFFF_FFFF).ok()?;
    let signal = u16::try_from((word(8)? >> 32) & 0xFFFF).ok()?;
    let count = match machine {
        Machine::X64 => 27,
        Machine::Arm64 => 34,
        Machine::Other(_) => 0,
    };
    let regs = (0..count).map_while(|i: usize| word(112usize.checked_add(i.checked_mul(8)?)?)).collect();
    Some(CoreThread { tid, signal, regs })
}

/// `NT_FILE`: count, page size, `count` triples (start, end, page offset), then `count`
/// NUL-terminated paths (`fs/binfmt_elf.c`, `fill_files_note`).
fn nt_file(desc: &[u8], endian: Endianness) -> Vec<FileMapping> {
    let word = |at: usize| -> Option<u64> {
        let b: [u8; 8] = desc.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(match endian {
            Endianness::Little => u64::from_le_bytes(b),
            Endianness::Big => u64::from_be_bytes(b),
        })
    };
    let (Some(count), Some(page)) = (word(0), word(8)) else { return Vec::new() };
    let count = usize::try_from(count).unwrap_or(usize::MAX).min(MAX_FILES).min(desc.len() / 24);
    let names_at = count.saturating_mul(24).saturating_add(16);
    let mut names = desc.get(names_at..).unwrap_or_default().split(|&b| b == 0);
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let at = i.saturating_mul(24).saturating_add(16);
        let (Some(start), Some(end), Some(pgoff)) = (word(at), word(at.saturating_add(8)), word(at.saturating_add(16))) else { break };
        let Some(name) = names.next() else { break };
        out.push(FileMapping { start, end, file_offset: pgoff.saturating_mul(page), path: String::from_utf8_lossy(name).into_owned() });
    }
    out
}

//! A ReadyToRun image (docs/format-notes.md#readytorun-images): READYTORUN_HEADER, sections, RUNTIME_FUNCTIONs, method
//! entry points (103 by MethodDef, 109 for instantiations), and each method's debug info (105).

use super::debuginfo::{self, DebugInfo, DebugInfoLayout, NEWEST_PROVEN_MAJOR};
use super::machine::{Machine, Os};
use super::native::{self, NativeArray, NativeHashtable};
use crate::base::ilmap::{public_map, CodeBody};
use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::pe::PeImage;

/// `RTR\0`.
pub const READYTORUN_SIGNATURE: u32 = 0x0052_5452;
/// The file offset of the COFF header's `Machine` field (after the `PE\0\0` signature that
/// `e_lfanew` points to), for errors; 0 if the DOS header cannot say.
fn machine_field_offset(pe: &PeImage<'_>) -> u64 {
    let mut r = Reader::new(pe.data(), 0);
    match r.skip(0x3C, "e_lfanew").and_then(|()| r.u32("e_lfanew")) {
        Ok(lfanew) => u64::from(lfanew).saturating_add(4),
        Err(_) => 0,
    }
}

/// Section ids (readytorun.h).
#[allow(missing_docs)]
pub mod section {
    pub const RUNTIME_FUNCTIONS: u32 = 102;
    pub const METHOD_DEF_ENTRY_POINTS: u32 = 103;
    pub const DEBUG_INFO: u32 = 105;
    pub const INSTANCE_METHOD_ENTRY_POINTS: u32 = 109;
}

fn bad(at: u64, expected: &'static str) -> Error {
    Error::new(ErrorKind::BadReadyToRun, at, expected)
}

/// One RUNTIME_FUNCTION, as code bounds whatever the machine's layout (`r2r::machine`): x64 keeps
/// EndAddress; x86, ARM64 and ARM keep the length in their unwind data; ARM's BeginAddress has
/// the Thumb bit, which `begin` does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeFunction {
    /// Code start RVA.
    pub begin: u32,
    /// Code end RVA (exclusive).
    pub end: u32,
}

/// A method entry point: which method, and its entry RUNTIME_FUNCTION.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryPoint {
    /// The MethodDef token.
    pub token: u32,
    /// Index of the entry RUNTIME_FUNCTION.
    pub runtime_function: u32,
    /// True for an instantiation from section 109.
    pub instantiation: bool,
    /// For an instantiation: the file offset of its method signature, which names the body
    /// ([`super::instantiation_name`]).
    pub signature: Option<u64>,
}

/// A parsed ReadyToRun image.
#[derive(Debug)]
pub struct ReadyToRunImage<'a> {
    pe: PeImage<'a>,
    /// Major version.
    pub major: u16,
    /// Minor version.
    pub minor: u16,
    /// Flags.
    pub flags: u32,
    layout: DebugInfoLayout,
    machine: Machine,
    os: Os,
    sections: Vec<(u32, u32, u32)>,
    functions: Vec<RuntimeFunction>,
}

impl<'a> ReadyToRunImage<'a> {
    /// Parse an R2R image from its file bytes. Its major selects the debug info layout
    /// ([`DebugInfoLayout::for_major`]); a major above [`NEWEST_PROVEN_MAJOR`] is
    /// `unsupported_version`, naming both numbers.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        Self::parse_assuming(bytes, None)
    }

    /// Like [`ReadyToRunImage::parse`], but with `assume` the debug info is read in that layout
    /// whatever the major (3 or more) says: the user's way to try an image newer than this
    /// reader (`--assume-layout`).
    pub fn parse_assuming(bytes: &'a [u8], assume: Option<DebugInfoLayout>) -> Result<Self> {
        let pe = PeImage::parse(bytes)?;
        let cor20 = *pe.require_cor20()?;
        let dir = cor20.managed_native_header;
        if dir.rva == 0 {
            return Err(bad(0, "a ManagedNativeHeader (this is not a ReadyToRun image)"));
        }
        let mut r = pe.reader_at(dir.rva, dir.size).map_err(|e| e.with_kind(ErrorKind::BadReadyToRun))?;
        let at = r.offset();
        if r.u32("the READYTORUN_HEADER signature")? != READYTORUN_SIGNATURE {
            return Err(bad(at, "the READYTORUN_HEADER signature RTR\\0"));
        }
        let major = r.u16("MajorVersion")?;
        let minor = r.u16("MinorVersion")?;
        // readytorun.h: each major is a breaking change, so a major above the newest one read
        // here may lay its debug info out anew. 2.x predates the debug info format of 3.x.
        let layout = match (assume, DebugInfoLayout::for_major(major)) {
            (_, _) if major < 3 => return Err(Error::new(ErrorKind::UnsupportedVersion, at.saturating_add(4), "a ReadyToRun major of 3 or more")),
            (Some(assumed), _) => assumed,
            (None, Some(layout)) => layout,
            (None, None) => {
                return Err(Error::unsupported_version(
                    at.saturating_add(4),
                    u32::from(major),
                    u32::from(NEWEST_PROVEN_MAJOR),
                    "a ReadyToRun major this reader knows (--assume-layout MAJOR reads it as an older major's)",
                ))
            }
        };
        let Some((machine, os)) = Machine::from_pe(pe.machine()) else {
            return Err(Error::new(ErrorKind::UnsupportedMachine, machine_field_offset(&pe), "a PE Machine of x86, x64, ARM64 or ARM"));
        };
        let flags = r.u32("Flags")?;
        let count = r.u32("NumberOfSections")?;
        let mut sections = Vec::with_capacity((count as usize).min(r.len() / 12));
        for _ in 0..count {
            sections.push((r.u32("a section type")?, r.u32("a section RVA")?, r.u32("a section size")?));
        }
        let mut image = ReadyToRunImage { pe, major, minor, flags, layout, machine, os, sections, functions: Vec::new() };
        if let Some(rf) = image.section(section::RUNTIME_FUNCTIONS)? {
            image.functions = image.read_runtime_functions(rf)?;
        }
        Ok(image)
    }

    /// Section 102 in the machine's layout (`r2r::machine`). A function whose end is not past
    /// its start is `bad_ready_to_run`.
    fn read_runtime_functions(&self, mut rf: Reader<'a>) -> Result<Vec<RuntimeFunction>> {
        let n = rf.len().checked_div(self.machine.runtime_function_size()).unwrap_or(0);
        let mut out = Vec::with_capacity(n);
        if self.machine == Machine::X64 {
            for _ in 0..n {
                let begin = rf.u32("BeginAddress")?;
                let end = rf.u32("EndAddress")?;
                let _unwind = rf.u32("UnwindData")?;
                out.push(RuntimeFunction { begin, end });
            }
            return Ok(out);
        }
        for _ in 0..n {
            let at = rf.offset();
            let begin_address = rf.u32("BeginAddress")?;
            let unwind = rf.u32("UnwindData")?;
            let begin = self.machine.code_start(begin_address);
            let length = self.machine.code_length(&self.pe, unwind, self.major)?;
            let end = begin.checked_add(length).ok_or(bad(at, "a RUNTIME_FUNCTION whose code ends inside 4 GiB"))?;
            out.push(RuntimeFunction { begin, end });
        }
        Ok(out)
    }

    /// The debug info layout this image is read in (its major's, or the one assumed).
    pub fn layout(&self) -> DebugInfoLayout {
        self.layout
    }

    /// The target machine.
    pub fn machine(&self) -> Machine {
        self.machine
    }

    /// The operating system the image was compiled for (the `Machine` override).
    pub fn os(&self) -> Os {
        self.os
    }

    /// The PE image.
    pub fn pe(&self) -> &PeImage<'a> {
        &self.pe
    }

    /// A section's bytes, by id.
    pub fn section(&self, id: u32) -> Result<Option<Reader<'a>>> {
        match self.sections.iter().find(|s| s.0 == id) {
            None => Ok(None),
            Some(&(_, rva, size)) => self.pe.reader_at(rva, size).map(Some).map_err(|e| e.with_kind(ErrorKind::BadReadyToRun)),
        }
    }

    /// Section ids present.
    pub fn section_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.sections.iter().map(|s| s.0)
    }

    /// The RUNTIME_FUNCTIONs, sorted by BeginAddress.
    pub fn runtime_functions(&self) -> &[RuntimeFunction] {
        &self.functions
    }

    /// Decode an entry-point `id` (docs/format-notes.md#readytorun-images): bit 0 clear → index = id >> 1; set → fixups follow and
    /// index = id >> 2.
    fn entry_index(id: u32) -> u32 {
        if id & 1 == 0 {
            id >> 1
        } else {
            id >> 2
        }
    }

    /// Every method entry point: section 103 by MethodDef RID, then section 109's instantiations.
    pub fn entry_points(&self) -> Result<Vec<EntryPoint>> {
        let mut out = Vec::new();
        if let Some(sec) = self.section(section::METHOD_DEF_ENTRY_POINTS)? {
            let arr = NativeArray::parse(sec, sec.offset())?;
            for i in 0..arr.len() {
                if let Some(at) = arr.get(i)? {
                    let mut r = native::at(sec, at)?;
                    let id = native::unsigned(&mut r)?;
                    out.push(EntryPoint { token: 0x0600_0000 | i.saturating_add(1), runtime_function: Self::entry_index(id), instantiation: false, signature: None });
                }
            }
        }
        if let Some(sec) = self.section(section::INSTANCE_METHOD_ENTRY_POINTS)? {
            let table = NativeHashtable::parse(sec, sec.offset())?;
            for at in table.entries()? {
                let mut r = native::at(sec, at)?;
                let signature = r.offset();
                let token = super::methodsig::skip_method_signature(&mut r)?;
                let id = native::unsigned(&mut r)?;
                out.push(EntryPoint { token, runtime_function: Self::entry_index(id), instantiation: true, signature: Some(signature) });
            }
        }
        Ok(out)
    }

    /// The debug info of the method whose entry RUNTIME_FUNCTION is `index` (docs/format-notes.md#readytorun-images), if any.
    pub fn debug_info(&self, index: u32) -> Result<Option<DebugInfo>> {
        match self.debug_array()? {
            Some((sec, arr)) => self.debug_info_in(sec, &arr, index, true),
            None => Ok(None),
        }
    }

    /// Section 105 and its NativeArray.
    fn debug_array(&self) -> Result<Option<(Reader<'a>, NativeArray<'a>)>> {
        let Some(sec) = self.section(section::DEBUG_INFO)? else { return Ok(None) };
        Ok(Some((sec, NativeArray::parse(sec, sec.offset())?)))
    }

    fn debug_info_in(&self, sec: Reader<'a>, arr: &NativeArray<'a>, index: u32, with_vars: bool) -> Result<Option<DebugInfo>> {
        match self.debug_blob(sec, arr, index)? {
            Some(blob) => {
                let mut info = debuginfo::decode_parts(blob, self.layout, with_vars)?;
                if self.machine == Machine::X86 {
                    debuginfo::scale_x86_stack_offsets(&mut info.vars);
                }
                Ok(Some(info))
            }
            None => Ok(None),
        }
    }

    /// The debug info blob of the method whose entry RUNTIME_FUNCTION is `index` (docs/format-notes.md#readytorun-images).
    fn debug_blob(&self, sec: Reader<'a>, arr: &NativeArray<'a>, index: u32) -> Result<Option<Reader<'a>>> {
        let Some(at) = arr.get(index)? else { return Ok(None) };
        let mut r = native::at(sec, at)?;
        // A lookback: 0 → the blob follows; k → the blob is shared and starts k bytes before.
        let lookback = native::unsigned(&mut r)?;
        if lookback == 0 {
            return Ok(Some(r));
        }
        let start = at.checked_sub(u64::from(lookback)).ok_or(bad(at, "a lookback inside the section"))?;
        native::at(sec, start).map(Some)
    }

    /// Every code body with debug info, with its public map. FunctionID for an image source is
    /// the body's code-start RVA (documented in `ilmap::MapStore`).
    pub fn code_bodies(&self) -> Result<Vec<CodeBody>> {
        let mut out = Vec::new();
        self.code_bodies_where(|_| true, |b| out.push(b))?;
        Ok(out)
    }

    /// [`Self::code_bodies`] for a caller that wants only some maps: every body is read and
    /// checked as there (a fault in any is the same error), each is shown to `each`, and only a
    /// body whose RVA `wanted` accepts gets its public map (the others have an empty one).
    pub fn code_bodies_where(&self, mut wanted: impl FnMut(u32) -> bool, mut each: impl FnMut(CodeBody)) -> Result<()> {
        let entries = self.entry_points()?;
        let mut is_entry = vec![false; self.functions.len()];
        for e in &entries {
            if let Some(slot) = is_entry.get_mut(e.runtime_function as usize) {
                *slot = true;
            }
        }
        let debug = self.debug_array()?;
        // One buffer for every method's raw bounds: only the public maps are kept.
        let mut bounds = Vec::new();
        for e in entries {
            let Some(entry) = self.functions.get(e.runtime_function as usize) else {
                return Err(bad(0, "an entry point's RUNTIME_FUNCTION index inside the table"));
            };
            // Code size: the entry and the funclets that follow it, up to the next entry point.
            let mut end = entry.end;
            let mut i = (e.runtime_function as usize).saturating_add(1);
            while let (Some(f), Some(false)) = (self.functions.get(i), is_entry.get(i)) {
                end = f.end;
                i = i.saturating_add(1);
            }
            let code_size = end.saturating_sub(entry.begin);
            let Some((sec, arr)) = &debug else { continue };
            let Some(blob) = self.debug_blob(*sec, arr, e.runtime_function)? else { continue };
            debuginfo::bounds_into(debuginfo::split(blob, self.layout)?.bounds, self.layout.bounds, &mut bounds)?;
            // Bounds lie inside the body (offsets from its start, funclets included); anything
            // past its code is corrupt debug info (found by the r2r fuzz target). Native offsets
            // only grow, so the last one is the largest.
            if bounds.last().is_some_and(|b| b.native_offset > code_size) {
                return Err(Error::at_rva(ErrorKind::BadDebugInfo, entry.begin, "bounds inside the method's code"));
            }
            let map = if wanted(entry.begin) { public_map(&bounds, code_size) } else { Vec::new() };
            each(CodeBody { token: e.token, rva: Some(entry.begin), code_size, map, kind: Some(crate::base::ilmap::CodeKind::R2r), signature: e.signature, ..CodeBody::default() });
        }
        Ok(())
    }
}

//! The machine-specific layout of a ReadyToRun image's code: which PE `Machine` values are read,
//! the size of a RUNTIME_FUNCTION, where a code fragment starts, and where its length is kept.
//!
//! Sources (dotnet/runtime):
//! - `src/coreclr/inc/pedecoder.h` (`IMAGE_FILE_MACHINE_NATIVE_OS_OVERRIDE`) and crossgen2's
//!   `ILCompiler.PEWriter.MachineOSOverride`: an image compiled for a non-Windows OS stores
//!   `Machine ^ override` — Apple 0x4644, FreeBSD 0xADC4, Linux 0x7B79, NetBSD 0x1993,
//!   SunOS 0x1992 (Windows 0). So Linux x64 is 0x8664 ^ 0x7B79 = 0xFD1D.
//! - `docs/design/coreclr/botr/readytorun-format.md` (READYTORUN_SECTION_RUNTIME_FUNCTIONS):
//!   RUNTIME_FUNCTION is 12 bytes on x64 (BeginAddress, EndAddress, UnwindData) and 8 bytes on
//!   x86, ARM and ARM64 (BeginAddress, UnwindData); R2RDump's `CalculateRuntimeFunctionSize`
//!   agrees.
//! - `src/coreclr/inc/clrnt.h` (`RtlpGetFunctionEndAddress` per target) for the code length when
//!   there is no EndAddress:
//!   - ARM64: packed unwind data when `UnwindData & 3 != 0` — 3 (`& 7 == 3`, "long branch") means
//!     3 instructions, otherwise bits 2-12 are the length in 4-byte units; else UnwindData is the
//!     RVA of an .xdata record whose header bits 0-17 are the length in 4-byte units.
//!   - ARM (Thumb-2, `IMAGE_FILE_MACHINE_ARMNT`): the same with 2-byte units and no "long branch"
//!     case; BeginAddress carries the Thumb bit (`RUNTIME_FUNCTION__BeginAddress` is
//!     `ThumbCodeToDataPointer`), so the code starts at `BeginAddress & !1`.
//!   - x86: `BeginAddress + UNWIND_INFO.FunctionLength`, `UNWIND_INFO` being one ULONG
//!     (`win64unwind.h`), written by the JIT for every funclet (`jit/unwindx86.cpp`). That is
//!     ReadyToRun 14 on: readytorun.h, "R2R Version 14 changed x86 code generation to use
//!     funclets". Before it, UnwindData points straight at the method's x86 GC info, whose header
//!     starts with the method size as a `gcdecoder.cpp` `decodeUnsigned` (7-bit groups, most
//!     significant first, the high bit set on all but the last byte); R2RDump's
//!     `x86.UnwindInfo` reads it so and takes the GC info to start at the same RVA.
//! - `ILCompiler.Reflection.ReadyToRun` (R2RDump): `ReadyToRunMethod.ParseRuntimeFunctions`
//!   clears the ARM Thumb bit, and `RuntimeFunction.GetSize` takes x86, ARM and ARM64 lengths
//!   from the unwind info's FunctionLength (`Arm64.UnwindInfo`: bits 0-17 × 4; `Arm.UnwindInfo`:
//!   bits 0-17 × 2).

use crate::base::read::{Error, ErrorKind, Result};
use crate::formats::pe::PeImage;

/// `IMAGE_FILE_MACHINE_I386`.
pub const IMAGE_FILE_MACHINE_I386: u16 = 0x014C;
/// `IMAGE_FILE_MACHINE_AMD64`.
pub const IMAGE_FILE_MACHINE_AMD64: u16 = 0x8664;
/// `IMAGE_FILE_MACHINE_ARM64`.
pub const IMAGE_FILE_MACHINE_ARM64: u16 = 0xAA64;
/// `IMAGE_FILE_MACHINE_ARMNT` (ARM Thumb-2).
pub const IMAGE_FILE_MACHINE_ARMNT: u16 = 0x01C4;

/// The first ReadyToRun major whose x86 code uses funclets, each with a one-ULONG UNWIND_INFO
/// (readytorun.h: "R2R Version 14 changed x86 code generation to use funclets").
pub const X86_FUNCLETS_MAJOR: u16 = 14;

/// A target machine whose ReadyToRun code layout this reader implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Machine {
    /// x86 (`IMAGE_FILE_MACHINE_I386`, 0x14C).
    X86,
    /// x64 (`IMAGE_FILE_MACHINE_AMD64`, 0x8664).
    X64,
    /// ARM64 (`IMAGE_FILE_MACHINE_ARM64`, 0xAA64).
    Arm64,
    /// ARM Thumb-2 (`IMAGE_FILE_MACHINE_ARMNT`, 0x1C4).
    Arm,
}

/// The operating system an image was compiled for, from the `Machine` override (pedecoder.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Os {
    /// No override.
    Windows,
    /// 0x7B79.
    Linux,
    /// macOS and the other Apple systems: 0x4644.
    Apple,
    /// 0xADC4.
    FreeBsd,
    /// 0x1993.
    NetBsd,
    /// 0x1992.
    SunOs,
}

impl Os {
    /// The value xored into `Machine` (`IMAGE_FILE_MACHINE_NATIVE_OS_OVERRIDE`).
    pub const fn machine_override(self) -> u16 {
        match self {
            Os::Windows => 0,
            Os::Linux => 0x7B79,
            Os::Apple => 0x4644,
            Os::FreeBsd => 0xADC4,
            Os::NetBsd => 0x1993,
            Os::SunOs => 0x1992,
        }
    }

    const ALL: [Os; 6] = [Os::Windows, Os::Linux, Os::Apple, Os::FreeBsd, Os::NetBsd, Os::SunOs];
}

impl Machine {
    /// The machine and OS of a PE `Machine` field, or `None` for a machine this reader does not
    /// implement (whatever the OS override).
    pub fn from_pe(value: u16) -> Option<(Machine, Os)> {
        Os::ALL.iter().find_map(|&os| {
            let m = match value ^ os.machine_override() {
                IMAGE_FILE_MACHINE_I386 => Machine::X86,
                IMAGE_FILE_MACHINE_AMD64 => Machine::X64,
                IMAGE_FILE_MACHINE_ARM64 => Machine::Arm64,
                IMAGE_FILE_MACHINE_ARMNT => Machine::Arm,
                _ => return None,
            };
            Some((m, os))
        })
    }

    /// The Windows `IMAGE_FILE_MACHINE_*` value.
    pub const fn pe_value(self) -> u16 {
        match self {
            Machine::X86 => IMAGE_FILE_MACHINE_I386,
            Machine::X64 => IMAGE_FILE_MACHINE_AMD64,
            Machine::Arm64 => IMAGE_FILE_MACHINE_ARM64,
            Machine::Arm => IMAGE_FILE_MACHINE_ARMNT,
        }
    }

    /// The size of one RUNTIME_FUNCTION: 12 bytes on x64 (with EndAddress), 8 elsewhere.
    pub const fn runtime_function_size(self) -> usize {
        match self {
            Machine::X64 => 12,
            Machine::X86 | Machine::Arm64 | Machine::Arm => 8,
        }
    }

    /// The code start RVA of a BeginAddress (ARM: without the Thumb bit).
    pub const fn code_start(self, begin_address: u32) -> u32 {
        match self {
            Machine::Arm => begin_address & !1,
            Machine::X86 | Machine::X64 | Machine::Arm64 => begin_address,
        }
    }

    /// The code length of a RUNTIME_FUNCTION without EndAddress (every machine but x64), from its
    /// UnwindData: packed ARM/ARM64 unwind data, or the record UnwindData points to in `pe`.
    /// `major` is the ReadyToRun major (x86 changed at [`X86_FUNCLETS_MAJOR`]).
    pub fn code_length(self, pe: &PeImage<'_>, unwind_data: u32, major: u16) -> Result<u32> {
        match self {
            Machine::X64 => Err(Error::new(ErrorKind::BadReadyToRun, 0, "an x64 RUNTIME_FUNCTION's EndAddress")),
            Machine::Arm64 | Machine::Arm => {
                let unit = if self == Machine::Arm64 { 4 } else { 2 };
                let words = if unwind_data & 3 != 0 {
                    // Packed unwind data (clrnt.h): ARM64's Flag 3 is a 3-instruction thunk.
                    if self == Machine::Arm64 && unwind_data & 7 == 3 {
                        3
                    } else {
                        (unwind_data >> 2) & 0x7FF
                    }
                } else {
                    unwind_record(pe, unwind_data)?.u32("an .xdata header word")? & 0x3_FFFF
                };
                // At most 0x3FFFF × 4: no overflow.
                Ok(words.saturating_mul(unit))
            }
            Machine::X86 if major >= X86_FUNCLETS_MAJOR => unwind_record(pe, unwind_data)?.u32("UNWIND_INFO.FunctionLength"),
            Machine::X86 => {
                let mut r = unwind_record(pe, unwind_data)?;
                gc_decode_unsigned(&mut r)
            }
        }
    }
}

/// A reader at the unwind record `rva` points to, to the end of its section.
fn unwind_record<'a>(pe: &PeImage<'a>, rva: u32) -> Result<crate::base::read::Reader<'a>> {
    pe.reader_from(rva).map_err(|e| e.with_kind(ErrorKind::BadReadyToRun))
}

/// `decodeUnsigned` of the x86 GC info (`src/coreclr/inc/gcdecoder.cpp`): 7 bits a byte, most
/// significant group first, the high bit set while more bytes follow. More than 5 bytes, or a
/// value past 32 bits, is corruption.
pub fn gc_decode_unsigned(r: &mut crate::base::read::Reader<'_>) -> Result<u32> {
    let at = r.offset();
    let mut value = 0u64;
    for _ in 0..5 {
        let b = r.u8("the x86 GC info's method size")?;
        value = (value << 7) | u64::from(b & 0x7F);
        if b & 0x80 == 0 {
            return u32::try_from(value).map_err(|_| Error::new(ErrorKind::BadReadyToRun, at, "an x86 method size that fits 32 bits"));
        }
    }
    Err(Error::new(ErrorKind::BadReadyToRun, at, "an x86 method size of at most 5 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::read::Reader;

    #[test]
    fn machine_values_and_os_overrides() {
        assert_eq!(Machine::from_pe(0x014C), Some((Machine::X86, Os::Windows)));
        assert_eq!(Machine::from_pe(0x8664), Some((Machine::X64, Os::Windows)));
        assert_eq!(Machine::from_pe(0xAA64), Some((Machine::Arm64, Os::Windows)));
        assert_eq!(Machine::from_pe(0x01C4), Some((Machine::Arm, Os::Windows)));
        // The 3.1.23 Linux x64 framework's CoreLib says 0xFD1D.
        assert_eq!(Machine::from_pe(0xFD1D), Some((Machine::X64, Os::Linux)));
        assert_eq!(Machine::from_pe(0xAA64 ^ 0x4644), Some((Machine::Arm64, Os::Apple)));
        assert_eq!(Machine::from_pe(0x8664 ^ 0xADC4), Some((Machine::X64, Os::FreeBsd)));
        assert_eq!(Machine::from_pe(0x01C4 ^ 0x7B79), Some((Machine::Arm, Os::Linux)));
        assert_eq!(Machine::from_pe(0x014C ^ 0x1993), Some((Machine::X86, Os::NetBsd)));
        assert_eq!(Machine::from_pe(0x8664 ^ 0x1992), Some((Machine::X64, Os::SunOs)));
        // ARM (not Thumb-2), IA64, RISC-V 64, LoongArch64, and no machine at all.
        for m in [0x01C0u16, 0x0200, 0x5064, 0x6264, 0x0000, 0xFFFF] {
            assert_eq!(Machine::from_pe(m), None, "0x{m:04X}");
        }
        for m in [Machine::X86, Machine::X64, Machine::Arm64, Machine::Arm] {
            assert_eq!(Machine::from_pe(m.pe_value()), Some((m, Os::Windows)));
        }
    }

    #[test]
    fn runtime_function_sizes_and_thumb_bit() {
        assert_eq!(Machine::X64.runtime_function_size(), 12);
        assert_eq!(Machine::X86.runtime_function_size(), 8);
        assert_eq!(Machine::Arm64.runtime_function_size(), 8);
        assert_eq!(Machine::Arm.runtime_function_size(), 8);
        assert_eq!(Machine::Arm.code_start(0x1001), 0x1000);
        assert_eq!(Machine::Arm64.code_start(0x1001), 0x1001);
    }

    #[test]
    fn gc_decode_unsigned_examples() {
        // The first methods of 3.1.23 win-x86 CoreLib: 0x62 = 98; 0x81 0x0F = 143.
        assert_eq!(gc_decode_unsigned(&mut Reader::new(&[0x62], 0)).unwrap(), 98);
        assert_eq!(gc_decode_unsigned(&mut Reader::new(&[0x81, 0x0F], 0)).unwrap(), 143);
        assert_eq!(gc_decode_unsigned(&mut Reader::new(&[0x8F, 0xFF, 0xFF, 0xFF, 0x7F], 0)).unwrap(), u32::MAX);
        assert_eq!(gc_decode_unsigned(&mut Reader::new(&[0x90, 0x80, 0x80, 0x80, 0x00], 0)).unwrap_err().kind, ErrorKind::BadReadyToRun);
        assert_eq!(gc_decode_unsigned(&mut Reader::new(&[0x80; 6], 0)).unwrap_err().kind, ErrorKind::BadReadyToRun);
        assert_eq!(gc_decode_unsigned(&mut Reader::new(&[0x80], 0)).unwrap_err().kind, ErrorKind::Truncated);
    }
}

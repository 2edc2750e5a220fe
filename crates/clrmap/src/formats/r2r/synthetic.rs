//! ReadyToRun images built in tests from the spec's layouts (`r2r::machine` cites them), for the
//! machines no real image here has: ARM64, ARM, and x86 from R2R 14 on. Each image holds two
//! methods: the first with a funclet after its entry, the second alone, both with debug info.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::arithmetic_side_effects, clippy::panic)]

use super::machine::{Machine, Os};
use super::ReadyToRunImage;
use crate::base::ilmap::{Bound, IlOffset, SourceTypes};
use crate::base::read::ErrorKind;

const TEXT_RVA: u32 = 0x1000;
const TEXT_FILE: usize = 0x200;

/// How a function's length is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Length {
    /// In the record UnwindData points to (.xdata, x86 GC info or UNWIND_INFO), or EndAddress.
    Record,
    /// ARM/ARM64 packed unwind data (Flag 1).
    Packed,
}

fn push_u32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn align(v: &mut Vec<u8>, to: usize) -> u32 {
    while v.len() % to != 0 {
        v.push(0);
    }
    TEXT_RVA + v.len() as u32
}

/// NativeFormat unsigned, 1 or 2 bytes.
fn native_unsigned(v: u32) -> Vec<u8> {
    if v < 0x80 {
        vec![(v << 1) as u8]
    } else {
        assert!(v < 0x4000);
        let x = (v << 2) | 1;
        vec![x as u8, (x >> 8) as u8]
    }
}

/// One block of a NativeArray (nativeformatwriter: a node per bit 8, 4, 2, 1 of the index; flag 1
/// = left child follows, flag 2 = right child at `val >> 2` bytes from the node).
fn native_node(bit: u32, items: &[(u32, Vec<u8>)]) -> Vec<u8> {
    if bit == 0 {
        assert_eq!(items.len(), 1);
        return items[0].1.clone();
    }
    let (l, r): (Vec<_>, Vec<_>) = items.iter().cloned().partition(|(i, _)| i & bit == 0);
    let left = if l.is_empty() { Vec::new() } else { native_node(bit >> 1, &l) };
    let right = if r.is_empty() { Vec::new() } else { native_node(bit >> 1, &r) };
    let flags = u32::from(!l.is_empty()) | if r.is_empty() { 0 } else { 2 };
    let mut val = native_unsigned(flags);
    if !r.is_empty() {
        for vlen in [1usize, 2] {
            val = native_unsigned(flags | (((vlen + left.len()) as u32) << 2));
            if val.len() == vlen {
                break;
            }
        }
    }
    [val, left, right].concat()
}

/// A NativeArray of `count` (≤ 16) elements, the present ones given as (index, data).
fn native_array(count: u32, items: &[(u32, Vec<u8>)]) -> Vec<u8> {
    assert!(count <= 16);
    let mut out = native_unsigned(count << 2);
    out.push(1); // the one block's root, 1 byte after the block table
    out.extend(native_node(8, items));
    out
}

/// The method bodies of every image: (entry length, funclet lengths), and debug info bounds on
/// each entry, the first method's reaching into its funclet. Lengths of 128 or more tell x86's
/// two length encodings apart (a one-ULONG 0x90 read as `decodeUnsigned` is 2048).
const METHODS: [(u32, &[u32]); 2] = [(0x90, &[0x20]), (0x130, &[])];

fn bounds(code_size: u32) -> Vec<Bound> {
    let b = |native_offset, il_offset, source| Bound { native_offset, il_offset, source: SourceTypes(source) };
    vec![b(0, IlOffset::Prolog, 0), b(4, IlOffset::Il(0), SourceTypes::STACK_EMPTY), b(code_size - 8, IlOffset::Il(6), 0)]
}

/// An image for `machine` with PE `Machine` `pe_machine` and R2R `major`; the funclet's length is
/// recorded as `funclet`. Returns the bytes and each RUNTIME_FUNCTION's expected code bounds.
fn build(machine: Machine, pe_machine: u16, major: u16, funclet: Length) -> (Vec<u8>, Vec<(u32, u32)>) {
    let mut t = Vec::new();
    // The CLI header first; its ManagedNativeHeader is patched at the end.
    let cor20 = align(&mut t, 4);
    push_u32(&mut t, 72);
    t.extend_from_slice(&[2, 0, 5, 0]);
    t.resize(t.len() + 64, 0);
    // Code: each function 16-aligned, filled with a breakpoint byte.
    let mut functions = Vec::new(); // (start RVA, length, is the funclet)
    for (entry, funclets) in METHODS {
        for (k, &len) in std::iter::once(&entry).chain(funclets.iter()).enumerate() {
            let start = align(&mut t, 16);
            t.resize(t.len() + len as usize, 0xCC);
            functions.push((start, len, k > 0));
        }
    }
    // Unwind records, and the RUNTIME_FUNCTION table in the machine's layout.
    let mut table = Vec::new();
    let mut expected = Vec::new();
    for &(start, len, is_funclet) in &functions {
        let how = if is_funclet { funclet } else { Length::Record };
        let unwind = match (machine, how) {
            (Machine::Arm64 | Machine::Arm, Length::Packed) => {
                let unit = if machine == Machine::Arm64 { 4 } else { 2 };
                // Flag 1, FunctionLength in bits 2-12, other fields (bits 13+) set.
                ((len / unit) << 2) | 1 | (0x5 << 13)
            }
            (Machine::Arm64 | Machine::Arm, Length::Record) => {
                let unit = if machine == Machine::Arm64 { 4 } else { 2 };
                let rva = align(&mut t, 4);
                // .xdata header: FunctionLength in bits 0-17; Vers 0, X 0, E 1, one epilog, one
                // code word (bits 18-31 must not count), then the code word.
                push_u32(&mut t, (len / unit) | (1 << 21) | (1 << 22) | (1 << 27));
                push_u32(&mut t, 0xE4E4_E4E4);
                rva
            }
            (Machine::X86, _) if major >= 14 => {
                let rva = align(&mut t, 4);
                push_u32(&mut t, len); // UNWIND_INFO { ULONG FunctionLength }, then GC info
                t.extend_from_slice(&[0xFF, 0x81, 0x00]);
                rva
            }
            (Machine::X86, _) => {
                let rva = align(&mut t, 4);
                // The GC info header: the method size as decodeUnsigned, then the rest of it.
                let mut size = vec![(len & 0x7F) as u8];
                let mut rest = len >> 7;
                while rest != 0 {
                    size.insert(0, 0x80 | (rest & 0x7F) as u8);
                    rest >>= 7;
                }
                t.extend_from_slice(&size);
                t.extend_from_slice(&[0xFF, 0x81, 0x00]);
                rva
            }
            (Machine::X64, _) => {
                let rva = align(&mut t, 4);
                t.extend_from_slice(&[1, 0, 0, 0]);
                rva
            }
        };
        let begin_address = if machine == Machine::Arm { start | 1 } else { start };
        push_u32(&mut table, begin_address);
        if machine == Machine::X64 {
            push_u32(&mut table, start + len);
        }
        push_u32(&mut table, unwind);
        expected.push((start, start + len));
    }
    // Entry points (103): method RID i+1 -> its entry RUNTIME_FUNCTION (id = index << 1).
    let mut entries = Vec::new();
    let mut debug = Vec::new();
    let mut rf = 0u32;
    for (i, (entry, funclets)) in METHODS.iter().enumerate() {
        entries.push((i as u32, native_unsigned(rf << 1)));
        // Every length is a multiple of 16, so the funclets follow their entry without padding.
        let code_size = entry + funclets.iter().sum::<u32>();
        // The blob in the layout the reader will choose for this major.
        // A major above the newest known is written in the newest layout (the refusal test).
        let layout = super::DebugInfoLayout::for_major(major).unwrap_or(super::DebugInfoLayout::FAT3);
        let info = super::DebugInfo { bounds: bounds(code_size), ..super::DebugInfo::default() };
        let mut blob = native_unsigned(0); // lookback 0: the blob follows
        blob.extend(layout.encode(&info));
        debug.push((rf, blob));
        rf += 1 + funclets.len() as u32;
    }
    let sections: Vec<(u32, Vec<u8>)> = vec![(102, table), (103, native_array(METHODS.len() as u32, &entries)), (105, native_array(rf, &debug))];
    let mut dirs = Vec::new();
    for (id, bytes) in sections {
        let rva = align(&mut t, 4);
        dirs.push((id, rva, bytes.len() as u32));
        t.extend(bytes);
    }
    let header = align(&mut t, 4);
    push_u32(&mut t, super::READYTORUN_SIGNATURE);
    t.extend_from_slice(&major.to_le_bytes());
    t.extend_from_slice(&0u16.to_le_bytes());
    push_u32(&mut t, 0);
    push_u32(&mut t, dirs.len() as u32);
    for (id, rva, size) in dirs {
        push_u32(&mut t, id);
        push_u32(&mut t, rva);
        push_u32(&mut t, size);
    }
    let header_size = TEXT_RVA + t.len() as u32 - header;
    let at = (cor20 - TEXT_RVA) as usize + 64;
    t[at..at + 4].copy_from_slice(&header.to_le_bytes());
    t[at + 4..at + 8].copy_from_slice(&header_size.to_le_bytes());
    (pe(pe_machine, machine == Machine::X64 || machine == Machine::Arm64, cor20, &t), expected)
}

/// A PE image with one section holding `text` at [`TEXT_RVA`], and the CLI header at `cor20`.
fn pe(machine: u16, pe64: bool, cor20: u32, text: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; TEXT_FILE];
    f[0..2].copy_from_slice(b"MZ");
    f[0x3C..0x40].copy_from_slice(&0x80u32.to_le_bytes());
    f[0x80..0x84].copy_from_slice(b"PE\0\0");
    let opt_size: u16 = if pe64 { 240 } else { 224 };
    let coff = 0x84;
    f[coff..coff + 2].copy_from_slice(&machine.to_le_bytes());
    f[coff + 2..coff + 4].copy_from_slice(&1u16.to_le_bytes());
    f[coff + 16..coff + 18].copy_from_slice(&opt_size.to_le_bytes());
    f[coff + 18..coff + 20].copy_from_slice(&0x2022u16.to_le_bytes());
    let opt = coff + 20;
    f[opt..opt + 2].copy_from_slice(&(if pe64 { 0x20Bu16 } else { 0x10B }).to_le_bytes());
    let put = |f: &mut Vec<u8>, at: usize, v: u32| f[at..at + 4].copy_from_slice(&v.to_le_bytes());
    put(&mut f, opt + 32, 0x1000); // SectionAlignment
    put(&mut f, opt + 36, 0x200); // FileAlignment
    let size_of_image = TEXT_RVA + (text.len() as u32).next_multiple_of(0x1000);
    put(&mut f, opt + 56, size_of_image);
    put(&mut f, opt + 60, TEXT_FILE as u32); // SizeOfHeaders
    let (count_at, dirs_at) = if pe64 { (opt + 108, opt + 112) } else { (opt + 92, opt + 96) };
    put(&mut f, count_at, 16);
    put(&mut f, dirs_at + 14 * 8, cor20);
    put(&mut f, dirs_at + 14 * 8 + 4, 72);
    let sec = opt + opt_size as usize;
    f[sec..sec + 5].copy_from_slice(b".text");
    let raw = text.len().next_multiple_of(0x200);
    put(&mut f, sec + 8, text.len() as u32);
    put(&mut f, sec + 12, TEXT_RVA);
    put(&mut f, sec + 16, raw as u32);
    put(&mut f, sec + 20, TEXT_FILE as u32);
    put(&mut f, sec + 36, 0x6000_0020);
    f.extend_from_slice(text);
    f.resize(TEXT_FILE + raw, 0);
    f
}

/// The checks every synthetic image passes: machine and OS, each RUNTIME_FUNCTION's code bounds,
/// and the two code bodies (the first including its funclet) with their debug info.
fn check(bytes: &[u8], expected: &[(u32, u32)], machine: Machine, os: Os) {
    check_image(&ReadyToRunImage::parse(bytes).unwrap(), expected, machine, os);
}

fn check_image(image: &ReadyToRunImage<'_>, expected: &[(u32, u32)], machine: Machine, os: Os) {
    assert_eq!((image.machine(), image.os()), (machine, os));
    let got: Vec<(u32, u32)> = image.runtime_functions().iter().map(|f| (f.begin, f.end)).collect();
    assert_eq!(got, expected, "{machine:?}");
    let bodies = image.code_bodies().unwrap();
    assert_eq!(bodies.len(), 2);
    // Method 1: entry and funclet; method 2 alone.
    assert_eq!((bodies[0].token, bodies[0].rva, bodies[0].code_size), (0x0600_0001, Some(expected[0].0), expected[1].1 - expected[0].0));
    assert_eq!((bodies[1].token, bodies[1].rva, bodies[1].code_size), (0x0600_0002, Some(expected[2].0), expected[2].1 - expected[2].0));
    for (b, rf) in bodies.iter().zip([0u32, 2]) {
        let d = image.debug_info(rf).unwrap().unwrap();
        assert_eq!(d.bounds, bounds(b.code_size), "{machine:?}");
        assert!(b.map.iter().all(|e| e.native_end <= b.code_size));
    }
    assert!(image.debug_info(1).unwrap().is_none(), "the funclet has no debug info of its own");
}

#[test]
fn arm64_layout_from_the_spec() {
    // 8-byte RUNTIME_FUNCTIONs; the length from .xdata bits 0-17 × 4, or from packed data.
    for funclet in [Length::Record, Length::Packed] {
        let (bytes, expected) = build(Machine::Arm64, 0xAA64, 9, funclet);
        check(&bytes, &expected, Machine::Arm64, Os::Windows);
        // The same code for Linux and macOS: only the Machine field differs.
        let (bytes, _) = build(Machine::Arm64, 0xAA64 ^ 0x7B79, 9, funclet);
        check(&bytes, &expected, Machine::Arm64, Os::Linux);
        let (bytes, _) = build(Machine::Arm64, 0xAA64 ^ 0x4644, 9, funclet);
        check(&bytes, &expected, Machine::Arm64, Os::Apple);
    }
}

#[test]
fn arm_layout_from_the_spec() {
    // 8-byte RUNTIME_FUNCTIONs with the Thumb bit in BeginAddress; lengths × 2.
    for funclet in [Length::Record, Length::Packed] {
        let (bytes, expected) = build(Machine::Arm, 0x01C4, 3, funclet);
        check(&bytes, &expected, Machine::Arm, Os::Windows);
        let (bytes, _) = build(Machine::Arm, 0x01C4 ^ 0x7B79, 3, funclet);
        check(&bytes, &expected, Machine::Arm, Os::Linux);
    }
}

#[test]
fn x86_layouts_before_and_after_r2r_14() {
    // Before 14: UnwindData is the GC info, headed by the method size; from 14: UNWIND_INFO.
    for major in [3u16, 9, 13, 14, 16, 17, 26] {
        let (bytes, expected) = build(Machine::X86, 0x014C, major, Length::Record);
        check(&bytes, &expected, Machine::X86, Os::Windows);
    }
    let (bytes, expected) = build(Machine::X86, 0x014C ^ 0x7B79, 3, Length::Record);
    check(&bytes, &expected, Machine::X86, Os::Linux);
}

#[test]
fn x64_layout() {
    let (bytes, expected) = build(Machine::X64, 0x8664, 3, Length::Record);
    check(&bytes, &expected, Machine::X64, Os::Windows);
    let (bytes, _) = build(Machine::X64, 0xFD1D, 9, Length::Record);
    check(&bytes, &expected, Machine::X64, Os::Linux);
}

#[test]
fn the_x64_layout_misreads_an_arm64_image() {
    // What the x64-only reader did with ARM64 images: 12-byte entries over 8-byte ones. Read as
    // ARM64 the image is right (above); read with x64's layout its functions are garbage.
    let (bytes, expected) = build(Machine::Arm64, 0xAA64, 9, Length::Record);
    let image = ReadyToRunImage::parse(&bytes).unwrap();
    assert_eq!(image.runtime_functions().len(), 3);
    let table = image.section(super::section::RUNTIME_FUNCTIONS).unwrap().unwrap();
    let words: Vec<u32> = table.as_slice().chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    // As x64: (begin, end) = (words[0], words[1]): the end is the first function's .xdata RVA.
    assert_ne!((words[0], words[1]), expected[0]);
}

#[test]
fn other_machines_are_unsupported() {
    // ARM (not Thumb-2), IA64, RISC-V 64 and LoongArch64 images: unsupported_machine at the
    // Machine field (e_lfanew 0x80 + 4).
    for m in [0x01C0u16, 0x0200, 0x5064, 0x6264, 0x5064 ^ 0x7B79] {
        let (bytes, _) = build(Machine::X64, m, 9, Length::Record);
        let e = ReadyToRunImage::parse(&bytes).unwrap_err();
        assert_eq!((e.kind, e.offset().unwrap()), (ErrorKind::UnsupportedMachine, 0x84), "0x{m:04X}");
        assert_eq!(e.kind.as_str(), "unsupported_machine");
    }
}

#[test]
fn a_wrong_length_is_caught_by_the_bounds_check() {
    // The first method's bounds reach into its funclet: with the funclet's length recorded as
    // half its real size, the last bound lies past the code.
    let (mut bytes, _) = build(Machine::Arm64, 0xAA64, 9, Length::Packed);
    let image = ReadyToRunImage::parse(&bytes).unwrap();
    let table = image.section(super::section::RUNTIME_FUNCTIONS).unwrap().unwrap();
    let at = table.offset() as usize + 8 + 4; // the funclet's UnwindData
    drop(image);
    let packed = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let shorter = (packed & !(0x7FF << 2)) | (((0x20 / 4) / 4) << 2);
    bytes[at..at + 4].copy_from_slice(&shorter.to_le_bytes());
    let image = ReadyToRunImage::parse(&bytes).unwrap();
    assert_eq!(image.code_bodies().unwrap_err().kind, ErrorKind::BadDebugInfo);
}

#[test]
fn packed_unwind_data_lengths() {
    // clrnt.h's RtlpGetFunctionEndAddress: packed when UnwindData & 3 != 0; bits 2-12 are the
    // length, except ARM64's `UnwindData & 7 == 3` ("long branch"), 3 instructions.
    let (bytes, _) = build(Machine::Arm64, 0xAA64, 9, Length::Packed);
    let image = ReadyToRunImage::parse(&bytes).unwrap();
    let pe = image.pe();
    assert_eq!(Machine::Arm64.code_length(pe, (5 << 2) | 1, 9).unwrap(), 20);
    assert_eq!(Machine::Arm64.code_length(pe, (5 << 2) | 2, 9).unwrap(), 20);
    assert_eq!(Machine::Arm64.code_length(pe, 3, 9).unwrap(), 12);
    assert_eq!(Machine::Arm64.code_length(pe, (4 << 2) | 3, 9).unwrap(), 12);
    assert_eq!(Machine::Arm64.code_length(pe, (5 << 2) | 3, 9).unwrap(), 20);
    assert_eq!(Machine::Arm64.code_length(pe, (0x7FF << 2) | 1 | (0x7FFFF << 13), 9).unwrap(), 0x7FF * 4);
    assert_eq!(Machine::Arm.code_length(pe, (5 << 2) | 3, 3).unwrap(), 10);
    assert_eq!(Machine::Arm.code_length(pe, (5 << 2) | 1, 3).unwrap(), 10);
    // An .xdata RVA outside the image.
    assert_eq!(Machine::Arm64.code_length(pe, 0x00F0_0000, 9).unwrap_err().kind, ErrorKind::BadReadyToRun);
    assert_eq!(Machine::X86.code_length(pe, 0x00F0_0000, 3).unwrap_err().kind, ErrorKind::BadReadyToRun);
}

#[test]
fn every_known_major_reads_its_own_layout() {
    for major in 3..=super::NEWEST_PROVEN_MAJOR {
        let (bytes, expected) = build(Machine::X64, 0x8664, major, Length::Record);
        let image = ReadyToRunImage::parse(&bytes).unwrap();
        assert_eq!(Some(image.layout()), super::DebugInfoLayout::for_major(major));
        check_image(&image, &expected, Machine::X64, Os::Windows);
    }
}

#[test]
fn an_image_one_major_above_the_newest_is_refused_unless_a_layout_is_assumed() {
    // Versions read on purpose: never misread a future layout. The major field is 4 bytes into
    // READYTORUN_HEADER; the error names the major found and the newest known.
    let above = super::NEWEST_PROVEN_MAJOR + 1;
    let (bytes, expected) = build(Machine::X64, 0x8664, above, Length::Record);
    let e = ReadyToRunImage::parse(&bytes).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnsupportedVersion);
    assert_eq!(e.kind.as_str(), "unsupported_version");
    assert_eq!(e.versions, Some((u32::from(above), u32::from(super::NEWEST_PROVEN_MAJOR))));
    let at = e.offset().unwrap() as usize;
    assert_eq!(&bytes[at - 4..at + 2], &[b'R', b'T', b'R', 0, above as u8, 0], "the offset is the MajorVersion field");
    let text = e.to_string();
    assert!(text.contains(&format!("found version {above}, the newest known is {}", super::NEWEST_PROVEN_MAJOR)), "{text}");
    // --assume-layout 26: read anyway, in 26's layout (the image was written in it).
    let image = ReadyToRunImage::parse_assuming(&bytes, Some(super::DebugInfoLayout::FAT3)).unwrap();
    assert_eq!(image.major, above);
    check_image(&image, &expected, Machine::X64, Os::Windows);
}

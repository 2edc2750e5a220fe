//! Unit tests of the debug-info decoders (kept beside them, out of the decoder's own file).

use super::*;
use crate::formats::r2r::{jitted_blob, jitted_debug_info};

fn prolog_example() -> Vec<Bound> {
    let b = |native_offset, il_offset, source| Bound { native_offset, il_offset, source: SourceTypes(source) };
    vec![b(0, IlOffset::Prolog, 0), b(8, IlOffset::Il(0), SourceTypes::STACK_EMPTY), b(0x14, IlOffset::Il(6), 0), b(0x20, IlOffset::Epilog, SourceTypes::STACK_EMPTY)]
}

#[test]
fn worked_blob_of_section_2_3() {
    let blob = [0x19, 0x00, 0x04, 0x01, 0x09, 0x23, 0x49, 0x19, 0x90, 0x04, 0x02];
    let d = decode(Reader::new(&blob, 100), DebugInfoLayout::NIBBLE).unwrap();
    assert_eq!(d.bounds, prolog_example());
    assert!(d.vars.is_empty());
}

#[test]
fn worked_blob_of_section_2_5() {
    let blob = [0x07, 0x34, 0x03, 0x40, 0x88, 0x03, 0xa7, 0x0c];
    let d = decode(Reader::new(&blob, 0), DebugInfoLayout::BITPACKED2).unwrap();
    assert_eq!(d.bounds, prolog_example());
}

#[test]
fn encoders_write_the_worked_blobs() {
    // Nibble: bounds bytes `04 01 09 23 49 19 90 04 02`; bit-packed: `34 03 40 88 03 a7 0c`.
    assert_eq!(encode_nibble_bounds(&prolog_example()), [0x04, 0x01, 0x09, 0x23, 0x49, 0x19, 0x90, 0x04, 0x02]);
    assert_eq!(encode_bitpacked_bounds(&prolog_example(), 2), [0x34, 0x03, 0x40, 0x88, 0x03, 0xa7, 0x0c]);
}

proptest::proptest! {
    #[test]
    fn bounds_round_trip(
        raw in proptest::collection::vec((0u32..5000, 0u32..0x2_0000, 0usize..4, 0u32..8), 1..40),
        three in proptest::bool::ANY,
    ) {
        let mut native = 0u32;
        let bounds: Vec<Bound> = raw.iter().map(|&(delta, il, special, flags)| {
            native += delta;
            let il_offset = match special { 0 => IlOffset::Prolog, 1 => IlOffset::Epilog, 2 => IlOffset::NoMapping, _ => IlOffset::Il(il) };
            let mut source = 0;
            if flags & 1 != 0 { source |= SourceTypes::CALL_INSTRUCTION; }
            if flags & 2 != 0 { source |= SourceTypes::STACK_EMPTY; }
            if three && flags & 4 != 0 { source |= SourceTypes::ASYNC; }
            Bound { native_offset: native, il_offset, source: SourceTypes(source) }
        }).collect();
        let nibbles = encode_nibble_bounds(&bounds);
        proptest::prop_assert_eq!(&nibble_bounds(Reader::new(&nibbles, 0)).unwrap(), &bounds);
        let s = if three { 3 } else { 2 };
        let packed = encode_bitpacked_bounds(&bounds, s);
        proptest::prop_assert_eq!(&bitpacked_bounds(Reader::new(&packed, 0), s).unwrap(), &bounds);
    }
}

#[test]
fn truncated_and_unknown() {
    let blob = [0x19, 0x00, 0x04, 0x01];
    assert!(decode(Reader::new(&blob, 0), DebugInfoLayout::NIBBLE).is_err());
    // Below 3 and above the newest proven major there is no layout: the image is refused.
    assert_eq!(DebugInfoLayout::for_major(2), None);
    assert_eq!(DebugInfoLayout::for_major(NEWEST_PROVEN_MAJOR + 1), None);
    assert_eq!(DebugInfoLayout::parse("26"), Some(DebugInfoLayout::FAT3));
    assert_eq!(DebugInfoLayout::parse("new"), None);
}

fn sample(layout: DebugInfoLayout, fat: bool) -> DebugInfo {
    let var = |number, start, end, loc| Var { start, end, number, loc, call_return_il: None };
    let mut vars = vec![var(0, 0, 0x20, VarLoc::Reg { reg: 7 }), var(-3, 4, 0x20, VarLoc::Stack { base_reg: 5, offset: -24 }), var(2, 8, 0x14, VarLoc::StackReg { offset: 16, base_reg: 4, reg: 1 })];
    if layout.vars == VarsLayout::NumberFirst {
        vars.push(Var { start: 0x10, end: 0x11, number: CALL_RETURN_ILNUM, loc: VarLoc::Reg { reg: 0 }, call_return_il: Some(6) });
    }
    if layout.vars == VarsLayout::Unknown {
        vars.clear();
    }
    let mut info = DebugInfo { bounds: prolog_example(), vars, ..DebugInfo::default() };
    if fat {
        info.uninstrumented_bounds = prolog_example();
        info.opaque_sizes = (3, 5);
        info.async_points = vec![
            AsyncSuspension { native_offset: 0x14, locals: vec![(1, 0), (-3, 8)] },
            AsyncSuspension { native_offset: 0x10, locals: vec![] },
            AsyncSuspension { native_offset: 0x1C, locals: vec![(4, 16)] },
        ];
    }
    info
}

#[test]
fn every_layout_round_trips_its_whole_blob() {
    for major in 3..=NEWEST_PROVEN_MAJOR {
        let layout = DebugInfoLayout::for_major(major).unwrap();
        let fats: &[bool] = if layout.header == HeaderLayout::FatOrSlim { &[false, true] } else { &[false] };
        for &fat in fats {
            let info = sample(layout, fat);
            let blob = layout.encode(&info);
            assert_eq!(decode(Reader::new(&blob, 40), layout).unwrap(), info, "major {major} fat {fat}");
            // A byte after a chunk's last entry is not a whole chunk (bit-packed bounds: unless
            // it is zero padding, as 10.0.12's crossgen2 wrote).
            let chunks = split(Reader::new(&blob, 0), layout).unwrap();
            let mut longer = chunks.bounds.as_slice().to_vec();
            longer.push(0x11);
            let mut out = Vec::new();
            assert_eq!(bounds_into(Reader::new(&longer, 0), layout.bounds, &mut out).unwrap_err().kind, ErrorKind::BadDebugInfo);
        }
    }
}

#[test]
fn the_fat_header_of_the_cdac_contract() {
    // `DebugInfo.md`: a first value 0, then six sizes; chunks in that order.
    let info = sample(DebugInfoLayout::FAT3, true);
    let blob = DebugInfoLayout::FAT3.encode(&info);
    let mut n = Nibbles::new(Reader::new(&blob, 0));
    assert_eq!(n.unsigned().unwrap(), 0);
    let sizes: Vec<u32> = (0..6).map(|_| n.unsigned().unwrap()).collect();
    assert_eq!(sizes[3..5], [3, 5]);
    let chunks = split(Reader::new(&blob, 0), DebugInfoLayout::FAT3).unwrap();
    assert_eq!(async_info(chunks.async_info).unwrap(), info.async_points);
    // Read as major 16, the same bytes are a slim header of cbBounds 0 and a bad rest.
    assert!(decode(Reader::new(&blob, 0), DebugInfoLayout::BITPACKED2).is_err());
}

#[test]
fn x86_stack_offsets_are_stored_in_dwords() {
    let mut v = [
        Var { start: 0, end: 4, number: 1, loc: VarLoc::Stack { base_reg: 5, offset: -3 }, call_return_il: None },
        Var { start: 0, end: 4, number: 2, loc: VarLoc::Reg { reg: 1 }, call_return_il: None },
    ];
    scale_x86_stack_offsets(&mut v);
    assert_eq!(v[0].loc, VarLoc::Stack { base_reg: 5, offset: -12 });
    assert_eq!(v[1].loc, VarLoc::Reg { reg: 1 });
}

#[test]
fn number_first_vars_differ_from_start_first_ones() {
    // The same variable, arg 0 in RAX from 0 to 0x20: 0, 0x20, 4, kind 0, reg 0 (3.1 order)
    // and 6, 0, 0x20, kind 0, reg 0 (11.0.0 order).
    let v = [Var { start: 0, end: 0x20, number: 0, loc: VarLoc::Reg { reg: 0 }, call_return_il: None }];
    let old = encode_vars(&v, VarsLayout::StartFirst);
    let new = encode_vars(&v, VarsLayout::NumberFirst);
    assert_eq!(nibble_vars(Reader::new(&old, 0)).unwrap(), v);
    assert_eq!(number_first_vars(Reader::new(&new, 0)).unwrap(), v);
    assert_ne!(number_first_vars(Reader::new(&old, 0)).ok(), Some(v.to_vec()));
}

#[test]
fn a_jitted_blob_is_read_after_a_clear_flag_byte_and_not_with_extras() {
    // The flag byte clear: the rest is the image's encoding.
    assert_eq!(jitted_blob(&[0, 0x3c, 0x3a]), Some(&[0x3c, 0x3a][..]));
    // OSR patchpoint info (bit 0) or rich debug info (bit 1) after the flag: not read.
    assert_eq!(jitted_blob(&[1, 0x3c]), None);
    assert_eq!(jitted_blob(&[2, 0x3c]), None);
    assert_eq!(jitted_blob(&[]), None);
}

#[test]
fn a_jitted_blobs_rich_debug_info_is_found_after_the_flag_byte_or_in_the_fat_header() {
    let l10 = DebugInfoLayout::BITPACKED2;
    // .NET 10: flag 2, the rich chunk's u32 size, the chunk, then the header (offsets stay absolute).
    let blob = [2, 3, 0, 0, 0, 0xA1, 0xA2, 0xA3, 0x3c, 0x3a];
    let j = jitted_debug_info(Reader::new(&blob, 0x1000), l10).unwrap();
    assert_eq!(j.rich.map(|r| (r.offset(), r.as_slice())), Some((0x1005, &[0xA1, 0xA2, 0xA3][..])));
    assert_eq!((j.info.offset(), j.info.as_slice()), (0x1008, &[0x3c, 0x3a][..]));
    // A clear flag byte: no rich chunk, the rest as before.
    let j = jitted_debug_info(Reader::new(&[0, 0x3c, 0x3a], 0), l10).unwrap();
    assert!(j.rich.is_none());
    assert_eq!(j.info.as_slice(), &[0x3c, 0x3a]);
    // Patchpoint info, as a 10.0.12 core holds it: 40 bytes with the local count at 16, then 4
    // bytes per local, skipped; with a rich chunk after it.
    let mut pp = vec![1u8];
    pp.extend_from_slice(&[0xEE; 16]);
    pp.extend_from_slice(&2u32.to_le_bytes());
    pp.extend_from_slice(&[0xEE; 20 + 8]);
    pp.extend_from_slice(&[0x3c, 0x3a]);
    let j = jitted_debug_info(Reader::new(&pp, 0), l10).unwrap();
    assert!(j.rich.is_none());
    assert_eq!((j.info.offset(), j.info.as_slice()), (49, &[0x3c, 0x3a][..]));
    pp[0] = 3;
    pp.truncate(49);
    pp.extend_from_slice(&[1, 0, 0, 0, 0xA1, 0x3c]);
    let j = jitted_debug_info(Reader::new(&pp, 0), l10).unwrap();
    assert_eq!(j.rich.map(|r| r.as_slice()), Some(&[0xA1][..]));
    assert_eq!(j.info.as_slice(), &[0x3c]);
    // Patchpoint info cut short or naming too many locals, an unknown flag, a size past the
    // blob, no byte at all: none.
    let mut many = vec![1u8];
    many.extend_from_slice(&[0; 16]);
    many.extend_from_slice(&0x1_0000u32.to_le_bytes());
    many.extend_from_slice(&[0; 0x40]);
    for bad in [&[1, 0x3c][..], &pp[..40], &many, &[3, 0, 0, 0, 0], &[4, 0x3c], &[2, 9, 0, 0, 0, 1, 2], &[2, 1, 0], &[]] {
        assert!(jitted_debug_info(Reader::new(bad, 0), l10).is_none(), "{bad:?}");
    }
    // .NET 11: no flag byte; the fat header's fifth size is the rich chunk's.
    let mut w = NibbleWriter::default();
    for v in [0, 0, 0, 0, 0, 3, 0] {
        w.unsigned(v);
    }
    let mut fat = w.finish();
    let header = fat.len();
    fat.extend_from_slice(&[0xB1, 0xB2, 0xB3]);
    let j = jitted_debug_info(Reader::new(&fat, 0), DebugInfoLayout::FAT3).unwrap();
    assert_eq!(j.rich.map(|r| (r.offset(), r.as_slice())), Some((header as u64, &[0xB1, 0xB2, 0xB3][..])));
    assert_eq!(j.info.offset(), 0);
    // The fat header with no rich chunk, and the slim one: none.
    assert!(jitted_debug_info(Reader::new(&[0x00, 0x00, 0x00, 0x00], 0), DebugInfoLayout::FAT3).unwrap().rich.is_none());
}

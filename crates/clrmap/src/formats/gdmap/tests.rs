//! docs/format-notes.md#generic-dictionary-map worked examples byte for byte, edge cases, docs/output.md#generic-dictionary-maps faults and offsets.

use super::*;
use crate::base::read::ErrorKind::{self, *};
use crate::formats::signature::{parse_type, HexTokens, Primitive, Type};

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
}

/// A map from its parts: header word, (rva, offset) entries, heap bytes.
fn map(word: u32, entries: &[(u32, u32)], heap: &[u8]) -> Vec<u8> {
    let mut v = word.to_le_bytes().to_vec();
    for &(r, o) in entries {
        v.extend_from_slice(&r.to_le_bytes());
        v.extend_from_slice(&o.to_le_bytes());
    }
    v.extend_from_slice(heap);
    v
}

fn fault(bytes: &[u8]) -> (ErrorKind, u64) {
    let e = DictionaryMap::parse(bytes).and_then(|m| m.validate()).unwrap_err();
    (e.kind, e.offset().unwrap())
}

fn types_of(bytes: &[u8], rva: u32) -> Vec<String> {
    let m = DictionaryMap::parse(bytes).unwrap();
    let l = Lookup::new(m, SortedFlag::Verify).unwrap();
    let e = l.find(rva).unwrap();
    m.item_of(&e).unwrap().render(&HexTokens).unwrap()
}

#[test]
fn worked_example_two_entries_one_item() {
    // docs/format-notes.md#generic-dictionary-map: 23 bytes, heap size 3.
    let bytes = hex("02 00 00 80  00 10 00 00 00 00 00 00  00 20 00 00 00 00 00 00  02 01 08");
    assert_eq!(bytes.len(), 23);
    let m = DictionaryMap::parse(&bytes).unwrap();
    assert!(m.is_sorted_flag_set());
    assert_eq!(m.len(), 2);
    assert_eq!(m.heap_size(), 3);
    let entries: Vec<_> = m.entries().map(|e| (e.rva, e.offset)).collect();
    assert_eq!(entries, [(0x1000, 0), (0x2000, 0)]);
    m.validate().unwrap();
    assert_eq!(types_of(&bytes, 0x1000), ["int32"]);
    assert_eq!(types_of(&bytes, 0x2000), ["int32"]);
    // The builder writes exactly these bytes.
    let mut b = DictionaryMapBuilder::new();
    b.add(0x1000, &[Type::primitive(Primitive::I4)]).unwrap();
    b.add(0x2000, &[Type::primitive(Primitive::I4)]).unwrap();
    assert_eq!(b.build().unwrap(), bytes);
}

#[test]
fn worked_example_items() {
    // docs/format-notes.md#generic-dictionary-map items, written by hand from the grammar.
    let cases: [(&str, &[&str]); 3] =
        [("04 02 0E 12 49", &["string", "class 0x01000012"]), ("07 02 0E 15 12 15 01 08", &["string", "class 0x01000005<int32>"]), ("08 01 14 08 02 01 03 01 00", &["int32[0...2,...]"])];
    for (item, want) in cases {
        let bytes = map(0x8000_0001, &[(0x10, 0)], &hex(item));
        DictionaryMap::parse(&bytes).unwrap().validate().unwrap();
        assert_eq!(types_of(&bytes, 0x10), want, "{item}");
        // And the builder, given those types, writes the same item.
        let types: Vec<Type> = want.iter().map(|t| parse_type(t).unwrap()).collect();
        let mut b = DictionaryMapBuilder::new();
        b.add(0x10, &types).unwrap();
        assert_eq!(b.build().unwrap(), bytes, "{item}");
    }
}

#[test]
fn header_and_directory_faults() {
    // under 4 bytes.
    for n in 0..4 {
        assert_eq!(fault(&vec![0; n]), (TruncatedHeader, 0));
    }
    // 4 + 8·N past the end; offset 4 + 8·⌊(len−4)/8⌋. N = 0x7FFFFFFF in 20 bytes.
    let mut huge = 0x7FFF_FFFFu32.to_le_bytes().to_vec();
    huge.extend_from_slice(&[0; 16]);
    assert_eq!(fault(&huge), (TruncatedDirectory, 20));
    let mut huge_sorted = 0xFFFF_FFFFu32.to_le_bytes().to_vec();
    huge_sorted.extend_from_slice(&[0; 13]);
    assert_eq!(fault(&huge_sorted), (TruncatedDirectory, 12));
    assert_eq!(fault(&map(2, &[(1, 0)], &[])), (TruncatedDirectory, 12));
    // N = 0 is valid, with or without heap bytes.
    DictionaryMap::parse(&map(0, &[], &[])).unwrap().validate().unwrap();
    DictionaryMap::parse(&map(0x8000_0000, &[], &[1, 2, 3])).unwrap().validate().unwrap();
}

#[test]
fn entry_faults_in_contract_order() {
    let item = hex("02 01 08");
    // a. unsorted, at the RVA field of the entry that goes down.
    assert_eq!(fault(&map(0x8000_0002, &[(0x20, 0), (0x10, 0)], &item)), (Unsorted, 12));
    // Not a fault with the flag clear.
    DictionaryMap::parse(&map(2, &[(0x20, 0), (0x10, 0)], &item)).unwrap().validate().unwrap();
    // b. duplicate RVA with another offset (flag clear and set); same offset is fine.
    let two = hex("02 01 08 02 01 0E");
    assert_eq!(fault(&map(3, &[(0x10, 0), (0x20, 3), (0x10, 3)], &two)), (DuplicateRva, 20));
    assert_eq!(fault(&map(0x8000_0002, &[(0x10, 0), (0x10, 3)], &two)), (DuplicateRva, 12));
    DictionaryMap::parse(&map(0x8000_0002, &[(0x10, 0), (0x10, 0)], &two)).unwrap().validate().unwrap();
    // a before b: the sorted check of an entry comes first.
    assert_eq!(fault(&map(0x8000_0003, &[(0x10, 0), (0x30, 3), (0x10, 3)], &two)), (Unsorted, 20));
    // c. offset out of heap, at the offset field.
    assert_eq!(fault(&map(1, &[(0x10, 3)], &item)), (OffsetOutOfHeap, 8));
    assert_eq!(fault(&map(1, &[(0x10, 0)], &[])), (OffsetOutOfHeap, 8));
    // Entry order decides which fault is first: entry 0's bad item before entry 1's bad offset.
    assert_eq!(fault(&map(2, &[(0x10, 0), (0x20, 9)], &hex("02 00 08"))), (EmptyInstantiation, 21));
}

#[test]
fn item_faults() {
    let at = |heap: &str| fault(&map(1, &[(0x10, 0)], &hex(heap)));
    // L cut off, or L past the end of the file: truncated_item at L. Heap starts at 12.
    assert_eq!(at("80"), (TruncatedItem, 12));
    assert_eq!(at("05 01 08"), (TruncatedItem, 12));
    assert_eq!(at("C0 00 00"), (TruncatedItem, 12));
    // L with a bad lead byte.
    assert_eq!(at("E0 01 08"), (BadCompressedInteger, 12));
    // T = 0; T past L.
    assert_eq!(at("01 00"), (EmptyInstantiation, 13));
    assert_eq!(at("01 80 01"), (ItemLengthMismatch, 13));
    assert_eq!(at("00"), (ItemLengthMismatch, 13));
    // A type that runs past L, even though the heap goes on (never read past L).
    assert_eq!(at("02 01 12 49"), (ItemLengthMismatch, 15));
    assert_eq!(at("03 03 08 0E 08"), (ItemLengthMismatch, 16));
    // Leftover bytes inside L.
    assert_eq!(at("03 01 08 08"), (ItemLengthMismatch, 15));
    // Signature faults inside items, at their absolute offsets.
    assert_eq!(at("02 01 00"), (BadElementType, 14));
    assert_eq!(at("03 01 12 03"), (BadToken, 15));
    assert_eq!(at("06 01 14 08 00 00 00"), (BadArrayShape, 16));
    assert_eq!(at("05 01 1B 06 00 01"), (BadCallingConvention, 15));
    assert_eq!(at("03 01 13 E0"), (BadCompressedInteger, 15));
    let mut deep = vec![102u8, 0x01];
    deep.extend(std::iter::repeat_n(0x1D, 100));
    deep.push(0x08);
    let bytes = map(1, &[(0x10, 0)], &deep);
    assert_eq!(fault(&bytes), (TooDeep, 12 + 2 + 100));
}

#[test]
fn hostile_inputs_fail_fast_without_allocating() {
    // Huge T in a tiny item: the loop stops at the first type that runs past L.
    let bytes = map(1, &[(0x10, 0)], &hex("06 DF FF FF FF 08 08"));
    assert_eq!(fault(&bytes), (ItemLengthMismatch, 19));
    // Huge L: truncated_item.
    assert_eq!(fault(&map(1, &[(0x10, 0)], &hex("DF FF FF FF 01 08"))), (TruncatedItem, 12));
    // 100,000 entries sharing one item ("cycles" of shared offsets): read once.
    let entries: Vec<(u32, u32)> = (0..100_000u32).map(|i| (i, 0)).collect();
    let bytes = map(0x8000_0000 | 100_000, &entries, &hex("02 01 08"));
    let m = DictionaryMap::parse(&bytes).unwrap();
    m.validate().unwrap();
    // An item whose offset points into another item's middle parses as what it finds there.
    let bytes = map(2, &[(0x10, 0), (0x20, 2)], &hex("04 01 1D 1D 08"));
    // Offset 2 is `1D 1D 08` read as L = 0x1D: past the end.
    assert_eq!(fault(&bytes), (TruncatedItem, 22));
}

#[test]
fn lint_findings() {
    // Unreferenced bytes, an overlapping item, a non-canonical length, a duplicate entry.
    let heap = hex("02 01 08 FF 80 02 01 0E 03 01 1D 0E");
    //             item@0    junk item@4 (L=80 02, non-canonical)  item@8 = 03 01 1D 0E
    let bytes = map(5, &[(1, 0), (2, 4), (3, 8), (3, 8), (4, 10)], &heap);
    // item@10 = `1D 0E`? L = 0x1D: past the end -> a fault, not a lint. Use a clean variant:
    assert_eq!(fault(&bytes).0, TruncatedItem);
    let bytes = map(4, &[(1, 0), (2, 4), (3, 8), (3, 8)], &heap);
    let lints = DictionaryMap::parse(&bytes).unwrap().lint().unwrap();
    let kinds: Vec<(LintKind, u64)> = lints.iter().map(|l| (l.kind, l.offset)).collect();
    let heap_at = 4 + 8 * 4;
    assert_eq!(kinds, [(LintKind::DuplicateEntry, 28), (LintKind::UnreferencedBytes, heap_at + 3), (LintKind::NonCanonicalInteger, heap_at + 4),]);
    // Overlap: item@0 is an FNPTR item covering 0..8; item@4 (`02 01 08`) lies inside it.
    let heap = hex("07 01 1B 00 02 01 08 08");
    let bytes = map(2, &[(1, 0), (2, 4)], &heap);
    let lints = DictionaryMap::parse(&bytes).unwrap().lint().unwrap();
    assert_eq!(lints.iter().map(|l| l.kind).collect::<Vec<_>>(), [LintKind::OverlappingItems]);
}

#[test]
fn lookup_sorted_unsorted_and_lying() {
    let heap = hex("02 01 08 02 01 0E");
    let sorted = map(0x8000_0003, &[(0x10, 0), (0x20, 3), (0x30, 0)], &heap);
    let m = DictionaryMap::parse(&sorted).unwrap();
    let l = Lookup::new(m, SortedFlag::Trust).unwrap();
    assert!(l.is_in_place());
    assert_eq!(l.find(0x20).unwrap().offset, 3);
    assert_eq!(l.find(0x30).unwrap().index, 2);
    assert!(l.find(0x25).is_none() && l.find(0).is_none() && l.find(u32::MAX).is_none());
    let unsorted = map(3, &[(0x30, 0), (0x10, 0), (0x20, 3)], &heap);
    let m = DictionaryMap::parse(&unsorted).unwrap();
    let l = Lookup::new(m, SortedFlag::Trust).unwrap();
    assert!(!l.is_in_place());
    assert_eq!(l.find(0x20).unwrap().index, 2);
    assert_eq!(l.find(0x30).unwrap().index, 0);
    // A map that claims to be sorted and is not: Verify refuses, Ignore indexes, Trust may miss.
    let lying = map(0x8000_0003, &[(0x30, 0), (0x10, 0), (0x20, 3)], &heap);
    let m = DictionaryMap::parse(&lying).unwrap();
    assert_eq!(Lookup::new(m, SortedFlag::Verify).unwrap_err().kind, Unsorted);
    assert_eq!(Lookup::new(m, SortedFlag::Ignore).unwrap().find(0x30).unwrap().index, 0);
    let _ = Lookup::new(m, SortedFlag::Trust).unwrap().find(0x30);
}

#[test]
fn builder_rules() {
    let i4 = [Type::primitive(Primitive::I4)];
    let s = [Type::primitive(Primitive::String)];
    let mut b = DictionaryMapBuilder::new();
    b.add(0x30, &i4).unwrap();
    b.add(0x10, &s).unwrap();
    b.add(0x20, &i4).unwrap();
    assert_eq!(b.item_count(), 2);
    // Unsorted input: flag clear; sorted on request: flag set.
    let bytes = b.build().unwrap();
    assert_eq!(bytes.get(..4).unwrap(), &3u32.to_le_bytes());
    b.sort_by_rva(true);
    let bytes = b.build().unwrap();
    assert_eq!(bytes.get(..4).unwrap(), &0x8000_0003u32.to_le_bytes());
    DictionaryMap::parse(&bytes).unwrap().validate().unwrap();
    // Same RVA, other types: refused. No types: refused. Bad types: refused.
    assert_eq!(b.add(0x10, &i4).unwrap_err().kind, DuplicateRva);
    assert_eq!(b.add(0x40, &[]).unwrap_err().kind, EmptyInstantiation);
    assert_eq!(b.add(0x40, &[Type::primitive(Primitive::Void)]).unwrap_err().kind, BadElementType);
    // A payload with an over-long count is rewritten canonically.
    let mut b = DictionaryMapBuilder::new();
    b.add_payload(0x10, &hex("80 01 08")).unwrap();
    assert_eq!(b.build().unwrap(), map(0x8000_0001, &[(0x10, 0)], &hex("02 01 08")));
    // A parsed map rewrites to canonical bytes that parse to the same entries and types.
    let messy = map(2, &[(0x20, 0), (0x10, 6)], &hex("C0 00 00 02 01 08 03 80 01 0E"));
    let m = DictionaryMap::parse(&messy).unwrap();
    m.validate().unwrap();
    let clean = DictionaryMapBuilder::from_map(&m).unwrap().build().unwrap();
    assert_eq!(clean, map(2, &[(0x20, 0), (0x10, 3)], &hex("02 01 08 02 01 0E")));
}

#[test]
fn memory_buffer_service() {
    let bytes = hex("02 00 00 80  00 10 00 00 00 00 00 00  00 20 00 00 00 00 00 00  02 01 08");
    let p = MapProvider::new_validated(bytes.clone()).unwrap();
    let buf = p.generic_dictionary_info().unwrap();
    assert_eq!(buf.size(), 23);
    assert_eq!(buf.as_bytes(), &bytes[..]);
    assert!(!buf.start_address().is_null());
    assert_eq!(MapProvider::new(&b"\x01\x00"[..]).unwrap_err().kind, TruncatedHeader);
}

mod properties {
    use super::super::*;
    use crate::formats::signature::{HexTokens, TreeProvider, Type};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn build_parse_round_trip(
            items in prop::collection::vec(prop::collection::vec(crate::formats::signature::tests_support::ty(), 1..4), 1..8),
            picks in prop::collection::vec((any::<u32>(), 0usize..8), 0..40),
            sort in any::<bool>(),
        ) {
            let mut b = DictionaryMapBuilder::new();
            b.sort_by_rva(sort);
            let mut expect: Vec<(u32, Vec<Type>)> = Vec::new();
            let mut seen = std::collections::HashMap::new();
            for (rva, i) in picks {
                let types = &items[i % items.len()];
                if let Some(prev) = seen.get(&rva) {
                    if prev != types { continue; }
                }
                seen.insert(rva, types.clone());
                b.add(rva, types).unwrap();
                expect.push((rva, types.clone()));
            }
            let bytes = b.build().unwrap();
            let m = DictionaryMap::parse(&bytes).unwrap();
            m.validate().unwrap();
            if sort { expect.sort_by_key(|e| e.0); }
            let got: Vec<(u32, Vec<Type>)> = m.entries()
                .map(|e| (e.rva, m.item_of(&e).unwrap().decode(&mut TreeProvider).unwrap()))
                .collect();
            prop_assert_eq!(&got, &expect);
            let l = Lookup::new(m, SortedFlag::Verify).unwrap();
            for (rva, types) in &expect {
                let e = l.find(*rva).unwrap();
                prop_assert_eq!(&m.item_of(&e).unwrap().decode(&mut TreeProvider).unwrap(), types);
                let _ = m.item_of(&e).unwrap().render(&HexTokens).unwrap();
            }
            // Rewriting a parsed map keeps its entries and types (heap order may follow the
            // directory), and rewriting the rewrite changes nothing.
            let again = DictionaryMapBuilder::from_map(&m).unwrap().build().unwrap();
            let m2 = DictionaryMap::parse(&again).unwrap();
            m2.validate().unwrap();
            let got2: Vec<(u32, Vec<Type>)> = m2.entries()
                .map(|e| (e.rva, m2.item_of(&e).unwrap().decode(&mut TreeProvider).unwrap()))
                .collect();
            prop_assert_eq!(&got2, &expect);
            prop_assert_eq!(DictionaryMapBuilder::from_map(&m2).unwrap().build().unwrap(), again);
        }

        /// Canonical maps with a few bytes changed: the fast proof and the in-order check give
        /// the same answer, the same fault included (kind, offset, message).
        #[test]
        fn fast_proof_never_changes_the_answer(
            items in prop::collection::vec(prop::collection::vec(crate::formats::signature::tests_support::ty(), 1..3), 1..6),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        ) {
            let mut b = DictionaryMapBuilder::new();
            for (i, types) in items.iter().enumerate() {
                b.add(0x1000 + 16 * i as u32, types).unwrap();
                if i % 2 == 1 {
                    b.add(0x1008 + 16 * i as u32, &items[0]).unwrap(); // a shared item
                }
            }
            let mut bytes = b.build().unwrap();
            prop_assert!(DictionaryMap::parse(&bytes).unwrap().validate().is_ok());
            for (at, v) in edits {
                let i = at.index(bytes.len());
                bytes[i] = v;
            }
            if let Ok(m) = DictionaryMap::parse(&bytes) {
                prop_assert_eq!(m.validate(), m.validate_in_order());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(m) = DictionaryMap::parse(&bytes) {
                prop_assert_eq!(m.validate(), m.validate_in_order());
                let _ = m.lint();
                if let Ok(l) = Lookup::new(m, SortedFlag::Trust) {
                    for e in m.entries() {
                        if let Some(e) = l.find(e.rva) {
                            if let Ok(it) = m.item_of(&e) { let _ = it.render(&HexTokens); }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn sorted_lookup_agrees_with_a_linear_scan() {
    // Sorted maps with runs of equal RVAs (same item) that cross bucket boundaries, at sizes
    // around the radix table's powers of two.
    for size in [0u32, 1, 2, 31, 32, 33, 64, 1023, 1024, 1025, 5_000, 32_768, 33_000, 40_000] {
        let mut entries = Vec::new();
        let mut rva = 100u32;
        for i in 0..size {
            if i % 7 != 0 {
                rva += 1 + i % 5;
            }
            entries.push((rva, 0));
        }
        let bytes = map(0x8000_0000 | entries.len() as u32, &entries, &hex("02 01 08"));
        let m = DictionaryMap::parse(&bytes).unwrap();
        m.validate().unwrap();
        let l = Lookup::new(m, SortedFlag::Verify).unwrap();
        assert!(l.is_in_place());
        let step = if size > 2_000 { 3 } else { 1 };
        for probe in (0..rva + 3).step_by(step).chain([u32::MAX - 1, u32::MAX]) {
            let want = entries.partition_point(|e| e.0 < probe);
            let want = entries.get(want).filter(|e| e.0 == probe).map(|_| want as u32);
            assert_eq!(l.find(probe).map(|e| e.index), want, "size {size}, rva {probe}");
        }
    }
    // Skewed RVAs: a dense cluster and far outliers put thousands of entries in one bucket, where
    // the search inside the bucket does all the work.
    let mut entries: Vec<(u32, u32)> = (0..10_000u32).map(|i| (100 + i / 3, 0)).collect();
    entries.extend([(0x4000_0000, 0), (u32::MAX - 5, 0)]);
    let bytes = map(0x8000_0000 | entries.len() as u32, &entries, &hex("02 01 08"));
    let l = Lookup::new(DictionaryMap::parse(&bytes).unwrap(), SortedFlag::Verify).unwrap();
    for probe in (0..3_500).chain([0x4000_0000, 0x3FFF_FFFF, u32::MAX - 5, u32::MAX - 4]) {
        let want = entries.partition_point(|e| e.0 < probe);
        let want = entries.get(want).filter(|e| e.0 == probe).map(|_| want as u32);
        assert_eq!(l.find(probe).map(|e| e.index), want, "skewed, rva {probe}");
    }
    // RVAs at the ends of the u32 range.
    let entries = [(0u32, 0u32), (1, 0), (u32::MAX - 1, 0), (u32::MAX, 0), (u32::MAX, 0)];
    let bytes = map(0x8000_0000 | entries.len() as u32, &entries, &hex("02 01 08"));
    let l = Lookup::new(DictionaryMap::parse(&bytes).unwrap(), SortedFlag::Verify).unwrap();
    for (want, &(rva, _)) in [0u32, 1, 2, 3, 3].into_iter().zip(&entries) {
        assert_eq!(l.find(rva).map(|e| e.index), Some(want), "rva {rva}");
    }
    assert!(l.find(2).is_none());
}

#[test]
fn lazy_types_borrow_each_signature() {
    let bytes = map(1, &[(0x10, 0)], &hex("07 02 0E 15 12 15 01 08"));
    let m = DictionaryMap::parse(&bytes).unwrap();
    let item = m.item(0).unwrap();
    let sigs: Vec<_> = item.types().map(|t| t.unwrap()).collect();
    assert_eq!(sigs.len(), 2);
    assert_eq!((sigs[0].offset(), sigs[0].bytes()), (14, &[0x0E][..]));
    assert_eq!((sigs[1].offset(), sigs[1].bytes()), (15, &[0x15, 0x12, 0x15, 0x01, 0x08][..]));
    assert_eq!(sigs[1].render(&HexTokens).unwrap(), "class 0x01000005<int32>");
    // Leftover bytes show up after the last type; a bad type stops the iteration.
    let bytes = map(1, &[(0x10, 0)], &hex("03 01 08 08"));
    let m = DictionaryMap::parse(&bytes).unwrap();
    let r: Vec<_> = m.item(0).unwrap().types().collect();
    assert_eq!(r.len(), 2);
    assert_eq!(r[1].as_ref().unwrap_err().kind, ItemLengthMismatch);
}

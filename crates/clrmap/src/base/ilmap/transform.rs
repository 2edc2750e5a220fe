//! From raw bounds to the public map, as the runtime does it (docs/output.md#il-to-native-maps; docs/format-notes.md#the-runtimes-map,
//! coreclr `DebuggerJitInfo::SetBoundaries` and `MapSortIL`).

use super::model::{Bound, MapEntry};

/// The map `GetILToNativeMapping` returns for a body with these raw bounds (native order).
///
/// 1. CALL_INSTRUCTION entries are dropped (the runtime sorts them last and leaves them out of
///    the count).
/// 2. Neighbours in native order with the same IL offset are merged.
/// 3. Each range ends where the next one starts in native order; the last ends at `code_size`.
/// 4. Order: PROLOG, IL ascending (ties by native start), EPILOG, NO_MAPPING. Zero-length ranges
///    are kept.
pub fn public_map(bounds: &[Bound], code_size: u32) -> Vec<MapEntry> {
    let mut map: Vec<MapEntry> = Vec::with_capacity(bounds.len());
    for b in bounds.iter().filter(|b| !b.source.is_call_instruction()) {
        if let Some(last) = map.last_mut() {
            if last.il == b.il_offset {
                continue;
            }
            // The previous kept range ends where this one starts (native order).
            last.native_end = b.native_offset;
        }
        map.push(MapEntry { il: b.il_offset, native_start: b.native_offset, native_end: code_size });
    }
    // The runtime sorts stably by (IL rank, start). Two entries with equal IL and start come from
    // one native-start group, and the earlier one in native order is then zero-length, so its end
    // is not greater: an unstable sort on (IL rank, start, end) gives the same order, without the
    // stable sort's scratch buffer.
    let key = |m: &MapEntry| (rank(m.il) << 32 | u64::from(m.native_start), m.native_end);
    if map.len() <= 32 {
        // Most maps are short (7 entries on average in CoreLib) and nearly in order: a plain
        // insertion sort beats the general sort's set-up there.
        insertion_sort_by_key(&mut map, key);
    } else if !map.is_sorted_by_key(key) {
        map.sort_unstable_by_key(key);
    }
    map
}

/// Sort a short slice by `key`, moving each element left past the greater ones.
fn insertion_sort_by_key<T: Copy, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    for i in 1..v.len() {
        let mut j = i;
        while let Some(p) = j.checked_sub(1) {
            match (v.get(p), v.get(j)) {
                (Some(a), Some(b)) if key(a) > key(b) => {
                    v.swap(p, j);
                    j = p;
                }
                _ => break,
            }
        }
    }
}

/// `MapSortIL`'s order as one number: PROLOG 0, IL n as n + 1 (a real offset is at most
/// 0xFFFFFFFC), EPILOG 0xFFFFFFFE, NO_MAPPING 0xFFFFFFFF. The same order as
/// [`IlOffset::sort_key`](super::IlOffset::sort_key), cheaper to compare.
fn rank(il: super::IlOffset) -> u64 {
    match il {
        super::IlOffset::Prolog => 0,
        super::IlOffset::Il(v) => u64::from(v.min(0xFFFF_FFFC)).wrapping_add(1),
        super::IlOffset::Epilog => 0xFFFF_FFFE,
        super::IlOffset::NoMapping => 0xFFFF_FFFF,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ilmap::{IlOffset, SourceTypes};

    fn b(native_offset: u32, il: IlOffset, source: u32) -> Bound {
        Bound { native_offset, il_offset: il, source: SourceTypes(source) }
    }

    #[test]
    fn ends_merge_calls_and_order() {
        use IlOffset::*;
        let bounds = [
            b(0, Prolog, 0),
            b(4, Il(0), SourceTypes::STACK_EMPTY),
            b(0x10, Il(0), 0),                             // merged into the previous IL 0
            b(0x14, Il(8), SourceTypes::CALL_INSTRUCTION), // dropped
            b(0x14, Il(6), 0),
            b(0x18, NoMapping, 0),
            b(0x1C, Il(2), 0),  // code motion: lower IL later in native order
            b(0x1C, Epilog, 0), // zero-length neighbour
            b(0x20, Il(2), 0),
        ];
        let m = public_map(&bounds, 0x30);
        let got: Vec<(IlOffset, u32, u32)> = m.iter().map(|e| (e.il, e.native_start, e.native_end)).collect();
        assert_eq!(got, [(Prolog, 0, 4), (Il(0), 4, 0x14), (Il(2), 0x1C, 0x1C), (Il(2), 0x20, 0x30), (Il(6), 0x14, 0x18), (Epilog, 0x1C, 0x20), (NoMapping, 0x18, 0x1C),]);
    }

    #[test]
    fn rank_orders_as_sort_key() {
        use IlOffset::*;
        let all = [Prolog, Il(0), Il(1), Il(0xFFFF_FFFC), Epilog, NoMapping];
        for a in all {
            for b in all {
                assert_eq!(rank(a).cmp(&rank(b)), a.sort_key().cmp(&b.sort_key()), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn equal_il_and_start_keep_native_order() {
        use IlOffset::*;
        // Three entries at 4: the first IL 2 is zero-length and must precede the second.
        let bounds = [b(0, Prolog, 0), b(4, Il(2), 0), b(4, Epilog, 0), b(4, Il(2), 0), b(8, Il(3), 0)];
        let got: Vec<(IlOffset, u32, u32)> = public_map(&bounds, 0x10).iter().map(|e| (e.il, e.native_start, e.native_end)).collect();
        assert_eq!(got, [(Prolog, 0, 4), (Il(2), 4, 4), (Il(2), 4, 8), (Il(3), 8, 0x10), (Epilog, 4, 4)]);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use crate::base::ilmap::{IlOffset, SourceTypes};
    use proptest::prelude::*;

    /// The runtime's rule, written the slow and obvious way: drop CALL_INSTRUCTION entries, merge
    /// equal-IL neighbours, end each range at the next start, then a stable sort by (IL rank,
    /// start) as `MapSortIL` does.
    fn reference(bounds: &[Bound], code_size: u32) -> Vec<MapEntry> {
        let kept: Vec<&Bound> = bounds.iter().filter(|b| !b.source.is_call_instruction()).collect();
        let mut merged: Vec<&Bound> = Vec::new();
        for b in kept {
            if merged.last().is_none_or(|l| l.il_offset != b.il_offset) {
                merged.push(b);
            }
        }
        let mut map: Vec<MapEntry> =
            merged.iter().enumerate().map(|(i, b)| MapEntry { il: b.il_offset, native_start: b.native_offset, native_end: merged.get(i + 1).map_or(code_size, |n| n.native_offset) }).collect();
        map.sort_by_key(|m| (m.il.sort_key(), m.native_start));
        map
    }

    fn il() -> impl Strategy<Value = IlOffset> {
        prop_oneof![Just(IlOffset::Prolog), Just(IlOffset::Epilog), Just(IlOffset::NoMapping), (0u32..12).prop_map(IlOffset::Il)]
    }

    proptest! {
        #[test]
        fn public_map_equals_the_runtime_rule(raw in proptest::collection::vec((0u32..6, il(), 0u32..8), 0..60)) {
            // Native offsets only grow (the decoders guarantee it): deltas of 0-5 make many ties.
            let mut native = 0;
            let bounds: Vec<Bound> = raw.iter().map(|&(delta, il, source)| {
                native += delta;
                Bound { native_offset: native, il_offset: il, source: SourceTypes(source) }
            }).collect();
            prop_assert_eq!(public_map(&bounds, native + 4), reference(&bounds, native + 4));
        }
    }
}

//! From raw bounds to the public map, as the runtime does it (contract §4; ilmap.md §1.4,
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
    let mut kept: Vec<Bound> = Vec::with_capacity(bounds.len());
    for b in bounds.iter().filter(|b| !b.source.is_call_instruction()) {
        if kept.last().is_some_and(|last| last.il_offset == b.il_offset) {
            continue;
        }
        kept.push(*b);
    }
    let mut map: Vec<MapEntry> = kept
        .iter()
        .enumerate()
        .map(|(i, b)| MapEntry {
            il: b.il_offset,
            native_start: b.native_offset,
            native_end: kept.get(i.saturating_add(1)).map_or(code_size, |n| n.native_offset),
        })
        .collect();
    // A stable sort keeps native order among equal (IL, start) pairs, as the runtime's does.
    map.sort_by_key(|m| (m.il.sort_key(), m.native_start));
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ilmap::{IlOffset, SourceTypes};

    fn b(native_offset: u32, il: IlOffset, source: u32) -> Bound {
        Bound { native_offset, il_offset: il, source: SourceTypes(source) }
    }

    #[test]
    fn ends_merge_calls_and_order() {
        use IlOffset::*;
        let bounds = [
            b(0, Prolog, 0),
            b(4, Il(0), SourceTypes::STACK_EMPTY),
            b(0x10, Il(0), 0),             // merged into the previous IL 0
            b(0x14, Il(8), SourceTypes::CALL_INSTRUCTION), // dropped
            b(0x14, Il(6), 0),
            b(0x18, NoMapping, 0),
            b(0x1C, Il(2), 0),             // code motion: lower IL later in native order
            b(0x1C, Epilog, 0),            // zero-length neighbour
            b(0x20, Il(2), 0),
        ];
        let m = public_map(&bounds, 0x30);
        let got: Vec<(IlOffset, u32, u32)> = m.iter().map(|e| (e.il, e.native_start, e.native_end)).collect();
        assert_eq!(
            got,
            [
                (Prolog, 0, 4),
                (Il(0), 4, 0x14),
                (Il(2), 0x1C, 0x1C),
                (Il(2), 0x20, 0x30),
                (Il(6), 0x14, 0x18),
                (Epilog, 0x1C, 0x20),
                (NoMapping, 0x18, 0x1C),
            ]
        );
    }
}

//! Native offset → IL offset, and IL offset → native ranges (docs/output.md#frame-rules).

use super::model::{IlOffset, MapEntry};

/// How to answer for code that maps to a special region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// The offset is a return address (any frame but the leaf): look up `offset − 1`, the call
    /// instruction itself (x86/x64, where the call ends at the return address).
    pub return_address: bool,
}

/// What a native offset maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// A real IL offset.
    Il(u32),
    /// The prolog: the runtime reports IL 0.
    Prolog,
    /// An epilog: the runtime reports the greatest real IL offset of the method (`il`, if any).
    Epilog(Option<u32>),
    /// Code that maps to no IL; a profiler should show no line.
    NoMapping,
    /// The offset is outside the body.
    Outside,
}

/// The greatest real IL offset of a map: what an epilog reports (the runtime's `m_lastIL`).
fn last_il(map: &[MapEntry]) -> Option<u32> {
    map.iter().filter_map(|e| if let IlOffset::Il(v) = e.il { Some(v) } else { None }).max()
}

/// Resolve a native offset against a body's public map (`code_size` bounds the body).
///
/// The map is searched in native order by floor: the last range start ≤ offset. Among ranges
/// starting at that same native offset the lowest real IL offset wins; a special value only when
/// there is no real one (a profiler's choice). Below the first start: the prolog.
pub fn native_to_il(map: &[MapEntry], code_size: u32, offset: u32, policy: Policy) -> Resolved {
    let offset = if policy.return_address { offset.saturating_sub(1) } else { offset };
    if offset >= code_size {
        return Resolved::Outside;
    }
    let floor = map.iter().filter(|e| e.native_start <= offset).map(|e| e.native_start).max();
    let Some(start) = floor else { return Resolved::Prolog };
    let group = map.iter().filter(|e| e.native_start == start);
    let real = group.clone().filter_map(|e| match e.il {
        IlOffset::Il(v) => Some(v),
        _ => None,
    });
    if let Some(v) = real.min() {
        return Resolved::Il(v);
    }
    let max_real = last_il(map);
    let mut specials = group.map(|e| e.il);
    if specials.clone().any(|i| i == IlOffset::Epilog) {
        Resolved::Epilog(max_real)
    } else if specials.any(|i| i == IlOffset::Prolog) {
        Resolved::Prolog
    } else {
        Resolved::NoMapping
    }
}

/// What the runtime reports for a native offset in a stack frame: the map entry that holds it
/// and the IL offset `StackFrame.GetILOffset()` gives (docs/output.md#frame-rules).
///
/// The runtime scans its map in IL order (the public map's order) and takes the first entry
/// whose range holds the offset (`DebuggerJitInfo::MapNativeOffsetToIL`). The last entry in
/// native order has no end in the runtime's own map, so it holds every offset from its start
/// (here: the entry that ends at the code size); so does a zero-length non-PROLOG entry at
/// offset 0. PROLOG and NO_MAPPING report IL 0, EPILOG the greatest IL offset of the map, and an
/// offset that no entry holds IL 0 (`MAPPING_NO_INFO`). `offset` is the one to look up: a caller
/// with a return address subtracts one first where the runtime does.
pub fn runtime_il_offset(map: &[MapEntry], code_size: u32, offset: u32) -> (Option<IlOffset>, u32) {
    let holds = |e: &&MapEntry| offset >= e.native_start && (offset < e.native_end || holds_to_the_end(e, code_size));
    runtime_answer(map, map.iter().find(holds))
}

/// Whether `e` holds every offset from its start on, by [`runtime_il_offset`]'s rule.
fn holds_to_the_end(e: &MapEntry, code_size: u32) -> bool {
    (e.native_end == code_size && e.native_end > 0) || (e.native_start == 0 && e.native_end == 0 && e.il != IlOffset::Prolog)
}

/// [`runtime_il_offset`]'s answer when `found` is the first entry of `map` that holds the offset.
fn runtime_answer(map: &[MapEntry], found: Option<&MapEntry>) -> (Option<IlOffset>, u32) {
    match found.map(|e| e.il) {
        Some(IlOffset::Il(v)) => (Some(IlOffset::Il(v)), v),
        Some(IlOffset::Epilog) => (Some(IlOffset::Epilog), last_il(map).unwrap_or(0)),
        Some(other) => (Some(other), 0),
        None => (None, 0),
    }
}

/// [`runtime_il_offset`] for many bodies, answered by a binary search instead of a scan of the
/// map: each body's native offsets split where an entry starts or ends, and within each piece
/// the first entry that holds an offset (and so the answer) is the same, found once when the
/// index is made.
#[derive(Clone, Debug, Default)]
pub(crate) struct RuntimeIlIndex {
    /// Per body: its pieces' range in `starts` and `answers`.
    bodies: Vec<(usize, usize)>,
    /// Each piece's first native offset, ascending within a body (the first is 0).
    starts: Vec<u32>,
    /// Each piece's answer.
    answers: Vec<(Option<IlOffset>, u32)>,
}

impl RuntimeIlIndex {
    /// Add a body's map (bodies are numbered in the order they are added).
    pub(crate) fn push(&mut self, map: &[MapEntry], code_size: u32) {
        let first = self.starts.len();
        // Where each entry stops holding (`None`: never), and the piece boundaries.
        let ends: Vec<Option<u32>> = map.iter().map(|e| if holds_to_the_end(e, code_size) { None } else { Some(e.native_end) }).collect();
        let mut cuts: Vec<u32> = Vec::with_capacity(map.len().saturating_mul(2).saturating_add(1));
        cuts.push(0);
        for (e, end) in map.iter().zip(&ends) {
            cuts.push(e.native_start);
            cuts.extend(*end);
        }
        cuts.sort_unstable();
        cuts.dedup();
        // The entries by start; a sweep over the cuts keeps those started in a heap by their
        // place in the map, dropping those that have stopped holding as they reach the top.
        let mut by_start: Vec<usize> = (0..map.len()).collect();
        by_start.sort_by_key(|&i| map.get(i).map_or(0, |e| e.native_start));
        let mut next = by_start.iter().peekable();
        let mut started = std::collections::BinaryHeap::new();
        for &cut in &cuts {
            while let Some(&&i) = next.peek() {
                if map.get(i).is_some_and(|e| e.native_start <= cut) {
                    started.push(std::cmp::Reverse(i));
                    next.next();
                } else {
                    break;
                }
            }
            while let Some(&std::cmp::Reverse(i)) = started.peek() {
                if ends.get(i).copied().flatten().is_some_and(|end| end <= cut) {
                    started.pop();
                } else {
                    break;
                }
            }
            let found = started.peek().and_then(|&std::cmp::Reverse(i)| map.get(i));
            self.starts.push(cut);
            self.answers.push(runtime_answer(map, found));
        }
        self.bodies.push((first, self.starts.len()));
    }

    /// [`runtime_il_offset`] of the body numbered `body` at `offset`.
    #[inline]
    pub(crate) fn answer(&self, body: usize, offset: u32) -> (Option<IlOffset>, u32) {
        let Some(&(first, end)) = self.bodies.get(body) else { return (None, 0) };
        let Some(starts) = self.starts.get(first..end) else { return (None, 0) };
        // The first cut is 0, so every offset is in a piece.
        let piece = starts.partition_point(|&s| s <= offset).saturating_sub(1);
        self.answers.get(first.saturating_add(piece)).copied().unwrap_or((None, 0))
    }
}

/// The native ranges of one IL offset, in native order.
pub fn il_to_native(map: &[MapEntry], il: IlOffset) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = map.iter().filter(|e| e.il == il).map(|e| (e.native_start, e.native_end)).collect();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use IlOffset::*;

    fn m(il: IlOffset, s: u32, e: u32) -> MapEntry {
        MapEntry { il, native_start: s, native_end: e }
    }

    /// The runtime's Max<T> example shape (measured on the live runtime), in IL order as the public map gives it:
    /// interleaved ranges (IL 0 and IL 15 each own two), a zero-length range, an epilog, and a
    /// NO_MAPPING range that ends at the code size (0x6e). Both lookups are tested on it.
    fn max_map() -> [MapEntry; 9] {
        [
            m(Prolog, 0x0, 0x4),
            m(Il(0), 0x4, 0x1d),
            m(Il(0), 0x56, 0x5c),
            m(Il(8), 0x1d, 0x27),
            m(Il(15), 0x27, 0x3d),
            m(Il(15), 0x5c, 0x62),
            m(Il(67), 0x54, 0x54),
            m(Epilog, 0x54, 0x56),
            m(NoMapping, 0x68, 0x6e),
        ]
    }

    /// The index answers every offset as the scan does, on maps of every shape the rule
    /// branches on: overlapping, out of order, zero-length, ending at the code size, special values.
    #[test]
    fn the_index_answers_as_the_scan() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: u32| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % u64::from(n)) as u32
        };
        let mut maps = vec![(max_map().to_vec(), 0x6e), (Vec::new(), 10), (vec![m(Il(3), 0, 0)], 0), (vec![m(Prolog, 0, 0), m(Il(1), 0, 0)], 8)];
        for _ in 0..400 {
            let code_size = next(40);
            let map: Vec<MapEntry> = (0..next(12))
                .map(|_| {
                    let il = match next(6) {
                        0 => Prolog,
                        1 => Epilog,
                        2 => NoMapping,
                        _ => Il(next(20)),
                    };
                    let s = next(code_size + 4);
                    let e = if next(4) == 0 { code_size } else { s.saturating_add(next(6)) };
                    m(il, s, e.max(if next(5) == 0 { 0 } else { s }))
                })
                .collect();
            maps.push((map, code_size));
        }
        let mut index = RuntimeIlIndex::default();
        for (map, code_size) in &maps {
            index.push(map, *code_size);
        }
        let mut seen_some = 0;
        for (body, (map, code_size)) in maps.iter().enumerate() {
            for offset in (0..code_size + 8).chain([u32::MAX - 1, u32::MAX]) {
                let want = runtime_il_offset(map, *code_size, offset);
                seen_some += usize::from(want.0.is_some());
                assert_eq!(index.answer(body, offset), want, "map {map:?}, code size {code_size}, offset {offset}");
            }
        }
        assert!(seen_some > 1000);
        assert_eq!(index.answer(maps.len(), 0), (None, 0));
    }

    #[test]
    fn floor_zero_length_interleaved_and_return_addresses() {
        let map = max_map();
        let p = Policy::default();
        assert_eq!(native_to_il(&map, 0x6e, 0x0, p), Resolved::Prolog);
        assert_eq!(native_to_il(&map, 0x6e, 0x4, p), Resolved::Il(0));
        assert_eq!(native_to_il(&map, 0x6e, 0x1c, p), Resolved::Il(0));
        assert_eq!(native_to_il(&map, 0x6e, 0x1d, p), Resolved::Il(8));
        // Zero-length IL 67 and EPILOG share 0x54: the real IL offset wins.
        assert_eq!(native_to_il(&map, 0x6e, 0x55, p), Resolved::Il(67));
        assert_eq!(native_to_il(&map, 0x6e, 0x5d, p), Resolved::Il(15));
        assert_eq!(native_to_il(&map, 0x6e, 0x69, p), Resolved::NoMapping);
        assert_eq!(native_to_il(&map, 0x6e, 0x6e, p), Resolved::Outside);
        // A return address at the start of IL 8's range belongs to the call in IL 0's range.
        let ra = Policy { return_address: true };
        assert_eq!(native_to_il(&map, 0x6e, 0x1d, ra), Resolved::Il(0));
        assert_eq!(il_to_native(&map, Il(15)), [(0x27, 0x3d), (0x5c, 0x62)]);
        let epilog_only = [m(Il(3), 0, 2), m(Epilog, 2, 4)];
        assert_eq!(native_to_il(&epilog_only, 4, 3, p), Resolved::Epilog(Some(3)));
    }

    #[test]
    fn the_runtime_takes_the_first_holding_entry_in_il_order() {
        let map = max_map();
        assert_eq!(runtime_il_offset(&map, 0x6e, 0x2), (Some(Prolog), 0));
        assert_eq!(runtime_il_offset(&map, 0x6e, 0x1d), (Some(Il(8)), 8));
        // IL 0's second range comes before IL 8 and IL 15 in IL order.
        assert_eq!(runtime_il_offset(&map, 0x6e, 0x5b), (Some(Il(0)), 0));
        // The zero-length IL 67 holds nothing: the epilog answers, with the last IL offset.
        assert_eq!(runtime_il_offset(&map, 0x6e, 0x55), (Some(Epilog), 67));
        assert_eq!(runtime_il_offset(&map, 0x6e, 0x69), (Some(NoMapping), 0));
        // No entry holds 0x64: IL 0 (MAPPING_NO_INFO).
        assert_eq!(runtime_il_offset(&map, 0x6e, 0x64), (None, 0));
        // The last entry in native order is open-ended, as in the runtime's map.
        assert_eq!(runtime_il_offset(&map, 0x6e, 0x6e), (Some(NoMapping), 0));
        assert_eq!(runtime_il_offset(&map[1..3], 0x6e, 0x2), (None, 0));
    }
}

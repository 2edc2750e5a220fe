//! Strict validation (docs/output.md#which-fault-is-first) and the lint report.

use super::map::{DictionaryMap, Entry, Item};
use crate::base::read::write::{compressed_u32_len, push_compressed_u32};
use crate::base::read::{Error, ErrorKind, Result};
use crate::formats::signature::{encode_type, quick, TreeProvider};

/// A bitset over heap offsets: which items have been read. One bit per heap byte.
struct Seen(Vec<u64>);

impl Seen {
    fn new(bits: usize) -> Self {
        Seen(vec![0; bits.div_ceil(64)])
    }
    /// Mark `i` if `cond`, without a branch on `cond`.
    #[inline]
    fn insert_if(&mut self, i: u32, cond: bool) {
        if let Some(w) = self.0.get_mut((i / 64) as usize) {
            *w |= u64::from(cond) << (i % 64);
        }
    }

    /// True if `i` is marked (out of range: false).
    #[inline]
    fn contains(&self, i: u32) -> bool {
        self.0.get((i / 64) as usize).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Mark `i`; true if it was not marked before.
    #[inline]
    fn insert(&mut self, i: u32) -> bool {
        let (word, bit) = ((i / 64) as usize, i % 64);
        match self.0.get_mut(word) {
            Some(w) => {
                let fresh = *w & (1 << bit) == 0;
                *w |= 1 << bit;
                fresh
            }
            None => false,
        }
    }
}

/// True if the item at `offset` is certainly well-formed: L fits the heap, T ≥ 1 fits L, and the
/// body is exactly T types of the shapes [`quick::plain_types`] covers. `false` decides nothing:
/// the strict reader then runs and names the fault, if any (docs/format-notes.md#generic-dictionary-map; docs/output.md#which-fault-is-first, step d).
#[inline]
fn plainly_valid_item(heap: &[u8], offset: u32) -> bool {
    let Some(mut b) = heap.get(offset as usize..) else { return false };
    let Some(body) = quick::compressed(&mut b).and_then(|len| b.get(..len as usize)) else { return false };
    let mut body = body;
    match quick::compressed(&mut body) {
        Some(count) if count > 0 => quick::plain_types(body, count),
        _ => false,
    }
}

/// Items of a one-byte L ≤ `N` waiting for the automaton: up to [`QUEUE`] of them, as (heap
/// offset, L), so that the walk only queues and the automaton then runs in one regular loop, four
/// items at a time (no per-item "is the batch full?" branch to mispredict).
struct Queue<const N: usize> {
    items: Vec<(u32, u8)>,
}

/// Items per queue before it is proven and emptied: a fixed bound, so memory does not grow with
/// the heap.
const QUEUE: usize = 4096;

impl<const N: usize> Queue<N> {
    fn new() -> Self {
        Queue { items: Vec::with_capacity(QUEUE) }
    }

    /// Queue an item; true when the queue is full.
    #[inline(always)]
    fn push(&mut self, offset: u32, len: u8) -> bool {
        self.items.push((offset, len));
        self.items.len() >= QUEUE
    }

    /// Run the automaton on the queued items and mark the proven ones; the others get the slow
    /// proof. Empties the queue.
    #[inline(never)]
    fn prove(&mut self, heap: &[u8], proven: &mut Seen, slow: &impl Fn(u32) -> bool) {
        for group in self.items.chunks(4) {
            // A short last group leaves lanes "past the end" from the start: never proven.
            let mut lanes = [[0x100u16; N]; 4];
            for (lane, &(offset, len)) in lanes.iter_mut().zip(group) {
                // The walk queued only items whose L bytes fit the heap.
                let body = heap.get((offset as usize).saturating_add(1)..).unwrap_or(&[]);
                *lane = quick::symbols::<N>(body, usize::from(len));
            }
            let ok = quick::short_counted_types(&lanes);
            // Marking is branch-free; only a group with an unproven item takes the slow loop.
            let mut all = group.len() == 4;
            for (&(offset, _), &fast) in group.iter().zip(&ok) {
                proven.insert_if(offset, fast);
                all &= fast;
            }
            if !all {
                for (&(offset, _), &fast) in group.iter().zip(&ok) {
                    if !fast && slow(offset) {
                        proven.insert(offset);
                    }
                }
            }
        }
        self.items.clear();
    }
}

/// L's width and L of the item at `at`, if L reads and its L bytes fit the heap.
#[inline]
fn item_len(heap: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut b = heap.get(at..)?;
    let before = b.len();
    let len = quick::compressed(&mut b)? as usize;
    let width = before.wrapping_sub(b.len());
    (len <= b.len()).then_some((width, len))
}

/// The index of the first entry (in directory order) whose RVA appeared earlier with another heap
/// offset, for an unsorted directory. Sorting (RVA, index) keys costs 8 bytes per entry, once.
fn first_conflicting_rva(map: &DictionaryMap<'_>) -> Option<u32> {
    let mut keys: Vec<u64> = map.entries().map(|e| (u64::from(e.rva) << 32) | u64::from(e.index)).collect();
    keys.sort_unstable();
    let mut first: Option<u32> = None;
    let mut group_offset: Option<(u32, u32)> = None; // (rva, offset of the group's first entry)
    let mut group_done = false;
    for k in keys {
        // (RVA << 32) | index: both halves fit a u32.
        let (rva, index) = (u32::try_from(k >> 32).unwrap_or(u32::MAX), u32::try_from(k & u64::from(u32::MAX)).unwrap_or(u32::MAX));
        let offset = map.entry(index).map(|e| e.offset).unwrap_or(0);
        match group_offset {
            Some((g, o)) if g == rva => {
                // Every earlier entry of the group had offset `o` (else the group is done), so the
                // first entry with another offset is the group's first conflict.
                if !group_done && offset != o {
                    first = Some(first.map_or(index, |f| f.min(index)));
                    group_done = true;
                }
            }
            _ => {
                group_offset = Some((rva, offset));
                group_done = false;
            }
        }
    }
    first
}

impl<'a> DictionaryMap<'a> {
    /// Validate the whole map strictly and report the first fault, in the order of docs/output.md#which-fault-is-first
    /// defines: for each entry in directory order, (a) `unsorted`, (b) `duplicate_rva`,
    /// (c) `offset_out_of_heap`, (d) its item, unless an earlier entry already read it.
    ///
    /// Two ways, one answer. A sorted map whose items lie back to back from heap offset 0 (what
    /// every producer writes) is first *proven* valid in two sequential passes: one walk over the
    /// heap marking each item it proves well-formed, then one pass over the directory checking
    /// order, repeats and that each offset is a marked item. That proof never reports a fault:
    /// if it fails for any reason, the map is checked again entry by entry in contract order
    /// ([`DictionaryMap::validate_in_order`]), which finds the first fault. So the result is
    /// always that of the in-order check; the fast proof only makes valid maps cheaper (the
    /// `gdmap` fuzz target and a property test compare the two).
    ///
    /// Memory: one bit per heap byte to read each item once, plus, for a directory whose sorted
    /// flag is clear, 8 bytes per entry to find repeated RVAs. With the flag set, sortedness is
    /// checked as we go and repeats are neighbours, so nothing more is needed.
    pub fn validate(&self) -> Result<()> {
        if self.is_sorted_flag_set() && self.proven_valid_by_walk() {
            return Ok(());
        }
        self.validate_in_order()
    }

    /// True if the map is certainly valid: the heap walk and directory pass described at
    /// [`DictionaryMap::validate`]. `false` proves nothing.
    fn proven_valid_by_walk(&self) -> bool {
        // 1. The heap, item after item: the next item starts where this one ends (L's width + L),
        //    so finding items never waits on a type's parse. Each item is marked only once it is
        //    proven well-formed: items of a one-byte L up to 32 by the branch-free automaton
        //    (queued, then four at a time, in two sizes: 16 and 32 steps); the rest, and any the automaton
        //    cannot prove, by the quick walk or the strict reader. An unproven item stays
        //    unmarked, and entries naming it fail step 2.
        let heap = self.heap();
        let mut proven = Seen::new(heap.len());
        let prove_slowly = |offset: u32| plainly_valid_item(heap, offset) || self.item(offset).is_ok_and(|i| i.validate().is_ok());
        // Two sizes of automaton run, so that short items do not pay for long ones' steps. (A
        // third size, 8, saved steps but cost more in mispredicted choices between sizes: L is
        // 1-8 for 42% of items and 9-16 for 50%, in random order.)
        let (mut short, mut long) = (Queue::<16>::new(), Queue::<32>::new());
        let mut at = 0usize;
        while let Some((width, len)) = item_len(heap, at) {
            let Ok(offset) = u32::try_from(at) else { break };
            // Only a one-byte L can be queued (the automaton starts right after it).
            match (width, u8::try_from(len)) {
                (1, Ok(l @ 1..=16)) => {
                    if short.push(offset, l) {
                        short.prove(heap, &mut proven, &prove_slowly);
                    }
                }
                (1, Ok(l @ 17..=32)) => {
                    if long.push(offset, l) {
                        long.prove(heap, &mut proven, &prove_slowly);
                    }
                }
                _ => {
                    if prove_slowly(offset) {
                        proven.insert(offset);
                    }
                }
            }
            at = at.saturating_add(width).saturating_add(len);
        }
        short.prove(heap, &mut proven, &prove_slowly);
        long.prove(heap, &mut proven, &prove_slowly);
        // 2. The directory: ascending RVAs, a repeated RVA only with the same offset, and every
        //    offset a proven item. No early exit: the checks fold into one flag with `&` and `|`
        //    (not `&&`, `||`), so the loop has no data-dependent branch.
        let mut ok = true;
        let mut prev: Option<u64> = None;
        for raw in self.directory_bytes().chunks_exact(8) {
            let Some(&word) = raw.first_chunk::<8>() else { return false };
            let word = u64::from_le_bytes(word);
            // An entry is two u32 (RVA, then heap offset), little-endian: the word's low and high halves.
            let low = |w: u64| u32::try_from(w & u64::from(u32::MAX)).unwrap_or(u32::MAX);
            let (rva, offset) = (low(word), u32::try_from(word >> 32).unwrap_or(u32::MAX));
            let (prev_rva, prev_word) = prev.map_or((0, word), |p| (low(p), p));
            ok &= prev.is_none() | (rva > prev_rva) | (word == prev_word);
            ok &= proven.contains(offset);
            prev = Some(word);
        }
        ok
    }

    /// The strict check in the order of docs/output.md#which-fault-is-first, entry by entry (what [`DictionaryMap::validate`]
    /// returns). Public for the tests and fuzz target that compare the two paths.
    #[doc(hidden)]
    pub fn validate_in_order(&self) -> Result<()> {
        let sorted = self.is_sorted_flag_set();
        let conflict = if sorted { None } else { first_conflicting_rva(self) };
        let heap_size = self.heap_size();
        let heap = self.heap();
        let mut seen = Seen::new(heap_size);
        // Offsets above every offset read so far cannot have been read: producers lay items out
        // in first-use order, so most entries take this branch and skip the bitset look-up.
        let mut high: Option<u32> = None;
        let (mut prev_rva, mut prev_offset) = (0u32, 0u32);
        for (index, raw) in (0u32..).zip(self.directory_bytes().chunks_exact(8)) {
            let (rva, offset) = match raw {
                &[a, b, c, d, e, f, g, h] => (u32::from_le_bytes([a, b, c, d]), u32::from_le_bytes([e, f, g, h])),
                _ => break,
            };
            let entry = Entry { index, rva, offset };
            // a, b. With the flag set, equal RVAs are neighbours, so comparing with the previous
            // entry finds every repeat; without it, `first_conflicting_rva` found the first one.
            if sorted && index > 0 {
                if rva < prev_rva {
                    return Err(Error::new(ErrorKind::Unsorted, entry.rva_field(), "RVAs in ascending order"));
                }
                if rva == prev_rva && offset != prev_offset {
                    return Err(duplicate(&entry));
                }
            }
            if conflict == Some(index) {
                return Err(duplicate(&entry));
            }
            // c.
            if offset as usize >= heap_size {
                return Err(Error::new(ErrorKind::OffsetOutOfHeap, entry.offset_field(), "a heap offset inside the heap"));
            }
            // d. Each item once.
            let fresh = match high {
                Some(h) if offset <= h => seen.insert(offset),
                _ => {
                    high = Some(offset);
                    seen.insert(offset)
                }
            };
            // Nearly every item takes the quick acceptor; the strict reader decides the rest.
            if fresh && !plainly_valid_item(heap, offset) {
                self.item(offset)?.validate()?;
            }
            (prev_rva, prev_offset) = (rva, offset);
        }
        Ok(())
    }

    /// Everything [`DictionaryMap::validate`] checks, and on success the findings that are not
    /// faults (docs/output.md#which-fault-is-first): unreferenced heap bytes, overlapping items, non-canonical
    /// compressed integers, duplicate entries.
    pub fn lint(&self) -> Result<Vec<Lint>> {
        self.validate()?;
        let mut lints = Vec::new();
        // Items, by heap offset, each once.
        let mut offsets: Vec<u32> = self.entries().map(|e| e.offset).collect();
        offsets.sort_unstable();
        offsets.dedup();
        let mut items: Vec<Item<'a>> = Vec::with_capacity(offsets.len());
        for &o in &offsets {
            items.push(self.item(o)?);
        }
        // Coverage: gaps between items are unreferenced; an item starting inside another overlaps.
        let heap_start = self.heap_start();
        let heap_end = heap_start.saturating_add(self.heap_size() as u64);
        let mut covered_to = heap_start;
        for it in &items {
            if it.start > covered_to {
                lints.push(Lint::new(LintKind::UnreferencedBytes, covered_to, it.start.saturating_sub(covered_to)));
            } else if it.start < covered_to {
                lints.push(Lint::new(LintKind::OverlappingItems, it.start, covered_to.saturating_sub(it.start)));
            }
            covered_to = covered_to.max(it.end());
        }
        if heap_end > covered_to {
            lints.push(Lint::new(LintKind::UnreferencedBytes, covered_to, heap_end.saturating_sub(covered_to)));
        }
        // Canonical forms: L and T by their widths; the types by re-encoding them canonically.
        for it in &items {
            let types = it.decode(&mut TreeProvider)?;
            let mut canonical = Vec::new();
            push_compressed_u32(&mut canonical, it.count)?;
            for t in &types {
                encode_type(t, &mut canonical)?;
            }
            let non_canonical = usize::from(it.length_width) != compressed_u32_len(it.length) || canonical != it.body();
            if non_canonical {
                lints.push(Lint::new(LintKind::NonCanonicalInteger, it.start, u64::from(it.length)));
            }
        }
        // Duplicate entries: the same RVA and the same offset more than once.
        let mut keys: Vec<(u32, u32, u32)> = self.entries().map(|e| (e.rva, e.offset, e.index)).collect();
        keys.sort_unstable();
        for w in keys.windows(2) {
            if let [a, b] = w {
                if a.0 == b.0 && a.1 == b.1 {
                    let e = Entry { index: b.2, rva: b.0, offset: b.1 };
                    lints.push(Lint::new(LintKind::DuplicateEntry, e.rva_field(), 8));
                }
            }
        }
        lints.sort_by_key(|l| (l.offset, l.kind));
        Ok(lints)
    }
}

fn duplicate(e: &Entry) -> Error {
    Error::new(ErrorKind::DuplicateRva, e.rva_field(), "each RVA with one heap offset")
}

/// What a lint finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum LintKind {
    /// Heap bytes that no entry's item covers.
    UnreferencedBytes,
    /// An item that starts inside another item.
    OverlappingItems,
    /// An item whose compressed integers are not all in their shortest form.
    NonCanonicalInteger,
    /// An entry repeating an earlier entry's RVA and heap offset.
    DuplicateEntry,
}

impl LintKind {
    /// The snake_case id.
    pub fn as_str(self) -> &'static str {
        match self {
            LintKind::UnreferencedBytes => "unreferenced_bytes",
            LintKind::OverlappingItems => "overlapping_items",
            LintKind::NonCanonicalInteger => "non_canonical_integer",
            LintKind::DuplicateEntry => "duplicate_entry",
        }
    }
}

/// A lint finding: not a fault, but worth knowing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Lint {
    /// What.
    pub kind: LintKind,
    /// Absolute offset where it starts.
    pub offset: u64,
    /// How many bytes it covers.
    pub length: u64,
}

impl Lint {
    fn new(kind: LintKind, offset: u64, length: u64) -> Self {
        Lint { kind, offset, length }
    }
}

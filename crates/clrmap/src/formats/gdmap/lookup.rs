//! Lookup by RVA.

use super::map::{DictionaryMap, Entry};
use crate::base::read::{Error, ErrorKind, Result};

/// How to treat the sorted flag when looking up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortedFlag {
    /// Believe the flag: binary-search the directory in place when it is set. A map that lies
    /// gives wrong answers (never a panic).
    Trust,
    /// Check the flag once (O(N), no allocation) and fail with `unsorted` if it lies.
    Verify,
    /// Ignore the flag and always build an index.
    Ignore,
}

/// Finds a dictionary's entry by RVA.
///
/// **A sorted map** is binary-searched in place, inside a range narrowed by a radix table: the
/// RVA span is cut into 2^k equal buckets (about 8 entries each on average, k ≤ 24), and the
/// table holds the index of the first entry of each bucket (4 bytes per bucket: 0.5 bytes per
/// entry, 512 KiB for a million entries, built in one pass). A look-up reads two adjacent table
/// slots, then binary-searches only that bucket's entries, branch-free: for evenly spread RVAs
/// that is one or two cache lines of the directory instead of ~20 dependent, mispredicted probes.
/// Skewed RVAs only make some buckets longer; the search inside stays a binary search, so the
/// worst case is the plain binary search's O(log N).
///
/// **An unsorted map** gets an index, built once: a sorted copy of (RVA, entry index) pairs,
/// 8 bytes per entry and O(N log N) time, then a binary search per look-up.
///
/// When an RVA appears more than once, the first entry in directory order answers.
#[derive(Clone, Debug)]
pub struct Lookup<'a> {
    map: DictionaryMap<'a>,
    index: LookupIndex,
}

/// The index behind a [`Lookup`], without the borrow of the map's bytes: a holder of the bytes
/// (the C ABI's provider) builds it once and passes the map to each [`LookupIndex::find`]. It
/// must be used with the map it was built from; another map gives wrong answers, never a panic.
#[derive(Clone, Debug)]
pub struct LookupIndex {
    index: Option<Vec<u64>>,
    radix: Radix,
}

/// The radix table of a sorted map.
#[derive(Clone, Debug, Default)]
struct Radix {
    /// The first entry's RVA.
    min: u32,
    /// The last entry's RVA.
    max: u32,
    /// Bucket of an RVA: (rva − min) >> shift.
    shift: u32,
    /// `first[b]`: the index of the first entry whose bucket is ≥ b; one extra slot at the end
    /// holds N.
    first: Vec<u32>,
}

/// The bucket of an RVA's distance from the first RVA.
#[inline]
fn bucket(delta: u32, shift: u32) -> usize {
    delta.checked_shr(shift).unwrap_or(0) as usize
}

impl Radix {
    fn new(map: &DictionaryMap<'_>) -> Radix {
        let n = map.len();
        let (Some(min), Some(max)) = (map.rva_at(0), n.checked_sub(1).and_then(|l| map.rva_at(l))) else { return Radix::default() };
        // 2^k buckets, k = ⌈log2(N/8)⌉ at most 24: about 8 entries per bucket.
        let k = (n / 8).max(1).next_power_of_two().trailing_zeros().min(24);
        let span_bits = 32u32.saturating_sub(max.wrapping_sub(min).leading_zeros());
        let shift = span_bits.saturating_sub(k);
        // At most 2^k buckets (below 2^24, and below N/4). A trusted flag that lies cannot make
        // more: bucket numbers are capped at the last entry's.
        let buckets = bucket(max.wrapping_sub(min), shift);
        let mut first = Vec::with_capacity(buckets.saturating_add(2));
        for i in 0..n {
            let Some(rva) = map.rva_at(i) else { break };
            // Entries are sorted, so bucket numbers only grow: open every bucket up to this one.
            let b = bucket(rva.wrapping_sub(min), shift).min(buckets);
            while first.len() <= b {
                first.push(i);
            }
        }
        first.push(n);
        Radix { min, max, shift, first }
    }
}

impl<'a> Lookup<'a> {
    /// Prepare lookups over `map`.
    pub fn new(map: DictionaryMap<'a>, flag: SortedFlag) -> Result<Self> {
        Ok(Lookup { map, index: LookupIndex::new(&map, flag)? })
    }

    /// The map.
    pub fn map(&self) -> &DictionaryMap<'a> {
        &self.map
    }

    /// True when lookups search the directory in place (no index was built).
    pub fn is_in_place(&self) -> bool {
        self.index.is_in_place()
    }

    /// The first entry with this RVA.
    pub fn find(&self, rva: u32) -> Option<Entry> {
        self.index.find(&self.map, rva)
    }
}

impl LookupIndex {
    /// Build the index for `map` (see [`Lookup`] for what is built and its cost).
    pub fn new(map: &DictionaryMap<'_>, flag: SortedFlag) -> Result<Self> {
        let in_place = match flag {
            SortedFlag::Trust => map.is_sorted_flag_set(),
            SortedFlag::Ignore => false,
            SortedFlag::Verify => {
                if map.is_sorted_flag_set() {
                    let mut prev = 0u32;
                    for e in map.entries() {
                        if e.rva < prev {
                            return Err(Error::new(ErrorKind::Unsorted, e.rva_field(), "RVAs in ascending order"));
                        }
                        prev = e.rva;
                    }
                }
                map.is_sorted_flag_set()
            }
        };
        let mut radix = Radix::default();
        let index = if in_place {
            radix = Radix::new(map);
            None
        } else {
            let mut keys: Vec<u64> = map.entries().map(|e| (u64::from(e.rva) << 32) | u64::from(e.index)).collect();
            keys.sort_unstable();
            Some(keys)
        };
        Ok(LookupIndex { index, radix })
    }

    /// True when lookups search the directory in place (no index was built).
    pub fn is_in_place(&self) -> bool {
        self.index.is_none()
    }

    /// The first entry with this RVA in `map` (the map the index was built from).
    pub fn find(&self, map: &DictionaryMap<'_>, rva: u32) -> Option<Entry> {
        match &self.index {
            None => {
                let r = &self.radix;
                if rva < r.min || rva > r.max {
                    return None;
                }
                let b = bucket(rva.wrapping_sub(r.min), r.shift);
                let (Some(&lo), Some(&hi)) = (r.first.get(b), r.first.get(b.saturating_add(1))) else { return None };
                // Branch-free lower bound in [lo, hi): entries before `lo` are in lower buckets
                // (below `rva`), entries from `hi` on in higher ones (above it).
                let (mut base, mut len) = (lo, hi.saturating_sub(lo));
                while len > 1 {
                    let half = len / 2;
                    let probe = map.rva_at(base.saturating_add(half)).unwrap_or(u32::MAX);
                    base = if probe < rva { base.saturating_add(half) } else { base };
                    len = len.saturating_sub(half);
                }
                let at = if len == 1 && map.rva_at(base).is_some_and(|v| v < rva) { base.saturating_add(1) } else { base };
                map.entry(at).filter(|e| e.rva == rva)
            }
            Some(keys) => {
                let at = keys.partition_point(|k| (k >> 32) < u64::from(rva));
                let k = *keys.get(at)?;
                // A key is (RVA << 32) | index: its halves fit a u32 each.
                if u32::try_from(k >> 32).ok() != Some(rva) {
                    return None;
                }
                map.entry(u32::try_from(k & u64::from(u32::MAX)).ok()?)
            }
        }
    }
}

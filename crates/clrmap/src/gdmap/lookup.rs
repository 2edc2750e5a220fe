//! Lookup by RVA.

use super::map::{DictionaryMap, Entry};
use crate::read::{Error, ErrorKind, Result};

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

/// Entries per block of the fence index.
const BLOCK: u32 = 32;

/// Finds a dictionary's entry by RVA.
///
/// A sorted map is binary-searched in place, through a fence index: the RVA of every 32nd entry
/// (8 bytes per 32 entries, 250 KiB for a million entries, built in one strided pass, kept in
/// Eytzinger order). The fences stay in cache, so a look-up costs one binary search there and one inside a 256-byte block of
/// the directory, instead of ~20 scattered reads. An unsorted map gets an index,
/// built once: a sorted copy of (RVA, entry index) pairs, 8 bytes per entry and O(N log N) time,
/// then O(log N) per lookup. When an RVA appears more than once, the first entry in directory order
/// answers.
#[derive(Clone, Debug)]
pub struct Lookup<'a> {
    map: DictionaryMap<'a>,
    index: Option<Vec<u64>>,
    /// The fences in Eytzinger (BFS) order, 1-based: (fence RVA, its rank among the fences).
    fences: Vec<(u32, u32)>,
}

/// Lay the sorted `fences` out in Eytzinger order (node k's children at 2k and 2k+1), so a search
/// reads one predictable path instead of jumping across the array.
fn eytzinger(fences: &[u32]) -> Vec<(u32, u32)> {
    let mut out = vec![(0u32, 0u32); fences.len().saturating_add(1)];
    let mut next = 0usize;
    fill(fences, &mut out, &mut next, 1);
    out
}

/// In-order walk of the implicit tree: the i-th node visited gets the i-th smallest fence.
/// Recursion depth is log2 of the fence count (at most 27 for 2^31 entries).
fn fill(fences: &[u32], out: &mut [(u32, u32)], next: &mut usize, k: usize) {
    if k >= out.len() {
        return;
    }
    fill(fences, out, next, k.saturating_mul(2));
    if let (Some(slot), Some(&f)) = (out.get_mut(k), fences.get(*next)) {
        *slot = (f, *next as u32);
    }
    *next = next.saturating_add(1);
    fill(fences, out, next, k.saturating_mul(2).saturating_add(1));
}

impl<'a> Lookup<'a> {
    /// Prepare lookups over `map`.
    pub fn new(map: DictionaryMap<'a>, flag: SortedFlag) -> Result<Self> {
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
        let mut fences = Vec::new();
        let index = if in_place {
            let sorted: Vec<u32> = (0..map.len()).step_by(BLOCK as usize).filter_map(|i| map.rva_at(i)).collect();
            fences = eytzinger(&sorted);
            None
        } else {
            let mut keys: Vec<u64> = map.entries().map(|e| (u64::from(e.rva) << 32) | u64::from(e.index)).collect();
            keys.sort_unstable();
            Some(keys)
        };
        Ok(Lookup { map, index, fences })
    }

    /// The map.
    pub fn map(&self) -> &DictionaryMap<'a> {
        &self.map
    }

    /// True when lookups search the directory in place (no index was built).
    pub fn is_in_place(&self) -> bool {
        self.index.is_none()
    }

    /// The first entry with this RVA.
    pub fn find(&self, rva: u32) -> Option<Entry> {
        match &self.index {
            None => {
                // `block` fences are below `rva`. Every entry up to the last of them is below it too
                // (the directory is sorted), and the entry at the next fence is not: the answer
                // lies in ((block-1)·32, block·32].
                // Descend the Eytzinger tree: go right while the fence is below `rva`. The last left
                // turn marks the first fence not below `rva`; its rank is the number of fences below.
                let mut k = 1usize;
                while let Some(&(f, _)) = self.fences.get(k) {
                    k = k.saturating_mul(2).saturating_add(usize::from(f < rva));
                }
                k >>= k.trailing_ones().saturating_add(1);
                let block = match self.fences.get(k) {
                    Some(&(_, rank)) if k > 0 => rank as usize,
                    _ => self.fences.len().saturating_sub(1),
                };
                let first = (block.saturating_sub(1) as u32).saturating_mul(BLOCK);
                let last = (block as u32).saturating_mul(BLOCK).saturating_add(1).min(self.map.len());
                // partition_point over entry indexes: the first entry whose RVA is not below `rva`.
                let (mut lo, mut hi) = (first, last);
                while lo < hi {
                    let mid = lo.midpoint(hi);
                    if self.map.rva_at(mid)? < rva {
                        lo = mid.saturating_add(1);
                    } else {
                        hi = mid;
                    }
                }
                self.map.entry(lo).filter(|e| e.rva == rva)
            }
            Some(keys) => {
                let at = keys.partition_point(|k| (k >> 32) < u64::from(rva));
                let k = *keys.get(at)?;
                if (k >> 32) as u32 != rva {
                    return None;
                }
                self.map.entry(k as u32)
            }
        }
    }
}

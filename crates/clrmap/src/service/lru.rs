//! The service's LRU of parsed symbols: what it holds for a module, and its eviction by bytes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::PdbModule;
use crate::answers::symbolizer::Symbolizer;

/// What the LRU holds for a key.
#[derive(Clone, Debug)]
pub(super) enum Slot {
    Pdb(Arc<PdbModule>),
    Image(Arc<Symbolizer>),
    /// Nothing usable was found: why.
    Missing(Arc<str>),
}

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) slot: Slot,
    pub(super) size: u64,
    pub(super) used: u64,
    pub(super) at: Instant,
}

/// Parsed symbols by key, least recently used out first, bounded by the bytes its entries hold.
/// Recency is a queue of (tick, key): a use pushes a new one, and eviction pops from the front,
/// skipping those a later use made stale; the queue is rebuilt when stale ones outnumber live
/// ones. Every operation is O(1) amortized, whatever the number of entries.
#[derive(Debug, Default)]
pub(super) struct Lru {
    pub(super) map: HashMap<String, Entry>,
    pub(super) order: std::collections::VecDeque<(u64, String)>,
    pub(super) bytes: u64,
    pub(super) tick: u64,
}

impl Lru {
    pub(super) fn touch(&mut self, key: &str) -> u64 {
        self.tick = self.tick.wrapping_add(1);
        self.order.push_back((self.tick, key.to_owned()));
        if self.order.len() > self.map.len().saturating_mul(2).saturating_add(64) {
            let map = &self.map;
            self.order.retain(|(tick, key)| map.get(key).is_some_and(|e| e.used == *tick));
        }
        self.tick
    }

    pub(super) fn get(&mut self, key: &str, missing_ttl: Duration) -> Option<Slot> {
        let expired = match self.map.get(key) {
            Some(e) => matches!(e.slot, Slot::Missing(_)) && e.at.elapsed() >= missing_ttl,
            None => return None,
        };
        if expired {
            if let Some(e) = self.map.remove(key) {
                self.bytes = self.bytes.saturating_sub(e.size);
            }
            return None;
        }
        let tick = self.touch(key);
        let e = self.map.get_mut(key)?;
        e.used = tick;
        Some(e.slot.clone())
    }

    pub(super) fn put(&mut self, key: String, slot: Slot, size: u64, cap: u64) {
        if let Some(old) = self.map.remove(&key) {
            self.bytes = self.bytes.saturating_sub(old.size);
        }
        // Least recently used first, until the new entry fits (an entry larger than the whole
        // budget is still kept alone: the request that loaded it is using it anyway).
        while self.bytes.saturating_add(size) > cap {
            let Some((tick, victim)) = self.order.pop_front() else { break };
            if self.map.get(&victim).is_some_and(|e| e.used == tick) {
                if let Some(e) = self.map.remove(&victim) {
                    self.bytes = self.bytes.saturating_sub(e.size);
                }
            }
        }
        self.bytes = self.bytes.saturating_add(size);
        let tick = self.touch(&key);
        self.map.insert(key, Entry { slot, size, used: tick, at: Instant::now() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lru_evicts_the_least_recently_used_by_bytes() {
        let mut l = Lru::default();
        let m = |s: &str| Slot::Missing(Arc::from(s));
        l.put("a".into(), m("a"), 40, 100);
        l.put("b".into(), m("b"), 40, 100);
        let ttl = Duration::from_secs(30);
        assert!(l.get("a", ttl).is_some());
        l.put("c".into(), m("c"), 40, 100);
        assert!(l.get("b", ttl).is_none() && l.get("a", ttl).is_some() && l.get("c", ttl).is_some());
        // Uses past eviction keep the recency queue bounded.
        for _ in 0..1000 {
            assert!(l.get("a", ttl).is_some());
        }
        assert!(l.order.len() <= 2 * l.map.len() + 65, "{}", l.order.len());
        // A missing entry past its time is gone.
        assert_eq!(l.bytes, 80);
        assert!(l.get("a", Duration::ZERO).is_none());
        assert_eq!(l.bytes, 40);
    }
}

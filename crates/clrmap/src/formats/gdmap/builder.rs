//! The writer: (RVA, types) pairs to a canonical map.

use std::collections::HashMap;

use super::map::{DictionaryMap, COUNT_MASK, SORTED_FLAG};
use crate::base::read::write::push_compressed_u32;
use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::signature::{decode_type, encode_type, TreeProvider, Type};

/// Builds a generic dictionary map (docs/format-notes.md#generic-dictionary-map): canonical compressed integers,
/// identical items stored once, L computed from the encoded payload, and the sorted flag set only
/// when the entries really are in ascending RVA order.
#[derive(Clone, Debug, Default)]
pub struct DictionaryMapBuilder {
    entries: Vec<(u32, u32)>,
    items: Vec<u8>,
    by_payload: HashMap<Vec<u8>, u32>,
    rvas: HashMap<u32, u32>,
    sort: bool,
}

fn fail(kind: ErrorKind, expected: &'static str) -> Error {
    Error::nowhere(kind, expected)
}

impl DictionaryMapBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sort the entries by RVA when building (a stable sort, so equal RVAs keep their order).
    pub fn sort_by_rva(&mut self, sort: bool) -> &mut Self {
        self.sort = sort;
        self
    }

    /// Number of entries so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no entry was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of distinct items so far.
    pub fn item_count(&self) -> usize {
        self.by_payload.len()
    }

    /// Add a dictionary at `rva` whose instantiation is `types` (at least one).
    ///
    /// An RVA added again with the same types gives a second entry sharing the item; with other
    /// types it is `duplicate_rva`, since a map cannot answer both.
    pub fn add(&mut self, rva: u32, types: &[Type]) -> Result<()> {
        if types.is_empty() {
            return Err(fail(ErrorKind::EmptyInstantiation, "at least one type"));
        }
        let mut payload = Vec::new();
        let count = u32::try_from(types.len()).map_err(|_| fail(ErrorKind::OutOfRange, "fewer types"))?;
        push_compressed_u32(&mut payload, count)?;
        for t in types {
            encode_type(t, &mut payload)?;
        }
        self.add_canonical(rva, payload)
    }

    /// Add a dictionary from an encoded payload `T Type×T` (for example a MethodSpec blob after
    /// its 0x0A byte). The payload is decoded strictly and re-encoded canonically.
    pub fn add_payload(&mut self, rva: u32, payload: &[u8]) -> Result<()> {
        let mut r = Reader::new(payload, 0);
        let count_at = r.offset();
        let count = r.compressed_u32("an instantiation count")?;
        if count == 0 {
            return Err(Error::new(ErrorKind::EmptyInstantiation, count_at, "at least one type"));
        }
        let mut types = Vec::with_capacity((count as usize).min(r.len()));
        for _ in 0..count {
            types.push(decode_type(&mut r, &mut TreeProvider)?);
        }
        if !r.is_empty() {
            return Err(r.error(ErrorKind::ItemLengthMismatch, "no bytes after the types"));
        }
        self.add(rva, &types)
    }

    fn add_canonical(&mut self, rva: u32, payload: Vec<u8>) -> Result<()> {
        if self.entries.len() >= COUNT_MASK as usize {
            return Err(fail(ErrorKind::OutOfRange, "at most 0x7FFFFFFF entries"));
        }
        let offset = match self.by_payload.get(&payload) {
            Some(&o) => o,
            None => {
                let o = u32::try_from(self.items.len()).map_err(|_| fail(ErrorKind::OutOfRange, "a heap under 4 GiB"))?;
                let len = u32::try_from(payload.len()).map_err(|_| fail(ErrorKind::OutOfRange, "a smaller item"))?;
                push_compressed_u32(&mut self.items, len)?;
                self.items.extend_from_slice(&payload);
                self.by_payload.insert(payload, o);
                o
            }
        };
        match self.rvas.get(&rva) {
            Some(&o) if o != offset => return Err(fail(ErrorKind::DuplicateRva, "each RVA with one instantiation")),
            Some(_) => {}
            None => {
                self.rvas.insert(rva, offset);
            }
        }
        self.entries.push((rva, offset));
        Ok(())
    }

    /// Rebuild a parsed map: every entry, its types decoded strictly and written canonically.
    pub fn from_map(map: &DictionaryMap<'_>) -> Result<Self> {
        let mut b = DictionaryMapBuilder::new();
        for e in map.entries() {
            let item = map.item_of(&e)?;
            let types = item.decode(&mut TreeProvider)?;
            b.add(e.rva, &types)?;
        }
        Ok(b)
    }

    /// Write the map.
    pub fn build(&self) -> Result<Vec<u8>> {
        let mut entries = self.entries.clone();
        if self.sort {
            entries.sort_by_key(|&(rva, _)| rva);
        }
        let sorted = entries.windows(2).all(|w| matches!(w, [a, b] if a.0 <= b.0));
        let count = u32::try_from(entries.len()).map_err(|_| fail(ErrorKind::OutOfRange, "fewer entries"))?;
        let dir = entries.len().checked_mul(8).and_then(|d| d.checked_add(4));
        let total = dir.and_then(|d| d.checked_add(self.items.len())).ok_or(fail(ErrorKind::OutOfRange, "a smaller map"))?;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(count | if sorted { SORTED_FLAG } else { 0 }).to_le_bytes());
        for (rva, offset) in entries {
            out.extend_from_slice(&rva.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
        }
        out.extend_from_slice(&self.items);
        Ok(out)
    }
}

//! The zero-copy reader: header, directory entries, heap items.

use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::signature::{decode_type, render_one, skip_type, SpanRenderer, TypeNames, TypeProvider, TypeSig};

/// Bit 31 of the header word: the entries are sorted by RVA, ascending.
pub const SORTED_FLAG: u32 = 0x8000_0000;
/// Bits 0-30 of the header word: the entry count N.
pub const COUNT_MASK: u32 = 0x7FFF_FFFF;
/// Size of one directory entry: u32 RVA, u32 heap offset.
pub const ENTRY_SIZE: usize = 8;
/// Size of the header word.
pub const HEADER_SIZE: usize = 4;

/// A generic dictionary map (`ICorDebugSymbolProvider2::GetGenericDictionaryInfo`), borrowed.
///
/// Layout (docs/format-notes.md#generic-dictionary-map): a little-endian header word (bit 31 sorted, bits 0-30 N), N entries
/// of (u32 RVA, u32 heap offset), then the heap. Heap size = length − (N·8 + 4) — the docs'
/// prose has the subtraction backwards (docs/format-notes.md#generic-dictionary-map). [`DictionaryMap::parse`] checks only the
/// header and that the directory fits, in O(1); items are read when asked for.
#[derive(Clone, Copy, Debug)]
pub struct DictionaryMap<'a> {
    data: &'a [u8],
    sorted: bool,
    count: u32,
    directory: &'a [u8],
    heap: &'a [u8],
}

/// One directory entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Index in directory order.
    pub index: u32,
    /// The dictionary's RVA.
    pub rva: u32,
    /// Offset of its item, relative to the heap start.
    pub offset: u32,
}

impl Entry {
    /// Absolute file offset of this entry's RVA field.
    pub fn rva_field(&self) -> u64 {
        (HEADER_SIZE as u64).saturating_add(u64::from(self.index).saturating_mul(ENTRY_SIZE as u64))
    }
    /// Absolute file offset of this entry's heap-offset field.
    pub fn offset_field(&self) -> u64 {
        self.rva_field().saturating_add(4)
    }
}

/// A heap item: its position and its instantiation bytes, with the count T read and checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item<'a> {
    /// Offset relative to the heap start.
    pub heap_offset: u32,
    /// Absolute file offset of the item's length field L.
    pub start: u64,
    /// L: bytes after the length field.
    pub length: u32,
    /// Width in bytes of the length field (1, 2 or 4; over-long forms are kept as read).
    pub length_width: u8,
    /// T: the number of types.
    pub count: u32,
    /// Width in bytes of the count field.
    pub count_width: u8,
    /// The item's L bytes (T and the types).
    body: &'a [u8],
    /// The bytes of the T type signatures (the rest of the item after T, not yet validated).
    types: Reader<'a>,
}

impl<'a> DictionaryMap<'a> {
    /// Read the header and bound the directory: `truncated_header` under 4 bytes,
    /// `truncated_directory` if 4 + 8·N exceeds the length. Nothing else is read, and nothing is
    /// allocated: a header claiming N = 0x7FFFFFFF in a 20-byte file fails here at once.
    pub fn parse(data: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(data, 0);
        let word = r.u32("a 4-byte header word").map_err(|e| Error::new(ErrorKind::TruncatedHeader, 0, e.expected))?;
        let count = word & COUNT_MASK;
        let sorted = word & SORTED_FLAG != 0;
        // 4 + 8·N in u64 cannot overflow for N < 2^31.
        let dir_len = u64::from(count).saturating_mul(ENTRY_SIZE as u64);
        let Some(dir_len) = usize::try_from(dir_len).ok().filter(|&n| n <= r.len()) else {
            // docs/output.md#fault-offsets: the offset of the first entry that does not fit whole.
            let whole = (data.len().saturating_sub(HEADER_SIZE) / ENTRY_SIZE) as u64;
            let at = (HEADER_SIZE as u64).saturating_add(whole.saturating_mul(ENTRY_SIZE as u64));
            return Err(Error::new(ErrorKind::TruncatedDirectory, at, "N directory entries of 8 bytes"));
        };
        let directory = r.bytes(dir_len, "the directory")?;
        let heap = r.as_slice();
        Ok(DictionaryMap { data, sorted, count, directory, heap })
    }

    /// The whole map.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.data
    }

    /// Bit 31 of the header: the producer says the entries are sorted by RVA.
    pub fn is_sorted_flag_set(&self) -> bool {
        self.sorted
    }

    /// N, the number of directory entries.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// True when N = 0.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Heap size in bytes.
    pub fn heap_size(&self) -> usize {
        self.heap.len()
    }

    /// Absolute file offset of the heap start (4 + 8·N).
    pub fn heap_start(&self) -> u64 {
        (HEADER_SIZE as u64).saturating_add(self.directory.len() as u64)
    }

    /// The heap bytes.
    pub fn heap(&self) -> &'a [u8] {
        self.heap
    }

    /// The directory's bytes (N entries of 8 bytes).
    pub(crate) fn directory_bytes(&self) -> &'a [u8] {
        self.directory
    }

    /// Entry `index`, if it exists.
    #[inline]
    pub fn entry(&self, index: u32) -> Option<Entry> {
        let at = (index as usize).checked_mul(ENTRY_SIZE)?;
        let bytes = self.directory.get(at..at.checked_add(ENTRY_SIZE)?)?;
        let rva = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
        let offset = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?);
        Some(Entry { index, rva, offset })
    }

    /// The RVA of entry `index` (for searches).
    #[inline]
    pub(crate) fn rva_at(&self, index: u32) -> Option<u32> {
        let at = (index as usize).checked_mul(ENTRY_SIZE)?;
        let bytes = self.directory.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes(bytes.try_into().ok()?))
    }

    /// The entries in directory order, lazily.
    pub fn entries(&self) -> Entries<'a> {
        Entries { map: *self, next: 0 }
    }

    /// Read the item at `heap_offset`: L (bounded by the file), then T (bounded by L).
    ///
    /// Errors: `offset_out_of_heap`; `truncated_item` at L if L is cut off or its bytes run past
    /// the file; `bad_compressed_integer`; `item_length_mismatch` if T runs past L;
    /// `empty_instantiation` if T = 0. The types themselves are checked by [`Item::validate`] or
    /// when decoded.
    pub fn item(&self, heap_offset: u32) -> Result<Item<'a>> {
        let heap_start = self.heap_start();
        let Some(tail) = self.heap.get(heap_offset as usize..).filter(|t| !t.is_empty()) else {
            return Err(Error::new(ErrorKind::OffsetOutOfHeap, heap_start, "a heap offset inside the heap"));
        };
        let start = heap_start.saturating_add(u64::from(heap_offset));
        let mut r = Reader::new(tail, start);
        // L: a compressed length, not counting itself (docs/format-notes.md#generic-dictionary-map). Bounded by the file.
        let (length, length_width) = r.compressed_u32_sized("an item length").map_err(|e| if e.kind == ErrorKind::Truncated { Error::new(ErrorKind::TruncatedItem, start, e.expected) } else { e })?;
        let mut body = r.split(length as usize, "the item's L bytes").map_err(|_| Error::new(ErrorKind::TruncatedItem, start, "an item whose L bytes fit in the map"))?;
        let body_bytes = body.as_slice();
        // T, bounded by L: a field that runs past L is `item_length_mismatch` (docs/output.md#which-fault-is-first).
        let count_at = body.offset();
        let (count, count_width) = body.compressed_u32_sized("an instantiation count").map_err(in_item)?;
        if count == 0 {
            return Err(Error::new(ErrorKind::EmptyInstantiation, count_at, "at least one type"));
        }
        Ok(Item { heap_offset, start, length, length_width, count, count_width, body: body_bytes, types: body })
    }

    /// The item of `entry`, checking the offset against the heap first.
    pub fn item_of(&self, entry: &Entry) -> Result<Item<'a>> {
        if entry.offset as usize >= self.heap.len() {
            return Err(Error::new(ErrorKind::OffsetOutOfHeap, entry.offset_field(), "a heap offset inside the heap"));
        }
        self.item(entry.offset)
    }
}

/// Inside an item the bound is L: the cursor's `truncated` becomes `item_length_mismatch`.
fn in_item(e: Error) -> Error {
    if e.kind == ErrorKind::Truncated {
        e.with_kind(ErrorKind::ItemLengthMismatch)
    } else {
        e
    }
}

impl<'a> Item<'a> {
    /// Absolute offset of the first byte after the item.
    pub fn end(&self) -> u64 {
        self.types.offset().saturating_add(self.types.len() as u64)
    }

    /// The item's L bytes: the count T and the types.
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// The raw bytes of the T types (and anything after them inside L).
    pub fn type_bytes(&self) -> &'a [u8] {
        self.types.as_slice()
    }

    /// Decode the T types through `provider`, then require that they fill L exactly.
    pub fn decode<P: TypeProvider>(&self, provider: &mut P) -> Result<Vec<P::Type>> {
        let mut r = self.types;
        // Each type takes at least one byte: cap the allocation by the bytes, not by T.
        let mut out = Vec::with_capacity((self.count as usize).min(r.len()));
        for _ in 0..self.count {
            out.push(decode_type(&mut r, provider).map_err(in_item)?);
        }
        if !r.is_empty() {
            return Err(r.error(ErrorKind::ItemLengthMismatch, "no bytes after the T types inside L"));
        }
        Ok(out)
    }

    /// The T types, lazily: each is validated and borrowed as it is reached, and the last is
    /// followed by a check that nothing is left inside L.
    pub fn types(&self) -> Types<'a> {
        Types { r: self.types, left: self.count, done: false }
    }

    /// Check the T types and the length, allocating nothing.
    pub fn validate(&self) -> Result<()> {
        let mut r = self.types;
        for _ in 0..self.count {
            skip_type(&mut r).map_err(in_item)?;
        }
        if !r.is_empty() {
            return Err(r.error(ErrorKind::ItemLengthMismatch, "no bytes after the T types inside L"));
        }
        Ok(())
    }

    /// The types in ILAsm notation.
    pub fn render(&self, names: &dyn TypeNames) -> Result<Vec<String>> {
        let mut r = self.types;
        let mut renderer = SpanRenderer::new(names);
        let mut out = Vec::with_capacity((self.count as usize).min(r.len()));
        for _ in 0..self.count {
            out.push(render_one(&mut r, &mut renderer).map_err(in_item)?);
        }
        if !r.is_empty() {
            return Err(r.error(ErrorKind::ItemLengthMismatch, "no bytes after the T types inside L"));
        }
        Ok(out)
    }
}

/// The types of an item, in order (see [`Item::types`]).
#[derive(Clone, Debug)]
pub struct Types<'a> {
    r: Reader<'a>,
    left: u32,
    done: bool,
}

impl<'a> Iterator for Types<'a> {
    type Item = Result<TypeSig<'a>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.left == 0 {
            self.done = true;
            return if self.r.is_empty() { None } else { Some(Err(self.r.error(ErrorKind::ItemLengthMismatch, "no bytes after the T types inside L"))) };
        }
        self.left = self.left.saturating_sub(1);
        let t = TypeSig::read(&mut self.r).map_err(in_item);
        if t.is_err() {
            self.done = true;
        }
        Some(t)
    }
}

/// The directory entries, in order.
#[derive(Clone, Debug)]
pub struct Entries<'a> {
    map: DictionaryMap<'a>,
    next: u32,
}

impl Iterator for Entries<'_> {
    type Item = Entry;
    fn next(&mut self) -> Option<Entry> {
        let e = self.map.entry(self.next)?;
        self.next = self.next.saturating_add(1);
        Some(e)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.map.count.saturating_sub(self.next) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Entries<'_> {}

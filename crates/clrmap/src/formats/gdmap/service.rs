//! The service shape of `ICorDebugSymbolProvider2::GetGenericDictionaryInfo`, in Rust.

use super::map::DictionaryMap;
use crate::base::read::{Error, ErrorKind, Result};

/// `ICorDebugMemoryBuffer` (cordebug.idl): a block of memory in the caller's address space.
///
/// `GetStartAddress` returns a pointer in the *caller's* address space, not a `CORDB_ADDRESS`
/// (docs/format-notes.md#generic-dictionary-map), so here it is the address of the borrowed bytes.
#[derive(Clone, Copy, Debug)]
pub struct MemoryBuffer<'a> {
    bytes: &'a [u8],
}

impl<'a> MemoryBuffer<'a> {
    /// A buffer over `bytes`; `out_of_range` if they do not fit a `ULONG32` size.
    pub fn new(bytes: &'a [u8]) -> Result<Self> {
        if u32::try_from(bytes.len()).is_err() {
            return Err(Error::nowhere(ErrorKind::OutOfRange, "a buffer under 4 GiB (ULONG32 size)"));
        }
        Ok(MemoryBuffer { bytes })
    }

    /// `GetStartAddress`: the address of the first byte.
    pub fn start_address(&self) -> *const u8 {
        self.bytes.as_ptr()
    }

    /// `GetSize`: the size in bytes.
    pub fn size(&self) -> u32 {
        u32::try_from(self.bytes.len()).unwrap_or(u32::MAX)
    }

    /// The bytes themselves.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// `ICorDebugSymbolProvider2`'s map-serving half: `GetGenericDictionaryInfo`.
pub trait SymbolProvider {
    /// `GetGenericDictionaryInfo(ICorDebugMemoryBuffer**)`: the generic dictionary map.
    fn generic_dictionary_info(&self) -> Result<MemoryBuffer<'_>>;
}

/// A symbol provider serving one map from any byte storage: a `Vec<u8>`, a `&[u8]`, or a
/// memory-mapped file (`memmap2::Mmap` implements `AsRef<[u8]>`; creating one is `unsafe`, so this
/// `unsafe`-free library leaves that to the caller, as the C ABI crate does).
///
/// The map is checked at construction (header and directory bounds, and strictly when asked),
/// so a debugger is never handed a buffer that cannot be read.
#[derive(Debug)]
pub struct MapProvider<S> {
    storage: S,
}

impl<S: AsRef<[u8]>> MapProvider<S> {
    /// Serve `storage` after checking its header and directory bounds.
    pub fn new(storage: S) -> Result<Self> {
        DictionaryMap::parse(storage.as_ref())?;
        MemoryBuffer::new(storage.as_ref())?;
        Ok(MapProvider { storage })
    }

    /// Serve `storage` after a full strict validation (docs/output.md#which-fault-is-first).
    pub fn new_validated(storage: S) -> Result<Self> {
        DictionaryMap::parse(storage.as_ref())?.validate()?;
        Self::new(storage)
    }

    /// The map, parsed.
    pub fn map(&self) -> Result<DictionaryMap<'_>> {
        DictionaryMap::parse(self.storage.as_ref())
    }
}

impl<S: AsRef<[u8]>> SymbolProvider for MapProvider<S> {
    fn generic_dictionary_info(&self) -> Result<MemoryBuffer<'_>> {
        MemoryBuffer::new(self.storage.as_ref())
    }
}

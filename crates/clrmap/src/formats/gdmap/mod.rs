//! The generic dictionary map of `ICorDebugSymbolProvider2::GetGenericDictionaryInfo`.
//!
//! ```text
//! offset      size  field
//! 0           4     header word, little-endian: bit 31 = sorted by RVA, bits 0-30 = N
//! 4 + 8·i     4     entry i: RVA of the dictionary
//! 8 + 8·i     4     entry i: offset of its item, relative to the heap start
//! 4 + 8·N     rest  heap; each item = L (ECMA compressed length of what follows),
//!                   T (compressed count), then T ECMA-335 type signatures
//! ```
//!
//! Sources: dotnet/docs `icordebugsymbolprovider2-getgenericdictionaryinfo-method.md` and the
//! comment above `GetGenericDictionaryInfo` in dotnet/runtime `src/coreclr/inc/cordebug.idl`
//! (both garble the heap-size sentence: heap size = length − (8·N + 4)); the notes in
//! docs/format-notes.md#generic-dictionary-map. Byte order of the fixed fields is little-endian (every .NET Native target was);
//! compressed integers are big-endian by ECMA-335 II.23.2, so the format is mixed-endian.
//!
//! * [`DictionaryMap::parse`] is O(1): header and directory bounds only.
//! * [`DictionaryMap::validate`] reports the first fault in the order of docs/output.md#which-fault-is-first;
//!   [`DictionaryMap::lint`] adds non-fatal findings.
//! * [`Lookup`] finds an RVA's entry; [`Item`] decodes its instantiation through any provider.
//! * [`DictionaryMapBuilder`] writes canonical maps.
//! * [`SymbolProvider`] / [`MemoryBuffer`] are the seed API's shape.

mod builder;
mod from_assembly;
mod lookup;
mod map;
mod service;
mod validate;

pub use builder::DictionaryMapBuilder;
pub use from_assembly::{instantiation_map, method_spec_rva, type_spec_rva};
pub use lookup::{Lookup, LookupIndex, SortedFlag};
pub use map::{DictionaryMap, Entries, Entry, Item, Types, COUNT_MASK, ENTRY_SIZE, HEADER_SIZE, SORTED_FLAG};
pub use service::{MapProvider, MemoryBuffer, SymbolProvider};
pub use validate::{Lint, LintKind};

#[cfg(test)]
mod tests;

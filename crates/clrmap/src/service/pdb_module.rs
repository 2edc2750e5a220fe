//! A module's PDB as the service keeps it in the LRU: its lines, and what every frame of it needs
//! written, kept once per method and per document in slots read without a lock: a method's name
//! and a document's file name already as JSON strings (a frame copies them, it never escapes
//! them again), and a document's embedded source, inflated once within [`SOURCE_CACHE`] bytes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::answers::symbolizer::ModuleSymbols;
use crate::formats::metadata::{table, Metadata};
use crate::formats::pdb::PortablePdb;
use crate::formats::pe::PeImage;

/// The most bytes of embedded source one module keeps inflated; past it a text is inflated for
/// each frame that needs it.
pub const SOURCE_CACHE: usize = 16 << 20;

/// The largest embedded source read for context lines.
pub const MAX_CONTEXT_SOURCE: usize = 16 << 20;

/// A slot of bytes made once: a JSON string, or a source text (`None`: there is none).
type Slot<T> = OnceLock<Option<T>>;

/// A module's PDB, parsed, with its assembly's bytes where found (for method names).
#[derive(Debug)]
pub(super) struct PdbModule {
    pub(super) lines: ModuleSymbols,
    assembly: Option<Vec<u8>>,
    /// By MethodDef row − 1: the method's name as a JSON string (`None`: it has none).
    names: Box<[Slot<Box<[u8]>>]>,
    /// By Document row − 1: the document's name as a JSON string.
    files: Box<[OnceLock<Box<[u8]>>]>,
    /// By Document row − 1: its embedded source, inflated (`None`: none, or unreadable).
    sources: Box<[Slot<Arc<[u8]>>]>,
    /// The bytes `sources` holds.
    source_bytes: AtomicUsize,
}

impl PdbModule {
    pub(super) fn new(lines: ModuleSymbols, assembly: Option<Vec<u8>>) -> PdbModule {
        let methods = assembly.as_deref().and_then(|a| PeImage::parse(a).ok()).and_then(|pe| Metadata::from_pe(&pe).ok()).map_or(0, |md| md.tables().rows(table::METHOD_DEF));
        let documents = PortablePdb::parse(lines.pdb_bytes()).map_or(0, |p| p.document_count());
        let slots = |n: u32| usize::try_from(n).unwrap_or(0);
        PdbModule {
            lines,
            assembly,
            names: (0..slots(methods)).map(|_| OnceLock::new()).collect(),
            files: (0..slots(documents)).map(|_| OnceLock::new()).collect(),
            sources: (0..slots(documents)).map(|_| OnceLock::new()).collect(),
            source_bytes: AtomicUsize::new(0),
        }
    }

    /// What the slots cost in memory, for the LRU's count (their contents are counted by the
    /// files' sizes: a name or a path is never longer than the file that holds it, twice over).
    pub(super) fn slots_size(&self) -> u64 {
        let n = |len: usize, each: usize| u64::try_from(len.saturating_mul(each)).unwrap_or(u64::MAX);
        n(self.names.len(), size_of::<Slot<Box<[u8]>>>()).saturating_add(n(self.files.len(), size_of::<OnceLock<Box<[u8]>>>())).saturating_add(n(self.sources.len(), size_of::<Slot<Arc<[u8]>>>()))
    }

    /// The embedded source of Document row `rid`, inflated.
    pub(super) fn source(&self, rid: u32) -> Option<Arc<[u8]>> {
        let slot = self.sources.get(usize::try_from(rid.checked_sub(1)?).ok()?)?;
        if let Some(known) = slot.get() {
            return known.clone();
        }
        let text: Option<Arc<[u8]>> = PortablePdb::parse(self.lines.pdb_bytes()).ok().and_then(|p| p.embedded_source(rid).ok().flatten()).and_then(|s| s.text(MAX_CONTEXT_SOURCE).ok()).map(Arc::from);
        let len = text.as_ref().map_or(0, |t| t.len());
        // Kept only while the module's texts stay within the cache's bytes.
        if self.source_bytes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| held.checked_add(len).filter(|&sum| sum <= SOURCE_CACHE)).is_ok() && slot.set(text.clone()).is_err() {
            // Another request set it first: its bytes are counted once.
            self.source_bytes.fetch_sub(len, Ordering::Relaxed);
        }
        text
    }

    /// A MethodDef's name (`Ns.Type::Method`) as a JSON string, quotes included.
    pub(super) fn method_json(&self, token: u32) -> Option<&[u8]> {
        if token >> 24 != u32::from(table::METHOD_DEF) {
            return None;
        }
        let slot = self.names.get(usize::try_from((token & 0x00FF_FFFF).checked_sub(1)?).ok()?)?;
        slot.get_or_init(|| {
            let assembly = self.assembly.as_ref()?;
            let name = PeImage::parse(assembly).ok().and_then(|pe| Metadata::from_pe(&pe).ok()).and_then(|md| md.method_name(token))?;
            Some(json(&name))
        })
        .as_deref()
    }

    /// Document row `rid`'s name, `name`, as a JSON string, quotes included.
    pub(super) fn file_json(&self, rid: u32, name: &str) -> Option<&[u8]> {
        let slot = self.files.get(usize::try_from(rid.checked_sub(1)?).ok()?)?;
        Some(slot.get_or_init(|| json(name)))
    }
}

fn json(s: &str) -> Box<[u8]> {
    let mut out = Vec::with_capacity(s.len().saturating_add(2));
    crate::base::json::string(&mut out, s);
    out.into_boxed_slice()
}

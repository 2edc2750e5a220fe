//! A module's PDB as the service keeps it in the LRU: its lines, and what every frame of it needs
//! written, kept once per method and per document in slots read without a lock: a method's token
//! and name and a document's file name and link already as the answer's JSON, keys included (a
//! frame copies them, it never escapes or formats them again), a method's points beside them (a
//! frame finds its method once, for its line and its parts), and a document's embedded source,
//! inflated once within [`SOURCE_CACHE`] bytes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use super::answer::{number, span_numbers};
use super::piece::{put_padded, Piece, CHUNK};
use crate::answers::symbolizer::{LinePoint, MethodPoints, ModuleSymbols};
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
    /// By MethodDef row − 1, for the rows of the assembly's table: [`PdbModule::method_json`].
    methods: Box<[OnceLock<MethodJson>]>,
    /// The PDB's rows past those (all of them when no assembly is found), boxed: a PDB's table
    /// may be longer than its assembly's, and an unfilled boxed slot costs a pointer, where a
    /// [`MethodJson`] costs ten (the first table's slots are not boxed: a frame would pay for the
    /// pointer).
    past: Box<[OnceLock<Box<MethodJson>>]>,
    /// By Document row − 1: [`PdbModule::document_json`].
    documents: Box<[OnceLock<DocumentJson>]>,
    /// By Document row − 1: its embedded source, inflated (`None`: none, or unreadable).
    sources: Box<[Slot<Arc<[u8]>>]>,
    /// The bytes `sources` holds.
    source_bytes: AtomicUsize,
    /// The bytes the methods' [`MethodJson`] tails hold.
    tail_bytes: AtomicUsize,
    /// The most they may hold: what the LRU counts for them ([`PdbModule::slots_size`]).
    tail_budget: usize,
}

/// A method's parts of its frames' answers, made when a frame of it is first answered.
#[derive(Debug)]
pub(super) struct MethodJson {
    /// `,"token":T,"method":NAME,"il_offset":`, the name `Ns.Type::Method` as a JSON string
    /// (`null` where the assembly is not found or names none).
    pub(super) head: Piece,
    /// Its points (`None`: none).
    points: Option<MethodPoints>,
    /// By sequence point, [`TAIL`] bytes each: what follows its document's `"line":`,
    /// `L,"column":C,"end_line":EL,"end_column":EC`, and zeros.
    tails: Box<[u8]>,
    /// By sequence point: its tail's length (0: none kept, for a tail over [`TAIL`] bytes or a
    /// module over [`TAILS_CACHE`]).
    lens: Box<[u8]>,
}

/// A document's parts of its frames' answers, made when a frame in it is first answered.
#[derive(Debug)]
pub(super) struct DocumentJson {
    /// `,"file":NAME,"line":` (`null` where its name could not be read).
    pub(super) file: Piece,
    /// `,"source_link":URL` (`None`: the PDB's SourceLink map gives it none).
    pub(super) link: Option<Piece>,
}

impl MethodJson {
    /// The method's line at an IL offset ([`MethodPoints::at`]: the runtime's rule), and its
    /// place among the points (for [`MethodJson::put_tail`]).
    #[inline(always)]
    pub(super) fn line_at(&self, il: u32) -> Option<(usize, LinePoint)> {
        self.points.as_ref()?.at(il)
    }

    /// Append the tail of the method's point `at` (as [`MethodJson::line_at`] places it);
    /// `false` where none is kept, and the caller writes the numbers.
    #[inline(always)]
    pub(super) fn put_tail(&self, at: usize, out: &mut Vec<u8>) -> bool {
        let len = self.lens.get(at).map_or(0, |&l| usize::from(l));
        let start = at.saturating_mul(TAIL);
        match self.tails.get(start..start.saturating_add(TAIL)) {
            Some(tail) if len > 0 => {
                put_padded(out, tail, len);
                true
            }
            _ => false,
        }
    }
}

/// The bytes kept for one sequence point's tail: a line, a column, an end line and an end column
/// below 100,000 each fit.
const TAIL: usize = 2 * CHUNK;

/// The most bytes of tails one module keeps (and fewer for a small PDB: [`TAILS_PER_PDB_BYTE`]);
/// a method past it is answered without them.
pub const TAILS_CACHE: usize = 4 << 20;

impl PdbModule {
    pub(super) fn new(lines: ModuleSymbols, assembly: Option<Vec<u8>>) -> PdbModule {
        let methods = assembly.as_deref().and_then(|a| PeImage::parse(a).ok()).and_then(|pe| Metadata::from_pe(&pe).ok()).map_or(0, |md| md.tables().rows(table::METHOD_DEF));
        let pdb = PortablePdb::parse(lines.pdb_bytes()).ok();
        // A method with points but no name (no assembly found) has its slot too.
        let past = pdb.as_ref().map_or(0, |p| p.method_count()).saturating_sub(methods);
        let documents = pdb.map_or(0, |p| p.document_count());
        let slots = |n: u32| usize::try_from(n).unwrap_or(0);
        let lines_len = lines.pdb_bytes().len();
        PdbModule {
            lines,
            assembly,
            methods: (0..slots(methods)).map(|_| OnceLock::new()).collect(),
            past: (0..slots(past)).map(|_| OnceLock::new()).collect(),
            documents: (0..slots(documents)).map(|_| OnceLock::new()).collect(),
            sources: (0..slots(documents)).map(|_| OnceLock::new()).collect(),
            source_bytes: AtomicUsize::new(0),
            tail_bytes: AtomicUsize::new(0),
            tail_budget: TAILS_CACHE.min(lines_len.saturating_mul(TAILS_PER_PDB_BYTE)),
        }
    }

    /// This module with a tails' budget of `bytes` (a test of the frames written without them).
    #[cfg(test)]
    pub(super) fn with_tail_budget(mut self, bytes: usize) -> PdbModule {
        self.tail_budget = bytes;
        self
    }

    /// What the slots cost in memory, for the LRU's count: each slot, what a filled one holds
    /// besides its name (the keys, the token and the padding; a name or a path is counted by the
    /// files' sizes, as it is never longer than the file that holds it, twice over), and the
    /// tails' budget. A document's SourceLink URL is counted as its name is, though a map's
    /// prefix may make it longer (as the lines' own copy of it always was).
    pub(super) fn slots_size(&self) -> u64 {
        let n = |len: usize, each: usize| u64::try_from(len.saturating_mul(each)).unwrap_or(u64::MAX);
        let slot = size_of::<OnceLock<MethodJson>>().saturating_add(CHUNK).saturating_add(TOKEN_KEYS.saturating_add(10));
        // A boxed one: the pointer, and the box with its allocation's header.
        let boxed = slot.saturating_add(size_of::<OnceLock<Box<MethodJson>>>()).saturating_add(16);
        n(self.methods.len(), slot)
            .saturating_add(n(self.past.len(), boxed))
            .saturating_add(n(self.tail_budget, 1))
            .saturating_add(n(self.documents.len(), size_of::<OnceLock<DocumentJson>>().saturating_add(2 * CHUNK).saturating_add(DOCUMENT_KEYS)))
            .saturating_add(n(self.sources.len(), size_of::<Slot<Arc<[u8]>>>()))
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

    /// A MethodDef token's parts of its frames' answers ([`MethodJson`]). `None`: not a
    /// MethodDef of this module's metadata or PDB (so it has no points).
    pub(super) fn method_json(&self, token: u32) -> Option<&MethodJson> {
        if token >> 24 != u32::from(table::METHOD_DEF) {
            return None;
        }
        let row = usize::try_from((token & 0x00FF_FFFF).checked_sub(1)?).ok()?;
        match self.methods.get(row) {
            Some(slot) => Some(slot.get_or_init(|| self.make_method_json(token))),
            None => Some(self.past.get(row.checked_sub(self.methods.len())?)?.get_or_init(|| Box::new(self.make_method_json(token)))),
        }
    }

    /// A method's parts, made from its name and its points when a frame of it is first answered.
    fn make_method_json(&self, token: u32) -> MethodJson {
        let name = self.assembly.as_ref().and_then(|a| PeImage::parse(a).ok()).and_then(|pe| Metadata::from_pe(&pe).ok()).and_then(|md| md.method_name(token));
        let mut head = Vec::with_capacity(TOKEN_KEYS.saturating_add(10).saturating_add(name.as_ref().map_or(4, |n| n.len().saturating_add(2))));
        head.extend_from_slice(b",\"token\":");
        number(&mut head, token);
        head.extend_from_slice(b",\"method\":");
        match &name {
            Some(name) => crate::base::json::string(&mut head, name),
            None => head.extend_from_slice(b"null"),
        }
        head.extend_from_slice(b",\"il_offset\":");
        let points = self.lines.method_points(token);
        let (tails, lens) = self.tails(points.as_ref());
        MethodJson { head: Piece::new(head), points, tails, lens }
    }

    /// A method's tails and their lengths ([`MethodJson`]), within the module's budget.
    fn tails(&self, points: Option<&MethodPoints>) -> (Box<[u8]>, Box<[u8]>) {
        let Some(points) = points else { return (Box::default(), Box::default()) };
        let count = points.iter().count();
        let bytes = count.saturating_mul(TAIL.saturating_add(1));
        if bytes == 0 || self.tail_bytes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| held.checked_add(bytes).filter(|&sum| sum <= self.tail_budget)).is_err() {
            return (Box::default(), Box::default());
        }
        let mut tails = Vec::with_capacity(count.saturating_mul(TAIL));
        let mut lens = Vec::with_capacity(count);
        let mut one = Vec::with_capacity(TAIL.saturating_mul(2));
        for p in points.iter() {
            one.clear();
            span_numbers(&mut one, [p.line, p.column, p.end_line, p.end_column]);
            let kept = one.len() <= TAIL;
            lens.push(if kept { u8::try_from(one.len()).unwrap_or(0) } else { 0 });
            let at = tails.len();
            if kept {
                tails.extend_from_slice(&one);
            }
            tails.resize(at.saturating_add(TAIL), 0);
        }
        (tails.into_boxed_slice(), lens.into_boxed_slice())
    }

    /// Document row `rid`'s parts of a frame's answer ([`DocumentJson`]). `None`: no such row
    /// (so no name and no link).
    pub(super) fn document_json(&self, rid: u32) -> Option<&DocumentJson> {
        let slot = self.documents.get(usize::try_from(rid.checked_sub(1)?).ok()?)?;
        Some(slot.get_or_init(|| {
            let name = self.lines.document_name(rid);
            let mut file = Piece::buffer(name.map_or(4, |n| n.len().saturating_add(2)).saturating_add(DOCUMENT_KEYS));
            file.extend_from_slice(b",\"file\":");
            match name {
                Some(name) => crate::base::json::string(&mut file, name),
                None => file.extend_from_slice(b"null"),
            }
            file.extend_from_slice(b",\"line\":");
            let link = self.lines.document_link(rid).map(|url| {
                let mut link = Piece::buffer(url.len().saturating_add(2).saturating_add(DOCUMENT_KEYS));
                link.extend_from_slice(b",\"source_link\":");
                crate::base::json::string(&mut link, url);
                Piece::new(link)
            });
            DocumentJson { file: Piece::new(file), link }
        }))
    }
}

/// The bytes of `,"token":`, `,"method":` and `,"il_offset":`.
const TOKEN_KEYS: usize = 32;

/// The bytes of tails a module may keep (within [`TAILS_CACHE`]) per byte of its PDB, and what
/// the LRU counts for them: a visible sequence point takes at least four bytes of its blob, and
/// [`TAIL`] and a length byte in [`MethodJson`]. Methods that share one blob each keep its
/// points, so a PDB of such methods reaches the budget sooner; the count stays the bound.
const TAILS_PER_PDB_BYTE: usize = 17;

/// The bytes of `,"file":`, `,"line":` and `,"source_link":`.
const DOCUMENT_KEYS: usize = 32;

//! One module's line table: the PDB is kept, and a method's visible sequence points are decoded
//! when the method is first asked about, once per SequencePoints blob (many MethodDebugInformation
//! rows may name one blob), and laid out for binary search. Document names are decoded once per
//! name blob, within a budget. Opening a module costs nothing per method, so a command that asks
//! about a few methods, or about none (`perf map`), never pays for the others; the first method
//! asked about makes one empty slot per MethodDebugInformation row, so that a method already
//! decoded is found by its row alone, with no lock, hash or reference count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::base::ilmap::{runtime_il_offset, MapEntry};
use crate::base::read::Result;
use crate::formats::pdb::{DocumentNames, PortablePdb};

use super::LineRow;

/// The longest context line given, in bytes (a longer one is cut).
pub const MAX_CONTEXT_LINE: usize = 1024;

/// The lines around a frame's line (Sentry's names).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SourceContext {
    /// The lines before, in order.
    pub pre_context: Vec<String>,
    /// The frame's line.
    pub context_line: String,
    /// The lines after.
    pub post_context: Vec<String>,
    /// Where the text came from: `embedded` (the PDB) or `local` (a --source-root file whose
    /// hash is the document's).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub origin: &'static str,
}

/// A visible sequence point, compact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinePoint {
    pub il: u32,
    /// Document row (1-based).
    pub document: u32,
    pub line: u32,
    pub column: u32,
    pub end_line: u32,
    pub end_column: u32,
}

/// The points of one blob, as decoded apart from its rows: a point with document 0 belongs to
/// the row's Document. `None`: the blob did not decode (its methods give no lines).
type BlobPoints = Option<Arc<[LinePoint]>>;

/// One method's decoded points: its blob's, and the row's Document for the points that use it.
#[derive(Clone, Debug)]
pub(crate) struct MethodPoints {
    points: Arc<[LinePoint]>,
    document: u32,
}

impl MethodPoints {
    /// The runtime's line for an IL offset: the last visible point at or before it, its
    /// Document row filled in, and its place among the points.
    #[inline]
    pub(crate) fn at(&self, il: u32) -> Option<(usize, LinePoint)> {
        let at = self.points.partition_point(|p| p.il <= il).checked_sub(1)?;
        let p = *self.points.get(at)?;
        Some((at, self.filled(p)))
    }

    /// Every point, in order, its Document row filled in as [`MethodPoints::at`] fills it.
    // Only the service (built with `serde`) keeps something per point.
    #[cfg(feature = "serde")]
    pub(crate) fn iter(&self) -> impl Iterator<Item = LinePoint> + '_ {
        self.points.iter().map(|&p| self.filled(p))
    }

    /// A point whose document is 0 is in the row's Document.
    #[inline(always)]
    fn filled(&self, p: LinePoint) -> LinePoint {
        LinePoint { document: if p.document == 0 { self.document } else { p.document }, ..p }
    }
}

#[derive(Debug, Default)]
struct Decoded {
    /// (blob index, blob names its InitialDocument) → points.
    blobs: HashMap<(u32, bool), BlobPoints>,
    names: DocumentNames,
}

/// The line table of one module.
#[derive(Debug)]
pub(crate) struct ModuleLines {
    /// The whole portable PDB, parsed again when a method or a name is first needed.
    pdb: Vec<u8>,
    /// Document names by row − 1, once asked for (`None`: unreadable or over the budget). The
    /// strings live as long as the table, so frames can borrow them.
    documents: Box<[OnceLock<Option<Arc<str>>>]>,
    /// Each document's SourceLink URL, once asked for.
    links: Box<[OnceLock<Option<Arc<str>>>]>,
    /// The PDB's SourceLink map (`None`: none, or one that does not parse).
    link_map: OnceLock<Option<crate::formats::pdb::sources::SourceLink>>,
    /// MethodDef row − 1 → its points, once asked for (`None`: no row, no points or a malformed
    /// blob); the slots are made when the first method is asked about.
    methods: OnceLock<Box<[OnceLock<Option<MethodPoints>>]>>,
    decoded: Mutex<Decoded>,
}

impl ModuleLines {
    /// Keep a PDB's bytes; `Err` when they are not a portable PDB. Nothing is decoded yet.
    pub fn new(pdb: Vec<u8>) -> Result<Self> {
        let documents = PortablePdb::parse(&pdb)?.document_count();
        let links = (0..documents).map(|_| OnceLock::new()).collect();
        let documents = (0..documents).map(|_| OnceLock::new()).collect();
        Ok(ModuleLines { pdb, documents, links, link_map: OnceLock::new(), methods: OnceLock::new(), decoded: Mutex::new(Decoded::default()) })
    }

    /// The portable PDB's bytes.
    pub fn pdb_bytes(&self) -> &[u8] {
        &self.pdb
    }

    /// Context lines around `line` of Document row `row`: from the source the PDB embeds, else
    /// from the first of `roots` that maps the document to a local file whose hash is the
    /// document's.
    pub fn context(&self, row: u32, line: u32, each_side: u32, roots: &[crate::formats::pdb::sources::SourceRoot]) -> Option<SourceContext> {
        use crate::formats::pdb::sources;
        let pdb = PortablePdb::parse(&self.pdb).ok()?;
        let (text, origin) = match pdb.embedded_source(row).ok().flatten().and_then(|s| s.text(sources::MAX_SOURCE).ok()) {
            Some(text) => (text, "embedded"),
            None => (sources::local_source(roots, &pdb.document_info(row).ok()?, sources::MAX_SOURCE as u64)?, "local"),
        };
        let (pre_context, context_line, post_context) = sources::context(&text, line, each_side, each_side, MAX_CONTEXT_LINE)?;
        Some(SourceContext { pre_context, context_line, post_context, origin })
    }

    /// The SourceLink URL of Document row `row`, by the PDB's map, once computed.
    pub fn source_link(&self, row: u32) -> Option<&str> {
        let slot = self.links.get(row.checked_sub(1)? as usize)?;
        slot.get_or_init(|| {
            let map = self.link_map.get_or_init(|| PortablePdb::parse(&self.pdb).ok().and_then(|p| p.source_link().ok().flatten())).as_ref()?;
            map.url(self.document(row)?).map(Arc::from)
        })
        .as_deref()
    }

    /// A method's points, decoding its blob if no earlier method named it.
    fn method(&self, rid: u32) -> Option<&MethodPoints> {
        let slots = self.methods.get_or_init(|| {
            let count = PortablePdb::parse(&self.pdb).map_or(0, |p| p.method_count());
            (0..count).map(|_| OnceLock::new()).collect()
        });
        // A row past the table has no MethodDebugInformation row, so no points.
        let slot = slots.get(rid.checked_sub(1)? as usize)?;
        slot.get_or_init(|| {
            let mut decoded = self.decoded.lock().unwrap_or_else(PoisonError::into_inner);
            self.decode(&mut decoded, rid)
        })
        .as_ref()
    }

    fn decode(&self, decoded: &mut Decoded, rid: u32) -> Option<MethodPoints> {
        let pdb = PortablePdb::parse(&self.pdb).ok()?;
        let (document, blob) = pdb.method_debug_row(0x0600_0000 | rid).ok()??;
        // The row's Document must be a row of the table whenever it is used, as when the blob
        // is decoded with its row (a malformed method gives no lines).
        if document > pdb.document_count() {
            return None;
        }
        let key = (blob, document == 0);
        let points = match decoded.blobs.get(&key) {
            Some(known) => known.clone(),
            None => {
                let points = decode_blob(&pdb, blob, document == 0);
                decoded.blobs.insert(key, points.clone());
                points
            }
        }?;
        Some(MethodPoints { points, document })
    }

    /// The name of a Document row, decoded once per name blob.
    pub(crate) fn document(&self, row: u32) -> Option<&str> {
        let slot = self.documents.get(row.checked_sub(1)? as usize)?;
        slot.get_or_init(|| {
            let pdb = PortablePdb::parse(&self.pdb).ok()?;
            let mut decoded = self.decoded.lock().unwrap_or_else(PoisonError::into_inner);
            decoded.names.get(&pdb, row).ok().flatten()
        })
        .as_deref()
    }

    /// The runtime's line for an IL offset: the last visible point at or before it, and its
    /// document's name.
    pub fn line(&self, method: u32, il: u32) -> Option<(LinePoint, Option<&str>)> {
        let (_, p) = self.method_of(method)?.at(il)?;
        Some((p, self.document(p.document)))
    }

    /// A MethodDef token's points, for a caller that keeps them beside what it makes per method
    /// (`None`: no such method, or no points).
    // Only the service (built with `serde`) keeps them.
    #[cfg(feature = "serde")]
    pub(crate) fn method_points(&self, method: u32) -> Option<MethodPoints> {
        self.method_of(method).cloned()
    }

    /// A MethodDef token's points.
    fn method_of(&self, method: u32) -> Option<&MethodPoints> {
        let rid = method & 0x00FF_FFFF;
        if method >> 24 != 0x06 || rid == 0 {
            return None;
        }
        self.method(rid)
    }

    /// A body's line table: for each native offset where the runtime's line changes, that line,
    /// by the same rule as [`super::Symbolizer::symbolize`] for a leaf frame, then one more row
    /// at `code_size` repeating the last line (a table ends at its last row's address,
    /// docs/perf.md#format-notes). Between two offsets where a map entry starts or ends, the runtime's IL offset, and so
    /// the line, cannot change, so those offsets are the only ones tried. A region with no line
    /// after one with a line gets line 0 (no source line); leading regions with no line get no row.
    pub fn rows(&self, token: u32, map: &[MapEntry], code_size: u32) -> Vec<LineRow> {
        let mut cuts: Vec<u32> = std::iter::once(0).chain(map.iter().flat_map(|e| [e.native_start, e.native_end])).filter(|&o| o < code_size).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut rows: Vec<LineRow> = Vec::new();
        for offset in cuts {
            let (_, il) = runtime_il_offset(map, code_size, offset);
            let row = match self.line(token, il) {
                Some((p, file)) => LineRow { native_offset: offset, file: file.unwrap_or("").to_owned(), line: p.line, column: p.column },
                None => match rows.last() {
                    Some(last) => LineRow { native_offset: offset, file: last.file.clone(), line: 0, column: 0 },
                    None => continue,
                },
            };
            if rows.last().is_some_and(|l| l.file == row.file && l.line == row.line && l.column == row.column) {
                continue;
            }
            rows.push(row);
        }
        if let Some(last) = rows.last() {
            if last.native_offset < code_size {
                let end = LineRow { native_offset: code_size, ..last.clone() };
                rows.push(end);
            }
        }
        rows
    }
}

/// Decode one blob's visible points; `None` when it is malformed.
fn decode_blob(pdb: &PortablePdb<'_>, blob: u32, initial_in_blob: bool) -> BlobPoints {
    let mut out = Vec::new();
    for p in pdb.blob_points(blob, initial_in_blob).ok()? {
        let p = p.ok()?;
        if !p.is_hidden() {
            out.push(LinePoint { il: p.il_offset, document: p.document, line: p.start_line, column: p.start_column, end_line: p.end_line, end_column: p.end_column });
        }
    }
    Some(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::pdb::writer::{PdbWriter, Point};

    #[test]
    fn a_shared_blob_is_decoded_once_and_each_row_keeps_its_document() {
        let mut w = PdbWriter::new([1; 20]);
        let a = w.document_name("a.cs");
        let b = w.document_name("b.cs");
        let (da, db) = (w.document(a), w.document(b));
        let blob = w.points_blob(&[Point::visible(0, 10, 1, 10, 5), Point::hidden(3), Point::visible(6, 12, 1, 12, 9)]);
        w.method(da, blob);
        w.method(db, blob);
        w.method(0, blob); // no InitialDocument in the blob: malformed, no lines
        w.method(7, blob); // no such document
        let lines = ModuleLines::new(w.build()).unwrap();
        let (p, file) = lines.line(0x0600_0001, 4).unwrap();
        assert_eq!((p.il, p.line, p.document, file), (0, 10, 1, Some("a.cs")));
        let (p, file) = lines.line(0x0600_0002, 6).unwrap();
        assert_eq!((p.il, p.line, p.document, file), (6, 12, 2, Some("b.cs")));
        assert_eq!(lines.line(0x0600_0003, 6), None);
        assert_eq!(lines.line(0x0600_0004, 6), None);
        assert_eq!(lines.line(0x0600_0005, 6), None);
        assert_eq!(lines.decoded.lock().unwrap().blobs.len(), 2, "one blob, decoded once per InitialDocument form");
    }

    #[test]
    fn a_blob_with_its_initial_document() {
        let mut w = PdbWriter::new([1; 20]);
        let a = w.document_name("a.cs");
        let b = w.document_name("b.cs");
        w.document(a);
        w.document(b);
        let blob = crate::formats::pdb::writer::encode_points(Some(2), &[Point::visible(0, 3, 1, 3, 5)]);
        let blob = w.blob(&blob);
        w.method(0, blob);
        let lines = ModuleLines::new(w.build()).unwrap();
        assert_eq!(lines.line(0x0600_0001, 0).unwrap().1, Some("b.cs"));
    }
}

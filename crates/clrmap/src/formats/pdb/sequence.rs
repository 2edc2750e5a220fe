//! The SequencePoints blob of a MethodDebugInformation row (PortablePdb-Metadata.md,
//! "Sequence Points Blob").
//!
//! ```text
//! Blob   ::= header SequencePointRecord (SequencePointRecord | document-record)*
//! header ::= LocalSignature (compressed u32) [InitialDocument (compressed u32), if Document = 0]
//! document-record ::= δILOffset = 0 (not first) | Document (compressed u32)
//! SequencePointRecord ::= δILOffset | ΔLines | ΔColumns [| δStartLine | δStartColumn]
//! ```
//! ΔLines = ΔColumns = 0 is a hidden point and has no start fields. The first visible point's
//! start line and column are unsigned; later ones are signed deltas from the previous visible one.

use crate::base::read::{Error, ErrorKind, Reader, Result};

/// The line the spec gives a hidden sequence point (`0xFEEFEE`).
pub const HIDDEN_LINE: u32 = 0x00FE_EFEE;

/// Spec limits: lines, and IL offsets, below 0x20000000; columns below 0x10000.
const LINE_LIMIT: i64 = 0x2000_0000;
const COLUMN_LIMIT: i64 = 0x1_0000;

/// One sequence point. A hidden point has lines [`HIDDEN_LINE`] and columns 0, as
/// System.Reflection.Metadata reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SequencePoint {
    /// IL offset of the first instruction it covers.
    pub il_offset: u32,
    /// Document row (1-based).
    pub document: u32,
    /// Start line (1-based).
    pub start_line: u32,
    /// Start column (1-based).
    pub start_column: u32,
    /// End line.
    pub end_line: u32,
    /// End column (exclusive, as the compiler wrote it).
    pub end_column: u32,
}

impl SequencePoint {
    /// True for a hidden point (no source line).
    pub fn is_hidden(&self) -> bool {
        self.start_line == HIDDEN_LINE
    }
}

/// The decoder state of one blob: a lazy iterator of points. After an error it yields nothing.
#[derive(Clone, Debug)]
pub struct SequencePoints<'a> {
    r: Reader<'a>,
    /// Document row of the next point (0 until the header is read, and, for a blob decoded on
    /// its own, until a document record: "the row's Document").
    document: u32,
    documents: u32,
    /// The blob starts with an InitialDocument (the row's Document column is 0).
    initial_in_blob: bool,
    /// Decoded apart from its row: the initial document is left as 0, for the caller to fill in.
    deferred: bool,
    header_done: bool,
    first_record: bool,
    il: u32,
    /// The previous visible point's start (line, column), once there is one.
    previous: Option<(i64, i64)>,
}

fn bad(at: u64, expected: &'static str) -> Error {
    Error::new(ErrorKind::BadPdb, at, expected)
}

impl<'a> SequencePoints<'a> {
    pub(super) fn new(blob: Reader<'a>, document: u32, documents: u32) -> Self {
        SequencePoints { r: blob, document, documents, initial_in_blob: document == 0, deferred: false, header_done: false, first_record: true, il: 0, previous: None }
    }

    /// A blob decoded once for every row that names it: the points before the first document
    /// record have document 0 ("the row's Document") unless the blob names its InitialDocument.
    pub(super) fn deferred(blob: Reader<'a>, initial_in_blob: bool, documents: u32) -> Self {
        SequencePoints { r: blob, document: 0, documents, initial_in_blob, deferred: !initial_in_blob, header_done: false, first_record: true, il: 0, previous: None }
    }

    pub(super) fn empty() -> Self {
        let mut s = Self::new(Reader::default(), 0, 0);
        s.header_done = true;
        s
    }

    fn document_row(&self, at: u64, row: u32) -> Result<u32> {
        if row == 0 || row > self.documents {
            return Err(bad(at, "a Document row inside the Document table"));
        }
        Ok(row)
    }

    fn u(&mut self, expected: &'static str) -> Result<u32> {
        self.r.compressed_u32(expected).map_err(|e| e.with_kind(ErrorKind::BadPdb))
    }

    fn i(&mut self, expected: &'static str) -> Result<i32> {
        self.r.compressed_i32(expected).map_err(|e| e.with_kind(ErrorKind::BadPdb))
    }

    fn read_header(&mut self) -> Result<()> {
        self.header_done = true;
        if self.r.is_empty() {
            return Ok(());
        }
        let _local_signature = self.u("the LocalSignature row")?;
        if self.initial_in_blob {
            let at = self.r.offset();
            let row = self.u("the InitialDocument row")?;
            self.document = self.document_row(at, row)?;
        } else if !self.deferred {
            let at = self.r.offset();
            self.document = self.document_row(at, self.document)?;
        }
        Ok(())
    }

    fn read_point(&mut self) -> Result<Option<SequencePoint>> {
        if !self.header_done {
            self.read_header()?;
        }
        loop {
            if self.r.is_empty() {
                return Ok(None);
            }
            let at = self.r.offset();
            let delta_il = self.u("δILOffset")?;
            if !self.first_record && delta_il == 0 {
                // A document record: the following points belong to another document.
                let doc_at = self.r.offset();
                let row = self.u("a Document row")?;
                self.document = self.document_row(doc_at, row)?;
                continue;
            }
            let il = if self.first_record { i64::from(delta_il) } else { i64::from(self.il).saturating_add(i64::from(delta_il)) };
            // Never negative: the first offset and the deltas are unsigned.
            let Some(il) = u32::try_from(il).ok().filter(|&il| i64::from(il) < LINE_LIMIT) else {
                return Err(bad(at, "an IL offset below 0x20000000"));
            };
            self.first_record = false;
            self.il = il;
            let lines_at = self.r.offset();
            let delta_lines = self.u("ΔLines")?;
            if i64::from(delta_lines) >= LINE_LIMIT {
                return Err(bad(lines_at, "ΔLines below 0x20000000"));
            }
            let cols_at = self.r.offset();
            let delta_columns = if delta_lines == 0 { i64::from(self.u("ΔColumns")?) } else { i64::from(self.i("ΔColumns")?) };
            if delta_columns >= COLUMN_LIMIT || delta_columns <= -COLUMN_LIMIT || (delta_lines == 0 && delta_columns < 0) {
                return Err(bad(cols_at, "ΔColumns inside (-0x10000, 0x10000)"));
            }
            if delta_lines == 0 && delta_columns == 0 {
                return Ok(Some(SequencePoint { il_offset: self.il, document: self.document, start_line: HIDDEN_LINE, start_column: 0, end_line: HIDDEN_LINE, end_column: 0 }));
            }
            let start_at = self.r.offset();
            let (line, column) = match self.previous {
                None => (i64::from(self.u("the start line")?), i64::from(self.u("the start column")?)),
                Some((l, c)) => (l.saturating_add(i64::from(self.i("δStartLine")?)), c.saturating_add(i64::from(self.i("δStartColumn")?))),
            };
            let end_line = line.saturating_add(i64::from(delta_lines));
            let end_column = column.saturating_add(delta_columns);
            // In 0..limit: a u32 below the limit.
            let below = |v: i64, limit: i64| u32::try_from(v).ok().filter(|&u| i64::from(u) < limit);
            let (Some(start_line), Some(end_line)) = (below(line, LINE_LIMIT).filter(|&l| l != HIDDEN_LINE), below(end_line, LINE_LIMIT)) else {
                return Err(bad(start_at, "a start and end line below 0x20000000, not 0xFEEFEE"));
            };
            let (Some(start_column), Some(end_column)) = (below(column, COLUMN_LIMIT), below(end_column, COLUMN_LIMIT)) else {
                return Err(bad(start_at, "a start and end column below 0x10000"));
            };
            self.previous = Some((line, column));
            return Ok(Some(SequencePoint { il_offset: self.il, document: self.document, start_line, start_column, end_line, end_column }));
        }
    }
}

impl Iterator for SequencePoints<'_> {
    type Item = Result<SequencePoint>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.read_point() {
            Ok(p) => p.map(Ok),
            Err(e) => {
                // One error, then nothing: the cursor is emptied so the iterator ends.
                self.r = Reader::default();
                self.header_done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(blob: &[u8], document: u32, documents: u32) -> Vec<Result<SequencePoint>> {
        SequencePoints::new(Reader::new(blob, 100), document, documents).collect()
    }

    #[test]
    fn visible_hidden_and_document_records() {
        // LocalSignature 0; IL 0, ΔLines 0, ΔColumns 5, line 10, column 9;
        // δIL 3, hidden (0, 0); δIL 0 + document 2; δIL 4, ΔLines 1, ΔColumns -2 (signed 0x7B >> ...),
        // δStartLine +2 (signed 4), δStartColumn -1 (signed 0x7F).
        let blob = [0x00, 0x00, 0x00, 0x05, 10, 9, 0x03, 0x00, 0x00, 0x00, 0x02, 0x04, 0x01, 0x7F, 0x04, 0x7F];
        let got: Vec<SequencePoint> = points(&blob, 1, 2).into_iter().map(|p| p.unwrap()).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], SequencePoint { il_offset: 0, document: 1, start_line: 10, start_column: 9, end_line: 10, end_column: 14 });
        assert!(got[1].is_hidden());
        assert_eq!(got[1].il_offset, 3);
        assert_eq!(got[2], SequencePoint { il_offset: 7, document: 2, start_line: 12, start_column: 8, end_line: 13, end_column: 7 });
    }

    #[test]
    fn initial_document_when_the_row_has_none() {
        let blob = [0x00, 0x02, 0x00, 0x00, 0x01, 1, 1];
        let got = points(&blob, 0, 2);
        assert_eq!(got[0].as_ref().unwrap().document, 2);
        let bad_doc = [0x00, 0x03, 0x00, 0x00, 0x01, 1, 1];
        let e = points(&bad_doc, 0, 2).remove(0).unwrap_err();
        assert_eq!((e.kind, e.offset().unwrap()), (ErrorKind::BadPdb, 101));
    }

    #[test]
    fn limits_and_truncation_are_errors_with_offsets() {
        // Hidden line as a start line.
        let blob = [0x00, 0x00, 0x00, 0x01, 0xC0, 0xFE, 0xEF, 0xEE, 0x01];
        let e = points(&blob, 1, 1).pop().unwrap().unwrap_err();
        assert_eq!((e.kind, e.offset().unwrap()), (ErrorKind::BadPdb, 104));
        // A column past 0x10000.
        let blob = [0x00, 0x00, 0x00, 0x01, 0x01, 0xC0, 0x01, 0x00, 0x00];
        let e = points(&blob, 1, 1).pop().unwrap().unwrap_err();
        assert_eq!((e.kind, e.offset().unwrap()), (ErrorKind::BadPdb, 104));
        // A record cut after ΔLines: the points before it stay, then one error, then nothing.
        let blob = [0x00, 0x00, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01];
        let got = points(&blob, 1, 1);
        assert_eq!(got.len(), 2);
        assert!(got[0].is_ok());
        assert_eq!(got[1].as_ref().unwrap_err().kind, ErrorKind::BadPdb);
        // A first δIL of 0 is an IL offset, not a document record; a later one is.
        let blob = [0x00, 0x00, 0x00, 0x01, 0x01, 0x01, 0x00];
        let got = points(&blob, 1, 1);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].as_ref().unwrap_err().offset().unwrap(), 107);
    }
}

//! A small portable-PDB writer, for tests and fuzz targets: it lays out exactly the rows and heap
//! entries it is given, so it can build what no compiler writes (one sequence-point blob shared by
//! every method, one document name shared by every Document row, hundreds of thousands of rows).
//!
//! Not part of the API. The layout follows PortablePdb-Metadata.md and ECMA-335 II.24: a metadata
//! root (`BSJB`, version `PDB v1.0`) with `#Pdb`, `#~`, `#Strings`, `#Blob` and `#GUID`; index
//! widths are chosen from the row and heap sizes as the reader chooses them.
//!
//! ```
//! use clrmap::pdb::writer::{PdbWriter, Point};
//! let mut w = PdbWriter::new([7; 20]);
//! let name = w.document_name("/src/a.cs");
//! let doc = w.document(name);
//! let blob = w.points_blob(&[Point::visible(0, 10, 5, 10, 20), Point::hidden(4)]);
//! w.method(doc, blob);
//! let bytes = w.build();
//! let pdb = clrmap::pdb::PortablePdb::parse(&bytes).unwrap();
//! assert_eq!(pdb.document(1).unwrap().name, "/src/a.cs");
//! assert_eq!(pdb.sequence_points(0x0600_0001).unwrap().count(), 2);
//! ```
#![allow(clippy::indexing_slicing, clippy::arithmetic_side_effects, clippy::cast_possible_truncation, clippy::expect_used, clippy::panic)]

use crate::base::read::write::{push_compressed_i32, push_compressed_u32};
use crate::formats::metadata::table;

use super::HIDDEN_LINE;

/// One sequence point to encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// IL offset (strictly increasing within a blob).
    pub il: u32,
    /// Start line, or [`HIDDEN_LINE`] for a hidden point.
    pub line: u32,
    /// Start column.
    pub column: u32,
    /// End line.
    pub end_line: u32,
    /// End column.
    pub end_column: u32,
    /// A Document row to switch to before this point (a document record), if any.
    pub document: Option<u32>,
}

impl Point {
    /// A visible point.
    pub fn visible(il: u32, line: u32, column: u32, end_line: u32, end_column: u32) -> Self {
        Point { il, line, column, end_line, end_column, document: None }
    }

    /// A hidden point.
    pub fn hidden(il: u32) -> Self {
        Point { il, line: HIDDEN_LINE, column: 0, end_line: HIDDEN_LINE, end_column: 0, document: None }
    }
}

/// The rows and heaps of a portable PDB, built up and then laid out by [`PdbWriter::build`].
#[derive(Clone, Debug)]
pub struct PdbWriter {
    /// The PDB id (GUID then stamp), as an assembly's CodeView entry names it.
    pub id: [u8; 20],
    /// The entry point's MethodDef token, or 0.
    pub entry_point: u32,
    /// The assembly's MethodDef row count as `#Pdb` declares it (the width of LocalScope.Method);
    /// 0: the MethodDebugInformation row count.
    pub method_defs: u32,
    strings: Vec<u8>,
    blobs: Vec<u8>,
    guids: Vec<u8>,
    documents: Vec<[u32; 4]>,
    methods: Vec<[u32; 2]>,
    scopes: Vec<[u32; 6]>,
    variables: Vec<[u32; 3]>,
    custom: Vec<[u32; 3]>,
}

fn pad4(v: &mut Vec<u8>) {
    while v.len() % 4 != 0 {
        v.push(0);
    }
}

fn index(v: &mut Vec<u8>, value: u32, wide: bool) {
    if wide {
        v.extend_from_slice(&value.to_le_bytes());
    } else {
        v.extend_from_slice(&(value as u16).to_le_bytes());
    }
}

impl PdbWriter {
    /// An empty PDB with this id.
    pub fn new(id: [u8; 20]) -> Self {
        PdbWriter {
            id,
            entry_point: 0,
            method_defs: 0,
            strings: vec![0],
            blobs: vec![0],
            guids: Vec::new(),
            documents: Vec::new(),
            methods: Vec::new(),
            scopes: Vec::new(),
            variables: Vec::new(),
            custom: Vec::new(),
        }
    }

    /// Add a CustomDebugInformation row: `parent` a HasCustomDebugInformation coded index
    /// (`row << 5 | tag`; the Module is tag 7, a Document tag 22), `kind` its GUID, `value` the
    /// blob's bytes. Rows must be added sorted by parent.
    pub fn custom_debug_information(&mut self, parent: u32, kind: [u8; 16], value: &[u8]) {
        let kind = self.guid(kind);
        let value = self.blob(value);
        self.custom.push([parent, kind, value]);
    }

    /// Add a blob; its `#Blob` index.
    pub fn blob(&mut self, bytes: &[u8]) -> u32 {
        let at = self.blobs.len() as u32;
        push_compressed_u32(&mut self.blobs, bytes.len() as u32).expect("a blob under 512 MiB");
        self.blobs.extend_from_slice(bytes);
        at
    }

    /// Add a string; its `#Strings` index.
    pub fn string(&mut self, s: &str) -> u32 {
        let at = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        at
    }

    /// Add a GUID; its 1-based `#GUID` index.
    pub fn guid(&mut self, g: [u8; 16]) -> u32 {
        self.guids.extend_from_slice(&g);
        (self.guids.len() / 16) as u32
    }

    /// A Document Name Blob for `name`: separator `/`, one part blob per component.
    pub fn document_name(&mut self, name: &str) -> u32 {
        let parts: Vec<u32> = name.split('/').map(|p| self.blob(p.as_bytes())).collect();
        self.document_name_of_parts(b'/', &parts)
    }

    /// A Document Name Blob of these part blobs (repeat a part to make a long name cheaply).
    pub fn document_name_of_parts(&mut self, separator: u8, parts: &[u32]) -> u32 {
        let mut b = vec![separator];
        for &p in parts {
            push_compressed_u32(&mut b, p).expect("a part index under 512 MiB");
        }
        self.blob(&b)
    }

    /// Add a Document row (C#, no hash) with this name blob; its row number.
    pub fn document(&mut self, name_blob: u32) -> u32 {
        let language = match self.documents.first() {
            Some(d) => d[3],
            None => self.guid([0xF8, 0x62, 0x51, 0x3F, 0xC6, 0x07, 0xD3, 0x11, 0x90, 0x53, 0x00, 0xC0, 0x4F, 0xA3, 0x02, 0xA1]),
        };
        self.documents.push([name_blob, 0, 0, language]);
        self.documents.len() as u32
    }

    /// Add a MethodDebugInformation row (MethodDef row = its row number, returned).
    pub fn method(&mut self, document: u32, points_blob: u32) -> u32 {
        self.methods.push([document, points_blob]);
        self.methods.len() as u32
    }

    /// Add `count` MethodDebugInformation rows that all name the same document and blob.
    pub fn methods_sharing(&mut self, count: u32, document: u32, points_blob: u32) {
        self.methods.extend(std::iter::repeat_n([document, points_blob], count as usize));
    }

    /// Add a LocalScope row (rows must be added sorted by method, then start offset).
    pub fn scope(&mut self, method: u32, variable_list: u32, start: u32, length: u32) {
        self.scopes.push([method, 0, variable_list, 0, start, length]);
    }

    /// Add a LocalVariable row; its row number.
    pub fn variable(&mut self, attributes: u16, index: u16, name: u32) -> u32 {
        self.variables.push([u32::from(attributes), u32::from(index), name]);
        self.variables.len() as u32
    }

    /// The number of LocalVariable rows so far.
    pub fn variable_count(&self) -> u32 {
        self.variables.len() as u32
    }

    /// A SequencePoints blob (no InitialDocument: the row's Document is used).
    pub fn points_blob(&mut self, points: &[Point]) -> u32 {
        let b = encode_points(None, points);
        self.blob(&b)
    }

    /// A blob of `count` visible points, one per IL byte, each on its own line.
    pub fn many_points_blob(&mut self, count: u32) -> u32 {
        let points: Vec<Point> = (0..count).map(|i| Point::visible(i, i % 0x1000_0000 + 1, 1, i % 0x1000_0000 + 1, 2)).collect();
        self.points_blob(&points)
    }

    /// Lay the PDB out.
    pub fn build(&self) -> Vec<u8> {
        let method_defs = if self.method_defs == 0 { self.methods.len() as u32 } else { self.method_defs };
        // #Pdb: id, entry point, ReferencedTypeSystemTables = MethodDef, its row count.
        let mut pdb = Vec::new();
        pdb.extend_from_slice(&self.id);
        pdb.extend_from_slice(&self.entry_point.to_le_bytes());
        pdb.extend_from_slice(&(1u64 << table::METHOD_DEF).to_le_bytes());
        pdb.extend_from_slice(&method_defs.to_le_bytes());

        let mut strings = self.strings.clone();
        pad4(&mut strings);
        let mut blobs = self.blobs.clone();
        pad4(&mut blobs);
        let string_wide = strings.len() > 0xFFFF;
        let guid_wide = self.guids.len() / 16 > 0xFFFF;
        let blob_wide = blobs.len() > 0xFFFF;

        let rows = [
            (table::DOCUMENT, self.documents.len()),
            (table::METHOD_DEBUG_INFORMATION, self.methods.len()),
            (table::LOCAL_SCOPE, self.scopes.len()),
            (table::LOCAL_VARIABLE, self.variables.len()),
            (table::CUSTOM_DEBUG_INFORMATION, self.custom.len()),
        ];
        let mut t = Vec::new();
        t.extend_from_slice(&0u32.to_le_bytes());
        t.extend_from_slice(&[2, 0]);
        t.push(u8::from(string_wide) | u8::from(guid_wide) << 1 | u8::from(blob_wide) << 2);
        t.push(1);
        let valid = rows.iter().filter(|(_, n)| *n > 0).fold(0u64, |m, (id, _)| m | 1u64 << id);
        t.extend_from_slice(&valid.to_le_bytes());
        t.extend_from_slice(&valid.to_le_bytes());
        for (_, n) in rows.iter().filter(|(_, n)| *n > 0) {
            t.extend_from_slice(&(*n as u32).to_le_bytes());
        }
        let doc_wide = self.documents.len() > 0xFFFF;
        for d in &self.documents {
            index(&mut t, d[0], blob_wide);
            index(&mut t, d[1], guid_wide);
            index(&mut t, d[2], blob_wide);
            index(&mut t, d[3], guid_wide);
        }
        for m in &self.methods {
            index(&mut t, m[0], doc_wide);
            index(&mut t, m[1], blob_wide);
        }
        let method_wide = method_defs > 0xFFFF;
        let var_wide = self.variables.len() > 0xFFFF;
        for s in &self.scopes {
            index(&mut t, s[0], method_wide);
            index(&mut t, s[1], false);
            index(&mut t, s[2], var_wide);
            index(&mut t, s[3], false);
            t.extend_from_slice(&s[4].to_le_bytes());
            t.extend_from_slice(&s[5].to_le_bytes());
        }
        for v in &self.variables {
            t.extend_from_slice(&(v[0] as u16).to_le_bytes());
            t.extend_from_slice(&(v[1] as u16).to_le_bytes());
            index(&mut t, v[2], string_wide);
        }
        // HasCustomDebugInformation: 5 tag bits, so wide from 2^11 rows in any parent table.
        let parent_wide = [self.documents.len(), method_defs as usize, self.scopes.len(), self.variables.len()].iter().any(|n| *n >= 1 << 11);
        for c in &self.custom {
            index(&mut t, c[0], parent_wide);
            index(&mut t, c[1], guid_wide);
            index(&mut t, c[2], blob_wide);
        }
        pad4(&mut t);

        let streams: [(&[u8], &[u8]); 5] = [(b"#Pdb", &pdb), (b"#~", &t), (b"#Strings", &strings), (b"#Blob", &blobs), (b"#GUID", &self.guids)];
        let version = b"PDB v1.0\0\0\0\0";
        let header_len = 16 + version.len() + 4 + streams.iter().map(|(n, _)| 8 + ((n.len() + 4) & !3)).sum::<usize>();
        let mut out = Vec::new();
        out.extend_from_slice(b"BSJB");
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(version.len() as u32).to_le_bytes());
        out.extend_from_slice(version);
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&(streams.len() as u16).to_le_bytes());
        let mut offset = header_len;
        for (name, body) in &streams {
            out.extend_from_slice(&(offset as u32).to_le_bytes());
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(name);
            out.push(0);
            pad4(&mut out);
            offset += body.len();
        }
        debug_assert_eq!(out.len(), header_len);
        for (_, body) in &streams {
            out.extend_from_slice(body);
        }
        out
    }
}

/// The data of an embedded-PDB debug directory entry (type 17): `MPDB`, the size, then the PDB as
/// a raw deflate stream.
pub fn embedded_entry(pdb: &[u8]) -> Vec<u8> {
    let mut out = b"MPDB".to_vec();
    out.extend_from_slice(&(pdb.len() as u32).to_le_bytes());
    out.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(pdb, 6));
    out
}

/// A zip bomb as an embedded-PDB entry: `MPDB`, the `declared` size, then a raw deflate stream
/// that really inflates to `mib` MiB of zeros, about 1 KiB per MiB. One MiB of zeros is deflated
/// once, ending byte-aligned (a sync flush) so that copies of it follow one another, then a final
/// empty block.
pub fn zip_bomb_entry(declared: u32, mib: u32) -> Vec<u8> {
    use miniz_oxide::deflate::core::{compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus};
    let mut d = CompressorOxide::new(create_comp_flags_from_zip_params(9, -15, 0));
    let zeros = vec![0u8; 1 << 20];
    let mut buf = vec![0u8; 1 << 20];
    let (status, used, wrote) = compress(&mut d, &zeros, &mut buf, TDEFLFlush::Sync);
    assert!(status == TDEFLStatus::Okay && used == zeros.len(), "{status:?}");
    let block = &buf[..wrote];
    let mut out = b"MPDB".to_vec();
    out.extend_from_slice(&declared.to_le_bytes());
    for _ in 0..mib {
        out.extend_from_slice(block);
    }
    // BFINAL = 1, fixed Huffman codes, end of block.
    out.extend_from_slice(&[0x03, 0x00]);
    out
}

/// Encode a SequencePoints blob: LocalSignature 0, an InitialDocument when given, then the points.
pub fn encode_points(initial_document: Option<u32>, points: &[Point]) -> Vec<u8> {
    let mut b = Vec::new();
    let push = |b: &mut Vec<u8>, v: u32| push_compressed_u32(b, v).expect("a value under 0x20000000");
    push(&mut b, 0);
    if let Some(d) = initial_document {
        push(&mut b, d);
    }
    let mut previous_il: Option<u32> = None;
    let mut previous_start: Option<(u32, u32)> = None;
    for p in points {
        if let (Some(d), Some(_)) = (p.document, previous_il) {
            push(&mut b, 0);
            push(&mut b, d);
        }
        push(&mut b, p.il - previous_il.unwrap_or(0));
        previous_il = Some(p.il);
        if p.line == HIDDEN_LINE {
            push(&mut b, 0);
            push(&mut b, 0);
            continue;
        }
        let delta_lines = p.end_line - p.line;
        push(&mut b, delta_lines);
        let delta_columns = p.end_column as i32 - p.column as i32;
        if delta_lines == 0 {
            push(&mut b, delta_columns as u32);
        } else {
            push_compressed_i32(&mut b, delta_columns).expect("a column delta in range");
        }
        match previous_start {
            None => {
                push(&mut b, p.line);
                push(&mut b, p.column);
            }
            Some((l, c)) => {
                push_compressed_i32(&mut b, p.line as i32 - l as i32).expect("a line delta in range");
                push_compressed_i32(&mut b, p.column as i32 - c as i32).expect("a column delta in range");
            }
        }
        previous_start = Some((p.line, p.column));
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::pdb::PortablePdb;

    #[test]
    fn round_trips_through_the_reader() {
        let mut w = PdbWriter::new([3; 20]);
        let a = w.document_name("/src/a.cs");
        let b = w.document_name("/src/b.cs");
        let da = w.document(a);
        let db = w.document(b);
        let mut second = Point::visible(9, 12, 1, 13, 4);
        second.document = Some(db);
        let blob = w.points_blob(&[Point::visible(0, 10, 5, 10, 20), Point::hidden(4), second]);
        w.method(da, blob);
        let name = w.string("sum");
        let v = w.variable(0, 2, name);
        w.scope(1, v, 0, 12);
        let bytes = w.build();
        let pdb = PortablePdb::parse(&bytes).unwrap();
        assert_eq!(pdb.id().0, [3; 20]);
        assert_eq!(pdb.document(2).unwrap().name, "/src/b.cs");
        let points: Vec<_> = pdb.sequence_points(0x0600_0001).unwrap().map(Result::unwrap).collect();
        assert_eq!(points.len(), 3);
        assert_eq!((points[0].document, points[0].start_line, points[0].end_column), (1, 10, 20));
        assert!(points[1].is_hidden());
        assert_eq!((points[2].il_offset, points[2].document, points[2].start_line, points[2].end_line, points[2].end_column), (9, 2, 12, 13, 4));
        let scopes = pdb.local_scopes(0x0600_0001).unwrap();
        assert_eq!(scopes[0].variables[0].name, "sum");
        assert_eq!(scopes[0].variables[0].index, 2);
    }

    #[test]
    fn embedded_entries_inflate_to_what_they_hold() {
        let pdb = b"BSJB and then the rest of a PDB";
        let entry = embedded_entry(pdb);
        assert_eq!(&entry[..4], b"MPDB");
        assert_eq!(crate::formats::pdb::embedded::inflate(&entry[8..], pdb.len(), 0).unwrap(), pdb);
        let bomb = zip_bomb_entry(1 << 30, 1024);
        assert!(bomb.len() < 2 << 20, "{}", bomb.len());
        assert_eq!(crate::formats::pdb::embedded::inflate(&zip_bomb_entry(0, 3)[8..], 3 << 20, 0).unwrap(), vec![0; 3 << 20]);
    }

    #[test]
    fn wide_indexes() {
        let mut w = PdbWriter::new([1; 20]);
        let name = w.document_name("x.cs");
        let blob = w.many_points_blob(20_000);
        for _ in 0..70_000 {
            w.document(name);
        }
        w.methods_sharing(70_000, 70_000, blob);
        let bytes = w.build();
        let pdb = PortablePdb::parse(&bytes).unwrap();
        assert_eq!((pdb.document_count(), pdb.method_count()), (70_000, 70_000));
        assert_eq!(pdb.document(69_999).unwrap().name, "x.cs");
        let last = pdb.sequence_points(0x0601_1170).unwrap().last().unwrap().unwrap();
        assert_eq!((last.il_offset, last.document, last.start_line), (19_999, 70_000, 20_000));
    }
}

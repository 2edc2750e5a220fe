//! The oracle of the `pdb` and `embedded_pdb` fuzz targets, shared with the stable replay of their
//! seeds and regressions (`tests/integration/fuzz_regressions.rs`), so both run the same checks.
//!
//! Not part of the API: these functions `assert!` the invariants that must hold for any input,
//! and panic when one does not. The readers they drive must never panic themselves.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use super::{embedded, PortablePdb, HIDDEN_LINE};
use crate::base::read::Error;
use crate::formats::metadata::table;
use crate::formats::pe::{PeImage, DEBUG_TYPE_EMBEDDED_PORTABLE_PDB};

/// Spec limits (PortablePdb-Metadata.md, "Sequence Points Blob").
const LINE_LIMIT: u32 = 0x2000_0000;
const COLUMN_LIMIT: u32 = 0x1_0000;

/// The most [`fuzz_check_embedded`] lets a declared size ask for.
const INFLATE_CAP: u32 = 1 << 20;

fn check_offset(e: &Error, len: usize, what: &str) {
    assert!(e.offset().is_none_or(|o| o <= len as u64), "{what}: error offset {:?} past the input's {len} bytes: {e:?}", e.offset());
}

/// Parse `data` as a portable PDB and drive every reader to its end: documents, every method's
/// sequence points, every method's local scopes. Asserts that error offsets lie inside the input,
/// that each point keeps the spec's limits (IL offsets strictly increasing within a method, lines
/// below 0x20000000 or the hidden line, columns below 0x10000, a document row of the table), and
/// that a sequence point iterator yields nothing after its error.
#[doc(hidden)]
pub fn fuzz_check_pdb(data: &[u8]) {
    let len = data.len();
    let pdb = match PortablePdb::parse(data) {
        Ok(pdb) => pdb,
        Err(e) => return check_offset(&e, len, "parse"),
    };
    let _ = (pdb.id().guid_hex(), pdb.id().stamp(), pdb.entry_point());
    assert!(pdb.id_offset() <= len as u64);
    let documents = pdb.document_count();

    let mut seen = 0u32;
    for d in pdb.documents() {
        seen = seen.saturating_add(1);
        if let Err(e) = d {
            check_offset(&e, len, "document");
        }
    }
    assert_eq!(seen, documents, "documents() yields one item per Document row");

    let methods = pdb.method_count();
    for rid in 1..=methods.min(0x00FF_FFFF) {
        check_points(&pdb, 0x0600_0000 | rid, documents, len);
    }
    // Tokens without a MethodDebugInformation row: an empty iterator, not an error.
    let mut absent = vec![0x0600_0000u32, 0x0200_0001];
    if methods < 0x00FF_FFFF {
        absent.push(0x0600_0000 | methods.saturating_add(1));
    }
    for token in absent {
        match pdb.sequence_points(token) {
            Ok(mut points) => assert!(points.next().is_none(), "no points for {token:#010X}"),
            Err(e) => panic!("sequence_points({token:#010X}) of a method without a row: {e:?}"),
        }
    }

    // Local scopes: every method with a debug row, and every method a LocalScope row names.
    let variables = pdb.tables().table(table::LOCAL_VARIABLE).len();
    // Column 0 (Method) is in every LocalScope row, so `ok()` drops nothing.
    let mut scope_methods: Vec<u32> = pdb.tables().table(table::LOCAL_SCOPE).iter().filter_map(|row| row.get(0).ok()).collect();
    scope_methods.extend(1..=methods.min(0x00FF_FFFF));
    scope_methods.sort_unstable();
    scope_methods.dedup();
    for rid in scope_methods {
        match pdb.local_scopes(0x0600_0000 | (rid & 0x00FF_FFFF)) {
            Ok(scopes) => {
                for s in &scopes {
                    assert!(s.variables.len() as u64 <= u64::from(variables), "a scope holds at most the LocalVariable table");
                }
            }
            Err(e) => check_offset(&e, len, "local_scopes"),
        }
    }
}

fn check_points(pdb: &PortablePdb<'_>, token: u32, documents: u32, len: usize) {
    let points = match pdb.sequence_points(token) {
        Ok(points) => points,
        Err(e) => return check_offset(&e, len, "sequence_points"),
    };
    let again = points.clone();
    let mut previous_il: Option<u32> = None;
    let mut got = Vec::new();
    let mut points = points;
    while let Some(p) = points.next() {
        let p = match p {
            Ok(p) => p,
            Err(e) => {
                check_offset(&e, len, "sequence point");
                assert!(points.next().is_none(), "{token:#010X}: a point after the error");
                assert!(points.next().is_none(), "{token:#010X}: a point after the error");
                got.push(None);
                break;
            }
        };
        if let Some(il) = previous_il {
            assert!(p.il_offset > il, "{token:#010X}: IL offsets strictly increase: {p:?} after IL_{il:04X}");
        }
        previous_il = Some(p.il_offset);
        assert!(p.il_offset < LINE_LIMIT, "{token:#010X}: IL offset below 0x20000000: {p:?}");
        assert!(p.document >= 1 && p.document <= documents, "{token:#010X}: document in 1..={documents}: {p:?}");
        for line in [p.start_line, p.end_line] {
            assert!(line < LINE_LIMIT || line == HIDDEN_LINE, "{token:#010X}: line limit: {p:?}");
        }
        for column in [p.start_column, p.end_column] {
            assert!(column < COLUMN_LIMIT, "{token:#010X}: column limit: {p:?}");
        }
        if p.is_hidden() {
            assert!(p.end_line == HIDDEN_LINE && p.start_column == 0 && p.end_column == 0, "{token:#010X}: hidden point: {p:?}");
        } else {
            // ΔLines is unsigned, and on one line ΔColumns is positive (zero is a hidden point).
            assert!(p.start_line <= p.end_line, "{token:#010X}: end line before start line: {p:?}");
            assert!(p.start_line != p.end_line || p.start_column < p.end_column, "{token:#010X}: empty one-line span: {p:?}");
        }
        got.push(Some(p));
    }
    // Decoding is deterministic: a copy taken before the first point yields the same again.
    let replay: Vec<_> = again.map(|p| p.ok()).collect();
    assert_eq!(replay, got, "{token:#010X}: a cloned iterator yields the same points");
}

/// Two checks of the embedded-PDB path over one input.
///
/// 1. `data` as `[u32 declared size, LE][raw deflate bytes]`: [`embedded::inflate`] with the
///    declared size (capped at 1 MiB) gives exactly that many bytes or an error, and the bytes it
///    gives go through [`fuzz_check_pdb`].
/// 2. `data` as a PE image: `codeview`, `embedded_pdb` and, when it inflates, [`fuzz_check_pdb`] on
///    the result, whose size is the one the type-17 entry declares.
#[doc(hidden)]
pub fn fuzz_check_embedded(data: &[u8]) {
    if let Some((head, deflated)) = data.split_first_chunk::<4>() {
        let size = u32::from_le_bytes(*head).min(INFLATE_CAP) as usize;
        match embedded::inflate(deflated, size, 4) {
            Ok(out) => {
                assert_eq!(out.len(), size, "inflate gives exactly the declared size");
                fuzz_check_pdb(&out);
            }
            Err(e) => assert_eq!(e.offset(), Some(4), "inflate errors point at the stream: {e:?}"),
        }
    }

    let Ok(image) = PeImage::parse(data) else { return };
    let _ = image.codeview();
    if let Ok(Some(pdb)) = embedded::embedded_pdb(&image) {
        // The first type-17 entry's declared size (after `MPDB`) is what came out.
        let entry = image.debug_entries().expect("embedded_pdb read the entries").into_iter().find(|e| e.kind == DEBUG_TYPE_EMBEDDED_PORTABLE_PDB);
        let mut r = image.debug_data(&entry.expect("embedded_pdb found a type-17 entry")).expect("embedded_pdb read its data");
        let _magic = r.u32("MPDB").expect("embedded_pdb read the signature");
        let declared = r.u32("size").expect("embedded_pdb read the size");
        assert_eq!(pdb.len() as u64, u64::from(declared), "the inflated PDB has the declared size");
        fuzz_check_pdb(&pdb);
    }
}

/// Fuzz bytes, read as small numbers (0 once they run out).
pub(crate) struct Bytes<'a>(pub(crate) &'a [u8]);

impl Bytes<'_> {
    pub(crate) fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub(crate) fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }
}

/// A portable PDB built from fuzz bytes with [`super::writer`]: a few name parts and name blobs
/// (some shared by many Document rows, some long), a few sequence-point blobs (well-formed ones
/// from the bytes' numbers, and raw bytes as they come), up to 40,000 MethodDebugInformation rows
/// sharing them (Document columns in and out of range, or 0), and LocalScope/LocalVariable rows
/// with shared names. Shapes no compiler writes, in few bytes.
pub fn structured_pdb(data: &[u8]) -> Vec<u8> {
    use super::writer::{encode_points, PdbWriter, Point};
    let mut b = Bytes(data);
    let mut w = PdbWriter::new([b.u8(); 20]);
    let part_count = 1 + usize::from(b.u8() % 4);
    let parts: Vec<u32> = (0..part_count)
        .map(|_| {
            let len = usize::from(b.u8() % 64);
            let text: Vec<u8> = b.take(len).iter().map(|c| b'a' + c % 26).collect();
            w.blob(&text)
        })
        .collect();
    let name_count = 1 + usize::from(b.u8() % 4);
    let names: Vec<u32> = (0..name_count)
        .map(|_| {
            let n = usize::from(b.u8()) * 4;
            let list: Vec<u32> = (0..n).map(|i| parts.get(i % parts.len()).copied().unwrap_or(0)).collect();
            w.document_name_of_parts(b'/', &list)
        })
        .collect();
    let documents = u32::from(b.u16() % 5000) + 1;
    for i in 0..documents {
        w.document(names.get(i as usize % names.len()).copied().unwrap_or(0));
    }
    let blob_count = 1 + usize::from(b.u8() % 4);
    let blobs: Vec<u32> = (0..blob_count)
        .map(|_| {
            let mode = b.u8();
            if mode % 3 == 0 {
                let len = usize::from(b.u8());
                let raw = b.take(len).to_vec();
                return w.blob(&raw);
            }
            let count = u32::from(b.u16() % 4000);
            let mut il = 0u32;
            let points: Vec<Point> = (0..count)
                .map(|i| {
                    il += 1 + u32::from(b.u8() % 8);
                    let line = 1 + (i % 10_000);
                    let mut p = if b.u8() % 5 == 0 { Point::hidden(il) } else { Point::visible(il, line, 1, line, 2 + u32::from(b.u8() % 100)) };
                    if b.u8() % 17 == 0 {
                        p.document = Some(1 + u32::from(b.u16()) % documents);
                    }
                    p
                })
                .collect();
            let initial = (mode % 3 == 2).then(|| 1 + u32::from(b.u8()) % documents.saturating_add(1));
            let bytes = encode_points(initial, &points);
            w.blob(&bytes)
        })
        .collect();
    let methods = u32::from(b.u16()) % 40_000;
    for i in 0..methods {
        let doc = match b.u8() % 8 {
            0 => 0,
            1 => documents + 1,
            _ => 1 + i % documents,
        };
        w.method(doc, blobs.get(i as usize % blobs.len()).copied().unwrap_or(0));
    }
    let local_names: Vec<u32> = (0..1 + b.u8() % 4).map(|i| w.string(&format!("v{i}"))).collect();
    let scopes = u32::from(b.u8());
    for m in 0..scopes {
        let first = w.variable_count() + 1;
        for k in 0..u32::from(b.u8() % 16) {
            w.variable(0, b.u8().into(), local_names.get(k as usize % local_names.len()).copied().unwrap_or(0));
        }
        w.scope(1 + m, first, 0, u32::from(b.u8()));
    }
    w.build()
}

/// The reference line of a method at an IL offset, decoded the plain way (the method's own
/// iterator, all of it): the last visible point at or before `il`, or nothing if the blob is bad.
pub(crate) fn reference_line(pdb: &PortablePdb<'_>, token: u32, il: u32) -> Option<(u32, u32, Option<String>)> {
    let points: Vec<_> = pdb.sequence_points(token).ok()?.collect::<Result<_, _>>().ok()?;
    let p = points.iter().rfind(|p| !p.is_hidden() && p.il_offset <= il)?;
    Some((p.start_line, p.start_column, pdb.document(p.document).ok().map(|d| d.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_inputs_pass() {
        for data in [&[][..], b"BSJB", b"\x05\0\0\0\x03\0", b"MZ\0\0"] {
            fuzz_check_pdb(data);
            fuzz_check_embedded(data);
        }
        // A stored deflate block holding "BSJB".
        let stored = [4u8, 0, 0, 0, 0x01, 0x04, 0x00, 0xFB, 0xFF, b'B', b'S', b'J', b'B'];
        fuzz_check_embedded(&stored);
        let out = embedded::inflate(stored.get(4..).unwrap(), 4, 4).unwrap();
        assert_eq!(out, b"BSJB");
    }
}

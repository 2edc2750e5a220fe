//! The oracle of the `pdb` and `embedded_pdb` fuzz targets, shared with the stable replay of their
//! seeds and regressions (`tests/integration/fuzz_regressions.rs`), so both run the same checks.
//!
//! Not part of the API: these functions `assert!` the invariants that must hold for any input,
//! and panic when one does not. The readers they drive must never panic themselves.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use super::{embedded, PortablePdb, HIDDEN_LINE};
use crate::metadata::table;
use crate::pe::{PeImage, DEBUG_TYPE_EMBEDDED_PORTABLE_PDB};
use crate::read::Error;

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

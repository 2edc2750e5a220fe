//! The fuzz checks that hold a PDB reader against the symbolizer's shared line tables: the
//! `pdb_structured` fuzz target's oracle, shared with the stable replay of its seeds
//! (`tests/integration/hostile_pdb.rs`). They live here, above both the PDB reader and the line
//! tables, so the formats floor never imports an answer.
//!
//! Not part of the API: these functions `assert!` the invariants that must hold for any input,
//! and panic when one does not. The readers they drive must never panic themselves.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use super::ModuleSymbols;
use crate::formats::pdb::fuzzcheck::{fuzz_check_pdb, reference_line, structured_pdb, Bytes};
use crate::formats::pdb::PortablePdb;

/// The structure-aware PDB mode: [`structured_pdb`] through [`fuzz_check_pdb`], and the lazy,
/// shared line table ([`ModuleSymbols`]) against a plain decoding of each
/// method, at IL offsets from the bytes.
pub fn fuzz_check_pdb_structured(data: &[u8]) {
    let bytes = structured_pdb(data);
    fuzz_check_pdb(&bytes);
    let pdb = PortablePdb::parse(&bytes).expect("the writer's PDB parses");
    let lines = ModuleSymbols::from_pdb(bytes.clone()).expect("the writer's PDB parses");
    let methods = pdb.method_count();
    let mut b = Bytes(data.get(data.len() / 2..).unwrap_or(&[]));
    for _ in 0..64 {
        let token = 0x0600_0000 | (u32::from(b.u16()) % methods.saturating_add(2));
        let il = u32::from(b.u16());
        let got = lines.line(token, il).map(|(l, c, f)| (l, c, f.map(str::to_owned)));
        assert_eq!(got, reference_line(&pdb, token, il), "{token:#010X} IL {il:#X}");
    }
}

/// The capture-plus-PDB mode: a PDB from the first half of the bytes ([`structured_pdb`]) and a
/// capture from the second (a header, then bodies of that module with maps from the bytes), read
/// by the capture reader; each body's line table must end at its code size, rise strictly, and
/// give at every row the line the plain decoding gives at the runtime's IL offset there.
#[cfg(feature = "serde")]
pub fn fuzz_check_capture_pdb(data: &[u8]) {
    let (first, second) = data.split_at(data.len() / 2);
    let bytes = structured_pdb(first);
    let pdb = PortablePdb::parse(&bytes).expect("the writer's PDB parses");
    let lines = ModuleSymbols::from_pdb(bytes.clone()).expect("the writer's PDB parses");
    let methods = pdb.method_count();
    let mut b = Bytes(second);
    let mut text = String::from("{\"format\":\"clrmap-capture\",\"version\":1,\"pid\":7}\n");
    for i in 0..u32::from(b.u8() % 32) {
        let token = 0x0600_0000 | (u32::from(b.u16()) % methods.saturating_add(2));
        let mut map = Vec::new();
        let mut native = 0u32;
        for _ in 0..b.u8() % 24 {
            let il = match b.u8() % 16 {
                0 => u32::MAX - 1,
                1 => u32::MAX - 2,
                2 => u32::MAX,
                _ => u32::from(b.u16() % 0x800),
            };
            let len = u32::from(b.u8() % 40);
            map.push(format!("[{il},{native},{}]", native + len));
            native += len;
        }
        let code_size = native + u32::from(b.u8() % 8);
        text.push_str(&format!(
            "{{\"kind\":\"jit\",\"pid\":7,\"function_id\":{},\"module\":\"/m/X.dll\",\"token\":{token},\"start\":{},\"code_size\":{code_size},\"map\":[{}]}}\n",
            1 + i,
            0x1_0000 * (1 + u64::from(i)),
            map.join(",")
        ));
    }
    let capture = crate::formats::capture::read_capture(text.as_bytes()).expect("a capture written here reads");
    for c in &capture.bodies {
        let body = &c.body;
        let rows = lines.line_table(body.token, &body.map, body.code_size);
        for pair in rows.windows(2) {
            assert!(pair[0].native_offset < pair[1].native_offset, "{:#010X}: rows rise strictly: {rows:?}", body.token);
        }
        if let Some(last) = rows.last() {
            assert_eq!(last.native_offset, body.code_size, "{:#010X}: the table ends at the code size", body.token);
        }
        for row in rows.iter().take(rows.len().saturating_sub(1)) {
            let (_, il) = crate::base::ilmap::runtime_il_offset(&body.map, body.code_size, row.native_offset);
            match reference_line(&pdb, body.token, il) {
                Some((line, column, file)) => {
                    assert_eq!((row.line, row.column, Some(row.file.clone())), (line, column, Some(file.unwrap_or_default())), "{:#010X} +{:#X}", body.token, row.native_offset)
                }
                None => assert_eq!(row.line, 0, "{:#010X} +{:#X}: no line there", body.token, row.native_offset),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_modes_on_a_few_inputs() {
        let mut seed = 0x1234_5678u32;
        for n in [0usize, 1, 7, 64, 300, 2000] {
            let data: Vec<u8> = (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (seed >> 16) as u8
                })
                .collect();
            fuzz_check_pdb_structured(&data);
            #[cfg(feature = "serde")]
            fuzz_check_capture_pdb(&data);
        }
    }
}

//! The metadata reader: PE bytes in; every table iterates, every name and spec renders, and the
//! instantiation map builds, without a panic.
#![no_main]

use clrmap::gdmap::instantiation_map;
use clrmap::metadata::{schema, spec_lines, table, Metadata};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(md) = Metadata::parse(data) else { return };
    for id in 0..=table::GENERIC_PARAM_CONSTRAINT {
        let n = schema::columns(id).map_or(0, |c| c.len());
        for row in md.tables().table(id).iter() {
            // Every column the schema names is inside the row; one past them is an error.
            for c in 0..n {
                assert!(row.get(c).is_ok(), "column {c} of table {id:#04X}");
            }
            assert!(row.get(n).is_err(), "no column {n} in table {id:#04X}");
        }
    }
    let _ = spec_lines(&md, &md);
    for rid in 1..=md.tables().rows(table::TYPE_DEF).min(5000) {
        let _ = md.type_name(0x0200_0000 | rid);
    }
    for rid in 1..=md.tables().rows(table::TYPE_REF).min(5000) {
        let _ = md.type_name(0x0100_0000 | rid);
    }
    for rid in 1..=md.tables().rows(table::METHOD_DEF).min(5000) {
        let _ = md.method_name(0x0600_0000 | rid);
    }
    if let Ok(map) = instantiation_map(&md, true) {
        let m = clrmap::gdmap::DictionaryMap::parse(&map).expect("a built map parses");
        m.validate().expect("a built map is valid");
    }
});

//! The jitdump fuzz target's checks (`fuzz/fuzz_targets/jitdump.rs`), here so that the stable
//! replay of its seeds and regressions (`tests/integration/fuzz_regressions.rs`) runs the very
//! same checks.
//!
//! Panics on a broken invariant; that is its purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use super::build::enrich_stream;
use super::read::{parse, scan, Scanned, StreamError};

/// Any bytes: the whole-file reader and the streaming one agree (the same error, or the same
/// header, records and torn-tail warning); an enrichment that adds nothing writes a file both
/// readers take, with the same code loads in the same order.
pub fn fuzz_check(data: &[u8]) {
    let len = data.len() as u64;
    let scanned = scan(&mut std::io::Cursor::new(data), len);
    let parsed = match parse(data) {
        Err(e) => {
            assert!(matches!(&scanned, Err(StreamError::Input(s)) if *s == e), "parse: {e:?}, scan: {scanned:?}");
            return;
        }
        Ok(d) => d,
    };
    let s = scanned.expect("scan reads what parse reads");
    assert_eq!((s.header, s.header_size, &s.warning), (parsed.header, parsed.header_size, &parsed.warning));
    let from_parse: Vec<Scanned> = parsed
        .records
        .iter()
        .map(|r| Scanned { id: r.id, timestamp: r.timestamp, range: r.range.start as u64..r.range.end as u64, load: r.load.as_ref().map(|l| (l.code_address, l.code_index)) })
        .collect();
    assert_eq!(s.records, from_parse);

    let mut out = Vec::new();
    enrich_stream(&mut std::io::Cursor::new(data), len, &[], &[], &mut out).expect("an enrichment of a readable jitdump");
    let again = parse(&out).expect("an enriched jitdump reads");
    let loads = |records: &[Scanned]| records.iter().filter_map(|r| r.load).collect::<Vec<_>>();
    let again_scanned = scan(&mut std::io::Cursor::new(&out), out.len() as u64).expect("an enriched jitdump scans");
    assert_eq!(again.records.len(), again_scanned.records.len());
    assert_eq!(loads(&again_scanned.records), loads(&s.records));
}

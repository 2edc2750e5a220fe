//! `POST /symbolicate` bodies: the service's cursor and serde's model read every body the cursor
//! reads alike (`service::scan::fuzzcheck`), the cursor reads no body that is not UTF-8, and the
//! service answers any body, without symbols, with an answer or an error of a stable kind, within
//! its frame limit.
#![no_main]

use clrmap::locate::SymbolPaths;
use clrmap::service::{scan, Config, Service};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&max, body)) = data.split_first() else { return };
    let max = usize::from(max % 8) + 1;
    scan::fuzzcheck::check(body, max);
    let service = Service::new(Config::new(SymbolPaths::default(), 1 << 20, max));
    match service.symbolicate(body) {
        Ok(answer) => assert!(answer.frames <= max as u64),
        Err(e) => assert!(["bad_json", "bad_utf8", "missing_field", "bad_value", "too_many_frames", "too_many_modules", "answer_too_large"].contains(&e.kind), "{e:?}"),
    }
});

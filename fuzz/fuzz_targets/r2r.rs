//! The ReadyToRun reader: PE bytes in; entry points, debug info of every entry, and every code
//! body's public map, without a panic; every map keeps the contract's invariants.
#![no_main]

use clrmap::r2r::ReadyToRunImage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(image) = ReadyToRunImage::parse(data) else { return };
    if let Ok(entries) = image.entry_points() {
        for e in entries.iter().take(2000) {
            let _ = image.debug_info(e.runtime_function);
        }
    }
    if let Ok(bodies) = image.code_bodies() {
        for b in bodies {
            for e in &b.map {
                assert!(e.native_start <= e.native_end && e.native_end <= b.code_size.max(e.native_start));
            }
        }
    }
});

//! The trace reader: arbitrary bytes never panic; every event's payload lies inside the input;
//! the method table pairs whatever it reads.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = clrmap::nettrace::read_events(data, |e| {
        assert!(e.payload.offset() as usize + e.payload.len() <= data.len());
    });
    let _ = clrmap::nettrace::read_code_bodies(data);
});

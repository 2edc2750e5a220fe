//! ELF cores: the whole dump reader (headers, notes, memory, the runtime's descriptor, threads
//! and frames) over arbitrary bytes. It must end, without a panic, in an error or a report.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = clrmap::dump::analyze(data, &clrmap::dump::Options { max_frames: 256 }) {
        assert!(report.threads.iter().all(|t| t.frames.len() <= 256 * 2));
    }
});

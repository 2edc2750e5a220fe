//! Capture files (JSON lines from the clrmap profiler): torn, interleaved, hostile. The checks are
//! the library's own `clrmap::capture::fuzz_check`, which the stable replay runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    clrmap::capture::fuzz_check(data);
});

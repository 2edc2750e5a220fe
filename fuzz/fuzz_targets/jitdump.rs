//! jitdump files (perf's JIT interface: the runtime's, or one clrmap wrote), torn or hostile: the
//! whole-file and streaming readers agree, and an enrichment writes a file both read. The checks
//! are the library's own `clrmap::jitdump::fuzzcheck::fuzz_check`, which the stable replay runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    clrmap::jitdump::fuzzcheck::fuzz_check(data);
});

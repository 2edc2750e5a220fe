//! The JIT's inline trees (event 189 blobs and payload runs, and stored rich chunks), hostile: parsing never panics or
//! loops, every tree it accepts is a forest whose chains end at node 0 or say their parent is
//! unknown, orphan recovery keeps that so, and the chunk collector never panics. The checks are
//! the library's own `clrmap::inlines::fuzzcheck::fuzz_check`, which the stable replay runs too
//! (crates/clrmap/tests/integration/inlines.rs `fuzz_inputs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    clrmap::inlines::fuzzcheck::fuzz_check(data);
});

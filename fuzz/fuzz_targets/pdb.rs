//! The portable PDB reader: parse, every document, every method's sequence points and local
//! scopes, without a panic; error offsets stay inside the input, points keep the spec's limits,
//! and a sequence point iterator ends after its error. The checks are the library's own
//! `clrmap::pdb::fuzzcheck`, which the stable replay of seeds and regressions runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    clrmap::pdb::fuzzcheck::fuzz_check_pdb(data);
});

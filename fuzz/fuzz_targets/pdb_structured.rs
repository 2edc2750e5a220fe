//! Structure-aware portable PDBs: the bytes drive the library's PDB writer (`clrmap::pdb::writer`)
//! to make what no compiler writes, in few bytes: one sequence-point blob shared by thousands of
//! rows, document names shared by thousands of Document rows, long names, malformed blobs,
//! Document columns out of range. An even first byte: the PDB goes through the reader's checks,
//! and the lazy shared line table is compared with a plain decoding of each method
//! (`fuzz_check_pdb_structured`). An odd one: a capture is built from the second half of the
//! bytes, for the same module, and every body's line table is checked against the plain decoding
//! (`fuzz_check_capture_pdb`). The checks are `clrmap::symbolizer::fuzzcheck`, shared with the stable
//! replay of seeds and regressions.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((mode, rest)) if mode % 2 == 1 => clrmap::symbolizer::fuzzcheck::fuzz_check_capture_pdb(rest),
        Some((_, rest)) => clrmap::symbolizer::fuzzcheck::fuzz_check_pdb_structured(rest),
        None => {}
    }
});

//! Embedded portable PDBs: `[u32 size][deflate]` inflates to exactly the declared size or fails
//! (bounded memory), and the same bytes as a PE image go through `codeview`, `embedded_pdb` and
//! the PDB reader, without a panic. The checks are `clrmap::pdb::fuzzcheck`, shared with the
//! stable replay of seeds and regressions.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    clrmap::pdb::fuzzcheck::fuzz_check_embedded(data);
});

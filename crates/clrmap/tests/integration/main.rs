//! clrmap's integration tests: one test binary (link time matters on 2 cores), one module per area.
//! Tests that need a real .NET runtime use `support::runtimes()`: in CI (`CI=true`) a missing
//! runtime fails them. They are `#[ignore = "needs .NET"]`, so plain `cargo test` lists them as
//! ignored; scripts/test.sh (what CI runs) passes `--include-ignored` and they are mandatory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::arithmetic_side_effects)]

mod attach;
mod bodies;
mod diag_deadlines;
mod event_names;
mod file_sizes;
mod flame;
mod floors;
mod frameprops;
mod frames;
mod fuzz_regressions;
mod hostile;
mod hostile_pdb;
mod inlines;
mod instantiations;
mod metadata;
mod nettrace;
mod pdb;
mod pdb_identity;
mod profiler;
mod r2r;
mod spec_errors;
mod stacktrace;
mod support;
mod torn;

//! clrmap's integration tests: one test binary (link time matters on 2 cores), one module per area.
//! Tests that need a real .NET runtime use `support::runtimes()`: in CI (`CI=true`) a missing
//! runtime fails them. They are `#[ignore = "needs .NET"]`, so plain `cargo test` lists them as
//! ignored; scripts/test.sh (what CI runs) passes `--include-ignored` and they are mandatory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::arithmetic_side_effects)]


mod support;
mod fuzz_regressions;
mod metadata;
mod r2r;
mod instantiations;
mod profiler;
mod nettrace;
mod pdb;
mod hostile_pdb;
mod frames;
mod hostile;
mod torn;
mod frameprops;
mod attach;
mod event_names;
mod spec_errors;
mod pdb_identity;
mod bodies;
mod diag_deadlines;
mod inlines;
mod stacktrace;
mod flame;

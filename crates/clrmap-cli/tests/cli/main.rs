//! CLI tests: the real `clrmap` binary, its stdout, stderr and exit codes. One module per command group.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::arithmetic_side_effects)]


mod support;
mod sig;
mod dict;
mod il;
mod symbolize;
mod addresses;
mod errors;
mod daily;
mod profile;
mod hostile;
mod meta_errors;
mod hostile_pdb;
mod perf;
mod help;
mod scripts;
mod output_files;
mod hang;
mod pdb_identity;
mod dict_errors;
mod perf_links;
mod capture_identity;
mod debug_layouts;
mod profile_inlines;
mod inlines;
mod stacktrace;
mod symbol_server;
mod cpu;
mod serve;
mod serve_hostile;
mod sentry;
mod sources;
mod sdk_sources;
mod flame;
mod attach_inlines;
mod pdb_only;
mod r2r_versions;

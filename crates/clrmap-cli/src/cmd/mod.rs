//! One module per command group. Printers take `&mut dyn Write`, so tests need no process.

pub mod sig;
pub mod dict;
pub mod meta;
pub mod il;
pub mod profile;
pub mod trace;
pub mod pdb;
pub mod symbolize;
pub mod stacktrace;
pub mod flame;
pub mod serve;
pub mod perf;
pub mod diag;

//! One module per command group. Printers take `&mut dyn Write`, so tests need no process.

pub mod diag;
pub mod dict;
pub mod dump;
pub mod flame;
pub mod il;
pub mod meta;
pub mod pdb;
pub mod perf;
pub mod profile;
pub mod serve;
pub mod sig;
pub mod stacktrace;
pub mod symbolize;
pub mod trace;

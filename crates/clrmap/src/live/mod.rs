//! Live processes: the runtime's diagnostics port ([`diag`]), through which traces are recorded
//! and a running process's code is snapshotted.
pub mod diag;

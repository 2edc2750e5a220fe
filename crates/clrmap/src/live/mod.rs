//! Processes: live ones through the runtime's diagnostics port ([`diag`]), through which traces
//! are recorded and a running process's code is snapshotted; dead ones through their core dumps
//! ([`dump`]), read by the runtime's own contract descriptor.
pub mod diag;
pub mod dump;

//! Output formats built from answers: flame graphs ([`profile`]: collapsed stacks, speedscope,
//! pprof) and perf's jitdump files ([`jitdump`]).
pub mod jitdump;
pub mod profile;

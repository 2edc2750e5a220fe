//! # clrmap
//!
//! Readers, writers and services for two of the CLR's documented debugging and profiling
//! interfaces, over the real .NET files that feed them:
//!
//! * `ICorDebugSymbolProvider2::GetGenericDictionaryInfo`: the *generic dictionary map*
//!   ([`gdmap`]), whose heap items are ECMA-335 type signatures ([`signature`]).
//! * `ICorProfilerInfo::GetILToNativeMapping`: IL-to-native maps ([`ilmap`]), read from
//!   ReadyToRun images ([`r2r`]), EventPipe traces ([`nettrace`]) and live profiler captures
//!   (`capture`).
//!
//! Every read goes through one panic-free cursor ([`read::Reader`]). Errors carry a stable kind,
//! the absolute byte offset and what was expected ([`read::Error`]).
//!
//! ## Features
//! * `serde` (default): the `capture` module, whose files are JSON lines, and `serde::Serialize`
//!   on the types the CLI prints as JSON. Without it, `symbolizer::open_source` does not
//!   recognize a capture, and the library depends on neither `serde` nor `serde_json` (only on
//!   `object`, `miniz_oxide` and `rustix`, whose safe wrappers give the diagnostics port its
//!   non-blocking connect and the file layer its opens that follow no link and never block).
//! * `testing` (off): code for clrmap's own tests and fuzz targets only (a fake diagnostics server
//!   in `diag`, the fuzz targets' checks in `pdb`, `inlines` and `jitdump`). Not a stable API.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// A value narrowed by `as` loses its high bits in silence; a hostile file's numbers must not. The
// library narrows with `try_from` (an error, or saturation where a bound above makes it lossless).
#![deny(clippy::cast_possible_truncation)]
// Tests may do plain arithmetic and casts on their own data (unwrap, indexing and panics are
// allowed in tests by clippy.toml).
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::cast_possible_truncation))]

// The folders are the floors, from the ground up; each imports only floors below it (and its own).
// The re-exports keep every module at its old path (`clrmap::pdb`, `clrmap::symbolizer`, ...).
pub mod answers;
pub mod base;
pub mod formats;
pub mod live;
pub mod outputs;
#[cfg(feature = "serde")]
pub mod service;
pub mod symbols;

pub use answers::{stacktrace, symbolizer};
pub use base::{fs, guid, ilmap, json, read};
#[cfg(feature = "serde")]
pub use formats::capture;
pub use formats::{gdmap, inlines, metadata, nettrace, pdb, pe, r2r, signature};
pub use live::{diag, dump};
pub use outputs::{jitdump, profile};
pub use symbols::{locate, symsrv, why};

pub use read::{Error, ErrorKind, Result};

//! What the C ABI's tests that need the real runtimes share: where their CoreLibs are.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

// Shared test support: a missing runtime fails loudly.
#[allow(clippy::panic, clippy::indexing_slicing)]
#[path = "../../../../tests/support/runtimes.rs"]
mod runtimes_list;
pub use runtimes_list::*;

/// The ReadyToRun CoreLib of every installed runtime.
pub fn corelibs() -> Vec<PathBuf> {
    all_runtimes().iter().map(Runtime::corelib).collect()
}

/// A file of the runtimes scripts/install-dotnet.sh installs (`CLRMAP_DOTNET_HOME`, or `.dotnet`);
/// a missing one fails the test.
pub fn dotnet_file(rel: &str) -> PathBuf {
    let home = std::env::var("CLRMAP_DOTNET_HOME").map(PathBuf::from).unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.dotnet"));
    let p = home.join(rel);
    assert!(p.is_file(), "{} is missing: run scripts/install-dotnet.sh", p.display());
    p
}

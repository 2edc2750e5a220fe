//! Where the benches find the real runtimes installed by scripts/install-dotnet.sh.
#![allow(dead_code)]

use std::path::PathBuf;

// The tests' reader of the installed list: a missing or broken install is a setup error it
// panics on, as in the tests.
#[path = "../../../../tests/support/runtimes.rs"]
#[allow(clippy::panic, clippy::indexing_slicing, clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
mod runtimes_list;

fn list() -> Vec<runtimes_list::Runtime> {
    if !runtimes_list::dotnet_home().join("runtimes.tsv").is_file() {
        eprintln!("skipping: no runtimes installed (run scripts/install-dotnet.sh)");
        return Vec::new();
    }
    runtimes_list::installed_runtimes()
}

/// The oldest installed runtime's System.Private.CoreLib.dll (3.1 where installed), read into
/// memory, or a note on stderr and `None`.
pub fn corelib31() -> Option<Vec<u8>> {
    let rt = list().into_iter().next()?;
    let corelib = rt.framework.join("System.Private.CoreLib.dll");
    let bytes = std::fs::read(&corelib).ok();
    if bytes.is_none() {
        eprintln!("skipping: {} not found (run scripts/install-dotnet.sh)", corelib.display());
    }
    bytes
}

/// The .NET 8 `dotnet` host installed by scripts/install-dotnet.sh, or a note on stderr and `None`.
pub fn dotnet80() -> Option<PathBuf> {
    let rt = list().into_iter().find(|r| r.channel == "8.0");
    if rt.is_none() {
        eprintln!("skipping: no .NET 8 runtime is installed (run scripts/install-dotnet.sh)");
    }
    rt.map(|r| r.dotnet)
}

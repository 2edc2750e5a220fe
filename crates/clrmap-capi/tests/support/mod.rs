//! What the C ABI's tests that need the real runtimes share: where their CoreLibs are.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The ReadyToRun CoreLibs of 3.1.23 and 8.0.4, relative to the runtimes' home.
pub const CORELIBS: [&str; 2] = [
    "3.1/dotnetcore2/bin/shared/Microsoft.NETCore.App/3.1.23/System.Private.CoreLib.dll",
    "8.0/dnv/net/runtime/.net/shared/Microsoft.NETCore.App/8.0.4/System.Private.CoreLib.dll",
];

/// A file of the runtimes scripts/install-dotnet.sh installs (`CLRMAP_DOTNET_HOME`, or `.dotnet`);
/// a missing one fails the test.
pub fn dotnet_file(rel: &str) -> PathBuf {
    let home = std::env::var("CLRMAP_DOTNET_HOME").map(PathBuf::from).unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.dotnet"));
    let p = home.join(rel);
    assert!(p.is_file(), "{} is missing: run scripts/install-dotnet.sh", p.display());
    p
}

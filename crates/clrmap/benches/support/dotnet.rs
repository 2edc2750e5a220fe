//! Where the benches find the real runtime installed by scripts/install-dotnet.sh.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// 3.1.23's System.Private.CoreLib.dll, read into memory, or a note on stderr and `None`.
pub fn corelib31() -> Option<Vec<u8>> {
    let home = std::env::var_os("CLRMAP_DOTNET_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.dotnet"));
    let corelib = home.join("3.1/dotnetcore2/bin/shared/Microsoft.NETCore.App/3.1.23/System.Private.CoreLib.dll");
    let bytes = std::fs::read(&corelib).ok();
    if bytes.is_none() {
        eprintln!("skipping: {} not found (run scripts/install-dotnet.sh)", corelib.display());
    }
    bytes
}

/// The 8.0.4 `dotnet` host installed by scripts/install-dotnet.sh, or a note on stderr and `None`.
pub fn dotnet80() -> Option<PathBuf> {
    let home = std::env::var_os("CLRMAP_DOTNET_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.dotnet"));
    let base = home.join("8.0/dnv/net/runtime/.net");
    let ok = base.join("dotnet").is_file() && base.join("shared/Microsoft.NETCore.App/8.0.4/System.Private.CoreLib.dll").is_file();
    if !ok {
        eprintln!("skipping: the 8.0.4 runtime is not in {} (run scripts/install-dotnet.sh)", base.display());
    }
    ok.then(|| base.join("dotnet"))
}

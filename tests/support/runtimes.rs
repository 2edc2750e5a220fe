//! The real .NET runtimes `scripts/install-dotnet.sh` installed, as every test crate sees them.
//!
//! One home for the rule: each crate's test support includes this file with `#[path]`. The install
//! script writes `runtimes.tsv` into `CLRMAP_DOTNET_HOME` (default `.dotnet` in the repository), one
//! line per runtime: channel (`8.0`), version (`8.0.31`), the `dotnet` host, the framework directory.
//! On the SDK machine these are 3.1.3 (where NuGet still serves it), 8.0, 9.0 and 10.0; on a machine
//! with PyPI and no SDK, 3.1.23 and 8.0.4.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A real .NET runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runtime {
    /// `3.1`, `8.0`, `9.0`, `10.0`.
    pub channel: String,
    /// The exact version, e.g. `10.0.12`.
    pub version: String,
    /// The `dotnet` host of this runtime's own root.
    pub dotnet: PathBuf,
    /// The shared framework directory (`.../shared/Microsoft.NETCore.App/<version>`).
    pub framework: PathBuf,
}

impl Runtime {
    /// The major version: 3, 8, 9, 10.
    pub fn major(&self) -> u32 {
        self.channel.split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0)
    }

    /// The `tfm` of a runtimeconfig.json for this runtime.
    pub fn tfm(&self) -> String {
        if self.major() < 5 {
            format!("netcoreapp{}", self.channel)
        } else {
            format!("net{}", self.channel)
        }
    }

    /// A file of the framework directory, e.g. `System.Private.CoreLib.dll`; a missing one fails.
    pub fn file(&self, name: &str) -> PathBuf {
        let p = self.framework.join(name);
        assert!(p.is_file(), "{} is missing: run scripts/install-dotnet.sh", p.display());
        p
    }

    /// The framework's assemblies (`*.dll`), sorted.
    pub fn assemblies(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.framework).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "dll")).collect();
        v.sort();
        v
    }

    /// The framework's ReadyToRun CoreLib.
    pub fn corelib(&self) -> PathBuf {
        self.file("System.Private.CoreLib.dll")
    }

    /// The runtimeconfig.json text for a program run on exactly this runtime (invariant
    /// globalization).
    pub fn runtimeconfig(&self) -> String {
        format!(
            r#"{{ "runtimeOptions": {{ "tfm": "{}", "framework": {{ "name": "Microsoft.NETCore.App", "version": "{}" }}, "configProperties": {{ "System.Globalization.Invariant": true }} }} }}"#,
            self.tfm(),
            self.version
        )
    }

    /// A short label for messages and scratch directories: `v10.0.12`.
    pub fn label(&self) -> String {
        format!("v{}", self.version)
    }
}

/// Where the runtimes live: `CLRMAP_DOTNET_HOME`, or `.dotnet` in the repository.
pub fn dotnet_home() -> PathBuf {
    std::env::var_os("CLRMAP_DOTNET_HOME").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.dotnet"))
}

/// Every installed runtime, oldest first. A test that asks is `#[ignore = "needs .NET"]`, and a
/// missing list fails it: never skipped-and-passed.
pub fn installed_runtimes() -> Vec<Runtime> {
    let list = dotnet_home().join("runtimes.tsv");
    let text = std::fs::read_to_string(&list).unwrap_or_else(|e| panic!("{}: {e}: run scripts/install-dotnet.sh", list.display()));
    let mut v: Vec<Runtime> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 4, "{}: a bad line {l:?}", list.display());
            let r = Runtime { channel: f[0].to_owned(), version: f[1].to_owned(), dotnet: PathBuf::from(f[2]), framework: PathBuf::from(f[3]) };
            assert!(r.dotnet.is_file(), "{} is missing: run scripts/install-dotnet.sh", r.dotnet.display());
            r
        })
        .collect();
    v.sort_by_key(|r| r.major());
    assert!(!v.is_empty(), "{} lists no runtime: run scripts/install-dotnet.sh", list.display());
    v
}

/// The installed runtime of a channel (`3.1`, `8.0`, `9.0`, `10.0`); a missing one fails the test.
pub fn runtime(channel: &str) -> Runtime {
    installed_runtimes().into_iter().find(|r| r.channel == channel).unwrap_or_else(|| panic!("no .NET {channel} runtime is installed: run scripts/install-dotnet.sh"))
}

/// The runtime of a channel if it is installed (3.1 is kept where a pack can be had).
pub fn runtime_if(channel: &str) -> Option<Runtime> {
    installed_runtimes().into_iter().find(|r| r.channel == channel)
}

/// The runtimes every live test runs on: each installed one of .NET 5 or later (8.0, 9.0, 10.0 on
/// the SDK machine). In CI, 8.0, 9.0 and 10.0 must all be there when the SDK route installed them.
pub fn current_runtimes() -> Vec<Runtime> {
    let v: Vec<Runtime> = installed_runtimes().into_iter().filter(|r| r.major() >= 5).collect();
    if dotnet_home().join(".route-sdk").is_file() {
        for ch in ["8.0", "9.0", "10.0"] {
            assert!(v.iter().any(|r| r.channel == ch), "no .NET {ch} runtime is installed: run scripts/install-dotnet.sh");
        }
    }
    assert!(!v.is_empty(), "no .NET 5+ runtime is installed: run scripts/install-dotnet.sh");
    v
}

/// .NET 11.0.0, laid out by scripts/install-dotnet.sh from its linux-x64 runtime pack as a dotnet
/// root of its own (`11.0/`, the SDK's host), but not in `runtimes.tsv`: only the tests that ask
/// for it by name run on it. A missing one fails the test.
pub fn net11_runtime() -> Runtime {
    let root = dotnet_home().join("11.0");
    let r = Runtime { channel: "11.0".to_owned(), version: "11.0.0".to_owned(), dotnet: root.join("dotnet"), framework: root.join("shared/Microsoft.NETCore.App/11.0.0") };
    assert!(r.dotnet.is_file() && r.framework.join("libcoreclr.so").is_file(), "{}: no .NET 11.0.0 runtime: run scripts/install-dotnet.sh", root.display());
    r
}

/// Every installed runtime a live test runs on: 3.1 (where installed) and the current ones.
pub fn all_runtimes() -> Vec<Runtime> {
    let mut v: Vec<Runtime> = runtime_if("3.1").into_iter().collect();
    v.extend(current_runtimes());
    v
}

//! Shared test support: the repository root, fixtures, and the real .NET runtimes installed by
//! `scripts/install-dotnet.sh`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, at any depth, appended to `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A file under the repository root.
pub fn fixture(rel: &str) -> PathBuf {
    repo_root().join(rel)
}

/// True when running in CI: real-runtime tests are mandatory there.
pub fn in_ci() -> bool {
    std::env::var("CI").map(|v| v == "true" || v == "1").unwrap_or(false)
}

#[path = "../../../../tests/support/runtimes.rs"]
mod runtimes_list;
pub use runtimes_list::*;

/// CoreCLR 3.1 (ReadyToRun 3.1 framework), where one is installed.
pub fn runtime31() -> Option<Runtime> {
    runtime_if("3.1")
}

/// .NET 8 (ReadyToRun 9.x framework).
pub fn runtime80() -> Option<Runtime> {
    runtime_if("8.0")
}

/// Every installed runtime (3.1 where installed; 8.0, 9.0 and 10.0). A test that asks for them is
/// `#[ignore = "needs .NET"]` (plain `cargo test` lists it as ignored; scripts/test.sh runs it),
/// and fails when one is missing: never skipped-and-passed.
pub fn runtimes(_test: &str) -> Vec<Runtime> {
    all_runtimes()
}

/// The `mcs` C# compiler, required like the runtimes.
pub fn mcs(test: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|p| p.join("mcs")).find(|p| p.is_file()));
    found.unwrap_or_else(|| panic!("{test}: mcs is missing: run scripts/install-dotnet.sh"))
}

/// Both runtimes and `mcs`, for a test that compiles its own program: a missing one fails it.
pub fn runtimes_and_mcs(test: &str) -> (Vec<Runtime>, PathBuf) {
    (runtimes(test), mcs(test))
}

/// A file the workspace build writes into target/debug (the profiler library, the `clrmap`
/// binary): a test that needs it fails when it is missing.
pub fn built(file: &str) -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().to_path_buf();
    let path = target.join("debug").join(file);
    assert!(path.is_file(), "{} is missing: run `cargo build --workspace` first", path.display());
    path
}

/// Run a command and return stdout; panic with stderr on failure.
pub fn run(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Compile C# sources with mcs. `refs` are passed as `-r:`; extra args go first.
pub fn mcs_compile(mcs: &Path, out: &Path, args: &[&str], sources: &[PathBuf]) {
    let mut c = std::process::Command::new(mcs);
    c.args(args).arg(format!("-out:{}", out.display())).args(sources);
    run(&mut c);
}

/// The System.Reflection.Metadata oracle (tests/dotnet/srm-oracle), compiled once per test run
/// against the 3.1 framework's own SRM. Its runtimeconfig rolls forward from 3.1.0, so each
/// runtime's host runs it with that runtime's own SRM (a newer framework's metadata may need a
/// newer reader: 3.1's SRM fails on 10.0.12's CoreLib).
pub fn srm_oracle(rt31: &Runtime, mcs: &Path) -> PathBuf {
    static ORACLE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ORACLE
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("srm-oracle");
            std::fs::create_dir_all(&dir).unwrap();
            let dll = dir.join("SrmOracle.dll");
            let fw = &rt31.framework;
            let refs: Vec<String> = [
                "System.Private.CoreLib", "System.Runtime", "System.Reflection.Metadata",
                "System.Collections.Immutable", "System.Console", "System.Collections",
                "System.Runtime.Extensions", "System.IO", "System.IO.FileSystem", "System.Text.Encoding.Extensions",
            ]
            .iter()
            .map(|a| format!("-r:{}", fw.join(format!("{a}.dll")).display()))
            .collect();
            let mut args = vec!["-nostdlib", "-noconfig", "-target:exe", "-nowarn:1702"];
            args.extend(refs.iter().map(String::as_str));
            mcs_compile(mcs, &dll, &args, &[repo_root().join("tests/dotnet/srm-oracle/SrmOracle.cs")]);
            let config = r#"{ "runtimeOptions": { "tfm": "netcoreapp3.1", "rollForward": "LatestMajor", "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.0" }, "configProperties": { "System.Globalization.Invariant": true } } }"#;
            std::fs::write(dir.join("SrmOracle.runtimeconfig.json"), config).unwrap();
            dll
        })
        .clone()
}

//! Running the built `clrmap` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Run `clrmap ARGS` and return its output.
pub fn clrmap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clrmap")).args(args).current_dir(repo_root()).output().unwrap()
}

/// stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The exit code (None if killed by a signal; a panic is 101).
pub fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

#[path = "../../../../tests/support/runtimes.rs"]
mod runtimes_list;
pub use runtimes_list::*;

/// The `dotnet` host of an installed runtime channel (`3.1`, `8.0`, `9.0`, `10.0`).
pub fn host(channel: &str) -> String {
    runtime(channel).dotnet.to_string_lossy().into_owned()
}

/// The ReadyToRun CoreLib of an installed runtime channel.
pub fn corelib(channel: &str) -> String {
    runtime(channel).corelib().to_string_lossy().into_owned()
}

/// A file of the real runtimes installed by scripts/install-dotnet.sh (`CLRMAP_DOTNET_HOME`, or
/// `.dotnet`), e.g. `8.0/dnv/net/runtime/.net/dotnet`. The tests that ask are
/// `#[ignore = "needs .NET"]`, and a missing file fails them.
pub fn dotnet_file(rel: &str) -> String {
    let home = std::env::var("CLRMAP_DOTNET_HOME").map(PathBuf::from).unwrap_or_else(|_| repo_root().join(".dotnet"));
    let p = home.join(rel);
    assert!(p.is_file(), "{} is missing: run scripts/install-dotnet.sh", p.display());
    p.to_string_lossy().into_owned()
}

/// PYTHONPATH for the flame tools' Python readers (scripts/install-flame-tools.sh): the compiled
/// profile.proto in `tools/py`, then Debian's packages (python3-protobuf, python3-jsonschema), so
/// that any python3 on PATH finds them.
pub fn flame_pythonpath(tools: &Path) -> String {
    format!("{}:/usr/lib/python3/dist-packages", tools.join("py").display())
}

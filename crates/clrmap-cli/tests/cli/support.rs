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

/// A test program of `tests/dotnet/DIR/NAME.cs`, built by Roslyn csc against the 3.1 framework
/// (optimized, deterministic, a portable PDB, sources mapped to `/_/src/`) into `out/NAME.dll`,
/// with `runtimeconfig` beside it. `references` are the framework assemblies it uses.
pub fn csc_against_3_1(dir: &str, name: &str, references: &[&str], out: &Path, runtimeconfig: &str) {
    let fw = Path::new(&corelib("3.1")).parent().unwrap().to_path_buf();
    let src = repo_root().join("tests/dotnet").join(dir);
    let mut c = Command::new(dotnet_file("roslyn/csc"));
    c.current_dir(&src).args(["-nologo", "-noconfig", "-nostdlib", "-langversion:7.3", "-deterministic", "-optimize+", "-debug:portable", "-target:exe"]);
    c.arg(format!("-pathmap:{}/=/_/src/", src.display()));
    for a in references {
        c.arg(format!("-r:{}", fw.join(format!("{a}.dll")).display()));
    }
    c.arg(format!("-out:{}", out.join(format!("{name}.dll")).display())).arg(format!("{name}.cs"));
    let o = c.output().unwrap();
    assert!(o.status.success(), "csc: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    std::fs::write(out.join(format!("{name}.runtimeconfig.json")), runtimeconfig).unwrap();
}

/// PYTHONPATH for the flame tools' Python readers (scripts/install-flame-tools.sh): the compiled
/// profile.proto in `tools/py`, then Debian's packages (python3-protobuf, python3-jsonschema), so
/// that any python3 on PATH finds them.
pub fn flame_pythonpath(tools: &Path) -> String {
    format!("{}:/usr/lib/python3/dist-packages", tools.join("py").display())
}

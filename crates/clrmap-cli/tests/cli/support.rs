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

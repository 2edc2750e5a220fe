//! Progress on long work goes to a terminal only: run under a pseudo-terminal (`script`, from
//! util-linux), `flame` and `pdb sources --extract` draw their progress on it; with stderr a pipe,
//! or with `--quiet`, stderr holds not a byte of it.

use std::process::Command;

use crate::support::{clrmap, repo_root};

const TRACE: &str = "tests/fixtures/flame/hot-8.0.4.nettrace";
const SAMPLE: &str = "tests/fixtures/sentry/symbolic/Sentry.Samples.Console.Basic.pdb";

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-progress-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The clrmap command line `args` run with its stdin, stdout and stderr on a new
/// pseudo-terminal; what the terminal showed.
fn on_a_terminal(args: &[&str]) -> String {
    let quoted: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_clrmap")).chain(args.iter().copied()).map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    // util-linux script: -q no banner, -e the command's status, -c the command; the typescript
    // goes nowhere, the terminal's output to our stdout.
    let o = Command::new("script").args(["-qec", &quoted.join(" "), "/dev/null"]).current_dir(repo_root()).env("TERM", "xterm").output().expect("script (util-linux) must be installed");
    assert!(o.status.success(), "{:?}: {}", o.status, String::from_utf8_lossy(&o.stdout));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn progress_is_drawn_on_a_terminal_and_never_on_a_pipe() {
    let dir = tmp("flame");
    let out = dir.join("flame.txt");
    let flame = ["flame", TRACE, "--symbol-path", "tests/fixtures/perf", "-o", out.to_str().unwrap()];
    let shown = on_a_terminal(&flame);
    assert!(shown.contains("sampling stacks"), "no progress on the terminal: {shown:?}");
    assert!(std::fs::read_to_string(&out).unwrap().lines().count() > 0);

    // Stderr a pipe: the same command, not a byte of progress.
    let o = clrmap(&flame);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("sampling stacks") && !err.contains('\r') && !err.contains('\u{1b}'), "{err:?}");

    // --quiet on a terminal: none either.
    let quiet: Vec<&str> = flame.iter().copied().chain(["--quiet"]).collect();
    let shown = on_a_terminal(&quiet);
    assert!(!shown.contains("sampling stacks") && !shown.contains('\u{1b}'), "{shown:?}");

    // pdb sources --extract counts the documents it writes.
    let extracted = dir.join("src");
    let sources = ["pdb", "sources", SAMPLE, "--extract", extracted.to_str().unwrap()];
    let shown = on_a_terminal(&sources);
    assert!(shown.contains("extracting sources"), "{shown:?}");
    let o = clrmap(&sources);
    assert!(o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("extracting"));
    let _ = std::fs::remove_dir_all(&dir);
}

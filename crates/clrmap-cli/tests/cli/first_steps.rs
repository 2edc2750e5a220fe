//! What a new user meets first, said in their terms: a `trace collect` with nothing to trace, a
//! `flame` given a file that is no trace, a `profile` whose .NET host could not start the app,
//! and the symbol options every command that reads PDBs shares.

use crate::support::*;

#[test]
fn trace_collect_with_nothing_to_trace_names_both_ways() {
    let out = std::env::temp_dir().join(format!("clrmap-first-steps-{}.nettrace", std::process::id()));
    let o = clrmap(&["trace", "collect", "-o", out.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(code(&o), Some(2), "{err}");
    assert!(err.contains("--pid PID") && err.contains("-- COMMAND"), "{err}");
    // The usage shows both forms, not `--pid` as if it were always required.
    let usage = err.lines().find(|l| l.starts_with("Usage:")).unwrap_or_default();
    assert!(!usage.contains("--pid <PID> [-- <COMMAND>...]"), "{err}");
    assert!(err.contains("clrmap trace collect [OPTIONS] -o FILE --pid PID") && err.contains("clrmap trace collect [OPTIONS] -o FILE -- COMMAND..."), "{err}");
    assert!(!out.exists(), "nothing is written");
    // Both at once is still a conflict, and either alone parses (`--help` proves the usage).
    let o = clrmap(&["trace", "collect", "-o", out.to_str().unwrap(), "--pid", "1", "--", "true"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    let o = clrmap(&["trace", "collect", "--help"]);
    assert!(stdout(&o).contains("Usage: clrmap trace collect [OPTIONS] -o FILE --pid PID"), "{}", stdout(&o));
}

/// `clrmap flame FILE` with a file of another kind: status 1, `unrecognized_source`, naming what
/// the file is and what flame reads.
fn flame_refuses(file: &str, what: &str) {
    let o = clrmap(&["flame", file]);
    let err = stderr(&o);
    assert_eq!(code(&o), Some(1), "{file}: {err}");
    assert!(err.starts_with("error: unrecognized_source: "), "{file}: {err}");
    assert!(err.contains(what), "{file}: {err}");
    assert!(err.contains("flame reads a trace: an EventPipe .nettrace") && err.contains("clrmap trace collect --cpu"), "{file}: {err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn flame_given_an_assembly_or_a_pdb_asks_for_a_trace() {
    // An IL-only assembly (before: bad_ready_to_run), a ReadyToRun image (before: bad_trace) and
    // a portable PDB (before: the sources flame does not take).
    flame_refuses("tests/fixtures/frames/debug-portable/Frames.dll", "a PE file");
    flame_refuses("tests/fixtures/r2r/Frames.dll", "a PE file");
    flame_refuses("tests/fixtures/frames/debug-portable/Frames.pdb", "a portable PDB");
    // A trace still reads.
    let o = clrmap(&["flame", "tests/fixtures/flame/hot-8.0.4.nettrace"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(!o.stdout.is_empty());
}

#[test]
fn commands_that_read_pdbs_share_the_symbol_options() {
    let commands: [&[&str]; 10] =
        [&["symbolize"], &["il", "at"], &["il", "vars"], &["pdb", "lines"], &["pdb", "sources"], &["perf", "jitdump"], &["perf", "map"], &["stacktrace"], &["serve"], &["flame"]];
    for command in commands {
        let mut args = command.to_vec();
        args.push("--help");
        let o = clrmap(&args);
        assert_eq!(code(&o), Some(0), "{command:?}");
        let help = stdout(&o);
        for flag in ["--symbol-path <DIR>", "--symbol-server <URL>", "--cache <DIR>", "--symbol-timeout <DURATION>"] {
            assert_eq!(help.matches(flag).count(), 1, "{command:?} --help: {flag}\n{help}");
        }
    }
    // The two whose directories mean more keep saying so.
    let o = clrmap(&["stacktrace", "--help"]);
    assert!(stdout(&o).contains("the module's assembly (`DIR/Shop.dll`"), "{}", stdout(&o));
    let o = clrmap(&["serve", "--help"]);
    assert!(stdout(&o).contains("A directory to look for PDBs and assemblies in"), "{}", stdout(&o));
}

#[test]
#[ignore = "needs .NET"]
fn profile_of_a_missing_app_says_the_host_could_not_start_it() {
    let dotnet = host("8.0");
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    let dir = std::env::temp_dir().join(format!("clrmap-first-steps-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cap = dir.join("x.capture");
    let missing = dir.join("Missing.dll");
    let o = clrmap(&["profile", "-o", cap.to_str().unwrap(), "--profiler", so.to_str().unwrap(), "--", &dotnet, missing.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(code(&o), Some(3), "{err}");
    // The host's own status for it, as the host itself gives it.
    assert!(err.contains("exited with 145"), "{err}");
    assert!(err.contains(&format!("the .NET host could not start the app: {} does not exist", missing.display())), "{err}");
    assert!(!err.contains("is the command a .NET app?"), "{err}");
    // Host options before the app (each takes a value) do not hide it.
    let o = clrmap(&["profile", "-o", cap.to_str().unwrap(), "--profiler", so.to_str().unwrap(), "--", &dotnet, "--roll-forward", "Major", missing.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(code(&o), Some(3), "{err}");
    assert!(err.contains(&format!("the .NET host could not start the app: {} does not exist", missing.display())), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

//! `clrmap profile` passes the child's status through like a shell, and has its own status when
//! the profiler did not load. Needs the .NET 8.0.4 runtime (mandatory in CI) and the
//! profiler built by `cargo build --workspace`.

use std::path::PathBuf;

use crate::support::*;

fn dotnet80() -> Option<PathBuf> {
    Some(PathBuf::from(host("8.0")))
}

fn profiler() -> String {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    so.to_string_lossy().into_owned()
}

#[test]
#[ignore = "needs .NET"]
fn the_profiler_not_loading_has_its_own_status_and_signals_read_as_a_shell_reads_them() {
    let Some(dotnet) = dotnet80() else { return };
    let dir = std::env::temp_dir().join("clrmap-profile-status");
    std::fs::create_dir_all(&dir).unwrap();
    let cap = dir.join("x.capture");
    let cap = cap.to_str().unwrap();
    let so = profiler();
    // Not a .NET program: the child succeeds, but nothing was captured.
    let o = clrmap(&["profile", "-o", cap, "--profiler", &so, "--", "true"]);
    assert_eq!(code(&o), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("the profiler did not load"), "{}", stderr(&o));
    // A .NET program whose shell is then killed by SIGTERM: 128 + 15, as a shell says.
    let frames = repo_root().join("tests/fixtures/frames/release-portable/Frames.dll");
    let script = format!("'{}' '{}' >/dev/null; kill -TERM $$", dotnet.display(), frames.display());
    let o = clrmap(&["profile", "-o", cap, "--profiler", &so, "--", "sh", "-c", &script]);
    assert_eq!(code(&o), Some(143), "{}", stderr(&o));
    assert!(std::fs::read_to_string(cap).unwrap().starts_with("{\"format\":\"clrmap-capture\""));
    // A normal exit code passes through.
    let o = clrmap(&["profile", "-o", cap, "--profiler", &so, "--", "sh", "-c", &format!("'{}' '{}' >/dev/null; exit 7", dotnet.display(), frames.display())]);
    assert_eq!(code(&o), Some(7), "{}", stderr(&o));
    // Perf only (no capture): the jitdump proves the load, also when a shell starts dotnet as its
    // child (another pid); a command that is not .NET writes none.
    let perf_dir = dir.join("perf-only");
    let _ = std::fs::remove_dir_all(&perf_dir);
    std::fs::create_dir_all(&perf_dir).unwrap();
    let perf_arg = format!("--perf={}", perf_dir.display());
    let o = clrmap(&["profile", &perf_arg, "--profiler", &so, "--", "true"]);
    assert_eq!(code(&o), Some(3), "{}", stderr(&o));
    let o = clrmap(&["profile", &perf_arg, "--profiler", &so, "--", "sh", "-c", &format!("'{}' '{}' >/dev/null; exit 5", dotnet.display(), frames.display())]);
    assert_eq!(code(&o), Some(5), "{}", stderr(&o));
}

#[test]
#[ignore = "needs .NET"]
fn an_installed_clrmap_finds_its_profiler_without_flags() {
    // What the README's install step gives: clrmap and libclrmap_profiler.so side by side.
    let Some(dotnet) = dotnet80() else { return };
    let bin = std::env::temp_dir().join("clrmap-installed/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_clrmap"), bin.join("clrmap")).unwrap();
    std::fs::copy(profiler(), bin.join("libclrmap_profiler.so")).unwrap();
    let cap = bin.join("../app.capture");
    let frames = repo_root().join("tests/fixtures/frames/release-portable/Frames.dll");
    let o = std::process::Command::new(bin.join("clrmap")).args(["profile", "-o", cap.to_str().unwrap(), "--"]).arg(&dotnet).arg(&frames).env_remove("CLRMAP_PROFILER_PATH").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read_to_string(&cap).unwrap().starts_with("{\"format\":\"clrmap-capture\""));
}

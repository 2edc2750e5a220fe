//! `clrmap profile --perf`: the profiler writes `jit-PID.dump` and `perf-PID.map` at names anyone
//! can predict (in /tmp by default). What is planted there (a symbolic link, a dangling link, a
//! hard link, a FIFO) is never written through; the app runs on as without the profiler, the
//! profiler says why on stderr, and `clrmap profile` exits 3 (no perf files written).
//!
//! The pid is predicted by running the app as `sh -c 'PLANT; exec dotnet Hot.dll 0'`: the shell
//! plants at `$$`, and `exec` keeps that pid for the app. Real runtimes (3.1.23 and 8.0.4) and the
//! built profiler: `#[ignore = "needs .NET"]`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::support::{host, repo_root};

/// What Hot.dll prints when asked to run for 0 seconds (tests/dotnet/perf/Hot.cs: no round, both
/// accumulators 0).
const HOT_ZERO: &str = "rounds 0 0 0\n";
const VICTIM: &[u8] = b"a file the profiler must never write\n";

fn dotnet(version: &str) -> String {
    host(version)
}

fn profiler() -> PathBuf {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    so
}

fn fresh(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `clrmap profile --perf=DIR -- sh -c 'PLANT; echo $$ > PIDFILE; exec DOTNET Hot.dll 0'` under a
/// 30 s `timeout` (which kills the whole process group, the app included). `$D` in `plant` is DIR.
/// Gives the output and the app's pid.
fn run(version: &str, dir: &Path, plant: &str) -> (Output, u32) {
    let pid_file = dir.with_extension("pid");
    let _ = std::fs::remove_file(&pid_file);
    let script = format!("set -e; D='{}'; {plant}\necho $$ > '{}'; exec '{}' '{}' 0", dir.display(), pid_file.display(), dotnet(version), repo_root().join("tests/fixtures/perf/Hot.dll").display());
    let o = Command::new("timeout")
        .arg("30")
        .arg(env!("CARGO_BIN_EXE_clrmap"))
        .arg("profile")
        .arg(format!("--perf={}", dir.display()))
        .arg("--profiler")
        .arg(profiler())
        .args(["--", "sh", "-c", &script])
        .env_remove("DOTNET_PerfMapEnabled")
        .env_remove("COMPlus_PerfMapEnabled")
        .output()
        .unwrap();
    let pid = std::fs::read_to_string(&pid_file).unwrap_or_else(|_| panic!("{version}: the shell never ran: {}", String::from_utf8_lossy(&o.stderr)));
    (o, pid.trim().parse().unwrap())
}

fn victim(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, VICTIM).unwrap();
    p
}

/// The app ran as without the profiler; the profiler refused (saying `why`); exit 3.
fn assert_refused(version: &str, what: &str, o: &Output, why: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{version} {what}: {:?}, stderr {err}", o.status);
    assert_eq!(String::from_utf8_lossy(&o.stdout), HOT_ZERO, "{version} {what}: stderr {err}");
    assert!(err.contains("clrmap-profiler: cannot start the perf jitdump") && err.contains(why), "{version} {what}: {err}");
    assert!(err.contains("the profiler did not load (no jit-PID.dump written in"), "{version} {what}: {err}");
}

fn planted_files_are_never_written_through(version: &str) {
    let root = fresh(&format!("perf-links-{version}"));
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let dir = root.join("perf");

    // Without anything planted: the app's output and exit status, and the files at the shell's pid
    // (the prediction holds).
    std::fs::create_dir_all(&dir).unwrap();
    let (o, pid) = run(version, &dir, "");
    assert_eq!(o.status.code(), Some(0), "{version}: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), HOT_ZERO);
    let dump = std::fs::read(dir.join(format!("jit-{pid}.dump"))).unwrap();
    // The jitdump magic 0x4A695444, written in the host's byte order (little-endian here).
    assert_eq!(&dump[..4], b"DTiJ", "{version}");
    assert!(std::fs::symlink_metadata(dir.join(format!("perf-{pid}.map"))).unwrap().is_file());

    // Symbolic links at both names, to files of this user: neither target changes.
    let cases: [(&str, &str, &str); 6] = [
        ("links at both", "ln -s \"$OUT/victim-dump\" \"$D/jit-$$.dump\"; ln -s \"$OUT/victim-map\" \"$D/perf-$$.map\"", "a symbolic link is there (not followed)"),
        ("a link at the map only", "ln -s \"$OUT/victim-map\" \"$D/perf-$$.map\"", "a symbolic link is there (not followed)"),
        ("a dangling link at the dump", "ln -s \"$OUT/created-dump\" \"$D/jit-$$.dump\"", "a symbolic link is there (not followed)"),
        ("a hard link at the dump", "ln \"$OUT/victim-dump\" \"$D/jit-$$.dump\"", "the file there has other hard links"),
        ("a FIFO at the map", "mkfifo \"$D/perf-$$.map\"", "not a regular file"),
        ("a FIFO at the dump", "mkfifo \"$D/jit-$$.dump\"", "not a regular file"),
    ];
    for (what, plant, why) in cases {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let _ = std::fs::remove_file(elsewhere.join("created-dump"));
        let dump_victim = victim(&elsewhere, "victim-dump");
        let map_victim = victim(&elsewhere, "victim-map");
        let plant = format!("OUT='{}'; {plant}", elsewhere.display());
        let t = std::time::Instant::now();
        let (o, pid) = run(version, &dir, &plant);
        assert!(t.elapsed() < std::time::Duration::from_secs(25), "{version} {what}: {:?}", t.elapsed());
        assert_eq!(std::fs::read(&dump_victim).unwrap(), VICTIM, "{version} {what}: the dump's victim was written");
        assert_eq!(std::fs::read(&map_victim).unwrap(), VICTIM, "{version} {what}: the map's victim was written");
        assert!(!elsewhere.join("created-dump").exists(), "{version} {what}: a dangling link's target was created");
        assert_refused(version, what, &o, why);
        // No jitdump is left to say the perf files were written (none made, or removed).
        let left = std::fs::symlink_metadata(dir.join(format!("jit-{pid}.dump")));
        assert!(left.is_err() || !left.unwrap().is_file() || what == "a hard link at the dump", "{version} {what}: a jitdump is left");
    }

    // A stale regular file of this user at the name (an earlier process with the same pid) is
    // emptied and reused.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (o, pid) = run(version, &dir, "printf 'stale contents' > \"$D/jit-$$.dump\"; printf stale > \"$D/perf-$$.map\"");
    assert_eq!(o.status.code(), Some(0), "{version}: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), HOT_ZERO);
    let dump = std::fs::read(dir.join(format!("jit-{pid}.dump"))).unwrap();
    assert_eq!(&dump[..4], b"DTiJ", "{version}: the stale jitdump was not rewritten");
    assert!(!std::fs::read_to_string(dir.join(format!("perf-{pid}.map"))).unwrap().contains("stale"));
}

#[test]
#[ignore = "needs .NET"]
fn planted_perf_files_are_never_written_through_net80() {
    planted_files_are_never_written_through("8.0");
}

#[test]
#[ignore = "needs .NET"]
fn planted_perf_files_are_never_written_through_net100() {
    planted_files_are_never_written_through("10.0");
}

#[test]
#[ignore = "needs .NET"]
fn planted_perf_files_are_never_written_through_netcore31() {
    planted_files_are_never_written_through("3.1");
}

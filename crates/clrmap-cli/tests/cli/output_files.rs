//! Files clrmap writes, and paths a profiled process can plant: `trace collect -o` and
//! `perf jitdump`/`perf map` write a new file and replace the output only on success, never
//! through a link or a FIFO; `profile --pid` reads the capture and writes its stop file without
//! following links or blocking. Every run has a time limit and must end with an exit status.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// A fresh directory of this test's own.
fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("output-files-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The names in `d` other than `keep` (a temporary file left behind shows here).
fn others(d: &Path, keep: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| !keep.contains(&n.as_str())).collect();
    v.sort();
    v
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

/// Wait for `child` at most `limit`; a child still running then is killed and the test fails.
fn finish(mut child: Child, limit: Duration, what: &str) -> Output {
    let t = Instant::now();
    while t.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let o = child.wait_with_output().unwrap();
    panic!("{what}: still running after {limit:?} (killed); stderr: {}", String::from_utf8_lossy(&o.stderr));
}

/// Run `clrmap ARGS` under a memory limit of 256 MB and a time limit, its output piped.
fn limited(args: &[&str], limit: Duration) -> Output {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!("ulimit -v {}; exec '{}' {}", (256 << 20) / 1024, env!("CARGO_BIN_EXE_clrmap"), quoted.join(" "));
    let child = Command::new("sh").arg("-c").arg(&script).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let o = finish(child, limit, &format!("{args:?}"));
    assert!(o.status.code().is_some(), "{args:?}: ended by a signal: {:?}; stderr: {}", o.status, stderr(&o));
    o
}

/// A fake diagnostics server for a live `sleep` process: its socket sits where clrmap looks for
/// that pid's (`dotnet-diagnostic-PID-KEY-socket` in the process's `$TMPDIR`). Each connection
/// gets `reply` after the request, then is held open for `hold`.
struct Fake {
    sleeper: Child,
}

impl Fake {
    fn start(d: &Path, reply: Vec<u8>, hold: Duration) -> Fake {
        let sleeper = Command::new("sleep").arg("60").env("TMPDIR", d).spawn().unwrap();
        // Until its exec is through, /proc shows no TMPDIR for it (where clrmap looks).
        let environ = format!("/proc/{}/environ", sleeper.id());
        let t = Instant::now();
        while !std::fs::read(&environ).is_ok_and(|e| e.windows(7).any(|w| w == b"TMPDIR=")) {
            assert!(t.elapsed() < Duration::from_secs(10), "sleep never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
        let key = clrmap::diag::start_key(sleeper.id()).unwrap();
        let path = d.join(format!("dotnet-diagnostic-{}-{key}-socket", sleeper.id()));
        let listener = UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { return };
                let reply = reply.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
                    let _ = s.read(&mut buf);
                    let _ = s.write_all(&reply);
                    std::thread::sleep(hold);
                });
            }
        });
        Fake { sleeper }
    }

    fn pid(&self) -> String {
        self.sleeper.id().to_string()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.sleeper.kill();
        let _ = self.sleeper.wait();
    }
}

/// An IPC message: the 20-byte header (magic, size, command set, command, reserved), then
/// `payload`.
fn ipc(set: u8, command: u8, payload: &[u8]) -> Vec<u8> {
    let mut m = b"DOTNET_IPC_V1\0".to_vec();
    m.extend_from_slice(&u16::try_from(20 + payload.len()).unwrap().to_le_bytes());
    m.extend_from_slice(&[set, command, 0, 0]);
    m.extend_from_slice(payload);
    m
}

const SOCKET_FILE: &str = "dotnet-diagnostic-";

/// Names in `d` that are neither the fake's socket nor in `keep`.
fn strays(d: &Path, keep: &[&str]) -> Vec<String> {
    others(d, keep).into_iter().filter(|n| !n.starts_with(SOCKET_FILE)).collect()
}

#[test]
fn a_session_that_fails_leaves_an_existing_output_as_it_was() {
    // Each way a session can fail before its first whole block: a reply that is not the
    // protocol, the runtime's refusal (an error reply with an HRESULT), and silence.
    let cases: [(&str, Vec<u8>, Duration, &str); 3] = [
        ("garbage", b"\x00\x01garbage, not DOTNET_IPC_V1".to_vec(), Duration::ZERO, "protocol"),
        ("refused", ipc(0xFF, 0xFF, &0x8013_1384u32.to_le_bytes()), Duration::ZERO, "server_error"),
        ("silent", Vec::new(), Duration::from_secs(8), "timeout"),
    ];
    for (name, reply, hold, kind) in cases {
        let d = dir(&format!("failed-{name}"));
        let fake = Fake::start(&d, reply, hold);
        let out = d.join("app.nettrace");
        std::fs::write(&out, b"an earlier trace").unwrap();
        // The output a symbolic link to a file: not written through either.
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let link = d.join("link.nettrace");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        for o in [&out, &link] {
            let r = limited(&["trace", "collect", "--pid", &fake.pid(), "-o", o.to_str().unwrap(), "--timeout", "1s"], Duration::from_secs(20));
            assert_eq!(code(&r), Some(8), "{name}: {}", stderr(&r));
            assert!(stderr(&r).contains(kind), "{name}: {}", stderr(&r));
        }
        assert!(std::fs::read(&out).unwrap() == b"an earlier trace", "{name}: the output was emptied or overwritten");
        assert!(std::fs::read(&victim).unwrap() == b"precious", "{name}: written through the link");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(strays(&d, &["app.nettrace", "victim", "link.nettrace"]), Vec::<String>::new(), "{name}: a temporary file left behind");
    }
}

#[test]
fn a_fifo_or_directory_output_is_refused_at_once_not_opened() {
    // A FIFO with no reader blocks an open for writing until someone reads it.
    let d = dir("fifo");
    let fake = Fake::start(&d, b"\x00\x01garbage".to_vec(), Duration::ZERO);
    let fifo = d.join("out.nettrace");
    mkfifo(&fifo);
    let t = Instant::now();
    let r = limited(&["trace", "collect", "--pid", &fake.pid(), "-o", fifo.to_str().unwrap()], Duration::from_secs(15));
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
    assert_eq!(code(&r), Some(1), "{}", stderr(&r));
    let err = stderr(&r);
    assert!(err.contains(&format!("cannot write {}: not a regular file", fifo.display())), "{err}");
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&std::fs::symlink_metadata(&fifo).unwrap().file_type()));
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let r = limited(&["trace", "collect", "--pid", &fake.pid(), "-o", sub.to_str().unwrap()], Duration::from_secs(15));
    assert_eq!(code(&r), Some(1), "{}", stderr(&r));
    assert!(stderr(&r).contains(&format!("cannot write {}", sub.display())), "{}", stderr(&r));
    assert_eq!(strays(&d, &["out.nettrace", "sub"]), Vec::<String>::new());
}

#[test]
fn a_stream_with_whole_blocks_replaces_the_output_and_the_link_is_not_followed() {
    // A session whose stream is a whole trace (a real one, collected from Frames) that then
    // closes: the output becomes that trace, byte for byte.
    let d = dir("whole");
    let trace = std::fs::read(repo_root().join("examples/frames.nettrace")).unwrap();
    let mut reply = ipc(0xFF, 0x00, &7u64.to_le_bytes());
    reply.extend_from_slice(&trace);
    let fake = Fake::start(&d, reply, Duration::ZERO);
    let victim = d.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let out = d.join("out.nettrace");
    std::os::unix::fs::symlink(&victim, &out).unwrap();
    let r = limited(&["trace", "collect", "--pid", &fake.pid(), "-o", out.to_str().unwrap(), "--timeout", "2s"], Duration::from_secs(20));
    assert!(!matches!(code(&r), Some(0 | 101)), "the stream ended before the stop: {}", stderr(&r));
    assert!(stderr(&r).contains(&format!("wrote {}", out.display())), "{}", stderr(&r));
    assert!(std::fs::symlink_metadata(&out).unwrap().is_file(), "the link was written through");
    assert!(std::fs::read(&out).unwrap() == trace, "not the trace sent");
    assert!(std::fs::read(&victim).unwrap() == b"precious", "written through the link");
    assert_eq!(strays(&d, &["out.nettrace", "victim"]), Vec::<String>::new());
}

#[test]
fn a_third_signal_exits_at_once_and_leaves_no_temporary_file() {
    // The third Ctrl-C exits from the signal handler (no unwinding, so no destructor runs): the
    // unfinished trace is removed there. Whichever comes first, the exit or the second signal's
    // orderly end, the output is either as it was or a whole trace, and nothing else is left.
    use clrmap::diag::fake::{Behavior, FakeServer};
    let d = dir("third-signal");
    let sleeper = Fake::start(&d, Vec::new(), Duration::ZERO);
    let key = clrmap::diag::start_key(sleeper.sleeper.id()).unwrap();
    let socket = d.join(format!("dotnet-diagnostic-{}-{key}-socket", sleeper.sleeper.id()));
    let _ = std::fs::remove_file(&socket);
    let _server = FakeServer::start(&socket, Behavior::EndlessStream).unwrap();
    let out = d.join("out.nettrace");
    std::fs::write(&out, b"an earlier trace").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_clrmap"))
        .args(["trace", "collect", "--pid", &sleeper.pid(), "-o", out.to_str().unwrap(), "--timeout", "60s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Streaming: the temporary file grows. Then Ctrl-C, and 50 ms later SIGTERM and SIGHUP at
    // once (signals of different kinds do not merge while pending; the second and third come
    // before the session can end in order).
    let t = Instant::now();
    while strays(&d, &["out.nettrace"]).is_empty() || std::fs::metadata(d.join(&strays(&d, &["out.nettrace"])[0])).map_or(true, |m| m.len() == 0) {
        assert!(t.elapsed() < Duration::from_secs(10), "no temporary file: {:?}", others(&d, &[]));
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = child.id().to_string();
    assert!(Command::new("sh").arg("-c").arg(format!("kill -INT {pid}; sleep 0.05; kill -TERM {pid}; kill -HUP {pid}")).status().unwrap().success());
    let o = finish(child, Duration::from_secs(10), "three signals");
    assert_eq!(code(&o), Some(130), "{}", stderr(&o));
    let now = std::fs::read(&out).unwrap();
    assert!(now == b"an earlier trace" || clrmap::nettrace::read_code_bodies(&now[..]).is_ok(), "the output is neither the old file nor a whole trace");
    assert_eq!(strays(&d, &["out.nettrace"]), Vec::<String>::new(), "the temporary file was left behind");
}

#[test]
fn perf_files_never_write_through_a_planted_temporary_name_and_clean_up_on_failure() {
    let d = dir("perf");
    let trace = repo_root().join("examples/frames.nettrace");
    let trace = trace.to_str().unwrap();
    let victim = d.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    // The name the old code always wrote to, planted as a link to the victim.
    let out = d.join("perf-1.map");
    std::os::unix::fs::symlink(&victim, d.join(".perf-1.map.clrmap-tmp")).unwrap();
    let r = limited(&["perf", "map", trace, "-o", out.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(code(&r), Some(0), "{}", stderr(&r));
    assert!(std::fs::read(&victim).unwrap() == b"precious", "written through the planted link");
    assert!(std::fs::symlink_metadata(&out).unwrap().is_file(), "the output is not a regular file");
    assert!(std::fs::read_to_string(&out).unwrap().lines().count() > 10);
    // Same for jitdump.
    let dump = d.join("jit-1.dump");
    std::os::unix::fs::symlink(&victim, d.join(".jit-1.dump.clrmap-tmp")).unwrap();
    let r = limited(&["perf", "jitdump", trace, "-o", dump.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(code(&r), Some(0), "{}", stderr(&r));
    assert!(std::fs::read(&victim).unwrap() == b"precious", "written through the link");
    assert!(std::fs::read(&dump).unwrap().starts_with(b"DTiJ"));
    // An output that cannot be replaced (a directory): the error names it, and nothing is left.
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let r = limited(&["perf", "map", trace, "-o", sub.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(code(&r), Some(1), "{}", stderr(&r));
    assert!(stderr(&r).contains(&format!("cannot write {}", sub.display())), "{}", stderr(&r));
    assert_eq!(others(&d, &["victim", "perf-1.map", ".perf-1.map.clrmap-tmp", "jit-1.dump", ".jit-1.dump.clrmap-tmp", "sub"]), Vec::<String>::new(), "a temporary file left behind");
}

// ---- With a real runtime: every installed one. ----

/// The version and `dotnet` host of every installed runtime.
fn hosts() -> Vec<(String, String)> {
    all_runtimes().into_iter().map(|r| (r.version.clone(), r.dotnet.to_string_lossy().into_owned())).collect()
}

/// Hot.dll (a fixture that rolls forward to either runtime) running for `seconds`, once its
/// diagnostics socket is up; killed when dropped.
struct Target(Child);

impl Target {
    fn start(dotnet: &str, seconds: u32) -> Target {
        let mut c = Command::new(dotnet);
        c.arg(repo_root().join("tests/fixtures/perf/Hot.dll")).arg(seconds.to_string()).stdout(Stdio::null());
        for v in ["COMPlus_EnableEventPipe", "DOTNET_EnableEventPipe", "DOTNET_EnableDiagnostics", "COMPlus_EnableDiagnostics", "CORECLR_ENABLE_PROFILING"] {
            c.env_remove(v);
        }
        let t = Target(c.spawn().unwrap());
        let start = Instant::now();
        while clrmap::diag::socket_path(t.0.id()).is_err() {
            assert!(start.elapsed() < Duration::from_secs(20), "{dotnet}: no diagnostics socket");
            std::thread::sleep(Duration::from_millis(50));
        }
        t
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn profiler() -> String {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    so.to_string_lossy().into_owned()
}

#[test]
#[ignore = "needs .NET"]
fn trace_collect_replaces_an_existing_output_with_the_whole_trace_on_both_runtimes() {
    for (version, dotnet) in hosts() {
        let d = dir(&format!("collect-{version}"));
        let target = Target::start(&dotnet, 30);
        let out = d.join("app.nettrace");
        std::fs::write(&out, b"an earlier trace").unwrap();
        let r = limited(&["trace", "collect", "--pid", &target.pid(), "-o", out.to_str().unwrap(), "--duration", "1500ms"], Duration::from_secs(60));
        assert_eq!(code(&r), Some(0), "{version}: {}", stderr(&r));
        let bytes = std::fs::read(&out).unwrap();
        let bodies = clrmap::nettrace::read_code_bodies(&bytes[..]).unwrap_or_else(|e| panic!("{version}: not a whole trace: {e}"));
        assert!(bodies.iter().any(|b| b.name.as_deref() == Some("Hot::OwnLoop")), "{version}: no Hot::OwnLoop in the rundown");
        assert_eq!(strays(&d, &["app.nettrace"]), Vec::<String>::new(), "{version}: a temporary file left behind");
    }
}

/// Start `profile --pid` on a fresh target, wait for the profiler's header in CAPTURE, let
/// `plant` do what a hostile target would, and return the run's output (memory and time limits).
fn profile_with(version: &str, dotnet: &str, d: &Path, duration: &str, plant: impl FnOnce(&Path)) -> Output {
    let target = Target::start(dotnet, 60);
    let capture = d.join("app.capture");
    let quoted = |s: &str| format!("'{s}'");
    let so = profiler();
    let script = format!(
        "ulimit -v {}; exec {} profile --pid {} -o {} --duration {duration} --profiler {}",
        (256 << 20) / 1024,
        quoted(env!("CARGO_BIN_EXE_clrmap")),
        target.pid(),
        quoted(capture.to_str().unwrap()),
        quoted(&so)
    );
    let mut child = Command::new("sh").arg("-c").arg(&script).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    while !std::fs::read(&capture).is_ok_and(|b| b.starts_with(b"{\"format\":\"clrmap-capture\"") && b.contains(&b'\n')) {
        if child.try_wait().unwrap().is_some() {
            let o = child.wait_with_output().unwrap();
            panic!("{version}: profile --pid ended before the profiler's header: {:?} {}", o.status, stderr(&o));
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{version}: the profiler wrote no header");
        std::thread::sleep(Duration::from_millis(20));
    }
    plant(&capture);
    let o = finish(child, Duration::from_secs(60), &format!("{version}: profile --pid"));
    assert!(o.status.code().is_some(), "{version}: ended by a signal: {:?}; stderr: {}", o.status, stderr(&o));
    drop(target);
    o
}

fn stop_file(capture: &Path) -> PathBuf {
    let mut s = capture.as_os_str().to_owned();
    s.push(".stop");
    PathBuf::from(s)
}

#[test]
#[ignore = "needs .NET"]
fn profile_pid_does_not_block_on_a_fifo_planted_at_the_capture_on_both_runtimes() {
    // Opening a FIFO with no writer for reading blocks for ever, and SIGTERM only sets a flag.
    for (version, dotnet) in hosts() {
        let d = dir(&format!("plant-fifo-{version}"));
        let o = profile_with(&version, &dotnet, &d, "2s", |cap| {
            std::fs::remove_file(cap).unwrap();
            mkfifo(cap);
        });
        assert_eq!(code(&o), Some(1), "{version}: {}", stderr(&o));
        assert!(stderr(&o).contains("not a regular file"), "{version}: {}", stderr(&o));
        assert!(!stderr(&o).contains("wrote"), "{version}: {}", stderr(&o));
    }
}

#[test]
#[ignore = "needs .NET"]
fn profile_pid_does_not_follow_a_link_to_dev_zero_planted_at_the_capture_on_both_runtimes() {
    // Read through the link, /dev/zero never ends: memory runs out (under the test's limit).
    for (version, dotnet) in hosts() {
        let d = dir(&format!("plant-zero-{version}"));
        let o = profile_with(&version, &dotnet, &d, "2s", |cap| {
            std::fs::remove_file(cap).unwrap();
            std::os::unix::fs::symlink("/dev/zero", cap).unwrap();
        });
        assert_eq!(code(&o), Some(1), "{version}: {}", stderr(&o));
        assert!(stderr(&o).contains("a symbolic link"), "{version}: {}", stderr(&o));
    }
}

#[test]
#[ignore = "needs .NET"]
fn profile_pid_does_not_open_a_fifo_planted_at_the_stop_file_on_both_runtimes() {
    // Opening a FIFO with no reader for writing blocks. The profiler only looks whether
    // something is at the name, so it detaches all the same.
    for (version, dotnet) in hosts() {
        let d = dir(&format!("plant-stop-fifo-{version}"));
        let o = profile_with(&version, &dotnet, &d, "2s", |cap| mkfifo(&stop_file(cap)));
        assert_eq!(code(&o), Some(0), "{version}: {}", stderr(&o));
        assert!(stderr(&o).contains("detached; wrote"), "{version}: {}", stderr(&o));
    }
}

#[test]
#[ignore = "needs .NET"]
fn profile_pid_does_not_write_through_a_link_planted_at_the_stop_file_on_both_runtimes() {
    for (version, dotnet) in hosts() {
        let d = dir(&format!("plant-stop-link-{version}"));
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let o = profile_with(&version, &dotnet, &d, "2s", |cap| std::os::unix::fs::symlink(&victim, stop_file(cap)).unwrap());
        assert_eq!(code(&o), Some(0), "{version}: {}", stderr(&o));
        assert!(std::fs::read(&victim).unwrap() == b"precious", "{version}: the user's file was truncated through the link");
        let c = clrmap::capture::read_capture(&std::fs::read(d.join("app.capture")).unwrap()).unwrap();
        assert_eq!(c.ended.len(), 1, "{version}: the profiler detached");
    }
}

#[test]
#[ignore = "needs .NET"]
fn profile_pid_says_one_true_thing_when_the_capture_is_gone_on_both_runtimes() {
    // The target removes the capture: the profiler's end record goes to a file no one can see,
    // so clrmap waits its 20 s for it and ends with a timeout, saying there is no capture (the
    // old code also said "detached; wrote" the missing file).
    for (version, dotnet) in hosts() {
        let d = dir(&format!("gone-{version}"));
        let o = profile_with(&version, &dotnet, &d, "1s", |cap| std::fs::remove_file(cap).unwrap());
        let err = stderr(&o);
        assert_eq!(code(&o), Some(8), "{version}: {err}");
        assert!(err.contains("timeout: ") && err.contains(&format!("no capture was written at {}", d.join("app.capture").display())), "{version}: {err}");
        assert!(!err.contains("wrote"), "{version}: {err}");
        assert!(!d.join("app.capture").exists());
    }
}

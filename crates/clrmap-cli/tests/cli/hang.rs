//! Diagnostics I/O never hangs: the real `clrmap` against hostile diagnostics servers
//! (`clrmap::diag::fake`) at the socket a live process (a `sleep`) would have, each run under a
//! memory and time limit, ending with an exit status; and Ctrl-C and SIGTERM end every phase
//! within about two seconds. The last test does the same against a real .NET process stopped with
//! SIGSTOP, on 3.1.23 and 8.0.4.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use clrmap::diag::fake::{Behavior, FakeServer};
use clrmap::diag::{self, DiagErrorKind, Limit};

use crate::support::{all_runtimes, repo_root};

/// A live process (`sleep`) with a fake diagnostics server at its socket; its `TMPDIR` is a
/// directory of its own, which is where `clrmap` looks.
struct Target {
    dir: PathBuf,
    sleep: Child,
    server: Option<FakeServer>,
}

impl Target {
    fn new(name: &str, behavior: Behavior) -> Target {
        let dir = std::env::temp_dir().join(format!("clrmap-hang-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sleep = Command::new("sleep").arg("600").env("TMPDIR", &dir).spawn().unwrap();
        // Until its exec is through, /proc shows no environment (no TMPDIR) of the new program.
        wait_for_exec(sleep.id());
        let key = diag::start_key(sleep.id()).unwrap();
        let server = FakeServer::start(dir.join(format!("dotnet-diagnostic-{}-{key}-socket", sleep.id())), behavior).unwrap();
        Target { dir, sleep, server: Some(server) }
    }

    fn pid(&self) -> String {
        self.sleep.id().to_string()
    }

    fn out(&self) -> String {
        self.dir.join("out.nettrace").to_string_lossy().into_owned()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.server.take();
        let _ = self.sleep.kill();
        let _ = self.sleep.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `clrmap ARGS` with `TMPDIR` = `dir`, under 256 MB of address space and a hard limit of
/// `secs` (then SIGKILL: a hang shows as status 137), and how long it took.
fn bounded(dir: &Path, args: &[&str], secs: u64) -> (Output, Duration) {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!("ulimit -v {}; exec timeout -s KILL {secs} '{}' {}", 256 * 1024, env!("CARGO_BIN_EXE_clrmap"), quoted.join(" "));
    let t = Instant::now();
    let o = Command::new("sh").arg("-c").arg(&script).env("TMPDIR", dir).current_dir(repo_root()).output().unwrap();
    (o, t.elapsed())
}

fn text(o: &Output) -> String {
    format!("status {:?}\nstdout: {}\nstderr: {}", o.status, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Assert `clrmap ARGS` ends with `status` within `within`, its stderr naming `kind`.
fn ends_with(t: &Target, args: &[&str], status: i32, kind: &str, within: Duration) -> Output {
    let (o, took) = bounded(&t.dir, args, within.as_secs() + 10);
    assert_eq!(o.status.code(), Some(status), "{args:?} after {took:?}: {}", text(&o));
    assert!(took < within, "{args:?} took {took:?}: {}", text(&o));
    if !kind.is_empty() {
        assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("error: {kind}")), "{args:?}: {}", text(&o));
    }
    o
}

/// `clrmap ARGS` started in the background with `TMPDIR` = `dir`.
fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_clrmap")).args(args).env("TMPDIR", dir).current_dir(repo_root()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn signal(child: &Child, sig: &str) {
    assert!(Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success());
}

/// How soon a signalled command must end: well under the timeouts it would otherwise wait for
/// (10 s by default, 60 s where the test gives one), with room for a busy machine (CI runs builds
/// beside these tests on 2 cores).
const SIGNAL_ENDS_WITHIN: Duration = Duration::from_secs(5);

/// Wait for `child` to end within `within`; kill it and fail otherwise. Its status and stderr.
fn ends_within(mut child: Child, within: Duration, what: &str) -> (std::process::ExitStatus, String) {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return (status, err);
        }
        if t.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running {within:?} after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The library reads the whole file as a trace.
fn is_whole_trace(path: &str) -> bool {
    let bytes = std::fs::read(path).unwrap();
    clrmap::nettrace::read_events(&bytes[..], |_| {}).is_ok()
}

const SNAPSHOT: Duration = diag::DEFAULT_TIMEOUT;

/// The fake at its best: a snapshot of no methods, a `ps` row and a collected trace. This is what
/// makes the hostile cases' failures the peers' fault, not the fake's.
#[test]
fn a_well_behaved_fake_is_answered_in_full() {
    let t = Target::new("runtime", Behavior::Runtime);
    let o = ends_with(&t, &["il", "dump", "--pid", &t.pid(), "--json"], 0, "", Duration::from_secs(5));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["methods"].as_array().map(Vec::len), Some(0), "{}", text(&o));
    let o = ends_with(&t, &["ps"], 0, "", Duration::from_secs(5));
    let row = String::from_utf8_lossy(&o.stdout).lines().find(|l| l.trim_start().starts_with(&format!("{} ", t.pid()))).map(str::to_owned);
    let row = row.unwrap_or_else(|| panic!("no row for {}: {}", t.pid(), text(&o)));
    assert!(row.contains("8.0.0-fake") && row.contains("fake-dotnet App.dll") && !row.contains("no answer"), "{row}");
    let out = t.out();
    ends_with(&t, &["trace", "collect", "--pid", &t.pid(), "-o", &out, "--duration", "500ms"], 0, "", Duration::from_secs(5));
    assert!(is_whole_trace(&out));
}

/// A socket that listens but never accepts, its queue full (a stopped process): before, the
/// connect blocked for ever.
#[test]
fn a_server_that_never_accepts_is_a_timeout() {
    let t = Target::new("never-accept", Behavior::NeverAccept);
    // The fake really is full: a non-blocking connect is refused with EAGAIN, not queued.
    let e = diag::connect_within(t.server.as_ref().unwrap().path(), &Limit::new(Duration::from_millis(100), None)).unwrap_err();
    assert_eq!(e.kind, DiagErrorKind::Timeout, "{e}");
    let o = ends_with(&t, &["il", "dump", "--pid", &t.pid()], 8, "timeout", SNAPSHOT + Duration::from_secs(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("accepts no connection"), "{}", text(&o));
    ends_with(&t, &["symbolize", "--pid", &t.pid(), "0x1234"], 8, "timeout", SNAPSHOT + Duration::from_secs(3));
    ends_with(&t, &["trace", "collect", "--pid", &t.pid(), "-o", &t.out(), "--duration", "1s", "--timeout", "1s"], 8, "timeout", Duration::from_secs(4));
    // ps: the row says why it is incomplete, in time.
    let o = ends_with(&t, &["ps", "--timeout", "1s"], 0, "", Duration::from_secs(4));
    let row = String::from_utf8_lossy(&o.stdout).lines().find(|l| l.trim_start().starts_with(&format!("{} ", t.pid()))).map(str::to_owned).unwrap_or_default();
    assert!(row.contains("(no answer: timeout: connecting to"), "{}", text(&o));
    let o = ends_with(&t, &["ps", "--json", "--timeout", "1s"], 0, "", Duration::from_secs(4));
    let line = String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains(&format!("\"pid\":{}", t.pid()))).map(str::to_owned).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["error"]["kind"], "timeout", "{line}");
}

/// One byte a second: before, each read had its own timeout, so `ps --timeout 2s` took 20 s and
/// more. Now the whole exchange has one deadline.
#[test]
fn a_server_that_trickles_is_a_timeout_within_the_exchange_deadline() {
    let t = Target::new("trickle", Behavior::Trickle(Duration::from_secs(1)));
    let o = ends_with(&t, &["ps", "--timeout", "2s"], 0, "", Duration::from_secs(5));
    let row = String::from_utf8_lossy(&o.stdout).lines().find(|l| l.trim_start().starts_with(&format!("{} ", t.pid()))).map(str::to_owned).unwrap_or_default();
    assert!(row.contains("(no answer: timeout: ProcessInfo2"), "{}", text(&o));
    ends_with(&t, &["il", "dump", "--pid", &t.pid()], 8, "timeout", SNAPSHOT + Duration::from_secs(3));
}

/// OK, then blocks for ever: before, `il dump --pid` never returned and `trace collect` wrote
/// until the disk was full.
#[test]
fn an_endless_stream_ends_at_the_deadline() {
    let t = Target::new("endless", Behavior::EndlessStream);
    let o = ends_with(&t, &["il", "dump", "--pid", &t.pid()], 8, "timeout", SNAPSHOT + Duration::from_secs(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("did not end"), "{}", text(&o));
    // The duration (2s), then the rundown's --timeout (1s): cut there, a valid trace kept.
    let out = t.out();
    let o = ends_with(&t, &["trace", "collect", "--pid", &t.pid(), "-o", &out, "--duration", "2s", "--timeout", "1s"], 8, "timeout", Duration::from_secs(6));
    assert!(String::from_utf8_lossy(&o.stderr).contains("wrote"), "{}", text(&o));
    assert!(is_whole_trace(&out));
}

/// A valid start, then silence: before, `il dump --pid` exited 0 with no bodies after a warning.
#[test]
fn a_stream_that_goes_silent_is_a_timeout_not_a_success() {
    let t = Target::new("silent", Behavior::PrefixThenSilence);
    ends_with(&t, &["il", "dump", "--pid", &t.pid()], 8, "timeout", SNAPSHOT + Duration::from_secs(3));
    ends_with(&t, &["il", "at", "--pid", &t.pid(), "0x1234"], 8, "timeout", SNAPSHOT + Duration::from_secs(3));
    // trace collect: the stop is sent, nothing more comes: cut at the rundown's timeout.
    let out = t.out();
    ends_with(&t, &["trace", "collect", "--pid", &t.pid(), "-o", &out, "--duration", "500ms", "--timeout", "1s"], 8, "timeout", Duration::from_secs(4));
    assert!(is_whole_trace(&out));
}

/// The stream closed early by a process that lives on: before, `trace collect` said
/// `target_exited` (status 7) and `il dump --pid` exited 0 with a warning.
#[test]
fn a_stream_closed_early_by_a_live_process_is_a_protocol_error() {
    let t = Target::new("close-early", Behavior::CloseStreamEarly);
    let out = t.out();
    let o = ends_with(&t, &["trace", "collect", "--pid", &t.pid(), "-o", &out, "--timeout", "1s"], 8, "protocol", Duration::from_secs(4));
    assert!(String::from_utf8_lossy(&o.stderr).contains("still runs"), "{}", text(&o));
    assert!(is_whole_trace(&out));
    ends_with(&t, &["il", "dump", "--pid", &t.pid()], 8, "protocol", Duration::from_secs(4));
}

#[test]
fn garbage_is_a_protocol_error() {
    let t = Target::new("garbage", Behavior::Garbage);
    ends_with(&t, &["il", "dump", "--pid", &t.pid()], 8, "protocol", Duration::from_secs(4));
    ends_with(&t, &["trace", "collect", "--pid", &t.pid(), "-o", &t.out(), "--timeout", "1s"], 8, "protocol", Duration::from_secs(4));
    let o = ends_with(&t, &["ps", "--timeout", "1s"], 0, "", Duration::from_secs(4));
    let row = String::from_utf8_lossy(&o.stdout).lines().find(|l| l.trim_start().starts_with(&format!("{} ", t.pid()))).map(str::to_owned).unwrap_or_default();
    assert!(row.contains("(no answer: protocol:"), "{}", text(&o));
}

/// SIGTERM and SIGINT in every phase of `trace collect`. While connecting or waiting for the
/// session's reply, one ends it within two seconds, status 130 (interrupted), and an existing
/// output is left as it was; before, the connect ignored them (166 s). While the stream flows
/// (endless, or silent after a valid start), the first begins the stop and the second abandons
/// it within two seconds, status 130, the file a whole trace; before, two SIGINTs and a SIGTERM
/// were ignored.
#[test]
fn signals_end_trace_collect_in_every_phase() {
    for (name, behavior, signals) in
        [("connect", Behavior::NeverAccept, 1), ("reply", Behavior::Trickle(Duration::from_secs(1)), 1), ("endless", Behavior::EndlessStream, 2), ("silent", Behavior::PrefixThenSilence, 2)]
    {
        let t = Target::new(&format!("signal-{name}"), behavior);
        let out = t.out();
        for sig in ["-TERM", "-INT"] {
            std::fs::write(&out, b"before").unwrap();
            let what = format!("{name} {sig}");
            let child = spawn(&t.dir, &["trace", "collect", "--pid", &t.pid(), "-o", &out, "--timeout", "60s"]);
            std::thread::sleep(Duration::from_millis(800));
            signal(&child, sig);
            if signals == 2 {
                std::thread::sleep(Duration::from_millis(500));
                signal(&child, sig);
            }
            let (status, err) = ends_within(child, SIGNAL_ENDS_WITHIN, &what);
            assert_eq!(status.code(), Some(130), "{what}: {err}");
            assert!(err.contains("error: interrupted"), "{what}: {err}");
            if signals == 1 {
                assert_eq!(std::fs::read(&out).unwrap(), b"before", "{what}");
            } else {
                assert!(err.contains("wrote") && is_whole_trace(&out), "{what}: {err}");
            }
        }
    }
}

/// A snapshot has no handler of its own: Ctrl-C or SIGTERM ends it as it ends any program, in
/// every phase (connect, reply, stream).
#[test]
fn a_signal_ends_a_pid_snapshot_at_once() {
    for (name, behavior) in
        [("snap-connect", Behavior::NeverAccept), ("snap-reply", Behavior::Trickle(Duration::from_secs(1))), ("snap-endless", Behavior::EndlessStream), ("snap-silent", Behavior::PrefixThenSilence)]
    {
        let t = Target::new(name, behavior);
        for sig in ["-INT", "-TERM"] {
            let child = spawn(&t.dir, &["il", "dump", "--pid", &t.pid()]);
            std::thread::sleep(Duration::from_millis(700));
            signal(&child, sig);
            let (status, err) = ends_within(child, SIGNAL_ENDS_WITHIN, &format!("{name} {sig}"));
            assert!(!status.success(), "{name} {sig}: {err}");
        }
    }
}

/// A process that is continued and killed when the test ends, however it ends.
struct App(Child);

impl Drop for App {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.0.id().to_string()]).status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real .NET process stopped with SIGSTOP (as in a debugger), its listen queue filled: before,
/// `ps` and `il dump --pid` hung. Now: a timeout row, and status 8. On 3.1.23 and 8.0.4.
#[test]
#[ignore = "needs .NET"]
fn a_stopped_dotnet_process_is_a_timeout_on_both_runtimes() {
    let hot = repo_root().join("tests/fixtures/perf/Hot.dll");
    for rt in all_runtimes() {
        let version = rt.version.clone();
        let dir = std::env::temp_dir().join(format!("clrmap-hang-{}-stopped-{version}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let app = App(Command::new(&rt.dotnet).arg(&hot).arg("60").env("TMPDIR", &dir).stdout(Stdio::null()).spawn().unwrap());
        let pid = app.0.id();
        // Its socket, once the runtime has made it; then a snapshot works.
        let t0 = Instant::now();
        let socket = loop {
            if let Ok(p) = diag::socket_path(pid) {
                break p;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "{version}: no diagnostics socket");
            std::thread::sleep(Duration::from_millis(50));
        };
        let (o, _) = bounded(&dir, &["il", "dump", "--pid", &pid.to_string(), "--json"], 60);
        assert_eq!(o.status.code(), Some(0), "{version}: {}", text(&o));
        assert!(Command::new("kill").args(["-STOP", &pid.to_string()]).status().unwrap().success());
        // Fill its listen queue, as repeated tools do.
        let mut held: Vec<UnixStream> = Vec::new();
        loop {
            match diag::connect_within(&socket, &Limit::new(Duration::from_millis(50), None)) {
                Ok(s) => held.push(s),
                Err(e) => {
                    assert_eq!(e.kind, DiagErrorKind::Timeout, "{version}: {e}");
                    break;
                }
            }
            assert!(held.len() < 10_000, "{version}: the queue never filled");
        }
        let (o, took) = bounded(&dir, &["ps", "--timeout", "2s"], 30);
        assert_eq!(o.status.code(), Some(0), "{version}: {}", text(&o));
        assert!(took < Duration::from_secs(6), "{version}: ps took {took:?}");
        let row = String::from_utf8_lossy(&o.stdout).lines().find(|l| l.trim_start().starts_with(&format!("{pid} "))).map(str::to_owned).unwrap_or_default();
        assert!(row.contains("(no answer: timeout:") && row.contains(version.as_str()), "{version}: {}", text(&o));
        let (o, took) = bounded(&dir, &["il", "dump", "--pid", &pid.to_string()], 30);
        assert_eq!(o.status.code(), Some(8), "{version}: {}", text(&o));
        assert!(took < SNAPSHOT + Duration::from_secs(3), "{version}: il dump took {took:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("error: timeout"), "{version}: {}", text(&o));
        println!("{version}: {} connections filled the queue; ps and il dump --pid ended in {took:?}", held.len());
        drop(held);
        drop(app);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Wait until process `pid` shows its command line (its exec is through).
fn wait_for_exec(pid: u32) {
    let t = Instant::now();
    while clrmap::diag::proc_cmdline(pid).is_none() {
        assert!(t.elapsed() < Duration::from_secs(5), "process {pid} never showed its command line");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `--timeout` bounds a `--pid` snapshot as a whole (il dump, il at, symbolize): an endless
/// stream ends at 1 s, well before the 10 s default, and a timeout longer than the default is
/// honoured too (a big process may need a longer rundown).
#[test]
fn a_snapshot_takes_the_timeout_it_is_given() {
    let t = Target::new("snaptimeout", Behavior::EndlessStream);
    for args in
        [vec!["il", "dump", "--pid", &t.pid(), "--timeout", "1s"], vec!["il", "at", "--pid", &t.pid(), "--timeout", "1s", "0x1234"], vec!["symbolize", "--pid", &t.pid(), "--timeout", "1s", "0x1234"]]
    {
        let (o, took) = bounded(&t.dir, &args, 20);
        assert_eq!(o.status.code(), Some(8), "{args:?}: {}", text(&o));
        assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(6), "{args:?} took {took:?}");
    }
    let (o, took) = bounded(&t.dir, &["il", "dump", "--pid", &t.pid(), "--timeout", "12s"], 30);
    assert_eq!(o.status.code(), Some(8), "{}", text(&o));
    assert!(took >= Duration::from_secs(11), "took {took:?}: the default, not the 12 s asked for");
    // --timeout is for a process only.
    let o = crate::support::clrmap(&["il", "dump", "examples/frames.nettrace", "--timeout", "1s"]);
    assert_eq!(o.status.code(), Some(2));
}

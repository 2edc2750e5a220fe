//! The diagnostics port (clrmap::diag) against running processes of both real runtimes, started
//! normally (no EventPipe environment variables): the maps streamed from a process equal what the
//! live profiler got from GetILToNativeMapping3 in that same process; the rundown covers methods
//! jitted before the attach; a killed target, Ctrl-C, a missing or non-.NET pid and a socket that
//! speaks garbage all end cleanly, never in a hang. The CLI tests need `target/debug/clrmap`
//! (`cargo build --workspace`, as scripts/test.sh does).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use clrmap::capture::read_captured;
use clrmap::diag::{self, Client, CollectControl, DiagErrorKind, EndReason, SessionConfig};
use clrmap::ilmap::{CodeBody, CodeKind};
use clrmap::nettrace::{read_code_bodies, read_events, RUNDOWN};

use crate::profiler::{profiler_path, CLSID};
use crate::support::{self, Runtime};

const TIMEOUT: Duration = Duration::from_secs(20);

/// The Attach program compiled for `rt`, in a directory of its own per test.
fn program(rt: &Runtime, mcs: &Path, test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("attach-{test}-{}", rt.version));
    std::fs::create_dir_all(&dir).unwrap();
    let dll = dir.join("Attach.dll");
    support::mcs_compile(mcs, &dll, &["-r:System.Core.dll"], &[support::repo_root().join("tests/dotnet/attach/Attach.cs")]);
    std::fs::write(dir.join("Attach.runtimeconfig.json"), rt.runtimeconfig()).unwrap();
    dll
}

/// A running Attach program, killed when dropped.
struct Target {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    version: String,
    /// Every stdout line read so far.
    seen: Vec<String>,
}

impl Target {
    fn start(rt: &Runtime, dll: &Path, capture: Option<(&Path, &Path)>) -> Target {
        let mut c = Command::new(&rt.dotnet);
        c.arg(dll).env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1").stdin(Stdio::piped()).stdout(Stdio::piped());
        for v in ["COMPlus_EnableEventPipe", "DOTNET_EnableEventPipe", "DOTNET_EnableDiagnostics", "COMPlus_EnableDiagnostics"] {
            c.env_remove(v);
        }
        if let Some((so, out)) = capture {
            c.env("CORECLR_ENABLE_PROFILING", "1").env("CORECLR_PROFILER", CLSID).env("CORECLR_PROFILER_PATH", so).env("CLRMAP_PROFILER_OUTPUT", out);
        }
        let mut child = c.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut t = Target { child, stdin, stdout, version: rt.version.clone(), seen: Vec::new() };
        t.expect("ready");
        t
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Read stdout up to a line equal to `word` (the program flushes after each).
    fn expect(&mut self, word: &str) {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "{}: the program ended before {word:?}", self.version);
            self.seen.push(line.trim_end().to_owned());
            if line.trim() == word {
                return;
            }
        }
    }

    fn command(&mut self, cmd: &str) {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn exit(mut self) {
        self.command("exit");
        let status = wait_timeout(&mut self.child, TIMEOUT).expect("the program exits on \"exit\"");
        assert!(status.success(), "{}: {status:?}", self.version);
    }
}

impl Target {
    /// Say "exit", and return the program's whole stdout and its exit status.
    fn exit_output(mut self) -> (Vec<String>, std::process::ExitStatus) {
        self.command("exit");
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest).unwrap();
        self.seen.extend(rest.lines().map(str::to_owned));
        let status = wait_timeout(&mut self.child, TIMEOUT).expect("the program exits on \"exit\"");
        (std::mem::take(&mut self.seen), status)
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_timeout(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The live runtime's maps, by (FunctionID, code start), as the profiler recorded them so far.
fn live_maps(capture: &Path) -> HashMap<(u64, u64), CodeBody> {
    let text = std::fs::read_to_string(capture).unwrap();
    // A line being written may be cut: keep whole lines only.
    let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    read_captured(whole).unwrap().into_iter().filter(|c| c.kind == CodeKind::Jit).map(|c| ((c.body.function_id.unwrap(), c.body.start.unwrap()), c.body)).collect()
}

/// Every body with a map must equal the live runtime's body at the same code start; returns how
/// many were compared.
fn compare(what: &str, version: &str, bodies: &[CodeBody], live: &HashMap<(u64, u64), CodeBody>) -> usize {
    let mut compared = 0;
    // A trace's ReadyToRun methods come without a map (it is in their images): not compared.
    for b in bodies.iter().filter(|b| !b.map.is_empty()) {
        let key = (b.function_id.unwrap(), b.start.unwrap());
        let l = live.get(&key).unwrap_or_else(|| panic!("{version} {what}: {:?} at 0x{:X} is not a body the profiler saw", b.name, key.1));
        assert_eq!(b.map, l.map, "{version} {what}: {:?} at 0x{:X}", b.name, key.1);
        assert_eq!(b.code_size, l.code_size, "{version} {what}: {:?} size", b.name);
        compared += 1;
    }
    compared
}

fn clrmap_bin() -> PathBuf {
    support::built("clrmap")
}

#[test]
#[ignore = "needs .NET"]
fn attached_maps_equal_the_profilers_in_the_same_process_on_both_runtimes() {
    let (rts, mcs) = support::runtimes_and_mcs("attach::attached_maps_equal_the_profilers");
    let so = profiler_path();
    for rt in &rts {
        let dll = program(rt, &mcs, "oracle");
        let capture = dll.with_file_name("capture.jsonl");
        let _ = std::fs::remove_file(&capture);
        let mut target = Target::start(rt, &dll, Some((&so, &capture)));

        // Who it is: 3.1 knows neither ProcessInfo command; 8.0 and later answer ProcessInfo2.
        let client = Client::for_pid(target.pid(), TIMEOUT).unwrap();
        match client.process_info() {
            Ok(info) => {
                assert!(rt.major() >= 5, "{}: ProcessInfo answered", rt.version);
                assert_eq!(info.pid, u64::from(target.pid()));
                assert_eq!(info.runtime_version.as_deref(), Some(rt.version.as_str()));
                assert!(info.command_line.contains("Attach.dll"), "{}", info.command_line);
            }
            Err(e) => {
                assert!(rt.version.starts_with("3."), "{}: {e}", rt.version);
                assert_eq!((e.kind, e.hresult), (DiagErrorKind::UnsupportedCommand, Some(0x8013_1385)));
            }
        }

        // A snapshot: the rundown of everything jitted before the attach.
        let before = live_maps(&capture);
        let snap = diag::snapshot(target.pid(), TIMEOUT).unwrap();
        assert!(snap.warnings.is_empty(), "{}: {:?}", rt.version, snap.warnings);
        let mut total = compare("snapshot", &rt.version, &snap.bodies, &live_maps(&capture));
        let seen: std::collections::HashSet<(u64, u64)> = snap.bodies.iter().map(|b| (b.function_id.unwrap(), b.start.unwrap())).collect();
        // Rundown covers the past: every body of the program jitted before the attach is there.
        let past: Vec<_> = before.iter().filter(|(_, b)| b.module.as_deref() == Some("Attach.dll")).collect();
        assert!(past.len() >= 50, "{}: {} program bodies before the attach", rt.version, past.len());
        for (key, b) in &past {
            assert!(seen.contains(key), "{}: {:?}, jitted before the attach, is not in the snapshot", rt.version, b.name);
        }
        assert!(snap.bodies.iter().any(|b| b.name.as_deref() == Some("Attach::Before")), "{}: Attach::Before by name", rt.version);

        // A collected trace: the program jits more while it streams, then the rundown at stop.
        let trace = dll.with_file_name("collect.nettrace");
        let stop = AtomicBool::new(false);
        let collected = std::thread::scope(|s| {
            let h = s.spawn(|| {
                let mut file = std::fs::File::create(&trace).unwrap();
                let control = CollectControl { deadline: None, stop: &stop, poll: Duration::from_millis(50) };
                diag::collect(&client, &SessionConfig::default(), &mut file, &control, &mut |_| {})
            });
            std::thread::sleep(Duration::from_millis(500));
            target.command("jit");
            target.expect("jitted");
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            h.join().unwrap()
        });
        let collected = collected.unwrap();
        assert_eq!(collected.reason, EndReason::Stopped, "{}", rt.version);
        assert!(collected.complete && collected.stop_error.is_none(), "{}: {collected:?}", rt.version);
        let bytes = std::fs::read(&trace).unwrap();
        assert_eq!(bytes.len() as u64, collected.written);
        let bodies = read_code_bodies(&bytes[..]).unwrap();
        // The trace names its process (the Trace object): every body ran in the target.
        assert!(bodies.iter().chain(&snap.bodies).all(|b| b.pid == Some(target.pid())), "{}: bodies of another process", rt.version);
        let live = live_maps(&capture);
        total += compare("trace", &rt.version, &bodies, &live);
        // The methods jitted during the session are in it: their load events or the rundown.
        assert!(bodies.iter().any(|b| b.name.as_deref() == Some("Attach::After")), "{}: Attach::After", rt.version);

        // A second snapshot after that.
        let again = diag::snapshot(target.pid(), TIMEOUT).unwrap();
        total += compare("second snapshot", &rt.version, &again.bodies, &live_maps(&capture));
        println!(
            "{}: {total} maps from the diagnostics port equal to GetILToNativeMapping3 in the same process (snapshot {}, trace {}, second snapshot {}); {} program bodies from before the attach all in the rundown",
            rt.version,
            snap.bodies.len(),
            bodies.len(),
            again.bodies.len(),
            past.len()
        );
        assert!(snap.bodies.len() >= 100 && bodies.len() >= 100, "{}: {} and {} compared", rt.version, snap.bodies.len(), bodies.len());
        target.exit();
    }
}

#[test]
#[ignore = "needs .NET"]
fn a_target_killed_mid_collect_leaves_a_valid_trace() {
    let (rts, mcs) = support::runtimes_and_mcs("attach::a_target_killed_mid_collect");
    for rt in &rts {
        let dll = program(rt, &mcs, "kill");
        let mut target = Target::start(rt, &dll, None);
        let client = Client::for_pid(target.pid(), TIMEOUT).unwrap();
        let trace = dll.with_file_name("killed.nettrace");
        let stop = AtomicBool::new(false);
        let collected = std::thread::scope(|s| {
            let h = s.spawn(|| {
                let mut file = std::fs::File::create(&trace).unwrap();
                let control = CollectControl { deadline: Some(Instant::now() + TIMEOUT), stop: &stop, poll: Duration::from_millis(50) };
                diag::collect(&client, &SessionConfig::default(), &mut file, &control, &mut |_| {})
            });
            std::thread::sleep(Duration::from_millis(500));
            target.command("jit");
            target.expect("jitted");
            std::thread::sleep(Duration::from_millis(300));
            target.child.kill().unwrap(); // SIGKILL
            h.join().unwrap()
        });
        let c = collected.unwrap();
        assert_eq!(c.reason, EndReason::TargetExited, "{}: {c:?}", rt.version);
        let bytes = std::fs::read(&trace).unwrap();
        assert_eq!(bytes.len() as u64, c.written, "{}", rt.version);
        assert!(c.written > 0 && c.written <= c.received + 1, "{}: {c:?}", rt.version);
        // Cut after the last whole block and closed: the file reads as a whole trace.
        let stats = read_events(&bytes[..], |_| {}).unwrap_or_else(|e| panic!("{}: {e}", rt.version));
        let bodies = read_code_bodies(&bytes[..]).unwrap();
        println!(
            "{}: killed mid-collect: {} bytes received, {} written (whole blocks and the end tag), {} blocks, {} bodies with maps",
            rt.version,
            c.received,
            c.written,
            stats.blocks.values().sum::<u64>(),
            bodies.len()
        );
        // A snapshot of a process that is gone: a clear error, no hang.
        let t = Instant::now();
        let e = diag::snapshot(target.pid(), TIMEOUT).unwrap_err();
        assert_eq!(e.kind, DiagErrorKind::TargetExited, "{}: {e}", rt.version);
        assert!(t.elapsed() < TIMEOUT);
    }
}

#[test]
#[ignore = "needs .NET"]
fn ctrl_c_stops_trace_collect_cleanly_with_the_rundown() {
    let (rts, mcs) = support::runtimes_and_mcs("attach::ctrl_c_stops_trace_collect");
    let bin = clrmap_bin();
    for rt in &rts {
        let dll = program(rt, &mcs, "sigint");
        let target = Target::start(rt, &dll, None);
        let trace = dll.with_file_name("sigint.nettrace");
        let mut collect = Command::new(&bin).args(["trace", "collect", "--pid", &target.pid().to_string(), "-o"]).arg(&trace).stderr(Stdio::piped()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        assert!(collect.try_wait().unwrap().is_none(), "{}: trace collect ended by itself", rt.version);
        support::run(Command::new("kill").args(["-INT", &collect.id().to_string()]));
        let status = wait_timeout(&mut collect, TIMEOUT).unwrap_or_else(|| panic!("{}: trace collect did not stop on SIGINT", rt.version));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut collect.stderr.take().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{}: {status:?}: {err}", rt.version);
        let bytes = std::fs::read(&trace).unwrap();
        let stats = read_events(&bytes[..], |_| {}).unwrap();
        let rundown: u64 = stats.events.iter().filter(|((p, id, _), _)| p == RUNDOWN && *id == 144).map(|(_, n)| n).sum();
        let bodies = read_code_bodies(&bytes[..]).unwrap();
        assert!(rundown > 100 && bodies.iter().any(|b| b.name.as_deref() == Some("Attach::Before")), "{}: {rundown} DCEnd events", rt.version);
        println!("{}: SIGINT: a clean stop, {} bytes, {rundown} rundown DCEnd events, {} bodies with maps", rt.version, bytes.len(), bodies.len());
        target.exit();
    }
}

/// A fake diagnostics server: accepts connections and answers each with `reply`, then holds the
/// connection open for a while (or closes it).
fn fake_server(path: &Path, reply: Vec<u8>, hold: Duration) -> std::thread::JoinHandle<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) {
            match listener.accept() {
                Ok((mut s, _)) => {
                    let reply = reply.clone();
                    std::thread::spawn(move || {
                        let _ = s.set_nonblocking(false);
                        let mut buf = [0u8; 512];
                        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                        let _ = std::io::Read::read(&mut s, &mut buf);
                        let _ = s.write_all(&reply);
                        std::thread::sleep(hold);
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    })
}

#[test]
#[ignore = "needs .NET"]
fn garbage_silence_and_bad_pids_are_clear_errors_never_hangs() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("attach-fake");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let short = Duration::from_millis(500);
    let bounded = |t: Instant| assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());

    // Garbage: not the protocol.
    let garbage = dir.join("garbage.sock");
    let _g = fake_server(&garbage, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".to_vec(), Duration::ZERO);
    let client = Client::connect_path(&garbage, short);
    let t = Instant::now();
    assert_eq!(client.process_info().unwrap_err().kind, DiagErrorKind::Protocol);
    assert_eq!(diag::snapshot_client(&client).unwrap_err().kind, DiagErrorKind::Protocol);
    bounded(t);

    // An OK header whose size is below the header's, and one with a cut payload.
    let mut small = b"DOTNET_IPC_V1\0".to_vec();
    small.extend_from_slice(&[5, 0, 0xFF, 0, 0, 0]);
    let small_sock = dir.join("small.sock");
    let _s = fake_server(&small_sock, small, Duration::ZERO);
    assert_eq!(Client::connect_path(&small_sock, short).process_info().unwrap_err().kind, DiagErrorKind::Protocol);

    // A valid session reply, then a stream that is not a nettrace.
    let mut ok = b"DOTNET_IPC_V1\0".to_vec();
    ok.extend_from_slice(&[28, 0, 0xFF, 0, 0, 0]);
    ok.extend_from_slice(&7u64.to_le_bytes());
    ok.extend_from_slice(&[0xAB; 4096]);
    let stream_sock = dir.join("stream.sock");
    let _st = fake_server(&stream_sock, ok, Duration::ZERO);
    let t = Instant::now();
    let e = diag::snapshot_client(&Client::connect_path(&stream_sock, short)).unwrap_err();
    assert_eq!(e.kind, DiagErrorKind::Protocol, "{e}");
    let out = dir.join("stream.nettrace");
    let mut file = std::fs::File::create(&out).unwrap();
    let stop = AtomicBool::new(false);
    let control = CollectControl { deadline: Some(Instant::now() + short), stop: &stop, poll: Duration::from_millis(50) };
    let e = diag::collect(&Client::connect_path(&stream_sock, short), &SessionConfig::default(), &mut file, &control, &mut |_| {}).unwrap_err();
    assert_eq!(e.kind, DiagErrorKind::Protocol, "{e}");
    bounded(t);

    // A server that answers nothing: a timeout, not a hang.
    let silent = dir.join("silent.sock");
    let _si = fake_server(&silent, Vec::new(), Duration::from_secs(3));
    let t = Instant::now();
    assert_eq!(Client::connect_path(&silent, short).process_info().unwrap_err().kind, DiagErrorKind::Timeout);
    bounded(t);

    // A missing pid (pid_max is never a pid) and a process that is not .NET.
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    assert_eq!(diag::snapshot(pid_max, short).unwrap_err().kind, DiagErrorKind::NoSuchProcess);
    let mut sleeper = Command::new("sleep").arg("30").env("TMPDIR", &dir).spawn().unwrap();
    let e = diag::snapshot(sleeper.id(), short).unwrap_err();
    assert_eq!(e.kind, DiagErrorKind::NotDotnet, "{e}");
    assert!(e.message.contains("sleep"), "{e}");

    // The CLI: its exit statuses, and a fake server at the socket a pid would have (dropped at
    // the end of the block).
    {
        let bin = clrmap_bin();
        let key = diag::start_key(sleeper.id()).unwrap();
        let fake = dir.join(format!("dotnet-diagnostic-{}-{key}-socket", sleeper.id()));
        let _f = fake_server(&fake, b"\x00\x01garbage, not DOTNET_IPC_V1".to_vec(), Duration::ZERO);
        let status_of = |args: &[&str]| {
            let t = Instant::now();
            let o = Command::new(&bin).args(args).output().unwrap();
            bounded(t);
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            assert!(err.starts_with("error: "), "{args:?}: {err}");
            (o.status.code(), err)
        };
        let out = dir.join("cli.nettrace");
        let out = out.to_str().unwrap();
        let (code, err) = status_of(&["trace", "collect", "--pid", &pid_max.to_string(), "-o", out]);
        assert_eq!(code, Some(3), "{err}");
        let cap = dir.join("cli.capture");
        let cap = cap.to_str().unwrap();
        let (code, err) = status_of(&["profile", "--pid", &pid_max.to_string(), "-o", cap]);
        assert_eq!(code, Some(3), "{err}");
        let plain = Command::new("sleep").arg("30").spawn().unwrap();
        let (code, err) = status_of(&["trace", "collect", "--pid", &plain.id().to_string(), "-o", out, "--timeout", "1s"]);
        assert_eq!(code, Some(4), "{err}");
        let (code, err) = status_of(&["profile", "--pid", &plain.id().to_string(), "-o", cap]);
        assert_eq!(code, Some(4), "{err}");
        let mut plain = plain;
        let _ = plain.kill();
        let _ = plain.wait();
        let (code, err) = status_of(&["trace", "collect", "--pid", &sleeper.id().to_string(), "-o", out, "--timeout", "1s"]);
        assert_eq!(code, Some(8), "{err}");
        assert!(err.contains("protocol"), "{err}");
        let (code, err) = status_of(&["profile", "--pid", &sleeper.id().to_string(), "-o", cap]);
        assert_eq!(code, Some(8), "{err}");
        assert!(err.contains("protocol"), "{err}");
        let o = Command::new(&bin).args(["ps", "--timeout", "1s"]).output().unwrap();
        assert!(o.status.success());
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
#[ignore = "needs .NET"]
fn il_dump_il_at_and_symbolize_take_a_pid() {
    let (rts, mcs) = support::runtimes_and_mcs("attach::il_dump_il_at_and_symbolize_take_a_pid");
    let bin = clrmap_bin();
    for rt in &rts {
        let dll = program(rt, &mcs, "cli-pid");
        let target = Target::start(rt, &dll, None);
        let pid = target.pid().to_string();
        let run = |args: &[&str]| Command::new(&bin).args(args).output().unwrap();
        // The snapshot through the CLI, as JSON: every body, with its start.
        let o = run(&["il", "dump", "--pid", &pid, "--module", "Attach.dll", "--json"]);
        assert!(o.status.success(), "{}: {}", rt.version, String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let methods = v["methods"].as_array().unwrap();
        assert!(methods.len() >= 50, "{}: {} bodies", rt.version, methods.len());
        assert_eq!(v["source"], format!("process {pid}"));
        let before = methods.iter().find(|m| m["name"] == "Attach::Before").unwrap_or_else(|| panic!("{}: Attach::Before", rt.version));
        let address = before["start"].as_u64().unwrap() + 1;
        // il at and symbolize on that address name the same method, without a file.
        let o = run(&["il", "at", "--pid", &pid, &format!("0x{address:X}")]);
        assert!(o.status.success(), "{}: {}", rt.version, String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains(" Attach::Before +0x1: "), "{}", String::from_utf8_lossy(&o.stdout));
        let o = run(&["symbolize", "--pid", &pid, "--json", &address.to_string(), "0x10"]);
        assert!(o.status.success(), "{}: {}", rt.version, String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0]["method"].as_str(), lines[0]["module"].as_str()), (Some("Attach::Before"), Some("Attach.dll")));
        assert!(lines[1]["method"].is_null());
        // A pid that is no process: its own status, at once.
        let o = run(&["il", "dump", "--pid", "999999999"]);
        assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
        target.exit();
    }
}

/// `clrmap profile --pid PID -o CAPTURE`, its stderr piped.
fn profile_pid(bin: &Path, pid: u32, capture: &Path) -> Child {
    Command::new(bin).args(["profile", "--pid", &pid.to_string(), "-o"]).arg(capture).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
}

/// Wait until the attached profiler has written its header and the bodies it enumerated.
fn wait_for_attach(version: &str, capture: &Path, cli: &mut Child) -> clrmap::capture::Capture {
    let t = Instant::now();
    while t.elapsed() < TIMEOUT {
        if let Ok(b) = std::fs::read(capture) {
            let c = clrmap::capture::read_capture(&b).unwrap();
            if c.bodies.iter().filter(|b| b.before_attach).count() >= 50 {
                return c;
            }
        }
        assert!(cli.try_wait().unwrap().is_none(), "{version}: profile --pid ended before the attach completed");
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{version}: no attach within {TIMEOUT:?}")
}

fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    err
}

#[test]
#[ignore = "needs .NET"]
fn profile_pid_attaches_records_before_and_after_and_detaches_on_both_runtimes() {
    let (rts, mcs) = support::runtimes_and_mcs("attach::profile_pid_attaches");
    let bin = clrmap_bin();
    for rt in &rts {
        let dll = program(rt, &mcs, "profile-pid");
        // The program's own output and status, with nothing attached.
        let mut plain = Target::start(rt, &dll, None);
        for _ in 0..2 {
            plain.command("jit");
            plain.expect("jitted");
        }
        let (plain_out, plain_status) = plain.exit_output();

        // Attached while it runs; SIGINT detaches; the program goes on.
        let mut target = Target::start(rt, &dll, None);
        let capture = dll.with_file_name("attached.capture");
        let _ = std::fs::remove_file(&capture);
        let mut cli = profile_pid(&bin, target.pid(), &capture);
        wait_for_attach(&rt.version, &capture, &mut cli);
        target.command("jit");
        target.expect("jitted");
        // What was recorded before the snapshot began (the profiler writes each body as the JIT
        // finishes it; a line cut short at the end is dropped).
        let recorded = clrmap::capture::read_capture(&std::fs::read(&capture).unwrap()).unwrap();
        let before_snapshot: std::collections::HashSet<(u64, u64)> = recorded.bodies.iter().map(|b| (b.body.function_id.unwrap(), b.body.start.unwrap())).collect();
        // The runtime's rundown, in the same process, is the oracle for every body's map.
        let snap = diag::snapshot(target.pid(), TIMEOUT).unwrap();
        let by_key: HashMap<(u64, u64), &CodeBody> = snap.bodies.iter().map(|b| ((b.function_id.unwrap(), b.start.unwrap()), b)).collect();
        support::run(Command::new("kill").args(["-INT", &cli.id().to_string()]));
        let status = wait_timeout(&mut cli, TIMEOUT * 2).unwrap_or_else(|| panic!("{}: profile --pid did not stop on SIGINT", rt.version));
        let err = stderr_of(&mut cli);
        assert!(status.success(), "{}: {status:?}: {err}", rt.version);
        assert!(err.contains("detached"), "{}: {err}", rt.version);
        let c = clrmap::capture::read_capture(&std::fs::read(&capture).unwrap()).unwrap();
        assert!(c.warning.is_none() && c.attached == [target.pid()] && c.ended == [target.pid()], "{}: {:?} {:?} {:?}", rt.version, c.warning, c.attached, c.ended);
        let mut compared = 0;
        for b in &c.bodies {
            // 3.1 and 8.0 report only jitted code to an attached profiler; 9.0 and later also
            // report ReadyToRun code the program reaches after the attach (measured on 9.0.20 and
            // 10.0.12). On 8.0 a ReadyToRun body is still recorded when its method tiers up after
            // the attach: the profiler records each code version of a function it has not seen
            // when the JIT finishes one, the ReadyToRun code as the first (measured on 8.0.31:
            // CoreLib methods' ReadyToRun bodies, each with its tier-1 body recorded next).
            if rt.major() < 9 && b.kind != CodeKind::Jit {
                let tiered_up = c.bodies.iter().any(|j| j.body.function_id == b.body.function_id && j.kind == CodeKind::Jit && j.index > b.index && !j.before_attach);
                assert!(tiered_up, "{}: a {:?} body of token 0x{:08X} after attach, without a later jitted one", rt.version, b.kind, b.body.token);
            }
            let key = (b.body.function_id.unwrap(), b.body.start.unwrap());
            let Some(s) = by_key.get(&key) else {
                // Every body of the program recorded before the snapshot began is in it; a
                // framework body may have been collected (a dynamic method) before it. The
                // program's methods still tier up after "jitted": the runtime's background worker
                // jits a method's next tier once its calls have been counted, after the batch and
                // while the snapshot runs. Measured on 9.0.20 and 10.0.12 (about one run in two):
                // the instrumented tier (TieredPGO) of Pair`2<int64,int32>::.ctor, recorded after
                // the snapshot had begun, and in a rundown taken 3 s later at the same start. So a
                // body missing from the snapshot must be one recorded after it began, and a later
                // body (code version) of a method whose first body is in it.
                if b.body.module.as_deref() == Some("Attach.dll") {
                    let first_in_rundown = snap.bodies.iter().any(|s| s.function_id == b.body.function_id);
                    assert!(!before_snapshot.contains(&key) && b.index >= 1 && first_in_rundown, "{}: token 0x{:08X} (body {} of its method) is not in the rundown", rt.version, b.body.token, b.index);
                }
                continue;
            };
            assert_eq!((&b.body.map, b.body.code_size), (&s.map, s.code_size), "{}: {:?}", rt.version, s.name);
            compared += 1;
        }
        // Bodies from before the attach (enumerated) and after it (JITCompilationFinished).
        let when = |name: &str| {
            let s = snap.bodies.iter().find(|b| b.name.as_deref() == Some(name)).unwrap_or_else(|| panic!("{}: {name} in the rundown", rt.version));
            let key = (s.function_id.unwrap(), s.start.unwrap());
            c.bodies.iter().find(|b| (b.body.function_id.unwrap(), b.body.start.unwrap()) == key).unwrap_or_else(|| panic!("{}: {name} not captured", rt.version)).before_attach
        };
        assert!(when("Attach::Before"), "{}: Attach::Before is from before the attach", rt.version);
        assert!(!when("Attach::After"), "{}: Attach::After is from after the attach", rt.version);
        let before = c.bodies.iter().filter(|b| b.before_attach).count();
        println!(
            "{}: profile --pid: {} bodies ({before} before the attach, {} after); {compared} maps equal to the rundown's for the same code start",
            rt.version,
            c.bodies.len(),
            c.bodies.len() - before
        );
        assert!(compared >= 100, "{}: {compared} compared", rt.version);
        // Attached again to the same process: a second recording as whole as the first.
        let again = dll.with_file_name("again.capture");
        let _ = std::fs::remove_file(&again);
        let mut cli = profile_pid(&bin, target.pid(), &again);
        wait_for_attach(&rt.version, &again, &mut cli);
        support::run(Command::new("kill").args(["-INT", &cli.id().to_string()]));
        let status = wait_timeout(&mut cli, TIMEOUT * 2).unwrap_or_else(|| panic!("{}: the second profile --pid did not stop", rt.version));
        assert!(status.success(), "{}: {status:?}: {}", rt.version, stderr_of(&mut cli));
        // Everything the first recording saw was jitted before the second attach.
        let second = clrmap::capture::read_capture(&std::fs::read(&again).unwrap()).unwrap();
        let enumerated: std::collections::HashSet<(u64, u64)> = second.bodies.iter().filter(|b| b.before_attach).map(|b| (b.body.function_id.unwrap(), b.body.start.unwrap())).collect();
        let missing = c.bodies.iter().filter(|b| !enumerated.contains(&(b.body.function_id.unwrap(), b.body.start.unwrap()))).count();
        assert_eq!(missing, 0, "{}: {missing} bodies of the first recording not enumerated by the second attach ({} enumerated)", rt.version, enumerated.len());
        // Detached, the program runs on: same output, same status as without the attach.
        target.command("jit");
        target.expect("jitted");
        let (out, status) = target.exit_output();
        assert_eq!((out, status.code()), (plain_out.clone(), plain_status.code()), "{}", rt.version);

        // Attached until the program exits by itself.
        let mut target = Target::start(rt, &dll, None);
        let capture = dll.with_file_name("until-exit.capture");
        let _ = std::fs::remove_file(&capture);
        let mut cli = profile_pid(&bin, target.pid(), &capture);
        wait_for_attach(&rt.version, &capture, &mut cli);
        for _ in 0..2 {
            target.command("jit");
            target.expect("jitted");
        }
        let (out, status) = target.exit_output();
        assert_eq!((out, status.code()), (plain_out.clone(), plain_status.code()), "{}", rt.version);
        let status = wait_timeout(&mut cli, TIMEOUT).unwrap_or_else(|| panic!("{}: profile --pid did not end with the process", rt.version));
        let err = stderr_of(&mut cli);
        assert!(status.success() && err.contains("the process exited"), "{}: {status:?}: {err}", rt.version);
        let c = clrmap::capture::read_capture(&std::fs::read(&capture).unwrap()).unwrap();
        assert!(c.bodies.iter().any(|b| !b.before_attach), "{}: bodies after the attach", rt.version);

        // `clrmap` killed while attached: the profiler sees its pid gone and detaches by itself.
        let mut target = Target::start(rt, &dll, None);
        let capture = dll.with_file_name("orphaned.capture");
        let _ = std::fs::remove_file(&capture);
        let mut cli = profile_pid(&bin, target.pid(), &capture);
        wait_for_attach(&rt.version, &capture, &mut cli);
        cli.kill().unwrap();
        let _ = cli.wait();
        let t = Instant::now();
        while !clrmap::capture::read_capture(&std::fs::read(&capture).unwrap()).unwrap().ended.contains(&target.pid()) {
            assert!(t.elapsed() < TIMEOUT, "{}: the profiler did not detach after clrmap was killed", rt.version);
            std::thread::sleep(Duration::from_millis(50));
        }
        for _ in 0..2 {
            target.command("jit");
            target.expect("jitted");
        }
        let (out, status) = target.exit_output();
        assert_eq!((out, status.code()), (plain_out.clone(), plain_status.code()), "{}", rt.version);

        // A process that already has a profiler (here, clrmap's own from launch): the runtime's
        // refusal, with its HRESULT, in its own status; the process is not disturbed.
        let so = profiler_path();
        let launch = dll.with_file_name("launch.capture");
        let _ = std::fs::remove_file(&launch);
        let target = Target::start(rt, &dll, Some((&so, &launch)));
        let refused = dll.with_file_name("refused.capture");
        let o = Command::new(&bin).args(["profile", "--pid", &target.pid().to_string(), "-o"]).arg(&refused).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(8), "{}: {err}", rt.version);
        assert!(err.contains("0x8013136A") && err.contains("already loaded"), "{}: {err}", rt.version);
        let (out, status) = target.exit_output();
        assert_eq!((out[0].as_str(), status.code()), (plain_out[0].as_str(), Some(0)), "{}", rt.version);
    }
}

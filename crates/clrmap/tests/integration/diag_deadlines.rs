//! The diagnostics client's deadlines and cancel flag, through the library API, against the fake
//! server (`clrmap::diag::fake`) at the socket of a live process (a `sleep`): every call ends by
//! its timeout, a stop flag ends a session that is still connecting, a second stop abandons a
//! rundown that never ends, and a stream closed early is `Closed` while the process lives.

use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clrmap::diag::fake::{Behavior, FakeServer};
use clrmap::diag::{self, Client, CollectControl, DiagErrorKind, EndReason, SessionConfig};

struct Target {
    sleep: Child,
    server: FakeServer,
    dir: std::path::PathBuf,
}

impl Target {
    fn new(name: &str, behavior: Behavior) -> Target {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("diag-deadlines-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sleep = Command::new("sleep").arg("300").env("TMPDIR", &dir).spawn().unwrap();
        // Until its exec is through, /proc shows no environment (no TMPDIR) of the new program.
        let t = Instant::now();
        while diag::proc_cmdline(sleep.id()).is_none() {
            assert!(t.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(2));
        }
        let key = diag::start_key(sleep.id()).unwrap();
        let server = FakeServer::start(dir.join(format!("dotnet-diagnostic-{}-{key}-socket", sleep.id())), behavior).unwrap();
        Target { sleep, server, dir }
    }

    fn client(&self, timeout: Duration) -> Client {
        Client::for_pid(self.sleep.id(), timeout).unwrap()
    }

    fn file(&self) -> std::fs::File {
        std::fs::File::options().read(true).write(true).create(true).truncate(true).open(self.dir.join("out.nettrace")).unwrap()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.sleep.kill();
        let _ = self.sleep.wait();
    }
}

fn within<T>(limit: Duration, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    assert!(t.elapsed() < limit, "took {:?}", t.elapsed());
    r
}

#[test]
fn every_call_ends_by_its_timeout() {
    let short = Duration::from_millis(400);
    for (name, behavior) in [("never", Behavior::NeverAccept), ("trickle", Behavior::Trickle(Duration::from_millis(100)))] {
        let t = Target::new(&format!("calls-{name}"), behavior);
        let c = t.client(short);
        assert_eq!(within(Duration::from_secs(1), || c.process_info()).unwrap_err().kind, DiagErrorKind::Timeout, "{name}");
        assert_eq!(within(Duration::from_secs(1), || diag::Session::start(&c, &SessionConfig::default())).unwrap_err().kind, DiagErrorKind::Timeout, "{name}");
        assert_eq!(within(Duration::from_secs(1), || diag::snapshot_client(&c)).unwrap_err().kind, DiagErrorKind::Timeout, "{name}");
        assert_eq!(within(Duration::from_secs(1), || c.connect().map(drop)).map_err(|e| e.kind), if name == "never" { Err(DiagErrorKind::Timeout) } else { Ok(()) });
    }
    let t = Target::new("calls-endless", Behavior::EndlessStream);
    assert_eq!(within(Duration::from_secs(1), || diag::snapshot_client(&t.client(short))).unwrap_err().kind, DiagErrorKind::Timeout);
}

#[test]
fn a_stop_while_connecting_is_interrupted() {
    let t = Target::new("stop-connect", Behavior::NeverAccept);
    let stop = AtomicBool::new(false);
    let control = CollectControl { deadline: None, stop: &stop, poll: Duration::from_millis(50) };
    let e = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::SeqCst);
        });
        within(Duration::from_secs(1), || diag::collect(&t.client(Duration::from_secs(60)), &SessionConfig::default(), &mut t.file(), &control, &mut |_| {}))
    });
    assert_eq!(e.unwrap_err().kind, DiagErrorKind::Interrupted);
}

#[test]
fn a_second_stop_abandons_an_endless_rundown() {
    let t = Target::new("second-stop", Behavior::EndlessStream);
    let stop = AtomicBool::new(false);
    let control = CollectControl { deadline: None, stop: &stop, poll: Duration::from_millis(50) };
    let c = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::SeqCst);
            // collect takes the first request (clears the flag), then sees the second.
            let t = Instant::now();
            while stop.load(Ordering::SeqCst) {
                assert!(t.elapsed() < Duration::from_secs(2), "the first stop was never taken");
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::SeqCst);
        });
        within(Duration::from_secs(2), || diag::collect(&t.client(Duration::from_secs(60)), &SessionConfig::default(), &mut t.file(), &control, &mut |_| {}))
    })
    .unwrap();
    assert_eq!(c.reason, EndReason::Interrupted);
    assert!(c.written > 0 && !c.complete, "{c:?}");
    // Without a second stop, the rundown ends at the client's timeout.
    let control = CollectControl { deadline: Some(Instant::now() + Duration::from_millis(200)), stop: &AtomicBool::new(false), poll: Duration::from_millis(50) };
    let c = within(Duration::from_secs(2), || diag::collect(&t.client(Duration::from_millis(500)), &SessionConfig::default(), &mut t.file(), &control, &mut |_| {})).unwrap();
    assert_eq!(c.reason, EndReason::Timeout);
}

#[test]
fn a_stream_closed_by_a_live_process_is_closed_not_target_exited() {
    let t = Target::new("closed", Behavior::CloseStreamEarly);
    let stop = AtomicBool::new(false);
    let control = CollectControl { deadline: None, stop: &stop, poll: Duration::from_millis(50) };
    let c = within(Duration::from_secs(2), || diag::collect(&t.client(Duration::from_secs(5)), &SessionConfig::default(), &mut t.file(), &control, &mut |_| {})).unwrap();
    assert_eq!(c.reason, EndReason::Closed);
    assert_eq!(diag::snapshot_client(&t.client(Duration::from_secs(5))).unwrap_err().kind, DiagErrorKind::Protocol);
    // The same stream from a process that has exited: target_exited, and the snapshot keeps what
    // came, with a warning (the socket is asked by path: the pid is gone).
    let path = t.server.path().to_owned();
    let mut t = t;
    let _ = t.sleep.kill();
    let _ = t.sleep.wait();
    let by_path = Client::connect_path(&path, Duration::from_secs(5));
    let c = diag::collect(&by_path, &SessionConfig::default(), &mut t.file(), &control, &mut |_| {}).unwrap();
    assert_eq!(c.reason, EndReason::TargetExited);
    let snap = diag::snapshot_client(&by_path).unwrap();
    assert_eq!(snap.warnings.len(), 1);
}

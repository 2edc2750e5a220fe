//! The reverse diagnostics port (dotnet/diagnostics `ipc-protocol.md`, "Advertise"): a runtime
//! started with `DOTNET_DiagnosticPorts=<path>,connect,suspend` (.NET 5 and later) connects to a
//! socket we listen on, sends a 34-byte advertisement (`ADVR_V1\0`, its runtime cookie, its pid,
//! two reserved bytes), and then takes one ordinary diagnostics command on that connection. After
//! each command it connects again. With `suspend`, it waits in start-up, before any managed code
//! runs, until a ResumeRuntime command (Process command set, 0x04 0x01) comes: a session started
//! first sees the whole run. CoreCLR 3.1 does not read `DOTNET_DiagnosticPorts` and never connects.
//!
//! Every wait has a deadline: a runtime that never connects, a peer that sends junk or nothing
//! instead of the advertisement, all end in an error, never a hang.

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::bounded::{Bounded, Limit};
use super::ipc::{self, Message};
use super::{DiagError, DiagErrorKind};

/// The advertisement's magic.
pub const ADVERTISE_MAGIC: &[u8; 8] = b"ADVR_V1\0";
/// The advertisement's size: magic, cookie (16), pid (u64), reserved (u16).
pub const ADVERTISE_LEN: usize = 34;

/// How long the reverse server waits between looks at its listening socket.
const ACCEPT_POLL: Duration = Duration::from_millis(5);

/// What a runtime says when it connects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Advertise {
    /// The runtime instance cookie (a GUID, in its in-memory layout).
    pub cookie: [u8; 16],
    /// The runtime's process id (in its own pid namespace).
    pub pid: u64,
}

/// Parse an advertisement: exactly [`ADVERTISE_LEN`] bytes starting with [`ADVERTISE_MAGIC`].
pub fn parse_advertise(bytes: &[u8]) -> Result<Advertise, DiagError> {
    let junk = || {
        let shown: String = bytes.iter().take(16).map(|&b| if b.is_ascii_graphic() { char::from(b) } else { '.' }).collect();
        DiagError::new(DiagErrorKind::Protocol, format!("the peer sent {shown:?}, not a runtime's ADVR_V1 advertisement"))
    };
    if bytes.len() != ADVERTISE_LEN || bytes.get(..8) != Some(ADVERTISE_MAGIC.as_slice()) {
        return Err(junk());
    }
    let cookie = bytes.get(8..24).and_then(|b| <[u8; 16]>::try_from(b).ok()).ok_or_else(junk)?;
    let pid = bytes.get(24..32).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_le_bytes).ok_or_else(junk)?;
    Ok(Advertise { cookie, pid })
}

/// A socket runtimes connect to: made in a new private directory (mode 0700) under `$TMPDIR` (else
/// `/tmp`), removed with it on drop.
#[derive(Debug)]
pub struct ReverseServer {
    listener: UnixListener,
    dir: PathBuf,
    path: PathBuf,
    pub(super) timeout: Duration,
    /// A connection of the traced runtime taken by [`ReverseServer::resume_others`]'s thread.
    parked: Mutex<Option<(u64, UnixStream)>>,
}

impl ReverseServer {
    /// Listen on a new socket. `timeout` bounds each command exchanged later (a reply, a
    /// reconnection).
    pub fn bind(timeout: Duration) -> Result<Arc<ReverseServer>, DiagError> {
        ReverseServer::bind_in(&super::tmp_dir(), timeout)
    }

    /// [`ReverseServer::bind`] under `parent`.
    pub fn bind_in(parent: &Path, timeout: Duration) -> Result<Arc<ReverseServer>, DiagError> {
        use std::os::unix::fs::DirBuilderExt;
        let io = |what: String| move |e: std::io::Error| DiagError::new(DiagErrorKind::Io, format!("{what}: {e}"));
        let mut dir = None;
        for attempt in 0..16u32 {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
            let candidate = parent.join(format!("clrmap-port-{}-{:08x}", std::process::id(), nanos.wrapping_add(attempt)));
            match std::fs::DirBuilder::new().mode(0o700).create(&candidate) {
                Ok(()) => {
                    dir = Some(candidate);
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io(format!("cannot make a directory in {}", parent.display()))(e)),
            }
        }
        let dir = dir.ok_or_else(|| DiagError::new(DiagErrorKind::Io, format!("cannot make a new directory in {}", parent.display())))?;
        let path = dir.join("port");
        let listener = match UnixListener::bind(&path).and_then(|l| l.set_nonblocking(true).map(|()| l)) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(io(format!("cannot listen on {}", path.display()))(e));
            }
        };
        Ok(Arc::new(ReverseServer { listener, dir, path, timeout, parked: Mutex::new(None) }))
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The value of `DOTNET_DiagnosticPorts` that makes a runtime connect here and wait for
    /// ResumeRuntime: `<path>,connect,suspend`.
    pub fn env_value(&self) -> String {
        format!("{},connect,suspend", self.path.display())
    }

    /// One look at the listening socket: a connection and its advertisement (read within
    /// `limit`), or `None` when nobody is waiting. A peer that sends anything but an
    /// advertisement is a `protocol` error.
    fn try_accept(&self, limit: &Limit<'_>) -> Result<Option<(UnixStream, Advertise)>, DiagError> {
        let mut stream = match self.listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => return Ok(None),
            Err(e) => return Err(DiagError::new(DiagErrorKind::Io, format!("accepting on {}: {e}", self.path.display()))),
        };
        stream.set_nonblocking(false).map_err(|e| DiagError::new(DiagErrorKind::Io, format!("accepting a connection: {e}")))?;
        let mut bytes = [0u8; ADVERTISE_LEN];
        let mut got = 0usize;
        Bounded::new(&mut stream, *limit, "the runtime's advertisement").run(|s| {
            while let Some(rest) = bytes.get_mut(got..).filter(|r| !r.is_empty()) {
                let n = s.read(rest).map_err(|e| ipc::read_error(&e, "the runtime's advertisement"))?;
                if n == 0 {
                    break;
                }
                got = got.saturating_add(n);
            }
            Ok(())
        })?;
        let adv = parse_advertise(bytes.get(..got).unwrap_or(&[])).map_err(|e| DiagError::new(e.kind, format!("a peer of {}: {}", self.path.display(), e.message)))?;
        Ok(Some((stream, adv)))
    }

    /// The next runtime that connects, and its advertisement, within `limit`; `check` is called
    /// between looks (every few milliseconds) and ends the wait with its error (a child that
    /// exited, say). A peer that sends anything but an advertisement is a `protocol` error.
    pub fn accept(&self, limit: &Limit<'_>, check: &mut dyn FnMut() -> Result<(), DiagError>) -> Result<(UnixStream, Advertise), DiagError> {
        let what = format!("waiting for a .NET runtime to connect to {}", self.path.display());
        loop {
            check()?;
            if let Some(found) = self.try_accept(limit)? {
                return Ok(found);
            }
            let left = limit.slice(&what)?;
            std::thread::sleep(left.min(ACCEPT_POLL));
        }
    }

    /// The connection of process `pid` that [`ReverseServer::resume_others`] set aside, if any.
    fn take_parked(&self, pid: u64) -> Option<UnixStream> {
        let mut parked = self.parked.lock().ok()?;
        match parked.take() {
            Some((p, stream)) if p == pid => Some(stream),
            other => {
                *parked = other;
                None
            }
        }
    }

    /// The next connection of the runtime of process `pid`, within `limit`. Another runtime that
    /// connects meanwhile (one the traced app started, which inherited `DOTNET_DiagnosticPorts`)
    /// is resumed and let go, so it does not stay suspended.
    pub fn accept_from(&self, pid: u64, limit: &Limit<'_>, check: &mut dyn FnMut() -> Result<(), DiagError>) -> Result<UnixStream, DiagError> {
        let what = format!("waiting for process {pid}'s runtime to connect to {}", self.path.display());
        loop {
            check()?;
            if let Some(stream) = self.take_parked(pid) {
                return Ok(stream);
            }
            match self.try_accept(limit)? {
                Some((stream, adv)) if adv.pid == pid => return Ok(stream),
                Some((mut stream, adv)) => {
                    let short = Limit::new(Duration::from_secs(1).min(self.timeout), limit.cancel);
                    let _ = resume_on(&mut stream, &short, &format!("process {}", adv.pid));
                }
                None => {
                    let left = limit.slice(&what)?;
                    std::thread::sleep(left.min(ACCEPT_POLL));
                }
            }
        }
    }

    /// Send ResumeRuntime to the runtime of process `pid` on its next connection, within `limit`.
    pub fn resume(&self, pid: u64, limit: &Limit<'_>, check: &mut dyn FnMut() -> Result<(), DiagError>) -> Result<(), DiagError> {
        let mut stream = self.accept_from(pid, limit, check)?;
        resume_on(&mut stream, limit, &format!("process {pid}"))
    }

    /// While the returned guard lives, a thread takes every connection: another runtime (one the
    /// traced app started, which inherited `DOTNET_DiagnosticPorts` and waits suspended) is
    /// resumed at once; the newest connection of process `pid` is set aside for the next
    /// command to it ([`ReverseServer::accept_from`] takes it); a peer that is not a runtime is
    /// dropped. Dropping the guard stops the thread (within a few milliseconds).
    pub fn resume_others(self: &Arc<Self>, pid: u64) -> OthersGuard {
        let stop = Arc::new(AtomicBool::new(false));
        let (server, flag) = (Arc::clone(self), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("clrmap-reverse-port".to_owned())
            .spawn(move || {
                while !flag.load(Ordering::SeqCst) {
                    let limit = Limit::new(Duration::from_secs(1).min(server.timeout), Some(&flag));
                    match server.try_accept(&limit) {
                        Ok(Some((stream, adv))) if adv.pid == pid => {
                            if let Ok(mut parked) = server.parked.lock() {
                                *parked = Some((pid, stream));
                            }
                        }
                        Ok(Some((mut stream, adv))) => {
                            let _ = resume_on(&mut stream, &limit, &format!("process {}", adv.pid));
                        }
                        Ok(None) | Err(_) => std::thread::sleep(ACCEPT_POLL.saturating_mul(4)),
                    }
                }
            })
            .ok();
        OthersGuard { stop, thread }
    }
}

/// Stops [`ReverseServer::resume_others`]'s thread when dropped.
#[derive(Debug)]
pub struct OthersGuard {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for OthersGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ReverseServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// ResumeRuntime (0x04 0x01) on this connection, and its reply.
fn resume_on(stream: &mut UnixStream, limit: &Limit<'_>, peer: &str) -> Result<(), DiagError> {
    let what = format!("ResumeRuntime to {peer}");
    let reply = Bounded::new(stream, *limit, &what).run(|s| {
        ipc::send(s, &Message { command_set: 0x04, command_id: 0x01, payload: Vec::new() })?;
        ipc::receive(s)
    })?;
    ipc::expect_ok(reply, "ResumeRuntime").map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn advert(pid: u64) -> Vec<u8> {
        let mut v = ADVERTISE_MAGIC.to_vec();
        v.extend([7u8; 16]);
        v.extend(pid.to_le_bytes());
        v.extend([0u8; 2]);
        v
    }

    #[test]
    fn advertisements_parse_and_junk_is_refused() {
        assert_eq!(parse_advertise(&advert(42)).unwrap(), Advertise { cookie: [7; 16], pid: 42 });
        assert_eq!(parse_advertise(&advert(42)[..33]).unwrap_err().kind, DiagErrorKind::Protocol);
        assert_eq!(parse_advertise(b"GET / HTTP/1.1\r\n\r\n0123456789abcdef").unwrap_err().kind, DiagErrorKind::Protocol);
        assert_eq!(parse_advertise(&[]).unwrap_err().kind, DiagErrorKind::Protocol);
    }

    #[test]
    fn a_server_removes_its_socket_and_directory() {
        let parent = std::env::temp_dir();
        let server = ReverseServer::bind_in(&parent, Duration::from_secs(1)).unwrap();
        let (path, dir) = (server.path().to_owned(), server.dir.clone());
        assert!(server.env_value().ends_with(",connect,suspend"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        drop(server);
        assert!(!path.exists() && !dir.exists());
    }

    #[test]
    fn hostile_peers_end_in_errors_within_the_deadline() {
        let server = ReverseServer::bind_in(&std::env::temp_dir(), Duration::from_secs(1)).unwrap();
        // Nobody connects: timeout.
        let t = std::time::Instant::now();
        let e = server.accept(&Limit::new(Duration::from_millis(200), None), &mut || Ok(())).unwrap_err();
        assert_eq!(e.kind, DiagErrorKind::Timeout, "{e}");
        assert!(t.elapsed() < Duration::from_secs(2));
        // Junk: protocol.
        let mut c = UnixStream::connect(server.path()).unwrap();
        c.write_all(b"HTTP/1.1 200 OK\r\n\r\nhello there, runtime").unwrap();
        let e = server.accept(&Limit::new(Duration::from_secs(2), None), &mut || Ok(())).unwrap_err();
        assert_eq!(e.kind, DiagErrorKind::Protocol, "{e}");
        // Connects and says nothing: timeout.
        let _silent = UnixStream::connect(server.path()).unwrap();
        let e = server.accept(&Limit::new(Duration::from_millis(300), None), &mut || Ok(())).unwrap_err();
        assert_eq!(e.kind, DiagErrorKind::Timeout, "{e}");
        // A check that fails ends the wait with its error.
        let e = server.accept(&Limit::new(Duration::from_secs(5), None), &mut || Err(DiagError::new(DiagErrorKind::TargetExited, "gone"))).unwrap_err();
        assert_eq!(e.kind, DiagErrorKind::TargetExited);
    }

    #[test]
    fn another_runtime_is_resumed_and_the_wanted_one_returned() {
        let server = ReverseServer::bind_in(&std::env::temp_dir(), Duration::from_secs(2)).unwrap();
        let path = server.path().to_owned();
        let other = std::thread::spawn({
            let path = path.clone();
            move || {
                let mut c = UnixStream::connect(&path).unwrap();
                c.write_all(&advert(7)).unwrap();
                let m = ipc::receive(&mut c).unwrap();
                ipc::send(&mut c, &Message { command_set: 0xFF, command_id: 0x00, payload: 0u32.to_le_bytes().to_vec() }).unwrap();
                (m.command_set, m.command_id)
            }
        });
        // Let the other runtime connect first.
        std::thread::sleep(Duration::from_millis(100));
        let wanted = std::thread::spawn(move || {
            let mut c = UnixStream::connect(&path).unwrap();
            c.write_all(&advert(42)).unwrap();
            let m = ipc::receive(&mut c).unwrap();
            ipc::send(&mut c, &Message { command_set: 0xFF, command_id: 0x00, payload: Vec::new() }).unwrap();
            (m.command_set, m.command_id)
        });
        server.resume(42, &Limit::new(Duration::from_secs(5), None), &mut || Ok(())).unwrap();
        assert_eq!(other.join().unwrap(), (0x04, 0x01));
        assert_eq!(wanted.join().unwrap(), (0x04, 0x01));
    }

    #[test]
    fn while_a_session_runs_others_are_resumed_at_once_and_the_traced_runtime_waits() {
        let server = ReverseServer::bind_in(&std::env::temp_dir(), Duration::from_secs(2)).unwrap();
        let guard = server.resume_others(42);
        let path = server.path().to_owned();
        // Another runtime, nobody asking for connections: resumed by the guard's thread.
        let mut c = UnixStream::connect(&path).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(&advert(7)).unwrap();
        let m = ipc::receive(&mut c).unwrap();
        assert_eq!((m.command_set, m.command_id), (0x04, 0x01));
        ipc::send(&mut c, &Message { command_set: 0xFF, command_id: 0x00, payload: Vec::new() }).unwrap();
        // A junk peer does not stop the thread.
        UnixStream::connect(&path).unwrap().write_all(b"junk junk junk junk junk junk junk").unwrap();
        // The traced runtime's connection is set aside, and given to the next command to it.
        let mut t = UnixStream::connect(&path).unwrap();
        t.write_all(&advert(42)).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let mut got = server.accept_from(42, &Limit::new(Duration::from_secs(5), None), &mut || Ok(())).unwrap();
        got.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        t.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
        let start = std::time::Instant::now();
        drop(guard);
        assert!(start.elapsed() < Duration::from_secs(2));
    }
}

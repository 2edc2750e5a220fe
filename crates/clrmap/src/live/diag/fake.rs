//! A fake diagnostics server, for tests: a well-behaved one (a small valid session that ends after
//! StopTracing) and the hostile peers a client must survive without hanging: one that never
//! accepts (its queue of pending connections full, so a connect blocks), one that answers a byte
//! at a time, one whose session streams forever, one that sends a valid start and then nothing,
//! one that closes the stream early, and one that speaks something else. Not a stable API.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::ipc;

/// How the fake server behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    /// Like a .NET 8 runtime: ProcessInfo2, and a session whose stream (a valid nettrace with no
    /// events) ends with its end tag after StopTracing.
    Runtime,
    /// Listens and never accepts; its queue of pending connections is full, so a blocking connect
    /// blocks (a stopped process).
    NeverAccept,
    /// Like [`Behavior::Runtime`], every byte of every reply and stream one interval apart.
    Trickle(Duration),
    /// Answers CollectTracing2, then streams valid blocks forever, StopTracing or not.
    EndlessStream,
    /// Answers CollectTracing2, sends the start of a valid stream, then nothing (the connection
    /// stays open).
    PrefixThenSilence,
    /// Answers CollectTracing2, sends the start of a valid stream, then closes it (the process
    /// lives on).
    CloseStreamEarly,
    /// Answers every request with bytes that are not the protocol.
    Garbage,
}

/// A running fake server; dropping it stops it and removes its socket.
#[derive(Debug)]
pub struct FakeServer {
    path: PathBuf,
    done: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    accept: Option<JoinHandle<()>>,
    /// [`Behavior::NeverAccept`]: the listener and the connections that fill its queue.
    held: Vec<OwnedFd>,
}

/// The session id the fake hands out.
pub const SESSION_ID: u64 = 0x5E55;

impl FakeServer {
    /// Listen at `path` (an existing file there is replaced).
    pub fn start(path: impl Into<PathBuf>, behavior: Behavior) -> std::io::Result<FakeServer> {
        let path = path.into();
        let _ = std::fs::remove_file(&path);
        let done = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        if behavior == Behavior::NeverAccept {
            let held = never_accept(&path)?;
            return Ok(FakeServer { path, done, accepted, accept: None, held });
        }
        let listener = UnixListener::bind(&path)?;
        listener.set_nonblocking(true)?;
        let (d, a) = (Arc::clone(&done), Arc::clone(&accepted));
        let accept = std::thread::spawn(move || {
            let stop_requested = Arc::new(AtomicBool::new(false));
            while !d.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        a.fetch_add(1, Ordering::SeqCst);
                        let (d, s) = (Arc::clone(&d), Arc::clone(&stop_requested));
                        std::thread::spawn(move || serve(conn, behavior, &d, &s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(FakeServer { path, done, accepted, accept: Some(accept), held: Vec::new() })
    }

    /// The socket.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        self.held.clear();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A listener with a queue of one pending connection, filled: a blocking connect to it blocks,
/// a non-blocking one fails with EAGAIN.
fn never_accept(path: &Path) -> std::io::Result<Vec<OwnedFd>> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let addr = SocketAddrUnix::new(path)?;
    let listener = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    rustix::net::bind(&listener, &addr)?;
    rustix::net::listen(&listener, 0)?;
    let mut held = vec![listener];
    for _ in 0..64 {
        let c = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC, None)?;
        match rustix::net::connect(&c, &addr) {
            Ok(()) => held.push(c),
            Err(rustix::io::Errno::AGAIN) => return Ok(held),
            Err(e) => return Err(e.into()),
        }
    }
    Err(std::io::Error::other("the listen queue never filled"))
}

/// Writes to the client, a byte at a time when trickling, until the server stops or the client
/// goes away (then `false`). Follows the stream offset for block padding.
struct Out<'a> {
    conn: &'a mut UnixStream,
    trickle: Option<Duration>,
    done: &'a AtomicBool,
    offset: u64,
}

impl Out<'_> {
    fn put(&mut self, bytes: &[u8]) -> bool {
        let ok = match self.trickle {
            None => write_all(self.conn, bytes, self.done),
            Some(gap) => bytes.iter().all(|b| write_all(self.conn, std::slice::from_ref(b), self.done) && pause(gap, self.done)),
        };
        self.offset = self.offset.saturating_add(bytes.len() as u64);
        ok
    }

    /// A nettrace object: its type (named `name`), then for a block its i32 size, padding to a
    /// 4-byte stream offset and body; for `Trace`, the 48-byte Trace body.
    fn object(&mut self, name: &[u8], body: &[u8]) -> bool {
        let mut v = vec![5u8, 5, 1];
        // The versions the runtimes write (and the newest read): Trace 4, blocks 2.
        let version: i32 = if name == b"Trace" { 4 } else { 2 };
        v.extend_from_slice(&version.to_le_bytes());
        v.extend_from_slice(&version.to_le_bytes());
        v.extend_from_slice(&i32::try_from(name.len()).unwrap_or(0).to_le_bytes());
        v.extend_from_slice(name);
        v.push(6);
        if name != b"Trace" {
            v.extend_from_slice(&i32::try_from(body.len()).unwrap_or(0).to_le_bytes());
            let at = self.offset.saturating_add(v.len() as u64);
            let pad = 4u64.wrapping_sub(at % 4) % 4;
            v.extend(std::iter::repeat_n(0u8, usize::try_from(pad).unwrap_or(0)));
        }
        v.extend_from_slice(body);
        v.push(6);
        self.put(&v)
    }

    /// The stream's start: the prelude, the Trace object and one empty block.
    fn stream_start(&mut self) -> bool {
        self.offset = 0;
        let mut trace = [0u8; 48];
        // pointerSize 8, processId.
        if let Some(size) = trace.get_mut(32..36) {
            size.copy_from_slice(&8i32.to_le_bytes());
        }
        if let Some(pid) = trace.get_mut(36..40) {
            pid.copy_from_slice(&std::process::id().to_le_bytes());
        }
        self.put(b"Nettrace\x14\x00\x00\x00!FastSerialization.1") && self.object(b"Trace", &trace) && self.object(b"SPBlock", &[0; 64])
    }
}

fn pause(d: Duration, done: &AtomicBool) -> bool {
    let step = Duration::from_millis(20);
    let mut left = d;
    while !left.is_zero() {
        if done.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(left.min(step));
        left = left.saturating_sub(step);
    }
    !done.load(Ordering::SeqCst)
}

fn write_all(conn: &mut UnixStream, mut bytes: &[u8], done: &AtomicBool) -> bool {
    let _ = conn.set_write_timeout(Some(Duration::from_millis(100)));
    while !bytes.is_empty() {
        if done.load(Ordering::SeqCst) {
            return false;
        }
        match conn.write(bytes) {
            Ok(0) => return false,
            Ok(n) => bytes = bytes.get(n..).unwrap_or(&[]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => {}
            Err(_) => return false,
        }
    }
    true
}

/// One request: its command set and id (the payload is read and dropped).
fn request(conn: &mut UnixStream, done: &AtomicBool) -> Option<(u8, u8)> {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    let mut header = [0u8; ipc::HEADER_LEN];
    let mut got = 0usize;
    while got < header.len() {
        if done.load(Ordering::SeqCst) {
            return None;
        }
        match conn.read(header.get_mut(got..)?) {
            Ok(0) => return None,
            Ok(n) => got = got.saturating_add(n),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => {}
            Err(_) => return None,
        }
    }
    let size = u16::from_le_bytes([*header.get(14)?, *header.get(15)?]);
    let mut rest = vec![0u8; usize::from(size).saturating_sub(ipc::HEADER_LEN)];
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    conn.read_exact(&mut rest).ok()?;
    Some((*header.get(16)?, *header.get(17)?))
}

fn reply(command_id: u8, payload: &[u8]) -> Vec<u8> {
    ipc::Message { command_set: ipc::SERVER, command_id, payload: payload.to_vec() }.encode().unwrap_or_default()
}

fn serve(mut conn: UnixStream, behavior: Behavior, done: &AtomicBool, stop_requested: &AtomicBool) {
    let Some((set, id)) = request(&mut conn, done) else { return };
    let trickle = match behavior {
        Behavior::Trickle(gap) => Some(gap),
        _ => None,
    };
    let mut out = Out { conn: &mut conn, trickle, done, offset: 0 };
    if behavior == Behavior::Garbage {
        out.put(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    match (set, id) {
        (0x04, 0x04 | 0x00) => {
            let mut p = ipc::Payload::default();
            p.u64(u64::from(std::process::id())).raw(&[0x42; 16]).string("fake-dotnet App.dll").string("Linux").string("x64");
            if id == 0x04 {
                p.string("App").string("8.0.0-fake");
            }
            out.put(&reply(ipc::OK, &p.0));
        }
        (0x02, 0x01) => {
            stop_requested.store(true, Ordering::SeqCst);
            out.put(&reply(ipc::OK, &SESSION_ID.to_le_bytes()));
        }
        (0x02, 0x03) => {
            // A new session: an earlier one's stop is not this one's.
            stop_requested.store(false, Ordering::SeqCst);
            if !out.put(&reply(ipc::OK, &SESSION_ID.to_le_bytes())) || !out.stream_start() {
                return;
            }
            match behavior {
                Behavior::EndlessStream => {
                    // About 6 MB/s of valid blocks, until the server stops or the client goes.
                    let body = vec![0u8; 1 << 16];
                    while out.object(b"SPBlock", &body) && pause(Duration::from_millis(10), done) {}
                }
                Behavior::PrefixThenSilence => while pause(Duration::from_millis(100), done) {},
                Behavior::CloseStreamEarly => {}
                _ => {
                    while !stop_requested.load(Ordering::SeqCst) && pause(Duration::from_millis(10), done) {}
                    let _ = out.object(b"SPBlock", &[0; 64]) && out.put(&[1]);
                }
            }
        }
        _ => {
            out.put(&reply(ipc::ERROR, &ipc::E_UNKNOWN_COMMAND.to_le_bytes()));
        }
    }
}

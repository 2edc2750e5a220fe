//! One deadline per exchange, connect included, and a flag that cancels it: a connect that never
//! completes (a full listen queue), a peer that sends one byte a second, or a stream that never
//! ends all stop at the deadline, and a Ctrl-C handler's flag stops them within [`CANCEL_POLL`].

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{DiagError, DiagErrorKind};

/// How often a cancel flag is looked at while waiting.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(50);

/// When an exchange must end, and what cancels it before then.
#[derive(Clone, Copy, Debug)]
pub struct Limit<'a> {
    /// The exchange fails with `timeout` at this instant.
    pub deadline: Instant,
    /// The whole time it was given (for messages).
    pub budget: Duration,
    /// When this becomes true, the exchange fails with `interrupted`.
    pub cancel: Option<&'a AtomicBool>,
}

impl<'a> Limit<'a> {
    /// An exchange that may take `budget` from now.
    pub fn new(budget: Duration, cancel: Option<&'a AtomicBool>) -> Self {
        let now = Instant::now();
        // A budget past what an Instant holds is a day: never in practice.
        let deadline = now.checked_add(budget).or_else(|| now.checked_add(Duration::from_secs(86_400))).unwrap_or(now);
        Limit { deadline, budget, cancel }
    }

    /// True when the cancel flag is set.
    pub fn cancelled(&self) -> bool {
        self.cancel.is_some_and(|c| c.load(Ordering::SeqCst))
    }

    /// The time left, or why there is none: `interrupted` when cancelled, `timeout` (naming `what`)
    /// at the deadline.
    pub fn left(&self, what: &str) -> Result<Duration, DiagError> {
        if self.cancelled() {
            return Err(DiagError::new(DiagErrorKind::Interrupted, format!("interrupted while {what}")));
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(DiagError::new(DiagErrorKind::Timeout, format!("{what}: not done within {}", show(self.budget))));
        }
        Ok(left)
    }

    /// How long the next blocking call may wait: the time left, in slices of `CANCEL_POLL` when
    /// a cancel flag is watched; at least 1 ms.
    pub fn slice(&self, what: &str) -> Result<Duration, DiagError> {
        let left = self.left(what)?;
        let left = if self.cancel.is_some() { left.min(CANCEL_POLL) } else { left };
        Ok(left.max(Duration::from_millis(1)))
    }
}

/// A duration as a person writes it: `2s`, `500ms`, `1.5s`.
pub(crate) fn show(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else if d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Connect to the Unix socket at `path` within `limit`. The connect does not block: a server whose
/// queue of pending connections is full (a process that is stopped, or never accepts) is retried
/// until the deadline, then `timeout`. Read and write timeouts are left unset (each exchange sets
/// its own).
pub fn connect(path: &Path, limit: &Limit<'_>) -> Result<UnixStream, DiagError> {
    use rustix::io::Errno;
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let addr = SocketAddrUnix::new(path).map_err(|e| DiagError::new(DiagErrorKind::Io, format!("cannot connect to {}: {e}", path.display())))?;
    let fd = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC, None)
        .map_err(|e| DiagError::new(DiagErrorKind::Io, format!("cannot create a socket: {e}")))?;
    let mut pause = Duration::from_millis(1);
    loop {
        match rustix::net::connect(&fd, &addr) {
            Ok(()) | Err(Errno::ISCONN) => break,
            Err(Errno::INTR) => continue,
            // A Unix socket's listen queue is full (EAGAIN); INPROGRESS and ALREADY are what
            // other socket kinds say while a connect is under way.
            Err(Errno::AGAIN | Errno::INPROGRESS | Errno::ALREADY) => {
                let what = format!("connecting to {}: the process accepts no connection (its queue of pending connections is full: is it stopped, for example in a debugger?)", path.display());
                let left = limit.slice(&what)?;
                std::thread::sleep(pause.min(left));
                pause = pause.saturating_mul(2).min(Duration::from_millis(20));
            }
            Err(e) => {
                let e = std::io::Error::from(e);
                return Err(connect_error(path, &e));
            }
        }
    }
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(false).map_err(|e| DiagError::new(DiagErrorKind::Io, format!("cannot connect to {}: {e}", path.display())))?;
    Ok(stream)
}

fn connect_error(path: &Path, e: &std::io::Error) -> DiagError {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::PermissionDenied => DiagError::new(DiagErrorKind::PermissionDenied, format!("cannot open {}: {e} (the process belongs to another user: run as that user or as root)", path.display())),
        K::NotFound | K::ConnectionRefused => {
            DiagError::new(DiagErrorKind::NotDotnet, format!("nothing listens on {} ({e}): the process has exited or stopped its diagnostics server", path.display()))
        }
        _ => DiagError::new(DiagErrorKind::Io, format!("cannot connect to {}: {e}", path.display())),
    }
}

/// A stream whose every read and write ends by the limit's deadline (or its cancel flag): a peer
/// that trickles bytes cannot stretch an exchange past it. Why it stopped is kept in `failed`,
/// so the caller reports `timeout` or `interrupted` rather than the I/O error it saw.
#[derive(Debug)]
pub struct Bounded<'s, 'a> {
    stream: &'s mut UnixStream,
    limit: Limit<'a>,
    what: &'s str,
    /// Set when the limit ended a read or write.
    pub failed: Option<DiagError>,
}

impl<'s, 'a> Bounded<'s, 'a> {
    /// `stream` within `limit`; `what` names the exchange in a timeout's message.
    pub fn new(stream: &'s mut UnixStream, limit: Limit<'a>, what: &'s str) -> Self {
        Bounded { stream, limit, what, failed: None }
    }

    fn stop(&mut self, e: DiagError) -> std::io::Error {
        let kind = if e.kind == DiagErrorKind::Timeout { std::io::ErrorKind::TimedOut } else { std::io::ErrorKind::Other };
        let io = std::io::Error::new(kind, e.message.clone());
        self.failed = Some(e);
        io
    }

    /// The result of `f` over this stream, with the limit's error in place of the I/O error it
    /// caused.
    pub fn run<T>(mut self, f: impl FnOnce(&mut Self) -> Result<T, DiagError>) -> Result<T, DiagError> {
        let r = f(&mut self);
        match (r, self.failed) {
            (Err(_), Some(e)) => Err(e),
            (r, _) => r,
        }
    }
}

impl Read for Bounded<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let wait = match self.limit.slice(self.what) {
                Ok(w) => w,
                Err(e) => return Err(self.stop(e)),
            };
            self.stream.set_read_timeout(Some(wait))?;
            match self.stream.read(buf) {
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => continue,
                r => return r,
            }
        }
    }
}

impl Write for Bounded<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        loop {
            let wait = match self.limit.slice(self.what) {
                Ok(w) => w,
                Err(e) => return Err(self.stop(e)),
            };
            self.stream.set_write_timeout(Some(wait))?;
            match self.stream.write(buf) {
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => continue,
                r => return r,
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_written() {
        assert_eq!(show(Duration::from_secs(2)), "2s");
        assert_eq!(show(Duration::from_millis(500)), "500ms");
        assert_eq!(show(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn a_trickling_peer_cannot_stretch_an_exchange() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            for _ in 0..20 {
                if b.write_all(b"x").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let t = Instant::now();
        let limit = Limit::new(Duration::from_millis(300), None);
        let mut buf = [0u8; 20];
        let e = Bounded::new(&mut a, limit, "a reply").run(|s| s.read_exact(&mut buf).map_err(|e| super::super::ipc::read_error(&e, "a reply"))).unwrap_err();
        assert_eq!(e.kind, DiagErrorKind::Timeout, "{e}");
        assert!(t.elapsed() < Duration::from_millis(900), "{:?}", t.elapsed());
        drop(a);
        writer.join().unwrap();
    }

    #[test]
    fn a_cancel_flag_ends_a_wait_at_once() {
        let (mut a, _b) = UnixStream::pair().unwrap();
        let flag = AtomicBool::new(false);
        let t = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                flag.store(true, Ordering::SeqCst);
            });
            let limit = Limit::new(Duration::from_secs(30), Some(&flag));
            let mut buf = [0u8; 4];
            let e = Bounded::new(&mut a, limit, "a reply").run(|s| s.read_exact(&mut buf).map_err(|e| super::super::ipc::read_error(&e, "a reply"))).unwrap_err();
            assert_eq!(e.kind, DiagErrorKind::Interrupted, "{e}");
        });
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
}

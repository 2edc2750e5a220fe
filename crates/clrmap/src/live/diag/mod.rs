//! A client of the .NET diagnostics port (dotnet/diagnostics `ipc-protocol.md`; docs/attach.md#the-protocol-as-measured):
//! find a running process's socket, ask it who it is, and stream an EventPipe trace from it, with
//! the rundown that gives the maps of every method jitted before the attach. No restart, no
//! environment variables in the target.
//!
//! * [`socket_path`] and [`list_processes`]: where a process listens, and every process that does.
//! * [`Client`]: one process's diagnostics server; [`Client::process_info`] (ProcessInfo2 on .NET
//!   6+, ProcessInfo on 5+; 3.1 answers neither).
//! * [`Session`]: CollectTracing2 with the rundown flag; [`Stopper`] sends StopTracing on a second
//!   connection. [`collect`] streams a session to a file and leaves a valid trace however it ends.
//! * [`snapshot`]: a session started and stopped at once, its stream decoded in memory as it
//!   arrives: every jitted method's map, as a trace source for the symbolizer.
//!
//! Every exchange, connect included, has one deadline: a server that never accepts, answers one
//! byte at a time, goes silent or streams forever ends in `timeout`, never in a hang. A cancel flag
//! (a Ctrl-C handler's) ends a wait within 50 ms. A process that dies mid-session ends the
//! session: what it sent whole is kept. Errors carry a stable [`DiagErrorKind`].

mod bounded;
mod discover;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod fake;
pub mod ipc;
mod reverse;
mod session;

use std::fmt;
use std::io::{Seek, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use bounded::{connect as connect_within, Bounded, Limit};
pub use discover::{exited, list_sockets, mapped_runtime_version, parse_socket_name, parse_start_key, proc_cmdline, rich_debug_info_enabled, socket_path, start_key, tmp_dir};
pub use reverse::{parse_advertise, Advertise, OthersGuard, ReverseServer, ADVERTISE_LEN, ADVERTISE_MAGIC};
pub use session::{
    start_suspended, Chunk, Framer, Provider, Session, SessionConfig, SessionReader, Stopper, BUFFERING_MODE_BLOCK, DEFAULT_RUNDOWN_KEYWORDS, JIT_SYMBOLS_KEYWORDS, LEVEL_VERBOSE,
    METHOD_NAMING_KEYWORDS, SAMPLE_PROFILER, SAMPLE_PROFILER_KEYWORDS,
};

use crate::answers::symbolizer::{OpenedSource, SourceKind};

/// How long a process whose socket refused or cut the connection is watched for its exit.
const EXIT_GRACE: Duration = Duration::from_millis(300);

/// The default timeout of an exchange (a connect and a request's reply; a whole snapshot).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// What went wrong, stably named (`as_str`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiagErrorKind {
    /// No process has this pid.
    NoSuchProcess,
    /// The process has no diagnostics socket (not .NET, or diagnostics disabled), or nothing
    /// listens on it any more.
    NotDotnet,
    /// The socket (or the process's `/proc` entry) belongs to another user.
    PermissionDenied,
    /// The runtime does not know the command (`CORDIAGIPC_E_UNKNOWN_COMMAND`): it is too old.
    UnsupportedCommand,
    /// The runtime answered with another error HRESULT.
    ServerError,
    /// The peer does not speak the diagnostics protocol (or the stream is not a nettrace).
    Protocol,
    /// Nothing came within the timeout.
    Timeout,
    /// A bad request from the caller (a provider list that does not parse).
    BadArgument,
    /// Another I/O error.
    Io,
    /// The process exited (or was killed) before it answered.
    TargetExited,
    /// The caller's cancel flag (a Ctrl-C handler's) ended the exchange.
    Interrupted,
}

impl DiagErrorKind {
    /// The stable name: `no_such_process`, `not_dotnet`, `permission_denied`,
    /// `unsupported_command`, `server_error`, `protocol`, `timeout`, `bad_argument`, `io`,
    /// `target_exited`, `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagErrorKind::NoSuchProcess => "no_such_process",
            DiagErrorKind::NotDotnet => "not_dotnet",
            DiagErrorKind::PermissionDenied => "permission_denied",
            DiagErrorKind::UnsupportedCommand => "unsupported_command",
            DiagErrorKind::ServerError => "server_error",
            DiagErrorKind::Protocol => "protocol",
            DiagErrorKind::Timeout => "timeout",
            DiagErrorKind::BadArgument => "bad_argument",
            DiagErrorKind::Io => "io",
            DiagErrorKind::TargetExited => "target_exited",
            DiagErrorKind::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for DiagErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A diagnostics-port error: a kind, what happened, and the runtime's HRESULT when it sent one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiagError {
    /// The kind.
    pub kind: DiagErrorKind,
    /// What happened.
    pub message: String,
    /// The HRESULT of an error reply.
    pub hresult: Option<u32>,
}

impl DiagError {
    /// An error of this kind.
    pub fn new(kind: DiagErrorKind, message: impl Into<String>) -> Self {
        DiagError { kind, message: message.into(), hresult: None }
    }
    /// With the runtime's HRESULT.
    pub fn with_hresult(mut self, hr: u32) -> Self {
        self.hresult = Some(hr);
        self
    }
}

impl fmt::Display for DiagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for DiagError {}

/// Connect to a diagnostics socket within `timeout`, with `timeout` on every read and write.
fn open_socket(path: &Path, timeout: Duration) -> Result<UnixStream, DiagError> {
    let stream = bounded::connect(path, &Limit::new(timeout, None))?;
    let t = Some(timeout.max(Duration::from_millis(1)));
    stream.set_read_timeout(t).and_then(|()| stream.set_write_timeout(t)).map_err(|e| DiagError::new(DiagErrorKind::Io, e.to_string()))?;
    Ok(stream)
}

/// One process's diagnostics server.
#[derive(Clone, Debug)]
pub struct Client {
    path: PathBuf,
    timeout: Duration,
    pid: Option<u32>,
}

/// What ProcessInfo / ProcessInfo2 answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    /// The pid in the process's own namespace.
    pub pid: u64,
    /// The runtime cookie (a GUID).
    pub runtime_cookie: [u8; 16],
    /// The command line.
    pub command_line: String,
    /// `Linux`, ...
    pub os: String,
    /// `x64`, `arm64`, ...
    pub arch: String,
    /// The entry assembly's name (ProcessInfo2, .NET 6+).
    pub entrypoint_assembly: Option<String>,
    /// The CLR product version (ProcessInfo2, .NET 6+).
    pub runtime_version: Option<String>,
}

impl Client {
    /// The server of process `pid`, found by [`socket_path`].
    pub fn for_pid(pid: u32, timeout: Duration) -> Result<Client, DiagError> {
        Ok(Client { path: socket_path(pid)?, timeout, pid: Some(pid) })
    }

    /// The server at an explicit socket path.
    pub fn connect_path(path: impl Into<PathBuf>, timeout: Duration) -> Client {
        Client { path: path.into(), timeout, pid: None }
    }

    /// The socket.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The timeout of every exchange: a connect and a reply, each a whole.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The pid, when the client was made [`Client::for_pid`].
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// A new connection (each command takes one), made within the timeout, with the timeout on
    /// every read and write.
    pub fn connect(&self) -> Result<UnixStream, DiagError> {
        open_socket(&self.path, self.timeout).map_err(|e| self.explain(e))
    }

    /// A new connection made within `limit` (no read or write timeout set).
    pub fn connect_until(&self, limit: &Limit<'_>) -> Result<UnixStream, DiagError> {
        bounded::connect(&self.path, limit).map_err(|e| self.explain(e))
    }

    /// Whose server this is, for messages: `process 42` or the socket's path.
    pub fn peer(&self) -> String {
        match self.pid {
            Some(pid) => format!("process {pid}"),
            None => self.path.display().to_string(),
        }
    }

    /// A connection refused or closed without a reply, by a process that is gone (or a zombie):
    /// `target_exited`.
    pub fn explain(&self, e: DiagError) -> DiagError {
        let Some(pid) = self.pid else { return e };
        if !matches!(e.kind, DiagErrorKind::Protocol | DiagErrorKind::NotDotnet | DiagErrorKind::Io) {
            return e;
        }
        // A process being killed closes its socket before it is a zombie: a refused or cut
        // connection of a process that then ends within a moment is its exit, not a non-.NET
        // process (measured on 3.1.23 after SIGKILL).
        if exits_soon(pid) {
            return DiagError::new(DiagErrorKind::TargetExited, format!("process {pid} exited ({})", e.message));
        }
        e
    }

    /// One command and its reply's payload, on a connection of its own.
    pub fn request(&self, command_set: u8, command_id: u8, payload: Vec<u8>, name: &str) -> Result<Vec<u8>, DiagError> {
        self.request_within(self.timeout, command_set, command_id, payload, name)
    }

    /// [`Client::request`] with a timeout of its own for the whole exchange (a command the
    /// runtime answers only after work of its own, such as AttachProfiler).
    fn request_within(&self, timeout: Duration, command_set: u8, command_id: u8, payload: Vec<u8>, name: &str) -> Result<Vec<u8>, DiagError> {
        self.request_until(&Limit::new(timeout, None), command_set, command_id, payload, name)
    }

    /// One command and its reply's payload, on a connection of its own, all of it (connect,
    /// request, reply) within `limit`.
    pub fn request_until(&self, limit: &Limit<'_>, command_set: u8, command_id: u8, payload: Vec<u8>, name: &str) -> Result<Vec<u8>, DiagError> {
        let mut stream = self.connect_until(limit)?;
        let what = format!("{name} to {}", self.peer());
        let reply = Bounded::new(&mut stream, *limit, &what)
            .run(|s| {
                ipc::send(s, &ipc::Message { command_set, command_id, payload })?;
                ipc::receive(s)
            })
            .map_err(|e| self.explain(e))?;
        ipc::expect_ok(reply, name)
    }

    /// ProcessInfo2 (0x04 0x04), else ProcessInfo (0x04 0x00). CoreCLR 3.1 knows neither:
    /// `unsupported_command` with HRESULT 0x80131385. Both requests together take at most the
    /// timeout.
    pub fn process_info(&self) -> Result<ProcessInfo, DiagError> {
        self.process_info_until(&Limit::new(self.timeout, None))
    }

    /// [`Client::process_info`] within `limit`.
    pub fn process_info_until(&self, limit: &Limit<'_>) -> Result<ProcessInfo, DiagError> {
        let (payload, v2) = match self.request_until(limit, 0x04, 0x04, Vec::new(), "ProcessInfo2") {
            Ok(p) => (p, true),
            Err(e) if e.kind == DiagErrorKind::UnsupportedCommand => (self.request_until(limit, 0x04, 0x00, Vec::new(), "ProcessInfo")?, false),
            Err(e) => return Err(e),
        };
        let mut f = ipc::Fields::new(&payload);
        let pid = f.u64("the process id")?;
        let mut runtime_cookie = [0u8; 16];
        runtime_cookie.copy_from_slice(f.bytes(16, "the runtime cookie")?);
        let command_line = f.string("the command line")?;
        let os = f.string("the OS")?;
        let arch = f.string("the architecture")?;
        let (entrypoint_assembly, runtime_version) = if v2 { (Some(f.string("the entry assembly")?), Some(f.string("the CLR version")?)) } else { (None, None) };
        Ok(ProcessInfo { pid, runtime_cookie, command_line, os, arch, entrypoint_assembly, runtime_version })
    }
}

/// The runtime's answer to a request it cannot serve yet (DS_IPC_E_NOT_YET_AVAILABLE, the value of
/// CORPROF_E_NOT_YET_AVAILABLE; dotnet/runtime's ds-protocol.h).
const NOT_YET_AVAILABLE: u32 = 0x8013_135B;

impl Client {
    /// AttachProfiler (command set 0x03, id 0x01; ipc-protocol.md): load the profiler at `path`
    /// (a path as the target process sees it) with COM class `clsid` (a GUID in its in-memory
    /// layout) into the running process, which calls its `InitializeForAttach` with
    /// `client_data`. `attach_timeout` is how long the runtime may wait for that; the reply is
    /// awaited that long plus this client's timeout. The reply's HRESULT is the runtime's answer.
    ///
    /// A runtime still starting answers NOT_YET_AVAILABLE (0x8013135B, measured on 8.0.31 and
    /// 9.0.20 right after their diagnostics socket appears): the request is sent again every
    /// 100 ms until this client's timeout has passed, then that answer is the error.
    pub fn attach_profiler(&self, attach_timeout: Duration, clsid: [u8; 16], path: &str, client_data: &[u8]) -> Result<(), DiagError> {
        let deadline = std::time::Instant::now().checked_add(self.timeout);
        loop {
            match self.attach_profiler_once(attach_timeout, clsid, path, client_data) {
                Err(e) if e.hresult == Some(NOT_YET_AVAILABLE) && deadline.is_some_and(|d| std::time::Instant::now() < d) => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                other => return other,
            }
        }
    }

    fn attach_profiler_once(&self, attach_timeout: Duration, clsid: [u8; 16], path: &str, client_data: &[u8]) -> Result<(), DiagError> {
        let mut payload = ipc::Payload::default();
        let ms = u32::try_from(attach_timeout.as_millis()).unwrap_or(u32::MAX);
        payload.u32(ms).raw(&clsid).string(path).array(client_data);
        let reply = self.request_within(self.timeout.saturating_add(attach_timeout), 0x03, 0x01, payload.0, "AttachProfiler")?;
        // An OK reply carries the HRESULT of the attach itself.
        match reply.get(..4) {
            Some(&[a, b, c, d]) if u32::from_le_bytes([a, b, c, d]) != 0 => {
                let hr = u32::from_le_bytes([a, b, c, d]);
                Err(DiagError::new(DiagErrorKind::ServerError, format!("the runtime could not attach the profiler (HRESULT 0x{hr:08X})")).with_hresult(hr))
            }
            _ => Ok(()),
        }
    }
}

/// A GUID's text form (`{8C0F4F8E-6A3B-4C1E-9D2A-5B7E3C1F0A11}`, braces optional) in its
/// in-memory layout: Data1..Data3 little-endian, then Data4's eight bytes.
pub fn guid_bytes(text: &str) -> Option<[u8; 16]> {
    let hex: String = text.trim().trim_start_matches('{').trim_end_matches('}').chars().filter(|&c| c != '-').collect();
    if hex.len() != 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut b = [0u8; 16];
    for (slot, pair) in b.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *slot = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    // Data1 (4 bytes), Data2 and Data3 (2 each) are stored little-endian.
    b.get_mut(0..4)?.reverse();
    b.get_mut(4..6)?.reverse();
    b.get_mut(6..8)?.reverse();
    Some(b)
}

/// One .NET process found by [`list_processes`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DotnetProcess {
    /// The pid.
    pub pid: u32,
    /// Its diagnostics socket.
    pub socket: PathBuf,
    /// Its command line: the runtime's answer, else `/proc/{pid}/cmdline`.
    pub command_line: Option<String>,
    /// The runtime version, when the runtime answers ProcessInfo2 (.NET 6+).
    pub runtime_version: Option<String>,
    /// The version directory of the `libcoreclr.so` it mapped, when readable.
    pub mapped_runtime: Option<String>,
    /// Why the runtime did not answer, if it did not.
    pub error: Option<DiagError>,
}

/// How many processes [`list_processes`] asks at once.
const LIST_PARALLEL: usize = 16;

/// Every live .NET process with a diagnostics socket in `$TMPDIR` or `/tmp`, asked who it is,
/// sorted by pid. Each process has `timeout` for its whole answer (connect included), and up to
/// 16 are asked at once, so processes that do not answer (stopped ones, say) cost one timeout
/// per 16, not one each.
pub fn list_processes(timeout: Duration) -> Vec<DotnetProcess> {
    let ask = |(pid, socket): (u32, PathBuf)| {
        let client = Client { path: socket.clone(), timeout, pid: Some(pid) };
        let (info, error) = match client.process_info() {
            Ok(i) => (Some(i), None),
            Err(e) => (None, Some(e)),
        };
        let runtime_version = info.as_ref().and_then(|i| i.runtime_version.clone());
        let command_line = info.map(|i| i.command_line).filter(|c| !c.is_empty()).or_else(|| proc_cmdline(pid));
        DotnetProcess { pid, socket, command_line, runtime_version, mapped_runtime: mapped_runtime_version(pid), error }
    };
    let sockets = list_sockets();
    let mut out = Vec::with_capacity(sockets.len());
    for group in sockets.chunks(LIST_PARALLEL) {
        std::thread::scope(|scope| {
            // A thread that cannot be made (a memory limit) leaves its process to this one.
            let handles: Vec<_> = group.iter().map(|s| (s, std::thread::Builder::new().spawn_scoped(scope, || ask(s.clone())).ok())).collect();
            for (s, h) in handles {
                let asked = match h {
                    Some(h) => h.join().ok(),
                    None => None,
                };
                out.push(asked.unwrap_or_else(|| ask(s.clone())));
            }
        });
    }
    out
}

/// How a collected session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// Stopped by us (StopTracing): the stream carries the rundown.
    Stopped,
    /// The stream ended before we asked, and the process exited (or was killed).
    TargetExited,
    /// The stream ended before we asked while the process still runs (the runtime ended the
    /// session; for example another tool stopped it).
    Closed,
    /// After StopTracing, the stream did not end within the timeout (the rundown is cut there).
    Timeout,
    /// The StopTracing request failed (`Collected::stop_error` says why); the stream was cut there.
    StopFailed,
    /// A second stop request came while the rundown streamed: it was abandoned at once.
    Interrupted,
}

/// What [`collect`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collected {
    /// The session id.
    pub session_id: u64,
    /// Bytes received.
    pub received: u64,
    /// Bytes in the file: up to the last whole block, plus the closing tag.
    pub written: u64,
    /// True when the runtime closed the stream itself (its final tag came).
    pub complete: bool,
    /// Why it ended.
    pub reason: EndReason,
    /// A StopTracing that failed (the session had ended already, say).
    pub stop_error: Option<DiagError>,
}

/// When to stop a [`collect`]: a deadline, and a flag polled every `poll` (a Ctrl-C handler's).
#[derive(Debug)]
pub struct CollectControl<'a> {
    /// Stop at this instant.
    pub deadline: Option<Instant>,
    /// Stop when this becomes true. [`collect`] clears it when it begins the stop, so setting it
    /// again (a second Ctrl-C) abandons the rundown at once. Set while the session is being
    /// started, it ends [`collect`] with `interrupted`.
    pub stop: &'a AtomicBool,
    /// How often to look at `stop` and the deadline while the stream is idle.
    pub poll: Duration,
}

/// Send SIGTERM to process `pid` (a child the caller started: `std::process::Child::kill` sends
/// only SIGKILL). False when there is no such process or the signal was refused.
pub fn terminate(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return false };
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_ok()
}

/// Whether process `pid` ends within [`EXIT_GRACE`] (a process being killed closes its sockets
/// before it is a zombie).
fn exits_soon(pid: u32) -> bool {
    let watching = Instant::now();
    loop {
        if discover::exited(pid) {
            return true;
        }
        if watching.elapsed() >= EXIT_GRACE {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stream a session into `out` as bytes arrive, until the control says stop (then StopTracing,
/// and the rundown is read to the stream's end, for at most the client's timeout) or the process
/// goes away. Starting the session (connect included) takes at most the client's timeout, and a
/// stop request meanwhile ends it with `interrupted`. However it ends once started, `out` is left
/// a valid trace: cut after the last whole block and closed with the NullReference tag.
/// `progress` gets the bytes received so far after each write.
pub fn collect(client: &Client, config: &SessionConfig, out: &mut std::fs::File, control: &CollectControl<'_>, progress: &mut dyn FnMut(u64)) -> Result<Collected, DiagError> {
    let session = Session::start_until(client, config, &Limit::new(client.timeout(), Some(control.stop)))?;
    collect_session(session, client.pid(), client.timeout(), out, control, progress)
}

/// [`collect`] of a session started already (for example by [`start_suspended`]): `pid` is the
/// process whose exit ends the stream (the end is then [`EndReason::TargetExited`]), `timeout`
/// bounds the stop request and the rundown after it.
pub fn collect_session(
    mut session: Session,
    pid: Option<u32>,
    timeout: Duration,
    out: &mut std::fs::File,
    control: &CollectControl<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<Collected, DiagError> {
    let io = |e: std::io::Error| DiagError::new(DiagErrorKind::Io, format!("writing the trace: {e}"));
    let session_id = session.id();
    let mut stopper = session.stopper();
    let mut framer = Framer::default();
    let mut buf = vec![0u8; 1 << 16];
    // When the stop began; the rundown must end within the timeout after it.
    let mut stopped_at: Option<Instant> = None;
    let mut stop_error = None;
    let reason = loop {
        match stopped_at {
            None if control.stop.load(Ordering::SeqCst) || control.deadline.is_some_and(|d| Instant::now() >= d) => {
                // The request is taken: a second one abandons the rundown.
                control.stop.store(false, Ordering::SeqCst);
                stopped_at = Some(Instant::now());
                match stopper.send_until(&Limit::new(timeout, Some(control.stop))) {
                    Ok(()) => {}
                    // The session is over already; the stream says so.
                    Err(e) if e.kind == DiagErrorKind::NotDotnet => {}
                    Err(e) if e.kind == DiagErrorKind::Interrupted => break EndReason::Interrupted,
                    Err(e) => {
                        stop_error = Some(e);
                        break EndReason::StopFailed;
                    }
                }
            }
            Some(_) if control.stop.load(Ordering::SeqCst) => break EndReason::Interrupted,
            _ => {}
        }
        let wait = match stopped_at {
            Some(at) => {
                let left = timeout.saturating_sub(at.elapsed());
                if left.is_zero() {
                    break EndReason::Timeout;
                }
                left.min(control.poll)
            }
            None => control.poll,
        };
        match session.read_some(&mut buf, wait)? {
            Chunk::Data(n) => {
                let data = buf.get(..n).unwrap_or(&[]);
                framer.feed(data);
                if let Some(f) = framer.fault() {
                    return Err(DiagError::new(DiagErrorKind::Protocol, format!("the session's stream is not a nettrace: {f}")));
                }
                out.write_all(data).map_err(io)?;
                progress(framer.offset());
            }
            Chunk::Idle => {}
            Chunk::End if stopped_at.is_some() => break EndReason::Stopped,
            Chunk::End => match pid {
                Some(pid) if !exits_soon(pid) => break EndReason::Closed,
                _ => break EndReason::TargetExited,
            },
        }
    };
    if stopped_at.is_some() && stop_error.is_none() && reason == EndReason::Stopped {
        // The stream has ended: the reply is there, or the session was over already.
        let left = timeout.min(Duration::from_secs(1));
        stop_error = stopper.finish_until(&Limit::new(left, Some(control.stop))).err();
    }
    let complete = framer.complete();
    let written = if complete {
        framer.offset()
    } else {
        // Keep every whole block and close the container, so the file reads as a whole trace.
        let whole = framer.whole();
        out.flush().map_err(io)?;
        out.set_len(whole).map_err(io)?;
        out.seek(std::io::SeekFrom::Start(whole)).map_err(io)?;
        if whole > 0 {
            out.write_all(&[1]).map_err(io)?;
            whole.saturating_add(1)
        } else {
            0
        }
    };
    out.flush().map_err(io)?;
    Ok(Collected { session_id, received: framer.offset(), written, complete, reason, stop_error })
}

/// Every jitted method's map in a running process, now: a session with rundown, stopped at once,
/// its stream decoded as it arrives (memory follows one block, not the stream). Methods jitted
/// before the attach come from the rundown (DCEnd events and their maps). `timeout` bounds the
/// whole snapshot: connect, requests and the whole stream; a server that answers slowly, goes
/// silent or streams forever ends in `timeout`. A process that dies meanwhile leaves what it sent
/// whole, and a warning; a stream that ends early while the process lives is a `protocol` error.
pub fn snapshot(pid: u32, timeout: Duration) -> Result<OpenedSource, DiagError> {
    snapshot_client(&Client::for_pid(pid, timeout)?)
}

/// [`snapshot`] of the server at `client`, within its timeout.
pub fn snapshot_client(client: &Client) -> Result<OpenedSource, DiagError> {
    snapshot_until(client, &Limit::new(client.timeout(), None))
}

/// [`snapshot`] of the server at `client`, within `limit` (its cancel flag ends it with
/// `interrupted`).
pub fn snapshot_until(client: &Client, limit: &Limit<'_>) -> Result<OpenedSource, DiagError> {
    let session = Session::start_until(client, &SessionConfig::default(), limit)?;
    let mut stopper = session.stopper();
    stopper.send_until(limit)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, session.reader_until(*limit));
    let mut runtime_major = None;
    let mut pdbs = crate::answers::symbolizer::RecordedPdbs::new();
    let decoded = crate::formats::nettrace::read_code_bodies_partial_with(&mut reader, |e| {
        runtime_major = runtime_major.or_else(|| crate::formats::nettrace::runtime_information(e).and_then(|r| r.major()));
        crate::answers::symbolizer::note_recorded_pdb(e, &mut pdbs);
    });
    let ended = reader.get_ref().ended();
    if let Some(e) = ended {
        let n = reader.get_ref().received();
        let message = match e.kind {
            DiagErrorKind::Timeout => format!("the snapshot of {} did not end within {} ({n} bytes of its stream came)", client.peer(), bounded::show(limit.budget)),
            _ => format!("the snapshot of {}: {} ({n} bytes of its stream came)", client.peer(), e.message),
        };
        return Err(DiagError::new(e.kind, message));
    }
    let (bodies, warning) = decoded.map_err(|e| DiagError::new(DiagErrorKind::Protocol, format!("the session's stream is not a nettrace: {e}")))?;
    if let (Some(w), Some(pid)) = (warning.as_ref(), client.pid()) {
        if !exits_soon(pid) {
            return Err(DiagError::new(
                DiagErrorKind::Protocol,
                format!("process {pid} still runs, but the snapshot's stream ended after {} bytes, before its end tag ({w})", reader.get_ref().received()),
            ));
        }
    }
    // The stream has ended: the stop reply is moot unless nothing came at all.
    let _ = stopper.finish_until(&Limit::new(Duration::from_millis(100), limit.cancel));
    // A rundown carries no inline trees (8.0 enables only the rundown provider at rundown).
    Ok(OpenedSource {
        kind: SourceKind::Trace,
        bodies,
        image: None,
        warnings: warning.into_iter().collect(),
        runtime_major,
        pdbs,
        mvids: Default::default(),
        inlines: Default::default(),
        named: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_are_laid_out_as_in_memory() {
        // Data1..Data3 little-endian, Data4 as written (the GUID struct's layout).
        let b = guid_bytes("{8C0F4F8E-6A3B-4C1E-9D2A-5B7E3C1F0A11}").unwrap();
        assert_eq!(b, [0x8E, 0x4F, 0x0F, 0x8C, 0x3B, 0x6A, 0x1E, 0x4C, 0x9D, 0x2A, 0x5B, 0x7E, 0x3C, 0x1F, 0x0A, 0x11]);
        assert_eq!(guid_bytes("8c0f4f8e-6a3b-4c1e-9d2a-5b7e3c1f0a11"), Some(b));
        assert_eq!(guid_bytes("{8C0F4F8E-6A3B-4C1E-9D2A-5B7E3C1F0A1}"), None);
        assert_eq!(guid_bytes("{8C0F4F8E-6A3B-4C1E-9D2A-5B7E3C1F0A1G}"), None);
    }

    #[test]
    fn attach_profiler_payload() {
        let mut p = ipc::Payload::default();
        p.u32(10_000).raw(&[7; 16]).string("/p.so").array(b"{}");
        // u32 timeout, CLSID, u32 length in UTF-16 units with the NUL, UTF-16LE, u32 count, bytes.
        let mut want = 10_000u32.to_le_bytes().to_vec();
        want.extend([7; 16]);
        want.extend(6u32.to_le_bytes());
        want.extend("/p.so\0".encode_utf16().flat_map(u16::to_le_bytes));
        want.extend(2u32.to_le_bytes());
        want.extend(b"{}");
        assert_eq!(p.0, want);
    }
}

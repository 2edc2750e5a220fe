//! EventPipe sessions over the diagnostics port: CollectTracing2 (0x02 0x03) starts one and
//! streams a nettrace on the same connection; StopTracing (0x02 0x01), sent on a second connection,
//! makes the runtime write the rundown and end the stream. A lossless session
//! ([`SessionConfig::lossless`]) is asked with CollectTracing6 (0x02 0x07, .NET 11 and later) in
//! Block mode, where the runtime makes a writer wait for room rather than drop its event.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::bounded::{Bounded, Limit};
use super::ipc::{self, Message, Payload};
use super::reverse::{Advertise, ReverseServer};
use super::{Client, DiagError, DiagErrorKind};
pub use crate::formats::nettrace::Framer;

/// `Microsoft-Windows-DotNETRuntime` keywords: Loader 0x8, Jit 0x10, JittedMethodILToNativeMap
/// 0x20000: dotnet-trace's `JITSymbols` set (0x60098), which gives every jitted method's load
/// event and its IL map.
pub const JIT_SYMBOLS_KEYWORDS: u64 = 0x60098;
/// The runtime provider's MethodDiagnostic (0x40_0000_0000) and Type (0x80000) keywords: each
/// jitted method's MethodDetails, with a BulkType describing its type arguments, which name a
/// generic method's instantiation (`Pass<int32>`) that the method events leave out
/// (docs/names.md). Added to [`JIT_SYMBOLS_KEYWORDS`] by [`Provider::jit_symbols`].
pub const METHOD_NAMING_KEYWORDS: u64 = 0x40_0008_0000;
/// The private provider's JittedMethodRichDebugInfo keyword (event 189).
pub const RICH_DEBUG_INFO_KEYWORD: u64 = 0x40000;
/// The runtime provider's MethodDiagnostic (0x40_0000_0000: MethodDetails) and Type (0x80000:
/// BulkType) keywords, which name the inlinees of the JIT's inline trees.
pub const INLINE_RUNTIME_KEYWORDS: u64 = METHOD_NAMING_KEYWORDS;
/// Verbose.
pub const LEVEL_VERBOSE: u32 = 5;
/// The runtime's sampler: `Microsoft-DotNETCore-SampleProfiler` (ThreadSample events, a managed
/// stack per thread about every millisecond, on CoreCLR 3.0 and later).
pub const SAMPLE_PROFILER: &str = "Microsoft-DotNETCore-SampleProfiler";
/// The keywords dotnet-trace's `cpu-sampling` profile gives the sampler (it has no keywords of its
/// own; any enables it).
pub const SAMPLE_PROFILER_KEYWORDS: u64 = 0xF000_0000_0000;

/// One provider of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provider {
    /// Its name (`Microsoft-Windows-DotNETRuntime`).
    pub name: String,
    /// Keywords.
    pub keywords: u64,
    /// Level (0 always .. 5 verbose).
    pub level: u32,
    /// Filter data (`key=value;...`), if any.
    pub filter: Option<String>,
}

impl Provider {
    /// The runtime provider with the keywords that give IL maps and name every body
    /// ([`JIT_SYMBOLS_KEYWORDS`] and [`METHOD_NAMING_KEYWORDS`]: 0x40000E0098), verbose.
    pub fn jit_symbols() -> Self {
        Provider { name: crate::formats::nettrace::RUNTIME.to_owned(), keywords: JIT_SYMBOLS_KEYWORDS | METHOD_NAMING_KEYWORDS, level: LEVEL_VERBOSE, filter: None }
    }

    /// The runtime's sampler ([`SAMPLE_PROFILER`]), verbose.
    pub fn sample_profiler() -> Self {
        Provider { name: SAMPLE_PROFILER.to_owned(), keywords: SAMPLE_PROFILER_KEYWORDS, level: LEVEL_VERBOSE, filter: None }
    }

    /// What a CPU profile needs: the sampler's stacks, and on the runtime provider the JIT,
    /// loader, IL-map and naming keywords ([`Provider::jit_symbols`]) that map its addresses to methods and
    /// lines (with the rundown at stop for methods jitted before the session).
    pub fn cpu_sampling() -> Vec<Provider> {
        vec![Provider::jit_symbols(), Provider::sample_profiler()]
    }

    /// Add the sampler to a provider list ([`Provider::cpu_sampling`]): the runtime provider's
    /// keywords of [`Provider::jit_symbols`] are added to it (or it is added), its level raised to verbose, and
    /// the sampler added unless listed.
    pub fn add_cpu_sampling(providers: &mut Vec<Provider>) {
        for wanted in Provider::cpu_sampling() {
            match providers.iter_mut().find(|p| p.name == wanted.name) {
                Some(p) => {
                    p.keywords |= wanted.keywords;
                    p.level = p.level.max(wanted.level);
                }
                None => providers.push(wanted),
            }
        }
    }

    /// Add what the JIT's inline trees need (docs/rich-debug-info.md §1) to a provider list: the
    /// private provider's JittedMethodRichDebugInfo keyword (0x40000), and on the runtime
    /// provider MethodDiagnostic (0x4000000000, MethodDetails names the inlinees) and Type
    /// (0x80000, BulkType gives their types' modules), all verbose. Keywords are added to a
    /// provider already in the list, and its level raised to verbose.
    pub fn add_inline_trees(providers: &mut Vec<Provider>) {
        const PRIVATE: &str = "Microsoft-Windows-DotNETRuntimePrivate";
        for (name, keywords) in [(crate::formats::nettrace::RUNTIME, INLINE_RUNTIME_KEYWORDS), (PRIVATE, RICH_DEBUG_INFO_KEYWORD)] {
            match providers.iter_mut().find(|p| p.name == name) {
                Some(p) => {
                    p.keywords |= keywords;
                    p.level = p.level.max(LEVEL_VERBOSE);
                }
                None => providers.push(Provider { name: name.to_owned(), keywords, level: LEVEL_VERBOSE, filter: None }),
            }
        }
    }

    /// Parse a dotnet-trace provider list: `Name[:Keywords[:Level[:Filter]]]`, comma-separated;
    /// keywords in hex (`0x...` or bare hex), level as a number (default 5).
    pub fn parse_list(spec: &str) -> Result<Vec<Provider>, DiagError> {
        let bad = |what: String| DiagError::new(DiagErrorKind::BadArgument, what);
        let mut out = Vec::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let mut parts = item.splitn(4, ':');
            let name = parts.next().unwrap_or("").trim();
            if name.is_empty() {
                return Err(bad(format!("a provider name in {item:?}")));
            }
            let keywords = match parts.next().map(str::trim).filter(|s| !s.is_empty() && *s != "*") {
                None => u64::MAX,
                Some(k) => {
                    let hex = k.strip_prefix("0x").or_else(|| k.strip_prefix("0X")).unwrap_or(k);
                    u64::from_str_radix(hex, 16).map_err(|_| bad(format!("hex keywords in {item:?}, not {k:?}")))?
                }
            };
            let level = match parts.next().map(str::trim).filter(|s| !s.is_empty()) {
                None => LEVEL_VERBOSE,
                Some(l) => l.parse().ok().filter(|&l: &u32| l <= 5).ok_or_else(|| bad(format!("a level 0-5 in {item:?}, not {l:?}")))?,
            };
            let filter = parts.next().map(str::to_owned);
            out.push(Provider { name: name.to_owned(), keywords, level, filter });
        }
        if out.is_empty() {
            return Err(bad("at least one provider".to_owned()));
        }
        Ok(out)
    }
}

/// What a session asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// The runtime's circular buffer for this session, in MB.
    pub buffer_mb: u32,
    /// Ask for the rundown at stop (every loaded method's DCEnd event and map).
    pub rundown: bool,
    /// The providers.
    pub providers: Vec<Provider>,
    /// Ask for a lossless session: CollectTracing6 with the Block buffering mode (.NET 11 and
    /// later), in which a thread that writes an event waits for buffer room instead of the event
    /// being dropped. An older runtime does not know the command: the start then fails with
    /// `unsupported_command` ([`Session::start`]).
    pub lossless: bool,
}

impl Default for SessionConfig {
    /// IL maps: the runtime provider with [`JIT_SYMBOLS_KEYWORDS`] at level 5, rundown on, 256 MB.
    fn default() -> Self {
        SessionConfig { buffer_mb: 256, rundown: true, providers: vec![Provider::jit_symbols()], lossless: false }
    }
}

/// The rundown keywords CollectTracing2's rundown flag stands for (the runtime's default rundown
/// keyword: Loader, Jit, NGen, the unused 0x100, JittedMethodILToNativeMap and ThreadTransfer),
/// given explicitly by CollectTracing4 and later.
pub const DEFAULT_RUNDOWN_KEYWORDS: u64 = 0x8002_0139;
/// CollectTracing6's buffering mode that never drops an event (`Drop` is 0).
pub const BUFFERING_MODE_BLOCK: u32 = 1;

impl SessionConfig {
    /// The command that starts this session: (command id in the EventPipe set 0x02, its name).
    pub fn command(&self) -> (u8, &'static str) {
        if self.lossless {
            (0x07, "CollectTracing6")
        } else {
            (0x03, "CollectTracing2")
        }
    }

    /// The payload of [`SessionConfig::command`]: [`SessionConfig::payload`] or
    /// [`SessionConfig::payload6`].
    pub fn start_payload(&self) -> Vec<u8> {
        if self.lossless {
            self.payload6()
        } else {
            self.payload()
        }
    }

    /// The CollectTracing6 payload (dotnet/diagnostics' ipc-protocol; the runtime's
    /// ds-eventpipe-protocol): u32 session type (0, streamed over this connection), u32 buffer
    /// MB, u32 format (1 = nettrace), u64 rundown keywords (0 = no rundown), u8 stackwalk (1),
    /// providers as `u32 count` then `u64 keywords, u32 level, string name, string filter` and
    /// each provider's event filter (u8 enable 0, u32 count 0: every event), then u32 buffering
    /// mode ([`BUFFERING_MODE_BLOCK`]).
    pub fn payload6(&self) -> Vec<u8> {
        let mut p = Payload::default();
        p.u32(0).u32(self.buffer_mb).u32(1).u64(if self.rundown { DEFAULT_RUNDOWN_KEYWORDS } else { 0 }).u8(1);
        p.u32(u32::try_from(self.providers.len()).unwrap_or(u32::MAX));
        for pr in &self.providers {
            p.u64(pr.keywords).u32(pr.level).string(&pr.name).string(pr.filter.as_deref().unwrap_or(""));
            p.u8(0).u32(0);
        }
        p.u32(BUFFERING_MODE_BLOCK);
        p.0
    }

    /// The CollectTracing2 payload: u32 buffer MB, u32 format (1 = nettrace), u8 rundown,
    /// providers as `u32 count` then `u64 keywords, u32 level, string name, string filter`.
    pub fn payload(&self) -> Vec<u8> {
        let mut p = Payload::default();
        p.u32(self.buffer_mb).u32(1).u8(u8::from(self.rundown));
        p.u32(u32::try_from(self.providers.len()).unwrap_or(u32::MAX));
        for pr in &self.providers {
            p.u64(pr.keywords).u32(pr.level).string(&pr.name).string(pr.filter.as_deref().unwrap_or(""));
        }
        p.0
    }
}

/// One read of a session's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunk {
    /// This many bytes arrived.
    Data(usize),
    /// Nothing arrived within the wait.
    Idle,
    /// The stream ended: the session stopped, or the process went away.
    End,
}

/// Where a session's later commands (StopTracing) go: the runtime's own listening socket, or a
/// runtime that connects to us ([`ReverseServer`]: it reconnects after each command).
#[derive(Clone, Debug)]
pub(crate) enum Port {
    /// The runtime's socket.
    Path(PathBuf),
    /// A reverse server, and the pid of the runtime it serves.
    Reverse(Arc<ReverseServer>, u64),
}

impl Port {
    /// A new connection to the runtime within `limit`.
    fn connect(&self, limit: &Limit<'_>) -> Result<UnixStream, DiagError> {
        match self {
            Port::Path(p) => super::bounded::connect(p, limit),
            Port::Reverse(server, pid) => server.accept_from(*pid, limit, &mut || Ok(())),
        }
    }
}

/// A running EventPipe session: its stream, on the connection that started it.
#[derive(Debug)]
pub struct Session {
    stream: UnixStream,
    id: u64,
    port: Port,
    timeout: Duration,
}

impl Session {
    /// Start a session (CollectTracing2, or CollectTracing6 for a lossless one) and read the
    /// reply: the session id. The nettrace bytes follow on the same connection. Connect, request
    /// and reply take at most the client's timeout. A runtime that does not know CollectTracing6
    /// (before .NET 11) fails a lossless start with `unsupported_command`, saying so.
    pub fn start(client: &Client, config: &SessionConfig) -> Result<Session, DiagError> {
        Session::start_until(client, config, &Limit::new(client.timeout(), None))
    }

    /// [`Session::start`] within `limit`.
    pub fn start_until(client: &Client, config: &SessionConfig, limit: &Limit<'_>) -> Result<Session, DiagError> {
        let stream = client.connect_until(limit)?;
        Session::start_on(stream, Port::Path(client.path().to_owned()), &client.peer(), client.timeout(), config, limit).map_err(|e| client.explain(e))
    }

    /// Start a session on a connection made already (`stream`); later commands go to `port`.
    pub(crate) fn start_on(mut stream: UnixStream, port: Port, peer: &str, timeout: Duration, config: &SessionConfig, limit: &Limit<'_>) -> Result<Session, DiagError> {
        let (command_id, command) = config.command();
        let what = format!("{command} to {peer}");
        let reply = Bounded::new(&mut stream, *limit, &what).run(|s| {
            ipc::send(s, &Message { command_set: 0x02, command_id, payload: config.start_payload() })?;
            ipc::receive(s)
        })?;
        let payload = ipc::expect_ok(reply, command).map_err(|e| {
            if config.lossless && e.kind == DiagErrorKind::UnsupportedCommand {
                let message = format!("a lossless session (CollectTracing6, Block mode) needs .NET 11 or later: {} ({peer})", e.message);
                DiagError { message, ..e }
            } else {
                e
            }
        })?;
        let id = ipc::Fields::new(&payload).u64("the session id")?;
        Ok(Session { stream, id, port, timeout })
    }

    /// The session id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// What stops this session; usable while the stream is read.
    pub fn stopper(&self) -> Stopper {
        Stopper { port: self.port.clone(), id: self.id, timeout: self.timeout, pending: None }
    }

    /// Read what arrives within `wait` (at least 1 ms). A connection reset by a process that died
    /// is the end of the stream, not an error.
    pub fn read_some(&mut self, buf: &mut [u8], wait: Duration) -> Result<Chunk, DiagError> {
        use std::io::ErrorKind as K;
        self.stream.set_read_timeout(Some(wait.max(Duration::from_millis(1)))).map_err(|e| DiagError::new(DiagErrorKind::Io, e.to_string()))?;
        loop {
            return match self.stream.read(buf) {
                Ok(0) => Ok(Chunk::End),
                Ok(n) => Ok(Chunk::Data(n)),
                Err(e) if e.kind() == K::Interrupted => continue,
                Err(e) if matches!(e.kind(), K::WouldBlock | K::TimedOut) => Ok(Chunk::Idle),
                Err(e) if matches!(e.kind(), K::ConnectionReset | K::BrokenPipe | K::ConnectionAborted) => Ok(Chunk::End),
                Err(e) => Err(DiagError::new(DiagErrorKind::Io, format!("reading the trace stream: {e}"))),
            };
        }
    }

    /// The stream as a reader that ends when the session does, failing with a timeout when no
    /// byte comes for `idle` (then whatever came before it has been read).
    pub fn reader(self, idle: Duration) -> SessionReader<'static> {
        SessionReader { session: self, idle: Some(idle), limit: None, received: 0, ended: None }
    }

    /// The stream as a reader that fails when `limit` ends (its deadline, or its cancel flag):
    /// a stream that never ends, or goes silent, is cut there. [`SessionReader::ended`] then says
    /// why.
    pub fn reader_until(self, limit: Limit<'_>) -> SessionReader<'_> {
        SessionReader { session: self, idle: None, limit: Some(limit), received: 0, ended: None }
    }
}

/// A session's stream as `std::io::Read`.
#[derive(Debug)]
pub struct SessionReader<'a> {
    session: Session,
    idle: Option<Duration>,
    limit: Option<Limit<'a>>,
    received: u64,
    ended: Option<DiagError>,
}

impl SessionReader<'_> {
    /// Why reading stopped early: `timeout` (nothing for the idle time, or the deadline came) or
    /// `interrupted`; `None` while the stream is read, and after it ended by itself.
    pub fn ended(&self) -> Option<&DiagError> {
        self.ended.as_ref()
    }

    /// Bytes read so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    fn fail(&mut self, e: DiagError) -> std::io::Error {
        let io = std::io::Error::new(std::io::ErrorKind::TimedOut, e.message.clone());
        self.ended = Some(e);
        io
    }
}

impl Read for SessionReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let wait = match (self.limit, self.idle) {
                (Some(limit), _) => match limit.slice("the session's stream did not end") {
                    Ok(w) => w,
                    Err(e) => return Err(self.fail(e)),
                },
                (None, Some(idle)) => idle,
                (None, None) => super::DEFAULT_TIMEOUT,
            };
            match self.session.read_some(buf, wait) {
                Ok(Chunk::Data(n)) => {
                    self.received = self.received.saturating_add(n as u64);
                    return Ok(n);
                }
                Ok(Chunk::End) => return Ok(0),
                // Under a limit, the next turn says whether its time is up.
                Ok(Chunk::Idle) if self.limit.is_some() => continue,
                Ok(Chunk::Idle) => {
                    let idle = self.idle.unwrap_or(super::DEFAULT_TIMEOUT);
                    let e = DiagError::new(DiagErrorKind::Timeout, format!("the runtime sent nothing for {}", super::bounded::show(idle)));
                    return Err(self.fail(e));
                }
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
        }
    }
}

/// Stops a session: StopTracing with its id, on a new connection. The request is sent first
/// ([`Stopper::send`]) and its reply read later ([`Stopper::finish`]), so the caller can keep
/// reading the rundown meanwhile: the runtime may write the whole rundown before it answers.
#[derive(Debug)]
pub struct Stopper {
    port: Port,
    id: u64,
    timeout: Duration,
    pending: Option<UnixStream>,
}

impl Stopper {
    /// Send StopTracing (connect and send within the timeout). Sending twice is a no-op.
    pub fn send(&mut self) -> Result<(), DiagError> {
        self.send_until(&Limit::new(self.timeout, None))
    }

    /// [`Stopper::send`] within `limit`.
    pub fn send_until(&mut self, limit: &Limit<'_>) -> Result<(), DiagError> {
        if self.pending.is_some() {
            return Ok(());
        }
        let mut stream = self.port.connect(limit)?;
        let mut p = Payload::default();
        p.u64(self.id);
        Bounded::new(&mut stream, *limit, "StopTracing").run(|s| ipc::send(s, &Message { command_set: 0x02, command_id: 0x01, payload: p.0 }))?;
        self.pending = Some(stream);
        Ok(())
    }

    /// Read the StopTracing reply (after the stream ended), within the timeout. Its payload is
    /// the session id.
    pub fn finish(&mut self) -> Result<(), DiagError> {
        self.finish_until(&Limit::new(self.timeout, None))
    }

    /// [`Stopper::finish`] within `limit`.
    pub fn finish_until(&mut self, limit: &Limit<'_>) -> Result<(), DiagError> {
        let Some(mut stream) = self.pending.take() else { return Ok(()) };
        let reply = Bounded::new(&mut stream, *limit, "the StopTracing reply").run(ipc::receive)?;
        ipc::expect_ok(reply, "StopTracing").map(|_| ())
    }
}

/// The first runtime that connects to `server`: a session started on its connection (the
/// runtime is still suspended, so the session sees its whole start-up), then ResumeRuntime. All
/// of it within `limit`; `check` as in [`ReverseServer::accept`]. Later commands (StopTracing) go
/// to the same server.
pub fn start_suspended(server: &Arc<ReverseServer>, config: &SessionConfig, limit: &Limit<'_>, check: &mut dyn FnMut() -> Result<(), DiagError>) -> Result<(Session, Advertise), DiagError> {
    let (stream, adv) = server.accept(limit, check)?;
    let peer = format!("process {}", adv.pid);
    let session = Session::start_on(stream, Port::Reverse(Arc::clone(server), adv.pid), &peer, server.timeout, config, limit)?;
    server.resume(adv.pid, limit, check)?;
    Ok((session, adv))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_sampling_adds_the_sampler_and_the_map_keywords_once() {
        let cpu = Provider::cpu_sampling();
        assert_eq!(cpu.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["Microsoft-Windows-DotNETRuntime", "Microsoft-DotNETCore-SampleProfiler"]);
        assert_eq!(cpu[1].keywords, 0xF000_0000_0000);
        // Into a user's list: the runtime provider keeps its keywords and gains the maps'; the
        // sampler is not added twice.
        let mut list = Provider::parse_list("Microsoft-Windows-DotNETRuntime:0x1:4,Microsoft-DotNETCore-SampleProfiler:0:5").unwrap();
        Provider::add_cpu_sampling(&mut list);
        assert_eq!(list.len(), 2);
        assert_eq!((list[0].keywords, list[0].level), (0x1 | JIT_SYMBOLS_KEYWORDS | METHOD_NAMING_KEYWORDS, LEVEL_VERBOSE));
        assert_eq!(list[1].keywords, SAMPLE_PROFILER_KEYWORDS);
        let mut empty = vec![Provider::jit_symbols()];
        Provider::add_cpu_sampling(&mut empty);
        assert_eq!(empty, cpu);
    }

    #[test]
    fn provider_lists() {
        let p = Provider::parse_list("Microsoft-Windows-DotNETRuntime:0x40000E0098:5,My-Source").unwrap();
        assert_eq!(p[0], Provider::jit_symbols());
        assert_eq!((p[1].keywords, p[1].level), (u64::MAX, 5));
        assert!(Provider::parse_list(":1").is_err());
        assert!(Provider::parse_list("X:zz").is_err());
        assert!(Provider::parse_list("X:1:9").is_err());
        let payload = SessionConfig::default().payload();
        assert_eq!(&payload[..9], &[0, 1, 0, 0, 1, 0, 0, 0, 1]);
    }

    #[test]
    fn lossless_sessions_are_collect_tracing6_in_block_mode() {
        let plain = SessionConfig::default();
        assert_eq!(plain.command(), (0x03, "CollectTracing2"));
        assert_eq!(plain.start_payload(), plain.payload());
        let config = SessionConfig { lossless: true, providers: vec![Provider { name: "P".into(), keywords: 0x10, level: 4, filter: None }], ..SessionConfig::default() };
        assert_eq!(config.command(), (0x07, "CollectTracing6"));
        let p = config.start_payload();
        let mut want = vec![0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0];
        want.extend(0x8002_0139u64.to_le_bytes());
        want.push(1);
        want.extend(1u32.to_le_bytes());
        want.extend(0x10u64.to_le_bytes());
        want.extend(4u32.to_le_bytes());
        // "P" and its NUL as UTF-16 with a u32 count of units; the empty filter as a count of 0.
        want.extend(2u32.to_le_bytes());
        want.extend([b'P', 0, 0, 0]);
        want.extend(0u32.to_le_bytes());
        want.push(0);
        want.extend(0u32.to_le_bytes());
        want.extend(1u32.to_le_bytes());
        assert_eq!(p, want);
        let no_rundown = SessionConfig { rundown: false, ..config }.payload6();
        assert_eq!(&no_rundown[12..20], &[0; 8]);
    }
}

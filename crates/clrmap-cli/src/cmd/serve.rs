//! `clrmap serve`: the symbolication service over HTTP/1.1 (docs/output.md#the-service, docs/service.md).
//!
//! hyper on tokio moves the bytes; what a request means is `clrmap::service` (synchronous, run on
//! tokio's blocking threads, since finding symbols reads files and asks symbol servers). Each
//! connection is its own task: a client that trickles its headers meets the header read timeout,
//! one that trickles its body meets the request timeout, and neither holds anyone else up.
//! SIGTERM (or Ctrl-C) stops accepting, lets the requests in flight finish (up to the grace
//! period), and exits 0. One JSON line per request goes to stderr.
//!
//! What the process holds is bounded: at most `--max-connections` connections (one more is
//! answered 503 and closed), the bytes of request bodies, of the work on them and of answers not
//! yet written within `--max-buffered-mb` (past it: 503 `busy`), and a connection whose client
//! reads nothing for `--write-timeout` is closed, freeing its answer.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use clrmap::service::{error_json, Config, Service, ServiceError};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::args::parse_duration;
use crate::output::CliError;

/// `clrmap serve`
#[derive(Debug, Args)]
#[command(mut_arg("symbol_path", |a| a.help(SYMBOL_PATH_HELP)))]
pub struct ServeArgs {
    /// The address and port to listen on (`127.0.0.1:8080`, `0.0.0.0:8080`, `[::1]:8080`; port 0
    /// picks a free port, printed in the first log line).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Where PDBs and assemblies are looked for (`--symbol-path`, whose help is
    /// [`SYMBOL_PATH_HELP`]), and the symbol servers with their cache (replicas may share one
    /// cache folder: entries are written atomically).
    #[command(flatten)]
    pub symbols: crate::args::SymbolArgs,
    /// How much parsed symbol data to keep in memory, in MiB (least recently used first out).
    #[arg(long = "lru-mb", value_name = "MIB", default_value_t = 128)]
    pub lru_mb: u64,
    /// The largest request body accepted, in bytes; a larger one is answered 413 without being
    /// read.
    #[arg(long = "max-body", value_name = "BYTES", default_value_t = 8 << 20)]
    pub max_body: u64,
    /// The most frames one /symbolicate request may hold; more is answered 413.
    #[arg(long = "max-frames", value_name = "N", default_value_t = 100_000)]
    pub max_frames: usize,
    /// How long one request may take, from its first body byte to its answer (`30s`, `500ms`);
    /// past it the client gets 408 (body still arriving) or 503 (still being answered).
    #[arg(long = "request-timeout", value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub request_timeout: Duration,
    /// How long a client may take to send a request's headers; past it the connection is closed.
    #[arg(long = "header-timeout", value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub header_timeout: Duration,
    /// Where each answered request's JSON line goes: `stderr` (one line a request), or `off`
    /// (no line a request; the service's own events, such as `listening` and `shutdown`, are
    /// still written, and `/metrics` still counts every request). At tens of thousands of
    /// requests a second the line's write is a tenth of a request's cost.
    #[arg(long = "request-log", value_enum, value_name = "WHERE", default_value = "stderr")]
    pub request_log: RequestLog,
    /// After SIGTERM, how long requests in flight may still take before the process exits.
    #[arg(long = "shutdown-grace", value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub shutdown_grace: Duration,
    /// The largest answer one request may have, in bytes; a larger one is 413
    /// `answer_too_large`.
    #[arg(long = "max-answer", value_name = "BYTES", default_value_t = clrmap::service::DEFAULT_MAX_ANSWER)]
    pub max_answer: u64,
    /// The most bytes all requests together may hold at once, in MiB: bodies being read, the
    /// work on them (ten times a body's size) and answers not yet written. Past it: 503 `busy`.
    #[arg(long = "max-buffered-mb", value_name = "MIB", default_value_t = 256)]
    pub max_buffered_mb: u64,
    /// The most connections open at once; one more is answered 503 and closed.
    #[arg(long = "max-connections", value_name = "N", default_value_t = 512)]
    pub max_connections: usize,
    /// How long a client may leave an answer unread (no byte of it taken) before its connection
    /// is closed and the answer freed.
    #[arg(long = "write-timeout", value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub write_timeout: Duration,
    /// How long a module not found (in the symbol paths, or a 404 or a dead symbol server) is
    /// remembered before it is looked for again.
    #[arg(long = "negative-ttl", value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub negative_ttl: Duration,
}

/// `--symbol-path` for the service: a request names modules, so a directory is looked in for
/// their assemblies as well as their PDBs.
const SYMBOL_PATH_HELP: &str = "A directory to look for PDBs and assemblies in (repeatable, searched in order): flat \
     (`DIR/Orders.pdb`, `DIR/Orders.dll`) and in the symbol-server layout";

/// What the work on a body may hold, as a multiple of its size (the parsed frames and modules)...
const WORK_PER_BODY_BYTE: u64 = 10;
/// ... and at most: the body's strings again, this much per frame the request may have, and
/// this much for its modules (at most 10,000, a few hundred bytes each).
const WORK_PER_FRAME: u64 = 256;
const WORK_FOR_MODULES: u64 = 16 << 20;

/// The bytes all requests hold at once, bounded.
#[derive(Debug)]
struct Budget {
    held: AtomicU64,
    max: u64,
    peak: AtomicU64,
}

impl Budget {
    fn take(self: &Arc<Self>, n: u64) -> Option<Held> {
        let mut now = self.held.load(Ordering::Relaxed);
        loop {
            let next = now.checked_add(n).filter(|t| *t <= self.max)?;
            match self.held.compare_exchange_weak(now, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    self.peak.fetch_max(next, Ordering::Relaxed);
                    return Some(Held { budget: self.clone(), n });
                }
                Err(actual) => now = actual,
            }
        }
    }
}

/// Bytes taken from the budget, given back when dropped.
#[derive(Debug)]
struct Held {
    budget: Arc<Budget>,
    n: u64,
}

impl Held {
    fn grow(&mut self, n: u64) -> bool {
        match self.budget.take(n) {
            Some(mut more) => {
                self.n = self.n.saturating_add(more.n);
                more.n = 0;
                drop(more);
                true
            }
            None => false,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.n, Ordering::AcqRel);
    }
}

/// An answer's body: its bytes, sent in pieces, and the budget they hold until the body is
/// dropped (sent, or its connection closed).
struct AnswerBody {
    data: Bytes,
    _held: Option<Held>,
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.data.is_empty() {
            return Poll::Ready(None);
        }
        let n = self.data.len().min(256 << 10);
        let piece = self.data.split_to(n);
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(u64::try_from(self.data.len()).unwrap_or(u64::MAX))
    }
}

/// A connection whose writes fail once none has made progress for `timeout` (a client that
/// reads nothing), so that hyper closes it and drops what it held.
struct WriteTimeout<T> {
    inner: T,
    timeout: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
    /// At close: the write side is shut, and what the client still sends is read and thrown
    /// away until it ends, [`LINGER`] passes or [`LINGER_BYTES`] are read (a lingering close).
    /// Closing with unread bytes makes the kernel reset the connection, and a client still
    /// sending (a body refused 413 mid-upload) then loses the answer it was sent.
    closing: Option<(Pin<Box<tokio::time::Sleep>>, u64)>,
}

/// The most bytes read and thrown away in a lingering close.
const LINGER_BYTES: u64 = 64 << 20;

impl<T: AsyncRead + Unpin> AsyncRead for WriteTimeout<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> WriteTimeout<T> {
    fn stall(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let timeout = self.timeout;
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the client read nothing within the write timeout"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for WriteTimeout<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.stall(cx).map(|r| r.map(|()| 0)),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.stall(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.closing.is_none() {
            match Pin::new(&mut self.inner).poll_shutdown(cx) {
                Poll::Ready(Ok(())) => self.closing = Some((Box::pin(tokio::time::sleep(LINGER)), 0)),
                other => return other,
            }
        }
        let mut scratch = [0u8; 16 << 10];
        loop {
            let Some((deadline, drained)) = self.closing.as_mut() else { return Poll::Ready(Ok(())) };
            if deadline.as_mut().poll(cx).is_ready() || *drained >= LINGER_BYTES {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {
                    let n = u64::try_from(buf.filled().len()).unwrap_or(u64::MAX);
                    if let Some((_, drained)) = self.closing.as_mut() {
                        *drained = drained.saturating_add(n);
                    }
                }
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Latency histogram bounds, in seconds.
const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

#[derive(Debug, Default)]
struct Histogram {
    counts: [AtomicU64; 12],
    count: AtomicU64,
    /// Sum in microseconds.
    sum_us: AtomicU64,
}

#[derive(Debug, Default)]
struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    latency: BTreeMap<&'static str, Histogram>,
    frames: AtomicU64,
    in_flight: AtomicU64,
    connections: AtomicU64,
    refused: AtomicU64,
}

const ENDPOINTS: [&str; 5] = ["symbolicate", "stacktrace", "healthz", "metrics", "other"];

impl Metrics {
    fn new() -> Metrics {
        Metrics { latency: ENDPOINTS.iter().map(|e| (*e, Histogram::default())).collect(), ..Metrics::default() }
    }

    fn record(&self, endpoint: &'static str, status: u16, elapsed: Duration, frames: u64) {
        let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        let n = requests.entry((endpoint, status)).or_insert(0);
        *n = n.saturating_add(1);
        drop(requests);
        self.frames.fetch_add(frames, Ordering::Relaxed);
        if let Some(h) = self.latency.get(endpoint) {
            let secs = elapsed.as_secs_f64();
            for (b, c) in BUCKETS.iter().zip(h.counts.iter()) {
                if secs <= *b {
                    c.fetch_add(1, Ordering::Relaxed);
                }
            }
            h.count.fetch_add(1, Ordering::Relaxed);
            h.sum_us.fetch_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
        }
    }
}

/// Where request lines go (`--request-log`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RequestLog {
    /// One JSON line a request, on stderr.
    Stderr,
    /// None.
    Off,
}

struct State {
    request_log: RequestLog,
    service: Service,
    metrics: Metrics,
    max_body: u64,
    request_timeout: Duration,
    budget: Arc<Budget>,
    max_frames: u64,
}

/// What one request came to, for its log line and the metrics.
struct Outcome {
    response: Response<AnswerBody>,
    frames: u64,
    error: Option<&'static str>,
    bytes_in: u64,
}

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<AnswerBody> {
    respond_held(status, content_type, body.into(), None)
}

fn respond_held(status: StatusCode, content_type: &'static str, data: Bytes, held: Option<Held>) -> Response<AnswerBody> {
    let mut r = Response::new(AnswerBody { data, _held: held });
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn error(status: StatusCode, kind: &'static str, message: &str) -> Outcome {
    let mut response = respond(status, "application/json", error_json(kind, message));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    Outcome { response, frames: 0, error: Some(kind), bytes_in: 0 }
}

fn busy(what: &str) -> Outcome {
    error(StatusCode::SERVICE_UNAVAILABLE, "busy", &format!("the service holds as many buffered bytes as it may (--max-buffered-mb) and cannot take {what}; retry later"))
}

/// The endpoints: a request's path picks one, its method must be the route's (HEAD too for a
/// GET), and its name labels the metrics and the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Symbolicate,
    Stacktrace,
    Healthz,
    Metrics,
}

/// Each route's path, name and method.
const ROUTES: [(&str, Route, &str, Method); 4] = [
    ("/symbolicate", Route::Symbolicate, "symbolicate", Method::POST),
    ("/stacktrace", Route::Stacktrace, "stacktrace", Method::POST),
    ("/healthz", Route::Healthz, "healthz", Method::GET),
    ("/metrics", Route::Metrics, "metrics", Method::GET),
];

fn route_of(path: &str) -> Option<(Route, &'static str, &'static Method)> {
    ROUTES.iter().find(|r| r.0 == path).map(|r| (r.1, r.2, &r.3))
}

fn endpoint_of(route: Option<(Route, &'static str, &'static Method)>) -> &'static str {
    route.map_or("other", |r| r.1)
}

/// A body at most this long whose modules are all in the LRU is answered on the connection's own
/// task, without the hand-over to a blocking thread; anything else goes to a blocking thread.
/// 64 KiB is some 1,400 frames, answered in about 0.3 ms: the hand-over cost more than that at
/// the tail (measured with 1000-frame requests and busy cores: p99 24-34 ms handed over, 10-12 ms
/// answered in place, and 1.5-2 times the requests per second).
const INLINE_BODY: usize = 64 << 10;

/// How long a body over the limit is still read (and thrown away) before the 413 goes out, so
/// that a client still sending sees the answer rather than a reset connection (a lingering
/// close, as nginx does); memory stays constant meanwhile.
const LINGER: Duration = Duration::from_secs(2);

/// Read a body of at most `limit` bytes within `deadline`.
async fn read_body(mut body: Incoming, limit: u64, deadline: Duration, held: &mut Held) -> Result<Bytes, Outcome> {
    let started = Instant::now();
    let mut data = bytes::BytesMut::new();
    // Over the limit, or over the budget: the rest is read and thrown away (for at most LINGER)
    // so that the client sees the answer.
    let mut over = false;
    let mut refused = false;
    loop {
        let left = if over { LINGER.saturating_sub(started.elapsed()).min(deadline) } else { deadline.saturating_sub(started.elapsed()) };
        let frame = match tokio::time::timeout(left, body.frame()).await {
            Err(_) if over => break,
            Err(_) => return Err(error(StatusCode::REQUEST_TIMEOUT, "timeout", &format!("the body did not arrive within {deadline:?}"))),
            Ok(None) => break,
            Ok(Some(Err(e))) if over => {
                let _ = e;
                break;
            }
            Ok(Some(Err(e))) => return Err(error(StatusCode::BAD_REQUEST, "bad_body", &format!("the body could not be read: {e}"))),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(chunk) = frame.into_data() else { continue };
        if over {
            continue;
        }
        if u64::try_from(data.len().saturating_add(chunk.len())).unwrap_or(u64::MAX) > limit {
            over = true;
            data = bytes::BytesMut::new();
            continue;
        }
        if !held.grow(u64::try_from(chunk.len()).unwrap_or(u64::MAX)) {
            (over, refused) = (true, true);
            data = bytes::BytesMut::new();
            continue;
        }
        data.extend_from_slice(&chunk);
    }
    if refused {
        let mut o = busy("this body");
        o.response.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        return Err(o);
    }
    if over {
        let mut o = error(StatusCode::PAYLOAD_TOO_LARGE, "too_large", &format!("the body is over {limit} bytes"));
        o.response.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        return Err(o);
    }
    Ok(data.freeze())
}

async fn handle(state: Arc<State>, req: Request<Incoming>, route: Option<(Route, &'static str, &'static Method)>) -> Outcome {
    let Some((route, _, allowed)) = route else {
        let path = req.uri().path();
        return error(StatusCode::NOT_FOUND, "not_found", &format!("no endpoint {path}; the endpoints are POST /symbolicate, POST /stacktrace, GET /healthz, GET /metrics"));
    };
    let method = req.method();
    if method != allowed && !(allowed == Method::GET && method == Method::HEAD) {
        let mut o = error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", &format!("{} takes {allowed}, not {method}", req.uri().path()));
        o.response.headers_mut().insert(ALLOW, HeaderValue::from_static(if allowed == Method::GET { "GET, HEAD" } else { "POST" }));
        return o;
    }
    match route {
        Route::Healthz => return Outcome { response: respond(StatusCode::OK, "text/plain; charset=utf-8", "ok"), frames: 0, error: None, bytes_in: 0 },
        Route::Metrics => return Outcome { response: respond(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", metrics_text(&state)), frames: 0, error: None, bytes_in: 0 },
        Route::Symbolicate | Route::Stacktrace => {}
    }
    // A declared length over the limit is refused before a byte of the body is read.
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.max_body) {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "too_large", &format!("the body is over {} bytes", state.max_body));
    }
    let started = Instant::now();
    let Some(mut held) = state.budget.take(0) else { return busy("a request") };
    let body = match read_body(req.into_body(), state.max_body, state.request_timeout, &mut held).await {
        Ok(b) => b,
        Err(o) => return o,
    };
    let bytes_in = u64::try_from(body.len()).unwrap_or(u64::MAX);
    // The work on the body (its parsed frames and modules) is held too, until it is done.
    let work = bytes_in.saturating_mul(WORK_PER_BODY_BYTE).min(bytes_in.saturating_add(state.max_frames.saturating_mul(WORK_PER_FRAME)).saturating_add(WORK_FOR_MODULES));
    if !held.grow(work) {
        return Outcome { bytes_in, ..busy("the work on this body") };
    }
    let left = state.request_timeout.saturating_sub(started.elapsed());
    let stack = route == Route::Stacktrace;
    if !stack && body.len() <= INLINE_BODY {
        if let Some(mut answer_held) = state.budget.take(0) {
            if let Some(result) = state.service.symbolicate_cached(&body, &mut |n| answer_held.grow(n)) {
                drop(body);
                drop(held);
                return answered(result, false, Some(answer_held), bytes_in);
            }
        }
    }
    let worker = state.clone();
    let job = tokio::task::spawn_blocking(move || {
        // The answer's bytes are taken from the budget as it grows, and held until it is sent.
        let Some(mut answer_held) = worker.budget.take(0) else {
            return (Err(ServiceError { status: 503, kind: "busy", message: "the service holds as many buffered bytes as it may (--max-buffered-mb); retry later".to_owned() }), None);
        };
        let result = if stack {
            // A rewritten stack trace is about its body's size: held as one piece.
            worker.service.stacktrace(&body).and_then(|a| {
                if answer_held.grow(u64::try_from(a.body.capacity()).unwrap_or(u64::MAX)) {
                    Ok(a)
                } else {
                    Err(ServiceError { status: 503, kind: "busy", message: "the service holds as many buffered bytes as it may (--max-buffered-mb); retry later".to_owned() })
                }
            })
        } else {
            worker.service.symbolicate_within(&body, &mut |n| answer_held.grow(n))
        };
        drop(body);
        drop(held);
        (result, Some(answer_held))
    });
    let result = match tokio::time::timeout(left, job).await {
        Err(_) => return Outcome { bytes_in, ..error(StatusCode::SERVICE_UNAVAILABLE, "timeout", &format!("the answer took over {:?}", state.request_timeout)) },
        Ok(Err(e)) => return Outcome { bytes_in, ..error(StatusCode::INTERNAL_SERVER_ERROR, "internal", &format!("the request's worker failed: {e}")) },
        Ok(Ok(r)) => r,
    };
    let (result, answer_held) = result;
    answered(result, stack, answer_held, bytes_in)
}

/// The response to what the service answered.
fn answered(result: Result<clrmap::service::Answer, ServiceError>, stack: bool, answer_held: Option<Held>, bytes_in: u64) -> Outcome {
    match result {
        Ok(answer) => {
            let content_type = if stack { "text/plain; charset=utf-8" } else { "application/json" };
            Outcome { response: respond_held(StatusCode::OK, content_type, Bytes::from(answer.body), answer_held), frames: answer.frames, error: None, bytes_in }
        }
        Err(ServiceError { status, kind, message }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            Outcome { bytes_in, ..error(status, kind, &message) }
        }
    }
}

fn metrics_text(state: &State) -> String {
    use std::fmt::Write as _;
    let m = &state.metrics;
    let mut s = String::new();
    let _ = writeln!(s, "# HELP clrmap_requests_total HTTP requests answered, by endpoint and status.\n# TYPE clrmap_requests_total counter");
    for ((endpoint, status), n) in m.requests.lock().unwrap_or_else(PoisonError::into_inner).iter() {
        let _ = writeln!(s, "clrmap_requests_total{{endpoint=\"{endpoint}\",status=\"{status}\"}} {n}");
    }
    let _ = writeln!(s, "# HELP clrmap_request_duration_seconds Time from a request's headers to its answer.\n# TYPE clrmap_request_duration_seconds histogram");
    for (endpoint, h) in &m.latency {
        for (b, c) in BUCKETS.iter().zip(h.counts.iter()) {
            let _ = writeln!(s, "clrmap_request_duration_seconds_bucket{{endpoint=\"{endpoint}\",le=\"{b}\"}} {}", c.load(Ordering::Relaxed));
        }
        let count = h.count.load(Ordering::Relaxed);
        let _ = writeln!(s, "clrmap_request_duration_seconds_bucket{{endpoint=\"{endpoint}\",le=\"+Inf\"}} {count}");
        let sum = Duration::from_micros(h.sum_us.load(Ordering::Relaxed)).as_secs_f64();
        let _ = writeln!(s, "clrmap_request_duration_seconds_sum{{endpoint=\"{endpoint}\"}} {sum}\nclrmap_request_duration_seconds_count{{endpoint=\"{endpoint}\"}} {count}");
    }
    let c = state.service.counts();
    let lines = [
        ("clrmap_frames_total", "counter", "Frames answered (/symbolicate frames, /stacktrace frames seen).", m.frames.load(Ordering::Relaxed)),
        ("clrmap_symbol_cache_hits_total", "counter", "Module lookups answered from the in-memory LRU.", c.cache_hits),
        ("clrmap_symbol_cache_misses_total", "counter", "Module lookups that searched the symbol paths and servers.", c.cache_misses),
        ("clrmap_symbol_fetch_failures_total", "counter", "Of those, lookups that found no usable symbols.", c.fetch_failures),
        ("clrmap_symbol_lru_bytes", "gauge", "Bytes of parsed symbols the LRU holds.", c.lru_bytes),
        ("clrmap_symbol_lru_entries", "gauge", "Entries the LRU holds.", c.lru_entries),
        ("clrmap_requests_in_flight", "gauge", "Requests being answered now.", m.in_flight.load(Ordering::Relaxed)),
        ("clrmap_connections", "gauge", "Connections open now.", m.connections.load(Ordering::Relaxed)),
        ("clrmap_connections_refused_total", "counter", "Connections answered 503 and closed: --max-connections were open.", m.refused.load(Ordering::Relaxed)),
        ("clrmap_buffered_bytes", "gauge", "Bytes held now for bodies, the work on them and answers not yet written.", state.budget.held.load(Ordering::Relaxed)),
        ("clrmap_buffered_bytes_peak", "gauge", "The most bytes held at once since the start.", state.budget.peak.load(Ordering::Relaxed)),
    ];
    for (name, kind, help, v) in lines {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
    }
    s
}

/// One JSON line on stderr.
fn log(fields: serde_json::Value) {
    let mut line = fields.to_string();
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// A request's log line: written from borrowed fields with one write, no tree of values.
#[derive(serde::Serialize)]
struct RequestLine<'a> {
    // In the order the lines have always had (by name).
    bytes_in: u64,
    bytes_out: usize,
    error: Option<&'static str>,
    event: &'static str,
    frames: u64,
    method: &'a str,
    ms: f64,
    path: &'a str,
    #[serde(serialize_with = "displayed")]
    peer: SocketAddr,
    status: u16,
    ts: f64,
}

fn displayed<S: serde::Serializer>(v: &SocketAddr, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

thread_local! {
    /// The log line being written, kept between requests.
    static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

async fn serve_one(state: Arc<State>, peer: SocketAddr, req: Request<Incoming>) -> Result<Response<AnswerBody>, Infallible> {
    let started = Instant::now();
    let method = req.method().clone();
    let route = route_of(req.uri().path());
    // The path is kept for the log only when it is not a route's own (a route's is static).
    let other_path = if route.is_none() { Some(req.uri().path().to_owned()) } else { None };
    let endpoint = endpoint_of(route);
    state.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
    let outcome = handle(state.clone(), req, route).await;
    state.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let status = outcome.response.status().as_u16();
    state.metrics.record(endpoint, status, elapsed, outcome.frames);
    let path = match (route, &other_path) {
        (Some(_), _) => ROUTES.iter().find(|r| r.2 == endpoint).map_or("", |r| r.0),
        (None, Some(p)) => p.as_str(),
        (None, None) => "",
    };
    if state.request_log == RequestLog::Off {
        return Ok(outcome.response);
    }
    let line = RequestLine {
        ts: now(),
        event: "request",
        method: method.as_str(),
        path,
        status,
        ms: elapsed.as_secs_f64() * 1000.0,
        frames: outcome.frames,
        bytes_in: outcome.bytes_in,
        bytes_out: outcome.response.body().data.len(),
        peer,
        error: outcome.error,
    };
    LINE.with_borrow_mut(|buf| {
        buf.clear();
        if serde_json::to_writer(&mut *buf, &line).is_ok() {
            buf.push(b'\n');
            let _ = std::io::stderr().lock().write_all(buf);
        }
    });
    Ok(outcome.response)
}

/// A connection over `--max-connections`: a 503 written (within a second) and closed.
async fn refuse(mut stream: tokio::net::TcpStream, max: usize) {
    use tokio::io::AsyncWriteExt;
    let body = error_json("too_many_connections", &format!("{max} connections are open (--max-connections); retry later"));
    let head = format!("HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n", body.len());
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(body.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Run the service until SIGTERM or Ctrl-C.
pub fn run(a: ServeArgs) -> Result<(), CliError> {
    let paths = a.symbols.service_paths(a.negative_ttl);
    let mut config = Config::new(paths, a.lru_mb.saturating_mul(1 << 20), a.max_frames);
    config.max_answer = a.max_answer;
    config.missing_ttl = a.negative_ttl;
    let budget = Arc::new(Budget { held: AtomicU64::new(0), max: a.max_buffered_mb.saturating_mul(1 << 20), peak: AtomicU64::new(0) });
    let state = Arc::new(State {
        request_log: a.request_log,
        service: Service::new(config),
        metrics: Metrics::new(),
        max_body: a.max_body,
        request_timeout: a.request_timeout,
        budget,
        max_frames: u64::try_from(a.max_frames).unwrap_or(u64::MAX),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().max_blocking_threads(64).build().map_err(CliError::Io)?;
    let result = runtime.block_on(serve(state, &a));
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn serve(state: Arc<State>, a: &ServeArgs) -> Result<(), CliError> {
    use tokio::signal::unix::{signal, SignalKind};
    let listener = tokio::net::TcpListener::bind(a.listen).await.map_err(|e| CliError::Kinded { kind: "io", message: format!("cannot listen on {}: {e}", a.listen) })?;
    let local = listener.local_addr().map_err(CliError::Io)?;
    let mut term = signal(SignalKind::terminate()).map_err(CliError::Io)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(CliError::Io)?;
    log(
        serde_json::json!({"ts": now(), "event": "listening", "listen": local.to_string(), "symbol_paths": a.symbols.symbol_path, "lru_mb": a.lru_mb, "max_body": a.max_body, "max_frames": a.max_frames}),
    );
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(a.header_timeout).keep_alive(true).max_buf_size(64 << 10);
    let slots = Arc::new(tokio::sync::Semaphore::new(a.max_connections));
    let signal_name = loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    // Out of descriptors or a connection reset before accept: wait a little.
                    Err(_) => { tokio::time::sleep(Duration::from_millis(20)).await; continue; }
                };
                let _ = stream.set_nodelay(true);
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    state.metrics.refused.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(refuse(stream, a.max_connections));
                    continue;
                };
                let state = state.clone();
                let counted = state.clone();
                let service = hyper::service::service_fn(move |req| serve_one(state.clone(), peer, req));
                let io = WriteTimeout { inner: stream, timeout: a.write_timeout, stalled: None, closing: None };
                let conn = graceful.watch(builder.serve_connection(TokioIo::new(io), service));
                counted.metrics.connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let _ = conn.await;
                    counted.metrics.connections.fetch_sub(1, Ordering::Relaxed);
                    drop(slot);
                });
            }
            _ = term.recv() => break "SIGTERM",
            _ = interrupt.recv() => break "SIGINT",
        }
    };
    drop(listener);
    let in_flight = state.metrics.in_flight.load(Ordering::Relaxed);
    log(serde_json::json!({"ts": now(), "event": "shutdown", "signal": signal_name, "in_flight": in_flight}));
    let finished = tokio::time::timeout(a.shutdown_grace, graceful.shutdown()).await.is_ok();
    log(serde_json::json!({"ts": now(), "event": "stopped", "clean": finished}));
    Ok(())
}

//! `clrmap serve`: the symbolication service over HTTP/1.1 (contract §7, docs/service.md).
//!
//! hyper on tokio moves the bytes; what a request means is `clrmap::service` (synchronous, run on
//! tokio's blocking threads, since finding symbols reads files and asks symbol servers). Each
//! connection is its own task: a client that trickles its headers meets the header read timeout,
//! one that trickles its body meets the request timeout, and neither holds anyone else up.
//! SIGTERM (or Ctrl-C) stops accepting, lets the requests in flight finish (up to the grace
//! period), and exits 0. One JSON line per request goes to stderr.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use clrmap::pdb::locate::SymbolPaths;
use clrmap::service::{error_json, Config, Service, ServiceError};

use crate::args::parse_duration;
use crate::output::CliError;

/// `clrmap serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address and port to listen on (`127.0.0.1:8080`, `0.0.0.0:8080`, `[::1]:8080`; port 0
    /// picks a free port, printed in the first log line).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// A directory to look for PDBs and assemblies in (repeatable, searched in order): flat
    /// (`DIR/Orders.pdb`, `DIR/Orders.dll`) and in the symbol-server layout.
    #[arg(long = "symbol-path", value_name = "DIR")]
    pub symbol_path: Vec<PathBuf>,
    /// Symbol servers and their cache (replicas may share one cache folder: entries are written
    /// atomically).
    #[command(flatten)]
    pub servers: crate::args::ServerArgs,
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
    /// After SIGTERM, how long requests in flight may still take before the process exits.
    #[arg(long = "shutdown-grace", value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub shutdown_grace: Duration,
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

struct State {
    service: Service,
    metrics: Metrics,
    max_body: u64,
    request_timeout: Duration,
}

/// What one request came to, for its log line and the metrics.
struct Outcome {
    response: Response<Full<Bytes>>,
    frames: u64,
    error: Option<&'static str>,
    bytes_in: u64,
}

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn error(status: StatusCode, kind: &'static str, message: &str) -> Outcome {
    Outcome { response: respond(status, "application/json", error_json(kind, message)), frames: 0, error: Some(kind), bytes_in: 0 }
}

fn endpoint_of(path: &str) -> &'static str {
    match path {
        "/symbolicate" => "symbolicate",
        "/stacktrace" => "stacktrace",
        "/healthz" => "healthz",
        "/metrics" => "metrics",
        _ => "other",
    }
}

/// How long a body over the limit is still read (and thrown away) before the 413 goes out, so
/// that a client still sending sees the answer rather than a reset connection (a lingering
/// close, as nginx does); memory stays constant meanwhile.
const LINGER: Duration = Duration::from_secs(2);

/// Read a body of at most `limit` bytes within `deadline`.
async fn read_body(mut body: Incoming, limit: u64, deadline: Duration) -> Result<Bytes, Outcome> {
    let started = Instant::now();
    let mut data = bytes::BytesMut::new();
    let mut over = false;
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
        data.extend_from_slice(&chunk);
    }
    if over {
        let mut o = error(StatusCode::PAYLOAD_TOO_LARGE, "too_large", &format!("the body is over {limit} bytes"));
        o.response.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        return Err(o);
    }
    Ok(data.freeze())
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Outcome {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let allowed = match path.as_str() {
        "/symbolicate" | "/stacktrace" => Method::POST,
        "/healthz" | "/metrics" => Method::GET,
        _ => return error(StatusCode::NOT_FOUND, "not_found", &format!("no endpoint {path}; the endpoints are POST /symbolicate, POST /stacktrace, GET /healthz, GET /metrics")),
    };
    if method != allowed && !(allowed == Method::GET && method == Method::HEAD) {
        let mut o = error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", &format!("{path} takes {allowed}, not {method}"));
        o.response.headers_mut().insert(ALLOW, HeaderValue::from_static(if allowed == Method::GET { "GET, HEAD" } else { "POST" }));
        return o;
    }
    match path.as_str() {
        "/healthz" => return Outcome { response: respond(StatusCode::OK, "text/plain; charset=utf-8", "ok"), frames: 0, error: None, bytes_in: 0 },
        "/metrics" => return Outcome { response: respond(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", metrics_text(&state)), frames: 0, error: None, bytes_in: 0 },
        _ => {}
    }
    // A declared length over the limit is refused before a byte of the body is read.
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.max_body) {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "too_large", &format!("the body is over {} bytes", state.max_body));
    }
    let started = Instant::now();
    let body = match read_body(req.into_body(), state.max_body, state.request_timeout).await {
        Ok(b) => b,
        Err(o) => return o,
    };
    let bytes_in = u64::try_from(body.len()).unwrap_or(u64::MAX);
    let left = state.request_timeout.saturating_sub(started.elapsed());
    let worker = state.clone();
    let stack = path == "/stacktrace";
    let job = tokio::task::spawn_blocking(move || if stack { worker.service.stacktrace(&body) } else { worker.service.symbolicate(&body) });
    let result = match tokio::time::timeout(left, job).await {
        Err(_) => return Outcome { bytes_in, ..error(StatusCode::SERVICE_UNAVAILABLE, "timeout", &format!("the answer took over {:?}", state.request_timeout)) },
        Ok(Err(e)) => return Outcome { bytes_in, ..error(StatusCode::INTERNAL_SERVER_ERROR, "internal", &format!("the request's worker failed: {e}")) },
        Ok(Ok(r)) => r,
    };
    match result {
        Ok(answer) => {
            let content_type = if stack { "text/plain; charset=utf-8" } else { "application/json" };
            Outcome { response: respond(StatusCode::OK, content_type, answer.body), frames: answer.frames, error: None, bytes_in }
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

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

async fn serve_one(state: Arc<State>, peer: SocketAddr, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let started = Instant::now();
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let endpoint = endpoint_of(&path);
    state.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
    let outcome = handle(state.clone(), req).await;
    state.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let status = outcome.response.status().as_u16();
    state.metrics.record(endpoint, status, elapsed, outcome.frames);
    let bytes_out = outcome.response.body().clone().collect().await.map(|b| b.to_bytes().len()).unwrap_or(0);
    log(serde_json::json!({
        "ts": now(), "event": "request", "method": method, "path": path, "status": status,
        "ms": elapsed.as_secs_f64() * 1000.0, "frames": outcome.frames, "bytes_in": outcome.bytes_in,
        "bytes_out": bytes_out, "peer": peer.to_string(), "error": outcome.error,
    }));
    Ok(outcome.response)
}

/// Run the service until SIGTERM or Ctrl-C.
pub fn run(a: ServeArgs) -> Result<(), CliError> {
    let servers = a.servers.servers();
    let mut dirs = a.symbol_path.clone();
    // With no server to fill it, a cache folder (SSQP layout) is still read, as one more symbol
    // path: replicas can share one filled elsewhere.
    if let (None, Some(cache)) = (&servers, &a.servers.cache) {
        dirs.push(cache.clone());
    }
    let paths = SymbolPaths { pdb: None, dirs, servers };
    let config = Config { paths, lru_bytes: a.lru_mb.saturating_mul(1 << 20), max_frames: a.max_frames };
    let state = Arc::new(State { service: Service::new(config), metrics: Metrics::new(), max_body: a.max_body, request_timeout: a.request_timeout });
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
    log(serde_json::json!({"ts": now(), "event": "listening", "listen": local.to_string(), "symbol_paths": a.symbol_path, "lru_mb": a.lru_mb, "max_body": a.max_body, "max_frames": a.max_frames}));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(a.header_timeout).keep_alive(true);
    let signal_name = loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    // Out of descriptors or a connection reset before accept: wait a little.
                    Err(_) => { tokio::time::sleep(Duration::from_millis(20)).await; continue; }
                };
                let _ = stream.set_nodelay(true);
                let state = state.clone();
                let service = hyper::service::service_fn(move |req| serve_one(state.clone(), peer, req));
                let conn = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
                tokio::spawn(async move { let _ = conn.await; });
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

//! The symbolication service's rules (`clrmap serve`, docs/output.md#the-service, docs/service.md), with no
//! HTTP: a request body in, an answer body or an error with its status out. One home for what a
//! request means, so the HTTP front end only moves bytes.
//!
//! - `POST /symbolicate` ([`Service::symbolicate`]): JSON modules and frames. Each module's PDB
//!   (or, for ReadyToRun frames, its image) is found once per request, through the symbol paths
//!   and the symbol servers, and kept parsed in a bounded LRU shared by all requests. Frames come
//!   in three forms ([`request`]): clrmap's own (`module`, `token`, `il_offset`), Sentry's .NET frames
//!   (`addr_mode` `rel:N`, `function_id`, `instruction_addr`), and the OpenTelemetry eBPF
//!   profiler's (`address`: a jitted frame's tagged method index and IL offset, or a ReadyToRun
//!   frame's RVA). Each frame is answered with docs/output.md#symbolized-frames' fields, by the runtime's line rule.
//! - `POST /stacktrace` ([`Service::stacktrace`]): docs/output.md#printed-stack-traces' text rewriting, one
//!   [`crate::stacktrace::Rewriter`] per request.
//!
//! A malformed body is an error with a stable kind (`bad_json`, `bad_utf8`, `missing_field`,
//! `bad_value`: status 400; `too_many_frames`: 413). A module whose symbols are not found is not
//! an error of the request: its frames carry an `error` object and null fields.

mod lookup;
pub mod request;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::locate::SymbolPaths;
use crate::metadata::Metadata;
use crate::pdb::{PortablePdb, WINDOWS_PDB_MESSAGE};
use crate::pe::PeImage;
use crate::symbolizer::{FrameKind, ModuleSymbols, Options, Symbolizer, MAX_CONTEXT_LINE};
use request::{file_name, parse_debug_id, parse_guid, parse_num, FrameIn, ModuleIn, Num, Request};

/// How long a module whose symbols were not found is remembered as missing (so a flood of frames
/// for it costs one lookup, and a PDB published later is found soon after).
pub const MISSING_TTL: Duration = Duration::from_secs(30);

/// What a service is configured with.
#[derive(Clone, Debug)]
pub struct Config {
    /// Symbol directories and servers.
    pub paths: SymbolPaths,
    /// The LRU's budget for parsed symbols, in bytes (each entry counts its files' sizes).
    pub lru_bytes: u64,
    /// At most this many frames in one request (more: 413 `too_many_frames`).
    pub max_frames: usize,
    /// The largest answer one request may have, in bytes (larger: 413 `answer_too_large`).
    pub max_answer: u64,
    /// How long a module whose symbols were not found is remembered as missing.
    pub missing_ttl: Duration,
}

impl Config {
    /// A configuration with the service's defaults ([`DEFAULT_MAX_ANSWER`], [`MISSING_TTL`]).
    pub fn new(paths: SymbolPaths, lru_bytes: u64, max_frames: usize) -> Config {
        Config { paths, lru_bytes, max_frames, max_answer: DEFAULT_MAX_ANSWER, missing_ttl: MISSING_TTL }
    }
}

/// The default bound on one answer: 64 MiB.
pub const DEFAULT_MAX_ANSWER: u64 = 64 << 20;

/// The longest module, assembly or PDB name a request may give (a file name's limit on the file
/// systems clrmap reads). A module with a longer one is not looked up, and its frames answer
/// `bad_module` with a null `module`: a long name is never repeated in an answer.
pub const MAX_NAME: usize = 255;

/// How much the answer grows between two asks for room (see [`Service::symbolicate_within`]).
pub const ANSWER_STEP: u64 = 64 << 10;

/// What one LRU entry costs besides its key and its contents: the map's slot, the entry, the
/// recency queue's slots and the allocations' headers (measured: see docs/service.md).
pub const ENTRY_OVERHEAD: u64 = 640;

/// A request that cannot be answered: the HTTP status, a stable kind and a message naming where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceError {
    /// 400, 413 or 503.
    pub status: u16,
    /// `bad_json`, `bad_utf8`, `missing_field`, `bad_value`, `too_many_frames`,
    /// `answer_too_large`, `busy`.
    pub kind: &'static str,
    /// What and where.
    pub message: String,
}

impl ServiceError {
    fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        ServiceError { status, kind, message: message.into() }
    }

    /// The body: `{"error":{"kind":...,"message":...}}`.
    pub fn to_json(&self) -> String {
        error_json(self.kind, &self.message)
    }
}

/// `{"error":{"kind":KIND,"message":MESSAGE}}`.
pub fn error_json(kind: &str, message: &str) -> String {
    serde_json::json!({"error": {"kind": kind, "message": message}}).to_string()
}

/// An answer: the body and how many frames it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The body.
    pub body: Vec<u8>,
    /// Frames answered (for logs and metrics).
    pub frames: u64,
}

/// What the service counted since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Lookups answered from the LRU (found or remembered missing).
    pub cache_hits: u64,
    /// Lookups that had to search the symbol paths and servers.
    pub cache_misses: u64,
    /// Of those, how many found nothing usable.
    pub fetch_failures: u64,
    /// Bytes the LRU holds now.
    pub lru_bytes: u64,
    /// Entries the LRU holds now.
    pub lru_entries: u64,
}

/// The service: its configuration, the LRU and its counters. Shared by every request (it is
/// `Sync`); each call does blocking I/O, so an async server runs it on a blocking thread.
#[derive(Debug)]
pub struct Service {
    config: Config,
    lru: Mutex<Lru>,
    hits: AtomicU64,
    misses: AtomicU64,
    failures: AtomicU64,
}

/// A module's PDB, parsed, with its assembly's bytes where found (for method names).
#[derive(Debug)]
struct PdbModule {
    lines: ModuleSymbols,
    assembly: Option<Vec<u8>>,
    names: Mutex<HashMap<u32, Option<Arc<str>>>>,
    /// Embedded source texts by Document row, inflated once (`None`: none, or unreadable), within
    /// [`SOURCE_CACHE`] bytes per module.
    sources: Mutex<SourceTexts>,
}

/// Embedded source texts by Document row, and the bytes they hold.
type SourceTexts = (HashMap<u32, Option<Arc<[u8]>>>, usize);

/// The most bytes of embedded source one module keeps inflated; past it a text is inflated for
/// each frame that needs it.
pub const SOURCE_CACHE: usize = 16 << 20;

/// The largest embedded source read for context lines.
pub const MAX_CONTEXT_SOURCE: usize = 16 << 20;

/// Context lines by default, and at most, on each side of a frame's line.
pub const DEFAULT_CONTEXT: u32 = 5;
/// See [`DEFAULT_CONTEXT`].
pub const MAX_CONTEXT: u32 = 20;

impl PdbModule {
    fn new(lines: ModuleSymbols, assembly: Option<Vec<u8>>) -> PdbModule {
        PdbModule { lines, assembly, names: Mutex::new(HashMap::new()), sources: Mutex::new((HashMap::new(), 0)) }
    }

    /// The embedded source of Document row `rid`, inflated.
    fn source(&self, rid: u32) -> Option<Arc<[u8]>> {
        let mut cache = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = cache.0.get(&rid) {
            return known.clone();
        }
        let text: Option<Arc<[u8]>> = PortablePdb::parse(self.lines.pdb_bytes()).ok().and_then(|p| p.embedded_source(rid).ok().flatten()).and_then(|s| s.text(MAX_CONTEXT_SOURCE).ok()).map(Arc::from);
        let len = text.as_ref().map_or(0, |t| t.len());
        if cache.1.saturating_add(len) <= SOURCE_CACHE {
            cache.1 = cache.1.saturating_add(len);
            cache.0.insert(rid, text.clone());
        }
        text
    }

    fn method_name(&self, token: u32) -> Option<Arc<str>> {
        let assembly = self.assembly.as_ref()?;
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = names.get(&token) {
            return known.clone();
        }
        let name = PeImage::parse(assembly).ok().and_then(|pe| Metadata::from_pe(&pe).ok()).and_then(|md| md.method_name(token)).map(Arc::from);
        names.insert(token, name.clone());
        name
    }
}

/// What the LRU holds for a key.
#[derive(Clone, Debug)]
enum Slot {
    Pdb(Arc<PdbModule>),
    Image(Arc<Symbolizer>),
    /// Nothing usable was found: why.
    Missing(Arc<str>),
}

#[derive(Debug)]
struct Entry {
    slot: Slot,
    size: u64,
    used: u64,
    at: Instant,
}

/// Parsed symbols by key, least recently used out first, bounded by the bytes its entries hold.
/// Recency is a queue of (tick, key): a use pushes a new one, and eviction pops from the front,
/// skipping those a later use made stale; the queue is rebuilt when stale ones outnumber live
/// ones. Every operation is O(1) amortized, whatever the number of entries.
#[derive(Debug, Default)]
struct Lru {
    map: HashMap<String, Entry>,
    order: std::collections::VecDeque<(u64, String)>,
    bytes: u64,
    tick: u64,
}

impl Lru {
    fn touch(&mut self, key: &str) -> u64 {
        self.tick = self.tick.wrapping_add(1);
        self.order.push_back((self.tick, key.to_owned()));
        if self.order.len() > self.map.len().saturating_mul(2).saturating_add(64) {
            let map = &self.map;
            self.order.retain(|(tick, key)| map.get(key).is_some_and(|e| e.used == *tick));
        }
        self.tick
    }

    fn get(&mut self, key: &str, missing_ttl: Duration) -> Option<Slot> {
        let expired = match self.map.get(key) {
            Some(e) => matches!(e.slot, Slot::Missing(_)) && e.at.elapsed() >= missing_ttl,
            None => return None,
        };
        if expired {
            if let Some(e) = self.map.remove(key) {
                self.bytes = self.bytes.saturating_sub(e.size);
            }
            return None;
        }
        let tick = self.touch(key);
        let e = self.map.get_mut(key)?;
        e.used = tick;
        Some(e.slot.clone())
    }

    fn put(&mut self, key: String, slot: Slot, size: u64, cap: u64) {
        if let Some(old) = self.map.remove(&key) {
            self.bytes = self.bytes.saturating_sub(old.size);
        }
        // Least recently used first, until the new entry fits (an entry larger than the whole
        // budget is still kept alone: the request that loaded it is using it anyway).
        while self.bytes.saturating_add(size) > cap {
            let Some((tick, victim)) = self.order.pop_front() else { break };
            if self.map.get(&victim).is_some_and(|e| e.used == tick) {
                if let Some(e) = self.map.remove(&victim) {
                    self.bytes = self.bytes.saturating_sub(e.size);
                }
            }
        }
        self.bytes = self.bytes.saturating_add(size);
        let tick = self.touch(&key);
        self.map.insert(key, Entry { slot, size, used: tick, at: Instant::now() });
    }
}

/// One module of a request, as understood from its fields.
#[derive(Debug, Default)]
struct Ident {
    /// The assembly's file name.
    name: Option<String>,
    /// The PDB's file name.
    pdb: Option<String>,
    guid: Option<[u8; 16]>,
    /// The PDB id's stamp (Sentry's debug_id carries it).
    stamp: Option<u32>,
    mvid: Option<[u8; 16]>,
    /// The SSQP PE key: TimeDateStamp, SizeOfImage.
    pe_key: Option<(u32, u32)>,
    /// Why the module is not looked up (a name over [`MAX_NAME`] bytes).
    bad: Option<Arc<str>>,
}

impl Ident {
    fn from_module(m: &ModuleIn, at: usize) -> Result<Ident, ServiceError> {
        let bad = |field: &str, what: &str| ServiceError::new(400, "bad_value", format!("modules[{at}].{field}: {what}"));
        let name = m.name.clone().or_else(|| m.code_file.as_deref().map(|p| file_name(p).to_owned())).filter(|n| !n.is_empty());
        // A PDB is named by its file name alone (a path's directories are never read): only the
        // symbol paths, the cache and the servers are searched.
        let pdb = m.pdb.as_deref().or(m.debug_file.as_deref()).map(|p| file_name(p).to_owned()).filter(|n| !n.is_empty());
        let long = [("name", &name), ("pdb", &pdb)].into_iter().find_map(|(field, v)| v.as_ref().filter(|v| v.len() > MAX_NAME).map(|v| (field, v.len())));
        if let Some((field, len)) = long {
            let why = format!("modules[{at}]: its {field} is {len} bytes, over the {MAX_NAME} a file name may have; not looked up");
            return Ok(Ident { bad: Some(Arc::from(why)), ..Ident::default() });
        }
        let (guid, stamp) = match (&m.pdb_id, &m.debug_id) {
            (Some(id), _) | (None, Some(id)) => {
                let field = if m.pdb_id.is_some() { "pdb_id" } else { "debug_id" };
                let (g, s) = parse_debug_id(id)
                    .ok_or_else(|| bad(field, "not a PDB id: a GUID (dashed or 32 hex digits), optionally with an age of 1 to 8 hex digits (after a dash, or appended: 40 hex digits)"))?;
                (Some(g), s)
            }
            (None, None) => (None, None),
        };
        let mvid = match &m.mvid {
            Some(t) => Some(parse_guid(t).ok_or_else(|| bad("mvid", "not a GUID"))?),
            None => None,
        };
        let pe_key = match (&m.code_id, m.pe_timestamp, m.pe_size_of_image) {
            (_, Some(Num(t)), Some(Num(s))) => Some((u32::try_from(t).map_err(|_| bad("pe_timestamp", "over 32 bits"))?, u32::try_from(s).map_err(|_| bad("pe_size_of_image", "over 32 bits"))?)),
            (Some(code_id), _, _) if m.kind.as_deref().is_none_or(|k| k.starts_with("pe")) => parse_code_id(code_id),
            _ => None,
        };
        Ok(Ident { name, pdb, guid, stamp, mvid, pe_key, bad: None })
    }

    /// The PDB's name: as given, else the assembly's with `.pdb`.
    fn pdb_name(&self) -> Option<String> {
        self.pdb.clone().or_else(|| {
            let name = self.name.as_deref()?;
            let stem = name.strip_suffix(".dll").or_else(|| name.strip_suffix(".exe")).or_else(|| name.strip_suffix(".DLL")).or_else(|| name.strip_suffix(".EXE")).unwrap_or(name);
            Some(format!("{stem}.pdb"))
        })
    }

    fn pdb_key(&self) -> Option<String> {
        let hex = |g: &[u8; 16]| crate::symsrv::key::guid_n(g);
        match (&self.guid, self.pdb_name(), &self.name) {
            (Some(g), Some(p), _) => Some(format!("pdb\u{0}{}\u{0}{p}\u{0}{:?}", hex(g), self.stamp)),
            (None, _, Some(n)) => Some(format!("asm\u{0}{n}\u{0}{:?}\u{0}{:?}", self.mvid.as_ref().map(hex), self.pe_key)),
            (None, Some(p), None) => Some(format!("pdbname\u{0}{p}")),
            _ => None,
        }
    }

    fn image_key(&self) -> Option<String> {
        let name = self.name.as_deref()?;
        Some(format!("img\u{0}{name}\u{0}{:?}\u{0}{:?}", self.mvid.as_ref().map(crate::symsrv::key::guid_n), self.pe_key))
    }
}

/// Sentry's and SSQP's PE `code_id`: the TimeDateStamp as 8 hex digits, then SizeOfImage in hex.
fn parse_code_id(text: &str) -> Option<(u32, u32)> {
    let ts = u32::from_str_radix(text.get(..8)?, 16).ok()?;
    let size = u32::from_str_radix(text.get(8..).filter(|s| !s.is_empty() && s.len() <= 8)?, 16).ok()?;
    Some((ts, size))
}

/// Why an answer stopped being written.
#[derive(Clone, Copy, Debug)]
enum Stop {
    TooLarge,
    Busy,
}

/// An answer's bytes, bounded by [`Config::max_answer`] and by the room its server grants.
struct Bounded<'a> {
    buf: Vec<u8>,
    max: u64,
    granted: u64,
    room: &'a mut dyn FnMut(u64) -> bool,
    stop: Option<Stop>,
}

impl std::io::Write for Bounded<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let want = u64::try_from(self.buf.len().saturating_add(data.len())).unwrap_or(u64::MAX);
        if want > self.max {
            self.stop = Some(Stop::TooLarge);
            return Err(std::io::Error::other("answer too large"));
        }
        // The room asked for is the buffer's capacity (what it really holds), grown by doubling
        // up to the bound.
        let cap = u64::try_from(self.buf.capacity()).unwrap_or(u64::MAX);
        if want > cap {
            let target = want.max(cap.saturating_mul(2)).max(ANSWER_STEP).min(self.max);
            while target > self.granted {
                if !(self.room)(ANSWER_STEP) {
                    self.stop = Some(Stop::Busy);
                    return Err(std::io::Error::other("no room"));
                }
                self.granted = self.granted.saturating_add(ANSWER_STEP);
            }
            let extra = usize::try_from(target).unwrap_or(usize::MAX).saturating_sub(self.buf.len());
            self.buf.reserve_exact(extra);
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One frame's answer: docs/output.md#symbolized-frames' fields but `address`, and an `error` where the module's symbols were
/// not found.
#[derive(Clone, Debug, Default, Serialize)]
struct FrameOut {
    module: Option<String>,
    token: Option<u32>,
    #[serde(serialize_with = "opt_arc_str")]
    method: Option<Arc<str>>,
    il_offset: Option<u32>,
    file: Option<String>,
    line: Option<u32>,
    column: Option<u32>,
    end_line: Option<u32>,
    end_column: Option<u32>,
    /// The document's URL by the PDB's SourceLink map.
    #[serde(skip_serializing_if = "Option::is_none")]
    source_link: Option<String>,
    /// Sentry's context lines, from the source the PDB embeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pre_context: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_line: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    post_context: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<FrameError>,
}

#[derive(Clone, Debug, Serialize)]
struct FrameError {
    kind: &'static str,
    #[serde(serialize_with = "arc_str")]
    message: Arc<str>,
}

fn arc_str<S: serde::Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v)
}

fn opt_arc_str<S: serde::Serializer>(v: &Option<Arc<str>>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(v),
        None => s.serialize_none(),
    }
}

/// What one frame asks.
#[derive(Clone, Copy, Debug)]
enum Ask {
    /// A jitted (or any IL) frame: token and IL offset, answered from the PDB.
    Il { token: u32, il: u32 },
    /// A ReadyToRun frame: an RVA in the image, answered through its map.
    Rva { rva: u32, kind: FrameKind },
}

impl Service {
    /// A service with this configuration.
    pub fn new(config: Config) -> Service {
        Service { config, lru: Mutex::new(Lru::default()), hits: AtomicU64::new(0), misses: AtomicU64::new(0), failures: AtomicU64::new(0) }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The counters.
    pub fn counts(&self) -> Counts {
        let lru = self.lru.lock().unwrap_or_else(PoisonError::into_inner);
        Counts {
            cache_hits: self.hits.load(Ordering::Relaxed),
            cache_misses: self.misses.load(Ordering::Relaxed),
            fetch_failures: self.failures.load(Ordering::Relaxed),
            lru_bytes: lru.bytes,
            lru_entries: u64::try_from(lru.map.len()).unwrap_or(u64::MAX),
        }
    }

    /// Answer a `POST /symbolicate` body.
    pub fn symbolicate(&self, body: &[u8]) -> Result<Answer, ServiceError> {
        self.symbolicate_within(body, &mut |_| true)
    }

    /// [`Service::symbolicate`], asking `room` before the answer grows by each [`ANSWER_STEP`]
    /// bytes (a server's bound on the bytes all answers hold at once): a `false` stops the answer
    /// with 503 `busy`. The answer is written frame by frame as each is answered, and stops with
    /// 413 `answer_too_large` past [`Config::max_answer`].
    pub fn symbolicate_within(&self, body: &[u8], room: &mut dyn FnMut(u64) -> bool) -> Result<Answer, ServiceError> {
        let text = std::str::from_utf8(body).map_err(|e| ServiceError::new(400, "bad_utf8", format!("the body is not UTF-8: at byte {}", e.valid_up_to())))?;
        let max = self.config.max_frames;
        let request: Request = request::with_frame_budget(max, || serde_json::from_str(text)).map_err(|e| {
            if e.to_string().starts_with(request::TOO_MANY_FRAMES) {
                ServiceError::new(413, "too_many_frames", format!("more than {max} frames in one request (stopped at line {} column {})", e.line(), e.column()))
            } else if e.to_string().starts_with(request::TOO_MANY_MODULES) {
                ServiceError::new(413, "too_many_modules", format!("more than {} modules in one request (stopped at line {} column {})", request::MAX_MODULES, e.line(), e.column()))
            } else {
                json_error(e)
            }
        })?;
        let context = match request.context_lines {
            Some(Num(n)) if n > u64::from(MAX_CONTEXT) => return Err(ServiceError::new(400, "bad_value", format!("context_lines: {n} is over {MAX_CONTEXT}"))),
            Some(Num(n)) => u32::try_from(n).unwrap_or(MAX_CONTEXT),
            None => DEFAULT_CONTEXT,
        };
        let modules = request.modules.or(request.debug_meta.and_then(|d| d.images)).unwrap_or_default().0;
        let idents = modules.iter().enumerate().map(|(i, m)| Ident::from_module(m, i)).collect::<Result<Vec<_>, _>>()?;
        let (groups, nested) = match (request.frames, request.stacktraces) {
            (Some(frames), _) => (vec![frames.0], false),
            (None, Some(traces)) => (traces.into_iter().map(|t| t.frames.unwrap_or_default().0).collect(), true),
            (None, None) => return Err(ServiceError::new(400, "missing_field", "missing field `frames` (or `stacktraces`)")),
        };
        let total = groups.iter().map(Vec::len).fold(0usize, usize::saturating_add);
        if total > self.config.max_frames {
            return Err(ServiceError::new(413, "too_many_frames", format!("{total} frames; at most {} in one request", self.config.max_frames)));
        }
        // Check every frame before any lookup: a malformed request costs no I/O.
        let mut asks = Vec::with_capacity(groups.len());
        for (g, frames) in groups.iter().enumerate() {
            let mut group = Vec::with_capacity(frames.len());
            for (i, f) in frames.iter().enumerate() {
                let at = if nested { format!("stacktraces[{g}].frames[{i}]") } else { format!("frames[{i}]") };
                group.push(ask_of(f, &at, idents.len())?);
            }
            asks.push(group);
        }
        let mut pdbs: Vec<Option<Slot>> = vec![None; idents.len()];
        let mut images: Vec<Option<Slot>> = vec![None; idents.len()];
        let mut out = Bounded { buf: Vec::new(), max: self.config.max_answer, granted: 0, room, stop: None };
        let written = self.write_answer(&mut out, &idents, asks, nested, context, &mut pdbs, &mut images);
        match (written, out.stop) {
            (Ok(()), _) => Ok(Answer { body: out.buf, frames: u64::try_from(total).unwrap_or(u64::MAX) }),
            (Err(_), Some(Stop::TooLarge)) => {
                Err(ServiceError::new(413, "answer_too_large", format!("the answer is over {} bytes (the service's --max-answer); send fewer frames in one request", self.config.max_answer)))
            }
            (Err(_), Some(Stop::Busy)) => Err(ServiceError::new(503, "busy", "the service holds as many answer bytes as it may; retry later")),
            (Err(e), None) => Err(ServiceError::new(500, "internal", e.to_string())),
        }
    }

    /// Answer each frame and write it at once: `{"frames":[...]}`, or `{"stacktraces":[{"frames":
    /// [...]},...]}` when `nested`.
    #[allow(clippy::too_many_arguments)]
    fn write_answer(
        &self,
        out: &mut Bounded<'_>,
        idents: &[Ident],
        asks: Vec<Vec<(usize, Ask)>>,
        nested: bool,
        context: u32,
        pdbs: &mut [Option<Slot>],
        images: &mut [Option<Slot>],
    ) -> std::io::Result<()> {
        use std::io::Write;
        out.write_all(if nested { b"{\"stacktraces\":[" } else { b"{" })?;
        for (g, group) in asks.into_iter().enumerate() {
            if g > 0 {
                out.write_all(b",")?;
            }
            out.write_all(if nested { b"{\"frames\":[" } else { b"\"frames\":[" })?;
            for (i, (module, ask)) in group.into_iter().enumerate() {
                let Some(ident) = idents.get(module) else { continue };
                let answer = match (ask, &ident.bad) {
                    (_, Some(why)) => FrameOut { error: Some(FrameError { kind: "bad_module", message: why.clone() }), ..FrameOut::default() },
                    (Ask::Il { token, il }, None) => {
                        let slot = cached(pdbs.get_mut(module), || self.lookup(ident.pdb_key(), || self.load_pdb(ident)));
                        answer_il(ident, &slot, token, il, context)
                    }
                    (Ask::Rva { rva, kind }, None) => {
                        let slot = cached(images.get_mut(module), || self.lookup(ident.image_key(), || self.load_image(ident)));
                        answer_rva(ident, &slot, rva, kind)
                    }
                };
                if i > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, &answer).map_err(std::io::Error::other)?;
            }
            out.write_all(if nested { b"]}" } else { b"]" })?;
        }
        out.write_all(if nested { b"]}" } else { b"}" })?;
        out.flush()
    }

    /// Answer a `POST /stacktrace` body (docs/output.md#printed-stack-traces): the text with each frame whose PDB is found
    /// rewritten, every other byte unchanged.
    pub fn stacktrace(&self, body: &[u8]) -> Result<Answer, ServiceError> {
        std::str::from_utf8(body).map_err(|e| ServiceError::new(400, "bad_utf8", format!("the body is not UTF-8: at byte {}", e.valid_up_to())))?;
        let options = crate::stacktrace::Options { dirs: self.config.paths.dirs.clone(), pdbs: Vec::new(), servers: self.config.paths.servers.clone() };
        let mut rewriter = crate::stacktrace::Rewriter::new(options).map_err(|e| ServiceError::new(500, "internal", e.to_string()))?;
        let mut out = Vec::with_capacity(body.len());
        let stats = rewriter.rewrite(body, &mut out, &mut |_| {}).map_err(|e| ServiceError::new(500, "internal", e.to_string()))?;
        Ok(Answer { body: out, frames: stats.frames })
    }

    /// The LRU's slot for `key`, loading it on a miss.
    fn lookup(&self, key: Option<String>, load: impl FnOnce() -> Result<(Slot, u64), String>) -> Slot {
        let Some(key) = key else { return Slot::Missing(Arc::from("the module names neither an assembly nor a PDB with an id")) };
        if let Some(slot) = self.lru.lock().unwrap_or_else(PoisonError::into_inner).get(&key, self.config.missing_ttl) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return slot;
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let (slot, size) = match load() {
            Ok(found) => found,
            Err(why) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                // The message's bytes and its Arc's two counts.
                let size = u64::try_from(why.len()).unwrap_or(u64::MAX).saturating_add(16);
                (Slot::Missing(Arc::from(why)), size)
            }
        };
        // The key is held twice (the map and the recency queue), and every entry has its fixed
        // overhead.
        let size = size.saturating_add(u64::try_from(key.len()).unwrap_or(u64::MAX).saturating_mul(2)).saturating_add(ENTRY_OVERHEAD);
        self.lru.lock().unwrap_or_else(PoisonError::into_inner).put(key, slot.clone(), size, self.config.lru_bytes);
        slot
    }

    /// Find a module's image (for ReadyToRun frames) and index its bodies.
    fn load_image(&self, ident: &Ident) -> Result<(Slot, u64), String> {
        let name = ident.name.as_deref().ok_or("the module names no assembly (name or code_file)")?;
        let (path, bytes) = self.find_image(ident, name).map_err(|why| {
            why.unwrap_or_else(|| {
                let key = ident.pe_key.and_then(|(t, s)| crate::symsrv::key::pe_image(name, t, s));
                format!("no image {name}{} in the symbol paths or on a symbol server{}", ident_note(ident), server_notes(&self.config.paths, key.as_ref()))
            })
        })?;
        let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX).saturating_mul(3);
        drop(bytes);
        let symbolizer = Symbolizer::open(&path, Options { symbols: self.config.paths.clone() }).map_err(|e| e.to_string())?;
        Ok((Slot::Image(Arc::new(symbolizer)), size))
    }
}

/// What the symbol servers said about `key` (a 404, a 500, a timeout), as `; symbol server
/// URL: KEY: WHAT` each (at most 4), so a frame's error says why: looked up by key, at a cost
/// that does not grow with the number of failures.
fn server_notes(paths: &SymbolPaths, key: Option<&crate::symsrv::Key>) -> String {
    let (Some(servers), Some(key)) = (&paths.servers, key) else { return String::new() };
    servers.notes_for(key).iter().take(4).map(|n| format!("; {n}")).collect()
}

fn ident_note(ident: &Ident) -> String {
    let mut s = String::new();
    if let Some(m) = &ident.mvid {
        s.push_str(&format!(" with MVID {}", crate::metadata::mvid_text(m)));
    }
    if let Some((t, z)) = ident.pe_key {
        s.push_str(&format!(" with PE key {t:08X}{z:x}"));
    }
    s
}

/// The slot in `memo`, or `load`'s, remembered there.
fn cached(memo: Option<&mut Option<Slot>>, load: impl FnOnce() -> Slot) -> Slot {
    match memo {
        Some(Some(slot)) => slot.clone(),
        Some(memo) => {
            let slot = load();
            *memo = Some(slot.clone());
            slot
        }
        None => load(),
    }
}

/// What a frame asks, checked against the request's modules.
fn ask_of(f: &FrameIn, at: &str, modules: usize) -> Result<(usize, Ask), ServiceError> {
    let bad = |what: String| ServiceError::new(400, "bad_value", format!("{at}{what}"));
    let module = match (f.module.and_then(|m| m.0), f.addr_mode.as_deref()) {
        (Some(m), _) => m,
        (None, Some(mode)) => mode.strip_prefix("rel:").and_then(parse_num).ok_or_else(|| bad(format!(".addr_mode: {mode:?} is not rel:N")))?,
        (None, None) => return Err(ServiceError::new(400, "missing_field", format!("{at}: missing field `module` (or `addr_mode`)"))),
    };
    let module = usize::try_from(module).ok().filter(|m| *m < modules).ok_or_else(|| bad(format!(".module: {module} names no module (the request has {modules})")))?;
    let u32_of = |n: Num, field: &str| u32::try_from(n.0).map_err(|_| bad(format!(".{field}: {} is over 32 bits", n.0)));
    if let Some(Num(address)) = f.address {
        // The OpenTelemetry eBPF profiler's line id: 0xf, 28 bits of MethodDef index and 32 bits
        // of IL offset for a jitted frame; otherwise a ReadyToRun frame's RVA.
        if address >> 60 == 0xf {
            let index = u32::try_from((address >> 32) & 0x0fff_ffff).unwrap_or(0);
            let il = u32::try_from(address & 0xffff_ffff).unwrap_or(0);
            return Ok((module, Ask::Il { token: 0x0600_0000 | index, il }));
        }
        let rva = u32_of(Num(address), "address")?;
        return Ok((module, Ask::Rva { rva, kind: rva_kind(f) }));
    }
    if let Some(rva) = f.rva {
        return Ok((module, Ask::Rva { rva: u32_of(rva, "rva")?, kind: rva_kind(f) }));
    }
    let token = match (f.token, f.function_id) {
        (Some(t), _) => u32_of(t, "token")?,
        (None, Some(id)) => {
            let id = u32_of(id, "function_id")?;
            if id >> 24 == 0 {
                0x0600_0000 | id
            } else {
                id
            }
        }
        (None, None) => return Err(ServiceError::new(400, "missing_field", format!("{at}: missing field `token` (or `function_id`, `address`, `rva`)"))),
    };
    let il = match (f.il_offset, f.instruction_addr) {
        (Some(n), _) => u32_of(n, "il_offset")?,
        (None, Some(n)) => u32_of(n, "instruction_addr")?,
        (None, None) => return Err(ServiceError::new(400, "missing_field", format!("{at}: missing field `il_offset` (or `instruction_addr`)"))),
    };
    Ok((module, Ask::Il { token, il }))
}

fn rva_kind(f: &FrameIn) -> FrameKind {
    if f.return_address == Some(true) {
        FrameKind::ReturnAddress
    } else {
        FrameKind::Leaf
    }
}

fn missing(ident: &Ident, why: &Arc<str>) -> FrameOut {
    // A Windows PDB where the module's PDB was: its own kind, with Sentry's words first.
    let kind = if why.starts_with(WINDOWS_PDB_MESSAGE) { "unsupported_pdb_format" } else { "not_found" };
    FrameOut { module: ident.name.clone(), error: Some(FrameError { kind, message: why.clone() }), ..FrameOut::default() }
}

/// Why a module's PDB was not found, when a Windows PDB stood where it was looked for (a file in
/// a symbol path, or what a symbol server sent): Sentry's words, then where.
fn windows_pdb_note(passed: &[crate::locate::PassedOver], paths: &SymbolPaths, key: Option<&crate::symsrv::Key>) -> Option<String> {
    if let Some(p) = passed.iter().find(|p| p.windows_pdb) {
        return Some(format!("{WINDOWS_PDB_MESSAGE}: {} is a Windows (MSF) PDB", p.path.display()));
    }
    let (Some(servers), Some(key)) = (&paths.servers, key) else { return None };
    servers.notes_for(key).into_iter().find(|n| n.contains(WINDOWS_PDB_MESSAGE)).map(|n| format!("{WINDOWS_PDB_MESSAGE}: {n}"))
}

fn answer_il(ident: &Ident, slot: &Slot, token: u32, il: u32, context: u32) -> FrameOut {
    let pdb = match slot {
        Slot::Pdb(p) => p,
        Slot::Missing(why) => return FrameOut { token: Some(token), il_offset: Some(il), ..missing(ident, why) },
        Slot::Image(_) => return FrameOut { module: ident.name.clone(), token: Some(token), il_offset: Some(il), ..FrameOut::default() },
    };
    let mut out = FrameOut { module: ident.name.clone(), token: Some(token), method: pdb.method_name(token), il_offset: Some(il), ..FrameOut::default() };
    if let Some((line, column, end_line, end_column, file)) = pdb.lines.span(token, il) {
        out.file = file.map(str::to_owned);
        out.line = Some(line);
        out.column = Some(column);
        out.end_line = Some(end_line);
        out.end_column = Some(end_column);
        out.source_link = pdb.lines.source_link(token, il).map(str::to_owned);
        let text = pdb.lines.document(token, il).filter(|_| context > 0).and_then(|rid| pdb.source(rid));
        if let Some((pre, this, post)) = text.and_then(|t| crate::pdb::sources::context(&t, line, context, context, MAX_CONTEXT_LINE)) {
            out.pre_context = (!pre.is_empty()).then_some(pre);
            out.context_line = Some(this);
            out.post_context = (!post.is_empty()).then_some(post);
        }
    }
    out
}

fn answer_rva(ident: &Ident, slot: &Slot, rva: u32, kind: FrameKind) -> FrameOut {
    let sym = match slot {
        Slot::Image(s) => s,
        Slot::Missing(why) => return missing(ident, why),
        Slot::Pdb(_) => return FrameOut { module: ident.name.clone(), ..FrameOut::default() },
    };
    let f = sym.symbolize(u64::from(rva), kind);
    FrameOut {
        // As `clrmap symbolize` answers: an RVA inside no body has every field null. Otherwise the
        // module's name as the request gave it (a file from a symbol server's cache is named in
        // lower case).
        module: f.module.map(|m| ident.name.clone().unwrap_or_else(|| m.to_owned())),
        token: f.token,
        method: f.method.map(Arc::from),
        il_offset: f.il_offset,
        file: f.file.map(str::to_owned),
        line: f.line,
        column: f.column,
        end_line: f.end_line,
        end_column: f.end_column,
        error: None,
        ..FrameOut::default()
    }
}

/// A serde_json error as the service's kind: bad syntax or a cut body is `bad_json`, a field
/// missing is `missing_field`, a field of the wrong type or value is `bad_value`.
fn json_error(e: serde_json::Error) -> ServiceError {
    use serde_json::error::Category;
    let message = e.to_string();
    let kind = match e.classify() {
        Category::Data if message.starts_with("missing field") => "missing_field",
        Category::Data => "bad_value",
        Category::Syntax | Category::Eof | Category::Io => "bad_json",
    };
    ServiceError::new(400, kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> Service {
        Service::new(Config::new(SymbolPaths::default(), 1 << 20, 3))
    }

    #[test]
    fn malformed_bodies_are_errors_with_kinds() {
        let s = service();
        let kind = |body: &[u8]| s.symbolicate(body).err().map(|e| (e.status, e.kind));
        assert_eq!(kind(b"{"), Some((400, "bad_json")));
        assert_eq!(kind(b"\xff"), Some((400, "bad_utf8")));
        assert_eq!(kind(br#"{"modules":[]}"#), Some((400, "missing_field")));
        assert_eq!(kind(br#"{"modules":[],"frames":[{"module":0,"token":1,"il_offset":0}]}"#), Some((400, "bad_value")));
        assert_eq!(kind(br#"{"modules":[{}],"frames":[{"module":0,"il_offset":0}]}"#), Some((400, "missing_field")));
        assert_eq!(kind(br#"{"modules":[{}],"frames":[{"module":0,"token":"x","il_offset":0}]}"#), Some((400, "bad_value")));
        assert_eq!(kind(br#"{"modules":[{"pdb_id":"zz"}],"frames":[]}"#), Some((400, "bad_value")));
        let four =
            br#"{"modules":[{}],"frames":[{"module":0,"token":1,"il_offset":0},{"module":0,"token":1,"il_offset":0},{"module":0,"token":1,"il_offset":0},{"module":0,"token":1,"il_offset":0}]}"#;
        assert_eq!(kind(four), Some((413, "too_many_frames")));
    }

    #[test]
    fn a_module_not_found_is_a_frame_error_remembered_in_the_lru() {
        let s = service();
        let body = br#"{"modules":[{"name":"Nowhere.dll"}],"frames":[{"module":0,"token":100663297,"il_offset":3},{"module":0,"token":100663297,"il_offset":4}]}"#;
        let a = s.symbolicate(body).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
        assert_eq!(v["frames"][0]["module"], "Nowhere.dll");
        assert_eq!(v["frames"][0]["token"], 100663297);
        assert_eq!(v["frames"][0]["line"], serde_json::Value::Null);
        assert_eq!(v["frames"][0]["error"]["kind"], "not_found");
        let c = s.counts();
        assert_eq!((c.cache_misses, c.fetch_failures, c.cache_hits), (1, 1, 0));
        s.symbolicate(body).unwrap();
        assert_eq!(s.counts().cache_hits, 1);
    }

    #[test]
    fn otel_addresses_decode_to_method_index_and_il_or_rva() {
        let f = FrameIn { module: Some(request::Index(Some(0))), address: Some(Num(((0xf000_0000u64 + 5) << 32) + 0x1a)), ..FrameIn::default() };
        assert!(matches!(ask_of(&f, "f", 1), Ok((0, Ask::Il { token: 0x0600_0005, il: 0x1a }))));
        let f = FrameIn { module: Some(request::Index(Some(0))), address: Some(Num(0x1234)), return_address: Some(true), ..FrameIn::default() };
        assert!(matches!(ask_of(&f, "f", 1), Ok((0, Ask::Rva { rva: 0x1234, kind: FrameKind::ReturnAddress }))));
    }

    #[test]
    fn the_lru_evicts_the_least_recently_used_by_bytes() {
        let mut l = Lru::default();
        let m = |s: &str| Slot::Missing(Arc::from(s));
        l.put("a".into(), m("a"), 40, 100);
        l.put("b".into(), m("b"), 40, 100);
        let ttl = Duration::from_secs(30);
        assert!(l.get("a", ttl).is_some());
        l.put("c".into(), m("c"), 40, 100);
        assert!(l.get("b", ttl).is_none() && l.get("a", ttl).is_some() && l.get("c", ttl).is_some());
        // Uses past eviction keep the recency queue bounded.
        for _ in 0..1000 {
            assert!(l.get("a", ttl).is_some());
        }
        assert!(l.order.len() <= 2 * l.map.len() + 65, "{}", l.order.len());
        // A missing entry past its time is gone.
        assert_eq!(l.bytes, 80);
        assert!(l.get("a", Duration::ZERO).is_none());
        assert_eq!(l.bytes, 40);
        assert_eq!(parse_code_id("542D574232000"), Some((0x542d_5742, 0x32000)));
    }
}

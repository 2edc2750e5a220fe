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
//!   [`crate::answers::stacktrace::Rewriter`] per request.
//!
//! A malformed body is an error with a stable kind (`bad_json`, `bad_utf8`, `missing_field`,
//! `bad_value`: status 400; `too_many_frames`: 413). A module whose symbols are not found is not
//! an error of the request: its frames carry an `error` object and null fields.

mod answer;
mod decode;
mod ident;
mod lookup;
mod lru;
mod pdb_module;
mod piece;
pub mod request;
pub mod scan;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::answers::symbolizer::{Options, Symbolizer};
use crate::symbols::locate::SymbolPaths;
use answer::{Bounded, Found, Stop};
use decode::{ask_of, json_error, At};
use ident::{ident_note, server_notes, windows_pdb_note, Ident};
use lru::{Lru, Slot};
use pdb_module::PdbModule;
pub use pdb_module::{MAX_CONTEXT_SOURCE, SOURCE_CACHE};
use request::{Num, Request};
use scan::Asked;

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

/// The kind [`Service::answer`] stops with when it may not load a module it needs.
const NOT_CACHED: &str = "not_cached";

/// The default bound on one answer: 64 MiB.
pub const DEFAULT_MAX_ANSWER: u64 = 64 << 20;

/// The longest module, assembly or PDB name a request may give (a file name's limit on the file
/// systems clrmap reads). A module with a longer one is not looked up, and its frames answer
/// `bad_module` with a null `module`: a long name is never repeated in an answer.
pub const MAX_NAME: usize = 255;

/// The frames written between two checks of the answer's bound and room.
const RUN: usize = 16;

/// The bytes of an answered frame, about (a line found, short names): what an answer's buffer is
/// reserved for before the first frame is written.
const FRAME_GUESS: u64 = 192;

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
    crate::base::json::ErrorObject { kind, location: None, input: None, message }.line()
}

/// The body as text, or 400 `bad_utf8` naming the first byte that is not.
fn utf8(body: &[u8]) -> Result<&str, ServiceError> {
    std::str::from_utf8(body).map_err(|e| ServiceError::new(400, "bad_utf8", format!("the body is not UTF-8: at byte {}", e.valid_up_to())))
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

/// Context lines by default, and at most, on each side of a frame's line.
pub const DEFAULT_CONTEXT: u32 = 5;
/// See [`DEFAULT_CONTEXT`].
pub const MAX_CONTEXT: u32 = 20;

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
        self.answer(body, room, true)
    }

    /// [`Service::symbolicate_within`] when every module the body asks about is already in the
    /// LRU (found, or remembered missing): no file is read and no server asked, so a server may
    /// answer on its own event loop. `None`: some module is not, and the caller answers with
    /// [`Service::symbolicate_within`] where blocking is fine.
    pub fn symbolicate_cached(&self, body: &[u8], room: &mut dyn FnMut(u64) -> bool) -> Option<Result<Answer, ServiceError>> {
        match self.answer(body, room, false) {
            Err(e) if e.kind == NOT_CACHED => None,
            other => Some(other),
        }
    }

    fn answer(&self, body: &[u8], room: &mut dyn FnMut(u64) -> bool, may_load: bool) -> Result<Answer, ServiceError> {
        // The cursor reads what clients send (checking the UTF-8 of what it reads); serde reads
        // (and names the errors of) the rest, after the whole body's UTF-8 is checked.
        let mut asked = match scan::read_asked(body, self.config.max_frames) {
            Some(asked) => asked,
            None => self.read_with_serde(utf8(body)?)?,
        };
        let context = match asked.context_lines {
            Some(Num(n)) if n > u64::from(MAX_CONTEXT) => return Err(ServiceError::new(400, "bad_value", format!("context_lines: {n} is over {MAX_CONTEXT}"))),
            Some(Num(n)) => u32::try_from(n).unwrap_or(MAX_CONTEXT),
            None => DEFAULT_CONTEXT,
        };
        let idents = asked.modules.iter().enumerate().map(|(i, m)| Ident::from_module(m, i)).collect::<Result<Vec<_>, _>>()?;
        drop(std::mem::take(&mut asked.modules));
        let total = asked.groups.iter().map(Vec::len).fold(0usize, usize::saturating_add);
        let mut out = Bounded::new(self.config.max_answer, room);
        match self.write_answer(&mut out, &idents, &asked, context, may_load) {
            Ok(()) => Ok(Answer { body: out.buf, frames: u64::try_from(total).unwrap_or(u64::MAX) }),
            Err(Stop::TooLarge) => {
                Err(ServiceError::new(413, "answer_too_large", format!("the answer is over {} bytes (the service's --max-answer); send fewer frames in one request", self.config.max_answer)))
            }
            Err(Stop::Busy) => Err(ServiceError::new(503, "busy", "the service holds as many answer bytes as it may; retry later")),
            Err(Stop::NotCached) => Err(ServiceError::new(503, NOT_CACHED, "a module is not in the LRU")),
        }
    }

    /// A body the cursor left: read by serde's model, each frame checked in order, with the
    /// service's errors (their kinds, and where).
    fn read_with_serde(&self, text: &str) -> Result<Asked, ServiceError> {
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
        let context_lines = request.context_lines;
        if let Some(Num(n)) = context_lines.filter(|n| n.0 > u64::from(MAX_CONTEXT)) {
            return Err(ServiceError::new(400, "bad_value", format!("context_lines: {n} is over {MAX_CONTEXT}")));
        }
        let (modules, lists) = request.chosen();
        // The modules' own errors come before the frames'.
        for (i, m) in modules.iter().enumerate() {
            Ident::from_module(m, i)?;
        }
        let (groups, nested) = lists.ok_or_else(|| ServiceError::new(400, "missing_field", "missing field `frames` (or `stacktraces`)"))?;
        let total = groups.iter().map(Vec::len).fold(0usize, usize::saturating_add);
        if total > max {
            return Err(ServiceError::new(413, "too_many_frames", format!("{total} frames; at most {max} in one request")));
        }
        // Check every frame before any lookup: a malformed request costs no I/O.
        let mut asks = Vec::with_capacity(groups.len());
        for (g, frames) in groups.iter().enumerate() {
            let mut group = Vec::with_capacity(frames.len());
            for (i, f) in frames.iter().enumerate() {
                group.push(ask_of(f, At { group: g, index: i, nested }, modules.len())?);
            }
            asks.push(group);
        }
        let kinds = scan::Kinds::of(&asks);
        Ok(Asked { modules, groups: asks, nested, context_lines, kinds })
    }

    /// Look up each module a frame asks about (its PDB for IL frames, its image for RVAs, as
    /// [`Asked::kinds`] says: once per request), then write every frame: `{"frames":[...]}`, or
    /// `{"stacktraces":[{"frames":[...]},...]}` when `nested`.
    fn write_answer(&self, out: &mut Bounded<'_>, idents: &[Ident], asked: &Asked, context: u32, may_load: bool) -> Result<(), Stop> {
        let Asked { groups: asks, nested, kinds, .. } = asked;
        let nested = *nested;
        let mut pdbs: Vec<Option<Slot>> = vec![None; idents.len()];
        let mut images: Vec<Option<Slot>> = vec![None; idents.len()];
        for (i, (ident, (pdb, image))) in idents.iter().zip(pdbs.iter_mut().zip(images.iter_mut())).enumerate() {
            let kind = kinds.get(i);
            if ident.bad.is_some() {
                continue;
            }
            if kind & scan::ASKS_IL != 0 {
                *pdb = Some(self.lookup(ident.pdb_key(), may_load, || self.load_pdb(ident)).ok_or(Stop::NotCached)?);
            }
            if kind & scan::ASKS_RVA != 0 {
                *image = Some(self.lookup(ident.image_key(), may_load, || self.load_image(ident)).ok_or(Stop::NotCached)?);
            }
        }
        let found = Found { idents, pdbs: &pdbs, images: &images, context };
        let frames = asks.iter().map(Vec::len).fold(0usize, usize::saturating_add);
        out.reserve(u64::try_from(frames).unwrap_or(u64::MAX).saturating_mul(FRAME_GUESS));
        out.push(if nested { b"{\"stacktraces\":[" } else { b"{" })?;
        let mut scratch = Vec::new();
        for (g, group) in asks.iter().enumerate() {
            if g > 0 {
                out.push(b",")?;
            }
            out.push(if nested { b"{\"frames\":[" } else { b"\"frames\":[" })?;
            // A run of frames at a time, so the answer's bound and room are checked as it grows.
            for (i, run) in group.chunks(RUN).enumerate() {
                scratch.clear();
                found.write_run(run, i == 0, &mut scratch);
                out.push(&scratch)?;
            }
            out.push(if nested { b"]}" } else { b"]" })?;
        }
        out.push(if nested { b"]}" } else { b"}" })
    }

    /// Answer a `POST /stacktrace` body (docs/output.md#printed-stack-traces): the text with each frame whose PDB is found
    /// rewritten, every other byte unchanged.
    pub fn stacktrace(&self, body: &[u8]) -> Result<Answer, ServiceError> {
        utf8(body)?;
        let options = crate::answers::stacktrace::Options { dirs: self.config.paths.dirs.clone(), pdbs: Vec::new(), servers: self.config.paths.servers.clone() };
        let mut rewriter = crate::answers::stacktrace::Rewriter::new(options).map_err(|e| ServiceError::new(500, "internal", e.to_string()))?;
        let mut out = Vec::with_capacity(body.len());
        let stats = rewriter.rewrite(body, &mut out, &mut |_| {}).map_err(|e| ServiceError::new(500, "internal", e.to_string()))?;
        Ok(Answer { body: out, frames: stats.frames })
    }

    /// The LRU's slot for `key`, loading it on a miss (`None` on a miss when not `may_load`).
    fn lookup(&self, key: Option<String>, may_load: bool, load: impl FnOnce() -> Result<(Slot, u64), String>) -> Option<Slot> {
        let Some(key) = key else { return Some(Slot::Missing(Arc::from("the module names neither an assembly nor a PDB with an id"))) };
        if let Some(slot) = self.lru.lock().unwrap_or_else(PoisonError::into_inner).get(&key, self.config.missing_ttl) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Some(slot);
        }
        if !may_load {
            return None;
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
        Some(slot)
    }

    /// Find a module's image (for ReadyToRun frames) and index its bodies.
    fn load_image(&self, ident: &Ident) -> Result<(Slot, u64), String> {
        let name = ident.name.as_deref().ok_or("the module names no assembly (name or code_file)")?;
        let (path, bytes) = self.find_image(ident, name).map_err(|why| {
            why.unwrap_or_else(|| {
                let key = ident.pe_key.and_then(|(t, s)| crate::symbols::symsrv::key::pe_image(name, t, s));
                format!("no image {name}{} in the symbol paths or on a symbol server{}", ident_note(ident), server_notes(&self.config.paths, key.as_ref()))
            })
        })?;
        let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX).saturating_mul(3);
        drop(bytes);
        let symbolizer = Symbolizer::open(&path, Options { symbols: self.config.paths.clone() }).map_err(|e| e.to_string())?;
        Ok((Slot::Image(Arc::new(symbolizer)), size))
    }
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
        // In a string the cursor reads: the whole body is then checked, and the byte named.
        let name = s.symbolicate(b"{\"modules\":[{\"name\":\"A\xff.dll\"}],\"frames\":[]}").err();
        assert_eq!(name.map(|e| (e.kind, e.message)), Some(("bad_utf8", "the body is not UTF-8: at byte 22".to_owned())));
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
    fn a_cached_answer_needs_every_module_in_the_lru_and_equals_the_loaded_one() {
        let s = service();
        let body = br#"{"modules":[{"name":"Nowhere.dll"}],"frames":[{"module":0,"token":1,"il_offset":3}]}"#;
        assert!(s.symbolicate_cached(body, &mut |_| true).is_none());
        assert_eq!(s.counts().cache_misses, 0, "nothing is looked for");
        let loaded = s.symbolicate(body).unwrap();
        assert_eq!(s.symbolicate_cached(body, &mut |_| true), Some(Ok(loaded)));
        // A malformed body is its own answer, with nothing looked up.
        assert_eq!(s.symbolicate_cached(b"{", &mut |_| true).map(|r| r.map_err(|e| e.kind)), Some(Err("bad_json")));
    }
}

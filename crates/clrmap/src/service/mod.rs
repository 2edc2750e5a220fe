//! The symbolication service's rules (`clrmap serve`, contract §7, docs/service.md), with no
//! HTTP: a request body in, an answer body or an error with its status out. One home for what a
//! request means, so the HTTP front end only moves bytes.
//!
//! - `POST /symbolicate` ([`Service::symbolicate`]): JSON modules and frames. Each module's PDB
//!   (or, for ReadyToRun frames, its image) is found once per request, through the symbol paths
//!   and the symbol servers, and kept parsed in a bounded LRU shared by all requests. Frames come
//!   in three forms ([`request`]): §7's (`module`, `token`, `il_offset`), Sentry's .NET frames
//!   (`addr_mode` `rel:N`, `function_id`, `instruction_addr`), and the OpenTelemetry eBPF
//!   profiler's (`address`: a jitted frame's tagged method index and IL offset, or a ReadyToRun
//!   frame's RVA). Each frame is answered with §5's fields, by the runtime's line rule.
//! - `POST /stacktrace` ([`Service::stacktrace`]): §6's text rewriting, one
//!   [`crate::stacktrace::Rewriter`] per request.
//!
//! A malformed body is an error with a stable kind (`bad_json`, `bad_utf8`, `missing_field`,
//! `bad_value`: status 400; `too_many_frames`: 413). A module whose symbols are not found is not
//! an error of the request: its frames carry an `error` object and null fields.

pub mod request;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::fs::{read_regular, MAX_FILE};
use crate::metadata::Metadata;
use crate::pdb::locate::{find_recorded_pdb_noting, locate_pdb, open_pdb_with, FoundPdb, PdbOrigin, RecordedPdb, SymbolPaths};
use crate::pdb::PortablePdb;
use crate::pe::PeImage;
use crate::symbolizer::{FrameKind, ModuleSymbols, Options, Symbolizer};
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
}

/// A request that cannot be answered: the HTTP status, a stable kind and a message naming where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceError {
    /// 400 or 413.
    pub status: u16,
    /// `bad_json`, `bad_utf8`, `missing_field`, `bad_value`, `too_many_frames`.
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
}

impl PdbModule {
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

#[derive(Debug, Default)]
struct Lru {
    map: HashMap<String, Entry>,
    bytes: u64,
    tick: u64,
}

impl Lru {
    fn get(&mut self, key: &str) -> Option<Slot> {
        self.tick = self.tick.wrapping_add(1);
        let tick = self.tick;
        let expired = match self.map.get_mut(key) {
            Some(e) if matches!(e.slot, Slot::Missing(_)) && e.at.elapsed() > MISSING_TTL => true,
            Some(e) => {
                e.used = tick;
                return Some(e.slot.clone());
            }
            None => return None,
        };
        if expired {
            if let Some(e) = self.map.remove(key) {
                self.bytes = self.bytes.saturating_sub(e.size);
            }
        }
        None
    }

    fn put(&mut self, key: String, slot: Slot, size: u64, cap: u64) {
        self.tick = self.tick.wrapping_add(1);
        if let Some(old) = self.map.remove(&key) {
            self.bytes = self.bytes.saturating_sub(old.size);
        }
        // Least recently used first, until the new entry fits (an entry larger than the whole
        // budget is still kept alone: the request that loaded it is using it anyway).
        while self.bytes.saturating_add(size) > cap {
            let Some(victim) = self.map.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else { break };
            if let Some(e) = self.map.remove(&victim) {
                self.bytes = self.bytes.saturating_sub(e.size);
            }
        }
        self.bytes = self.bytes.saturating_add(size);
        self.map.insert(key, Entry { slot, size, used: self.tick, at: Instant::now() });
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
}

impl Ident {
    fn from_module(m: &ModuleIn, at: usize) -> Result<Ident, ServiceError> {
        let bad = |field: &str, what: &str| ServiceError::new(400, "bad_value", format!("modules[{at}].{field}: {what}"));
        let name = m.name.clone().or_else(|| m.code_file.as_deref().map(|p| file_name(p).to_owned())).filter(|n| !n.is_empty());
        let pdb = m.pdb.clone().or_else(|| m.debug_file.as_deref().map(|p| file_name(p).to_owned())).filter(|n| !n.is_empty());
        let (guid, stamp) = match (&m.pdb_id, &m.debug_id) {
            (Some(id), _) => (Some(parse_guid(id).ok_or_else(|| bad("pdb_id", "not a GUID of 32 hex digits"))?), None),
            (None, Some(id)) => {
                let (g, s) = parse_debug_id(id).ok_or_else(|| bad("debug_id", "not a GUID, or a GUID and a hex stamp"))?;
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
        Ok(Ident { name, pdb, guid, stamp, mvid, pe_key })
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

/// A PE file's TimeDateStamp and SizeOfImage, from its headers.
fn pe_key_of(bytes: &[u8]) -> Option<(u32, u32)> {
    let u32_at = |at: usize| -> Option<u32> { Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?)) };
    let pe = usize::try_from(u32_at(0x3c)?).ok()?;
    if bytes.get(pe..pe.checked_add(4)?)? != b"PE\0\0" {
        return None;
    }
    let ts = u32_at(pe.checked_add(8)?)?;
    let size = u32_at(pe.checked_add(24 + 56)?)?;
    Some((ts, size))
}

/// A module's MVID, from its metadata.
fn mvid_of(bytes: &[u8]) -> Option<[u8; 16]> {
    PeImage::parse(bytes).ok().and_then(|pe| Metadata::from_pe(&pe).ok()).and_then(|md| md.mvid())
}

/// One frame's answer: §5's fields but `address`, and an `error` where the module's symbols were
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
        let text = std::str::from_utf8(body).map_err(|e| ServiceError::new(400, "bad_utf8", format!("the body is not UTF-8: at byte {}", e.valid_up_to())))?;
        let max = self.config.max_frames;
        let request: Request = request::with_frame_budget(max, || serde_json::from_str(text)).map_err(|e| {
            if e.to_string().starts_with(request::TOO_MANY_FRAMES) {
                ServiceError::new(413, "too_many_frames", format!("more than {max} frames in one request (stopped at line {} column {})", e.line(), e.column()))
            } else {
                json_error(e)
            }
        })?;
        let modules = request.modules.or(request.debug_meta.and_then(|d| d.images)).unwrap_or_default();
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
        let mut out_groups = Vec::with_capacity(asks.len());
        for group in asks {
            let mut out = Vec::with_capacity(group.len());
            for (module, ask) in group {
                let Some(ident) = idents.get(module) else { continue };
                let answer = match ask {
                    Ask::Il { token, il } => {
                        let slot = cached(pdbs.get_mut(module), || self.lookup(ident.pdb_key(), || self.load_pdb(ident)));
                        answer_il(ident, &slot, token, il)
                    }
                    Ask::Rva { rva, kind } => {
                        let slot = cached(images.get_mut(module), || self.lookup(ident.image_key(), || self.load_image(ident)));
                        answer_rva(ident, &slot, rva, kind)
                    }
                };
                out.push(answer);
            }
            out_groups.push(out);
        }
        #[derive(Serialize)]
        struct Frames {
            frames: Vec<FrameOut>,
        }
        #[derive(Serialize)]
        struct Traces {
            stacktraces: Vec<Frames>,
        }
        let mut traces: Vec<Frames> = out_groups.into_iter().map(|frames| Frames { frames }).collect();
        let body = if nested { serde_json::to_vec(&Traces { stacktraces: traces }) } else { serde_json::to_vec(&traces.pop().unwrap_or(Frames { frames: Vec::new() })) }
        .map_err(|e| ServiceError::new(500, "internal", e.to_string()))?;
        Ok(Answer { body, frames: u64::try_from(total).unwrap_or(u64::MAX) })
    }

    /// Answer a `POST /stacktrace` body (§6): the text with each frame whose PDB is found
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
        if let Some(slot) = self.lru.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return slot;
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let (slot, size) = match load() {
            Ok(found) => found,
            Err(why) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                let size = u64::try_from(why.len()).unwrap_or(0).saturating_add(64);
                (Slot::Missing(Arc::from(why)), size)
            }
        };
        self.lru.lock().unwrap_or_else(PoisonError::into_inner).put(key, slot.clone(), size, self.config.lru_bytes);
        slot
    }

    /// Find and parse a module's PDB (and its assembly, for names).
    fn load_pdb(&self, ident: &Ident) -> Result<(Slot, u64), String> {
        let paths = &self.config.paths;
        let (found, assembly) = if let Some(guid) = ident.guid {
            let name = ident.pdb_name().ok_or("the module names no PDB file (pdb, debug_file or name)")?;
            let recorded = RecordedPdb { guid, age: 1, path: name.clone(), checksums: Vec::new() };
            let found = find_recorded_pdb_noting(&recorded, None, paths, &mut Vec::new()).map_err(|e| e.to_string())?;
            let found = found.ok_or_else(|| format!("no PDB {name} with id {} in the symbol paths or on a symbol server{}", crate::symsrv::key::guid_n(&guid), server_notes(paths, &crate::symsrv::key::guid_n(&guid))))?;
            if let Some(stamp) = ident.stamp {
                let id = PortablePdb::parse(&found.bytes).map_err(|e| e.to_string())?.id();
                if id.stamp() != stamp {
                    return Err(format!("the PDB found for {name} has stamp {:08x}, not {stamp:08x}", id.stamp()));
                }
            }
            let assembly = assembly_of(&found, paths);
            (found, assembly)
        } else if let Some(name) = &ident.name {
            self.pdb_by_assembly(ident, name)?
        } else if let Some(pdb) = ident.pdb_name() {
            let found = paths.dirs.iter().find_map(|d| {
                let bytes = read_regular(&d.join(plain(&pdb)?), MAX_FILE).ok()?;
                PortablePdb::parse(&bytes).ok()?;
                Some(FoundPdb { bytes, origin: PdbOrigin::SymbolPath(d.join(&pdb)) })
            });
            let found = found.ok_or_else(|| format!("no PDB {pdb} in the symbol paths"))?;
            let assembly = assembly_of(&found, paths);
            (found, assembly)
        } else {
            return Err("the module names neither an assembly nor a PDB".to_owned());
        };
        let size = u64::try_from(found.bytes.len().saturating_mul(2).saturating_add(assembly.as_ref().map_or(0, Vec::len))).unwrap_or(u64::MAX);
        let lines = ModuleSymbols::from_pdb(found.bytes).map_err(|e| format!("{}{}: {}", e.kind, e.location, e.message()))?;
        Ok((Slot::Pdb(Arc::new(PdbModule { lines, assembly, names: Mutex::new(HashMap::new()) })), size))
    }

    /// A module named by its assembly: the assembly in a symbol path (its MVID or PE key
    /// checked when given), then its own PDB (embedded, beside it, in a symbol path, or from a
    /// symbol server by its CodeView id).
    fn pdb_by_assembly(&self, ident: &Ident, name: &str) -> Result<(FoundPdb, Option<Vec<u8>>), String> {
        let paths = &self.config.paths;
        let (path, bytes) = self.find_image(ident, name, false).ok_or_else(|| format!("no assembly {name}{} in the symbol paths", ident_note(ident)))?;
        let image = PeImage::parse(&bytes).map_err(|e| format!("{}: {}{}: {}", path.display(), e.kind, e.location, e.message()))?;
        let found = locate_pdb(&image, Some(&path), paths).map_err(|e| e.to_string())?;
        let found = found.ok_or_else(|| format!("{} was found, but no PDB of its build", path.display()))?;
        Ok((found, Some(bytes)))
    }

    /// Find an image: each symbol path, flat (`DIR/name`) and in the SSQP layout under its PE key,
    /// then the symbol servers by that key. Only a file whose MVID and PE key match what the
    /// module gives is taken. With `need_key`, a server is asked only when the key is known.
    fn find_image(&self, ident: &Ident, name: &str, need_key: bool) -> Option<(PathBuf, Vec<u8>)> {
        let name = plain(name)?;
        let good = |bytes: &[u8]| {
            bytes.starts_with(b"MZ") && ident.mvid.is_none_or(|m| mvid_of(bytes) == Some(m)) && ident.pe_key.is_none_or(|k| pe_key_of(bytes) == Some(k))
        };
        let key = ident.pe_key.and_then(|(t, s)| crate::symsrv::key::pe_image(name, t, s));
        for dir in &self.config.paths.dirs {
            let mut candidates = vec![dir.join(name)];
            if let (Some(key), Some((t, s))) = (&key, ident.pe_key) {
                candidates.push(dir.join(key.as_str()));
                candidates.push(dir.join(name).join(format!("{t:08X}{s:x}")).join(name));
            }
            for c in candidates {
                if let Ok(bytes) = read_regular(&c, MAX_FILE) {
                    if good(&bytes) {
                        return Some((c, bytes));
                    }
                }
            }
        }
        let _ = need_key;
        let servers = self.config.paths.servers.as_ref()?;
        let key = key?;
        let check = |p: &Path| read_regular(p, MAX_FILE).is_ok_and(|b| good(&b));
        let entry = servers.fetch(&key, &[], &check)?;
        let bytes = read_regular(&entry, MAX_FILE).ok().filter(|b| good(b))?;
        Some((entry, bytes))
    }

    /// Find a module's image (for ReadyToRun frames) and index its bodies.
    fn load_image(&self, ident: &Ident) -> Result<(Slot, u64), String> {
        let name = ident.name.as_deref().ok_or("the module names no assembly (name or code_file)")?;
        let (path, bytes) = self.find_image(ident, name, true).ok_or_else(|| {
            let key = ident.pe_key.map(|(t, s)| format!("{t:08x}{s:x}")).unwrap_or_else(|| "\u{0}".to_owned());
            format!("no image {name}{} in the symbol paths or on a symbol server{}", ident_note(ident), server_notes(&self.config.paths, &key))
        })?;
        let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX).saturating_mul(3);
        drop(bytes);
        let symbolizer = Symbolizer::open(&path, Options { symbols: self.config.paths.clone() }).map_err(|e| e.to_string())?;
        Ok((Slot::Image(Arc::new(symbolizer)), size))
    }
}

/// What the symbol servers said about keys containing `needle` (a 404, a 500, a timeout), as
/// `; symbol server URL: KEY: WHAT` each (at most 4), so a frame's error says why.
fn server_notes(paths: &SymbolPaths, needle: &str) -> String {
    let Some(servers) = &paths.servers else { return String::new() };
    servers.notes().iter().filter(|n| n.contains(needle)).take(4).map(|n| format!("; {n}")).collect()
}

/// `name` when it is a plain file name (no directory parts), so it cannot leave a symbol path.
fn plain(name: &str) -> Option<&str> {
    (!name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])).then_some(name)
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

/// The assembly of a found PDB, for method names: one with the PDB's stem beside it or in a
/// symbol path whose CodeView id asks for exactly this PDB.
fn assembly_of(found: &FoundPdb, paths: &SymbolPaths) -> Option<Vec<u8>> {
    let path = match &found.origin {
        PdbOrigin::Explicit(p) | PdbOrigin::BesideAssembly(p) | PdbOrigin::SymbolPath(p) | PdbOrigin::SymbolServer(p) | PdbOrigin::BuildPath(p) => p,
        PdbOrigin::Embedded => return None,
    };
    let local = SymbolPaths { pdb: None, dirs: paths.dirs.clone(), servers: None };
    open_pdb_with(path, &local, None).ok()?.assembly
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
    FrameOut { module: ident.name.clone(), error: Some(FrameError { kind: "not_found", message: why.clone() }), ..FrameOut::default() }
}

fn answer_il(ident: &Ident, slot: &Slot, token: u32, il: u32) -> FrameOut {
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
        Service::new(Config { paths: SymbolPaths::default(), lru_bytes: 1 << 20, max_frames: 3 })
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
        let four = br#"{"modules":[{}],"frames":[{"module":0,"token":1,"il_offset":0},{"module":0,"token":1,"il_offset":0},{"module":0,"token":1,"il_offset":0},{"module":0,"token":1,"il_offset":0}]}"#;
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
        assert!(l.get("a").is_some());
        l.put("c".into(), m("c"), 40, 100);
        assert!(l.get("b").is_none() && l.get("a").is_some() && l.get("c").is_some());
        assert_eq!(l.bytes, 80);
        assert_eq!(parse_code_id("542D574232000"), Some((0x542d_5742, 0x32000)));
    }
}

//! Symbol servers that speak SSQP (dotnet/symstore `docs/specs/Simple_Symbol_Query_Protocol.md`),
//! with a cache on disk.
//!
//! A file is asked for by its SSQP key ([`key`]): `GET <server>/<key>`. What arrives goes to the
//! cache under the same key, so the cache is itself a symbol store (a flat directory tree any
//! static HTTP server can serve, or a `--symbol-path`).
//!
//! The rules, one home for every command, the service and the C ABI:
//! - A cached file is used without asking any server. It is still verified, as a download is: a
//!   cached file that fails is removed and fetched again.
//! - A cached file is junk only when it is not the file its key names (an image whose PE key, or a
//!   PDB whose GUID, is not the key's): what a caller claims beyond the key (an MVID, a PDB's
//!   stamp) is checked by the caller after the fetch, and a mismatch never removes the file.
//! - Servers are asked in order. A 404 is remembered for [`Config::forget_after`] (the same key
//!   is not asked of that server again meanwhile); a server that cannot be reached, or does not
//!   answer within its timeout, is not asked again for as long, so it costs its timeout at most
//!   once in that time.
//! - One key is downloaded by one caller at a time: others asking for it meanwhile wait for that
//!   download and then use its cache entry (or its remembered failure).
//! - A download streams into a temporary file beside its cache entry and is renamed over it only
//!   when whole and verified by the caller's check (a PDB's id). A kill leaves no half entry, and
//!   two processes filling one entry at once both succeed (each renames a whole file).
//! - A download is bounded in size ([`Config::max_bytes`], after any `Content-Encoding` is
//!   undone, so a decompression bomb stops there too) and in time ([`Config::timeout`], for the
//!   whole exchange).
//! - Each failure is kept as a note that names the server, the key and what happened
//!   ([`SymbolServers::notes`]), one per server and key, at most [`MAX_NOTES`] (the oldest go
//!   first): recording one, and finding a key's, cost the same however many there are.

#[cfg(feature = "symbol-server")]
mod fetch;
#[cfg(not(feature = "symbol-server"))]
#[path = "nofetch.rs"]
mod fetch;
pub mod key;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use key::Key;

/// How to reach the servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Server base URLs, asked in order (`http://host:port/symbols`, `https://...`).
    pub servers: Vec<String>,
    /// The cache directory.
    pub cache: PathBuf,
    /// The longest a whole exchange with a server may take (connect, headers and body).
    pub timeout: Duration,
    /// The most bytes a file may have (after any content encoding is undone).
    pub max_bytes: u64,
    /// How long a 404, or a server that could not be reached, is remembered (then asked again,
    /// so a file published later is found).
    pub forget_after: Duration,
}

impl Config {
    /// Servers with the default cache ([`default_cache`]), a 30 s timeout, a 256 MiB bound (the
    /// largest portable PDBs are tens of MiB), and failures remembered 30 s.
    pub fn new(servers: Vec<String>) -> Config {
        Config { servers, cache: default_cache(), timeout: Duration::from_secs(30), max_bytes: 1 << 28, forget_after: Duration::from_secs(30) }
    }
}

/// `$XDG_CACHE_HOME/clrmap/symbols`, else `~/.cache/clrmap/symbols`, else (no home)
/// `./.clrmap-symbols`.
pub fn default_cache() -> PathBuf {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".cache"),
            None => return PathBuf::from(".clrmap-symbols"),
        },
    };
    base.join("clrmap").join("symbols")
}

/// Symbol servers and their cache, with what this run has learned about them.
#[derive(Debug)]
pub struct SymbolServers {
    config: Config,
    state: Mutex<State>,
}

/// The most failure notes kept (one per server and key); past it the oldest is dropped.
pub const MAX_NOTES: usize = 4096;

/// How many redirects one download follows.
pub const MAX_REDIRECTS: usize = 4;

#[derive(Debug, Default)]
struct State {
    /// (server index, key) → the last failure: what happened, when, and whether it was a 404.
    notes: HashMap<(usize, Key), Note>,
    /// The notes' keys, oldest first, with the sequence number each was written under (a key
    /// written again leaves a stale entry here, skipped when its turn comes).
    order: VecDeque<(u64, (usize, Key))>,
    /// Servers that could not be reached or timed out, and when.
    dead: HashMap<usize, Instant>,
    /// Keys being downloaded now: a second caller waits on the first's lock.
    busy: HashMap<Key, Arc<Mutex<()>>>,
    seq: u64,
}

#[derive(Debug)]
struct Note {
    server: String,
    what: String,
    not_found: bool,
    at: Instant,
    seq: u64,
}

impl State {
    fn note(&mut self, server_index: usize, server: &str, key: &Key, what: String, not_found: bool) {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let id = (server_index, key.clone());
        self.notes.insert(id.clone(), Note { server: server.to_owned(), what, not_found, at: Instant::now(), seq });
        self.order.push_back((seq, id));
        while self.notes.len() > MAX_NOTES {
            let Some((seq, id)) = self.order.pop_front() else { break };
            if self.notes.get(&id).is_some_and(|n| n.seq == seq) {
                self.notes.remove(&id);
            }
        }
        // Stale entries (keys noted again) are dropped once they outnumber the live ones.
        if self.order.len() > self.notes.len().saturating_mul(2).saturating_add(16) {
            let notes = &self.notes;
            self.order.retain(|(seq, id)| notes.get(id).is_some_and(|n| n.seq == *seq));
        }
    }

    /// Is `key` known missing on server `i`, or the server down, within `forget_after`?
    fn skip(&self, i: usize, key: &Key, forget_after: Duration) -> bool {
        let fresh = |at: &Instant| at.elapsed() < forget_after;
        self.dead.get(&i).is_some_and(fresh) || self.notes.get(&(i, key.clone())).is_some_and(|n| n.not_found && fresh(&n.at))
    }
}

impl PartialEq for SymbolServers {
    fn eq(&self, other: &Self) -> bool {
        self.config == other.config
    }
}
impl Eq for SymbolServers {}

/// What a fetched file must pass before it is kept (a PDB's id, an image's key fields).
pub type Check<'a> = &'a dyn Fn(&Path) -> bool;

impl SymbolServers {
    /// Servers as configured. Nothing is contacted until a file is asked for.
    pub fn new(config: Config) -> SymbolServers {
        SymbolServers { config, state: Mutex::new(State::default()) }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The file for `key`: from the cache when there and passing `check`, else from the first
    /// server that has it and whose file passes `check` (then cached). `check` says whether a
    /// file is the one the key names: a cached file that fails it is junk, removed and fetched
    /// again. `headers` are sent with each request (`SymbolChecksum`). `None` when no server has
    /// a good file; the notes say why.
    pub fn fetch(&self, key: &Key, headers: &[(&str, String)], check: Check<'_>) -> Option<PathBuf> {
        let entry = self.config.cache.join(key.as_str());
        if entry.is_file() && check(&entry) {
            return Some(entry);
        }
        // One download of a key at a time: a caller that finds one under way waits for it, then
        // takes its entry.
        let lock = self.state().busy.entry(key.clone()).or_default().clone();
        let found = {
            let _one = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            self.fetch_alone(key, headers, check, &entry)
        };
        let mut state = self.state();
        if state.busy.get(key).is_some_and(|l| Arc::ptr_eq(l, &lock)) && Arc::strong_count(&lock) <= 2 {
            state.busy.remove(key);
        }
        found
    }

    fn fetch_alone(&self, key: &Key, headers: &[(&str, String)], check: Check<'_>, entry: &Path) -> Option<PathBuf> {
        if entry.is_file() {
            if check(entry) {
                return Some(entry.to_owned());
            }
            // Not the file its key names (another tool's file, a hand edit): removed, and fetched
            // again.
            let _ = std::fs::remove_file(entry);
        }
        let forget_after = self.config.forget_after;
        for (i, server) in self.config.servers.iter().enumerate() {
            if self.state().skip(i, key, forget_after) {
                continue;
            }
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fetch::download(server, key, headers, entry, &self.config, check)))
                .unwrap_or_else(|_| Err(fetch::Failure::Bad("the download failed inside its HTTP client (a panic, caught); nothing cached".to_owned())));
            match result {
                Ok(()) => return Some(entry.to_owned()),
                Err(e) => {
                    let mut state = self.state();
                    if matches!(e, fetch::Failure::Unreachable(_)) {
                        state.dead.insert(i, Instant::now());
                    }
                    let not_found = matches!(e, fetch::Failure::NotFound);
                    state.note(i, server, key, e.to_string(), not_found);
                }
            }
        }
        None
    }

    /// One line per failure remembered (at most [`MAX_NOTES`]), each naming its server and key.
    pub fn notes(&self) -> Vec<String> {
        self.failures().iter().map(ToString::to_string).collect()
    }

    /// [`Self::notes`], with fields, oldest first.
    pub fn failures(&self) -> Vec<crate::symbols::why::Why> {
        let state = self.state();
        let mut notes: Vec<(&(usize, Key), &Note)> = state.notes.iter().collect();
        notes.sort_by_key(|(_, n)| n.seq);
        notes.into_iter().map(|((_, key), n)| crate::symbols::why::Why::Server { server: n.server.clone(), key: key.to_string(), message: n.what.clone() }).collect()
    }

    /// What each server last said about `key` (one line each, in server order): a lookup by key,
    /// whatever the number of notes.
    pub fn notes_for(&self, key: &Key) -> Vec<String> {
        self.failures_for(key).iter().map(ToString::to_string).collect()
    }

    /// [`notes_for`](Self::notes_for), as values with fields.
    pub fn failures_for(&self, key: &Key) -> Vec<crate::symbols::why::Why> {
        let state = self.state();
        (0..self.config.servers.len())
            .filter_map(|i| state.notes.get(&(i, key.clone())))
            .map(|n| crate::symbols::why::Why::Server { server: n.server.clone(), key: key.to_string(), message: n.what.clone() })
            .collect()
    }
}

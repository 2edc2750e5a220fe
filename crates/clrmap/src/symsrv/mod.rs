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
//! - Servers are asked in order. A 404 is remembered for the run (the same key is not asked of
//!   that server again); a server that cannot be reached, or does not answer within its timeout,
//!   is not asked again in the run, so it costs its timeout at most once.
//! - A download streams into a temporary file beside its cache entry and is renamed over it only
//!   when whole and verified by the caller's check (a PDB's id). A kill leaves no half entry, and
//!   two processes filling one entry at once both succeed (each renames a whole file).
//! - A download is bounded in size ([`Config::max_bytes`], after any `Content-Encoding` is
//!   undone, so a decompression bomb stops there too) and in time ([`Config::timeout`], for the
//!   whole exchange).
//! - Each failure is kept as a note that names the server, the key and what happened
//!   ([`SymbolServers::notes`]).

#[cfg(feature = "symbol-server")]
mod fetch;
#[cfg(not(feature = "symbol-server"))]
#[path = "nofetch.rs"]
mod fetch;
pub mod key;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

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
}

impl Config {
    /// Servers with the default cache ([`default_cache`]), a 30 s timeout and a 256 MiB bound (the largest portable PDBs are tens of MiB).
    pub fn new(servers: Vec<String>) -> Config {
        Config { servers, cache: default_cache(), timeout: Duration::from_secs(30), max_bytes: 1 << 28 }
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

#[derive(Debug, Default)]
struct State {
    /// (server index, key) pairs that answered 404.
    missing: HashSet<(usize, Key)>,
    /// Servers that could not be reached or timed out: not asked again this run.
    dead: HashSet<usize>,
    /// One per failure: (server, key, what happened).
    notes: Vec<(String, String, String)>,
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
    /// server that has it and whose file passes `check` (then cached). `headers` are sent with
    /// each request (`SymbolChecksum`). `None` when no server has a good file; the notes say why.
    pub fn fetch(&self, key: &Key, headers: &[(&str, String)], check: Check<'_>) -> Option<PathBuf> {
        let entry = self.config.cache.join(key.as_str());
        if entry.is_file() {
            if check(&entry) {
                return Some(entry);
            }
            // Junk in the cache (another tool's file, a hand edit): removed, and fetched again.
            let _ = std::fs::remove_file(&entry);
        }
        for (i, server) in self.config.servers.iter().enumerate() {
            {
                let state = self.state();
                if state.dead.contains(&i) || state.missing.contains(&(i, key.clone())) {
                    continue;
                }
            }
            match fetch::download(server, key, headers, &entry, &self.config, check) {
                Ok(()) => return Some(entry),
                Err(e) => {
                    let mut state = self.state();
                    match e {
                        fetch::Failure::NotFound => {
                            state.missing.insert((i, key.clone()));
                        }
                        fetch::Failure::Unreachable(_) => {
                            state.dead.insert(i);
                        }
                        fetch::Failure::Bad(_) => {}
                    }
                    let note = (server.clone(), key.to_string(), e.to_string());
                    if !state.notes.contains(&note) {
                        state.notes.push(note);
                    }
                }
            }
        }
        None
    }

    /// One line per failure so far, each naming its server and key.
    pub fn notes(&self) -> Vec<String> {
        self.failures().iter().map(ToString::to_string).collect()
    }

    /// [`Self::notes`], with fields.
    pub fn failures(&self) -> Vec<crate::pdb::why::Why> {
        self.state().notes.iter().map(|(server, key, message)| crate::pdb::why::Why::Server { server: server.clone(), key: key.clone(), message: message.clone() }).collect()
    }
}

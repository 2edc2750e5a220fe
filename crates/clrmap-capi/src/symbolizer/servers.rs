//! Symbol servers: SSQP servers asked for PDBs found nowhere on disk, and their cache.

use std::ffi::{c_char, CStr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clrmap::symbolizer::Symbolizer;

use super::{symbol_options, ClrmapSymbolizer};
use crate::errors::Failure;
use crate::hresult::HRESULT;

/// Symbol servers for `clrmap_symbolizer_open_with_servers`: SSQP servers asked, in order, for a
/// PDB found nowhere on disk, and the cache their files go to (the rules of the CLI's
/// `--symbol-server`: a cached file is used without asking; a 404 is remembered and a server that
/// does not answer is not asked again while the symbolizer lives; downloads are atomic, verified
/// by the PDB's id, and bounded in size and time).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ClrmapSymbolServers {
    /// `count` server base URLs (`http://...` or `https://...`).
    pub servers: *const *const c_char,
    /// How many.
    pub count: u32,
    /// The longest one exchange with a server may take, in milliseconds (0: 30 s).
    pub timeout_ms: u32,
    /// The cache directory, or NULL for `$XDG_CACHE_HOME/clrmap/symbols` (else
    /// `~/.cache/clrmap/symbols`).
    pub cache: *const c_char,
}

/// `clrmap_symbolizer_open` with symbol servers (`servers` may be NULL: none).
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_open_with_servers(
    source: *const c_char,
    pdb: *const c_char,
    symbol_paths: *const *const c_char,
    count: u32,
    servers: *const ClrmapSymbolServers,
    out: *mut *mut ClrmapSymbolizer,
) -> HRESULT {
    ffi_fn!({
        if source.is_null() || out.is_null() || (count > 0 && symbol_paths.is_null()) {
            return Err(Failure::null_argument());
        }
        // SAFETY: NUL-terminated strings, and `count` of them at `symbol_paths`, per the contract.
        let Some(mut options) = (unsafe { symbol_options(pdb, symbol_paths, count) }) else { return Err(Failure::null_argument()) };
        // SAFETY: `servers` is NULL or points at a live ClrmapSymbolServers, per the contract.
        if let Some(servers) = unsafe { servers.as_ref() } {
            // SAFETY: its strings are NUL-terminated and `count` of them are at `servers`.
            let Some(s) = (unsafe { symbol_servers(servers) }) else { return Err(Failure::null_argument()) };
            options.symbols.servers = s;
        }
        // SAFETY: `source` is NUL-terminated.
        let source = unsafe { CStr::from_ptr(source) }.to_string_lossy().into_owned();
        let sym = Symbolizer::open(Path::new(&source), options).map_err(|e| Failure::not_opened(&e))?;
        // SAFETY: `out` is non-null.
        Ok(unsafe { ClrmapSymbolizer::publish(sym, out) })
    })
}

/// The library's symbol servers for a `ClrmapSymbolServers`; `None` if a pointer in it is NULL
/// where strings are promised. No server at all is `Some(None)`.
///
/// SAFETY (callers): `s.servers` holds `s.count` pointers, each NULL or NUL-terminated; `s.cache`
/// is NULL or NUL-terminated.
unsafe fn symbol_servers(s: &ClrmapSymbolServers) -> Option<Option<Arc<clrmap::symsrv::SymbolServers>>> {
    // SAFETY: per the caller's contract, every pointer given to `text` is non-null and NUL-terminated.
    let text = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    if s.count > 0 && s.servers.is_null() {
        return None;
    }
    let mut urls = Vec::new();
    for i in 0..s.count as usize {
        // SAFETY: `servers` holds `count` pointers.
        let p = unsafe { *s.servers.add(i) };
        if p.is_null() {
            return None;
        }
        urls.push(text(p));
    }
    if urls.is_empty() {
        return Some(None);
    }
    let mut config = clrmap::symsrv::Config::new(urls);
    if !s.cache.is_null() {
        config.cache = PathBuf::from(text(s.cache));
    }
    if s.timeout_ms > 0 {
        config.timeout = Duration::from_millis(u64::from(s.timeout_ms));
    }
    Some(Some(Arc::new(clrmap::symsrv::SymbolServers::new(config))))
}

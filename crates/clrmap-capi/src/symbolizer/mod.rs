//! Symbolizers: any address of a source (a ReadyToRun image, a `.nettrace`, a capture or a
//! running process) to its method, IL offset and source line, with the strings C reads kept
//! alive by the symbolizer.
//!
//! The exports of the submodules reach the header in the order they are declared here (cbindgen
//! writes functions in source order, a module's own before its submodules'), which is the
//! header's order.

use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::path::PathBuf;
use std::sync::Mutex;

use clrmap::locate::SymbolPaths;
use clrmap::symbolizer::{FrameKind, Options, Symbolizer};

use crate::errors::{c_string, Failure};
use crate::hresult::{E_INVALIDARG, HRESULT, S_FALSE, S_OK};
use crate::pid::open_pid;

mod source_link;
pub use source_link::*;
mod servers;
pub use servers::*;
mod inlined;
pub use inlined::*;
mod release;
pub use release::*;

/// A symbolizer: a source's bodies indexed by address, and the PDBs of their modules (opaque;
/// release with `clrmap_symbolizer_release`).
pub struct ClrmapSymbolizer {
    sym: Symbolizer,
    /// C copies of the strings frames point to, made once each; their heap buffers never move,
    /// so the pointers handed out stay valid until the symbolizer is released.
    strings: Mutex<HashMap<(usize, usize), CString>>,
}

/// `ClrmapFrame::flags`: the body is known (`module`, `method`, `token`, `il_offset` as known).
pub const CLRMAP_FRAME_METHOD: u32 = 1;
/// `ClrmapFrame::flags`: the source line is known (`file`, `line`, `column`, `end_line`,
/// `end_column`).
pub const CLRMAP_FRAME_LINE: u32 = 2;
/// `ClrmapFrame::flags`: `il_offset` is known. A body can be known without it: a ReadyToRun
/// method a trace names without its map (the map is in its image) has its method only.
pub const CLRMAP_FRAME_IL_OFFSET: u32 = 4;

/// `clrmap_symbolizer_symbolize`'s `kind`: the leaf frame, looked up as is.
pub const CLRMAP_FRAME_LEAF: u32 = 0;
/// A return address: the call before it, by the rule of the runtime the source recorded, as the
/// CLI's `--return-address`: .NET 5 and later read the method and IL offset at the call; a source
/// recorded from CoreCLR 3.1 gets 3.1's rule (`CLRMAP_FRAME_RETURN_ADDRESS_CLR31`); a source that
/// records no runtime (an image, an old capture) gets .NET 5's.
pub const CLRMAP_FRAME_RETURN_ADDRESS: u32 = 1;
/// A return address read by CoreCLR 3.1's rule: the method of the call, the IL offset of the
/// return address itself.
pub const CLRMAP_FRAME_RETURN_ADDRESS_CLR31: u32 = 2;

/// One symbolized address, with the fields the CLI prints. Strings are owned by the symbolizer and
/// live until it is released; a field that is not known is NULL or 0, and `flags` says which are
/// known.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ClrmapFrame {
    /// The address asked about.
    pub address: u64,
    /// `CLRMAP_FRAME_METHOD` | `CLRMAP_FRAME_LINE`.
    pub flags: u32,
    /// The MethodDef token (0 for a dynamic method, such as an IL stub, which has none).
    pub token: u32,
    /// The IL offset the runtime reports for the frame.
    pub il_offset: u32,
    /// Start line of the chosen sequence point.
    pub line: u32,
    /// Start column.
    pub column: u32,
    /// End line.
    pub end_line: u32,
    /// End column.
    pub end_column: u32,
    /// The module's file name (`Frames.dll`), or NULL.
    pub module: *const c_char,
    /// `Ns.Type::Method`, or NULL.
    pub method: *const c_char,
    /// The document name as the PDB stores it, or NULL.
    pub file: *const c_char,
}

/// Open a symbolizer over a ReadyToRun image, a `.nettrace` or a capture. `pdb` (may be NULL) is
/// a PDB to use, which must belong to a module of the source (else `CLRMAP_E_PDB_MISMATCH`);
/// `symbol_paths` are `count` directories searched for PDBs (flat or in the symbol-server
/// layout) and for modules of recordings made elsewhere.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_open(source: *const c_char, pdb: *const c_char, symbol_paths: *const *const c_char, count: u32, out: *mut *mut ClrmapSymbolizer) -> HRESULT {
    ffi_fn!({
        // SAFETY: the same contract, with no symbol servers.
        Ok(unsafe { clrmap_symbolizer_open_with_servers(source, pdb, symbol_paths, count, std::ptr::null(), out) })
    })
}

/// Open a symbolizer over a running .NET process (Core 3.0+): a rundown snapshot of its jitted
/// methods, as `clrmap_profiler_info_open_pid` takes it (`timeout_ms`, 0: 10 s; the same
/// HRESULT per diagnostics error kind). `pdb`, `symbol_paths` and `count` are those of
/// `clrmap_symbolizer_open`; the modules' PDBs are looked for beside the paths the process loaded
/// them from, then in `symbol_paths`.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_open_pid(pid: u32, timeout_ms: u32, pdb: *const c_char, symbol_paths: *const *const c_char, count: u32, out: *mut *mut ClrmapSymbolizer) -> HRESULT {
    ffi_fn!({
        if out.is_null() || (count > 0 && symbol_paths.is_null()) {
            return Err(Failure::null_argument());
        }
        // SAFETY: NUL-terminated strings, and `count` of them at `symbol_paths`, per the contract.
        let Some(options) = (unsafe { symbol_options(pdb, symbol_paths, count) }) else { return Err(Failure::null_argument()) };
        let sym = open_pid(pid, timeout_ms, options)?;
        // SAFETY: `out` is non-null.
        Ok(unsafe { ClrmapSymbolizer::publish(sym, out) })
    })
}

/// The symbol options of a `pdb` (may be NULL) and `count` directories at `symbol_paths`; None
/// if one of them is NULL.
///
/// SAFETY (callers): `pdb` is NULL or NUL-terminated; `symbol_paths` holds `count` pointers, each
/// NULL or NUL-terminated.
unsafe fn symbol_options(pdb: *const c_char, symbol_paths: *const *const c_char, count: u32) -> Option<Options> {
    // SAFETY: per the caller's contract, every pointer given to `text` is non-null and NUL-terminated.
    let text = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    let mut dirs = Vec::new();
    for i in 0..count as usize {
        // SAFETY: `symbol_paths` holds `count` pointers.
        let p = unsafe { *symbol_paths.add(i) };
        if p.is_null() {
            return None;
        }
        dirs.push(PathBuf::from(text(p)));
    }
    let pdb = (!pdb.is_null()).then(|| PathBuf::from(text(pdb)));
    Some(Options { symbols: SymbolPaths { pdb, dirs, servers: None } })
}

impl ClrmapSymbolizer {
    /// Box a symbolizer over `sym` and hand it to C.
    ///
    /// SAFETY (callers): `out` is non-null and writable.
    unsafe fn publish(sym: Symbolizer, out: *mut *mut ClrmapSymbolizer) -> HRESULT {
        let boxed = Box::new(ClrmapSymbolizer { sym, strings: Mutex::new(HashMap::new()) });
        // SAFETY: per the caller's contract.
        unsafe { *out = Box::into_raw(boxed) };
        S_OK
    }

    /// A C copy of `s`, made once and kept.
    fn c_str(&self, s: Option<&str>) -> *const c_char {
        let Some(s) = s else { return std::ptr::null() };
        let Ok(mut strings) = self.strings.lock() else { return std::ptr::null() };
        let key = (s.as_ptr() as usize, s.len());
        strings.entry(key).or_insert_with(|| c_string(s)).as_ptr()
    }

    /// The library's frame kind for a `CLRMAP_FRAME_*` kind (the return-address rule follows the
    /// runtime the source recorded); `E_INVALIDARG` for another value.
    fn frame_kind(&self, kind: u32) -> Result<FrameKind, Failure> {
        let runtime = self.sym.runtime_major();
        match kind {
            CLRMAP_FRAME_LEAF => Ok(FrameKind::from_return_address(false, runtime)),
            CLRMAP_FRAME_RETURN_ADDRESS => Ok(FrameKind::from_return_address(true, runtime)),
            CLRMAP_FRAME_RETURN_ADDRESS_CLR31 => Ok(FrameKind::from_return_address(true, runtime).with_clr31(true)),
            _ => Err(Failure::new(E_INVALIDARG, "a kind of CLRMAP_FRAME_LEAF, CLRMAP_FRAME_RETURN_ADDRESS or CLRMAP_FRAME_RETURN_ADDRESS_CLR31")),
        }
    }

    /// A `ClrmapFrame` of the library's frame fields.
    #[allow(clippy::too_many_arguments)]
    fn c_frame(&self, address: u64, module: Option<&str>, token: Option<u32>, method: Option<&str>, il: Option<u32>, file: Option<&str>, line: [Option<u32>; 4]) -> ClrmapFrame {
        let [l, c, el, ec] = line;
        // A dynamic method (an IL stub) is a known body with a name and no token.
        let flags = if token.is_some() || method.is_some() { CLRMAP_FRAME_METHOD } else { 0 } | if l.is_some() { CLRMAP_FRAME_LINE } else { 0 } | if il.is_some() { CLRMAP_FRAME_IL_OFFSET } else { 0 };
        ClrmapFrame {
            address,
            flags,
            token: token.unwrap_or(0),
            il_offset: il.unwrap_or(0),
            line: l.unwrap_or(0),
            column: c.unwrap_or(0),
            end_line: el.unwrap_or(0),
            end_column: ec.unwrap_or(0),
            module: self.c_str(module),
            method: self.c_str(method),
            file: self.c_str(file),
        }
    }
}

/// Symbolize one address (`kind`: `CLRMAP_FRAME_LEAF`, `..._RETURN_ADDRESS`,
/// `..._RETURN_ADDRESS_CLR31`). S_OK when a body holds it, S_FALSE when none does (then only
/// `address` is set), E_INVALIDARG for an unknown kind.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_symbolize(sym: *const ClrmapSymbolizer, address: u64, kind: u32, out: *mut ClrmapFrame) -> HRESULT {
    ffi_fn!({
        // SAFETY: `sym` is null or live.
        let Some(s) = (unsafe { sym.as_ref() }) else { return Err(Failure::null_argument()) };
        if out.is_null() {
            return Err(Failure::null_argument());
        }
        let kind = s.frame_kind(kind)?;
        let f = s.sym.symbolize(address, kind);
        let frame = s.c_frame(address, f.at.module, f.at.token, f.at.method, f.at.il_offset, f.at.file, [f.at.line, f.at.column, f.at.end_line, f.at.end_column]);
        // SAFETY: `out` is non-null.
        unsafe { *out = frame };
        Ok(if f.code_start.is_some() { S_OK } else { S_FALSE })
    })
}

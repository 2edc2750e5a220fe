//! `libclrmap_profiler.so`: a CLR profiler, loaded by CoreCLR through `CORECLR_PROFILER_PATH`,
//! that writes what the runtime answers to `GetILToNativeMapping` for every code body into a
//! capture file (docs/capture-format.md), which `clrmap` reads like any other map source.
//!
//! Environment:
//! * `CLRMAP_PROFILER_OUTPUT`: the capture file (required; without it the profiler says so on
//!   stderr and records nothing).
//! * `CLRMAP_PROFILER_DISABLE_R2R=1`: add `COR_PRF_DISABLE_ALL_NGEN_IMAGES`, so even ReadyToRun
//!   methods are jitted.
//! * `CLRMAP_PROFILER_PERF=DIR` (set by `clrmap profile --perf`): also write Linux perf's
//!   `DIR/jit-PID.dump` and `DIR/perf-PID.map` while the process runs (docs/perf.md). The dump
//!   is mapped with PROT_EXEC (perf's marker); each jitted body (at JITCompilationFinished) and
//!   each ReadyToRun method (when its code is first published) gets a JIT_CODE_DEBUG_INFO record
//!   with its source lines and a JIT_CODE_LOAD record with its code bytes copied from the
//!   process, written together in one `write`: a killed process leaves every whole record. Names
//!   and lines come from the clrmap library ([`clrmap::jitdump`], [`clrmap::symbolizer::ModuleSymbols`]):
//!   each module's metadata is memory-mapped and its PDB read once, when its first body is seen.
//! * `CLRMAP_PROFILER_SYMBOL_PATH=DIR:DIR...`: more directories for PDBs (with `--perf`).
//!
//! COM by hand: one static class factory and one static profiler object, each a pointer to a
//! vtable of `extern "C"` functions in IDL slot order (corprof.idl; dotnet-runtime.md §5). The
//! callback vtable covers ICorProfilerCallback through Callback11 (98 slots). Every callback this
//! profiler does not need shares one stub returning S_OK: on x86-64 System V the caller owns its
//! arguments, so a stub that ignores them is sound whatever their number. No panic crosses the
//! FFI: every entry point runs inside `catch_unwind`.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

use std::collections::HashMap;
use std::ffi::c_void;
use std::fs::File;
use std::io::{Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, OnceLock};

type Hresult = i32;
const S_OK: Hresult = 0;
const E_NOINTERFACE: Hresult = 0x8000_4002_u32 as i32;
const E_FAIL: Hresult = 0x8000_4005_u32 as i32;

/// A COM GUID.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Guid(pub u32, pub u16, pub u16, pub [u8; 8]);

const IID_ICORPROFILERINFO9: Guid = Guid(0x0081_70DB, 0xF8CC, 0x4796, [0x9A, 0x51, 0xDC, 0x8A, 0xA0, 0xB4, 0x70, 0x12]);

// ICorProfilerInfo vtable slots (corprof.idl; dotnet-runtime.md §5).
const INFO_QUERY_INTERFACE: usize = 0;
const INFO_GET_FUNCTION_INFO: usize = 15;
const INFO_SET_EVENT_MASK: usize = 16;
const INFO_GET_MODULE_INFO: usize = 20;
const INFO_GET_IL_TO_NATIVE_MAPPING: usize = 35;
const INFO_GET_CODE_INFO2: usize = 42;
const INFO_GET_NATIVE_CODE_START_ADDRESSES: usize = 90;
const INFO_GET_IL_TO_NATIVE_MAPPING3: usize = 91;
const INFO_GET_CODE_INFO4: usize = 92;

// ICorProfilerCallback slots.
const CB_SLOTS: usize = 98;
const CB_INITIALIZE: usize = 3;
const CB_SHUTDOWN: usize = 4;
const CB_JIT_COMPILATION_FINISHED: usize = 24;
const CB_JIT_CACHED_FUNCTION_SEARCH_STARTED: usize = 25;
const CB_JIT_CACHED_FUNCTION_SEARCH_FINISHED: usize = 26;
const CB_JIT_INLINING: usize = 28;
const CB_LOAD_AS_NOTIFICATION_ONLY: usize = 97;

// COR_PRF_MONITOR flags.
const COR_PRF_MONITOR_JIT_COMPILATION: u32 = 0x20;
const COR_PRF_MONITOR_CACHE_SEARCHES: u32 = 0x2_0000;
const COR_PRF_DISABLE_ALL_NGEN_IMAGES: u32 = 0x8000_0000;

/// A COM object: a pointer to its vtable.
#[repr(C)]
struct ComObject {
    vtbl: *const usize,
}

// SAFETY: the objects are immutable after creation; the vtables they point to are leaked and
// never freed or changed.
unsafe impl Sync for ComObject {}
unsafe impl Send for ComObject {}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct IlMap {
    il: u32,
    start: u32,
    end: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CodeInfo {
    start: usize,
    size: usize,
}

/// One module, as the jitdump needs it: names from its metadata, lines from its PDB.
struct PerfModule {
    metadata: Option<clrmap::metadata::Metadata<'static>>,
    symbols: Option<clrmap::symbolizer::ModuleSymbols>,
}

/// The live jitdump and perf map (`CLRMAP_PROFILER_PERF`).
struct Perf {
    dump: File,
    map: File,
    /// perf's marker: the dump mapped PROT_EXEC for the process's lifetime.
    _marker: memmap2::Mmap,
    next_index: u64,
    modules: HashMap<String, PerfModule>,
    symbols: clrmap::pdb::locate::SymbolPaths,
}

struct State {
    info: *mut c_void,
    perf: Option<Perf>,
    /// The capture, opened for appending: a .NET child process inherits the environment and so
    /// writes to the same file, and each line goes out in one `write`, whole.
    out: Option<File>,
    pid: u32,
    /// R2R methods found but not yet published, with when they were found: their jitdump
    /// records carry that time, before the method first runs (a record stamped when it is
    /// written, at the next callback, could come after the method's hot loop has ended).
    pending_r2r: Vec<(usize, u64)>,
    seen_jit_starts: std::collections::HashSet<usize>,
    /// Module path → its SizeOfImage, read once from the file's PE header.
    image_sizes: HashMap<String, Option<u32>>,
}

// SAFETY: `info` is the runtime's ICorProfilerInfo9, which is free-threaded; the state is only
// reached through the mutex.
unsafe impl Send for State {}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| {
        Mutex::new(State {
            info: std::ptr::null_mut(),
            perf: None,
            out: None,
            pid: std::process::id(),
            pending_r2r: Vec::new(),
            seen_jit_starts: Default::default(),
            image_sizes: HashMap::new(),
        })
    })
}

fn factory() -> &'static ComObject {
    static FACTORY: OnceLock<ComObject> = OnceLock::new();
    FACTORY.get_or_init(|| {
        let v: Vec<usize> = vec![
            query_interface as *const () as usize,
            add_ref as *const () as usize,
            release as *const () as usize,
            create_instance as *const () as usize,
            lock_server as *const () as usize,
        ];
        ComObject { vtbl: Box::leak(v.into_boxed_slice()).as_ptr() }
    })
}

fn profiler() -> &'static ComObject {
    static PROFILER: OnceLock<ComObject> = OnceLock::new();
    PROFILER.get_or_init(|| {
        let mut v = vec![stub as *const () as usize; CB_SLOTS];
        let handled: [(usize, usize); 10] = [
            (0, query_interface as *const () as usize),
            (1, add_ref as *const () as usize),
            (2, release as *const () as usize),
            (CB_INITIALIZE, initialize as *const () as usize),
            (CB_SHUTDOWN, shutdown as *const () as usize),
            (CB_JIT_COMPILATION_FINISHED, jit_compilation_finished as *const () as usize),
            (CB_JIT_CACHED_FUNCTION_SEARCH_STARTED, jit_cached_function_search_started as *const () as usize),
            (CB_JIT_CACHED_FUNCTION_SEARCH_FINISHED, jit_cached_function_search_finished as *const () as usize),
            (CB_JIT_INLINING, jit_inlining as *const () as usize),
            (CB_LOAD_AS_NOTIFICATION_ONLY, load_as_notification_only as *const () as usize),
        ];
        for (slot, f) in handled {
            if let Some(s) = v.get_mut(slot) {
                *s = f;
            }
        }
        ComObject { vtbl: Box::leak(v.into_boxed_slice()).as_ptr() }
    })
}

/// Run `f`, turning a panic into E_FAIL.
fn guard(f: impl FnOnce() -> Hresult) -> Hresult {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(E_FAIL)
}

/// Fetch vtable slot `slot` of COM object `obj` as a function pointer of type `F`.
///
/// SAFETY (callers): `obj` is a live COM object whose vtable has more than `slot` entries, and `F`
/// is the slot's exact signature.
unsafe fn method<F: Copy>(obj: *mut c_void, slot: usize) -> F {
    // SAFETY: per the caller's contract the first word of `obj` is its vtable pointer and the
    // slot exists; a function pointer is one word, like `usize`.
    unsafe {
        let vtbl = *(obj as *const *const usize);
        let f = *vtbl.add(slot);
        std::mem::transmute_copy::<usize, F>(&f)
    }
}

/// The COM entry point: the runtime asks for the class factory of `CORECLR_PROFILER`.
///
/// # Safety
/// `ppv` must be null or valid for a pointer write, as COM requires.
#[no_mangle]
pub unsafe extern "C" fn DllGetClassObject(_clsid: *const Guid, _iid: *const Guid, ppv: *mut *mut c_void) -> Hresult {
    guard(|| {
        if ppv.is_null() {
            return E_FAIL;
        }
        // SAFETY: `ppv` is the runtime's non-null out-pointer.
        unsafe { *ppv = factory() as *const ComObject as *mut c_void };
        S_OK
    })
}

unsafe extern "C" fn query_interface(this: *mut c_void, _iid: *const Guid, ppv: *mut *mut c_void) -> Hresult {
    // The runtime asks only for IUnknown and the ICorProfilerCallback versions; the vtable serves
    // all of them up to Callback11.
    if ppv.is_null() {
        return E_NOINTERFACE;
    }
    // SAFETY: non-null out-pointer from the caller.
    unsafe { *ppv = this };
    S_OK
}

unsafe extern "C" fn add_ref(_this: *mut c_void) -> u32 {
    1
}

unsafe extern "C" fn release(_this: *mut c_void) -> u32 {
    1
}

unsafe extern "C" fn lock_server(_this: *mut c_void, _lock: i32) -> Hresult {
    S_OK
}

unsafe extern "C" fn create_instance(_this: *mut c_void, _outer: *mut c_void, _iid: *const Guid, ppv: *mut *mut c_void) -> Hresult {
    guard(|| {
        if ppv.is_null() {
            return E_FAIL;
        }
        // SAFETY: non-null out-pointer from the runtime.
        unsafe { *ppv = profiler() as *const ComObject as *mut c_void };
        S_OK
    })
}

unsafe extern "C" fn stub(_this: *mut c_void) -> Hresult {
    S_OK
}

unsafe extern "C" fn jit_inlining(_this: *mut c_void, _caller: usize, _callee: usize, should_inline: *mut i32) -> Hresult {
    // The runtime reads this out-parameter (dotnet-runtime.md §5): say yes, as if not hooked.
    if !should_inline.is_null() {
        // SAFETY: non-null out-pointer from the runtime.
        unsafe { *should_inline = 1 };
    }
    S_OK
}

unsafe extern "C" fn jit_cached_function_search_started(_this: *mut c_void, _fid: usize, use_cached: *mut i32) -> Hresult {
    if !use_cached.is_null() {
        // SAFETY: non-null out-pointer from the runtime.
        unsafe { *use_cached = 1 };
    }
    S_OK
}

unsafe extern "C" fn load_as_notification_only(_this: *mut c_void, notification_only: *mut i32) -> Hresult {
    if !notification_only.is_null() {
        // SAFETY: non-null out-pointer from the runtime.
        unsafe { *notification_only = 0 };
    }
    S_OK
}

unsafe extern "C" fn initialize(_this: *mut c_void, unknown: *mut c_void) -> Hresult {
    guard(|| {
        let path = match std::env::var_os("CLRMAP_PROFILER_OUTPUT") {
            Some(p) => p,
            None => {
                eprintln!("clrmap-profiler: CLRMAP_PROFILER_OUTPUT is not set; recording nothing");
                return E_FAIL;
            }
        };
        // Append, never truncate: a .NET child started by the profiled program loads this profiler
        // too, with the same output path, and must not erase its parent's records.
        let file = match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("clrmap-profiler: cannot write {}: {e}; recording nothing", std::path::Path::new(&path).display());
                return E_FAIL;
            }
        };
        let mut info: *mut c_void = std::ptr::null_mut();
        // SAFETY: `unknown` is the runtime's IUnknown; slot 0 is QueryInterface.
        let hr = unsafe {
            let qi: unsafe extern "C" fn(*mut c_void, *const Guid, *mut *mut c_void) -> Hresult = method(unknown, INFO_QUERY_INTERFACE);
            qi(unknown, &IID_ICORPROFILERINFO9, &mut info)
        };
        if hr != S_OK || info.is_null() {
            eprintln!("clrmap-profiler: the runtime has no ICorProfilerInfo9 (hr 0x{hr:08X}); recording nothing");
            return E_FAIL;
        }
        let mut mask = COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_MONITOR_CACHE_SEARCHES;
        let disable_r2r = std::env::var("CLRMAP_PROFILER_DISABLE_R2R").is_ok_and(|v| v == "1");
        if disable_r2r {
            mask |= COR_PRF_DISABLE_ALL_NGEN_IMAGES;
        }
        // SAFETY: `info` is ICorProfilerInfo9; slot 16 is SetEventMask(DWORD).
        let hr = unsafe {
            let set: unsafe extern "C" fn(*mut c_void, u32) -> Hresult = method(info, INFO_SET_EVENT_MASK);
            set(info, mask)
        };
        let mut out = file;
        let header = format!(
            "{{\"format\":\"clrmap-capture\",\"version\":1,\"pid\":{},\"event_mask\":{mask},\"set_event_mask_hr\":{hr},\"disable_r2r\":{disable_r2r}}}\n",
            std::process::id()
        );
        let _ = out.write_all(header.as_bytes());
        let perf = std::env::var_os("CLRMAP_PROFILER_PERF").and_then(|dir| match start_perf(std::path::Path::new(&dir)) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("clrmap-profiler: cannot start the perf jitdump in {}: {e}", std::path::Path::new(&dir).display());
                None
            }
        });
        if let Ok(mut s) = state().lock() {
            s.info = info;
            s.out = Some(out);
            s.perf = perf;
        }
        S_OK
    })
}

/// The function's module path and base address, and its token.
fn function_info(info: *mut c_void, fid: usize) -> Option<(String, usize, u32)> {
    let (mut class, mut module, mut token) = (0usize, 0usize, 0u32);
    // SAFETY: slot 15 is GetFunctionInfo(FunctionID, ClassID*, ModuleID*, mdToken*).
    let hr = unsafe {
        let f: unsafe extern "C" fn(*mut c_void, usize, *mut usize, *mut usize, *mut u32) -> Hresult = method(info, INFO_GET_FUNCTION_INFO);
        f(info, fid, &mut class, &mut module, &mut token)
    };
    if hr != S_OK {
        return None;
    }
    let mut base: *const u8 = std::ptr::null();
    let mut name = vec![0u16; 1024];
    let mut len = 0u32;
    let mut assembly = 0usize;
    // SAFETY: slot 20 is GetModuleInfo(ModuleID, LPCBYTE*, ULONG, ULONG*, WCHAR[], AssemblyID*);
    // the buffer holds `name.len()` UTF-16 units.
    let hr = unsafe {
        let f: unsafe extern "C" fn(*mut c_void, usize, *mut *const u8, u32, *mut u32, *mut u16, *mut usize) -> Hresult = method(info, INFO_GET_MODULE_INFO);
        f(info, module, &mut base, name.len() as u32, &mut len, name.as_mut_ptr(), &mut assembly)
    };
    if hr != S_OK {
        return None;
    }
    let n = (len as usize).min(name.len());
    let path = String::from_utf16_lossy(name.get(..n).unwrap_or(&[])).trim_end_matches('\0').to_owned();
    Some((path, base as usize, token))
}

/// The two-call protocol, by FunctionID (slot 35) or by code start (slot 91).
fn il_map(info: *mut c_void, by_start: bool, key: usize) -> Result<Vec<IlMap>, Hresult> {
    type MapFn = unsafe extern "C" fn(*mut c_void, usize, u32, *mut u32, *mut IlMap) -> Hresult;
    // SAFETY: slots 35 and 91 have this shape (FunctionID or UINT_PTR first, then cMap, pcMap, map).
    let f: MapFn = unsafe { method(info, if by_start { INFO_GET_IL_TO_NATIVE_MAPPING3 } else { INFO_GET_IL_TO_NATIVE_MAPPING }) };
    let mut n = 0u32;
    // SAFETY: a size query: cMap 0 and a null map.
    let hr = unsafe { f(info, key, 0, &mut n, std::ptr::null_mut()) };
    if hr != S_OK {
        return Err(hr);
    }
    let mut map = vec![IlMap::default(); n as usize];
    let mut m = 0u32;
    // SAFETY: the buffer holds `n` entries.
    let hr = unsafe { f(info, key, n, &mut m, map.as_mut_ptr()) };
    if hr != S_OK {
        return Err(hr);
    }
    map.truncate(m as usize);
    Ok(map)
}

/// Code ranges by FunctionID (GetCodeInfo2, slot 42) or by code start (GetCodeInfo4, slot 92).
fn code_info(info: *mut c_void, by_start: bool, key: usize) -> Option<(usize, usize, usize)> {
    type InfoFn = unsafe extern "C" fn(*mut c_void, usize, u32, *mut u32, *mut CodeInfo) -> Hresult;
    // SAFETY: both slots take (key, cCodeInfos, pcCodeInfos, COR_PRF_CODE_INFO[]).
    let f: InfoFn = unsafe { method(info, if by_start { INFO_GET_CODE_INFO4 } else { INFO_GET_CODE_INFO2 }) };
    let mut ranges = [CodeInfo::default(); 8];
    let mut n = 0u32;
    // SAFETY: the buffer holds 8 entries.
    let hr = unsafe { f(info, key, ranges.len() as u32, &mut n, ranges.as_mut_ptr()) };
    if hr != S_OK || n == 0 {
        return None;
    }
    let used = ranges.get(..(n as usize).min(ranges.len()))?;
    let first = used.first()?;
    Some((first.start, used.iter().fold(0usize, |a, r| a.saturating_add(r.size)), first.size))
}

fn json_map(map: &[IlMap]) -> String {
    let parts: Vec<String> = map.iter().map(|e| format!("[{},{},{}]", e.il, e.start, e.end)).collect();
    format!("[{}]", parts.join(","))
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// SizeOfImage from a PE file's optional header (PE/COFF: e_lfanew at 0x3C, then "PE\0\0",
/// the 20-byte file header, and SizeOfImage at offset 56 of the optional header, in PE32 and
/// PE32+ alike).
fn size_of_image(path: &str) -> Option<u32> {
    let mut head = vec![0u8; 4096];
    let mut f = File::open(path).ok()?;
    let n = f.read(&mut head).ok()?;
    let head = head.get(..n)?;
    let u32_at = |at: usize| head.get(at..at.checked_add(4)?).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
    let pe = u32_at(0x3C)? as usize;
    if head.get(pe..pe.checked_add(4)?)? != b"PE\0\0" {
        return None;
    }
    u32_at(pe.checked_add(4 + 20 + 56)?)
}

/// One record per code body: a JSON line, written whole in one `write` (a crash loses at most
/// the line being written, and processes sharing the file never interleave inside a line).
#[allow(clippy::too_many_arguments)]
fn record(s: &mut State, kind: &str, fid: usize, module: &str, base: usize, token: u32, start: usize, size: usize, body: usize, map: &[IlMap], map1: Option<&[IlMap]>) {
    // An RVA only for ReadyToRun code that lies inside its module's mapped image: jitted code
    // lives in the JIT's code heap, which is often within 4 GiB of a module base but is no RVA.
    let rva = if kind == "r2r" && base != 0 {
        let limit = s.image_sizes.entry(module.to_owned()).or_insert_with(|| size_of_image(module)).unwrap_or(0);
        start.checked_sub(base).filter(|&r| r < limit as usize)
    } else {
        None
    };
    let line = format!(
        "{{\"kind\":{},\"pid\":{},\"function_id\":{fid},\"module\":{},\"token\":{token},\"start\":{start},\"rva\":{},\"code_size\":{size},\"body\":{body},\"map\":{},\"map1\":{}}}\n",
        json_str(kind),
        s.pid,
        json_str(module),
        rva.map_or("null".to_owned(), |r| r.to_string()),
        json_map(map),
        map1.map_or("null".to_owned(), json_map),
    );
    let Some(out) = s.out.as_mut() else { return };
    let _ = out.write_all(line.as_bytes());
}

/// Fetch the maps of R2R methods whose code has been published since they were found.
fn drain_r2r(s: &mut State) {
    let info = s.info;
    let pending = std::mem::take(&mut s.pending_r2r);
    for (fid, found) in pending {
        match il_map(info, false, fid) {
            Ok(map) => {
                let Some((module, base, token)) = function_info(info, fid) else { continue };
                let Some((start, size, first)) = code_info(info, false, fid) else { continue };
                record(s, "r2r", fid, &module, base, token, start, size, 0, &map, None);
                perf_record(s, &module, token, start, size, first, &map, found);
            }
            // Not published yet (E_INVALIDARG inside the search callback): try again later.
            Err(_) => s.pending_r2r.push((fid, found)),
        }
    }
}

unsafe extern "C" fn jit_cached_function_search_finished(_this: *mut c_void, fid: usize, result: u32) -> Hresult {
    guard(|| {
        if let Ok(mut s) = state().lock() {
            if s.info.is_null() {
                return S_OK;
            }
            drain_r2r(&mut s);
            // COR_PRF_CACHED_FUNCTION_FOUND = 0.
            if result == 0 {
                let found = if s.perf.is_some() { monotonic_ns() } else { 0 };
                s.pending_r2r.push((fid, found));
            }
        }
        S_OK
    })
}

unsafe extern "C" fn jit_compilation_finished(_this: *mut c_void, fid: usize, _hr: Hresult, _safe: i32) -> Hresult {
    guard(|| {
        let Ok(mut s) = state().lock() else { return S_OK };
        if s.info.is_null() {
            return S_OK;
        }
        drain_r2r(&mut s);
        let info = s.info;
        let mut starts = [0usize; 16];
        let mut n = 0u32;
        // SAFETY: slot 90 is GetNativeCodeStartAddresses(FunctionID, ReJITID, ULONG32, ULONG32*, UINT_PTR[]).
        let hr = unsafe {
            let f: unsafe extern "C" fn(*mut c_void, usize, usize, u32, *mut u32, *mut usize) -> Hresult = method(info, INFO_GET_NATIVE_CODE_START_ADDRESSES);
            f(info, fid, 0, starts.len() as u32, &mut n, starts.as_mut_ptr())
        };
        if hr != S_OK {
            return S_OK;
        }
        let Some((module, base, token)) = function_info(info, fid) else { return S_OK };
        let map1 = il_map(info, false, fid).ok();
        for (body, &start) in starts.iter().take((n as usize).min(starts.len())).enumerate() {
            if start == 0 || !s.seen_jit_starts.insert(start) {
                continue;
            }
            let Ok(map) = il_map(info, true, start) else { continue };
            let (size, first) = code_info(info, true, start).map_or((0, 0), |(_, size, first)| (size, first));
            record(&mut s, "jit", fid, &module, base, token, start, size, body, &map, map1.as_deref());
            perf_record(&mut s, &module, token, start, size, first, &map, monotonic_ns());
        }
        S_OK
    })
}

unsafe extern "C" fn shutdown(_this: *mut c_void) -> Hresult {
    guard(|| {
        if let Ok(mut s) = state().lock() {
            if !s.info.is_null() {
                drain_r2r(&mut s);
            }
            let end = format!("{{\"kind\":\"end\",\"pid\":{}}}\n", s.pid);
            if let Some(out) = s.out.as_mut() {
                // Bodies jitted by threads still running after Shutdown are written after this
                // line; readers keep them.
                let _ = out.write_all(end.as_bytes());
            }
        }
        S_OK
    })
}

/// CLOCK_MONOTONIC in ns: the clock `perf record -k 1` stamps samples with.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer to a timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

fn thread_id() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Create `DIR/jit-PID.dump` (header written) and `DIR/perf-PID.map`, and map the dump PROT_EXEC:
/// the mmap event perf records is how `perf inject --jit` finds the file.
fn start_perf(dir: &std::path::Path) -> std::io::Result<Perf> {
    let pid = std::process::id();
    let path = dir.join(format!("jit-{pid}.dump"));
    let mut dump = std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path)?;
    let header = clrmap::jitdump::FileHeader { elf_machine: clrmap::jitdump::host_machine(), pid, timestamp: monotonic_ns(), flags: 0 };
    dump.write_all(&header.encode())?;
    dump.sync_all()?;
    // SAFETY: a read-only, executable mapping of the header we just wrote; nothing reads it (it
    // only marks the file for perf), and the file is only appended to.
    let marker = unsafe { memmap2::MmapOptions::new().len(clrmap::jitdump::HEADER_SIZE as usize).map_exec(&dump)? };
    let map = std::fs::OpenOptions::new().create(true).truncate(true).write(true).open(dir.join(format!("perf-{pid}.map")))?;
    let dirs = std::env::var_os("CLRMAP_PROFILER_SYMBOL_PATH").map(|v| std::env::split_paths(&v).collect()).unwrap_or_default();
    Ok(Perf { dump, map, _marker: marker, next_index: 0, modules: HashMap::new(), symbols: clrmap::pdb::locate::SymbolPaths { pdb: None, dirs } })
}

/// A module's metadata and PDB lines, loaded the first time one of its bodies is written. The
/// file is memory-mapped and the mapping kept for the process's lifetime.
fn perf_module(symbols: &clrmap::pdb::locate::SymbolPaths, path: &str) -> PerfModule {
    let mapped = File::open(path).ok().and_then(|f| {
        // SAFETY: a read-only mapping of a module file the runtime has loaded; it is never
        // unmapped (leaked), so the slices borrowed from it stay valid.
        let m = unsafe { memmap2::Mmap::map(&f) }.ok()?;
        let m: &'static memmap2::Mmap = Box::leak(Box::new(m));
        Some(m.as_ref())
    });
    let Some(bytes) = mapped else { return PerfModule { metadata: None, symbols: None } };
    let metadata = clrmap::metadata::Metadata::parse(bytes).ok();
    let symbols = clrmap::symbolizer::ModuleSymbols::load(bytes, Some(std::path::Path::new(path)), symbols).ok().flatten();
    PerfModule { metadata, symbols }
}

/// Write one body to the jitdump (debug info, then the code load with the bytes of its first code
/// range) and the perf map. `size` is the body's code size (all ranges, as the capture gives
/// it); the lines follow the capture's map over it, as the offline route computes them.
#[allow(clippy::too_many_arguments)]
fn perf_record(s: &mut State, module: &str, token: u32, start: usize, size: usize, first: usize, map: &[IlMap], timestamp: u64) {
    let pid = s.pid;
    let Some(perf) = s.perf.as_mut() else { return };
    if start == 0 || first == 0 {
        return;
    }
    let symbols = &perf.symbols;
    let m = perf.modules.entry(module.to_owned()).or_insert_with(|| perf_module(symbols, module));
    let file_name = std::path::Path::new(module).file_name().map(|f| f.to_string_lossy().into_owned());
    let method = m.metadata.as_ref().and_then(|md| md.method_name(token));
    let name = clrmap::jitdump::build::symbol_name(method.as_deref(), file_name.as_deref(), token);
    let entries: Vec<clrmap::ilmap::MapEntry> = map
        .iter()
        .map(|e| clrmap::ilmap::CorDebugIlToNativeMap { il_offset: e.il, native_start_offset: e.start, native_end_offset: e.end }.into())
        .collect();
    let code_size = u32::try_from(size).unwrap_or(u32::MAX);
    let rows = m.symbols.as_ref().map(|sym| sym.line_table(token, &entries, code_size)).unwrap_or_default();
    let mut out = Vec::new();
    if !rows.is_empty() {
        let lines = clrmap::jitdump::line_entries(start as u64, &rows);
        if let Some(r) = clrmap::jitdump::encode_debug_info(timestamp, start as u64, &lines) {
            out = r;
        }
    }
    // SAFETY: [start, start + first) is the body's first code range, as the runtime reported it
    // (GetCodeInfo2/4): published, mapped and readable code that the runtime never frees while
    // the module is loaded.
    let code = unsafe { std::slice::from_raw_parts(start as *const u8, first) };
    perf.next_index = perf.next_index.saturating_add(1);
    let load = clrmap::jitdump::CodeLoad {
        timestamp,
        pid,
        tid: thread_id(),
        address: start as u64,
        code_size: first as u64,
        code_index: perf.next_index,
        name: &name,
        code: Some(code),
    };
    let Some(r) = clrmap::jitdump::encode_code_load(&load) else { return };
    out.extend(r);
    // One write per body: a process killed mid-run leaves every whole record.
    let _ = perf.dump.write_all(&out);
    let _ = perf.map.write_all(clrmap::jitdump::perf_map_line(start as u64, first as u64, &name).as_bytes());
}

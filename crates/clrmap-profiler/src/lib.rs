//! `libclrmap_profiler.so`: a CLR profiler that writes what the runtime answers to
//! `GetILToNativeMapping` for every code body into a capture file (docs/capture-format.md), which
//! `clrmap` reads like any other map source. It is loaded two ways:
//!
//! * **At start-up**, through `CORECLR_PROFILER_PATH` (`clrmap profile -- CMD`): `Initialize`.
//!   Environment:
//!   * `CLRMAP_PROFILER_OUTPUT`: the capture file (required unless `CLRMAP_PROFILER_PERF` is set;
//!     without either the profiler says so on stderr and records nothing).
//!   * `CLRMAP_PROFILER_DISABLE_R2R=1`: add `COR_PRF_DISABLE_ALL_NGEN_IMAGES`, so even ReadyToRun
//!     methods are jitted.
//!   * `CLRMAP_PROFILER_PERF=DIR` (set by `clrmap profile --perf`): also write Linux perf's
//!     `DIR/jit-PID.dump` and `DIR/perf-PID.map` while the process runs (`perf.rs`, docs/perf.md).
//!     Without a capture, maps are asked of the runtime only for modules with a PDB.
//!   * `CLRMAP_PROFILER_SYMBOL_PATH=DIR:DIR...`: more directories for PDBs (with `--perf`).
//! * **Attached to a running process** through the diagnostics port's AttachProfiler command
//!   (`clrmap profile --pid PID`): `InitializeForAttach`, with its settings as JSON in the client
//!   data ([`AttachConfig`]). At `ProfilerAttachComplete` it records every body jitted before it
//!   came (EnumJITedFunctions2, then GetILToNativeMapping3 per code start), then each body jitted
//!   after. A thread of its own watches for the stop file (or the requesting `clrmap` exiting) and
//!   then asks the runtime to detach it; `ProfilerDetachSucceeded` writes the end record. It never
//!   writes to the process's stdout or stderr.
//!
//! COM by hand (`com.rs`): one static class factory and one static profiler object, each pointing
//! at a typed vtable. No panic crosses the FFI: every entry point runs inside `catch_unwind`.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

mod com;
mod inlines;
mod modules;
mod perf;
mod shared;

use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::fs::File;
use std::io::{Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use clrmap::capture::{Body, End, Header, Record, RtType, FORMAT, VERSION};
use com::{CallbackVtbl, ClassFactoryVtbl, ComObject, Guid, Hresult, IlMap, Info, Stub, E_FAIL, E_NOINTERFACE, S_OK};
use serde::Deserialize;

// COR_PRF_MONITOR flags.
const COR_PRF_MONITOR_CLASS_LOADS: u32 = 0x2;
const COR_PRF_MONITOR_JIT_COMPILATION: u32 = 0x20;
const COR_PRF_MONITOR_CACHE_SEARCHES: u32 = 0x2_0000;
const COR_PRF_DISABLE_ALL_NGEN_IMAGES: u32 = 0x8000_0000;

/// What `clrmap profile --pid` passes as AttachProfiler's client data, as JSON.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct AttachConfig {
    /// The capture file (appended to).
    pub output: PathBuf,
    /// Detach once this file exists.
    #[serde(default)]
    pub stop_file: Option<PathBuf>,
    /// Detach once this process (the requesting `clrmap`) is gone; 0 for none.
    #[serde(default)]
    pub watch_pid: u32,
}

struct State {
    info: Option<Info>,
    perf: Option<perf::Perf>,
    /// The capture, opened for appending: a .NET child process inherits the environment and so
    /// writes to the same file, and each line goes out in one `write`, whole.
    out: Option<File>,
    pid: u32,
    /// R2R methods found but not yet published, with when they were found: their jitdump
    /// records carry that time, before the method first runs (a record stamped when it is
    /// written, at the next callback, could come after the method's hot loop has ended).
    pending_r2r: Vec<(usize, u64)>,
    /// Every code start recorded, ReadyToRun or jitted: a body is recorded once, however the
    /// runtime comes to report it again (an R2R method's start is also its first code version,
    /// listed by GetNativeCodeStartAddresses once it is re-jitted at tier 1).
    seen_starts: HashSet<usize>,
    /// FunctionID → the version the function's next recorded body gets (0, 1, 2...: the order
    /// the profiler recorded its bodies in, R2R code included).
    versions: HashMap<usize, u32>,
    /// Module path → its SizeOfImage, read once from the file's PE header.
    image_sizes: HashMap<String, Option<u32>>,
    /// ClassID → the type as recorded (`None`: the runtime could not describe it).
    types: HashMap<usize, Option<RtType>>,
    /// ModuleID → its path.
    module_paths: HashMap<usize, String>,
    /// ModuleID → its MVID as the capture writes it (`None`: the runtime did not tell).
    mvids: HashMap<usize, Option<String>>,
    /// The loaded classes, to find the class of code shared by its class (`shared.rs`).
    shared: shared::Shared,
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| {
        Mutex::new(State {
            info: None,
            perf: None,
            out: None,
            pid: std::process::id(),
            pending_r2r: Vec::new(),
            seen_starts: HashSet::new(),
            versions: HashMap::new(),
            image_sizes: HashMap::new(),
            types: HashMap::new(),
            module_paths: HashMap::new(),
            mvids: HashMap::new(),
            shared: shared::Shared::default(),
        })
    })
}

static FACTORY_VTBL: ClassFactoryVtbl = ClassFactoryVtbl { query_interface, add_ref, release, create_instance, lock_server };
static FACTORY: ComObject<ClassFactoryVtbl> = ComObject { vtbl: &FACTORY_VTBL };

static CALLBACK_VTBL: CallbackVtbl = CallbackVtbl {
    query_interface,
    add_ref,
    release,
    initialize,
    shutdown,
    _5: [stub as Stub; 14],
    class_load_finished,
    class_unload_started,
    _21: [stub as Stub; 3],
    jit_compilation_finished,
    jit_cached_function_search_started,
    jit_cached_function_search_finished,
    _27: stub,
    jit_inlining,
    _29: [stub as Stub; 51],
    initialize_for_attach,
    profiler_attach_complete,
    profiler_detach_succeeded,
    _83: [stub as Stub; 12],
    event_pipe_event_delivered,
    _96: stub,
    load_as_notification_only,
};
static PROFILER: ComObject<CallbackVtbl> = ComObject { vtbl: &CALLBACK_VTBL };

/// Run `f`, turning a panic into E_FAIL.
fn guard(f: impl FnOnce() -> Hresult) -> Hresult {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(E_FAIL)
}

/// The COM entry point: the runtime asks for the class factory of the profiler's CLSID.
///
/// # Safety
/// `ppv` must be null or valid for a pointer write, as COM requires.
#[no_mangle]
pub unsafe extern "system" fn DllGetClassObject(_clsid: *const Guid, _iid: *const Guid, ppv: *mut *mut c_void) -> Hresult {
    guard(|| {
        if ppv.is_null() {
            return E_FAIL;
        }
        // SAFETY: `ppv` is the runtime's non-null out-pointer.
        unsafe { *ppv = &FACTORY as *const ComObject<ClassFactoryVtbl> as *mut c_void };
        S_OK
    })
}

unsafe extern "system" fn query_interface(this: *mut c_void, _iid: *const Guid, ppv: *mut *mut c_void) -> Hresult {
    // The runtime asks only for IUnknown and the ICorProfilerCallback versions; the vtable serves
    // all of them up to Callback11.
    if ppv.is_null() {
        return E_NOINTERFACE;
    }
    // SAFETY: non-null out-pointer from the caller.
    unsafe { *ppv = this };
    S_OK
}

unsafe extern "system" fn add_ref(_this: *mut c_void) -> u32 {
    1
}

unsafe extern "system" fn release(_this: *mut c_void) -> u32 {
    1
}

unsafe extern "system" fn lock_server(_this: *mut c_void, _lock: i32) -> Hresult {
    S_OK
}

unsafe extern "system" fn create_instance(_this: *mut c_void, _outer: *mut c_void, _iid: *const Guid, ppv: *mut *mut c_void) -> Hresult {
    guard(|| {
        if ppv.is_null() {
            return E_FAIL;
        }
        // SAFETY: non-null out-pointer from the runtime.
        unsafe { *ppv = &PROFILER as *const ComObject<CallbackVtbl> as *mut c_void };
        S_OK
    })
}

unsafe extern "system" fn stub(_this: *mut c_void) -> Hresult {
    S_OK
}

unsafe extern "system" fn jit_inlining(_this: *mut c_void, _caller: usize, _callee: usize, should_inline: *mut i32) -> Hresult {
    // The runtime reads this out-parameter (docs/format-notes.md#clr-profilers): say yes, as if not hooked.
    if !should_inline.is_null() {
        // SAFETY: non-null out-pointer from the runtime.
        unsafe { *should_inline = 1 };
    }
    S_OK
}

/// ICorProfilerCallback::ClassLoadFinished: remember the class (`shared.rs`).
unsafe extern "system" fn class_load_finished(_this: *mut c_void, class: usize, hr: Hresult) -> Hresult {
    guard(|| {
        if hr == S_OK && class != 0 {
            shared::loaded(class);
        }
        S_OK
    })
}

/// ICorProfilerCallback::ClassUnloadStarted.
unsafe extern "system" fn class_unload_started(_this: *mut c_void, class: usize) -> Hresult {
    guard(|| {
        shared::unloaded(class);
        S_OK
    })
}

unsafe extern "system" fn jit_cached_function_search_started(_this: *mut c_void, _fid: usize, use_cached: *mut i32) -> Hresult {
    if !use_cached.is_null() {
        // SAFETY: non-null out-pointer from the runtime.
        unsafe { *use_cached = 1 };
    }
    S_OK
}

unsafe extern "system" fn load_as_notification_only(_this: *mut c_void, notification_only: *mut i32) -> Hresult {
    if !notification_only.is_null() {
        // SAFETY: non-null out-pointer from the runtime.
        unsafe { *notification_only = 0 };
    }
    S_OK
}

fn header(info: &Info, mask: u32, hr: Hresult, disable_r2r: bool, attach: bool) -> String {
    let runtime = info.runtime_information();
    Header {
        runtime_version: runtime.as_ref().map(|(v, _)| format!("{}.{}.{}.{}", v[0], v[1], v[2], v[3])),
        runtime_version_string: runtime.map(|(_, t)| t),
        runtime_path: runtime_library_path(),
        format: FORMAT.to_owned(),
        version: VERSION,
        pid: std::process::id(),
        event_mask: Some(mask),
        set_event_mask_hr: Some(hr),
        disable_r2r: Some(disable_r2r),
        attach,
    }
    .to_line()
}

unsafe extern "system" fn initialize(_this: *mut c_void, unknown: *mut c_void) -> Hresult {
    guard(|| {
        let path = std::env::var_os("CLRMAP_PROFILER_OUTPUT");
        let perf_dir = std::env::var_os("CLRMAP_PROFILER_PERF");
        if path.is_none() && perf_dir.is_none() {
            eprintln!("clrmap-profiler: neither CLRMAP_PROFILER_OUTPUT nor CLRMAP_PROFILER_PERF is set; recording nothing");
            return E_FAIL;
        }
        // Append, never truncate: a .NET child started by the profiled program loads this profiler
        // too, with the same output path, and must not erase its parent's records.
        let mut out = match path.as_ref().map(|p| std::fs::OpenOptions::new().create(true).append(true).open(p)) {
            None => None,
            Some(Ok(f)) => Some(f),
            Some(Err(e)) => {
                eprintln!("clrmap-profiler: cannot write {}: {e}; recording nothing", std::path::Path::new(path.as_deref().unwrap_or_default()).display());
                return E_FAIL;
            }
        };
        // SAFETY: `unknown` is the runtime's IUnknown, as Initialize receives it.
        let info = match unsafe { Info::from_unknown(unknown) } {
            Ok(i) => i,
            Err(hr) => {
                eprintln!("clrmap-profiler: the runtime has no ICorProfilerInfo9 (hr 0x{hr:08X}); recording nothing");
                return E_FAIL;
            }
        };
        let mut mask = COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_MONITOR_CACHE_SEARCHES;
        // With a capture, the loaded classes: where the runtime gives no class for code shared
        // by its class (.NET 8 and 9), the profiler finds it among them (`shared.rs`).
        if out.is_some() {
            mask |= COR_PRF_MONITOR_CLASS_LOADS;
        }
        let disable_r2r = std::env::var("CLRMAP_PROFILER_DISABLE_R2R").is_ok_and(|v| v == "1");
        if disable_r2r {
            mask |= COR_PRF_DISABLE_ALL_NGEN_IMAGES;
        }
        let hr = info.set_event_mask(mask);
        if let Some(out) = out.as_mut() {
            let _ = out.write_all(header(&info, mask, hr, disable_r2r, false).as_bytes());
        }
        // The JIT's inline trees (`clrmap profile` without --no-inlines): into the capture, and
        // to the jitdump's lines.
        if std::env::var("CLRMAP_PROFILER_INLINES").is_ok_and(|v| v == "1") {
            inlines::start(unknown, info, mask, out.as_ref());
        }
        let perf = perf_dir.and_then(|dir| match perf::start_perf(std::path::Path::new(&dir)) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("clrmap-profiler: cannot start the perf jitdump in {}: {e}", std::path::Path::new(&dir).display());
                None
            }
        });
        if out.is_none() && perf.is_none() {
            return E_FAIL;
        }
        if let Ok(mut s) = state().lock() {
            s.shared.enabled = mask & COR_PRF_MONITOR_CLASS_LOADS != 0 && hr == S_OK;
            s.info = Some(info);
            s.out = out;
            s.perf = perf;
        }
        S_OK
    })
}

/// The path of the runtime library this process runs (`libcoreclr.so`, from /proc/self/maps): in
/// a shared framework it names the version (`.../Microsoft.NETCore.App/3.1.23/libcoreclr.so`),
/// which CoreCLR before .NET 5 does not report (GetRuntimeInformation answers 4.0.30319).
/// Whether this runtime's JIT fills in the inline trees' call sites
/// ([`clrmap::inlines::call_sites_known`]: not on .NET 10), asked once.
fn call_sites_known(info: &Info) -> bool {
    static KNOWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KNOWN.get_or_init(|| {
        let reported = info.runtime_information().map(|(_, text)| text).unwrap_or_default();
        clrmap::inlines::call_sites_known(clrmap::nettrace::runtime_major(&reported, runtime_library_path().as_deref()))
    })
}

fn runtime_library_path() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.ends_with("/libcoreclr.so")).map(str::to_owned)
}

/// ICorProfilerCallback3::InitializeForAttach. Failures are told to the requesting `clrmap` by
/// the HRESULT that AttachProfiler answers, never on the process's stderr.
unsafe extern "system" fn initialize_for_attach(_this: *mut c_void, unknown: *mut c_void, data: *const u8, len: u32) -> Hresult {
    guard(|| {
        if data.is_null() {
            return E_FAIL;
        }
        // SAFETY: the runtime passes the client data it received, `len` bytes at `data`.
        let bytes = unsafe { std::slice::from_raw_parts(data, len as usize) };
        let Ok(config) = serde_json::from_slice::<AttachConfig>(bytes) else { return E_FAIL };
        let Ok(mut out) = std::fs::OpenOptions::new().create(true).append(true).open(&config.output) else { return E_FAIL };
        // SAFETY: `unknown` is the runtime's IUnknown, as InitializeForAttach receives it.
        let Ok(info) = (unsafe { Info::from_unknown(unknown) }) else { return E_FAIL };
        // After attach the runtime allows JIT events but no cache searches (COR_PRF_ALLOWABLE_AFTER_ATTACH).
        let mask = COR_PRF_MONITOR_JIT_COMPILATION;
        let hr = info.set_event_mask(mask);
        if hr != S_OK {
            return hr;
        }
        if out.write_all(header(&info, mask, hr, false, true).as_bytes()).is_err() {
            return E_FAIL;
        }
        if let Ok(mut s) = state().lock() {
            // A fresh recording: the runtime may have kept this library loaded since an earlier
            // attach and detach (glibc does not unload a library whose thread-local destructors
            // are still registered), and what that recording saw must not hide bodies from this one.
            s.seen_starts.clear();
            s.versions.clear();
            s.pending_r2r.clear();
            s.types.clear();
            s.module_paths.clear();
            s.mvids.clear();
            s.shared.reset();
            modules::reset();
            s.info = Some(info);
            s.out = Some(out);
        }
        let watcher = std::thread::Builder::new().name("clrmap-detach".into()).spawn(move || watch_for_stop(info, config));
        if watcher.is_err() {
            return E_FAIL;
        }
        S_OK
    })
}

/// Whether process `pid` still exists.
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: kill with signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The detach thread: a thread of the profiler's own (RequestProfilerDetach must not be called
/// from a callback or a managed thread). It returns right after the request, long before the
/// runtime unloads this library (it first waits for every callback to leave, a second here).
fn watch_for_stop(info: Info, config: AttachConfig) {
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let stop = config.stop_file.as_ref().is_some_and(|f| f.exists());
        let orphaned = config.watch_pid != 0 && !alive(config.watch_pid);
        if stop || orphaned {
            break;
        }
    }
    let hr = info.request_profiler_detach(1000);
    if hr != S_OK {
        // The runtime refuses: stay loaded, but record nothing more.
        let _ = info.set_event_mask(0);
        end("detach refused", Some(hr));
    }
}

/// Write the end record and stop recording.
fn end(reason: &str, hr: Option<Hresult>) {
    if let Ok(mut s) = state().lock() {
        if s.info.is_some() {
            drain_r2r(&mut s);
        }
        if let Some(p) = s.perf.as_mut() {
            perf::pull_stubs(p);
        }
        let reason = match hr {
            Some(hr) => format!("{reason} (0x{hr:08X})"),
            None => reason.to_owned(),
        };
        let line = Record::End(End { pid: Some(s.pid), reason: Some(reason) }).to_line();
        if let Some(out) = s.out.as_mut() {
            let _ = out.write_all(line.as_bytes());
        }
    }
}

/// ICorProfilerCallback3::ProfilerAttachComplete: record what was jitted before the attach.
unsafe extern "system" fn profiler_attach_complete(_this: *mut c_void) -> Hresult {
    guard(|| {
        let Ok(mut s) = state().lock() else { return S_OK };
        let Some(info) = s.info else { return S_OK };
        let Ok(functions) = info.jited_functions() else { return S_OK };
        for f in functions {
            record_jitted(&mut s, info, f.function_id, f.rejit_id, true, None);
        }
        S_OK
    })
}

unsafe extern "system" fn profiler_detach_succeeded(_this: *mut c_void) -> Hresult {
    guard(|| {
        end("detached", None);
        if let Ok(mut s) = state().lock() {
            // The runtime unloads this library next: nothing may call into it.
            s.info = None;
            s.out = None;
            s.seen_starts.clear();
            s.versions.clear();
            s.pending_r2r.clear();
            s.types.clear();
            s.module_paths.clear();
            s.mvids.clear();
            s.shared.reset();
            modules::reset();
        }
        S_OK
    })
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

/// The deepest type argument nesting recorded (`List<List<...>>`); deeper instantiations are
/// recorded without their type arguments.
const MAX_TYPE_DEPTH: u32 = 16;

/// A module's path, asked once per ModuleID.
fn module_path(s: &mut State, info: Info, module: usize) -> Option<String> {
    if let Some(p) = s.module_paths.get(&module) {
        return Some(p.clone());
    }
    let (path, _) = info.module_info(module)?;
    s.module_paths.insert(module, path.clone());
    Some(path)
}

/// A module's MVID, asked once per ModuleID: the identity of the file the runtime loaded, so a
/// reader never takes an assembly of another build for it.
/// The first time this recording meets the module's path, its `module` record (the PDB id its
/// image names) goes out first (modules.rs).
fn module_mvid(s: &mut State, info: Info, module: usize) -> Option<String> {
    if let Some(m) = s.mvids.get(&module) {
        return m.clone();
    }
    let mvid = info.module_mvid(module);
    if let Some(path) = module_path(s, info, module) {
        if let (Some(line), Some(out)) = (modules::record_line(s.pid, &path, mvid), s.out.as_mut()) {
            let _ = out.write_all(line.as_bytes());
        }
    }
    let text = mvid.map(|m| clrmap::capture::mvid_text(&m));
    s.mvids.insert(module, text.clone());
    text
}

/// A class as the capture records it (cached per ClassID): an array of its element, or a
/// TypeDef of a module with its type arguments.
fn rt_type(s: &mut State, info: Info, class: usize, depth: u32) -> Option<RtType> {
    if depth > MAX_TYPE_DEPTH || class == 0 {
        return None;
    }
    if let Some(t) = s.types.get(&class) {
        return t.clone();
    }
    let t = describe(s, info, class, depth);
    s.types.insert(class, t.clone());
    t
}

fn describe(s: &mut State, info: Info, class: usize, depth: u32) -> Option<RtType> {
    let next = depth.saturating_add(1);
    if let Some((element, element_class, rank)) = info.array_class(class) {
        let mut t = RtType { rank: Some(rank), ..RtType::default() };
        if element_class != 0 {
            t.args.push(rt_type(s, info, element_class, next)?);
        } else {
            t.element = Some(u8::try_from(element).ok()?);
        }
        return Some(t);
    }
    let (module, token, args) = info.class_info(class)?;
    let module = module_path(s, info, module)?;
    let args = args.into_iter().map(|a| rt_type(s, info, a, next)).collect::<Option<Vec<RtType>>>()?;
    Some(RtType { module: Some(module), token, args, ..RtType::default() })
}

/// The owner's and the method's type arguments of function `fid`, as the runtime instantiated
/// them; both empty for code that is not generic (or that the runtime cannot describe).
fn type_args(s: &mut State, info: Info, fid: usize) -> (Vec<RtType>, Vec<RtType>) {
    let Some((class, method_args)) = info.function_class_and_args(fid) else { return (Vec::new(), Vec::new()) };
    // Code shared by its class: .NET 8 and 9 give no class (`shared.rs`).
    let class = if class == 0 { s.shared.class_of(info, fid, &method_args).unwrap_or(0) } else { class };
    let class_args = match info.class_info(class) {
        Some((_, _, args)) if !args.is_empty() => args.into_iter().map(|a| rt_type(s, info, a, 1)).collect::<Option<Vec<RtType>>>().unwrap_or_default(),
        _ => Vec::new(),
    };
    let method_args = method_args.into_iter().map(|a| rt_type(s, info, a, 1)).collect::<Option<Vec<RtType>>>().unwrap_or_default();
    (class_args, method_args)
}

/// The version the next recorded body of function `fid` gets.
fn next_version(s: &mut State, fid: usize) -> u32 {
    let v = s.versions.entry(fid).or_insert(0);
    let this = *v;
    *v = v.saturating_add(1);
    this
}

fn raw(map: &[IlMap]) -> Vec<[u32; 3]> {
    map.iter().map(|e| [e.il, e.start, e.end]).collect()
}

/// One record per code body: a JSON line, written whole in one `write` (a crash loses at most
/// the line being written, and processes sharing the file never interleave inside a line).
fn record(s: &mut State, r2r: bool, body: Body) {
    let line = if r2r { Record::R2r(body) } else { Record::Jit(body) }.to_line();
    let Some(out) = s.out.as_mut() else { return };
    let _ = out.write_all(line.as_bytes());
}

/// An RVA only for ReadyToRun code that lies inside its module's mapped image: jitted code lives
/// in the JIT's code heap, which is often within 4 GiB of a module base but is no RVA.
fn r2r_rva(s: &mut State, module: &str, base: usize, start: usize) -> Option<u32> {
    if base == 0 {
        return None;
    }
    let limit = s.image_sizes.entry(module.to_owned()).or_insert_with(|| size_of_image(module)).unwrap_or(0);
    start.checked_sub(base).filter(|&r| r < limit as usize).and_then(|r| u32::try_from(r).ok())
}

/// Fetch the maps of R2R methods whose code has been published since they were found.
fn drain_r2r(s: &mut State) {
    let Some(info) = s.info else { return };
    let pending = std::mem::take(&mut s.pending_r2r);
    for (fid, found) in pending {
        // With a capture, the map is recorded for every method, and the map call failing says the
        // code is not published yet (E_INVALIDARG inside the search callback). Without one (perf
        // only), the code range says so, and the map is asked for only where lines need it.
        let map = if s.out.is_some() {
            match info.il_map(false, fid) {
                Ok(map) => Some(map),
                Err(_) => {
                    s.pending_r2r.push((fid, found));
                    continue;
                }
            }
        } else {
            None
        };
        let Some((start, size, first)) = info.code_info(false, fid) else {
            if map.is_none() {
                s.pending_r2r.push((fid, found));
            }
            continue;
        };
        let Some((module, base, token, module_id)) = info.function_info(fid) else { continue };
        // Recorded already (from the function's code versions, when a later tier's JIT
        // finished before this search's code was published): once is enough.
        if !s.seen_starts.insert(start) {
            continue;
        }
        if let Some(map) = &map {
            let rva = r2r_rva(s, &module, base, start);
            let (class_args, method_args) = type_args(s, info, fid);
            let version = next_version(s, fid);
            let mvid = module_mvid(s, info, module_id);
            let body = Body {
                pid: Some(s.pid),
                function_id: fid as u64,
                module: module.clone(),
                mvid,
                token,
                start: start as u64,
                rva,
                code_size: u32::try_from(size).unwrap_or(u32::MAX),
                body: version,
                map: raw(map),
                map1: None,
                before_attach: false,
                // Names are read from the assembly at symbolization: naming each body inside the
                // JIT callback slowed attach enough to change what a short run records.
                name: None,
                full_name: None,
                class_args,
                method_args,
            };
            record(s, true, body);
        }
        if let Some(p) = s.perf.as_mut() {
            perf::perf_record(p, info, &module, token, start, size, first, || map.or_else(|| info.il_map(false, fid).ok()), None, found);
        }
    }
}

unsafe extern "system" fn jit_cached_function_search_finished(_this: *mut c_void, fid: usize, result: u32) -> Hresult {
    guard(|| {
        if let Ok(mut s) = state().lock() {
            if s.info.is_none() {
                return S_OK;
            }
            drain_r2r(&mut s);
            // COR_PRF_CACHED_FUNCTION_FOUND = 0.
            if result == 0 {
                let found = if s.perf.is_some() { perf::monotonic_ns() } else { 0 };
                s.pending_r2r.push((fid, found));
            }
        }
        S_OK
    })
}

/// Record each native code version of function `fid` not recorded yet; returns the last jitted
/// start recorded. `tree` is the JIT's inline tree of the body just compiled: the jitdump's lines
/// of the last new jitted start use it (the capture ties it to that start too).
fn record_jitted(s: &mut State, info: Info, fid: usize, rejit: usize, before_attach: bool, tree: Option<&clrmap::inlines::InlineTree>) -> Option<usize> {
    let starts = info.native_code_starts(fid, rejit);
    if starts.iter().all(|start| s.seen_starts.contains(start)) {
        return None;
    }
    let (module, base, token, module_id) = info.function_info(fid)?;
    let tree_start = starts.iter().rev().find(|&&st| !s.seen_starts.contains(&st) && r2r_rva(s, &module, base, st).is_none()).copied();
    let tree_for = |start: usize| tree.filter(|_| Some(start) == tree_start);
    let mut last = None;
    let capture = s.out.is_some();
    let map1 = if capture { info.il_map(false, fid).ok().map(|m| raw(&m)) } else { None };
    let (class_args, method_args) = if capture { type_args(s, info, fid) } else { (Vec::new(), Vec::new()) };
    let mvid = if capture { module_mvid(s, info, module_id) } else { None };
    for &start in &starts {
        if !s.seen_starts.insert(start) {
            continue;
        }
        // A start inside the module's image is its ReadyToRun code (the default code version of
        // a method re-jitted later), not jitted code: recorded as such, with its RVA.
        let rva = r2r_rva(s, &module, base, start);
        let (size, first) = info.code_info(true, start).map_or((0, 0), |(_, size, first)| (size, first));
        if !capture {
            // Perf only: the map is asked for only where lines need it.
            if let Some(p) = s.perf.as_mut() {
                perf::perf_record(p, info, &module, token, start, size, first, || info.il_map(true, start).ok(), tree_for(start), perf::monotonic_ns());
            }
            continue;
        }
        let Ok(map) = info.il_map(true, start) else { continue };
        if rva.is_none() {
            last = Some(start);
        }
        let body = next_version(s, fid);
        let b = Body {
            pid: Some(s.pid),
            function_id: fid as u64,
            module: module.clone(),
            mvid: mvid.clone(),
            token,
            start: start as u64,
            rva,
            code_size: u32::try_from(size).unwrap_or(u32::MAX),
            body,
            map: raw(&map),
            map1: if rva.is_some() { None } else { map1.clone() },
            before_attach,
            name: None,
            full_name: None,
            class_args: class_args.clone(),
            method_args: method_args.clone(),
        };
        record(s, rva.is_some(), b);
        if let Some(p) = s.perf.as_mut() {
            perf::perf_record(p, info, &module, token, start, size, first, || Some(map), tree_for(start), perf::monotonic_ns());
        }
    }
    last
}

unsafe extern "system" fn jit_compilation_finished(_this: *mut c_void, fid: usize, _hr: Hresult, _safe: i32) -> Hresult {
    guard(|| {
        let Ok(mut s) = state().lock() else { return S_OK };
        let Some(info) = s.info else { return S_OK };
        drain_r2r(&mut s);
        // The runtime sent this body's inline tree just before, on this thread.
        let pending = inlines::take_pending();
        let mut tree = if s.perf.is_some() && !pending.is_empty() { inlines::tree_of(fid as u64, &pending) } else { None };
        if let Some(t) = tree.as_mut().filter(|_| !call_sites_known(&info)) {
            t.forget_call_sites();
        }
        let body = record_jitted(&mut s, info, fid, 0, false, tree.as_ref());
        inlines::body_finished(fid as u64, body.map(|start| start as u64), pending);
        S_OK
    })
}

/// ICorProfilerCallback10::EventPipeEventDelivered: an event of the profiler's own session
/// (`inlines.rs`). The pointers are valid only during the call.
#[allow(clippy::too_many_arguments)]
unsafe extern "system" fn event_pipe_event_delivered(
    _this: *mut c_void,
    provider: usize,
    event_id: u32,
    _version: u32,
    _metadata_len: u32,
    _metadata: *const u8,
    len: u32,
    data: *const u8,
    _activity: *const com::Guid,
    _related: *const com::Guid,
    _thread: usize,
    _frames_len: u32,
    _frames: *const usize,
) -> Hresult {
    guard(|| {
        if data.is_null() && len != 0 {
            return S_OK;
        }
        let payload = if len == 0 {
            &[][..]
        } else {
            // SAFETY: the runtime passes the event's payload, `len` bytes at `data`, valid
            // during this call.
            unsafe { std::slice::from_raw_parts(data, len as usize) }
        };
        inlines::delivered(provider, event_id, payload)
    })
}

unsafe extern "system" fn shutdown(_this: *mut c_void) -> Hresult {
    // Bodies jitted by threads still running after Shutdown are written after the end record;
    // readers keep them.
    guard(|| {
        end("shutdown", None);
        S_OK
    })
}

//! `ICorProfilerInfo`-shaped objects: IL-to-native maps from a ReadyToRun image, a `.nettrace`, a
//! capture or a running process, at the IDL slots of `GetILToNativeMapping` (35),
//! `GetILToNativeMapping2` (78) and `GetILToNativeMapping3` (91); every other slot is E_NOTIMPL.

use std::ffi::{c_char, CStr};
use std::path::Path;
use std::sync::atomic::AtomicU32;

use clrmap::ilmap::{CorDebugIlToNativeMap, IlOffset, MapStore};
use clrmap::symbolizer::{FrameKind, Options, Symbolizer};
use clrmap::ErrorKind;

use crate::com::{add_ref, object, query_interface, release, FunctionID, ICorProfilerInfo, ICorProfilerInfoVtbl, ReJITID, Unknown, COR_DEBUG_IL_TO_NATIVE_MAP, GUID, PROFILER_INFO};
use crate::errors::Failure;
use crate::hresult::{E_INVALIDARG, E_NOTIMPL, HRESULT, S_FALSE, S_OK};
use crate::pid::open_pid;

/// The object behind an `ICorProfilerInfo`: the library's symbolization layer over the source.
/// `#[repr(C)]` with its interface first, so the interface pointer handed to C is also a pointer
/// to the object.
#[repr(C)]
struct ProfilerInfo {
    iface: ICorProfilerInfo,
    refs: AtomicU32,
    sym: Symbolizer,
}

static PROFILER_INFO_VTBL: ICorProfilerInfoVtbl = ICorProfilerInfoVtbl {
    QueryInterface: query_interface::<ProfilerInfo>,
    AddRef: add_ref::<ProfilerInfo>,
    Release: release::<ProfilerInfo>,
    reserved_3_34: [pi_not_impl; 32],
    GetILToNativeMapping: pi_map1,
    reserved_36_77: [pi_not_impl; 42],
    GetILToNativeMapping2: pi_map2,
    reserved_79_90: [pi_not_impl; 12],
    GetILToNativeMapping3: pi_map3,
    reserved_92: [pi_not_impl; 1],
};

impl Unknown for ProfilerInfo {
    type Iface = ICorProfilerInfo;
    const IID: GUID = PROFILER_INFO;
    fn refs(&self) -> &AtomicU32 {
        &self.refs
    }
}

unsafe extern "C" fn pi_not_impl(_this: *mut ICorProfilerInfo) -> HRESULT {
    ffi_fn!({ Ok(E_NOTIMPL) })
}

/// Turn the C arguments into the store's: `map` is null or holds `c_map` entries.
///
/// SAFETY (callers): `pc_map` is null or writable; `map` is null or valid for `c_map` entries.
unsafe fn protocol_args<'a>(c_map: u32, pc_map: *mut u32, map: *mut COR_DEBUG_IL_TO_NATIVE_MAP) -> (Option<&'a mut u32>, Option<&'a mut [CorDebugIlToNativeMap]>) {
    // SAFETY: per the caller's contract; the two map structs have one layout (asserted above).
    unsafe {
        let pc = pc_map.as_mut();
        let m = if map.is_null() { None } else { Some(std::slice::from_raw_parts_mut(map.cast::<CorDebugIlToNativeMap>(), c_map as usize)) };
        (pc, m)
    }
}

/// The store behind a profiler-info pointer.
///
/// SAFETY (callers): `this` is null or a live `ICorProfilerInfo` made by clrmap.
unsafe fn store<'a>(this: *mut ICorProfilerInfo) -> Option<&'a MapStore> {
    // SAFETY: per the caller's contract.
    unsafe { object::<ProfilerInfo>(this).as_ref() }.map(|o| o.sym.store())
}

unsafe extern "C" fn pi_map1(this: *mut ICorProfilerInfo, fid: FunctionID, c_map: u32, pc_map: *mut u32, map: *mut COR_DEBUG_IL_TO_NATIVE_MAP) -> HRESULT {
    ffi_fn!({
        // SAFETY: COM arguments as documented for GetILToNativeMapping.
        let (Some(store), (pc, m)) = (unsafe { store(this) }, unsafe { protocol_args(c_map, pc_map, map) }) else { return Err(Failure::null_argument()) };
        map_call_result(store.get_il_to_native_mapping(fid as u64, c_map, pc, m))
    })
}

unsafe extern "C" fn pi_map2(this: *mut ICorProfilerInfo, fid: FunctionID, rejit: ReJITID, c_map: u32, pc_map: *mut u32, map: *mut COR_DEBUG_IL_TO_NATIVE_MAP) -> HRESULT {
    ffi_fn!({
        // SAFETY: COM arguments as documented for GetILToNativeMapping2.
        let (Some(store), (pc, m)) = (unsafe { store(this) }, unsafe { protocol_args(c_map, pc_map, map) }) else { return Err(Failure::null_argument()) };
        map_call_result(store.get_il_to_native_mapping2(fid as u64, rejit as u64, c_map, pc, m))
    })
}

unsafe extern "C" fn pi_map3(this: *mut ICorProfilerInfo, start: usize, c_map: u32, pc_map: *mut u32, map: *mut COR_DEBUG_IL_TO_NATIVE_MAP) -> HRESULT {
    ffi_fn!({
        // SAFETY: COM arguments as documented for GetILToNativeMapping3.
        let (Some(store), (pc, m)) = (unsafe { store(this) }, unsafe { protocol_args(c_map, pc_map, map) }) else { return Err(Failure::null_argument()) };
        map_call_result(store.get_il_to_native_mapping3(start as u64, c_map, pc, m))
    })
}

/// A failed IL-map call, to be recorded: E_INVALIDARG, the runtime's answer for an unknown
/// function or code start, or a null `pcMap` or `map` with `cMap > 0`.
fn map_call_result(hr: HRESULT) -> Result<HRESULT, Failure> {
    if hr == E_INVALIDARG {
        return Err(Failure::new(hr, "no code body has this FunctionID or code start, or pcMap is NULL, or map is NULL with cMap > 0"));
    }
    Ok(hr)
}

/// Box an object over `sym` and hand its interface to C.
///
/// SAFETY (callers): `out` is non-null and writable.
unsafe fn publish(sym: Symbolizer, out: *mut *mut ICorProfilerInfo) -> HRESULT {
    let info = Box::new(ProfilerInfo { iface: ICorProfilerInfo { lpVtbl: &PROFILER_INFO_VTBL }, refs: AtomicU32::new(1), sym });
    // SAFETY: per the caller's contract; the interface is the object's first field.
    unsafe { *out = Box::into_raw(info).cast() };
    S_OK
}

/// Open a ReadyToRun image, a `.nettrace` or a clrmap capture as an `ICorProfilerInfo`-shaped
/// object. For an image, a body's FunctionID and code start are both its code-start RVA.
///
/// All bodies are decoded when the file is opened, so each later call is a lookup (BENCHMARKS.md
/// has both costs). A missing file is HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND), a malformed one
/// its kind's HRESULT (`clrmap_last_error` says where).
#[no_mangle]
pub unsafe extern "C" fn clrmap_profiler_info_open(path: *const c_char, out: *mut *mut ICorProfilerInfo) -> HRESULT {
    ffi_fn!({
        if path.is_null() || out.is_null() {
            return Err(Failure::null_argument());
        }
        // SAFETY: the caller passes a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned();
        let sym = Symbolizer::open(Path::new(&path), Options::default()).map_err(|e| Failure::not_opened(&e))?;
        // SAFETY: `out` is non-null.
        Ok(unsafe { publish(sym, out) })
    })
}

/// Open the jitted methods of a running .NET process (Core 3.0+) as an `ICorProfilerInfo`-shaped
/// object: a rundown snapshot through its diagnostics port (a session with rundown, started and
/// stopped at once; docs/attach.md), with the maps the runtime gave for every method jitted so
/// far, behind the same object a `.nettrace` gets. FunctionIDs are the runtime's MethodIDs and
/// code starts are addresses in the process.
///
/// `timeout_ms` bounds the whole snapshot (0: 10 s): connecting, the requests and the whole
/// stream. A process that does not accept the connection (stopped, say), answers slowly, goes
/// silent or streams without end fails with `CLRMAP_E_TIMEOUT` then; one that closes the stream
/// early while it runs on, with `CLRMAP_E_PROTOCOL`. Each diagnostics error kind has its own
/// HRESULT (`CLRMAP_E_NO_SUCH_PROCESS`, `CLRMAP_E_NOT_DOTNET`, `CLRMAP_E_PERMISSION_DENIED`,
/// `CLRMAP_E_UNSUPPORTED_COMMAND`, `CLRMAP_E_SERVER_ERROR`, `CLRMAP_E_PROTOCOL`,
/// `CLRMAP_E_TIMEOUT`, `CLRMAP_E_BAD_ARGUMENT`, `CLRMAP_E_IO`, `CLRMAP_E_TARGET_EXITED`); the last
/// error's message names the kind's id (`kind` is NULL: these are no library kinds).
#[no_mangle]
pub unsafe extern "C" fn clrmap_profiler_info_open_pid(pid: u32, timeout_ms: u32, out: *mut *mut ICorProfilerInfo) -> HRESULT {
    ffi_fn!({
        if out.is_null() {
            return Err(Failure::null_argument());
        }
        let sym = open_pid(pid, timeout_ms, Options::default())?;
        // SAFETY: `out` is non-null.
        Ok(unsafe { publish(sym, out) })
    })
}

/// The FunctionIDs, sorted, through the two-call protocol: `*pc` always gets the count; S_FALSE
/// if `ids` is null or `c` is too small.
#[no_mangle]
pub unsafe extern "C" fn clrmap_profiler_info_function_ids(info: *mut ICorProfilerInfo, ids: *mut u64, c: u32, pc: *mut u32) -> HRESULT {
    ffi_fn!({
        // SAFETY: `info` is null or live.
        let Some(store) = (unsafe { store(info) }) else { return Err(Failure::null_argument()) };
        if pc.is_null() {
            return Err(Failure::null_argument());
        }
        let all = store.function_ids();
        let n = u32::try_from(all.len()).unwrap_or(u32::MAX);
        // SAFETY: `pc` is non-null.
        unsafe { *pc = n };
        if ids.is_null() || (c as usize) < all.len() {
            return Ok(S_FALSE);
        }
        // SAFETY: the caller's array holds `c` ≥ `all.len()` entries.
        unsafe { std::ptr::copy_nonoverlapping(all.as_ptr(), ids, all.len()) };
        Ok(S_OK)
    })
}

/// Symbolize an address (an RVA for an image): the FunctionID of the body containing it and the
/// IL offset there, by the runtime's stack-trace rule for a leaf frame, with the entry kind kept:
/// PROLOG, EPILOG and NO_MAPPING as their ULONG32 values. E_INVALIDARG outside every body.
/// `clrmap_symbolizer_symbolize` gives the source line too.
#[no_mangle]
pub unsafe extern "C" fn clrmap_profiler_info_symbolize(info: *mut ICorProfilerInfo, address: u64, functionId: *mut u64, ilOffset: *mut u32) -> HRESULT {
    ffi_fn!({
        // SAFETY: `info` is null or live.
        let Some(o) = (unsafe { object::<ProfilerInfo>(info).as_ref() }) else { return Err(Failure::null_argument()) };
        if functionId.is_null() || ilOffset.is_null() {
            return Err(Failure::null_argument());
        }
        let f = o.sym.symbolize(address, FrameKind::Leaf);
        let Some(fid) = f.function_id else {
            return Err(Failure::answered_as(E_INVALIDARG, clrmap::Error::at_address(ErrorKind::NotFound, address, "an address inside a code body")));
        };
        let il = match f.region {
            Some(IlOffset::Il(_)) => f.at.il_offset.unwrap_or(0),
            Some(special) => special.to_raw(),
            None => IlOffset::NoMapping.to_raw(),
        };
        // SAFETY: both out-pointers are non-null.
        unsafe {
            *functionId = fid;
            *ilOffset = il;
        }
        Ok(S_OK)
    })
}

//! The C ABI of clrmap: the two seed interfaces as COM-shaped objects for C and C++ debuggers and
//! profilers (`include/clrmap.h`).
//!
//! * `ICorDebugSymbolProvider2`-shaped objects serve a generic dictionary map
//!   (`GetGenericDictionaryInfo`, IDL slot 3; `GetFrameProps` returns E_NOTIMPL), handing out
//!   `ICorDebugMemoryBuffer` objects that keep the map alive.
//! * `ICorProfilerInfo`-shaped objects serve IL-to-native maps from a ReadyToRun image, a
//!   `.nettrace` or a capture, at the IDL slots of `GetILToNativeMapping` (35),
//!   `GetILToNativeMapping2` (78) and `GetILToNativeMapping3` (91); every other slot is E_NOTIMPL.
//!
//! Safety: every export runs inside `catch_unwind`; null pointers give E_POINTER (out-pointers of
//! the COM plumbing) or E_INVALIDARG (the profiler calls, as the runtime answers); objects are
//! opaque and reference-counted with atomics. Each `unsafe` block says why it is sound.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
// COM objects and vtables are opaque to Rust callers; Debug would print raw pointers only.
#![allow(missing_debug_implementations)]

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use clrmap::gdmap::{DictionaryMap, Lookup, SortedFlag};
use clrmap::ilmap::{CorDebugIlToNativeMap, MapStore};
use clrmap::signature::HexTokens;

/// A COM HRESULT.
pub type HRESULT = i32;
/// S_OK.
pub const S_OK: HRESULT = 0;
/// S_FALSE: the two-call protocol's "buffer too small; the size is in the out-count".
pub const S_FALSE: HRESULT = 1;
/// E_NOTIMPL.
pub const E_NOTIMPL: HRESULT = 0x8000_4001_u32 as i32;
/// E_NOINTERFACE.
pub const E_NOINTERFACE: HRESULT = 0x8000_4002_u32 as i32;
/// E_POINTER.
pub const E_POINTER: HRESULT = 0x8000_4003_u32 as i32;
/// E_FAIL.
pub const E_FAIL: HRESULT = 0x8000_4005_u32 as i32;
/// E_INVALIDARG.
pub const E_INVALIDARG: HRESULT = 0x8007_0057_u32 as i32;
/// META_E_BAD_SIGNATURE: a malformed map or image (corerror.h).
pub const META_E_BAD_SIGNATURE: HRESULT = 0x8013_1192_u32 as i32;
/// HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND).
pub const E_FILE_NOT_FOUND: HRESULT = 0x8007_0002_u32 as i32;

/// A COM GUID.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GUID {
    /// Data1.
    pub data1: u32,
    /// Data2.
    pub data2: u16,
    /// Data3.
    pub data3: u16,
    /// Data4.
    pub data4: [u8; 8],
}

const IID_IUNKNOWN: GUID = GUID { data1: 0, data2: 0, data3: 0, data4: [0xC0, 0, 0, 0, 0, 0, 0, 0x46] };
const IID_ICORDEBUGMEMORYBUFFER: GUID = GUID { data1: 0x6778_88B3, data2: 0xD160, data3: 0x4B8C, data4: [0xA7, 0x3B, 0xD7, 0x9E, 0x6A, 0xAA, 0x1D, 0x13] };
const IID_ICORDEBUGSYMBOLPROVIDER2: GUID = GUID { data1: 0xF980_1807, data2: 0x4764, data3: 0x4330, data4: [0x9E, 0x67, 0x4F, 0x68, 0x50, 0x94, 0x16, 0x5E] };
const IID_ICORPROFILERINFO: GUID = GUID { data1: 0x28B5_557D, data2: 0x3F3F, data3: 0x48b4, data4: [0x90, 0xB2, 0x5F, 0x9E, 0xEA, 0x2F, 0x6C, 0x48] };

fn guard(f: impl FnOnce() -> HRESULT) -> HRESULT {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(E_FAIL)
}

/// The bytes of a map: a memory-mapped file or an owned copy.
enum Storage {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// `ICorDebugSymbolProvider2`-shaped object. Layout: the vtable pointer first, as COM requires.
#[repr(C)]
pub struct SymbolProvider {
    vtbl: *const SymbolProviderVtbl,
    refs: AtomicU32,
    map: Arc<Storage>,
}

/// `ICorDebugMemoryBuffer`-shaped object; holds a reference to the map's storage.
#[repr(C)]
pub struct MemoryBuffer {
    vtbl: *const MemoryBufferVtbl,
    refs: AtomicU32,
    map: Arc<Storage>,
}

/// Vtable of `ICorDebugSymbolProvider2` (cordebug.idl order).
#[repr(C)]
pub struct SymbolProviderVtbl {
    /// IUnknown::QueryInterface.
    pub query_interface: unsafe extern "C" fn(*mut SymbolProvider, *const GUID, *mut *mut c_void) -> HRESULT,
    /// IUnknown::AddRef.
    pub add_ref: unsafe extern "C" fn(*mut SymbolProvider) -> u32,
    /// IUnknown::Release.
    pub release: unsafe extern "C" fn(*mut SymbolProvider) -> u32,
    /// GetGenericDictionaryInfo(ICorDebugMemoryBuffer**).
    pub get_generic_dictionary_info: unsafe extern "C" fn(*mut SymbolProvider, *mut *mut MemoryBuffer) -> HRESULT,
    /// GetFrameProps(codeRva, pCodeStartRva, pParentFrameStartRva): E_NOTIMPL.
    pub get_frame_props: unsafe extern "C" fn(*mut SymbolProvider, u32, *mut u32, *mut u32) -> HRESULT,
}

/// Vtable of `ICorDebugMemoryBuffer` (cordebug.idl order).
#[repr(C)]
pub struct MemoryBufferVtbl {
    /// IUnknown::QueryInterface.
    pub query_interface: unsafe extern "C" fn(*mut MemoryBuffer, *const GUID, *mut *mut c_void) -> HRESULT,
    /// IUnknown::AddRef.
    pub add_ref: unsafe extern "C" fn(*mut MemoryBuffer) -> u32,
    /// IUnknown::Release.
    pub release: unsafe extern "C" fn(*mut MemoryBuffer) -> u32,
    /// GetStartAddress(LPCVOID*).
    pub get_start_address: unsafe extern "C" fn(*mut MemoryBuffer, *mut *const c_void) -> HRESULT,
    /// GetSize(ULONG32*).
    pub get_size: unsafe extern "C" fn(*mut MemoryBuffer, *mut u32) -> HRESULT,
}

static SYMBOL_PROVIDER_VTBL: SymbolProviderVtbl = SymbolProviderVtbl {
    query_interface: query_interface::<SymbolProvider>,
    add_ref: add_ref::<SymbolProvider>,
    release: release::<SymbolProvider>,
    get_generic_dictionary_info: sp_get_generic_dictionary_info,
    get_frame_props: sp_get_frame_props,
};

static MEMORY_BUFFER_VTBL: MemoryBufferVtbl = MemoryBufferVtbl {
    query_interface: query_interface::<MemoryBuffer>,
    add_ref: add_ref::<MemoryBuffer>,
    release: release::<MemoryBuffer>,
    get_start_address: mb_get_start_address,
    get_size: mb_get_size,
};

/// What the shared IUnknown implementation needs from an object.
trait Unknown {
    /// The interface besides IUnknown that QueryInterface answers.
    const IID: GUID;
    fn refs(&self) -> &AtomicU32;
}

impl Unknown for SymbolProvider {
    const IID: GUID = IID_ICORDEBUGSYMBOLPROVIDER2;
    fn refs(&self) -> &AtomicU32 {
        &self.refs
    }
}

impl Unknown for MemoryBuffer {
    const IID: GUID = IID_ICORDEBUGMEMORYBUFFER;
    fn refs(&self) -> &AtomicU32 {
        &self.refs
    }
}

impl Unknown for ProfilerInfo {
    const IID: GUID = IID_ICORPROFILERINFO;
    fn refs(&self) -> &AtomicU32 {
        &self.refs
    }
}

/// IUnknown::QueryInterface: IUnknown and `T::IID`; E_NOINTERFACE (and a null out) otherwise.
unsafe extern "C" fn query_interface<T: Unknown>(this: *mut T, iid: *const GUID, out: *mut *mut c_void) -> HRESULT {
    guard(|| {
        if out.is_null() {
            return E_POINTER;
        }
        // SAFETY: `iid` comes from the caller as a GUID pointer (checked for null inside).
        let ok = unsafe { iid_is(iid, &IID_IUNKNOWN) || iid_is(iid, &T::IID) };
        // SAFETY: `out` is non-null; `this` is a live object the caller holds a reference to.
        unsafe {
            if ok {
                add_ref(this);
                *out = this.cast();
                S_OK
            } else {
                *out = std::ptr::null_mut();
                E_NOINTERFACE
            }
        }
    })
}

/// IUnknown::AddRef.
unsafe extern "C" fn add_ref<T: Unknown>(this: *mut T) -> u32 {
    if this.is_null() {
        return 0;
    }
    // SAFETY: a non-null `this` is a live object created by `Box::into_raw`.
    unsafe { (*this).refs().fetch_add(1, Ordering::Relaxed).saturating_add(1) }
}

/// IUnknown::Release: the call that brings the count to 0 frees the object.
unsafe extern "C" fn release<T: Unknown>(this: *mut T) -> u32 {
    if this.is_null() {
        return 0;
    }
    // SAFETY: a non-null `this` is a live object created by `Box::into_raw`; only the release
    // that reaches 0 frees it, and no reference remains to use it afterwards.
    unsafe {
        let left = (*this).refs().fetch_sub(1, Ordering::AcqRel).saturating_sub(1);
        if left == 0 {
            drop(Box::from_raw(this));
        }
        left
    }
}

/// Compare a caller's IID.
///
/// SAFETY (callers): `iid` is null or points to a GUID.
unsafe fn iid_is(iid: *const GUID, want: &GUID) -> bool {
    // SAFETY: per the caller's contract.
    !iid.is_null() && unsafe { *iid } == *want
}

unsafe extern "C" fn sp_get_generic_dictionary_info(this: *mut SymbolProvider, out: *mut *mut MemoryBuffer) -> HRESULT {
    guard(|| {
        if this.is_null() || out.is_null() {
            return E_POINTER;
        }
        // SAFETY: `this` is a live provider; the buffer shares its storage through the Arc.
        let map = unsafe { Arc::clone(&(*this).map) };
        let buffer = Box::new(MemoryBuffer { vtbl: &MEMORY_BUFFER_VTBL, refs: AtomicU32::new(1), map });
        // SAFETY: `out` is non-null.
        unsafe { *out = Box::into_raw(buffer) };
        S_OK
    })
}

unsafe extern "C" fn sp_get_frame_props(_this: *mut SymbolProvider, _rva: u32, _start: *mut u32, _parent: *mut u32) -> HRESULT {
    E_NOTIMPL
}

unsafe extern "C" fn mb_get_start_address(this: *mut MemoryBuffer, out: *mut *const c_void) -> HRESULT {
    if this.is_null() || out.is_null() {
        return E_POINTER;
    }
    // SAFETY: `this` is live; the address stays valid while the buffer is referenced.
    unsafe { *out = (*this).map.bytes().as_ptr().cast() };
    S_OK
}

unsafe extern "C" fn mb_get_size(this: *mut MemoryBuffer, out: *mut u32) -> HRESULT {
    if this.is_null() || out.is_null() {
        return E_POINTER;
    }
    // SAFETY: `this` is live; maps over 4 GiB are refused when opened.
    unsafe { *out = u32::try_from((*this).map.bytes().len()).unwrap_or(u32::MAX) };
    S_OK
}

/// Check a map's header and directory bounds (strictly: a full validation) and make a provider.
fn new_provider(storage: Storage, out: *mut *mut SymbolProvider) -> HRESULT {
    let ok = DictionaryMap::parse(storage.bytes()).and_then(|m| m.validate()).is_ok() && u32::try_from(storage.bytes().len()).is_ok();
    if !ok {
        return META_E_BAD_SIGNATURE;
    }
    let p = Box::new(SymbolProvider { vtbl: &SYMBOL_PROVIDER_VTBL, refs: AtomicU32::new(1), map: Arc::new(storage) });
    // SAFETY: callers checked `out` for null.
    unsafe { *out = Box::into_raw(p) };
    S_OK
}

/// Open a dictionary map file (memory-mapped) as an `ICorDebugSymbolProvider2`. The map is
/// validated strictly; a malformed one gives META_E_BAD_SIGNATURE, a missing file
/// HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND). Release the object with its `Release`.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbol_provider_open(path: *const c_char, out: *mut *mut SymbolProvider) -> HRESULT {
    guard(|| {
        if path.is_null() || out.is_null() {
            return E_POINTER;
        }
        // SAFETY: the caller passes a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned();
        let Ok(file) = std::fs::File::open(&path) else { return E_FILE_NOT_FOUND };
        // SAFETY: the file is mapped read-only; clrmap never writes through it. Another process
        // truncating the file while it is mapped is outside what any mapped reader can defend.
        let storage = match unsafe { memmap2::Mmap::map(&file) } {
            Ok(m) => Storage::Mapped(m),
            Err(_) => match std::fs::read(&path) {
                Ok(v) => Storage::Owned(v),
                Err(_) => return E_FAIL,
            },
        };
        new_provider(storage, out)
    })
}

/// Make an `ICorDebugSymbolProvider2` over a copy of `len` bytes at `data`.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbol_provider_from_memory(data: *const u8, len: usize, out: *mut *mut SymbolProvider) -> HRESULT {
    guard(|| {
        if data.is_null() || out.is_null() {
            return E_POINTER;
        }
        // SAFETY: the caller passes `len` readable bytes at `data`.
        let bytes = unsafe { std::slice::from_raw_parts(data, len) }.to_vec();
        new_provider(Storage::Owned(bytes), out)
    })
}

/// The types of the dictionary at `rva`, rendered with `0x` tokens and joined by `\n`, through
/// the two-call protocol: `*pcb` always receives the size needed (NUL included); with `cb` too
/// small (or `buf` null) nothing is written and the result is S_FALSE; E_INVALIDARG if no entry
/// has this RVA.
#[no_mangle]
pub unsafe extern "C" fn clrmap_dict_lookup(provider: *mut SymbolProvider, rva: u32, buf: *mut c_char, cb: u32, pcb: *mut u32) -> HRESULT {
    guard(|| {
        if provider.is_null() || pcb.is_null() {
            return E_POINTER;
        }
        // SAFETY: `provider` is a live provider object.
        let bytes = unsafe { (*provider).map.bytes() };
        let Ok(map) = DictionaryMap::parse(bytes) else { return META_E_BAD_SIGNATURE };
        let Ok(lookup) = Lookup::new(map, SortedFlag::Verify) else { return META_E_BAD_SIGNATURE };
        let Some(entry) = lookup.find(rva) else { return E_INVALIDARG };
        let Ok(types) = map.item_of(&entry).and_then(|i| i.render(&HexTokens)) else { return META_E_BAD_SIGNATURE };
        let text = types.join("\n");
        let need = u32::try_from(text.len().saturating_add(1)).unwrap_or(u32::MAX);
        // SAFETY: `pcb` is non-null.
        unsafe { *pcb = need };
        if buf.is_null() || cb < need {
            return S_FALSE;
        }
        // SAFETY: the caller's buffer holds `cb` ≥ `need` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
            *buf.add(text.len()) = 0;
        }
        S_OK
    })
}

// ----------------------------------------------------------------------------------------------
// The profiler-info-shaped object.

/// Number of ICorProfilerInfo9 vtable slots served (0..=92).
const INFO_SLOTS: usize = 93;

/// `ICorProfilerInfo`-shaped object over a map store.
#[repr(C)]
pub struct ProfilerInfo {
    vtbl: *const usize,
    refs: AtomicU32,
    store: MapStore,
}

unsafe extern "C" fn pi_not_impl(_this: *mut ProfilerInfo) -> HRESULT {
    E_NOTIMPL
}

/// Turn the C arguments into the store's: `map` is null or holds `c_map` entries.
///
/// SAFETY (callers): `pc_map` is null or writable; `map` is null or valid for `c_map` entries.
unsafe fn protocol_args<'a>(c_map: u32, pc_map: *mut u32, map: *mut CorDebugIlToNativeMap) -> (Option<&'a mut u32>, Option<&'a mut [CorDebugIlToNativeMap]>) {
    // SAFETY: per the caller's contract.
    unsafe {
        let pc = pc_map.as_mut();
        let m = if map.is_null() { None } else { Some(std::slice::from_raw_parts_mut(map, c_map as usize)) };
        (pc, m)
    }
}

unsafe extern "C" fn pi_map1(this: *mut ProfilerInfo, fid: usize, c_map: u32, pc_map: *mut u32, map: *mut CorDebugIlToNativeMap) -> HRESULT {
    guard(|| {
        if this.is_null() {
            return E_POINTER;
        }
        // SAFETY: COM arguments as documented for GetILToNativeMapping.
        let (pc, m) = unsafe { protocol_args(c_map, pc_map, map) };
        // SAFETY: `this` is live.
        unsafe { (*this).store.get_il_to_native_mapping(fid as u64, c_map, pc, m) }
    })
}

unsafe extern "C" fn pi_map2(this: *mut ProfilerInfo, fid: usize, rejit: usize, c_map: u32, pc_map: *mut u32, map: *mut CorDebugIlToNativeMap) -> HRESULT {
    guard(|| {
        if this.is_null() {
            return E_POINTER;
        }
        // SAFETY: as in `pi_map1`.
        let (pc, m) = unsafe { protocol_args(c_map, pc_map, map) };
        // SAFETY: `this` is live.
        unsafe { (*this).store.get_il_to_native_mapping2(fid as u64, rejit as u64, c_map, pc, m) }
    })
}

unsafe extern "C" fn pi_map3(this: *mut ProfilerInfo, start: usize, c_map: u32, pc_map: *mut u32, map: *mut CorDebugIlToNativeMap) -> HRESULT {
    guard(|| {
        if this.is_null() {
            return E_POINTER;
        }
        // SAFETY: as in `pi_map1`.
        let (pc, m) = unsafe { protocol_args(c_map, pc_map, map) };
        // SAFETY: `this` is live.
        unsafe { (*this).store.get_il_to_native_mapping3(start as u64, c_map, pc, m) }
    })
}

fn info_vtable() -> *const usize {
    static VTBL: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    VTBL.get_or_init(|| {
        let mut v = vec![pi_not_impl as *const () as usize; INFO_SLOTS];
        for (slot, f) in [
            (0usize, query_interface::<ProfilerInfo> as *const () as usize),
            (1, add_ref::<ProfilerInfo> as *const () as usize),
            (2, release::<ProfilerInfo> as *const () as usize),
            (35, pi_map1 as *const () as usize),
            (78, pi_map2 as *const () as usize),
            (91, pi_map3 as *const () as usize),
        ] {
            if let Some(s) = v.get_mut(slot) {
                *s = f;
            }
        }
        v
    })
    .as_ptr()
}

/// Open a ReadyToRun image, a `.nettrace` or a clrmap capture as an `ICorProfilerInfo`-shaped
/// object. For an image, a body's FunctionID and code start are both its code-start RVA.
#[no_mangle]
pub unsafe extern "C" fn clrmap_profiler_info_open(path: *const c_char, out: *mut *mut ProfilerInfo) -> HRESULT {
    guard(|| {
        if path.is_null() || out.is_null() {
            return E_POINTER;
        }
        // SAFETY: the caller passes a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned();
        let Ok(bytes) = std::fs::read(&path) else { return E_FILE_NOT_FOUND };
        let bodies = if bytes.starts_with(b"Nettrace") {
            clrmap::nettrace::read_code_bodies(&bytes[..])
        } else if bytes.starts_with(b"{\"format\":\"clrmap-capture\"") {
            std::str::from_utf8(&bytes)
                .map_err(|_| clrmap::Error::new(clrmap::ErrorKind::BadCapture, 0, "UTF-8"))
                .and_then(clrmap::capture::read_code_bodies)
        } else {
            clrmap::r2r::ReadyToRunImage::parse(&bytes).and_then(|i| i.code_bodies())
        };
        let Ok(bodies) = bodies else { return META_E_BAD_SIGNATURE };
        let info = Box::new(ProfilerInfo { vtbl: info_vtable(), refs: AtomicU32::new(1), store: MapStore::new(bodies) });
        // SAFETY: `out` is non-null.
        unsafe { *out = Box::into_raw(info) };
        S_OK
    })
}

/// The FunctionIDs, sorted, through the two-call protocol (`*pc` always gets the count; S_FALSE
/// if `c` is too small).
#[no_mangle]
pub unsafe extern "C" fn clrmap_profiler_info_function_ids(info: *mut ProfilerInfo, ids: *mut u64, c: u32, pc: *mut u32) -> HRESULT {
    guard(|| {
        if info.is_null() || pc.is_null() {
            return E_POINTER;
        }
        // SAFETY: `info` is live.
        let all = unsafe { (*info).store.function_ids() };
        let n = u32::try_from(all.len()).unwrap_or(u32::MAX);
        // SAFETY: `pc` is non-null.
        unsafe { *pc = n };
        if ids.is_null() || c < n {
            return S_FALSE;
        }
        // SAFETY: the caller's array holds `c` ≥ `n` entries.
        unsafe { std::ptr::copy_nonoverlapping(all.as_ptr(), ids, all.len()) };
        S_OK
    })
}

/// Symbolize an address (an RVA for an image): the FunctionID of the body containing it and the
/// IL offset (PROLOG/EPILOG/NO_MAPPING as their ULONG32 values). E_INVALIDARG outside every body.
#[no_mangle]
pub unsafe extern "C" fn clrmap_profiler_info_symbolize(info: *mut ProfilerInfo, address: u64, function_id: *mut u64, il_offset: *mut u32) -> HRESULT {
    guard(|| {
        if info.is_null() || function_id.is_null() || il_offset.is_null() {
            return E_POINTER;
        }
        // SAFETY: `info` is live.
        let store = unsafe { &(*info).store };
        let Some(body) = store.body_containing(address) else { return E_INVALIDARG };
        let start = body.start.or(body.rva.map(u64::from)).unwrap_or(0);
        let offset = u32::try_from(address.saturating_sub(start)).unwrap_or(u32::MAX);
        let il = match clrmap::ilmap::native_to_il(&body.map, body.code_size, offset, clrmap::ilmap::Policy::default()) {
            clrmap::ilmap::Resolved::Il(v) => v,
            clrmap::ilmap::Resolved::Prolog => 0xFFFF_FFFE,
            clrmap::ilmap::Resolved::Epilog(_) => 0xFFFF_FFFD,
            _ => 0xFFFF_FFFF,
        };
        // SAFETY: both out-pointers are non-null.
        unsafe {
            *function_id = body.function_id.or(Some(start)).unwrap_or(0);
            *il_offset = il;
        }
        S_OK
    })
}

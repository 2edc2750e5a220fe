//! COM as C sees it: GUIDs and the IIDs, the interfaces and their vtables in IDL order, the
//! IL-to-native map entry, and the IUnknown methods every clrmap object shares.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};

use clrmap::ilmap::CorDebugIlToNativeMap;

use crate::errors::Failure;
use crate::hresult::{E_NOINTERFACE, HRESULT, S_OK};

/// corprof.idl `FunctionID`: for an image, the code-start RVA of the body.
pub type FunctionID = usize;
/// corprof.idl `ReJITID`.
pub type ReJITID = usize;

/// A COM `GUID`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GUID {
    /// The first 32 bits.
    pub Data1: u32,
    /// The next 16 bits.
    pub Data2: u16,
    /// The next 16 bits.
    pub Data3: u16,
    /// The last 64 bits, as bytes.
    pub Data4: [u8; 8],
}

// The IIDs, as constants for Rust and as exported objects for C and C++ (an object, not a macro,
// so that both languages can take its address: `const GUID *g = &IID_ICorProfilerInfo;`).
pub(crate) const IUNKNOWN: GUID = GUID { Data1: 0, Data2: 0, Data3: 0, Data4: [0xC0, 0, 0, 0, 0, 0, 0, 0x46] };
pub(crate) const MEMORY_BUFFER: GUID = GUID { Data1: 0x6778_88B3, Data2: 0xD160, Data3: 0x4B8C, Data4: [0xA7, 0x3B, 0xD7, 0x9E, 0x6A, 0xAA, 0x1D, 0x13] };
pub(crate) const SYMBOL_PROVIDER2: GUID = GUID { Data1: 0xF980_1807, Data2: 0x4764, Data3: 0x4330, Data4: [0x9E, 0x67, 0x4F, 0x68, 0x50, 0x94, 0x16, 0x5E] };
pub(crate) const PROFILER_INFO: GUID = GUID { Data1: 0x28B5_557D, Data2: 0x3F3F, Data3: 0x48b4, Data4: [0x90, 0xB2, 0x5F, 0x9E, 0xEA, 0x2F, 0x6C, 0x48] };

/// `IID_IUnknown` {00000000-0000-0000-C000-000000000046}.
#[no_mangle]
pub static IID_IUnknown: GUID = IUNKNOWN;
/// `IID_ICorDebugMemoryBuffer` {677888B3-D160-4B8C-A73B-D79E6AAA1D13} (cordebug.idl).
#[no_mangle]
pub static IID_ICorDebugMemoryBuffer: GUID = MEMORY_BUFFER;
/// `IID_ICorDebugSymbolProvider2` {F9801807-4764-4330-9E67-4F685094165E} (cordebug.idl).
#[no_mangle]
pub static IID_ICorDebugSymbolProvider2: GUID = SYMBOL_PROVIDER2;
/// `IID_ICorProfilerInfo` {28B5557D-3F3F-48b4-90B2-5F9EEA2F6C48} (corprof.idl).
#[no_mangle]
pub static IID_ICorProfilerInfo: GUID = PROFILER_INFO;

/// `COR_DEBUG_IL_TO_NATIVE_MAP` (cordebug.idl): `ilOffset` is a real IL offset or NO_MAPPING
/// (0xFFFFFFFF), PROLOG (0xFFFFFFFE) or EPILOG (0xFFFFFFFD); the native range is half-open and
/// relative to the code start.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct COR_DEBUG_IL_TO_NATIVE_MAP {
    /// The IL offset, or a `CorDebugIlToNativeMappingTypes` value.
    pub ilOffset: u32,
    /// The first native byte of the range.
    pub nativeStartOffset: u32,
    /// One past the last native byte of the range.
    pub nativeEndOffset: u32,
}

// The C struct and the library's are the same three u32 fields in the same order, so a pointer to
// one may be used as a pointer to the other (`protocol_args` relies on it).
const _: () = assert!(std::mem::size_of::<COR_DEBUG_IL_TO_NATIVE_MAP>() == std::mem::size_of::<CorDebugIlToNativeMap>());
const _: () = assert!(std::mem::align_of::<COR_DEBUG_IL_TO_NATIVE_MAP>() == std::mem::align_of::<CorDebugIlToNativeMap>());
const _: () = assert!(std::mem::offset_of!(COR_DEBUG_IL_TO_NATIVE_MAP, ilOffset) == std::mem::offset_of!(CorDebugIlToNativeMap, il_offset));
const _: () = assert!(std::mem::offset_of!(COR_DEBUG_IL_TO_NATIVE_MAP, nativeStartOffset) == std::mem::offset_of!(CorDebugIlToNativeMap, native_start_offset));
const _: () = assert!(std::mem::offset_of!(COR_DEBUG_IL_TO_NATIVE_MAP, nativeEndOffset) == std::mem::offset_of!(CorDebugIlToNativeMap, native_end_offset));

// ----------------------------------------------------------------------------------------------
// The interfaces as C sees them: an object is a pointer to its vtable pointer (`lpVtbl`), and the
// vtables list the methods in IDL order (cordebug.idl, corprof.idl), not the docs' alphabetical
// order.

/// A COM `ICorDebugMemoryBuffer` object: call through `lpVtbl`.
#[repr(C)]
pub struct ICorDebugMemoryBuffer {
    /// The vtable.
    pub lpVtbl: *const ICorDebugMemoryBufferVtbl,
}

/// The vtable of `ICorDebugMemoryBuffer`, IDL order: IUnknown, GetStartAddress, GetSize.
#[repr(C)]
pub struct ICorDebugMemoryBufferVtbl {
    /// `IUnknown::QueryInterface`: IUnknown and ICorDebugMemoryBuffer.
    pub QueryInterface: unsafe extern "C" fn(*mut ICorDebugMemoryBuffer, *const GUID, *mut *mut c_void) -> HRESULT,
    /// `IUnknown::AddRef`.
    pub AddRef: unsafe extern "C" fn(*mut ICorDebugMemoryBuffer) -> u32,
    /// `IUnknown::Release`: the last release frees the buffer, and the map if no provider holds it.
    pub Release: unsafe extern "C" fn(*mut ICorDebugMemoryBuffer) -> u32,
    /// `GetStartAddress(LPCVOID *address)`: the map's first byte, valid while the buffer lives.
    pub GetStartAddress: unsafe extern "C" fn(*mut ICorDebugMemoryBuffer, *mut *const c_void) -> HRESULT,
    /// `GetSize(ULONG32 *pcbBufferLength)`: the map's size in bytes.
    pub GetSize: unsafe extern "C" fn(*mut ICorDebugMemoryBuffer, *mut u32) -> HRESULT,
}

/// A COM `ICorDebugSymbolProvider2` object: call through `lpVtbl`.
#[repr(C)]
pub struct ICorDebugSymbolProvider2 {
    /// The vtable.
    pub lpVtbl: *const ICorDebugSymbolProvider2Vtbl,
}

/// The vtable of `ICorDebugSymbolProvider2`, IDL order: IUnknown, GetGenericDictionaryInfo (slot
/// 3), GetFrameProps (slot 4).
#[repr(C)]
pub struct ICorDebugSymbolProvider2Vtbl {
    /// `IUnknown::QueryInterface`: IUnknown and ICorDebugSymbolProvider2.
    pub QueryInterface: unsafe extern "C" fn(*mut ICorDebugSymbolProvider2, *const GUID, *mut *mut c_void) -> HRESULT,
    /// `IUnknown::AddRef`.
    pub AddRef: unsafe extern "C" fn(*mut ICorDebugSymbolProvider2) -> u32,
    /// `IUnknown::Release`.
    pub Release: unsafe extern "C" fn(*mut ICorDebugSymbolProvider2) -> u32,
    /// `GetGenericDictionaryInfo(ICorDebugMemoryBuffer **ppMemoryBuffer)`: the generic dictionary
    /// map. The buffer keeps the map alive after the provider's release.
    pub GetGenericDictionaryInfo: unsafe extern "C" fn(*mut ICorDebugSymbolProvider2, *mut *mut ICorDebugMemoryBuffer) -> HRESULT,
    /// `GetFrameProps(ULONG32 codeRva, ULONG32 *pCodeStartRva, ULONG32 *pParentFrameStartRva)`:
    /// over an image (`clrmap_symbol_provider_open_image`), the start of the frame holding
    /// `codeRva` and, for a funclet, its method's start (else 0); E_INVALIDARG in no frame;
    /// E_NOTIMPL over a dictionary map.
    pub GetFrameProps: unsafe extern "C" fn(*mut ICorDebugSymbolProvider2, u32, *mut u32, *mut u32) -> HRESULT,
}

/// A COM `ICorProfilerInfo`-shaped object: call through `lpVtbl`.
#[repr(C)]
pub struct ICorProfilerInfo {
    /// The vtable.
    pub lpVtbl: *const ICorProfilerInfoVtbl,
}

/// A slot of `ICorProfilerInfo9` that clrmap does not serve: it returns E_NOTIMPL.
pub type ClrmapReservedSlot = unsafe extern "C" fn(*mut ICorProfilerInfo) -> HRESULT;

/// The vtable of `ICorProfilerInfo` through `ICorProfilerInfo9` (93 slots, corprof.idl order),
/// with the three slots that serve IL-to-native maps; every other slot returns E_NOTIMPL.
///
/// The three calls follow the runtime: `cMap` and `*pcMap` count entries, not bytes (the docs'
/// "multiply by the struct size" is wrong); `*pcMap` always gets the full count; a short buffer
/// gets a partial copy and S_OK; `(0, &n, NULL)` is the size query; an unknown function or code
/// start, a null `pcMap`, or a null `map` with `cMap > 0` is E_INVALIDARG.
#[repr(C)]
pub struct ICorProfilerInfoVtbl {
    /// Slot 0, `IUnknown::QueryInterface`: IUnknown and ICorProfilerInfo.
    pub QueryInterface: unsafe extern "C" fn(*mut ICorProfilerInfo, *const GUID, *mut *mut c_void) -> HRESULT,
    /// Slot 1, `IUnknown::AddRef`.
    pub AddRef: unsafe extern "C" fn(*mut ICorProfilerInfo) -> u32,
    /// Slot 2, `IUnknown::Release`.
    pub Release: unsafe extern "C" fn(*mut ICorProfilerInfo) -> u32,
    /// Slots 3 to 34.
    pub reserved_3_34: [ClrmapReservedSlot; 32],
    /// Slot 35, `GetILToNativeMapping(FunctionID, ULONG32 cMap, ULONG32 *pcMap,
    /// COR_DEBUG_IL_TO_NATIVE_MAP map[])`: the function's first body.
    pub GetILToNativeMapping: unsafe extern "C" fn(*mut ICorProfilerInfo, FunctionID, u32, *mut u32, *mut COR_DEBUG_IL_TO_NATIVE_MAP) -> HRESULT,
    /// Slots 36 to 77.
    pub reserved_36_77: [ClrmapReservedSlot; 42],
    /// Slot 78, `GetILToNativeMapping2(FunctionID, ReJITID, ...)`: the ReJITID is ignored, as the
    /// runtime ignores it; the first body answers.
    pub GetILToNativeMapping2: unsafe extern "C" fn(*mut ICorProfilerInfo, FunctionID, ReJITID, u32, *mut u32, *mut COR_DEBUG_IL_TO_NATIVE_MAP) -> HRESULT,
    /// Slots 79 to 90.
    pub reserved_79_90: [ClrmapReservedSlot; 12],
    /// Slot 91, `GetILToNativeMapping3(UINT_PTR pNativeCodeStartAddress, ...)`: one code body, by
    /// its code start.
    pub GetILToNativeMapping3: unsafe extern "C" fn(*mut ICorProfilerInfo, usize, u32, *mut u32, *mut COR_DEBUG_IL_TO_NATIVE_MAP) -> HRESULT,
    /// Slot 92.
    pub reserved_92: [ClrmapReservedSlot; 1],
}

// The slots the C header promises (its `_Static_assert`s in c-tests check the same from C).
const SLOT: usize = std::mem::size_of::<usize>();
const _: () = assert!(std::mem::offset_of!(ICorDebugSymbolProvider2Vtbl, GetGenericDictionaryInfo) == 3 * SLOT);
const _: () = assert!(std::mem::offset_of!(ICorProfilerInfoVtbl, GetILToNativeMapping) == 35 * SLOT);
const _: () = assert!(std::mem::offset_of!(ICorProfilerInfoVtbl, GetILToNativeMapping2) == 78 * SLOT);
const _: () = assert!(std::mem::offset_of!(ICorProfilerInfoVtbl, GetILToNativeMapping3) == 91 * SLOT);
const _: () = assert!(std::mem::size_of::<ICorProfilerInfoVtbl>() == 93 * SLOT);

/// What the shared IUnknown implementation needs from an object.
pub(crate) trait Unknown {
    /// The interface struct at the object's start.
    type Iface;
    /// The interface besides IUnknown that QueryInterface answers.
    const IID: GUID;
    fn refs(&self) -> &AtomicU32;
}

/// The object behind an interface pointer. Sound because every interface pointer clrmap hands out
/// points at the first field of a `#[repr(C)]` object of type `T` (see the structs above).
pub(crate) fn object<T: Unknown>(this: *mut T::Iface) -> *mut T {
    this.cast()
}

/// IUnknown::QueryInterface: IUnknown and `T::IID`; E_NOINTERFACE (and a null out) otherwise.
pub(crate) unsafe extern "C" fn query_interface<T: Unknown>(this: *mut T::Iface, iid: *const GUID, out: *mut *mut c_void) -> HRESULT {
    ffi_fn!({
        if out.is_null() {
            return Err(Failure::null_argument());
        }
        // SAFETY: `iid` comes from the caller as a GUID pointer (checked for null inside).
        let ok = unsafe { iid_is(iid, &IUNKNOWN) || iid_is(iid, &T::IID) };
        // SAFETY: `out` is non-null; `this` is a live object the caller holds a reference to.
        unsafe {
            if ok {
                add_ref::<T>(this);
                *out = this.cast();
                Ok(S_OK)
            } else {
                *out = std::ptr::null_mut();
                Err(Failure::new(E_NOINTERFACE, "an IID of IUnknown or of the object's interface"))
            }
        }
    })
}

/// IUnknown::AddRef.
pub(crate) unsafe extern "C" fn add_ref<T: Unknown>(this: *mut T::Iface) -> u32 {
    ffi_fn!(unrecorded 0, {
        let this = object::<T>(this);
        if this.is_null() {
            return 0;
        }
        // SAFETY: a non-null `this` is a live object created by `Box::into_raw`.
        unsafe { (*this).refs().fetch_add(1, Ordering::Relaxed).saturating_add(1) }
    })
}

/// IUnknown::Release: the call that brings the count to 0 frees the object.
pub(crate) unsafe extern "C" fn release<T: Unknown>(this: *mut T::Iface) -> u32 {
    ffi_fn!(unrecorded 0, {
        let this = object::<T>(this);
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
    })
}

/// Compare a caller's IID.
///
/// SAFETY (callers): `iid` is null or points to a GUID.
unsafe fn iid_is(iid: *const GUID, want: &GUID) -> bool {
    // SAFETY: per the caller's contract.
    !iid.is_null() && unsafe { *iid } == *want
}

//! COM by hand, typed: the vtables this profiler serves (class factory, ICorProfilerCallback11)
//! and the parts of the runtime's it calls (ICorProfilerInfo9, ICorProfilerFunctionEnum), as
//! `#[repr(C)]` structs in IDL slot order (corprof.idl; docs/format-notes.md#clr-profilers), each slot checked
//! at compile time against its index. Unused runs of slots are arrays of words, so a struct
//! cannot silently shift a slot.

use std::ffi::c_void;
use std::mem::{offset_of, size_of};

// Every callback this profiler does not handle shares one stub that ignores its arguments. That is
// sound only where the caller owns the argument area (x86-64 System V and Windows x64, AArch64
// AAPCS64): with callee-pops conventions (32-bit x86 stdcall) a stub with the wrong arity corrupts
// the stack. CoreCLR's profiling API on Linux runs on x64 and arm64.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("clrmap-profiler's shared callback stub assumes a caller-cleans calling convention (x86-64 or AArch64)");

/// A COM HRESULT.
pub type Hresult = i32;
/// Success.
pub const S_OK: Hresult = 0;
/// The interface is not served.
pub const E_NOINTERFACE: Hresult = 0x8000_4002_u32 as i32;
/// Unspecified failure (what a caught panic becomes).
pub const E_FAIL: Hresult = 0x8000_4005_u32 as i32;

/// A COM GUID (Data1..Data4, the in-memory layout of `GUID`).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Guid(pub u32, pub u16, pub u16, pub [u8; 8]);

/// ICorProfilerInfo9's IID.
pub const IID_ICORPROFILERINFO9: Guid = Guid(0x0081_70DB, 0xF8CC, 0x4796, [0x9A, 0x51, 0xDC, 0x8A, 0xA0, 0xB4, 0x70, 0x12]);

/// A COM object as the caller sees it: a pointer to its vtable.
#[repr(C)]
pub struct ComObject<V: 'static> {
    /// The vtable.
    pub vtbl: &'static V,
}

// SAFETY: the objects are immutable after creation and their vtables are 'static and immutable.
unsafe impl<V> Sync for ComObject<V> {}
unsafe impl<V> Send for ComObject<V> {}

/// One word of a vtable slot this crate neither serves nor calls.
pub type Unused = usize;

type QueryInterface = unsafe extern "system" fn(*mut c_void, *const Guid, *mut *mut c_void) -> Hresult;
type AddRef = unsafe extern "system" fn(*mut c_void) -> u32;
/// A callback that ignores its arguments (see the calling-convention check above).
pub type Stub = unsafe extern "system" fn(*mut c_void) -> Hresult;

/// IClassFactory.
#[repr(C)]
pub struct ClassFactoryVtbl {
    pub query_interface: QueryInterface,
    pub add_ref: AddRef,
    pub release: AddRef,
    pub create_instance: unsafe extern "system" fn(*mut c_void, *mut c_void, *const Guid, *mut *mut c_void) -> Hresult,
    pub lock_server: unsafe extern "system" fn(*mut c_void, i32) -> Hresult,
}

/// ICorProfilerCallback through ICorProfilerCallback11: 98 slots.
#[repr(C)]
pub struct CallbackVtbl {
    pub query_interface: QueryInterface,
    pub add_ref: AddRef,
    pub release: AddRef,
    /// 3: Initialize(IUnknown*).
    pub initialize: unsafe extern "system" fn(*mut c_void, *mut c_void) -> Hresult,
    /// 4: Shutdown().
    pub shutdown: Stub,
    /// 5..=18: AppDomain, assembly and module events, ClassLoadStarted.
    pub _5: [Stub; 14],
    /// 19: ClassLoadFinished(ClassID, HRESULT).
    pub class_load_finished: unsafe extern "system" fn(*mut c_void, usize, Hresult) -> Hresult,
    /// 20: ClassUnloadStarted(ClassID).
    pub class_unload_started: unsafe extern "system" fn(*mut c_void, usize) -> Hresult,
    /// 21..=23: ClassUnloadFinished, FunctionUnloadStarted, JITCompilationStarted.
    pub _21: [Stub; 3],
    /// 24: JITCompilationFinished(FunctionID, HRESULT, BOOL).
    pub jit_compilation_finished: unsafe extern "system" fn(*mut c_void, usize, Hresult, i32) -> Hresult,
    /// 25: JITCachedFunctionSearchStarted(FunctionID, BOOL*).
    pub jit_cached_function_search_started: unsafe extern "system" fn(*mut c_void, usize, *mut i32) -> Hresult,
    /// 26: JITCachedFunctionSearchFinished(FunctionID, COR_PRF_JIT_CACHE).
    pub jit_cached_function_search_finished: unsafe extern "system" fn(*mut c_void, usize, u32) -> Hresult,
    /// 27: JITFunctionPitched.
    pub _27: Stub,
    /// 28: JITInlining(FunctionID caller, FunctionID callee, BOOL*).
    pub jit_inlining: unsafe extern "system" fn(*mut c_void, usize, usize, *mut i32) -> Hresult,
    /// 29..=79: the rest of ICorProfilerCallback and all of ICorProfilerCallback2.
    pub _29: [Stub; 51],
    /// 80: ICorProfilerCallback3::InitializeForAttach(IUnknown*, void* clientData, UINT cb).
    pub initialize_for_attach: unsafe extern "system" fn(*mut c_void, *mut c_void, *const u8, u32) -> Hresult,
    /// 81: ProfilerAttachComplete().
    pub profiler_attach_complete: Stub,
    /// 82: ProfilerDetachSucceeded().
    pub profiler_detach_succeeded: Stub,
    /// 83..=94: ICorProfilerCallback4 through 9.
    pub _83: [Stub; 12],
    /// 95: ICorProfilerCallback10::EventPipeEventDelivered(EVENTPIPE_PROVIDER, DWORD eventId,
    /// DWORD eventVersion, ULONG cbMetadataBlob, LPCBYTE metadataBlob, ULONG cbEventData,
    /// LPCBYTE eventData, LPCGUID pActivityId, LPCGUID pRelatedActivityId, ThreadID eventThread,
    /// ULONG numStackFrames, UINT_PTR stackFrames[]).
    pub event_pipe_event_delivered: EventDeliveredFn,
    /// 96: EventPipeProviderCreated(EVENTPIPE_PROVIDER).
    pub _96: Stub,
    /// 97: ICorProfilerCallback11::LoadAsNotificationOnly(BOOL*).
    pub load_as_notification_only: unsafe extern "system" fn(*mut c_void, *mut i32) -> Hresult,
}

/// ICorProfilerCallback10::EventPipeEventDelivered.
pub type EventDeliveredFn = unsafe extern "system" fn(*mut c_void, usize, u32, u32, u32, *const u8, u32, *const u8, *const Guid, *const Guid, usize, u32, *const usize) -> Hresult;

/// ICorProfilerInfo12's IID (corprof.idl; .NET 5 and later: 3.1 has none).
pub const IID_ICORPROFILERINFO12: Guid = Guid(0x27B2_4CCD, 0x1CB1, 0x47C5, [0x96, 0xEE, 0x98, 0x19, 0x0D, 0xC3, 0x09, 0x59]);

/// COR_PRF_EVENTPIPE_PROVIDER_CONFIG (corprof.idl): WCHAR is UTF-16 on every platform CoreCLR
/// runs on.
#[repr(C)]
pub struct ProviderConfig {
    pub provider_name: *const u16,
    pub keywords: u64,
    pub logging_level: u32,
    pub filter_data: *const u16,
}

/// The ICorProfilerInfo12 slots this profiler calls (the EventPipe session of its own).
#[repr(C)]
pub struct Info12Vtbl {
    pub query_interface: QueryInterface,
    pub add_ref: AddRef,
    pub release: AddRef,
    pub _3: [Unused; 79],
    /// 82: ICorProfilerInfo5::SetEventMask2(DWORD dwEventsLow, DWORD dwEventsHigh).
    pub set_event_mask2: unsafe extern "system" fn(*mut c_void, u32, u32) -> Hresult,
    pub _83: [Unused; 18],
    /// 101: ICorProfilerInfo12::EventPipeStartSession(UINT32 cProviderConfigs,
    /// COR_PRF_EVENTPIPE_PROVIDER_CONFIG[], BOOL requestRundown, EVENTPIPE_SESSION*).
    pub event_pipe_start_session: unsafe extern "system" fn(*mut c_void, u32, *const ProviderConfig, i32, *mut u64) -> Hresult,
    /// 102..=103: EventPipeAddProviderToSession, EventPipeStopSession; 104: EventPipeCreateProvider.
    pub _102: [Unused; 3],
    /// 105: EventPipeGetProviderInfo(EVENTPIPE_PROVIDER, ULONG cchName, ULONG* pcchName, WCHAR[]).
    pub event_pipe_get_provider_info: unsafe extern "system" fn(*mut c_void, usize, u32, *mut u32, *mut u16) -> Hresult,
}

/// The ICorProfilerInfo9 slots this profiler calls.
#[repr(C)]
pub struct InfoVtbl {
    pub query_interface: QueryInterface,
    pub add_ref: AddRef,
    pub release: AddRef,
    pub _3: [Unused; 8],
    /// 11: IsArrayClass(ClassID, CorElementType*, ClassID*, ULONG* rank).
    pub is_array_class: unsafe extern "system" fn(*mut c_void, usize, *mut u32, *mut usize, *mut u32) -> Hresult,
    pub _12: [Unused; 3],
    /// 15: GetFunctionInfo(FunctionID, ClassID*, ModuleID*, mdToken*).
    pub get_function_info: unsafe extern "system" fn(*mut c_void, usize, *mut usize, *mut usize, *mut u32) -> Hresult,
    /// 16: SetEventMask(DWORD).
    pub set_event_mask: unsafe extern "system" fn(*mut c_void, u32) -> Hresult,
    pub _17: [Unused; 3],
    /// 20: GetModuleInfo(ModuleID, LPCBYTE*, ULONG, ULONG*, WCHAR[], AssemblyID*).
    pub get_module_info: unsafe extern "system" fn(*mut c_void, usize, *mut *const u8, u32, *mut u32, *mut u16, *mut usize) -> Hresult,
    /// 21: GetModuleMetaData(ModuleID, DWORD dwOpenFlags, REFIID, IUnknown**).
    pub get_module_meta_data: unsafe extern "system" fn(*mut c_void, usize, u32, *const Guid, *mut *mut c_void) -> Hresult,
    pub _22: [Unused; 13],
    /// 35: GetILToNativeMapping(FunctionID, ULONG32, ULONG32*, COR_DEBUG_IL_TO_NATIVE_MAP[]).
    pub get_il_to_native_mapping: MapFn,
    pub _36: [Unused; 2],
    /// 38: ICorProfilerInfo2::GetFunctionInfo2(FunctionID, COR_PRF_FRAME_INFO, ClassID*, ModuleID*,
    /// mdToken*, ULONG32 cTypeArgs, ULONG32* pcTypeArgs, ClassID typeArgs[]).
    pub get_function_info2: unsafe extern "system" fn(*mut c_void, usize, usize, *mut usize, *mut usize, *mut u32, u32, *mut u32, *mut usize) -> Hresult,
    pub _39: [Unused; 2],
    /// 41: GetClassIDInfo2(ClassID, ModuleID*, mdTypeDef*, ClassID* parent, ULONG32 cNumTypeArgs,
    /// ULONG32* pcNumTypeArgs, ClassID typeArgs[]).
    pub get_class_id_info2: unsafe extern "system" fn(*mut c_void, usize, *mut usize, *mut u32, *mut usize, u32, *mut u32, *mut usize) -> Hresult,
    /// 42: GetCodeInfo2(FunctionID, ULONG32, ULONG32*, COR_PRF_CODE_INFO[]).
    pub get_code_info2: CodeInfoFn,
    pub _43: [Unused; 1],
    /// 44: GetFunctionFromTokenAndTypeArgs(ModuleID, mdMethodDef, ClassID, ULONG32 cTypeArgs,
    /// ClassID typeArgs[], FunctionID*).
    pub get_function_from_token_and_type_args: unsafe extern "system" fn(*mut c_void, usize, u32, usize, u32, *const usize, *mut usize) -> Hresult,
    pub _45: [Unused; 13],
    /// 58: ICorProfilerInfo3::RequestProfilerDetach(DWORD expectedCompletionMilliseconds).
    pub request_profiler_detach: unsafe extern "system" fn(*mut c_void, u32) -> Hresult,
    pub _59: [Unused; 8],
    /// 67: ICorProfilerInfo3::GetRuntimeInformation(USHORT* clrInstanceId, COR_PRF_RUNTIME_TYPE*,
    /// USHORT* major, USHORT* minor, USHORT* build, USHORT* qfe, ULONG cch, ULONG* pcch, WCHAR[]).
    pub get_runtime_information: unsafe extern "system" fn(*mut c_void, *mut u16, *mut u32, *mut u16, *mut u16, *mut u16, *mut u16, u32, *mut u32, *mut u16) -> Hresult,
    pub _68: [Unused; 11],
    /// 79: ICorProfilerInfo4::EnumJITedFunctions2(ICorProfilerFunctionEnum**).
    pub enum_jited_functions2: unsafe extern "system" fn(*mut c_void, *mut *mut c_void) -> Hresult,
    pub _80: [Unused; 10],
    /// 90: ICorProfilerInfo9::GetNativeCodeStartAddresses(FunctionID, ReJITID, ULONG32, ULONG32*, UINT_PTR[]).
    pub get_native_code_start_addresses: unsafe extern "system" fn(*mut c_void, usize, usize, u32, *mut u32, *mut usize) -> Hresult,
    /// 91: GetILToNativeMapping3(UINT_PTR codeStart, ULONG32, ULONG32*, COR_DEBUG_IL_TO_NATIVE_MAP[]).
    pub get_il_to_native_mapping3: MapFn,
    /// 92: GetCodeInfo4(UINT_PTR codeStart, ULONG32, ULONG32*, COR_PRF_CODE_INFO[]).
    pub get_code_info4: CodeInfoFn,
}

/// The two-call map getters (by FunctionID or by code start).
pub type MapFn = unsafe extern "system" fn(*mut c_void, usize, u32, *mut u32, *mut IlMap) -> Hresult;
/// The code-range getters (by FunctionID or by code start).
pub type CodeInfoFn = unsafe extern "system" fn(*mut c_void, usize, u32, *mut u32, *mut CodeInfo) -> Hresult;

/// IMetaDataImport's IID (cor.h).
pub const IID_IMETADATAIMPORT: Guid = Guid(0x7DAC_8207, 0xD3AE, 0x4C75, [0x9B, 0x67, 0x92, 0x80, 0x1A, 0x49, 0x7D, 0x44]);

/// The IMetaDataImport slots this profiler calls (cor.h).
#[repr(C)]
pub struct MetaDataImportVtbl {
    pub query_interface: QueryInterface,
    pub add_ref: AddRef,
    pub release: AddRef,
    /// 3..=9: CloseEnum, CountEnum, ResetEnum, EnumTypeDefs, EnumInterfaceImpls, EnumTypeRefs,
    /// FindTypeDefByName.
    pub _3: [Unused; 7],
    /// 10: GetScopeProps(LPWSTR szName, ULONG cchName, ULONG* pchName, GUID* pmvid).
    pub get_scope_props: unsafe extern "system" fn(*mut c_void, *mut u16, u32, *mut u32, *mut Guid) -> Hresult,
    /// 11: GetModuleFromScope.
    pub _11: [Unused; 1],
    /// 12: GetTypeDefProps(mdTypeDef, LPWSTR szTypeDef, ULONG cchTypeDef, ULONG* pchTypeDef,
    /// DWORD* pdwTypeDefFlags, mdToken* ptkExtends).
    pub get_type_def_props: unsafe extern "system" fn(*mut c_void, u32, *mut u16, u32, *mut u32, *mut u32, *mut u32) -> Hresult,
    /// 13..=29: GetInterfaceImplProps through FindMemberRef.
    pub _13: [Unused; 17],
    /// 30: GetMethodProps(mdMethodDef, mdTypeDef* pClass, LPWSTR szMethod, ULONG cchMethod,
    /// ULONG* pchMethod, DWORD* pdwAttr, PCCOR_SIGNATURE* ppvSigBlob, ULONG* pcbSigBlob,
    /// ULONG* pulCodeRVA, DWORD* pdwImplFlags).
    #[allow(clippy::type_complexity)]
    pub get_method_props: unsafe extern "system" fn(*mut c_void, u32, *mut u32, *mut u16, u32, *mut u32, *mut u32, *mut *const u8, *mut u32, *mut u32, *mut u32) -> Hresult,
}

/// ICorProfilerFunctionEnum.
#[repr(C)]
pub struct FunctionEnumVtbl {
    pub query_interface: QueryInterface,
    pub add_ref: AddRef,
    pub release: AddRef,
    /// 3..=6: Skip, Reset, Clone, GetCount.
    pub _3: [Unused; 4],
    /// 7: Next(ULONG celt, COR_PRF_FUNCTION ids[], ULONG* fetched).
    pub next: unsafe extern "system" fn(*mut c_void, u32, *mut PrfFunction, *mut u32) -> Hresult,
}

/// COR_DEBUG_IL_TO_NATIVE_MAP.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct IlMap {
    pub il: u32,
    pub start: u32,
    pub end: u32,
}

/// COR_PRF_CODE_INFO.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct CodeInfo {
    pub start: usize,
    pub size: usize,
}

/// COR_PRF_FUNCTION.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct PrfFunction {
    pub function_id: usize,
    pub rejit_id: usize,
}

const W: usize = size_of::<usize>();

// Layout checks: each served or called slot sits at its IDL index.
const _: () = {
    assert!(offset_of!(ClassFactoryVtbl, lock_server) == 4 * W);
    assert!(offset_of!(CallbackVtbl, initialize) == 3 * W);
    assert!(offset_of!(CallbackVtbl, shutdown) == 4 * W);
    assert!(offset_of!(CallbackVtbl, class_load_finished) == 19 * W);
    assert!(offset_of!(CallbackVtbl, class_unload_started) == 20 * W);
    assert!(offset_of!(CallbackVtbl, jit_compilation_finished) == 24 * W);
    assert!(offset_of!(CallbackVtbl, jit_cached_function_search_started) == 25 * W);
    assert!(offset_of!(CallbackVtbl, jit_cached_function_search_finished) == 26 * W);
    assert!(offset_of!(CallbackVtbl, jit_inlining) == 28 * W);
    assert!(offset_of!(CallbackVtbl, initialize_for_attach) == 80 * W);
    assert!(offset_of!(CallbackVtbl, profiler_attach_complete) == 81 * W);
    assert!(offset_of!(CallbackVtbl, profiler_detach_succeeded) == 82 * W);
    assert!(offset_of!(CallbackVtbl, event_pipe_event_delivered) == 95 * W);
    assert!(offset_of!(CallbackVtbl, load_as_notification_only) == 97 * W);
    assert!(offset_of!(Info12Vtbl, set_event_mask2) == 82 * W);
    assert!(offset_of!(Info12Vtbl, event_pipe_start_session) == 101 * W);
    assert!(offset_of!(Info12Vtbl, event_pipe_get_provider_info) == 105 * W);
    assert!(size_of::<ProviderConfig>() == 8 + 8 + 8 + 8);
    assert!(size_of::<CallbackVtbl>() == 98 * W);
    assert!(offset_of!(InfoVtbl, is_array_class) == 11 * W);
    assert!(offset_of!(InfoVtbl, get_function_info) == 15 * W);
    assert!(offset_of!(InfoVtbl, get_function_info2) == 38 * W);
    assert!(offset_of!(InfoVtbl, get_class_id_info2) == 41 * W);
    assert!(offset_of!(InfoVtbl, get_runtime_information) == 67 * W);
    assert!(offset_of!(InfoVtbl, set_event_mask) == 16 * W);
    assert!(offset_of!(InfoVtbl, get_module_info) == 20 * W);
    assert!(offset_of!(InfoVtbl, get_module_meta_data) == 21 * W);
    assert!(offset_of!(InfoVtbl, _36) == 36 * W);
    assert!(offset_of!(MetaDataImportVtbl, get_scope_props) == 10 * W);
    assert!(offset_of!(MetaDataImportVtbl, get_type_def_props) == 12 * W);
    assert!(offset_of!(MetaDataImportVtbl, get_method_props) == 30 * W);
    assert!(offset_of!(InfoVtbl, get_function_from_token_and_type_args) == 44 * W);
    assert!(offset_of!(InfoVtbl, get_il_to_native_mapping) == 35 * W);
    assert!(offset_of!(InfoVtbl, get_code_info2) == 42 * W);
    assert!(offset_of!(InfoVtbl, request_profiler_detach) == 58 * W);
    assert!(offset_of!(InfoVtbl, enum_jited_functions2) == 79 * W);
    assert!(offset_of!(InfoVtbl, get_native_code_start_addresses) == 90 * W);
    assert!(offset_of!(InfoVtbl, get_il_to_native_mapping3) == 91 * W);
    assert!(offset_of!(InfoVtbl, get_code_info4) == 92 * W);
    assert!(offset_of!(FunctionEnumVtbl, next) == 7 * W);
    assert!(size_of::<IlMap>() == 12 && size_of::<CodeInfo>() == 2 * W && size_of::<PrfFunction>() == 2 * W);
};

/// The runtime's ICorProfilerInfo9, with safe wrappers for the calls this profiler makes.
#[derive(Clone, Copy)]
pub struct Info(*mut ComObject<InfoVtbl>);

// SAFETY: ICorProfilerInfo is free-threaded (callable from any thread).
unsafe impl Send for Info {}

impl Info {
    /// QueryInterface `unknown` (the runtime's IUnknown) for ICorProfilerInfo9.
    ///
    /// # Safety
    /// `unknown` is a live COM object (what Initialize / InitializeForAttach received).
    pub unsafe fn from_unknown(unknown: *mut c_void) -> Result<Info, Hresult> {
        if unknown.is_null() {
            return Err(E_NOINTERFACE);
        }
        let object = unknown as *mut ComObject<InfoVtbl>;
        let mut info: *mut c_void = std::ptr::null_mut();
        // SAFETY: every COM object's slot 0 is QueryInterface.
        let hr = unsafe { ((*object).vtbl.query_interface)(unknown, &IID_ICORPROFILERINFO9, &mut info) };
        if hr != S_OK || info.is_null() {
            return Err(if hr == S_OK { E_NOINTERFACE } else { hr });
        }
        Ok(Info(info as *mut ComObject<InfoVtbl>))
    }

    fn vtbl(&self) -> &'static InfoVtbl {
        // SAFETY: `self.0` is the runtime's ICorProfilerInfo9, alive for the process (or until
        // detach, after which no code of this library runs).
        unsafe { (*self.0).vtbl }
    }

    fn this(&self) -> *mut c_void {
        self.0 as *mut c_void
    }

    /// SetEventMask.
    pub fn set_event_mask(&self, mask: u32) -> Hresult {
        // SAFETY: slot 16 has this signature.
        unsafe { (self.vtbl().set_event_mask)(self.this(), mask) }
    }

    /// RequestProfilerDetach: from a thread of the profiler's own, never from a callback.
    pub fn request_profiler_detach(&self, expected_ms: u32) -> Hresult {
        // SAFETY: slot 58 has this signature.
        unsafe { (self.vtbl().request_profiler_detach)(self.this(), expected_ms) }
    }

    /// The function's module path and base address, its token, and its ModuleID.
    pub fn function_info(&self, fid: usize) -> Option<(String, usize, u32, usize)> {
        let (module, token) = self.function_ids(fid)?;
        let (path, base) = self.module_info(module)?;
        Some((path, base, token, module))
    }

    /// The function's ModuleID and MethodDef token (GetFunctionInfo).
    pub fn function_ids(&self, fid: usize) -> Option<(usize, u32)> {
        let (mut class, mut module, mut token) = (0usize, 0usize, 0u32);
        // SAFETY: out-pointers to locals.
        let hr = unsafe { (self.vtbl().get_function_info)(self.this(), fid, &mut class, &mut module, &mut token) };
        (hr == S_OK).then_some((module, token))
    }

    /// A module's path (GetModuleInfo) and base address.
    pub fn module_info(&self, module: usize) -> Option<(String, usize)> {
        let mut base: *const u8 = std::ptr::null();
        let mut name = vec![0u16; 1024];
        let mut len = 0u32;
        let mut assembly = 0usize;
        // SAFETY: the buffer holds `name.len()` UTF-16 units; the rest are out-pointers to locals.
        let hr = unsafe { (self.vtbl().get_module_info)(self.this(), module, &mut base, name.len() as u32, &mut len, name.as_mut_ptr(), &mut assembly) };
        if hr != S_OK {
            return None;
        }
        let n = (len as usize).min(name.len());
        Some((String::from_utf16_lossy(name.get(..n).unwrap_or(&[])).trim_end_matches('\0').to_owned(), base as usize))
    }

    /// Run `f` on the module's IMetaDataImport (GetModuleMetaData), released after.
    fn with_import<T>(&self, module: usize, f: impl FnOnce(*mut c_void, &'static MetaDataImportVtbl) -> Option<T>) -> Option<T> {
        let mut unknown: *mut c_void = std::ptr::null_mut();
        // SAFETY: slot 21 has this signature; `unknown` is an out-pointer to a local. ofRead = 0.
        let hr = unsafe { (self.vtbl().get_module_meta_data)(self.this(), module, 0, &IID_IMETADATAIMPORT, &mut unknown) };
        if hr != S_OK || unknown.is_null() {
            return None;
        }
        let object = unknown as *mut ComObject<MetaDataImportVtbl>;
        // SAFETY: `unknown` is the runtime's IMetaDataImport (what was asked for), alive until
        // the release below.
        let vtbl = unsafe { (*object).vtbl };
        let out = f(unknown, vtbl);
        // SAFETY: release the reference GetModuleMetaData gave.
        unsafe { (vtbl.release)(unknown) };
        out
    }

    /// A module's MVID (GetModuleMetaData for IMetaDataImport, then GetScopeProps), as the
    /// Module table's Mvid lays it out on disk (Data1..Data3 little-endian, then Data4).
    pub fn module_mvid(&self, module: usize) -> Option<[u8; 16]> {
        let mvid = self.with_import(module, |import, vtbl| {
            let mut mvid = Guid(0, 0, 0, [0; 8]);
            let mut name = [0u16; 512];
            let mut len = 0u32;
            // SAFETY: `import` is the module's IMetaDataImport; the name buffer holds
            // `name.len()` UTF-16 units (a longer name is cut, which is fine), the rest are
            // out-pointers to locals.
            let hr = unsafe { (vtbl.get_scope_props)(import, name.as_mut_ptr(), name.len() as u32, &mut len, &mut mvid) };
            (hr >= 0).then_some(mvid)
        })?;
        let mut out = [0u8; 16];
        let bytes = mvid.0.to_le_bytes().into_iter().chain(mvid.1.to_le_bytes()).chain(mvid.2.to_le_bytes()).chain(mvid.3);
        for (d, b) in out.iter_mut().zip(bytes) {
            *d = b;
        }
        Some(out)
    }

    /// A TypeDef's full name (`Ns.Name`; a nested type's own name only), from the module's
    /// metadata (GetTypeDefProps).
    pub fn type_def_name(&self, module: usize, type_def: u32) -> Option<String> {
        self.with_import(module, |import, vtbl| {
            let mut name = [0u16; 512];
            let (mut len, mut flags, mut extends) = (0u32, 0u32, 0u32);
            // SAFETY: `import` is the module's IMetaDataImport; the buffer holds `name.len()`
            // UTF-16 units, the rest are out-pointers to locals.
            let hr = unsafe { (vtbl.get_type_def_props)(import, type_def, name.as_mut_ptr(), name.len() as u32, &mut len, &mut flags, &mut extends) };
            if hr != S_OK {
                return None;
            }
            let n = (len as usize).min(name.len());
            Some(String::from_utf16_lossy(name.get(..n)?).trim_end_matches('\0').to_owned())
        })
    }

    /// The TypeDef that owns a MethodDef (GetMethodProps).
    pub fn method_owner(&self, module: usize, method_def: u32) -> Option<u32> {
        self.with_import(module, |import, vtbl| {
            let (mut owner, mut len, mut attr, mut sig_len, mut rva, mut impl_flags) = (0u32, 0u32, 0u32, 0u32, 0u32, 0u32);
            let mut sig: *const u8 = std::ptr::null();
            // SAFETY: `import` is the module's IMetaDataImport; no name buffer (null, 0), the
            // rest are out-pointers to locals.
            let hr = unsafe { (vtbl.get_method_props)(import, method_def, &mut owner, std::ptr::null_mut(), 0, &mut len, &mut attr, &mut sig, &mut sig_len, &mut rva, &mut impl_flags) };
            (hr == S_OK && owner != 0).then_some(owner)
        })
    }

    /// The FunctionID of a MethodDef in class `class` with the method's own type arguments
    /// (GetFunctionFromTokenAndTypeArgs): for a class whose code is shared, the shared body's.
    pub fn function_from_token_and_type_args(&self, module: usize, method_def: u32, class: usize, args: &[usize]) -> Option<usize> {
        let mut fid = 0usize;
        let n = u32::try_from(args.len()).ok()?;
        // SAFETY: slot 44 has this signature; `args` holds `n` ClassIDs, `fid` is an out-pointer
        // to a local.
        let hr = unsafe { (self.vtbl().get_function_from_token_and_type_args)(self.this(), module, method_def, class, n, args.as_ptr(), &mut fid) };
        (hr == S_OK && fid != 0).then_some(fid)
    }

    /// The function's class and its own type arguments (GetFunctionInfo2 without a frame: shared
    /// code answers with its canonical instantiation, `System.__Canon` for reference types).
    pub fn function_class_and_args(&self, fid: usize) -> Option<(usize, Vec<usize>)> {
        let (mut class, mut module, mut token) = (0usize, 0usize, 0u32);
        let mut args = [0usize; 16];
        let mut n = 0u32;
        // SAFETY: out-pointers to locals; the buffer holds 16 entries.
        let hr = unsafe { (self.vtbl().get_function_info2)(self.this(), fid, 0, &mut class, &mut module, &mut token, args.len() as u32, &mut n, args.as_mut_ptr()) };
        if hr != S_OK || n as usize > args.len() {
            return None;
        }
        Some((class, args.get(..n as usize)?.to_vec()))
    }

    /// A class's module, TypeDef token and type arguments (GetClassIDInfo2).
    pub fn class_info(&self, class: usize) -> Option<(usize, u32, Vec<usize>)> {
        self.class_info_and_parent(class).map(|(module, token, args, _)| (module, token, args))
    }

    /// A class's module, TypeDef token, type arguments and parent class (GetClassIDInfo2; the
    /// parent is 0 for none).
    pub fn class_info_and_parent(&self, class: usize) -> Option<(usize, u32, Vec<usize>, usize)> {
        let (mut module, mut token, mut parent) = (0usize, 0u32, 0usize);
        let mut args = [0usize; 16];
        let mut n = 0u32;
        // SAFETY: out-pointers to locals; the buffer holds 16 entries.
        let hr = unsafe { (self.vtbl().get_class_id_info2)(self.this(), class, &mut module, &mut token, &mut parent, args.len() as u32, &mut n, args.as_mut_ptr()) };
        if hr != S_OK || n as usize > args.len() {
            return None;
        }
        Some((module, token, args.get(..n as usize)?.to_vec(), parent))
    }

    /// For an array class: its element's CorElementType, the element's class (0 for none) and
    /// the rank (IsArrayClass answers S_OK); `None` for any other class.
    pub fn array_class(&self, class: usize) -> Option<(u32, usize, u32)> {
        let (mut element, mut element_class, mut rank) = (0u32, 0usize, 0u32);
        // SAFETY: out-pointers to locals.
        let hr = unsafe { (self.vtbl().is_array_class)(self.this(), class, &mut element, &mut element_class, &mut rank) };
        (hr == S_OK).then_some((element, element_class, rank))
    }

    /// The runtime's version (GetRuntimeInformation): `major.minor.build.qfe` and its version
    /// string.
    pub fn runtime_information(&self) -> Option<([u16; 4], String)> {
        let (mut instance, mut kind) = (0u16, 0u32);
        let mut v = [0u16; 4];
        let mut text = [0u16; 256];
        let mut len = 0u32;
        let [a, b, c, d] = &mut v;
        // SAFETY: out-pointers to locals; the buffer holds 256 UTF-16 units.
        let hr = unsafe { (self.vtbl().get_runtime_information)(self.this(), &mut instance, &mut kind, a, b, c, d, text.len() as u32, &mut len, text.as_mut_ptr()) };
        if hr != S_OK {
            return None;
        }
        let n = (len as usize).min(text.len());
        Some((v, String::from_utf16_lossy(text.get(..n).unwrap_or(&[])).trim_end_matches('\0').to_owned()))
    }

    /// The two-call protocol, by FunctionID (GetILToNativeMapping) or by code start
    /// (GetILToNativeMapping3). The first call already offers room for 64 entries (most maps fit):
    /// `pcMap` says how many there are, so a second call is needed only for longer maps, and the
    /// runtime decodes most maps once instead of twice.
    pub fn il_map(&self, by_start: bool, key: usize) -> Result<Vec<IlMap>, Hresult> {
        let f = if by_start { self.vtbl().get_il_to_native_mapping3 } else { self.vtbl().get_il_to_native_mapping };
        let mut map = vec![IlMap::default(); 64];
        let mut n = 0u32;
        // SAFETY: the buffer holds `map.len()` entries.
        let hr = unsafe { f(self.this(), key, map.len() as u32, &mut n, map.as_mut_ptr()) };
        if hr != S_OK {
            return Err(hr);
        }
        if n as usize > map.len() {
            map = vec![IlMap::default(); n as usize];
            // SAFETY: the buffer holds `n` entries.
            let hr = unsafe { f(self.this(), key, n, &mut n, map.as_mut_ptr()) };
            if hr != S_OK {
                return Err(hr);
            }
        }
        map.truncate((n as usize).min(map.len()));
        Ok(map)
    }

    /// Code ranges by FunctionID (GetCodeInfo2) or by code start (GetCodeInfo4): the first
    /// start, the total size, and the first range's size.
    pub fn code_info(&self, by_start: bool, key: usize) -> Option<(usize, usize, usize)> {
        let f = if by_start { self.vtbl().get_code_info4 } else { self.vtbl().get_code_info2 };
        let mut ranges = [CodeInfo::default(); 8];
        let mut n = 0u32;
        // SAFETY: the buffer holds 8 entries.
        let hr = unsafe { f(self.this(), key, ranges.len() as u32, &mut n, ranges.as_mut_ptr()) };
        if hr != S_OK || n == 0 {
            return None;
        }
        let used = ranges.get(..(n as usize).min(ranges.len()))?;
        let first = used.first()?;
        Some((first.start, used.iter().fold(0usize, |a, r| a.saturating_add(r.size)), first.size))
    }

    /// The function's native code starts, one per code version (GetNativeCodeStartAddresses).
    pub fn native_code_starts(&self, fid: usize, rejit: usize) -> Vec<usize> {
        let mut starts = [0usize; 16];
        let mut n = 0u32;
        // SAFETY: the buffer holds 16 entries.
        let hr = unsafe { (self.vtbl().get_native_code_start_addresses)(self.this(), fid, rejit, starts.len() as u32, &mut n, starts.as_mut_ptr()) };
        if hr != S_OK {
            return Vec::new();
        }
        starts.iter().take((n as usize).min(starts.len())).copied().filter(|&s| s != 0).collect()
    }

    /// Every function the runtime has jitted so far (EnumJITedFunctions2), with its ReJITID.
    pub fn jited_functions(&self) -> Result<Vec<PrfFunction>, Hresult> {
        let mut e: *mut c_void = std::ptr::null_mut();
        // SAFETY: an out-pointer to a local.
        let hr = unsafe { (self.vtbl().enum_jited_functions2)(self.this(), &mut e) };
        if hr != S_OK || e.is_null() {
            return Err(hr);
        }
        let object = e as *mut ComObject<FunctionEnumVtbl>;
        let mut out = Vec::new();
        let mut batch = [PrfFunction::default(); 256];
        loop {
            let mut fetched = 0u32;
            // SAFETY: `e` is the runtime's ICorProfilerFunctionEnum; the buffer holds 256 entries.
            let hr = unsafe { ((*object).vtbl.next)(e, batch.len() as u32, batch.as_mut_ptr(), &mut fetched) };
            out.extend(batch.iter().take((fetched as usize).min(batch.len())));
            // S_FALSE (1): fewer than asked, the end.
            if hr != S_OK || fetched == 0 {
                break;
            }
        }
        // SAFETY: release our reference to the enumerator.
        unsafe { ((*object).vtbl.release)(e) };
        Ok(out)
    }
}

/// The runtime's ICorProfilerInfo12 (.NET 5 and later), for the profiler's own EventPipe session.
#[derive(Clone, Copy)]
pub struct Info12(*mut ComObject<Info12Vtbl>);

// SAFETY: ICorProfilerInfo is free-threaded (callable from any thread).
unsafe impl Send for Info12 {}

impl Info12 {
    /// QueryInterface `unknown` (the runtime's IUnknown) for ICorProfilerInfo12: `None` on a
    /// runtime without it (3.1).
    ///
    /// # Safety
    /// `unknown` is a live COM object (what Initialize received).
    pub unsafe fn from_unknown(unknown: *mut c_void) -> Option<Info12> {
        if unknown.is_null() {
            return None;
        }
        let object = unknown as *mut ComObject<Info12Vtbl>;
        let mut info: *mut c_void = std::ptr::null_mut();
        // SAFETY: every COM object's slot 0 is QueryInterface.
        let hr = unsafe { ((*object).vtbl.query_interface)(unknown, &IID_ICORPROFILERINFO12, &mut info) };
        (hr == S_OK && !info.is_null()).then_some(Info12(info as *mut ComObject<Info12Vtbl>))
    }

    fn vtbl(&self) -> &'static Info12Vtbl {
        // SAFETY: `self.0` is the runtime's ICorProfilerInfo12, alive for the process.
        unsafe { (*self.0).vtbl }
    }

    fn this(&self) -> *mut c_void {
        self.0 as *mut c_void
    }

    /// SetEventMask2.
    pub fn set_event_mask2(&self, low: u32, high: u32) -> Hresult {
        // SAFETY: slot 82 has this signature.
        unsafe { (self.vtbl().set_event_mask2)(self.this(), low, high) }
    }

    /// EventPipeStartSession without rundown: `(provider name, keywords, level)` each.
    pub fn start_session(&self, providers: &[(&str, u64, u32)]) -> Result<u64, Hresult> {
        let names: Vec<Vec<u16>> = providers.iter().map(|(n, _, _)| n.encode_utf16().chain(Some(0)).collect()).collect();
        let configs: Vec<ProviderConfig> =
            providers.iter().zip(&names).map(|(&(_, keywords, logging_level), name)| ProviderConfig { provider_name: name.as_ptr(), keywords, logging_level, filter_data: std::ptr::null() }).collect();
        let mut session = 0u64;
        // SAFETY: slot 101 has this signature; `configs` (and the names they point at) outlive
        // the call, which copies them.
        let hr = unsafe { (self.vtbl().event_pipe_start_session)(self.this(), configs.len() as u32, configs.as_ptr(), 0, &mut session) };
        if hr == S_OK {
            Ok(session)
        } else {
            Err(hr)
        }
    }

    /// EventPipeGetProviderInfo: the provider's name.
    pub fn provider_name(&self, provider: usize) -> Option<String> {
        let mut name = [0u16; 256];
        let mut len = 0u32;
        // SAFETY: slot 105 has this signature; the buffer holds 256 UTF-16 units.
        let hr = unsafe { (self.vtbl().event_pipe_get_provider_info)(self.this(), provider, name.len() as u32, &mut len, name.as_mut_ptr()) };
        if hr != S_OK {
            return None;
        }
        let n = (len as usize).min(name.len());
        Some(String::from_utf16_lossy(name.get(..n).unwrap_or(&[])).trim_end_matches('\0').to_owned())
    }
}

//! The C ABI of clrmap: the two seed interfaces as COM-shaped objects for C and C++ debuggers and
//! profilers (`include/clrmap.h`).
//!
//! * `ICorDebugSymbolProvider2`-shaped objects serve a generic dictionary map
//!   (`GetGenericDictionaryInfo`, IDL slot 3), handing out `ICorDebugMemoryBuffer` objects that
//!   keep the map alive, or the frames of a ReadyToRun image (`GetFrameProps`, slot 4).
//! * `ICorProfilerInfo`-shaped objects serve IL-to-native maps from a ReadyToRun image, a
//!   `.nettrace` or a capture, at the IDL slots of `GetILToNativeMapping` (35),
//!   `GetILToNativeMapping2` (78) and `GetILToNativeMapping3` (91); every other slot is E_NOTIMPL.
//!
//! Errors: each library [`ErrorKind`] has its own HRESULT (`hresult_of_kind`), and every export
//! that fails records the thread's last error (`clrmap_last_error`): the HRESULT, the kind's id,
//! the location and what was expected there.
//!
//! Safety: every export runs inside `catch_unwind`; null pointers give E_POINTER (out-pointers of
//! the COM plumbing) or E_INVALIDARG (the profiler calls, as the runtime answers); objects are
//! opaque and reference-counted with atomics. Each `unsafe` block says why it is sound.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
// COM objects and vtables are opaque to Rust callers; Debug would print raw pointers only.
#![allow(missing_debug_implementations)]
// The C names of cordebug.idl and corprof.idl, so that cbindgen writes the header C users expect.
#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals)]

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use clrmap::gdmap::{DictionaryMap, LookupIndex, SortedFlag};
use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use clrmap::diag::{self, DiagErrorKind};
use clrmap::ilmap::{CorDebugIlToNativeMap, IlOffset, MapStore};
use clrmap::locate::SymbolPaths;
use clrmap::r2r::frames::FrameIndex;
use clrmap::r2r::ReadyToRunImage;
use clrmap::read::{ErrorFamily, Location};
use clrmap::signature::HexTokens;
use clrmap::symbolizer::{FrameKind, OpenError, Options, Symbolizer};
use clrmap::ErrorKind;
use std::cell::RefCell;

/// A COM `HRESULT`.
pub type HRESULT = i32;
/// corprof.idl `FunctionID`: for an image, the code-start RVA of the body.
pub type FunctionID = usize;
/// corprof.idl `ReJITID`.
pub type ReJITID = usize;

/// S_OK.
pub const CLRMAP_S_OK: HRESULT = 0;
/// S_FALSE: the two-call protocol's "buffer too small; the size is in the out-count".
pub const CLRMAP_S_FALSE: HRESULT = 1;
/// E_NOTIMPL.
pub const CLRMAP_E_NOTIMPL: HRESULT = 0x8000_4001_u32 as HRESULT;
/// E_NOINTERFACE.
pub const CLRMAP_E_NOINTERFACE: HRESULT = 0x8000_4002_u32 as HRESULT;
/// E_POINTER.
pub const CLRMAP_E_POINTER: HRESULT = 0x8000_4003_u32 as HRESULT;
/// E_FAIL.
pub const CLRMAP_E_FAIL: HRESULT = 0x8000_4005_u32 as HRESULT;
/// E_INVALIDARG.
pub const CLRMAP_E_INVALIDARG: HRESULT = 0x8007_0057_u32 as HRESULT;
/// HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND).
pub const CLRMAP_E_FILE_NOT_FOUND: HRESULT = 0x8007_0002_u32 as HRESULT;
/// HRESULT_FROM_WIN32(ERROR_BAD_FILE_TYPE): the path names a device, a FIFO, a directory or
/// another file that is not a regular file; it is refused before anything is read.
pub const CLRMAP_E_BAD_FILE_TYPE: HRESULT = 0x8007_00DE_u32 as HRESULT;
/// E_PDB_INVALID_SIG (the DIA SDK's HRESULT, MAKE_HRESULT(1, FACILITY_VISUALCPP, 12)): a PDB the
/// caller named whose id is not the one its assembly's CodeView entry asks for.
pub const CLRMAP_E_PDB_MISMATCH: HRESULT = 0x806D_000C_u32 as HRESULT;
/// META_E_BAD_SIGNATURE (corerror.h), the runtime's answer for a malformed signature: the kinds
/// `bad_compressed_integer`, `empty_instantiation`, `bad_element_type`, `bad_token`,
/// `bad_array_shape` and `bad_calling_convention`.
pub const CLRMAP_META_E_BAD_SIGNATURE: HRESULT = 0x8013_1192_u32 as HRESULT;

// One HRESULT per error kind (the kind's id in comments): MAKE_HRESULT(1, FACILITY_ITF, 0xC0nn),
// clrmap's own codes. `clrmap_last_error` gives the kind, the location and the expectation.

/// `truncated`: a field could not be read completely inside its bound.
pub const CLRMAP_E_TRUNCATED: HRESULT = 0x8004_C001_u32 as HRESULT;
/// `truncated_header`: a dictionary map shorter than its 4-byte header word.
pub const CLRMAP_E_TRUNCATED_HEADER: HRESULT = 0x8004_C002_u32 as HRESULT;
/// `truncated_directory`: a dictionary map's directory does not fit in the map.
pub const CLRMAP_E_TRUNCATED_DIRECTORY: HRESULT = 0x8004_C003_u32 as HRESULT;
/// `offset_out_of_heap`: a directory entry's heap offset is not inside the heap.
pub const CLRMAP_E_OFFSET_OUT_OF_HEAP: HRESULT = 0x8004_C004_u32 as HRESULT;
/// `truncated_item`: a heap item runs past the end of the map.
pub const CLRMAP_E_TRUNCATED_ITEM: HRESULT = 0x8004_C005_u32 as HRESULT;
/// `item_length_mismatch`: a heap item's contents do not fill its declared length.
pub const CLRMAP_E_ITEM_LENGTH_MISMATCH: HRESULT = 0x8004_C006_u32 as HRESULT;
/// `too_deep`: type nesting deeper than the limit.
pub const CLRMAP_E_TOO_DEEP: HRESULT = 0x8004_C007_u32 as HRESULT;
/// `unsorted`: the sorted flag is set but the RVAs are not in order.
pub const CLRMAP_E_UNSORTED: HRESULT = 0x8004_C008_u32 as HRESULT;
/// `duplicate_rva`: one RVA with two different heap offsets.
pub const CLRMAP_E_DUPLICATE_RVA: HRESULT = 0x8004_C009_u32 as HRESULT;
/// `bad_image`: the PE/COFF container is malformed or is not a .NET image.
pub const CLRMAP_E_BAD_IMAGE: HRESULT = 0x8004_C00A_u32 as HRESULT;
/// `bad_metadata`: ECMA-335 metadata is malformed.
pub const CLRMAP_E_BAD_METADATA: HRESULT = 0x8004_C00B_u32 as HRESULT;
/// `bad_ready_to_run`: the ReadyToRun header or one of its sections is malformed.
pub const CLRMAP_E_BAD_READY_TO_RUN: HRESULT = 0x8004_C00C_u32 as HRESULT;
/// `unsupported_version`: a format version clrmap does not read.
pub const CLRMAP_E_UNSUPPORTED_VERSION: HRESULT = 0x8004_C00D_u32 as HRESULT;
/// `unsupported_machine`: a PE Machine whose ReadyToRun layout clrmap does not read.
pub const CLRMAP_E_UNSUPPORTED_MACHINE: HRESULT = 0x8004_C00E_u32 as HRESULT;
/// `bad_debug_info`: ReadyToRun debug info (bounds, variables) is malformed.
pub const CLRMAP_E_BAD_DEBUG_INFO: HRESULT = 0x8004_C00F_u32 as HRESULT;
/// `bad_trace`: an EventPipe (`.nettrace`) stream is malformed.
pub const CLRMAP_E_BAD_TRACE: HRESULT = 0x8004_C010_u32 as HRESULT;
/// `bad_capture`: a clrmap capture is malformed.
pub const CLRMAP_E_BAD_CAPTURE: HRESULT = 0x8004_C011_u32 as HRESULT;
/// `bad_pdb`: a portable PDB is malformed.
pub const CLRMAP_E_BAD_PDB: HRESULT = 0x8004_C012_u32 as HRESULT;
/// `unsupported_pdb`: a symbol file of an unknown format.
pub const CLRMAP_E_UNSUPPORTED_PDB: HRESULT = 0x8004_C013_u32 as HRESULT;
/// `not_found`: a look-up found nothing, where no runtime answer applies (where one does, as
/// for an unknown RVA or FunctionID, the answer is the runtime's E_INVALIDARG).
pub const CLRMAP_E_NOT_FOUND: HRESULT = 0x8004_C014_u32 as HRESULT;
/// `out_of_range`: a value out of the range its encoding can hold (a map over 4 GiB).
pub const CLRMAP_E_OUT_OF_RANGE: HRESULT = 0x8004_C015_u32 as HRESULT;
/// `bad_notation`: text in the type notation does not parse.
pub const CLRMAP_E_BAD_NOTATION: HRESULT = 0x8004_C016_u32 as HRESULT;
/// `unsupported_pdb_format`: a Windows (MSF) PDB, where only a portable PDB can be read.
pub const CLRMAP_E_UNSUPPORTED_PDB_FORMAT: HRESULT = 0x8004_C018_u32 as HRESULT;
/// A file that is none of the sources clrmap reads (no library kind: `ClrmapError::kind` is NULL).
pub const CLRMAP_E_UNRECOGNIZED_FILE: HRESULT = 0x8004_C017_u32 as HRESULT;

// One HRESULT per diagnostics-port error kind (`clrmap::diag::DiagErrorKind`, its id in comments),
// for the `_open_pid` calls: MAKE_HRESULT(1, FACILITY_ITF, 0xC1nn).

/// `no_such_process`: no process has this pid.
pub const CLRMAP_E_NO_SUCH_PROCESS: HRESULT = 0x8004_C101_u32 as HRESULT;
/// `not_dotnet`: the process has no .NET diagnostics socket (not .NET, or
/// `DOTNET_EnableDiagnostics=0`), or nothing listens on it any more.
pub const CLRMAP_E_NOT_DOTNET: HRESULT = 0x8004_C102_u32 as HRESULT;
/// `permission_denied`: the socket (or the process's `/proc` entry) belongs to another user.
pub const CLRMAP_E_PERMISSION_DENIED: HRESULT = 0x8004_C103_u32 as HRESULT;
/// `unsupported_command`: the runtime is too old for the command (it answered 0x80131385).
pub const CLRMAP_E_UNSUPPORTED_COMMAND: HRESULT = 0x8004_C104_u32 as HRESULT;
/// `server_error`: the runtime refused the request (its HRESULT is in the last error's message).
pub const CLRMAP_E_SERVER_ERROR: HRESULT = 0x8004_C105_u32 as HRESULT;
/// `protocol`: the socket does not speak the diagnostics protocol, or its stream is no nettrace.
pub const CLRMAP_E_PROTOCOL: HRESULT = 0x8004_C106_u32 as HRESULT;
/// `timeout`: the process went quiet for longer than the timeout.
pub const CLRMAP_E_TIMEOUT: HRESULT = 0x8004_C107_u32 as HRESULT;
/// `bad_argument`: a request the diagnostics client refused to send.
pub const CLRMAP_E_BAD_ARGUMENT: HRESULT = 0x8004_C108_u32 as HRESULT;
/// `io`: another I/O error on the diagnostics socket.
pub const CLRMAP_E_IO: HRESULT = 0x8004_C109_u32 as HRESULT;
/// `target_exited`: the process exited (or was killed) before it answered.
pub const CLRMAP_E_TARGET_EXITED: HRESULT = 0x8004_C10A_u32 as HRESULT;

/// The HRESULT of a library error kind: META_E_BAD_SIGNATURE for the signature kinds,
/// `CLRMAP_E_PDB_MISMATCH` for `pdb_mismatch`, a `CLRMAP_E_*` code of its own for each other kind,
/// E_FAIL for a kind newer than this crate.
pub fn hresult_of_kind(kind: ErrorKind) -> HRESULT {
    match kind {
        ErrorKind::BadCompressedInteger | ErrorKind::EmptyInstantiation | ErrorKind::BadElementType | ErrorKind::BadToken | ErrorKind::BadArrayShape | ErrorKind::BadCallingConvention => {
            CLRMAP_META_E_BAD_SIGNATURE
        }
        ErrorKind::Truncated => CLRMAP_E_TRUNCATED,
        ErrorKind::TruncatedHeader => CLRMAP_E_TRUNCATED_HEADER,
        ErrorKind::TruncatedDirectory => CLRMAP_E_TRUNCATED_DIRECTORY,
        ErrorKind::OffsetOutOfHeap => CLRMAP_E_OFFSET_OUT_OF_HEAP,
        ErrorKind::TruncatedItem => CLRMAP_E_TRUNCATED_ITEM,
        ErrorKind::ItemLengthMismatch => CLRMAP_E_ITEM_LENGTH_MISMATCH,
        ErrorKind::TooDeep => CLRMAP_E_TOO_DEEP,
        ErrorKind::Unsorted => CLRMAP_E_UNSORTED,
        ErrorKind::DuplicateRva => CLRMAP_E_DUPLICATE_RVA,
        ErrorKind::BadImage => CLRMAP_E_BAD_IMAGE,
        ErrorKind::BadMetadata => CLRMAP_E_BAD_METADATA,
        ErrorKind::BadReadyToRun => CLRMAP_E_BAD_READY_TO_RUN,
        ErrorKind::UnsupportedVersion => CLRMAP_E_UNSUPPORTED_VERSION,
        ErrorKind::UnsupportedMachine => CLRMAP_E_UNSUPPORTED_MACHINE,
        ErrorKind::BadDebugInfo => CLRMAP_E_BAD_DEBUG_INFO,
        ErrorKind::BadTrace => CLRMAP_E_BAD_TRACE,
        ErrorKind::BadCapture => CLRMAP_E_BAD_CAPTURE,
        ErrorKind::BadPdb => CLRMAP_E_BAD_PDB,
        ErrorKind::UnsupportedPdb => CLRMAP_E_UNSUPPORTED_PDB,
        ErrorKind::UnsupportedPdbFormat => CLRMAP_E_UNSUPPORTED_PDB_FORMAT,
        ErrorKind::PdbMismatch => CLRMAP_E_PDB_MISMATCH,
        ErrorKind::NotFound => CLRMAP_E_NOT_FOUND,
        ErrorKind::OutOfRange => CLRMAP_E_OUT_OF_RANGE,
        ErrorKind::BadNotation => CLRMAP_E_BAD_NOTATION,
        _ => E_FAIL,
    }
}

use CLRMAP_E_BAD_FILE_TYPE as E_BAD_FILE_TYPE;
use CLRMAP_E_FAIL as E_FAIL;
use CLRMAP_E_FILE_NOT_FOUND as E_FILE_NOT_FOUND;
use CLRMAP_E_INVALIDARG as E_INVALIDARG;
use CLRMAP_E_NOINTERFACE as E_NOINTERFACE;
use CLRMAP_E_NOTIMPL as E_NOTIMPL;
use CLRMAP_E_POINTER as E_POINTER;
use CLRMAP_S_FALSE as S_FALSE;
use CLRMAP_S_OK as S_OK;

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
const IUNKNOWN: GUID = GUID { Data1: 0, Data2: 0, Data3: 0, Data4: [0xC0, 0, 0, 0, 0, 0, 0, 0x46] };
const MEMORY_BUFFER: GUID = GUID { Data1: 0x6778_88B3, Data2: 0xD160, Data3: 0x4B8C, Data4: [0xA7, 0x3B, 0xD7, 0x9E, 0x6A, 0xAA, 0x1D, 0x13] };
const SYMBOL_PROVIDER2: GUID = GUID { Data1: 0xF980_1807, Data2: 0x4764, Data3: 0x4330, Data4: [0x9E, 0x67, 0x4F, 0x68, 0x50, 0x94, 0x16, 0x5E] };
const PROFILER_INFO: GUID = GUID { Data1: 0x28B5_557D, Data2: 0x3F3F, Data3: 0x48b4, Data4: [0x90, 0xB2, 0x5F, 0x9E, 0xEA, 0x2F, 0x6C, 0x48] };

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

fn guard(f: impl FnOnce() -> HRESULT) -> HRESULT {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| fail(E_FAIL, None, "an internal error (a panic, caught)"))
}

// ----------------------------------------------------------------------------------------------
// The last error: one per thread, set by every export that fails (symbolic-cabi's model).

/// `ClrmapError::location_kind`: the error has no place in any input.
pub const CLRMAP_LOCATION_NOWHERE: u32 = 0;
/// `ClrmapError::location_kind`: `location` is an absolute byte offset in the input.
pub const CLRMAP_LOCATION_OFFSET: u32 = 1;
/// `ClrmapError::location_kind`: `location` is an RVA asked about or pointed to.
pub const CLRMAP_LOCATION_RVA: u32 = 2;
/// `ClrmapError::location_kind`: `location` is an address in a traced process.
pub const CLRMAP_LOCATION_ADDRESS: u32 = 3;
/// `ClrmapError::location_kind`: `location` is a byte offset in the inflated bytes of a PDB
/// embedded (deflated) in the image, which is no offset of the image file itself.
pub const CLRMAP_LOCATION_INFLATED: u32 = 4;

/// The last error of the calling thread (`clrmap_last_error`). `kind` and `family` are static
/// strings; `expected` and `message` stay valid until the next clrmap call that fails on the same
/// thread, or `clrmap_clear_last_error`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ClrmapError {
    /// The HRESULT the failing call returned.
    pub hr: HRESULT,
    /// `CLRMAP_LOCATION_NOWHERE`, `..._OFFSET`, `..._RVA`, `..._ADDRESS` or `..._INFLATED`.
    pub location_kind: u32,
    /// The offset, RVA, address or offset in the inflated embedded PDB (0 for NOWHERE).
    pub location: u64,
    /// The error kind's stable id (`"bad_image"`, docs/output.md#error-kinds), or NULL when the failure is not a
    /// library error (a null argument, a file that cannot be opened, an unrecognized file).
    pub kind: *const c_char,
    /// The kind's family: `"parse"`, `"validity"` or `"resolve"`; NULL when `kind` is NULL.
    pub family: *const c_char,
    /// What was expected at the location (`"a ReadyToRun major from 3 to 27"`), or "".
    pub expected: *const c_char,
    /// The whole message, as the CLI prints it (`"bad_image at offset 60: expected ..."`).
    pub message: *const c_char,
}

/// The recorded failure of a thread.
struct LastError {
    hr: HRESULT,
    error: Option<clrmap::Error>,
    expected: CString,
    message: CString,
}

thread_local! {
    static LAST_ERROR: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// Record a failure as the thread's last error and return its HRESULT.
fn fail(hr: HRESULT, error: Option<&clrmap::Error>, message: &str) -> HRESULT {
    let last = LastError { hr, error: error.copied(), expected: c_string(error.map_or("", |e| e.expected)), message: c_string(message) };
    // A thread being torn down has no slot left: the HRESULT still answers.
    let _ = LAST_ERROR.try_with(|slot| slot.replace(Some(last)));
    hr
}

/// Record a library error (its kind's HRESULT).
fn fail_with(error: &clrmap::Error) -> HRESULT {
    fail(hresult_of_kind(error.kind), Some(error), &error.to_string())
}

/// Record a library error, answered with another HRESULT (the runtime's, where it has one).
fn fail_as(hr: HRESULT, error: &clrmap::Error) -> HRESULT {
    fail(hr, Some(error), &error.to_string())
}

/// A null pointer where one is required.
fn null_argument() -> HRESULT {
    fail(E_POINTER, None, "a required pointer argument is NULL")
}

/// The kind's id as a static C string.
fn kind_c_str(kind: ErrorKind) -> &'static CStr {
    match kind {
        ErrorKind::Truncated => c"truncated",
        ErrorKind::TruncatedHeader => c"truncated_header",
        ErrorKind::TruncatedDirectory => c"truncated_directory",
        ErrorKind::OffsetOutOfHeap => c"offset_out_of_heap",
        ErrorKind::TruncatedItem => c"truncated_item",
        ErrorKind::BadCompressedInteger => c"bad_compressed_integer",
        ErrorKind::ItemLengthMismatch => c"item_length_mismatch",
        ErrorKind::EmptyInstantiation => c"empty_instantiation",
        ErrorKind::BadElementType => c"bad_element_type",
        ErrorKind::BadToken => c"bad_token",
        ErrorKind::BadArrayShape => c"bad_array_shape",
        ErrorKind::BadCallingConvention => c"bad_calling_convention",
        ErrorKind::TooDeep => c"too_deep",
        ErrorKind::Unsorted => c"unsorted",
        ErrorKind::DuplicateRva => c"duplicate_rva",
        ErrorKind::BadImage => c"bad_image",
        ErrorKind::BadMetadata => c"bad_metadata",
        ErrorKind::BadReadyToRun => c"bad_ready_to_run",
        ErrorKind::UnsupportedVersion => c"unsupported_version",
        ErrorKind::UnsupportedMachine => c"unsupported_machine",
        ErrorKind::BadDebugInfo => c"bad_debug_info",
        ErrorKind::BadTrace => c"bad_trace",
        ErrorKind::BadCapture => c"bad_capture",
        ErrorKind::BadPdb => c"bad_pdb",
        ErrorKind::UnsupportedPdb => c"unsupported_pdb",
        ErrorKind::UnsupportedPdbFormat => c"unsupported_pdb_format",
        ErrorKind::PdbMismatch => c"pdb_mismatch",
        ErrorKind::NotFound => c"not_found",
        ErrorKind::OutOfRange => c"out_of_range",
        ErrorKind::BadNotation => c"bad_notation",
        _ => c"unknown",
    }
}

fn family_c_str(family: ErrorFamily) -> &'static CStr {
    match family {
        ErrorFamily::Parse => c"parse",
        ErrorFamily::Validity => c"validity",
        ErrorFamily::Resolve => c"resolve",
    }
}

/// The calling thread's last error: S_OK and `*out` filled when a clrmap call failed on this
/// thread since the last `clrmap_clear_last_error`; S_FALSE and `*out` zeroed (NULL strings) when
/// none did; E_POINTER for a NULL `out`. Successful calls leave the last error as it was.
#[no_mangle]
pub unsafe extern "C" fn clrmap_last_error(out: *mut ClrmapError) -> HRESULT {
    if out.is_null() {
        return E_POINTER;
    }
    let answer = catch_unwind(AssertUnwindSafe(|| {
        LAST_ERROR
            .try_with(|slot| {
                slot.borrow().as_ref().map(|last| {
                    let (location_kind, location) = match last.error.map(|e| e.location) {
                        Some(Location::Offset(o)) => (CLRMAP_LOCATION_OFFSET, o),
                        Some(Location::Rva(r)) => (CLRMAP_LOCATION_RVA, u64::from(r)),
                        Some(Location::Address(a)) => (CLRMAP_LOCATION_ADDRESS, a),
                        Some(Location::Inflated(o)) => (CLRMAP_LOCATION_INFLATED, o),
                        _ => (CLRMAP_LOCATION_NOWHERE, 0),
                    };
                    ClrmapError {
                        hr: last.hr,
                        location_kind,
                        location,
                        kind: last.error.map_or(std::ptr::null(), |e| kind_c_str(e.kind).as_ptr()),
                        family: last.error.map_or(std::ptr::null(), |e| family_c_str(e.kind.family()).as_ptr()),
                        expected: last.expected.as_ptr(),
                        message: last.message.as_ptr(),
                    }
                })
            })
            .ok()
            .flatten()
    }))
    .ok()
    .flatten();
    let none = ClrmapError { hr: S_OK, location_kind: CLRMAP_LOCATION_NOWHERE, location: 0, kind: std::ptr::null(), family: std::ptr::null(), expected: std::ptr::null(), message: std::ptr::null() };
    let hr = if answer.is_some() { S_OK } else { S_FALSE };
    // SAFETY: `out` is non-null and points to a writable ClrmapError, per the contract.
    unsafe { *out = answer.unwrap_or(none) };
    hr
}

/// Forget the calling thread's last error (and free its strings).
#[no_mangle]
pub extern "C" fn clrmap_clear_last_error() {
    let _ = catch_unwind(|| LAST_ERROR.try_with(|slot| slot.replace(None)));
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

/// A regular file's bytes, memory-mapped read-only, so that memory follows the pages a reader
/// touches, not the file's size. The library has no `unsafe`; this crate, which must have it
/// for C, is where mapping lives, and the `clrmap` CLI maps its inputs through it.
pub struct MappedFile(Storage);

impl core::ops::Deref for MappedFile {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl core::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "MappedFile({} bytes)", self.len())
    }
}

/// Map a regular file read-only. Anything else (a device, a FIFO, a directory) is refused
/// with `InvalidInput` before it is opened; an empty file is an empty slice.
pub fn map_file(path: &Path) -> std::io::Result<MappedFile> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let file = std::fs::File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Ok(MappedFile(Storage::Owned(Vec::new())));
    }
    // SAFETY: mapped read-only and never written through. Another process truncating the file
    // while it is mapped is outside what any mapped reader can defend (SIGBUS).
    let map = unsafe { memmap2::Mmap::map(&file) }?;
    Ok(MappedFile(Storage::Mapped(map)))
}

// ----------------------------------------------------------------------------------------------
// The interfaces as C sees them: an object is a pointer to its vtable pointer (`lpVtbl`), and the
// vtables list the methods in IDL order (cordebug.idl, corprof.idl), not the docs' alphabetical
// order (docs/format-notes.md#generic-dictionary-map).

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
/// The three calls follow the runtime (docs/format-notes.md#the-profiling-api): `cMap` and `*pcMap` count entries, not
/// bytes (the docs' "multiply by the struct size" is wrong); `*pcMap` always gets the full count; a
/// short buffer gets a partial copy and S_OK; `(0, &n, NULL)` is the size query; an unknown
/// function or code start, a null `pcMap`, or a null `map` with `cMap > 0` is E_INVALIDARG.
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

// ----------------------------------------------------------------------------------------------
// The objects behind the interfaces. Each is `#[repr(C)]` with its interface first, so the
// interface pointer handed to C is also a pointer to the object.

/// The object behind an `ICorDebugSymbolProvider2`.
#[repr(C)]
struct SymbolProvider {
    iface: ICorDebugSymbolProvider2,
    refs: AtomicU32,
    source: ProviderSource,
}

/// What a symbol provider serves.
enum ProviderSource {
    /// A generic dictionary map (`GetGenericDictionaryInfo`, `clrmap_dict_lookup`).
    Map {
        map: Arc<Storage>,
        /// Built once when the provider is made, for `clrmap_dict_lookup`.
        index: LookupIndex,
    },
    /// The frames of a ReadyToRun image (`GetFrameProps`).
    Image(FrameIndex),
}

/// The object behind an `ICorDebugMemoryBuffer`; it holds a reference to the map's storage.
#[repr(C)]
struct MemoryBuffer {
    iface: ICorDebugMemoryBuffer,
    refs: AtomicU32,
    map: Arc<Storage>,
}

/// The object behind an `ICorProfilerInfo`: the library's symbolization layer over the source.
#[repr(C)]
struct ProfilerInfo {
    iface: ICorProfilerInfo,
    refs: AtomicU32,
    sym: Symbolizer,
}

static SYMBOL_PROVIDER_VTBL: ICorDebugSymbolProvider2Vtbl = ICorDebugSymbolProvider2Vtbl {
    QueryInterface: query_interface::<SymbolProvider>,
    AddRef: add_ref::<SymbolProvider>,
    Release: release::<SymbolProvider>,
    GetGenericDictionaryInfo: sp_get_generic_dictionary_info,
    GetFrameProps: sp_get_frame_props,
};

static MEMORY_BUFFER_VTBL: ICorDebugMemoryBufferVtbl = ICorDebugMemoryBufferVtbl {
    QueryInterface: query_interface::<MemoryBuffer>,
    AddRef: add_ref::<MemoryBuffer>,
    Release: release::<MemoryBuffer>,
    GetStartAddress: mb_get_start_address,
    GetSize: mb_get_size,
};

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

/// What the shared IUnknown implementation needs from an object.
trait Unknown {
    /// The interface struct at the object's start.
    type Iface;
    /// The interface besides IUnknown that QueryInterface answers.
    const IID: GUID;
    fn refs(&self) -> &AtomicU32;
}

impl Unknown for SymbolProvider {
    type Iface = ICorDebugSymbolProvider2;
    const IID: GUID = SYMBOL_PROVIDER2;
    fn refs(&self) -> &AtomicU32 {
        &self.refs
    }
}

impl Unknown for MemoryBuffer {
    type Iface = ICorDebugMemoryBuffer;
    const IID: GUID = MEMORY_BUFFER;
    fn refs(&self) -> &AtomicU32 {
        &self.refs
    }
}

impl Unknown for ProfilerInfo {
    type Iface = ICorProfilerInfo;
    const IID: GUID = PROFILER_INFO;
    fn refs(&self) -> &AtomicU32 {
        &self.refs
    }
}

/// The object behind an interface pointer. Sound because every interface pointer clrmap hands out
/// points at the first field of a `#[repr(C)]` object of type `T` (see the structs above).
fn object<T: Unknown>(this: *mut T::Iface) -> *mut T {
    this.cast()
}

/// IUnknown::QueryInterface: IUnknown and `T::IID`; E_NOINTERFACE (and a null out) otherwise.
unsafe extern "C" fn query_interface<T: Unknown>(this: *mut T::Iface, iid: *const GUID, out: *mut *mut c_void) -> HRESULT {
    guard(|| {
        if out.is_null() {
            return null_argument();
        }
        // SAFETY: `iid` comes from the caller as a GUID pointer (checked for null inside).
        let ok = unsafe { iid_is(iid, &IUNKNOWN) || iid_is(iid, &T::IID) };
        // SAFETY: `out` is non-null; `this` is a live object the caller holds a reference to.
        unsafe {
            if ok {
                add_ref::<T>(this);
                *out = this.cast();
                S_OK
            } else {
                *out = std::ptr::null_mut();
                fail(E_NOINTERFACE, None, "an IID of IUnknown or of the object's interface")
            }
        }
    })
}

/// IUnknown::AddRef.
unsafe extern "C" fn add_ref<T: Unknown>(this: *mut T::Iface) -> u32 {
    let this = object::<T>(this);
    if this.is_null() {
        return 0;
    }
    // SAFETY: a non-null `this` is a live object created by `Box::into_raw`.
    unsafe { (*this).refs().fetch_add(1, Ordering::Relaxed).saturating_add(1) }
}

/// IUnknown::Release: the call that brings the count to 0 frees the object.
unsafe extern "C" fn release<T: Unknown>(this: *mut T::Iface) -> u32 {
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
}

/// Compare a caller's IID.
///
/// SAFETY (callers): `iid` is null or points to a GUID.
unsafe fn iid_is(iid: *const GUID, want: &GUID) -> bool {
    // SAFETY: per the caller's contract.
    !iid.is_null() && unsafe { *iid } == *want
}

unsafe extern "C" fn sp_get_generic_dictionary_info(this: *mut ICorDebugSymbolProvider2, out: *mut *mut ICorDebugMemoryBuffer) -> HRESULT {
    guard(|| {
        let this = object::<SymbolProvider>(this);
        if this.is_null() || out.is_null() {
            return null_argument();
        }
        // SAFETY: `this` is a live provider; the buffer shares its storage through the Arc.
        let ProviderSource::Map { map, .. } = (unsafe { &(*this).source }) else {
            return fail(E_NOTIMPL, None, "this provider serves a ReadyToRun image's frames, not a dictionary map");
        };
        let map = Arc::clone(map);
        let buffer = Box::new(MemoryBuffer { iface: ICorDebugMemoryBuffer { lpVtbl: &MEMORY_BUFFER_VTBL }, refs: AtomicU32::new(1), map });
        // SAFETY: `out` is non-null; the interface is the object's first field.
        unsafe { *out = Box::into_raw(buffer).cast() };
        S_OK
    })
}

/// `GetFrameProps`: over an image, the frame holding `rva` (cordebug.idl: "the method start rva
/// (pCodeStartRva) and parent frame's start rva (pParentFrameStartRva). If there is no parent
/// frame, then pParentFrameStartRva is set to 0"): for a main body the method's start and 0, for
/// a funclet the funclet's start and its method's (`clrmap::r2r::frames`). An RVA in no
/// RUNTIME_FUNCTION is E_INVALIDARG (both outs 0), as for an unknown RVA elsewhere; a provider over
/// a dictionary map answers E_NOTIMPL.
unsafe extern "C" fn sp_get_frame_props(this: *mut ICorDebugSymbolProvider2, rva: u32, start: *mut u32, parent: *mut u32) -> HRESULT {
    guard(|| {
        let this = object::<SymbolProvider>(this);
        if this.is_null() || start.is_null() || parent.is_null() {
            return null_argument();
        }
        // SAFETY: `this` is a live provider.
        let ProviderSource::Image(frames) = (unsafe { &(*this).source }) else {
            return fail(E_NOTIMPL, None, "this provider serves a dictionary map; open a ReadyToRun image with clrmap_symbol_provider_open_image for GetFrameProps");
        };
        let (hr, code_start, parent_start) = match frames.frame_props(rva) {
            Ok(p) => (S_OK, p.code_start, p.parent_frame_start_rva()),
            Err(e) if e.kind == ErrorKind::NotFound => (fail_as(E_INVALIDARG, &e), 0, 0),
            Err(e) => (fail_with(&e), 0, 0),
        };
        // SAFETY: both out-pointers are non-null.
        unsafe {
            *start = code_start;
            *parent = parent_start;
        }
        hr
    })
}

unsafe extern "C" fn mb_get_start_address(this: *mut ICorDebugMemoryBuffer, out: *mut *const c_void) -> HRESULT {
    let this = object::<MemoryBuffer>(this);
    if this.is_null() || out.is_null() {
        return null_argument();
    }
    // SAFETY: `this` is live; the address stays valid while the buffer is referenced.
    unsafe { *out = (*this).map.bytes().as_ptr().cast() };
    S_OK
}

unsafe extern "C" fn mb_get_size(this: *mut ICorDebugMemoryBuffer, out: *mut u32) -> HRESULT {
    let this = object::<MemoryBuffer>(this);
    if this.is_null() || out.is_null() {
        return null_argument();
    }
    // SAFETY: `this` is live; maps over 4 GiB are refused when opened.
    unsafe { *out = u32::try_from((*this).map.bytes().len()).unwrap_or(u32::MAX) };
    S_OK
}

/// Check a map strictly (a full validation) and make a provider.
///
/// SAFETY (callers): `out` is non-null and writable.
unsafe fn new_provider(storage: Storage, out: *mut *mut ICorDebugSymbolProvider2) -> HRESULT {
    if u32::try_from(storage.bytes().len()).is_err() {
        return fail_with(&clrmap::Error::nowhere(ErrorKind::OutOfRange, "a dictionary map under 4 GiB (GetSize is a ULONG32)"));
    }
    let index = match DictionaryMap::parse(storage.bytes()).and_then(|m| m.validate().and_then(|()| LookupIndex::new(&m, SortedFlag::Verify))) {
        Ok(index) => index,
        Err(e) => return fail_with(&e),
    };
    // SAFETY: per the caller's contract.
    unsafe { publish_provider(ProviderSource::Map { map: Arc::new(storage), index }, out) }
}

/// Box a provider and hand its interface to C.
///
/// SAFETY (callers): `out` is non-null and writable.
unsafe fn publish_provider(source: ProviderSource, out: *mut *mut ICorDebugSymbolProvider2) -> HRESULT {
    let p = Box::new(SymbolProvider { iface: ICorDebugSymbolProvider2 { lpVtbl: &SYMBOL_PROVIDER_VTBL }, refs: AtomicU32::new(1), source });
    // SAFETY: per the caller's contract; the interface is the object's first field.
    unsafe { *out = Box::into_raw(p).cast() };
    S_OK
}

/// A regular file mapped, or the HRESULT (recorded) of why not: `CLRMAP_E_BAD_FILE_TYPE` for a
/// device, FIFO or directory, HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND) for a file that cannot be
/// opened.
fn map_for_c(path: &str) -> Result<MappedFile, HRESULT> {
    map_file(Path::new(path)).map_err(|e| {
        let hr = if e.kind() == std::io::ErrorKind::InvalidInput { E_BAD_FILE_TYPE } else { E_FILE_NOT_FOUND };
        fail(hr, None, &format!("cannot read {path}: {e}"))
    })
}

/// Open a ReadyToRun image as an `ICorDebugSymbolProvider2` that serves `GetFrameProps`: the
/// image's RUNTIME_FUNCTIONs are indexed by method when it is opened, and the file is not kept.
/// `GetGenericDictionaryInfo` and `clrmap_dict_lookup` answer E_NOTIMPL on it. A malformed image
/// gives its kind's HRESULT (`clrmap_last_error` says where).
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbol_provider_open_image(path: *const c_char, out: *mut *mut ICorDebugSymbolProvider2) -> HRESULT {
    guard(|| {
        if path.is_null() || out.is_null() {
            return null_argument();
        }
        // SAFETY: the caller passes a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned();
        let bytes = match map_for_c(&path) {
            Ok(b) => b,
            Err(hr) => return hr,
        };
        let frames = match ReadyToRunImage::parse(&bytes).and_then(|image| FrameIndex::new(&image)) {
            Ok(f) => f,
            Err(e) => return fail_with(&e),
        };
        // SAFETY: `out` is non-null.
        unsafe { publish_provider(ProviderSource::Image(frames), out) }
    })
}

/// Open a dictionary map file (memory-mapped) as an `ICorDebugSymbolProvider2`.
///
/// The map is validated strictly: a malformed one gives its kind's HRESULT (META_E_BAD_SIGNATURE
/// for a bad signature, `CLRMAP_E_UNSORTED` for an unsorted map ...), a missing file
/// HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND), a null argument E_POINTER. Release the object with
/// its `Release`.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbol_provider_open(path: *const c_char, out: *mut *mut ICorDebugSymbolProvider2) -> HRESULT {
    guard(|| {
        if path.is_null() || out.is_null() {
            return null_argument();
        }
        // SAFETY: the caller passes a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned();
        // Only regular files: a FIFO would block the open, a device has no end.
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => return fail(E_BAD_FILE_TYPE, None, &format!("{path}: not a regular file")),
            Err(e) => return fail(E_FILE_NOT_FOUND, None, &format!("cannot read {path}: {e}")),
        }
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) => return fail(E_FILE_NOT_FOUND, None, &format!("cannot read {path}: {e}")),
        };
        // SAFETY: the file is mapped read-only; clrmap never writes through it. Another process
        // truncating the file while it is mapped is outside what any mapped reader can defend.
        let storage = match unsafe { memmap2::Mmap::map(&file) } {
            Ok(m) => Storage::Mapped(m),
            Err(_) => match clrmap::fs::read_regular(Path::new(&path), clrmap::fs::MAX_FILE) {
                Ok(v) => Storage::Owned(v),
                Err(e) => return fail(E_FAIL, None, &format!("cannot read {path}: {e}")),
            },
        };
        // SAFETY: `out` is non-null.
        unsafe { new_provider(storage, out) }
    })
}

/// Make an `ICorDebugSymbolProvider2` over a copy of the `len` bytes at `data`, validated as
/// `clrmap_symbol_provider_open` validates a file.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbol_provider_from_memory(data: *const u8, len: usize, out: *mut *mut ICorDebugSymbolProvider2) -> HRESULT {
    guard(|| {
        if data.is_null() || out.is_null() {
            return null_argument();
        }
        // SAFETY: the caller passes `len` readable bytes at `data`.
        let bytes = unsafe { std::slice::from_raw_parts(data, len) }.to_vec();
        // SAFETY: `out` is non-null.
        unsafe { new_provider(Storage::Owned(bytes), out) }
    })
}

/// The types of the dictionary at `rva`, rendered as docs/output.md#type-signatures says with `0x` tokens, one
/// per line (joined by `\n`), through the two-call protocol.
///
/// `*pcb` always receives the size needed, NUL included. With `buf` null or `cb` too small,
/// nothing is written and the result is S_FALSE. E_INVALIDARG if no entry has this RVA.
#[no_mangle]
pub unsafe extern "C" fn clrmap_dict_lookup(provider: *mut ICorDebugSymbolProvider2, rva: u32, buf: *mut c_char, cb: u32, pcb: *mut u32) -> HRESULT {
    guard(|| {
        let provider = object::<SymbolProvider>(provider);
        if provider.is_null() || pcb.is_null() {
            return null_argument();
        }
        // SAFETY: `provider` is a live provider object.
        let ProviderSource::Map { map, index } = (unsafe { &(*provider).source }) else {
            return fail(E_NOTIMPL, None, "this provider serves a ReadyToRun image's frames, not a dictionary map");
        };
        // Parsing is O(1) (header and bounds); the index was built when the provider was made.
        let map = match DictionaryMap::parse(map.bytes()) {
            Ok(m) => m,
            Err(e) => return fail_with(&e),
        };
        let Some(entry) = index.find(&map, rva) else {
            return fail_as(E_INVALIDARG, &clrmap::Error::at_rva(ErrorKind::NotFound, rva, "an RVA that a dictionary entry has"));
        };
        let types = match map.item_of(&entry).and_then(|i| i.render(&HexTokens)) {
            Ok(t) => t,
            Err(e) => return fail_with(&e),
        };
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

unsafe extern "C" fn pi_not_impl(_this: *mut ICorProfilerInfo) -> HRESULT {
    E_NOTIMPL
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
    guard(|| {
        // SAFETY: COM arguments as documented for GetILToNativeMapping.
        let (Some(store), (pc, m)) = (unsafe { store(this) }, unsafe { protocol_args(c_map, pc_map, map) }) else { return null_argument() };
        map_call_result(store.get_il_to_native_mapping(fid as u64, c_map, pc, m))
    })
}

unsafe extern "C" fn pi_map2(this: *mut ICorProfilerInfo, fid: FunctionID, rejit: ReJITID, c_map: u32, pc_map: *mut u32, map: *mut COR_DEBUG_IL_TO_NATIVE_MAP) -> HRESULT {
    guard(|| {
        // SAFETY: COM arguments as documented for GetILToNativeMapping2.
        let (Some(store), (pc, m)) = (unsafe { store(this) }, unsafe { protocol_args(c_map, pc_map, map) }) else { return null_argument() };
        map_call_result(store.get_il_to_native_mapping2(fid as u64, rejit as u64, c_map, pc, m))
    })
}

unsafe extern "C" fn pi_map3(this: *mut ICorProfilerInfo, start: usize, c_map: u32, pc_map: *mut u32, map: *mut COR_DEBUG_IL_TO_NATIVE_MAP) -> HRESULT {
    guard(|| {
        // SAFETY: COM arguments as documented for GetILToNativeMapping3.
        let (Some(store), (pc, m)) = (unsafe { store(this) }, unsafe { protocol_args(c_map, pc_map, map) }) else { return null_argument() };
        map_call_result(store.get_il_to_native_mapping3(start as u64, c_map, pc, m))
    })
}

/// Record a failed IL-map call: E_INVALIDARG, the runtime's answer for an unknown function or
/// code start, or a null `pcMap` or `map` with `cMap > 0`.
fn map_call_result(hr: HRESULT) -> HRESULT {
    if hr == E_INVALIDARG {
        return fail(hr, None, "no code body has this FunctionID or code start, or pcMap is NULL, or map is NULL with cMap > 0");
    }
    hr
}

/// Open a ReadyToRun image, a `.nettrace` or a clrmap capture as an `ICorProfilerInfo`-shaped
/// object. For an image, a body's FunctionID and code start are both its code-start RVA.
///
/// All bodies are decoded when the file is opened, so each later call is a lookup (BENCHMARKS.md
/// has both costs). A missing file is HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND), a malformed one
/// its kind's HRESULT (`clrmap_last_error` says where).
#[no_mangle]
pub unsafe extern "C" fn clrmap_profiler_info_open(path: *const c_char, out: *mut *mut ICorProfilerInfo) -> HRESULT {
    guard(|| {
        if path.is_null() || out.is_null() {
            return null_argument();
        }
        // SAFETY: the caller passes a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned();
        let sym = match Symbolizer::open(Path::new(&path), Options::default()) {
            Ok(sym) => sym,
            Err(e) => return open_hresult(&e),
        };
        let info = Box::new(ProfilerInfo { iface: ICorProfilerInfo { lpVtbl: &PROFILER_INFO_VTBL }, refs: AtomicU32::new(1), sym });
        // SAFETY: `out` is non-null; the interface is the object's first field.
        unsafe { *out = Box::into_raw(info).cast() };
        S_OK
    })
}

/// The HRESULT of a diagnostics-port error kind: a `CLRMAP_E_*` code of its own for each.
pub fn hresult_of_diag_kind(kind: DiagErrorKind) -> HRESULT {
    match kind {
        DiagErrorKind::NoSuchProcess => CLRMAP_E_NO_SUCH_PROCESS,
        DiagErrorKind::NotDotnet => CLRMAP_E_NOT_DOTNET,
        DiagErrorKind::PermissionDenied => CLRMAP_E_PERMISSION_DENIED,
        DiagErrorKind::UnsupportedCommand => CLRMAP_E_UNSUPPORTED_COMMAND,
        DiagErrorKind::ServerError => CLRMAP_E_SERVER_ERROR,
        DiagErrorKind::Protocol => CLRMAP_E_PROTOCOL,
        DiagErrorKind::Timeout => CLRMAP_E_TIMEOUT,
        DiagErrorKind::BadArgument => CLRMAP_E_BAD_ARGUMENT,
        DiagErrorKind::Io => CLRMAP_E_IO,
        DiagErrorKind::TargetExited => CLRMAP_E_TARGET_EXITED,
        // The C ABI sets no cancel flag.
        DiagErrorKind::Interrupted => E_FAIL,
    }
}

/// A rundown snapshot of process `pid` (`clrmap::diag::snapshot`), indexed: its HRESULT, recorded as
/// the thread's last error, when it fails. `timeout_ms` bounds the whole snapshot; 0 is the default (10 s).
fn open_pid(pid: u32, timeout_ms: u32, options: Options) -> Result<Symbolizer, HRESULT> {
    let timeout = if timeout_ms == 0 { diag::DEFAULT_TIMEOUT } else { Duration::from_millis(u64::from(timeout_ms)) };
    let opened = diag::snapshot(pid, timeout).map_err(|e| fail(hresult_of_diag_kind(e.kind), None, &format!("cannot take a snapshot of process {pid}: {e}")))?;
    Symbolizer::from_opened(opened, None, options).map_err(|e| open_hresult(&e))
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
    guard(|| {
        if out.is_null() {
            return null_argument();
        }
        let sym = match open_pid(pid, timeout_ms, Options::default()) {
            Ok(sym) => sym,
            Err(hr) => return hr,
        };
        let info = Box::new(ProfilerInfo { iface: ICorProfilerInfo { lpVtbl: &PROFILER_INFO_VTBL }, refs: AtomicU32::new(1), sym });
        // SAFETY: `out` is non-null; the interface is the object's first field.
        unsafe { *out = Box::into_raw(info).cast() };
        S_OK
    })
}

/// The FunctionIDs, sorted, through the two-call protocol: `*pc` always gets the count; S_FALSE
/// if `ids` is null or `c` is too small.
#[no_mangle]
pub unsafe extern "C" fn clrmap_profiler_info_function_ids(info: *mut ICorProfilerInfo, ids: *mut u64, c: u32, pc: *mut u32) -> HRESULT {
    guard(|| {
        // SAFETY: `info` is null or live.
        let Some(store) = (unsafe { store(info) }) else { return null_argument() };
        if pc.is_null() {
            return null_argument();
        }
        let all = store.function_ids();
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
/// IL offset there, by the runtime's stack-trace rule for a leaf frame (docs/output.md#frame-rules), with the
/// entry kind kept: PROLOG, EPILOG and NO_MAPPING as their ULONG32 values. E_INVALIDARG outside
/// every body. `clrmap_symbolizer_symbolize` gives the source line too.
#[no_mangle]
pub unsafe extern "C" fn clrmap_profiler_info_symbolize(info: *mut ICorProfilerInfo, address: u64, functionId: *mut u64, ilOffset: *mut u32) -> HRESULT {
    guard(|| {
        // SAFETY: `info` is null or live.
        let Some(o) = (unsafe { object::<ProfilerInfo>(info).as_ref() }) else { return null_argument() };
        if functionId.is_null() || ilOffset.is_null() {
            return null_argument();
        }
        let f = o.sym.symbolize(address, FrameKind::Leaf);
        let Some(fid) = f.function_id else {
            return fail_as(E_INVALIDARG, &clrmap::Error::at_address(ErrorKind::NotFound, address, "an address inside a code body"));
        };
        let il = match f.region {
            Some(IlOffset::Il(_)) => f.il_offset.unwrap_or(0),
            Some(special) => special.to_raw(),
            None => IlOffset::NoMapping.to_raw(),
        };
        // SAFETY: both out-pointers are non-null.
        unsafe {
            *functionId = fid;
            *ilOffset = il;
        }
        S_OK
    })
}

/// The HRESULT of a source that did not open, recorded as the thread's last error: a path that is
/// not a regular file is `CLRMAP_E_BAD_FILE_TYPE`, one that cannot be read
/// HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND), a malformed file its kind's HRESULT, a file of no
/// known format `CLRMAP_E_UNRECOGNIZED_FILE`. A torn trace or capture opens (S_OK) with every whole
/// record.
fn open_hresult(e: &OpenError) -> HRESULT {
    let message = e.to_string();
    match e {
        OpenError::Io { error, .. } if error.kind() == std::io::ErrorKind::InvalidInput => fail(E_BAD_FILE_TYPE, None, &message),
        OpenError::Io { .. } => fail(E_FILE_NOT_FOUND, None, &message),
        OpenError::Input { error, .. } => fail(hresult_of_kind(error.kind), Some(error), &message),
        OpenError::Unrecognized { .. } => fail(CLRMAP_E_UNRECOGNIZED_FILE, None, &message),
    }
}

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

/// One symbolized address (docs/output.md#symbolized-frames). Strings are owned by the symbolizer and live until it is
/// released; a field that is not known is NULL or 0, and `flags` says which are known.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ClrmapFrame {
    /// The address asked about.
    pub address: u64,
    /// `CLRMAP_FRAME_METHOD` | `CLRMAP_FRAME_LINE`.
    pub flags: u32,
    /// The MethodDef token.
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
    // SAFETY: the same contract, with no symbol servers.
    unsafe { clrmap_symbolizer_open_with_servers(source, pdb, symbol_paths, count, std::ptr::null(), out) }
}

/// Open a symbolizer over a running .NET process (Core 3.0+): a rundown snapshot of its jitted
/// methods, as `clrmap_profiler_info_open_pid` takes it (`timeout_ms`, 0: 10 s; the same
/// HRESULT per diagnostics error kind). `pdb`, `symbol_paths` and `count` are those of
/// `clrmap_symbolizer_open`; the modules' PDBs are looked for beside the paths the process loaded
/// them from, then in `symbol_paths`.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_open_pid(pid: u32, timeout_ms: u32, pdb: *const c_char, symbol_paths: *const *const c_char, count: u32, out: *mut *mut ClrmapSymbolizer) -> HRESULT {
    guard(|| {
        if out.is_null() || (count > 0 && symbol_paths.is_null()) {
            return null_argument();
        }
        // SAFETY: NUL-terminated strings, and `count` of them at `symbol_paths`, per the contract.
        let options = match unsafe { symbol_options(pdb, symbol_paths, count) } {
            Some(o) => o,
            None => return null_argument(),
        };
        let sym = match open_pid(pid, timeout_ms, options) {
            Ok(sym) => sym,
            Err(hr) => return hr,
        };
        let boxed = Box::new(ClrmapSymbolizer { sym, strings: Mutex::new(HashMap::new()) });
        // SAFETY: `out` is non-null.
        unsafe { *out = Box::into_raw(boxed) };
        S_OK
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
    /// A C copy of `s`, made once and kept.
    fn c_str(&self, s: Option<&str>) -> *const c_char {
        let Some(s) = s else { return std::ptr::null() };
        let Ok(mut strings) = self.strings.lock() else { return std::ptr::null() };
        let key = (s.as_ptr() as usize, s.len());
        strings.entry(key).or_insert_with(|| CString::new(s.replace('\0', "")).unwrap_or_default()).as_ptr()
    }
}

/// Symbolize one address (`kind`: `CLRMAP_FRAME_LEAF`, `..._RETURN_ADDRESS`,
/// `..._RETURN_ADDRESS_CLR31`). S_OK when a body holds it, S_FALSE when none does (then only
/// `address` is set), E_INVALIDARG for an unknown kind.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_symbolize(sym: *const ClrmapSymbolizer, address: u64, kind: u32, out: *mut ClrmapFrame) -> HRESULT {
    guard(|| {
        // SAFETY: `sym` is null or live.
        let Some(s) = (unsafe { sym.as_ref() }) else { return null_argument() };
        if out.is_null() {
            return null_argument();
        }
        let kind = match s.frame_kind(kind) {
            Ok(k) => k,
            Err(hr) => return hr,
        };
        let f = s.sym.symbolize(address, kind);
        let frame = s.c_frame(address, f.module, f.token, f.method, f.il_offset, f.file, [f.line, f.column, f.end_line, f.end_column]);
        // SAFETY: `out` is non-null.
        unsafe { *out = frame };
        if f.token.is_some() {
            S_OK
        } else {
            S_FALSE
        }
    })
}

/// The SourceLink URL of the document of the line `clrmap_symbolizer_symbolize` gives `address`
/// (the PDB's SourceLink map applied to the document's name), by the two-call protocol of
/// `clrmap_dict_lookup`: `*pcb` always receives the size needed, NUL included; with `buf` NULL
/// or `cb` too small nothing is written and the result is S_FALSE. `CLRMAP_E_NOT_FOUND` (and
/// `*pcb` 0) when the frame has no line, or its PDB no URL for the document.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_source_link(sym: *const ClrmapSymbolizer, address: u64, kind: u32, buf: *mut c_char, cb: u32, pcb: *mut u32) -> HRESULT {
    guard(|| {
        // SAFETY: `sym` is null or live.
        let Some(s) = (unsafe { sym.as_ref() }) else { return null_argument() };
        if pcb.is_null() {
            return null_argument();
        }
        let kind = match s.frame_kind(kind) {
            Ok(k) => k,
            Err(hr) => return hr,
        };
        let Some(url) = s.sym.symbolize(address, kind).source_link else {
            // SAFETY: `pcb` is non-null.
            unsafe { *pcb = 0 };
            return fail(CLRMAP_E_NOT_FOUND, None, "a frame whose document has a SourceLink URL");
        };
        let need = u32::try_from(url.len().saturating_add(1)).unwrap_or(u32::MAX);
        // SAFETY: `pcb` is non-null.
        unsafe { *pcb = need };
        if buf.is_null() || cb < need {
            return S_FALSE;
        }
        // SAFETY: the caller's buffer holds `cb` ≥ `need` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(url.as_ptr(), buf.cast::<u8>(), url.len());
            *buf.add(url.len()) = 0;
        }
        S_OK
    })
}

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
    guard(|| {
        if source.is_null() || out.is_null() || (count > 0 && symbol_paths.is_null()) {
            return null_argument();
        }
        // SAFETY: NUL-terminated strings, and `count` of them at `symbol_paths`, per the contract.
        let Some(mut options) = (unsafe { symbol_options(pdb, symbol_paths, count) }) else { return null_argument() };
        // SAFETY: `servers` is NULL or points at a live ClrmapSymbolServers, per the contract.
        if let Some(servers) = unsafe { servers.as_ref() } {
            // SAFETY: its strings are NUL-terminated and `count` of them are at `servers`.
            match unsafe { symbol_servers(servers) } {
                Some(s) => options.symbols.servers = s,
                None => return null_argument(),
            }
        }
        // SAFETY: `source` is NUL-terminated.
        let source = unsafe { CStr::from_ptr(source) }.to_string_lossy().into_owned();
        let sym = match Symbolizer::open(Path::new(&source), options) {
            Ok(sym) => sym,
            Err(e) => return open_hresult(&e),
        };
        let boxed = Box::new(ClrmapSymbolizer { sym, strings: Mutex::new(HashMap::new()) });
        // SAFETY: `out` is non-null.
        unsafe { *out = Box::into_raw(boxed) };
        S_OK
    })
}

/// The library's symbol servers for a `ClrmapSymbolServers`; `None` if a pointer in it is NULL
/// where strings are promised. No server at all is `Some(None)`.
///
/// SAFETY (callers): `s.servers` holds `s.count` pointers, each NULL or NUL-terminated; `s.cache`
/// is NULL or NUL-terminated.
unsafe fn symbol_servers(s: &ClrmapSymbolServers) -> Option<Option<std::sync::Arc<clrmap::symsrv::SymbolServers>>> {
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
        config.timeout = std::time::Duration::from_millis(u64::from(s.timeout_ms));
    }
    Some(Some(std::sync::Arc::new(clrmap::symsrv::SymbolServers::new(config))))
}

impl ClrmapSymbolizer {
    /// The library's frame kind for a `CLRMAP_FRAME_*` kind (the return-address rule follows the
    /// runtime the source recorded); `E_INVALIDARG` for another value.
    fn frame_kind(&self, kind: u32) -> Result<FrameKind, HRESULT> {
        match kind {
            CLRMAP_FRAME_LEAF => Ok(FrameKind::Leaf),
            CLRMAP_FRAME_RETURN_ADDRESS => Ok(FrameKind::ReturnAddress.for_runtime(self.sym.runtime_major())),
            CLRMAP_FRAME_RETURN_ADDRESS_CLR31 => Ok(FrameKind::ReturnAddressAsIs),
            _ => Err(fail(E_INVALIDARG, None, "a kind of CLRMAP_FRAME_LEAF, CLRMAP_FRAME_RETURN_ADDRESS or CLRMAP_FRAME_RETURN_ADDRESS_CLR31")),
        }
    }

    /// A `ClrmapFrame` of the library's frame fields.
    #[allow(clippy::too_many_arguments)]
    fn c_frame(&self, address: u64, module: Option<&str>, token: Option<u32>, method: Option<&str>, il: Option<u32>, file: Option<&str>, line: [Option<u32>; 4]) -> ClrmapFrame {
        let [l, c, el, ec] = line;
        let flags = if token.is_some() { CLRMAP_FRAME_METHOD } else { 0 } | if l.is_some() { CLRMAP_FRAME_LINE } else { 0 } | if il.is_some() { CLRMAP_FRAME_IL_OFFSET } else { 0 };
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

/// Symbolize one address with its inlined frames (docs/output.md#inlined-frames), by the two-call
/// protocol of `GetILToNativeMapping`: the frames go to `frames` (room for `capacity`), innermost
/// inlinee first and the physical method at the outermost call site last; `*count` is how many
/// there are, also when they did not all fit (call again with that many). Where no inline tree
/// covers the address (or the source has none) there is one frame, exactly
/// `clrmap_symbolizer_symbolize`'s. `kind` and the HRESULTs are those of
/// `clrmap_symbolizer_symbolize`; `frames` may be NULL when `capacity` is 0.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_symbolize_inlined(sym: *const ClrmapSymbolizer, address: u64, kind: u32, frames: *mut ClrmapFrame, capacity: u32, count: *mut u32) -> HRESULT {
    guard(|| {
        // SAFETY: `sym` is null or live.
        let Some(s) = (unsafe { sym.as_ref() }) else { return null_argument() };
        if count.is_null() || (capacity > 0 && frames.is_null()) {
            return null_argument();
        }
        let kind = match s.frame_kind(kind) {
            Ok(k) => k,
            Err(hr) => return hr,
        };
        let (f, inlined) = s.sym.symbolize_inlined(address, kind);
        let all = inlined.iter().map(|i| s.c_frame(address, i.module, i.token, i.method, i.il_offset, i.file, [i.line, i.column, i.end_line, i.end_column])).chain(std::iter::once(s.c_frame(
            address,
            f.module,
            f.token,
            f.method,
            f.il_offset,
            f.file,
            [f.line, f.column, f.end_line, f.end_column],
        )));
        let mut n: u32 = 0;
        for (i, frame) in all.enumerate() {
            if (i as u64) < u64::from(capacity) {
                // SAFETY: `frames` has room for `capacity` frames, and i < capacity.
                unsafe { *frames.add(i) = frame };
            }
            n = n.saturating_add(1);
        }
        // SAFETY: `count` is non-null.
        unsafe { *count = n };
        if f.token.is_some() {
            S_OK
        } else {
            S_FALSE
        }
    })
}

/// Release a symbolizer and every string its frames pointed to. NULL is allowed.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_release(sym: *mut ClrmapSymbolizer) {
    if sym.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: made by Box::into_raw in clrmap_symbolizer_open, released once.
        drop(unsafe { Box::from_raw(sym) });
    }));
}

//! HRESULTs: the COM codes every export answers, one of clrmap's own per library error kind and
//! per diagnostics-port error kind, and the maps from those kinds to them.

use clrmap::diag::DiagErrorKind;
use clrmap::ErrorKind;

/// A COM `HRESULT`.
pub type HRESULT = i32;

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

// Short names for this crate's code, as the IDL spells them.
pub(crate) use CLRMAP_E_BAD_FILE_TYPE as E_BAD_FILE_TYPE;
pub(crate) use CLRMAP_E_FAIL as E_FAIL;
pub(crate) use CLRMAP_E_FILE_NOT_FOUND as E_FILE_NOT_FOUND;
pub(crate) use CLRMAP_E_INVALIDARG as E_INVALIDARG;
pub(crate) use CLRMAP_E_NOINTERFACE as E_NOINTERFACE;
pub(crate) use CLRMAP_E_NOTIMPL as E_NOTIMPL;
pub(crate) use CLRMAP_E_POINTER as E_POINTER;
pub(crate) use CLRMAP_S_FALSE as S_FALSE;
pub(crate) use CLRMAP_S_OK as S_OK;

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

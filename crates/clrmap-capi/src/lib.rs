//! The C ABI of clrmap: the two seed interfaces as COM-shaped objects for C and C++ debuggers and
//! profilers (`include/clrmap.h`).
//!
//! * `ICorDebugSymbolProvider2`-shaped objects serve a generic dictionary map
//!   (`GetGenericDictionaryInfo`, IDL slot 3), handing out `ICorDebugMemoryBuffer` objects that
//!   keep the map alive, or the frames of a ReadyToRun image (`GetFrameProps`, slot 4).
//! * `ICorProfilerInfo`-shaped objects serve IL-to-native maps from a ReadyToRun image, a
//!   `.nettrace` or a capture, at the IDL slots of `GetILToNativeMapping` (35),
//!   `GetILToNativeMapping2` (78) and `GetILToNativeMapping3` (91); every other slot is E_NOTIMPL.
//! * Symbolizers (`clrmap_symbolizer_*`) give any address its method, IL offset and source line.
//!
//! Errors: each library [`clrmap::ErrorKind`] has its own HRESULT (`hresult_of_kind`), and every
//! export that fails records the thread's last error (`clrmap_last_error`): the HRESULT, the
//! kind's id, the location and what was expected there.
//!
//! Safety: every export runs inside one landing pad (`ffi_fn!`, in `errors`), which catches
//! panics and records failures; null pointers give E_POINTER (out-pointers of the COM plumbing) or
//! E_INVALIDARG (the profiler calls, as the runtime answers); objects are opaque and
//! reference-counted with atomics. Each `unsafe` block says why it is sound.
//!
//! One module per interface. cbindgen writes the header's constants, statics and functions in
//! source order, a module's own items before its submodules', so the order of the modules below
//! is the header's order: keep it when adding one.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
// COM objects and vtables are opaque to Rust callers; Debug would print raw pointers only.
#![allow(missing_debug_implementations)]
// The C names of cordebug.idl and corprof.idl, so that cbindgen writes the header C users expect.
#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals)]

/// HRESULTs and the maps from error kinds to them.
mod hresult;
pub use hresult::*;
/// The thread's last error, and the landing pad (`ffi_fn!`) every export runs in.
#[macro_use]
mod errors;
pub use errors::*;
/// GUIDs, the interfaces and vtables, and the IUnknown methods the objects share.
mod com;
pub use com::*;
/// `ICorDebugMemoryBuffer`, and text copied into a caller's buffer.
mod buffers;
/// `ICorDebugSymbolProvider2`: dictionary maps and ReadyToRun frames.
mod provider;
/// The bytes behind a provider: memory-mapped files or owned copies.
mod storage;
pub use provider::*;
/// `ICorProfilerInfo`: IL-to-native maps.
mod profiler_info;
pub use profiler_info::*;
/// Running processes, through the diagnostics port.
mod pid;
/// Symbolizers: addresses to methods, IL offsets and lines; SourceLink; symbol servers.
mod symbolizer;
pub use symbolizer::*;

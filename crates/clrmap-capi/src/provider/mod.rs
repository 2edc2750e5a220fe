//! `ICorDebugSymbolProvider2`-shaped objects: over a generic dictionary map
//! (`GetGenericDictionaryInfo`, `clrmap_dict_lookup`; [`dictionary`]) or over the frames of a
//! ReadyToRun image (`GetFrameProps`; [`frames`]).
//!
//! The exports of the submodules reach the header in the order they are declared here (cbindgen
//! writes functions in source order), which is the header's order.

use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use clrmap::gdmap::LookupIndex;
use clrmap::r2r::frames::FrameIndex;

use crate::com::{add_ref, query_interface, release, ICorDebugSymbolProvider2, ICorDebugSymbolProvider2Vtbl, Unknown, GUID, SYMBOL_PROVIDER2};
use crate::hresult::{HRESULT, S_OK};
use crate::storage::Storage;

mod frames;
pub use frames::*;
mod dictionary;
pub use dictionary::*;

/// The object behind an `ICorDebugSymbolProvider2`. `#[repr(C)]` with its interface first, so the
/// interface pointer handed to C is also a pointer to the object.
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

static SYMBOL_PROVIDER_VTBL: ICorDebugSymbolProvider2Vtbl = ICorDebugSymbolProvider2Vtbl {
    QueryInterface: query_interface::<SymbolProvider>,
    AddRef: add_ref::<SymbolProvider>,
    Release: release::<SymbolProvider>,
    GetGenericDictionaryInfo: dictionary::sp_get_generic_dictionary_info,
    GetFrameProps: frames::sp_get_frame_props,
};

impl Unknown for SymbolProvider {
    type Iface = ICorDebugSymbolProvider2;
    const IID: GUID = SYMBOL_PROVIDER2;
    fn refs(&self) -> &AtomicU32 {
        &self.refs
    }
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

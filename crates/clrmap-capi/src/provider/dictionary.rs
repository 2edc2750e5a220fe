//! A symbol provider over a generic dictionary map: `GetGenericDictionaryInfo` and
//! `clrmap_dict_lookup`.

use std::ffi::{c_char, CStr};
use std::sync::Arc;

use clrmap::gdmap::{DictionaryMap, LookupIndex, SortedFlag};
use clrmap::signature::HexTokens;
use clrmap::ErrorKind;

use super::{publish_provider, ProviderSource, SymbolProvider};
use crate::buffers::{copy_text, MemoryBuffer};
use crate::com::{object, ICorDebugMemoryBuffer, ICorDebugSymbolProvider2};
use crate::errors::Failure;
use crate::hresult::{E_INVALIDARG, E_NOTIMPL, HRESULT, S_OK};
use crate::storage::{map_or_read, Storage};

pub(super) unsafe extern "C" fn sp_get_generic_dictionary_info(this: *mut ICorDebugSymbolProvider2, out: *mut *mut ICorDebugMemoryBuffer) -> HRESULT {
    ffi_fn!({
        let this = object::<SymbolProvider>(this);
        if this.is_null() || out.is_null() {
            return Err(Failure::null_argument());
        }
        // SAFETY: `this` is a live provider; the buffer shares its storage through the Arc.
        let ProviderSource::Map { map, .. } = (unsafe { &(*this).source }) else {
            return Err(Failure::new(E_NOTIMPL, "this provider serves a ReadyToRun image's frames, not a dictionary map"));
        };
        // SAFETY: `out` is non-null.
        unsafe { *out = MemoryBuffer::publish(Arc::clone(map)) };
        Ok(S_OK)
    })
}

/// Check a map strictly (a full validation) and make a provider.
///
/// SAFETY (callers): `out` is non-null and writable.
unsafe fn new_provider(storage: Storage, out: *mut *mut ICorDebugSymbolProvider2) -> Result<HRESULT, Failure> {
    if u32::try_from(storage.bytes().len()).is_err() {
        return Err(clrmap::Error::nowhere(ErrorKind::OutOfRange, "a dictionary map under 4 GiB (GetSize is a ULONG32)").into());
    }
    let index = DictionaryMap::parse(storage.bytes()).and_then(|m| m.validate().and_then(|()| LookupIndex::new(&m, SortedFlag::Verify)))?;
    // SAFETY: per the caller's contract.
    Ok(unsafe { publish_provider(ProviderSource::Map { map: Arc::new(storage), index }, out) })
}

/// Open a dictionary map file (memory-mapped) as an `ICorDebugSymbolProvider2`.
///
/// The map is validated strictly: a malformed one gives its kind's HRESULT (META_E_BAD_SIGNATURE
/// for a bad signature, `CLRMAP_E_UNSORTED` for an unsorted map ...), a missing file
/// HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND), a null argument E_POINTER. Release the object with
/// its `Release`.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbol_provider_open(path: *const c_char, out: *mut *mut ICorDebugSymbolProvider2) -> HRESULT {
    ffi_fn!({
        if path.is_null() || out.is_null() {
            return Err(Failure::null_argument());
        }
        // SAFETY: the caller passes a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned();
        let storage = map_or_read(&path)?;
        // SAFETY: `out` is non-null.
        unsafe { new_provider(storage, out) }
    })
}

/// Make an `ICorDebugSymbolProvider2` over a copy of the `len` bytes at `data`, validated as
/// `clrmap_symbol_provider_open` validates a file.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbol_provider_from_memory(data: *const u8, len: usize, out: *mut *mut ICorDebugSymbolProvider2) -> HRESULT {
    ffi_fn!({
        if data.is_null() || out.is_null() {
            return Err(Failure::null_argument());
        }
        // SAFETY: the caller passes `len` readable bytes at `data`.
        let bytes = unsafe { std::slice::from_raw_parts(data, len) }.to_vec();
        // SAFETY: `out` is non-null.
        unsafe { new_provider(Storage::Owned(bytes), out) }
    })
}

/// The types of the dictionary at `rva`, rendered in the type notation with `0x` tokens, one
/// per line (joined by `\n`), through the two-call protocol.
///
/// `*pcb` always receives the size needed, NUL included. With `buf` null or `cb` too small,
/// nothing is written and the result is S_FALSE. E_INVALIDARG if no entry has this RVA.
#[no_mangle]
pub unsafe extern "C" fn clrmap_dict_lookup(provider: *mut ICorDebugSymbolProvider2, rva: u32, buf: *mut c_char, cb: u32, pcb: *mut u32) -> HRESULT {
    ffi_fn!({
        let provider = object::<SymbolProvider>(provider);
        if provider.is_null() || pcb.is_null() {
            return Err(Failure::null_argument());
        }
        // SAFETY: `provider` is a live provider object.
        let ProviderSource::Map { map, index } = (unsafe { &(*provider).source }) else {
            return Err(Failure::new(E_NOTIMPL, "this provider serves a ReadyToRun image's frames, not a dictionary map"));
        };
        // Parsing is O(1) (header and bounds); the index was built when the provider was made.
        let map = DictionaryMap::parse(map.bytes())?;
        let Some(entry) = index.find(&map, rva) else {
            return Err(Failure::answered_as(E_INVALIDARG, clrmap::Error::at_rva(ErrorKind::NotFound, rva, "an RVA that a dictionary entry has")));
        };
        let types = map.item_of(&entry).and_then(|i| i.render(&HexTokens))?;
        // SAFETY: `pcb` is non-null; `buf` holds `cb` bytes or is NULL, per the contract.
        Ok(unsafe { copy_text(&types.join("\n"), buf, cb, pcb) })
    })
}

//! A symbol provider over a ReadyToRun image: `GetFrameProps`.

use std::ffi::{c_char, CStr};

use clrmap::r2r::frames::FrameIndex;
use clrmap::r2r::ReadyToRunImage;
use clrmap::ErrorKind;

use super::{publish_provider, ProviderSource, SymbolProvider};
use crate::com::{object, ICorDebugSymbolProvider2};
use crate::errors::Failure;
use crate::hresult::{E_INVALIDARG, E_NOTIMPL, HRESULT, S_OK};
use crate::storage::map_file;

/// `GetFrameProps`: over an image, the frame holding `rva` (cordebug.idl: "the method start rva
/// (pCodeStartRva) and parent frame's start rva (pParentFrameStartRva). If there is no parent
/// frame, then pParentFrameStartRva is set to 0"): for a main body the method's start and 0, for
/// a funclet the funclet's start and its method's (`clrmap::r2r::frames`). An RVA in no
/// RUNTIME_FUNCTION is E_INVALIDARG (both outs 0), as for an unknown RVA elsewhere; a provider over
/// a dictionary map answers E_NOTIMPL.
pub(super) unsafe extern "C" fn sp_get_frame_props(this: *mut ICorDebugSymbolProvider2, rva: u32, start: *mut u32, parent: *mut u32) -> HRESULT {
    ffi_fn!({
        let this = object::<SymbolProvider>(this);
        if this.is_null() || start.is_null() || parent.is_null() {
            return Err(Failure::null_argument());
        }
        // SAFETY: `this` is a live provider.
        let ProviderSource::Image(frames) = (unsafe { &(*this).source }) else {
            return Err(Failure::new(E_NOTIMPL, "this provider serves a dictionary map; open a ReadyToRun image with clrmap_symbol_provider_open_image for GetFrameProps"));
        };
        let (answer, code_start, parent_start) = match frames.frame_props(rva) {
            Ok(p) => (Ok(S_OK), p.code_start, p.parent_frame_start_rva()),
            Err(e) if e.kind == ErrorKind::NotFound => (Err(Failure::answered_as(E_INVALIDARG, e)), 0, 0),
            Err(e) => (Err(Failure::from(e)), 0, 0),
        };
        // SAFETY: both out-pointers are non-null.
        unsafe {
            *start = code_start;
            *parent = parent_start;
        }
        answer
    })
}

/// Open a ReadyToRun image as an `ICorDebugSymbolProvider2` that serves `GetFrameProps`: the
/// image's RUNTIME_FUNCTIONs are indexed by method when it is opened, and the file is not kept.
/// `GetGenericDictionaryInfo` and `clrmap_dict_lookup` answer E_NOTIMPL on it. A malformed image
/// gives its kind's HRESULT (`clrmap_last_error` says where).
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbol_provider_open_image(path: *const c_char, out: *mut *mut ICorDebugSymbolProvider2) -> HRESULT {
    ffi_fn!({
        if path.is_null() || out.is_null() {
            return Err(Failure::null_argument());
        }
        // SAFETY: the caller passes a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned();
        let bytes = map_file(&path)?;
        let frames = ReadyToRunImage::parse(bytes.bytes()).and_then(|image| FrameIndex::new(&image))?;
        // SAFETY: `out` is non-null.
        Ok(unsafe { publish_provider(ProviderSource::Image(frames), out) })
    })
}

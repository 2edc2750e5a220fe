//! SourceLink: the URL of a frame's source document, from its PDB's SourceLink map.

use std::ffi::c_char;

use super::ClrmapSymbolizer;
use crate::buffers::copy_text;
use crate::errors::Failure;
use crate::hresult::{CLRMAP_E_NOT_FOUND, HRESULT};

/// The SourceLink URL of the document of the line `clrmap_symbolizer_symbolize` gives `address`
/// (the PDB's SourceLink map applied to the document's name), by the two-call protocol of
/// `clrmap_dict_lookup`: `*pcb` always receives the size needed, NUL included; with `buf` NULL
/// or `cb` too small nothing is written and the result is S_FALSE. `CLRMAP_E_NOT_FOUND` (and
/// `*pcb` 0) when the frame has no line, or its PDB no URL for the document.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_source_link(sym: *const ClrmapSymbolizer, address: u64, kind: u32, buf: *mut c_char, cb: u32, pcb: *mut u32) -> HRESULT {
    ffi_fn!({
        // SAFETY: `sym` is null or live.
        let Some(s) = (unsafe { sym.as_ref() }) else { return Err(Failure::null_argument()) };
        if pcb.is_null() {
            return Err(Failure::null_argument());
        }
        let kind = s.frame_kind(kind)?;
        let Some(url) = s.sym.symbolize(address, kind).source_link else {
            // SAFETY: `pcb` is non-null.
            unsafe { *pcb = 0 };
            return Err(Failure::new(CLRMAP_E_NOT_FOUND, "a frame whose document has a SourceLink URL"));
        };
        // SAFETY: `pcb` is non-null; `buf` holds `cb` bytes or is NULL, per the contract.
        Ok(unsafe { copy_text(url, buf, cb, pcb) })
    })
}

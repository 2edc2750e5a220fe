//! The end of a symbolizer. Its own module because the header lists it last: cbindgen writes
//! functions in source order, and this one follows the symbolizer's other calls.

use super::ClrmapSymbolizer;

/// Release a symbolizer and every string its frames pointed to. NULL is allowed.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_release(sym: *mut ClrmapSymbolizer) {
    ffi_fn!(unrecorded(), {
        if sym.is_null() {
            return;
        }
        // SAFETY: made by Box::into_raw in clrmap_symbolizer_open, released once.
        drop(unsafe { Box::from_raw(sym) });
    })
}

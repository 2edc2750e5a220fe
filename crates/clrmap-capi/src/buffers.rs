//! Memory handed to C: the `ICorDebugMemoryBuffer` objects that keep a dictionary map alive, and
//! the two-call protocol by which text is copied into a caller's buffer.

use std::ffi::{c_char, c_void};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use crate::com::{add_ref, object, query_interface, release, ICorDebugMemoryBuffer, ICorDebugMemoryBufferVtbl, Unknown, GUID, MEMORY_BUFFER};
use crate::errors::Failure;
use crate::hresult::{HRESULT, S_FALSE, S_OK};
use crate::storage::Storage;

/// The object behind an `ICorDebugMemoryBuffer`; it holds a reference to the map's storage.
#[repr(C)]
pub(crate) struct MemoryBuffer {
    iface: ICorDebugMemoryBuffer,
    refs: AtomicU32,
    map: Arc<Storage>,
}

static MEMORY_BUFFER_VTBL: ICorDebugMemoryBufferVtbl = ICorDebugMemoryBufferVtbl {
    QueryInterface: query_interface::<MemoryBuffer>,
    AddRef: add_ref::<MemoryBuffer>,
    Release: release::<MemoryBuffer>,
    GetStartAddress: mb_get_start_address,
    GetSize: mb_get_size,
};

impl Unknown for MemoryBuffer {
    type Iface = ICorDebugMemoryBuffer;
    const IID: GUID = MEMORY_BUFFER;
    fn refs(&self) -> &AtomicU32 {
        &self.refs
    }
}

impl MemoryBuffer {
    /// A new buffer over `map`, with one reference, as C receives it.
    pub(crate) fn publish(map: Arc<Storage>) -> *mut ICorDebugMemoryBuffer {
        let buffer = Box::new(MemoryBuffer { iface: ICorDebugMemoryBuffer { lpVtbl: &MEMORY_BUFFER_VTBL }, refs: AtomicU32::new(1), map });
        // The interface is the object's first field.
        Box::into_raw(buffer).cast()
    }
}

unsafe extern "C" fn mb_get_start_address(this: *mut ICorDebugMemoryBuffer, out: *mut *const c_void) -> HRESULT {
    ffi_fn!({
        let this = object::<MemoryBuffer>(this);
        if this.is_null() || out.is_null() {
            return Err(Failure::null_argument());
        }
        // SAFETY: `this` is live; the address stays valid while the buffer is referenced.
        unsafe { *out = (*this).map.bytes().as_ptr().cast() };
        Ok(S_OK)
    })
}

unsafe extern "C" fn mb_get_size(this: *mut ICorDebugMemoryBuffer, out: *mut u32) -> HRESULT {
    ffi_fn!({
        let this = object::<MemoryBuffer>(this);
        if this.is_null() || out.is_null() {
            return Err(Failure::null_argument());
        }
        // SAFETY: `this` is live; maps over 4 GiB are refused when opened.
        unsafe { *out = u32::try_from((*this).map.bytes().len()).unwrap_or(u32::MAX) };
        Ok(S_OK)
    })
}

/// Copy `text` and a NUL to the caller's buffer by the two-call protocol: `*pcb` always receives
/// the size needed, NUL included; with `buf` NULL or `cb` too small nothing is written and the
/// answer is S_FALSE.
///
/// SAFETY (callers): `pcb` is non-null and writable; `buf` is NULL or holds `cb` bytes.
pub(crate) unsafe fn copy_text(text: &str, buf: *mut c_char, cb: u32, pcb: *mut u32) -> HRESULT {
    let need = u32::try_from(text.len().saturating_add(1)).unwrap_or(u32::MAX);
    // SAFETY: `pcb` is non-null, per the caller's contract.
    unsafe { *pcb = need };
    // Compared as usize: a text of 4 GiB or more saturates `need`, and must still not fit.
    if buf.is_null() || cb as usize <= text.len() {
        return S_FALSE;
    }
    // SAFETY: the caller's buffer holds `cb` > `text.len()` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        *buf.add(text.len()) = 0;
    }
    S_OK
}

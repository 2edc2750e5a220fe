//! Inlined frames: one address as the chain of methods the JIT inlined into each other.

use super::{ClrmapFrame, ClrmapSymbolizer};
use crate::errors::Failure;
use crate::hresult::{HRESULT, S_FALSE, S_OK};

/// Symbolize one address with its inlined frames (the CLI's `--inlines`), by the two-call
/// protocol of `GetILToNativeMapping`: the frames go to `frames` (room for `capacity`), innermost
/// inlinee first and the physical method at the outermost call site last; `*count` is how many
/// there are, also when they did not all fit (call again with that many). Where no inline tree
/// covers the address (or the source has none) there is one frame, exactly
/// `clrmap_symbolizer_symbolize`'s. `kind` and the HRESULTs are those of
/// `clrmap_symbolizer_symbolize`; `frames` may be NULL when `capacity` is 0.
#[no_mangle]
pub unsafe extern "C" fn clrmap_symbolizer_symbolize_inlined(sym: *const ClrmapSymbolizer, address: u64, kind: u32, frames: *mut ClrmapFrame, capacity: u32, count: *mut u32) -> HRESULT {
    ffi_fn!({
        // SAFETY: `sym` is null or live.
        let Some(s) = (unsafe { sym.as_ref() }) else { return Err(Failure::null_argument()) };
        if count.is_null() || (capacity > 0 && frames.is_null()) {
            return Err(Failure::null_argument());
        }
        let kind = s.frame_kind(kind)?;
        let (f, inlined) = s.sym.symbolize_inlined(address, kind);
        let all = inlined
            .iter()
            .map(|i| s.c_frame(address, i.at.module, i.at.token, i.at.method, i.at.il_offset, i.at.file, [i.at.line, i.at.column, i.at.end_line, i.at.end_column]))
            .chain(std::iter::once(s.c_frame(address, f.at.module, f.at.token, f.at.method, f.at.il_offset, f.at.file, [f.at.line, f.at.column, f.at.end_line, f.at.end_column])));
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
        // A body holds the address (a dynamic method's has no token).
        Ok(if f.code_start.is_some() { S_OK } else { S_FALSE })
    })
}

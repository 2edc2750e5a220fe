//! One thread's walk (StackWalk contract, dotnet/runtime `docs/design/datacontracts/StackWalk.md`):
//! from the thread's registers, managed code is unwound by its unwind data; native code is left
//! through the next explicit frame of the thread's chain that records a managed caller's context
//! (an active InlinedCallFrame, a transition block, an exception frame's saved context).
//!
//! Each step must move the stack pointer up, and each explicit frame is visited once, so a
//! corrupt chain or stack ends the walk with a note rather than a loop.

use std::collections::HashSet;

use super::code;
use super::names::Names;
use super::target::{self, Context, RuntimeThread, Target, FRAME_TOP};
use super::{DumpFrame, DumpThread};

/// Walk `rt`, whose registers (`user_regs_struct`) are `regs`, into `out`.
pub(super) fn walk(t: Target<'_, '_>, rt: &RuntimeThread, regs: &[u64], max_frames: usize, names: &mut Names, out: &mut DumpThread) {
    let Some(mut ctx) = Context::from_user_regs(regs) else {
        out.notes.push("the thread's registers are incomplete".to_owned());
        return;
    };
    let mut frame = rt.frame;
    let mut seen = HashSet::new();
    // The innermost frame's ip is where it stopped; every other is a return address, looked up
    // one byte back so a call that ends its method still names it.
    let mut exact = true;
    let mut steps = 0usize;
    loop {
        steps = steps.saturating_add(1);
        if out.frames.len() >= max_frames || steps > max_frames.saturating_mul(2) {
            out.notes.push(format!("stopped after {} frames", out.frames.len()));
            return;
        }
        let lookup = if exact { ctx.ip } else { ctx.ip.wrapping_sub(1) };
        match code::find(t, lookup) {
            Ok(Some(block)) => {
                let mut f = names.frame(t, &block, ctx.ip, ctx.sp());
                f.leaf = exact;
                super::lines::jit_il_offset(&mut f);
                out.frames.push(f);
                let caller = match code::unwind_x64(t, &block, &ctx) {
                    Ok(c) => c,
                    Err(e) => {
                        out.notes.push(format!("a managed frame cannot be unwound: {}{}", e.message(), e.location));
                        return;
                    }
                };
                if caller.sp() <= ctx.sp() {
                    out.notes.push(format!("the walk stopped: unwinding 0x{:x} did not move the stack pointer up", ctx.ip));
                    return;
                }
                ctx = caller;
                exact = false;
                // Explicit frames below the caller's stack pointer belong to the frames just left.
                while frame != FRAME_TOP && frame != 0 && frame < ctx.sp() {
                    if !seen.insert(frame) {
                        out.notes.push(format!("the frame chain loops at 0x{frame:x}"));
                        return;
                    }
                    match t.ptr(frame, "Frame", "Next") {
                        Ok(n) => frame = n,
                        Err(e) => {
                            out.notes.push(format!("the frame chain cannot be read: {}{}", e.message(), e.location));
                            return;
                        }
                    }
                }
            }
            Ok(None) => {
                // Native code: leave it through the next explicit frame with a context.
                loop {
                    if frame == FRAME_TOP || frame == 0 {
                        return;
                    }
                    if out.frames.len() >= max_frames {
                        out.notes.push(format!("stopped after {} frames", out.frames.len()));
                        return;
                    }
                    if !seen.insert(frame) || seen.len() > target::MAX_FRAMES {
                        out.notes.push(format!("the frame chain loops at 0x{frame:x}"));
                        return;
                    }
                    let ef = match target::explicit_frame(t, frame, ctx) {
                        Ok(f) => f,
                        Err(e) => {
                            out.notes.push(format!("the explicit frame at 0x{frame:x} cannot be read: {}{}", e.message(), e.location));
                            return;
                        }
                    };
                    out.frames.push(DumpFrame { kind: ef.kind.clone(), ip: ef.context.map_or(0, |c| c.ip), sp: ef.address, ..DumpFrame::default() });
                    frame = ef.next;
                    if let Some(c) = ef.context {
                        exact = matches!(ef.kind.as_str(), "FaultingExceptionFrame" | "ResumableFrame" | "RedirectedThreadFrame");
                        ctx = c;
                        break;
                    }
                }
            }
            Err(e) => {
                out.notes.push(format!("the code map cannot be read: {}{}", e.message(), e.location));
                return;
            }
        }
    }
}

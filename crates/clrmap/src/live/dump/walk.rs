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
use super::native::Natives;
use super::target::{self, Context, RuntimeThread, Target, FRAME_TOP};
use super::{DumpFrame, DumpThread};

/// Walk `rt`, whose registers (`user_regs_struct`) are `regs`, into `out`.
pub(super) fn walk(t: Target<'_, '_>, rt: &RuntimeThread, regs: &[u64], max_frames: usize, names: &mut Names, mut natives: Option<&mut Natives<'_, '_>>, out: &mut DumpThread) {
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
                // Native code: leave it through the next explicit frame with a context (what the
                // runtime's own walk does), and list the native frames below that by their CFI.
                let mut crossed = Vec::new();
                let mut next = None;
                let mut stop = None;
                loop {
                    if frame == FRAME_TOP || frame == 0 {
                        break;
                    }
                    if out.frames.len().saturating_add(crossed.len()) >= max_frames {
                        stop = Some(format!("stopped after {} frames", out.frames.len().saturating_add(crossed.len())));
                        break;
                    }
                    if !seen.insert(frame) || seen.len() > target::MAX_FRAMES {
                        stop = Some(format!("the frame chain loops at 0x{frame:x}"));
                        break;
                    }
                    let ef = match target::explicit_frame(t, frame, ctx) {
                        Ok(f) => f,
                        Err(e) => {
                            stop = Some(format!("the explicit frame at 0x{frame:x} cannot be read: {}{}", e.message(), e.location));
                            break;
                        }
                    };
                    crossed.push(DumpFrame { kind: ef.kind.clone(), ip: ef.context.map_or(0, |c| c.ip), sp: ef.address, ..DumpFrame::default() });
                    frame = ef.next;
                    if let Some(c) = ef.context {
                        next = Some((c, matches!(ef.kind.as_str(), "FaultingExceptionFrame" | "ResumableFrame" | "RedirectedThreadFrame")));
                        break;
                    }
                }
                let mut native = Vec::new();
                if let Some(n) = natives.as_deref_mut() {
                    let limit = next.map_or(u64::MAX, |(c, _)| c.sp());
                    let room = max_frames.saturating_sub(out.frames.len().saturating_add(crossed.len()));
                    native_frames(Some(t), n, ctx, exact, limit, room, &mut native);
                }
                // Innermost first: the native frames and the explicit frames crossed, by their
                // place on the stack (both lists already rise).
                let mut crossed = crossed.into_iter().peekable();
                for f in native {
                    while let Some(e) = crossed.next_if(|e| e.sp < f.sp) {
                        out.frames.push(e);
                    }
                    out.frames.push(f);
                }
                out.frames.extend(crossed);
                if let Some(note) = stop {
                    out.notes.push(note);
                }
                match next {
                    Some((c, fault)) => {
                        ctx = c;
                        exact = fault;
                    }
                    None => return,
                }
            }
            Err(e) => {
                out.notes.push(format!("the code map cannot be read: {}{}", e.message(), e.location));
                return;
            }
        }
    }
}

/// The native frames from `ctx` outwards, by their modules' CFI, while they stay native and below
/// `limit` (the stack pointer of the managed frame the runtime's frame chain leads to); at most
/// `room`. A native frame whose caller cannot be unwound is still listed: it is where the thread
/// was.
///
/// Native means outside the runtime's code map, where `t` has one. Without it (no descriptor, or
/// one without a code map: before .NET 10), a caller is followed only while it lies in an ELF
/// module the core holds: jitted code (anonymous memory) and ReadyToRun code (a PE image's
/// mapping) stop the walk, since no CFI describes them and only the runtime's own data could go
/// on.
fn native_frames(t: Option<Target<'_, '_>>, n: &mut Natives<'_, '_>, ctx: Context, exact: bool, limit: u64, room: usize, out: &mut Vec<DumpFrame>) {
    let (mut c, mut exact) = (ctx, exact);
    for _ in 0..room.min(MAX_NATIVE_FRAMES) {
        let name = n.name(if exact { c.ip } else { c.ip.wrapping_sub(1) });
        let offset = if exact { name.offset } else { name.offset.wrapping_add(1) };
        out.push(DumpFrame { kind: "native".to_owned(), ip: c.ip, sp: c.sp(), symbol: name.symbol, module: name.module, native_offset: Some(offset), leaf: exact, ..DumpFrame::default() });
        let Some((caller, caller_exact)) = n.unwind(&c, exact) else { return };
        if caller_exact {
            // Its CIE says it is a signal frame: the C library's return trampoline, below the
            // frame the signal interrupted.
            if let Some(f) = out.last_mut() {
                f.kind = "signal".to_owned();
            }
        }
        let at = if caller_exact { caller.ip } else { caller.ip.wrapping_sub(1) };
        let native = match t {
            Some(t) => matches!(code::find(t, at), Ok(None)),
            None => n.in_native_module(at),
        };
        if caller.sp() <= c.sp() || caller.sp() >= limit || !native {
            return;
        }
        c = caller;
        exact = caller_exact;
    }
}

/// A thread the runtime does not know (its own native threads, the host's), or any thread of a
/// core whose runtime gives no code map (`t` is then `None`): its native frames alone, by their
/// CFI.
pub(super) fn walk_native(t: Option<Target<'_, '_>>, regs: &[u64], max_frames: usize, natives: &mut Natives<'_, '_>, out: &mut DumpThread) {
    let Some(ctx) = Context::from_user_regs(regs) else {
        out.notes.push("the thread's registers are incomplete".to_owned());
        return;
    };
    native_frames(t, natives, ctx, true, u64::MAX, max_frames, &mut out.frames);
}

/// The most native frames listed between two managed stretches (a runaway CFI chain ends there).
const MAX_NATIVE_FRAMES: usize = 256;

//! The runtime's data as the descriptor describes it: reads of typed fields, the thread list
//! (Thread contract) and the explicit frame chain (StackWalk contract).
//!
//! Thread contract (dotnet/runtime `docs/design/datacontracts/Thread.md`): the global
//! `ThreadStore` points at a pointer to the thread store; its `FirstThreadLink` is the first
//! thread's list link, and a thread is its link minus `Thread::LinkNext`. Each thread has its OS
//! id (`OSId`), managed id (`Id`), the innermost explicit `Frame` (a chain ending at -1), and its
//! exception state.

use std::collections::HashSet;

use super::core::Core;
use super::descriptor::Descriptor;
use crate::base::read::{Error, ErrorKind, Result};

/// The most threads walked from the thread store.
const MAX_THREADS: usize = 100_000;
/// The most explicit frames followed on one thread.
pub const MAX_FRAMES: usize = 100_000;

/// Reads of the runtime's structures in a core, through the descriptor's layouts.
#[derive(Clone, Copy, Debug)]
pub struct Target<'c, 'a> {
    /// The core.
    pub core: &'c Core<'a>,
    /// The descriptor.
    pub d: &'c Descriptor,
}

impl Target<'_, '_> {
    /// The address of field `field` of the `ty` at `addr`.
    pub fn at(&self, addr: u64, ty: &str, field: &'static str) -> Result<u64> {
        let off = self.d.field(ty, field).ok_or(Error::nowhere(ErrorKind::NotFound, field))?;
        Ok(addr.wrapping_add(off))
    }

    /// A pointer-sized field.
    pub fn ptr(&self, addr: u64, ty: &str, field: &'static str) -> Result<u64> {
        self.core.u64(self.at(addr, ty, field)?)
    }

    /// A 32-bit field.
    pub fn u32(&self, addr: u64, ty: &str, field: &'static str) -> Result<u32> {
        self.core.u32(self.at(addr, ty, field)?)
    }

    /// A 16-bit field.
    pub fn u16(&self, addr: u64, ty: &str, field: &'static str) -> Result<u16> {
        self.core.u16(self.at(addr, ty, field)?)
    }

    /// An 8-bit field.
    pub fn u8(&self, addr: u64, ty: &str, field: &'static str) -> Result<u8> {
        self.core.u8(self.at(addr, ty, field)?)
    }

    /// A global the descriptor must have.
    pub fn global(&self, name: &'static str) -> Result<u64> {
        self.d.global(name).ok_or(Error::nowhere(ErrorKind::NotFound, name))
    }
}

/// One managed thread as the thread store lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeThread {
    /// The `Thread` object's address.
    pub address: u64,
    /// The managed thread id.
    pub managed_id: u32,
    /// The OS thread id.
    pub os_id: u64,
    /// The innermost explicit frame.
    pub frame: u64,
    /// The exception in flight's object, when the thread has one.
    pub exception: Option<u64>,
}

/// Every thread in the thread store, in list order. A cycle or an unreadable link ends the list
/// with a note.
pub fn threads(t: Target<'_, '_>, notes: &mut Vec<String>) -> Result<Vec<RuntimeThread>> {
    let store = t.core.u64(t.global("ThreadStore")?)?;
    let link_next = t.d.field("Thread", "LinkNext").ok_or(Error::nowhere(ErrorKind::NotFound, "Thread::LinkNext"))?;
    let mut link = t.ptr(store, "ThreadStore", "FirstThreadLink")?;
    // .NET 9 and 10 chain the threads' `LinkNext` fields (a thread is its link minus that
    // field's offset); 11.0 chains the threads themselves. The layout whose first thread has an
    // OS id of one of the core's threads is the one taken (measured: 10.0.12 the first, 11.0.0
    // the second).
    let is_core_thread = |thread: u64| t.ptr(thread, "Thread", "OSId").is_ok_and(|id| t.core.threads().iter().any(|c| u64::from(c.tid) == id));
    let direct = link != 0 && !is_core_thread(link.wrapping_sub(link_next)) && is_core_thread(link);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    while link != 0 {
        if out.len() >= MAX_THREADS || !seen.insert(link) {
            notes.push(format!("the thread list loops or is too long at 0x{link:x}; {} threads read", out.len()));
            break;
        }
        let thread = if direct { link } else { link.wrapping_sub(link_next) };
        match read_thread(t, thread) {
            Ok(th) => out.push(th),
            Err(e) => {
                notes.push(format!("thread at 0x{thread:x} cannot be read: {}{}", e.message(), e.location));
                break;
            }
        }
        link = match t.core.u64(if direct { link.wrapping_add(link_next) } else { link }) {
            Ok(l) => l,
            Err(e) => {
                notes.push(format!("the thread list ends early: {}{}", e.message(), e.location));
                break;
            }
        };
    }
    Ok(out)
}

fn read_thread(t: Target<'_, '_>, thread: u64) -> Result<RuntimeThread> {
    let managed_id = t.u32(thread, "Thread", "Id")?;
    let os_id = t.ptr(thread, "Thread", "OSId")?;
    let frame = t.ptr(thread, "Thread", "Frame")?;
    // An exception is in flight while the thread has an exception tracker; its object is the
    // one the thread threw last (a handle to it).
    // `ExceptionTracker` holds the innermost ExInfo's address (zero without one).
    let tracker = t.ptr(thread, "Thread", "ExceptionTracker").unwrap_or(0);
    let exception = if tracker != 0 {
        let handle = t.ptr(thread, "Thread", "LastThrownObject").unwrap_or(0);
        let obj = if handle != 0 { t.core.u64(handle).unwrap_or(0) } else { 0 };
        (obj != 0).then_some(obj)
    } else {
        None
    };
    Ok(RuntimeThread { address: thread, managed_id, os_id, frame, exception })
}

/// The registers a walk carries, in the Windows x64 order the unwind codes number them (RAX,
/// RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8-R15), and the instruction pointer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// Instruction pointer.
    pub ip: u64,
    /// General registers; index 4 is RSP, 5 is RBP.
    pub regs: [u64; 16],
}

impl Context {
    /// The stack pointer.
    pub fn sp(&self) -> u64 {
        self.regs[4]
    }

    /// From a core thread's x86-64 `user_regs_struct`.
    pub fn from_user_regs(r: &[u64]) -> Option<Context> {
        let g = |i: usize| r.get(i).copied();
        // user_regs_struct: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp
        let regs = [g(10)?, g(11)?, g(12)?, g(5)?, g(19)?, g(4)?, g(13)?, g(14)?, g(9)?, g(8)?, g(7)?, g(6)?, g(3)?, g(2)?, g(1)?, g(0)?];
        Some(Context { ip: g(16)?, regs })
    }

    /// From a Windows AMD64 `CONTEXT` at `addr` (Rax at 0x78 through R15 at 0xF0, Rip at 0xF8).
    pub fn from_windows_context(core: &Core<'_>, addr: u64) -> Result<Context> {
        let mut regs = [0u64; 16];
        for (i, r) in regs.iter_mut().enumerate() {
            *r = core.u64(addr.wrapping_add(0x78).wrapping_add((i as u64).wrapping_mul(8)))?;
        }
        Ok(Context { ip: core.u64(addr.wrapping_add(0xF8))?, regs })
    }
}

/// What an explicit frame tells a walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExplicitFrame {
    /// The frame's address.
    pub address: u64,
    /// Its kind, from the descriptor's `*FrameIdentifier` globals (without `Identifier`).
    pub kind: String,
    /// The managed caller's context, when the frame records one and it is active.
    pub context: Option<Context>,
    /// The next frame.
    pub next: u64,
}

/// The frame chain's terminator (`FRAME_TOP`).
pub const FRAME_TOP: u64 = u64::MAX;

/// Read the explicit frame at `addr`. Frame kinds come from the identifier the frame starts
/// with (the descriptor's `<Kind>FrameIdentifier` globals), and each kind's saved context as the
/// StackWalk contract reads it.
pub fn explicit_frame(t: Target<'_, '_>, addr: u64, base: Context) -> Result<ExplicitFrame> {
    let next = t.ptr(addr, "Frame", "Next")?;
    let id = t.core.u64(addr)?;
    let kind =
        t.d.globals
            .iter()
            .filter(|(name, &v)| v == id && name.ends_with("FrameIdentifier"))
            .map(|(name, _)| name.trim_end_matches("Identifier").to_owned())
            .next()
            .unwrap_or_else(|| "Frame".to_owned());
    let mut context = None;
    match kind.as_str() {
        "InlinedCallFrame" => {
            let ret = t.ptr(addr, "InlinedCallFrame", "CallerReturnAddress")?;
            if ret != 0 {
                let mut c = base;
                c.ip = ret;
                c.regs[4] = t.ptr(addr, "InlinedCallFrame", "CallSiteSP")?;
                c.regs[5] = t.ptr(addr, "InlinedCallFrame", "CalleeSavedFP")?;
                context = Some(c);
            }
        }
        "SoftwareExceptionFrame" => {
            let mut c = Context::from_windows_context(t.core, t.at(addr, "SoftwareExceptionFrame", "TargetContext")?)?;
            c.ip = t.ptr(addr, "SoftwareExceptionFrame", "ReturnAddress")?;
            context = Some(c);
        }
        "FaultingExceptionFrame" => context = Some(Context::from_windows_context(t.core, t.at(addr, "FaultingExceptionFrame", "TargetContext")?)?),
        "ResumableFrame" | "RedirectedThreadFrame" => context = Some(Context::from_windows_context(t.core, t.ptr(addr, "ResumableFrame", "TargetContextPtr")?)?),
        "HijackFrame" => {
            let args = t.ptr(addr, "HijackFrame", "HijackArgsPtr")?;
            let mut c = callee_saved(t, base, t.at(args, "HijackArgs", "CalleeSavedRegisters")?)?;
            c.ip = t.ptr(addr, "HijackFrame", "ReturnAddress")?;
            c.regs[4] = args.wrapping_add(t.d.size("HijackArgs").unwrap_or(0));
            context = Some(c);
        }
        "PrestubMethodFrame" | "CallCountingHelperFrame" | "StubDispatchFrame" | "ExternalMethodFrame" | "DynamicHelperFrame" | "PInvokeCalliFrame" => {
            // A transition block: the return address into the caller, the callee-saved
            // registers, and the caller's stack pointer just past the block.
            let tb = t.ptr(addr, "FramedMethodFrame", "TransitionBlockPtr")?;
            let mut c = callee_saved(t, base, t.at(tb, "TransitionBlock", "CalleeSavedRegisters")?)?;
            c.ip = t.ptr(tb, "TransitionBlock", "ReturnAddress")?;
            c.regs[4] = tb.wrapping_add(t.d.size("TransitionBlock").ok_or(Error::nowhere(ErrorKind::NotFound, "TransitionBlock's size"))?);
            context = Some(c);
        }
        _ => {}
    }
    Ok(ExplicitFrame { address: addr, kind, context, next })
}

/// `base` with the callee-saved registers stored at `at` (`CalleeSavedRegisters`).
fn callee_saved(t: Target<'_, '_>, base: Context, at: u64) -> Result<Context> {
    let mut c = base;
    for (name, index) in [("Rbx", 3usize), ("Rbp", 5), ("R12", 12), ("R13", 13), ("R14", 14), ("R15", 15)] {
        if let Some(off) = t.d.field("CalleeSavedRegisters", name) {
            if let Some(r) = c.regs.get_mut(index) {
                *r = t.core.u64(at.wrapping_add(off))?;
            }
        }
    }
    Ok(c)
}

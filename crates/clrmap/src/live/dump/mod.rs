//! Crash dumps: every managed thread's stack from a Linux ELF core of a .NET process, read
//! through the runtime's own contract descriptor (no DAC, no SOS).
//!
//! The steps, each in its own file:
//! * [`core`]: the core's memory segments, threads and file mappings;
//! * [`descriptor`]: libcoreclr.so's exported `DotNetRuntimeContractDescriptor` (.NET 9 and
//!   later), its types, globals and contracts;
//! * [`target`]: the thread store's threads and their explicit frame chains;
//! * [`code`]: code addresses to methods and the unwinding of managed frames;
//! * [`names`]: method names from the modules' metadata on disk;
//! * `lines.rs` ([`add_lines`]): IL offsets and source lines: ReadyToRun frames' from each
//!   module's image on disk, as `symbolize` answers the image; jitted frames' from the debug
//!   info the runtime keeps beside their code; the lines from the modules' PDBs.
//!
//! What a runtime's descriptor lacks is said in a note, never guessed: .NET 8 has no
//! descriptor, and .NET 9's describes threads but not the code map or the frames.

pub mod code;
pub mod core;
pub mod descriptor;
mod inlined;
mod lines;
pub mod names;
pub mod native;
pub mod target;
#[cfg(test)]
mod tests;
mod walk;

pub use lines::add_lines;

use std::collections::BTreeMap;

pub use self::core::{Core, CoreThread, FileMapping, Machine};
pub use self::descriptor::Descriptor;
use self::target::Target;
use crate::base::read::Result;

/// What to read besides the frames.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The most frames listed on one thread (0: the default, 10 000).
    pub max_frames: usize,
    /// Give each jitted frame whose body has an inline tree (a process run with
    /// `DOTNET_RichDebugInfo=1`) its inlined frames ([`DumpFrame::inlined`]; docs/dumps.md).
    pub inlines: bool,
}

/// A whole dump's answer.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DumpReport {
    /// The machine (`x64`, `arm64`).
    pub machine: String,
    /// The runtime, when the core has one with a descriptor.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub runtime: Option<RuntimeInfo>,
    /// Every thread of the core, with its managed frames where it has them.
    pub threads: Vec<DumpThread>,
    /// What could not be read, and why.
    pub notes: Vec<String>,
}

/// The runtime the core holds.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RuntimeInfo {
    /// libcoreclr.so's path.
    pub path: String,
    /// The descriptor's address.
    pub descriptor: u64,
    /// Where its symbol was found (`core` or `file`).
    pub found_in: &'static str,
    /// The contracts and their versions.
    pub contracts: BTreeMap<String, u64>,
}

/// One thread.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DumpThread {
    /// The OS thread id.
    pub os_id: u64,
    /// The managed thread id, for a thread the runtime knows.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub managed_id: Option<u32>,
    /// The exception in flight.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub exception: Option<ExceptionInfo>,
    /// Frames, innermost first.
    pub frames: Vec<DumpFrame>,
    /// What stopped or limited the walk.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub notes: Vec<String>,
}

/// An exception object.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ExceptionInfo {
    /// The object's address.
    pub address: u64,
    /// Its type, `Ns.Type`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub type_name: Option<String>,
    /// Its message.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub message: Option<String>,
}

/// One frame.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DumpFrame {
    /// `managed`, `native` (code outside the runtime's code map, unwound by its module's CFI),
    /// `signal` (the kernel's signal frame: the C library's return trampoline, whose caller is the
    /// code the signal interrupted, where it stood), or the kind of an explicit runtime frame
    /// (`InlinedCallFrame`, ...).
    pub kind: String,
    /// The instruction pointer (a return address for every frame but the innermost).
    pub ip: u64,
    /// The stack pointer (a managed frame's) or the explicit frame's address.
    pub sp: u64,
    /// `Ns.Type::Method`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub method: Option<String>,
    /// A native frame (`kind` "native"): the function's dynamic symbol, when `ip` lies inside
    /// one; `native_offset` is then `ip`'s offset from it, else from the module's base.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub symbol: Option<String>,
    /// The MethodDef token.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub token: Option<u32>,
    /// The module's path.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub module: Option<String>,
    /// The offset of `ip` in the method's code.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub native_offset: Option<u64>,
    /// `jit` or `r2r`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub code: Option<&'static str>,
    /// ReadyToRun code: `ip`'s RVA in the module's image.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub rva: Option<u32>,
    /// The IL offset by the runtime's frame rule: for ReadyToRun code as `symbolize` answers the
    /// image at `rva` ([`add_lines`]), for jitted code from the debug info the runtime keeps with
    /// it (.NET 10; docs/dumps.md).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub il_offset: Option<u32>,
    /// The source file, as the PDB names it.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub file: Option<String>,
    /// The line.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub line: Option<u32>,
    /// The column.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub column: Option<u32>,
    /// With [`Options::inlines`]: the methods the JIT inlined into this frame's body whose code
    /// holds `ip` (looked up by the frame rule), innermost first, as `symbolize --inlines` lists
    /// them; the frame itself is then at the outermost call site where that is known.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub inlined: Vec<DumpInlinedFrame>,
    /// `ip` is where the thread stopped (the innermost frame, or one a fault or redirection
    /// saved), not a return address: looked up as is rather than at `ip - 1`.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub leaf: bool,
    /// Jitted code: the body's IL-to-native map from the runtime's debug info, and its code size
    /// (turned into `il_offset` once `leaf` is known).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub jit_map: Option<(Vec<crate::base::ilmap::MapEntry>, u32)>,
    /// Jitted code with [`Options::inlines`]: the body's inline tree from the runtime's debug
    /// info, and its nodes' methods (turned into `inlined` once `leaf` is known).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub jit_inlines: Option<Box<inlined::BodyInlines>>,
}

/// One inlined frame of a [`DumpFrame`]: the fields `symbolize --inlines --json` gives an
/// inlined frame (every one written, `null` where unknown), with the module's path as the dump's
/// frames give it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DumpInlinedFrame {
    /// The inlinee's module's path.
    pub module: Option<String>,
    /// Its MethodDef token.
    pub token: Option<u32>,
    /// `Ns.Type::Method`.
    pub method: Option<String>,
    /// The IL offset in the inlinee: the rich mapping's for the innermost, the call site of the
    /// frame inside it for the others (`None` where the runtime did not give it and the IL does
    /// not settle it).
    pub il_offset: Option<u32>,
    /// The source file, as the inlinee's PDB names it.
    pub file: Option<String>,
    /// The line.
    pub line: Option<u32>,
    /// The column.
    pub column: Option<u32>,
    /// The end line.
    pub end_line: Option<u32>,
    /// The end column.
    pub end_column: Option<u32>,
}

/// Read a core: its threads, and for a .NET process with a descriptor, every managed thread's
/// frames. A core that is not an ELF core is an error; anything else missing is a note.
pub fn analyze(data: &[u8], options: &Options) -> Result<DumpReport> {
    let core = Core::parse(data)?;
    let mut report = DumpReport { machine: machine_name(core.machine()), ..DumpReport::default() };
    report.notes.extend(core.notes().iter().cloned());
    let mut by_tid: BTreeMap<u64, DumpThread> = core.threads().iter().map(|t| (u64::from(t.tid), DumpThread { os_id: u64::from(t.tid), ..DumpThread::default() })).collect();
    let finish = |mut report: DumpReport, by_tid: BTreeMap<u64, DumpThread>, core: &Core<'_>| {
        let order: Vec<u64> = core.threads().iter().map(|t| u64::from(t.tid)).collect();
        let mut by_tid = by_tid;
        report.threads = order.iter().filter_map(|tid| by_tid.remove(tid)).collect();
        report.threads.extend(by_tid.into_values());
        for (a, e) in core.missing() {
            report.notes.push(format!("the core lacks memory 0x{a:x}-0x{e:x} that the walk needed"));
        }
        report
    };
    let max_frames = if options.max_frames == 0 { 10_000 } else { options.max_frames };
    let (path, d) = match open_runtime(&core) {
        Ok(found) => found,
        Err(note) => {
            report.notes.push(note);
            native_only(&core, &mut by_tid, max_frames, &mut report.notes);
            return Ok(finish(report, by_tid, &core));
        }
    };
    report.runtime = Some(RuntimeInfo::new(path.clone(), &d));
    let t = Target { core: &core, d: &d };
    let threads = match target::threads(t, &mut report.notes) {
        Ok(v) => v,
        Err(e) => {
            report.notes.push(format!("the thread store cannot be read: {}{}", e.message(), e.location));
            Vec::new()
        }
    };
    let can_walk = d.contract("ExecutionManager").is_some() && d.contract("StackWalk").is_some();
    if !can_walk {
        report.notes.push("the runtime's descriptor has no ExecutionManager or StackWalk contract (so .NET 9): managed frames cannot be walked; each thread has its native frames".to_owned());
    }
    if core.machine() != Machine::X64 && can_walk {
        report.notes.push("managed frames are unwound on x64 only".to_owned());
    }
    let mut names = names::Names::for_runtime(&path);
    names.inlines = options.inlines;
    let mut natives = native::Natives::new(&core);
    for rt in threads {
        let entry = by_tid.entry(rt.os_id).or_insert_with(|| DumpThread { os_id: rt.os_id, ..DumpThread::default() });
        entry.managed_id = Some(rt.managed_id);
        if let Some(obj) = rt.exception {
            entry.exception = Some(names.exception(t, obj));
        }
        if !can_walk || core.machine() != Machine::X64 {
            continue;
        }
        let Some(regs) = core.threads().iter().find(|c| u64::from(c.tid) == rt.os_id).map(|c| c.regs.clone()) else {
            entry.notes.push("the core has no registers for this thread".to_owned());
            continue;
        };
        walk::walk(t, &rt, &regs, max_frames, &mut names, Some(&mut natives), entry);
    }
    if !can_walk {
        native_only(&core, &mut by_tid, max_frames, &mut report.notes);
    } else if core.machine() == Machine::X64 {
        for entry in by_tid.values_mut().filter(|e| e.managed_id.is_none()) {
            if let Some(regs) = core.threads().iter().find(|c| u64::from(c.tid) == entry.os_id).map(|c| c.regs.clone()) {
                walk::walk_native(Some(t), &regs, max_frames, &mut natives, entry);
            }
        }
    }
    inlined::add_inlined(by_tid.values_mut().flat_map(|t| t.frames.iter_mut()), names.runtime_major);
    names.name_frames(by_tid.values_mut().flat_map(|t| t.frames.iter_mut()));
    Ok(finish(report, by_tid, &core))
}

/// Every thread's native frames, for a core whose runtime gives no code map (none at all, or a
/// descriptor before .NET 10): each thread from where it stopped, by its modules' CFI, up to the
/// first frame in no file's mapping (jitted code, which only the runtime's data can walk).
fn native_only(core: &Core<'_>, by_tid: &mut BTreeMap<u64, DumpThread>, max_frames: usize, notes: &mut Vec<String>) {
    if core.machine() != Machine::X64 {
        return;
    }
    let mut natives = native::Natives::new(core);
    for entry in by_tid.values_mut() {
        if let Some(regs) = core.threads().iter().find(|c| u64::from(c.tid) == entry.os_id).map(|c| c.regs.clone()) {
            walk::walk_native(None, &regs, max_frames, &mut natives, entry);
        }
    }
    if by_tid.values().any(|t| !t.frames.is_empty()) {
        notes.push("native frames only: each thread's frames end where its caller is managed code (jitted or ReadyToRun), which only the runtime's own data could walk past".to_owned());
    }
}

/// libcoreclr.so in a core, and its contract descriptor; or the note that says why there is none.
fn open_runtime(core: &Core<'_>) -> std::result::Result<(String, descriptor::Descriptor), String> {
    let Some((path, base)) = descriptor::find_runtime(core) else {
        return Err("no libcoreclr.so is mapped: not a .NET (CoreCLR) process, or the core has no file mappings".to_owned());
    };
    match descriptor::read(core, &path, base) {
        Ok(d) => Ok((path, d)),
        Err(e) => Err(format!("{path} has no readable contract descriptor ({}: {}{}); runtimes before .NET 9 export none", e.kind, e.message(), e.location)),
    }
}

impl RuntimeInfo {
    fn new(path: String, d: &descriptor::Descriptor) -> RuntimeInfo {
        RuntimeInfo { path, descriptor: d.address, found_in: d.found_in, contracts: d.contracts.iter().map(|(k, v)| (k.clone(), *v)).collect() }
    }
}

fn machine_name(m: Machine) -> String {
    match m {
        Machine::X64 => "x64".to_owned(),
        Machine::Arm64 => "arm64".to_owned(),
        Machine::Other(n) => format!("elf-machine-{n}"),
    }
}

/// Whether `head` (a file's first bytes, 18 or more) starts an ELF core file: what `symbolize`
/// reads as a dump.
pub fn is_core(head: &[u8]) -> bool {
    // e_ident's magic, then e_type (ET_CORE, 4) at 16, little-endian (x64 and arm64 cores).
    head.starts_with(b"\x7fELF") && head.get(16..18) == Some(&[4, 0][..])
}

/// Answer code addresses of a core (absolute, as the process had them) as `symbolize` answers a
/// trace's: each address's method, its IL offset by the frame rule (`return_address`: looked up
/// at the call, `address - 1`), and its line where the module's PDB is found; one [`DumpFrame`]
/// per address, in order (`kind` "managed", or "unknown" for an address in no managed code). A
/// core without a runtime that describes its code map answers every address with "unknown" and
/// a note.
pub fn symbolize(data: &[u8], addresses: &[u64], return_address: bool, symbols: &crate::symbols::source::SymbolPaths) -> Result<DumpReport> {
    let core = Core::parse(data)?;
    let mut report = DumpReport { machine: machine_name(core.machine()), ..DumpReport::default() };
    let unknown = |a: u64| DumpFrame { kind: "unknown".to_owned(), ip: a, ..DumpFrame::default() };
    let mut frames: Vec<DumpFrame> = addresses.iter().map(|&a| unknown(a)).collect();
    match open_runtime(&core) {
        Err(note) => report.notes.push(note),
        Ok((path, d)) if d.contract("ExecutionManager").is_some() => {
            let t = Target { core: &core, d: &d };
            let mut names = names::Names::for_runtime(&path);
            for f in frames.iter_mut() {
                let lookup = if return_address { f.ip.wrapping_sub(1) } else { f.ip };
                if let Ok(Some(block)) = code::find(t, lookup) {
                    let mut answer = names.frame(t, &block, f.ip, 0);
                    answer.leaf = !return_address;
                    lines::jit_il_offset(&mut answer);
                    *f = answer;
                }
            }
            names.name_frames(frames.iter_mut());
            report.runtime = Some(RuntimeInfo::new(path, &d));
        }
        Ok((path, _)) => report.notes.push(format!("{path}'s descriptor has no ExecutionManager contract (so .NET 9): no address of its code can be answered")),
    }
    report.threads.push(DumpThread { frames, ..DumpThread::default() });
    add_lines(&mut report, symbols);
    Ok(report)
}

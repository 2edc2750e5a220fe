//! Native frames, unwound by the call frame information their modules carry (`.eh_frame`, found
//! through the `PT_GNU_EH_FRAME` segment's `.eh_frame_hdr` search table; System V x86-64 ABI
//! §6.2, and the LSB's "Exception Frames"), and named by the module's dynamic symbols.
//!
//! Everything is read from the core's own memory: a full dump holds each loaded module's
//! read-only segments, so no file on disk can be of another build. A module whose tables the core
//! lacks, or a rule this reader does not evaluate, ends the native stretch; the walk then goes on
//! through the runtime's explicit frames, as it did before this reader existed.
//!
//! Rules written as DWARF expressions are evaluated (DWARF 5 §6.4.2; gimli's evaluator, with the
//! core's memory and the frame's registers): the C library's signal return trampoline
//! (`__restore_rt`) describes the interrupted frame that way, its CFA and every register read from
//! the `ucontext_t` the kernel pushed. Its CIE is marked a signal frame (augmentation `S`), so the
//! interrupted frame's `ip` is where that thread stopped, not a return address.

use std::collections::HashMap;

use gimli::{BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EndianSlice, EvaluationResult, Expression, LittleEndian, Location, Register, RegisterRule, UnwindContext, UnwindSection, Value};
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;

use super::core::Core;
use super::descriptor::{dynamic_tables, DynamicTables};
use super::target::Context;

/// The most `.eh_frame` bytes taken from one module (libcoreclr's is about 1 MiB).
const MAX_EH_FRAME: usize = 64 << 20;
/// The most dynamic symbols kept for one module.
const MAX_SYMBOLS: u32 = 1 << 20;
/// The most modules whose tables are kept.
const MAX_MODULES: usize = 1024;
/// The most dynamic symbols kept over all modules of one core.
const MAX_ALL_SYMBOLS: usize = 1 << 22;

/// DWARF's x86-64 register numbers (System V ABI, figure 3.36) → the walk's [`Context`] order
/// (the Windows unwind codes' RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8-R15).
fn context_index(r: Register) -> Option<usize> {
    Some(match r.0 {
        0 => 0,
        1 => 2,
        2 => 1,
        3 => 3,
        4 => 6,
        5 => 7,
        6 => 5,
        7 => 4,
        n @ 8..=15 => usize::from(n),
        _ => return None,
    })
}

/// DWARF's number for the return address column on x86-64.
const RETURN_ADDRESS: Register = Register(16);
/// The most operations one CFI expression may run (glibc's trampoline's are one or two).
const MAX_EXPRESSION_STEPS: u32 = 256;

/// The value of a CFI expression: `initial` pushed first (the CFA, for a register's rule; none for
/// the CFA's own), registers from `reg`, memory from the core. A register rule's expression gives
/// the address where the register is saved (`DW_CFA_expression`) or its value
/// (`DW_CFA_val_expression`); both are the top of the stack here. Anything the core or the frame
/// cannot answer is `None`.
fn evaluate(core: &Core<'_>, expr: Expression<EndianSlice<'_, LittleEndian>>, initial: Option<u64>, reg: impl Fn(Register) -> Option<u64>) -> Option<u64> {
    // .eh_frame expressions use the CIE's address size; the version only matters to operations
    // CFI may not use.
    let encoding = gimli::Encoding { format: gimli::Format::Dwarf32, version: 4, address_size: 8 };
    let mut eval = expr.evaluation(encoding);
    eval.set_max_iterations(MAX_EXPRESSION_STEPS);
    if let Some(v) = initial {
        eval.set_initial_value(v);
    }
    let mut step = eval.evaluate().ok()?;
    for _ in 0..MAX_EXPRESSION_STEPS {
        step = match step {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let bytes = core.bytes(address, usize::from(size)).ok()?;
                let mut word = [0u8; 8];
                word.get_mut(..bytes.len())?.copy_from_slice(bytes);
                eval.resume_with_memory(Value::Generic(u64::from_le_bytes(word))).ok()?
            }
            EvaluationResult::RequiresRegister { register, .. } => eval.resume_with_register(Value::Generic(reg(register)?)).ok()?,
            _ => return None,
        };
    }
    if !matches!(step, EvaluationResult::Complete) {
        return None;
    }
    match eval.result().first()?.location {
        Location::Address { address } => Some(address),
        Location::Value { value } => value.to_u64(!0).ok(),
        _ => None,
    }
}

/// A module's unwind tables and symbols, as the core holds them.
struct Module<'a> {
    path: String,
    /// Where the module's file offset 0 is mapped.
    base: u64,
    hdr_address: u64,
    hdr: &'a [u8],
    eh_frame_address: u64,
    eh_frame: &'a [u8],
    /// Functions: (start, end, name), sorted by start.
    symbols: Vec<(u64, u64, String)>,
    /// Symbol table entries read for them.
    examined: usize,
}

/// One native frame: where it is, and what it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NativeName {
    /// The module's path.
    pub module: Option<String>,
    /// The function's dynamic symbol, when `ip` lies inside one.
    pub symbol: Option<String>,
    /// `ip`'s offset from the symbol's start, or else from the module's base.
    pub offset: u64,
}

/// The native modules of one core, read on demand.
pub struct Natives<'c, 'a> {
    core: &'c Core<'a>,
    modules: HashMap<u64, Option<Module<'a>>>,
    unwind: Box<UnwindContext<usize>>,
    /// Symbols that may still be kept ([`MAX_ALL_SYMBOLS`] at first).
    symbols_left: usize,
}

impl std::fmt::Debug for Natives<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Natives").field("modules", &self.modules.len()).finish_non_exhaustive()
    }
}

impl<'c, 'a> Natives<'c, 'a> {
    /// Native modules of `core`.
    pub fn new(core: &'c Core<'a>) -> Self {
        Natives { core, modules: HashMap::new(), unwind: Box::new(UnwindContext::new()), symbols_left: MAX_ALL_SYMBOLS }
    }

    /// The base of the module mapped over `ip`: the start of its mapping at file offset 0.
    fn module_base(&self, ip: u64) -> Option<u64> {
        let m = self.core.file_at(ip)?;
        self.core.files().iter().find(|f| f.path == m.path && f.file_offset == 0 && f.start <= ip).map(|f| f.start)
    }

    fn module(&mut self, ip: u64) -> Option<&Module<'a>> {
        let base = self.module_base(ip)?;
        if !self.modules.contains_key(&base) {
            if self.modules.len() >= MAX_MODULES {
                return None;
            }
            let m = load(self.core, base, self.symbols_left);
            self.symbols_left = self.symbols_left.saturating_sub(m.as_ref().map_or(0, |m| m.examined));
            self.modules.insert(base, m);
        }
        self.modules.get(&base)?.as_ref()
    }

    /// Whether `ip` lies in an ELF module whose unwind tables the core holds: native code, not
    /// jitted code (anonymous memory) nor a ReadyToRun image (a PE file's mapping).
    pub fn in_native_module(&mut self, ip: u64) -> bool {
        self.module(ip).is_some()
    }

    /// What `ip` is: its module and, when it lies inside one, its function's symbol.
    pub fn name(&mut self, ip: u64) -> NativeName {
        let Some(m) = self.module(ip) else {
            let module = self.core.file_at(ip).map(|f| f.path.clone());
            return NativeName { module, symbol: None, offset: 0 };
        };
        let i = m.symbols.partition_point(|s| s.0 <= ip);
        match i.checked_sub(1).and_then(|i| m.symbols.get(i)).filter(|s| ip < s.1) {
            Some((start, _, name)) => NativeName { module: Some(m.path.clone()), symbol: Some(name.clone()), offset: ip.wrapping_sub(*start) },
            None => NativeName { module: Some(m.path.clone()), symbol: None, offset: ip.wrapping_sub(m.base) },
        }
    }

    /// The caller's context of the native frame `ctx` (x86-64), by its module's CFI: `None` where
    /// the core lacks the tables, the address has no entry, a rule is not one this reader
    /// evaluates, or the return address is undefined (the outermost frame). `exact`: `ctx.ip` is
    /// where the thread stopped rather than a return address (looked up one byte back). The
    /// caller's own `exact` comes with it: true past a signal frame, whose caller was interrupted
    /// where it stood.
    pub fn unwind(&mut self, ctx: &Context, exact: bool) -> Option<(Context, bool)> {
        let pc = if exact { ctx.ip } else { ctx.ip.wrapping_sub(1) };
        let core = self.core;
        let base = self.module_base(pc)?;
        self.module(pc)?;
        let m = self.modules.get(&base)?.as_ref()?;
        let bases = BaseAddresses::default().set_eh_frame_hdr(m.hdr_address).set_eh_frame(m.eh_frame_address);
        let hdr = EhFrameHdr::new(m.hdr, LittleEndian).parse(&bases, 8).ok()?;
        let table = hdr.table()?;
        let eh_frame = EhFrame::new(m.eh_frame, LittleEndian);
        let fde = table.fde_for_address(&eh_frame, &bases, pc, EhFrame::cie_from_offset).ok()?;
        let signal_frame = fde.cie().is_signal_trampoline();
        let row = fde.unwind_info_for_address(&eh_frame, &bases, &mut self.unwind, pc).ok()?;
        let reg = |r: Register| context_index(r).and_then(|i| ctx.regs.get(i).copied());
        let cfa = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => reg(*register)?.wrapping_add_signed(*offset),
            CfaRule::Expression(e) => evaluate(core, e.get(&eh_frame).ok()?, None, reg)?,
        };
        // A register's value in the caller by its rule; `None` for a rule that keeps it (the
        // same value, or undefined) or one this reader cannot follow (`Err`).
        let value = |rule: &RegisterRule<usize>| -> Result<Option<u64>, ()> {
            Ok(Some(match rule {
                RegisterRule::Offset(n) => core.u64(cfa.wrapping_add_signed(*n)).map_err(drop)?,
                RegisterRule::ValOffset(n) => cfa.wrapping_add_signed(*n),
                RegisterRule::Register(from) => reg(*from).ok_or(())?,
                RegisterRule::Expression(e) => core.u64(evaluate(core, e.get(&eh_frame).map_err(drop)?, Some(cfa), reg).ok_or(())?).map_err(drop)?,
                RegisterRule::ValExpression(e) => evaluate(core, e.get(&eh_frame).map_err(drop)?, Some(cfa), reg).ok_or(())?,
                RegisterRule::SameValue | RegisterRule::Undefined => return Ok(None),
                _ => return Err(()),
            }))
        };
        let mut caller = *ctx;
        // The caller's stack pointer is the CFA (the value it had before the call), unless a rule
        // says otherwise (a signal frame restores the interrupted one's).
        if let Some(sp) = caller.regs.get_mut(4) {
            *sp = cfa;
        }
        for (r, rule) in row.registers() {
            let Some(i) = context_index(*r) else { continue };
            if let Some(v) = value(rule).ok()? {
                if let Some(slot) = caller.regs.get_mut(i) {
                    *slot = v;
                }
            }
        }
        caller.ip = match row.register(RETURN_ADDRESS) {
            rule @ (RegisterRule::Offset(_) | RegisterRule::Expression(_) | RegisterRule::ValExpression(_)) => value(&rule).ok()??,
            _ => return None,
        };
        (caller.ip != 0).then_some((caller, signal_frame))
    }
}

/// A module's tables from the core: its program headers at `base`, the search table and the
/// `.eh_frame` it points to, and its dynamic function symbols.
fn load<'a>(core: &Core<'a>, base: u64, max_symbols: usize) -> Option<Module<'a>> {
    let head = core.bytes(base, 64).ok()?;
    let hdr = elf::FileHeader64::<Endianness>::parse(head).ok()?;
    let endian = hdr.endian().ok()?;
    let phnum = usize::from(hdr.e_phnum(endian)).min(256);
    let table = core.bytes(base.wrapping_add(hdr.e_phoff(endian)), phnum.checked_mul(56)?).ok()?;
    let phdrs: &[elf::ProgramHeader64<Endianness>] = object::pod::slice_from_bytes(table, phnum).ok()?.0;
    let first = phdrs.iter().find(|p| p.p_type(endian) == elf::PT_LOAD && p.p_offset(endian) == 0)?;
    let bias = base.wrapping_sub(first.p_vaddr(endian) & !0xFFF);
    let eh = phdrs.iter().find(|p| p.p_type(endian) == elf::PT_GNU_EH_FRAME)?;
    let hdr_address = bias.wrapping_add(eh.p_vaddr(endian));
    let hdr_bytes = core.bytes(hdr_address, usize::try_from(eh.p_memsz(endian)).ok()?.min(MAX_EH_FRAME)).ok()?;
    // The search table's header (version 1, then the encoded pointer to .eh_frame).
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_address);
    let parsed = EhFrameHdr::new(hdr_bytes, LittleEndian).parse(&bases, 8).ok()?;
    let eh_frame_address = match parsed.eh_frame_ptr() {
        gimli::Pointer::Direct(a) => a,
        gimli::Pointer::Indirect(_) => return None,
    };
    let eh_frame = core.bytes_up_to(eh_frame_address, MAX_EH_FRAME).ok()?;
    let dynamic = phdrs.iter().find(|p| p.p_type(endian) == elf::PT_DYNAMIC).map(|p| bias.wrapping_add(p.p_vaddr(endian)));
    let (symbols, examined) = dynamic.map(|d| symbols(core, d, bias, max_symbols)).unwrap_or_default();
    let path = core.file_at(base).map(|f| f.path.clone()).unwrap_or_default();
    Some(Module { path, base, hdr_address, hdr: hdr_bytes, eh_frame_address, eh_frame, symbols, examined })
}

/// The dynamic section's function symbols: (start, end, name), sorted by start, and how many
/// entries were read (at most `max`). Their number is what the GNU hash table's chains end at (the
/// gABI's DT_GNU_HASH extension).
fn symbols(core: &Core<'_>, dynamic: u64, bias: u64, max: usize) -> (Vec<(u64, u64, String)>, usize) {
    let Ok(Some(DynamicTables { symtab, strtab, gnu_hash: gnu })) = dynamic_tables(core, dynamic, bias) else { return (Vec::new(), 0) };
    let count = gnu_symbol_count(core, gnu).unwrap_or(0).min(MAX_SYMBOLS).min(u32::try_from(max).unwrap_or(u32::MAX));
    let mut out = Vec::new();
    for i in 0..u64::from(count) {
        // Elf64_Sym: st_name u32, st_info u8, st_other u8, st_shndx u16, st_value u64, st_size u64.
        let Ok(sym) = core.bytes(symtab.wrapping_add(i.wrapping_mul(24)), 24) else { break };
        let word = |o: usize| sym.get(o..o.saturating_add(8)).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes);
        let st_name = u32::try_from(word(0) & 0xFFFF_FFFF).unwrap_or(0);
        let st_info = sym.get(4).copied().unwrap_or(0);
        let (value, size) = (word(8), word(16));
        if st_info & 0xF != elf::STT_FUNC || value == 0 || size == 0 {
            continue;
        }
        let Ok(name) = core.c_string(strtab.wrapping_add(u64::from(st_name)), 512) else { continue };
        let start = value.wrapping_add(bias);
        out.push((start, start.saturating_add(size), String::from_utf8_lossy(&name).into_owned()));
    }
    out.sort_unstable_by_key(|s| s.0);
    (out, usize::try_from(count).unwrap_or(usize::MAX))
}

/// How many symbols a DT_GNU_HASH table covers: one past the last chain entry of its highest
/// bucket (nbuckets, symoffset, bloom_size, bloom_shift, bloom[bloom_size] u64, buckets u32,
/// chains u32 whose bit 0 ends a bucket's run).
fn gnu_symbol_count(core: &Core<'_>, gnu: u64) -> Option<u32> {
    let nbuckets = core.u32(gnu).ok()?.min(1 << 17);
    let symoffset = core.u32(gnu.wrapping_add(4)).ok()?;
    let bloom_size = core.u32(gnu.wrapping_add(8)).ok()?;
    let buckets = gnu.wrapping_add(16).wrapping_add(u64::from(bloom_size).wrapping_mul(8));
    let mut last = 0u32;
    for b in 0..u64::from(nbuckets) {
        last = last.max(core.u32(buckets.wrapping_add(b.wrapping_mul(4))).ok()?);
    }
    if last < symoffset {
        return Some(symoffset);
    }
    let chains = buckets.wrapping_add(u64::from(nbuckets).wrapping_mul(4));
    for _ in 0..MAX_SYMBOLS {
        let c = core.u32(chains.wrapping_add(u64::from(last.wrapping_sub(symoffset)).wrapping_mul(4))).ok()?;
        if c & 1 != 0 {
            return last.checked_add(1);
        }
        last = last.checked_add(1)?;
    }
    None
}

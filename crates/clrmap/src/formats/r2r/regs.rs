//! Register names and variable locations as a person reads them, per machine.
//!
//! `ICorDebugInfo::RegNum` (cordebuginfo.h) numbers each machine's integer registers in its own
//! order, then `REGNUM_COUNT`, then `REGNUM_AMBIENT_SP` (the SP at the method's entry, for frames
//! without a frame pointer). Floating-point registers of `VLT_REG_FP` are numbered by the FP
//! register file (xmm on x86/x64, d on ARM, v on ARM64).

use super::debuginfo::VarLoc;
use super::machine::Machine;

const X64: [&str; 16] = ["rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"];
const X86: [&str; 8] = ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"];
const ARM: [&str; 16] = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "sp", "lr", "pc"];
const ARM64: [&str; 33] = [
    "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28",
    "fp", "lr", "sp", "pc",
];

/// The name of integer register `reg` on `machine`; `ambient-sp` for `REGNUM_AMBIENT_SP`, and
/// `reg#N` for a number the machine does not have.
pub fn register_name(machine: Machine, reg: u32) -> String {
    let names: &[&str] = match machine {
        Machine::X64 => &X64,
        Machine::X86 => &X86,
        Machine::Arm => &ARM,
        Machine::Arm64 => &ARM64,
    };
    match names.get(reg as usize) {
        Some(n) => (*n).to_owned(),
        // REGNUM_COUNT is the table's length; REGNUM_AMBIENT_SP follows it.
        None if reg as usize == names.len().saturating_add(1) => "ambient-sp".to_owned(),
        None => format!("reg#{reg}"),
    }
}

fn fp_name(machine: Machine, reg: u32) -> String {
    match machine {
        Machine::X64 | Machine::X86 => format!("xmm{reg}"),
        Machine::Arm => format!("d{reg}"),
        Machine::Arm64 => format!("v{reg}"),
    }
}

fn stack(machine: Machine, base: u32, offset: i32) -> String {
    let sign = if offset < 0 { '-' } else { '+' };
    format!("[{}{sign}0x{:X}]", register_name(machine, base), offset.unsigned_abs())
}

/// A variable location in a machine's own words: `rdi`, `[rbp-0x8]`, `byref [rsp+0x10]`,
/// `rdx:rax`, ...
pub fn describe_location(machine: Machine, loc: &VarLoc) -> String {
    let r = |reg| register_name(machine, reg);
    match *loc {
        VarLoc::Reg { reg } => r(reg),
        VarLoc::RegByRef { reg } => format!("byref {}", r(reg)),
        VarLoc::RegFp { reg } => fp_name(machine, reg),
        VarLoc::Stack { base_reg, offset } => stack(machine, base_reg, offset),
        VarLoc::StackByRef { base_reg, offset } => format!("byref {}", stack(machine, base_reg, offset)),
        // VLT_REG_REG: the value is split over two registers, the second holding the high part.
        VarLoc::RegReg { reg1, reg2 } => format!("{}:{}", r(reg2), r(reg1)),
        VarLoc::RegStack { reg, base_reg, offset } => format!("{}:{}", stack(machine, base_reg, offset), r(reg)),
        VarLoc::StackReg { offset, base_reg, reg } => format!("{}:{}", r(reg), stack(machine, base_reg, offset)),
        VarLoc::Stack2 { base_reg, offset } => format!("{} (2 slots)", stack(machine, base_reg, offset)),
        VarLoc::FpStack { reg } => format!("st({reg})"),
        VarLoc::FixedVa { offset } => format!("varargs +0x{offset:X}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_per_machine() {
        assert_eq!(register_name(Machine::X64, 7), "rdi");
        assert_eq!(register_name(Machine::X64, 17), "ambient-sp");
        assert_eq!(register_name(Machine::X86, 5), "ebp");
        assert_eq!(register_name(Machine::X86, 9), "ambient-sp");
        assert_eq!(register_name(Machine::Arm, 13), "sp");
        assert_eq!(register_name(Machine::Arm64, 29), "fp");
        assert_eq!(register_name(Machine::Arm64, 34), "ambient-sp");
        assert_eq!(register_name(Machine::Arm64, 40), "reg#40");
        assert_eq!(describe_location(Machine::X64, &VarLoc::Stack { base_reg: 5, offset: -8 }), "[rbp-0x8]");
        assert_eq!(describe_location(Machine::X64, &VarLoc::StackByRef { base_reg: 4, offset: 0x10 }), "byref [rsp+0x10]");
        assert_eq!(describe_location(Machine::X86, &VarLoc::RegReg { reg1: 0, reg2: 2 }), "edx:eax");
        assert_eq!(describe_location(Machine::Arm64, &VarLoc::RegFp { reg: 3 }), "v3");
    }
}

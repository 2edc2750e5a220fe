//! ReadyToRun images: where the runtime gets the IL-to-native maps of precompiled code
//! (ilmap.md §2-3; dotnet/runtime `docs/design/coreclr/botr/readytorun-format.md`).
//!
//! Supported: majors 3 (3.1) to 15 with nibble-encoded bounds (3.x and 9.x are tested on real
//! framework images), 16 with bit-packed bounds and 2-bit sources, 17+ with 3-bit sources and the
//! fat header. Variables are decoded for majors below 16 (their layout changed later).
//!
//! Machines: x86, x64, ARM64 and ARM (Thumb-2), on Windows and with any OS override
//! (`machine`); 3.1's win-x86, win-x64 and linux-x64 frameworks are tested. Any other PE
//! `Machine` is `unsupported_machine`.

mod debuginfo;
pub mod frames;
mod image;
pub mod machine;
mod methodsig;
pub mod regs;
pub mod native;
#[cfg(test)]
mod synthetic;

pub use debuginfo::{
    bitpacked_bounds, decode as decode_debug_info, encode_bitpacked_bounds, encode_nibble_bounds, nibble_bounds, nibble_vars, DebugInfo,
    NibbleWriter, Var, VarLoc,
};
pub use methodsig::{instantiation_name, read_method_signature, MethodSig};
pub use image::{section, EntryPoint, ReadyToRunImage, RuntimeFunction, MAX_KNOWN_MAJOR, READYTORUN_SIGNATURE};
pub use machine::{Machine, Os};

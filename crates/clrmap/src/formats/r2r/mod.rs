//! ReadyToRun images: where the runtime gets the IL-to-native maps of precompiled code
//! (docs/format-notes.md#readytorun-images; dotnet/runtime `docs/design/coreclr/botr/readytorun-format.md`).
//!
//! Supported: majors 3 to 26, each read in the [`DebugInfoLayout`] its major selects: nibble
//! bounds to 15 (3.1, 9.1 and 10.1 tested on real frameworks), bit-packed bounds with 2 source
//! bits at 16 (10.0.12), the fat-or-slim header, 3 source bits and number-first variables at 26
//! (11.0.0's packs). 17-25 (previews, never read) decode bounds but not variables. A newer major is
//! `unsupported_version` unless the caller assumes a layout ([`ReadyToRunImage::parse_assuming`]).
//!
//! Machines: x86, x64, ARM64 and ARM (Thumb-2), on Windows and with any OS override
//! (`machine`); 3.1's win-x86, win-x64 and linux-x64 frameworks are tested. Any other PE
//! `Machine` is `unsupported_machine`.

mod debuginfo;
pub mod frames;
mod image;
mod jitted;
pub mod machine;
mod methodsig;
pub mod native;
pub mod regs;
#[cfg(test)]
mod synthetic;

pub use debuginfo::{
    async_info, bitpacked_bounds, decode as decode_debug_info, decode_parts as decode_debug_info_parts, encode_async_info, encode_bitpacked_bounds, encode_nibble_bounds, encode_vars, nibble_bounds,
    nibble_vars, number_first_vars, split as split_debug_info, AsyncSuspension, BoundsLayout, Chunks, DebugInfo, DebugInfoLayout, HeaderLayout, NibbleWriter, Var, VarLoc, VarsLayout,
    NEWEST_PROVEN_MAJOR,
};
pub use image::{section, EntryPoint, ReadyToRunImage, RuntimeFunction, READYTORUN_SIGNATURE};
pub use jitted::{jitted_blob, jitted_debug_info, JittedDebugInfo, PATCHPOINT_INFO_SIZE};
pub use machine::{Machine, Os};
pub use methodsig::{instantiation_name, read_method_signature, MethodSig};

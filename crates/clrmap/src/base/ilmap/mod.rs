//! IL-to-native maps (`ICorProfilerInfo::GetILToNativeMapping`): the model shared by every source.

mod model;
mod protocol;
mod symbolize;
mod transform;
mod version;

pub use model::{Bound, CodeBody, CodeKind, CorDebugIlToNativeMap, CorDebugIlToNativeMappingTypes, IlOffset, MapEntry, SourceTypes, Tier};
pub use protocol::{MapStore, E_INVALIDARG, S_OK};
pub use symbolize::{il_to_native, native_to_il, runtime_il_offset, Policy, Resolved};
pub use transform::public_map;
pub use version::runtime_major;

#[cfg(test)]
mod tests;

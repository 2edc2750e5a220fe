//! IL-to-native maps (`ICorProfilerInfo::GetILToNativeMapping`): the model shared by every source.

mod model;
mod protocol;
mod symbolize;
mod transform;

pub use model::{CodeKind, Tier, 
    Bound, CodeBody, CorDebugIlToNativeMap, CorDebugIlToNativeMappingTypes, IlOffset, MapEntry, SourceTypes,
};
pub use transform::public_map;
pub use protocol::{MapStore, E_INVALIDARG, S_OK};
pub use symbolize::{il_to_native, native_to_il, runtime_il_offset, Policy, Resolved};

#[cfg(test)]
mod tests;

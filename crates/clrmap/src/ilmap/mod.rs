//! IL-to-native maps (`ICorProfilerInfo::GetILToNativeMapping`): the model shared by every source.

mod model;

pub use model::{
    Bound, CodeBody, CorDebugIlToNativeMap, CorDebugIlToNativeMappingTypes, IlOffset, MapEntry, SourceTypes,
};

//! The ground floor: bytes, files and the one model every source of IL-to-native maps feeds.
//!
//! Nothing here imports anything above it. [`read`] is the panic-free cursor and the error type,
//! [`fs`] opens the files users and other programs name (regular files only, never blocking), and
//! [`ilmap`] is `COR_DEBUG_IL_TO_NATIVE_MAP` with the runtime's special offsets.
pub mod fs;
pub mod guid;
pub mod ilmap;
pub mod json;
pub mod read;

//! ECMA-335 type signatures (II.23.2.12, with the corrections of dotnet/runtime
//! `docs/design/specs/Ecma-335-Augments.md`): decode, encode, print, parse.

mod names;
mod provider;
mod types;

pub use names::{HexTokens, TypeNames};
pub use provider::{TreeProvider, TypeProvider};
pub use types::{ArrayShape, CallingConvention, MethodSignature, Primitive, Type};

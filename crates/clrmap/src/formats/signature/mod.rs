//! ECMA-335 type signatures (II.23.2.12, with the corrections of dotnet/runtime
//! `docs/design/specs/Ecma-335-Augments.md`): decode, encode, print, parse.
//!
//! * [`decode_type`] walks one type strictly (the rules of docs/output.md#strictness) and hands each
//!   production to a [`TypeProvider`]: [`TreeProvider`] builds owned [`Type`] trees,
//!   [`SpanRenderer`] and [`StreamRenderer`] print ILAsm text (one printer, into a buffer or a
//!   writer), and `()` only validates ([`skip_type`]).
//! * [`decode_zapsig_type`] reads the runtime's zapsig flavour (ReadyToRun signatures), whose
//!   extra codes reach a [`ZapsigProvider`]; the strict decoder never accepts them.
//! * Where VOID may stand is decided in one place (`position.rs`), for the decoders, the encoder
//!   and the fast acceptors alike.
//! * [`encode_type`] writes canonical bytes; [`parse_type`] reads the printer's notation back.
//! * Token names go through [`TypeNames`]; [`HexTokens`] prints `0x01000012`.

mod decode;
mod encode;
mod names;
mod parse;
mod position;
mod print;
mod provider;
pub(crate) mod quick;
mod sig;
mod types;
mod zapsig;

pub use decode::{decode_local_type, decode_return_type, decode_type, skip_type, MAX_ARRAY_RANK, MAX_DEPTH};
pub use encode::encode_type;
pub use names::{HexTokens, TypeNames};
pub use parse::{parse_type, parse_type_list};
pub use print::{check_names, fold, render, render_one, stream_one, write_type, Print, Span, SpanRenderer, StreamRenderer};
pub use provider::{TreeProvider, TypeProvider};
pub use sig::TypeSig;
pub use types::{ArrayShape, CallingConvention, MethodSignature, Primitive, Type};
pub use zapsig::{decode_zapsig_type, skip_zapsig_type, ZapsigProvider};

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) use tests::roundtrip as tests_support;

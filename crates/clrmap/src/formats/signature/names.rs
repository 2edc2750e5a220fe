//! Token names: how the printer turns a TypeDef/TypeRef/TypeSpec token into text.

use core::fmt;

/// Renders metadata tokens for the signature printer (docs/output.md#type-signatures).
///
/// Without metadata ([`HexTokens`]) a token prints as `0x` and 8 upper-case hex digits. The
/// metadata module supplies a resolver that prints real names (`[System.Runtime]System.String`,
/// `Ns.Outer/Inner`, and TypeSpec tokens as their own signatures).
pub trait TypeNames {
    /// Write the name of a TypeDef (0x02), TypeRef (0x01) or TypeSpec (0x1B) token.
    fn write_type_name(&self, token: u32, out: &mut dyn fmt::Write) -> fmt::Result;

    /// Why `token`, which [`TypeNames::write_type_name`] could not name, is the metadata's fault:
    /// it names a row that is there but malformed (a TypeSpec whose signature does not decode or
    /// contains itself). The printers then fail with this error, where they print the raw token
    /// for a token that names no row (`None`, the default).
    fn name_fault(&self, token: u32) -> Option<crate::base::read::Error> {
        let _ = token;
        None
    }
}

/// The resolver used without metadata: tokens print as `0x01000012`.
#[derive(Clone, Copy, Debug, Default)]
pub struct HexTokens;

impl TypeNames for HexTokens {
    fn write_type_name(&self, token: u32, out: &mut dyn fmt::Write) -> fmt::Result {
        write!(out, "0x{token:08X}")
    }
}

impl<T: TypeNames + ?Sized> TypeNames for &T {
    fn write_type_name(&self, token: u32, out: &mut dyn fmt::Write) -> fmt::Result {
        (**self).write_type_name(token, out)
    }

    fn name_fault(&self, token: u32) -> Option<crate::base::read::Error> {
        (**self).name_fault(token)
    }
}

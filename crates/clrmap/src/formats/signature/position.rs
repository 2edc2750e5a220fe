//! Where a type stands, and the one rule of the grammar that depends on it: ELEMENT_TYPE_VOID.
//!
//! II.23.2.11 (RetType) and II.23.2.12 (`PTR CustomMod* VOID`) are the only productions that take
//! VOID; everywhere else it is `bad_element_type` (docs/output.md#strictness). Custom
//! modifiers are read as types wrapping the type they modify, so they keep the position they
//! stand in: `PTR CMOD_OPT t VOID` is still a pointee. The strict decoder, the encoder, the fast
//! acceptors and the method-signature readers all ask this module, so the rule is written once.

use super::types::Primitive;
use crate::base::read::{Error, ErrorKind, Result};

/// The error text for a VOID where the grammar does not take one.
const VOID_HERE: &str = "VOID only as an FNPTR return or under PTR";

/// Where a type stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// Anywhere else: a generic argument, an array's element, a parameter, a field, a local.
    Plain,
    /// A method's or an FNPTR's return type (RetType, II.23.2.11).
    Return,
    /// The type under PTR (II.23.2.12).
    Pointee,
}

impl Position {
    /// True if `primitive` may stand here: every primitive but VOID may stand anywhere.
    pub const fn allows(self, primitive: Primitive) -> bool {
        !matches!(primitive, Primitive::Void) || !matches!(self, Position::Plain)
    }

    /// True if the element type `code` is a primitive that may stand here.
    pub const fn allows_primitive_code(self, code: u8) -> bool {
        match Primitive::from_code(code) {
            Some(p) => self.allows(p),
            None => false,
        }
    }

    /// `Ok` if `primitive` may stand here; otherwise `bad_element_type` at `at`, the offset of
    /// its element type byte (docs/output.md#fault-offsets).
    pub fn check(self, primitive: Primitive, at: u64) -> Result<()> {
        if self.allows(primitive) {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::BadElementType, at, VOID_HERE))
        }
    }

    /// The same rule for a caller with no offset (the encoder, which has no input bytes).
    pub fn check_nowhere(self, primitive: Primitive) -> Result<()> {
        if self.allows(primitive) {
            Ok(())
        } else {
            Err(Error::nowhere(ErrorKind::BadElementType, VOID_HERE))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn void_only_as_a_return_or_a_pointee() {
        for code in 0..=255u8 {
            let primitive = Primitive::from_code(code).is_some();
            assert_eq!(Position::Return.allows_primitive_code(code), primitive, "{code:#04x}");
            assert_eq!(Position::Pointee.allows_primitive_code(code), primitive, "{code:#04x}");
            assert_eq!(Position::Plain.allows_primitive_code(code), primitive && code != 0x01, "{code:#04x}");
        }
        let e = Position::Plain.check(Primitive::Void, 7).unwrap_err();
        assert_eq!((e.kind, e.offset()), (ErrorKind::BadElementType, Some(7)));
    }
}

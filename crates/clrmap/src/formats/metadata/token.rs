//! Metadata tokens (ECMA-335 II.22, III.1.9): the table in the top byte, the row (1-based, 0 for
//! none) in the low 24 bits. The table numbers are [`table`]'s.

use core::fmt;

use crate::formats::metadata::schema::table;

/// A metadata token: `0x06000008` is row 8 of the MethodDef table.
///
/// ```
/// use clrmap::metadata::{table, Token};
///
/// let t = Token::method_def(8);
/// assert_eq!(t.raw(), 0x0600_0008);
/// assert_eq!((t.table(), t.rid()), (table::METHOD_DEF, 8));
/// assert!(t.is(table::METHOD_DEF));
/// assert_eq!(Token::from(0x1B00_0002).table(), table::TYPE_SPEC);
/// assert_eq!(t.to_string(), "0x06000008");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(u32);

impl Token {
    /// The largest row a token can hold (24 bits).
    pub const MAX_RID: u32 = 0x00FF_FFFF;

    /// Row `rid` of `table`; only `rid`'s low 24 bits are kept (a table holds at most
    /// [`Token::MAX_RID`] rows).
    pub const fn new(table: u8, rid: u32) -> Token {
        Token(((table as u32) << 24) | (rid & Self::MAX_RID))
    }

    /// Row `rid` of the MethodDef table (`0x06000000 | rid`).
    pub const fn method_def(rid: u32) -> Token {
        Token::new(table::METHOD_DEF, rid)
    }

    /// The table, as [`table`] numbers it (the top byte).
    pub const fn table(self) -> u8 {
        (self.0 >> 24) as u8
    }

    /// The row, from 1 (0: no row); the low 24 bits.
    pub const fn rid(self) -> u32 {
        self.0 & Self::MAX_RID
    }

    /// Is it a token of `table`?
    pub const fn is(self, table: u8) -> bool {
        self.table() == table
    }

    /// The token as a `u32`, as metadata, PDBs and the runtime write it.
    pub const fn raw(self) -> u32 {
        self.0
    }
}

impl From<u32> for Token {
    fn from(raw: u32) -> Token {
        Token(raw)
    }
}

impl From<Token> for u32 {
    fn from(t: Token) -> u32 {
        t.0
    }
}

/// `0x06000008`: hex, eight digits, as ILDasm and the runtime print tokens.
impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:08X}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts() {
        let t = Token::method_def(0x3E);
        assert_eq!(t.raw(), 0x0600_003E);
        assert_eq!(t.table(), 6);
        assert_eq!(t.rid(), 0x3E);
        assert!(t.is(table::METHOD_DEF) && !t.is(table::METHOD_SPEC));
        let spec = Token::from(0x2B00_0001);
        assert_eq!((spec.table(), spec.rid()), (table::METHOD_SPEC, 1));
        assert_eq!(u32::from(Token::new(table::TYPE_SPEC, 7)), 0x1B00_0007);
    }

    #[test]
    fn edges() {
        // The row is 24 bits: a larger one keeps its low bits and never touches the table.
        assert_eq!(Token::method_def(0x0100_0005).raw(), 0x0600_0005);
        assert_eq!(Token::method_def(Token::MAX_RID).rid(), Token::MAX_RID);
        assert_eq!(Token::from(u32::MAX).table(), 0xFF);
        assert_eq!(Token::from(u32::MAX).rid(), 0x00FF_FFFF);
        assert_eq!(Token::method_def(0).rid(), 0);
        assert_eq!(Token::from(0x0A00_00FF).to_string(), "0x0A0000FF");
    }
}

//! Reading bytes: the cursor, ECMA-335 compressed integers, errors, and their encoders.

mod cursor;
mod error;
pub mod write;

pub use cursor::{token_table, Reader};
pub use error::{Error, ErrorFamily, ErrorKind, Location, Result};

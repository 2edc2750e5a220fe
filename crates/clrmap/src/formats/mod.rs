//! The formats read (and, for a few, written): one module per file format, each decoding its bytes
//! through [`crate::base::read::Reader`] with the format's specification cited at every step.
//!
//! A format module imports only the ground floor and other formats; it never finds files (that is
//! [`crate::symbols`]) and never answers a question about an address (that is [`crate::answers`]).
#[cfg(feature = "serde")]
pub mod capture;
pub mod gdmap;
pub mod inlines;
pub mod metadata;
pub mod nettrace;
pub mod pdb;
pub mod pe;
pub mod r2r;
pub mod signature;

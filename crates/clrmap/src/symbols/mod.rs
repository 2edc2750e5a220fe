//! Finding the files an answer needs, and saying where each was looked for: the one locator of
//! PDBs and assemblies ([`locate`]) over the user's file, the embedded PDB, the assembly's folder,
//! symbol directories and symbol servers ([`symsrv`]), and the notes of every place it looked
//! ([`why`]).
pub mod locate;
pub mod module;
pub mod source;
pub mod symsrv;
pub mod why;

//! ECMA-335 metadata of real .NET assemblies: PE → CLI header → metadata root → streams →
//! tables (II.24), and the names a debugger shows for tokens (docs/output.md#type-signatures).
//!
//! [`Metadata::parse`] reads the headers and lays out every table once; rows are read on
//! demand, zero-copy. [`Metadata`] implements [`crate::formats::signature::TypeNames`], so signatures
//! print with real names.

use core::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};

mod heaps;
mod members;
pub use members::MethodSpecRow;
mod names;
pub use names::{primitive_keyword, MethodArgs, ModuleFiles, TypeDefInfo, MAX_NAME_BYTES, MAX_NAME_WORK};
mod root;
pub mod runtime_type;
pub mod schema;
mod specs;
mod tables;
mod token;

pub use heaps::{Blobs, Strings};
pub use root::Root;
pub use runtime_type::RtType;
pub use schema::{table, Coded, Column};
pub use specs::{method_spec_args, method_spec_header, spec_lines, SpecLine, SpecMethod};
pub use tables::{Row, Table, Tables};
pub use token::Token;

use crate::base::read::{Error, ErrorKind, Result};
use crate::formats::pe::PeImage;

/// An assembly's metadata, borrowed from its bytes.
#[derive(Debug)]
pub struct Metadata<'a> {
    version: &'a str,
    tables: Tables<'a>,
    strings: Strings<'a>,
    blobs: Blobs<'a>,
    /// `#GUID` (empty when the metadata has none).
    guids: &'a [u8],
    /// Enclosing TypeDef row of each TypeDef row (index = row; 0 = not nested).
    nested: Vec<u32>,
    /// Depth of TypeSpec names being rendered inside each other (cycle guard).
    name_depth: Cell<u32>,
    /// Work left for the top-level TypeSpec name being rendered (`names::MAX_NAME_WORK`).
    name_work: Cell<u32>,
    /// The top-level TypeSpec name being rendered ran out of work.
    name_exhausted: Cell<bool>,
    /// TypeSpec rows whose name failed at the top level (bad blob, or past the budget): their
    /// tokens print raw at once. At most one entry per row, so bounded by the file.
    spec_failed: RefCell<HashSet<u32>>,
    /// Why each TypeSpec row asked about cannot be named (`specs`), or `None` when it can.
    spec_faults: RefCell<HashMap<u32, Option<Error>>>,
    /// TypeDef and TypeRef names already rendered, by token (`None`: cannot be named): signatures
    /// name the same few types over and over. At most one entry per row, and at most
    /// `names::MAX_CACHE_BYTES` in all.
    name_cache: RefCell<HashMap<u32, Option<Box<str>>>>,
    /// Bytes held by `name_cache`, roughly.
    name_cache_bytes: Cell<usize>,
}

impl<'a> Metadata<'a> {
    /// Read the metadata of a PE image (PE32 or PE32+, any machine, 0xFD1D included).
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let pe = PeImage::parse(bytes)?;
        Self::from_pe(&pe)
    }

    /// Read the metadata of an already parsed PE image.
    pub fn from_pe(pe: &PeImage<'a>) -> Result<Self> {
        let cor20 = pe.require_cor20()?;
        let md = pe.reader_at(cor20.metadata.rva, cor20.metadata.size).map_err(|e| e.with_kind(ErrorKind::BadMetadata))?;
        let root = Root::parse(md)?;
        let at = md.offset();
        let tables = Tables::parse(root.tables.ok_or(Error::new(ErrorKind::BadMetadata, at, "a #~ table stream"))?)?;
        let strings = Strings(root.strings.unwrap_or_default());
        let blobs = Blobs(root.blob.unwrap_or_default());
        // NestedClass (II.22.32): NestedClass, EnclosingClass. One slot per TypeDef row; the row
        // count was checked against the stream's bytes, so this allocation is bounded by the file.
        let type_rows = tables.rows(table::TYPE_DEF) as usize;
        let mut nested = vec![0u32; type_rows.saturating_add(1)];
        for row in tables.table(table::NESTED_CLASS).iter() {
            if let Some(slot) = nested.get_mut(row.get(0)? as usize) {
                *slot = row.get(1)?;
            }
        }
        Ok(Metadata {
            version: root.version,
            tables,
            strings,
            blobs,
            guids: root.guid.map(|g| g.as_slice()).unwrap_or_default(),
            nested,
            name_depth: Cell::new(0),
            name_work: Cell::new(0),
            name_exhausted: Cell::new(false),
            spec_failed: RefCell::new(HashSet::new()),
            spec_faults: RefCell::new(HashMap::new()),
            name_cache: RefCell::new(HashMap::new()),
            name_cache_bytes: Cell::new(0),
        })
    }

    /// The metadata version string (`v4.0.30319`).
    pub fn version(&self) -> &'a str {
        self.version
    }

    /// The tables.
    pub fn tables(&self) -> &Tables<'a> {
        &self.tables
    }

    /// `#Strings`.
    pub fn strings(&self) -> Strings<'a> {
        self.strings
    }

    /// `#Blob`.
    pub fn blobs(&self) -> Blobs<'a> {
        self.blobs
    }

    /// The module's MVID (II.22.30: the Module row's Mvid, an index into `#GUID`), as its 16
    /// bytes lie there; `None` when the row, the index or the GUID is missing.
    pub fn mvid(&self) -> Option<[u8; 16]> {
        let index = self.tables.row(table::MODULE, 1).ok()?.get(2).ok()?;
        let at = usize::try_from(index.checked_sub(1)?).ok()?.checked_mul(16)?;
        self.guids.get(at..at.checked_add(16)?)?.try_into().ok()
    }
}

/// A GUID's text form, from its bytes as metadata lays them out (Data1..Data3 little-endian,
/// then Data4): `e0a56d8c-5f6a-4b3c-9d2e-0123456789ab`.
pub fn mvid_text(mvid: &[u8; 16]) -> String {
    crate::base::guid::Guid(*mvid).to_string()
}

/// The bytes of a GUID's text form ([`mvid_text`]; in braces, in upper case, or as 32 digits
/// with no dashes: [`crate::guid::Guid::parse`]); `None` for anything else.
pub fn parse_mvid(text: &str) -> Option<[u8; 16]> {
    crate::base::guid::Guid::parse(text).map(|g| g.0)
}

//! Portable PDBs (dotnet/runtime `docs/design/specs/PortablePdb-Metadata.md`): documents,
//! sequence points and local scopes, read on the crate's ECMA-335 metadata layer.
//!
//! A portable PDB is an ECMA-335 metadata root (`BSJB`, version `PDB v1.0`) with one more stream,
//! `#Pdb`, and a `#~` stream that holds only the debug tables 0x30-0x37. Those tables index the
//! *assembly's* tables (MethodDebugInformation row *i* belongs to MethodDef row *i*), so the
//! widths of such indexes come from the row counts in `#Pdb`, not from the PDB's own `#~`.
//!
//! ```text
//! #Pdb:  PdbId (20) | EntryPoint (u32) | ReferencedTypeSystemTables (u64) | u32 × popcount
//! Document (0x30):               Name (blob) | HashAlgorithm (guid) | Hash (blob) | Language (guid)
//! MethodDebugInformation (0x31): Document (row) | SequencePoints (blob)
//! LocalScope (0x32):             Method | ImportScope | VariableList | ConstantList | StartOffset | Length
//! LocalVariable (0x33):          Attributes (u16) | Index (u16) | Name (string)
//! ```
//!
//! Everything is decoded lazily and borrowed from the PDB's bytes. [`embedded`] inflates the PDB
//! that an assembly carries in its debug directory; [`crate::symbols::locate`] finds and matches a module's PDB.
//!
//! ```
//! # fn main() -> clrmap::Result<()> {
//! let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/frames/debug-portable/Frames.pdb")).unwrap();
//! let pdb = clrmap::pdb::PortablePdb::parse(&bytes)?;
//! for point in pdb.sequence_points(0x0600_0001)? {
//!     let point = point?;
//!     if !point.is_hidden() {
//!         println!("IL_{:04X} {}:{}", point.il_offset, pdb.document(point.document)?.name, point.start_line);
//!     }
//! }
//! # Ok(()) }
//! ```

pub mod embedded;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod fuzzcheck;
mod recorded;
mod scope;
mod sequence;
pub mod sources;
#[doc(hidden)]
pub mod writer;

use std::collections::HashMap;
use std::sync::Arc;

use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::metadata::schema::TABLE_COUNT;
use crate::formats::metadata::{table, Blobs, Root, Strings, Tables};

pub use recorded::RecordedPdb;
pub use scope::{LocalScope, LocalVariable};
pub use sequence::{SequencePoint, SequencePoints, HIDDEN_LINE};

/// The start of an MSF (Windows PDB 7.0) file: such a PDB is not read, and says so.
pub const MSF_MAGIC: &[u8] = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0";

/// What clrmap says of a Windows PDB found where a module's PDB was looked for (Sentry's words:
/// only portable PDBs can be used for .NET symbolication). The service's frames answer it with the
/// kind `unsupported_pdb_format`.
pub const WINDOWS_PDB_MESSAGE: &str = "unsupported: only portable PDB files can be used for .NET symbolication";

/// Whether `head` (a file's first bytes, at least 32) is a Windows (MSF) PDB's.
pub fn is_windows_pdb(head: &[u8]) -> bool {
    head.starts_with(MSF_MAGIC)
}

fn bad(at: u64, expected: &'static str) -> Error {
    Error::new(ErrorKind::BadPdb, at, expected)
}

/// A portable PDB's id: the GUID and stamp that the assembly's CodeView entry must name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PdbId(pub [u8; 20]);

impl PdbId {
    /// The GUID part, in GUID byte order.
    pub fn guid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        for (d, s) in g.iter_mut().zip(self.0.iter()) {
            *d = *s;
        }
        g
    }

    /// The stamp part (the CodeView entry's TimeDateStamp).
    pub fn stamp(&self) -> u32 {
        let [.., a, b, c, d] = self.0;
        u32::from_le_bytes([a, b, c, d])
    }

    /// The GUID as 32 upper-case hex digits, as the symbol-server key writes it
    /// (Data1, Data2, Data3 as little-endian numbers, then Data4's bytes).
    pub fn guid_hex(&self) -> String {
        crate::base::guid::Guid(self.guid()).key_hex()
    }
}

/// One Document row: the source file's name as the PDB stores it, and its language.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// The name, its parts joined with the separator (PortablePdb-Metadata.md, "Document Name Blob").
    pub name: String,
    /// The Language GUID (C# `3f5162f8-07c6-11d3-9053-00c04fa302a1`), zero when absent.
    pub language: [u8; 16],
}

/// A parsed portable PDB, borrowed from its bytes.
#[derive(Debug)]
pub struct PortablePdb<'a> {
    id: PdbId,
    id_offset: u64,
    entry_point: u32,
    tables: Tables<'a>,
    strings: Strings<'a>,
    blobs: Blobs<'a>,
    guids: Reader<'a>,
}

impl<'a> PortablePdb<'a> {
    /// Parse a standalone portable PDB (the bytes of a `.pdb` file, or an inflated embedded one).
    ///
    /// A Windows PDB (MSF) is `unsupported_pdb_format`; anything else that is not a metadata root with a
    /// `#Pdb` stream is `unsupported_pdb` at offset 0 too, and a malformed portable PDB `bad_pdb`.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        if bytes.starts_with(MSF_MAGIC) {
            return Err(Error::new(ErrorKind::UnsupportedPdbFormat, 0, "a portable PDB, not a Windows (MSF) PDB: only portable PDB files can be used for .NET symbolication"));
        }
        if !bytes.starts_with(b"BSJB") {
            return Err(Error::new(ErrorKind::UnsupportedPdb, 0, "a portable PDB (metadata signature BSJB)"));
        }
        let root = Root::parse(Reader::new(bytes, 0)).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        let mut pdb = root.pdb.ok_or(bad(0, "a #Pdb stream"))?;
        // #Pdb stream: PdbId (20 bytes), EntryPoint (MethodDef token or 0),
        // ReferencedTypeSystemTables (u64), TypeSystemTableRows (u32 per bit set).
        let id_offset = pdb.offset();
        let id = PdbId(pdb.array::<20>("the 20-byte PDB id").map_err(|e| e.with_kind(ErrorKind::BadPdb))?);
        let entry_point = pdb.u32("the entry point token").map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        let mask_at = pdb.offset();
        let referenced = pdb.u64("ReferencedTypeSystemTables").map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        if referenced >> 0x30 != 0 {
            return Err(bad(mask_at, "referenced tables below 0x30 only"));
        }
        let mut external = [0u32; TABLE_COUNT];
        for (id, slot) in external.iter_mut().enumerate() {
            if referenced & (1u64 << id) != 0 {
                *slot = pdb.u32("a type-system table row count").map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
            }
        }
        let stream = root.tables.ok_or(bad(0, "a #~ table stream"))?;
        let tables = Tables::parse_with_external(stream, Some(&external)).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        Ok(PortablePdb { id, id_offset, entry_point, tables, strings: Strings(root.strings.unwrap_or_default()), blobs: Blobs(root.blob.unwrap_or_default()), guids: root.guid.unwrap_or_default() })
    }

    /// The PDB id.
    pub fn id(&self) -> PdbId {
        self.id
    }

    /// The absolute offset of the PDB id (where a `pdb_mismatch` points).
    pub fn id_offset(&self) -> u64 {
        self.id_offset
    }

    /// The entry point's MethodDef token, or 0.
    pub fn entry_point(&self) -> u32 {
        self.entry_point
    }

    /// The debug tables.
    pub fn tables(&self) -> &Tables<'a> {
        &self.tables
    }

    /// Number of Document rows.
    pub fn document_count(&self) -> u32 {
        self.tables.rows(table::DOCUMENT)
    }

    /// Number of MethodDebugInformation rows (one per MethodDef of the assembly, or none).
    pub fn method_count(&self) -> u32 {
        self.tables.rows(table::METHOD_DEBUG_INFORMATION)
    }

    /// Document row `rid` (1-based).
    pub fn document(&self, rid: u32) -> Result<Document> {
        let row = self.tables.row(table::DOCUMENT, rid).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        let name = self.document_name(row.get(0)?)?;
        let language = self.guid(row.get(3)?)?;
        Ok(Document { name, language })
    }

    /// Every document, in row order.
    pub fn documents(&self) -> impl Iterator<Item = Result<Document>> + '_ {
        (1..=self.document_count()).map(|rid| self.document(rid))
    }

    /// A `#GUID` entry: 1-based, 16 bytes each; 0 is the nil GUID.
    fn guid(&self, index: u32) -> Result<[u8; 16]> {
        if index == 0 {
            return Ok([0; 16]);
        }
        let mut r = self.guids;
        let at = r.offset();
        r.skip((index as usize).saturating_sub(1).saturating_mul(16), "a #GUID index").map_err(|_| bad(at, "a #GUID index inside the heap"))?;
        r.array::<16>("a GUID").map_err(|_| bad(at, "a #GUID index inside the heap"))
    }

    /// The Document Name Blob: a separator byte (0: none), then compressed #Blob indexes of the
    /// UTF-8 parts, joined with the separator. The name's length is bounded by the blob heap: each
    /// part index costs at least one byte and a part is at most the heap.
    fn document_name(&self, blob: u32) -> Result<String> {
        let mut r = self.blobs.get(blob).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        let sep_at = r.offset();
        let sep = r.u8("the document name separator").map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        if sep >= 0x80 {
            return Err(bad(sep_at, "an ASCII document name separator"));
        }
        let mut name = String::new();
        let mut first = true;
        // Bound the total work: the name can never be longer than the blob heap times the part
        // count, so stop at a sane size rather than let shared parts multiply.
        const MAX_NAME: usize = 1 << 16;
        while !r.is_empty() {
            let part_at = r.offset();
            let index = r.compressed_u32("a document name part index").map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
            if !first && sep != 0 {
                name.push(char::from(sep));
            }
            first = false;
            let part = self.blobs.get(index).map_err(|_| bad(part_at, "a document name part inside the #Blob heap"))?;
            let text = core::str::from_utf8(part.as_slice()).map_err(|_| bad(part.offset(), "a UTF-8 document name part"))?;
            name.push_str(text);
            if name.len() > MAX_NAME {
                return Err(bad(part_at, "a document name of at most 64 KiB"));
            }
        }
        Ok(name)
    }

    /// The MethodDebugInformation row of a MethodDef token (`0x06xxxxxx`): (Document row, the
    /// SequencePoints blob). `not_found` for another table or a row past the table.
    fn method_row(&self, method: u32) -> Result<(u32, Reader<'a>)> {
        if method >> 24 != 0x06 {
            return Err(Error::nowhere(ErrorKind::NotFound, "a MethodDef token"));
        }
        let row = self.tables.row(table::METHOD_DEBUG_INFORMATION, method & 0x00FF_FFFF)?;
        let blob = self.blobs.get(row.get(1)?).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        Ok((row.get(0)?, blob))
    }

    /// The sequence points of a method (MethodDef token), lazily decoded. A method without a
    /// row or without points gives an empty iterator.
    pub fn sequence_points(&self, method: u32) -> Result<SequencePoints<'a>> {
        match self.method_row(method) {
            Ok((document, blob)) => Ok(SequencePoints::new(blob, document, self.document_count())),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(SequencePoints::empty()),
            Err(e) => Err(e),
        }
    }

    /// The MethodDebugInformation row of a MethodDef token: its Document column (0: the blob
    /// names its InitialDocument) and its SequencePoints `#Blob` index. `Ok(None)` for a token of
    /// another table or a row past the table. Many rows may name one blob: decode it once with
    /// [`Self::blob_points`].
    pub fn method_debug_row(&self, method: u32) -> Result<Option<(u32, u32)>> {
        if method >> 24 != 0x06 {
            return Ok(None);
        }
        let rid = method & 0x00FF_FFFF;
        if rid == 0 || rid > self.method_count() {
            return Ok(None);
        }
        let row = self.tables.row(table::METHOD_DEBUG_INFORMATION, rid).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        Ok(Some((row.get(0)?, row.get(1)?)))
    }

    /// The points of one SequencePoints blob, apart from the rows that name it. `initial_in_blob`:
    /// the row's Document column is 0, so the blob names its InitialDocument. Otherwise the points
    /// before the first document record have document 0, standing for the row's Document (which
    /// the caller checks is a row of the Document table).
    pub fn blob_points(&self, blob: u32, initial_in_blob: bool) -> Result<SequencePoints<'a>> {
        let r = self.blobs.get(blob).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        Ok(SequencePoints::deferred(r, initial_in_blob, self.document_count()))
    }

    /// The `#Blob` index of Document row `rid`'s name (many rows may share one name blob).
    pub fn document_name_blob(&self, rid: u32) -> Result<u32> {
        let row = self.tables.row(table::DOCUMENT, rid).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        row.get(0)
    }

    /// The `#Strings` heap.
    pub(crate) fn strings(&self) -> Strings<'a> {
        self.strings
    }
}

/// How much of a file [`peek_id`] reads to find the stream headers.
const PEEK_HEAD: u64 = 4096;

/// The id of the portable PDB in `file`, read from its metadata root's stream headers and the
/// first 20 bytes of its `#Pdb` stream alone: a few KiB, whatever the file's size. `None` when the
/// file does not start like a portable PDB (`BSJB`, a `#Pdb` stream in the first 4 KiB of stream
/// headers) or cannot be read. A candidate PDB is checked this way before it is read whole, so a
/// huge file of another build (or none at all) costs nothing.
pub fn peek_id<F: std::io::Read + std::io::Seek>(file: &mut F) -> Option<PdbId> {
    use std::io::{Read, SeekFrom};
    let mut head = Vec::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.by_ref().take(PEEK_HEAD).read_to_end(&mut head).ok()?;
    let mut r = Reader::new(&head, 0);
    if r.u32("BSJB").ok()? != 0x424A_5342 {
        return None;
    }
    r.skip(8, "versions and reserved").ok()?;
    let len = r.u32("the version length").ok()?;
    r.skip(len as usize, "the version").ok()?;
    r.skip(2, "flags").ok()?;
    let count = r.u16("the stream count").ok()?;
    for _ in 0..count {
        let offset = r.u32("a stream offset").ok()?;
        let size = r.u32("a stream size").ok()?;
        let name_area = r.as_slice();
        let name_len = name_area.iter().take(32).position(|&b| b == 0)?;
        let is_pdb = name_area.get(..name_len) == Some(b"#Pdb".as_slice());
        r.skip(name_len.saturating_add(4) & !3, "a padded stream name").ok()?;
        if is_pdb {
            if size < 20 {
                return None;
            }
            let mut id = [0u8; 20];
            file.seek(SeekFrom::Start(u64::from(offset))).ok()?;
            file.read_exact(&mut id).ok()?;
            return Some(PdbId(id));
        }
    }
    None
}

/// The most sequence points one command prints from one PDB of `len` bytes: 2^20, or one per
/// byte of the PDB when that is more. Every point takes at least 3 bytes of its blob, so a PDB
/// whose methods do not share blobs never reaches this; one whose rows all name one large blob
/// stops here.
pub fn point_budget(len: usize) -> u64 {
    (len as u64).max(1 << 20)
}

/// The most bytes of document names one command prints from one PDB of `len` bytes: 64 MiB, or
/// 64 per byte of the PDB when that is more. Names printed with every point count each time.
pub fn name_budget(len: usize) -> u64 {
    (len as u64).saturating_mul(64).max(64 << 20)
}

/// The most bytes of distinct document names a [`DocumentNames`] decodes by default.
pub const NAME_CACHE_BUDGET: usize = 64 << 20;

/// Document names, decoded once per name blob: Document rows that share a name blob share one
/// string, and the distinct names decoded are bounded by a byte budget.
#[derive(Debug)]
pub struct DocumentNames {
    by_blob: HashMap<u32, Result<Option<Arc<str>>>>,
    left: usize,
}

impl DocumentNames {
    /// A cache that decodes at most `budget` bytes of distinct names.
    pub fn new(budget: usize) -> Self {
        DocumentNames { by_blob: HashMap::new(), left: budget }
    }

    /// The name of Document row `rid`: `Ok(None)` once the budget is spent, `Err` for a row or
    /// name that is malformed (the same error again for every row that shares the name).
    pub fn get(&mut self, pdb: &PortablePdb<'_>, rid: u32) -> Result<Option<Arc<str>>> {
        let blob = pdb.document_name_blob(rid)?;
        if let Some(known) = self.by_blob.get(&blob) {
            return known.clone();
        }
        let name = pdb.document_name(blob).map(|n| {
            self.left.checked_sub(n.len()).map(|left| {
                self.left = left;
                Arc::<str>::from(n)
            })
        });
        // Over the budget, the answer (no name) is kept too, so a name asked for again is not
        // decoded again; an entry without a name costs a few bytes.
        self.by_blob.insert(blob, name.clone());
        name
    }
}

impl Default for DocumentNames {
    fn default() -> Self {
        Self::new(NAME_CACHE_BUDGET)
    }
}

//! Errors: a `Copy` kind, the absolute byte offset, and what was expected.
//!
//! Every error clrmap reports names a stable kind (its snake_case id is part of the output
//! contract, `shared/spec/contract.md` §3), the absolute offset of the first byte of the field at
//! fault, and a static description of what the reader expected there. Errors never allocate.

use core::fmt;

/// A stable error kind. [`ErrorKind::as_str`] gives the contract's snake_case id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    // --- The byte cursor -------------------------------------------------------------------
    /// A field could not be read completely inside its bound. Format readers usually map this to a
    /// more specific kind (for example `truncated_item` or `item_length_mismatch`).
    Truncated,

    // --- Signatures and dictionary maps (contract §2-3) ---------------------------------------
    /// The map is shorter than its 4-byte header word.
    TruncatedHeader,
    /// The directory (4 + 8·N bytes) does not fit in the map.
    TruncatedDirectory,
    /// A directory entry's heap offset is not inside the heap.
    OffsetOutOfHeap,
    /// A heap item's length prefix, or the bytes it announces, run past the end of the map.
    TruncatedItem,
    /// An ECMA-335 compressed integer has a lead byte 0xE0-0xFF.
    BadCompressedInteger,
    /// A heap item's contents do not fill exactly its declared length.
    ItemLengthMismatch,
    /// A heap item (or GENERICINST) with zero type arguments.
    EmptyInstantiation,
    /// An element type byte that is not legal at its position.
    BadElementType,
    /// A TypeDefOrRefOrSpecEncoded token with a bad tag, a forbidden table or row 0.
    BadToken,
    /// An ARRAY shape with rank 0, or more sizes or lower bounds than its rank.
    BadArrayShape,
    /// An FNPTR calling-convention byte that is not a method calling convention.
    BadCallingConvention,
    /// Type nesting deeper than the limit.
    TooDeep,
    /// The sorted flag is set but an RVA is smaller than the one before it.
    Unsorted,
    /// The same RVA appears with two different heap offsets.
    DuplicateRva,

    // --- Images and metadata -----------------------------------------------------------------
    /// The PE/COFF container is malformed or is not a .NET image.
    BadImage,
    /// ECMA-335 metadata (root, streams, tables, heaps) is malformed.
    BadMetadata,

    // --- ReadyToRun and IL maps --------------------------------------------------------------
    /// The ReadyToRun header or one of its sections is malformed.
    BadReadyToRun,
    /// A format version this reader does not implement.
    UnsupportedVersion,
    /// A PE `Machine` whose ReadyToRun code layout this reader does not implement (x86, x64,
    /// ARM64 and ARM are read).
    UnsupportedMachine,
    /// Debug info (bounds, variables) is malformed.
    BadDebugInfo,

    // --- Traces and captures -----------------------------------------------------------------
    /// An EventPipe (`.nettrace`) stream is malformed.
    BadTrace,
    /// A profiler capture file is malformed.
    BadCapture,

    // --- Portable PDBs -------------------------------------------------------------------------
    /// A portable PDB (its `#Pdb` stream, debug tables, document names or sequence points) is
    /// malformed, or an embedded PDB does not inflate to its declared size.
    BadPdb,
    /// A symbol file that is not a portable PDB: a Windows (MSF) PDB, or an unknown format.
    UnsupportedPdb,
    /// A PDB whose id is not the one the assembly's CodeView entry asks for.
    PdbMismatch,

    // --- Look-ups ----------------------------------------------------------------------------
    /// A look-up found nothing (an RVA, a token, a function).
    NotFound,
    /// A value is out of the range its encoding can hold (writers).
    OutOfRange,

    // --- Text ----------------------------------------------------------------------------------
    /// Text in the type notation (a manifest) does not parse; the offset is a byte index in it.
    BadNotation,
}

impl ErrorKind {
    /// The stable snake_case id of this kind, as printed by the CLI and used in JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Truncated => "truncated",
            ErrorKind::TruncatedHeader => "truncated_header",
            ErrorKind::TruncatedDirectory => "truncated_directory",
            ErrorKind::OffsetOutOfHeap => "offset_out_of_heap",
            ErrorKind::TruncatedItem => "truncated_item",
            ErrorKind::BadCompressedInteger => "bad_compressed_integer",
            ErrorKind::ItemLengthMismatch => "item_length_mismatch",
            ErrorKind::EmptyInstantiation => "empty_instantiation",
            ErrorKind::BadElementType => "bad_element_type",
            ErrorKind::BadToken => "bad_token",
            ErrorKind::BadArrayShape => "bad_array_shape",
            ErrorKind::BadCallingConvention => "bad_calling_convention",
            ErrorKind::TooDeep => "too_deep",
            ErrorKind::Unsorted => "unsorted",
            ErrorKind::DuplicateRva => "duplicate_rva",
            ErrorKind::BadImage => "bad_image",
            ErrorKind::BadMetadata => "bad_metadata",
            ErrorKind::BadReadyToRun => "bad_ready_to_run",
            ErrorKind::UnsupportedVersion => "unsupported_version",
            ErrorKind::UnsupportedMachine => "unsupported_machine",
            ErrorKind::BadDebugInfo => "bad_debug_info",
            ErrorKind::BadTrace => "bad_trace",
            ErrorKind::BadCapture => "bad_capture",
            ErrorKind::BadPdb => "bad_pdb",
            ErrorKind::UnsupportedPdb => "unsupported_pdb",
            ErrorKind::PdbMismatch => "pdb_mismatch",
            ErrorKind::NotFound => "not_found",
            ErrorKind::OutOfRange => "out_of_range",
            ErrorKind::BadNotation => "bad_notation",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error: what went wrong, where (absolute byte offset), and what was expected there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Error {
    /// The stable kind.
    pub kind: ErrorKind,
    /// Absolute byte offset of the first byte of the field at fault.
    pub offset: u64,
    /// What the reader expected, in a few words (static: errors never allocate).
    pub expected: &'static str,
}

impl Error {
    /// Make an error.
    pub const fn new(kind: ErrorKind, offset: u64, expected: &'static str) -> Self {
        Error { kind, offset, expected }
    }

    /// The same error with another kind, keeping the offset and the expectation. Format readers use
    /// this to turn the cursor's generic [`ErrorKind::Truncated`] into their own kind.
    #[must_use]
    pub const fn with_kind(self, kind: ErrorKind) -> Self {
        Error { kind, ..self }
    }

    /// A human-readable message, as printed after the kind and offset.
    pub fn message(&self) -> String {
        format!("expected {}", self.expected)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at offset {}: expected {}", self.kind, self.offset, self.expected)
    }
}

impl std::error::Error for Error {}

/// The result type of every fallible clrmap read.
pub type Result<T> = core::result::Result<T, Error>;

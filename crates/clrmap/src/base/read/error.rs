//! Errors: a `Copy` kind, where the fault is, and what was expected.
//!
//! Every error clrmap reports names a stable kind (its snake_case id is part of the output
//! contract, docs/output.md#error-kinds), a [`Location`], and a static description of what the
//! reader expected there. The location says what it is: usually the absolute offset of the first
//! byte of the field at fault, but a look-up that fails names the RVA or address it was given,
//! and a writer's or resolver's error may have no place in any input. Errors never allocate.

use core::fmt;

/// A stable error kind. [`ErrorKind::as_str`] gives the contract's snake_case id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    // --- The byte cursor -------------------------------------------------------------------
    /// A field could not be read completely inside its bound. Format readers usually map this to a
    /// more specific kind (for example `truncated_item` or `item_length_mismatch`).
    Truncated,

    // --- Signatures and dictionary maps (docs/output.md#strictness and #generic-dictionary-maps) ---------------------------------------
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
    /// A symbol file that is not a portable PDB and not a Windows PDB: an unknown format.
    UnsupportedPdb,
    /// A Windows (MSF) PDB where a portable PDB is needed: clrmap reads portable PDBs only.
    UnsupportedPdbFormat,
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

/// What kind of failure an error is: the bytes are malformed, the bytes are well
/// formed but break a rule, or a look-up found nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorFamily {
    /// Bad bytes: the input cannot be read as its format.
    Parse,
    /// Well-formed input that breaks a rule of the format or of the request (order, limits,
    /// ranges, a PDB that belongs to another assembly).
    Validity,
    /// A look-up found nothing, or a version or machine is not implemented.
    Resolve,
}

impl ErrorKind {
    /// The family of this kind.
    pub const fn family(self) -> ErrorFamily {
        match self {
            ErrorKind::Unsorted
            | ErrorKind::DuplicateRva
            | ErrorKind::EmptyInstantiation
            | ErrorKind::TooDeep
            | ErrorKind::OutOfRange
            | ErrorKind::PdbMismatch
            | ErrorKind::BadArrayShape
            | ErrorKind::BadCallingConvention
            | ErrorKind::BadToken => ErrorFamily::Validity,
            ErrorKind::NotFound | ErrorKind::UnsupportedVersion | ErrorKind::UnsupportedMachine | ErrorKind::UnsupportedPdb | ErrorKind::UnsupportedPdbFormat => ErrorFamily::Resolve,
            _ => ErrorFamily::Parse,
        }
    }

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
            ErrorKind::UnsupportedPdbFormat => "unsupported_pdb_format",
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

/// Where an error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Location {
    /// The absolute byte offset, in the input, of the first byte of the field at fault.
    Offset(u64),
    /// An RVA (relative virtual address in an image) that was asked about or pointed to.
    Rva(u32),
    /// An absolute address in a traced process that was asked about.
    Address(u64),
    /// No place in any input: a value given to a writer, a failed look-up by name.
    Nowhere,
    /// A byte offset into the inflated bytes of a PDB embedded (deflated) in an image, which is
    /// no offset of the image itself.
    Inflated(u64),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Offset(o) => write!(f, " at offset {o}"),
            Location::Rva(r) => write!(f, " at RVA 0x{r:X}"),
            Location::Address(a) => write!(f, " at address 0x{a:X}"),
            Location::Nowhere => Ok(()),
            Location::Inflated(o) => write!(f, " at offset {o} of the embedded PDB, inflated"),
        }
    }
}

/// An error: what went wrong, where, and what was expected there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Error {
    /// The stable kind.
    pub kind: ErrorKind,
    /// Where the fault is.
    pub location: Location,
    /// What the reader expected, in a few words (static: errors never allocate).
    pub expected: &'static str,
    /// For `unsupported_version`: the version found and the newest this reader knows, so that
    /// the message names both (a major for ReadyToRun, the format version for nettrace).
    pub versions: Option<(u32, u32)>,
}

impl Error {
    /// An error at an absolute byte offset of the input.
    pub const fn new(kind: ErrorKind, offset: u64, expected: &'static str) -> Self {
        Error { kind, location: Location::Offset(offset), expected, versions: None }
    }

    /// An error about an RVA that is not a byte offset of the input.
    pub const fn at_rva(kind: ErrorKind, rva: u32, expected: &'static str) -> Self {
        Error { kind, location: Location::Rva(rva), expected, versions: None }
    }

    /// An error about an absolute address in a traced process.
    pub const fn at_address(kind: ErrorKind, address: u64, expected: &'static str) -> Self {
        Error { kind, location: Location::Address(address), expected, versions: None }
    }

    /// An error with no place in any input (a writer's value, a look-up by name).
    pub const fn nowhere(kind: ErrorKind, expected: &'static str) -> Self {
        Error { kind, location: Location::Nowhere, expected, versions: None }
    }

    /// `unsupported_version` at `offset`: version `found` is newer than `newest`, the newest this
    /// reader knows.
    pub const fn unsupported_version(offset: u64, found: u32, newest: u32, expected: &'static str) -> Self {
        Error { kind: ErrorKind::UnsupportedVersion, location: Location::Offset(offset), expected, versions: Some((found, newest)) }
    }

    /// The byte offset, when the location is one.
    pub const fn offset(&self) -> Option<u64> {
        match self.location {
            Location::Offset(o) => Some(o),
            _ => None,
        }
    }

    /// The same error with another kind, keeping the location and the expectation. Format readers
    /// use this to turn the cursor's generic [`ErrorKind::Truncated`] into their own kind.
    #[must_use]
    pub const fn with_kind(self, kind: ErrorKind) -> Self {
        Error { kind, ..self }
    }

    /// A human-readable message, as printed after the kind and location.
    pub fn message(&self) -> String {
        match self.versions {
            Some((found, newest)) => format!("expected {}; found version {found}, the newest known is {newest}", self.expected),
            None => format!("expected {}", self.expected),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}: expected {}", self.kind, self.location, self.expected)?;
        match self.versions {
            Some((found, newest)) => write!(f, "; found version {found}, the newest known is {newest}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Error {}

/// The result type of every fallible clrmap read.
pub type Result<T> = core::result::Result<T, Error>;

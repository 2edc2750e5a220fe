//! The metadata root and stream headers (ECMA-335 II.24.2.1-2).

use crate::base::read::{Error, ErrorKind, Reader, Result};

/// `BSJB`, the metadata root's signature.
pub const METADATA_SIGNATURE: u32 = 0x424A_5342;

fn bad(at: u64, expected: &'static str) -> Error {
    Error::new(ErrorKind::BadMetadata, at, expected)
}

/// The metadata root: version string and the streams it names.
#[derive(Clone, Debug)]
pub struct Root<'a> {
    /// The version string (e.g. `v4.0.30319`).
    pub version: &'a str,
    /// `#~` (or the uncompressed `#-`) table stream.
    pub tables: Option<Reader<'a>>,
    /// True when the table stream is `#-` (may contain Ptr tables and deleted rows).
    pub uncompressed_tables: bool,
    /// `#Strings`.
    pub strings: Option<Reader<'a>>,
    /// `#Blob`.
    pub blob: Option<Reader<'a>>,
    /// `#GUID`.
    pub guid: Option<Reader<'a>>,
    /// `#US`.
    pub user_strings: Option<Reader<'a>>,
    /// `#Pdb`: present in portable PDBs only (PortablePdb-Metadata.md).
    pub pdb: Option<Reader<'a>>,
}

impl<'a> Root<'a> {
    /// Parse the root from a reader over the whole metadata (absolute offsets kept).
    pub fn parse(metadata: Reader<'a>) -> Result<Self> {
        let mut r = metadata;
        let start = r.offset();
        // II.24.2.1: Signature, MajorVersion, MinorVersion, Reserved, Length, Version[Length],
        // Flags, Streams, then the stream headers.
        let sig = r.u32("the metadata signature BSJB")?;
        if sig != METADATA_SIGNATURE {
            return Err(bad(start, "the metadata signature BSJB"));
        }
        let _major = r.u16("MajorVersion")?;
        let _minor = r.u16("MinorVersion")?;
        let _reserved = r.u32("Reserved")?;
        let len_at = r.offset();
        let len = r.u32("the version string length")?;
        let raw = r.bytes(len as usize, "the version string").map_err(|_| bad(len_at, "a version string inside the metadata"))?;
        let text = raw.split(|&b| b == 0).next().unwrap_or(&[]);
        let version = core::str::from_utf8(text).map_err(|_| bad(len_at, "a UTF-8 version string"))?;
        let _flags = r.u16("Flags")?;
        let count = r.u16("the stream count")?;
        let mut root = Root { version, tables: None, uncompressed_tables: false, strings: None, blob: None, guid: None, user_strings: None, pdb: None };
        for _ in 0..count {
            // II.24.2.2: Offset, Size, Name (NUL-terminated, padded to 4 bytes, at most 32).
            let header_at = r.offset();
            let offset = r.u32("a stream offset")?;
            let size = r.u32("a stream size")?;
            let name_area = r.as_slice();
            let name_len = name_area.iter().take(32).position(|&b| b == 0).ok_or_else(|| bad(r.offset(), "a stream name of at most 32 bytes"))?;
            let name = name_area.get(..name_len).unwrap_or(&[]);
            let padded = name_len.saturating_add(4) & !3;
            r.skip(padded, "a padded stream name")?;
            let mut body = metadata;
            body.skip(offset as usize, "a stream inside the metadata").map_err(|_| bad(header_at, "a stream inside the metadata"))?;
            let stream = body.split(size as usize, "a stream inside the metadata").map_err(|_| bad(header_at, "a stream inside the metadata"))?;
            // The first stream of a name wins, as in the runtime's metadata reader.
            let slot = match name {
                b"#~" => &mut root.tables,
                b"#-" => {
                    root.uncompressed_tables = true;
                    &mut root.tables
                }
                b"#Strings" => &mut root.strings,
                b"#Blob" => &mut root.blob,
                b"#GUID" => &mut root.guid,
                b"#US" => &mut root.user_strings,
                b"#Pdb" => &mut root.pdb,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(stream);
            }
        }
        Ok(root)
    }
}

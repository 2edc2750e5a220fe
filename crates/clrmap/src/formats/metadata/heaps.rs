//! The `#Strings` and `#Blob` heaps (ECMA-335 II.24.2.3-4).

use crate::base::read::{Error, ErrorKind, Reader, Result};

/// `#Strings`: NUL-terminated UTF-8 strings, indexed by byte offset.
#[derive(Clone, Copy, Debug, Default)]
pub struct Strings<'a>(pub Reader<'a>);

impl<'a> Strings<'a> {
    /// The string at `index`. Index 0 is the empty string.
    pub fn get(&self, index: u32) -> Result<&'a str> {
        let mut r = self.0;
        let at = r.offset();
        r.skip(index as usize, "a #Strings index inside the heap").map_err(|_| Error::new(ErrorKind::BadMetadata, at, "a #Strings index inside the heap"))?;
        let start = r.offset();
        let rest = r.as_slice();
        let len = rest.iter().position(|&b| b == 0).ok_or_else(|| Error::new(ErrorKind::BadMetadata, start, "a NUL-terminated string"))?;
        core::str::from_utf8(rest.get(..len).unwrap_or(&[])).map_err(|_| Error::new(ErrorKind::BadMetadata, start, "a UTF-8 string"))
    }
}

/// `#Blob`: blobs, each a compressed length then the bytes, indexed by byte offset.
#[derive(Clone, Copy, Debug, Default)]
pub struct Blobs<'a>(pub Reader<'a>);

impl<'a> Blobs<'a> {
    /// The blob at `index`, as a reader over its bytes (absolute offsets). Index 0 is empty.
    pub fn get(&self, index: u32) -> Result<Reader<'a>> {
        let mut r = self.0;
        let at = r.offset();
        r.skip(index as usize, "a #Blob index inside the heap").map_err(|_| Error::new(ErrorKind::BadMetadata, at, "a #Blob index inside the heap"))?;
        let len_at = r.offset();
        let len = r.compressed_u32("a blob length").map_err(|e| Error::new(ErrorKind::BadMetadata, len_at, e.expected))?;
        r.split(len as usize, "a blob inside the heap").map_err(|_| Error::new(ErrorKind::BadMetadata, len_at, "a blob inside the heap"))
    }
}

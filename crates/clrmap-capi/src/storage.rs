//! The bytes behind a provider: a file memory-mapped read-only (memory follows the pages a reader
//! touches, not the file's size), or an owned copy. The library has no `unsafe`, so mapping for
//! the C ABI lives here.

use std::path::Path;

use crate::errors::Failure;
use crate::hresult::{E_BAD_FILE_TYPE, E_FAIL, E_FILE_NOT_FOUND};

/// The bytes of a map or an image: a memory-mapped file or an owned copy.
pub(crate) enum Storage {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// A regular file mapped read-only, or why not: `CLRMAP_E_BAD_FILE_TYPE` for a device, FIFO or
/// directory (refused before it is opened: opening a FIFO blocks, a device has no end),
/// HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND) for a file that cannot be opened or mapped. An empty
/// file is an empty slice.
pub(crate) fn map_file(path: &str) -> Result<Storage, Failure> {
    let cannot_read = |e: std::io::Error| {
        let hr = if e.kind() == std::io::ErrorKind::InvalidInput { E_BAD_FILE_TYPE } else { E_FILE_NOT_FOUND };
        Failure::new(hr, format!("cannot read {path}: {e}"))
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(Failure::new(E_BAD_FILE_TYPE, format!("cannot read {path}: not a regular file"))),
        Err(e) => return Err(cannot_read(e)),
    }
    let file = std::fs::File::open(path).map_err(cannot_read)?;
    if file.metadata().map_err(cannot_read)?.len() == 0 {
        return Ok(Storage::Owned(Vec::new()));
    }
    // SAFETY: mapped read-only and never written through. Another process truncating the file
    // while it is mapped is outside what any mapped reader can defend (SIGBUS).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(cannot_read)?;
    Ok(Storage::Mapped(map))
}

/// A regular file mapped read-only, or read whole where it cannot be mapped; or why not:
/// `CLRMAP_E_BAD_FILE_TYPE` for a device, FIFO or directory (refused before it is opened),
/// HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND) for a file that cannot be opened, E_FAIL for one that
/// can be neither mapped nor read.
pub(crate) fn map_or_read(path: &str) -> Result<Storage, Failure> {
    // Only regular files: a FIFO would block the open, a device has no end.
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(Failure::new(E_BAD_FILE_TYPE, format!("{path}: not a regular file"))),
        Err(e) => return Err(Failure::new(E_FILE_NOT_FOUND, format!("cannot read {path}: {e}"))),
    }
    let file = std::fs::File::open(path).map_err(|e| Failure::new(E_FILE_NOT_FOUND, format!("cannot read {path}: {e}")))?;
    // SAFETY: the file is mapped read-only; clrmap never writes through it. Another process
    // truncating the file while it is mapped is outside what any mapped reader can defend.
    match unsafe { memmap2::Mmap::map(&file) } {
        Ok(m) => Ok(Storage::Mapped(m)),
        Err(_) => match clrmap::fs::read_regular(Path::new(path), clrmap::fs::MAX_FILE) {
            Ok(v) => Ok(Storage::Owned(v)),
            Err(e) => Err(Failure::new(E_FAIL, format!("cannot read {path}: {e}"))),
        },
    }
}

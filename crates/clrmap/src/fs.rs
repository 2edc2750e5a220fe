//! Reading input files named by the user or by another file (a capture's module paths): only
//! regular files, and never more than a bound, so a name like `/dev/zero` or a FIFO costs an
//! error, not a hang or all memory.

use std::io::{self, Read};
use std::path::Path;

/// The largest input file read whole (PDBs, assemblies named by captures and traces): 4 GiB.
pub const MAX_FILE: u64 = 4 << 30;

/// Open a regular file for reading. Anything else is `InvalidInput`, found before the open (which
/// would block on a FIFO).
pub fn open_regular(path: &Path) -> io::Result<std::fs::File> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    std::fs::File::open(path)
}

/// Read a regular file of at most `limit` bytes. Anything else (a directory, a device, a FIFO,
/// a socket) is `InvalidInput`, found from the file's metadata before any read.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    // Look before opening: opening a FIFO for reading blocks until someone writes to it.
    if !std::fs::metadata(path)?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    if meta.len() > limit {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "file too large"));
    }
    // The length comes from the file system and is bounded above; read no more than it says
    // even if the file grows meanwhile.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(meta.len()).read_to_end(&mut bytes)?;
    Ok(bytes)
}

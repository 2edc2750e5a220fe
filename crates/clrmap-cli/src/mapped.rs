//! Input files, memory-mapped read-only, so that memory follows the pages a reader touches and
//! not the file's size (traces and captures run to gigabytes). Mapping a file is `unsafe` in
//! Rust; this module is the only place in the CLI that may use `unsafe` (`main.rs` denies it
//! everywhere else), and the library stays without it.
#![allow(unsafe_code)]

use std::path::Path;

/// A regular file's bytes: mapped, or empty (an empty file cannot be mapped).
pub struct MappedFile(Option<memmap2::Mmap>);

impl std::ops::Deref for MappedFile {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.as_deref().unwrap_or_default()
    }
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MappedFile({} bytes)", self.len())
    }
}

/// Map a regular file read-only. Anything else (a device, a FIFO, a directory) is refused with
/// `InvalidInput` before it is opened, since opening a FIFO blocks and a device has no end; an
/// empty file is an empty slice.
pub fn map_file(path: &Path) -> std::io::Result<MappedFile> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let file = std::fs::File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Ok(MappedFile(None));
    }
    // SAFETY: the map is read-only and nothing writes through it; the bytes are only read
    // through `&[u8]` while the map lives. Another process truncating the file while it is
    // mapped is outside what any mapped reader can defend (the read faults with SIGBUS).
    let map = unsafe { memmap2::Mmap::map(&file) }?;
    Ok(MappedFile(Some(map)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::map_file;

    #[test]
    fn maps_files_and_refuses_the_rest() {
        let dir = std::env::temp_dir().join(format!("clrmap-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let full = dir.join("full");
        std::fs::write(&full, b"bytes").unwrap();
        assert_eq!(&*map_file(&full).unwrap(), b"bytes");
        let empty = dir.join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert!(map_file(&empty).unwrap().is_empty());
        assert_eq!(map_file(&dir).unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(map_file(&dir.join("missing")).unwrap_err().kind(), std::io::ErrorKind::NotFound);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Embedded portable PDBs (dotnet/runtime `docs/design/specs/PE-COFF.md`, "Embedded Portable PDB
//! Debug Directory Entry", type 17): `MPDB`, the PDB's size as a u32, then the PDB as a raw
//! deflate stream (RFC 1951).

use crate::pe::{PeImage, DEBUG_TYPE_EMBEDDED_PORTABLE_PDB};
use crate::read::{Error, ErrorKind, Result};

/// `MPDB`, little-endian.
const MAGIC: u32 = 0x4244_504D;

/// The most a deflate stream can expand: 1032:1 (a 258-byte match coded in about two bits, RFC
/// 1951). A declared size above this ratio cannot be honest, so it is refused before anything is
/// allocated.
const MAX_RATIO: u64 = 1032;

/// The embedded PDB of an image, inflated; `None` when the image has no type-17 entry.
///
/// The output is bounded by the size the entry declares, and that size by the deflate ratio
/// limit, so a hostile entry cannot make this allocate more than about a thousand times its
/// own bytes. A stream that ends early, runs past the declared size or is not deflate is
/// `bad_pdb` at the entry's data.
pub fn embedded_pdb(image: &PeImage<'_>) -> Result<Option<Vec<u8>>> {
    for entry in image.debug_entries()? {
        if entry.kind != DEBUG_TYPE_EMBEDDED_PORTABLE_PDB {
            continue;
        }
        let mut r = image.debug_data(&entry)?;
        let at = r.offset();
        if r.u32("the embedded PDB signature MPDB").map_err(|e| e.with_kind(ErrorKind::BadPdb))? != MAGIC {
            return Err(Error::new(ErrorKind::BadPdb, at, "the embedded PDB signature MPDB"));
        }
        let size_at = r.offset();
        let size = r.u32("the embedded PDB's size").map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        let deflated = r.as_slice();
        if u64::from(size) > (deflated.len() as u64).saturating_mul(MAX_RATIO) {
            return Err(Error::new(ErrorKind::BadPdb, size_at, "a PDB size the deflate stream can hold"));
        }
        return inflate(deflated, size as usize, r.offset()).map(Some);
    }
    Ok(None)
}

/// Inflate a raw deflate stream that must give exactly `size` bytes.
pub fn inflate(deflated: &[u8], size: usize, at: u64) -> Result<Vec<u8>> {
    // decompress_to_vec_with_limit grows its buffer as output arrives, so memory follows what
    // the stream really holds; the limit stops it at the declared size.
    let out = miniz_oxide::inflate::decompress_to_vec_with_limit(deflated, size)
        .map_err(|_| Error::new(ErrorKind::BadPdb, at, "a whole raw deflate stream of the declared size"))?;
    if out.len() != size {
        return Err(Error::new(ErrorKind::BadPdb, at, "a deflate stream of the declared size"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflate_checks_the_declared_size() {
        let data = b"BSJB and then some portable PDB bytes, repeated repeated repeated";
        let z = miniz_oxide::deflate::compress_to_vec(data, 6);
        assert_eq!(inflate(&z, data.len(), 0).unwrap(), data);
        // Declared too small: the limit stops it; too large: the stream ends early.
        assert_eq!(inflate(&z, data.len() - 1, 7).unwrap_err(), Error::new(ErrorKind::BadPdb, 7, "a whole raw deflate stream of the declared size"));
        assert_eq!(inflate(&z, data.len() + 1, 7).unwrap_err().kind, ErrorKind::BadPdb);
        // A truncated stream.
        assert_eq!(inflate(&z[..z.len() / 2], data.len(), 7).unwrap_err().kind, ErrorKind::BadPdb);
    }
}

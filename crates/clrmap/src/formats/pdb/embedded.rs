//! Embedded portable PDBs (dotnet/runtime `docs/design/specs/PE-COFF.md`, "Embedded Portable PDB
//! Debug Directory Entry", type 17): `MPDB`, the PDB's size as a u32, then the PDB as a raw
//! deflate stream (RFC 1951).

use crate::base::read::{Error, ErrorKind, Location, Result};
use crate::formats::pe::{PeImage, DEBUG_TYPE_EMBEDDED_PORTABLE_PDB};

/// `MPDB`, little-endian.
const MAGIC: u32 = 0x4244_504D;

/// The most a deflate stream can expand: 1032:1 (a 258-byte match coded in about two bits, RFC
/// 1951). A declared size above this ratio cannot be honest, so it is refused before anything is
/// allocated.
const MAX_RATIO: u64 = 1032;

/// The largest embedded PDB inflated whatever its compression: 64 MiB. Above it, the PDB must be
/// at most [`MAX_HONEST_RATIO`] times its deflated size.
pub const MAX_EMBEDDED: u64 = 64 << 20;

/// Compilers' embedded PDBs deflate to a third or a quarter of their size; 32:1 leaves room for
/// any honest one, while a zip bomb (a 1 MB DLL declaring 1 GiB) is refused before it is inflated.
pub const MAX_HONEST_RATIO: u64 = 32;

/// How much is inflated first, to check the PDB's signature before inflating the rest.
const HEAD: usize = 4096;

/// The embedded PDB of an image, inflated; `None` when the image has no type-17 entry.
///
/// The declared size is bounded before anything is inflated: by the deflate ratio limit, and by
/// [`MAX_EMBEDDED`] or [`MAX_HONEST_RATIO`] times the stream, whichever is more; the output by
/// the declared size. The first 4 KiB are inflated alone, and a stream that does not start with a
/// metadata root (`BSJB`) is refused before the rest is inflated. A stream that ends early, runs
/// past the declared size or is not deflate is `bad_pdb` at the entry's data.
///
/// Errors in the inflated PDB itself (from [`super::PortablePdb::parse`] and its readers) have
/// offsets into the inflated bytes, which are no place in the image: [`inflated`] says so.
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
        let stream = deflated.len() as u64;
        if u64::from(size) > stream.saturating_mul(MAX_RATIO) {
            return Err(Error::new(ErrorKind::BadPdb, size_at, "a PDB size the deflate stream can hold"));
        }
        if u64::from(size) > MAX_EMBEDDED.max(stream.saturating_mul(MAX_HONEST_RATIO)) {
            return Err(Error::new(ErrorKind::BadPdb, size_at, "an embedded PDB of at most 64 MiB or 32 times its deflated size"));
        }
        let head = inflate_head(deflated, (size as usize).min(HEAD), r.offset())?;
        if !head.starts_with(b"BSJB") {
            return Err(Error::new(ErrorKind::BadPdb, r.offset(), "a deflate stream that inflates to a portable PDB (BSJB)"));
        }
        return inflate(deflated, size as usize, r.offset()).map(Some);
    }
    Ok(None)
}

/// The first `len` bytes a raw deflate stream inflates to (fewer if it ends first).
fn inflate_head(deflated: &[u8], len: usize, at: u64) -> Result<Vec<u8>> {
    match miniz_oxide::inflate::decompress_to_vec_with_limit(deflated, len) {
        Ok(out) => Ok(out),
        Err(e) if e.status == miniz_oxide::inflate::TINFLStatus::HasMoreOutput => Ok(e.output),
        Err(_) => Err(Error::new(ErrorKind::BadPdb, at, "a whole raw deflate stream of the declared size")),
    }
}

/// Inflate a raw deflate stream that must give exactly `size` bytes.
pub fn inflate(deflated: &[u8], size: usize, at: u64) -> Result<Vec<u8>> {
    // decompress_to_vec_with_limit grows its buffer as output arrives, so memory follows what
    // the stream really holds; the limit stops it at the declared size.
    let out = miniz_oxide::inflate::decompress_to_vec_with_limit(deflated, size).map_err(|_| Error::new(ErrorKind::BadPdb, at, "a whole raw deflate stream of the declared size"))?;
    if out.len() != size {
        return Err(Error::new(ErrorKind::BadPdb, at, "a deflate stream of the declared size"));
    }
    Ok(out)
}

/// An error found in an inflated embedded PDB: its byte offset is into the inflated bytes, not
/// the image, and the location says so ([`Location::Inflated`]).
pub fn inflated(e: Error) -> Error {
    match e.location {
        Location::Offset(o) => Error { location: Location::Inflated(o), ..e },
        _ => e,
    }
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

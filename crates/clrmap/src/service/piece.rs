//! Bytes copied into many answers (a module's, a method's, a document's part of a frame), kept
//! padded to whole chunks: a copy is a few moves of a constant size, inlined, where a copy of a
//! length known only at run time is a call to `memcpy` (which `perf` showed costing more than
//! the bytes it moved, for copies this short).

/// The chunk a [`Piece`] is copied by, and the most padding one holds.
pub(super) const CHUNK: usize = 32;

/// Bytes and the padding after them (zeros, up to a whole [`CHUNK`]).
#[derive(Debug, Default)]
pub(super) struct Piece {
    padded: Box<[u8]>,
    len: usize,
}

impl Piece {
    /// An empty buffer with room for `len` bytes and their padding: made a [`Piece`] with no
    /// allocation besides its own.
    pub(super) fn buffer(len: usize) -> Vec<u8> {
        Vec::with_capacity(len.div_ceil(CHUNK).saturating_mul(CHUNK))
    }

    pub(super) fn new(mut bytes: Vec<u8>) -> Piece {
        let len = bytes.len();
        bytes.resize(len.div_ceil(CHUNK).saturating_mul(CHUNK), 0);
        Piece { padded: bytes.into_boxed_slice(), len }
    }

    /// The bytes, without their padding.
    pub(super) fn bytes(&self) -> &[u8] {
        self.padded.get(..self.len).unwrap_or_default()
    }

    /// Append the bytes (the padding is written, then cut off).
    #[inline(always)]
    pub(super) fn put(&self, out: &mut Vec<u8>) {
        put_padded(out, &self.padded, self.len);
    }
}

/// Append the first `len` bytes of `padded`, a whole number of [`CHUNK`]s: up to four chunks as
/// one copy of a constant size, more a chunk at a time.
#[inline(always)]
pub(super) fn put_padded(out: &mut Vec<u8>, padded: &[u8], len: usize) {
    #[inline(always)]
    fn fixed<const N: usize>(out: &mut Vec<u8>, padded: &[u8]) -> bool {
        match <&[u8; N]>::try_from(padded) {
            Ok(bytes) => {
                out.extend_from_slice(bytes);
                true
            }
            Err(_) => false,
        }
    }
    let at = out.len();
    let done = fixed::<CHUNK>(out, padded) || fixed::<{ 2 * CHUNK }>(out, padded) || fixed::<{ 3 * CHUNK }>(out, padded) || fixed::<{ 4 * CHUNK }>(out, padded);
    if !done {
        out.extend_from_slice(padded);
    }
    out.truncate(at.saturating_add(len));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_appends_its_bytes_alone_at_every_length() {
        for len in 0..100usize {
            let bytes: Vec<u8> = (0..len).map(|i| u8::try_from(i % 250).unwrap_or(0).wrapping_add(1)).collect();
            let mut out = b"ab".to_vec();
            let piece = Piece::new(bytes.clone());
            assert_eq!(piece.bytes(), &bytes[..]);
            piece.put(&mut out);
            assert_eq!(out.get(..2), Some(&b"ab"[..]));
            assert_eq!(out.get(2..), Some(&bytes[..]));
        }
    }
}

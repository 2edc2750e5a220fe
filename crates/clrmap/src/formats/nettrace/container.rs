//! The nettrace container (FastSerialization, as EventPipe writes it): its constants and rules,
//! in one place for both readers, the file reader (`stream`) and the session framer (`framer`).
//!
//! A stream is `Nettrace`, the length-prefixed signature `!FastSerialization.1`, then objects:
//! BeginPrivateObject, the type (BeginPrivateObject, NullReference, i32 version, i32 minimum reader
//! version, i32 name length, the name, EndObject), the body, EndObject; a NullReference ends it.
//! The `Trace` object's body is fixed; every other object is a block: i32 size, padding to a
//! 4-byte stream offset, the body (EventPipe's `nettrace` format, version 4).

use crate::base::read::{Error, Result};

/// The stream's first bytes.
pub const MAGIC: &[u8] = b"Nettrace";
/// The serialization signature after the magic and its i32 length.
pub const SERIALIZATION: &[u8] = b"!FastSerialization.1";
/// `MAGIC`, the signature's length (20) and the signature: the prelude as bytes.
pub const PRELUDE: &[u8] = b"Nettrace\x14\x00\x00\x00!FastSerialization.1";
/// FastSerialization's NullReference tag: the type's null parent, and the end of the stream.
pub const TAG_NULL: u8 = 1;
/// BeginPrivateObject: an object, and its type.
pub const TAG_BEGIN_PRIVATE_OBJECT: u8 = 5;
/// EndObject.
pub const TAG_END_OBJECT: u8 = 6;
/// The longest type name taken (the runtime's are at most 13 bytes: `MetadataBlock`).
pub const MAX_TYPE_NAME: usize = 64;
/// The `Trace` object's body: SYSTEMTIME (16), syncTimeQPC and qpcFrequency (16), pointerSize,
/// processId, numProcessors and expectedCPUSamplingRate (16).
pub const TRACE_BODY: usize = 48;
/// Blocks larger than this are refused (the runtime writes blocks of at most a few hundred KB).
pub const MAX_BLOCK: u32 = 1 << 28;

/// The padding after a block's size at stream offset `offset`: its body starts 4-aligned.
pub const fn block_padding(offset: u64) -> u64 {
    4u64.wrapping_sub(offset % 4) % 4
}

/// The newest `Trace` object version read here: 4, what 3.1.23, 8.0.4 and the SDK machine's
/// runtimes write (measured on the committed traces: `Trace` 4, min reader 4).
pub const NEWEST_TRACE_VERSION: u32 = 4;
/// The newest block version read here (EventBlock, MetadataBlock, StackBlock, SPBlock: 2, min
/// reader 2, in the same traces).
pub const NEWEST_BLOCK_VERSION: u32 = 2;

/// Check an object's type header before reading its body: a version, or a minimum reader
/// version, above the newest known is `unsupported_version` naming both numbers (`at` is the
/// version field). FastSerialization lets a newer writer change a type's layout with its
/// version, so reading on would misread. One rule for both readers of the container
/// (`stream` and `framer`).
pub fn check_type_version(name: &[u8], version: i32, min_reader: i32, at: u64) -> Result<()> {
    let newest = if name == b"Trace" { NEWEST_TRACE_VERSION } else { NEWEST_BLOCK_VERSION };
    let found = u32::try_from(version.max(min_reader)).unwrap_or(u32::MAX);
    if found > newest {
        // The minimum reader version follows the version: name the field that is too new.
        let at = if version < min_reader { at.saturating_add(4) } else { at };
        return Err(Error::unsupported_version(at, found, newest, "a nettrace object version this reader knows"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prelude_is_the_magic_the_length_and_the_signature() {
        let mut p = MAGIC.to_vec();
        p.extend_from_slice(&u32::try_from(SERIALIZATION.len()).unwrap().to_le_bytes());
        p.extend_from_slice(SERIALIZATION);
        assert_eq!(p, PRELUDE);
        assert_eq!((block_padding(0), block_padding(5), block_padding(8), block_padding(7)), (0, 3, 0, 1));
    }
}

//! SSQP keys (dotnet/symstore `docs/specs/SSQP_Key_Conventions.md`): the relative path under which
//! a symbol server, and clrmap's cache, keep a file.
//!
//! - Portable PDB: `<file name>/<Signature GUID, "N" format><"FFFFFFFF">/<file name>`. The age
//!   field of a portable PDB's key is always `FFFFFFFF`: the PDB id's stamp is not part of it.
//! - PE image: `<file name>/<TimeDateStamp, %08X><SizeOfImage, %x>/<file name>`.
//!
//! Both are lowercased, the `FFFFFFFF` too (the spec prints it upper-case; Microsoft's server and
//! clrmap's cache are case-insensitive about it, and one case keeps one cache entry), and a file
//! name must be a plain name: no separator, not `.` or `..`, so that a key never leaves the cache
//! directory it is joined to.

/// A key: the relative path, lowercased, with `/` separators, and the bytes its file starts with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key(String, &'static [u8]);

impl Key {
    /// The key as a relative URL path and file path (`name/index/name`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The file name the key ends with.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The bytes every file of this kind starts with (`BSJB` for a portable PDB, `MZ` for a PE
    /// image): a download that starts otherwise is cut off at once.
    pub fn magic(&self) -> &'static [u8] {
        self.1
    }
}

impl core::fmt::Display for Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A name that stays inside the directory it is joined to, and is safe in a URL path: not empty,
/// `.` or `..`, with no separator, and only characters that need no escaping in a URL path.
fn plain(name: &str) -> bool {
    !(name.is_empty() || name == "." || name == "..") && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
}

/// A GUID (GUID byte order, as stored in a CodeView entry or a PDB id) in the `N` format:
/// `Guid.ToString("N")`, the first three fields little-endian, lowercase.
pub fn guid_n(guid: &[u8; 16]) -> String {
    crate::base::guid::Guid(*guid).n()
}

/// The key of a portable PDB named `name` with this GUID. `None` for a name that is not plain.
pub fn portable_pdb(name: &str, guid: &[u8; 16]) -> Option<Key> {
    let name = name.to_ascii_lowercase();
    plain(&name).then(|| Key(format!("{name}/{}ffffffff/{name}", guid_n(guid)), b"BSJB"))
}

/// The key of a PE image named `name` with this COFF TimeDateStamp and SizeOfImage. `None` for a
/// name that is not plain.
pub fn pe_image(name: &str, time_date_stamp: u32, size_of_image: u32) -> Option<Key> {
    let name = name.to_ascii_lowercase();
    plain(&name).then(|| Key(format!("{name}/{time_date_stamp:08x}{size_of_image:x}/{name}"), b"MZ"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_ssqp_conventions() {
        // The spec's own examples, lowercased: "foo.pdb/497b72f6390a44fc878e5a2d63b6cc4bFFFFFFFF/foo.pdb"
        // for GUID {0x497B72F6, 0x390A, 0x44FC, {0x87, ...}}, and "foo.exe/542d574232000/foo.exe"
        // for Timestamp 0x542d5742 and SizeOfImage 0x32000.
        let guid = [0xf6, 0x72, 0x7b, 0x49, 0x0a, 0x39, 0xfc, 0x44, 0x87, 0x8e, 0x5a, 0x2d, 0x63, 0xb6, 0xcc, 0x4b];
        assert_eq!(portable_pdb("Foo.PDB", &guid).unwrap().as_str(), "foo.pdb/497b72f6390a44fc878e5a2d63b6cc4bffffffff/foo.pdb");
        assert_eq!(pe_image("Foo.exe", 0x542d_5742, 0x32000).unwrap().as_str(), "foo.exe/542d574232000/foo.exe");
        for bad in ["", ".", "..", "a/b.pdb", "a\\b.pdb", "a b.pdb", "%2e%2e"] {
            assert!(portable_pdb(bad, &guid).is_none(), "{bad:?}");
        }
    }
}

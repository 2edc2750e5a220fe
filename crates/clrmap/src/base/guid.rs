//! GUIDs: the one type for the 16 bytes that name a PDB, an assembly's build (its MVID) and a
//! symbol-server key, and its three text forms.
//!
//! The bytes are in GUID byte order, as ECMA-335's #GUID heap, a CodeView `RSDS` entry and a
//! portable PDB's id store them: Data1, Data2 and Data3 little-endian, then Data4's 8 bytes.

use core::fmt::{self, Write};

/// A GUID, in GUID byte order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Guid(pub [u8; 16]);

impl Guid {
    /// Data1..Data3 as numbers, then Data4.
    fn parts(&self) -> (u32, u16, u16, [u8; 8]) {
        let [a0, a1, a2, a3, b0, b1, c0, c1, d0, d1, d2, d3, d4, d5, d6, d7] = self.0;
        (u32::from_le_bytes([a0, a1, a2, a3]), u16::from_le_bytes([b0, b1]), u16::from_le_bytes([c0, c1]), [d0, d1, d2, d3, d4, d5, d6, d7])
    }

    /// 32 upper-case hex digits, no dashes: how symbol-server keys and notes write a PDB's GUID
    /// (`C5F1...`).
    ///
    /// ```
    /// let g = clrmap::guid::Guid([0x78, 0x56, 0x34, 0x12, 0xbc, 0x9a, 0xf0, 0xde, 1, 2, 3, 4, 5, 6, 7, 8]);
    /// assert_eq!(g.key_hex(), "123456789ABCDEF00102030405060708");
    /// assert_eq!(g.key_hex().to_ascii_lowercase(), g.n());
    /// assert_eq!(g.to_string(), "12345678-9abc-def0-0102-030405060708");
    /// ```
    pub fn key_hex(&self) -> String {
        self.n().to_ascii_uppercase()
    }

    /// 32 lower-case hex digits, no dashes (.NET's `Guid.ToString("N")`), as SSQP keys write it.
    pub fn n(&self) -> String {
        let (a, b, c, d) = self.parts();
        let mut s = String::with_capacity(32);
        let _ = write!(s, "{a:08x}{b:04x}{c:04x}");
        for byte in d {
            let _ = write!(s, "{byte:02x}");
        }
        s
    }

    /// The text form with dashes (`Display`), in either case, with or without braces:
    /// `None` for anything else.
    pub fn parse(text: &str) -> Option<Guid> {
        let text = text.trim_start_matches('{').trim_end_matches('}');
        let mut groups = text.split('-');
        let mut field = |len: usize| groups.next().filter(|g| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()));
        let (a, b, c, d, e) = (field(8)?, field(4)?, field(4)?, field(4)?, field(12)?);
        if groups.next().is_some() {
            return None;
        }
        let mut out = [0u8; 16];
        let a = u32::from_str_radix(a, 16).ok()?.to_le_bytes();
        let b = u16::from_str_radix(b, 16).ok()?.to_le_bytes();
        let c = u16::from_str_radix(c, 16).ok()?.to_le_bytes();
        let tail = d.bytes().chain(e.bytes()).collect::<Vec<u8>>();
        let data4 = tail.chunks_exact(2).map(|p| core::str::from_utf8(p).ok().and_then(|h| u8::from_str_radix(h, 16).ok()));
        for (slot, byte) in out.iter_mut().zip(a.into_iter().chain(b).chain(c).map(Some).chain(data4)) {
            *slot = byte?;
        }
        Some(Guid(out))
    }
}

impl fmt::Display for Guid {
    /// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lower case, as .NET prints a GUID.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b, c, [d0, d1, rest @ ..]) = self.parts();
        write!(f, "{a:08x}-{b:04x}-{c:04x}-{d0:02x}{d1:02x}-")?;
        rest.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

impl From<[u8; 16]> for Guid {
    fn from(bytes: [u8; 16]) -> Self {
        Guid(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_round_trip_and_junk_is_refused() {
        let g = Guid([0x78, 0x56, 0x34, 0x12, 0xbc, 0x9a, 0xf0, 0xde, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(Guid::parse(&g.to_string()), Some(g));
        assert_eq!(Guid::parse("{12345678-9ABC-DEF0-0102-030405060708}"), Some(g));
        for bad in ["", "12345678-9abc-def0-0102-03040506070", "12345678-9abc-def0-0102-030405060708-00", "1234567g-9abc-def0-0102-030405060708", "12345678:9abc-def0-0102-030405060708"] {
            assert_eq!(Guid::parse(bad), None, "{bad}");
        }
    }
}

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

    /// A GUID's text in .NET's `D` form (`Display`: `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`), its
    /// `B` form (the same in one pair of braces) or its `N` form (32 digits, as symbol-server keys
    /// and Sentry's ids write it), in either case: `None` for anything else.
    ///
    /// ```
    /// use clrmap::guid::Guid;
    ///
    /// let g = Guid::parse("12345678-9abc-def0-0102-030405060708").unwrap();
    /// assert_eq!(Guid::parse("{12345678-9ABC-DEF0-0102-030405060708}"), Some(g));
    /// assert_eq!(Guid::parse("123456789abcdef00102030405060708"), Some(g));
    /// assert_eq!(Guid::parse("{12345678-9abc-def0-0102-030405060708"), None);
    /// ```
    pub fn parse(text: &str) -> Option<Guid> {
        let (dashed, text) = match text.strip_prefix('{') {
            Some(inner) => (true, inner.strip_suffix('}')?),
            None => (text.len() == 36, text),
        };
        // The D form's dashes are at these places and nowhere else: each other byte must be a
        // digit.
        let digits = text.bytes().enumerate().filter(|&(i, b)| !(dashed && b == b'-' && matches!(i, 8 | 13 | 18 | 23))).map(|(_, b)| b);
        if text.len() != if dashed { 36 } else { 32 } {
            return None;
        }
        let mut n = [0u8; 16];
        let mut count = 0usize;
        for (i, b) in digits.enumerate() {
            let value = char::from(b).to_digit(16)?;
            let slot = n.get_mut(i / 2)?;
            *slot = (*slot << 4) | u8::try_from(value).ok()?;
            count = i.saturating_add(1);
        }
        if count != 32 {
            return None;
        }
        // The text writes Data1..Data3 as numbers; the bytes hold them little-endian.
        let [a0, a1, a2, a3, b0, b1, c0, c1, d @ ..] = n;
        let mut out = [0u8; 16];
        for (slot, byte) in out.iter_mut().zip([a3, a2, a1, a0, b1, b0, c1, c0].into_iter().chain(d)) {
            *slot = byte;
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
        assert_eq!(Guid::parse(&g.n()), Some(g));
        assert_eq!(Guid::parse(&g.key_hex()), Some(g));
        for bad in [
            "",
            "12345678-9abc-def0-0102-03040506070",
            "12345678-9abc-def0-0102-030405060708-00",
            "1234567g-9abc-def0-0102-030405060708",
            "12345678:9abc-def0-0102-030405060708",
            // Braces only in one pair, around the D form.
            "{12345678-9abc-def0-0102-030405060708",
            "12345678-9abc-def0-0102-030405060708}",
            "{{12345678-9abc-def0-0102-030405060708}}",
            "{123456789abcdef00102030405060708}",
            // Dashes only where the D form has them.
            "1234567-89abc-def0-0102-030405060708",
            "12345678-9abc-def0-0102-0304050607-8",
            "12345678-9abc-def00102-030405060708-",
            "-123456789abcdef00102030405060708",
            "123456789abcdef0010203040506070-",
            "+2345678-9abc-def0-0102-030405060708",
            "12345678-9abc-def0-0102-03040506070é",
        ] {
            assert_eq!(Guid::parse(bad), None, "{bad}");
        }
    }

    /// The `uuid` crate, an independent reader of the same three forms (its fourth, the URN, is
    /// not one of ours), on GUIDs written in each form and case, then cut, grown and changed.
    #[test]
    fn parse_reads_what_the_uuid_crate_reads() {
        use proptest::prelude::*;
        let edits = proptest::collection::vec((0..40usize, 0..3u8, proptest::sample::select(vec!['-', '{', '}', '0', 'a', 'F', 'g', ' ', 'é'])), 0..3);
        proptest!(ProptestConfig::with_cases(20_000), |(bytes in any::<[u8; 16]>(), form in 0..4u8, upper in any::<bool>(), edits in edits)| {
            let g = Guid(bytes);
            let mut text = match form {
                0 => g.to_string(),
                1 => format!("{{{g}}}"),
                2 => g.n(),
                _ => format!("{{{}}}", g.n()),
            };
            if upper {
                text = text.to_ascii_uppercase();
            }
            if form < 3 && edits.is_empty() {
                prop_assert_eq!(Guid::parse(&text), Some(g));
            }
            let mut chars: Vec<char> = text.chars().collect();
            for (at, how, c) in edits {
                let at = at.min(chars.len());
                match how {
                    0 if at < chars.len() => drop(chars.remove(at)),
                    1 => chars.insert(at, c),
                    _ if at < chars.len() => chars[at] = c,
                    _ => {}
                }
            }
            let text: String = chars.into_iter().collect();
            let oracle = uuid::Uuid::try_parse(&text).ok().map(|u| u.to_bytes_le());
            prop_assert_eq!(Guid::parse(&text).map(|g| g.0), oracle, "{}", text);
        });
    }
}

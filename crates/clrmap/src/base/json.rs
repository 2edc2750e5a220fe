//! JSON as every front end writes it: one string escape, and the one error object of
//! docs/output.md#errors that the CLI, the service and the C ABI print.
//!
//! Strings are escaped exactly as serde_json escapes them (`\"`, `\\`, the short forms of
//! backspace, form feed, newline, carriage return and tab, `\u00XX` for the other control
//! characters), so hand-written answers are byte for byte what serde would give.

use core::fmt;

use crate::base::read::{Error, Location};

/// The escape of one byte of a UTF-8 string: `None` when it stands as it is, `Some("")` for a
/// control character written `\u00XX`. Every byte of a multi-byte character stands as it is.
const fn escape_of(b: u8) -> Option<&'static str> {
    match b {
        b'"' => Some("\\\""),
        b'\\' => Some("\\\\"),
        0x08 => Some("\\b"),
        0x0c => Some("\\f"),
        b'\n' => Some("\\n"),
        b'\r' => Some("\\r"),
        b'\t' => Some("\\t"),
        0x00..=0x1f => Some(""),
        _ => None,
    }
}

/// Write `s` escaped, without quotes, piece by piece: runs that need no escape go whole.
fn escape_with<E>(s: &str, mut put: impl FnMut(&str) -> Result<(), E>) -> Result<(), E> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let Some(short) = escape_of(b) else { continue };
        put(s.get(start..i).unwrap_or(""))?;
        if short.is_empty() {
            let hi = HEX.get(usize::from(b >> 4)).copied().unwrap_or(b'0');
            let lo = HEX.get(usize::from(b & 0xf)).copied().unwrap_or(b'0');
            let code = [b'\\', b'u', b'0', b'0', hi, lo];
            put(core::str::from_utf8(&code).unwrap_or("\\u0000"))?;
        } else {
            put(short)?;
        }
        start = i.saturating_add(1);
    }
    put(s.get(start..).unwrap_or(""))
}

/// `s` as a JSON string, quotes included, appended to `out`.
pub fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let _ = escape_with(s, |piece| -> Result<(), core::convert::Infallible> {
        out.extend_from_slice(piece.as_bytes());
        Ok(())
    });
    out.push(b'"');
}

/// A `fmt::Write` that escapes what is written through it for the inside of a JSON string (the
/// caller writes the quotes): for text streamed straight into JSON, such as a type signature
/// printed as it is decoded.
pub struct Escape<'w>(pub &'w mut dyn fmt::Write);

impl fmt::Debug for Escape<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Escape")
    }
}

impl fmt::Write for Escape<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        escape_with(s, |piece| self.0.write_str(piece))
    }
}

/// The error object of docs/output.md#errors: `{"error":{"kind":...,...,"message":...}}`.
///
/// With a location, `offset` is always there (the byte offset, or `null` when the location is
/// not one), and `rva`, `address` or `inflated_offset` says what it is instead; without one (the
/// service's form), neither. `input` is the value the user gave, when the error is about one.
#[derive(Clone, Copy, Debug)]
pub struct ErrorObject<'a> {
    /// The stable snake_case kind.
    pub kind: &'a str,
    /// Where, or `None` for a form that names no place.
    pub location: Option<Location>,
    /// The value as the user gave it.
    pub input: Option<&'a str>,
    /// What is wrong.
    pub message: &'a str,
}

impl<'a> ErrorObject<'a> {
    /// A library error, with `message` (its [`Error::message`], perhaps with a note after it).
    pub fn of(error: &Error, message: &'a str) -> Self {
        ErrorObject { kind: error.kind.as_str(), location: Some(error.location), input: None, message }
    }

    /// `{"error":{...}}` appended to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"error\":");
        self.write_inner(out);
        out.push(b'}');
    }

    /// The object alone (`{"kind":...}`), as a frame's `error` field holds it.
    pub fn write_inner(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"kind\":");
        string(out, self.kind);
        if let Some(location) = self.location {
            out.extend_from_slice(b",\"offset\":");
            match location {
                Location::Offset(o) => out.extend_from_slice(o.to_string().as_bytes()),
                _ => out.extend_from_slice(b"null"),
            }
            let (name, value) = match location {
                Location::Rva(r) => ("rva", Some(u64::from(r))),
                Location::Address(a) => ("address", Some(a)),
                Location::Inflated(o) => ("inflated_offset", Some(o)),
                Location::Offset(_) | Location::Nowhere => ("", None),
            };
            if let Some(v) = value {
                out.extend_from_slice(b",\"");
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b"\":");
                out.extend_from_slice(v.to_string().as_bytes());
            }
        }
        if let Some(input) = self.input {
            out.extend_from_slice(b",\"input\":");
            string(out, input);
        }
        out.extend_from_slice(b",\"message\":");
        string(out, self.message);
        out.push(b'}');
    }

    /// [`Self::write`] as a line's text (no newline).
    pub fn line(&self) -> String {
        let mut out = Vec::new();
        self.write(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::read::ErrorKind;

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for s in ["", "plain", "a\"b\\c", "tab\there\nnew\r\u{8}\u{c}", "\u{0}\u{1f}\u{7f}", "é ü 漢 🙂", "C:\\src\\Program.cs"] {
            let mut out = Vec::new();
            string(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
            let mut text = String::from("\"");
            fmt::Write::write_str(&mut Escape(&mut text), s).unwrap();
            text.push('"');
            assert_eq!(text.as_bytes(), serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn error_objects_have_the_documented_fields_in_order() {
        let parse = |o: ErrorObject<'_>| serde_json::from_str::<serde_json::Value>(&o.line()).unwrap();
        let e = Error::new(ErrorKind::Truncated, 12, "a u32");
        let v = parse(ErrorObject::of(&e, "expected a u32"));
        assert_eq!(v, serde_json::json!({"error": {"kind": "truncated", "offset": 12, "message": "expected a u32"}}));
        let at_rva = ErrorObject { kind: "not_found", location: Some(Location::Rva(0x10)), input: Some("0x10"), message: "m" };
        assert_eq!(at_rva.line(), r#"{"error":{"kind":"not_found","offset":null,"rva":16,"input":"0x10","message":"m"}}"#);
        let service = ErrorObject { kind: "bad_request", location: None, input: None, message: "\"x\"" };
        assert_eq!(service.line(), r#"{"error":{"kind":"bad_request","message":"\"x\""}}"#);
        let nowhere = ErrorObject { kind: "k", location: Some(Location::Nowhere), input: None, message: "" };
        assert_eq!(nowhere.line(), r#"{"error":{"kind":"k","offset":null,"message":""}}"#);
    }
}

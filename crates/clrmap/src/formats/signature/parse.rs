//! A parser for the ILAsm notation of docs/output.md#type-signatures, with tokens written as `0x...`: the
//! inverse of the printer, used by `clrmap dict build` manifests.
//!
//! Whitespace matters where the notation puts it: suffixes `[]`, `*`, `&` follow a type directly,
//! while ` pinned`, ` modreq(N)`, ` modopt(N)` and an FNPTR's ` *(` follow a space. Spaces after
//! commas are tolerated. `L...H` always sets both the lower bound and the size of a dimension
//! (as ILAsm does), so a printed size-only dimension `0...H` reads back with an explicit lower
//! bound 0: the same array type, not the same bytes.

use super::decode::{MAX_ARRAY_RANK, MAX_DEPTH};
use super::types::{ArrayShape, CallingConvention, MethodSignature, Primitive, Type};
use crate::base::read::{Error, ErrorKind, Result};

/// Parse one type written in the notation of docs/output.md#type-signatures with hex tokens.
pub fn parse_type(text: &str) -> Result<Type> {
    let mut p = Parser { s: text.as_bytes(), pos: 0 };
    p.skip_spaces();
    let t = p.ty(1)?;
    p.skip_spaces();
    if p.pos != p.s.len() {
        return Err(p.err("the end of the type"));
    }
    Ok(t)
}

/// Parse a comma-separated list of types (a heap item's instantiation), e.g. `int32,string`.
/// Commas inside `<...>`, `[...]` and `(...)` belong to the types.
pub fn parse_type_list(text: &str) -> Result<Vec<Type>> {
    let mut p = Parser { s: text.as_bytes(), pos: 0 };
    let mut out = Vec::new();
    loop {
        p.skip_spaces();
        out.push(p.ty(1)?);
        p.skip_spaces();
        if p.pos == p.s.len() {
            return Ok(out);
        }
        p.expect(",")?;
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

const PRIMITIVES: &[(&str, Primitive)] = &[
    ("native uint", Primitive::U),
    ("native int", Primitive::I),
    ("void", Primitive::Void),
    ("bool", Primitive::Boolean),
    ("char", Primitive::Char),
    ("int8", Primitive::I1),
    ("uint8", Primitive::U1),
    ("int16", Primitive::I2),
    ("uint16", Primitive::U2),
    ("int32", Primitive::I4),
    ("uint32", Primitive::U4),
    ("int64", Primitive::I8),
    ("uint64", Primitive::U8),
    ("float32", Primitive::R4),
    ("float64", Primitive::R8),
    ("string", Primitive::String),
    ("object", Primitive::Object),
    ("typedref", Primitive::TypedByRef),
];

const CALLING_CONVENTIONS: &[(&str, u8)] = &[("unmanaged cdecl ", 1), ("unmanaged stdcall ", 2), ("unmanaged thiscall ", 3), ("unmanaged fastcall ", 4), ("unmanaged ", 9), ("vararg ", 5)];

impl Parser<'_> {
    fn err(&self, expected: &'static str) -> Error {
        Error::new(ErrorKind::BadNotation, self.pos as u64, expected)
    }

    fn rest(&self) -> &[u8] {
        self.s.get(self.pos..).unwrap_or(&[])
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.rest().starts_with(lit.as_bytes()) {
            self.pos = self.pos.saturating_add(lit.len());
            true
        } else {
            false
        }
    }

    fn expect(&mut self, lit: &'static str) -> Result<()> {
        if self.eat(lit) {
            Ok(())
        } else {
            Err(self.err(lit))
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos = self.pos.saturating_add(1);
        }
    }

    /// An identifier-like word ends here (so `int32` does not match `int32x`).
    fn word_ends(&self) -> bool {
        !matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_')
    }

    fn number<T: core::str::FromStr>(&mut self, expected: &'static str) -> Result<T> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos = self.pos.saturating_add(1);
        }
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            self.pos = self.pos.saturating_add(1);
        }
        let text = self.s.get(start..self.pos).and_then(|b| core::str::from_utf8(b).ok()).unwrap_or("");
        text.parse().map_err(|_| Error::new(ErrorKind::BadNotation, start as u64, expected))
    }

    /// `0x` followed by 1-8 hex digits.
    fn token(&mut self) -> Result<u32> {
        let start = self.pos;
        if !(self.eat("0x") || self.eat("0X")) {
            return Err(self.err("a token written as 0x01000012"));
        }
        let digits = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_hexdigit()) {
            self.pos = self.pos.saturating_add(1);
        }
        let text = self.s.get(digits..self.pos).and_then(|b| core::str::from_utf8(b).ok()).unwrap_or("");
        if text.is_empty() || text.len() > 8 {
            return Err(Error::new(ErrorKind::BadNotation, start as u64, "a token of 1 to 8 hex digits"));
        }
        u32::from_str_radix(text, 16).map_err(|_| Error::new(ErrorKind::BadNotation, start as u64, "a hex token"))
    }

    fn ty(&mut self, depth: u32) -> Result<Type> {
        if depth > MAX_DEPTH {
            return Err(Error::new(ErrorKind::TooDeep, self.pos as u64, "types nested at most 100 deep"));
        }
        let mut t = self.base(depth)?;
        // Suffixes, innermost first: each wraps what came before, one level deeper each, so a long
        // chain (`int32****...`) meets the same depth limit as the decoder.
        let mut level = depth;
        loop {
            let at = self.pos;
            if self.eat("[]") {
                t = Type::SzArray { element: Box::new(t) };
            } else if self.peek() == Some(b'[') {
                let shape = self.shape()?;
                t = Type::Array { element: Box::new(t), shape };
            } else if self.eat("*") {
                t = Type::Ptr { element: Box::new(t) };
            } else if self.eat("&") {
                t = Type::ByRef { element: Box::new(t) };
            } else if self.eat(" pinned") {
                t = Type::Pinned { element: Box::new(t) };
            } else if self.rest().starts_with(b" modreq(") || self.rest().starts_with(b" modopt(") {
                let required = self.eat(" modreq(");
                if !required {
                    self.expect(" modopt(")?;
                }
                let modifier = self.token()?;
                self.expect(")")?;
                t = Type::Modified { required, modifier, element: Box::new(t) };
            } else {
                break;
            }
            level = level.saturating_add(1);
            if level > MAX_DEPTH {
                return Err(Error::new(ErrorKind::TooDeep, at as u64, "types nested at most 100 deep"));
            }
        }
        Ok(t)
    }

    fn base(&mut self, depth: u32) -> Result<Type> {
        let next = depth.saturating_add(1);
        if self.eat("!!") {
            return Ok(Type::MVar { index: self.number("a generic parameter index")? });
        }
        if self.eat("!") {
            return Ok(Type::Var { index: self.number("a generic parameter index")? });
        }
        for (kw, value_type) in [("class ", false), ("valuetype ", true)] {
            if self.eat(kw) {
                let token = self.token()?;
                if self.eat("<") {
                    let mut args = Vec::new();
                    loop {
                        self.skip_spaces();
                        args.push(self.ty(next)?);
                        self.skip_spaces();
                        if self.eat(">") {
                            break;
                        }
                        self.expect(",")?;
                    }
                    return Ok(Type::GenericInst { value_type, token, args });
                }
                return Ok(Type::Named { value_type, token });
            }
        }
        if self.eat("method ") {
            return self.fn_ptr(next);
        }
        for (kw, p) in PRIMITIVES {
            let save = self.pos;
            if self.eat(kw) {
                if self.word_ends() {
                    return Ok(Type::Primitive { primitive: *p });
                }
                self.pos = save;
            }
        }
        Err(self.err("a type"))
    }

    fn fn_ptr(&mut self, depth: u32) -> Result<Type> {
        let mut cc = 0u8;
        if self.eat("instance ") {
            cc |= CallingConvention::HAS_THIS;
        }
        if self.eat("explicit ") {
            cc |= CallingConvention::EXPLICIT_THIS;
        }
        for (word, kind) in CALLING_CONVENTIONS {
            if self.eat(word) {
                cc |= kind;
                break;
            }
        }
        let return_type = self.ty(depth)?;
        self.expect(" *(")?;
        let mut parameters = Vec::new();
        let mut sentinel = None;
        self.skip_spaces();
        if !self.eat(")") {
            loop {
                self.skip_spaces();
                if self.eat("...") {
                    if sentinel.is_some() {
                        return Err(self.err("at most one ..."));
                    }
                    sentinel = Some(parameters.len());
                } else {
                    parameters.push(self.ty(depth)?);
                }
                self.skip_spaces();
                if self.eat(")") {
                    break;
                }
                self.expect(",")?;
            }
        }
        Ok(Type::FnPtr { signature: Box::new(MethodSignature { calling_convention: CallingConvention(cc), generic_parameter_count: 0, return_type, parameters, sentinel }) })
    }

    /// `[d1,d2,...]` with each dimension `L...H`, `L...` or `...` (docs/output.md#type-signatures).
    fn shape(&mut self) -> Result<ArrayShape> {
        let start = self.pos;
        self.expect("[")?;
        let mut dims: Vec<(Option<i32>, Option<u32>)> = Vec::new();
        loop {
            self.skip_spaces();
            if self.eat("...") {
                dims.push((None, None));
            } else {
                let lo: i32 = self.number("a lower bound")?;
                self.expect("...")?;
                if matches!(self.peek(), Some(c) if c.is_ascii_digit() || c == b'-') {
                    let hi: i64 = self.number("an upper bound")?;
                    let size = hi.checked_sub(i64::from(lo)).and_then(|d| d.checked_add(1));
                    let size = size.and_then(|s| u32::try_from(s).ok()).ok_or_else(|| self.err("an upper bound ≥ lower bound − 1"))?;
                    dims.push((Some(lo), Some(size)));
                } else {
                    dims.push((Some(lo), None));
                }
            }
            self.skip_spaces();
            if self.eat("]") {
                break;
            }
            self.expect(",")?;
        }
        let rank = u32::try_from(dims.len()).unwrap_or(u32::MAX);
        if rank > MAX_ARRAY_RANK {
            return Err(Error::new(ErrorKind::BadArrayShape, start as u64, "an array rank from 1 to 64"));
        }
        // ArrayShape lists have no gaps (II.23.2.13): sizes and bounds cover leading dimensions.
        let sizes: Vec<u32> = dims.iter().map_while(|d| d.1).collect();
        let lower_bounds: Vec<i32> = dims.iter().map_while(|d| d.0).collect();
        let gap = dims.iter().skip(sizes.len()).any(|d| d.1.is_some()) || dims.iter().skip(lower_bounds.len()).any(|d| d.0.is_some());
        if gap {
            return Err(Error::new(ErrorKind::BadArrayShape, start as u64, "sizes and bounds on leading dimensions only"));
        }
        Ok(ArrayShape { rank, sizes, lower_bounds })
    }
}

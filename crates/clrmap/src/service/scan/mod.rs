//! `POST /symbolicate` bodies read by one cursor over their bytes, into the same [`Request`] the
//! serde model gives, without serde's per-field machinery: what a request of a thousand frames
//! costs to read is then its bytes, not its fields.
//!
//! The cursor answers only what it proves equal to serde's reading (RFC 8259 JSON, the model's
//! field names, aliases and types). Anything else gives `None`, and the caller reads the body
//! with serde, whose answer (a request or an error with its kind, line and column) is the
//! service's: a key with an escape, a lone surrogate, a number that is negative, fractional or
//! over 64 bits, a field given twice, a struct written as an array, nesting over [`MAX_DEPTH`],
//! over the frame or module budget, and every syntax error. A test and a fuzz target hold the
//! two readers equal wherever the cursor answers.

use std::borrow::Cow;

use super::answer::Ask;
use super::decode::{ask_of, At};
use super::request::{chosen, parse_num, DebugMeta, FrameIn, Frames, Index, ModuleIn, Modules, Num, Request, StacktraceIn, MAX_MODULES};
use digits::short_integer;

/// The bytes of a typical frame (`{"module":0,"token":100663297,"il_offset":12},`).
const TYPICAL_FRAME: usize = 40;

/// The most frames reserved at once before any is read.
const MAX_RESERVED: usize = 16_384;

/// Nesting deeper than this (in skipped values) is left to serde, whose limit is 128.
pub const MAX_DEPTH: usize = 64;

/// The request in `body`, or `None` where serde must read it (see the module's notes). At most
/// `max_frames` frames in all its lists.
///
/// ```
/// use clrmap::service::request::Num;
/// use clrmap::service::scan;
///
/// let body = r#"{"modules":[{"name":"Orders.dll"}],"frames":[{"module":0,"token":"0x06000004","il_offset":27}]}"#;
/// let request = scan::read(body, 1000).unwrap();
/// let frame = &request.frames.unwrap().0[0];
/// assert_eq!((frame.token, frame.il_offset), (Some(Num(0x0600_0004)), Some(Num(27))));
/// // A negative token is left to serde's model, which names the error.
/// assert!(scan::read(r#"{"frames":[{"module":0,"token":-1,"il_offset":0}]}"#, 1000).is_none());
/// ```
pub fn read(body: &str, max_frames: usize) -> Option<Request> {
    let r = read_as(body.as_bytes(), max_frames, &mut AsWritten)?;
    Some(Request {
        modules: r.modules.map(Modules),
        debug_meta: r.debug_meta.map(|images| DebugMeta { images: images.map(Modules) }),
        frames: r.frames.map(Frames),
        stacktraces: r.stacktraces.map(|traces| traces.into_iter().map(|frames| StacktraceIn { frames: frames.map(Frames) }).collect()),
        context_lines: r.context_lines,
    })
}

/// A request read straight into what its frames ask: the modules, and each frame list's asks in
/// order (`frames`, or each of `stacktraces` when `nested`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Asked {
    pub(super) modules: Vec<ModuleIn>,
    pub(super) groups: Vec<Vec<(usize, Ask)>>,
    pub(super) nested: bool,
    pub(super) context_lines: Option<Num>,
    /// By module index, what its frames ask of it: what to look up before the first frame is
    /// written, with no second pass over the frames.
    pub(super) kinds: Kinds,
}

/// In [`Kinds`]: a frame of the module asks its PDB (an IL frame).
pub(super) const ASKS_IL: u8 = 1;
/// In [`Kinds`]: a frame of the module asks its image (an RVA).
pub(super) const ASKS_RVA: u8 = 2;

/// What each module of a request is asked ([`ASKS_IL`], [`ASKS_RVA`]), by module index: the
/// first 32 modules two bits each in a word, so that a request of a few modules allocates
/// nothing for it (a one-frame request's cost is mostly such fixed costs).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Kinds {
    low: u64,
    high: Vec<u8>,
    count: usize,
}

impl Kinds {
    /// The kinds of these groups' asks.
    pub(super) fn of(groups: &[Vec<(usize, Ask)>]) -> Kinds {
        let mut kinds = Kinds::default();
        for (module, ask) in groups.iter().flatten() {
            // Every module a request's good frames name is below MAX_MODULES.
            let _ = kinds.note(*module, ask);
        }
        kinds
    }

    /// Note what `ask` asks of `module`; `None` past [`MAX_MODULES`] (no request has that
    /// module).
    #[inline(always)]
    fn note(&mut self, module: usize, ask: &Ask) -> Option<()> {
        let kind = match ask {
            Ask::Il { .. } => ASKS_IL,
            Ask::Rva { .. } => ASKS_RVA,
        };
        if module < 32 {
            self.low |= u64::from(kind) << (module.saturating_mul(2));
        } else {
            if module >= MAX_MODULES {
                return None;
            }
            let at = module.saturating_sub(32);
            if self.high.len() <= at {
                self.high.resize(at.saturating_add(1), 0);
            }
            *self.high.get_mut(at)? |= kind;
        }
        self.count = self.count.max(module.saturating_add(1));
        Some(())
    }

    /// What `module` is asked.
    pub(super) fn get(&self, module: usize) -> u8 {
        if module < 32 {
            u8::try_from((self.low >> module.saturating_mul(2)) & 3).unwrap_or(0)
        } else {
            self.high.get(module.saturating_sub(32)).copied().unwrap_or(0)
        }
    }
}

/// The request in `body` read into [`Asked`], where every frame's ask is good and names one of
/// the request's modules (so no frame is kept as it was written); `None` for every other body,
/// which serde reads (see the module's notes) and whose frames are checked one by one.
pub(super) fn read_asked(body: &[u8], max_frames: usize) -> Option<Asked> {
    let mut asks = Asks { kinds: Kinds::default() };
    let r = read_as(body, max_frames, &mut asks)?;
    let (modules, lists) = chosen(r.modules, r.debug_meta.flatten(), r.frames, r.stacktraces);
    let (groups, nested) = lists?;
    // Every module a frame names is one the request has.
    if asks.kinds.count > modules.len() {
        return None;
    }
    Some(Asked { modules, groups, nested, context_lines: r.context_lines, kinds: asks.kinds })
}

/// What a frame list's reader makes of each frame as it is read (`None`: the body goes to serde).
trait Each {
    type Out;

    /// A frame as it was written.
    fn frame(&mut self, f: FrameIn) -> Option<Self::Out>;

    /// The common frame, `{"module":M,"token":T,"il_offset":I}`: what [`Each::frame`] makes of
    /// it, without the [`FrameIn`] where a reader does not need one.
    fn il(&mut self, module: u64, token: u64, il: u64) -> Option<Self::Out> {
        self.frame(FrameIn { module: Some(Index(Some(module))), token: Some(Num(token)), il_offset: Some(Num(il)), ..FrameIn::default() })
    }
}

/// Each frame kept as it was written ([`read`]).
struct AsWritten;

impl Each for AsWritten {
    type Out = FrameIn;
    fn frame(&mut self, f: FrameIn) -> Option<FrameIn> {
        Some(f)
    }
}

/// Each frame made what it asks ([`read_asked`]), against no module count yet (the modules'
/// count is checked once they are all read), and what each module is asked noted in `kinds`
/// ([`Kinds`]). A frame naming a module past [`MAX_MODULES`] sends the body to serde.
struct Asks {
    kinds: Kinds,
}

impl Each for Asks {
    type Out = (usize, Ask);
    fn frame(&mut self, f: FrameIn) -> Option<(usize, Ask)> {
        // Where a frame is only matters for an error's message, and an error sends the body to serde.
        let (module, ask) = ask_of(&f, At { group: 0, index: 0, nested: false }, usize::MAX).ok()?;
        self.kinds.note(module, &ask)?;
        Some((module, ask))
    }

    /// [`ask_of`]'s rule for a frame of these three fields alone: a module index below
    /// `usize::MAX`, a token and an IL offset of 32 bits (the fuzz check holds the two equal).
    fn il(&mut self, module: u64, token: u64, il: u64) -> Option<(usize, Ask)> {
        let module = usize::try_from(module).ok().filter(|m| *m < usize::MAX)?;
        let ask = Ask::Il { token: u32::try_from(token).ok()?, il: u32::try_from(il).ok()? };
        self.kinds.note(module, &ask)?;
        Some((module, ask))
    }
}

/// A request's parts, each frame made a `T` as it is read (`None`: the body goes to serde).
#[derive(Default)]
struct Parts<T> {
    modules: Option<Vec<ModuleIn>>,
    /// `debug_meta`, and its `images`.
    debug_meta: Option<Option<Vec<ModuleIn>>>,
    frames: Option<Vec<T>>,
    stacktraces: Option<Vec<Option<Vec<T>>>>,
    context_lines: Option<Num>,
}

fn read_as<E: Each>(body: &[u8], max_frames: usize, each: &mut E) -> Option<Parts<E::Out>> {
    let mut c = Cursor { text: body, at: 0, frames_left: max_frames, modules_left: MAX_MODULES };
    let request = c.request(each)?;
    c.ws();
    (c.at == body.len()).then_some(request)
}

/// Over the body's bytes, not a `str`: what it reads is valid UTF-8 without a pass over the
/// whole body, as every byte outside a string must be one of JSON's ASCII bytes, and each string
/// is checked when it is read or skipped. A body it does not read is checked whole by the caller.
struct Cursor<'a> {
    text: &'a [u8],
    at: usize,
    frames_left: usize,
    modules_left: usize,
}

/// A JSON value's first byte, as far as the fields care.
enum Value<'a> {
    Null,
    Str(Cow<'a, str>),
    Int(u64),
    Bool(bool),
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at = self.at.saturating_add(1);
        }
    }

    /// The next byte after whitespace, consumed.
    fn next(&mut self) -> Option<u8> {
        self.ws();
        let b = self.peek()?;
        self.at = self.at.saturating_add(1);
        Some(b)
    }

    fn literal(&mut self, rest: &[u8]) -> Option<()> {
        let end = self.at.checked_add(rest.len())?;
        (self.text.get(self.at..end)? == rest).then(|| self.at = end)
    }

    /// A string's contents after its opening quote, with no escape in it.
    fn plain_string(&mut self) -> Option<&'a str> {
        let start = self.at;
        let bytes = self.text.get(start..)?;
        let len = bytes.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        let end = start.checked_add(len)?;
        if self.text.get(end) != Some(&b'"') {
            return None;
        }
        self.at = end.saturating_add(1);
        std::str::from_utf8(self.text.get(start..end)?).ok()
    }

    /// A string's contents after its opening quote, its escapes decoded as serde decodes them
    /// into a `String` (a `\u` surrogate only in a pair).
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let start = self.at;
        let bytes = self.text.get(start..)?;
        let len = bytes.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        let end = start.checked_add(len)?;
        match self.text.get(end) {
            Some(b'"') => return self.plain_string().map(Cow::Borrowed),
            Some(b'\\') => {}
            _ => return None,
        }
        // Escapes are ASCII, so the bytes between two are whole characters where the string
        // is valid UTF-8.
        let mut out = String::from(std::str::from_utf8(self.text.get(start..end)?).ok()?);
        self.at = end;
        loop {
            let rest = self.text.get(self.at..)?;
            let len = rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
            out.push_str(std::str::from_utf8(rest.get(..len)?).ok()?);
            self.at = self.at.checked_add(len)?;
            match self.peek()? {
                b'"' => {
                    self.at = self.at.saturating_add(1);
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    self.at = self.at.saturating_add(1);
                    let e = self.peek()?;
                    self.at = self.at.saturating_add(1);
                    out.push(match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let first = self.hex4()?;
                            let code = match first {
                                0xD800..=0xDBFF => {
                                    self.literal(b"\\u")?;
                                    let low = self.hex4()?;
                                    if !(0xDC00..=0xDFFF).contains(&low) {
                                        return None;
                                    }
                                    0x1_0000u32.checked_add(first.checked_sub(0xD800)?.checked_shl(10)?)?.checked_add(low.checked_sub(0xDC00)?)?
                                }
                                0xDC00..=0xDFFF => return None,
                                _ => first,
                            };
                            char::from_u32(code)?
                        }
                        _ => return None,
                    });
                }
                _ => return None,
            }
        }
    }

    /// Four hex digits.
    fn hex4(&mut self) -> Option<u32> {
        let end = self.at.checked_add(4)?;
        let digits = std::str::from_utf8(self.text.get(self.at..end)?).ok()?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.at = end;
        u32::from_str_radix(digits, 16).ok()
    }

    /// A string's contents after its opening quote, skipped: escapes as serde ignores them
    /// (any `\u` with four hex digits), and the bytes checked as UTF-8 (escapes are ASCII, so
    /// the whole is valid where the parts between them are).
    fn skip_string(&mut self) -> Option<()> {
        let start = self.at;
        loop {
            let b = self.peek()?;
            self.at = self.at.saturating_add(1);
            match b {
                b'"' => return std::str::from_utf8(self.text.get(start..self.at)?).ok().map(drop),
                b'\\' => {
                    let e = self.peek()?;
                    self.at = self.at.saturating_add(1);
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let end = self.at.checked_add(4)?;
                            if !self.text.get(self.at..end)?.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.at = end;
                        }
                        _ => return None,
                    }
                }
                0..=0x1f => return None,
                _ => {}
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at = self.at.saturating_add(1);
        }
        self.at.saturating_sub(start)
    }

    /// A number whose first byte `first` was consumed, skipped (JSON's grammar, any size).
    fn skip_number(&mut self, first: u8) -> Option<()> {
        let first = if first == b'-' {
            let b = self.peek()?;
            self.at = self.at.saturating_add(1);
            b
        } else {
            first
        };
        match first {
            b'0' if matches!(self.peek(), Some(b'0'..=b'9')) => return None,
            b'0' => {}
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at = self.at.saturating_add(1);
            if self.digits() == 0 {
                return None;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at = self.at.saturating_add(1);
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at = self.at.saturating_add(1);
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }

    /// A non-negative integer of at most 64 bits whose first byte `first` was consumed; `None`
    /// for any other number.
    fn integer(&mut self, first: u8) -> Option<u64> {
        let mut n = u64::from(first.checked_sub(b'0').filter(|d| *d <= 9)?);
        if n == 0 && matches!(self.peek(), Some(b'0'..=b'9')) {
            return None;
        }
        while let Some(d @ b'0'..=b'9') = self.peek() {
            n = n.checked_mul(10)?.checked_add(u64::from(d.saturating_sub(b'0')))?;
            self.at = self.at.saturating_add(1);
        }
        // A fraction or an exponent makes it a float, which no field takes.
        (!matches!(self.peek(), Some(b'.' | b'e' | b'E'))).then_some(n)
    }

    /// Any value, skipped, `depth` levels in.
    fn skip_value(&mut self, depth: usize) -> Option<()> {
        match self.next()? {
            b'"' => self.skip_string(),
            b'n' => self.literal(b"ull"),
            b't' => self.literal(b"rue"),
            b'f' => self.literal(b"alse"),
            b @ (b'-' | b'0'..=b'9') => self.skip_number(b),
            b'[' if depth < MAX_DEPTH => self.items(|c| c.skip_value(depth.saturating_add(1))),
            b'{' if depth < MAX_DEPTH => self.fields(|c, _| c.skip_value(depth.saturating_add(1))),
            _ => None,
        }
    }

    /// A scalar value, for a field.
    fn scalar(&mut self) -> Option<Value<'a>> {
        match self.next()? {
            b'"' => self.string().map(Value::Str),
            b'n' => self.literal(b"ull").map(|()| Value::Null),
            b't' => self.literal(b"rue").map(|()| Value::Bool(true)),
            b'f' => self.literal(b"alse").map(|()| Value::Bool(false)),
            b => self.integer(b).map(Value::Int),
        }
    }

    /// The items of an array whose `[` was consumed, each read by `item`.
    fn items(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.ws();
        if self.peek() == Some(b']') {
            self.at = self.at.saturating_add(1);
            return Some(());
        }
        loop {
            item(self)?;
            match self.next()? {
                b',' => {}
                b']' => return Some(()),
                _ => return None,
            }
        }
    }

    /// The fields of an object whose `{` was consumed: `field` reads each value by its key.
    fn fields(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        if self.next()? == b'}' {
            return Some(());
        }
        self.at = self.at.saturating_sub(1);
        loop {
            if self.next()? != b'"' {
                return None;
            }
            let key = self.plain_string()?;
            if self.next()? != b':' {
                return None;
            }
            field(self, key)?;
            match self.next()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// `null` (`Ok(false)`) or the opening byte `open` (`Ok(true)`).
    fn open_or_null(&mut self, open: u8) -> Option<bool> {
        match self.next()? {
            b'n' => self.literal(b"ull").map(|()| false),
            b if b == open => Some(true),
            _ => None,
        }
    }

    fn request<E: Each>(&mut self, each: &mut E) -> Option<Parts<E::Out>> {
        if self.next()? != b'{' {
            return None;
        }
        let mut r = Parts { modules: None, debug_meta: None, frames: None, stacktraces: None, context_lines: None };
        let mut seen = Seen::default();
        self.fields(|c, key| match key {
            "modules" | "images" => {
                seen.first(0)?;
                r.modules = c.modules()?;
                Some(())
            }
            "debug_meta" => {
                seen.first(1)?;
                if c.open_or_null(b'{')? {
                    let mut images = None;
                    let mut seen = Seen::default();
                    c.fields(|c, key| match key {
                        "images" => {
                            seen.first(0)?;
                            images = c.modules()?;
                            Some(())
                        }
                        _ => c.skip_value(1),
                    })?;
                    r.debug_meta = Some(images);
                }
                Some(())
            }
            "frames" => {
                seen.first(2)?;
                r.frames = c.frames(each)?;
                Some(())
            }
            "stacktraces" => {
                seen.first(3)?;
                if c.open_or_null(b'[')? {
                    let mut traces = Vec::new();
                    c.items(|c| {
                        if c.next()? != b'{' {
                            return None;
                        }
                        let mut trace = None;
                        let mut seen = Seen::default();
                        c.fields(|c, key| match key {
                            "frames" => {
                                seen.first(0)?;
                                trace = c.frames(each)?;
                                Some(())
                            }
                            _ => c.skip_value(1),
                        })?;
                        traces.push(trace);
                        Some(())
                    })?;
                    r.stacktraces = Some(traces);
                }
                Some(())
            }
            "context_lines" => {
                seen.first(4)?;
                r.context_lines = num(c.scalar()?)?;
                Some(())
            }
            _ => c.skip_value(0),
        })?;
        Some(r)
    }

    fn modules(&mut self) -> Option<Option<Vec<ModuleIn>>> {
        if !self.open_or_null(b'[')? {
            return Some(None);
        }
        let mut out = Vec::new();
        self.items(|c| {
            c.modules_left = c.modules_left.checked_sub(1)?;
            out.push(c.module()?);
            Some(())
        })?;
        Some(Some(out))
    }

    fn module(&mut self) -> Option<ModuleIn> {
        if self.next()? != b'{' {
            return None;
        }
        let mut m = ModuleIn::default();
        let mut seen = Seen::default();
        self.fields(|c, key| {
            let (bit, slot) = match key {
                "name" => (0, &mut m.name),
                "pdb" => (1, &mut m.pdb),
                "pdb_id" => (2, &mut m.pdb_id),
                "type" => (3, &mut m.kind),
                "debug_id" => (4, &mut m.debug_id),
                "debug_file" => (5, &mut m.debug_file),
                "code_file" => (6, &mut m.code_file),
                "code_id" => (7, &mut m.code_id),
                "mvid" | "build_id" => (8, &mut m.mvid),
                "pe_timestamp" => return seen.first(9).and_then(|()| num(c.scalar()?)).map(|n| m.pe_timestamp = n),
                "pe_size_of_image" => return seen.first(10).and_then(|()| num(c.scalar()?)).map(|n| m.pe_size_of_image = n),
                _ => return c.skip_value(1),
            };
            seen.first(bit)?;
            *slot = text(c.scalar()?)?;
            Some(())
        })?;
        Some(m)
    }

    fn frames<E: Each>(&mut self, each: &mut E) -> Option<Option<Vec<E::Out>>> {
        if !self.open_or_null(b'[')? {
            return Some(None);
        }
        // At the first frame, room for as many as the bytes left would hold at a typical frame's
        // size (its three fields, some 40 bytes), within the budget: a list is not grown by
        // copying. What a short list did not use is given back, so that a body of many short
        // lists holds no more than its frames.
        let mut out = Vec::new();
        self.items(|c| {
            c.frames_left = c.frames_left.checked_sub(1)?;
            if out.capacity() == 0 {
                let left = c.text.len().saturating_sub(c.at) / TYPICAL_FRAME;
                out.reserve(left.min(c.frames_left.saturating_add(1)).min(MAX_RESERVED));
            }
            let start = c.at;
            let frame = match c.compact_il_frame().or_else(|| c.il_frame()) {
                Some((module, token, il)) => each.il(module, token, il)?,
                None => {
                    c.at = start;
                    each.frame(c.frame()?)?
                }
            };
            out.push(frame);
            Some(())
        })?;
        if out.capacity() > out.len().saturating_mul(2) {
            out.shrink_to_fit();
        }
        Some(Some(out))
    }

    /// The common frame, `{"module":M,"token":T,"il_offset":I}` (whitespace wherever JSON allows
    /// it, each number a plain integer of at most [`digits::SHORT_DIGITS`] digits): its three
    /// numbers, read with no key copied and no [`FrameIn`] made. `None` for any other frame,
    /// which [`Cursor::frame`] then reads from the same place.
    fn il_frame(&mut self) -> Option<(u64, u64, u64)> {
        if self.next()? != b'{' {
            return None;
        }
        let module = self.keyed(b"\"module\"")?;
        if self.next()? != b',' {
            return None;
        }
        let token = self.keyed(b"\"token\"")?;
        if self.next()? != b',' {
            return None;
        }
        let il = self.keyed(b"\"il_offset\"")?;
        // A `.` or an `e` after a number (a float) is not the `}` either.
        (self.next()? == b'}').then_some((module, token, il))
    }

    /// [`Cursor::il_frame`] as serializers write it, with no whitespace: its constant parts
    /// compared as whole slices, with no whitespace skipped between them. `None`: anything
    /// else, which [`Cursor::il_frame`] reads from the same place.
    #[inline(always)]
    fn compact_il_frame(&mut self) -> Option<(u64, u64, u64)> {
        let bytes = self.text.get(self.at..)?;
        let rest = bytes.strip_prefix(b"{\"module\":")?;
        let (module, len) = short_integer(rest)?;
        let rest = rest.get(len..)?.strip_prefix(b",\"token\":")?;
        let (token, len) = short_integer(rest)?;
        let rest = rest.get(len..)?.strip_prefix(b",\"il_offset\":")?;
        let (il, len) = short_integer(rest)?;
        let rest = rest.get(len..)?.strip_prefix(b"}")?;
        self.at = self.text.len().checked_sub(rest.len())?;
        Some((module, token, il))
    }

    /// The key `key` (quotes included), its colon and a short integer: the integer. The key's
    /// length is a constant, so it is compared with no call.
    fn keyed<const N: usize>(&mut self, key: &[u8; N]) -> Option<u64> {
        self.ws();
        let end = self.at.checked_add(N)?;
        if <[u8; N]>::try_from(self.text.get(self.at..end)?).ok()? != *key {
            return None;
        }
        self.at = end;
        if self.next()? != b':' {
            return None;
        }
        self.ws();
        let (n, len) = short_integer(self.text.get(self.at..)?)?;
        self.at = self.at.checked_add(len)?;
        Some(n)
    }

    fn frame(&mut self) -> Option<FrameIn> {
        if self.next()? != b'{' {
            return None;
        }
        let mut f = FrameIn::default();
        let mut seen = Seen::default();
        self.fields(|c, key| {
            let (bit, slot) = match key {
                "token" => (0, &mut f.token),
                "function_id" => (1, &mut f.function_id),
                "il_offset" => (2, &mut f.il_offset),
                "instruction_addr" => (3, &mut f.instruction_addr),
                "address" => (4, &mut f.address),
                "rva" => (5, &mut f.rva),
                "module" => {
                    seen.first(6)?;
                    f.module = match c.scalar()? {
                        Value::Null => None,
                        Value::Int(n) => Some(Index(Some(n))),
                        Value::Str(_) => Some(Index(None)),
                        Value::Bool(_) => return None,
                    };
                    return Some(());
                }
                "addr_mode" => {
                    seen.first(7)?;
                    f.addr_mode = text(c.scalar()?)?;
                    return Some(());
                }
                "return_address" => {
                    seen.first(8)?;
                    f.return_address = match c.scalar()? {
                        Value::Null => None,
                        Value::Bool(b) => Some(b),
                        Value::Int(_) | Value::Str(_) => return None,
                    };
                    return Some(());
                }
                _ => return c.skip_value(1),
            };
            seen.first(bit)?;
            *slot = num(c.scalar()?)?;
            Some(())
        })?;
        Some(f)
    }
}

/// A string field's value: `Some(None)` for null, `None` where serde would refuse it.
fn text(v: Value<'_>) -> Option<Option<String>> {
    match v {
        Value::Null => Some(None),
        Value::Str(s) => Some(Some(s.into_owned())),
        Value::Int(_) | Value::Bool(_) => None,
    }
}

/// A [`Num`] field's value: `Some(None)` for null, `None` where serde would refuse it.
fn num(v: Value<'_>) -> Option<Option<Num>> {
    match v {
        Value::Null => Some(None),
        Value::Int(n) => Some(Some(Num(n))),
        Value::Str(s) => parse_num(&s).map(|n| Some(Num(n))),
        Value::Bool(_) => None,
    }
}

/// The fields of one object read so far: a second one is serde's `duplicate field` error.
#[derive(Default)]
struct Seen(u32);

impl Seen {
    fn first(&mut self, bit: u32) -> Option<()> {
        let mask = 1u32.checked_shl(bit)?;
        (self.0 & mask == 0).then(|| self.0 |= mask)
    }
}

mod digits;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod fuzzcheck;
#[cfg(test)]
mod tests;

//! Errors and how the CLI reports them (docs/output.md#errors): text or JSON on stderr, and the exit code.

use std::process::ExitCode;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// Bad input: exit 1. `json` selects the JSON form on stderr.
    Input { error: clrmap::Error, json: bool },
    /// Bad input that has no byte offset (a bad manifest line, a name not found): exit 1.
    Message(String),
    /// Bad input of a stable kind with no byte offset: `io` (a file that cannot be read),
    /// `unrecognized_source` (a file that is no known source): exit 1.
    Kinded { kind: &'static str, message: String },
    /// Bad usage that clap cannot see (conflicting values): exit 2.
    Usage(String),
    /// Writing output failed.
    Io(std::io::Error),
    /// A failure with an exit status of its own (the diagnostics-port commands, docs/attach.md).
    Status(String, u8),
    /// Bad input about one value the user gave (an address): exit 1. The text echoes `input`,
    /// and the JSON form carries it as `"input"`.
    Token(TokenError),
    /// A library error with a note on what to do instead (exit 1).
    Noted { error: clrmap::Error, note: String },
}

/// An error about one input value: its kind, the value as given, where it is, and why.
#[derive(Debug, Clone)]
pub struct TokenError {
    /// A stable snake_case kind (`bad_address`, `not_found`).
    pub kind: &'static str,
    /// The value as the user gave it (for a line too long to keep, its first bytes).
    pub input: String,
    /// Where: a byte offset in stdin, an RVA or an address, or nowhere (an argument).
    pub location: clrmap::read::Location,
    /// What is wrong, and what to give instead.
    pub message: String,
}

impl TokenError {
    /// The JSON line: `{"error":{"kind":...,"offset":...,["rva"|"address":...,]"input":...,"message":...}}`.
    pub fn json(&self) -> String {
        clrmap::json::ErrorObject { kind: self.kind, location: Some(self.location), input: Some(&self.input), message: &self.message }.line()
    }

    /// The text line (without `error: `): `KIND[ at WHERE]: INPUT: MESSAGE`, the input escaped
    /// as every text output escapes a string ([`Text`]).
    pub fn text(&self) -> String {
        format!("{}{}: {}: {}", self.kind, self.location, Text(&self.input), self.message)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Io(e)
    }
}

impl CliError {
    /// A library error, reported as text.
    pub fn input(error: clrmap::Error) -> Self {
        CliError::Input { error, json: false }
    }
    /// A library error, reported as JSON when `json`.
    pub fn input_json(error: clrmap::Error, json: bool) -> Self {
        CliError::Input { error, json }
    }
}

/// The JSON form of an error: `{"error":{"kind":...,"offset":...,"message":...}}`. `offset` is
/// the byte offset in the input, or `null` when the location is not one; then `rva`, `address` or
/// `inflated_offset` (an offset into an embedded PDB once inflated) says what it is instead (no
/// field at all when the error has no location).
pub fn error_json(e: &clrmap::Error) -> String {
    clrmap::json::ErrorObject::of(e, &e.message()).line()
}

/// A JSON error line for an error with no location: `{"error":{"kind":...,"offset":null,"message":...}}`.
fn located_nowhere_json(kind: &str, message: &str) -> String {
    clrmap::json::ErrorObject { kind, location: Some(clrmap::read::Location::Nowhere), input: None, message }.line()
}

/// A serde_json error as an I/O error that keeps its kind: a closed pipe stays `BrokenPipe`, which
/// ends the output quietly (`head` has read enough), as it does for text.
pub fn json_io(e: serde_json::Error) -> std::io::Error {
    match e.io_error_kind() {
        Some(kind) => std::io::Error::from(kind),
        None => std::io::Error::other(e),
    }
}

/// Print the error on stderr and give the exit code; with `json` (the command line asked for
/// `--json`), every input error is one JSON line (docs/output.md#errors).
pub fn report_as(e: &CliError, json: bool) -> ExitCode {
    match e {
        CliError::Input { error, .. } if json => {
            eprintln!("{}", error_json(error));
            ExitCode::from(1)
        }
        CliError::Kinded { kind, message } if json => {
            eprintln!("{}", located_nowhere_json(kind, message));
            ExitCode::from(1)
        }
        CliError::Message(m) if json => {
            eprintln!("{}", located_nowhere_json("bad_input", m));
            ExitCode::from(1)
        }
        CliError::Token(t) if json => {
            eprintln!("{}", t.json());
            ExitCode::from(1)
        }
        CliError::Noted { error, note } if json => {
            // The note goes into the message: `..."message":"expected X; NOTE"}}`.
            let message = format!("{}; {note}", error.message());
            eprintln!("{}", clrmap::json::ErrorObject::of(error, &message).line());
            ExitCode::from(1)
        }
        CliError::Status(m, code) if json => {
            // Diagnostics-port messages are `kind: what happened`.
            let (kind, message) = m.split_once(": ").unwrap_or(("error", m));
            eprintln!("{}", located_nowhere_json(kind, message));
            ExitCode::from(*code)
        }
        _ => report(e),
    }
}

/// Print the error on stderr and give the exit code. Messages may hold names from a file or a
/// process (a near method name, a module, a runtime's answer): they are escaped as [`Text`].
pub fn report(e: &CliError) -> ExitCode {
    match e {
        CliError::Kinded { kind, message } => {
            eprintln!("error: {kind}: {}", Text(message));
            ExitCode::from(1)
        }
        CliError::Input { error, json: true } => {
            eprintln!("{}", error_json(error));
            ExitCode::from(1)
        }
        CliError::Input { error, json: false } => {
            eprintln!("error: {}{}: {}", error.kind, error.location, Text(&error.message()));
            ExitCode::from(1)
        }
        CliError::Message(m) => {
            eprintln!("error: {}", Text(m));
            ExitCode::from(1)
        }
        CliError::Token(t) => {
            eprintln!("error: {}", t.text());
            ExitCode::from(1)
        }
        CliError::Noted { error, note } => {
            eprintln!("error: {}{}: {}\n{note}", error.kind, error.location, error.message());
            ExitCode::from(1)
        }
        CliError::Usage(m) => {
            eprintln!("usage error: {}", Text(m));
            ExitCode::from(2)
        }
        CliError::Status(m, code) => {
            eprintln!("error: {}", Text(m));
            ExitCode::from(*code)
        }
        CliError::Io(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        CliError::Io(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Map a regular file read-only (memory follows what is read, not the file's size), or fail
/// with exit 1 naming the path. Devices and FIFOs are refused before they are opened.
pub fn read_file(path: &std::path::Path) -> Result<crate::mapped::MappedFile, CliError> {
    crate::mapped::map_file(path).map_err(|e| CliError::Kinded { kind: "io", message: format!("cannot read {}: {e}", path.display()) })
}

/// Write one frame: llvm-symbolizer's layout (function, `file:line:column`, blank line) or a JSON
/// line.
pub fn write_frame(f: &clrmap::symbolizer::Frame<'_>, json: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    // The answer is built in a buffer kept between answers, then written at once: one call
    // through `out` an answer, not one a token, and no formatting machinery for the common case.
    LINE.with_borrow_mut(|line| {
        line.clear();
        if json {
            frame_json(line, f, &mut clrmap::json::string);
        } else {
            frame_text(line, f);
        }
        out.write_all(line)
    })
}

/// Append one answer as [`write_frame`] writes it to `line`, for a caller that writes many
/// answers in one buffer (`symbolize`'s stream of addresses): the same bytes, with each JSON
/// string taken from `strings` when it was escaped before.
pub fn push_frame(line: &mut Vec<u8>, f: &clrmap::symbolizer::Frame<'_>, json: bool, strings: &mut JsonStrings) {
    if json {
        frame_json(line, f, &mut |line: &mut Vec<u8>, s: &str| strings.push(line, s));
    } else {
        frame_text(line, f);
    }
}

/// JSON strings escaped before, by where their text is: the answers to a stream of addresses
/// name the same methods, files and modules again and again. An entry is used only when the
/// text is the same as the one it was made from (compared, which costs less than escaping it
/// again byte by byte), so a text that moved or changed is escaped afresh.
#[derive(Debug)]
pub struct JsonStrings {
    /// `SLOTS` entries: where the text was, the text, and its JSON string (quotes included).
    slots: Vec<(usize, String, Vec<u8>)>,
}

impl Default for JsonStrings {
    fn default() -> Self {
        JsonStrings { slots: vec![(0, String::new(), Vec::new()); JsonStrings::SLOTS] }
    }
}

impl JsonStrings {
    /// How many texts are kept (a power of two).
    const SLOTS: usize = 4096;
    /// Texts shorter than this are escaped each time (as fast as finding them).
    const SHORT: usize = 8;

    /// Append `s` as a JSON string, as [`clrmap::json::string`] writes it.
    pub fn push(&mut self, line: &mut Vec<u8>, s: &str) {
        if s.len() < Self::SHORT {
            return clrmap::json::string(line, s);
        }
        let at = s.as_ptr().addr();
        let slot = (at >> 4 ^ at >> 12) & (Self::SLOTS - 1);
        let Some((key, text, json)) = self.slots.get_mut(slot) else { return clrmap::json::string(line, s) };
        if *key == at && text.as_str() == s {
            return line.extend_from_slice(json);
        }
        let start = line.len();
        clrmap::json::string(line, s);
        *key = at;
        text.clear();
        text.push_str(s);
        json.clear();
        json.extend_from_slice(line.get(start..).unwrap_or(&[]));
    }
}

/// [`write_frame`]'s text layout: the method, then `file:line:column` (or `??:0:0`), then an
/// empty line.
fn frame_text(line: &mut Vec<u8>, f: &clrmap::symbolizer::Frame<'_>) {
    push_text(line, f.at.method.unwrap_or("??"));
    line.push(b'\n');
    match (f.at.file, f.at.line) {
        (Some(file), Some(n)) => {
            push_text(line, file);
            line.push(b':');
            push_u64(line, u64::from(n));
            line.push(b':');
            push_u64(line, u64::from(f.at.column.unwrap_or(0)));
            line.extend_from_slice(b"\n\n");
        }
        _ => line.extend_from_slice(b"??:0:0\n\n"),
    }
}

/// [`write_frame`]'s JSON line: the bytes serde_json writes for [`clrmap::symbolizer::Frame`]
/// (its fields in order, the location's flattened into it, `source_link` only when known),
/// written by hand (serde's flattened map and its writer cost most of the command's time).
fn frame_json(line: &mut Vec<u8>, f: &clrmap::symbolizer::Frame<'_>, string: &mut impl FnMut(&mut Vec<u8>, &str)) {
    let at = &f.at;
    line.extend_from_slice(b"{\"address\":");
    push_u64(line, f.address);
    json_field_str(line, b",\"module\":", at.module, string);
    json_field_u32(line, b",\"token\":", at.token);
    json_field_str(line, b",\"method\":", at.method, string);
    json_field_u32(line, b",\"il_offset\":", at.il_offset);
    json_field_str(line, b",\"file\":", at.file, string);
    json_field_u32(line, b",\"line\":", at.line);
    json_field_u32(line, b",\"column\":", at.column);
    json_field_u32(line, b",\"end_line\":", at.end_line);
    json_field_u32(line, b",\"end_column\":", at.end_column);
    if let Some(link) = f.source_link {
        line.extend_from_slice(b",\"source_link\":");
        clrmap::json::string(line, link);
    }
    line.extend_from_slice(b"}\n");
}

fn json_field_str(line: &mut Vec<u8>, key: &[u8], value: Option<&str>, string: &mut impl FnMut(&mut Vec<u8>, &str)) {
    line.extend_from_slice(key);
    match value {
        Some(v) => string(line, v),
        None => line.extend_from_slice(b"null"),
    }
}

fn json_field_u32(line: &mut Vec<u8>, key: &[u8], value: Option<u32>) {
    line.extend_from_slice(key);
    match value {
        Some(v) => push_u64(line, u64::from(v)),
        None => line.extend_from_slice(b"null"),
    }
}

/// `n` in decimal, as `Display` (and serde_json) write it.
fn push_u64(line: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut used = 0usize;
    for d in digits.iter_mut().rev() {
        *d = b'0'.saturating_add(u8::try_from(n % 10).unwrap_or(0));
        n /= 10;
        used = used.saturating_add(1);
        if n == 0 {
            break;
        }
    }
    line.extend_from_slice(digits.get(digits.len().saturating_sub(used)..).unwrap_or(&[]));
}

/// `s` as [`Text`] writes it, appended to `line`.
fn push_text(line: &mut Vec<u8>, s: &str) {
    // Printable ASCII with no backslash stands as it is ([`escape_str`]'s own first case).
    if s.bytes().all(|b| (0x20..0x7F).contains(&b) && b != b'\\') {
        line.extend_from_slice(s.as_bytes());
    } else {
        use std::io::Write as _;
        // Writing to a Vec cannot fail.
        let _ = write!(line, "{}", Text(s));
    }
}

thread_local! {
    /// An answer being written (see [`write_frame`]).
    static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Write one answer with the source lines around its line (`symbolize --context`): in JSON the
/// frame's object with `pre_context`, `context_line` and `post_context`; in text the answer's two
/// lines, then each source line as `  LINE| text` (the answer's own as `> LINE| text`), then the
/// empty line that ends the answer.
pub fn write_frame_with_context(f: &clrmap::symbolizer::Frame<'_>, context: Option<&clrmap::symbolizer::SourceContext>, json: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    if json {
        #[derive(serde::Serialize)]
        struct WithContext<'a, 's> {
            #[serde(flatten)]
            frame: &'a clrmap::symbolizer::Frame<'s>,
            #[serde(flatten)]
            context: Option<&'a clrmap::symbolizer::SourceContext>,
        }
        serde_json::to_writer(&mut *out, &WithContext { frame: f, context }).map_err(json_io)?;
        return out.write_all(b"\n");
    }
    writeln!(out, "{}", Text(f.at.method.unwrap_or("??")))?;
    match (f.at.file, f.at.line) {
        (Some(file), Some(line)) => writeln!(out, "{}:{line}:{}", Text(file), f.at.column.unwrap_or(0))?,
        _ => out.write_all(b"??:0:0\n")?,
    }
    if let (Some(c), Some(line)) = (context, f.at.line) {
        let first = line.saturating_sub(u32::try_from(c.pre_context.len()).unwrap_or(0));
        for (i, text) in c.pre_context.iter().enumerate() {
            writeln!(out, "  {}| {}", first.saturating_add(u32::try_from(i).unwrap_or(0)), Text(text))?;
        }
        writeln!(out, "> {line}| {}", Text(&c.context_line))?;
        for (i, text) in c.post_context.iter().enumerate() {
            writeln!(out, "  {}| {}", line.saturating_add(1).saturating_add(u32::try_from(i).unwrap_or(0)), Text(text))?;
        }
    }
    out.write_all(b"\n")
}

/// Write one answer with its inlined frames (`symbolize --inlines`, docs/output.md#inlined-frames): in text each
/// inlined frame, innermost first, as its method line and `file:line:column`, then the physical
/// frame at the call site and the empty line, as llvm-symbolizer prints inlined code; in JSON the
/// frame's object with `"inlined":[...]`, innermost first.
pub fn write_inlined(f: &clrmap::symbolizer::Frame<'_>, inlined: &[clrmap::symbolizer::InlinedFrame<'_>], json: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    if json {
        #[derive(serde::Serialize)]
        struct WithInlines<'a, 's> {
            #[serde(flatten)]
            frame: &'a clrmap::symbolizer::Frame<'s>,
            inlined: &'a [clrmap::symbolizer::InlinedFrame<'s>],
        }
        serde_json::to_writer(&mut *out, &WithInlines { frame: f, inlined }).map_err(json_io)?;
        return out.write_all(b"\n");
    }
    for i in inlined {
        writeln!(out, "{}", Text(i.at.method.unwrap_or("??")))?;
        match (i.at.file, i.at.line) {
            (Some(file), Some(line)) => writeln!(out, "{}:{line}:{}", Text(file), i.at.column.unwrap_or(0))?,
            _ => out.write_all(b"??:0:0\n")?,
        }
    }
    write_frame(f, false, out)
}

/// A `fmt::Write` over an `io::Write`, keeping the I/O error (a printer only sees `fmt::Error`).
pub(crate) struct IoFmt<'w> {
    out: &'w mut dyn std::io::Write,
    error: Option<std::io::Error>,
}

impl<'w> IoFmt<'w> {
    pub(crate) fn new(out: &'w mut dyn std::io::Write) -> Self {
        IoFmt { out, error: None }
    }

    /// The I/O error, if a write failed.
    pub(crate) fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }
}

impl core::fmt::Write for IoFmt<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        if self.error.is_some() {
            return Err(core::fmt::Error);
        }
        self.out.write_all(s.as_bytes()).map_err(|e| {
            self.error = Some(e);
            core::fmt::Error
        })
    }
}

/// Escapes for the inside of a JSON string, the library's one rule.
pub(crate) use clrmap::json::Escape as JsonEscape;

/// A string from a file or a process (a method, module or document name, a command line) as every
/// text output prints it, so that it cannot forge a line or drive the terminal:
/// - C0 controls (`\n`, ESC, ...), DEL, C1 controls (U+0080-U+009F) and the characters that reorder
///   or break text (U+200E, U+200F, U+2028, U+2029, U+202A-U+202E, U+2066-U+2069) are written
///   as `\xNN` for each of their UTF-8 bytes (`\x0a`, `\x1b`, `\xc2\x85`);
/// - a backslash is doubled only where it would otherwise read as the start of one of these
///   escapes: before `x`, before another backslash, and before an escaped character. Other
///   backslashes (`C:\src\Program.cs`) are written as they are.
///
/// Everything else is written unchanged, so an ordinary name prints exactly as it is. To read
/// the text back: `\\` is one backslash, `\xNN` one byte, and any other backslash itself.
pub struct Text<'a>(pub &'a str);

impl core::fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        escape_str(self.0, None, f)
    }
}

/// Bytes that may not be UTF-8 (a line of input) escaped as [`Text`] escapes a string, with
/// each byte that is not part of valid UTF-8 written as `\xNN`.
pub struct TextBytes<'a>(pub &'a [u8]);

impl core::fmt::Display for TextBytes<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for chunk in self.0.utf8_chunks() {
            // An invalid byte after the valid run is escaped: a backslash before it is doubled.
            let after = (!chunk.invalid().is_empty()).then_some('\u{0}');
            escape_str(chunk.valid(), after, f)?;
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// [`Text`]'s escape for a streaming printer: what is written through it comes out as `Text` of
/// everything written, whatever the pieces. Call [`TextEscape::finish`] at the end (a backslash
/// at the end of a piece waits for the next piece's first character).
pub(crate) struct TextEscape<'w> {
    out: &'w mut dyn core::fmt::Write,
    held: bool,
}

impl<'w> TextEscape<'w> {
    pub(crate) fn new(out: &'w mut dyn core::fmt::Write) -> Self {
        TextEscape { out, held: false }
    }

    /// Write what is held back (a final backslash).
    pub(crate) fn finish(&mut self) -> core::fmt::Result {
        if core::mem::take(&mut self.held) {
            self.out.write_str("\\")?;
        }
        Ok(())
    }
}

impl core::fmt::Write for TextEscape<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let Some(first) = s.chars().next() else { return Ok(()) };
        if core::mem::take(&mut self.held) {
            self.out.write_str(if doubled_before(first) { "\\\\" } else { "\\" })?;
        }
        match s.strip_suffix('\\') {
            Some(body) => {
                self.held = true;
                escape_str(body, Some('\\'), self.out)
            }
            None => escape_str(s, None, self.out),
        }
    }
}

/// [`TextEscape`] over an `io::Write`, for printers that write to one: each write is escaped as
/// the text it holds (bytes that are not UTF-8 as `\xNN`; the printers of this crate write whole
/// UTF-8 strings, as `IoFmt` and `write!` do). Call [`TextEscapeIo::finish`] at the end.
pub(crate) struct TextEscapeIo<'w> {
    out: &'w mut dyn std::io::Write,
    held: bool,
}

impl<'w> TextEscapeIo<'w> {
    pub(crate) fn new(out: &'w mut dyn std::io::Write) -> Self {
        TextEscapeIo { out, held: false }
    }

    /// Write what is held back (a final backslash).
    pub(crate) fn finish(&mut self) -> std::io::Result<()> {
        if core::mem::take(&mut self.held) {
            self.out.write_all(b"\\")?;
        }
        Ok(())
    }
}

impl std::io::Write for TextEscapeIo<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut io = IoFmt::new(&mut *self.out);
        let mut e = TextEscape { out: &mut io, held: self.held };
        let mut r = Ok(());
        for chunk in buf.utf8_chunks() {
            r = r.and_then(|()| core::fmt::Write::write_str(&mut e, chunk.valid()));
            if !chunk.invalid().is_empty() {
                // A held backslash before an escaped byte is doubled.
                if core::mem::take(&mut e.held) {
                    r = r.and_then(|()| e.out.write_str("\\\\"));
                }
                for b in chunk.invalid() {
                    r = r.and_then(|()| write!(e.out, "\\x{b:02x}"));
                }
            }
        }
        self.held = e.held;
        if let Some(error) = io.take_error() {
            return Err(error);
        }
        r.map_err(|_| std::io::Error::other("formatting failed"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Is `c` written as `\xNN` bytes by [`Text`]?
fn escaped(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Is a backslash before `next` doubled?
fn doubled_before(next: char) -> bool {
    matches!(next, 'x' | '\\') || escaped(next)
}

/// Escape `s`, which `after` follows (`None`: nothing does).
fn escape_str(s: &str, after: Option<char>, f: &mut dyn core::fmt::Write) -> core::fmt::Result {
    // The common case, printable ASCII with no backslash, needs no escape and no char walk: one
    // byte scan and one write (the walk below made `symbolize`'s text output 60% slower).
    if s.bytes().all(|b| (0x20..0x7F).contains(&b) && b != b'\\') {
        return f.write_str(s);
    }
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            let next = chars.peek().map(|&(_, n)| n).or(after);
            if next.is_some_and(doubled_before) {
                f.write_str(s.get(start..i).unwrap_or(""))?;
                f.write_str("\\")?;
                start = i;
            }
            continue;
        }
        if !escaped(c) {
            continue;
        }
        f.write_str(s.get(start..i).unwrap_or(""))?;
        let mut buf = [0u8; 4];
        for b in c.encode_utf8(&mut buf).bytes() {
            write!(f, "\\x{b:02x}")?;
        }
        start = i.saturating_add(c.len_utf8());
    }
    f.write_str(s.get(start..).unwrap_or(""))
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// The reading-back rule of [`Text`]'s documentation, written independently of the escaper.
    fn unescape(s: &str) -> Vec<u8> {
        let b = s.as_bytes();
        let mut out = vec![];
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\' && b.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
            } else if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && b.len() >= i + 4 {
                out.push(u8::from_str_radix(&s[i + 2..i + 4], 16).unwrap());
                i += 4;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        out
    }

    #[test]
    fn text_escapes_controls_and_reads_back() {
        assert_eq!(Text("Frames.Nested::Inner").to_string(), "Frames.Nested::Inner");
        assert_eq!(Text(r"C:\src\new\Program.cs").to_string(), r"C:\src\new\Program.cs");
        assert_eq!(Text("a.cs\n??:0:0").to_string(), r"a.cs\x0a??:0:0");
        assert_eq!(Text("\u{1b}[31mred").to_string(), r"\x1b[31mred");
        assert_eq!(Text("a\u{85}b\u{202e}c\u{7f}").to_string(), r"a\xc2\x85b\xe2\x80\xaec\x7f");
        assert_eq!(Text(r"C:\xunit\\share").to_string(), r"C:\\xunit\\\share");
        assert_eq!(Text("\\\n").to_string(), r"\\\x0a");
        assert_eq!(TextBytes(b"0x1\xff\\\xfe\\").to_string(), r"0x1\xff\\\xfe\");
        for s in ["", "\\", "\\\\", "\\x41", "\\\\x41", "\\\u{1b}", "é\u{9b}\\x", "tab\there\\", "\\\\\\n"] {
            let t = Text(s).to_string();
            assert!(!t.chars().any(escaped), "{t:?}");
            assert_eq!(unescape(&t), s.as_bytes(), "{s:?} -> {t:?}");
        }
        for b in [&b"\xff\\"[..], b"\\\xff", b"\\\\\xc3", b"a\\x\xe2\x80"] {
            assert_eq!(unescape(&TextBytes(b).to_string()), b, "{b:?}");
            let mut bytes = Vec::new();
            let mut e = TextEscapeIo::new(&mut bytes);
            std::io::Write::write_all(&mut e, b).unwrap();
            e.finish().unwrap();
            assert_eq!(String::from_utf8(bytes).unwrap(), TextBytes(b).to_string());
        }
        // Streamed in pieces, split anywhere between characters: the same as the whole.
        for s in ["a\\\\x\\", "\\", "\\\u{1b}\\x\\\\n\n", "C:\\src\\x.cs", "é\\\u{85}\\"] {
            let cuts: Vec<usize> = s.char_indices().map(|(i, _)| i).chain([s.len()]).collect();
            for &a in &cuts {
                for &b in cuts.iter().filter(|&&b| b >= a) {
                    let mut out = String::new();
                    let mut e = TextEscape::new(&mut out);
                    for piece in [&s[..a], &s[a..b], &s[b..]] {
                        core::fmt::Write::write_str(&mut e, piece).unwrap();
                    }
                    e.finish().unwrap();
                    assert_eq!(out, Text(s).to_string(), "{s:?} cut at {a}, {b}");
                    let mut bytes = Vec::new();
                    let mut e = TextEscapeIo::new(&mut bytes);
                    for piece in [&s[..a], &s[a..b], &s[b..]] {
                        std::io::Write::write_all(&mut e, piece.as_bytes()).unwrap();
                    }
                    e.finish().unwrap();
                    assert_eq!(String::from_utf8(bytes).unwrap(), Text(s).to_string(), "{s:?} cut at {a}, {b}");
                }
            }
        }
    }

    /// Frames that cover every field's two states and the escapes of both layouts.
    fn frames() -> Vec<clrmap::symbolizer::Frame<'static>> {
        use clrmap::symbolizer::{Frame, SourceLocation};
        let full = SourceLocation {
            module: Some("Frames.dll"),
            token: Some(0x0600_000A),
            method: Some("Ns.Type`1::Method"),
            il_offset: Some(23),
            file: Some("/_/src/Frames.cs"),
            line: Some(128),
            column: Some(13),
            end_line: Some(129),
            end_column: Some(u32::MAX),
        };
        let odd = SourceLocation { method: Some("M\"\\x\u{1}\u{85}\n\u{202e}é"), file: Some("C:\\src\\A.cs"), module: Some("a\tb"), ..full };
        vec![
            Frame { address: 0, ..Frame::default() },
            Frame { address: u64::MAX, at: full, source_link: Some("https://x/\"y\""), code_start: Some(1), native_offset: Some(2), function_id: Some(3), ..Frame::default() },
            Frame { address: 10, at: full, ..Frame::default() },
            Frame { address: 99, at: odd, ..Frame::default() },
            Frame { address: 7, at: SourceLocation { file: None, ..full }, ..Frame::default() },
            Frame { address: 8, at: SourceLocation { line: None, column: None, ..full }, ..Frame::default() },
        ]
    }

    #[test]
    fn frames_pushed_with_kept_strings_are_write_frames_bytes() {
        use clrmap::symbolizer::{Frame, SourceLocation};
        let mut strings = JsonStrings::default();
        // Each frame twice (the second time from the kept strings), in both layouts, and texts
        // long enough to be kept, with characters JSON escapes, and short ones that are not kept.
        let long = SourceLocation {
            method: Some("Ns.Outer+Inner`2::Method(System.String, \"quoted\", \\back\u{1}, é)"),
            file: Some("/home/user/src/a rather long/path/File.cs"),
            ..SourceLocation::default()
        };
        let mut all = frames();
        all.push(Frame { address: 5, at: long, ..Frame::default() });
        for f in all.iter().chain(all.iter()) {
            for json in [true, false] {
                let mut pushed = b"before".to_vec();
                push_frame(&mut pushed, f, json, &mut strings);
                let mut written = b"before".to_vec();
                write_frame(f, json, &mut written).unwrap();
                assert_eq!(String::from_utf8_lossy(&pushed), String::from_utf8_lossy(&written));
            }
        }
        // Another text at the same place (a buffer reused) is not taken for the one kept.
        let mut text = String::with_capacity(64);
        for content in ["First.Method(System.Int32, System.Int64)", "Other.Method(System.Int32, \"System\".Int)"] {
            text.clear();
            text.push_str(content);
            let f = Frame { address: 1, at: SourceLocation { method: Some(text.as_str()), ..SourceLocation::default() }, ..Frame::default() };
            let mut pushed = Vec::new();
            push_frame(&mut pushed, &f, true, &mut strings);
            let mut serde = serde_json::to_vec(&f).unwrap();
            serde.push(b'\n');
            assert_eq!(String::from_utf8_lossy(&pushed), String::from_utf8_lossy(&serde));
        }
    }

    #[test]
    fn a_frame_is_written_as_serde_and_the_formatter_write_it() {
        use std::io::Write as _;
        for f in frames() {
            let mut json = Vec::new();
            write_frame(&f, true, &mut json).unwrap();
            let mut serde = serde_json::to_vec(&f).unwrap();
            serde.push(b'\n');
            assert_eq!(String::from_utf8_lossy(&json), String::from_utf8_lossy(&serde));
            let mut text = Vec::new();
            write_frame(&f, false, &mut text).unwrap();
            let mut by_fmt = Vec::new();
            writeln!(by_fmt, "{}", Text(f.at.method.unwrap_or("??"))).unwrap();
            match (f.at.file, f.at.line) {
                (Some(file), Some(line)) => writeln!(by_fmt, "{}:{line}:{}\n", Text(file), f.at.column.unwrap_or(0)).unwrap(),
                _ => by_fmt.extend_from_slice(b"??:0:0\n\n"),
            }
            assert_eq!(String::from_utf8_lossy(&text), String::from_utf8_lossy(&by_fmt));
        }
    }
}

//! Errors and how the CLI reports them (contract §3): text or JSON on stderr, and the exit code.

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
    #[derive(serde::Serialize)]
    struct Inner {
        kind: &'static str,
        offset: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        rva: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        address: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        inflated_offset: Option<u64>,
        message: String,
    }
    #[derive(serde::Serialize)]
    struct Outer {
        error: Inner,
    }
    let (rva, address) = match e.location {
        clrmap::read::Location::Rva(r) => (Some(r), None),
        clrmap::read::Location::Address(a) => (None, Some(a)),
        _ => (None, None),
    };
    let inflated_offset = match e.location {
        clrmap::read::Location::Inflated(o) => Some(o),
        _ => None,
    };
    let v = Outer { error: Inner { kind: e.kind.as_str(), offset: e.offset(), rva, address, inflated_offset, message: e.message() } };
    serde_json::to_string(&v).unwrap_or_default()
}

/// A JSON error line for an error with no location: `{"error":{"kind":...,"offset":null,"message":...}}`.
fn located_nowhere_json(kind: &str, message: &str) -> String {
    #[derive(serde::Serialize)]
    struct Inner<'a> {
        kind: &'a str,
        offset: Option<u64>,
        message: &'a str,
    }
    #[derive(serde::Serialize)]
    struct Outer<'a> {
        error: Inner<'a>,
    }
    serde_json::to_string(&Outer { error: Inner { kind, offset: None, message } }).unwrap_or_default()
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
/// `--json`), every input error is one JSON line (contract §3).
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
        CliError::Status(m, code) if json => {
            // Diagnostics-port messages are `kind: what happened`.
            let (kind, message) = m.split_once(": ").unwrap_or(("error", m));
            eprintln!("{}", located_nowhere_json(kind, message));
            ExitCode::from(*code)
        }
        _ => report(e),
    }
}

/// Print the error on stderr and give the exit code.
pub fn report(e: &CliError) -> ExitCode {
    match e {
        CliError::Kinded { kind, message } => {
            eprintln!("error: {kind}: {message}");
            ExitCode::from(1)
        }
        CliError::Input { error, json: true } => {
            eprintln!("{}", error_json(error));
            ExitCode::from(1)
        }
        CliError::Input { error, json: false } => {
            eprintln!("error: {}{}: {}", error.kind, error.location, error.message());
            ExitCode::from(1)
        }
        CliError::Message(m) => {
            eprintln!("error: {m}");
            ExitCode::from(1)
        }
        CliError::Usage(m) => {
            eprintln!("usage error: {m}");
            ExitCode::from(2)
        }
        CliError::Status(m, code) => {
            eprintln!("error: {m}");
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
pub fn read_file(path: &std::path::Path) -> Result<clrmap_capi::MappedFile, CliError> {
    clrmap_capi::map_file(path).map_err(|e| CliError::Kinded { kind: "io", message: format!("cannot read {}: {e}", path.display()) })
}

/// Write one frame: llvm-symbolizer's layout (function, `file:line:column`, blank line) or a JSON
/// line.
pub fn write_frame(f: &clrmap::symbolizer::Frame<'_>, json: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    if json {
        serde_json::to_writer(&mut *out, f).map_err(json_io)?;
        return out.write_all(b"\n");
    }
    writeln!(out, "{}", f.method.unwrap_or("??"))?;
    match (f.file, f.line) {
        (Some(file), Some(line)) => writeln!(out, "{file}:{line}:{}\n", f.column.unwrap_or(0)),
        _ => out.write_all(b"??:0:0\n\n"),
    }
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

/// Escapes what goes through it as the inside of a JSON string, byte for byte as serde_json does
/// (`\"`, `\\`, `\b \f \n \r \t`, other controls as `\u00xx`; nothing else).
pub(crate) struct JsonEscape<'w>(pub(crate) &'w mut dyn core::fmt::Write);

impl core::fmt::Write for JsonEscape<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let mut start = 0;
        for (i, c) in s.char_indices() {
            let esc: Option<&str> = match c {
                '"' => Some("\\\""),
                '\\' => Some("\\\\"),
                '\u{8}' => Some("\\b"),
                '\u{c}' => Some("\\f"),
                '\n' => Some("\\n"),
                '\r' => Some("\\r"),
                '\t' => Some("\\t"),
                c if (c as u32) < 0x20 => None,
                _ => continue,
            };
            self.0.write_str(s.get(start..i).unwrap_or(""))?;
            match esc {
                Some(e) => self.0.write_str(e)?,
                None => write!(self.0, "\\u{:04x}", c as u32)?,
            }
            start = i.saturating_add(c.len_utf8());
        }
        self.0.write_str(s.get(start..).unwrap_or(""))
    }
}

//! `clrmap meta`: ECMA-335 metadata of .NET assemblies.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use core::fmt::Write as _;

use clrmap::metadata::{method_spec_header, table, Metadata, SpecMethod, Token};
use clrmap::read::Reader;
use clrmap::signature::{check_names, stream_one, TypeNames};
use clrmap::ErrorKind;

use crate::output::IoFmt;
use crate::output::{read_file, CliError};

/// `clrmap meta ...`
#[derive(Debug, Subcommand)]
pub enum MetaCommand {
    /// Print every TypeSpec row as `0x1B0000NN<TAB>type` and every MethodSpec row as
    /// `0x2B0000NN<TAB>Owner::Method<A1,A2,...>(P1,P2,...)`: the method it instantiates, the
    /// arguments, and the method's parameter types. In token order, with real names. A token
    /// that names no row prints raw (`0x0A00FFFF`). A row that does not decode, or names a row
    /// that cannot be named, prints `0x...<TAB>!error <kind>`: the signature's own error,
    /// `too_deep` for a TypeSpec that contains itself or nests past 64, `bad_metadata` for a
    /// method that no type owns or a name that cannot be read.
    ///
    /// Example: `clrmap meta specs tests/fixtures/frames/debug-portable/Frames.dll`
    #[command(verbatim_doc_comment)]
    Specs {
        /// The assembly (PE32 or PE32+, ReadyToRun images included).
        assembly: PathBuf,
        /// One JSON object per line: `{"token":N,"text":"..."}`, or `{"token":N,"error":"kind"}`.
        /// A MethodSpec's `text` is `<A1,A2,...>`, and it adds `method` (the MethodDef or MemberRef
        /// token), `name` (`Owner::Method`) and `full_name` (the text line's form).
        #[arg(long)]
        json: bool,
    },
}

/// One TypeSpec blob: validated whole, its names included (trailing bytes are
/// `item_length_mismatch`), then streamed. The text equals `spec_lines`'s.
fn type_spec(blob: Reader<'_>, names: &dyn TypeNames, out: &mut IoFmt<'_>) -> clrmap::Result<core::fmt::Result> {
    let mut check = blob;
    check_names(&mut check, names)?;
    if !check.is_empty() {
        return Err(check.error(ErrorKind::ItemLengthMismatch, "no bytes after the type"));
    }
    stream_one(&mut blob.clone(), names, out)
}

/// One MethodSpec blob (II.23.2.15: `0x0A GenArgCount Type+`) as `<A1,A2,...>` between the
/// method's name and its parameters (`method`, or nothing): the name, then the blob (validated
/// whole, its names included), then the parameters must be sound before anything is written, so
/// nothing is written for a line that fails, and the first fault in the line's order is reported.
fn method_spec(blob: Reader<'_>, names: &dyn TypeNames, method: Option<&SpecMethod>, out: &mut IoFmt<'_>) -> clrmap::Result<core::fmt::Result> {
    let name = method.map(|m| m.name.as_deref().map_err(|e| *e)).transpose()?;
    let mut r = blob;
    let count = method_spec_header(&mut r)?;
    let args = r;
    for _ in 0..count {
        check_names(&mut r, names)?;
    }
    if !r.is_empty() {
        return Err(r.error(ErrorKind::ItemLengthMismatch, "no bytes after the arguments"));
    }
    let (before, after) = match (name, method) {
        (Some(name), Some(m)) => (name, m.texts()?.1),
        _ => ("", ""),
    };
    let mut r = args;
    let mut w = || -> clrmap::Result<core::fmt::Result> {
        if let Err(e) = out.write_str(before).and_then(|()| out.write_char('<')) {
            return Ok(Err(e));
        }
        for i in 0..count {
            if i > 0 {
                if let Err(e) = out.write_char(',') {
                    return Ok(Err(e));
                }
            }
            if let Err(e) = stream_one(&mut r, names, out)? {
                return Ok(Err(e));
            }
        }
        Ok(out.write_char('>').and_then(|()| out.write_str(after)))
    };
    w()
}

/// One JSON line of `meta specs --json`.
#[derive(serde::Serialize)]
struct SpecJson<'a> {
    token: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
    /// A MethodSpec's method: its token, `Owner::Name`, and the text line's full form.
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    full_name: Option<String>,
}

/// Write row `token`'s rendering (what follows the tab) into `out`, and say what it was. A
/// MethodSpec's text is `<A1,...>` alone unless `with_method`, when the method's name goes before
/// it and its parameters after.
fn spec_text(md: &Metadata<'_>, token: u32, with_method: bool, out: &mut dyn Write) -> Result<Rendered, CliError> {
    let rid = Token::from(token).rid();
    let mut w = IoFmt::new(out);
    let (r, method) = if Token::from(token).is(table::TYPE_SPEC) {
        (md.type_spec(rid).and_then(|blob| type_spec(blob, md, &mut w)), None)
    } else {
        match md.method_spec(rid) {
            Ok(row) => {
                let m = SpecMethod::new(md, row.method);
                let r = if with_method {
                    method_spec(row.instantiation, md, Some(&m), &mut w)
                } else {
                    // JSON: `text` is the arguments alone, but the line fails as the text line does.
                    m.name.as_ref().map_err(|e| *e).and_then(|_| method_spec(row.instantiation, md, None, &mut w)).and_then(|r| m.params.as_ref().map(|_| r).map_err(|e| *e))
                };
                (r, Some(m))
            }
            Err(e) => (Err(e), None),
        }
    };
    if let Some(e) = w.take_error() {
        return Err(CliError::Io(e));
    }
    match r {
        Ok(Ok(())) => Ok(Rendered { error: None, method }),
        Ok(Err(_)) => Err(CliError::Io(std::io::Error::other("formatting failed"))),
        // Nothing was written: the blob is validated before it is printed.
        Err(e) => Ok(Rendered { error: Some(e.kind), method }),
    }
}

/// What `spec_text` wrote: nothing, when the row failed with `error`; and a MethodSpec's method.
struct Rendered {
    error: Option<ErrorKind>,
    method: Option<SpecMethod>,
}

/// Every TypeSpec, then every MethodSpec, in token order.
fn spec_tokens(md: &Metadata<'_>) -> impl Iterator<Item = u32> {
    let (specs, methods) = (md.tables().rows(table::TYPE_SPEC), md.tables().rows(table::METHOD_SPEC));
    let token = |table: u8| move |rid: u32| Token::new(table, rid).raw();
    (1..=specs).map(token(table::TYPE_SPEC)).chain((1..=methods).map(token(table::METHOD_SPEC)))
}

/// `specs` as JSON lines. Each line is rendered whole before it is written; only one line is
/// held at a time.
fn specs_json(bytes: &[u8], out: &mut dyn Write) -> Result<(), CliError> {
    let md = Metadata::parse(bytes).map_err(CliError::input)?;
    let mut text = Vec::new();
    for token in spec_tokens(&md) {
        text.clear();
        let rendered = spec_text(&md, token, false, &mut text)?;
        let text = String::from_utf8_lossy(&text);
        let method = rendered.method.as_ref();
        let spec = SpecJson {
            token,
            text: rendered.error.is_none().then_some(&*text),
            error: rendered.error.map(ErrorKind::as_str),
            method: method.map(|m| m.token),
            name: method.and_then(|m| m.name.as_deref().ok()),
            full_name: method.filter(|_| rendered.error.is_none()).and_then(|m| m.texts().ok()).map(|(name, params)| format!("{name}{text}{params}")),
        };
        serde_json::to_writer(&mut *out, &spec).map_err(crate::output::json_io)?;
        writeln!(out)?;
    }
    Ok(())
}

/// `specs` as text, streaming: the same lines as `spec_lines`'s `full_text`, each written as it
/// is rendered.
fn specs_text(bytes: &[u8], out: &mut dyn Write) -> Result<(), CliError> {
    let md = Metadata::parse(bytes).map_err(CliError::input)?;
    for token in spec_tokens(&md) {
        write!(out, "0x{token:08X}\t")?;
        // Names from the file are escaped as all text output escapes them (output::Text).
        let mut escaped = crate::output::TextEscapeIo::new(out);
        let rendered = spec_text(&md, token, true, &mut escaped)?;
        escaped.finish()?;
        match rendered.error {
            None => writeln!(out)?,
            Some(kind) => writeln!(out, "!error {kind}")?,
        }
    }
    Ok(())
}

/// Run a `meta` command.
pub fn run(cmd: MetaCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        MetaCommand::Specs { assembly, json } => {
            let bytes = read_file(&assembly)?;
            if json {
                specs_json(&bytes, out)
            } else {
                specs_text(&bytes, out)
            }
        }
    }
}

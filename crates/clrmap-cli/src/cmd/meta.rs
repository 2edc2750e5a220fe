//! `clrmap meta`: ECMA-335 metadata of .NET assemblies.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use core::fmt::Write as _;

use clrmap::metadata::{table, Metadata};
use clrmap::read::Reader;
use clrmap::signature::{skip_type, stream_one, TypeNames};
use clrmap::ErrorKind;

use crate::cmd::dict::IoFmt;
use crate::output::{read_file, CliError};

/// `clrmap meta ...`
#[derive(Debug, Subcommand)]
pub enum MetaCommand {
    /// Print every TypeSpec row as `0x1B0000NN<TAB>type` and every MethodSpec row as
    /// `0x2B0000NN<TAB><A1,A2,...>`, in token order, with real names. A blob that does not
    /// decode prints `0x...<TAB>!error <kind>`.
    ///
    /// Example: `clrmap meta specs .dotnet/3.1/dotnetcore2/bin/shared/Microsoft.NETCore.App/3.1.23/System.Linq.dll`
    #[command(verbatim_doc_comment)]
    Specs {
        /// The assembly (PE32 or PE32+, ReadyToRun images included).
        assembly: PathBuf,
        /// One JSON object per line: `{"token":N,"text":"..."}`, or `{"token":N,"error":"kind"}`.
        #[arg(long)]
        json: bool,
    },
}

/// One TypeSpec blob: validated whole (trailing bytes are `item_length_mismatch`), then
/// streamed. The text equals `spec_lines`'s.
fn type_spec(blob: Reader<'_>, names: &dyn TypeNames, out: &mut IoFmt<'_>) -> clrmap::Result<core::fmt::Result> {
    let mut check = blob;
    skip_type(&mut check)?;
    if !check.is_empty() {
        return Err(check.error(ErrorKind::ItemLengthMismatch, "no bytes after the type"));
    }
    stream_one(&mut blob.clone(), names, out)
}

/// One MethodSpec blob (II.23.2.15: `0x0A GenArgCount Type+`) as `<A1,A2,...>`: validated whole,
/// then streamed.
fn method_spec(blob: Reader<'_>, names: &dyn TypeNames, out: &mut IoFmt<'_>) -> clrmap::Result<core::fmt::Result> {
    let mut r = blob;
    let at = r.offset();
    if r.u8("the MethodSpec header 0x0A")? != 0x0A {
        return Err(clrmap::Error::new(ErrorKind::BadCallingConvention, at, "the MethodSpec header 0x0A"));
    }
    let count_at = r.offset();
    let count = r.compressed_u32("a generic argument count")?;
    if count == 0 {
        return Err(clrmap::Error::new(ErrorKind::EmptyInstantiation, count_at, "at least one generic argument"));
    }
    let args = r;
    for _ in 0..count {
        skip_type(&mut r)?;
    }
    if !r.is_empty() {
        return Err(r.error(ErrorKind::ItemLengthMismatch, "no bytes after the arguments"));
    }
    let mut r = args;
    let mut w = || -> clrmap::Result<core::fmt::Result> {
        out.write_char('<').ok();
        for i in 0..count {
            if i > 0 {
                out.write_char(',').ok();
            }
            if let Err(e) = stream_one(&mut r, names, out)? {
                return Ok(Err(e));
            }
        }
        Ok(out.write_char('>'))
    };
    w()
}

/// Print the spec lines of `bytes`, streaming: the same lines as `spec_lines`, each written as
/// it is rendered.
/// One JSON line of `meta specs --json`.
#[derive(serde::Serialize)]
struct SpecJson<'a> {
    token: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
}

/// `specs`, as text or JSON lines. A JSON line is rendered whole before it is written: names are
/// bounded (64 KiB each), so a line is too.
fn specs_as(bytes: &[u8], json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    if json {
        let mut text = Vec::new();
        specs_text(bytes, &mut text)?;
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let line = String::from_utf8_lossy(line);
            let (token, rest) = line.split_once('\t').unwrap_or((&line, ""));
            let token = u32::from_str_radix(token.trim_start_matches("0x"), 16).unwrap_or(0);
            let spec = match rest.strip_prefix("!error ") {
                Some(kind) => SpecJson { token, text: None, error: Some(error_kind(kind)) },
                None => SpecJson { token, text: Some(rest), error: None },
            };
            serde_json::to_writer(&mut *out, &spec).map_err(std::io::Error::other)?;
            writeln!(out)?;
        }
        return Ok(());
    }
    specs_text(bytes, out)
}

/// The static id of an error kind printed by `specs_text`.
fn error_kind(text: &str) -> &'static str {
    [
        ErrorKind::BadCompressedInteger, ErrorKind::ItemLengthMismatch, ErrorKind::EmptyInstantiation, ErrorKind::BadElementType,
        ErrorKind::BadToken, ErrorKind::BadArrayShape, ErrorKind::BadCallingConvention, ErrorKind::TooDeep, ErrorKind::Truncated,
        ErrorKind::BadMetadata, ErrorKind::NotFound,
    ]
    .into_iter()
    .map(ErrorKind::as_str)
    .find(|k| *k == text)
    .unwrap_or("bad_metadata")
}

fn specs_text(bytes: &[u8], out: &mut dyn Write) -> Result<(), CliError> {
    let md = Metadata::parse(bytes).map_err(CliError::input)?;
    let (specs, methods) = (md.tables().rows(table::TYPE_SPEC), md.tables().rows(table::METHOD_SPEC));
    let tokens = (1..=specs).map(|rid| 0x1B00_0000 | rid).chain((1..=methods).map(|rid| 0x2B00_0000 | rid));
    for token in tokens {
        let rid = token & 0x00FF_FFFF;
        write!(out, "0x{token:08X}\t")?;
        let mut w = IoFmt::new(out);
        let r = if token >> 24 == u32::from(table::TYPE_SPEC) {
            md.type_spec(rid).and_then(|blob| type_spec(blob, &md, &mut w))
        } else {
            md.tables()
                .row(table::METHOD_SPEC, rid)
                .and_then(|row| md.blobs().get(row.get(1)?))
                .and_then(|blob| method_spec(blob, &md, &mut w))
        };
        if let Some(e) = w.take_error() {
            return Err(CliError::Io(e));
        }
        match r {
            Ok(Ok(())) => writeln!(out)?,
            Ok(Err(_)) => return Err(CliError::Io(std::io::Error::other("formatting failed"))),
            // Nothing was written: the blob is validated before it is printed.
            Err(e) => writeln!(out, "!error {}", e.kind)?,
        }
    }
    Ok(())
}

/// Run a `meta` command.
pub fn run(cmd: MetaCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        MetaCommand::Specs { assembly, json } => specs_as(&read_file(&assembly)?, json, out),
    }
}

//! `clrmap sig`: ECMA-335 type signatures.

use std::io::Write;

use clap::Subcommand;
use clrmap::read::Reader;
use clrmap::signature::{check_names, decode_type, stream_one, HexTokens, TreeProvider, TypeNames};
use clrmap::ErrorKind;

use crate::output::CliError;
use crate::output::{IoFmt, JsonEscape, TextEscape};

/// `clrmap sig ...`
#[derive(Debug, Subcommand)]
pub enum SigCommand {
    /// Decode one type signature given as hex bytes and print it in ILAsm notation.
    ///
    /// The rules are strict ECMA-335 (II.23.2): a bad byte exits 1 with the
    /// error's kind and offset.
    ///
    /// Example: `clrmap sig decode 15 12 15 01 08` prints `class 0x01000005<int32>`.
    #[command(verbatim_doc_comment)]
    Decode {
        /// The signature bytes in hex: separate bytes (`15 12 15 01 08`) or one string (`1512150108`).
        #[arg(required = true)]
        hex: Vec<String>,
        /// Print a JSON object: the text and the structural tree.
        #[arg(long)]
        json: bool,
        /// Name tokens from this assembly's metadata (`class System.String`) instead of printing 0x... tokens.
        #[arg(long, value_name = "ASSEMBLY")]
        metadata: Option<std::path::PathBuf>,
    },
}

/// Parse hex bytes from the command line: pairs of hex digits, spaces and an `0x` prefix allowed.
pub fn parse_hex(words: &[String]) -> Result<Vec<u8>, CliError> {
    let mut digits = String::new();
    for w in words {
        for part in w.split_whitespace() {
            digits.push_str(part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")).unwrap_or(part));
        }
    }
    if digits.len() % 2 != 0 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CliError::Usage(format!("not hex bytes: {}", words.join(" "))));
    }
    let mut out = Vec::with_capacity(digits.len() / 2);
    let mut chars = digits.as_bytes().chunks_exact(2);
    for pair in &mut chars {
        let text = std::str::from_utf8(pair).unwrap_or("");
        out.push(u8::from_str_radix(text, 16).map_err(|_| CliError::Usage(format!("not a hex byte: {text}")))?);
    }
    Ok(out)
}

type Printer<'a> = dyn FnMut(&mut dyn core::fmt::Write) -> clrmap::Result<core::fmt::Result> + 'a;

/// Run a streaming printer into `out`, mapping its errors.
fn print(f: &mut Printer<'_>, out: &mut dyn Write, json: bool) -> Result<(), CliError> {
    let mut w = IoFmt::new(out);
    let r = f(&mut w);
    if let Some(e) = w.take_error() {
        return Err(CliError::Io(e));
    }
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(CliError::Io(std::io::Error::other("formatting failed"))),
        Err(e) => Err(CliError::input_json(e, json)),
    }
}

/// Run a `sig` command.
pub fn run(cmd: SigCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        SigCommand::Decode { hex, json, metadata } => {
            let bytes = parse_hex(&hex)?;
            let mut r = Reader::new(&bytes, 0);
            let tree = decode_type(&mut r, &mut TreeProvider).map_err(|e| CliError::input_json(e, json))?;
            if !r.is_empty() {
                let e = r.error(ErrorKind::ItemLengthMismatch, "no bytes after the type");
                return Err(CliError::input_json(e, json));
            }
            // The bytes are valid (decoded above): print them again, streaming, with the names.
            let md_bytes = match &metadata {
                None => None,
                Some(path) => Some(crate::output::read_file(path)?),
            };
            let md = match &md_bytes {
                None => None,
                Some(b) => Some(clrmap::metadata::Metadata::parse(b).map_err(CliError::input)?),
            };
            let names: &dyn TypeNames = match &md {
                None => &HexTokens,
                Some(md) => md,
            };
            // A row that is there but cannot be named fails before anything is printed.
            check_names(&mut Reader::new(&bytes, 0), names).map_err(|e| CliError::input_json(e, json))?;
            if json {
                // {"text","type"}: the bytes serde_json gives the whole object.
                out.write_all(b"{\"text\":\"")?;
                print(&mut |w| stream_one(&mut Reader::new(&bytes, 0), names, &mut JsonEscape(w)), out, json)?;
                out.write_all(b"\",\"type\":")?;
                serde_json::to_writer(&mut *out, &tree).map_err(crate::output::json_io)?;
                out.write_all(b"}\n")?;
            } else {
                // Names from a file are escaped as all text output escapes them (output::Text).
                print(
                    &mut |w| {
                        let mut w = TextEscape::new(w);
                        stream_one(&mut Reader::new(&bytes, 0), names, &mut w).map(|r| r.and_then(|()| w.finish()))
                    },
                    out,
                    json,
                )?;
                out.write_all(b"\n")?;
            }
            Ok(())
        }
    }
}

//! `clrmap il`: IL-to-native maps (GetILToNativeMapping) from ReadyToRun images.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use clrmap::ilmap::{native_to_il, CodeBody, MapStore, Policy, Resolved};
use clrmap::metadata::Metadata;
use clrmap::r2r::ReadyToRunImage;
use clrmap::{Error, ErrorKind};

use crate::cmd::dict::parse_u32;
use crate::output::{read_file, CliError};

/// `clrmap il ...`
#[derive(Debug, Subcommand)]
pub enum IlCommand {
    /// Print every code body's map exactly as GetILToNativeMapping returns it: PROLOG first, IL
    /// ascending, EPILOG, NO_MAPPING; ranges [start, end) in native offsets from the code start.
    ///
    /// Example: `clrmap il dump $FW/System.Linq.dll --method 'System.Linq.Enumerable::Count' --json`
    #[command(verbatim_doc_comment)]
    Dump {
        /// A ReadyToRun image, an EventPipe trace (.nettrace), or a capture written by `clrmap profile`.
        source: PathBuf,
        /// Only this method: a MethodDef token (0x06000123) or a name (`Ns.Type::Method`).
        #[arg(long)]
        method: Option<String>,
        /// JSON as the output contract §4 gives it.
        #[arg(long)]
        json: bool,
    },
    /// Which method, and which IL offset, is the code at this address? For an image the address is
    /// an RVA; for a trace or a capture it is an absolute address in the traced process.
    ///
    /// Example: `clrmap il at $FW/System.Private.CoreLib.dll 0x39349C --return-address`
    #[command(verbatim_doc_comment)]
    At {
        /// A ReadyToRun image, a .nettrace, or a capture.
        source: PathBuf,
        /// The address (hex with 0x, or decimal).
        #[arg(value_parser = parse_u64)]
        rva: u64,
        /// The address is a return address (a non-leaf frame): look up the call before it.
        #[arg(long)]
        return_address: bool,
    },
    /// Print a method's variable locations (R2R debug info, majors below 16).
    ///
    /// Example: `clrmap il vars $FW/System.Private.CoreLib.dll --method 0x06000099`
    #[command(verbatim_doc_comment)]
    Vars {
        /// A ReadyToRun image.
        source: PathBuf,
        /// A MethodDef token or a name.
        #[arg(long)]
        method: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// The bodies of a source, found by sniffing its first bytes: ReadyToRun images (`MZ`), EventPipe
/// traces (`Nettrace`) and profiler captures (`{"format":"clrmap-capture"`).
pub fn open_source(path: &Path, bytes: &[u8]) -> Result<(&'static str, Vec<CodeBody>), CliError> {
    if bytes.starts_with(b"Nettrace") {
        let bodies = clrmap::nettrace::read_code_bodies(bytes).map_err(CliError::input)?;
        return Ok(("trace", bodies));
    }
    if bytes.starts_with(b"{\"format\":\"clrmap-capture\"") {
        let text = std::str::from_utf8(bytes).map_err(|_| CliError::Message(format!("{}: not UTF-8", path.display())))?;
        let captured = clrmap::capture::read_captured(text).map_err(CliError::input)?;
        // Names come from each module's own metadata, read once per module.
        let mut modules: std::collections::HashMap<String, Option<Vec<u8>>> = std::collections::HashMap::new();
        let mut bodies = Vec::with_capacity(captured.len());
        for c in captured {
            let mut body = c.body;
            let file = modules.entry(c.module_path.clone()).or_insert_with(|| std::fs::read(&c.module_path).ok());
            if let Some(md) = file.as_deref().and_then(|b| Metadata::parse(b).ok()) {
                body.name = md.method_name(body.token);
            }
            bodies.push(body);
        }
        return Ok(("capture", bodies));
    }
    if bytes.starts_with(b"MZ") {
        let image = ReadyToRunImage::parse(bytes).map_err(CliError::input)?;
        let mut bodies = image.code_bodies().map_err(CliError::input)?;
        if let Ok(md) = Metadata::parse(bytes) {
            for b in &mut bodies {
                b.name = md.method_name(b.token);
            }
        }
        return Ok(("r2r", bodies));
    }
    Err(CliError::Message(format!("{}: neither a ReadyToRun image nor a clrmap capture", path.display())))
}

fn matches(body: &CodeBody, filter: &str) -> bool {
    match parse_u32(filter) {
        Ok(token) => body.token == token,
        Err(_) => body.name.as_deref().is_some_and(|n| n == filter || n.ends_with(&format!("::{filter}")) && !filter.contains("::")),
    }
}

#[derive(serde::Serialize)]
struct Dump<'a> {
    source: String,
    methods: Vec<&'a CodeBody>,
}

fn dump(source: &Path, method: Option<&str>, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let bytes = read_file(source)?;
    let (_, bodies) = open_source(source, &bytes)?;
    let selected: Vec<&CodeBody> = bodies.iter().filter(|b| method.is_none_or(|m| matches(b, m))).collect();
    if let (Some(m), true) = (method, selected.is_empty()) {
        return Err(CliError::Message(format!("no method {m} with debug info in {}", source.display())));
    }
    if json {
        let d = Dump { source: source.display().to_string(), methods: selected };
        writeln!(out, "{}", serde_json::to_string(&d).map_err(std::io::Error::other)?)?;
        return Ok(());
    }
    for b in selected {
        let place = match (b.rva, b.start) {
            (Some(rva), _) => format!("rva 0x{rva:X}"),
            (None, Some(start)) => format!("start 0x{start:X}"),
            (None, None) => String::new(),
        };
        writeln!(out, "0x{:08X} {}  {place}  size {}", b.token, b.name.as_deref().unwrap_or("?"), b.code_size)?;
        for e in &b.map {
            writeln!(out, "  {:<12} [0x{:X}, 0x{:X})", e.il.to_string(), e.native_start, e.native_end)?;
        }
    }
    Ok(())
}

/// `0x`-prefixed hex or decimal, 64 bits.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("not a 64-bit number: {s} ({e})"))
}

fn at(source: &Path, address: u64, return_address: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let bytes = read_file(source)?;
    let (_, bodies) = open_source(source, &bytes)?;
    let store = MapStore::new(bodies);
    let body = store
        .body_containing(address)
        .ok_or_else(|| CliError::input(Error::new(ErrorKind::NotFound, address, "an address inside a method with a map")))?;
    let start = body.start.or(body.rva.map(u64::from)).unwrap_or(0);
    let offset = u32::try_from(address.saturating_sub(start)).unwrap_or(u32::MAX);
    let r = native_to_il(&body.map, body.code_size, offset, Policy { return_address });
    let il = match r {
        Resolved::Il(v) => format!("IL 0x{v:04X}"),
        Resolved::Prolog => "PROLOG (IL 0)".to_owned(),
        Resolved::Epilog(Some(v)) => format!("EPILOG (last IL 0x{v:04X})"),
        Resolved::Epilog(None) => "EPILOG".to_owned(),
        Resolved::NoMapping => "NO_MAPPING".to_owned(),
        Resolved::Outside => "outside the method".to_owned(),
    };
    writeln!(out, "0x{:08X} {} +0x{offset:X}: {il}", body.token, body.name.as_deref().unwrap_or("?"))?;
    Ok(())
}

fn vars(source: &Path, method: &str, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let bytes = read_file(source)?;
    let image = ReadyToRunImage::parse(&bytes).map_err(CliError::input)?;
    let md = Metadata::parse(&bytes).ok();
    let mut found = false;
    for e in image.entry_points().map_err(CliError::input)? {
        let name = md.as_ref().and_then(|m| m.method_name(e.token));
        let body = CodeBody { token: e.token, name: name.clone(), ..CodeBody::default() };
        if !matches(&body, method) {
            continue;
        }
        let Some(info) = image.debug_info(e.runtime_function).map_err(CliError::input)? else { continue };
        found = true;
        let rva = image.runtime_functions().get(e.runtime_function as usize).map_or(0, |f| f.begin);
        if json {
            let v = serde_json::json!({"token": e.token, "rva": rva, "name": name, "vars": info.vars});
            writeln!(out, "{v}")?;
        } else {
            writeln!(out, "0x{:08X} {}  rva 0x{rva:X}", e.token, name.as_deref().unwrap_or("?"))?;
            for v in &info.vars {
                writeln!(out, "  var {:>3}  [0x{:X}, 0x{:X})  {:?}", v.number, v.start, v.end, v.loc)?;
            }
        }
    }
    if !found {
        return Err(CliError::Message(format!("no method {method} with debug info in {}", source.display())));
    }
    Ok(())
}

/// Run an `il` command.
pub fn run(cmd: IlCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        IlCommand::Dump { source, method, json } => dump(&source, method.as_deref(), json, out),
        IlCommand::At { source, rva, return_address } => at(&source, rva, return_address, out),
        IlCommand::Vars { source, method, json } => vars(&source, &method, json, out),
    }
}

//! `clrmap il`: IL-to-native maps (GetILToNativeMapping) from ReadyToRun images.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use clrmap::ilmap::{CodeBody, IlOffset};
use clrmap::locate::{locate_pdb, SymbolPaths};
use clrmap::metadata::Metadata;
use clrmap::pdb::PortablePdb;
use clrmap::pe::PeImage;
use clrmap::r2r::regs::describe_location;
use clrmap::r2r::ReadyToRunImage;
use clrmap::read::Location;
use clrmap::symbolizer::{name_var, open_source_assuming, LocalNames, SourceKind, VarKind, VarName};
use clrmap::{Error, ErrorKind};

use crate::args::{name_matches, parse_address, parse_u32, FrameArgs, LayoutArgs};
use crate::open::{open_error, warn};
use crate::output::{read_file, CliError, Text, TokenError};

/// `clrmap il ...`
#[derive(Debug, Subcommand)]
pub enum IlCommand {
    /// Print every code body's map exactly as GetILToNativeMapping returns it: PROLOG first, IL
    /// ascending, EPILOG, NO_MAPPING; ranges [start, end) in native offsets from the code start.
    ///
    /// Example: `clrmap il dump tests/fixtures/r2r/Frames.dll --method Frames.Nested::Inner --json`
    #[command(verbatim_doc_comment)]
    Dump {
        /// A ReadyToRun image, an EventPipe trace (.nettrace), or a capture written by `clrmap profile`.
        #[arg(required_unless_present = "pid")]
        source: Option<PathBuf>,
        /// A running .NET process instead of a file: a rundown snapshot of every method it has
        /// jitted so far, through its diagnostics port.
        #[arg(long, conflicts_with = "source")]
        pid: Option<u32>,
        /// With --pid: how long the whole snapshot may take, connect and rundown included
        /// (`10s`, `500ms`, `2m`; default 10s); past it the command fails with a timeout (status 8).
        #[arg(long, requires = "pid", value_parser = crate::args::parse_duration)]
        timeout: Option<std::time::Duration>,
        /// Only this method: a MethodDef token (0x06000123) or a name (`Ns.Type::Method`,
        /// `Type::Method` or `Method`).
        #[arg(long)]
        method: Option<String>,
        /// Only bodies of this module (file name, e.g. `System.Private.CoreLib.dll`; traces and
        /// captures).
        #[arg(long)]
        module: Option<String>,
        /// JSON: {"source":...,"methods":[{"token":N,"name":...,"map":[{"il":...,"native_start":N,"native_end":N}]}]}.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        layout: LayoutArgs,
    },
    /// Which method, and which IL offset, is the code at this address? For an image the address is
    /// an RVA; for a trace or a capture it is an absolute address in the traced process.
    ///
    /// Example: `clrmap il at tests/fixtures/r2r/Frames.dll 0x11948 --return-address`
    /// (a committed ReadyToRun image) prints `0x06000008 Frames.Nested::Inner +0x7: IL 0x0000`.
    #[command(verbatim_doc_comment, override_usage = "clrmap il at [OPTIONS] SOURCE ADDRESS\n       clrmap il at [OPTIONS] --pid PID ADDRESS")]
    At {
        /// A ReadyToRun image, a .nettrace, or a capture (not given with --pid).
        #[arg(value_name = "SOURCE", required_unless_present = "pid")]
        first: Option<String>,
        /// The address: hex with 0x, or decimal (bare hex with --hex). An RVA for an image. With
        /// --pid, the only positional argument.
        #[arg(value_name = "ADDRESS")]
        second: Option<String>,
        #[command(flatten)]
        frame: FrameArgs,
        /// One JSON object, as `symbolize --json` writes it.
        #[arg(long)]
        json: bool,
    },
    /// ICorDebugSymbolProvider2::GetFrameProps over a ReadyToRun image: the start of the frame
    /// that holds the RVA (the method's, or the funclet's) and, for a funclet, its parent method's
    /// start (0 otherwise).
    ///
    /// Example: `clrmap il frame tests/fixtures/r2r/Frames.dll 0x11DBF`
    /// (a committed ReadyToRun image) prints
    /// `funclet at 0x11DBE of 0x06000022 Frames.More::Run (parent frame at 0x11B50)`.
    #[command(verbatim_doc_comment)]
    Frame {
        /// A ReadyToRun image.
        source: PathBuf,
        /// A code RVA (hex with 0x, or decimal).
        #[arg(value_parser = parse_u32)]
        rva: u32,
        /// JSON: {"code_start_rva":N,"parent_frame_start_rva":N,"funclet":bool,"token":N,"name":...}.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        layout: LayoutArgs,
    },
    /// Print a method's variable locations (R2R debug info of every major whose variable layout is
    /// known: 3-16 and 26).
    ///
    /// Example: `clrmap il vars .dotnet/8.0/shared/Microsoft.NETCore.App/*/System.Linq.dll --method System.Linq.Enumerable::Count`
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
        /// A portable PDB for local names (it must match the image's CodeView id).
        #[arg(long)]
        pdb: Option<PathBuf>,
        #[command(flatten)]
        symbols: crate::args::SymbolArgs,
        #[command(flatten)]
        layout: LayoutArgs,
    },
}

fn matches(body: &CodeBody, filter: &str) -> bool {
    name_matches(body.token, body.name.as_deref(), filter)
}

/// An IL offset as every text output prints it: hex, as `il at` does (`IL 0x001B`), or the
/// special entry's name.
pub fn il_text(il: IlOffset) -> String {
    match il {
        IlOffset::Il(v) => format!("IL 0x{v:04X}"),
        other => other.to_string(),
    }
}

/// Edit distance between two short strings (Levenshtein, one row at a time).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = i;
        let mut next = vec![i.saturating_add(1)];
        for (j, cb) in b.iter().enumerate() {
            let up = row.get(j.saturating_add(1)).copied().unwrap_or(usize::MAX);
            let left = next.last().copied().unwrap_or(usize::MAX);
            let cost = diagonal.saturating_add(usize::from(ca != *cb));
            next.push(cost.min(up.saturating_add(1)).min(left.saturating_add(1)));
            diagonal = up;
        }
        row = next;
    }
    row.last().copied().unwrap_or(0)
}

/// Up to five method names near `filter`: by the edit distance of their method part to the
/// filter's (at most a third of its length), or containing it, ignoring case.
fn near_names<'a>(bodies: &'a [CodeBody], filter: &str) -> Vec<&'a str> {
    let want = filter.rsplit([':', '.']).next().unwrap_or(filter).to_lowercase();
    let limit = (want.chars().count() / 3).max(1);
    let mut near: Vec<(usize, &str)> = bodies
        .iter()
        .filter_map(|b| b.name.as_deref())
        .filter_map(|n| {
            let short = n.rsplit([':', '.']).next().unwrap_or(n).to_lowercase();
            let d = if short.contains(&want) && !want.is_empty() { 0 } else { distance(&short, &want) };
            (d <= limit).then_some((d, n))
        })
        .collect();
    near.sort_unstable();
    near.dedup_by(|a, b| a.1 == b.1);
    near.into_iter().take(5).map(|(_, n)| n).collect()
}

#[allow(clippy::too_many_arguments)]
fn dump(
    source: Option<&Path>,
    (pid, timeout): (Option<u32>, Option<std::time::Duration>),
    method: Option<&str>,
    module: Option<&str>,
    json: bool,
    layout: LayoutArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let opened = match (pid, source) {
        (Some(pid), _) => crate::open::snapshot(pid, timeout)?,
        // clap lets `requires = "pid"` pass when SOURCE is given (pid conflicts with it).
        (None, _) if timeout.is_some() => return Err(CliError::Usage("--timeout is for a process (--pid), not a file".into())),
        (None, Some(source)) => {
            let opened = open_source_assuming(source, layout.assume_layout).map_err(|e| crate::args::open_failed(source, e))?;
            warn(source, &opened.warnings);
            opened
        }
        (None, None) => return Err(CliError::Usage("give a SOURCE file or --pid".into())),
    };
    let shown = source.map_or_else(|| format!("process {}", pid.unwrap_or(0)), |s| s.display().to_string());
    let bodies = opened.bodies;
    let in_module = |b: &CodeBody| module.is_none_or(|m| b.module.as_deref().is_some_and(|bm| bm.eq_ignore_ascii_case(m)));
    if let Some(m) = module {
        // A module that names no body: say which modules there are, as `--method` says near names.
        if !bodies.iter().any(&in_module) {
            let mut modules: Vec<&str> = bodies.iter().filter_map(|b| b.module.as_deref()).collect();
            modules.sort_unstable();
            modules.dedup();
            let hint = match modules.as_slice() {
                [] => " (its bodies name no module: an image's bodies are all its own)".to_owned(),
                list => format!("; its modules: {}", list.join(", ")),
            };
            return Err(CliError::Message(format!("no body of module {m} in {shown}{hint}")));
        }
    }
    let selected: Vec<&CodeBody> = bodies.iter().filter(|b| in_module(b) && method.is_none_or(|m| matches(b, m))).collect();
    if let (Some(m), true) = (method, selected.is_empty()) {
        let near = near_names(&bodies, m);
        let hint = if near.is_empty() { String::new() } else { format!("; near names: {}", near.join(", ")) };
        return Err(CliError::Message(format!("no method {m} with debug info in {shown}{hint}")));
    }
    if json {
        // Streamed, one method at a time: the same bytes as serializing the whole document.
        out.write_all(b"{\"source\":")?;
        serde_json::to_writer(&mut *out, &shown).map_err(crate::output::json_io)?;
        out.write_all(b",\"methods\":[")?;
        for (i, b) in selected.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *out, b).map_err(crate::output::json_io)?;
        }
        out.write_all(b"]}\n")?;
        return Ok(());
    }
    // Several processes in one capture: say which one ran each body.
    let many_pids = selected.iter().filter_map(|b| b.pid).collect::<std::collections::BTreeSet<_>>().len() > 1;
    for b in selected {
        let place = match (b.rva, b.start) {
            (Some(rva), _) => format!("rva 0x{rva:X}"),
            (None, Some(start)) => format!("start 0x{start:X}"),
            (None, None) => String::new(),
        };
        // Traces and captures mix modules and code kinds: say which (an image's bodies are all
        // its own ReadyToRun code).
        let mut extra = String::new();
        if let Some(module) = &b.module {
            extra.push_str(&format!("  {}", Text(module)));
            if let Some(kind) = b.kind {
                extra.push_str(&format!("  {kind}"));
            }
            match (b.tier, b.version) {
                (Some(tier), _) => extra.push_str(&format!(" {tier}")),
                (None, Some(v)) => extra.push_str(&format!(" #{v}")),
                (None, None) => {}
            }
        }
        if let (true, Some(pid)) = (many_pids, b.pid) {
            extra.push_str(&format!("  pid {pid}"));
        }
        writeln!(out, "0x{:08X} {}  {place}  size {}{extra}", b.token, Text(b.full_name.as_deref().or(b.name.as_deref()).unwrap_or("?")), b.code_size)?;
        for e in &b.map {
            writeln!(out, "  {:<12} [0x{:X}, 0x{:X})", il_text(e.il), e.native_start, e.native_end)?;
        }
    }
    Ok(())
}

/// `il at`: `input` is the address as given, echoed by its errors.
fn at(source: Option<&Path>, input: &str, address: u64, frame: &FrameArgs, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let sym = frame.open_or_pid(source)?;
    let f = sym.symbolize(address, frame.kind(&sym));
    crate::open::notes(&sym, json);
    if json && f.at.token.is_some() {
        return Ok(crate::output::write_frame(&f, true, out)?);
    }
    let (Some(token), Some(offset)) = (f.at.token, f.native_offset) else {
        let error = match (sym.kind(), u32::try_from(address)) {
            (SourceKind::ReadyToRun, Ok(rva)) => Error::at_rva(ErrorKind::NotFound, rva, "an RVA inside a method with a map"),
            // Not an RVA at all: most likely an absolute address, given to an image.
            (SourceKind::ReadyToRun, Err(_)) => {
                return Err(CliError::Token(TokenError {
                    kind: "not_found",
                    input: input.to_owned(),
                    location: Location::Nowhere,
                    message: "beyond every RVA: an image takes RVAs (offsets from its load address, below 4 GiB), not absolute \
                              addresses; subtract the module's load address, or give a trace, a capture or --pid, which take \
                              absolute addresses"
                        .into(),
                }))
            }
            _ => Error::at_address(ErrorKind::NotFound, address, "an address inside a method with a map"),
        };
        return Err(CliError::input(error));
    };
    let il = f.at.il_offset.unwrap_or(0);
    let what = match f.region {
        Some(IlOffset::Il(_)) => format!("IL 0x{il:04X}"),
        Some(IlOffset::Prolog) => "PROLOG (IL 0)".to_owned(),
        Some(IlOffset::Epilog) => format!("EPILOG (IL 0x{il:04X})"),
        Some(IlOffset::NoMapping) => "NO_MAPPING (IL 0)".to_owned(),
        None => "no map entry (IL 0)".to_owned(),
    };
    write!(out, "0x{token:08X} {} +0x{offset:X}: {what}", Text(f.at.method.unwrap_or("?")))?;
    if let (Some(file), Some(line)) = (f.at.file, f.at.line) {
        write!(out, " at {}:{line}:{}", Text(file), f.at.column.unwrap_or(0))?;
    }
    writeln!(out)?;
    Ok(())
}

fn vars(source: &Path, method: &str, json: bool, symbols: &SymbolPaths, layout: LayoutArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let bytes = read_file(source)?;
    let image = ReadyToRunImage::parse_assuming(&bytes, layout.assume_layout).map_err(CliError::input)?;
    let md = Metadata::parse(&bytes).ok();
    // Local names come from the image's PDB when one is found; arguments are named by metadata.
    let pe = PeImage::parse(&bytes).map_err(CliError::input)?;
    let found_pdb = locate_pdb(&pe, Some(source), symbols).map_err(open_error)?;
    // An embedded PDB's offsets are into its inflated bytes, and its errors say so.
    let pdb = found_pdb
        .as_ref()
        .map(|f| PortablePdb::parse(&f.bytes).map_err(|e| if f.origin == clrmap::locate::PdbOrigin::Embedded { clrmap::pdb::embedded::inflated(e) } else { e }))
        .transpose()
        .map_err(CliError::input)?;
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
        let args = md.as_ref().and_then(|m| m.method_args(e.token));
        let scopes = pdb.as_ref().and_then(|p| p.local_scopes(e.token).ok()).unwrap_or_default();
        let locals = LocalNames::new(&scopes);
        let named: Vec<VarName> = info.vars.iter().map(|v| name_var(v.number, args.as_ref(), &locals)).collect();
        if json {
            let vars: Vec<serde_json::Value> = info
                .vars
                .iter()
                .zip(&named)
                .map(|(v, n)| serde_json::json!({"number": v.number, "kind": n.kind, "index": n.index, "name": n.name, "start": v.start, "end": v.end, "loc": v.loc}))
                .collect();
            let v = serde_json::json!({"token": e.token, "rva": rva, "name": name, "vars": vars});
            writeln!(out, "{v}")?;
        } else {
            writeln!(out, "0x{:08X} {}  rva 0x{rva:X}", e.token, Text(name.as_deref().unwrap_or("?")))?;
            for (v, n) in info.vars.iter().zip(&named) {
                let what = match n.kind {
                    VarKind::Arg => format!("arg {}", n.index),
                    VarKind::Local => format!("local {}", n.index),
                    VarKind::VarargsHandle => "varargs handle".to_owned(),
                    VarKind::ReturnBuffer => "return buffer".to_owned(),
                    VarKind::GenericContext => "generic context".to_owned(),
                    VarKind::Unknown => format!("var {}", v.number),
                };
                let label = match &n.name {
                    Some(name) => format!("{what} {}", Text(name)),
                    None => what,
                };
                writeln!(out, "  {label:<24} [0x{:X}, 0x{:X})  {}", v.start, v.end, describe_location(image.machine(), &v.loc))?;
            }
        }
    }
    if !found {
        return Err(CliError::Message(format!("no method {method} with debug info in {}", source.display())));
    }
    Ok(())
}

fn frame(source: &Path, rva: u32, json: bool, layout: LayoutArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let bytes = read_file(source)?;
    let image = ReadyToRunImage::parse_assuming(&bytes, layout.assume_layout).map_err(CliError::input)?;
    let props = image.frame_props(rva).map_err(CliError::input)?;
    // The method: the entry point whose RUNTIME_FUNCTION is the method's entry.
    let token = image.entry_points().map_err(CliError::input)?.into_iter().find(|e| e.runtime_function == props.method_runtime_function).map(|e| e.token);
    let name = token.and_then(|t| Metadata::parse(&bytes).ok().and_then(|m| m.method_name(t)));
    if json {
        let v = serde_json::json!({
            "code_start_rva": props.code_start,
            "parent_frame_start_rva": props.parent_frame_start_rva(),
            "funclet": props.is_funclet(),
            "token": token,
            "name": name,
        });
        writeln!(out, "{v}")?;
        return Ok(());
    }
    let who = match (token, &name) {
        (Some(t), Some(n)) => format!("0x{t:08X} {}", Text(n)),
        (Some(t), None) => format!("0x{t:08X}"),
        _ => "?".to_owned(),
    };
    match props.parent_start {
        Some(parent) => writeln!(out, "funclet at 0x{:X} of {who} (parent frame at 0x{parent:X})", props.code_start)?,
        None => writeln!(out, "0x{:X} {who} (no parent frame)", props.code_start)?,
    }
    Ok(())
}

/// Run an `il` command.
pub fn run(cmd: IlCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        IlCommand::Dump { source, pid, timeout, method, module, json, layout } => dump(source.as_deref(), (pid, timeout), method.as_deref(), module.as_deref(), json, layout, out),
        IlCommand::At { first, second, frame, json } => {
            // `il at SOURCE ADDRESS`, or `il at --pid PID ADDRESS`.
            let (source, address) = match (frame.pid, first, second) {
                (Some(_), Some(address), None) => (None, address),
                (None, Some(source), Some(address)) => (Some(PathBuf::from(source)), address),
                (Some(_), Some(_), Some(_)) => return Err(CliError::Usage("with --pid, give only the ADDRESS".into())),
                (Some(_), None, _) => return Err(CliError::Usage("with --pid, give the ADDRESS: clrmap il at --pid PID ADDRESS".into())),
                (None, _, _) => return Err(CliError::Usage("give SOURCE and ADDRESS".into())),
            };
            let input = address.trim();
            let address = parse_address(input, frame.hex)
                .map_err(|why| CliError::Token(TokenError { kind: "bad_address", input: input.to_owned(), location: Location::Nowhere, message: format!("not an address: {why}") }))?;
            at(source.as_deref(), input, address, &frame, json, out)
        }
        IlCommand::Frame { source, rva, json, layout } => frame(&source, rva, json, layout, out),
        IlCommand::Vars { source, method, json, pdb, symbols, layout } => vars(&source, &method, json, &symbols.paths(pdb), layout, out),
    }
}

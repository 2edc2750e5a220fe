//! `clrmap pdb`: portable PDBs.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use clrmap::metadata::Metadata;
use clrmap::pdb::locate::{open_pdb, SymbolPaths};
use clrmap::pdb::{PortablePdb, SequencePoint};

use crate::args::name_matches;
use crate::open::open_error;
use crate::output::CliError;

/// `clrmap pdb ...`
#[derive(Debug, Subcommand)]
pub enum PdbCommand {
    /// Print a portable PDB's documents and each method's sequence points (IL offset →
    /// file:line:column-line:column; hidden points marked). Given an assembly, its PDB is found
    /// (embedded, --pdb, beside it, --symbol-path) and methods are named from its metadata.
    ///
    /// Example: `clrmap pdb lines tests/fixtures/frames/debug-portable/Frames.dll --method Frames.Nested::Inner`
    #[command(verbatim_doc_comment)]
    Lines {
        /// An assembly or a portable PDB.
        file: PathBuf,
        /// Only this method: a MethodDef token (0x06000008) or a name (`Ns.Type::Method`, or
        /// `Type::Method`, or `Method`).
        #[arg(long)]
        method: Option<String>,
        /// The PDB to use for the assembly (it must match the assembly's CodeView id).
        #[arg(long)]
        pdb: Option<PathBuf>,
        /// A directory to search for PDBs, flat or in the symbol-server layout (repeatable).
        #[arg(long = "symbol-path")]
        symbol_path: Vec<PathBuf>,
        /// One JSON object per line: the documents, then one object per method.
        #[arg(long)]
        json: bool,
    },
}

/// One method's points in `pdb lines --json`, fields in this order.
#[derive(serde::Serialize)]
struct JsonMethod<'a> {
    token: u32,
    name: Option<&'a str>,
    points: Vec<JsonPoint>,
}

/// One sequence point: a hidden one has only `il`, `document` and `hidden`.
#[derive(serde::Serialize)]
struct JsonPoint {
    il: u32,
    document: u32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    hidden: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_column: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_column: Option<u32>,
}

impl From<&SequencePoint> for JsonPoint {
    fn from(p: &SequencePoint) -> Self {
        let visible = |v: u32| (!p.is_hidden()).then_some(v);
        JsonPoint {
            il: p.il_offset,
            document: p.document,
            hidden: p.is_hidden(),
            start_line: visible(p.start_line),
            start_column: visible(p.start_column),
            end_line: visible(p.end_line),
            end_column: visible(p.end_column),
        }
    }
}


fn lines(file: &std::path::Path, method: Option<&str>, symbols: SymbolPaths, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let opened = open_pdb(file, &symbols).map_err(open_error)?;
    let pdb = PortablePdb::parse(&opened.pdb.bytes).map_err(CliError::input)?;
    let md = opened.assembly.as_deref().and_then(|a| Metadata::parse(a).ok());
    let documents: Vec<String> = pdb.documents().map(|d| d.map(|d| d.name)).collect::<Result<_, _>>().map_err(CliError::input)?;
    if json {
        writeln!(out, "{}", serde_json::json!({ "documents": documents }))?;
    } else {
        writeln!(out, "documents: {}", documents.len())?;
        for (i, d) in documents.iter().enumerate() {
            writeln!(out, "  {:>3}  {d}", i.saturating_add(1))?;
        }
    }
    let mut found = false;
    for rid in 1..=pdb.method_count() {
        let token = 0x0600_0000 | rid;
        let name = md.as_ref().and_then(|m| m.method_name(token));
        if method.is_some_and(|f| !name_matches(token, name.as_deref(), f)) {
            continue;
        }
        let points: Vec<_> = pdb.sequence_points(token).map_err(CliError::input)?.collect::<Result<_, _>>().map_err(CliError::input)?;
        if points.is_empty() {
            continue;
        }
        found = true;
        if json {
            let points = points.iter().map(JsonPoint::from).collect();
            serde_json::to_writer(&mut *out, &JsonMethod { token, name: name.as_deref(), points }).map_err(crate::output::json_io)?;
            writeln!(out)?;
            continue;
        }
        writeln!(out, "0x{token:08X} {}", name.as_deref().unwrap_or("?"))?;
        for p in points {
            if p.is_hidden() {
                writeln!(out, "  IL 0x{:04X}  hidden", p.il_offset)?;
            } else {
                let doc = documents.get(p.document.saturating_sub(1) as usize).map_or("?", String::as_str);
                writeln!(out, "  IL 0x{:04X}  {doc}:{}:{}-{}:{}", p.il_offset, p.start_line, p.start_column, p.end_line, p.end_column)?;
            }
        }
    }
    if let (Some(m), false) = (method, found) {
        return Err(CliError::Message(format!("no method {m} with sequence points in {}", file.display())));
    }
    Ok(())
}

/// Run a `pdb` command.
pub fn run(cmd: PdbCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        PdbCommand::Lines { file, method, pdb, symbol_path, json } => lines(&file, method.as_deref(), SymbolPaths { pdb, dirs: symbol_path }, json, out),
    }
}

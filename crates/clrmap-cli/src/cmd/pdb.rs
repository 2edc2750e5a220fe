//! `clrmap pdb`: portable PDBs.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use clrmap::locate::{explain_missing_pdb, open_pdb_with, PdbOrigin, SymbolPaths};
use clrmap::metadata::{Metadata, Token};
use clrmap::pdb::embedded::inflated;
use clrmap::pdb::sources::{self as src, SourceRoot};
use clrmap::pdb::{name_budget, point_budget, DocumentNames, PortablePdb, SequencePoint};
use clrmap::symbolizer::OpenError;
use clrmap::ErrorKind;

use crate::args::name_matches;
use crate::open::open_error;
use crate::output::{CliError, Text};

/// `clrmap pdb ...`
#[derive(Debug, Subcommand)]
pub enum PdbCommand {
    /// Print a portable PDB's documents and each method's sequence points (IL offset →
    /// file:line:column-line:column; hidden points marked). Given an assembly, its PDB is found
    /// (embedded, --pdb, beside it, --symbol-path) and methods are named from its metadata.
    /// Given a PDB, methods are named from --assembly, or else from the assembly with the PDB's
    /// name and .dll or .exe, beside it or in --symbol-path, whose CodeView id is the PDB's;
    /// with neither, they print as ?.
    /// With --method, only the documents that method's points name are listed.
    ///
    /// What one PDB can make this print is bounded: at most 1,048,576 sequence points or one per
    /// byte of the PDB, whichever is more, and at most 64 MiB of document names or 64 bytes per
    /// byte of the PDB (a PDB whose rows share one blob or one name could otherwise print
    /// billions). Every point takes at least 3 bytes of the PDB, so one whose methods do not
    /// share sequence points never reaches the first limit. Where the output stops, a warning on
    /// stderr says so; with --json, a last line {"warning":{"kind":"output_limit",...}} does
    /// (naming the limit, the method and the points printed). The exit status stays 0.
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
        #[command(flatten)]
        symbols: crate::args::SymbolArgs,
        /// When FILE is a PDB: the assembly it belongs to, for method names. Its CodeView entry
        /// must name this PDB's id, or this fails with pdb_mismatch.
        #[arg(long)]
        assembly: Option<PathBuf>,
        /// One JSON object per line: the documents, then one object per method.
        #[arg(long)]
        json: bool,
    },
    /// List a portable PDB's documents: each one's name, language, hash algorithm and hash,
    /// whether the compiler embedded its text (its size, and its size as stored when deflated),
    /// and its SourceLink URL. Given an assembly, its PDB is found as `pdb lines` finds it.
    ///
    /// --extract DIR writes each embedded text under DIR at the document's name made relative
    /// (its drive or leading separators dropped): a name with a `..` part, or that would pass
    /// through a symbolic link, is refused (an error for that document; the others are still
    /// written), so nothing is written outside DIR. Each text is at most 64 MiB, and all of them
    /// at most 1 GiB.
    ///
    /// --verify ROOT checks the local files against the documents' hashes: each document's name,
    /// less the directory all the documents share, is looked for under ROOT (or where the first
    /// matching --source-root PREFIX=DIR puts it), and said to `match`, `differ` or be `missing`
    /// (`unknown_hash` for a hash algorithm other than SHA-1 and SHA-256).
    ///
    /// The exit status is 1 when a document was refused or a file differs or is missing.
    ///
    /// Example: `clrmap pdb sources tests/fixtures/frames/debug-portable/Frames.pdb --verify tests/dotnet/frames`
    #[command(verbatim_doc_comment)]
    Sources {
        /// An assembly or a portable PDB.
        file: PathBuf,
        /// The PDB to use for the assembly (it must match the assembly's CodeView id).
        #[arg(long)]
        pdb: Option<PathBuf>,
        #[command(flatten)]
        symbols: crate::args::SymbolArgs,
        /// Write the embedded source texts under this directory.
        #[arg(long, value_name = "DIR")]
        extract: Option<PathBuf>,
        /// Check the files under this directory against the documents' hashes.
        #[arg(long, value_name = "ROOT")]
        verify: Option<PathBuf>,
        /// For --verify: PREFIX=DIR maps a document named PREFIX/rest to DIR/rest (repeatable).
        #[arg(long = "source-root", value_name = "PREFIX=DIR", value_parser = parse_source_root)]
        source_root: Vec<SourceRoot>,
        /// One JSON object per document.
        #[arg(long)]
        json: bool,
    },
}

fn parse_source_root(text: &str) -> Result<SourceRoot, String> {
    SourceRoot::parse(text).ok_or_else(|| format!("{text:?} is not PREFIX=DIR"))
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

/// What one `pdb lines` may still print from one PDB ([`point_budget`], [`name_budget`]), and
/// where it stopped.
struct Budget {
    len: usize,
    points: u64,
    names: u64,
    points_left: u64,
    names_left: u64,
    /// Set once a limit is reached: which one, and the method being printed (0: the documents).
    stopped: Option<(&'static str, u32)>,
}

impl Budget {
    fn new(len: usize) -> Self {
        let (points, names) = (point_budget(len), name_budget(len));
        Budget { len, points, names, points_left: points, names_left: names, stopped: None }
    }

    /// Take one point; false (and stopped) when none is left.
    fn point(&mut self, method: u32) -> bool {
        match self.points_left.checked_sub(1) {
            Some(left) => {
                self.points_left = left;
                true
            }
            None => {
                self.stopped = Some(("sequence_points", method));
                false
            }
        }
    }

    /// Take the bytes of a name about to be printed; false (and stopped) when they do not fit.
    fn name(&mut self, name: &str, method: u32) -> bool {
        match self.names_left.checked_sub(name.len() as u64) {
            Some(left) => {
                self.names_left = left;
                true
            }
            None => {
                self.stopped = Some(("document_names", method));
                false
            }
        }
    }

    /// Say where the output stopped: a last JSON object on stdout with `--json`, a warning on
    /// stderr otherwise.
    fn report(&self, file: &std::path::Path, json: bool, out: &mut dyn Write) -> std::io::Result<()> {
        let Some((limit, method)) = self.stopped else { return Ok(()) };
        let printed = self.points.saturating_sub(self.points_left);
        let what = if limit == "sequence_points" { format!("{} sequence points", self.points) } else { format!("{} bytes of document names", self.names) };
        let place = if method == 0 { "in the document list".to_owned() } else { format!("in method 0x{method:08X}") };
        let message = format!("output stopped {place} after {printed} sequence points: a PDB of {} bytes prints at most {what} (its sequence points or names are shared by many rows)", self.len);
        if json {
            let v = serde_json::json!({"warning": {"kind": "output_limit", "limit": limit, "method": (method != 0).then_some(method), "printed_points": printed, "message": message}});
            writeln!(out, "{v}")
        } else {
            out.flush()?;
            eprintln!("warning: {}: {message}", file.display());
            Ok(())
        }
    }
}

fn lines(file: &std::path::Path, method: Option<&str>, symbols: SymbolPaths, assembly: Option<&std::path::Path>, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let opened = open_pdb_with(file, &symbols, assembly).map_err(|e| match e {
        // No PDB for an assembly: say why, from the library's own account.
        OpenError::Input { error, .. } if error.kind == ErrorKind::NotFound => {
            let why = explain_missing_pdb(file, &symbols);
            let note = why.iter().map(|w| format!("note: {}", crate::output::Text(w))).collect::<Vec<_>>().join("\n");
            if note.is_empty() {
                CliError::input(error)
            } else {
                CliError::Noted { error, note }
            }
        }
        e => open_error(e),
    })?;
    // FILE is a PDB exactly when it is its own origin.
    let file_is_pdb = matches!(&opened.pdb.origin, PdbOrigin::Explicit(p) if p == file);
    if assembly.is_some() && !file_is_pdb {
        return Err(CliError::Usage("--assembly names the assembly of a PDB FILE; this FILE is an assembly".into()));
    }
    if file_is_pdb && opened.assembly.is_none() && method.is_some_and(|m| !m.to_ascii_lowercase().starts_with("0x")) {
        eprintln!("note: no assembly with this PDB's id beside it or in --symbol-path, so no method has a name: give it with --assembly, or --method a token");
    }
    // An embedded PDB's offsets are into its inflated bytes, and errors say so.
    let embedded = opened.pdb.origin == PdbOrigin::Embedded;
    let bad = |e: clrmap::Error| CliError::input(if embedded { inflated(e) } else { e });
    let bytes = &opened.pdb.bytes;
    let pdb = PortablePdb::parse(bytes).map_err(bad)?;
    let md = opened.assembly.as_deref().and_then(|a| Metadata::parse(a).ok());
    let mut budget = Budget::new(bytes.len());
    let mut names = DocumentNames::default();
    let selected = |token: u32| -> Option<Option<String>> {
        let name = md.as_ref().and_then(|m| m.method_name(token));
        match method {
            Some(f) if !name_matches(token, name.as_deref(), f) => None,
            _ => Some(name),
        }
    };
    // With --method, only the documents its points name are listed (the others are null in JSON).
    let wanted: Option<HashSet<u32>> = match method {
        None => None,
        Some(_) => {
            let mut used = HashSet::new();
            let mut left = budget.points;
            for rid in 1..=pdb.method_count() {
                let token = Token::method_def(rid).raw();
                if selected(token).is_none() {
                    continue;
                }
                for p in pdb.sequence_points(token).map_err(bad)? {
                    let Some(l) = left.checked_sub(1) else { break };
                    left = l;
                    used.insert(p.map_err(bad)?.document);
                }
            }
            Some(used)
        }
    };
    let count = pdb.document_count();
    // A map that does not parse gives no URLs (`pdb sources` says why).
    let links = pdb.source_link().ok().flatten();
    let mut link_urls: Vec<(u32, Option<String>)> = Vec::new();
    if json {
        write!(out, "{{\"documents\":[")?;
    } else {
        writeln!(out, "documents: {count}")?;
    }
    for rid in 1..=count {
        let listed = wanted.as_ref().is_none_or(|w| w.contains(&rid));
        if json && rid > 1 {
            write!(out, ",")?;
        }
        if !listed {
            if json {
                write!(out, "null")?;
            }
            continue;
        }
        let name = names.get(&pdb, rid).map_err(bad)?;
        let name = name.as_deref().unwrap_or("?");
        if !budget.name(name, 0) {
            break;
        }
        if json {
            serde_json::to_writer(&mut *out, name).map_err(crate::output::json_io)?;
        } else {
            writeln!(out, "  {:>3}  {}", rid, Text(name))?;
            if let Some(url) = links.as_ref().and_then(|l| l.url(name)) {
                writeln!(out, "       source link: {}", Text(&url))?;
            }
        }
        if let Some(l) = links.as_ref() {
            link_urls.push((rid, l.url(name)));
        }
    }
    if json {
        write!(out, "]")?;
        // The documents' SourceLink URLs, by row, where the PDB has a map.
        if links.is_some() {
            write!(out, ",\"source_links\":{{")?;
            for (i, (rid, url)) in link_urls.iter().enumerate() {
                write!(out, "{}\"{rid}\":", if i > 0 { "," } else { "" })?;
                serde_json::to_writer(&mut *out, url).map_err(crate::output::json_io)?;
            }
            write!(out, "}}")?;
        }
        writeln!(out, "}}")?;
    }
    let mut found = false;
    for rid in 1..=pdb.method_count() {
        if budget.stopped.is_some() {
            break;
        }
        let token = Token::method_def(rid).raw();
        let Some(name) = selected(token) else { continue };
        // A method whose blob is malformed within what may be printed fails before any of it is.
        let mut points = 0u64;
        for p in pdb.sequence_points(token).map_err(bad)?.take(usize::try_from(budget.points_left.saturating_add(1)).unwrap_or(usize::MAX)) {
            p.map_err(bad)?;
            points = points.saturating_add(1);
        }
        if points == 0 {
            continue;
        }
        found = true;
        if json {
            write!(out, "{{\"token\":{token},\"name\":")?;
            serde_json::to_writer(&mut *out, &name).map_err(crate::output::json_io)?;
            write!(out, ",\"points\":[")?;
        } else {
            writeln!(out, "0x{token:08X} {}", Text(name.as_deref().unwrap_or("?")))?;
        }
        for (i, p) in pdb.sequence_points(token).map_err(bad)?.enumerate() {
            let p = p.map_err(bad)?;
            if !budget.point(token) {
                break;
            }
            if json {
                if i > 0 {
                    write!(out, ",")?;
                }
                serde_json::to_writer(&mut *out, &JsonPoint::from(&p)).map_err(crate::output::json_io)?;
            } else if p.is_hidden() {
                writeln!(out, "  IL 0x{:04X}  hidden", p.il_offset)?;
            } else {
                let doc = match names.get(&pdb, p.document) {
                    Ok(Some(name)) => name,
                    _ => "?".into(),
                };
                if !budget.name(&doc, token) {
                    break;
                }
                writeln!(out, "  IL 0x{:04X}  {}:{}:{}-{}:{}", p.il_offset, Text(&doc), p.start_line, p.start_column, p.end_line, p.end_column)?;
            }
        }
        if json {
            writeln!(out, "]}}")?;
        }
    }
    budget.report(file, json, out)?;
    if let (Some(m), false, None) = (method, found, budget.stopped) {
        return Err(CliError::Message(format!("no method {m} with sequence points in {}", file.display())));
    }
    Ok(())
}

/// Run a `pdb` command.
pub fn run(cmd: PdbCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        PdbCommand::Lines { file, method, pdb, symbols, assembly, json } => lines(&file, method.as_deref(), symbols.paths(pdb), assembly.as_deref(), json, out),
        PdbCommand::Sources { file, pdb, symbols, extract, verify, source_root, json } => {
            let symbols = symbols.paths(pdb);
            sources(&file, &symbols, extract.as_deref(), verify.as_deref(), &source_root, json, out)
        }
    }
}

/// The most bytes `pdb sources --extract` writes in all.
const MAX_EXTRACT: u64 = 1 << 30;

/// One document, as `pdb sources --json` prints it.
#[derive(serde::Serialize)]
struct SourceOut {
    document: u32,
    name: String,
    language: Option<String>,
    hash_algorithm: Option<String>,
    hash: String,
    embedded: Option<EmbeddedOut>,
    source_link: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extracted: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verify: Option<VerifyOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(serde::Serialize)]
struct EmbeddedOut {
    size: u64,
    stored: u64,
    compressed: bool,
}

#[derive(serde::Serialize)]
struct VerifyOut {
    status: &'static str,
    path: String,
}

/// The directory every name shares (up to and with its last separator), `""` for one name.
fn shared_dir(names: &[String]) -> String {
    let Some(first) = names.first() else { return String::new() };
    let mut len = first.len();
    for n in names.iter().skip(1) {
        len = first.bytes().zip(n.bytes()).take(len).take_while(|(a, b)| a == b).count();
    }
    let head = first.get(..len).unwrap_or("");
    match head.rfind(['/', '\\']) {
        Some(i) if names.len() > 1 => first.get(..=i).unwrap_or("").to_owned(),
        _ if names.len() == 1 => first.rfind(['/', '\\']).and_then(|i| first.get(..=i)).unwrap_or("").to_owned(),
        _ => String::new(),
    }
}

/// Write `text` at `dir`/`rel`, refusing a path through a symbolic link.
fn extract_one(dir: &std::path::Path, rel: &std::path::Path, text: &[u8]) -> Result<PathBuf, String> {
    let mut at = dir.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        if let Ok(m) = std::fs::symlink_metadata(&at) {
            if m.file_type().is_symlink() {
                return Err(format!("{} is a symbolic link: refused", at.display()));
            }
        }
        if i.saturating_add(1) < parts.len() {
            std::fs::create_dir_all(&at).map_err(|e| format!("cannot create {}: {e}", at.display()))?;
        }
    }
    std::fs::write(&at, text).map_err(|e| format!("cannot write {}: {e}", at.display()))?;
    Ok(at)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sources(
    file: &std::path::Path,
    symbols: &SymbolPaths,
    extract: Option<&std::path::Path>,
    verify: Option<&std::path::Path>,
    roots: &[SourceRoot],
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let opened = open_pdb_with(file, symbols, None).map_err(open_error)?;
    let embedded = opened.pdb.origin == PdbOrigin::Embedded;
    let bad = |e: clrmap::Error| CliError::input(if embedded { inflated(e) } else { e });
    let pdb = PortablePdb::parse(&opened.pdb.bytes).map_err(bad)?;
    let links = match pdb.source_link() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("warning: {}: {e}: no SourceLink URLs", file.display());
            None
        }
    };
    let docs = (1..=pdb.document_count()).map(|rid| pdb.document_info(rid)).collect::<Result<Vec<_>, _>>().map_err(bad)?;
    let shared = shared_dir(&docs.iter().map(|d| d.name.clone()).collect::<Vec<_>>());
    if !json {
        writeln!(out, "documents: {}", docs.len())?;
    }
    let (mut failed, mut written) = (false, 0u64);
    let extracting = if extract.is_some() { crate::progress::Progress::items(docs.len() as u64, "extracting sources") } else { crate::progress::Progress::items(0, "") };
    for (rid, doc) in (1u32..).zip(&docs) {
        extracting.add(1);
        let source = pdb.embedded_source(rid).map_err(bad)?;
        let mut row = SourceOut {
            document: rid,
            name: doc.name.clone(),
            language: src::language_name(&doc.language).map(str::to_owned).or_else(|| (doc.language != [0; 16]).then(|| src::guid_text(&doc.language))),
            hash_algorithm: src::hash_name(&doc.hash_algorithm).map(str::to_owned).or_else(|| (doc.hash_algorithm != [0; 16]).then(|| src::guid_text(&doc.hash_algorithm))),
            hash: hex(&doc.hash),
            embedded: source.map(|s| EmbeddedOut { size: s.size(), stored: s.stored_size(), compressed: s.is_compressed() }),
            source_link: links.as_ref().and_then(|l| l.url(&doc.name)),
            extracted: None,
            verify: None,
            error: None,
        };
        if let (Some(dir), Some(s)) = (extract, source) {
            let result = match src::relative_path(&doc.name) {
                None => Err(format!("the name {:?} climbs out of the directory (or has no file name): refused", doc.name)),
                Some(_) if written.saturating_add(s.size()) > MAX_EXTRACT => Err(format!("over the {MAX_EXTRACT} bytes one extraction writes: not written")),
                Some(rel) => s.text(src::MAX_SOURCE).map_err(|e| e.to_string()).and_then(|text| {
                    written = written.saturating_add(text.len() as u64);
                    extract_one(dir, &rel, &text)
                }),
            };
            match result {
                Ok(p) => row.extracted = Some(p.display().to_string()),
                Err(e) => {
                    failed = true;
                    row.error = Some(e);
                }
            }
        }
        if let Some(root) = verify {
            let mapped = roots.iter().find_map(|r| r.local(&doc.name)).or_else(|| {
                let rest = doc.name.get(shared.len()..).unwrap_or(&doc.name);
                src::relative_path(rest).map(|r| root.join(r))
            });
            let status = match &mapped {
                // No hash (or one clrmap does not compute): nothing to check the file against.
                _ if src::hash_name(&doc.hash_algorithm).is_none() => "unknown_hash",
                None => "missing",
                Some(p) => match clrmap::fs::read_regular(p, src::MAX_SOURCE as u64) {
                    Err(_) => "missing",
                    Ok(bytes) => match src::hash_file(&doc.hash_algorithm, &bytes) {
                        None => "unknown_hash",
                        Some(h) if h == doc.hash => "match",
                        Some(_) => "differ",
                    },
                },
            };
            failed |= matches!(status, "missing" | "differ");
            row.verify = Some(VerifyOut { status, path: mapped.map(|p| p.display().to_string()).unwrap_or_default() });
        }
        if json {
            serde_json::to_writer(&mut *out, &row).map_err(crate::output::json_io)?;
            writeln!(out)?;
            continue;
        }
        writeln!(out, "  {:>3}  {}", rid, Text(&row.name))?;
        let embedded_text = match &row.embedded {
            Some(e) if e.compressed => format!("embedded {} bytes (deflated to {})", e.size, e.stored),
            Some(e) => format!("embedded {} bytes", e.size),
            None => "not embedded".to_owned(),
        };
        let hash = match &row.hash_algorithm {
            Some(a) => format!("{a} {}", row.hash),
            None => "no hash".to_owned(),
        };
        writeln!(out, "       {} {hash}, {embedded_text}", row.language.as_deref().unwrap_or("?"))?;
        if let Some(url) = &row.source_link {
            writeln!(out, "       source link: {}", Text(url))?;
        }
        if let Some(p) = &row.extracted {
            writeln!(out, "       extracted: {}", Text(p))?;
        }
        if let Some(v) = &row.verify {
            writeln!(out, "       verify: {} {}", v.status, Text(&v.path))?;
        }
        if let Some(e) = &row.error {
            writeln!(out, "       error: {}", Text(e))?;
        }
    }
    if failed {
        return Err(CliError::Message(format!("{}: a document was refused, or a file differs or is missing (see above)", file.display())));
    }
    Ok(())
}

//! `clrmap perf`: Linux perf's jitdump (with source lines) and perf map, offline, from a capture
//! or a trace; and enrichment of the jitdump the runtime wrote (docs/perf.md).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use clrmap::jitdump::build::{enrich_stream, perf_map, plan, write_new};
use clrmap::jitdump::read::StreamError;
use clrmap::jitdump::{host_machine, FileHeader};
use clrmap::symbolizer::{Options, SourceKind, Symbolizer};

use crate::open::{open_error, warn};
use crate::output::CliError;

/// `clrmap perf ...`
#[derive(Debug, Subcommand)]
pub enum PerfCommand {
    /// Write `jit-PID.dump` for `perf inject --jit`: each body's JIT_CODE_DEBUG_INFO (its source
    /// lines from its module's PDB) and JIT_CODE_LOAD (ReadyToRun code read from its image;
    /// jitted code zero-filled: no `perf annotate` for it). A trace names its process.
    /// With --enrich, add the source lines, and any body it lacks, to the jitdump the runtime
    /// wrote for the same run (DOTNET_PerfMapEnabled=1), keeping its records and timestamps.
    ///
    /// Example: `clrmap perf jitdump examples/frames.nettrace --symbol-path tests/fixtures/frames/debug-embedded -o /tmp/jit-31272.dump`;
    /// to enrich the runtime's own file: `clrmap perf jitdump app.capture --enrich /tmp/jit-1234.dump`
    #[command(verbatim_doc_comment)]
    Jitdump(JitdumpArgs),
    /// Write a perf map (`perf-PID.map`: `START SIZE NAME`), ReadyToRun methods included.
    ///
    /// Example: `clrmap perf map examples/frames.nettrace -o /tmp/perf-31272.map`
    #[command(verbatim_doc_comment)]
    Map(MapArgs),
}

/// What both commands read.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// A capture written by `clrmap profile`, or a .nettrace.
    pub source: PathBuf,
    /// The process whose bodies to write (default: the only one the source names).
    #[arg(long)]
    pub pid: Option<u32>,
    /// A portable PDB to use (it must match its assembly's CodeView id).
    #[arg(long)]
    pub pdb: Option<PathBuf>,
    #[command(flatten)]
    pub symbols: crate::args::SymbolArgs,
}

/// `clrmap perf jitdump SOURCE [-o FILE] [--enrich DUMP]`
#[derive(Debug, Args)]
pub struct JitdumpArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// The file to write (default: `jit-PID.dump` here; with --enrich, the enriched file itself).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The runtime's jitdump of the same run, to enrich (its pid is the default --pid).
    /// Enriching it in place while its process still runs is refused: the runtime goes on
    /// appending to the old file, and its records after the rename would be lost.
    #[arg(long)]
    pub enrich: Option<PathBuf>,
    /// With --enrich: enrich in place even though the process that writes the file is still
    /// running (the records it writes after clrmap has read the file are lost).
    #[arg(long, requires = "enrich")]
    pub force: bool,
    /// The timestamp (CLOCK_MONOTONIC ns) of every record of a new file (default 0).
    #[arg(long, default_value_t = 0)]
    pub timestamp: u64,
}

/// `clrmap perf map SOURCE [-o FILE]`
#[derive(Debug, Args)]
pub struct MapArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// The file to write (default: `perf-PID.map` here).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Run a `perf` command.
pub fn run(c: PerfCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match c {
        PerfCommand::Jitdump(a) => jitdump(a, out),
        PerfCommand::Map(a) => map(a, out),
    }
}

fn open(a: &SourceArgs) -> Result<Symbolizer, CliError> {
    let options = Options { symbols: a.symbols.paths(a.pdb.clone()) };
    let sym = Symbolizer::open(&a.source, options).map_err(open_error)?;
    if sym.kind() == SourceKind::ReadyToRun {
        return Err(CliError::Usage(format!("{}: an image has no load addresses; give a capture or a trace of the process", a.source.display())));
    }
    warn(&a.source, sym.warnings());
    Ok(sym)
}

/// The process to write: `--pid`, else the only one the bodies name.
fn choose_pid(sym: &Symbolizer, pid: Option<u32>) -> Result<u32, CliError> {
    if let Some(p) = pid {
        return Ok(p);
    }
    let mut pids: Vec<u32> = sym.store().bodies().iter().filter_map(|b| b.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    match pids.as_slice() {
        [one] => Ok(*one),
        [] => Err(CliError::Usage("the source names no process: pass --pid".into())),
        many => Err(CliError::Usage(format!("the source has {} processes ({}): pass --pid", many.len(), join(many)))),
    }
}

fn join(pids: &[u32]) -> String {
    pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// Code starts in recording order: the source's own order (a capture's lines, a trace's events),
/// as the symbolizer keeps its bodies. The source is not read again: a trace can be far larger
/// than its bodies.
fn recording_order(sym: &Symbolizer, pid: u32) -> Vec<u64> {
    sym.store().bodies().iter().filter(|b| b.pid.is_none_or(|p| p == pid)).filter_map(|b| b.start).collect()
}

/// Write `bytes` as `path`, whole or not at all (`clrmap::fs::write_new`: an exclusive temporary
/// file beside it, renamed over it; removed on failure). Errors name `path`.
fn replace(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    clrmap::fs::write_new(path, bytes).map_err(|e| CliError::Kinded { kind: "io", message: format!("cannot write {}: {e}", path.display()) })
}

/// The pids that may be writing a jitdump: its header's, and the one in its name `jit-PID.dump`.
fn writer_pids(dump_path: &Path) -> Result<Vec<u32>, CliError> {
    let io = |e: std::io::Error| CliError::Kinded { kind: "io", message: format!("cannot read {}: {e}", dump_path.display()) };
    let mut head = Vec::with_capacity(clrmap::jitdump::HEADER_SIZE as usize);
    let file = clrmap::fs::open_regular(dump_path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, u64::from(clrmap::jitdump::HEADER_SIZE)), &mut head).map_err(io)?;
    // A file that is no jitdump is bad input (its kind and offset), found before any work.
    let (header, _) = clrmap::jitdump::read::parse_header(&head, len).map_err(CliError::input)?;
    let mut pids = vec![header.pid];
    let named = dump_path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix("jit-")?.strip_suffix(".dump")?.parse::<u32>().ok());
    pids.extend(named.filter(|n| !pids.contains(n)));
    Ok(pids)
}

/// Whether process `pid` runs and may still write `file`: it has it open or mapped, or that
/// cannot be seen (another user's process). A process that exists but does not hold the file
/// (its pid was reused) is not its writer.
fn may_write(pid: u32, file: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let Ok(stat) = std::fs::read_to_string(proc.join("stat")) else { return false };
    // The state follows the command name's closing parenthesis; a zombie writes nothing.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    if matches!(state, None | Some('Z' | 'X' | 'x')) {
        return false;
    }
    let Ok(meta) = std::fs::metadata(file) else { return true };
    let (dev, ino) = (meta.dev(), meta.ino());
    let Ok(fds) = std::fs::read_dir(proc.join("fd")) else { return true };
    let open = fds.flatten().any(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino));
    let Ok(maps) = std::fs::read_to_string(proc.join("maps")) else { return true };
    let canonical = std::fs::canonicalize(file).ok();
    // `START-END PERMS OFFSET DEV INODE PATH`
    let mapped = maps.lines().any(|l| {
        let mut f = l.split_whitespace().skip(4);
        f.next().is_some_and(|i| i == ino.to_string()) && f.next().map(Path::new) == canonical.as_deref()
    });
    open || mapped
}

/// Whether two paths name the same file (the second may not exist yet).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

fn jitdump(a: JitdumpArgs, out: &mut dyn Write) -> Result<(), CliError> {
    if let Some(dump_path) = &a.enrich {
        // Checked before any work: the runtime appends to the file until its process ends.
        let target = a.output.clone().unwrap_or_else(|| dump_path.clone());
        let in_place = a.output.is_none() || same_file(dump_path, &target);
        let writers: Vec<u32> = writer_pids(dump_path)?.into_iter().filter(|&p| may_write(p, dump_path)).collect();
        if let Some(writer) = writers.first() {
            if in_place && !a.force {
                return Err(CliError::Usage(format!(
                    "{}: process {writer} is still writing it; enriching it in place now would lose the records it writes after the rename. Enrich it after the process exits, write the result elsewhere with -o, or pass --force",
                    dump_path.display()
                )));
            }
            let lost = if in_place { "the records it writes from now on are lost" } else { "records it writes from now on are not in the output" };
            eprintln!("warning: {}: process {writer} is still writing it; {lost}", dump_path.display());
        }
    }
    let sym = open(&a.source)?;
    if let Some(dump_path) = &a.enrich {
        // Both files are streamed: memory follows the records, not the files' sizes.
        let read_error = |e: std::io::Error| CliError::Kinded { kind: "io", message: format!("cannot read {}: {e}", dump_path.display()) };
        let mut dump = clrmap::fs::open_regular(dump_path).map_err(read_error)?;
        let len = dump.metadata().map_err(read_error)?.len();
        let mut head = Vec::with_capacity(clrmap::jitdump::HEADER_SIZE as usize);
        std::io::Read::read_to_end(&mut std::io::Read::take(&mut dump, u64::from(clrmap::jitdump::HEADER_SIZE)), &mut head).map_err(read_error)?;
        let (header, _) = clrmap::jitdump::read::parse_header(&head, len).map_err(CliError::input)?;
        let pid = a.source.pid.unwrap_or(header.pid);
        let planned = plan(&sym, Some(pid));
        crate::open::notes(&sym, false);
        let order = recording_order(&sym, pid);
        let target = a.output.clone().unwrap_or_else(|| dump_path.clone());
        let write_error = |e: std::io::Error| CliError::Kinded { kind: "io", message: format!("cannot write {}: {e}", target.display()) };
        let mut new = clrmap::fs::NewFile::create(&target).map_err(write_error)?;
        let (stats, warning) = {
            let mut writer = std::io::BufWriter::new(new.file());
            let done = enrich_stream(&mut dump, len, &planned, &order, &mut writer).map_err(|e| stream_error(e, dump_path, &target))?;
            writer.flush().map_err(write_error)?;
            done
        };
        new.commit().map_err(write_error)?;
        if let Some(w) = warning {
            eprintln!("warning: {}: {w}; the torn record was dropped", dump_path.display());
        }
        writeln!(out, "enriched {} (pid {pid}): kept {} records, added lines to {} code loads, added {} bodies", target.display(), stats.kept, stats.lines_added, stats.loads_added)?;
        return Ok(());
    }
    let pid = choose_pid(&sym, a.source.pid)?;
    let planned = plan(&sym, Some(pid));
    crate::open::notes(&sym, false);
    let header = FileHeader { elf_machine: host_machine(), pid, timestamp: a.timestamp, flags: 0 };
    let bytes = write_new(&planned, header);
    let target = a.output.unwrap_or_else(|| PathBuf::from(format!("jit-{pid}.dump")));
    replace(&target, &bytes)?;
    let with_lines = planned.iter().filter(|p| !p.lines.is_empty()).count();
    writeln!(out, "wrote {} (pid {pid}): {} code loads, {with_lines} with source lines", target.display(), planned.len())?;
    Ok(())
}

/// A streaming enrich's failure: the jitdump's kind and location, or an I/O error.
fn stream_error(e: StreamError, dump_path: &Path, target: &Path) -> CliError {
    match e {
        StreamError::Input(error) => CliError::input(error),
        StreamError::Io(e) => CliError::Kinded { kind: "io", message: format!("cannot enrich {} into {}: {e}", dump_path.display(), target.display()) },
    }
}

fn map(a: MapArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let sym = open(&a.source)?;
    let pid = choose_pid(&sym, a.source.pid)?;
    let planned = plan(&sym, Some(pid));
    crate::open::notes(&sym, false);
    let target = a.output.unwrap_or_else(|| PathBuf::from(format!("perf-{pid}.map")));
    replace(&target, perf_map(&planned).as_bytes())?;
    writeln!(out, "wrote {} (pid {pid}): {} symbols", target.display(), planned.len())?;
    Ok(())
}

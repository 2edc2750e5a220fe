//! `clrmap flame`: a trace's CPU samples (the runtime's sample profiler) as a flame graph's
//! input, with source lines: collapsed stacks, a speedscope file or a pprof profile
//! (docs/flame.md).

use std::io::{BufReader, Write};
use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Args;

use clrmap::profile::{Format, Profile, ReadOptions};
use clrmap::symbolizer::{Options, Symbolizer};

use crate::output::{CliError, Text};

/// A TRACE that is a known file of another kind: an error (`unrecognized_source`) that says what
/// the file is and that flame wants a trace. Only the first bytes are read; a file that cannot be
/// read, or is of no kind known here, is left to the trace reader, which names why.
fn not_a_trace(path: &std::path::Path) -> Result<(), CliError> {
    let Ok(file) = clrmap::fs::open_input(path) else { return Ok(()) };
    let mut head = Vec::with_capacity(32);
    let _ = std::io::Read::read_to_end(&mut std::io::Read::take(file, 32), &mut head);
    let what = if head.starts_with(b"MZ") {
        "a PE file (a .NET assembly or ReadyToRun image), which holds code but no samples"
    } else if head.starts_with(b"BSJB") {
        "a portable PDB (symbols: give it with --pdb, or its directory with --symbol-path)"
    } else if head.starts_with(b"Microsoft C/C++ MSF 7.00") {
        "a Windows PDB"
    } else if head.starts_with(b"{\"format\":\"clrmap-capture\"") {
        "a clrmap capture (`clrmap profile -o`), which records code and maps but no samples"
    } else if head.starts_with(b"\x7fELF") {
        "an ELF file (a core dump or a native binary)"
    } else {
        // A trace (or something unknown, which the trace reader names at its first bytes).
        return Ok(());
    };
    Err(CliError::Kinded {
        kind: "unrecognized_source",
        message: format!(
            "{}: {what}. flame reads a trace: an EventPipe .nettrace with the runtime's CPU samples (`clrmap trace collect --cpu`, or dotnet-trace's cpu-sampling profile)",
            path.display()
        ),
    })
}

/// `--format`: the library's formats, by their names and help ([`Format::ALL`]), so a new format
/// is a change to the library alone.
fn format_parser() -> impl clap::builder::TypedValueParser<Value = Format> {
    let values = Format::ALL.map(|f| PossibleValue::new(f.name()).help(f.about()));
    PossibleValuesParser::new(values).map(|name| Format::from_name(&name).unwrap_or(Format::Collapsed))
}

/// `clrmap flame TRACE`
#[derive(Debug, Args)]
pub struct FlameArgs {
    /// The trace: a .nettrace with the runtime's sample profiler (`clrmap trace collect --cpu`,
    /// or dotnet-trace's cpu-sampling profile) and the JIT's method events.
    pub trace: PathBuf,
    /// The output format.
    #[arg(long, value_parser = format_parser(), default_value = "collapsed")]
    pub format: Format,
    /// Write to FILE (created whole: an existing file is replaced only when the profile is
    /// complete) instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub symbols: crate::args::SymbolArgs,
    /// A portable PDB to use (it must match its assembly's CodeView id, or this fails with
    /// pdb_mismatch).
    #[arg(long, value_name = "FILE")]
    pub pdb: Option<PathBuf>,
    /// Keep only what ran: the samples the runtime's sampler took while their thread ran managed
    /// code. Waits are left out (idle thread-pool workers, the pool's gate thread, a thread
    /// blocked on a lock), and so is time in native code, which the sampler marks apart.
    #[arg(long)]
    pub running: bool,
    /// Give each managed frame its IL offset, as `Method [IL_001a] (File.cs:LINE)`: a frame is
    /// then one place in a method's IL rather than one line, and a frame whose module has no PDB
    /// still says where in the method it was.
    #[arg(long)]
    pub il_offsets: bool,
}

/// Run it. A torn trace gives the profile of every whole sample before the cut, with a warning
/// (status 0); a trace with no samples is `no_samples`, and a file that is no trace
/// `unrecognized_source`, naming what it is (status 1 both).
pub fn run(a: FlameArgs, out: &mut dyn Write) -> Result<(), CliError> {
    not_a_trace(&a.trace)?;
    let options = Options { symbols: a.symbols.paths(a.pdb.clone()) };
    let finding = if options.symbols.servers.is_some() {
        crate::progress::Progress::waiting("reading the trace and finding symbols (symbol servers)")
    } else {
        crate::progress::Progress::waiting("reading the trace's methods")
    };
    let sym = Symbolizer::open(&a.trace, options).map_err(crate::open::open_error)?;
    drop(finding);
    crate::open::warn(&a.trace, sym.warnings());
    let format = a.format;
    let file = clrmap::fs::open_input(&a.trace).map_err(crate::open::open_error)?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let reading = crate::progress::Reading::new(file, crate::progress::Progress::bytes(total, "sampling stacks"));
    let options = ReadOptions { per_thread: format.per_thread(), running: a.running, il_offsets: a.il_offsets, ..ReadOptions::default() };
    let (profile, fault) = Profile::read_with(&sym, BufReader::with_capacity(1 << 20, reading), &options).map_err(CliError::input)?;
    let shown = a.trace.display().to_string();
    if let Some(f) = fault {
        // Said once by the symbolizer's open when the same fault stopped it too.
        if !sym.warnings().iter().any(|w| w.location == f.location) {
            crate::open::warn(&a.trace, std::slice::from_ref(&f));
        }
    }
    let st = profile.stats();
    if st.trace.samples == 0 {
        return Err(CliError::Kinded {
            kind: "no_samples",
            message: format!(
                "{shown}: no CPU samples (the runtime's sample profiler, Microsoft-DotNETCore-SampleProfiler, was not recorded): \
                 record them with `clrmap trace collect --cpu -o app.nettrace --pid PID` (or `-- dotnet app.dll`), or dotnet-trace's cpu-sampling profile"
            ),
        });
    }
    if st.trace.unknown_stack_ids > 0 {
        eprintln!("warning: {}: {} samples name a stack the trace does not hold (left out)", Text(&shown), st.trace.unknown_stack_ids);
    }
    if st.trace.stacks_dropped > 0 {
        eprintln!("warning: {}: {} stacks were torn or past the stack table's bound (left out)", Text(&shown), st.trace.stacks_dropped);
    }
    if st.folded > 0 {
        eprintln!("warning: {}: {} samples past the profile's bound of {} call-tree nodes were counted at their deepest known caller", Text(&shown), st.folded, clrmap::profile::MAX_NODES);
    }
    let external = st.samples_external.saturating_mul(100).checked_div(st.trace.samples).unwrap_or(0);
    if !a.running && external >= 50 {
        eprintln!("note: {}: {external}% of the samples were taken outside managed code (threads waiting, or in native code); --running leaves them out", Text(&shown));
    }
    if a.running && st.trace.samples > 0 && st.samples.saturating_mul(100) < st.trace.samples {
        eprintln!(
            "warning: {}: the sampler marked {} of {} samples external, so --running keeps almost nothing: .NET 9's sampler marks threads running managed code external too (measured on 9.0.20); leave --running out",
            Text(&shown),
            st.samples_external,
            st.trace.samples
        );
    }
    if a.running {
        eprintln!(
            "note: {}: --running left out {} samples taken outside managed code (waiting, or in native code), and with them {} threads that never ran managed code",
            Text(&shown),
            st.samples_left_out,
            st.threads_left_out
        );
    }
    crate::open::notes(&sym, false);
    let name = a.trace.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| shown.clone());
    match &a.output {
        Some(target) => {
            let write_error = |e: std::io::Error| CliError::Kinded { kind: "io", message: format!("cannot write {}: {e}", target.display()) };
            let mut new = clrmap::fs::NewFile::create(target).map_err(write_error)?;
            {
                let mut w = std::io::BufWriter::new(new.file());
                profile.write(format, &name, &mut w).map_err(write_error)?;
                w.flush().map_err(write_error)?;
            }
            new.commit().map_err(write_error)?;
        }
        None => profile.write(format, &name, out).map_err(CliError::Io)?,
    }
    Ok(())
}

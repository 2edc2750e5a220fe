//! `clrmap`: generic dictionary maps and IL-to-native maps of the CLR, from the command line.
//!
//! Exit status: 0 success, 1 bad input (the error names its kind and offset), 2 bad usage.
//! A panic (101) is always a bug.

// Only `mapped` (memory-mapped inputs) may use `unsafe`; it allows it for itself.
#![deny(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod args;
mod cmd;
#[cfg(test)]
mod golden;
mod mapped;
mod open;
mod output;
mod progress;

use output::CliError;

/// clrmap: the CLR's generic dictionary maps (GetGenericDictionaryInfo) and IL-to-native maps
/// (GetILToNativeMapping), read from real .NET files.
#[derive(Debug, Parser)]
#[command(name = "clrmap", version, about, long_about = None)]
struct Cli {
    /// No progress on stderr (it is shown only when stderr is a terminal anyway).
    #[arg(short = 'q', long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// ECMA-335 type signatures: decode and print.
    #[command(subcommand)]
    Sig(cmd::sig::SigCommand),
    /// Generic dictionary maps (GetGenericDictionaryInfo): show, look up, validate, build.
    #[command(subcommand)]
    Dict(cmd::dict::DictCommand),
    /// ECMA-335 metadata of .NET assemblies: TypeSpecs and MethodSpecs with real names.
    #[command(subcommand)]
    Meta(cmd::meta::MetaCommand),
    /// IL-to-native maps (GetILToNativeMapping) from ReadyToRun images, traces, captures or a
    /// running process (--pid): dump, resolve, frames, variables.
    #[command(subcommand)]
    Il(cmd::il::IlCommand),
    /// Portable PDBs: documents and sequence points.
    #[command(subcommand)]
    Pdb(cmd::pdb::PdbCommand),
    /// Native addresses to method, IL offset and source file:line:column, by the runtime's own
    /// stack-trace rules; llvm-symbolizer's layout, or JSON lines.
    ///
    /// Example: `echo 0x7F8CE5225927 | clrmap symbolize examples/frames.nettrace --symbol-path tests/fixtures/frames/debug-embedded --return-address`
    #[command(verbatim_doc_comment)]
    Symbolize(cmd::symbolize::SymbolizeArgs),
    /// Printed .NET exceptions and stack traces in, the same text out, with each frame printed
    /// without its PDB (`in Shop.dll:token 0x6000004+0x1b`, .NET 8 with the
    /// Switch.System.Diagnostics.StackTrace.ShowILOffsets switch) turned into the file and line
    /// the runtime prints with the PDB (`in /_/src/Shop.cs:line 36`). Every other byte is kept.
    ///
    /// Example: `printf '   at Frames.Program.Main(String[] args) in Frames.dll:token 0x600003e+0x6\n' | clrmap stacktrace --symbol-path tests/fixtures/frames/debug-portable`
    /// (a frame of the committed Frames fixture)
    /// prints `   at Frames.Program.Main(String[] args) in /_/src/Frames.cs:line 696`.
    /// A log: `clrmap stacktrace crash.log --symbol-path build/pdbs > crash-with-lines.log`
    #[command(verbatim_doc_comment)]
    Stacktrace(cmd::stacktrace::StacktraceArgs),
    /// Crash dumps: every thread of a Linux core of a .NET process, with its managed frames on
    /// .NET 10 and later, read through the data descriptor the runtime exports for debuggers (no
    /// DAC, no SOS). .NET 9 gives the threads alone, .NET 8 the core's threads; a note says why.
    ///
    /// Example: `dotnet tests/fixtures/perf/Hot.dll 20 & sleep 1; "$(dirname "$(readlink -f "$(command -v dotnet)")")"/shared/Microsoft.NETCore.App/*/createdump -u -f /tmp/hot.core $!; clrmap dump /tmp/hot.core; kill $!`
    /// (createdump, the runtime's dumper, is beside libcoreclr.so in the framework directory;
    /// `-u` makes a full dump). At a crash, the runtime writes one itself when run with
    /// DOTNET_DbgEnableMiniDump=1 DOTNET_DbgMiniDumpType=4 DOTNET_DbgMiniDumpName=/tmp/app.core.
    /// `clrmap dump /tmp/app.core --json` prints one JSON document.
    #[command(verbatim_doc_comment)]
    Dump(cmd::dump::DumpArgs),
    /// CPU profiles from a trace's samples (the runtime's sample profiler): every frame with its
    /// method and source line, as collapsed stacks (flamegraph.pl, inferno), a speedscope file
    /// or a gzipped pprof profile.
    ///
    /// Example: `clrmap flame tests/fixtures/flame/hot-8.0.4.nettrace --symbol-path tests/fixtures/perf`
    /// (a committed trace). Your own app: `clrmap flame app.nettrace --symbol-path bin/Release/net8.0 | inferno-flamegraph > app.svg`
    /// (the trace from `clrmap trace collect --pid PID --cpu -o app.nettrace`);
    /// `clrmap flame app.nettrace --format speedscope -o app.speedscope.json`, then open it at
    /// https://www.speedscope.app; `clrmap flame app.nettrace --format pprof -o app.pb.gz`, then
    /// `go tool pprof -http=: app.pb.gz`.
    #[command(verbatim_doc_comment)]
    Flame(cmd::flame::FlameArgs),
    /// A stateless symbolication service over HTTP/1.1: POST /symbolicate (JSON modules and
    /// frames: token and IL offset, Sentry's .NET frames, the OpenTelemetry eBPF profiler's
    /// jitted and ReadyToRun frames), POST /stacktrace (printed stack traces, as `clrmap
    /// stacktrace`), GET /healthz, GET /metrics (Prometheus). Symbols come from --symbol-path
    /// folders and --symbol-server upstreams through one cache; parsed ones stay in a bounded
    /// in-memory LRU. Runs until SIGTERM or Ctrl-C, then finishes the requests in flight. One
    /// JSON log line per request on stderr.
    ///
    /// Example: `clrmap serve --listen 127.0.0.1:18473 --symbol-path tests/fixtures/frames/debug-portable & sleep 1; curl -s 127.0.0.1:18473/symbolicate -d '{"modules":[{"name":"Frames.dll"}],"frames":[{"module":0,"token":100663297,"il_offset":1}]}'; kill $!`
    /// (from the repository: serve, ask, stop) prints
    /// `{"frames":[{"module":"Frames.dll","token":100663297,"method":"Frames.Trace::Capture","il_offset":1,"file":"/_/src/Frames.cs","line":26,...}]}`.
    #[command(verbatim_doc_comment)]
    Serve(cmd::serve::ServeArgs),
    /// EventPipe traces: event statistics, and `collect` from a running process.
    #[command(subcommand)]
    Trace(TraceGroup),
    /// The .NET processes this user can reach through their diagnostics port: pid, runtime
    /// version, command line.
    ///
    /// Example: `clrmap ps --json`
    #[command(verbatim_doc_comment)]
    Ps(cmd::diag::PsArgs),
    /// Linux perf: jitdump files with source lines and perf maps, from a capture or a trace.
    #[command(subcommand)]
    Perf(cmd::perf::PerfCommand),
    /// Run a .NET command with the clrmap profiler loaded, or attach it to a running process
    /// (`--pid`), and capture every body's map.
    ///
    /// Example: `clrmap profile -o /tmp/frames.capture -- dotnet tests/fixtures/frames/release-portable/Frames.dll`
    /// (`dotnet` is the .NET runtime's host; after `scripts/test.sh` it is
    /// `.dotnet/8.0/dnv/net/runtime/.net/dotnet`). Then: `clrmap il dump /tmp/frames.capture`.
    /// Attached to a running process: `clrmap profile --pid PID -o live.capture --duration 10s`
    #[command(verbatim_doc_comment)]
    Profile(cmd::profile::ProfileArgs),
}

/// `clrmap trace ...`: the file commands, and `collect` from a running process.
#[derive(Debug, Subcommand)]
enum TraceGroup {
    /// Stream a trace from a running .NET process through its diagnostics port (no restart), with
    /// the rundown at stop: every jitted method's map, those jitted before the attach included.
    /// Ctrl-C or SIGTERM stops it cleanly; the file is always a valid trace.
    ///
    /// Example: `dotnet tests/fixtures/perf/Hot.dll 6 & sleep 1; clrmap trace collect --pid $! -o /tmp/hot.nettrace --duration 2s`
    /// (`dotnet` is the .NET runtime's host; after `scripts/test.sh` it is
    /// `.dotnet/8.0/dnv/net/runtime/.net/dotnet`).
    /// Or start the app under the trace, start-up included (.NET 5 and later), with a
    /// CPU profile for `clrmap flame`:
    /// `clrmap trace collect --cpu -o /tmp/cpu.nettrace -- dotnet tests/fixtures/cpu/Cpu.dll 2`
    #[command(verbatim_doc_comment, override_usage = "clrmap trace collect [OPTIONS] -o FILE --pid PID\n       clrmap trace collect [OPTIONS] -o FILE -- COMMAND...")]
    Collect(cmd::diag::CollectArgs),
    #[command(flatten)]
    File(cmd::trace::TraceCommand),
}

fn run(cli: Cli, out: &mut dyn Write) -> Result<(), CliError> {
    match cli.command {
        Command::Profile(_) => Ok(()),
        Command::Sig(c) => cmd::sig::run(c, out),
        Command::Dict(c) => cmd::dict::run(c, out),
        Command::Meta(c) => cmd::meta::run(c, out),
        Command::Il(c) => cmd::il::run(c, out),
        Command::Trace(TraceGroup::File(c)) => cmd::trace::run(c, out),
        Command::Trace(TraceGroup::Collect(_)) => Ok(()),
        Command::Ps(a) => cmd::diag::ps(&a, out).map_err(CliError::Io),
        Command::Pdb(c) => cmd::pdb::run(c, out),
        Command::Symbolize(a) => cmd::symbolize::run(a, out),
        Command::Stacktrace(a) => cmd::stacktrace::run(a, out),
        Command::Dump(a) => cmd::dump::run(a, out),
        Command::Flame(a) => cmd::flame::run(a, out),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Perf(c) => cmd::perf::run(c, out),
    }
}

/// `trace collect` with neither `--pid` nor `-- COMMAND`: a usage error (status 2) that names
/// both (clap's own would name `--pid` alone, as if it were always required).
fn collect_needs_a_target() -> clap::Error {
    let mut cli = <Cli as clap::CommandFactory>::command();
    cli.build();
    let mut collect = cli.find_subcommand("trace").and_then(|t| t.find_subcommand("collect")).cloned().unwrap_or_else(|| cli.clone());
    collect.error(
        clap::error::ErrorKind::MissingRequiredArgument,
        "give one of --pid PID (a running .NET process to attach to) or -- COMMAND (a program to start under the trace, e.g. `-- dotnet app.dll`)",
    )
}

fn main() -> ExitCode {
    // `--json` anywhere on the command line: errors too are JSON lines (docs/output.md#errors).
    let json = std::env::args_os().any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    progress::set_quiet(cli.quiet);
    if let Command::Trace(TraceGroup::Collect(args)) = &cli.command {
        if !args.has_target() {
            let _ = collect_needs_a_target().print();
            return ExitCode::from(2);
        }
        return cmd::diag::collect(args);
    }
    if let Command::Profile(args) = cli.command {
        return match cmd::profile::run(args) {
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(e) => output::report_as(&e, json),
        };
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = run(cli, &mut out);
    let flushed = out.flush();
    match (result, flushed) {
        (Ok(()), Ok(())) => ExitCode::SUCCESS,
        (Ok(()), Err(e)) => output::report(&CliError::Io(e)),
        (Err(e), _) => output::report_as(&e, json),
    }
}

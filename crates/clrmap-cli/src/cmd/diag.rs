//! The diagnostics port (docs/attach.md): `clrmap ps`, `clrmap trace collect`, and the `--pid`
//! snapshot behind `il dump --pid`, `il at --pid` and `symbolize --pid`.
//!
//! Exit status of these commands, beyond 0, 1 (other errors) and 2 (bad usage):
//!
//! | status | kind | meaning |
//! |---|---|---|
//! | 3 | `no_such_process` | no process has this pid |
//! | 4 | `not_dotnet` | the process has no .NET diagnostics socket, or nothing listens on it |
//! | 5 | `permission_denied` | the socket belongs to another user |
//! | 6 | `unsupported_command` | the runtime is too old for the command |
//! | 7 | `target_exited` | the process exited mid-session: every whole block received is kept |
//! | 8 | `protocol`, `server_error`, `timeout` | the socket does not speak the protocol, refused, or went quiet |

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use clrmap::diag::{self, Client, CollectControl, DiagError, DiagErrorKind, EndReason, Provider, SessionConfig};
use clrmap::symbolizer::OpenedSource;

/// The exit status of a diagnostics-port error (module docs).
pub fn exit_status(kind: DiagErrorKind) -> u8 {
    match kind {
        DiagErrorKind::NoSuchProcess => 3,
        DiagErrorKind::NotDotnet => 4,
        DiagErrorKind::PermissionDenied => 5,
        DiagErrorKind::UnsupportedCommand => 6,
        DiagErrorKind::Protocol | DiagErrorKind::ServerError | DiagErrorKind::Timeout => 8,
        DiagErrorKind::BadArgument => 2,
        DiagErrorKind::Io => 1,
        DiagErrorKind::TargetExited => EXIT_TARGET_EXITED,
    }
}

/// Status 7: the target exited mid-session.
pub const EXIT_TARGET_EXITED: u8 = 7;

/// Print a diagnostics-port error on stderr and give its exit status.
pub fn report(e: &DiagError) -> ExitCode {
    eprintln!("error: {}: {}", e.kind, e.message);
    ExitCode::from(exit_status(e.kind))
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

/// `10`, `10s`, `500ms`, `2m`: a duration (plain numbers are seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let v: f64 = num.parse().map_err(|_| format!("not a duration: {s} (say 30s, 500ms or 2m)"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(format!("not a duration unit: {unit} (ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("not a duration: {s}"))
}

/// `clrmap ps`
#[derive(Debug, Args)]
pub struct PsArgs {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// How long to wait for each process's answer.
    #[arg(long, default_value = "2s", value_parser = parse_timeout)]
    timeout: Duration,
}

/// `clrmap trace collect --pid PID -o FILE`
#[derive(Debug, Args)]
pub struct CollectArgs {
    /// The running .NET process.
    #[arg(long)]
    pid: u32,
    /// The trace to write (.nettrace), streamed as the bytes arrive.
    #[arg(short, long)]
    output: PathBuf,
    /// Stop after this long (30s, 500ms, 2m); without it, at Ctrl-C or SIGTERM.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Providers, dotnet-trace style: `Name[:Keywords[:Level[:Filter]]]`, comma-separated.
    /// Default: Microsoft-Windows-DotNETRuntime:0x60098:5 (JIT, loader and IL-map events).
    #[arg(long)]
    providers: Option<String>,
    /// No rundown at stop (the maps of methods jitted before the attach are then missing).
    #[arg(long)]
    no_rundown: bool,
    /// How long to wait for the runtime's answers, and for more of the rundown after the stop.
    #[arg(long, default_value = "10s", value_parser = parse_timeout)]
    timeout: Duration,
}

/// `clrmap trace ...`: the file commands, and `collect` from a running process.
#[derive(Debug, Subcommand)]
pub enum TraceGroup {
    /// Stream a trace from a running .NET process through its diagnostics port (no restart), with
    /// the rundown at stop: every jitted method's map, those jitted before the attach included.
    /// Ctrl-C or SIGTERM stops it cleanly; the file is always a valid trace.
    ///
    /// Example: `clrmap trace collect --pid 1234 -o app.nettrace --duration 30s`
    #[command(verbatim_doc_comment)]
    Collect(CollectArgs),
    #[command(flatten)]
    File(crate::cmd::trace::TraceCommand),
}

/// Run `clrmap ps`.
pub fn ps(args: &PsArgs, out: &mut dyn Write) -> std::io::Result<()> {
    let procs = diag::list_processes(args.timeout);
    if !args.json {
        writeln!(out, "{:>8}  {:<10}  COMMAND", "PID", "RUNTIME")?;
    }
    for p in procs {
        // The runtime's own answer (ProcessInfo2, .NET 6+); else the libcoreclr.so it mapped.
        let runtime = p.runtime_version.clone().or_else(|| p.mapped_runtime.clone());
        if args.json {
            let v = serde_json::json!({
                "pid": p.pid,
                "command_line": p.command_line,
                "runtime_version": p.runtime_version,
                "mapped_runtime": p.mapped_runtime,
                "socket": p.socket.display().to_string(),
                "error": p.error.as_ref().map(|e| serde_json::json!({"kind": e.kind.as_str(), "message": e.message, "hresult": e.hresult})),
            });
            writeln!(out, "{v}")?;
        } else {
            writeln!(out, "{:>8}  {:<10}  {}", p.pid, runtime.as_deref().unwrap_or("-"), p.command_line.as_deref().unwrap_or("?"))?;
        }
    }
    Ok(())
}

/// Draws `received N KiB` on stderr, at most every 200 ms, when stderr is a terminal.
struct Progress {
    show: bool,
    last: Instant,
}

impl Progress {
    fn update(&mut self, bytes: u64) {
        if self.show && self.last.elapsed() >= Duration::from_millis(200) {
            self.last = Instant::now();
            eprint!("\rreceived {} KiB", bytes >> 10);
        }
    }
}

/// Run `clrmap trace collect`.
pub fn collect(args: &CollectArgs) -> ExitCode {
    let providers = match args.providers.as_deref().map(Provider::parse_list).transpose() {
        Ok(p) => p.unwrap_or_else(|| vec![Provider::jit_symbols()]),
        Err(e) => return report(&e),
    };
    let config = SessionConfig { rundown: !args.no_rundown, providers, ..SessionConfig::default() };
    let client = match Client::for_pid(args.pid, args.timeout) {
        Ok(c) => c,
        Err(e) => return report(&e),
    };
    // Ctrl-C and SIGTERM ask for a clean stop; a second one is left to the default (exit).
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)) {
        eprintln!("warning: no Ctrl-C handler ({e}); stop with --duration");
    }
    let mut file = match std::fs::File::create(&args.output) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", args.output.display());
            return ExitCode::from(1);
        }
    };
    let control = CollectControl { deadline: args.duration.and_then(|d| Instant::now().checked_add(d)), stop: &stop, poll: Duration::from_millis(100) };
    let terminal = std::io::stderr().is_terminal();
    let mut progress = Progress { show: terminal, last: Instant::now() };
    if terminal {
        let until = if args.duration.is_some() { "for the duration" } else { "until Ctrl-C" };
        eprintln!("collecting from process {} into {} {until}", args.pid, args.output.display());
    }
    let result = diag::collect(&client, &config, &mut file, &control, &mut |b| progress.update(b));
    if terminal {
        eprintln!();
    }
    let c = match result {
        Ok(c) => c,
        Err(e) => return report(&e),
    };
    match c.reason {
        EndReason::Stopped => {
            eprintln!("wrote {} ({} bytes, rundown included)", args.output.display(), c.written);
            ExitCode::SUCCESS
        }
        EndReason::TargetExited => {
            let how = if c.complete {
                format!("{} bytes, complete", c.written)
            } else {
                format!("{} bytes: the {} of {} received up to the last whole block, and the end tag", c.written, c.written.saturating_sub(1), c.received)
            };
            eprintln!("error: target_exited: process {} exited mid-session; wrote {} ({how})", args.pid, args.output.display());
            ExitCode::from(EXIT_TARGET_EXITED)
        }
        EndReason::Timeout => {
            eprintln!("error: timeout: the runtime sent nothing for {:?} after the stop; wrote {} ({} bytes, up to the last whole block)", args.timeout, args.output.display(), c.written);
            ExitCode::from(exit_status(DiagErrorKind::Timeout))
        }
    }
}

/// Every jitted method's map in process `pid`, now (`--pid` of `il dump`, `il at`, `symbolize`).
/// A rundown snapshot of process `pid`'s jitted methods, now (`il dump --pid`). A
/// diagnostics-port error carries its own exit status (module docs).
pub fn snapshot(pid: u32) -> Result<OpenedSource, crate::output::CliError> {
    match diag::snapshot(pid, diag::DEFAULT_TIMEOUT) {
        Ok(s) => {
            for w in &s.warnings {
                eprintln!("warning: process {pid}: the stream stopped early ({w}); every whole event before it was kept");
            }
            Ok(s)
        }
        Err(e) => Err(crate::output::CliError::Status(format!("{}: {}", e.kind, e.message), exit_status(e.kind))),
    }
}

/// A symbolizer over process `pid`'s jitted methods, now, with the PDB options of `frame`
/// (`il at --pid`, `symbolize --pid`).
pub fn symbolizer_for_pid(pid: u32, frame: &crate::cmd::symbolize::FrameArgs) -> Result<clrmap::symbolizer::Symbolizer, crate::output::CliError> {
    use clrmap::pdb::locate::SymbolPaths;
    let options = clrmap::symbolizer::Options { symbols: SymbolPaths { pdb: frame.pdb.clone(), dirs: frame.symbol_path.clone() } };
    clrmap::symbolizer::Symbolizer::from_opened(snapshot(pid)?, None, options).map_err(crate::cmd::symbolize::open_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("2y").is_err() && parse_duration("x").is_err() && parse_duration("-1s").is_err());
    }

    #[test]
    fn every_kind_has_its_own_status() {
        let kinds = [DiagErrorKind::NoSuchProcess, DiagErrorKind::NotDotnet, DiagErrorKind::PermissionDenied, DiagErrorKind::UnsupportedCommand];
        let codes: std::collections::BTreeSet<u8> = kinds.iter().map(|&k| exit_status(k)).chain([EXIT_TARGET_EXITED, exit_status(DiagErrorKind::Protocol)]).collect();
        assert_eq!(codes.len(), 6);
    }
}

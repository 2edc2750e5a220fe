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
//! | 8 | `protocol`, `server_error`, `timeout` | the socket does not speak the protocol, refused, went quiet, or did not end in time |
//! | 130 | `interrupted` | Ctrl-C or SIGTERM before the session started, or a second one during the rundown |

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use clrmap::diag::{self, Client, CollectControl, DiagErrorKind, EndReason, Provider, SessionConfig};

use crate::args::parse_duration;
use crate::open::{exit_status, report, EXIT_TARGET_EXITED};


/// `clrmap ps`
#[derive(Debug, Args)]
pub struct PsArgs {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// How long each process may take to answer, connecting included (a process that does not
    /// answer in time, for example one stopped in a debugger, is listed with the reason).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    timeout: Duration,
}

/// `clrmap trace collect --pid PID -o FILE`
#[derive(Debug, Args)]
pub struct CollectArgs {
    /// The running .NET process.
    #[arg(long)]
    pid: u32,
    /// The trace to write (.nettrace). The bytes are streamed as they arrive into a new file
    /// beside it, which replaces FILE once the session has ended with at least one whole block;
    /// on an error before that, an existing FILE is left as it was. Only a regular file (or a
    /// symbolic link, which is replaced, not written through) is written; a FIFO, device or
    /// directory is refused.
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
    /// Also record the JIT's inline trees (for `symbolize --inlines`): the runtime's private
    /// provider's rich debug info and the events that name inlinees. Only a .NET 7+ process
    /// started with DOTNET_RichDebugInfo=1 sends them, and only for methods jitted while the
    /// session listens (a rundown has none).
    #[arg(long)]
    inlines: bool,
    /// How long connecting and starting the session may take, and how long the rundown may
    /// take after the stop (a longer one is cut there; the file keeps every whole block).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    timeout: Duration,
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
            // Why the runtime did not answer, unless it is CoreCLR 3.1's expected refusal of
            // ProcessInfo and the row is whole anyway.
            let why = match &p.error {
                Some(e) if e.kind != DiagErrorKind::UnsupportedCommand || runtime.is_none() || p.command_line.is_none() => format!("  (no answer: {})", crate::output::Text(&e.to_string())),
                _ => String::new(),
            };
            // Runtime-supplied strings are escaped (crate::output::Text): a command line cannot forge a row.
            let runtime = crate::output::Text(runtime.as_deref().unwrap_or("-")).to_string();
            writeln!(out, "{:>8}  {runtime:<10}  {}{why}", p.pid, crate::output::Text(p.command_line.as_deref().unwrap_or("?")))?;
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
    let mut providers = providers;
    if args.inlines {
        Provider::add_inline_trees(&mut providers);
    }
    let config = SessionConfig { rundown: !args.no_rundown, providers, ..SessionConfig::default() };
    let client = match Client::for_pid(args.pid, args.timeout) {
        Ok(c) => c,
        Err(e) => return report(&e),
    };
    // The trace goes to a new file beside the output (created exclusively; a FIFO or device at
    // the output is refused, never opened), which replaces the output only when it holds a
    // whole block: an error before that leaves an existing file as it was.
    let mut file = match clrmap::fs::NewFile::create(&args.output) {
        Ok(f) => f,
        Err(e) => return cannot_write(&args.output, &e),
    };
    // Ctrl-C and SIGTERM: the first asks for a clean stop (or, while connecting, ends at once);
    // the second abandons the rundown at once (collect clears the flag when it begins the stop),
    // keeping every whole block; a third exits without another word.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let signals = AtomicU32::new(0);
    let temp = file.temp_path().to_path_buf();
    let handler = move || {
        if signals.fetch_add(1, Ordering::SeqCst) >= 2 {
            // No unwinding past exit: the unfinished trace is removed here (the output stays as it was).
            let _ = std::fs::remove_file(&temp);
            std::process::exit(i32::from(exit_status(DiagErrorKind::Interrupted)));
        }
        flag.store(true, Ordering::SeqCst);
    };
    if let Err(e) = ctrlc::set_handler(handler) {
        eprintln!("warning: no Ctrl-C handler ({e}); stop with --duration");
    }
    let control = CollectControl { deadline: args.duration.and_then(|d| Instant::now().checked_add(d)), stop: &stop, poll: Duration::from_millis(100) };
    let terminal = std::io::stderr().is_terminal();
    let mut progress = Progress { show: terminal, last: Instant::now() };
    if terminal {
        let until = if args.duration.is_some() { "for the duration" } else { "until Ctrl-C" };
        eprintln!("collecting from process {} into {} {until}", args.pid, args.output.display());
    }
    let result = diag::collect(&client, &config, file.file(), &control, &mut |b| progress.update(b));
    if terminal {
        eprintln!();
    }
    let c = match result {
        Ok(c) => c,
        Err(e) => return report(&e),
    };
    // A trace with a whole block is kept, however the session ended (a stopped or cut session
    // keeps every whole block); with none, the output is left as it was.
    let (status, why) = ending(&c, args);
    if c.written == 0 {
        drop(file);
        let why = why.unwrap_or_else(|| "protocol: the stream ended before a whole block".to_owned());
        eprintln!("error: {why}; {} was not written", args.output.display());
        return ExitCode::from(if status == 0 { exit_status(DiagErrorKind::Protocol) } else { status });
    }
    if let Err(e) = file.commit() {
        return cannot_write(&args.output, &e);
    }
    let kept = if c.complete {
        format!("{} bytes, complete", c.written)
    } else {
        format!("{} bytes: the {} of {} received up to the last whole block, and the end tag", c.written, c.written.saturating_sub(1), c.received)
    };
    match why {
        None => eprintln!("wrote {} ({} bytes, rundown included)", args.output.display(), c.written),
        Some(why) => eprintln!("error: {why}; wrote {} ({kept})", args.output.display()),
    }
    ExitCode::from(status)
}

/// How a session that started ended: its exit status, and what went wrong (`kind: message`).
fn ending(c: &diag::Collected, args: &CollectArgs) -> (u8, Option<String>) {
    let timeout = humantime(args.timeout);
    match c.reason {
        EndReason::Stopped => (0, None),
        EndReason::TargetExited => (EXIT_TARGET_EXITED, Some(format!("target_exited: process {} exited mid-session", args.pid))),
        EndReason::Closed => (
            exit_status(DiagErrorKind::Protocol),
            Some(format!("protocol: process {} still runs, but closed the session's stream before the stop (the runtime or another tool ended the session)", args.pid)),
        ),
        EndReason::Timeout => (exit_status(DiagErrorKind::Timeout), Some(format!("timeout: the stream did not end within {timeout} after the stop (--timeout); it was cut there"))),
        EndReason::StopFailed => {
            let e = c.stop_error.clone().unwrap_or_else(|| diag::DiagError::new(DiagErrorKind::Io, "StopTracing failed"));
            (exit_status(e.kind), Some(format!("{}: the session could not be stopped: {}", e.kind, e.message)))
        }
        EndReason::Interrupted => (exit_status(DiagErrorKind::Interrupted), Some("interrupted: a second Ctrl-C or SIGTERM abandoned the rundown".to_owned())),
    }
}

/// A duration as it is written on the command line: `10s`, `500ms`.
fn humantime(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The output cannot be written (exit 1): the error names the user's path, not a temporary one.
fn cannot_write(output: &std::path::Path, e: &std::io::Error) -> ExitCode {
    eprintln!("error: io: cannot write {}: {e}", output.display());
    ExitCode::from(1)
}

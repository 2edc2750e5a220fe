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
use clrmap::diag::{self, Client, CollectControl, DiagErrorKind, EndReason, Provider, ReverseServer, SessionConfig};

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

/// `clrmap trace collect --pid PID -o FILE`, or `clrmap trace collect -o FILE -- COMMAND...`
#[derive(Debug, Args)]
pub struct CollectArgs {
    /// The running .NET process (or, after `--`, a COMMAND to start: one of the two is needed).
    #[arg(long, conflicts_with = "command")]
    pid: Option<u32>,
    /// The trace to write (.nettrace). The bytes are streamed as they arrive into a new file
    /// beside it, which replaces FILE once the session has ended with at least one whole block;
    /// on an error before that, an existing FILE is left as it was. Only a regular file (or a
    /// symbolic link, which is replaced, not written through) is written; a FIFO, device or
    /// directory is refused.
    #[arg(short, long)]
    output: PathBuf,
    /// Stop after this long (30s, 500ms, 2m); without it, at Ctrl-C or SIGTERM, or when a
    /// started COMMAND exits.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Providers, dotnet-trace style: `Name[:Keywords[:Level[:Filter]]]`, comma-separated.
    /// Default: Microsoft-Windows-DotNETRuntime:0x40000E0098:5 (JIT, loader and IL-map events, and
    /// the MethodDetails and BulkType events that name generic methods' instantiations).
    #[arg(long)]
    providers: Option<String>,
    /// No rundown at stop (the maps of methods jitted before the attach are then missing).
    #[arg(long)]
    no_rundown: bool,
    /// Record a CPU profile for `clrmap flame`: the runtime's own sampler
    /// (Microsoft-DotNETCore-SampleProfiler: every managed thread's stack about every
    /// millisecond), with the JIT, loader and IL-map events that map its addresses to methods
    /// and source lines. No perf, no special privileges; .NET Core 3.0 and later.
    #[arg(long)]
    cpu: bool,
    /// Also record the JIT's inline trees (for `symbolize --inlines`): the runtime's private
    /// provider's rich debug info and the events that name inlinees. Only a .NET 7+ process
    /// started with DOTNET_RichDebugInfo=1 sends them (a started COMMAND gets it), and only for
    /// methods jitted while the session listens (a rundown has none).
    #[arg(long)]
    inlines: bool,
    /// Ask for a lossless session: the runtime makes a thread that writes an event wait for
    /// buffer room rather than drop the event (CollectTracing6 in Block mode, .NET 11 and later;
    /// an older runtime refuses it and the command fails with unsupported_command, status 6).
    /// The traced program may then run slower while clrmap falls behind.
    #[arg(long)]
    lossless: bool,
    /// How long connecting and starting the session may take (for a started COMMAND: until its
    /// runtime connects), and how long the rundown may take after the stop (a longer one is cut
    /// there; the file keeps every whole block).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    timeout: Duration,
    /// Start this command and trace it from its first instruction of managed code, e.g.
    /// `dotnet app.dll`: it runs with DOTNET_DiagnosticPorts naming a socket of clrmap's, so its
    /// runtime (.NET 5 or later; CoreCLR 3.1 does not read the variable) connects to clrmap and
    /// waits, suspended, until the session has started. The trace ends when the command exits
    /// (its exit status is reported), or at --duration, Ctrl-C or SIGTERM, after which the
    /// command is sent SIGTERM (SIGKILL if it is still running after --timeout).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

impl CollectArgs {
    /// Is there a process to trace: `--pid`, or a COMMAND to start? (Checked after parsing, so
    /// the error can name both.)
    pub fn has_target(&self) -> bool {
        self.pid.is_some() || !self.command.is_empty()
    }
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

/// The bytes received so far, on a terminal (see [`crate::progress`]).
struct Progress {
    bar: Option<crate::progress::Progress>,
}

impl Progress {
    fn update(&mut self, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.set(bytes);
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
    if args.cpu {
        Provider::add_cpu_sampling(&mut providers);
    }
    if args.inlines {
        Provider::add_inline_trees(&mut providers);
    }
    let config = SessionConfig { rundown: !args.no_rundown, providers, lossless: args.lossless, ..SessionConfig::default() };
    let client = match args.pid.map(|pid| Client::for_pid(pid, args.timeout)).transpose() {
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
    // A started command that outlives a third signal is sent SIGTERM too.
    let child_pid = Arc::new(AtomicU32::new(0));
    let child_of_handler = Arc::clone(&child_pid);
    let handler = move || {
        if signals.fetch_add(1, Ordering::SeqCst) >= 2 {
            // No unwinding past exit: the unfinished trace is removed here (the output stays as it was).
            let _ = std::fs::remove_file(&temp);
            let child = child_of_handler.load(Ordering::SeqCst);
            if child != 0 {
                diag::terminate(child);
            }
            std::process::exit(i32::from(exit_status(DiagErrorKind::Interrupted)));
        }
        flag.store(true, Ordering::SeqCst);
    };
    if let Err(e) = ctrlc::set_handler(handler) {
        eprintln!("warning: no Ctrl-C handler ({e}); stop with --duration");
    }
    let terminal = std::io::stderr().is_terminal();
    let terminal = terminal && crate::progress::shown();
    let mut progress = Progress { bar: terminal.then(|| crate::progress::Progress::stream("collecting the trace")) };
    let until = if args.duration.is_some() {
        "for the duration"
    } else if client.is_some() {
        "until Ctrl-C"
    } else {
        "until it exits or Ctrl-C"
    };
    let (result, mut launched) = match &client {
        Some(client) => {
            if terminal {
                eprintln!("collecting from process {} into {} {until}", client.pid().unwrap_or(0), args.output.display());
            }
            let control = CollectControl { deadline: args.duration.and_then(|d| Instant::now().checked_add(d)), stop: &stop, poll: Duration::from_millis(100) };
            (diag::collect(client, &config, file.file(), &control, &mut |b| progress.update(b)), None)
        }
        None => {
            let mut launched = match launch(args, &config, &stop, &child_pid) {
                Ok(l) => l,
                Err(e) => return report(&e),
            };
            if terminal {
                eprintln!("collecting from process {} into {} {until}", launched.traced, args.output.display());
            }
            // The duration counts from the resume: the run it covers.
            let control = CollectControl { deadline: args.duration.and_then(|d| Instant::now().checked_add(d)), stop: &stop, poll: Duration::from_millis(100) };
            let session = launched.session.take();
            let result = match session {
                Some(session) => diag::collect_session(session, Some(launched.traced), args.timeout, file.file(), &control, &mut |b| progress.update(b)),
                None => Err(diag::DiagError::new(DiagErrorKind::Io, "no session")),
            };
            (result, Some(launched))
        }
    };
    // The progress line is cleared before anything else is said.
    drop(progress);
    // A started command is not left running: the trace of it has ended.
    let runtime_exited = matches!(&result, Ok(c) if c.reason == EndReason::TargetExited);
    let app = launched.as_mut().map(|l| l.finish(args.timeout, runtime_exited));
    let c = match result {
        Ok(c) => c,
        Err(e) => {
            if let Some(app) = &app {
                eprintln!("{app}");
            }
            return report(&e);
        }
    };
    // A trace with a whole block is kept, however the session ended (a stopped or cut session
    // keeps every whole block); with none, the output is left as it was.
    let traced = launched.as_ref().map_or(args.pid.unwrap_or(0), |l| l.traced);
    let (status, why) = ending(&c, traced, launched.is_some(), args.timeout);
    if let Some(app) = &app {
        eprintln!("{app}");
    }
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
        // A .NET 8 runtime ends its sessions at exit itself, rundown included.
        None if c.reason == EndReason::TargetExited && c.complete => eprintln!("wrote {} ({} bytes, complete: the runtime ended the session at its exit)", args.output.display(), c.written),
        None if c.reason == EndReason::TargetExited => eprintln!("wrote {} ({kept}; the stream ended at the exit)", args.output.display()),
        None => eprintln!("wrote {} ({} bytes, rundown included)", args.output.display(), c.written),
        Some(why) => eprintln!("error: {why}; wrote {} ({kept})", args.output.display()),
    }
    ExitCode::from(status)
}

/// A command started under a reverse diagnostics port.
struct Launched {
    child: std::process::Child,
    /// The command's name, for messages.
    program: String,
    /// The pid of the runtime traced (the command's own for `dotnet app.dll`).
    traced: u32,
    session: Option<diag::Session>,
    /// Resumes the other runtimes that connect (ones the command starts) while the trace runs.
    _others: diag::OthersGuard,
    /// Kept until the trace ends: its socket takes the stop request.
    _server: Arc<ReverseServer>,
}

impl Launched {
    /// Wait for the command to exit, and say how it did: `app: COMMAND (process N) exited with
    /// status S`. When the traced runtime has exited (`runtime_exited`), a command that runs on
    /// (a script around `dotnet app.dll`) gets `grace` to end by itself; otherwise, and after
    /// that, it is sent SIGTERM, and SIGKILL `grace` later.
    fn finish(&mut self, grace: Duration, runtime_exited: bool) -> String {
        let pid = self.child.id();
        let mut signalled: Option<&str> = None;
        let mut since = Instant::now();
        let mut waiting = runtime_exited;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) => {}
                Err(_) => break None,
            }
            if waiting && since.elapsed() >= grace {
                waiting = false;
            }
            if !waiting {
                match signalled {
                    None => {
                        diag::terminate(pid);
                        signalled = Some("SIGTERM");
                        since = Instant::now();
                    }
                    Some("SIGTERM") if since.elapsed() >= grace => {
                        let _ = self.child.kill();
                        signalled = Some("SIGKILL");
                    }
                    _ => {}
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let sent = signalled.map(|s| format!(" (clrmap sent it {s} when the trace ended)")).unwrap_or_default();
        let how = status.map_or_else(|| "could not be waited for".to_owned(), describe_status);
        format!("app: {} (process {pid}) {how}{sent}", crate::output::Text(&self.program))
    }
}

/// `exited with status 3`, `was killed by signal 9`.
fn describe_status(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        (None, None) => "ended".to_owned(),
    }
}

/// Start the command with a reverse diagnostics port, wait for its runtime to connect (within
/// the timeout; the stop flag ends the wait), start the session on that connection and resume
/// the runtime. On an error the command is killed and reaped.
fn launch(args: &CollectArgs, config: &SessionConfig, stop: &AtomicBool, child_pid: &AtomicU32) -> Result<Launched, diag::DiagError> {
    let io = |what: String| move |e: std::io::Error| diag::DiagError::new(DiagErrorKind::Io, format!("{what}: {e}"));
    let (program, rest) = args.command.split_first().ok_or_else(|| diag::DiagError::new(DiagErrorKind::BadArgument, "no command given"))?;
    let server = ReverseServer::bind(args.timeout)?;
    let mut c = std::process::Command::new(program);
    c.args(rest).env("DOTNET_DiagnosticPorts", server.env_value()).env_remove("COMPlus_DiagnosticPorts");
    // A runtime that cannot open diagnostics would never connect.
    c.env_remove("DOTNET_EnableDiagnostics").env_remove("COMPlus_EnableDiagnostics");
    if args.inlines {
        c.env("DOTNET_RichDebugInfo", "1");
    }
    let mut child = c.spawn().map_err(io(format!("cannot run {program}")))?;
    let pid = child.id();
    child_pid.store(pid, Ordering::SeqCst);
    let shown = crate::output::Text(program).to_string();
    let started = Instant::now();
    let mut check = || -> Result<(), diag::DiagError> {
        match child.try_wait() {
            Ok(Some(status)) => {
                return Err(diag::DiagError::new(
                    DiagErrorKind::TargetExited,
                    format!("{shown} (process {pid}) {} before a .NET runtime connected (is it a .NET 5+ app? CoreCLR 3.1 does not read DOTNET_DiagnosticPorts)", describe_status(status)),
                ))
            }
            Ok(None) => {}
            Err(e) => return Err(diag::DiagError::new(DiagErrorKind::Io, format!("cannot wait for {shown}: {e}"))),
        }
        // A runtime older than .NET 5 ignores the variable and runs on: say so at once rather
        // than at the timeout.
        if started.elapsed() >= Duration::from_millis(50) {
            if let Some(v) = diag::mapped_runtime_version(pid) {
                if v.split('.').next().and_then(|m| m.parse::<u32>().ok()).is_some_and(|major| major < 5) {
                    return Err(diag::DiagError::new(
                        DiagErrorKind::UnsupportedCommand,
                        format!("{shown} (process {pid}) runs CoreCLR {v}, which does not read DOTNET_DiagnosticPorts (added in .NET 5): it cannot be started suspended; trace it with --pid PID once it runs"),
                    ));
                }
            }
        }
        Ok(())
    };
    let limit = diag::Limit::new(args.timeout, Some(stop));
    let started = diag::start_suspended(&server, config, &limit, &mut check);
    match started {
        Ok((session, adv)) => {
            let traced = u32::try_from(adv.pid).unwrap_or(pid);
            let others = server.resume_others(adv.pid);
            Ok(Launched { child, program: program.clone(), traced, session: Some(session), _others: others, _server: server })
        }
        Err(e) => {
            // The command is not left running, suspended or not.
            let killed = match child.try_wait() {
                Ok(None) => {
                    let _ = child.kill();
                    format!("; {shown} (process {pid}) was killed")
                }
                _ => String::new(),
            };
            let _ = child.wait();
            let message = match e.kind {
                DiagErrorKind::Timeout => {
                    format!("{} (is {shown} a .NET 5+ app? a runtime that does not read DOTNET_DiagnosticPorts never connects; --timeout sets the wait){killed}", e.message)
                }
                _ => format!("{}{killed}", e.message),
            };
            Err(diag::DiagError { message, ..e })
        }
    }
}

/// How a session that started ended: its exit status, and what went wrong (`kind: message`).
/// `launched`: the traced process was started by us, and its exit is the trace's normal end.
fn ending(c: &diag::Collected, pid: u32, launched: bool, timeout: Duration) -> (u8, Option<String>) {
    let timeout = humantime(timeout);
    match c.reason {
        EndReason::Stopped => (0, None),
        EndReason::TargetExited if launched => (0, None),
        EndReason::TargetExited => (EXIT_TARGET_EXITED, Some(format!("target_exited: process {pid} exited mid-session"))),
        EndReason::Closed => {
            (exit_status(DiagErrorKind::Protocol), Some(format!("protocol: process {pid} still runs, but closed the session's stream before the stop (the runtime or another tool ended the session)")))
        }
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

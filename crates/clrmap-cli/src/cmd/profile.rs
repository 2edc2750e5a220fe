//! `clrmap profile`: run a .NET command with the clrmap profiler loaded, or attach it to a
//! running process through its diagnostics port (`--pid`).

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;

use crate::output::CliError;

/// The profiler's CLSID (any GUID works; CoreCLR needs the braces).
pub const PROFILER_CLSID: &str = "{8C0F4F8E-6A3B-4C1E-9D2A-5B7E3C1F0A11}";

/// `clrmap profile -o CAPTURE [--disable-r2r] [--perf] [--no-inlines] -- CMD...`, or
/// `clrmap profile --pid PID -o CAPTURE [--duration D]`
#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// Attach to this running .NET process instead of starting one (AttachProfiler on its
    /// diagnostics port; no restart). It records the bodies jitted before the attach and those
    /// jitted after, until Ctrl-C, SIGTERM, --duration, or the process's exit; then the runtime
    /// detaches the profiler and the app runs on undisturbed. ReadyToRun methods are not
    /// recorded after attach (their maps are in their images: `clrmap il dump IMAGE`).
    #[arg(long, conflicts_with_all = ["command", "disable_r2r", "perf", "no_inlines"])]
    pid: Option<u32>,
    /// With --pid: stop after this long (30s, 500ms, 2m).
    #[arg(long, requires = "pid", value_parser = crate::args::parse_duration)]
    duration: Option<std::time::Duration>,
    /// Where the profiler writes its capture (JSON lines, one body per line). Optional with
    /// --perf: without it only the perf files are written, and the runtime is asked for a body's
    /// map only where its module has a PDB (the least work per body).
    #[arg(short, long, required_unless_present = "perf")]
    output: Option<PathBuf>,
    /// Jit everything, ReadyToRun code included (COR_PRF_DISABLE_ALL_NGEN_IMAGES).
    #[arg(long)]
    disable_r2r: bool,
    /// Do not record the JIT's inline trees. By default a started command runs with
    /// DOTNET_RichDebugInfo=1, so that .NET 7 and later report, for each jitted body, which
    /// methods were inlined into it and where, and the profiler writes those reports into the
    /// capture (-o) and, with --perf, gives inlined code the lines of the inlined method in the
    /// jitdump. Unless you set any of them yourself, the command also gets
    /// DOTNET_EnableEventLog=1, DOTNET_LTTngConfig=Microsoft-Windows-DotNETRuntime:10:5,
    /// DOTNET_EventSourceFilter (a name no EventSource has) and DOTNET_LTTng=0: the runtime's
    /// cheapest way to send the reports (no LTTng library is loaded, no EventSource is enabled).
    /// With this flag none of these is set, DOTNET_RichDebugInfo is removed from the command's
    /// environment, and nothing of the kind is recorded. .NET Core 3.1 has no inline trees either way.
    #[arg(long)]
    no_inlines: bool,
    /// The profiler library; by default `libclrmap_profiler.so` next to this executable, or
    /// $CLRMAP_PROFILER_PATH.
    #[arg(long)]
    profiler: Option<PathBuf>,
    /// Also write Linux perf's `jit-PID.dump` (with source lines) and `perf-PID.map` for each .NET
    /// process, into DIR (default /tmp), for `perf record -k 1` and `perf inject --jit`.
    /// DIR must be an existing directory you can write into, and DOTNET_PerfMapEnabled must not
    /// be 1, 2 or 3 (the runtime would write the same files): both are checked before the
    /// command starts
    #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = "/tmp")]
    perf: Option<PathBuf>,
    /// With --perf: do not name the runtime's stubs (precode, dispatch, resolve stubs). By
    /// default, on .NET 8 and later, the command runs with DOTNET_PerfMapEnabled=3 and
    /// DOTNET_PerfMapJitDumpPath set to a private directory in DIR, so that the runtime writes its
    /// own perf map there (removed after the run), and the stub names in it are copied into the
    /// jitdump and perf map. That costs the runtime a line per jitted method, mostly at start-up.
    #[arg(long, requires = "perf")]
    no_stub_names: bool,
    /// The command, e.g. `dotnet app.dll`.
    #[arg(last = true, required_unless_present = "pid")]
    command: Vec<String>,
}

fn default_profiler() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CLRMAP_PROFILER_PATH") {
        return Some(PathBuf::from(p));
    }
    profiler_places().into_iter().find(|p| p.is_file())
}

/// Where the profiler library is looked for without --profiler or CLRMAP_PROFILER_PATH: beside
/// the clrmap binary, and in its parent directory.
fn profiler_places() -> Vec<PathBuf> {
    let Some(dir) = std::env::current_exe().ok().and_then(|exe| exe.parent().map(Path::to_path_buf)) else {
        return Vec::new();
    };
    vec![dir.join("libclrmap_profiler.so"), dir.join("../libclrmap_profiler.so")]
}

/// The error when no profiler library is found: where it was looked for, and how to get one.
fn missing_profiler() -> String {
    let places: Vec<String> = profiler_places().iter().map(|p| crate::output::Text(&p.to_string_lossy()).to_string()).collect();
    let looked = match places.as_slice() {
        [] => "CLRMAP_PROFILER_PATH is not set, and the clrmap binary's own directory is unknown".to_owned(),
        _ => format!("CLRMAP_PROFILER_PATH is not set, and it is not at {}", places.join(" nor at ")),
    };
    format!(
        "cannot find libclrmap_profiler.so: {looked}. Build it with `cargo build -p clrmap-profiler` in the clrmap \
         source tree (it is then target/debug/libclrmap_profiler.so, beside target/debug/clrmap), or install both with \
         scripts/install.sh; or name it with --profiler PATH or CLRMAP_PROFILER_PATH=PATH"
    )
}

/// Make `output` an empty capture file before the run. The profiler appends (so that a .NET child
/// process, which inherits it, does not erase its parent's records), so an old capture is removed
/// first; a file that is not a capture is never touched.
fn start_capture(output: &Path) -> Result<(), CliError> {
    match std::fs::symlink_metadata(output) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CliError::Usage(format!("{}: {e}", output.display()))),
        Ok(m) if !m.is_file() => Err(CliError::Usage(format!("refusing to write the capture to {}: not a regular file", output.display()))),
        Ok(_) => {
            let mut head = [0u8; 26];
            let n = clrmap::fs::open_regular_nofollow(output).and_then(|mut f| std::io::Read::read(&mut f, &mut head)).unwrap_or(0);
            let head = head.get(..n).unwrap_or(&[]);
            if !head.is_empty() && !b"{\"format\":\"clrmap-capture\"".starts_with(head) && !head.starts_with(b"{\"format\":\"clrmap-capture\"") {
                return Err(CliError::Usage(format!("refusing to overwrite {}: it is not a clrmap capture", output.display())));
            }
            std::fs::remove_file(output).map_err(|e| CliError::Usage(format!("cannot replace {}: {e}", output.display())))
        }
    }
}

/// `clrmap profile`'s own exit status when the profiler did not load or wrote no capture: told
/// apart from bad input (1) and bad usage (2).
pub const PROFILER_NOT_LOADED: i32 = 3;

/// The child's status as a shell reports it: its exit code, or 128 + the signal that killed it.
fn shell_status(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => signal.saturating_add(128),
        (None, None) => 1,
    }
}

/// The status the `dotnet` host (and an app's own host) exits with when it could not start the
/// app: the low byte of 0x80008091, the app (or its framework, or its .runtimeconfig.json) not
/// found.
const HOST_CANNOT_RUN_APP: i32 = 145;

/// Why the profiler may not have loaded, from the command and its status: a .NET host that could
/// not start the app says so (naming the app when `dotnet APP` names a file that is not there);
/// any other status asks whether the command is a .NET app at all.
fn not_loaded_why(program: &str, rest: &[String], status: i32) -> String {
    if status != HOST_CANNOT_RUN_APP {
        return format!("is the command a .NET app? (it exited with {status})");
    }
    let is_dotnet = Path::new(program).file_name().is_some_and(|n| n == "dotnet");
    // `dotnet [host options] APP`: every host option (`--roll-forward Major`, `--depsfile F`, ...)
    // takes a value; `exec` may come first.
    let mut args = rest.iter().skip_while(|a| *a == "exec");
    let mut app = None;
    while let Some(a) = args.next() {
        if a.starts_with('-') {
            args.next();
            continue;
        }
        app = Some(a);
        break;
    }
    match app {
        Some(app) if is_dotnet && !Path::new(app).exists() => format!("the .NET host could not start the app: {app} does not exist (it exited with {status})"),
        _ => format!("the .NET host could not find or run the app (it exited with {status}, the host's status for an app, framework or .runtimeconfig.json it did not find)"),
    }
}

/// Run the command; returns its exit status (passed through by `main`).
///
/// Example: `clrmap profile -o app.capture -- dotnet app.dll`, then `clrmap il dump app.capture`
/// (the user-facing examples are on the `Profile` command in main.rs).
pub fn run(args: ProfileArgs) -> Result<i32, CliError> {
    if let Some(dir) = &args.perf {
        check_perf_route(dir)?;
    }
    let profiler = args.profiler.or_else(default_profiler).ok_or_else(|| CliError::Usage(missing_profiler()))?;
    let profiler = std::fs::canonicalize(&profiler).map_err(|e| CliError::Usage(format!("profiler {}: {e}", profiler.display())))?;
    let output = args.output.as_deref().map(absolute).transpose()?;
    if let Some(output) = &output {
        start_capture(output)?;
    }
    if let Some(pid) = args.pid {
        let output = output.ok_or_else(|| CliError::Usage("--pid needs -o CAPTURE".into()))?;
        return attach(pid, &profiler, &output, args.duration);
    }
    let (program, rest) = args.command.split_first().ok_or_else(|| CliError::Usage("no command given".into()))?;
    let mut c = Command::new(program);
    c.args(rest).env("CORECLR_ENABLE_PROFILING", "1").env("CORECLR_PROFILER", PROFILER_CLSID).env("CORECLR_PROFILER_PATH", &profiler);
    match &output {
        Some(output) => c.env("CLRMAP_PROFILER_OUTPUT", output),
        None => c.env_remove("CLRMAP_PROFILER_OUTPUT"),
    };
    if args.disable_r2r {
        c.env("CLRMAP_PROFILER_DISABLE_R2R", "1");
    }
    // The JIT's inline trees: the runtime reports them only with this variable set at start-up;
    // the profiler records them into a capture and gives the jitdump's lines by them.
    if args.no_inlines {
        c.env_remove("DOTNET_RichDebugInfo").env_remove("COMPlus_RichDebugInfo").env_remove("CLRMAP_PROFILER_INLINES");
    } else if output.is_some() || args.perf.is_some() {
        c.env("DOTNET_RichDebugInfo", "1").env("CLRMAP_PROFILER_INLINES", "1");
        // The runtime sends the trees only while the runtime provider's JIT keyword is on. Turned
        // on through the runtime's LTTng configuration (no LTTng library loaded, no EventSource
        // enabled), the profiler's EventPipe session needs only the private provider; on the
        // session the runtime provider would also start its managed EventSource, which costs
        // start-up time (docs/capture-format.md). A user's own settings of these are left as
        // they are, and the profiler then puts the runtime provider on its session.
        let own =
            ["EnableEventLog", "LTTngConfig", "EventSourceFilter", "LTTng"].iter().any(|n| std::env::var_os(format!("DOTNET_{n}")).is_some() || std::env::var_os(format!("COMPlus_{n}")).is_some());
        if !own {
            c.env("DOTNET_EnableEventLog", "1").env("DOTNET_LTTngConfig", "Microsoft-Windows-DotNETRuntime:10:5").env("DOTNET_EventSourceFilter", "clrmap:no-event-source").env("DOTNET_LTTng", "0");
        }
    } else {
        c.env_remove("CLRMAP_PROFILER_INLINES");
    }
    let mut runtime_map = None;
    if let Some(dir) = &args.perf {
        let dir = absolute(dir)?;
        c.env("CLRMAP_PROFILER_PERF", &dir);
        if !args.no_stub_names {
            runtime_map = runtime_stub_map(&mut c, &dir);
        }
    }
    let started = std::time::SystemTime::now();
    let spawned = c.spawn().map_err(|e| CliError::Message(format!("cannot run {program}: {e}")));
    let waited = spawned.and_then(|mut child| {
        let pid = child.id();
        let _running = crate::progress::Progress::waiting(&format!("profiling process {pid}"));
        child.wait().map(|s| (pid, s)).map_err(|e| CliError::Message(format!("cannot wait for {program}: {e}")))
    });
    if let Some(private) = &runtime_map {
        let _ = std::fs::remove_dir_all(private);
    }
    let (child_pid, status) = waited?;
    // CoreCLR fails silently when a profiler does not load: the capture's header proves it did,
    // or, without a capture, the command's own jitdump (`dotnet app.dll` runs in its process).
    let (loaded, proof) = match (&output, &args.perf) {
        (Some(output), _) => (std::fs::read(output).map(|b| b.starts_with(b"{\"format\":\"clrmap-capture\"")).unwrap_or(false), format!("no capture at {}", output.display())),
        (None, Some(dir)) => {
            // The command's own pid, or (a script that starts dotnet as its child) any jitdump
            // begun in DIR since the run started.
            let dir = absolute(dir)?;
            // A regular file of its own only (no symbolic or hard link): one planted at the
            // name, which the profiler refuses to write, is no proof.
            let written = |m: std::fs::Metadata| m.is_file() && std::os::unix::fs::MetadataExt::nlink(&m) == 1;
            let own = std::fs::symlink_metadata(dir.join(format!("jit-{child_pid}.dump"))).is_ok_and(written);
            let fresh = || {
                std::fs::read_dir(&dir).into_iter().flatten().flatten().any(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.starts_with("jit-") && name.ends_with(".dump") && e.metadata().is_ok_and(|m| m.modified().is_ok_and(|t| t >= started) && written(m))
                })
            };
            (own || fresh(), format!("no jit-PID.dump written in {}", dir.display()))
        }
        (None, None) => (false, "no output".to_owned()),
    };
    if !loaded {
        eprintln!("clrmap: the profiler did not load ({proof}); {}", not_loaded_why(program, rest, shell_status(status)));
        return Ok(PROFILER_NOT_LOADED);
    }
    if let Some(output) = &output {
        name_bodies(output);
    }
    Ok(shell_status(status))
}

/// The runtime's stubs (precode, virtual call, dispatch and resolve stubs) get no code load in any
/// jitdump the profiler could write from what it is told; the runtime names them only in its own
/// perf map (perfmap.cpp, `PerfMap::LogStubs`). So the command runs with
/// `DOTNET_PerfMapEnabled=3` (.NET 8: the perf map alone, no jitdump to compete with ours) and
/// `DOTNET_PerfMapJitDumpPath` set to a private directory in DIR, made here (0700) and removed
/// after the run; the profiler copies the map's stub lines into its jitdump and perf map as they
/// come (`CLRMAP_PROFILER_RUNTIME_MAP`). CoreCLR 3.1 reads only `COMPlus_` settings and so never
/// sees these (with `COMPlus_PerfMapEnabled` it would write /tmp/perf-PID.map, ours when DIR is
/// /tmp): its stubs stay unnamed. Returns the private directory, `None` when it cannot be made.
fn runtime_stub_map(c: &mut Command, dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let private = dir.join(format!(".clrmap-runtime-map-{}", std::process::id()));
    if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&private) {
        eprintln!("warning: --perf: cannot make {}: {e}; the runtime's stubs will be unnamed", private.display());
        return None;
    }
    c.env("DOTNET_PerfMapEnabled", "3").env("DOTNET_PerfMapJitDumpPath", &private).env("CLRMAP_PROFILER_RUNTIME_MAP", &private);
    Some(private)
}

/// What the runtime writes for a `PerfMapEnabled` value (the runtime reads it as hex): 1 both
/// files, 2 the jitdump, 3 the perf map; anything else (0, unset, empty, not a number) nothing.
fn runtime_perf_files(value: &str) -> Option<&'static str> {
    let v = value.trim();
    let digits = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")).unwrap_or(v);
    match u32::from_str_radix(digits, 16) {
        Ok(1) => Some("jit-PID.dump and /tmp/perf-PID.map"),
        Ok(2) => Some("jit-PID.dump"),
        Ok(3) => Some("/tmp/perf-PID.map"),
        _ => None,
    }
}

/// `--perf=DIR`'s checks, made before anything runs (exit 2): the runtime must not write the
/// same files (`PerfMapEnabled`), and DIR must be a directory clrmap can write into.
fn check_perf_route(dir: &Path) -> Result<(), CliError> {
    for var in ["DOTNET_PerfMapEnabled", "COMPlus_PerfMapEnabled"] {
        let value = std::env::var(var).unwrap_or_default();
        if let Some(files) = runtime_perf_files(&value) {
            return Err(CliError::Usage(format!(
                "--perf: unset {var} (it is {value}): the runtime would write {files} too, and two writers of one file tear its records (to add lines to the runtime's own jitdump, run without --perf, then `clrmap perf jitdump CAPTURE --enrich /tmp/jit-PID.dump`)",
                value = value.trim()
            )));
        }
    }
    let dir = absolute(dir)?;
    if let Some(w) = perf_map_lookalike(&dir) {
        eprintln!("warning: --perf: {w}");
    }
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(CliError::Usage(format!("--perf: {} is not a directory", dir.display()))),
        Err(e) => return Err(CliError::Usage(format!("--perf: {}: {e} (create the directory first)", dir.display()))),
    }
    // The profiler writes as this user: a directory it cannot write into would be found only
    // after the run, as no jitdump.
    let probe = dir.join(format!(".clrmap-perf-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(CliError::Usage(format!("--perf: cannot write into {}: {e}", dir.display()))),
    }
}

/// Why DIR is a poor place for the jitdump, if it is: perf (6.1 measured) takes any mapped file
/// whose path starts with `/tmp/perf-` for a perf map (its test is on the path's text), so the
/// `jitted-PID-N.so` files `perf inject --jit` writes beside the jitdump would be read as maps,
/// and the jitted code shows as unsymbolized addresses.
fn perf_map_lookalike(dir: &Path) -> Option<String> {
    let text = dir.to_string_lossy();
    text.starts_with("/tmp/perf-").then(|| {
        format!("{text} starts with /tmp/perf-, which perf takes for a perf map's path: `perf inject --jit` writes its jitted-*.so files there and perf report then leaves the jitted code unsymbolized; choose another directory")
    })
}

/// `profile --pid`: attach, record until asked to stop or the process exits, then detach.
fn attach(pid: u32, profiler: &Path, output: &Path, duration: Option<std::time::Duration>) -> Result<i32, CliError> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use clrmap::diag::{self, Client};

    let diag_error = |e: diag::DiagError| CliError::Status(format!("{}: {}", e.kind, e.message), crate::open::exit_status(e.kind));
    let mut stop_file = output.as_os_str().to_owned();
    stop_file.push(".stop");
    let stop_file = PathBuf::from(stop_file);
    let _ = std::fs::remove_file(&stop_file);
    // The profiler's settings, read by its InitializeForAttach. Paths are as the target sees
    // them: the same file system (a container's target needs paths inside it).
    let config = serde_json::json!({ "output": output, "stop_file": stop_file, "watch_pid": std::process::id() });
    let clsid = diag::guid_bytes(PROFILER_CLSID).ok_or_else(|| CliError::Message("bad profiler CLSID".into()))?;
    let client = Client::for_pid(pid, diag::DEFAULT_TIMEOUT).map_err(diag_error)?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)) {
        eprintln!("warning: no Ctrl-C handler ({e}); stop with --duration");
    }
    let path = profiler.to_str().ok_or_else(|| CliError::Usage(format!("profiler path {} is not UTF-8", profiler.display())))?;
    client.attach_profiler(Duration::from_secs(10), clsid, path, config.to_string().as_bytes()).map_err(diag_error)?;
    let deadline = duration.and_then(|d| Instant::now().checked_add(d));
    let until = if duration.is_some() { "for the duration" } else { "until Ctrl-C" };
    eprintln!("clrmap: attached to process {pid}; recording into {} {until} or the process's exit", output.display());
    if diag::rich_debug_info_enabled(pid) == Some(false) {
        // Said once: the capture is whole, only without inlined frames.
        eprintln!("note: process {pid} did not start with DOTNET_RichDebugInfo=1, so it reports no inline trees: `symbolize --inlines` will answer its inlined code at the caller's line");
    }
    let exited = loop {
        if diag::exited(pid) {
            break true;
        }
        if stop.load(Ordering::SeqCst) || deadline.is_some_and(|d| Instant::now() >= d) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut detached = exited;
    if !exited {
        // Ask the profiler to detach, and wait for its end record (the runtime first waits for
        // every callback to leave the profiler). The capture and the stop file are paths the
        // target can write to: whatever it plants there is never followed, never blocks, and is
        // read in bounded steps (only what was appended since the last look).
        create_stop_file(&stop_file)?;
        let mut capture = FollowCapture::new(output);
        let waited = Instant::now();
        while waited.elapsed() < Duration::from_secs(20) {
            let ended = capture.ended(pid);
            if ended.as_ref().is_ok_and(|e| *e) || diag::exited(pid) {
                detached = true;
                break;
            }
            if let Err(e) = ended {
                let _ = std::fs::remove_file(&stop_file);
                return Err(capture_error(output, &e));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(&stop_file);
    }
    // What the capture holds now: one message, true to what is on disk.
    let capture = match clrmap::fs::read_regular_nofollow(output, clrmap::fs::MAX_FILE) {
        Ok(bytes) => {
            Some(clrmap::capture::read_capture(&bytes).map_err(|e| CliError::Message(format!("the capture {} is not readable: {}{}: {}", output.display(), e.kind, e.location, e.message())))?)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(capture_error(output, &e)),
    };
    let status = |kind: diag::DiagErrorKind| crate::open::exit_status(kind);
    let Some(capture) = capture else {
        let (kind, what) = if !detached {
            (diag::DiagErrorKind::Timeout, format!("process {pid} has not detached the profiler after 20 s"))
        } else if exited || diag::exited(pid) {
            (diag::DiagErrorKind::TargetExited, format!("process {pid} exited"))
        } else {
            (diag::DiagErrorKind::Io, "the profiler detached".to_owned())
        };
        return Err(CliError::Status(format!("{kind}: {what}; no capture was written at {}", output.display()), status(kind)));
    };
    let before = capture.bodies.iter().filter(|b| b.before_attach).count();
    let bodies = format!("{} bodies: {before} jitted before the attach, {} after", capture.bodies.len(), capture.bodies.len().saturating_sub(before));
    if !detached {
        return Err(CliError::Status(
            format!("timeout: process {pid} has not detached the profiler after 20 s; {} keeps every whole record so far ({bodies})", output.display()),
            status(diag::DiagErrorKind::Timeout),
        ));
    }
    name_bodies(output);
    let how = if exited { "the process exited" } else { "detached" };
    eprintln!("clrmap: {how}; wrote {} ({bodies})", output.display());
    Ok(0)
}

/// Write each body's `name` and `full_name` into the capture now, while the assemblies are where
/// the process loaded them, so the capture names its methods wherever it is read later
/// (`clrmap::capture::fill_names`). The file is rewritten whole or not at all, and only once every
/// process that writes to it has ended; what cannot be done is a note, never a failure: the
/// capture as recorded is whole either way.
fn name_bodies(output: &Path) {
    let note = |why: String| eprintln!("note: the capture's bodies were not named in it ({why}); they are named when read, where their assemblies are at hand");
    let bytes = match clrmap::fs::read_regular_nofollow(output, clrmap::fs::MAX_FILE) {
        Ok(b) => b,
        Err(e) => return note(format!("cannot read {}: {e}", output.display())),
    };
    if !clrmap::capture::every_process_ended(&bytes) {
        return note("a process that writes to it has not ended its recording".to_owned());
    }
    let written = (|| -> std::io::Result<usize> {
        let mut new = clrmap::fs::NewFile::create(output)?;
        let mut w = std::io::BufWriter::new(new.file());
        let named = clrmap::capture::fill_names(&bytes, &mut w)?;
        std::io::Write::flush(&mut w)?;
        drop(w);
        new.commit()?;
        Ok(named)
    })();
    if let Err(e) = written {
        note(format!("cannot rewrite {}: {e}", output.display()));
    }
}

/// Create the stop file the attached profiler watches for. Created exclusively: a link or FIFO
/// the target planted at its name is never opened (whatever is there already counts as there).
fn create_stop_file(stop_file: &Path) -> Result<(), CliError> {
    match std::fs::OpenOptions::new().write(true).create_new(true).open(stop_file) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(CliError::Kinded { kind: "io", message: format!("cannot write {}: {e}", stop_file.display()) }),
    }
}

/// The capture path no longer holds a readable regular file (exit 1).
fn capture_error(output: &Path, e: &std::io::Error) -> CliError {
    let why = if e.kind() == std::io::ErrorKind::InvalidInput { " (something replaced the capture during the recording)" } else { "" };
    CliError::Kinded { kind: "io", message: format!("cannot read the capture {}: {e}{why}", output.display()) }
}

/// Watches a capture that the attached profiler appends to for its end record, reading only
/// what was appended since the last look, from a regular file opened without following links.
struct FollowCapture<'a> {
    path: &'a Path,
    /// Bytes of the file seen so far.
    offset: u64,
    /// The start of a line not yet whole (at most [`FollowCapture::MAX_LINE`] bytes).
    partial: Vec<u8>,
    /// Inside a line too long to be an end record: skip it.
    skipping: bool,
}

impl<'a> FollowCapture<'a> {
    /// An end record is one short line; longer lines are bodies.
    const MAX_LINE: usize = 4096;
    /// The most read in one look.
    const STEP: u64 = 64 << 20;

    fn new(path: &'a Path) -> Self {
        FollowCapture { path, offset: 0, partial: Vec::new(), skipping: false }
    }

    /// True once an end record of `pid` has been appended. Not found yet is `Ok(false)`; a path
    /// that is not a regular file (a link, a FIFO, a device) is an error.
    fn ended(&mut self, pid: u32) -> std::io::Result<bool> {
        let (bytes, len) = match clrmap::fs::read_regular_nofollow_from(self.path, self.offset, Self::STEP) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        if len < self.offset {
            // Truncated or replaced: read it again from the start.
            *self = FollowCapture::new(self.path);
            return Ok(false);
        }
        self.offset = self.offset.saturating_add(bytes.len() as u64);
        let mut ended = false;
        let mut pieces = bytes.split(|&b| b == b'\n').peekable();
        while let Some(piece) = pieces.next() {
            // Every piece but the last ended at a newline.
            let whole_line = pieces.peek().is_some();
            if !self.skipping && self.partial.len().saturating_add(piece.len()) <= Self::MAX_LINE {
                self.partial.extend_from_slice(piece);
            } else {
                self.partial.clear();
                self.skipping = true;
            }
            if whole_line {
                if !self.skipping {
                    ended |= is_end_of(&self.partial, pid);
                }
                self.partial.clear();
                self.skipping = false;
            }
        }
        Ok(ended)
    }
}

/// Is this capture line the end record of `pid` (or of the process of its header, when it
/// names none)?
fn is_end_of(line: &[u8], pid: u32) -> bool {
    matches!(serde_json::from_slice::<clrmap::capture::Record>(line), Ok(clrmap::capture::Record::End(e)) if e.pid.is_none_or(|p| p == pid))
}

fn absolute(p: &Path) -> Result<PathBuf, CliError> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    Ok(std::env::current_dir().map_err(CliError::Io)?.join(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_that_could_not_start_the_app_is_named() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let missing = "/nonexistent/clrmap-test/Missing.dll";
        let why = not_loaded_why("/usr/bin/dotnet", &args(&[missing, "x"]), 145);
        assert_eq!(why, format!("the .NET host could not start the app: {missing} does not exist (it exited with 145)"));
        // Host options (each with its value) and `exec` come before the app.
        assert!(not_loaded_why("dotnet", &args(&["exec", "--roll-forward", "Major", missing]), 145).contains(&format!("{missing} does not exist")));
        // An app that exists, or a host other than `dotnet`: the status's meaning, no file named.
        let why = not_loaded_why("dotnet", &args(&["Cargo.toml"]), 145);
        assert!(why.contains("could not find or run the app") && !why.contains("does not exist"), "{why}");
        assert!(not_loaded_why("./MyApp", &args(&[]), 145).contains("could not find or run the app"));
        // Any other status: the old question.
        assert_eq!(not_loaded_why("dotnet", &args(&[missing]), 0), "is the command a .NET app? (it exited with 0)");
    }
}

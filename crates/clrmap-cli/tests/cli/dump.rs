//! `clrmap dump CORE`: cores of tests/dotnet/dump/Dumpee.cs made by the runtime's own createdump
//! (a live process with a deadlock of three threads, a deep recursion, a thread-pool thread parked
//! in an async continuation and a thread inside List.Sort; and a crash on an unhandled
//! exception), checked against dotnet-dump's `clrstack -all`: every managed frame it lists is
//! in clrmap's list for that thread, in order, with the same stack pointer, instruction pointer and method.
//!
//! .NET 10 walks every thread; .NET 9's descriptor describes threads but no code map or frames,
//! and .NET 8 has no descriptor: both are checked for what they give and the note that says so.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::support::{clrmap, code, dotnet_file, repo_root, runtime, stderr, stdout, Runtime};

/// dotnet-dump, installed into the runtimes' home (`.dotnet/tools`); a missing one fails.
fn dotnet_dump() -> String {
    dotnet_file("tools/dotnet-dump")
}

/// One core at a time: createdump and dotnet-dump are heavy on two cores.
static LOCK: Mutex<()> = Mutex::new(());

/// Dumpee.dll built by csc against `rt`'s framework, with a runtimeconfig for exactly `rt`.
fn dumpee(rt: &Runtime) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-dump").join(rt.label());
    std::fs::create_dir_all(&dir).unwrap();
    let dll = dir.join("Dumpee.dll");
    let mut c = Command::new(dotnet_file("roslyn/csc"));
    c.args(["-nologo", "-noconfig", "-nostdlib", "-deterministic", "-optimize-", "-debug:portable", "-target:exe"]);
    for a in ["System.Private.CoreLib", "System.Runtime", "System.Console", "System.Collections", "System.Threading", "System.Threading.Tasks", "System.Threading.Thread"] {
        c.arg(format!("-r:{}", rt.file(&format!("{a}.dll")).display()));
    }
    c.arg(format!("-out:{}", dll.display())).arg(repo_root().join("tests/dotnet/dump/Dumpee.cs"));
    let out = c.output().unwrap();
    assert!(out.status.success(), "csc: {}", String::from_utf8_lossy(&out.stdout));
    std::fs::write(dir.join("Dumpee.runtimeconfig.json"), rt.runtimeconfig()).unwrap();
    dll
}

/// How long an app may take to print "ready PID".
const READY_WITHIN: Duration = Duration::from_secs(180);

/// The lines `child` printed before "ready PID", and the PID. An app that ends first, or is not
/// ready within [`READY_WITHIN`] (it is killed then), fails the test rather than hanging it.
fn until_ready(child: &mut Child, what: &str) -> (Vec<String>, String) {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Lines after "ready" are read and dropped: the app never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + READY_WITHIN;
    let mut before = Vec::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                let line = line.unwrap();
                match line.trim().strip_prefix("ready ") {
                    Some(pid) => return (before, pid.to_owned()),
                    None => before.push(line),
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what} ended before it was ready: {before:?}"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what} was not ready within {READY_WITHIN:?}: {before:?}");
            }
        }
    }
}

/// A full core of the live Dumpee, by `createdump -u` once it says it is ready.
fn live_core(rt: &Runtime) -> PathBuf {
    let dll = dumpee(rt);
    let core = dll.with_file_name("live.core");
    let _ = std::fs::remove_file(&core);
    let mut child = Command::new(&rt.dotnet).arg(&dll).arg("live").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    // The runtime's stack trace of the framework thread's comparer comes first ("S" lines, kept
    // beside the core as callers.txt), then "ready PID".
    let (before, pid) = until_ready(&mut child, "Dumpee");
    let callers: String = before.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dll.with_file_name("callers.txt"), &callers).unwrap();
    let out = Command::new(rt.file("createdump")).args(["-u", "-f"]).arg(&core).arg(&pid).output().unwrap();
    let _ = child.stdin.take().map(|mut s| s.write_all(b"\n"));
    let _ = child.kill();
    let _ = child.wait();
    assert!(out.status.success() && core.is_file(), "createdump: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    core
}

/// The runtime's own full dump at an unhandled exception (DOTNET_DbgEnableMiniDump=1,
/// DOTNET_DbgMiniDumpType=4).
fn crash_core(rt: &Runtime) -> PathBuf {
    let dll = dumpee(rt);
    let core = dll.with_file_name("crash.core");
    let _ = std::fs::remove_file(&core);
    let out = Command::new(&rt.dotnet).arg(&dll).arg("crash").env("DOTNET_DbgEnableMiniDump", "1").env("DOTNET_DbgMiniDumpType", "4").env("DOTNET_DbgMiniDumpName", &core).output().unwrap();
    assert!(!out.status.success(), "the crash did not crash");
    assert!(core.is_file(), "no crash dump: {}", String::from_utf8_lossy(&out.stderr));
    // The runtime's own report of the unhandled exception, with its stack trace's lines.
    std::fs::write(dll.with_file_name("crash.txt"), &out.stderr).unwrap();
    core
}

/// dotnet-dump's managed frames per OS thread id: (child SP, IP, method as
/// `Ns.Type+Nested.Method`, generic arguments and parameters dropped).
fn oracle(core: &Path) -> BTreeMap<u64, Vec<(u64, u64, String)>> {
    let out = Command::new(dotnet_dump()).arg("analyze").arg(core).args(["-c", "clrstack -all", "-c", "exit"]).output().unwrap();
    assert!(out.status.success(), "dotnet-dump: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut map: BTreeMap<u64, Vec<(u64, u64, String)>> = BTreeMap::new();
    let mut tid = None;
    for line in text.lines() {
        if let Some(h) = line.trim().strip_prefix("OS Thread Id: 0x") {
            let id = u64::from_str_radix(h.split_whitespace().next().unwrap(), 16).unwrap();
            tid = Some(id);
            map.entry(id).or_default();
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        if parts.len() < 3 || parts[0].len() != 16 || u64::from_str_radix(parts[0], 16).is_err() || parts[2].starts_with('[') {
            continue;
        }
        let site = parts[2..].join(" ");
        let method = strip_generics(site.split('(').next().unwrap().trim());
        // A stub's class (the runtime's ILStubClass) has no metadata and the descriptor describes
        // no way to its name: clrmap names a dynamic method as the runtime's method events do.
        let method = method.strip_prefix("ILStubClass.").map(|m| format!("dynamicClass.{m}")).unwrap_or(method);
        map.get_mut(&tid.unwrap()).unwrap().push((u64::from_str_radix(parts[0], 16).unwrap(), u64::from_str_radix(parts[1], 16).unwrap(), method));
    }
    map
}

/// `A`1[[X, Y]].M[[Z]]` → `A`1.M`.
fn strip_generics(s: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in s.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// clrmap's JSON report.
fn report(core: &Path) -> serde_json::Value {
    let started = Instant::now();
    let out = clrmap(&["dump", core.to_str().unwrap(), "--json"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(60));
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// clrmap's managed frames per OS thread: (SP, IP, method in dotnet-dump's notation).
fn managed_frames(r: &serde_json::Value) -> BTreeMap<u64, Vec<(u64, u64, String)>> {
    let mut map = BTreeMap::new();
    for t in r["threads"].as_array().unwrap() {
        let frames = t["frames"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == "managed")
            .map(|f| (f["sp"].as_u64().unwrap(), f["ip"].as_u64().unwrap(), f["method"].as_str().unwrap_or("??").replace('/', "+").replace("::", ".")))
            .collect();
        map.insert(t["os_id"].as_u64().unwrap(), frames);
    }
    map
}

/// Every frame of `want` is in `have`, in order.
fn assert_subsequence(tid: u64, want: &[(u64, u64, String)], have: &[(u64, u64, String)]) {
    let mut it = have.iter();
    for w in want {
        assert!(it.any(|h| h == w), "thread 0x{tid:x}: dotnet-dump's frame {w:x?} is not in clrmap's list (in order):\n{have:#x?}\nwanted:\n{want:#x?}");
    }
}

fn check_against_dotnet_dump(core: &Path) -> (serde_json::Value, usize) {
    let want = oracle(core);
    let r = report(core);
    let have = managed_frames(&r);
    let mut compared = 0;
    for (tid, frames) in &want {
        let got = have.get(tid).unwrap_or_else(|| panic!("clrmap has no thread 0x{tid:x}"));
        assert_subsequence(*tid, frames, got);
        compared += frames.len();
    }
    (r, compared)
}

/// The framework thread's frames below the comparer (the sort helpers and List.Sort, ReadyToRun;
/// SortForever, jitted) carry the IL offsets the runtime's own `StackTrace` printed for the same
/// call sites, taken from inside the comparer before it blocked (`callers.txt`), and the jitted
/// frame of the program also its line (no framework PDB is at hand: those have none).
fn frames_have_the_runtimes_il_offsets(r: &serde_json::Value, callers: &Path) {
    // The runtime's frames below the comparer: (method in clrmap's notation, IL offset, line).
    let want: Vec<(String, u64, u64)> = std::fs::read_to_string(callers)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("S\t"))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].replace('+', "/"), f[1].parse::<u64>().unwrap(), f[2].parse::<u64>().unwrap())
        })
        .collect();
    assert!(want.iter().any(|w| w.0 == "System.Collections.Generic.List`1::Sort"), "{want:?}");
    let thread = r["threads"].as_array().unwrap().iter().find(|t| t["frames"].as_array().unwrap().iter().any(|f| f["method"] == "Dumpee.Blocking::Compare")).expect("the framework thread");
    let frames = thread["frames"].as_array().unwrap();
    let below = frames.iter().position(|f| f["method"] == "Dumpee.Blocking::Compare").unwrap() + 1;
    let managed: Vec<&serde_json::Value> = frames[below..].iter().filter(|f| f["kind"] == "managed").collect();
    let (mut r2r, mut jitted) = (0, 0);
    for (w, f) in want.iter().zip(&managed) {
        assert_eq!(f["method"].as_str(), Some(w.0.as_str()), "{want:?} vs {managed:#?}");
        assert_eq!(f["il_offset"].as_u64(), Some(w.1), "{}: {f}", w.0);
        if f["code"] == "r2r" {
            assert!(f["rva"].as_u64().is_some() && f.get("line").is_none(), "{f}");
            r2r += 1;
        } else {
            assert_eq!(f["line"].as_u64(), Some(w.2), "{}: {f}", w.0);
            assert!(f["file"].as_str().is_some_and(|p| p.ends_with("Dumpee.cs")), "{f}");
            jitted += 1;
        }
    }
    eprintln!("measured: {r2r} ReadyToRun and {jitted} jitted frames of the framework thread carry the runtime's IL offsets: {want:?}");
    assert!(r2r >= 2 && jitted >= 1, "only {r2r} ReadyToRun and {jitted} jitted frames compared");
}

/// Every jitted frame of the program's own methods has an IL offset and a line of Dumpee.cs:
/// the recursion's 200 frames at the call to itself, on one line.
fn jitted_frames_have_lines(r: &serde_json::Value) {
    let recurse: Vec<&serde_json::Value> = r["threads"].as_array().unwrap().iter().flat_map(|t| t["frames"].as_array().unwrap()).filter(|f| f["method"] == "Dumpee.Deep::Recurse").collect();
    assert_eq!(recurse.len(), 201);
    // The lines, read from the source: the innermost Recurse waits, the 200 below it are at the
    // recursive call.
    let source = std::fs::read_to_string(repo_root().join("tests/dotnet/dump/Dumpee.cs")).unwrap();
    let line_of = |text: &str| source.lines().position(|l| l.trim() == text).unwrap() as u64 + 1;
    let (wait, call) = (line_of("Never.Wait();"), line_of("return Recurse(depth - 1) + 1;"));
    assert_eq!(recurse[0]["line"].as_u64(), Some(wait), "{}", recurse[0]);
    let below: std::collections::BTreeSet<(Option<u64>, Option<u64>)> = recurse[1..].iter().map(|f| (f["il_offset"].as_u64(), f["line"].as_u64())).collect();
    assert_eq!(below.len(), 1, "{below:?}");
    assert_eq!(below.iter().next().unwrap().1, Some(call), "{below:?}");
}

#[test]
#[ignore = "needs .NET"]
fn dump_live_10_equals_dotnet_dump() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime("10.0");
    let core = live_core(&rt);
    let (r, compared) = check_against_dotnet_dump(&core);
    assert!(compared > 200, "only {compared} frames compared");
    let all: Vec<String> = managed_frames(&r).into_values().flatten().map(|(_, _, m)| m).collect();
    // The scenarios are all there: the deadlock, the recursion, the continuation, the sort.
    for m in ["Dumpee.Locks.Take", "Dumpee.Deep.Recurse", "Dumpee.Blocking.Compare", "System.Collections.Generic.List`1.Sort", "System.Threading.ThreadPoolWorkQueue.Dispatch"] {
        assert!(all.iter().any(|a| a == m), "no frame of {m}");
    }
    assert!(all.iter().any(|a| a.starts_with("Dumpee.Chains+<Inner>d__") && a.ends_with(".MoveNext")), "no frame of the continuation");
    assert_eq!(all.iter().filter(|m| *m == "Dumpee.Deep.Recurse").count(), 201);
    assert_eq!(r["runtime"]["contracts"]["StackWalk"], 1);
    frames_have_the_runtimes_il_offsets(&r, &core.with_file_name("callers.txt"));
    jitted_frames_have_lines(&r);
    native_frames_agree_with_gdb(&rt, &core, &r);
    let _ = std::fs::remove_file(core);
}

/// gdb's `bt` of every thread of the core: LWP → (pc, whether a module holds it). gdb unwinds by
/// the same CFI with its own reader, and from libc's debug info adds inlined and tail-call frames
/// of its own; code no module holds (jitted code) it prints as `?? ()`.
fn gdb_frames(rt: &Runtime, core: &Path) -> BTreeMap<u64, Vec<(u64, bool)>> {
    let gdb = ["/usr/bin/gdb", "/usr/local/bin/gdb"].into_iter().find(|p| Path::new(p).is_file()).expect("gdb (the native frames' oracle) is not installed");
    // A deadline of its own: coreutils' `timeout` ends a gdb that hangs (status 124), and the test
    // fails saying so instead of hanging the suite.
    let o = Command::new("timeout")
        .args(["--kill-after=10", "300"])
        .arg(gdb)
        .args(["-batch", "-nx", "-ex", "set pagination off", "-ex", "set print frame-info location-and-address", "-ex", "set print frame-arguments none", "-ex", "thread apply all bt 64"])
        .arg(&rt.dotnet)
        .arg(core)
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(124), "gdb did not finish within 300 s");
    let text = String::from_utf8_lossy(&o.stdout);
    let mut out: BTreeMap<u64, Vec<(u64, bool)>> = BTreeMap::new();
    let mut lwp = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Thread ") {
            lwp = rest.split("(LWP ").nth(1).and_then(|r| r.split(')').next()).and_then(|n| n.parse().ok());
        } else if let (Some(l), Some(frame)) = (lwp, line.strip_prefix('#')) {
            if frame.contains("<signal handler called>") {
                out.entry(l).or_default().push((SIGNAL_FRAME, true));
                continue;
            }
            let Some(pc) = frame.split_whitespace().nth(1).and_then(|a| a.strip_prefix("0x")).and_then(|a| u64::from_str_radix(a, 16).ok()) else { continue };
            let frames = out.entry(l).or_default();
            // An inlined frame repeats its caller's pc.
            if frames.last().map(|f| f.0) != Some(pc) {
                frames.push((pc, !frame.trim_end().ends_with("in ?? ()")));
            }
        }
    }
    out
}

/// gdb's line for the kernel's signal frame has no address; clrmap lists it as a frame of kind
/// `signal` (the C library's return trampoline). Both stand for it as this.
const SIGNAL_FRAME: u64 = u64::MAX;

/// Native frames by CFI against gdb's on the same core. gdb cannot unwind jitted code, so what
/// both can see is each thread's innermost native stretch (all of a thread the runtime does not
/// know): there clrmap's native frames appear in gdb's list in order, and end where gdb's first
/// run of module code ends.
fn native_frames_agree_with_gdb(rt: &Runtime, core: &Path, r: &serde_json::Value) {
    let gdb = gdb_frames(rt, core);
    let mut checked = 0;
    for t in r["threads"].as_array().unwrap() {
        let tid = t["os_id"].as_u64().unwrap();
        // Up to the first managed frame (the runtime's explicit frames are listed among them).
        let ours: Vec<u64> = t["frames"]
            .as_array()
            .unwrap()
            .iter()
            .take_while(|f| f["kind"] != "managed")
            .filter(|f| f["kind"] == "native" || f["kind"] == "signal")
            .map(|f| if f["kind"] == "signal" { SIGNAL_FRAME } else { f["ip"].as_u64().unwrap() })
            .collect();
        if ours.is_empty() {
            continue;
        }
        let want = gdb.get(&tid).unwrap_or_else(|| panic!("gdb has no thread {tid}"));
        let run: Vec<u64> = want.iter().take_while(|f| f.1).map(|f| f.0).collect();
        let mut it = run.iter();
        for ip in &ours {
            assert!(it.any(|p| p == ip), "thread {tid}: native frame 0x{ip:x} is not in gdb's list in order: ours {ours:x?}, gdb's {run:x?}");
        }
        assert_eq!(ours.last(), run.last(), "thread {tid}: the innermost native stretch: ours {ours:x?}, gdb's {run:x?}");
        checked += ours.len();
    }
    assert!(checked > 100, "only {checked} native frames checked");
    // Through the signal frame: Dumpee's "signal" thread is in `sleep`, run as SIGUSR1's handler,
    // inside `raise`; past the trampoline the walk reaches `raise` (the rules there are DWARF
    // expressions over the kernel's `ucontext_t`).
    let through = r["threads"].as_array().unwrap().iter().any(|t| {
        let frames = t["frames"].as_array().unwrap();
        frames.iter().position(|f| f["kind"] == "signal").is_some_and(|at| frames[at..].iter().any(|f| f["symbol"] == "raise"))
    });
    assert!(through, "no thread was unwound through the signal frame into raise: {}", r["threads"]);
    // Names: the libc function the main thread waits in.
    assert!(r["threads"][0]["frames"].as_array().unwrap().iter().any(|f| f["kind"] == "native" && f["module"].as_str().is_some_and(|m| m.contains("libc.so"))), "{}", r["threads"][0]);
}

/// .NET 11.0.0's root (the runtime pack laid out by scripts/install-dotnet.sh, run by the SDK's
/// host); a missing one fails.
fn runtime_11() -> Runtime {
    let root = repo_root().join(".dotnet/11.0");
    let rt = Runtime { channel: "11.0".to_owned(), version: "11.0.0".to_owned(), dotnet: root.join("dotnet"), framework: root.join("shared/Microsoft.NETCore.App/11.0.0") };
    assert!(rt.dotnet.is_file() && rt.framework.is_dir(), "{} is missing: run scripts/install-dotnet.sh", rt.framework.display());
    rt
}

/// 11.0.0's descriptor is of version 2 (contract versions written `"c1"`, and the thread store
/// chains the threads themselves rather than their links): its live core walks as 10's does, and
/// dotnet-dump with 11.0.0's own DAC agrees frame for frame.
#[test]
#[ignore = "needs .NET"]
fn dump_live_11_equals_dotnet_dump() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime_11();
    let core = live_core(&rt);
    let (r, compared) = check_against_dotnet_dump(&core);
    assert!(compared > 200, "only {compared} frames compared");
    let all: Vec<String> = managed_frames(&r).into_values().flatten().map(|(_, _, m)| m).collect();
    for m in ["Dumpee.Locks.Take", "Dumpee.Deep.Recurse", "Dumpee.Blocking.Compare", "System.Collections.Generic.List`1.Sort"] {
        assert!(all.iter().any(|a| a == m), "no frame of {m}");
    }
    assert_eq!(all.iter().filter(|m| *m == "Dumpee.Deep.Recurse").count(), 201);
    assert_eq!(r["runtime"]["contracts"]["StackWalk"], 1);
    frames_have_the_runtimes_il_offsets(&r, &core.with_file_name("callers.txt"));
    jitted_frames_have_lines(&r);
    let _ = std::fs::remove_file(core);
}

/// `symbolize CORE` answers every code address of the core's managed frames as `symbolize`
/// answers a trace of the same process: the Dumpee runs under `clrmap trace collect`, is dumped
/// once it is ready, then ends the trace.
#[test]
#[ignore = "needs .NET"]
fn symbolize_core_10_equals_symbolize_trace() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime("10.0");
    let dll = dumpee(&rt);
    let (core, trace) = (dll.with_file_name("traced.core"), dll.with_file_name("traced.nettrace"));
    traced_core(&rt, &dll, &["live"], &[], &core, &trace);
    // Every managed frame's address but each thread's innermost: return addresses.
    let r = report(&core);
    let mut addresses = Vec::new();
    for t in r["threads"].as_array().unwrap() {
        for (i, f) in t["frames"].as_array().unwrap().iter().enumerate() {
            if i > 0 && f["kind"] == "managed" {
                addresses.push(format!("0x{:x}", f["ip"].as_u64().unwrap()));
            }
        }
    }
    assert!(addresses.len() > 200, "{} addresses", addresses.len());
    let answer = |source: &Path| -> Vec<serde_json::Value> {
        let mut args = vec!["symbolize", source.to_str().unwrap(), "--return-address", "--json"];
        args.extend(addresses.iter().map(String::as_str));
        let o = clrmap(&args);
        assert_eq!(code(&o), Some(0), "{}", stderr(&o));
        stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let (from_core, from_trace) = (answer(&core), answer(&trace));
    assert_eq!(from_core.len(), addresses.len());
    let key =
        |v: &serde_json::Value| (v["address"].clone(), v["module"].clone(), v["token"].clone(), v["method"].clone(), v["il_offset"].clone(), v["file"].clone(), v["line"].clone(), v["column"].clone());
    let mut with_line = 0;
    for (c, t) in from_core.iter().zip(&from_trace) {
        assert_eq!(key(c), key(t), "core vs trace");
        // Every frame has its IL offset but a dynamic method's (an IL stub has no IL map).
        assert!(c["il_offset"].is_u64() || c["method"].as_str().is_some_and(|m| m.starts_with("dynamicClass::")), "{c}");
        with_line += usize::from(c["line"].is_u64());
    }
    eprintln!("measured: {} addresses of the core answered as the trace answers them, {with_line} with a line", addresses.len());
    assert!(with_line > 200);
    let _ = std::fs::remove_file(core);
}

/// `dll` run with `app_args` under `clrmap trace collect [collect_args] -o TRACE`, dumped whole by
/// createdump into `core` once it prints "ready PID", then let go (a line on its stdin); both the
/// dump and the recording must succeed.
fn traced_core(rt: &Runtime, dll: &Path, app_args: &[&str], collect_args: &[&str], core: &Path, trace: &Path) {
    let _ = std::fs::remove_file(core);
    let mut child = Command::new(env!("CARGO_BIN_EXE_clrmap"))
        .args(["trace", "collect"])
        .args(collect_args)
        .args(["-o", trace.to_str().unwrap(), "--"])
        .arg(&rt.dotnet)
        .arg(dll)
        .args(app_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let (_, pid) = until_ready(&mut child, &dll.display().to_string());
    let out = Command::new(rt.file("createdump")).args(["-u", "-f"]).arg(core).arg(&pid).output().unwrap();
    let _ = child.stdin.take().map(|mut s| s.write_all(b"\n"));
    let status = child.wait().unwrap();
    assert!(out.status.success() && core.is_file(), "createdump: {}", String::from_utf8_lossy(&out.stderr));
    assert!(status.success(), "trace collect: {status}");
}

/// tests/dotnet/dump/Inlined.cs built by csc against `rt`'s framework, optimized (the JIT does not
/// inline into debuggable code), with a runtimeconfig for exactly `rt`.
fn inlined_program(rt: &Runtime) -> PathBuf {
    optimized_program(rt, "Inlined", "cli-dump-inlines")
}

/// tests/dotnet/dump/NAME.cs built by csc against `rt`'s framework, optimized (Release), with a
/// portable PDB and a runtimeconfig for exactly `rt`, in `subdir` of the tests' scratch folder.
fn optimized_program(rt: &Runtime, name: &str, subdir: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(subdir).join(rt.label());
    std::fs::create_dir_all(&dir).unwrap();
    let dll = dir.join(format!("{name}.dll"));
    let mut c = Command::new(dotnet_file("roslyn/csc"));
    c.args(["-nologo", "-noconfig", "-nostdlib", "-deterministic", "-optimize+", "-debug:portable", "-target:exe"]);
    for a in ["System.Private.CoreLib", "System.Runtime", "System.Console", "System.Diagnostics.StackTrace"] {
        c.arg(format!("-r:{}", rt.file(&format!("{a}.dll")).display()));
    }
    c.arg(format!("-out:{}", dll.display())).arg(repo_root().join(format!("tests/dotnet/dump/{name}.cs")));
    let out = c.output().unwrap();
    assert!(out.status.success(), "csc: {}", String::from_utf8_lossy(&out.stdout));
    std::fs::write(dir.join(format!("{name}.runtimeconfig.json")), rt.runtimeconfig()).unwrap();
    dll
}

/// Jitted debug info with OSR patchpoint info (tests/dotnet/dump/Osr.cs, Release: `Loop` and
/// `Main` are tier-0 code with patchpoints, parked inside their loops): their frames get the IL
/// offsets and lines the runtime's own stack trace printed before the dump, on 10.0 (patchpoint
/// info after the flag byte) and 11.0 (in the fat header).
#[test]
#[ignore = "needs .NET"]
fn dump_tier0_frames_with_patchpoints_have_the_runtimes_il_offsets() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    for rt in [runtime("10.0"), runtime_11()] {
        let dll = optimized_program(&rt, "Osr", "cli-dump-osr");
        let core = dll.with_file_name("osr.core");
        let _ = std::fs::remove_file(&core);
        let mut child = Command::new(&rt.dotnet).arg(&dll).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let (before, pid) = until_ready(&mut child, "Osr");
        let mut printed = Vec::new();
        for line in &before {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() == 4 && f[0] == "S" {
                printed.push((f[1].to_owned(), f[2].parse::<u64>().unwrap(), f[3].parse::<u64>().unwrap()));
            }
        }
        let o = Command::new(rt.file("createdump")).args(["-u", "-f"]).arg(&core).arg(&pid).output().unwrap();
        let _ = child.stdin.take().map(|mut s| s.write_all(b"\n"));
        let _ = child.kill();
        let _ = child.wait();
        assert!(o.status.success() && core.is_file(), "createdump: {}", String::from_utf8_lossy(&o.stderr));
        let r = clrmap(&["dump", core.to_str().unwrap(), "--json", "--symbol-path", dll.parent().unwrap().to_str().unwrap()]);
        assert_eq!(code(&r), Some(0), "{}", stderr(&r));
        let r: serde_json::Value = serde_json::from_str(&stdout(&r)).unwrap();
        let frames: Vec<(String, u64, u64)> = r["threads"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t["frames"].as_array().unwrap().iter())
            .filter_map(|f| {
                let m = f["method"].as_str()?.strip_prefix("Program::")?;
                Some((m.to_owned(), f["il_offset"].as_u64().unwrap_or(u64::MAX), f["line"].as_u64().unwrap_or(0)))
            })
            .filter(|f| f.0 != "Park")
            .collect();
        assert_eq!(printed.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(), ["Loop", "Main"], "{}", rt.label());
        assert_eq!(frames, printed, "{}: clrmap's frames against the runtime's stack trace", rt.label());
        let _ = std::fs::remove_file(core);
    }
}

/// The line of tests/dotnet/dump/Inlined.cs that holds `marker`, and the lines of the method
/// `name` (from its signature to the next method's attribute).
fn inlined_cs_lines(marker: &str, name: &str) -> (u64, std::ops::Range<u64>) {
    let text = std::fs::read_to_string(repo_root().join("tests/dotnet/dump/Inlined.cs")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = |pred: &dyn Fn(&str) -> bool, from: usize| lines.iter().enumerate().skip(from).find(|(_, l)| pred(l)).map(|(i, _)| i).unwrap();
    let marked = at(&|l| l.contains(marker), 0) as u64 + 1;
    let start = at(&|l| l.contains(&format!(" {name}(")), 0);
    let end = at(&|l| l.trim_start().starts_with("[MethodImpl") || l.contains("static int Main"), start + 1);
    (marked, start as u64 + 1..end as u64 + 1)
}

/// `dump --inlines`: a process run with DOTNET_RichDebugInfo=1 under `clrmap trace collect
/// --inlines` (which records the runtime's event 189, the JIT's inline trees) is dumped while
/// parked inside code the JIT inlined two levels deep (Inner into Middle into Outer,
/// tests/dotnet/dump/Inlined.cs). Every jitted frame's inlined frames, read from the debug info
/// the core holds, are the ones `symbolize --inlines TRACE --return-address` gives the same
/// address: same methods, IL offsets and lines, innermost first, and the frame itself at the same
/// IL offset and line. The parked frame's chain is Inner at its call to Park, then Middle at its
/// call to Inner, then Outer at its call to Middle, each a line of its own method's source.
#[test]
#[ignore = "needs .NET"]
fn dump_inlines_10_equals_symbolize_inlines_trace() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime("10.0");
    let dll = inlined_program(&rt);
    let (core, trace) = (dll.with_file_name("inlined.core"), dll.with_file_name("inlined.nettrace"));
    traced_core(&rt, &dll, &[], &["--inlines"], &core, &trace);
    let o = clrmap(&["dump", core.to_str().unwrap(), "--json", "--inlines"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    // Every jitted frame but each thread's innermost: return addresses.
    let mut frames = Vec::new();
    for t in r["threads"].as_array().unwrap() {
        for (i, f) in t["frames"].as_array().unwrap().iter().enumerate() {
            if i > 0 && f["kind"] == "managed" && f["code"] == "jit" {
                frames.push(f.clone());
            }
        }
    }
    let mut args = vec!["symbolize".to_owned(), trace.to_str().unwrap().to_owned(), "--inlines".to_owned(), "--return-address".to_owned(), "--json".to_owned()];
    args.extend(frames.iter().map(|f| format!("0x{:x}", f["ip"].as_u64().unwrap())));
    let o = clrmap(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let answers: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), frames.len());
    let at = |v: &serde_json::Value| (v["method"].clone(), v["token"].clone(), v["il_offset"].clone(), v["file"].clone(), v["line"].clone(), v["column"].clone());
    let chain = |v: &serde_json::Value| v["inlined"].as_array().map(|a| a.iter().map(at).collect::<Vec<_>>()).unwrap_or_default();
    let mut with_inlines = 0;
    for (f, t) in frames.iter().zip(&answers) {
        assert_eq!(chain(f), chain(t), "inlined frames, core vs trace, at 0x{:x}:\n{f:#}\n{t:#}", f["ip"].as_u64().unwrap());
        assert_eq!(at(f), at(t), "the frame, core vs trace");
        with_inlines += usize::from(!chain(f).is_empty());
    }
    eprintln!("measured: {} jitted return addresses of the core answered as the trace answers them with --inlines, {with_inlines} with inlined frames", frames.len());
    // The parked frame: Outer, with Inner then Middle inlined, each at a line of its own method.
    let outer = frames.iter().find(|f| f["method"] == "Inlined.Program::Outer").expect("a frame of Outer");
    let inlined = outer["inlined"].as_array().expect("Outer's inlined frames");
    let names: Vec<&str> = inlined.iter().map(|i| i["method"].as_str().unwrap()).collect();
    assert_eq!(names, ["Inlined.Program::Inner", "Inlined.Program::Middle"]);
    for (frame, marker, name) in [(&inlined[0], "INNER-PARK", "Inner"), (&inlined[1], "MIDDLE-CALL", "Middle"), (outer, "OUTER-CALL", "Outer")] {
        let (line, body) = inlined_cs_lines(marker, name);
        assert!(frame["file"].as_str().unwrap().ends_with("Inlined.cs"), "{frame}");
        assert_eq!(frame["line"].as_u64(), Some(line), "{name}: {frame}");
        assert!(body.contains(&line), "{name}'s line {line} is in its body {body:?}");
        assert!(frame["il_offset"].is_u64(), "{name}: {frame}");
    }
    // The text lists them above their frame.
    let o = clrmap(&["dump", core.to_str().unwrap(), "--inlines"]);
    let text = stdout(&o);
    let inner = text.find("[inlined] Inlined.Program::Inner").expect("Inner in the text");
    let middle = text.find("[inlined] Inlined.Program::Middle").expect("Middle in the text");
    let outer_at = text.find(" Inlined.Program::Outer +0x").expect("Outer in the text");
    assert!(inner < middle && middle < outer_at, "{text}");
    // Without --inlines, the same frames and no inlined ones.
    let plain = report(&core);
    assert!(!serde_json::to_string(&plain).unwrap().contains("\"inlined\""));
    let _ = std::fs::remove_file(core);
}

#[test]
#[ignore = "needs .NET"]
fn dump_crash_10_names_the_exception() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime("10.0");
    let core = crash_core(&rt);
    let (r, _) = check_against_dotnet_dump(&core);
    let thrower = r["threads"].as_array().unwrap().iter().find(|t| !t["exception"].is_null()).expect("a thread with an exception in flight");
    assert_eq!(thrower["exception"]["type_name"], "System.InvalidOperationException");
    assert_eq!(thrower["exception"]["message"], "dumpee crash");
    let methods: Vec<String> = thrower["frames"].as_array().unwrap().iter().filter_map(|f| f["method"].as_str().map(str::to_owned)).collect();
    let i = methods.iter().position(|m| m == "Dumpee.Program::Thrower").expect("Thrower's frame");
    assert_eq!(&methods[i..i + 6], ["Dumpee.Program::Thrower", "Dumpee.Program::Thrower", "Dumpee.Program::Thrower", "Dumpee.Program::Thrower", "Dumpee.Program::Crash", "Dumpee.Program::Main"]);
    // The lines equal those of the runtime's own stack trace of the exception, which it printed
    // as the process died (`at Dumpee.Program.Thrower(Int32 n) in /.../Dumpee.cs:line 113`).
    let printed = std::fs::read_to_string(core.with_file_name("crash.txt")).unwrap();
    let want: Vec<u64> = printed.lines().filter(|l| l.trim_start().starts_with("at Dumpee.Program.")).map(|l| l.rsplit(":line ").next().unwrap().trim().parse().unwrap()).collect();
    let managed: Vec<&serde_json::Value> = thrower["frames"].as_array().unwrap().iter().filter(|f| f["method"].as_str().is_some_and(|m| m.starts_with("Dumpee.Program::"))).collect();
    let have: Vec<u64> = managed.iter().map(|f| f["line"].as_u64().unwrap_or(0)).collect();
    assert_eq!(have, want, "{printed}\n{managed:#?}");
    assert_eq!(want.len(), 6, "{printed}");
    let _ = std::fs::remove_file(core);
}

#[test]
#[ignore = "needs .NET"]
fn dump_9_lists_threads_and_says_why_no_frames() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime("9.0");
    let core = live_core(&rt);
    let want = oracle(&core);
    let r = report(&core);
    assert!(r["runtime"]["descriptor"].as_u64().unwrap() > 0);
    assert!(r["runtime"]["contracts"]["StackWalk"].is_null());
    let notes = r["notes"].to_string();
    assert!(notes.contains("no ExecutionManager or StackWalk contract"), "{notes}");
    // Every thread dotnet-dump lists is a managed thread of clrmap's, with its managed id.
    for tid in want.keys() {
        let t = r["threads"].as_array().unwrap().iter().find(|t| t["os_id"] == *tid).unwrap_or_else(|| panic!("no thread 0x{tid:x}"));
        assert!(t["managed_id"].as_u64().is_some(), "thread 0x{tid:x} has no managed id");
    }
    // Without a code map, each thread still has its innermost native stretch, as gdb has it.
    native_frames_agree_with_gdb(&rt, &core, &r);
    let _ = std::fs::remove_file(core);
}

#[test]
#[ignore = "needs .NET"]
fn dump_8_has_no_descriptor() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime("8.0");
    let core = live_core(&rt);
    let r = report(&core);
    assert!(r["runtime"].is_null());
    let notes = r["notes"].to_string();
    assert!(notes.contains("no readable contract descriptor"), "{notes}");
    assert!(r["threads"].as_array().unwrap().len() >= 8);
    // No descriptor: each thread's native frames alone, as gdb unwinds them.
    native_frames_agree_with_gdb(&rt, &core, &r);
    let _ = std::fs::remove_file(core);
}

#[test]
#[ignore = "needs .NET"]
fn dump_truncated_and_corrupted_cores_end() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime("10.0");
    let core = live_core(&rt);
    let bytes = std::fs::read(&core).unwrap();
    let cut = core.with_file_name("cut.core");
    // Cut anywhere: the headers, the notes, the middle of memory, just before the end.
    for at in [0usize, 10, 64, 200, 4096, 20_000, bytes.len() / 3, bytes.len() / 2, bytes.len() - 4096] {
        std::fs::write(&cut, &bytes[..at]).unwrap();
        let started = Instant::now();
        let out = clrmap(&["dump", cut.to_str().unwrap(), "--json"]);
        assert!(matches!(code(&out), Some(0 | 1)), "cut at {at}: {:?} {}", code(&out), stderr(&out));
        assert!(started.elapsed() < Duration::from_secs(60), "cut at {at} took {:?}", started.elapsed());
        if code(&out) == Some(0) && at > 0 {
            let r: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
            assert!(!r["notes"].as_array().unwrap().is_empty(), "cut at {at}: a truncated core with no note");
        }
    }
    // Corrupt every 4 KiB page's first bytes after the headers: no panic, no hang.
    let mut bad = bytes.clone();
    let mut i = 8192;
    while i + 8 < bad.len() {
        bad[i..i + 8].copy_from_slice(&0x4141_4141_4141_4141u64.to_le_bytes());
        i += 4096 * 7;
    }
    std::fs::write(&cut, &bad).unwrap();
    let started = Instant::now();
    let out = clrmap(&["dump", cut.to_str().unwrap()]);
    assert!(matches!(code(&out), Some(0 | 1)), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(60));
    let _ = std::fs::remove_file(cut);
    let _ = std::fs::remove_file(core);
}

#[test]
fn dump_rejects_what_is_not_a_core() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-dump");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("not-a-core");
    std::fs::write(&f, b"\x7fELF but not really").unwrap();
    let out = clrmap(&["dump", f.to_str().unwrap()]);
    assert_eq!(code(&out), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("bad_image"), "{}", stderr(&out));
    let out = clrmap(&["dump"]);
    assert_eq!(code(&out), Some(2));
}

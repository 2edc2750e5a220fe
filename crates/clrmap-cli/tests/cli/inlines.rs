//! `symbolize --inlines` on the real runtime, on known inline decisions: programs whose
//! inlining is forced (tests/dotnet/inlining: `AggressiveInlining` and `NoInlining`, three and two
//! levels deep, across two modules, generic inlinees, an inlinee with a loop, one that throws), run
//! once under `clrmap profile` with `clrmap trace collect --inlines` attached to the same process.
//!
//! The oracles are not clrmap's: the program's own IL bytes, read through reflection (the IL
//! offset of each call instruction), the source text (the line of each call, marked by a comment,
//! and each method's line range), the raw event 189 payloads decoded here by hand, the release
//! JIT's own summary (`DOTNET_JitDisasmSummary`/`JitDisasm` through `DOTNET_JitStdOutFile`: how
//! many methods it inlined into each body, and which calls it left as calls), and
//! llvm-symbolizer's own layout for inlined native code. Needs .NET (mandatory in CI), Roslyn csc
//! (scripts/install-roslyn.sh), the profiler built by `cargo build --workspace`, gcc, and
//! llvm-symbolizer (scripts/install-perf.sh).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use clrmap::capture::{read_capture, Capture, InlineEventKind};
use clrmap::ilmap::CodeKind;
use serde_json::Value;

use crate::support::{corelib, dotnet_file, host, repo_root};

const RUNTIMECONFIG: &str = r#"{
  "runtimeOptions": {
    "tfm": "netcoreapp3.1",
    "rollForward": "LatestMajor",
    "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.0" },
    "configProperties": {
      "System.Globalization.Invariant": true,
      "System.Runtime.TieredCompilation": false
    }
  }
}
"#;

/// What the programs force: (caller, callee) pairs, each callee `AggressiveInlining`.
const FORCED: &[(&str, &str)] = &[
    ("Inlining.Prog::Chain3", "Inlining.Prog::Level1"),
    ("Inlining.Prog::Level1", "Inlining.Prog::Level2"),
    ("Inlining.Prog::Level2", "Inlining.Prog::Level3"),
    ("Inlining.Prog::LibLoop", "InlLib.LibMath::Scramble"),
    ("InlLib.LibMath::Scramble", "InlLib.LibMath::Rotate"),
    ("Inlining.Prog::GenericHost", "Inlining.Prog::Choose"),
    ("Inlining.Prog::GenericHost", "Inlining.Box`1::Get"),
    ("Inlining.Prog::CrossGenericHost", "InlLib.LibMath::Pick"),
    ("Inlining.Prog::SharedHost", "Inlining.Box`1::Get"),
    ("Inlining.Prog::LoopHost", "Inlining.Prog::SumDigits"),
    ("Inlining.Prog::ThrowHost", "Inlining.Prog::Checked"),
];

/// The `NoInlining` methods: never an inlinee.
const NEVER: &[&str] = &[
    "Inlining.Prog::Never",
    "InlLib.LibMath::Opaque",
    "Inlining.Prog::Chain3",
    "Inlining.Prog::LibLoop",
    "Inlining.Prog::GenericHost",
    "Inlining.Prog::CrossGenericHost",
    "Inlining.Prog::SharedHost",
    "Inlining.Prog::LoopHost",
    "Inlining.Prog::ThrowHost",
    "Inlining.Prog::Run",
];

/// The bodies jitted after the program was told to go (so the trace has their trees too).
const HOSTS: &[&str] = &[
    "Inlining.Prog::Run",
    "Inlining.Prog::Chain3",
    "Inlining.Prog::LibLoop",
    "Inlining.Prog::GenericHost",
    "Inlining.Prog::CrossGenericHost",
    "Inlining.Prog::SharedHost",
    "Inlining.Prog::LoopHost",
    "Inlining.Prog::ThrowHost",
];

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A directory of this test process's own (two runs of the tests at once must not share one).
fn work_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-inlines-{}/{name}", std::process::id()))
}

fn src_dir() -> PathBuf {
    repo_root().join("tests/dotnet/inlining")
}

/// Prog.dll and Lib.dll, each with its portable PDB, built by Roslyn csc (optimized) against the
/// 3.1.23 framework, so the same files run on 3.1.23 and (rolled forward) on 8.0.4; once per run.
fn built() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let csc = dotnet_file("roslyn/csc");
        let corelib = corelib("3.1");
        let fw = Path::new(&corelib).parent().unwrap().to_path_buf();
        let out = work_dir("build");
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let src = src_dir();
        let compile = |extra: &[&str], dll: &str, source: &str| {
            let mut c = Command::new(&csc);
            c.current_dir(&src).args(["-nologo", "-noconfig", "-nostdlib", "-langversion:7.3", "-deterministic", "-optimize+", "-debug:portable"]);
            c.arg(format!("-pathmap:{}/=/_/src/", src.display()));
            for a in [
                "System.Private.CoreLib",
                "System.Runtime",
                "System.Console",
                "System.Collections",
                "System.Reflection.Primitives",
                "System.Diagnostics.Process",
                "System.Runtime.Extensions",
                "System.ComponentModel.Primitives",
            ] {
                c.arg(format!("-r:{}", fw.join(format!("{a}.dll")).display()));
            }
            c.args(extra).arg(format!("-out:{}", out.join(dll).display())).arg(source);
            run_ok(&mut c);
        };
        compile(&["-target:library"], "Lib.dll", "Lib.cs");
        compile(&["-target:exe", &format!("-r:{}", out.join("Lib.dll").display())], "Prog.dll", "Prog.cs");
        std::fs::write(out.join("Prog.runtimeconfig.json"), RUNTIMECONFIG).unwrap();
        for f in ["Prog.pdb", "Lib.pdb"] {
            assert!(out.join(f).is_file(), "{f} not written");
        }
        out
    })
}

fn profiler() -> String {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    so.to_string_lossy().into_owned()
}

/// One run of Prog.dll under `clrmap profile`, with `trace collect --inlines` attached.
struct Run {
    capture: PathBuf,
    trace: PathBuf,
    /// (caller, callee) as `Type::Method` -> the IL offset of the call, from the program's IL.
    callsites: HashMap<(String, String), u64>,
    /// `Type::Method` -> its MethodDef token, from reflection.
    tokens: HashMap<String, u64>,
    /// The JIT's own listing (`DOTNET_JitStdOutFile`).
    jit_stdout: PathBuf,
}

fn lines_of(child: &mut Child) -> Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The program's stdout up to and including the line `until`.
fn read_until(rx: &Receiver<String>, until: &str, seen: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let l = rx.recv_timeout(left).unwrap_or_else(|e| panic!("no `{until}` from the program ({e}); so far: {seen:?}"));
        seen.push(l.clone());
        if l == until {
            return;
        }
    }
}

fn wait_for(child: &mut Child, what: &str, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Run Prog.dll on `dotnet`: `clrmap profile -o CAPTURE -- dotnet Prog.dll N`, and, once it has
/// said `ready`, `clrmap trace collect --pid PID --inlines` on the same process; then let it jit
/// and run its hosts, stop the trace (SIGTERM: rundown, exit 0) and let the program end. Tiered
/// compilation is off (each method jitted once, optimized) unless `tiered`: then the hosts run
/// long enough for their loops to go to OSR bodies, optimized with inlining.
fn run(name: &str, dotnet: &str, tiered: bool) -> Run {
    let build = built();
    let dir = work_dir(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (capture, trace, jit_stdout) = (dir.join("run.capture"), dir.join("run.nettrace"), dir.join("jit.txt"));
    let so = profiler();
    let mut profile = Command::new(env!("CARGO_BIN_EXE_clrmap"))
        .args(["profile", "-o", capture.to_str().unwrap(), "--profiler", &so, "--", dotnet, build.join("Prog.dll").to_str().unwrap(), if tiered { "1000000" } else { "20000" }])
        .current_dir(repo_root())
        .env_remove("DOTNET_RichDebugInfo")
        .env("DOTNET_TieredCompilation", if tiered { "1" } else { "0" })
        .env("DOTNET_JitStdOutFile", &jit_stdout)
        .env("DOTNET_JitDisasm", "Inlining.Prog:Chain3 Inlining.Prog:LibLoop Inlining.Prog:GenericHost Inlining.Prog:CrossGenericHost Inlining.Prog:SharedHost Inlining.Prog:LoopHost Inlining.Prog:ThrowHost Inlining.Prog:Run")
        .env("DOTNET_JitDisasmSummary", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("profile.stderr")).unwrap())
        .spawn()
        .unwrap();
    let mut stdin = profile.stdin.take().unwrap();
    let rx = lines_of(&mut profile);
    let mut seen = Vec::new();
    read_until(&rx, "ready", &mut seen);
    let pid = seen.iter().find_map(|l| l.strip_prefix("pid ")).unwrap_or_else(|| panic!("no pid: {seen:?}")).to_owned();
    let mut collect = Command::new(env!("CARGO_BIN_EXE_clrmap"))
        .args(["trace", "collect", "--pid", &pid, "-o", trace.to_str().unwrap(), "--inlines"])
        .current_dir(repo_root())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("collect.stderr")).unwrap())
        .spawn()
        .unwrap();
    // The session is on once its stream has begun: the new file beside the trace has bytes.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let streaming = std::fs::read_dir(&dir).unwrap().flatten().any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(".run.nettrace.") && e.metadata().map(|m| m.len() > 0).unwrap_or(false)
        });
        if streaming {
            break;
        }
        assert!(collect.try_wait().unwrap().is_none(), "trace collect ended early: {}", std::fs::read_to_string(dir.join("collect.stderr")).unwrap_or_default());
        assert!(Instant::now() < deadline, "trace collect never began streaming");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
    read_until(&rx, "done", &mut seen);
    let s = run_ok(Command::new("kill").args(["-TERM", &collect.id().to_string()]));
    assert_eq!(s, "");
    let st = wait_for(&mut collect, "trace collect", Duration::from_secs(60));
    assert_eq!(st.code(), Some(0), "trace collect: {}", std::fs::read_to_string(dir.join("collect.stderr")).unwrap_or_default());
    stdin.write_all(b"exit\n").unwrap();
    drop(stdin);
    let st = wait_for(&mut profile, "clrmap profile", Duration::from_secs(60));
    assert_eq!(st.code(), Some(0), "profile: {}", std::fs::read_to_string(dir.join("profile.stderr")).unwrap_or_default());
    assert!(seen.iter().any(|l| l == "result throw caught -1"), "{seen:?}");
    let mut callsites = HashMap::new();
    for l in seen.iter().filter_map(|l| l.strip_prefix("callsite ")) {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f.len(), 3, "{l}");
        callsites.insert((f[0].to_owned(), f[1].to_owned()), f[2].parse().unwrap());
    }
    assert!(callsites.len() >= FORCED.len(), "{seen:?}");
    let tokens: HashMap<String, u64> = seen
        .iter()
        .filter_map(|l| l.strip_prefix("method "))
        .map(|l| {
            let (m, t) = l.split_once(' ').unwrap();
            (m.to_owned(), t.parse().unwrap())
        })
        .collect();
    Run { capture, trace, callsites, tokens, jit_stdout }
}

/// The 8.0.4 run, shared by the tests that read it.
fn run8() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| run("v8", &host("8.0"), false))
}

/// Every address of the bodies, one per line, in order.
fn every_address(bodies: &[(u64, u64, u64)]) -> String {
    bodies.iter().flat_map(|&(start, size, _)| (start..start + size).map(|a| format!("{a:#x}\n"))).collect()
}

/// `clrmap ARGS` with `input` on stdin.
fn clrmap_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clrmap")).args(args).current_dir(repo_root()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// `symbolize SOURCE ARGS` over `addresses` (one per line on stdin): status 0, and stdout.
fn symbolize(source: &Path, args: &[&str], addresses: &str) -> (String, String) {
    let mut a = vec!["symbolize", source.to_str().unwrap(), "--symbol-path", built().to_str().unwrap()];
    a.extend_from_slice(args);
    let o = clrmap_stdin(&a, addresses);
    let (out, err) = (String::from_utf8(o.stdout).unwrap(), String::from_utf8(o.stderr).unwrap());
    assert_eq!(o.status.code(), Some(0), "symbolize {args:?}: {err}");
    (out, err)
}

/// stderr holds notes only (text `note: ...` or JSON `{"note":...}` lines), no warning or error.
fn only_notes(err: &str) {
    assert!(err.lines().all(|l| l.starts_with("note: ") || l.starts_with("{\"note\":")), "{err}");
}

/// A jitted body of Prog.dll or Lib.dll: (start, size, function id).
fn our_bodies(c: &Capture) -> Vec<(u64, u64, u64)> {
    let mut v: Vec<_> = c
        .bodies
        .iter()
        .filter(|b| b.kind == CodeKind::Jit && (b.module_path.ends_with("/Prog.dll") || b.module_path.ends_with("/Lib.dll")))
        .map(|b| (b.body.start.unwrap(), u64::from(b.body.code_size), b.body.function_id.unwrap()))
        .collect();
    v.sort();
    v
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Each body's tree from the capture's raw event 189 payloads, decoded here (docs/rich-debug-info.md,
/// docs/rich-debug-info.md §2-3): code start -> the nodes' MethodIDs (node 0 the root).
fn raw_trees(c: &Capture) -> HashMap<u64, Vec<u64>> {
    // (MethodID, NativeCodeId) -> (code start, blob so far, last chunk seen).
    type Blobs = HashMap<(u64, u64), (Option<u64>, Vec<u8>, bool)>;
    let mut blobs = Blobs::new();
    for i in c.inlines.iter().filter(|i| i.kind == InlineEventKind::RichDebugInfo) {
        let p = &i.payload;
        let (method_id, code_id, chunk, len) = (u64_at(p, 2), u64_at(p, 10), u32_at(p, 26), u32_at(p, 30));
        assert_eq!(len as usize, p.len() - 34);
        let e = blobs.entry((method_id, code_id)).or_insert((None, Vec::new(), false));
        assert!(!e.2, "a chunk after the last");
        e.1.extend_from_slice(&p[34..]);
        e.2 = chunk & 0x8000_0000 != 0;
        e.0 = e.0.or(i.start);
    }
    blobs
        .into_values()
        .filter_map(|(start, blob, last)| {
            assert!(last);
            let n = u32_at(&blob, 0) as usize;
            Some((start?, (0..n).map(|k| u64_at(&blob, 8 + k * 20)).collect()))
        })
        .collect()
}

/// The frames of one JSON answer, innermost first: the inlined ones, then the physical one.
fn frames(v: &Value) -> Vec<&Value> {
    let mut f: Vec<&Value> = v["inlined"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    f.push(v);
    f
}

fn s(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_else(|| panic!("{k} of {v}")).to_owned()
}

/// `Ns.Type::Method` -> `Type::Method`, as the program prints call sites.
fn short(method: &str) -> String {
    let (ty, m) = method.split_once("::").unwrap();
    format!("{}::{m}", ty.rsplit('.').next().unwrap())
}

/// The 1-based line of `needle` in a source file (exactly one).
fn line_of(file: &str, needle: &str) -> u64 {
    let text = std::fs::read_to_string(src_dir().join(file)).unwrap();
    let hits: Vec<usize> = text.lines().enumerate().filter(|(_, l)| l.contains(needle)).map(|(i, _)| i + 1).collect();
    assert_eq!(hits.len(), 1, "{needle:?} in {file}: {hits:?}");
    hits[0] as u64
}

/// The lines of a method's declaration to its closing brace, from the source text.
fn method_lines(file: &str, method: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(src_dir().join(file)).unwrap();
    let (ty, m) = method.split_once("::").unwrap();
    let ty = ty.rsplit('.').next().unwrap().split('`').next().unwrap();
    let name = if m == ".ctor" { ty } else { m };
    let lines: Vec<&str> = text.lines().collect();
    let decl = lines
        .iter()
        .position(|l| {
            let t = l.trim_start();
            (t.starts_with("static ") || t.starts_with("public ")) && !t.contains(" class ") && (l.contains(&format!(" {name}(")) || l.contains(&format!(" {name}<")))
        })
        .unwrap_or_else(|| panic!("no declaration of {method} in {file}"));
    let end = lines[decl..].iter().position(|l| *l == "        }").unwrap() + decl;
    (decl as u64 + 1, end as u64 + 1)
}

fn file_of(module: &str) -> &'static str {
    match module {
        "Prog.dll" => "Prog.cs",
        "Lib.dll" => "Lib.cs",
        m => panic!("not ours: {m}"),
    }
}

fn ours(frame: &Value) -> bool {
    matches!(frame["module"].as_str(), Some("Prog.dll" | "Lib.dll"))
}

/// llvm-symbolizer's text layout, strictly: blocks of `name\nfile:line:col\n` pairs, each block
/// ended by an empty line. Returns each block's (name, location) pairs.
fn blocks(text: &str) -> Vec<Vec<(String, String)>> {
    assert!(text.ends_with("\n\n") || text.is_empty(), "{text:?}");
    let is_location = |l: &str| {
        let mut p = l.rsplitn(3, ':');
        let (col, line, file) = (p.next(), p.next(), p.next());
        matches!((col, line, file), (Some(c), Some(n), Some(f)) if !f.is_empty() && c.parse::<u64>().is_ok() && n.parse::<u64>().is_ok())
    };
    let mut out = Vec::new();
    for block in text.strip_suffix("\n\n").unwrap_or("").split("\n\n") {
        if text.is_empty() {
            break;
        }
        let lines: Vec<&str> = block.split('\n').collect();
        assert!(!lines.is_empty() && lines.len() % 2 == 0, "a block that is not name/location pairs: {block:?}");
        let pairs: Vec<(String, String)> = lines
            .chunks(2)
            .map(|p| {
                assert!(!p[0].is_empty() && !is_location(p[0]), "not a name line: {:?}", p[0]);
                assert!(is_location(p[1]), "not a file:line:col line: {:?}", p[1]);
                (p[0].to_owned(), p[1].to_owned())
            })
            .collect();
        out.push(pairs);
    }
    out
}

/// The expected text of one JSON answer (llvm-symbolizer's layout, docs/output.md#symbolized-frames).
fn text_of(v: &Value) -> Vec<(String, String)> {
    frames(v)
        .into_iter()
        .map(|f| {
            let name = f["method"].as_str().unwrap_or("??").to_owned();
            let loc = match (f["file"].as_str(), f["line"].as_u64(), f["column"].as_u64()) {
                (Some(file), Some(l), c) => format!("{file}:{l}:{}", c.unwrap_or(0)),
                _ => "??:0:0".to_owned(),
            };
            (name, loc)
        })
        .collect()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// The capture without its inline records (rich_debug_info, method_details, inline_session).
fn without_trees(capture: &Path) -> PathBuf {
    let text = std::fs::read_to_string(capture).unwrap();
    let kept: String =
        text.lines().filter(|l| !["rich_debug_info", "method_details", "inline_session"].iter().any(|k| l.starts_with(&format!("{{\"kind\":\"{k}\"")))).map(|l| format!("{l}\n")).collect();
    assert!(kept.len() < text.len(), "no inline records to take out");
    let out = capture.with_extension("flat.capture");
    std::fs::write(&out, kept).unwrap();
    out
}

/// (a) The answers' chains against what the program forces: its IL (each call's offset), its
/// sources (each call's line, each method's lines), its attributes, and the raw trees.
fn check_forced(r: &Run, cap: &[Value], bodies: &[(u64, u64, u64)], trees: &HashMap<u64, Vec<u64>>, major: u16) {
    let mut pairs = BTreeSet::new();
    let (mut settled, mut unsettled) = (0, 0);
    let mut chains = BTreeSet::new();
    for v in cap {
        let f = frames(v);
        if f.len() == 1 {
            continue;
        }
        let names: Vec<String> = f.iter().map(|x| s(x, "method")).collect();
        chains.insert(names.clone());
        for k in 0..f.len() - 1 {
            let (callee, parent) = (f[k], f[k + 1]);
            let (callee_name, parent_name) = (&names[k], &names[k + 1]);
            assert!(!NEVER.contains(&callee_name.as_str()), "a NoInlining method inlined: {v}");
            if !ours(callee) || !ours(parent) {
                continue;
            }
            pairs.insert((parent_name.clone(), callee_name.clone()));
            // The parent is at the call's IL offset (from the IL bytes) and on the call's line.
            let at = r.callsites.get(&(short(parent_name), short(callee_name))).unwrap_or_else(|| panic!("{parent_name} never calls {callee_name}: {v}"));
            if major >= 10 && parent["il_offset"].as_u64() != Some(*at) {
                // .NET 10 gives no call sites (clrmap::inlines::call_sites_known); clrmap gives
                // back those the IL settles (one call to the callee: not Choose<T>'s two
                // instantiations) and leaves the others unknown: an inner frame then has no IL
                // offset and no line, the physical frame the flat map's answer.
                if k + 1 < f.len() - 1 {
                    assert!(parent["il_offset"].is_null() && parent["line"].is_null(), "{v}");
                }
                unsettled += 1;
                continue;
            }
            settled += 1;
            assert_eq!(parent["il_offset"].as_u64(), Some(*at), "{parent_name} calls {callee_name} at IL {at}: {v}");
            let file = file_of(parent["module"].as_str().unwrap());
            assert_eq!(parent["file"].as_str(), Some(format!("/_/src/{file}").as_str()), "{v}");
            let callee_short = callee_name.rsplit("::").next().unwrap();
            let marker = format!("// {} calls {callee_short}", short(parent_name).rsplit("::").next().unwrap());
            assert_eq!(parent["line"].as_u64(), Some(line_of(file, &marker)), "{marker}: {v}");
        }
        // Each inlinee of ours is named in its own module, with a line of its own body from
        // that module's PDB.
        for x in f.iter().take(f.len() - 1).filter(|x| ours(x)) {
            let file = file_of(x["module"].as_str().unwrap());
            assert_eq!(x["file"].as_str(), Some(format!("/_/src/{file}").as_str()), "{v}");
            let (from, to) = method_lines(file, &s(x, "method"));
            let line = x["line"].as_u64().unwrap_or_else(|| panic!("no line: {v}"));
            assert!((from..=to).contains(&line), "{} at line {line}, outside {from}..={to}: {v}", s(x, "method"));
            assert!(x["il_offset"].is_u64(), "{v}");
        }
        // Every frame of Prog, Box`1 and LibMath has the MethodDef token reflection gives (each
        // inlinee of ours is one of theirs).
        for (k, x) in f.iter().enumerate().filter(|(_, x)| ours(x)) {
            let want = r.tokens.get(&short(&s(x, "method"))).copied();
            assert!(want.is_some() || k == f.len() - 1, "{v}");
            if want.is_some() {
                assert_eq!(x["token"].as_u64(), want, "the token reflection gives: {v}");
            }
        }
    }
    for (parent, callee) in FORCED {
        assert!(pairs.contains(&(parent.to_string(), callee.to_string())), "{callee} is never an inlinee of {parent}: {pairs:#?}");
    }
    eprintln!("{major}: {settled} call sites at the call, {unsettled} unknown");
    assert!(settled > 0 && (major >= 10 || unsettled == 0), "{settled} settled, {unsettled} unknown");
    // Three levels and two modules, innermost first.
    let three: Vec<String> = ["Inlining.Prog::Level3", "Inlining.Prog::Level2", "Inlining.Prog::Level1", "Inlining.Prog::Chain3"].map(String::from).to_vec();
    assert!(chains.contains(&three), "{chains:#?}");
    let cross: Vec<String> = ["InlLib.LibMath::Rotate", "InlLib.LibMath::Scramble", "Inlining.Prog::LibLoop"].map(String::from).to_vec();
    assert!(chains.contains(&cross), "{chains:#?}");
    let lib = cap.iter().flat_map(frames).find(|f| f["method"] == "InlLib.LibMath::Rotate").unwrap();
    assert_eq!((lib["module"].as_str(), lib["file"].as_str()), (Some("Lib.dll"), Some("/_/src/Lib.cs")));
    // The inlinee that throws has its throw line; the one with a loop, its loop's lines.
    let lines_of = |m: &str| -> HashSet<u64> { cap.iter().flat_map(frames).filter(|f| f["method"] == m).filter_map(|f| f["line"].as_u64()).collect() };
    assert!(lines_of("Inlining.Prog::Checked").contains(&line_of("Prog.cs", "throw new ArgumentOutOfRangeException")));
    assert!(lines_of("Inlining.Prog::SumDigits").contains(&line_of("Prog.cs", "s += x % 10;")));
    // No tree of the whole run has a NoInlining method below its root (the raw nodes, by
    // MethodID: the FunctionIDs of those methods' own bodies).
    let names: HashMap<u64, String> = cap.iter().filter_map(|v| Some((v["address"].as_u64()?, v["method"].as_str()?.to_owned()))).collect();
    let never_ids: HashSet<u64> = bodies.iter().filter(|(start, _, _)| names.get(start).is_some_and(|n| NEVER.contains(&n.as_str()))).map(|b| b.2).collect();
    assert_eq!(never_ids.len(), NEVER.len(), "a NoInlining method without its own body");
    for (start, t) in trees {
        assert!(!t[1..].iter().any(|m| never_ids.contains(m)), "the body at {start:#x} inlines a NoInlining method");
    }
}

/// (b) The trace of the same run gives the same answers as the capture for every body jitted
/// while it listened (each host), and the flat answer for those jitted before the attach.
fn check_trace(r: &Run, cap: &[Value], bodies: &[(u64, u64, u64)], addresses: &str) {
    let count = cap.len();
    let (tr_json, tr_err) = symbolize(&r.trace, &["--inlines", "--json"], addresses);
    only_notes(&tr_err);
    let tr = json_lines(&tr_json);
    assert_eq!(tr.len(), count);
    let (flat_json, _) = symbolize(&r.capture, &["--json"], addresses);
    let flat = json_lines(&flat_json);
    let mut i = 0;
    let mut compared = BTreeSet::new();
    for &(_, size, _) in bodies {
        let range = i..i + size as usize;
        i += size as usize;
        let name = s(&cap[range.start], "method");
        if HOSTS.contains(&name.as_str()) || tr[range.clone()].iter().any(|v| frames(v).len() > 1) {
            assert_eq!(tr[range.clone()], cap[range.clone()], "{name}: the trace and the capture disagree");
            compared.insert(name);
        } else {
            for k in range {
                let mut t = tr[k].clone();
                assert_eq!(t.as_object_mut().unwrap().remove("inlined"), Some(Value::Array(vec![])));
                assert_eq!(t, flat[k], "{name}");
            }
        }
    }
    assert!(HOSTS.iter().all(|h| compared.contains(*h)), "{compared:?}");
    // (Run's tree is one that dotnet/runtime#98755 broke: its inlinees are cut off from its root,
    // and every mapping is the root's, so it has no chain in either.)
    let with_chains: BTreeSet<String> = tr.iter().filter(|v| frames(v).len() > 1).map(|v| s(v, "method")).collect();
    assert!(HOSTS[1..].iter().all(|h| with_chains.contains(*h)), "{with_chains:?}");
}

#[test]
#[ignore = "needs .NET"]
fn on_8_the_trees_match_what_the_programs_force_in_a_capture_and_a_trace_of_one_run() {
    trees_match_what_the_programs_force(run8(), 8);
}

#[test]
#[ignore = "needs .NET"]
fn on_9_the_trees_match_what_the_programs_force_in_a_capture_and_a_trace_of_one_run() {
    trees_match_what_the_programs_force(&run("v9", &host("9.0"), false), 9);
}

#[test]
#[ignore = "needs .NET"]
fn on_10_the_trees_match_what_the_programs_force_in_a_capture_and_a_trace_of_one_run() {
    trees_match_what_the_programs_force(&run("v10", &host("10.0"), false), 10);
}

/// The forced inlining programs' trees, on one runtime: in a capture and a trace of one run.
fn trees_match_what_the_programs_force(r: &Run, major: u16) {
    let c = read_capture(&std::fs::read(&r.capture).unwrap()).unwrap();
    assert_eq!(c.runtime_major, Some(major));
    let bodies = our_bodies(&c);
    let trees = raw_trees(&c);
    // Every body of ours has a tree (tiering is off: each is jitted once, optimized).
    assert!(bodies.len() >= 10, "{bodies:x?}");
    for (start, _, fid) in &bodies {
        let t = trees.get(start).unwrap_or_else(|| panic!("no tree for the body at {start:#x}"));
        assert_eq!(t[0], *fid, "node 0 is the body's own method");
    }
    let addresses = every_address(&bodies);
    let count = addresses.lines().count();

    // (a) The capture's chains, against the program's IL, its source and its attributes.
    let (cap_json, cap_err) = symbolize(&r.capture, &["--inlines", "--json"], &addresses);
    only_notes(&cap_err);
    let cap = json_lines(&cap_json);
    assert_eq!(cap.len(), count);
    check_forced(r, &cap, &bodies, &trees, major);
    // --return-address answers for the call before (address - 1), its chain included: a
    // return address one past each address gets that address's answer.
    let after: String = bodies.iter().flat_map(|&(start, size, _)| (start + 1..=start + size).map(|a| format!("{a:#x}\n"))).collect();
    let (ret_json, _) = symbolize(&r.capture, &["--inlines", "--json", "--return-address"], &after);
    let ret = json_lines(&ret_json);
    assert_eq!(ret.len(), count);
    for (mut x, y) in ret.into_iter().zip(&cap) {
        x["address"] = (x["address"].as_u64().unwrap() - 1).into();
        assert_eq!(&x, y);
    }

    check_trace(r, &cap, &bodies, &addresses);
    let (flat_json, _) = symbolize(&r.capture, &["--json"], &addresses);
    let flat = json_lines(&flat_json);

    // (c) Without --inlines nothing changes: the answers are those of the same capture with its
    // trees taken out, byte for byte, text and JSON; no "inlined"; and --inlines changes only
    // the addresses that have a chain.
    let stripped = without_trees(&r.capture);
    let (flat_text, _) = symbolize(&r.capture, &[], &addresses);
    assert_eq!(symbolize(&stripped, &["--json"], &addresses).0, flat_json);
    assert_eq!(symbolize(&stripped, &[], &addresses).0, flat_text);
    assert!(!flat_json.contains("inlined"));
    let mut chained = 0;
    for (v, f) in cap.iter().zip(&flat) {
        if frames(v).len() > 1 {
            chained += 1;
            continue;
        }
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("inlined");
        assert_eq!(&v, f);
    }
    assert!(chained > 100, "{chained} addresses in inlined code");

    // (d) The text: each inlined frame innermost first, then the physical one, then an empty line.
    let (text, _) = symbolize(&r.capture, &["--inlines"], &addresses);
    let b = blocks(&text);
    assert_eq!(b.len(), count);
    for (block, v) in b.iter().zip(&cap) {
        assert_eq!(*block, text_of(v), "{v}");
    }
    assert_eq!(blocks(&flat_text).iter().map(Vec::len).max(), Some(1));
}

#[test]
#[ignore = "needs .NET"]
fn on_8_with_tiering_the_osr_bodies_chains_match_too_in_capture_and_trace() {
    // Tier-0 bodies inline nothing (a lone root each); the loops' OSR bodies inline, and their
    // trees are paired by a NativeCodeId that is not 0.
    let r = run("v8-tiered", &host("8.0"), true);
    let c = read_capture(&std::fs::read(&r.capture).unwrap()).unwrap();
    let bodies = our_bodies(&c);
    let trees = raw_trees(&c);
    let twice: Vec<u64> = bodies.iter().map(|b| b.2).filter(|f| bodies.iter().filter(|b| b.2 == *f).count() > 1).collect();
    assert!(twice.len() >= 8, "no OSR bodies? {bodies:x?}");
    let addresses = every_address(&bodies);
    let (json, err) = symbolize(&r.capture, &["--inlines", "--json"], &addresses);
    only_notes(&err);
    let cap = json_lines(&json);
    check_forced(&r, &cap, &bodies, &trees, 8);
    check_trace(&r, &cap, &bodies, &addresses);
    // The chains are in the second bodies (OSR) only.
    let mut i = 0;
    for &(start, size, fid) in &bodies {
        let range = i..i + size as usize;
        i += size as usize;
        let index = c.bodies.iter().find(|b| b.body.start == Some(start)).unwrap().index;
        if index == 0 && twice.contains(&fid) {
            assert_eq!(trees.get(&start).map(Vec::len), Some(1), "a tier-0 body with inlinees");
            assert!(cap[range].iter().all(|v| frames(v).len() == 1));
        }
    }
}

/// One method's listing in the release JIT's `DOTNET_JitStdOutFile` (`JitDisasm` with
/// `JitDisasmSummary`): its name (`Ns.Type::Method`), the three inlinee counts of its header
/// line, and the methods its code still calls (`call [Ns.Type:Method(...)...]`).
struct Listing {
    method: String,
    inlinees: u64,
    calls: BTreeSet<String>,
}

/// `Ns.Type:Method(sig)...` (the JIT's form) -> `Ns.Type::Method`.
fn jit_name(s: &str) -> String {
    let head = s.split('(').next().unwrap();
    let (ty, m) = head.rsplit_once(':').unwrap();
    // A generic method's instantiation: `SharedHost[System.__Canon]`.
    let m = m.split('[').next().unwrap();
    format!("{ty}::{m}")
}

fn listings(text: &str) -> Vec<Listing> {
    let mut out: Vec<Listing> = Vec::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("; Assembly listing for method ") {
            out.push(Listing { method: jit_name(rest), inlinees: u64::MAX, calls: BTreeSet::new() });
        } else if l.starts_with("; ") && l.ends_with(" inlinees without PGO data") {
            // `; A inlinees with PGO data; B single block inlinees; C inlinees without PGO data`
            let n: Vec<u64> = l.split(';').filter_map(|p| p.split_whitespace().next()?.parse().ok()).collect();
            assert_eq!(n.len(), 3, "{l}");
            out.last_mut().unwrap().inlinees = n.iter().sum();
        } else if let Some(target) = l.trim_start().strip_prefix("call ").map(str::trim_start).and_then(|t| t.strip_prefix('[')) {
            if target.contains('(') && !target.starts_with("CORINFO") {
                out.last_mut().unwrap().calls.insert(jit_name(target));
            }
        }
    }
    out
}

#[test]
#[ignore = "needs .NET"]
fn on_8_the_trees_agree_with_the_release_jits_own_listing() {
    // Measured on 8.0.4's release JIT: with DOTNET_JitStdOutFile, DOTNET_JitDisasm=<methods> and
    // DOTNET_JitDisasmSummary=1 it prints each listed method's code, a header line
    // `; A inlinees with PGO data; B single block inlinees; C inlinees without PGO data` (counts,
    // no names), and `call [Ns.Type:Method(sig)]` for each call left in the code. It has no knob
    // that names the inlinees (JitPrintInlinedMethods and the inline dumps are debug-JIT only).
    // So: the counts must be the trees' sizes, and a method the JIT left as a call is never an
    // inlinee of that body.
    let r = run8();
    let c = read_capture(&std::fs::read(&r.capture).unwrap()).unwrap();
    let bodies = our_bodies(&c);
    let trees = raw_trees(&c);
    let jit = std::fs::read_to_string(&r.jit_stdout).unwrap();
    let listed = listings(&jit);
    let names: Vec<String> = listed.iter().map(|l| l.method.clone()).collect();
    assert_eq!(names, HOSTS.iter().map(|h| h.to_string()).collect::<Vec<_>>(), "the JIT's listings, in jitting order");
    let (json, _) = symbolize(&r.capture, &["--inlines", "--json"], &every_address(&bodies));
    let answers = json_lines(&json);
    for l in &listed {
        let mine: Vec<&Value> = answers.iter().filter(|v| v["method"] == l.method.as_str()).collect();
        let start = mine.iter().filter_map(|v| v["address"].as_u64()).min().unwrap();
        assert!(bodies.iter().any(|b| b.0 == start), "{}: not a body start", l.method);
        let tree = &trees[&start];
        assert_eq!(l.inlinees, tree.len() as u64 - 1, "{}: the JIT counts {} inlinees, the tree has {} nodes", l.method, l.inlinees, tree.len());
        let inlinees: BTreeSet<String> = mine.iter().flat_map(|v| frames(v)).filter(|f| f["method"] != l.method.as_str()).map(|f| s(f, "method")).collect();
        assert!(l.calls.is_disjoint(&inlinees), "{}: called and inlined: {:?}", l.method, l.calls.intersection(&inlinees).collect::<Vec<_>>());
        for (parent, callee) in FORCED.iter().filter(|(p, _)| *p == l.method) {
            assert!(!l.calls.contains(*callee), "the JIT did not inline {callee} into {parent}");
        }
    }
    // What the JIT left as calls: the NoInlining methods, where their callers were inlined.
    let calls_of = |m: &str| &listed.iter().find(|l| l.method == m).unwrap().calls;
    assert!(calls_of("Inlining.Prog::Chain3").contains("Inlining.Prog::Never"), "{:?}", calls_of("Inlining.Prog::Chain3"));
    assert!(calls_of("Inlining.Prog::LibLoop").contains("InlLib.LibMath::Opaque"));
    assert!(calls_of("Inlining.Prog::Run").contains("Inlining.Prog::Chain3"));
}

#[test]
#[ignore = "needs .NET"]
fn on_3_1_the_same_programs_answer_as_without_inlines_after_one_note() {
    let r = run("v31", &host("3.1"), false);
    let c = read_capture(&std::fs::read(&r.capture).unwrap()).unwrap();
    assert_eq!(c.runtime_major, Some(3));
    assert!(c.inlines.is_empty() && c.inline_sessions.is_empty());
    let bodies = our_bodies(&c);
    assert!(bodies.len() >= 10, "{bodies:x?}");
    let addresses = every_address(&bodies);
    for source in [&r.capture, &r.trace] {
        let (flat_text, err) = symbolize(source, &[], &addresses);
        only_notes(&err);
        let (flat_json, _) = symbolize(source, &["--json"], &addresses);
        for (args, flat) in [(&["--inlines"][..], &flat_text), (&["--inlines", "--json"][..], &flat_json)] {
            let (out, err) = symbolize(source, args, &addresses);
            only_notes(&err);
            assert_eq!(err.lines().filter(|l| l.contains("no inline trees")).count(), 1, "{err}");
            if args.contains(&"--json") {
                let (a, b) = (json_lines(&out), json_lines(flat));
                assert_eq!(a.len(), b.len());
                for (mut x, y) in a.into_iter().zip(b) {
                    if let Some(i) = x.as_object_mut().unwrap().remove("inlined") {
                        assert_eq!(i, Value::Array(vec![]), "{y}");
                    }
                    assert_eq!(x, y);
                }
            } else {
                assert_eq!(&out, flat, "{}", source.display());
            }
        }
        // The hosts are answered, with their lines (the flat map).
        let v = json_lines(&flat_json);
        assert!(HOSTS.iter().all(|h| v.iter().any(|x| x["method"] == *h && x["line"].is_u64())));
    }
}

/// A C program whose `inner` is inlined into `middle`, inlined into `outer` (gcc -O2).
const C_SOURCE: &str = r#"static volatile int sink;

static inline int inner(int x)
{
    sink += x; /* inner */
    return x * 3;
}

static inline int middle(int x)
{
    int y = inner(x + 1); /* middle calls inner */
    return y ^ sink;
}

__attribute__((noinline)) int outer(int x)
{
    return middle(x) + 1; /* outer calls middle */
}

int main(int argc, char **argv)
{
    (void)argv;
    return outer(argc);
}
"#;

#[test]
#[ignore = "needs .NET"]
fn the_text_layout_is_llvm_symbolizers_for_inlined_native_code() {
    let ok = Command::new("llvm-symbolizer").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "llvm-symbolizer is missing: run scripts/install-perf.sh (Debian's llvm)");
    let dir = work_dir("llvm");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("inl.c"), dir.join("inl"));
    std::fs::write(&src, C_SOURCE).unwrap();
    run_ok(Command::new("gcc").args(["-O2", "-g", "-o"]).arg(&exe).arg(&src));
    let nm = run_ok(Command::new("nm").args(["-S", "--defined-only"]).arg(&exe));
    let f: Vec<&str> = nm.lines().find(|l| l.ends_with(" T outer")).unwrap_or_else(|| panic!("{nm}")).split(' ').collect();
    let (start, size) = (u64::from_str_radix(f[0], 16).unwrap(), u64::from_str_radix(f[1], 16).unwrap());
    let input: String = (start..start + size).map(|a| format!("{a:#x}\n")).collect();
    let mut c = Command::new("llvm-symbolizer");
    c.arg(format!("--obj={}", exe.display())).stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    let llvm = String::from_utf8(o.stdout).unwrap();
    // llvm-symbolizer's own layout, read by the same strict reader as ours: `name`,
    // `file:line:col` per frame, innermost first, the physical function last at its call line,
    // and an empty line after each address.
    let theirs = blocks(&llvm);
    assert_eq!(theirs.len(), size as usize);
    let line = |needle: &str| C_SOURCE.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let file = src.display().to_string();
    let three = theirs.iter().find(|b| b.len() == 3).unwrap_or_else(|| panic!("no inlined code in outer: {llvm}"));
    let names: Vec<&str> = three.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(names, ["inner", "middle", "outer"]);
    assert!(three[0].1.starts_with(&format!("{file}:{}:", line("/* inner */"))) || three[0].1.starts_with(&format!("{file}:{}:", line("return x * 3;"))), "{three:?}");
    assert!(three[1].1.starts_with(&format!("{file}:{}:", line("/* middle calls inner */"))), "{three:?}");
    assert!(three[2].1.starts_with(&format!("{file}:{}:", line("/* outer calls middle */"))), "{three:?}");
    // Ours, for the three-level chain: the same shape and order.
    let r = run8();
    let c = read_capture(&std::fs::read(&r.capture).unwrap()).unwrap();
    let (text, _) = symbolize(&r.capture, &["--inlines"], &every_address(&our_bodies(&c)));
    let ours = blocks(&text);
    let chain = ours.iter().find(|b| b.len() == 4 && b[0].0 == "Inlining.Prog::Level3").unwrap_or_else(|| panic!("{text}"));
    let names: Vec<&str> = chain.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(names, ["Inlining.Prog::Level3", "Inlining.Prog::Level2", "Inlining.Prog::Level1", "Inlining.Prog::Chain3"]);
    assert!(chain[1].1.starts_with(&format!("/_/src/Prog.cs:{}:", line_of("Prog.cs", "// Level2 calls Level3"))), "{chain:?}");
    assert!(chain[3].1.starts_with(&format!("/_/src/Prog.cs:{}:", line_of("Prog.cs", "// Chain3 calls Level1"))), "{chain:?}");
    // The same layout for a one-frame answer: one pair, then the empty line.
    assert!(theirs.iter().any(|b| b.len() == 1) && ours.iter().any(|b| b.len() == 1));
}

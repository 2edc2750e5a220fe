//! Microsoft's own tools as oracles and as inputs (issue 31), on .NET 8, 9 and 10:
//!
//! - **TraceEvent** (Microsoft.Diagnostics.Tracing.TraceEvent 4.0.0, the reference nettrace
//!   reader, through tests/dotnet/oracles/TraceOracle, built here by the SDK from NuGet) reads
//!   the same trace as clrmap, recorded three ways: by `clrmap trace collect`, by `dotnet-trace
//!   collect`, and by the runtime itself (`DOTNET_EnableEventPipe=1` with
//!   `DOTNET_EventPipeConfig` and `DOTNET_EventPipeOutputPath`). Both readers must give the same
//!   events (counts by provider and event id: `trace stats --json`), the same jitted bodies and
//!   IL-to-native maps (`il dump --json`: MethodID, start, size, token, name, module, and the map
//!   the runtime's rule makes of the event's pairs), the same method for every method load
//!   (`symbolize --json` at each body's start), and the same stack for every sample (`flame`).
//! - **dotnet-trace**: `clrmap flame` reads a trace `dotnet-trace collect` wrote with its CPU
//!   sampling profile (in dotnet-trace 10 that is `dotnet-sampled-thread-time`; its
//!   `cpu-sampling` profile is now the kernel sampler of `collect-linux`), gives the hot line of
//!   tests/dotnet/oracles/Work, and its stacks are the ones `dotnet-trace convert --format
//!   speedscope` writes, frame for frame, with lines added; and `clrmap trace collect` and
//!   `dotnet-trace collect` recording the program with the same providers give the same maps.
//! - **dotnet-stack**: `dotnet-stack report -p PID` and clrmap's stack of the same parked process
//!   (`trace collect --pid PID --cpu`, then `flame`) name the same methods; clrmap adds lines.
//!
//! Names are compared after one normalization, the same for both sides ([`norm`]): TraceEvent
//! writes `Ns.Type.Method(signature)`, nested types with `+` and generic instantiations as
//! `List`1[System.__Canon]`, where clrmap writes `Ns.Type::Method` from metadata, nested types
//! with `/` and no instantiation; so the signature and every `[...]` are dropped, `::` and `+`
//! become `.` and `/`, and a frame without a method is `?` on both sides (clrmap's hex address or
//! `[unknown]`, TraceEvent's empty name). dotnet-trace's speedscope file adds `Module!` before
//! each name, four frames at the root (process, `(Non-Activities)`, `Threads`, the thread) and
//! one at the leaf (`CPU_TIME` for a sample in managed code, `UNMANAGED_CODE_TIME` outside it):
//! these are dropped. Its profiles are "evented" (a frame opens and closes): a sample's stack is
//! one whose leaf opens and closes with nothing opened on it, and a thread's last sample, which
//! lasts no time there, may be missing from it.
//!
//! Two differences are by design and checked as such: clrmap gives a dynamic method (token 0,
//! MethodFlags Dynamic, an IL stub, which the trace sends no map for) its name as both read it
//! from its load event, but no token and no module (no module's metadata holds it), where
//! TraceEvent gives token 0 and a module; and clrmap reads a frame below the leaf, and the leaf of a sample whose
//! payload is not 1, as a return address (the call before it), where TraceLog looks up the
//! address itself: the two differ only where such an address is exactly a body's start.
//!
//! The tools come from scripts/install-ms-tools.sh (.dotnet/tools); these tests need the SDK
//! and the runtimes, so they are `#[ignore = "needs .NET"]` like the other runtime tests.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use clrmap::ilmap::{public_map, Bound, IlOffset, SourceTypes};
use serde_json::Value;

use crate::support::*;

/// The runtimes the oracles run on.
const CHANNELS: [&str; 3] = ["8.0", "9.0", "10.0"];
/// dotnet-trace 10's profile that samples managed stacks with the runtime's sampler (and its
/// `dotnet-common` profile: the JIT, loader and IL-map events that name the samples' methods).
const DOTNET_TRACE_CPU: &str = "dotnet-sampled-thread-time,dotnet-common";
/// The providers both recorders are given for the map comparison: clrmap's default.
const MAP_PROVIDERS: &str = "Microsoft-Windows-DotNETRuntime:0x60098:5";

/// A fresh scratch directory.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ms-tools").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One of Microsoft's tools, installed by scripts/install-ms-tools.sh.
fn tool(name: &str) -> PathBuf {
    let p = dotnet_home().join("tools").join(name);
    assert!(p.is_file(), "{} is missing: run scripts/install-ms-tools.sh", p.display());
    p
}

/// Run a command with a wall-clock limit (a hang fails the test, the command is killed).
fn run(c: &mut Command, what: &str, secs: u64) -> Output {
    let mut child = c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    let e = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still ran after {secs}s: {}", e.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: o.join().unwrap().into_bytes(), stderr: e.join().unwrap().into_bytes() }
}

/// `clrmap ARGS`, which must succeed; its stdout.
fn clrmap_ok(args: &[&str]) -> String {
    let o = run(Command::new(env!("CARGO_BIN_EXE_clrmap")).args(args).current_dir(repo_root()), &format!("clrmap {args:?}"), 300);
    assert_eq!(code(&o), Some(0), "clrmap {args:?}: {}", stderr(&o));
    stdout(&o)
}

/// Build tests/dotnet/oracles/PROJECT with the SDK (once per test run; the builds take turns);
/// the output directory.
fn built(project: &'static str) -> PathBuf {
    static BUILDS: OnceLock<Mutex<HashMap<&'static str, PathBuf>>> = OnceLock::new();
    let mut builds = BUILDS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = builds.get(project) {
        return p.clone();
    }
    let dir = scratch(&format!("build-{project}"));
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    for e in std::fs::read_dir(repo_root().join("tests/dotnet/oracles").join(project)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), src.join(e.file_name())).unwrap();
    }
    let out = dir.join("out");
    let o = run(
        Command::new("dotnet").args(["build", "-c", "Release", "-nologo", "-o"]).arg(&out).current_dir(&src).env("DOTNET_CLI_TELEMETRY_OPTOUT", "1").env("DOTNET_NOLOGO", "1"),
        &format!("dotnet build {project}"),
        600,
    );
    assert!(o.status.success(), "dotnet build {project}: {}{}", stdout(&o), stderr(&o));
    builds.insert(project, out.clone());
    out
}

/// The program's directory (Work.dll, Work.pdb) and its dll.
fn work() -> (PathBuf, String) {
    let out = built("Work");
    let dll = out.join("Work.dll").to_string_lossy().into_owned();
    (out, dll)
}

/// The 1-based line of Work.cs holding `// MARKER`.
fn work_line(marker: &str) -> u32 {
    let src = std::fs::read_to_string(repo_root().join("tests/dotnet/oracles/Work/Work.cs")).unwrap();
    src.lines().position(|l| l.trim_end().ends_with(&format!("// {marker}"))).map(|i| i as u32 + 1).unwrap_or_else(|| panic!("no // {marker} in Work.cs"))
}

/// TraceEvent's reading of a trace (tests/dotnet/oracles/TraceOracle's JSON lines).
#[derive(Debug, Default)]
struct Te {
    modules: HashMap<u64, String>,
    /// Method loads and rundowns, in file order.
    methods: Vec<Value>,
    /// Maps, each with the method record it belongs to.
    maps: Vec<(Value, Value)>,
    samples: Vec<Value>,
    counts: BTreeMap<(String, u64), u64>,
    events: u64,
    lost: u64,
}

impl Te {
    fn read(trace: &Path) -> Te {
        let oracle = built("TraceOracle").join("TraceOracle.dll");
        let o = run(Command::new("dotnet").arg(&oracle).arg(trace), "TraceOracle", 300);
        assert!(o.status.success(), "TraceOracle {}: {}", trace.display(), stderr(&o));
        let mut te = Te::default();
        let mut pending: Vec<(usize, Value)> = Vec::new();
        let mut order: Vec<(usize, u64, bool)> = Vec::new();
        let mut ended = false;
        for (index, line) in stdout(&o).lines().enumerate() {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {line}"));
            match v["kind"].as_str().unwrap() {
                "module" => {
                    te.modules.insert(n("id"), v["path"].as_str().unwrap().to_owned());
                }
                "method" => {
                    order.push((index, n("id"), v["rundown"] == true));
                    te.methods.push(v);
                }
                "map" => pending.push((index, v)),
                "sample" => te.samples.push(v),
                "count" => {
                    te.counts.insert((v["provider"].as_str().unwrap().to_owned(), n("id")), n("count"));
                }
                "end" => {
                    te.events = n("events");
                    te.lost = n("lost");
                    assert_eq!(n("samples"), te.samples.len() as u64);
                    ended = true;
                }
                k => panic!("unknown kind {k}"),
            }
        }
        // A map belongs to its MethodID's load (or rundown) record nearest before it in the
        // file, else nearest after it (TraceEvent orders events by time across threads).
        for (index, map) in pending {
            let id = map["id"].as_u64().unwrap();
            let rundown = map["rundown"] == true;
            let same: Vec<usize> = (0..order.len()).filter(|&k| order[k].1 == id && order[k].2 == rundown).collect();
            let k = same.iter().rev().find(|&&k| order[k].0 < index).or_else(|| same.iter().find(|&&k| order[k].0 > index)).unwrap_or_else(|| panic!("a map of no method: {map}"));
            te.maps.push((map.clone(), te.methods[*k].clone()));
        }
        assert!(ended, "TraceOracle ended early");
        te
    }

    /// The file name of a method's module.
    fn module_of(&self, m: &Value) -> Option<String> {
        let path = self.modules.get(&m["module"].as_u64()?)?;
        Some(path.rsplit(['/', '\\']).next().unwrap_or(path).to_owned())
    }

    /// The method record whose code holds `address`.
    fn method_at(&self, address: u64) -> Option<&Value> {
        self.methods.iter().rev().find(|m| {
            let (s, n) = (m["start"].as_u64().unwrap(), m["size"].as_u64().unwrap());
            s <= address && address < s + n
        })
    }
}

/// A method name as both sides are compared (module docs): no signature, no generic
/// instantiation, `.` between type and method, `/` for nesting.
fn norm(name: &str) -> String {
    if name.is_empty() || name.starts_with("0x") || name == "[unknown]" || name == "?" {
        return "?".to_owned();
    }
    // Drop the signature: the first '(' outside brackets.
    let mut depth = 0i32;
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            '(' if depth == 0 => break,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.replace("::", ".").replace('+', "/")
}

/// A clrmap frame of the collapsed output without its `(File.cs:LINE)`.
fn without_line(frame: &str) -> &str {
    match frame.rfind(" (") {
        Some(i) if frame.ends_with(')') && frame[i..].contains(':') => &frame[..i],
        _ => frame,
    }
}

/// `clrmap flame` collapsed output: (frames root first, count).
fn collapsed(text: &str) -> Vec<(Vec<String>, u64)> {
    text.lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.split(';').map(str::to_owned).collect(), n.parse().unwrap())
        })
        .collect()
}

/// Events: the same counts by provider and event id (clrmap sums event versions).
fn events_agree(trace: &Path, te: &Te, what: &str) {
    let v: Value = serde_json::from_str(&clrmap_ok(&["trace", "stats", trace.to_str().unwrap(), "--json"])).unwrap();
    let mut ours: BTreeMap<(String, u64), u64> = BTreeMap::new();
    for e in v["events"].as_array().unwrap() {
        *ours.entry((e["provider"].as_str().unwrap().to_owned(), e["id"].as_u64().unwrap())).or_default() += e["count"].as_u64().unwrap();
    }
    assert_eq!(ours, te.counts, "{what}: events by provider and id");
    assert_eq!(ours.values().sum::<u64>(), te.events, "{what}: events");
    assert_eq!(te.lost, 0, "{what}: TraceEvent counts lost events");
}

/// Bodies and maps: `il dump --json` lists exactly the bodies TraceEvent pairs a map with (a
/// map with entries), each with the same MethodID, start, size, token, name and module, and as
/// its map what GetILToNativeMapping's rule (`public_map`) makes of the event's pairs put in
/// native order. Returns how many.
fn maps_agree(trace: &Path, te: &Te, what: &str) -> usize {
    let v: Value = serde_json::from_str(&clrmap_ok(&["il", "dump", trace.to_str().unwrap(), "--json"])).unwrap();
    let mut ours: BTreeMap<(u64, u64), Value> = BTreeMap::new();
    for b in v["methods"].as_array().unwrap() {
        let key = (b["function_id"].as_u64().unwrap(), b["start"].as_u64().unwrap());
        let body = serde_json::json!({"token": b["token"], "code_size": b["code_size"], "name": norm(b["name"].as_str().unwrap()), "module": b["module"], "map": b["map"]});
        ours.insert(key, body);
    }
    let mut theirs: BTreeMap<(u64, u64), Value> = BTreeMap::new();
    for (map, m) in te.maps.iter().filter(|(map, _)| !map["il"].as_array().unwrap().is_empty()) {
        let size = m["size"].as_u64().unwrap() as u32;
        let il = map["il"].as_array().unwrap();
        let native = map["native"].as_array().unwrap();
        assert_eq!(il.len(), native.len());
        // The event's pairs are in IL order: put them in native order (stably) for the rule.
        let mut bounds: Vec<Bound> = il
            .iter()
            .zip(native)
            .map(|(i, n)| Bound { native_offset: n.as_u64().unwrap() as u32, il_offset: IlOffset::from_raw(i.as_i64().unwrap() as i32 as u32), source: SourceTypes::default() })
            .collect();
        bounds.sort_by_key(|b| b.native_offset);
        let name = norm(&format!("{}::{}", m["namespace"].as_str().unwrap(), m["name"].as_str().unwrap()));
        let body = serde_json::json!({"token": m["token"], "code_size": size, "name": name, "module": te.module_of(m), "map": public_map(&bounds, size)});
        theirs.insert((m["id"].as_u64().unwrap(), m["start"].as_u64().unwrap()), body);
    }
    let only_ours: Vec<_> = ours.keys().filter(|k| !theirs.contains_key(k)).collect();
    let only_theirs: Vec<_> = theirs.iter().filter(|(k, _)| !ours.contains_key(k)).collect();
    assert!(only_ours.is_empty() && only_theirs.is_empty(), "{what}: bodies only clrmap lists {only_ours:?}; only TraceEvent {only_theirs:?}");
    for (k, t) in &theirs {
        assert_eq!(&ours[k], t, "{what}: body {k:?}");
    }
    theirs.len()
}

/// Method loads: clrmap answers every body TraceEvent reads with the same token, name and module,
/// at its start; a dynamic method with the same name and neither token nor module (by design).
fn loads_agree(trace: &Path, te: &Te, what: &str) -> usize {
    let mapped: BTreeSet<u64> = te.maps.iter().filter(|(map, _)| !map["il"].as_array().unwrap().is_empty()).map(|(_, m)| m["start"].as_u64().unwrap()).collect();
    let mut by_start: BTreeMap<u64, &Value> = BTreeMap::new();
    for m in &te.methods {
        by_start.insert(m["start"].as_u64().unwrap(), m);
    }
    let input: String = by_start.keys().map(|a| format!("0x{a:X}\n")).collect();
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_clrmap")).args(["symbolize", trace.to_str().unwrap(), "--json"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(code(&o), Some(0), "{what}: {}", stderr(&o));
    let answers: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), by_start.len());
    let mut unnamed = 0;
    for a in &answers {
        let m = by_start[&a["address"].as_u64().unwrap()];
        let start = m["start"].as_u64().unwrap();
        if a["method"].is_null() {
            unnamed += 1;
        }
        let dynamic = m["flags"].as_u64().unwrap() & 1 == 1 && m["token"] == 0;
        assert!(!dynamic || !mapped.contains(&start), "{what}: a dynamic method with a map: {m}");
        let theirs =
            (if dynamic { None } else { m["token"].as_u64() }, norm(&format!("{}::{}", m["namespace"].as_str().unwrap(), m["name"].as_str().unwrap())), if dynamic { None } else { te.module_of(m) });
        let ours = (a["token"].as_u64(), norm(a["method"].as_str().unwrap_or("")), a["module"].as_str().map(str::to_owned));
        assert_eq!(ours, theirs, "{what}: the method at 0x{start:X}");
    }
    assert_eq!(unnamed, 0, "{what}: {unnamed} of {} unnamed", answers.len());
    answers.len()
}

/// Whether clrmap reads frame `index` of a sample with payload `kind` as a return address: every
/// frame below the leaf, and the leaf unless the payload is 1 (clrmap's `Sample::managed`).
fn read_as_return_address(kind: i64, index: usize) -> bool {
    index > 0 || kind != 1
}

/// One TraceEvent sample as the collapsed stack clrmap should print (names normalized, root
/// first): TraceLog's method of each frame, except at a return address that is exactly a body's
/// start, where the frame is the code before it (module docs).
fn te_stack(te: &Te, starts: &BTreeSet<u64>, s: &Value) -> String {
    let kind = s["type"].as_i64().unwrap();
    let frames = s["frames"].as_array().unwrap();
    let names: Vec<String> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let a = f["address"].as_u64().unwrap();
            if read_as_return_address(kind, i) && starts.contains(&a) {
                te.method_at(a - 1).map_or("?".to_owned(), |m| norm(&format!("{}::{}", m["namespace"].as_str().unwrap(), m["name"].as_str().unwrap())))
            } else {
                norm(f["method"].as_str().unwrap())
            }
        })
        .rev()
        .collect();
    names.join(";")
}

/// TraceEvent's samples as collapsed stacks, with their counts.
fn te_stacks(te: &Te) -> BTreeMap<String, u64> {
    let starts: BTreeSet<u64> = te.methods.iter().map(|m| m["start"].as_u64().unwrap()).collect();
    let mut out = BTreeMap::new();
    for s in &te.samples {
        *out.entry(te_stack(te, &starts, s)).or_default() += 1;
    }
    out
}

/// The stack of each thread's last sample (TraceLog gives the samples in time order).
fn te_last_stacks(te: &Te) -> BTreeSet<String> {
    let starts: BTreeSet<u64> = te.methods.iter().map(|m| m["start"].as_u64().unwrap()).collect();
    let mut last: BTreeMap<u64, &Value> = BTreeMap::new();
    for s in &te.samples {
        last.insert(s["thread"].as_u64().unwrap(), s);
    }
    last.values().map(|s| te_stack(te, &starts, s)).collect()
}

/// clrmap's collapsed stacks, normalized and merged.
fn our_stacks(folded: &[(Vec<String>, u64)]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (frames, n) in folded {
        let k: Vec<String> = frames.iter().map(|f| norm(without_line(f))).collect();
        *out.entry(k.join(";")).or_default() += n;
    }
    out
}

/// Samples: `clrmap flame` gives every sample TraceEvent reads, with the same stack.
fn samples_agree(trace: &Path, te: &Te, symbols: &Path, what: &str) -> Vec<(Vec<String>, u64)> {
    let folded = collapsed(&clrmap_ok(&["flame", trace.to_str().unwrap(), "--symbol-path", symbols.to_str().unwrap()]));
    let theirs = te_stacks(te);
    // Where TraceEvent knows no method before a return address at a body's start ("?"), it is
    // no oracle for that frame: clrmap also names ReadyToRun code the trace sends no event for,
    // from the image. Such a stack of clrmap's is counted under TraceEvent's pattern.
    let patterns: Vec<Vec<&str>> = theirs.keys().filter(|k| k.split(';').any(|f| f == "?")).map(|k| k.split(';').collect()).collect();
    let mut ours = BTreeMap::new();
    for (k, n) in our_stacks(&folded) {
        let frames: Vec<&str> = k.split(';').collect();
        let matched = patterns.iter().find(|p| !theirs.contains_key(&k) && p.len() == frames.len() && p.iter().zip(&frames).all(|(p, f)| *p == "?" || p == f));
        *ours.entry(matched.map_or(k.clone(), |p| p.join(";"))).or_insert(0) += n;
    }
    let n: u64 = theirs.values().sum();
    assert!(n > 100, "{what}: {n} samples");
    if ours != theirs {
        let only_ours: Vec<_> = ours.iter().filter(|(k, v)| theirs.get(*k) != Some(v)).take(5).collect();
        let only_theirs: Vec<_> = theirs.iter().filter(|(k, v)| ours.get(*k) != Some(v)).take(5).collect();
        panic!("{what}: stacks differ; clrmap {only_ours:?}; TraceEvent {only_theirs:?}");
    }
    folded
}

/// The version and minimum reader version of a trace's `Trace` object (the nettrace header:
/// `Nettrace`, the FastSerialization signature, then the object's type: version, minimum
/// reader version, the name's length and `Trace`), read from the bytes here.
fn trace_object_version(trace: &Path) -> (i32, i32) {
    let b = std::fs::read(trace).unwrap();
    assert_eq!(&b[..8], b"Nettrace", "{}", trace.display());
    let head = &b[..b.len().min(256)];
    let at = head.windows(9).position(|w| w == b"\x05\0\0\0Trace").unwrap_or_else(|| panic!("no Trace object in {}", trace.display()));
    let i32_at = |i: usize| i32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    (i32_at(at - 8), i32_at(at - 4))
}

/// Every comparison on one trace of Work; clrmap's stacks.
fn agree(trace: &Path, what: &str) -> Vec<(Vec<String>, u64)> {
    // Every runtime writes the same nettrace version (the Trace object's 4, minimum reader 4).
    assert_eq!(trace_object_version(trace), (4, 4), "{what}: the nettrace version");
    let te = Te::read(trace);
    events_agree(trace, &te, what);
    let bodies = maps_agree(trace, &te, what);
    assert!(bodies >= 4, "{what}: {bodies} bodies with maps");
    let loads = loads_agree(trace, &te, what);
    assert!(loads > 100, "{what}: {loads} method loads");
    let (symbols, _) = work();
    samples_agree(trace, &te, &symbols, what)
}

/// Work's hot stack in clrmap's collapsed output: Main, Outer, Middle, Spin, each frame at its
/// line; most of Spin's samples at the HOT line.
fn hot_line(folded: &[(Vec<String>, u64)], what: &str) {
    let spin: Vec<_> = folded.iter().filter(|(f, _)| f.last().is_some_and(|l| l.starts_with("Work::Spin"))).collect();
    let total: u64 = spin.iter().map(|s| s.1).sum();
    let hot = format!("Work::Spin (Work.cs:{})", work_line("HOT"));
    let at: u64 = spin.iter().filter(|(f, _)| f.last().unwrap() == &hot).map(|s| s.1).sum();
    assert!(total > 100 && at * 10 >= total * 8, "{what}: {at} of {total} samples in Spin at {hot}: {spin:?}");
    let callers = [format!("Work::Main (Work.cs:{})", work_line("MAIN")), format!("Work::Outer (Work.cs:{})", work_line("OUTER")), format!("Work::Middle (Work.cs:{})", work_line("MIDDLE-SPIN"))];
    for (f, _) in &spin {
        assert_eq!(&f[f.len() - 4..f.len() - 1], &callers[..], "{what}: {f:?}");
    }
}

/// `clrmap trace collect --cpu -o OUT -- HOST Work.dll hot 1.5`.
fn record_clrmap(channel: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let (_, dll) = work();
    let out = dir.join(format!("clrmap-{channel}.nettrace"));
    let host = host(channel);
    let mut args = vec!["trace", "collect", "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", &host, &dll, "hot", "1.5"]);
    clrmap_ok(&args);
    out
}

/// `dotnet-trace collect ARGS -o OUT -- HOST Work.dll hot 1.5`.
fn record_dotnet_trace(channel: &str, dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let (_, dll) = work();
    let out = dir.join(format!("{name}-{channel}.nettrace"));
    let o = run(Command::new(tool("dotnet-trace")).arg("collect").args(args).arg("-o").arg(&out).args(["--", &host(channel), &dll, "hot", "1.5"]).current_dir(dir), "dotnet-trace collect", 120);
    assert!(o.status.success() && out.is_file(), "dotnet-trace collect on {channel}: {}{}", stdout(&o), stderr(&o));
    out
}

/// The runtime's own trace: `DOTNET_EnableEventPipe=1`, the providers in
/// `DOTNET_EventPipeConfig`, the file in `DOTNET_EventPipeOutputPath` (rundown at exit).
fn record_env(channel: &str, dir: &Path) -> PathBuf {
    let (_, dll) = work();
    let out = dir.join(format!("env-{channel}.nettrace"));
    let o = run(
        Command::new(host(channel))
            .args([&dll, "hot", "1.5"])
            .env("DOTNET_EnableEventPipe", "1")
            .env("DOTNET_EventPipeConfig", "Microsoft-Windows-DotNETRuntime:0x60098:5,Microsoft-DotNETCore-SampleProfiler:0:5")
            .env("DOTNET_EventPipeOutputPath", &out),
        "Work under DOTNET_EnableEventPipe",
        120,
    );
    assert!(o.status.success() && out.is_file(), "{channel}: {}", stderr(&o));
    out
}

#[test]
#[ignore = "needs .NET"]
fn traceevent_reads_clrmaps_traces_as_clrmap_does() {
    let dir = scratch("clrmap-traces");
    for channel in CHANNELS {
        let trace = record_clrmap(channel, &dir, &["--cpu"]);
        let folded = agree(&trace, &format!("clrmap trace collect on {channel}"));
        hot_line(&folded, channel);
    }
}

#[test]
#[ignore = "needs .NET"]
fn traceevent_reads_dotnet_traces_traces_as_clrmap_does() {
    let dir = scratch("dotnet-trace-traces");
    for channel in CHANNELS {
        let trace = record_dotnet_trace(channel, &dir, "cpu", &["--profile", DOTNET_TRACE_CPU]);
        agree(&trace, &format!("dotnet-trace collect on {channel}"));
    }
}

#[test]
#[ignore = "needs .NET"]
fn traceevent_reads_the_runtimes_own_traces_as_clrmap_does() {
    let dir = scratch("env-traces");
    for channel in CHANNELS {
        let trace = record_env(channel, &dir);
        let folded = agree(&trace, &format!("DOTNET_EnableEventPipe on {channel}"));
        hot_line(&folded, channel);
    }
}

/// dotnet-trace's speedscope file as stacks: every stack whose leaf was opened and then closed
/// with nothing opened on it (a sample's stack, or a run of equal samples), on any thread,
/// normalized (module docs), with the time its leaf was open.
fn speedscope_stacks(path: &Path) -> BTreeMap<String, f64> {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let frames: Vec<&str> = v["shared"]["frames"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    let mut out = BTreeMap::new();
    for p in v["profiles"].as_array().unwrap() {
        assert_eq!(p["type"], "evented", "{p}");
        let mut stack: Vec<(usize, f64)> = Vec::new();
        let mut opened_last = false;
        for e in p["events"].as_array().unwrap() {
            let at = e["at"].as_f64().unwrap();
            let f = e["frame"].as_u64().unwrap() as usize;
            match e["type"].as_str().unwrap() {
                "O" => {
                    stack.push((f, at));
                    opened_last = true;
                }
                "C" => {
                    if opened_last && stack.len() > 4 {
                        // The four frames dotnet-trace puts at the root, and its leaf pseudo-frame.
                        let names: Vec<&str> = stack[4..].iter().map(|&(i, _)| frames[i]).collect();
                        let names = match names.split_last() {
                            Some((&("CPU_TIME" | "UNMANAGED_CODE_TIME"), rest)) => rest,
                            _ => &names[..],
                        };
                        let k: Vec<String> = names.iter().map(|n| norm(n.split_once('!').map_or(*n, |(_, m)| m))).collect();
                        if !k.is_empty() {
                            *out.entry(k.join(";")).or_insert(0.0) += at - stack.last().unwrap().1;
                        }
                    }
                    assert_eq!(stack.pop().map(|x| x.0), Some(f), "speedscope events close what they opened");
                    opened_last = false;
                }
                t => panic!("event type {t}"),
            }
        }
    }
    out
}

#[test]
#[ignore = "needs .NET"]
fn flame_over_dotnet_trace_gives_the_hot_line_and_speedscopes_frames() {
    let dir = scratch("speedscope");
    let (symbols, _) = work();
    for channel in CHANNELS {
        let trace = record_dotnet_trace(channel, &dir, "cpu", &["--profile", DOTNET_TRACE_CPU]);
        // clrmap flame over dotnet-trace's file: the program's hot line, every caller's line.
        let folded = collapsed(&clrmap_ok(&["flame", trace.to_str().unwrap(), "--symbol-path", symbols.to_str().unwrap()]));
        hot_line(&folded, &format!("dotnet-trace on {channel}"));
        // dotnet-trace's own speedscope file of the same trace: the same stacks, frame for
        // frame, and the same heaviest one.
        let o = run(
            Command::new(tool("dotnet-trace")).args(["convert", "--format", "speedscope", "-o"]).arg(dir.join(format!("cpu-{}", channel.replace('.', "_")))).arg(&trace),
            "dotnet-trace convert",
            120,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let theirs = speedscope_stacks(&dir.join(format!("cpu-{}.speedscope.json", channel.replace('.', "_"))));
        let ours = our_stacks(&folded);
        let a: BTreeSet<&String> = ours.keys().collect();
        let b: BTreeSet<&String> = theirs.keys().collect();
        // Each thread's last sample has no length in the evented file (a sample lasts until the
        // next one): a stack of such a sample alone is not in it.
        let last = te_last_stacks(&Te::read(&trace));
        let only_ours: Vec<&&String> = a.difference(&b).filter(|s| !last.contains(**s)).collect();
        let only_theirs: Vec<&&String> = b.difference(&a).collect();
        assert!(only_ours.is_empty() && only_theirs.is_empty(), "{channel}: stacks only clrmap has {only_ours:?}; only dotnet-trace's speedscope file {only_theirs:?}");
        let heaviest_ours = ours.iter().max_by_key(|(_, n)| **n).unwrap().0;
        let heaviest_theirs = theirs.iter().max_by(|x, y| x.1.total_cmp(y.1)).unwrap().0;
        assert_eq!(heaviest_ours, heaviest_theirs);
        assert_eq!(heaviest_ours, "Work.Main;Work.Outer;Work.Middle;Work.Spin");
    }
}

/// Work's bodies in a trace, by name: (token, code size, map).
fn work_maps(trace: &Path) -> BTreeMap<String, Value> {
    let v: Value = serde_json::from_str(&clrmap_ok(&["il", "dump", trace.to_str().unwrap(), "--json", "--module", "Work.dll"])).unwrap();
    v["methods"].as_array().unwrap().iter().map(|b| (b["name"].as_str().unwrap().to_owned(), serde_json::json!([b["token"], b["code_size"], b["map"], b["tier"]]))).collect()
}

#[test]
#[ignore = "needs .NET"]
fn clrmap_and_dotnet_trace_record_the_same_maps() {
    let dir = scratch("same-maps");
    for channel in CHANNELS {
        // The same program (tiered compilation off: one optimized body a method) and the same
        // providers, recorded by each tool.
        let ours = record_clrmap(channel, &dir, &["--providers", MAP_PROVIDERS]);
        let theirs = record_dotnet_trace(channel, &dir, "maps", &["--providers", MAP_PROVIDERS]);
        let (a, b) = (work_maps(&ours), work_maps(&theirs));
        assert_eq!(a.keys().collect::<Vec<_>>(), ["Work::Main", "Work::Middle", "Work::Outer", "Work::Spin"], "{channel}");
        assert_eq!(a, b, "{channel}: Work's maps recorded by clrmap and by dotnet-trace");
        // And TraceEvent reads dotnet-trace's file as clrmap does.
        let te = Te::read(&theirs);
        events_agree(&theirs, &te, channel);
        maps_agree(&theirs, &te, channel);
    }
}

/// dotnet-stack's report: the frames of each thread, innermost first, as `Module!Method(...)`.
fn dotnet_stack_threads(text: &str) -> Vec<Vec<String>> {
    let mut threads: Vec<Vec<String>> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Thread (") {
            threads.push(Vec::new());
        } else if !t.is_empty() {
            if let Some(th) = threads.last_mut() {
                th.push(t.to_owned());
            }
        }
    }
    threads
}

#[test]
#[ignore = "needs .NET"]
fn dotnet_stack_and_clrmap_name_the_same_methods() {
    let dir = scratch("dotnet-stack");
    let (symbols, dll) = work();
    for channel in CHANNELS {
        // Work parked in Main -> Outer -> Middle -> Park, reading its stdin.
        let mut child = Command::new(host(channel)).args([&dll, "park"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let pid = child.id().to_string();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "parked");
        let report = run(Command::new(tool("dotnet-stack")).args(["report", "-p", &pid]), "dotnet-stack report", 120);
        let trace = dir.join(format!("park-{channel}.nettrace"));
        let collected = clrmap_ok(&["trace", "collect", "--pid", &pid, "--cpu", "--duration", "1s", "-o", trace.to_str().unwrap()]);
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
        assert!(report.status.success(), "dotnet-stack on {channel}: {}{}", stdout(&report), stderr(&report));
        let _ = collected;
        // dotnet-stack: the parked thread's managed frames, innermost first.
        let text = stdout(&report);
        let threads = dotnet_stack_threads(&text);
        let parked = threads.iter().find(|t| t.iter().any(|f| f.contains("Work.Park"))).unwrap_or_else(|| panic!("{channel}: no thread in Work.Park: {text}"));
        let theirs: Vec<String> = parked.iter().filter(|f| !f.starts_with('[')).map(|f| norm(f.split_once('!').map_or(f.as_str(), |(_, m)| m))).collect();
        // clrmap: the parked thread's stacks over one second (the same, sample after sample).
        let folded = collapsed(&clrmap_ok(&["flame", trace.to_str().unwrap(), "--symbol-path", symbols.to_str().unwrap()]));
        let stacks: Vec<&Vec<String>> = folded.iter().filter(|(f, _)| f.iter().any(|x| x.starts_with("Work::Park "))).map(|(f, _)| f).collect();
        assert!(!stacks.is_empty(), "{channel}: no sample in Work::Park: {folded:?}");
        for s in &stacks {
            let ours: Vec<String> = s.iter().rev().map(|f| norm(without_line(f))).filter(|f| f != "?").collect();
            assert_eq!(ours, theirs, "{channel}: clrmap's stack {s:?}; dotnet-stack's {parked:?}");
            // clrmap adds the lines: every Work frame at its call.
            let want = [
                format!("Work::Main (Work.cs:{})", work_line("MAIN-PARK")),
                format!("Work::Outer (Work.cs:{})", work_line("OUTER")),
                format!("Work::Middle (Work.cs:{})", work_line("MIDDLE-PARK")),
                format!("Work::Park (Work.cs:{})", work_line("PARK")),
            ];
            let work_frames: Vec<&String> = s.iter().filter(|f| f.starts_with("Work::")).collect();
            assert_eq!(work_frames, want.iter().collect::<Vec<_>>(), "{channel}");
        }
    }
}

/// The .NET 11.0.0 runtime laid out by scripts/install-dotnet.sh outside the runtimes list
/// (`.dotnet/11.0/dotnet`), if this machine has it.
fn dotnet11() -> Option<PathBuf> {
    Some(dotnet_home().join("11.0/dotnet")).filter(|p| p.is_file())
}

#[test]
#[ignore = "needs .NET"]
fn lossless_sessions_on_11_and_a_clear_refusal_before() {
    let dir = scratch("lossless");
    let (_, dll) = work();
    // 8, 9 and 10 do not know CollectTracing6: unsupported_command (status 6), saying what is
    // needed, and the started program is not left running.
    for channel in CHANNELS {
        let out = dir.join(format!("refused-{channel}.nettrace"));
        let o = run(
            Command::new(env!("CARGO_BIN_EXE_clrmap")).args(["trace", "collect", "--lossless", "-o", out.to_str().unwrap(), "--", &host(channel), &dll, "hot", "30"]),
            "clrmap trace collect --lossless",
            60,
        );
        assert_eq!(code(&o), Some(6), "{channel}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("unsupported_command") && err.contains("CollectTracing6") && err.contains(".NET 11"), "{channel}: {err}");
        assert!(!out.exists());
        // dotnet-trace's Block mode is refused by the same runtime.
        let o = run(
            Command::new(tool("dotnet-trace"))
                .args(["collect", "--buffering-mode", "Block", "--providers", MAP_PROVIDERS, "-o"])
                .arg(dir.join(format!("dt-{channel}.nettrace")))
                .args(["--", &host(channel), &dll, "hot", "0.5"])
                .current_dir(&dir),
            "dotnet-trace --buffering-mode Block",
            60,
        );
        assert!(!o.status.success() || !dir.join(format!("dt-{channel}.nettrace")).is_file(), "{channel}: dotnet-trace's Block mode was accepted");
    }
    // 11.0.0 runs a lossless session, and TraceEvent reads its trace as clrmap does.
    let Some(host11) = dotnet11() else {
        eprintln!("note: no .NET 11 runtime in {}: the lossless session itself is not run", dotnet_home().display());
        return;
    };
    let out = dir.join("lossless-11.nettrace");
    let host11 = host11.to_string_lossy().into_owned();
    clrmap_ok(&["trace", "collect", "--lossless", "--cpu", "-o", out.to_str().unwrap(), "--", &host11, &dll, "hot", "1.5"]);
    let folded = agree(&out, "a lossless session on 11.0");
    hot_line(&folded, "11.0 lossless");
}

/// The SDK's own C# compiler (`dotnet --list-sdks`: the newest SDK's `Roslyn/bincore/csc.dll`).
fn sdk_csc() -> PathBuf {
    let o = run(Command::new("dotnet").arg("--list-sdks"), "dotnet --list-sdks", 60);
    let text = stdout(&o);
    let line = text.lines().last().unwrap_or_else(|| panic!("no SDK: {text}"));
    let (version, dir) = line.split_once(" [").unwrap();
    let csc = Path::new(dir.trim_end_matches(']')).join(version).join("Roslyn/bincore/csc.dll");
    assert!(csc.is_file(), "{}", csc.display());
    csc
}

#[test]
#[ignore = "needs .NET"]
fn runtime_async_frames_on_11_equal_the_runtimes_stack_trace() {
    let Some(host11) = dotnet11() else {
        eprintln!("note: no .NET 11 runtime in {}: runtime-async is not run", dotnet_home().display());
        return;
    };
    let dir = scratch("runtime-async");
    // The SDK's Roslyn compiles runtime-async (`runtime-async=on`) against 11.0.0's framework.
    let fw = host11.parent().unwrap().join("shared/Microsoft.NETCore.App/11.0.0");
    let src = repo_root().join("tests/dotnet/oracles/RuntimeAsync/RuntimeAsync.cs");
    let dll = dir.join("RuntimeAsync.dll");
    let mut csc = Command::new("dotnet");
    csc.arg(sdk_csc()).args(["-nologo", "-noconfig", "-nostdlib", "-features:runtime-async=on", "-optimize+", "-debug:portable", "-deterministic"]);
    for a in ["System.Private.CoreLib", "System.Runtime", "System.Console", "System.Threading.Tasks", "System.Diagnostics.StackTrace"] {
        csc.arg(format!("-r:{}", fw.join(format!("{a}.dll")).display()));
    }
    let o = run(csc.arg(format!("-out:{}", dll.display())).arg(&src), "csc", 300);
    assert!(o.status.success(), "csc: {}{}", stdout(&o), stderr(&o));
    std::fs::write(
        dir.join("RuntimeAsync.runtimeconfig.json"),
        r#"{ "runtimeOptions": { "tfm": "net11.0", "framework": { "name": "Microsoft.NETCore.App", "version": "11.0.0" }, "configProperties": { "System.Globalization.Invariant": true } } }"#,
    )
    .unwrap();
    // Run under a trace, one optimized body per method variant (no tiering).
    let trace = dir.join("runtime-async.nettrace");
    let o = run(
        Command::new(env!("CARGO_BIN_EXE_clrmap"))
            .args(["trace", "collect", "-o", trace.to_str().unwrap(), "--", host11.to_str().unwrap(), dll.to_str().unwrap()])
            .env("DOTNET_TieredCompilation", "0"),
        "clrmap trace collect",
        120,
    );
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let printed = stdout(&o);
    assert!(printed.contains("result 8"), "{printed}");
    // The runtime made two bodies of Main, one MethodDef: the async variant (its IL, with a
    // map) and the Task-returning thunk (a map of no entries), as TraceEvent reads them.
    let te = Te::read(&trace);
    let main_token = 0x0600_0004u64;
    let loads: Vec<&Value> = te.methods.iter().filter(|m| m["namespace"] == "RuntimeAsync" && m["rundown"] == false).collect();
    let main: Vec<&&Value> = loads.iter().filter(|m| m["token"] == main_token).collect();
    assert_eq!(main.len(), 2, "{loads:?}");
    let thunk = main.iter().find(|m| m["signature"].as_str().unwrap().contains("Task`1")).unwrap_or_else(|| panic!("{main:?}"));
    let variant = main.iter().find(|m| m["start"] != thunk["start"]).unwrap();
    let thunk_map = te.maps.iter().find(|(_, m)| m["start"] == thunk["start"]).map(|(map, _)| map["il"].as_array().unwrap().len());
    assert_eq!(thunk_map, Some(0), "the thunk's map");
    // il dump: the bodies with maps, the async variants among them, one per MethodDef.
    let v: Value = serde_json::from_str(&clrmap_ok(&["il", "dump", trace.to_str().unwrap(), "--json", "--module", "RuntimeAsync.dll"])).unwrap();
    let bodies = v["methods"].as_array().unwrap();
    let by_token = |t: u64| -> Vec<&Value> { bodies.iter().filter(|b| b["token"] == t).collect() };
    assert_eq!(by_token(main_token).len(), 1, "{bodies:?}");
    assert_eq!(by_token(main_token)[0]["start"], variant["start"]);
    // symbolize: both bodies of Main, the variant with its line, the thunk its method alone.
    let sym = |args: &[&str]| -> Vec<Value> {
        let mut a = vec!["symbolize", trace.to_str().unwrap(), "--json"];
        a.extend_from_slice(args);
        clrmap_ok(&a).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let at = |m: &Value, off: u64| (m["start"].as_u64().unwrap() + off).to_string();
    let both = sym(&[&at(thunk, 1), &at(variant, 1)]);
    assert_eq!((both[0]["token"].as_u64(), both[0]["method"].as_str(), both[0]["line"].as_u64()), (Some(main_token), Some("RuntimeAsync::Main"), None), "{both:?}");
    assert_eq!((both[1]["token"].as_u64(), both[1]["method"].as_str()), (Some(main_token), Some("RuntimeAsync::Main")), "{both:?}");
    // Every frame the runtime's StackTrace printed (before the first await and after it):
    // clrmap's method, IL offset and line at the body's start plus the frame's native offset,
    // each a return address (the frames are all callers of Print).
    let mut frames = 0;
    for line in printed.lines().filter(|l| l.starts_with("F ")) {
        let f: Vec<&str> = line.split(' ').collect();
        let (native, token, il, src_line, name) = (f[3].parse::<u64>().unwrap(), u64::from_str_radix(f[4], 16).unwrap(), f[5].parse::<i64>().unwrap(), f[6].parse::<u64>().unwrap(), f[7]);
        let body = by_token(token);
        assert_eq!(body.len(), 1, "{line}: {bodies:?}");
        let got = &sym(&["--return-address", &at(body[0], native)])[0];
        assert_eq!(got["method"].as_str(), Some(name), "{line}: {got}");
        assert_eq!(got["token"].as_u64(), Some(token), "{line}: {got}");
        assert_eq!(got["il_offset"].as_i64(), Some(il), "{line}: {got}");
        assert_eq!(got["line"].as_u64().unwrap_or(0), src_line, "{line}: {got}");
        frames += 1;
    }
    assert!(frames >= 5, "{printed}");
}

//! The runtime is the oracle for framework frames on the trace route: FwFrames.cs
//! (tests/dotnet/fwframes) calls into the framework with callbacks that capture
//! `new StackTrace(false)` from inside it (sorting, LINQ, dictionaries and sets with a custom
//! comparer, sorted collections, ForEach) and catches exceptions thrown inside it, printing every
//! frame with its module, MethodDef token, native offset and IL offset. Each runtime that can
//! record a trace runs it once under `clrmap trace collect` and once under `clrmap profile`. A
//! frame's address is its method's code start as that recording gives it (read with the
//! library: no command lists a trace's ReadyToRun starts by token) plus the native offset, and
//! `clrmap symbolize --json --return-address` must give the runtime's IL offset: on every
//! framework frame (ReadyToRun code of System.Private.CoreLib, System.Linq, System.Collections)
//! where the capture route does, the trace route does too. Tiered compilation is off in the
//! program's runtimeconfig, so a framework method runs its ReadyToRun code for the whole run (no
//! tier-1 body replaces it) and each (module, token, native offset) names one piece of code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use clrmap::symbolizer::{Options, Symbolizer};

use crate::support::*;

fn work_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fw-oracle").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Rolls forward to every later runtime; tiering off, invariant globalization.
const RUNTIMECONFIG: &str = r#"{ "runtimeOptions": { "tfm": "netcoreapp3.1", "rollForward": "LatestMajor", "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.0" }, "configProperties": { "System.Globalization.Invariant": true, "System.Runtime.TieredCompilation": false } } }"#;

const PROGRAM: &str = "FwFrames";

/// FwFrames.dll with its portable PDB, built once by Roslyn csc against the 3.1 framework.
fn built() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = work_dir("build");
        csc_against_3_1("fwframes", PROGRAM, &["System.Private.CoreLib", "System.Runtime", "System.Console", "System.Linq", "System.Collections", "System.Runtime.Extensions"], &out, RUNTIMECONFIG);
        out
    })
}

/// One `F` line of the program's output.
#[derive(Debug, Clone)]
struct RuntimeFrame {
    text: String,
    module: String,
    token: u32,
    native: u64,
    /// -1 where the runtime gives none.
    il: i64,
}

impl RuntimeFrame {
    fn framework(&self) -> bool {
        self.module != format!("{PROGRAM}.dll")
    }

    /// The piece of code and the place in it: the same key names the same code in both runs.
    fn key(&self) -> (String, u32, u64) {
        (self.module.clone(), self.token, self.native)
    }
}

fn parse_frames(stdout: &str) -> Vec<RuntimeFrame> {
    stdout
        .lines()
        .filter(|l| l.starts_with("F\t"))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 9, "bad frame line {l:?}");
            RuntimeFrame {
                text: l.to_owned(),
                module: f[4].to_owned(),
                token: u32::from_str_radix(f[5].trim_start_matches("0x"), 16).unwrap(),
                native: f[6].parse().unwrap(),
                il: f[7].parse().unwrap(),
            }
        })
        .collect()
}

/// Every code start the recording gives, by (module file name, MethodDef token): one per
/// instantiation.
fn starts(recording: &Path) -> HashMap<(String, u32), Vec<u64>> {
    let sym = Symbolizer::open(recording, Options::default()).unwrap();
    let mut map: HashMap<(String, u32), Vec<u64>> = HashMap::new();
    for b in sym.store().bodies() {
        if let (Some(module), Some(start)) = (b.module.clone(), b.start) {
            map.entry((module, b.token)).or_default().push(start);
        }
    }
    for v in map.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    map
}

/// `clrmap symbolize RECORDING --json --return-address ADDRESS...`: each address's token and IL
/// offset.
fn symbolize(recording: &Path, addresses: &[u64]) -> HashMap<u64, (Option<u32>, Option<u32>)> {
    let mut answers = HashMap::new();
    for chunk in addresses.chunks(2000) {
        let mut c = Command::new(env!("CARGO_BIN_EXE_clrmap"));
        c.args(["symbolize", "--json", "--return-address"]).arg(recording).env_remove("CLRMAP_SYMBOL_SERVER");
        c.args(chunk.iter().map(|a| format!("0x{a:X}")));
        let o = c.output().unwrap();
        assert_eq!(code(&o), Some(0), "{}", stderr(&o));
        for line in stdout(&o).lines().filter(|l| l.starts_with("{\"address\"")) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let n = |k: &str| v[k].as_u64().map(|x| u32::try_from(x).unwrap());
            answers.insert(v["address"].as_u64().unwrap(), (n("token"), n("il_offset")));
        }
    }
    assert_eq!(answers.len(), addresses.len(), "{}: an answer per address", recording.display());
    answers
}

/// What a route says of one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// The runtime printed no IL offset (-1).
    NoIl,
    /// The recording gives no code start for the frame's method.
    NoStart,
    /// Several instantiations' bodies answer for the method with different IL offsets (the
    /// runtime's stack trace does not say which instantiation ran); `true` if one of them gives
    /// the runtime's.
    Ambiguous(bool),
    Equal,
    /// clrmap's token and IL offset.
    Differ(Option<u32>, Option<u32>),
}

/// Each frame's verdict on one recording, with how many bodies the recording gives its method.
fn verdicts(frames: &[RuntimeFrame], recording: &Path) -> Vec<(Verdict, usize)> {
    let starts = starts(recording);
    let candidates: Vec<Vec<u64>> = frames.iter().map(|f| starts.get(&(f.module.clone(), f.token)).map(|s| s.iter().map(|s| s + f.native).collect()).unwrap_or_default()).collect();
    let mut all: Vec<u64> = candidates.iter().flatten().copied().collect();
    all.sort_unstable();
    all.dedup();
    let answers = symbolize(recording, &all);
    frames.iter().zip(&candidates).map(|(f, addrs)| (verdict(f, addrs, &answers), addrs.len())).collect()
}

fn verdict(f: &RuntimeFrame, addrs: &[u64], answers: &HashMap<u64, (Option<u32>, Option<u32>)>) -> Verdict {
    if f.il < 0 {
        return Verdict::NoIl;
    }
    if addrs.is_empty() {
        return Verdict::NoStart;
    }
    // The bodies whose code holds the address for this method (the others answer with
    // another method or none); with one instantiation that is the one body.
    let mut ils: Vec<Option<u32>> = addrs.iter().map(|a| answers[a]).filter(|a| a.0 == Some(f.token)).map(|a| a.1).collect();
    ils.sort_unstable();
    ils.dedup();
    match ils.as_slice() {
        [il] if *il == Some(f.il as u32) => Verdict::Equal,
        [] => {
            let (t, il) = answers[&addrs[0]];
            Verdict::Differ(t, il)
        }
        [il] => Verdict::Differ(Some(f.token), *il),
        many => Verdict::Ambiguous(many.contains(&Some(f.il as u32))),
    }
}

#[derive(Default, Debug)]
struct Counts {
    frames: usize,
    framework: usize,
    no_il: usize,
    no_start: usize,
    ambiguous_hit: usize,
    ambiguous_miss: usize,
    equal: usize,
    differ: usize,
}

fn count(frames: &[RuntimeFrame], verdicts: &[(Verdict, usize)]) -> Counts {
    let mut c = Counts { frames: frames.len(), ..Counts::default() };
    for (f, (v, _)) in frames.iter().zip(verdicts) {
        if !f.framework() {
            continue;
        }
        c.framework += 1;
        match v {
            Verdict::NoIl => c.no_il += 1,
            Verdict::NoStart => c.no_start += 1,
            Verdict::Ambiguous(true) => c.ambiguous_hit += 1,
            Verdict::Ambiguous(false) => c.ambiguous_miss += 1,
            Verdict::Equal => c.equal += 1,
            Verdict::Differ(..) => c.differ += 1,
        }
    }
    c
}

/// Run the program under one route; gives its frames and the recording.
fn run(rt: &Runtime, dir: &Path, route: &str) -> (Vec<RuntimeFrame>, PathBuf) {
    let dll = dir.join(format!("{PROGRAM}.dll"));
    let dotnet = rt.dotnet.to_string_lossy().into_owned();
    let (recording, o) = if route == "trace" {
        let out = dir.join("fw.nettrace");
        (out.clone(), clrmap(&["trace", "collect", "-o", out.to_str().unwrap(), "--", &dotnet, dll.to_str().unwrap(), "2"]))
    } else {
        let out = dir.join("fw.capture");
        let so = repo_root().join("target/debug/libclrmap_profiler.so");
        assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
        (out.clone(), clrmap(&["profile", "-o", out.to_str().unwrap(), "--profiler", so.to_str().unwrap(), "--", &dotnet, dll.to_str().unwrap(), "2"]))
    };
    assert_eq!(code(&o), Some(0), "{} {route}: {}", rt.label(), stderr(&o));
    let frames = parse_frames(&stdout(&o));
    assert!(frames.len() >= 500, "{} {route}: {} frames printed", rt.label(), frames.len());
    (frames, recording)
}

#[test]
#[ignore = "needs .NET"]
fn framework_frames_of_a_trace_have_the_runtimes_il_offsets_where_a_capture_does() {
    let build = built();
    for rt in current_runtimes() {
        let dir = work_dir(&rt.label());
        for f in ["dll", "pdb", "runtimeconfig.json"] {
            std::fs::copy(build.join(format!("{PROGRAM}.{f}")), dir.join(format!("{PROGRAM}.{f}"))).unwrap();
        }
        let (cap_frames, capture) = run(&rt, &dir, "capture");
        let (trace_frames, trace) = run(&rt, &dir, "trace");
        let cap = verdicts(&cap_frames, &capture);
        let traced = verdicts(&trace_frames, &trace);
        let (cc, tc) = (count(&cap_frames, &cap), count(&trace_frames, &traced));
        for (route, c) in [("capture", &cc), ("trace", &tc)] {
            eprintln!(
                "{} {route}: {} frames, {} framework: {} equal, {} differ, {} of several instantiations (one equal: {}, none: {}), {} without a start, {} without an IL offset",
                rt.label(),
                c.frames,
                c.framework,
                c.equal,
                c.differ,
                c.ambiguous_hit + c.ambiguous_miss,
                c.ambiguous_hit,
                c.ambiguous_miss,
                c.no_start,
                c.no_il
            );
        }
        for (f, (v, _)) in cap_frames.iter().zip(&cap).filter(|(f, (v, _))| f.framework() && matches!(v, Verdict::Differ(..) | Verdict::Ambiguous(false))).take(5) {
            eprintln!("  capture differs: {}: {v:?}", f.text);
        }
        // The (module, token, native offset) of every framework frame the capture route answers
        // as the runtime does, with how many bodies the capture gives its method.
        let cap_equal: HashMap<(String, u32, u64), usize> = cap_frames.iter().zip(&cap).filter(|(f, (v, _))| f.framework() && *v == Verdict::Equal).map(|(f, (_, n))| (f.key(), *n)).collect();
        let (mut compared, mut more_bodies, mut not_in_capture) = (0usize, 0usize, 0usize);
        let mut modules = std::collections::BTreeSet::new();
        let mut failures = Vec::new();
        for (f, (v, n)) in trace_frames.iter().zip(&traced).filter(|(f, _)| f.framework()) {
            let Some(&cap_n) = cap_equal.get(&f.key()) else {
                not_in_capture += 1;
                continue;
            };
            compared += 1;
            modules.insert(f.module.as_str());
            match v {
                Verdict::Equal => {}
                // The trace names more instantiations of the method than the capture (its
                // rundown lists every one loaded, the profiler those whose code was asked for),
                // and they answer this native offset differently: the runtime's stack trace
                // does not say which ran, and one of them gives its IL offset.
                Verdict::Ambiguous(true) if *n > cap_n => more_bodies += 1,
                _ => failures.push(format!("{}\n    trace: {v:?} ({n} bodies; the capture {cap_n})", f.text)),
            }
        }
        eprintln!(
            "{}: {compared} framework frames the capture route answers as the runtime: the trace route equal on {}, one of more instantiations on {more_bodies}, differs on {}; {not_in_capture} not compared",
            rt.label(),
            compared - more_bodies - failures.len(),
            failures.len()
        );
        assert!(
            failures.is_empty(),
            "{}: {} of {compared} framework frames differ on the trace route:\n{}",
            rt.label(),
            failures.len(),
            failures.iter().take(30).cloned().collect::<Vec<_>>().join("\n")
        );
        assert!(compared >= 100, "{}: only {compared} framework frames compared", rt.label());
        for m in ["System.Private.CoreLib.dll", "System.Linq.dll", "System.Collections.dll"] {
            assert!(modules.contains(m), "{}: no frame of {m} compared ({modules:?})", rt.label());
        }
        assert!(tc.equal >= 100 && cc.equal >= 100, "{}: too few framework frames equal the runtime (trace {}, capture {})", rt.label(), tc.equal, cc.equal);
    }
}

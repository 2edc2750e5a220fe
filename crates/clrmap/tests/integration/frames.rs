//! The runtime is the oracle for source lines: Frames.cs (tests/dotnet/frames, built by
//! Roslyn into tests/fixtures/frames) prints, for every frame of `new StackTrace(true)` at 200
//! capture points, the method token, native offset, IL offset, file, line and column. The same
//! run is recorded by the clrmap profiler (a capture) and by EventPipe (a trace). For every frame
//! of the program's own methods, clrmap's answer for (the body's code start + native offset) must
//! equal the runtime's IL offset, file, line and column: with the return-address rule on 8.0.4
//! and 3.1's own rule (the return address as is) on 3.1.23. Tiered compilation is off, so every
//! method has one body per instantiation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clrmap::symbolizer::{FrameKind, Options, Symbolizer};

use crate::profiler::{profiler_path, CLSID};
use crate::support::{self, runtimes, Runtime};

/// One `F` line of Frames.dll's output.
#[derive(Debug)]
struct RuntimeFrame {
    line_text: String,
    token: u32,
    native_offset: u64,
    il_offset: u32,
    file: Option<String>,
    line: u32,
    column: u32,
}

fn parse_frames(stdout: &str) -> Vec<RuntimeFrame> {
    stdout
        .lines()
        .filter(|l| l.starts_with("F\t"))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert!(f.len() >= 10, "bad frame line {l:?}");
            RuntimeFrame {
                line_text: l.to_owned(),
                token: u32::from_str_radix(f[3].trim_start_matches("0x"), 16).unwrap(),
                native_offset: f[5].parse().unwrap(),
                il_offset: f[6].parse::<i64>().unwrap() as u32,
                file: (!f[7].is_empty()).then(|| f[7].to_owned()),
                line: f[8].parse().unwrap(),
                column: f[9].parse().unwrap(),
            }
        })
        .collect()
}

/// Copy a fixture variant to its own directory (the tests run in parallel, and the capture names
/// the module by its path, where its PDB is found beside it).
fn stage(variant: &str, rt: &Runtime, route: &str) -> PathBuf {
    let src = support::fixture(&format!("tests/fixtures/frames/{variant}"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("frames-{variant}-{}-{route}", rt.version));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    dir.join("Frames.dll")
}

/// Run Frames.dll with tiering off, recorded by the profiler or by EventPipe. Returns (stdout,
/// the recording's path).
fn record(rt: &Runtime, dll: &Path, so: &Path, route: &str) -> (String, PathBuf) {
    let dir = dll.parent().unwrap().to_path_buf();
    let mut c = Command::new(&rt.dotnet);
    c.arg(dll).env("COMPlus_TieredCompilation", "0").env("DOTNET_TieredCompilation", "0");
    let out = if route == "capture" {
        let out = dir.join("frames.capture");
        c.env("CORECLR_ENABLE_PROFILING", "1").env("CORECLR_PROFILER", CLSID).env("CORECLR_PROFILER_PATH", so).env("CLRMAP_PROFILER_OUTPUT", &out);
        out
    } else {
        c.env("COMPlus_EnableEventPipe", "1").env("COMPlus_EventPipeConfig", "Microsoft-Windows-DotNETRuntime:0x60098:5");
        // 3.1 wants an existing directory; 8.0 wants a file path.
        if rt.version.starts_with("3.") {
            c.env("COMPlus_EventPipeOutputPath", &dir);
        } else {
            c.env("DOTNET_EventPipeOutputPath", dir.join("frames.nettrace"));
        }
        PathBuf::new()
    };
    let o = c.output().unwrap();
    assert!(o.status.success(), "{} Frames.dll failed: {}", rt.version, String::from_utf8_lossy(&o.stderr));
    let out = if route == "capture" { out } else { std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "nettrace")).expect("no trace written") };
    (String::from_utf8(o.stdout).unwrap(), out)
}

/// Compare every frame; returns how many were compared.
fn compare(rt: &Runtime, variant: &str, route: &str, stdout: &str, recording: &Path) -> usize {
    let sym = Symbolizer::open(recording, Options::default()).unwrap();
    let kind = if rt.version.starts_with("3.") { FrameKind::ReturnAddressAsIs } else { FrameKind::ReturnAddress };
    // Frames.dll's bodies by token: with tiering off, one per instantiation.
    let mut by_token: HashMap<u32, Vec<u64>> = HashMap::new();
    for b in sym.store().bodies() {
        if b.module.as_deref() == Some("Frames.dll") {
            if let Some(start) = b.start {
                by_token.entry(b.token).or_default().push(start);
            }
        }
    }
    let frames = parse_frames(stdout);
    let (mut compared, mut ambiguous, mut with_line) = (0, 0, 0);
    let mut failures = Vec::new();
    for f in &frames {
        let starts = by_token.get(&f.token).map(Vec::as_slice).unwrap_or(&[]);
        // A generic method with several bodies: the frame is compared with the one body whose
        // answer has the runtime's IL offset, if exactly one does; otherwise it is not counted.
        let answers: Vec<_> = starts.iter().map(|s| sym.symbolize(s + f.native_offset, kind)).collect();
        let answer = match answers.as_slice() {
            [] => {
                failures.push(format!("no body for {}", f.line_text));
                continue;
            }
            [one] => *one,
            many => {
                let hits: Vec<_> = many.iter().filter(|a| a.at.il_offset == Some(f.il_offset)).collect();
                if hits.len() != 1 {
                    ambiguous += 1;
                    continue;
                }
                *hits[0]
            }
        };
        let ours = (answer.at.token, answer.at.il_offset, answer.at.file, answer.at.line.unwrap_or(0), answer.at.column.unwrap_or(0));
        let theirs = (Some(f.token), Some(f.il_offset), f.file.as_deref(), f.line, f.column);
        if ours != theirs {
            failures.push(format!("{}\n    clrmap: {ours:?} (region {:?}, offset {:?})", f.line_text, answer.region, answer.native_offset));
        }
        compared += 1;
        with_line += usize::from(f.line != 0);
    }
    println!("{} {variant} {route}: {compared} frames compared ({with_line} with a line), {ambiguous} ambiguous, {} differ", rt.version, failures.len());
    assert!(failures.is_empty(), "{} {variant} {route}: {} of {compared} frames differ:\n{}", rt.version, failures.len(), failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n"));
    compared
}

fn run_variants(route: &str) {
    let rts = runtimes(&format!("frames::{route}"));
    let so = profiler_path();
    for rt in &rts {
        let mut total = 0;
        for variant in ["debug-portable", "debug-embedded", "release-portable", "release-embedded"] {
            let dll = stage(variant, rt, route);
            let (stdout, recording) = record(rt, &dll, &so, route);
            total += compare(rt, variant, route, &stdout, &recording);
        }
        println!("{} {route}: {total} frames compared in all", rt.version);
        assert!(total >= 200 * 4, "{} {route}: only {total} frames compared", rt.version);
    }
}

#[test]
#[ignore = "needs .NET"]
fn capture_lines_equal_the_runtimes_stack_traces() {
    run_variants("capture");
}

#[test]
#[ignore = "needs .NET"]
fn trace_lines_equal_the_runtimes_stack_traces() {
    run_variants("trace");
}

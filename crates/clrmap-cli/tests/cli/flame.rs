//! `clrmap flame`: a real 8.0.4 sample trace of tests/fixtures/perf/Hot.dll
//! (tests/fixtures/flame) in each format, read back by independent readers: Google's
//! profile.proto compiled by protoc (Python), inferno-flamegraph, and the speedscope app in
//! headless chromium (scripts/install-flame-tools.sh installs them; those tests fail without
//! them). Hostile traces under the memory limit.

use std::path::{Path, PathBuf};
use std::process::Command;

use clrmap::nettrace::{TraceWriter, SAMPLE_PROFILER};

use super::hostile::limited;
use super::support::{clrmap, code, repo_root, stderr, stdout};

const TRACE: &str = "tests/fixtures/flame/hot-8.0.4.nettrace";

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flame").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The line of Hot.cs that holds `marker`, from the source (not from clrmap).
fn hot_line(marker: &str) -> u32 {
    let src = std::fs::read_to_string(repo_root().join("tests/dotnet/perf/Hot.cs")).unwrap();
    src.lines().position(|l| l.contains(marker)).unwrap() as u32 + 1
}

fn tools() -> PathBuf {
    let t = repo_root().join("target/flame-tools");
    assert!(t.join("py/profile_pb2.py").is_file(), "run scripts/install-flame-tools.sh");
    t
}

fn collapsed_lines(text: &str) -> Vec<(String, u64)> {
    text.lines().map(|l| l.rsplit_once(' ').map(|(s, n)| (s.to_owned(), n.parse().unwrap())).unwrap()).collect()
}

#[test]
fn collapsed_to_stdout_names_the_hot_line() {
    // The --help example, as written.
    let o = clrmap(&["flame", TRACE, "--symbol-path", "tests/fixtures/perf"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let lines = collapsed_lines(&stdout(&o));
    let own = format!("Hot::OwnLoop (Hot.cs:{})", hot_line("// HOT-OWN"));
    let ending_in_own: u64 = lines.iter().filter(|(s, _)| s.rsplit(';').next().unwrap().starts_with("Hot::OwnLoop")).map(|l| l.1).sum();
    let at_line: u64 = lines.iter().filter(|(s, _)| s.ends_with(&own)).map(|l| l.1).sum();
    // The loop's body line holds most of it; the rest is the `for` line's increment and test,
    // as in perf's samples of the same loop (docs/flame.md, "The sampler's bias").
    let src = std::fs::read_to_string(repo_root().join("tests/dotnet/perf/Hot.cs")).unwrap();
    let header = format!("Hot::OwnLoop (Hot.cs:{})", src.lines().position(|l| l.contains("for (long i = 0; i < n; i++)")).unwrap() + 1);
    let at_header: u64 = lines.iter().filter(|(s, _)| s.ends_with(&header)).map(|l| l.1).sum();
    assert!(ending_in_own > 200 && at_line * 2 > ending_in_own && at_line + at_header == ending_in_own, "{at_line} and {at_header} of {ending_in_own}");
    // Root first: Main, then the loop.
    assert!(lines.iter().filter(|(s, _)| s.contains("Hot::OwnLoop")).all(|(s, _)| s.starts_with("Hot::Main (Hot.cs:")), "{lines:?}");
}

/// `--il-offsets`: every Hot.dll frame reads `Method [IL_xxxx] (Hot.cs:LINE)`, the line being the
/// one `clrmap pdb lines` (the PDB's sequence points, read apart from the symbolizer) gives that
/// IL offset, and the split by offset keeps every sample of each line.
#[test]
fn il_offsets_split_frames_by_offset_and_keep_their_lines() {
    let o = clrmap(&["pdb", "lines", "tests/fixtures/perf/Hot.dll", "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let mut points: std::collections::HashMap<String, Vec<(u64, u64)>> = Default::default();
    for v in stdout(&o).lines().skip(1).map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()) {
        let visible = v["points"].as_array().unwrap().iter().filter(|p| p["hidden"] != true);
        points.insert(v["name"].as_str().unwrap().to_owned(), visible.map(|p| (p["il"].as_u64().unwrap(), p["start_line"].as_u64().unwrap())).collect());
    }
    let line_of = |method: &str, il: u64| points[method].iter().rfind(|(at, _)| *at <= il).map(|p| p.1);
    let plain = clrmap(&["flame", TRACE, "--symbol-path", "tests/fixtures/perf"]);
    let o = clrmap(&["flame", TRACE, "--symbol-path", "tests/fixtures/perf", "--il-offsets"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let (plain, with_il) = (collapsed_lines(&stdout(&plain)), collapsed_lines(&stdout(&o)));
    let mut by_line: std::collections::HashMap<String, u64> = Default::default();
    let mut hot_frames = 0;
    for (stack, n) in &with_il {
        let mut plain_stack = Vec::new();
        for frame in stack.split(';') {
            let Some((method, rest)) = frame.split_once(" [IL_") else {
                assert!(!frame.starts_with("Hot::"), "a Hot.dll frame without its IL offset: {frame}");
                plain_stack.push(frame.to_owned());
                continue;
            };
            let (hex, rest) = rest.split_once("] (Hot.cs:").unwrap_or_else(|| panic!("{frame}"));
            let il = u64::from_str_radix(hex, 16).unwrap();
            let line: u64 = rest.strip_suffix(')').unwrap().parse().unwrap();
            assert_eq!(Some(line), line_of(method, il), "{frame}");
            hot_frames += 1;
            plain_stack.push(format!("{method} (Hot.cs:{line})"));
        }
        *by_line.entry(plain_stack.join(";")).or_default() += n;
    }
    assert!(hot_frames > 2, "{with_il:?}");
    let plain: std::collections::HashMap<String, u64> = plain.into_iter().collect();
    assert_eq!(by_line, plain);
}

#[test]
fn output_files_are_written_whole() {
    let d = dir("output");
    let out = d.join("hot.folded");
    std::fs::write(&out, "old").unwrap();
    let o = clrmap(&["flame", TRACE, "--symbol-path", "tests/fixtures/perf", "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let direct = clrmap(&["flame", TRACE, "--symbol-path", "tests/fixtures/perf"]);
    assert_eq!(std::fs::read(&out).unwrap(), direct.stdout);
    // A directory as -o is refused and stays.
    let o = clrmap(&["flame", TRACE, "-o", d.to_str().unwrap()]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(d.is_dir());
}

#[test]
fn bad_input_and_usage() {
    let o = clrmap(&["flame", "tests/fixtures/perf/Hot.runtimeconfig.json"]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    let o = clrmap(&["flame", "no/such.nettrace"]);
    assert_eq!(code(&o), Some(1));
    let o = clrmap(&["flame", TRACE, "--format", "svg"]);
    assert_eq!(code(&o), Some(2));
}

/// examples/frames.nettrace was recorded without the sample profiler (`trace stats` shows no
/// SampleProfiler event): flame fails with `no_samples`, saying how to record them, and writes
/// nothing, not even to -o.
#[test]
fn a_trace_with_no_samples_is_an_error_that_says_how_to_record_them() {
    let trace = "examples/frames.nettrace";
    let stats = clrmap(&["trace", "stats", trace]);
    assert_eq!(code(&stats), Some(0));
    assert!(!stdout(&stats).contains("Microsoft-DotNETCore-SampleProfiler"), "{}", stdout(&stats));
    let o = clrmap(&["flame", trace]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(err.starts_with("error: no_samples: examples/frames.nettrace: no CPU samples"), "{err}");
    assert!(err.contains("clrmap trace collect --cpu"), "{err}");
    let d = dir("no-samples");
    let out = d.join("none.folded");
    let _ = std::fs::remove_file(&out);
    let o = clrmap(&["flame", trace, "--format", "speedscope", "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(!out.exists());
}

#[test]
fn help_has_a_working_example() {
    let o = clrmap(&["flame", "--help"]);
    assert_eq!(code(&o), Some(0));
    let help = stdout(&o);
    assert!(help.contains("--format") && help.contains("speedscope") && help.contains("pprof"));
    let o = clrmap(&["--help"]);
    assert!(stdout(&o).contains("flame"));
    let o = clrmap(&["help", "flame"]);
    assert!(stdout(&o).contains("clrmap flame tests/fixtures/flame/hot-8.0.4.nettrace --symbol-path tests/fixtures/perf"), "{}", stdout(&o));
}

#[test]
#[ignore = "needs the flame tools"]
fn pprof_read_by_googles_profile_proto() {
    let t = tools();
    let d = dir("pprof");
    let out = d.join("hot.pb.gz");
    let o = clrmap(&["flame", TRACE, "--symbol-path", "tests/fixtures/perf", "--format", "pprof", "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let o = Command::new("python3").arg(repo_root().join("tests/flame/read_pprof.py")).arg(&out).env("PYTHONPATH", crate::support::flame_pythonpath(&t)).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sample_types"], serde_json::json!([["samples", "count"], ["cpu", "nanoseconds"]]));
    assert_eq!(v["period"], 1_000_000);
    // The top leaf location of the program's own code (Hot.cs) by cpu is the hot method at the
    // hot line.
    let leaves = v["leaves"].as_array().unwrap();
    let own = leaves.iter().find(|l| l["lines"][0]["file"].as_str().unwrap().ends_with("Hot.cs")).unwrap();
    assert_eq!(own["lines"][0]["function"], "Hot::OwnLoop", "{v}");
    assert_eq!(own["lines"][0]["line"], hot_line("// HOT-OWN"));
    // Every sample's cpu value is its count times the period.
    assert_eq!(v["cpu_total"], v["samples_total"].as_i64().unwrap() * 1_000_000);
}

#[test]
#[ignore = "needs the flame tools"]
fn collapsed_rendered_by_inferno_names_the_hot_line() {
    let t = tools();
    let d = dir("inferno");
    let folded = d.join("hot.folded");
    let o = clrmap(&["flame", TRACE, "--symbol-path", "tests/fixtures/perf", "-o", folded.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0));
    let svg = d.join("hot.svg");
    let status = Command::new("sh").arg("-c").arg(format!("'{}' '{}' > '{}'", t.join("cargo/bin/inferno-flamegraph").display(), folded.display(), svg.display())).status().unwrap();
    assert!(status.success());
    let svg = std::fs::read_to_string(svg).unwrap();
    let own = format!("Hot::OwnLoop (Hot.cs:{})", hot_line("// HOT-OWN"));
    assert!(svg.contains(&own), "the SVG does not name {own}");
}

#[test]
#[ignore = "needs the flame tools"]
fn speedscope_draws_the_flame_graph_in_chromium() {
    let t = tools();
    let d = dir("speedscope");
    let file = d.join("hot.speedscope.json");
    let o = clrmap(&["flame", TRACE, "--symbol-path", "tests/fixtures/perf", "--format", "speedscope", "-o", file.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0));
    let png = d.join("hot.png");
    let o = Command::new("python3")
        .arg(repo_root().join("tests/flame/speedscope_screenshot.py"))
        .arg(&file)
        .arg(&png)
        .env("FLAME_TOOLS", &t)
        .env("PYTHONPATH", crate::support::flame_pythonpath(&t))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    // OCR of the screenshot: the hot method's name is drawn, no error page.
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(text.contains("OwnLoop"), "the screenshot ({}) shows: {text}", png.display());
    assert!(!text.to_lowercase().contains("something went wrong"), "{text}");
}

/// A trace of `n` distinct stacks of depth 4 (addresses in no body), one sample each.
fn distinct_stacks(path: &Path, n: u32) {
    let f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = TraceWriter::new(f, 8, 1_000_000, 7).unwrap();
    w.metadata(&[(1, SAMPLE_PROFILER, 0)]).unwrap();
    let per = 10_000u32;
    let payload = 1u32.to_le_bytes();
    for b in 0..n.div_ceil(per) {
        let first = b * per + 1;
        let stacks: Vec<Vec<u64>> = (first..first + per).map(|i| (0..4u64).map(|j| 0x7f00_0000_0000 + u64::from(i) * 8 + j * 0x1_0000_0000).collect()).collect();
        let refs: Vec<&[u64]> = stacks.iter().map(Vec::as_slice).collect();
        w.stacks(first, &refs, 8).unwrap();
        let ev: Vec<(u32, u64, u32, u64, &[u8])> = (first..first + per).map(|i| (1, u64::from(i % 16), i, 1, &payload[..])).collect();
        w.events(&ev).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn a_million_distinct_stacks_under_the_memory_limit() {
    let d = dir("million");
    let trace = d.join("million.nettrace");
    distinct_stacks(&trace, 1_000_000);
    let size = std::fs::metadata(&trace).unwrap().len();
    let out = d.join("million.folded");
    let o = limited(&["flame", trace.to_str().unwrap()], size, out.to_str().unwrap(), 120);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // Every sample is counted once.
    let text = std::fs::read_to_string(&out).unwrap();
    let total: u64 = collapsed_lines(&text).iter().map(|l| l.1).sum();
    assert_eq!(total, 1_000_000);
    for format in ["speedscope", "pprof"] {
        let o = limited(&["flame", trace.to_str().unwrap(), "--format", format], size, "/dev/null", 120);
        assert_eq!(o.status.code(), Some(0), "{format}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn torn_and_hostile_traces_give_what_is_whole() {
    let d = dir("torn");
    let whole = std::fs::read(repo_root().join(TRACE)).unwrap();
    let mut previous = 0u64;
    for i in 1..=24usize {
        let cut = whole.len() * i / 24;
        let p = d.join(format!("cut{i}.nettrace"));
        std::fs::write(&p, &whole[..cut]).unwrap();
        let out = d.join(format!("cut{i}.folded"));
        let o = limited(&["flame", p.to_str().unwrap(), "--symbol-path", "tests/fixtures/perf"], cut as u64, out.to_str().unwrap(), 30);
        let total: u64 = collapsed_lines(&std::fs::read_to_string(&out).unwrap()).iter().map(|l| l.1).sum();
        assert!(total >= previous, "cut {cut}: {total} samples after {previous}");
        previous = total;
        if cut < whole.len() && o.status.code() == Some(0) {
            assert!(stderr(&o).contains("warning"), "cut {cut}: no warning");
        }
    }
    assert!(previous > 1000);
    // Unknown stack ids and out-of-order stack blocks.
    let p = d.join("ids.nettrace");
    let mut w = TraceWriter::new(Vec::new(), 8, 1_000_000, 7).unwrap();
    w.metadata(&[(1, SAMPLE_PROFILER, 0)]).unwrap();
    w.stacks(3, &[&[0x30, 0x31]], 8).unwrap();
    w.stacks(1, &[&[0x10], &[0x20]], 8).unwrap();
    let one = 1u32.to_le_bytes();
    w.events(&[(1, 1, 3, 1, &one[..]), (1, 1, 1, 1, &one[..]), (1, 1, 99, 1, &one[..]), (1, 1, 99, 1, &one[..])]).unwrap();
    std::fs::write(&p, w.finish().unwrap()).unwrap();
    let o = clrmap(&["flame", p.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "0x31;0x30 1\n0x10 1\n");
    assert!(stderr(&o).contains("2 samples name a stack the trace does not hold"), "{}", stderr(&o));
}

#[test]
#[ignore = "needs the flame tools"]
fn pprof_inlined_frames_are_lines_of_one_location_innermost_first() {
    // The real 8.0.4 trace with inline trees (tests/fixtures/inlines), with one-frame samples
    // appended at every 3rd byte of its bodies: each pprof location's lines, read by Google's
    // profile.proto, are the collapsed stack's frames in reverse (innermost inlinee first, the
    // physical method last).
    let t = tools();
    let d = dir("pprof-inlines");
    let real = std::fs::read(repo_root().join("tests/fixtures/inlines/attach-8.0.4.nettrace")).unwrap();
    let plain = d.join("plain.nettrace");
    std::fs::write(&plain, &real).unwrap();
    let sym = clrmap::symbolizer::Symbolizer::open(&plain, Default::default()).unwrap();
    let addrs: Vec<u64> = sym.store().bodies().iter().filter_map(|b| b.start.map(|s| (s, b.code_size))).flat_map(|(s, n)| (0..u64::from(n)).step_by(3).map(move |o| s + o)).collect();
    let at = real.len() as u64 - 1;
    let mut w = TraceWriter::resume(real[..real.len() - 1].to_vec(), at);
    w.sequence_point().unwrap();
    w.metadata(&[(60_000, SAMPLE_PROFILER, 0)]).unwrap();
    let stacks: Vec<[u64; 1]> = addrs.iter().map(|&a| [a]).collect();
    let refs: Vec<&[u64]> = stacks.iter().map(|s| &s[..]).collect();
    w.stacks(1, &refs, 8).unwrap();
    let payload = 1u32.to_le_bytes();
    let ev: Vec<(u32, u64, u32, u64, &[u8])> = (1..=refs.len() as u32).map(|i| (60_000, 9, i, 1, &payload[..])).collect();
    w.events(&ev).unwrap();
    let trace = d.join("samples.nettrace");
    std::fs::write(&trace, w.finish().unwrap()).unwrap();
    let folded = clrmap(&["flame", trace.to_str().unwrap()]);
    assert_eq!(code(&folded), Some(0), "{}", stderr(&folded));
    let out = d.join("samples.pb.gz");
    let o = clrmap(&["flame", trace.to_str().unwrap(), "--format", "pprof", "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0));
    let o = Command::new("python3").arg(repo_root().join("tests/flame/read_pprof.py")).arg(&out).env("PYTHONPATH", crate::support::flame_pythonpath(&t)).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // pprof's stacks as collapsed text: locations root first, each location's lines outermost
    // first; a line's text as clrmap's frames read (`Method (File:LINE)`, `Method`).
    let text = |l: &serde_json::Value| {
        let (f, file, line) = (l["function"].as_str().unwrap(), l["file"].as_str().unwrap(), l["line"].as_i64().unwrap());
        if file.is_empty() || line == 0 {
            f.to_owned()
        } else {
            format!("{f} ({}:{line})", file.rsplit('/').next().unwrap())
        }
    };
    let mut from_pprof: Vec<(String, u64)> = v["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let frames: Vec<String> = s["locations"].as_array().unwrap().iter().rev().flat_map(|loc| loc.as_array().unwrap().iter().rev().map(text).collect::<Vec<_>>()).collect();
            (frames.join(";"), s["cpu"].as_u64().unwrap() / 1_000_000)
        })
        .collect();
    let mut from_collapsed = collapsed_lines(&stdout(&folded));
    from_pprof.sort();
    from_collapsed.sort();
    assert_eq!(from_pprof, from_collapsed);
    // Some locations have inlined lines.
    assert!(v["stacks"].as_array().unwrap().iter().any(|s| s["locations"][0].as_array().unwrap().len() > 1));
}

/// The flame graph the README shows (docs/flame-hot.svg, made by `clrmap flame` and inferno from
/// the committed trace) names the hot loop at its own line, and every frame in it is one
/// `clrmap flame` still writes for that trace.
#[test]
fn the_readmes_flame_graph_is_what_flame_writes() {
    let svg = std::fs::read_to_string(repo_root().join("docs/flame-hot.svg")).unwrap();
    let hot = format!("Hot::OwnLoop (Hot.cs:{})", hot_line("// HOT-OWN"));
    assert!(svg.contains(&hot), "docs/flame-hot.svg does not name {hot}");
    let o = clrmap(&["flame", TRACE, "--symbol-path", "tests/fixtures/perf"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let frames: std::collections::HashSet<&str> = out.lines().filter_map(|l| l.rsplit_once(' ')).flat_map(|(stack, _)| stack.split(';')).collect();
    // inferno writes each frame's name in a <title> as `NAME (N samples, P%)`.
    let titles: Vec<&str> = svg.split("<title>").skip(1).filter_map(|t| t.split("</title>").next()).collect();
    assert!(titles.len() > 10, "{} frames in docs/flame-hot.svg", titles.len());
    for title in titles {
        let name = title.rsplit_once(" (").map_or(title, |(n, _)| n).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("&quot;", "\"").replace("&apos;", "'");
        assert!(name == "all" || frames.contains(name.as_str()), "{name:?} is not a frame clrmap flame writes");
    }
}

//! The symbolication service's own cost, in process, on one thread: `Service::symbolicate` on
//! bodies of 1, 50 and 1000 frames of the committed Frames fixture (its PDB from a symbol path,
//! already in the LRU), next to the line lookup it wraps (`ModuleSymbols::span_at` on the same
//! frames). The ratio of the two per frame is what parsing and writing JSON cost; two floors of the
//! JSON alone (checking the request's syntax with serde_json, copying the answer) are beside them,
//! and the cursor reading the request alone. `-- --alternate` times the 1000-frame request and its
//! lookups in turn instead ([`alternate`]).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::path::Path;

use clrmap::locate::SymbolPaths;
use clrmap::service::{Config, Service};
use clrmap::symbolizer::ModuleSymbols;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, Criterion, Throughput};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// (token, IL offset) of every Frames.dll frame the runtime printed (examples/frames.stdout).
fn frames() -> Vec<(u32, u32)> {
    let text = std::fs::read_to_string(root().join("examples/frames.stdout")).unwrap();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() > 6 && (f[0] == "F" || f[0] == "E") && f[4] == "Frames.dll").then(|| (u32::from_str_radix(f[3].trim_start_matches("0x"), 16).unwrap(), f[6].parse().unwrap()))
        })
        .collect()
}

fn body(frames: &[(u32, u32)], n: usize) -> Vec<u8> {
    let list: Vec<String> = (0..n).map(|i| frames[i % frames.len()]).map(|(t, il)| format!(r#"{{"module":0,"token":{t},"il_offset":{il}}}"#)).collect();
    format!(r#"{{"modules":[{{"name":"Frames.dll"}}],"frames":[{}]}}"#, list.join(",")).into_bytes()
}

fn bench(c: &mut Criterion) {
    let dir = root().join("tests/fixtures/frames/debug-portable");
    let frames = frames();
    assert!(!frames.is_empty());
    let service = Service::new(Config::new(SymbolPaths { pdb: None, dirs: vec![dir.clone()], servers: None }, 256 << 20, 100_000));
    let mut g = c.benchmark_group("service");
    for n in [1usize, 50, 1000] {
        let b = body(&frames, n);
        let first = service.symbolicate(&b).unwrap();
        assert_eq!(first.frames, n as u64);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("symbolicate_{n}"), |bench| bench.iter(|| service.symbolicate(black_box(&b)).unwrap().body.len()));
    }
    // Floors of the JSON alone, on the 1000-frame request and its answer: serde_json checking
    // the request's syntax with no model (IgnoredAny), and copying the answer's bytes.
    let b = body(&frames, 1000);
    let answer = service.symbolicate(&b).unwrap().body;
    g.bench_function("json_floor_validate_request_1000", |bench| bench.iter(|| serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&b)).is_ok()));
    g.bench_function("json_floor_copy_answer_1000", |bench| bench.iter(|| black_box(black_box(&answer).to_vec())));
    // The service's own cursor reading the same request into serde's model (each frame a
    // `FrameIn`, which the service's own reading does not make): what reading costs beside the floor.
    let text = std::str::from_utf8(&b).unwrap();
    g.bench_function("cursor_read_request_1000", |bench| bench.iter(|| clrmap::service::scan::read(black_box(text), 100_000).map(|r| r.frames.map(|f| f.0.len()))));
    let lines = ModuleSymbols::from_pdb(std::fs::read(dir.join("Frames.pdb")).unwrap()).unwrap();
    let queries: Vec<(u32, u32)> = (0..1000).map(|i| frames[i % frames.len()]).collect();
    g.throughput(Throughput::Elements(1000));
    g.bench_function("span_at_1000", |bench| bench.iter(|| queries.iter().filter_map(|&(t, il)| lines.span_at(black_box(t), il)).map(|s| s.line).fold(0u32, u32::wrapping_add)));
    g.finish();
}

/// `-- --alternate [N]`: one `symbolicate` of the 1000 frames, then the 1000 lookups, in turn, N
/// times (3,000 by default), and the fastest and the 10th percentile of each and their ratios.
/// Criterion times its benchmarks seconds apart, and a shared machine's speed can move by 2×
/// within seconds; taken in turn, the two see the same machine (BENCHMARKS.md's measure of the
/// service's cost against the lookup's).
fn alternate(times: usize) {
    let dir = root().join("tests/fixtures/frames/debug-portable");
    let frames = frames();
    let service = Service::new(Config::new(SymbolPaths { pdb: None, dirs: vec![dir.clone()], servers: None }, 256 << 20, 100_000));
    let b = body(&frames, 1000);
    assert_eq!(service.symbolicate(&b).unwrap().frames, 1000);
    let lines = ModuleSymbols::from_pdb(std::fs::read(dir.join("Frames.pdb")).unwrap()).unwrap();
    let queries: Vec<(u32, u32)> = (0..1000).map(|i| frames[i % frames.len()]).collect();
    let (mut answers, mut lookups) = (Vec::with_capacity(times), Vec::with_capacity(times));
    for _ in 0..times {
        let t = Instant::now();
        black_box(service.symbolicate(black_box(&b)).unwrap().body.len());
        answers.push(t.elapsed());
        let t = Instant::now();
        black_box(queries.iter().filter_map(|&(t, il)| lines.span_at(black_box(t), il)).map(|s| s.line).fold(0u32, u32::wrapping_add));
        lookups.push(t.elapsed());
    }
    answers.sort();
    lookups.sort();
    let at = |v: &[Duration], q: usize| v[(v.len() - 1) * q / 100].as_secs_f64() * 1e6;
    println!("symbolicate_1000 fastest {:.1} µs, 10th percentile {:.1} µs", at(&answers, 0), at(&answers, 10));
    println!("span_at_1000     fastest {:.1} µs, 10th percentile {:.1} µs", at(&lookups, 0), at(&lookups, 10));
    println!("ratio            fastest {:.2}×, 10th percentile {:.2}×", at(&answers, 0) / at(&lookups, 0), at(&answers, 10) / at(&lookups, 10));
}

criterion_group!(benches, bench);

fn main() {
    let mut args = std::env::args().skip_while(|a| a != "--alternate");
    if args.next().is_some() {
        return alternate(args.next().map_or(3000, |n| n.parse().expect("--alternate N: a number")));
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

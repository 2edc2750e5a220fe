//! Symbolization throughput on a real trace: the Frames.dll fixture run on 8.0.4 with EventPipe
//! (recorded at bench time, `support/frames_trace.rs`), its bodies indexed once, then 1M random
//! return addresses (half inside Frames.dll's bodies, which have PDB lines; half inside the other
//! jitted bodies of the trace) answered with method, IL offset and source line.
//!
//! A second group compares the IL→line step alone on the same (token, IL offset) queries with
//! `symbolic_ppdb`'s PortablePdbCache. clrmap's line table is not public, so its cost is given
//! as `symbolize` minus `body + IL` on the same addresses, next to its plain PDB path (decoding
//! the method's sequence points per query).
//!
//! The 1M addresses are also written to `target/tmp/symbolize-bench/addrs.txt` (one hex per
//! line) for the whole-process measurement of `clrmap symbolize` (BENCHMARKS.md).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects, clippy::indexing_slicing, clippy::cast_possible_truncation)]

use std::io::Write;

use clrmap::ilmap::{runtime_il_offset, CodeBody};
use clrmap::locate::SymbolPaths;
use clrmap::symbolizer::{FrameKind, Options, Symbolizer};
use criterion::measurement::WallTime;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};

#[path = "support/dotnet.rs"]
mod dotnet;
#[path = "support/frames_trace.rs"]
mod frames_trace;
#[path = "support/gen.rs"]
mod gen;

const N: usize = 1_000_000;
const RA: FrameKind = FrameKind::ReturnAddress;

fn is_frames(b: &CodeBody) -> bool {
    b.module.as_deref().is_some_and(|m| m.eq_ignore_ascii_case("Frames.dll")) || b.module_path.as_deref().is_some_and(|p| p.ends_with("Frames.dll"))
}

/// `n` return addresses: the call (address − 1) at a uniformly random byte of a random body;
/// `frames_percent` of them in Frames.dll's bodies.
fn addresses(frames: &[&CodeBody], other: &[&CodeBody], n: usize, frames_percent: u64, seed: u64) -> Vec<u64> {
    let mut r = gen::Rng::new(seed);
    (0..n)
        .map(|_| {
            let group = if other.is_empty() || r.below(100) < frames_percent { frames } else { other };
            let b = group[r.below(group.len() as u64) as usize];
            b.start.unwrap() + r.below(u64::from(b.code_size)) + 1
        })
        .collect()
}

/// The body lookup and IL offset of `symbolize`, without the line.
fn body_and_il(sym: &Symbolizer, a: u64) -> u32 {
    let Some(b) = sym.body(a, RA) else { return 0 };
    let offset = (a - 1 - b.start.unwrap()) as u32;
    runtime_il_offset(&b.map, b.code_size, offset).1
}

/// Symbolize every address and sum the lines: the result keeps the work from being optimized away.
fn sum_lines(sym: &Symbolizer, addrs: &[u64]) -> u32 {
    addrs.iter().map(|&a| sym.symbolize(black_box(a), RA).at.line.unwrap_or(0)).fold(0u32, u32::wrapping_add)
}

/// `body_and_il` for every address, summed (see `sum_lines`).
fn sum_body_and_il(sym: &Symbolizer, addrs: &[u64]) -> u32 {
    addrs.iter().map(|&a| body_and_il(sym, black_box(a))).fold(0u32, u32::wrapping_add)
}

/// A group whose every function does N lookups: 20 samples (each takes about a second).
fn group_of_n<'c>(c: &'c mut Criterion, name: &str) -> BenchmarkGroup<'c, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(20);
    g.throughput(Throughput::Elements(N as u64));
    g
}

/// clrmap's plain PDB path: decode the method's sequence points and take the last visible one at
/// or before the IL offset (document row and start line; no name).
fn plain_line(pdb: &clrmap::pdb::PortablePdb<'_>, token: u32, il: u32) -> Option<(u32, u32)> {
    let mut found = None;
    for p in pdb.sequence_points(token).ok()? {
        let p = p.ok()?;
        if !p.is_hidden() && p.il_offset <= il {
            found = Some((p.document, p.start_line));
        }
    }
    found
}

fn bench(c: &mut Criterion) {
    let Some((trace, dir)) = frames_trace::record("symbolize-bench") else { return };
    let options = Options { symbols: SymbolPaths { pdb: None, dirs: vec![dir.clone()], servers: None } };
    let sym = Symbolizer::open(&trace, options).unwrap();
    let bodies: Vec<&CodeBody> = sym.store().bodies().iter().filter(|b| b.start.is_some() && b.code_size > 0).collect();
    let (frames, other): (Vec<&CodeBody>, Vec<&CodeBody>) = bodies.iter().partition(|b| is_frames(b));
    assert!(!frames.is_empty(), "no Frames.dll bodies in {}", trace.display());

    let mixed = addresses(&frames, &other, N, 50, 0x5EED);
    let (mut in_frames, mut with_line, mut with_method) = (0usize, 0usize, 0usize);
    for &a in &mixed {
        let f = sym.symbolize(a, RA);
        in_frames += usize::from(f.at.module == Some("Frames.dll"));
        with_line += usize::from(f.at.line.is_some());
        with_method += usize::from(f.at.token.is_some());
    }
    eprintln!(
        "trace {}: {} bodies with code ({} in Frames.dll, {} others); {N} addresses: {with_method} in a body, {in_frames} in Frames.dll, {with_line} with a line",
        trace.display(),
        bodies.len(),
        frames.len(),
        other.len()
    );
    assert!(with_line > N / 3, "too few lines: is Frames.pdb found?");
    let list = dir.join("addrs.txt");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&list).unwrap());
    for a in &mixed {
        writeln!(w, "0x{a:x}").unwrap();
    }
    w.flush().unwrap();
    eprintln!("addresses written to {}", list.display());

    let mut g = group_of_n(c, "symbolize");
    g.bench_function("mixed_1m", |b| b.iter(|| sum_lines(&sym, &mixed)));
    g.bench_function("mixed_1m_body_only", |b| b.iter(|| mixed.iter().filter(|&&a| sym.body(black_box(a), RA).is_some()).count()));
    g.bench_function("mixed_1m_body_and_il", |b| b.iter(|| sum_body_and_il(&sym, &mixed)));
    g.finish();

    // IL→line alone, on the (token, IL offset) of 1M addresses in Frames.dll's bodies.
    let in_frames = addresses(&frames, &[], N, 100, 0xF4A3E5);
    let queries: Vec<(u32, u32)> = in_frames
        .iter()
        .map(|&a| {
            let f = sym.symbolize(a, RA);
            (f.at.token.unwrap(), f.at.il_offset.unwrap())
        })
        .collect();
    let pdb_bytes = std::fs::read(dir.join("Frames.pdb")).unwrap();
    let theirs = symbolic_ppdb::PortablePdb::parse(&pdb_bytes).unwrap();
    let build_cache = || {
        let mut converter = symbolic_ppdb::PortablePdbCacheConverter::new();
        converter.process_portable_pdb(&theirs).unwrap();
        let mut cache_bytes = Vec::new();
        converter.serialize(&mut cache_bytes).unwrap();
        cache_bytes
    };
    let cache_bytes = build_cache();
    let cache = symbolic_ppdb::PortablePdbCache::parse(&cache_bytes).unwrap();
    let ours = clrmap::pdb::PortablePdb::parse(&pdb_bytes).unwrap();
    // The same answers (start line) from all three, as tests/integration/pdb.rs checks in full.
    let mut agree = 0usize;
    for (&a, &(token, il)) in in_frames.iter().zip(&queries) {
        let f = sym.symbolize(a, RA);
        let theirs = cache.lookup(token & 0x00FF_FFFF, il).map(|l| l.line);
        assert_eq!(f.at.line, theirs, "0x{token:08X} IL_{il:04X}: clrmap, symbolic-ppdb");
        assert_eq!(plain_line(&ours, token, il).map(|p| p.1), theirs);
        agree += usize::from(theirs.is_some());
    }
    eprintln!("IL→line: {N} queries in Frames.dll, {agree} with a line, all equal to symbolic-ppdb");

    let mut g = group_of_n(c, "il_to_line");
    g.bench_function("clrmap_symbolize_frames_1m", |b| b.iter(|| sum_lines(&sym, &in_frames)));
    g.bench_function("clrmap_body_and_il_frames_1m", |b| b.iter(|| sum_body_and_il(&sym, &in_frames)));
    g.bench_function("symbolic_ppdb_cache_1m", |b| b.iter(|| queries.iter().map(|&(t, il)| cache.lookup(black_box(t) & 0x00FF_FFFF, il).map_or(0, |l| l.line)).fold(0u32, u32::wrapping_add)));
    g.bench_function("clrmap_pdb_decode_per_query_1m", |b| b.iter(|| queries.iter().map(|&(t, il)| plain_line(&ours, black_box(t), il).map_or(0, |p| p.1)).fold(0u32, u32::wrapping_add)));
    g.finish();

    let mut g = c.benchmark_group("pdb_setup");
    g.bench_function("symbolic_ppdb_build_cache", |b| b.iter(|| build_cache().len()));
    g.bench_function("symbolic_ppdb_cache_parse", |b| b.iter(|| symbolic_ppdb::PortablePdbCache::parse(black_box(&cache_bytes)).is_ok()));
    g.bench_function("clrmap_open_trace_and_index", |b| {
        b.iter(|| {
            let options = Options { symbols: SymbolPaths { pdb: None, dirs: vec![dir.clone()], servers: None } };
            Symbolizer::open(black_box(&trace), options).unwrap().store().bodies().len()
        })
    });
    g.finish();
}

/// `symbolize --inlines` in process (the goal: ≥ 5 M addresses/s): the committed real 8.0.4
/// trace with the JIT's inline trees (tests/fixtures/inlines/attach-8.0.4.nettrace), 1M leaf
/// addresses at random bytes of the bodies that have trees, each answered with its chain, the
/// inlinees named and given lines where their modules have PDBs.
fn bench_inlines(c: &mut Criterion) {
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/inlines/attach-8.0.4.nettrace");
    let sym = Symbolizer::open(&trace, Options::default()).unwrap();
    assert!(sym.has_inline_trees());
    // Bodies whose chains are not all empty: probe each body at every byte once.
    let with: Vec<&CodeBody> = sym.store().bodies().iter().filter(|b| (0..b.code_size).any(|o| !sym.symbolize_inlined(b.start.unwrap() + u64::from(o), FrameKind::Leaf).1.is_empty())).collect();
    assert!(!with.is_empty(), "no body with inlined code");
    let mut r = gen::Rng::new(22);
    let addrs: Vec<u64> = (0..N)
        .map(|_| {
            let b = with[r.below(with.len() as u64) as usize];
            b.start.unwrap() + r.below(u64::from(b.code_size))
        })
        .collect();
    let inlined = addrs.iter().filter(|&&a| !sym.symbolize_inlined(a, FrameKind::Leaf).1.is_empty()).count();
    eprintln!("inlines: {} bodies, {inlined} of {N} addresses in inlined code", with.len());
    let mut g = c.benchmark_group("symbolize_inlines");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10);
    g.bench_function("inlined_1m", |b| b.iter(|| addrs.iter().map(|&a| sym.symbolize_inlined(black_box(a), FrameKind::Leaf).1.len()).sum::<usize>()));
    g.bench_function("flat_1m", |b| b.iter(|| addrs.iter().map(|&a| sym.symbolize(black_box(a), FrameKind::Leaf).at.il_offset.unwrap_or(0) as usize).sum::<usize>()));
    g.finish();
}

criterion_group!(benches, bench, bench_inlines);
criterion_main!(benches);

//! Parse throughput of a large trace (≥ 100 MB): a real 3.1 trace written by the test suite
//! (`target/tmp/workload-trace-3.1.23/trace/*.nettrace`; run `cargo test` first), its blocks
//! repeated. Measures event streaming alone and the full method table with map rebuilding.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};

#[path = "support/bigtrace.rs"]
mod bigtrace;

fn bench(c: &mut Criterion) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp/workload-trace-3.1.23/trace");
    let real = std::fs::read_dir(&dir).ok().and_then(|d| d.filter_map(|e| e.ok().map(|e| e.path())).find(|p| p.extension().is_some_and(|x| x == "nettrace")));
    let Some(real) = real else {
        eprintln!("skipping: no trace in {} (run cargo test first)", dir.display());
        return;
    };
    let big = bigtrace::grow(&std::fs::read(real).unwrap(), 100 << 20);
    let mut events = 0u64;
    clrmap::nettrace::read_events(&big[..], |_| events += 1).unwrap();
    eprintln!("trace: {} bytes, {events} events", big.len());
    let mut g = c.benchmark_group("nettrace");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(big.len() as u64));
    g.bench_function("events_100mb", |b| {
        b.iter(|| {
            let mut n = 0u64;
            clrmap::nettrace::read_events(black_box(&big[..]), |_| n += 1).unwrap();
            n
        })
    });
    g.throughput(Throughput::Elements(events));
    g.bench_function("events_100mb_per_event", |b| {
        b.iter(|| {
            let mut n = 0u64;
            clrmap::nettrace::read_events(black_box(&big[..]), |_| n += 1).unwrap();
            n
        })
    });
    g.throughput(Throughput::Bytes(big.len() as u64));
    g.bench_function("code_bodies_100mb", |b| b.iter(|| clrmap::nettrace::read_code_bodies(black_box(&big[..])).unwrap().len()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Decoding a realistic mix of type signatures: validate only, build trees, render text.
#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};

use clrmap::read::Reader;
use clrmap::signature::{decode_type, skip_type, HexTokens, SpanRenderer, TreeProvider};

#[path = "support/gen.rs"]
mod gen;

fn bench(c: &mut Criterion) {
    let sigs = gen::signatures(10_000, 7);
    let bytes: usize = sigs.iter().map(Vec::len).sum();
    let mut g = c.benchmark_group("signature");
    for (name, per) in [("bytes", Throughput::Bytes(bytes as u64)), ("sigs", Throughput::Elements(sigs.len() as u64))] {
        g.throughput(per);
        g.bench_function(format!("validate/{name}"), |b| {
            b.iter(|| {
                for s in &sigs {
                    skip_type(&mut Reader::new(black_box(s), 0)).unwrap();
                }
            })
        });
        g.bench_function(format!("tree/{name}"), |b| {
            b.iter(|| {
                for s in &sigs {
                    black_box(decode_type(&mut Reader::new(black_box(s), 0), &mut TreeProvider).unwrap());
                }
            })
        });
        g.bench_function(format!("render/{name}"), |b| {
            let names = HexTokens;
            b.iter(|| {
                for s in &sigs {
                    let mut printer = SpanRenderer::new(&names);
                    let span = decode_type(&mut Reader::new(black_box(s), 0), &mut printer).unwrap();
                    black_box(printer.text(span).to_owned());
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! The generic dictionary map at 1,000,000 entries (~30% shared items, realistic type mix):
//! full strict validation throughput, and lookup latency on the sorted map.
#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};

use clrmap::gdmap::{DictionaryMap, Lookup, SortedFlag};

#[path = "support/gen.rs"]
mod gen;

fn bench(c: &mut Criterion) {
    let bytes = gen::dictionary_map(1_000_000, 42);
    let map = DictionaryMap::parse(&bytes).unwrap();
    eprintln!("map: {} entries, {} bytes, heap {} bytes", map.len(), bytes.len(), map.heap_size());
    let mut g = c.benchmark_group("gdmap");
    g.sample_size(20);
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("validate_1m", |b| b.iter(|| DictionaryMap::parse(black_box(&bytes)).unwrap().validate().unwrap()));
    // The in-order check alone: what `validate` costs on a map the fast proof cannot take.
    g.bench_function("validate_in_order_1m", |b| b.iter(|| DictionaryMap::parse(black_box(&bytes)).unwrap().validate_in_order().unwrap()));
    g.finish();

    // 4096 RVAs spread over the map: the queries stay in cache, the map does not.
    let all: Vec<u32> = map.entries().map(|e| e.rva).collect();
    let rvas: Vec<u32> = (0..4096).map(|i| all[(i * 7919 * 31) % all.len()]).collect();
    let lookup = Lookup::new(map, SortedFlag::Trust).unwrap();
    let mut g = c.benchmark_group("gdmap_lookup");
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    g.bench_function("find_sorted_1m", |b| {
        b.iter(|| {
            i = (i + 1) % rvas.len();
            black_box(lookup.find(black_box(rvas[i])).unwrap())
        })
    });
    let mut i = 0usize;
    g.bench_function("find_and_render_sorted_1m", |b| {
        b.iter(|| {
            i = (i + 1) % rvas.len();
            let e = lookup.find(black_box(rvas[i])).unwrap();
            black_box(map.item_of(&e).unwrap().render(&clrmap::signature::HexTokens).unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

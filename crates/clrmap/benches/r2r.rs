//! Decode every method's bounds in 3.1's System.Private.CoreLib (about 30,000 runtime functions)
//! and build each public map. Needs the runtime from scripts/install-dotnet.sh.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};

use clrmap::r2r::ReadyToRunImage;

#[path = "support/dotnet.rs"]
mod dotnet;

fn bench(c: &mut Criterion) {
    let Some(bytes) = dotnet::corelib31() else { return };
    let image = ReadyToRunImage::parse(&bytes).unwrap();
    eprintln!("{} runtime functions", image.runtime_functions().len());
    c.bench_function("r2r/corelib_all_bodies", |b| {
        b.iter(|| {
            let image = ReadyToRunImage::parse(black_box(&bytes)).unwrap();
            black_box(image.code_bodies().unwrap().len())
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

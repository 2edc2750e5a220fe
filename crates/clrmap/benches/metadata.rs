//! Open System.Private.CoreLib and render all its TypeSpecs and MethodSpecs with real names: the
//! same work as `SrmOracle.dll --bench` does with System.Reflection.Metadata (see BENCHMARKS.md).
//! Needs the runtimes from scripts/install-dotnet.sh (or CLRMAP_DOTNET_HOME).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};

use clrmap::metadata::{spec_lines, Metadata};

#[path = "support/dotnet.rs"]
mod dotnet;

fn bench(c: &mut Criterion) {
    let Some(bytes) = dotnet::corelib31() else { return };
    c.bench_function("metadata/corelib_open_and_render_all_specs", |b| {
        b.iter(|| {
            let md = Metadata::parse(black_box(&bytes)).unwrap();
            let lines = spec_lines(&md, &md);
            assert!(lines.iter().all(|l| l.text.is_ok()));
            black_box(lines.len())
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Decode every method's bounds in 3.1's System.Private.CoreLib (about 30,000 runtime functions)
//! and build each public map. Needs the runtime from scripts/install-dotnet.sh.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};

use clrmap::r2r::ReadyToRunImage;

fn bench(c: &mut Criterion) {
    let home = std::env::var_os("CLRMAP_DOTNET_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.dotnet"));
    let corelib = home.join("3.1/dotnetcore2/bin/shared/Microsoft.NETCore.App/3.1.23/System.Private.CoreLib.dll");
    let Ok(bytes) = std::fs::read(&corelib) else {
        eprintln!("skipping: {} not found (run scripts/install-dotnet.sh)", corelib.display());
        return;
    };
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

//! Write a generated, realistic generic dictionary map (the benchmark's), for memory and CLI
//! measurements: `cargo run --release -p clrmap --example gen-gdmap -- 1000000 /tmp/big.gdmap`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../benches/support/gen.rs"]
mod gen;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let path = args.next().unwrap_or_else(|| "big.gdmap".into());
    let bytes = gen::dictionary_map(n, 42);
    std::fs::write(&path, &bytes).expect("write the map");
    println!("{path}: {n} entries, {} bytes", bytes.len());
}

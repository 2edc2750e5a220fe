//! Write a large trace made from a real one, for memory measurements:
//! `cargo run --release -p clrmap --example gen-trace -- REAL.nettrace MiB OUT.nettrace`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../benches/support/bigtrace.rs"]
mod bigtrace;

fn main() {
    let mut a = std::env::args().skip(1);
    let real = std::fs::read(a.next().expect("REAL")).unwrap();
    let mib: usize = a.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let out = a.next().expect("OUT");
    let big = bigtrace::grow(&real, mib << 20);
    std::fs::write(&out, &big).unwrap();
    println!("{out}: {} bytes", big.len());
}

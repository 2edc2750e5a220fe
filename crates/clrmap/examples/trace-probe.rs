//! Print a trace's event counts and its jitted bodies: `cargo run -p clrmap --example trace-probe -- FILE`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

fn main() {
    let path = std::env::args().nth(1).expect("FILE");
    let stats = clrmap::nettrace::read_events(std::io::BufReader::new(std::fs::File::open(&path).unwrap()), |_| {});
    println!("{stats:?}");
    let bodies = clrmap::nettrace::read_code_bodies(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
    println!("{} bodies with maps", bodies.len());
    for b in bodies.iter().take(3) {
        println!("{:?} {:?} start {:?} size {} tier {:?} {} entries", b.function_id, b.name, b.start, b.code_size, b.tier, b.map.len());
    }
}

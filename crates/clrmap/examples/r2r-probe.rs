//! Print the RUNTIME_FUNCTIONs and entry points around an RVA of a ReadyToRun image:
//! `cargo run -p clrmap --example r2r-probe -- IMAGE RVA`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::arithmetic_side_effects, clippy::needless_range_loop)]

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("IMAGE");
    let rva = u32::from_str_radix(args.next().expect("RVA").trim_start_matches("0x"), 16).unwrap();
    let bytes = std::fs::read(path).unwrap();
    let image = clrmap::r2r::ReadyToRunImage::parse(&bytes).unwrap();
    let rfs = image.runtime_functions();
    let i = rfs.partition_point(|f| f.begin <= rva);
    let entries = image.entry_points().unwrap();
    for j in i.saturating_sub(3)..(i + 2).min(rfs.len()) {
        let owners: Vec<String> = entries.iter().filter(|e| e.runtime_function as usize == j).map(|e| format!("0x{:08X}{}", e.token, if e.instantiation { "*" } else { "" })).collect();
        println!("rf {j}: [0x{:X}, 0x{:X}) {}", rfs[j].begin, rfs[j].end, owners.join(" "));
    }
    let ids: Vec<String> = image.section_ids().map(|id| id.to_string()).collect();
    println!("sections {}; major {}.{}", ids.join(" "), image.major, image.minor);
}

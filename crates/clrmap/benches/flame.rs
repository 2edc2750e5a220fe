//! `clrmap flame`'s work on a large synthetic trace: the real 8.0.4 sample trace of
//! Hot.dll (tests/fixtures/flame) with samples appended until the file is FLAME_BENCH_MIB
//! (default 1024) MiB, in windows of about 10 MB as the runtime writes a long session (it writes
//! a sequence point per 10 MB of buffers, and stack ids start again after each): a sequence
//! point, 5,000 stacks drawn from a pool of 20,000 distinct ones of depth 4 to 24 made of the
//! trace's own body addresses (so every frame symbolizes, with lines from Hot.pdb), in stack
//! blocks of 500, then 800,000 samples on 16 threads naming them, in event blocks of 10,000. The file is
//! written to target/tmp and streamed from there, as the CLI does: the symbolizer's pass (bodies)
//! and the profile's pass (samples), then each format written to a sink.
//!
//! Prints MB/s by the wall clock and per CPU-second (user + system time of the process, from
//! /proc/self/stat, over the reading and writing only), and the process's peak resident memory
//! (VmHWM). Run:
//! `cargo bench -p clrmap --bench flame` (FLAME_BENCH_MIB=256 for a quicker run;
//! FLAME_BENCH_COLLAPSED_ONLY=1 to stop after the collapsed format, for a profile of it alone;
//! FLAME_BENCH_KEEP=1 to leave the trace in target/tmp for a whole-process run of `clrmap flame`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects, clippy::indexing_slicing, clippy::panic)]

use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use clrmap::nettrace::{TraceWriter, SAMPLE_PROFILER};
use clrmap::profile::{Format, Profile};
use clrmap::symbolizer::{Options, Symbolizer};

fn peak_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The process's CPU time so far (user + system), in seconds, from /proc/self/stat (clock ticks
/// of 1/100 s, the kernel's USER_HZ on Linux).
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) as f64 / 100.0
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mib: u64 = std::env::var("FLAME_BENCH_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(1024);
    let real = std::fs::read(root.join("tests/fixtures/flame/hot-8.0.4.nettrace")).unwrap();
    let symbols = Options { symbols: clrmap::locate::SymbolPaths { dirs: vec![root.join("tests/fixtures/perf")], ..Default::default() } };
    let sym0 = Symbolizer::from_opened(clrmap::symbolizer::read_trace(&real[..]).unwrap(), None, symbols.clone()).unwrap();
    let mut addrs = Vec::new();
    for b in sym0.store().bodies() {
        if let Some(start) = b.start {
            for o in (1..u64::from(b.code_size)).step_by(7) {
                addrs.push(start + o);
            }
        }
    }
    let dir = root.join("target/tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("flame-bench.nettrace");
    let t = Instant::now();
    {
        let f = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
        let at = real.len() as u64 - 1;
        let mut f = f;
        f.write_all(&real[..real.len() - 1]).unwrap();
        let mut w = TraceWriter::resume(f, at);
        w.metadata(&[(60_000, SAMPLE_PROFILER, 0)]).unwrap();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let payload = 1u32.to_le_bytes();
        let mut written = at;
        let pool: Vec<Vec<u64>> = (0..20_000).map(|_| (0..(4 + next() % 21)).map(|_| addrs[(next() % addrs.len() as u64) as usize]).collect()).collect();
        while written < mib << 20 {
            w.sequence_point().unwrap();
            let window: Vec<&[u64]> = (0..5000).map(|_| pool[(next() % pool.len() as u64) as usize].as_slice()).collect();
            for chunk in 0..10u32 {
                w.stacks(1 + chunk * 500, &window[chunk as usize * 500..(chunk as usize + 1) * 500], 8).unwrap();
                written += window[chunk as usize * 500..(chunk as usize + 1) * 500].iter().map(|s| 4 + 8 * s.len() as u64).sum::<u64>();
            }
            for _ in 0..80 {
                let ev: Vec<(u32, u64, u32, u64, &[u8])> = (0..10_000).map(|_| (60_000, 1000 + next() % 16, 1 + (next() % 5000) as u32, 1 + next() % 5000, &payload[..])).collect();
                w.events(&ev).unwrap();
                written += 10_000 * 12;
            }
        }
        w.finish().unwrap().flush().unwrap();
    }
    let size = std::fs::metadata(&path).unwrap().len();
    eprintln!("trace: {size} bytes in {:.1?} (written), peak {} KB", t.elapsed(), peak_kb());
    let t = Instant::now();
    let cpu0 = cpu_s();
    let sym = Symbolizer::open(&path, symbols).unwrap();
    let opened = t.elapsed();
    let (profile, fault) = Profile::read(&sym, BufReader::with_capacity(1 << 20, std::fs::File::open(&path).unwrap()), false).unwrap();
    assert!(fault.is_none());
    let read = t.elapsed();
    let mut sink = std::io::sink();
    profile.write(Format::Collapsed, "bench", &mut sink).unwrap();
    let total = t.elapsed();
    let cpu = cpu_s() - cpu0;
    let mb = size as f64 / 1e6;
    println!(
        "flame collapsed: {size} bytes, {} samples, {} stacks: symbolizer pass {:.2?}, samples pass {:.2?}, written {:.2?}: {:.0} MB/s; CPU {cpu:.2} s, {:.0} MB per CPU-second; peak RSS {} KB",
        profile.stats().samples,
        profile.stats().stacks,
        opened,
        read - opened,
        total - read,
        mb / total.as_secs_f64(),
        mb / cpu.max(0.01),
        peak_kb()
    );
    for (format, name) in [(Format::Speedscope, "speedscope"), (Format::Pprof, "pprof")] {
        let t = Instant::now();
        profile.write(format, "bench", &mut sink).unwrap();
        println!("  {name} written in {:.2?}", t.elapsed());
    }
    let keep = std::env::var_os("FLAME_BENCH_KEEP").is_some();
    if std::env::var_os("FLAME_BENCH_COLLAPSED_ONLY").is_some() {
        if !keep {
            let _ = std::fs::remove_file(&path);
        }
        return;
    }
    let per_thread = Instant::now();
    let cpu0 = cpu_s();
    let (p2, _) = Profile::read(&sym, BufReader::with_capacity(1 << 20, std::fs::File::open(&path).unwrap()), true).unwrap();
    println!("  samples pass per thread: {:.2?}, CPU {:.2} s ({} stacks); peak RSS {} KB", per_thread.elapsed(), cpu_s() - cpu0, p2.stats().stacks, peak_kb());
    if !keep {
        let _ = std::fs::remove_file(&path);
    }
}

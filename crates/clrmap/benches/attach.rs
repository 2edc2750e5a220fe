//! Decoding an attach session's stream in memory (`diag::snapshot`'s path: a 64 KiB `BufReader`
//! over the socket, `nettrace::read_code_bodies_partial`) against the nettrace reader on a byte
//! slice of the same bytes. The stream is a real .NET 8.0.4 trace (`examples/frames.nettrace`)
//! whose blocks are written again and again (`support/bigtrace.rs`) to 100 MB, sent by a writer
//! thread through a `UnixStream::pair()`; then through `diag::snapshot_client` itself, from a fake
//! diagnostics server on a Unix socket that answers CollectTracing2 and StopTracing.
//!
//! With `CLRMAP_ATTACH_RSS_MIB=N` it measures memory instead: a stream of N MiB, generated block
//! by block as it is written (the writer holds one copy of the real trace's blocks, not the
//! stream), decoded through the pair; it prints the peak RSS (`VmHWM`) before and after.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::io::{BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{black_box, Criterion, Throughput};

use clrmap::diag::{self, ipc, Client};
use clrmap::ilmap::CodeBody;

#[path = "support/bigtrace.rs"]
mod bigtrace;

/// `diag::snapshot_client`'s decoding: a 64 KiB buffer over the stream, then the partial reader.
fn decode(r: impl Read) -> Vec<CodeBody> {
    let mut reader = BufReader::with_capacity(1 << 16, r);
    let (bodies, warning) = clrmap::nettrace::read_code_bodies_partial(&mut reader).unwrap();
    assert!(warning.is_none(), "{warning:?}");
    bodies
}

/// Decode `write`'s bytes as they come through a socket pair, written by another thread.
fn through_pair(write: impl FnOnce(&mut UnixStream) + Send) -> Vec<CodeBody> {
    let (mut tx, rx) = UnixStream::pair().unwrap();
    std::thread::scope(|s| {
        let writer = s.spawn(move || {
            write(&mut tx);
            // Dropping `tx` ends the stream.
        });
        let bodies = decode(rx);
        writer.join().unwrap();
        bodies
    })
}

/// A fake diagnostics server at `path` for one snapshot: it answers CollectTracing2 with session
/// id 1, takes the StopTracing request, streams `trace` on the first connection and closes it,
/// then answers StopTracing.
fn fake_server(listener: &UnixListener, trace: &[u8]) {
    let ok = |id: u64| ipc::Message { command_set: 0xFF, command_id: 0x00, payload: id.to_le_bytes().to_vec() };
    let (mut session, _) = listener.accept().unwrap();
    let start = ipc::receive(&mut session).unwrap();
    assert_eq!((start.command_set, start.command_id), (0x02, 0x03), "CollectTracing2");
    ipc::send(&mut session, &ok(1)).unwrap();
    let (mut stop, _) = listener.accept().unwrap();
    let request = ipc::receive(&mut stop).unwrap();
    assert_eq!((request.command_set, request.command_id), (0x02, 0x01), "StopTracing");
    session.write_all(trace).unwrap();
    drop(session);
    ipc::send(&mut stop, &ok(1)).unwrap();
}

/// A grown trace as (its start: the header and a first round of blocks, a round of blocks that
/// can follow itself forever), from `bigtrace::grow`. A block's body is 4-byte aligned, so where
/// a round ends mod 4 depends only on its last block: every round after the first starts and ends
/// at the same alignment, and its bytes are the same each time.
fn repeating_unit(real: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let header = bigtrace::grow(real, 0).len() - 1; // just the header, then the end tag
    let one = bigtrace::grow(real, header + 1);
    let two = bigtrace::grow(real, one.len());
    let start = one.len() - 1;
    assert_eq!(&two[..start], &one[..start]);
    (one[..start].to_vec(), two[start..two.len() - 1].to_vec())
}

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn rss(real: &[u8], mib: u64) {
    let (header, unit) = repeating_unit(real);
    let before = vm_hwm_kib();
    let total = mib << 20;
    let start = Instant::now();
    let mut sent = 0u64;
    let bodies = through_pair(|tx| {
        tx.write_all(&header).unwrap();
        sent += header.len() as u64;
        while sent < total {
            tx.write_all(&unit).unwrap();
            sent += unit.len() as u64;
        }
        tx.write_all(&[1]).unwrap(); // NullReference: the end of the stream
        sent += 1;
    });
    let elapsed = start.elapsed();
    println!(
        "stream {sent} bytes ({} MiB/s), {} bodies; unit {} bytes; peak RSS {} KiB before, {} KiB after",
        (sent as f64 / (1 << 20) as f64 / elapsed.as_secs_f64()) as u64,
        bodies.len(),
        unit.len(),
        before,
        vm_hwm_kib()
    );
}

fn bench(c: &mut Criterion, real: &[u8]) {
    let big = bigtrace::grow(real, 100 << 20);
    let expected = clrmap::nettrace::read_code_bodies(&big[..]).unwrap();
    let through = through_pair(|tx| tx.write_all(&big).unwrap());
    assert_eq!(through, expected, "the stream decodes as the slice does");
    eprintln!("trace: {} bytes, {} bodies", big.len(), expected.len());

    let dir = std::env::temp_dir().join(format!("clrmap-bench-attach-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("dotnet-diagnostic-fake-socket");
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).unwrap();
    let client = Client::connect_path(&socket, Duration::from_secs(10));
    let snapshot = |client: &Client| {
        std::thread::scope(|s| {
            s.spawn(|| fake_server(&listener, &big));
            diag::snapshot_client(client).unwrap()
        })
    };
    let snap = snapshot(&client);
    assert!(snap.warnings.is_empty(), "{:?}", snap.warnings);
    assert_eq!(snap.bodies, expected, "the snapshot decodes as the slice does");

    let mut g = c.benchmark_group("attach");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(big.len() as u64));
    g.bench_function("slice_read_code_bodies_100mb", |b| b.iter(|| clrmap::nettrace::read_code_bodies(black_box(&big[..])).unwrap().len()));
    g.bench_function("socketpair_decode_100mb", |b| b.iter(|| through_pair(|tx| tx.write_all(&big).unwrap()).len()));
    g.bench_function("snapshot_client_100mb", |b| b.iter(|| snapshot(&client).bodies.len()));
    g.bench_function("socketpair_bytes_only_100mb", |b| {
        b.iter(|| {
            let (mut tx, mut rx) = UnixStream::pair().unwrap();
            let big = &big;
            std::thread::scope(|s| {
                s.spawn(move || tx.write_all(big).unwrap());
                std::io::copy(&mut rx, &mut std::io::sink()).unwrap()
            })
        })
    });
    g.finish();
    drop(listener);
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let real = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/frames.nettrace")).unwrap();
    if let Some(mib) = std::env::var("CLRMAP_ATTACH_RSS_MIB").ok().and_then(|s| s.parse().ok()) {
        rss(&real, mib);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c, &real);
    c.final_summary();
}

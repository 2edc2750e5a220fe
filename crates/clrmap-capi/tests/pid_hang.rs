//! `clrmap_symbolizer_open_pid` and `clrmap_profiler_info_open_pid` never hang: against
//! hostile diagnostics servers (`clrmap::diag::fake`) at the socket of a live process (a `sleep`),
//! each call returns its HRESULT within about its `timeout_ms`; a well-behaved one gives S_OK.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::arithmetic_side_effects, unsafe_code)]

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use clrmap::diag::fake::{Behavior, FakeServer};
use clrmap_capi::*;

/// A `sleep` whose `TMPDIR` holds a fake server at its diagnostics socket.
fn target(name: &str, behavior: Behavior) -> (Child, FakeServer, std::path::PathBuf) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-pid-hang-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sleep = Command::new("sleep").arg("300").env("TMPDIR", &dir).spawn().unwrap();
    // Until its exec is through, /proc shows no environment (no TMPDIR) of the new program.
    wait_for_exec(sleep.id());
    let key = clrmap::diag::start_key(sleep.id()).unwrap();
    let server = FakeServer::start(dir.join(format!("dotnet-diagnostic-{}-{key}-socket", sleep.id())), behavior).unwrap();
    (sleep, server, dir)
}

fn open_pid(pid: u32, timeout_ms: u32) -> (HRESULT, Duration) {
    let mut sym = std::ptr::null_mut();
    let t = Instant::now();
    // SAFETY: no PDB, no symbol paths, a valid out-pointer.
    let hr = unsafe { clrmap_symbolizer_open_pid(pid, timeout_ms, std::ptr::null(), std::ptr::null(), 0, &mut sym) };
    let took = t.elapsed();
    if !sym.is_null() {
        // SAFETY: a symbolizer this call made.
        unsafe { clrmap_symbolizer_release(sym) };
    }
    (hr, took)
}

fn open_info_pid(pid: u32, timeout_ms: u32) -> HRESULT {
    let mut info = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    let hr = unsafe { clrmap_profiler_info_open_pid(pid, timeout_ms, &mut info) };
    if !info.is_null() {
        // SAFETY: an object this call made; Release is its vtable's third entry.
        unsafe { ((*(*info).lpVtbl).Release)(info) };
    }
    hr
}

#[test]
fn open_pid_returns_within_its_timeout_whatever_the_server_does() {
    let cases = [
        ("runtime", Behavior::Runtime, CLRMAP_S_OK),
        ("never-accept", Behavior::NeverAccept, CLRMAP_E_TIMEOUT),
        ("trickle", Behavior::Trickle(Duration::from_millis(200)), CLRMAP_E_TIMEOUT),
        ("endless", Behavior::EndlessStream, CLRMAP_E_TIMEOUT),
        ("silent", Behavior::PrefixThenSilence, CLRMAP_E_TIMEOUT),
        ("close-early", Behavior::CloseStreamEarly, CLRMAP_E_PROTOCOL),
        ("garbage", Behavior::Garbage, CLRMAP_E_PROTOCOL),
    ];
    for (name, behavior, want) in cases {
        let (mut sleep, server, dir) = target(name, behavior);
        let (hr, took) = open_pid(sleep.id(), 500);
        assert_eq!(hr, want, "{name}: 0x{:08X} after {took:?}", hr as u32);
        // 500 ms, and the 300 ms a closed stream is watched for the process's exit.
        assert!(took < Duration::from_millis(1500), "{name}: {took:?}");
        assert_eq!(open_info_pid(sleep.id(), 500), want, "{name}");
        drop(server);
        let _ = sleep.kill();
        let _ = sleep.wait();
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Wait until process `pid` shows its command line (its exec is through).
fn wait_for_exec(pid: u32) {
    let t = Instant::now();
    while clrmap::diag::proc_cmdline(pid).is_none() {
        assert!(t.elapsed() < Duration::from_secs(5), "process {pid} never showed its command line");
        std::thread::sleep(Duration::from_millis(2));
    }
}

//! Files from elsewhere, torn or odd: a trace cut anywhere keeps every whole event, a
//! capture cut anywhere (inside a UTF-8 character too) keeps every whole record, a capture whose
//! module paths name a device or a FIFO costs only names, and a .NET child process appends its
//! own records to its parent's capture instead of erasing them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clrmap::capture::read_capture;
use clrmap::nettrace::read_code_bodies_partial;
use clrmap::symbolizer::{FrameKind, Options, Symbolizer};

use crate::profiler::{profiler_path, CLSID};
use crate::support::{self, runtimes};

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_trace_cut_anywhere_keeps_every_whole_event() {
    // A real .NET 8.0.4 trace, cut at 400 places.
    let whole = std::fs::read(support::fixture("examples/frames.nettrace")).unwrap();
    let (all, warning) = read_code_bodies_partial(&whole[..]).unwrap();
    assert!(warning.is_none() && all.len() > 100, "{} bodies, {warning:?}", all.len());
    let by_key: HashMap<(Option<u64>, Option<u64>), _> = all.iter().map(|b| ((b.function_id, b.start), b)).collect();
    let mut previous = 0;
    let mut some_kept = 0;
    for i in 1..=400usize {
        let cut = whole.len() * i / 400;
        let (bodies, warning) = read_code_bodies_partial(&whole[..cut]).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        // Nothing made up: every body kept is a body of the whole trace, map included. (Its
        // module may be unknown yet: module events can come after the method's.)
        for b in &bodies {
            let w = by_key.get(&(b.function_id, b.start)).unwrap_or_else(|| panic!("cut {cut}: a body the whole trace does not have"));
            assert_eq!((b.token, b.code_size, &b.name, &b.tier, &b.map), (w.token, w.code_size, &w.name, &w.tier, &w.map), "cut {cut}");
            assert!(b.module.is_none() || b.module == w.module, "cut {cut}");
        }
        assert!(bodies.len() >= previous, "cut {cut}: {} bodies after {previous}", bodies.len());
        previous = bodies.len();
        some_kept += usize::from(!bodies.is_empty() && cut < whole.len());
        if cut < whole.len() {
            let w = warning.unwrap_or_else(|| panic!("cut {cut}: no warning"));
            assert!(w.offset().unwrap() <= cut as u64, "cut {cut}: warning at {}", w.offset().unwrap());
        }
    }
    assert_eq!(previous, all.len());
    assert!(some_kept > 300, "only {some_kept} of 399 cuts kept bodies");
    // The symbolizer (and so the CLI and the C ABI) opens a torn trace and says where it stopped.
    let dir = tmp("torn-trace");
    let cut = dir.join("cut.nettrace");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let sym = Symbolizer::open(&cut, Options::default()).unwrap();
    assert!(!sym.store().bodies().is_empty());
    assert_eq!(sym.warnings().len(), 1);
}

/// Run `f` on another thread; fail if it takes longer than `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).unwrap_or_else(|_| panic!("still running after {limit:?}"))
}

#[test]
fn capture_modules_that_are_devices_or_fifos_cost_only_names() {
    let dir = tmp("odd-modules");
    let fifo = dir.join("module.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let record = |module: &str, start: u64| {
        format!(
            "{{\"kind\":\"jit\",\"function_id\":{start},\"module\":\"{module}\",\"token\":100663297,\"start\":{start},\"rva\":null,\"code_size\":16,\"body\":0,\"map\":[[0,0,16]],\"map1\":null}}\n"
        )
    };
    let text = format!("{{\"format\":\"clrmap-capture\",\"version\":1,\"pid\":1}}\n{}{}{}", record("/dev/zero", 0x1000), record(fifo.to_str().unwrap(), 0x2000), record("/proc/self/mem", 0x3000));
    let capture = dir.join("odd.capture");
    std::fs::write(&capture, text).unwrap();
    let started = Instant::now();
    let (names, frames) = within(Duration::from_secs(20), move || {
        let sym = Symbolizer::open(&capture, Options::default()).unwrap();
        let names: Vec<Option<String>> = sym.store().bodies().iter().map(|b| b.name.clone()).collect();
        let frames: Vec<(Option<u32>, Option<u32>)> = [0x1004, 0x2004, 0x3004]
            .iter()
            .map(|&a| {
                let f = sym.symbolize(a, FrameKind::Leaf);
                (f.at.token, f.at.line)
            })
            .collect();
        (names, frames)
    });
    assert_eq!(names, [None, None, None]);
    assert_eq!(frames, [(Some(0x0600_0001), None); 3]);
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}

/// Run Frames.dll (or `Spawn.dll DOTNET Frames.dll`) under the profiler with the capture in a
/// folder whose name is not ASCII; return the capture's bytes.
fn profiled(rt: &support::Runtime, so: &Path, dir: &Path, args: &[&Path]) -> Vec<u8> {
    let capture = dir.join("run.capture");
    let o = Command::new(&rt.dotnet)
        .args(args)
        .env("COMPlus_TieredCompilation", "0")
        .env("CORECLR_ENABLE_PROFILING", "1")
        .env("CORECLR_PROFILER", CLSID)
        .env("CORECLR_PROFILER_PATH", so)
        .env("CLRMAP_PROFILER_OUTPUT", &capture)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}: {}", rt.version, String::from_utf8_lossy(&o.stderr));
    std::fs::read(capture).unwrap()
}

fn stage_frames(dir: &Path) -> PathBuf {
    for e in std::fs::read_dir(support::fixture("tests/fixtures/frames/debug-portable")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    dir.join("Frames.dll")
}

#[test]
#[ignore = "needs .NET"]
fn a_real_capture_cut_at_every_byte_of_its_last_records_keeps_the_rest() {
    let rts = runtimes("torn::a_real_capture_cut_at_every_byte");
    let so = profiler_path();
    for rt in &rts {
        // A folder named in Greek: module paths in the capture are multi-byte UTF-8.
        let dir = tmp(&format!("καταγραφή-{}", rt.version));
        let dll = stage_frames(&dir);
        let bytes = profiled(rt, &so, &dir, &[&dll]);
        let whole = read_capture(&bytes).unwrap();
        assert!(whole.warning.is_none() && whole.bodies.len() > 80, "{}: {} bodies", rt.version, whole.bodies.len());
        assert!(whole.bodies.iter().any(|b| b.module_path.contains("καταγραφή")));
        // From the start of the 4th-last record that names a module (its path has the Greek
        // letters) to the end of the file.
        let starts: Vec<usize> = std::iter::once(0).chain(bytes.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i + 1)).filter(|&i| i < bytes.len()).collect();
        let named: Vec<usize> = starts.iter().copied().filter(|&s| bytes[s..].split(|&b| b == b'\n').next().is_some_and(|l| String::from_utf8_lossy(l).contains("καταγραφή"))).collect();
        let from = named[named.len() - 4];
        // Each cut is read as the header line plus the tail from `from` to the cut (the records
        // before `from` are whole in every cut, and re-reading them thousands of times proves
        // nothing more).
        let header_end = starts[1];
        let tail_records = whole.bodies.len() + whole.ended.len() + whole.modules.len() - bytes[header_end..from].iter().filter(|&&b| b == b'\n').count();
        let mut multibyte_cuts = 0;
        for cut in from..=bytes.len() {
            let mut piece = bytes[..header_end].to_vec();
            piece.extend_from_slice(&bytes[from..cut]);
            let c = read_capture(&piece).unwrap_or_else(|e| panic!("{} cut {cut}: {e}", rt.version));
            let whole_lines = bytes[from..cut].iter().filter(|&&b| b == b'\n').count();
            let kept = c.bodies.len() + c.ended.len() + c.modules.len();
            // Every whole line is kept; the cut line only when what is left of it is still a
            // whole record (the cut fell just before its newline).
            assert!(kept == whole_lines || kept == whole_lines + 1, "{} cut {cut}: kept {kept} of {whole_lines} whole lines", rt.version);
            assert!(kept <= tail_records);
            assert_eq!(c.warning.is_some(), kept == whole_lines && cut > from && bytes[cut - 1] != b'\n', "{} cut {cut}", rt.version);
            // What is kept is what the whole capture holds, map and all.
            for b in &c.bodies {
                assert!(whole.bodies.contains(b), "{} cut {cut}: a body the whole capture does not have", rt.version);
            }
            multibyte_cuts += usize::from(std::str::from_utf8(&bytes[from..cut]).is_err());
        }
        println!("{}: {} cuts of the last 4 records, {multibyte_cuts} inside a UTF-8 character, all kept every whole record", rt.version, bytes.len() - from + 1);
        assert!(multibyte_cuts > 0, "no cut fell inside a multi-byte character");
    }
}

#[test]
#[ignore = "needs .NET"]
fn a_dotnet_child_process_appends_to_its_parents_capture() {
    let (rts, mcs) = support::runtimes_and_mcs("torn::a_dotnet_child_process_appends");
    let so = profiler_path();
    for rt in &rts {
        let dir = tmp(&format!("spawn-{}", rt.version));
        let spawn = dir.join("Spawn.dll");
        support::mcs_compile(&mcs, &spawn, &[], &[support::repo_root().join("tests/dotnet/spawn/Spawn.cs")]);
        std::fs::write(dir.join("Spawn.runtimeconfig.json"), rt.runtimeconfig()).unwrap();
        let frames = stage_frames(&dir);
        let bytes = profiled(rt, &so, &dir, &[&spawn, &rt.dotnet, &frames]);
        let c = read_capture(&bytes).unwrap();
        assert!(c.warning.is_none(), "{}: {:?}", rt.version, c.warning);
        assert_eq!(c.pids.len(), 2, "{}: one header per process", rt.version);
        let mut ended = c.ended.clone();
        ended.sort_unstable();
        let mut pids = c.pids.clone();
        pids.sort_unstable();
        assert_eq!(ended, pids, "{}: both processes shut down in order", rt.version);
        let pid_of = |module: &str| -> Vec<u32> {
            let mut v: Vec<u32> = c.bodies.iter().filter(|b| b.body.module.as_deref() == Some(module)).map(|b| b.pid).collect();
            v.dedup();
            v
        };
        let (parent, child) = (pid_of("Spawn.dll"), pid_of("Frames.dll"));
        assert_eq!((parent.len(), child.len()), (1, 1), "{}: {parent:?} {child:?}", rt.version);
        assert_eq!(parent[0], c.pids[0], "{}: the parent wrote first", rt.version);
        assert_ne!(parent, child);
        println!("{}: parent {} and child {} share one capture ({} bodies)", rt.version, parent[0], child[0], c.bodies.len());
    }
}

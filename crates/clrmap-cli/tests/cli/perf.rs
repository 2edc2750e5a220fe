//! Linux perf with source lines (issue 13), end to end on real perf and real runtimes: the live
//! route (`clrmap profile --perf` under `perf record -k 1 -g`), the offline route
//! (`clrmap perf jitdump`, new and enriching the runtime's own jitdump), and a killed app.
//! Every jitdump written is read back by an independent reader, `linux-perf-data`.
//!
//! Needs Linux perf (scripts/install-perf.sh), the runtimes (scripts/install-dotnet.sh) and the
//! profiler (`cargo build --workspace`): `#[ignore = "needs .NET"]`, run by scripts/test.sh, and a
//! missing tool fails them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clrmap::jitdump::build::{plan, Planned};
use clrmap::jitdump::LineEntry;
use clrmap::symbolizer::{Options, Symbolizer};
use linux_perf_data::jitdump::{JitDumpReader, JitDumpRecord};

use crate::support::*;

fn skip(test: &str, what: &str) {
    panic!("{test}: {what} is missing");
}

fn perf(test: &str) -> bool {
    let ok = Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        skip(test, "Linux perf (scripts/install-perf.sh)");
    }
    ok
}

fn dotnet(test: &str, version: &str) -> Option<PathBuf> {
    let home = std::env::var("CLRMAP_DOTNET_HOME").map(PathBuf::from).unwrap_or_else(|_| repo_root().join(".dotnet"));
    let p = match version {
        "8.0.4" => home.join("8.0/dnv/net/runtime/.net/dotnet"),
        _ => home.join("3.1/dotnetcore2/bin/dotnet"),
    };
    if p.is_file() {
        return Some(p);
    }
    skip(test, &format!("the {version} runtime (scripts/install-dotnet.sh)"));
    None
}

fn profiler() -> String {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    so.to_string_lossy().into_owned()
}

fn hot_dll() -> PathBuf {
    repo_root().join("tests/fixtures/perf/Hot.dll")
}

/// The line of Hot.cs carrying a marker comment.
fn marker_line(marker: &str) -> u32 {
    let src = std::fs::read_to_string(repo_root().join("tests/dotnet/perf/Hot.cs")).unwrap();
    src.lines().position(|l| l.contains(&format!("// {marker}"))).map(|i| i as u32 + 1).unwrap()
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run_ok(c: &mut Command) -> String {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{:?}: {}\n{}", c, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The pid in a capture's first header line.
fn capture_pid(cap: &Path) -> u32 {
    let text = std::fs::read_to_string(cap).unwrap();
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    header["pid"].as_u64().unwrap() as u32
}

/// A record as the independent reader sees it.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    address: u64,
    size: u64,
    name: String,
    lines: Vec<LineEntry>,
}

/// Read a jitdump with linux-perf-data: each code load with the debug info before it. Every
/// debug-info record must be for the code load that follows it.
fn read_independently(path: &Path) -> (u32, Vec<Seen>) {
    let mut reader = JitDumpReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let pid = reader.header().pid;
    let mut out = Vec::new();
    let mut pending: Option<(u64, Vec<LineEntry>)> = None;
    while let Some(raw) = reader.next_record().unwrap() {
        match raw.parse().unwrap() {
            JitDumpRecord::CodeDebugInfo(d) => {
                assert!(pending.is_none(), "two debug-info records in a row");
                let lines = d
                    .entries
                    .iter()
                    .map(|e| LineEntry { address: e.code_addr, line: e.line, column: e.column, file: String::from_utf8_lossy(&e.file_path.as_slice()).into_owned() })
                    .collect();
                pending = Some((d.code_addr, lines));
            }
            JitDumpRecord::CodeLoad(l) => {
                assert_eq!(l.pid, pid);
                assert_eq!(l.vma, l.code_addr);
                let lines = match pending.take() {
                    Some((addr, lines)) => {
                        assert_eq!(addr, l.code_addr, "debug info for another range");
                        lines
                    }
                    None => Vec::new(),
                };
                let name = String::from_utf8_lossy(&l.function_name.as_slice()).into_owned();
                out.push(Seen { address: l.code_addr, size: l.code_bytes.len() as u64, name, lines });
            }
            other => panic!("unexpected record {other:?}"),
        }
    }
    assert!(pending.is_none(), "debug info with no code load after it");
    (pid, out)
}

fn seen_of(p: &Planned) -> Seen {
    Seen { address: p.address, size: p.code_size, name: p.name.clone(), lines: p.lines.clone() }
}

/// perf report's lines: (percent, symbol, srcline).
fn report(data: &Path) -> Vec<(f64, String, String)> {
    let text = run_ok(Command::new("perf").args(["report", "--no-children", "--sort", "sym,srcline", "--stdio", "-g", "none", "-i"]).arg(data));
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let (pct, rest) = l.split_once('%')?;
            let pct: f64 = pct.trim().parse().ok()?;
            let rest = rest.trim().strip_prefix("[.]")?.trim();
            let (sym, srcline) = rest.rsplit_once(char::is_whitespace)?;
            Some((pct, sym.trim().to_owned(), srcline.to_owned()))
        })
        .collect()
}

/// The acceptance on perf's own output: the jitted hot loop's line and the ReadyToRun framework
/// method are the top user-space entries, and the framework call's caller line is in the chains.
/// Append `profile [--perf=DIR] --profiler P [-o CAP] -- DOTNET Hot.dll SECONDS` to `cmd`: the
/// one way these tests run the hot program under the clrmap profiler.
fn profile_hot<'c>(cmd: &'c mut Command, perf_dir: Option<&Path>, cap: Option<&Path>, dn: &Path, seconds: &str) -> &'c mut Command {
    cmd.arg("profile");
    if let Some(dir) = perf_dir {
        cmd.arg(format!("--perf={}", dir.display()));
    }
    cmd.args(["--profiler", &profiler()]);
    if let Some(cap) = cap {
        cmd.arg("-o").arg(cap);
    }
    cmd.arg("--").arg(dn).arg(hot_dll()).arg(seconds)
}

/// `perf record -k 1 -g -e cpu-clock -o DATA -- clrmap profile ...` for 3 seconds of the hot
/// program (see `profile_hot`).
fn perf_record_profile(data: &Path, perf_dir: Option<&Path>, cap: Option<&Path>, dn: &Path) -> Command {
    let mut cmd = Command::new("perf");
    cmd.args(["record", "-k", "1", "-g", "-e", "cpu-clock", "-o"]).arg(data).arg("--").arg(env!("CARGO_BIN_EXE_clrmap"));
    profile_hot(&mut cmd, perf_dir, cap, dn, "3");
    cmd
}

fn assert_perf_shows_lines(data: &Path, version: &str) {
    let own = format!("Hot.cs:{}", marker_line("HOT-OWN"));
    let framework_call = format!("Hot.cs:{}", marker_line("HOT-FRAMEWORK"));
    let rows = report(data);
    let top: Vec<&(f64, String, String)> = rows.iter().take(4).collect();
    eprintln!("{version}: perf report top entries: {top:?}");
    assert!(top.iter().any(|(p, s, l)| *p >= 10.0 && s == "Hot::OwnLoop" && *l == own), "{version}: no Hot::OwnLoop at {own} in {top:?}");
    assert!(top.iter().any(|(p, s, _)| *p >= 10.0 && s == "System.Marvin::ComputeHash32"), "{version}: no System.Marvin::ComputeHash32 in {top:?}");
    // Two frames (the sample and its caller): srcline for every frame of every chain is slow.
    let script = run_ok(Command::new("perf").args(["script", "--max-stack=2", "--no-inline", "-F", "ip,sym,srcline", "-i"]).arg(data));
    let lines: Vec<&str> = script.lines().map(str::trim).collect();
    let called_from_loop = lines.windows(3).any(|w| w[0].ends_with("System.Marvin::ComputeHash32") && w[1].ends_with("Hot::FrameworkLoop") && w[2] == framework_call);
    assert!(called_from_loop, "{version}: perf script shows no ComputeHash32 called from Hot::FrameworkLoop at {framework_call}");
}

fn live_route(version: &str) {
    let test = "perf_live_route";
    if !perf(test) {
        return;
    }
    let Some(dn) = dotnet(test, version) else { return };
    let dir = fresh_dir(&format!("perf-live-{version}"));
    let cap = dir.join("app.cap");
    let data = dir.join("perf.data");
    run_ok(&mut perf_record_profile(&data, Some(&dir), Some(&cap), &dn));
    let pid = capture_pid(&cap);
    let dump = dir.join(format!("jit-{pid}.dump"));
    let jit_data = dir.join("perf.jit.data");
    run_ok(Command::new("perf").args(["inject", "--jit", "-i"]).arg(&data).arg("-o").arg(&jit_data));
    assert_perf_shows_lines(&jit_data, version);

    // The independent reader agrees with what clrmap meant to write: for every body of the
    // capture, the same range, name and line entries (offline equals live).
    let sym = Symbolizer::open(&cap, Options::default()).unwrap();
    let planned = plan(&sym, Some(pid));
    let (dump_pid, live) = read_independently(&dump);
    assert_eq!(dump_pid, pid);
    let mut live_sorted: Vec<&Seen> = live.iter().collect();
    live_sorted.sort_by_key(|s| s.address);
    let expected: Vec<Seen> = planned.iter().map(seen_of).collect();
    assert_eq!(live_sorted.len(), expected.len());
    for (l, e) in live_sorted.iter().zip(&expected) {
        assert_eq!(*l, e);
    }
    let own = planned.iter().find(|p| p.name == "Hot::OwnLoop").unwrap();
    assert!(own.lines.iter().any(|e| e.line == marker_line("HOT-OWN") && e.file == "/_/src/Hot.cs"), "{own:?}");
    assert!(planned.iter().any(|p| p.name == "System.Marvin::ComputeHash32" && p.lines.is_empty()));
    // Live code loads carry the process's code bytes: not all zero.
    let code_of = |path: &Path| {
        let mut reader = JitDumpReader::new(std::fs::File::open(path).unwrap()).unwrap();
        let mut code = HashMap::new();
        while let Some(raw) = reader.next_record().unwrap() {
            if let JitDumpRecord::CodeLoad(l) = raw.parse().unwrap() {
                code.insert(l.code_addr, l.code_bytes.as_slice().to_vec());
            }
        }
        code
    };
    let live_code = code_of(&dump);
    assert_eq!(live_code.values().filter(|c| c.iter().any(|&b| b != 0)).count(), live.len());

    // Offline from the capture: the same ranges, names and lines; ReadyToRun code read from
    // its image, byte for byte what the process ran; jitted code zero-filled.
    let offline = dir.join("offline.dump");
    run_ok(Command::new(env!("CARGO_BIN_EXE_clrmap")).args(["perf", "jitdump"]).arg(&cap).arg("-o").arg(&offline));
    let (off_pid, off) = read_independently(&offline);
    assert_eq!(off_pid, pid);
    assert_eq!(off, expected);
    let r2r: std::collections::HashSet<u64> = sym.store().bodies().iter().filter(|b| b.rva.is_some()).filter_map(|b| b.start).collect();
    let mut from_image = 0;
    for (address, code) in code_of(&offline) {
        if r2r.contains(&address) {
            assert_eq!(Some(&code), live_code.get(&address), "{version}: R2R code at 0x{address:X} differs from the process's");
            from_image += 1;
        } else {
            assert!(code.iter().all(|&b| b == 0), "{version}: jitted code offline is zeros");
        }
    }
    assert!(from_image >= 10, "{version}: {from_image} R2R bodies");
    println!("{version}: offline jitdump: {from_image} ReadyToRun bodies with code from their images, equal to the process's");
    // Enriching the live file changes nothing: it already has every line and body.
    let again = dir.join("again.dump");
    run_ok(Command::new(env!("CARGO_BIN_EXE_clrmap")).args(["perf", "jitdump"]).arg(&cap).arg("--enrich").arg(&dump).arg("-o").arg(&again));
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&dump).unwrap());
    // The perf maps, live and offline, hold the same symbols, R2R methods included.
    let map = dir.join("offline.map");
    run_ok(Command::new(env!("CARGO_BIN_EXE_clrmap")).args(["perf", "map"]).arg(&cap).arg("-o").arg(&map));
    let sorted = |p: &Path| {
        let mut v: Vec<String> = std::fs::read_to_string(p).unwrap().lines().map(str::to_owned).collect();
        v.sort();
        v
    };
    let live_map = sorted(&dir.join(format!("perf-{pid}.map")));
    assert_eq!(live_map, sorted(&map));
    assert!(live_map.iter().any(|l| l.ends_with(" System.Marvin::ComputeHash32")));
}

#[test]
#[ignore = "needs .NET"]
fn live_route_on_real_perf_net80() {
    live_route("8.0.4");
}

#[test]
#[ignore = "needs .NET"]
fn live_route_on_real_perf_netcore31() {
    live_route("3.1.23");
}

/// The runtime's own jitdump (DOTNET_PerfMapEnabled=1) has no lines and no ReadyToRun method;
/// enriched from a capture of the same run, perf shows both.
#[test]
#[ignore = "needs .NET"]
fn offline_enrichment_of_the_runtime_jitdump_on_real_perf() {
    let test = "offline_enrichment_of_the_runtime_jitdump";
    if !perf(test) {
        return;
    }
    let Some(dn) = dotnet(test, "8.0.4") else { return };
    let dir = fresh_dir("perf-enrich-8.0.4");
    let cap = dir.join("app.cap");
    let data = dir.join("perf.data");
    run_ok(perf_record_profile(&data, None, Some(&cap), &dn).env("DOTNET_PerfMapEnabled", "1").env("DOTNET_PerfMapJitDumpPath", &dir));
    let pid = capture_pid(&cap);
    let dump = dir.join(format!("jit-{pid}.dump"));
    let before = std::fs::read(&dump).unwrap();
    let (_, runtime_records) = read_independently(&dump);
    assert!(runtime_records.iter().all(|r| r.lines.is_empty()), "the runtime wrote line records");
    let out = run_ok(Command::new(env!("CARGO_BIN_EXE_clrmap")).args(["perf", "jitdump"]).arg(&cap).arg("--enrich").arg(&dump));
    assert!(out.contains("enriched"), "{out}");
    let (_, enriched) = read_independently(&dump);
    // The runtime's records are all kept, in order, byte for byte.
    let parsed = clrmap::jitdump::read::parse(&std::fs::read(&dump).unwrap()).unwrap();
    let old = clrmap::jitdump::read::parse(&before).unwrap();
    let after = std::fs::read(&dump).unwrap();
    let kept: Vec<&[u8]> = parsed.records.iter().filter(|r| r.load.as_ref().is_some_and(|l| l.tid != 0)).map(|r| &after[r.range.clone()]).collect();
    let original: Vec<&[u8]> = old.records.iter().map(|r| &before[r.range.clone()]).collect();
    assert_eq!(kept, original);
    // .NET 8 logs ReadyToRun methods itself ("...::ComputeHash32(...)[PreJIT]"), so the
    // method is there under the runtime's name; a runtime that does not gets clrmap's record.
    assert!(enriched.iter().any(|r| r.name.contains("System.Marvin::ComputeHash32")));
    assert!(enriched.iter().any(|r| r.lines.iter().any(|e| e.line == marker_line("HOT-OWN"))));
    let jit_data = dir.join("perf.jit.data");
    run_ok(Command::new("perf").args(["inject", "--jit", "-i"]).arg(&data).arg("-o").arg(&jit_data));
    let rows = report(&jit_data);
    let own = format!("Hot.cs:{}", marker_line("HOT-OWN"));
    // The runtime names methods its own way ("[OptimizedTier1]" etc.): match the method.
    assert!(rows.iter().take(4).any(|(p, s, l)| *p >= 10.0 && s.contains("OwnLoop") && *l == own), "{:?}", &rows[..rows.len().min(6)]);
    assert!(rows.iter().take(4).any(|(p, s, _)| *p >= 10.0 && s.contains("System.Marvin::ComputeHash32")), "{:?}", &rows[..rows.len().min(6)]);
}

/// An app killed mid-run leaves a jitdump that is valid up to its last whole record.
#[test]
#[ignore = "needs .NET"]
fn a_killed_app_leaves_a_valid_jitdump() {
    let test = "a_killed_app_leaves_a_valid_jitdump";
    let Some(dn) = dotnet(test, "8.0.4") else { return };
    let dir = fresh_dir("perf-killed");
    let cap = dir.join("app.cap");
    let mut child = profile_hot(&mut Command::new(env!("CARGO_BIN_EXE_clrmap")), Some(&dir), Some(&cap), &dn, "60")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the hot loop is jitted, then kill the app (not clrmap) mid-run.
    let start = std::time::Instant::now();
    let pid = loop {
        assert!(start.elapsed().as_secs() < 30, "the app never jitted Hot::OwnLoop");
        std::thread::sleep(std::time::Duration::from_millis(200));
        let Ok(text) = std::fs::read_to_string(&cap) else { continue };
        if text.contains("\"kind\":\"jit\"") && std::fs::read_dir(&dir).unwrap().count() >= 3 {
            let pid = capture_pid(&cap);
            let map = std::fs::read_to_string(dir.join(format!("perf-{pid}.map"))).unwrap_or_default();
            if map.contains("Hot::OwnLoop") {
                break pid;
            }
        }
    };
    run_ok(Command::new("kill").args(["-KILL", &pid.to_string()]));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(137));
    let dump = dir.join(format!("jit-{pid}.dump"));
    let bytes = std::fs::read(&dump).unwrap();
    let parsed = clrmap::jitdump::read::parse(&bytes).unwrap();
    assert!(parsed.warning.is_none(), "{:?}", parsed.warning);
    let (_, seen) = read_independently(&dump);
    assert!(seen.iter().any(|s| s.name == "Hot::OwnLoop" && !s.lines.is_empty()));
    // A cut anywhere leaves every whole record readable by both readers.
    for cut in [bytes.len() - 1, bytes.len() - 7, bytes.len() / 2, 41] {
        let torn = dir.join("torn.dump");
        std::fs::write(&torn, &bytes[..cut]).unwrap();
        let p = clrmap::jitdump::read::parse(&bytes[..cut]).unwrap();
        assert!(p.records.last().is_none_or(|r| r.range.end <= cut));
        let mut reader = JitDumpReader::new(std::fs::File::open(&torn).unwrap()).unwrap();
        let mut n = 0;
        while let Some(raw) = reader.next_record().unwrap() {
            raw.parse().unwrap();
            n += 1;
        }
        assert_eq!(n, p.records.len());
    }
}

/// `--perf` without a capture: only the perf files, maps asked for only where a PDB makes lines of
/// them. perf's own report shows the same lines and the framework method by name.
#[test]
#[ignore = "needs .NET"]
fn perf_only_live_route_without_a_capture() {
    let test = "perf_only_live_route_without_a_capture";
    if !perf(test) {
        return;
    }
    let Some(dn) = dotnet(test, "8.0.4") else { return };
    let dir = fresh_dir("perf-only-8.0.4");
    let data = dir.join("perf.data");
    run_ok(&mut perf_record_profile(&data, Some(&dir), None, &dn));
    let dumps: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("jit-")).collect();
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    assert!(!dir.join("app.cap").exists());
    let (_, records) = read_independently(&dumps[0]);
    let own = records.iter().find(|r| r.name == "Hot::OwnLoop").expect("Hot::OwnLoop in the jitdump");
    assert!(own.lines.iter().any(|e| e.line == marker_line("HOT-OWN")), "{own:?}");
    assert!(records.iter().any(|r| r.name == "System.Marvin::ComputeHash32" && r.lines.is_empty()));
    let jit_data = dir.join("perf.jit.data");
    run_ok(Command::new("perf").args(["inject", "--jit", "-i"]).arg(&data).arg("-o").arg(&jit_data));
    assert_perf_shows_lines(&jit_data, "8.0.4 perf only");
}

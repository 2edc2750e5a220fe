//! Linux perf with source lines, end to end on real perf and real runtimes: the live
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
    if let Some(rt) = runtime_if(version) {
        return Some(rt.dotnet);
    }
    skip(test, &format!("the {version} runtime (scripts/install-dotnet.sh)"));
    None
}

fn profiler() -> String {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    so.to_string_lossy().into_owned()
}

/// The symbols the perf routes give Hot.cs's loops: full names with the parameter types
/// (docs/output.md#il-to-native-maps: `Owner::Method(P1,...)`, ECMA-335 type names), as the source declares them:
/// `static long OwnLoop(long n)`, `static int FrameworkLoop(string s, int n)`.
const OWN_LOOP: &str = "Hot::OwnLoop(int64)";
const FRAMEWORK_LOOP: &str = "Hot::FrameworkLoop(string,int32)";
/// The framework's hash: `ComputeHash32(ref byte data, uint count, uint p0, uint p1)`
/// (System.Private.CoreLib, Marvin.cs, on 3.1 and 8.0).
const COMPUTE_HASH32: &str = "System.Marvin::ComputeHash32(uint8&,uint32,uint32,uint32)";

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
                let lines = d.entries.iter().map(|e| LineEntry { address: e.code_addr, line: e.line, column: e.column, file: String::from_utf8_lossy(&e.file_path.as_slice()).into_owned() }).collect();
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
    // As docs/perf.md says to run it: with W^X on (8.0's default), a sample that falls in the
    // runtime's `memfd:doublemapper` stubs kills perf 6.1's srcline report ("addr2line
    // /memfd:doublemapper (deleted): could not read first record", then SIGPIPE, status 141;
    // seen in CI on 0.02% of one run's samples). 3.1 has no W^X and ignores it.
    cmd.env("DOTNET_EnableWriteXorExecute", "0");
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
    assert!(top.iter().any(|(p, s, l)| *p >= 10.0 && s == OWN_LOOP && *l == own), "{version}: no {OWN_LOOP} at {own} in {top:?}");
    assert!(top.iter().any(|(p, s, _)| *p >= 10.0 && s == COMPUTE_HASH32), "{version}: no {COMPUTE_HASH32} in {top:?}");
    // Two frames (the sample and its caller): srcline for every frame of every chain is slow.
    let script = run_ok(Command::new("perf").args(["script", "--max-stack=2", "--no-inline", "-F", "ip,sym,srcline", "-i"]).arg(data));
    let lines: Vec<&str> = script.lines().map(str::trim).collect();
    let called_from_loop = lines.windows(3).any(|w| w[0].ends_with(COMPUTE_HASH32) && w[1].ends_with(FRAMEWORK_LOOP) && w[2] == framework_call);
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
    let (dump_pid, all) = read_independently(&dump);
    assert_eq!(dump_pid, pid);
    // The runtime's stubs, named as its own perf map names them (8.0 and later), are the live
    // route's alone: no capture records them.
    let (stubs, live): (Vec<Seen>, Vec<Seen>) = all.into_iter().partition(|s| is_stub(&s.name));
    assert_stubs_named_as_the_runtime_does(version, &dn, &stubs, &live);
    let mut live_sorted: Vec<&Seen> = live.iter().collect();
    live_sorted.sort_by_key(|s| s.address);
    let expected: Vec<Seen> = planned.iter().map(seen_of).collect();
    assert_eq!(live_sorted.len(), expected.len());
    for (l, e) in live_sorted.iter().zip(&expected) {
        assert_eq!(*l, e);
    }
    let own = planned.iter().find(|p| p.name == OWN_LOOP).unwrap();
    assert!(own.lines.iter().any(|e| e.line == marker_line("HOT-OWN") && e.file == "/_/src/Hot.cs"), "{own:?}");
    assert!(planned.iter().any(|p| p.name == COMPUTE_HASH32 && p.lines.is_empty()));
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
    let mut live_map = sorted(&dir.join(format!("perf-{pid}.map")));
    let stub_lines = live_map.len();
    live_map.retain(|l| !l.splitn(3, ' ').nth(2).is_some_and(is_stub));
    assert_eq!(stub_lines - live_map.len(), stubs.len(), "{version}: the perf map's stub lines are the jitdump's");
    assert_eq!(live_map, sorted(&map));
    assert!(live_map.iter().any(|l| l.ends_with(&format!(" {COMPUTE_HASH32}"))));
}

/// A stub's name in the runtime's perf map: `stub<N> KIND<OWNER>` (perfmap.cpp, LogStubs).
fn is_stub(name: &str) -> bool {
    name.starts_with("stub<") || name.starts_with("stub ")
}

/// `stub<N> KIND<OWNER>` → `KIND<OWNER>`.
fn stub_kind(name: &str) -> &str {
    name.split_once("> ").map_or(name, |(_, k)| k)
}

/// On 8.0 and later the live jitdump names the runtime's stubs (precode blocks, virtual stub
/// dispatch) with the kinds the runtime's own perf map gives in a run of its own
/// (DOTNET_PerfMapEnabled=3 into a directory of this test's); none overlaps a method's code. 3.1
/// has none (it never reads DOTNET_ settings, and its COMPlus_ perf map would be written to /tmp).
fn assert_stubs_named_as_the_runtime_does(version: &str, dn: &Path, stubs: &[Seen], methods: &[Seen]) {
    if version == "3.1" {
        assert!(stubs.is_empty(), "{version}: stubs named: {:?}", &stubs[..stubs.len().min(3)]);
        return;
    }
    let own = fresh_dir("perf-runtime-map");
    let o = Command::new(dn).arg(hot_dll()).arg("0.1").env("DOTNET_PerfMapEnabled", "3").env("DOTNET_PerfMapJitDumpPath", &own).output().unwrap();
    assert!(o.status.success());
    let mut runtime_kinds = std::collections::HashSet::new();
    for e in std::fs::read_dir(&own).unwrap() {
        let text = String::from_utf8_lossy(&std::fs::read(e.unwrap().path()).unwrap()).into_owned();
        for l in text.lines() {
            if let Some(name) = l.splitn(3, ' ').nth(2).filter(|n| is_stub(n)) {
                runtime_kinds.insert(stub_kind(name).to_owned());
            }
        }
    }
    // 8.0's and 10.0's runtimes log hundreds of stubs in this run; 9.0.20's perf map logs far fewer
    // (25 measured), all of them named here.
    let least = if version == "9.0" { 10 } else { 100 };
    assert!(stubs.len() >= least, "{version}: {} stubs", stubs.len());
    let kinds: std::collections::HashSet<&str> = stubs.iter().map(|s| stub_kind(&s.name)).collect();
    if version == "8.0" {
        assert!(kinds.contains("AllocateTemporaryEntryPoints<PRECODE_STUB>"), "{kinds:?}");
    }
    println!("{version}: {} stubs named, of the kinds {kinds:?}", stubs.len());
    for k in &kinds {
        assert!(runtime_kinds.contains(*k), "{version}: stub kind {k} is not the runtime's ({runtime_kinds:?})");
    }
    for s in stubs {
        assert!(s.size > 0 && s.lines.is_empty());
        assert!(!methods.iter().any(|m| s.address < m.address + m.size && m.address < s.address + s.size), "{version}: stub {s:?} overlaps a method");
    }
}

#[test]
#[ignore = "needs .NET"]
fn live_route_on_real_perf_net80() {
    live_route("8.0");
}

#[test]
#[ignore = "needs .NET"]
fn live_route_on_real_perf_net90() {
    live_route("9.0");
}

#[test]
#[ignore = "needs .NET"]
fn live_route_on_real_perf_net100() {
    live_route("10.0");
}

#[test]
#[ignore = "needs .NET"]
fn live_route_on_real_perf_netcore31() {
    live_route("3.1");
}

/// On 10.0 the runtime's own jitdump (DOTNET_PerfMapEnabled=1) misses the program's methods: in a
/// run of Hot.dll its jitdump holds no code load of Hot's methods, though its perf map of the same
/// run names all three (measured on 10.0.12: a 33 KB jitdump beside 8.0's 647 KB; the runtime's
/// issue is dotnet/runtime#132935). clrmap's jitdump of a run on the same runtime has them, with
/// Hot.cs's lines, read back by the `linux-perf-data` crate. (perf report's lines from clrmap's
/// jitdump on 10.0: `live_route_on_real_perf_net100`.)
#[test]
#[ignore = "needs .NET"]
fn on_10_the_runtimes_jitdump_misses_the_programs_methods_and_clrmaps_has_them() {
    let dn = dotnet("on_10_the_runtimes_jitdump", "10.0").unwrap();
    let dir = fresh_dir("perf-runtime-jitdump-10");
    let o = Command::new(&dn).arg(hot_dll()).arg("1").env("DOTNET_PerfMapEnabled", "1").env("DOTNET_PerfMapJitDumpPath", &dir).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let find = |prefix: &str| -> PathBuf {
        let e = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix));
        e.unwrap_or_else(|| panic!("no {prefix}* written in {}", dir.display()))
    };
    let map = std::fs::read_to_string(find("perf-")).unwrap();
    for m in ["Hot::Main", "Hot::OwnLoop", "Hot::FrameworkLoop"] {
        assert!(map.lines().any(|l| l.contains(m)), "10.0's perf map lacks {m}:\n{map}");
    }
    let (_, runtime) = read_independently(&find("jit-"));
    assert!(!runtime.iter().any(|r| r.name.contains("Hot::")), "10.0's own jitdump now names Hot's methods: {:?}", runtime.iter().filter(|r| r.name.contains("Hot::")).collect::<Vec<_>>());
    // clrmap's jitdump, on the same runtime.
    let ours = fresh_dir("perf-clrmap-jitdump-10");
    let cap = ours.join("app.cap");
    run_ok(profile_hot(&mut Command::new(env!("CARGO_BIN_EXE_clrmap")), Some(&ours), Some(&cap), &dn, "1"));
    let pid = capture_pid(&cap);
    let (_, seen) = read_independently(&ours.join(format!("jit-{pid}.dump")));
    let own = seen.iter().find(|r| r.name == OWN_LOOP).unwrap_or_else(|| panic!("clrmap's jitdump lacks {OWN_LOOP}"));
    assert!(own.lines.iter().any(|e| e.line == marker_line("HOT-OWN") && e.file == "/_/src/Hot.cs"), "{own:?}");
    println!("10.0: the runtime's jitdump has {} records, none of Hot's; clrmap's has {}", runtime.len(), seen.len());
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
    let Some(dn) = dotnet(test, "8.0") else { return };
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
    let Some(dn) = dotnet(test, "8.0") else { return };
    let dir = fresh_dir("perf-killed");
    let cap = dir.join("app.cap");
    let mut child = profile_hot(&mut Command::new(env!("CARGO_BIN_EXE_clrmap")), Some(&dir), Some(&cap), &dn, "60").stdout(std::process::Stdio::null()).spawn().unwrap();
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
    assert!(seen.iter().any(|s| s.name == OWN_LOOP && !s.lines.is_empty()));
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
    let Some(dn) = dotnet(test, "8.0") else { return };
    let dir = fresh_dir("perf-only-8.0.4");
    let data = dir.join("perf.data");
    run_ok(&mut perf_record_profile(&data, Some(&dir), None, &dn));
    let dumps: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("jit-")).collect();
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    assert!(!dir.join("app.cap").exists());
    let (_, records) = read_independently(&dumps[0]);
    let own = records.iter().find(|r| r.name == OWN_LOOP).expect("OwnLoop in the jitdump");
    assert!(own.lines.iter().any(|e| e.line == marker_line("HOT-OWN")), "{own:?}");
    assert!(records.iter().any(|r| r.name == COMPUTE_HASH32 && r.lines.is_empty()));
    let jit_data = dir.join("perf.jit.data");
    run_ok(Command::new("perf").args(["inject", "--jit", "-i"]).arg(&data).arg("-o").arg(&jit_data));
    assert_perf_shows_lines(&jit_data, "8.0.4 perf only");
}

/// The stub names' private directory is gone after the run, and `--no-stub-names` leaves the
/// runtime's stubs out (8.0.4); `--no-stub-names` without `--perf` is a usage error.
#[test]
#[ignore = "needs .NET"]
fn stub_names_come_and_go_with_the_run() {
    let Some(dn) = dotnet("stub_names_come_and_go_with_the_run", "8.0") else { return };
    for named in [true, false] {
        let dir = fresh_dir(&format!("perf-stubs-{named}"));
        let mut c = Command::new(env!("CARGO_BIN_EXE_clrmap"));
        c.arg("profile").arg(format!("--perf={}", dir.display())).args(["--profiler", &profiler()]);
        if !named {
            c.arg("--no-stub-names");
        }
        run_ok(c.arg("--").arg(&dn).arg(hot_dll()).arg("0.2"));
        let names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert!(names.iter().all(|n| !n.starts_with(".clrmap-runtime-map")), "{names:?}");
        let dump = names.iter().find(|n| n.starts_with("jit-")).unwrap();
        let (_, records) = read_independently(&dir.join(dump));
        let stubs = records.iter().filter(|r| is_stub(&r.name)).count();
        assert_eq!(stubs > 100, named, "{stubs} stubs");
        assert!(records.iter().any(|r| r.name == OWN_LOOP));
    }
    let o = clrmap(&["profile", "--no-stub-names", "-o", "/dev/null", "--", "true"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
}

// ---- Inlined code: tests/dotnet/perfinline, its lines by the profile rule.

/// The line of a tests/dotnet/perfinline file carrying a marker comment.
fn inline_marker(file: &str, marker: &str) -> u32 {
    let src = std::fs::read_to_string(repo_root().join("tests/dotnet/perfinline").join(file)).unwrap();
    src.lines().position(|l| l.contains(&format!("// {marker}"))).map(|i| i as u32 + 1).unwrap()
}

/// PerfInline.dll (PerfInline.cs and Work.cs, one assembly) with its portable PDB, built by
/// Roslyn csc (optimized, Release) against the 3.1.23 framework, rolled forward on 8.0.4, with
/// tiering on (the runtime's default); once per test process.
fn perfinline_dll() -> &'static PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let csc = dotnet_file("roslyn/csc");
        let corelib = corelib("3.1");
        let fw = Path::new(&corelib).parent().unwrap().to_path_buf();
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("perfinline-build-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let src = repo_root().join("tests/dotnet/perfinline");
        let mut c = Command::new(&csc);
        c.current_dir(&src).args(["-nologo", "-noconfig", "-nostdlib", "-langversion:7.3", "-deterministic", "-optimize+", "-debug:portable", "-target:exe"]);
        c.arg(format!("-pathmap:{}/=/_/src/", src.display()));
        for a in ["System.Private.CoreLib", "System.Runtime", "System.Console", "System.Collections", "System.Runtime.Extensions"] {
            c.arg(format!("-r:{}", fw.join(format!("{a}.dll")).display()));
        }
        c.arg(format!("-out:{}", out.join("PerfInline.dll").display())).args(["PerfInline.cs", "Work.cs"]);
        run_ok(&mut c);
        let config = r#"{ "runtimeOptions": { "tfm": "netcoreapp3.1", "rollForward": "LatestMajor",
  "framework": { "name": "Microsoft.NETCore.App", "version": "3.1" },
  "configProperties": { "System.Globalization.Invariant": true } } }"#;
        std::fs::write(out.join("PerfInline.runtimeconfig.json"), config).unwrap();
        assert!(out.join("PerfInline.pdb").is_file());
        out.join("PerfInline.dll")
    })
}

/// One method's samples: (its percent of all, percent by srcline).
type Samples = (f64, HashMap<String, f64>);

/// perf report's samples of one method (by its symbol's prefix), by srcline.
fn samples_of(rows: &[(f64, String, String)], symbol_prefix: &str) -> Samples {
    let mut by_line: HashMap<String, f64> = HashMap::new();
    let mut total = 0.0;
    for (pct, _, line) in rows.iter().filter(|(_, s, _)| s.starts_with(symbol_prefix)) {
        *by_line.entry(line.clone()).or_default() += pct;
        total += pct;
    }
    (total, by_line)
}

/// PerfInline.dll for 3 seconds under `perf record -k 1 -g -e cpu-clock -- clrmap profile --perf`
/// (tiering on, W^X off as docs/perf.md says), then `perf inject --jit` and `perf report --sort
/// sym,srcline`: InlinedLoop's and FrameworkLoop's samples by line, and the run's directory.
fn perfinline_run(version: &str, inlines: bool) -> Option<(PathBuf, Samples, Samples)> {
    let test = "perf_inlined_code";
    if !perf(test) {
        return None;
    }
    let dn = dotnet(test, version)?;
    let dir = fresh_dir(&format!("perfinline-{version}-{}", if inlines { "trees" } else { "no-inlines" }));
    let data = dir.join("perf.data");
    let mut cmd = Command::new("perf");
    cmd.env("DOTNET_EnableWriteXorExecute", "0").env_remove("DOTNET_TieredCompilation").env_remove("DOTNET_TC_QuickJitForLoops");
    cmd.args(["record", "-k", "1", "-g", "-e", "cpu-clock", "-o"]).arg(&data).arg("--").arg(env!("CARGO_BIN_EXE_clrmap"));
    cmd.arg("profile").arg(format!("--perf={}", dir.display())).args(["--profiler", &profiler()]);
    if !inlines {
        cmd.arg("--no-inlines");
    }
    cmd.arg("-o").arg(dir.join("app.cap")).arg("--").arg(&dn).arg(perfinline_dll()).arg("3");
    run_ok(&mut cmd);
    let jit_data = dir.join("perf.jit.data");
    run_ok(Command::new("perf").args(["inject", "--jit", "-i"]).arg(&data).arg("-o").arg(&jit_data));
    let rows = report(&jit_data);
    let own = samples_of(&rows, "PerfInline::InlinedLoop(");
    let framework = samples_of(&rows, "PerfInline::FrameworkLoop(");
    eprintln!("{version} (trees {inlines}): InlinedLoop {own:?}; FrameworkLoop {framework:?}");
    assert!(own.0 >= 20.0 && framework.0 >= 5.0, "{version}: the loops have too few samples: {rows:?}");
    Some((dir, own, framework))
}

/// The share (0..1) of a method's samples on lines `lines` of `file` (perf's srcline `file:N`).
fn share(samples: &Samples, file: &str, lines: std::ops::RangeInclusive<u32>) -> f64 {
    let on: f64 = samples.1.iter().filter(|(l, _)| l.split_once(':').is_some_and(|(f, n)| f == file && n.parse().is_ok_and(|n: u32| lines.contains(&n)))).map(|(_, p)| p).sum();
    on / samples.0
}

/// Both loops' common claim, with or without trees: no loop's samples sit on its method's first
/// line, nor on line 1; code the JIT made up itself (NO_MAPPING) that no tree claims is line 0.
/// With trees, FrameworkLoop's inlined framework code (no PDB) is mostly at its calling line;
/// without, the NO_MAPPING part of it shows as line 0 (the stack-trace rule, which perf used
/// before, put it on the first line, FW-FIRST).
fn assert_framework_and_first_lines(version: &str, trees: bool, own: &Samples, framework: &Samples) {
    let call = inline_marker("PerfInline.cs", "FW-CALL");
    let first = inline_marker("PerfInline.cs", "FW-FIRST");
    if trees {
        assert!(share(framework, "PerfInline.cs", call..=call) > 0.5, "{version}: FrameworkLoop's samples are not mostly at its call line {call}: {framework:?}");
    } else {
        assert!(share(framework, "PerfInline.cs", 0..=0) > 0.05, "{version}: FrameworkLoop's NO_MAPPING code is not at line 0: {framework:?}");
    }
    assert!(share(framework, "PerfInline.cs", first..=first) < 0.05, "{version}: FrameworkLoop's samples at its first line {first}: {framework:?}");
    let own_first = inline_marker("PerfInline.cs", "OWN-FIRST");
    assert!(share(own, "PerfInline.cs", own_first..=own_first) < 0.05, "{version}: InlinedLoop's samples at its first line {own_first}: {own:?}");
    assert!(share(own, "PerfInline.cs", 1..=1) + share(framework, "PerfInline.cs", 1..=1) == 0.0);
}

/// Perf end to end, 8.0.4, tiering on, trees on: InlinedLoop's work,
/// Work.Mix inlined from Work.cs, has most of its samples on Mix's own lines; FrameworkLoop's,
/// inlined framework code, on the calling line; neither on its method's first line. Without trees (--no-inlines) the same run puts
/// Mix's samples on the call line instead: the claim depends on the trees, and the test would
/// fail without them. The live jitdump equals `plan()` of the capture (offline equals live),
/// inlinee lines included.
#[test]
#[ignore = "needs .NET"]
fn perf_puts_inlined_code_on_its_own_lines_net80() {
    let Some((dir, own, framework)) = perfinline_run("8.0", true) else { return };
    let mix = inline_marker("Work.cs", "MIX-FIRST")..=inline_marker("Work.cs", "MIX-LAST");
    assert!(share(&own, "Work.cs", mix.clone()) > 0.5, "8.0.4: InlinedLoop's samples are not mostly on Work.Mix's lines {mix:?}: {own:?}");
    assert_framework_and_first_lines("8.0", true, &own, &framework);

    // Offline equals live, trees included: the capture's trees give the same line entries.
    let cap = dir.join("app.cap");
    let pid = capture_pid(&cap);
    let sym = Symbolizer::open(&cap, Options::default()).unwrap();
    let planned = plan(&sym, Some(pid));
    let (_, mut live) = read_independently(&dir.join(format!("jit-{pid}.dump")));
    live.retain(|s| !is_stub(&s.name));
    live.sort_by_key(|s| s.address);
    let expected: Vec<Seen> = planned.iter().map(seen_of).collect();
    assert_eq!(live, expected);
    let inlined = planned.iter().filter(|p| p.name == "PerfInline::InlinedLoop(int64)" && p.lines.iter().any(|e| e.file.ends_with("Work.cs"))).count();
    assert!(inlined >= 1, "no InlinedLoop body has Work.cs lines");

    // Without trees: Mix's samples go to the call line (the flat map's answer), and
    // FrameworkLoop's NO_MAPPING code to line 0.
    let Some((_, own, framework)) = perfinline_run("8.0", false) else { return };
    let call = inline_marker("PerfInline.cs", "OWN-CALL");
    assert!(share(&own, "Work.cs", mix.clone()) == 0.0, "8.0.4 --no-inlines: {own:?}");
    assert!(share(&own, "PerfInline.cs", call..=call) > 0.5, "8.0.4 --no-inlines: {own:?}");
    assert_framework_and_first_lines("8.0.4 --no-inlines", false, &own, &framework);
}

/// 3.1.23 has no inline trees: Mix's samples are at the call line (the flat map's answer), the
/// framework loop's NO_MAPPING code at line 0, and neither loop's at its first line.
#[test]
#[ignore = "needs .NET"]
fn perf_inlined_code_without_trees_netcore31() {
    let Some((_, own, framework)) = perfinline_run("3.1", true) else { return };
    let call = inline_marker("PerfInline.cs", "OWN-CALL");
    assert!(share(&own, "PerfInline.cs", call..=call) > 0.5, "3.1.23: {own:?}");
    assert_framework_and_first_lines("3.1", false, &own, &framework);
}

// ---- Offline enrichment and the perf routes' checks: no .NET, no perf needed.

/// examples/frames.nettrace (pid 31272) with its PDBs: the bodies `perf jitdump` plans for it.
fn frames_plan() -> Vec<Planned> {
    let trace = repo_root().join("examples/frames.nettrace");
    let options = Options { symbols: clrmap::locate::SymbolPaths { pdb: None, dirs: vec![repo_root().join("tests/fixtures/frames/debug-embedded")], servers: None } };
    let sym = Symbolizer::open(&trace, options).unwrap();
    plan(&sym, Some(31272))
}

/// A jitdump as a writer with line records would make it for `bodies`: each body's debug-info
/// record (its real lines), then its code load; pid `pid`.
fn dump_with_lines(bodies: &[&Planned], pid: u32) -> Vec<u8> {
    use clrmap::jitdump::{encode_code_load, encode_debug_info, CodeLoad, FileHeader, EM_X86_64};
    let mut f = FileHeader { elf_machine: EM_X86_64, pid, timestamp: 1, flags: 0 }.encode().to_vec();
    for (i, p) in bodies.iter().enumerate() {
        let t = 100 + i as u64;
        if !p.lines.is_empty() {
            f.extend(encode_debug_info(t, p.address, &p.lines).unwrap());
        }
        let code = vec![0xCCu8; p.code_size as usize];
        let load = CodeLoad { timestamp: t, pid, tid: 9, address: p.address, code_size: p.code_size, code_index: i as u64 + 1, name: &p.name, code: Some(&code) };
        f.extend(encode_code_load(&load).unwrap());
    }
    f
}

fn frames_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["perf", "jitdump", "examples/frames.nettrace", "--symbol-path", "tests/fixtures/frames/debug-embedded"];
    v.extend_from_slice(extra);
    v
}

/// Enriching a file that already has line records: every debug-info record stays
/// right before its own code load, as perf pairs them (checked by linux-perf-data's reader and
/// `read_independently`'s rule), every planned body is there once with its lines, and enriching
/// the result again changes nothing.
#[test]
fn enrich_keeps_each_debug_info_with_its_code_load() {
    let planned = frames_plan();
    assert!(planned.iter().filter(|p| !p.lines.is_empty()).count() >= 10);
    // The file has every other body (in address order, the trace's and its own): each missing
    // one is added just before a body the file has, which has a debug-info record.
    let have: Vec<&Planned> = planned.iter().step_by(2).collect();
    let dir = fresh_dir("perf-enrich-pairs");
    let dump = dir.join("jit-31272.dump");
    std::fs::write(&dump, dump_with_lines(&have, 31272)).unwrap();
    let once = dir.join("once.dump");
    let o = clrmap(&frames_args(&["--enrich", dump.to_str().unwrap(), "-o", once.to_str().unwrap()]));
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let (pid, seen) = read_independently(&once);
    assert_eq!(pid, 31272);
    let mut by_address: Vec<Seen> = seen;
    by_address.sort_by_key(|s| s.address);
    let expected: Vec<Seen> = planned.iter().map(seen_of).collect();
    assert_eq!(by_address.len(), expected.len());
    for (s, e) in by_address.iter().zip(&expected) {
        assert_eq!((s.address, s.size, &s.lines), (e.address, e.size, &e.lines), "{}", e.name);
    }
    let twice = dir.join("twice.dump");
    let o = clrmap(&frames_args(&["--enrich", once.to_str().unwrap(), "-o", twice.to_str().unwrap()]));
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("added lines to 0 code loads, added 0 bodies"), "{}", stdout(&o));
    assert!(std::fs::read(&twice).unwrap() == std::fs::read(&once).unwrap(), "a second enrich changed the file");
}

/// Rewrite the pid in a jitdump's header in place (the same inode).
fn set_header_pid(path: &Path, pid: u32) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(20)).unwrap();
    f.write_all(&pid.to_le_bytes()).unwrap();
}

/// Enriching in place while the writer runs is refused (exit 2, the file untouched),
/// before the source is read; `--force` does it; `-o` elsewhere does it with a warning. A live
/// process that does not hold the file (a reused pid) is not its writer.
#[test]
fn enrich_in_place_is_refused_while_the_writer_runs() {
    let planned = frames_plan();
    let have: Vec<&Planned> = planned.iter().step_by(2).collect();
    let dir = fresh_dir("perf-enrich-live");
    let dump = dir.join("jit-31272.dump");
    std::fs::write(&dump, dump_with_lines(&have, 31272)).unwrap();
    // A stand-in for the runtime: it holds the file open, as the runtime does until it exits.
    let mut writer = Command::new("sh").arg("-c").arg("exec 3>>\"$0\"; exec sleep 60").arg(&dump).spawn().unwrap();
    let held = |pid: u32| std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten().any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == dump));
    let start = std::time::Instant::now();
    while !held(writer.id()) {
        assert!(start.elapsed().as_secs() < 10, "the stand-in never opened the file");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    set_header_pid(&dump, writer.id());
    let before = std::fs::read(&dump).unwrap();
    let d = dump.to_str().unwrap();

    let o = clrmap(&frames_args(&["--pid", "31272", "--enrich", d]));
    assert_eq!(code(&o), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains(&format!("process {} is still writing it", writer.id())), "{}", stderr(&o));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert!(std::fs::read(&dump).unwrap() == before, "the file changed");
    // -o naming the same file is in place too.
    let o = clrmap(&frames_args(&["--pid", "31272", "--enrich", d, "-o", &format!("{}/./jit-31272.dump", dir.display())]));
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(std::fs::read(&dump).unwrap() == before, "the file changed");
    // Elsewhere: done, with a warning.
    let copy = dir.join("copy.dump");
    let o = clrmap(&frames_args(&["--pid", "31272", "--enrich", d, "-o", copy.to_str().unwrap()]));
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("still writing it"), "{}", stderr(&o));
    assert!(std::fs::read(&dump).unwrap() == before, "the file changed");
    // --force: in place.
    let o = clrmap(&frames_args(&["--pid", "31272", "--enrich", d, "--force"]));
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(std::fs::read(&dump).unwrap() != before, "the file did not change");
    let _ = writer.kill();
    let _ = writer.wait();

    // A live process that does not hold the file (this test's own pid in the header and the
    // name) is not its writer; nor is an exited one.
    for pid in [std::process::id(), writer.id()] {
        let other = dir.join(format!("jit-{pid}.dump"));
        std::fs::write(&other, dump_with_lines(&have, pid)).unwrap();
        let o = clrmap(&frames_args(&["--enrich", other.to_str().unwrap(), "--pid", "31272"]));
        assert_eq!(code(&o), Some(0), "{}", stderr(&o));
        assert!(!stderr(&o).contains("still writing"), "{}", stderr(&o));
    }
}

#[path = "../../../clrmap/benches/support/bigtrace.rs"]
mod bigtrace;

/// `perf jitdump --enrich` on a large trace (it read the whole trace a second time,
/// 416 MB of memory for a 420 MB trace) and a large jitdump streams both: its peak RSS, measured
/// by GNU time, stays far below either file's size, under the hostile runs' memory limit (256 MB
/// + 4× the input).
#[test]
fn enrich_streams_a_large_trace() {
    let real = std::fs::read(repo_root().join("examples/frames.nettrace")).unwrap();
    let size: usize = 200 << 20;
    let dir = fresh_dir("perf-enrich-big");
    let big = dir.join("big.nettrace");
    std::fs::write(&big, bigtrace::grow(&real, size)).unwrap();
    let planned = frames_plan();
    let have: Vec<&Planned> = planned.iter().step_by(2).collect();
    let dump = dir.join("runtime.dump");
    let mut dump_bytes = dump_with_lines(&have, 31272);
    // A large code load (96 MB of code) at an address no body has: kept as it is.
    let code_size = 96u64 << 20;
    let big_load = clrmap::jitdump::CodeLoad { timestamp: 999, pid: 31272, tid: 9, address: 0x1000, code_size, code_index: 999, name: "Big", code: None };
    dump_bytes.extend(clrmap::jitdump::encode_code_load(&big_load).unwrap());
    std::fs::write(&dump, &dump_bytes).unwrap();
    drop(dump_bytes);
    let input = std::fs::metadata(&big).unwrap().len() + std::fs::metadata(&dump).unwrap().len();
    let kb = (256 << 20) / 1024 + 4 * input / 1024 + 1;
    let out = dir.join("out.dump");
    let script = format!(
        "ulimit -v {kb}; exec /usr/bin/time -f 'maxrss_kb=%M' timeout 120 '{}' perf jitdump '{}' --symbol-path tests/fixtures/frames/debug-embedded --enrich '{}' -o '{}'",
        env!("CARGO_BIN_EXE_clrmap"),
        big.display(),
        dump.display(),
        out.display()
    );
    let o = Command::new("sh").arg("-c").arg(&script).current_dir(repo_root()).output().unwrap();
    let _ = std::fs::remove_file(&big);
    let err = stderr(&o);
    assert_eq!(code(&o), Some(0), "{err}");
    let rss_kb: u64 = err.lines().find_map(|l| l.strip_prefix("maxrss_kb=")).expect("GNU time's report (/usr/bin/time, Debian package `time`)").trim().parse().unwrap();
    println!("perf jitdump --enrich on a {} MB trace and a {} MB jitdump: peak RSS {} MB", size >> 20, code_size >> 20, rss_kb >> 10);
    assert!(rss_kb < 64 << 10, "peak RSS {rss_kb} kB for a {size}-byte trace and a {code_size}-byte code load");
    // The same output as from the small trace it repeats.
    let small = dir.join("small.dump");
    let o = clrmap(&frames_args(&["--enrich", dump.to_str().unwrap(), "-o", small.to_str().unwrap()]));
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&small).unwrap(), "the large trace's output differs from the small one's");
}

/// `clrmap profile --perf ... -- sh -c 'touch MARKER'`, with `env` set: (output, whether the
/// command ran).
fn profile_perf_checked(perf_dir: &Path, cap: Option<&Path>, env: &[(&str, &str)]) -> (std::process::Output, bool) {
    let dir = perf_dir.parent().unwrap();
    let marker = dir.join("ran");
    let _ = std::fs::remove_file(&marker);
    let mut c = Command::new(env!("CARGO_BIN_EXE_clrmap"));
    // Any existing file passes for the profiler here: the checks come before it is used.
    c.arg("profile").arg(format!("--perf={}", perf_dir.display())).args(["--profiler", "/bin/sh"]);
    if let Some(cap) = cap {
        c.arg("-o").arg(cap);
    }
    c.args(["--", "sh", "-c", &format!("touch '{}'", marker.display())]);
    c.env_remove("DOTNET_PerfMapEnabled").env_remove("COMPlus_PerfMapEnabled");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    (o, marker.exists())
}

/// A missing or unusable `--perf` directory is bad usage, found before the command
/// runs, with or without `-o`.
#[test]
fn profile_perf_dir_is_checked_before_the_run() {
    let dir = fresh_dir("perf-dir-check");
    let cap = dir.join("app.cap");
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    for perf_dir in [dir.join("missing"), dir.join("missing/deeper"), file.clone()] {
        for cap in [None, Some(cap.as_path())] {
            let (o, ran) = profile_perf_checked(&perf_dir, cap, &[]);
            assert_eq!(code(&o), Some(2), "{perf_dir:?} {cap:?}: {}", stderr(&o));
            assert!(!ran, "{perf_dir:?}: the command ran");
            assert!(stderr(&o).contains("--perf") && stderr(&o).contains(&perf_dir.display().to_string()), "{}", stderr(&o));
            assert!(!cap.is_some_and(Path::exists));
        }
    }
    // An existing directory passes the check: the command runs (and is not .NET: status 3).
    let ok = dir.join("ok");
    std::fs::create_dir(&ok).unwrap();
    let (o, ran) = profile_perf_checked(&ok, None, &[]);
    assert!(ran, "{}", stderr(&o));
    assert_eq!(code(&o), Some(3), "{}", stderr(&o));
}

/// `PerfMapEnabled` 1, 2 and 3 all make the runtime write a file `--perf` writes too (3: the
/// perf map, whose lines two writers tear): each is refused before the run (exit 2), under
/// either prefix and in the runtime's hex spelling; 0 is not.
#[test]
fn profile_perf_refuses_every_runtime_perf_map_setting() {
    let dir = fresh_dir("perf-env-check");
    let perf_dir = dir.join("out");
    std::fs::create_dir(&perf_dir).unwrap();
    for var in ["DOTNET_PerfMapEnabled", "COMPlus_PerfMapEnabled"] {
        for value in ["1", "2", "3", " 3 ", "0x3", "03"] {
            let (o, ran) = profile_perf_checked(&perf_dir, None, &[(var, value)]);
            assert_eq!(code(&o), Some(2), "{var}={value}: {}", stderr(&o));
            assert!(!ran, "{var}={value}: the command ran");
            assert!(stderr(&o).contains(&format!("unset {var}")), "{}", stderr(&o));
        }
        let (o, _) = profile_perf_checked(&perf_dir, None, &[(var, "3")]);
        assert!(stderr(&o).contains("perf-PID.map"), "{}", stderr(&o));
        let (o, ran) = profile_perf_checked(&perf_dir, None, &[(var, "0")]);
        assert!(ran && code(&o) == Some(3), "{var}=0: {}", stderr(&o));
    }
}

//! PDB only: the program's assembly is deleted after the run, and a capture
//! (`clrmap profile`) and a trace (`clrmap trace collect --pid`) of it still give the lines the
//! runtime's own `StackTrace` printed, from a folder that holds only the PDB, and from a loopback
//! symbol server (`tests/symsrv/server.py`). The capture finds the PDB by the id its `module`
//! records carry (docs/capture-format.md), the trace by its ModuleLoad events.
//!
//! The program is the Frames fixture (tests/fixtures/frames/debug-portable, tiering off), copied
//! to a temporary directory and run there on 8.0.4 and 3.1.23. Needs the profiler built by
//! `cargo build --workspace`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use crate::symbol_server::Server;

const DEBUG: &str = "tests/fixtures/frames/debug-portable";

fn profiler() -> String {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    so.to_string_lossy().into_owned()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-cli-pdb-only-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A fresh directory holding the Debug build of Frames (assembly, PDB, runtimeconfig).
fn program_dir(name: &str) -> PathBuf {
    let dir = tmp(name);
    for f in ["Frames.dll", "Frames.pdb", "Frames.runtimeconfig.json"] {
        std::fs::copy(repo_root().join(DEBUG).join(f), dir.join(f)).unwrap();
    }
    dir
}

/// `clrmap profile -o run.capture -- dotnet Frames.dll` in `dir`: the capture and what the program printed.
fn profiled(dotnet: &str, dir: &Path) -> (PathBuf, String) {
    let cap = dir.join("run.capture");
    let o = clrmap(&["profile", "-o", s(&cap), "--profiler", &profiler(), "--", dotnet, s(&dir.join("Frames.dll"))]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    (cap, stdout(&o))
}

/// Frames.dll in `dir`, traced by `clrmap trace collect --pid` while it runs: its stdout is a pipe
/// nobody reads until the trace is written, so the program (which prints more than a pipe holds)
/// waits in its write, alive, with most of its methods jitted. The trace and all it printed.
fn traced(dotnet: &str, dir: &Path) -> (PathBuf, String) {
    let trace = dir.join("run.nettrace");
    let mut app = Command::new(dotnet).arg(dir.join("Frames.dll")).current_dir(dir).stdout(Stdio::piped()).spawn().unwrap();
    let wchan = format!("/proc/{}/wchan", app.id());
    let begun = Instant::now();
    loop {
        assert!(app.try_wait().unwrap().is_none(), "Frames ended before its stdout pipe filled: nothing to attach to");
        if std::fs::read_to_string(&wchan).is_ok_and(|w| w.contains("pipe_write")) {
            break;
        }
        assert!(begun.elapsed() < Duration::from_secs(60), "Frames never blocked on its stdout");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = clrmap(&["trace", "collect", "--pid", &app.id().to_string(), "-o", s(&trace), "--duration", "1s"]);
    let mut out = String::new();
    app.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(app.wait().unwrap().success());
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    (trace, out)
}

/// The runtime's own frames of Frames.dll whose method has one body in `source`: (return
/// address, `file:line:column` as `StackTrace` printed it).
fn runtime_lines(source: &Path, program_stdout: &str) -> Vec<(u64, String)> {
    let o = clrmap(&["il", "dump", s(source), "--json", "--module", "Frames.dll"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let mut starts: std::collections::HashMap<u64, Vec<u64>> = std::collections::HashMap::new();
    for m in v["methods"].as_array().unwrap() {
        starts.entry(m["token"].as_u64().unwrap()).or_default().push(m["start"].as_u64().unwrap());
    }
    let mut out: Vec<(u64, String)> = program_stdout
        .lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| f[0] == "F" && !f[7].is_empty())
        .filter_map(|f| {
            let token = u64::from_str_radix(&f[3][2..], 16).unwrap();
            let start = starts.get(&token).filter(|s| s.len() == 1)?[0];
            Some((start + f[5].parse::<u64>().unwrap(), format!("{}:{}:{}", f[7], f[8], f[9])))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `clrmap symbolize SOURCE ARGS --return-address` over `frames`' addresses on stdin: the
/// `file:line:column` line of each answer, and stderr.
fn lines_of(source: &Path, args: &[&str], frames: &[(u64, String)]) -> (Vec<String>, String) {
    let (answers, err) = answers_of(source, args, frames);
    (answers.into_iter().map(|(_, line)| line).collect(), err)
}

/// [`lines_of`], with each answer's method line before its `file:line:column` line.
fn answers_of(source: &Path, args: &[&str], frames: &[(u64, String)]) -> (Vec<(String, String)>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clrmap"))
        .args(["symbolize", s(source), "--return-address"])
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = frames.iter().map(|(a, _)| format!("0x{a:x}\n")).collect();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let answer = |b: &str| (b.lines().next().unwrap_or_default().to_owned(), b.lines().nth(1).unwrap_or_default().to_owned());
    (text.split_terminator("\n\n").map(answer).collect(), stderr(&o))
}

/// A symbol server root holding `pdb` under its SSQP key, computed here from the spec (the GUID
/// in `Guid.ToString("N")` form, its first three fields little-endian, then `ffffffff`); the key.
fn store(root: &Path, pdb: &Path) -> String {
    let id = clrmap::pdb::PortablePdb::parse(&std::fs::read(pdb).unwrap()).unwrap().id().0;
    let g = &id[..16];
    let n: String = [g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6]].iter().chain(&g[8..]).map(|b| format!("{b:02x}")).collect();
    let key = format!("frames.pdb/{n}ffffffff/frames.pdb");
    std::fs::create_dir_all(root.join(&key).parent().unwrap()).unwrap();
    std::fs::copy(pdb, root.join(&key)).unwrap();
    key
}

/// The `SymbolChecksum` header Frames.dll's PdbChecksum entry makes (`SHA256:HEX`), read from
/// the fixture itself.
fn checksum_header() -> String {
    let bytes = std::fs::read(repo_root().join(DEBUG).join("Frames.dll")).unwrap();
    let image = clrmap::pe::PeImage::parse(&bytes).unwrap();
    let (alg, sum) = image.pdb_checksums()[0];
    format!("{alg}:{}", sum.iter().map(|b| format!("{b:02X}")).collect::<String>())
}

/// Delete the assembly and its PDB beside it; then every runtime frame of `source` answers
/// with the runtime's line from a folder holding only the PDB, and from a loopback symbol
/// server (which gets the image's PdbChecksum as `SymbolChecksum` where the recording has it).
fn pdb_only(what: &str, dir: &Path, source: &Path, program_stdout: &str, header: Option<&str>) {
    let frames = runtime_lines(source, program_stdout);
    assert!(frames.len() >= 10, "{what}: {} frames", frames.len());
    let want: Vec<String> = frames.iter().map(|(_, l)| l.clone()).collect();
    // The methods as named with the assembly where the process loaded it.
    let (with_assembly, _) = answers_of(source, &[], &frames);
    let named: Vec<String> = with_assembly.into_iter().map(|(m, _)| m).collect();
    assert!(named.iter().all(|m| m.starts_with("Frames.")), "{what}: {named:?}");
    std::fs::remove_file(dir.join("Frames.dll")).unwrap();
    std::fs::remove_file(dir.join("Frames.pdb")).unwrap();
    let syms = tmp(&format!("{what}-syms"));
    std::fs::copy(repo_root().join(DEBUG).join("Frames.pdb"), syms.join("Frames.pdb")).unwrap();
    let (got, err) = answers_of(source, &["--symbol-path", s(&syms)], &frames);
    let (methods, got): (Vec<String>, Vec<String>) = got.into_iter().unzip();
    assert_eq!(got, want, "{what}, --symbol-path: {err}");
    // A recording stands alone: with the assembly gone, every method is named as it was.
    assert_eq!(methods, named, "{what}: the methods without the assembly");
    // From a symbol server, into an empty cache, with no PDB on disk.
    let root = tmp(&format!("{what}-root"));
    let key = store(&root, &repo_root().join(DEBUG).join("Frames.pdb"));
    let cache = tmp(&format!("{what}-cache"));
    let server = Server::start(&root, "ok", None);
    let (got, err) = lines_of(source, &["--symbol-server", &server.url, "--cache", s(&cache), "--symbol-timeout", "10s"], &frames);
    assert_eq!(got, want, "{what}, --symbol-server: {err}");
    let asked: Vec<(String, String)> = server.requests().into_iter().filter(|(p, _)| p.to_ascii_lowercase().contains("frames.pdb")).collect();
    assert_eq!(asked, vec![(format!("/{key}"), header.unwrap_or_default().to_owned())], "{what}");
    let _ = std::fs::remove_dir_all(&syms);
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
#[ignore = "needs .NET"]
fn a_capture_and_a_trace_symbolize_with_the_pdb_alone_on_both_runtimes() {
    let header = checksum_header();
    assert!(header.starts_with("SHA256:"), "{header}");
    for rt in all_runtimes() {
        let dotnet = rt.dotnet.to_string_lossy().into_owned();
        let tag = rt.channel.clone();
        let host = rt.label();

        let dir = program_dir(&format!("capture-{tag}"));
        let (cap, printed) = profiled(&dotnet, &dir);
        // The capture's PDB ids are the ones the runtime itself reports for the same files (a
        // trace's ModuleLoad events), not merely what the profiler read.
        let trace_dir = program_dir(&format!("trace-{tag}"));
        let (trace, trace_printed) = traced(&dotnet, &trace_dir);
        let captured = clrmap::capture::read_capture(&std::fs::read(&cap).unwrap()).unwrap().recorded_pdbs();
        let file = std::fs::File::open(&trace).unwrap();
        let recorded = clrmap::symbolizer::read_trace(std::io::BufReader::new(file)).unwrap().pdbs;
        let frames_dll = |d: &Path| s(&d.join("Frames.dll")).to_owned();
        assert_eq!(captured[&frames_dll(&dir)].guid, recorded[&frames_dll(&trace_dir)].guid, "{host}");
        let common: Vec<&String> = captured.keys().filter(|p| recorded.contains_key(*p)).collect();
        assert!(common.iter().any(|p| p.ends_with("/System.Private.CoreLib.dll")), "{host}: {common:?}");
        for p in common {
            assert_eq!((captured[p].guid, captured[p].age), (recorded[p].guid, recorded[p].age), "{host}: {p}");
        }

        // What captures written before the module records give (and so what the code before
        // them gave): no line from the PDB alone.
        let old = dir.join("old.capture");
        let text = std::fs::read_to_string(&cap).unwrap();
        std::fs::write(&old, text.lines().filter(|l| !l.contains("\"kind\":\"module\"")).map(|l| format!("{l}\n")).collect::<String>()).unwrap();
        let old_frames = runtime_lines(&old, &printed);

        pdb_only(&format!("capture-{tag}"), &dir, &cap, &printed, Some(&header));
        pdb_only(&format!("trace-{tag}"), &trace_dir, &trace, &trace_printed, None);

        let syms = tmp(&format!("old-{tag}-syms"));
        std::fs::copy(repo_root().join(DEBUG).join("Frames.pdb"), syms.join("Frames.pdb")).unwrap();
        let (got, _) = lines_of(&old, &["--symbol-path", s(&syms)], &old_frames);
        assert!(got.iter().all(|l| l == "??:0:0"), "{host}: {got:?}");
        let _ = std::fs::remove_dir_all(&syms);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&trace_dir);
    }
}

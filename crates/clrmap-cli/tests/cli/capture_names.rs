//! A capture carries its bodies' names (docs/capture-format.md, `name` and `full_name`): read with
//! the program's assembly deleted and only its PDB at hand, it names every body exactly as it
//! does with the assembly present, and every frame the runtime's own `StackTrace` printed gets
//! the method the runtime named. The program is the Frames fixture (Debug build, portable PDB),
//! run on every installed runtime. Needs the profiler built by `cargo build --workspace`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::*;

const DEBUG: &str = "tests/fixtures/frames/debug-portable";

fn profiler() -> String {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    so.to_string_lossy().into_owned()
}

fn fresh(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capture-names").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `il dump CAP --json --module Frames.dll`: every body's (token, start, name, full_name).
fn names(cap: &Path, args: &[&str]) -> Vec<(u64, u64, Option<String>, Option<String>)> {
    let mut a = vec!["il", "dump", s(cap), "--json", "--module", "Frames.dll"];
    a.extend_from_slice(args);
    let o = clrmap(&a);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let text = |m: &serde_json::Value, k: &str| m[k].as_str().map(str::to_owned);
    v["methods"].as_array().unwrap().iter().map(|m| (m["token"].as_u64().unwrap(), m["start"].as_u64().unwrap(), text(m, "name"), text(m, "full_name"))).collect()
}

/// `symbolize CAP --json --return-address ARGS` over `addresses`: each answer's method, line and
/// IL offset.
fn answers(cap: &Path, args: &[&str], addresses: &[u64]) -> Vec<(Option<String>, Option<u64>, Option<u64>)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clrmap"))
        .args(["symbolize", s(cap), "--json", "--return-address"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = addresses.iter().map(|a| format!("0x{a:x}\n")).collect();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["method"].as_str().map(str::to_owned), v["line"].as_u64(), v["il_offset"].as_u64())
        })
        .collect()
}

#[test]
#[ignore = "needs .NET"]
fn a_capture_names_every_method_without_its_assembly() {
    for rt in current_runtimes() {
        let host = rt.label();
        let dir = fresh(&host);
        for f in ["Frames.dll", "Frames.pdb", "Frames.runtimeconfig.json"] {
            std::fs::copy(repo_root().join(DEBUG).join(f), dir.join(f)).unwrap();
        }
        let cap = dir.join("run.capture");
        let o = clrmap(&["profile", "-o", s(&cap), "--profiler", &profiler(), "--", s(&rt.dotnet), s(&dir.join("Frames.dll"))]);
        assert_eq!(code(&o), Some(0), "{host}: {}", stderr(&o));
        let printed = stdout(&o);

        // With the assembly: every body named from it.
        let present = names(&cap, &[]);
        assert!(present.len() >= 20, "{host}: {} bodies", present.len());
        assert!(present.iter().all(|b| b.2.is_some() && b.3.is_some()), "{host}: a body without a name: {present:?}");
        // The runtime's frames (F lines: token, native offset, Type::Method) of tokens with one
        // body, as return addresses.
        let mut by_token: std::collections::HashMap<u64, Vec<u64>> = Default::default();
        for b in &present {
            by_token.entry(b.0).or_default().push(b.1);
        }
        let frames: Vec<(u64, String, bool)> = printed
            .lines()
            .map(|l| l.split('\t').collect::<Vec<_>>())
            .filter(|f| f[0] == "F")
            .filter_map(|f| {
                let token = u64::from_str_radix(&f[3][2..], 16).unwrap();
                let start = by_token.get(&token).filter(|s| s.len() == 1)?[0];
                Some((start + f[5].parse::<u64>().unwrap(), f[10].to_owned(), !f[7].is_empty()))
            })
            .collect();
        assert!(frames.len() >= 10, "{host}: {} frames", frames.len());
        let addresses: Vec<u64> = frames.iter().map(|f| f.0).collect();
        let with_assembly = answers(&cap, &[], &addresses);

        // Without it: the assembly and the PDB beside it are gone; the PDB is in a folder of its own.
        std::fs::remove_file(dir.join("Frames.dll")).unwrap();
        std::fs::remove_file(dir.join("Frames.pdb")).unwrap();
        let syms = fresh(&format!("{host}-syms"));
        std::fs::copy(repo_root().join(DEBUG).join("Frames.pdb"), syms.join("Frames.pdb")).unwrap();
        let absent = names(&cap, &[]);
        assert_eq!(absent, present, "{host}: names without the assembly");
        let without = answers(&cap, &["--symbol-path", s(&syms)], &addresses);
        assert_eq!(without, with_assembly, "{host}: answers without the assembly");
        // The runtime's own names for its frames (it writes a nested type `Outer+Inner`, the
        // contract `Outer/Inner`).
        for ((address, runtime, has_line), (method, line, _)) in frames.iter().zip(&without) {
            assert_eq!(method.as_deref(), Some(runtime.replace('+', "/").as_str()), "{host}: 0x{address:x}");
            assert_eq!(line.is_some(), *has_line, "{host}: 0x{address:x}: a line where the runtime printed one, and only there");
        }
    }
}

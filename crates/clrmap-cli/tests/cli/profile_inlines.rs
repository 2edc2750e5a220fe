//! `clrmap profile` records the JIT's inline trees in the processes it launches: it sets
//! `DOTNET_RichDebugInfo=1`, and the profiler's own EventPipe session writes each event 189 and
//! MethodDetails payload, unchanged, into the capture. `--no-inlines` turns it off; 3.1 has no
//! trees and its captures stay as they were. Needs the .NET runtimes (mandatory in CI) and the
//! profiler built by `cargo build --workspace`.
//!
//! The payloads are decoded here by hand from docs/rich-debug-info.md (not by the library's
//! decoder), and checked against what the runtime says through other channels: the profiler's
//! FunctionIDs and code starts, GetFunctionInfo's tokens, and the inlining the program forbids.

use std::collections::HashMap;
use std::path::Path;

use clrmap::capture::{read_capture, Capture, InlineEventKind, InlinePayload};
use clrmap::ilmap::CodeKind;

use crate::support::*;

fn profiler() -> String {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    so.to_string_lossy().into_owned()
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// One body's tree, decoded by docs/rich-debug-info.md: the nodes' (Method, ILOffset).
struct Tree {
    method_id: u64,
    nodes: Vec<(u64, u32)>,
    mappings: u32,
}

/// Profile `Hot.dll 1` on the runtime at `dotnet` into `dir/NAME.capture`, with `extra` flags and
/// environment; returns the capture's bytes.
fn profile(dir: &Path, name: &str, dotnet: &str, extra: &[&str], env: &[(&str, &str)]) -> Vec<u8> {
    let cap = dir.join(format!("{name}.capture"));
    let hot = repo_root().join("tests/fixtures/perf/Hot.dll");
    let so = profiler();
    let mut args = vec!["profile", "-o", cap.to_str().unwrap(), "--profiler", &so];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", dotnet, hot.to_str().unwrap(), "1"]);
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_clrmap"));
    c.args(&args).current_dir(repo_root()).env_remove("DOTNET_RichDebugInfo");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("rounds "), "{}", String::from_utf8_lossy(&o.stdout));
    std::fs::read(&cap).unwrap()
}

/// Every line's `kind` (the header's: `header`).
fn kinds(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.get("kind").and_then(|k| k.as_str()).unwrap_or("header").to_owned()
        })
        .collect()
}

fn trees(c: &Capture) -> Vec<(Option<u64>, Tree)> {
    // Chunks in order per (MethodID, NativeCodeId), each checked against its own header.
    // (MethodID, NativeCodeId) -> (code start, blob so far, last chunk seen).
    type Blobs = HashMap<(u64, u64), (Option<u64>, Vec<u8>, bool)>;
    let mut blobs = Blobs::new();
    let mut order = Vec::new();
    for i in c.inlines.iter().filter(|i| i.kind == InlineEventKind::RichDebugInfo) {
        let p = &i.payload;
        assert!(p.len() >= 34, "a payload shorter than its header");
        let (method_id, code_id, chunk, len) = (u64_at(p, 2), u64_at(p, 10), u32_at(p, 26), u32_at(p, 30));
        assert_eq!(method_id, i.method_id, "the record's method_id is the payload's MethodID");
        assert_eq!(len as usize, p.len() - 34, "ChunkLength is the bytes after the header");
        let e = blobs.entry((method_id, code_id)).or_insert_with(|| {
            order.push((method_id, code_id));
            (i.start, Vec::new(), false)
        });
        assert!(!e.2, "a chunk after the last one");
        e.1.extend_from_slice(&p[34..]);
        e.2 = chunk & 0x8000_0000 != 0;
        if i.start.is_some() {
            e.0 = i.start;
        }
    }
    order
        .into_iter()
        .map(|key| {
            let (start, blob, last) = blobs.remove(&key).unwrap();
            assert!(last, "{key:x?}: no last chunk");
            let (n, m) = (u32_at(&blob, 0), u32_at(&blob, 4));
            assert_eq!(blob.len(), 8 + n as usize * 20 + m as usize * 13, "{key:x?}: the blob's size is its counts'");
            let nodes = (0..n as usize).map(|k| (u64_at(&blob, 8 + k * 20), u32_at(&blob, 8 + k * 20 + 8))).collect();
            (start, Tree { method_id: key.0, nodes, mappings: m })
        })
        .collect()
}

/// The checks of one 8.0.4 capture of Hot.dll with trees; returns, per Hot.dll method token,
/// its tree's inlinees as (module file name, MethodDef token), in node order.
fn hot_trees(bytes: &[u8], method_details: bool) -> HashMap<u32, Vec<(String, u32)>> {
    let c = read_capture(bytes).unwrap();
    assert!(c.warning.is_none() && c.skipped == 0);
    assert_eq!(c.runtime_major, Some(8));
    assert_eq!(c.inline_sessions.len(), 1, "one session, one process");
    let session = &c.inline_sessions[0];
    assert_eq!((session.hr, session.rich_debug_info, session.method_details, session.pid), (0, true, method_details, c.pids.first().copied()));
    let jitted: HashMap<u64, &clrmap::capture::CapturedBody> = c.bodies.iter().filter(|b| b.kind == CodeKind::Jit).map(|b| (b.body.start.unwrap(), b)).collect();
    let trees = trees(&c);
    assert!(!trees.is_empty(), "no rich debug info recorded");
    // Each tree belongs to a captured body: the profiler's code start names a jitted body whose
    // FunctionID is the event's MethodID, and node 0 (the root) is that method itself.
    for (start, t) in &trees {
        let start = start.unwrap_or_else(|| panic!("a tree of {:#x} without its body", t.method_id));
        let body = jitted.get(&start).unwrap_or_else(|| panic!("no jitted body at {start:#x}"));
        assert_eq!(body.body.function_id, Some(t.method_id));
        assert_eq!(t.nodes[0], (t.method_id, 0xFFFF_FFFF), "node 0 is the root");
        assert!(t.mappings > 0);
    }
    // Every inlinee is named once: by a MethodDetails event whose payload's token (MethodID u64,
    // TypeID u64, MethodToken u32) is the one GetFunctionInfo gives for the same MethodID, or,
    // without them, by the profiler.
    let kind = if method_details { InlineEventKind::MethodDetails } else { InlineEventKind::Inlinee };
    let other = if method_details { InlineEventKind::Inlinee } else { InlineEventKind::MethodDetails };
    assert!(!c.inlines.iter().any(|i| i.kind == other), "{other:?} records in a {kind:?} capture");
    let named: HashMap<u64, &clrmap::capture::CapturedInline> = c.inlines.iter().filter(|i| i.kind == kind).map(|i| (i.method_id, i)).collect();
    let name = |m: u64| {
        let d = named.get(&m).unwrap_or_else(|| panic!("inlinee {m:#x} is not named"));
        if method_details {
            assert_eq!(u64_at(&d.payload, 0), m);
            assert_eq!(d.token, Some(u32_at(&d.payload, 16)), "GetFunctionInfo and MethodDetails disagree on {m:#x}");
        } else {
            assert!(d.payload.is_empty());
        }
        let module = d.module.as_deref().unwrap_or_else(|| panic!("inlinee {m:#x} has no module"));
        assert!(module.ends_with(".dll"), "{module}");
        (Path::new(module).file_name().unwrap().to_string_lossy().into_owned(), d.token.unwrap())
    };
    for (_, t) in &trees {
        for &(m, _) in &t.nodes[1..] {
            name(m);
        }
    }
    // The raw payloads, as the library's decoder takes them: every event, no inlinee record.
    let events = c.inlines.iter().filter(|i| i.kind != InlineEventKind::Inlinee).count();
    assert_eq!(c.inline_payloads().filter(|(pid, _)| Some(*pid) == c.pids.first().copied()).count(), events);
    assert!(c.inline_payloads().any(|(_, p)| matches!(p, InlinePayload::RichDebugInfo(_))));
    // Every jitted body of Hot.dll has its tree.
    let hot: Vec<_> = jitted.values().filter(|b| b.module_path.ends_with("/Hot.dll")).collect();
    assert_eq!(hot.len(), 3, "Main, OwnLoop and FrameworkLoop, once each (tiering is off)");
    let tree_of = |token: u32| {
        let b = hot.iter().find(|b| b.body.token == token).unwrap_or_else(|| panic!("no body of {token:#x}"));
        &trees.iter().find(|(s, _)| *s == b.body.start).unwrap_or_else(|| panic!("no tree of {token:#x}")).1
    };
    // What the program forces: OwnLoop (0x06000001) calls nothing, so its tree is its root; it
    // and FrameworkLoop (0x06000002) are NoInlining, so Main (0x06000003) inlines neither, though
    // it inlines others (Stopwatch and TimeSpan accessors).
    let (own, framework, main) = (tree_of(0x0600_0001), tree_of(0x0600_0002), tree_of(0x0600_0003));
    assert_eq!(own.nodes.len(), 1);
    assert!(main.nodes.len() > 1, "Main inlines nothing?");
    assert!(!main.nodes.iter().any(|&(m, _)| m == own.method_id || m == framework.method_id), "a NoInlining method inlined");
    [0x0600_0001, 0x0600_0002, 0x0600_0003].into_iter().map(|t| (t, tree_of(t).nodes[1..].iter().map(|&(m, _)| name(m)).collect())).collect()
}

#[test]
#[ignore = "needs .NET"]
fn profile_records_the_jits_inline_trees_on_8_and_nothing_on_3_1_or_with_no_inlines() {
    let dotnet8 = host("8.0");
    let dotnet31 = host("3.1");
    let dir = std::env::temp_dir().join(format!("clrmap-profile-inlines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // 8.0.4 (Hot.dll rolls forward to it; tiering off, so its methods are jitted optimized).
    // By default the JIT keyword comes from the runtime's own LTTng settings and the profiler
    // names the inlinees; with a user's LTTng setting (here DOTNET_LTTng=0) the runtime provider
    // goes on the session and MethodDetails name them. Both must name the same inlinees.
    let lttng = hot_trees(&profile(&dir, "on", &dotnet8, &[], &[]), false);
    let event_pipe = hot_trees(&profile(&dir, "ep", &dotnet8, &[], &[("DOTNET_LTTng", "0")]), true);
    assert_eq!(lttng, event_pipe, "the profiler's names and MethodDetails' differ");

    // --no-inlines: no session and no trees, and the variable is taken out of the command's
    // environment even when clrmap's own has it.
    let env_file = dir.join("env.txt");
    let script = format!("printenv DOTNET_RichDebugInfo DOTNET_EnableEventLog DOTNET_LTTngConfig > '{}'; exec \"$0\" \"$@\"", env_file.display());
    let cap = dir.join("off.capture");
    let hot = repo_root().join("tests/fixtures/perf/Hot.dll");
    let so = profiler();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_clrmap"))
        .args(["profile", "--no-inlines", "-o", cap.to_str().unwrap(), "--profiler", &so, "--", "sh", "-c", &script, &dotnet8, hot.to_str().unwrap(), "1"])
        .env("DOTNET_RichDebugInfo", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&env_file).unwrap(), "", "DOTNET_RichDebugInfo or the JIT keyword's settings reached the command");
    let off = read_capture(&std::fs::read(&cap).unwrap()).unwrap();
    assert!(off.inlines.is_empty() && off.inline_sessions.is_empty());
    assert!(off.bodies.iter().any(|b| b.module_path.ends_with("/Hot.dll")));
    // Without the flag the same script sees it set.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_clrmap"))
        .args(["profile", "-o", cap.to_str().unwrap(), "--profiler", &so, "--", "sh", "-c", &script, &dotnet8, hot.to_str().unwrap(), "1"])
        .env_remove("DOTNET_RichDebugInfo")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&env_file).unwrap(), "1\n1\nMicrosoft-Windows-DotNETRuntime:10:5\n");

    // 3.1.23: no ICorProfilerInfo12, so nothing new: only the kinds of lines captures had before.
    let bytes = profile(&dir, "v31", &dotnet31, &[], &[]);
    let c = read_capture(&bytes).unwrap();
    assert_eq!(c.runtime_major, Some(3));
    assert!(c.inlines.is_empty() && c.inline_sessions.is_empty() && c.skipped == 0);
    assert!(c.bodies.iter().any(|b| b.module_path.ends_with("/Hot.dll")));
    assert!(kinds(&bytes).iter().all(|k| ["header", "jit", "r2r", "end", "module"].contains(&k.as_str())), "{:?}", kinds(&bytes));
    let _ = std::fs::remove_dir_all(&dir);
}

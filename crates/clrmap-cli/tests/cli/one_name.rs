//! One name per body (docs/names.md): a capture and a trace of the same program (two runs of the
//! Frames fixture) give every MethodDef token the same set of full names. The two come from
//! independent interfaces of the runtime: the profiling API's GetFunctionInfo2 (the capture) and
//! the MethodDetails and BulkType events (the trace). The one difference left is the capture's,
//! written down in docs/names.md and asserted here to be exactly that: for code shared over
//! `System.__Canon` by its class, the profiling API gives no class, so the capture names the
//! generic definition where the trace names `<class System.__Canon>`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::support::*;

const RELEASE: &str = "tests/fixtures/frames/release-portable";

/// `il dump --json --module Frames.dll` of a recording: token → its bodies' full names.
fn names(recording: &Path) -> BTreeMap<u64, BTreeSet<String>> {
    let o = clrmap(&["il", "dump", recording.to_str().unwrap(), "--json", "--module", "Frames.dll"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let mut out: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for m in v["methods"].as_array().unwrap() {
        let full = m["full_name"].as_str().unwrap_or_else(|| panic!("a body without a full name: {m}"));
        out.entry(m["token"].as_u64().unwrap()).or_default().insert(full.to_owned());
    }
    out
}

#[test]
#[ignore = "needs .NET"]
fn a_capture_and_a_trace_name_every_token_alike() {
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    assert!(so.is_file(), "build the workspace first (cargo build --workspace)");
    for rt in current_runtimes().into_iter().filter(|r| r.major() >= 5) {
        let host = rt.label();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("one-name").join(&host);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["Frames.dll", "Frames.pdb", "Frames.runtimeconfig.json"] {
            std::fs::copy(repo_root().join(RELEASE).join(f), dir.join(f)).unwrap();
        }
        let dotnet = rt.dotnet.to_string_lossy().into_owned();
        let app = dir.join("Frames.dll");
        let (cap, trace) = (dir.join("run.capture"), dir.join("run.nettrace"));
        let o = clrmap(&["profile", "-o", cap.to_str().unwrap(), "--profiler", so.to_str().unwrap(), "--", &dotnet, app.to_str().unwrap()]);
        assert_eq!(code(&o), Some(0), "{host}: {}", stderr(&o));
        let o = clrmap(&["trace", "collect", "-o", trace.to_str().unwrap(), "--", &dotnet, app.to_str().unwrap()]);
        assert_eq!(code(&o), Some(0), "{host}: {}", stderr(&o));
        let (captured, traced) = (names(&cap), names(&trace));
        // Both runs jit the same methods (tiering is off in the fixture's runtimeconfig).
        assert_eq!(captured.keys().collect::<Vec<_>>(), traced.keys().collect::<Vec<_>>(), "{host}");
        assert!(captured.len() >= 60, "{host}: {} tokens", captured.len());
        // The method instantiations a trace used to leave out: each body of a generic method is
        // named by its own type arguments, as the capture names it.
        let pass = &traced[&0x0600_000A];
        assert!(pass.contains("Frames.Generic::Pass<int32>(!!0)") && pass.contains("Frames.Generic::Pass<class System.__Canon>(!!0)"), "{host}: {pass:?}");
        let mut same = 0;
        let mut shared_by_class = 0;
        for (token, c) in &captured {
            let t = &traced[token];
            if c == t {
                same += 1;
                continue;
            }
            // The one difference: each name only the capture gives is the generic definition
            // (no type arguments on the owner), and the trace names the same body with the owner
            // shared over System.__Canon; every other name is common.
            let only_c: Vec<&String> = c.difference(t).collect();
            let only_t: Vec<&String> = t.difference(c).collect();
            assert_eq!(only_c.len(), only_t.len(), "{host}: 0x{token:08X}: {c:?} vs {t:?}");
            for (a, b) in only_c.iter().zip(&only_t) {
                let (owner_c, rest_c) = a.split_once("::").unwrap();
                let (owner_t, rest_t) = b.split_once("::").unwrap();
                assert!(!owner_c.contains('<') && owner_t.starts_with(&format!("{owner_c}<")) && owner_t.contains("class System.__Canon"), "{host}: 0x{token:08X}: {a} vs {b}");
                assert_eq!(rest_c, rest_t, "{host}: 0x{token:08X}");
            }
            shared_by_class += 1;
        }
        eprintln!("{host}: {} tokens, {same} named alike, {shared_by_class} differ only by the capture's shared class code", captured.len());
        assert!(shared_by_class <= 4, "{host}: {shared_by_class} tokens differ");
    }
}

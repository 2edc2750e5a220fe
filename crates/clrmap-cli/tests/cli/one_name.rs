//! One name per body (docs/names.md): a capture and a trace of the same program (two runs of the
//! Frames fixture) give every MethodDef token the same set of full names. The two come from
//! independent interfaces of the runtime: the profiling API's GetFunctionInfo2 (the capture) and
//! the MethodDetails and BulkType events (the trace). Code shared over `System.__Canon` by its
//! class is where they used to differ on .NET 8 and 9 (GetFunctionInfo2 gives no class there;
//! the profiler finds it among the loaded classes): both name it `<class System.__Canon>`.

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
        // Code shared over System.__Canon by its class is named `<class System.__Canon>` by both:
        // the trace from its events, the capture from the profiling API (.NET 10) or, where
        // GetFunctionInfo2 gives no class (.NET 8 and 9), from the class the profiler finds.
        assert!(captured.values().any(|c| c.contains("Frames.Box`1<class System.__Canon>::Make(!0)")), "{host}: the capture names no Box`1<class System.__Canon>::Make");
        let differ: Vec<String> = captured.iter().filter(|(token, c)| traced[*token] != **c).map(|(token, c)| format!("0x{token:08X}: {c:?} vs {:?}", traced[token])).collect();
        eprintln!("{host}: {} tokens, {} named alike", captured.len(), captured.len() - differ.len());
        assert!(differ.is_empty(), "{host}: the capture and the trace name {} tokens differently:\n{}", differ.len(), differ.join("\n"));
    }
}

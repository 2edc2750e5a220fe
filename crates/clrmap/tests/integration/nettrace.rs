//! EventPipe traces against the live runtime: the same workload runs with EventPipe on and the
//! clrmap profiler attached, in one process; every jitted body's map rebuilt from the trace must
//! equal what the profiler got from GetILToNativeMapping3 for that body (FunctionID = MethodID).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use clrmap::capture::read_captured;
use clrmap::ilmap::{CodeKind, Tier};
use clrmap::nettrace::{read_code_bodies, read_events};

use crate::profiler::{profiler_path, workload, CLSID};
use crate::support::{self, Runtime};

/// Run the workload with EventPipe and the profiler; returns (trace bytes, capture text).
fn traced(rt: &Runtime, dll: &Path, so: &Path) -> (Vec<u8>, String) {
    let dir = dll.parent().unwrap().join("trace");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let capture = dir.join("capture.jsonl");
    let mut c = Command::new(&rt.dotnet);
    c.arg(dll)
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .env("CORECLR_ENABLE_PROFILING", "1")
        .env("CORECLR_PROFILER", CLSID)
        .env("CORECLR_PROFILER_PATH", so)
        .env("CLRMAP_PROFILER_OUTPUT", &capture)
        .env("COMPlus_EnableEventPipe", "1")
        .env("COMPlus_EventPipeConfig", "Microsoft-Windows-DotNETRuntime:0x60098:5");
    // 3.1 wants an existing directory (a file path crashes it); 8.0 wants a file path.
    if rt.version.starts_with("3.") {
        c.env("COMPlus_EventPipeOutputPath", &dir);
    } else {
        c.env("DOTNET_EventPipeOutputPath", dir.join("trace.nettrace"));
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}: {}", rt.version, String::from_utf8_lossy(&o.stderr));
    let trace = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "nettrace")).unwrap_or_else(|| panic!("{}: no trace written", rt.version));
    (std::fs::read(trace).unwrap(), std::fs::read_to_string(capture).unwrap())
}

#[test]
#[ignore = "needs .NET"]
fn trace_maps_equal_the_live_runtime_on_both_runtimes() {
    let (rts, mcs) = support::runtimes_and_mcs("nettrace::trace_maps_equal_the_live_runtime");
    let so = profiler_path();
    for rt in &rts {
        let dll = workload(rt, &mcs, "trace");
        let (trace, capture) = traced(rt, &dll, &so);
        let bodies = read_code_bodies(&trace[..]).unwrap();
        let live: HashMap<(u64, u64), _> =
            read_captured(&capture).unwrap().into_iter().filter(|c| c.kind == CodeKind::Jit).map(|c| ((c.body.function_id.unwrap(), c.body.start.unwrap()), c.body)).collect();
        let (mut equal, mut tiers) = (0, std::collections::BTreeMap::new());
        for b in &bodies {
            let key = (b.function_id.unwrap(), b.start.unwrap());
            // Methods jitted before the profiler saw them have no live record; everything the
            // profiler saw must match.
            let Some(l) = live.get(&key) else { continue };
            assert_eq!(b.map, l.map, "{}: {:?} at 0x{:X}", rt.version, b.name, key.1);
            assert_eq!(b.code_size, l.code_size, "{}: {:?} code size", rt.version, b.name);
            // The module, from the trace's module load events, is the one the profiler saw.
            assert_eq!(b.module, l.module, "{}: {:?} module", rt.version, b.name);
            // The trace's MethodFlags say jitted, as the profiler saw it.
            assert_eq!(b.kind, Some(CodeKind::Jit), "{}: {:?} kind", rt.version, b.name);
            equal += 1;
            *tiers.entry(b.tier.map_or("unknown", Tier::as_str)).or_insert(0) += 1;
        }
        println!("{}: {} trace bodies with maps; {equal} equal to the live runtime's, by tier {tiers:?}", rt.version, bodies.len());
        assert!(equal >= 20, "{}: only {equal} bodies compared", rt.version);
        // 9.0's tier-1 bodies of this program are instrumented (tier1-instrumented, for dynamic PGO)
        // or OSR (tier1-osr): every tier-1 kind counts.
        assert!(tiers.contains_key("tier0") && tiers.keys().any(|k| k.starts_with("tier1")), "{}: tier-0 and tier-1 bodies told apart: {tiers:?}", rt.version);

        // A trace cut at 50 points never panics and delivers every whole event before the cut.
        let mut full = Vec::new();
        read_events(&trace[..], |e| full.push(e.payload.offset() + e.payload.len() as u64)).unwrap();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..50 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let cut = (seed % trace.len() as u64) as usize;
            let mut got = 0usize;
            let r = read_events(&trace[..cut], |_| got += 1);
            assert!(r.is_err(), "a cut trace is an error");
            let whole = full.iter().filter(|&&end| end <= cut as u64).count();
            assert_eq!(got, whole, "{}: cut at {cut}", rt.version);
        }
    }
}

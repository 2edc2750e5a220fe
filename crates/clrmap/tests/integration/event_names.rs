//! `trace stats` names events from the runtime's manifest (src/coreclr/vm/ClrEtwAll.man): every
//! event that the real traces of the repository hold has a name, and the names of the events the
//! issue found unnamed or misnamed are the manifest's `symbol`s.

use std::path::{Path, PathBuf};

use clrmap::nettrace::{event_name, read_events, RUNDOWN, RUNTIME};

use super::support;

/// Every `.nettrace` under `dir`, recursively.
fn traces_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            traces_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "nettrace") {
            out.push(p);
        }
    }
}

#[test]
fn every_event_of_the_real_traces_has_a_name() {
    let mut traces = Vec::new();
    for dir in ["examples", "tests/fixtures"] {
        traces_under(&support::fixture(dir), &mut traces);
    }
    assert!(!traces.is_empty(), "no real trace found");
    let mut seen = 0;
    for t in &traces {
        let stats = read_events(std::fs::File::open(t).unwrap(), |_| {}).unwrap();
        for (provider, id, version) in stats.events.keys() {
            assert!(event_name(provider, *id).is_some(), "{}: {provider} {id} v{version} has no name", t.display());
            seen += 1;
        }
    }
    // examples/frames.nettrace alone holds 23 kinds of events, among them the rundown's 10.
    assert!(seen >= 23, "only {seen} kinds of events");
}

#[test]
fn names_are_the_manifest_symbols() {
    // From ClrEtwAll.man (dotnet/runtime main): <event value="10" ... symbol="GCSettingsRundown"/>
    // in Microsoft-Windows-DotNETRuntimeRundown; <event value="189" ... symbol=
    // "JittedMethodRichDebugInfo"/> in Microsoft-Windows-DotNETRuntimePrivate; in
    // Microsoft-Windows-DotNETRuntime 189 is "MethodJitTailCallFailedAnsi" and 191
    // "MethodJitTailCallFailed" (186 and 192 likewise for inlining).
    let cases = [
        (RUNDOWN, 10, "GCSettingsRundown"),
        ("Microsoft-Windows-DotNETRuntimePrivate", 189, "JittedMethodRichDebugInfo"),
        (RUNTIME, 189, "MethodJitTailCallFailedAnsi"),
        (RUNTIME, 191, "MethodJitTailCallFailed"),
        (RUNTIME, 186, "MethodJitInliningFailedAnsi"),
        (RUNTIME, 192, "MethodJitInliningFailed"),
        (RUNTIME, 190, "MethodILToNativeMap"),
        (RUNDOWN, 150, "MethodDCEndILToNativeMap"),
    ];
    for (provider, id, name) in cases {
        assert_eq!(event_name(provider, id), Some(name), "{provider} {id}");
    }
    assert_eq!(event_name("Some-Other-Provider", 10), None);
}

#[test]
#[ignore = "needs .NET"]
fn every_event_of_a_fresh_trace_has_a_name_on_both_runtimes() {
    // A trace as clrmap collects it (the runtime provider with the IL-map keywords at level 5,
    // and the rundown the runtime writes at the end), from a real run on each runtime.
    let (rts, mcs) = support::runtimes_and_mcs("event_names::every_event_of_a_fresh_trace_has_a_name");
    for rt in &rts {
        let dll = crate::profiler::workload(rt, &mcs, "event-names");
        let dir = dll.parent().unwrap().join("event-names-trace");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = std::process::Command::new(&rt.dotnet);
        c.arg(&dll).env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1").env("COMPlus_EnableEventPipe", "1").env("COMPlus_EventPipeConfig", format!("{RUNTIME}:0x60098:5"));
        // 3.1 wants an existing directory; 8.0 a file path.
        if rt.version.starts_with("3.") {
            c.env("COMPlus_EventPipeOutputPath", &dir);
        } else {
            c.env("DOTNET_EventPipeOutputPath", dir.join("trace.nettrace"));
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}: {}", rt.version, String::from_utf8_lossy(&o.stderr));
        let mut traces = Vec::new();
        traces_under(&dir, &mut traces);
        assert_eq!(traces.len(), 1, "{}: {traces:?}", rt.version);
        let stats = read_events(std::fs::File::open(&traces[0]).unwrap(), |_| {}).unwrap();
        let mut kinds: Vec<_> = stats.events.keys().collect();
        kinds.sort();
        for (provider, id, version) in &kinds {
            assert!(event_name(provider, *id).is_some(), "{}: {provider} {id} v{version} has no name", rt.version);
        }
        println!("{}: {} kinds of events, all named", rt.version, kinds.len());
        assert!(kinds.iter().any(|(p, id, _)| p == RUNDOWN && *id == 150), "{}: no rundown maps", rt.version);
    }
}

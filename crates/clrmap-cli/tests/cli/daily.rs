//! Daily use: event names in `trace stats`, `--json` on `trace stats`, `il at` and
//! `meta specs`.

use crate::support::*;

#[test]
fn trace_stats_names_events_and_speaks_json() {
    let o = clrmap(&["trace", "stats", "examples/frames.nettrace"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    // Names from the runtime's manifest (ClrEtwAll.man) for the ids clrmap reads.
    for line in ["Microsoft-Windows-DotNETRuntime 143 v1 MethodLoadVerbose", "Microsoft-Windows-DotNETRuntime 190 v1 MethodILToNativeMap", "Microsoft-Windows-DotNETRuntime 152 v2 ModuleLoad"] {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
    let o = clrmap(&["trace", "stats", "examples/frames.nettrace", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["bytes"], 499854);
    let events = v["events"].as_array().unwrap();
    let maps = events.iter().find(|e| e["name"] == "MethodILToNativeMap").unwrap();
    let loads = events.iter().find(|e| e["name"] == "MethodLoadVerbose").unwrap();
    // A map for most jitted method loads (`il dump` finds 136 bodies with maps in this trace).
    let (maps, loads) = (maps["count"].as_u64().unwrap(), loads["count"].as_u64().unwrap());
    assert!(maps > 100 && maps <= loads, "{maps} maps, {loads} loads");
    let dumped = stdout(&clrmap(&["il", "dump", "examples/frames.nettrace"])).lines().filter(|l| l.starts_with("0x")).count() as u64;
    assert_eq!(dumped, maps);
}

#[test]
fn il_at_and_meta_specs_speak_json() {
    let o = clrmap(&["il", "at", "examples/frames.nettrace", "0x7F8CE5225927", "--return-address", "--json", "--symbol-path", "tests/fixtures/frames/debug-embedded"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((v["method"].as_str(), v["line"].as_u64(), v["il_offset"].as_u64()), (Some("Frames.Nested::Inner"), Some(105), Some(1)));
    let text = stdout(&clrmap(&["meta", "specs", "tests/fixtures/frames/debug-portable/Frames.dll"]));
    let json = stdout(&clrmap(&["meta", "specs", "tests/fixtures/frames/debug-portable/Frames.dll", "--json"]));
    assert_eq!(text.lines().count(), json.lines().count());
    let mut method_specs = 0;
    for (t, j) in text.lines().zip(json.lines()) {
        let v: serde_json::Value = serde_json::from_str(j).unwrap();
        let (token, rest) = t.split_once('\t').unwrap();
        assert_eq!(format!("0x{:08X}", v["token"].as_u64().unwrap()), token);
        if token.starts_with("0x2B") {
            // A MethodSpec: `text` keeps the arguments alone; the text line is `full_name`, the
            // method's `name`, the arguments, then its parameter types.
            let (name, args) = (v["name"].as_str().unwrap(), v["text"].as_str().unwrap());
            assert_eq!(v["full_name"].as_str(), Some(rest));
            assert!(rest.starts_with(&format!("{name}{args}(")) && rest.ends_with(')'), "{rest}");
            assert!(matches!(v["method"].as_u64().unwrap() >> 24, 0x06 | 0x0A), "{j}");
            method_specs += 1;
        } else {
            assert_eq!(v["text"].as_str(), Some(rest));
            assert!(v.get("method").is_none() && v.get("full_name").is_none(), "{j}");
        }
    }
    assert_eq!(method_specs, 21);
    assert!(text.contains("\n0x2B00000C\tclass Frames.Box`1<string>::Map<int32>(class [System.Private.CoreLib]System.Func`2<!0,!!0>)\n"), "{text}");
    // The streaming printer says what the library's `spec_lines` says.
    let bytes = std::fs::read(repo_root().join("tests/fixtures/frames/debug-portable/Frames.dll")).unwrap();
    let md = clrmap::metadata::Metadata::parse(&bytes).unwrap();
    let lines: Vec<String> = clrmap::metadata::spec_lines(&md, &md).iter().map(|l| format!("0x{:08X}\t{}", l.token, l.full_text().unwrap())).collect();
    assert_eq!(text.lines().collect::<Vec<_>>(), lines);
}

#[test]
fn il_dump_filters_by_module_and_suggests_near_names() {
    let frames = stdout(&clrmap(&["il", "dump", "examples/frames.nettrace", "--module", "Frames.dll"]));
    let all = stdout(&clrmap(&["il", "dump", "examples/frames.nettrace"]));
    let heads = |t: &str| t.lines().filter(|l| l.starts_with("0x")).map(str::to_owned).collect::<Vec<_>>();
    let (frames, all) = (heads(&frames), heads(&all));
    assert!(!frames.is_empty() && frames.len() < all.len());
    assert!(frames.iter().all(|l| l.contains("  Frames.dll  ")), "{frames:?}");
    assert_eq!(frames.len(), all.iter().filter(|l| l.contains("  Frames.dll  ")).count());
    // Type::Method without the namespace finds the method; a misspelt name is answered with
    // the near ones.
    let o = clrmap(&["il", "dump", "examples/frames.nettrace", "--method", "Nested::Inner"]);
    assert!(stdout(&o).starts_with("0x06000008 Frames.Nested::Inner(int32)  start 0x7F8CE5225900  size 58  Frames.dll"), "{}", stdout(&o));
    let o = clrmap(&["il", "dump", "examples/frames.nettrace", "--method", "Frames.Nested::Innr"]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).ends_with("; near names: Frames.Nested::Inner\n"), "{}", stderr(&o));
}

#[test]
#[ignore = "needs .NET"]
fn bodies_carry_their_parameter_types() {
    // R2R: from the method's own signature in metadata; overloads are told apart.
    let corelib = std::path::PathBuf::from(corelib("3.1"));
    let o = clrmap(&["il", "dump", corelib.to_str().unwrap(), "--method", "System.AppContext::Setup", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["methods"][0]["name"], "System.AppContext::Setup");
    // Setup(char** pNames, char** pValues, int count) in AppContext.CoreCLR.cs.
    assert_eq!(v["methods"][0]["full_name"], "System.AppContext::Setup(char**,char**,int32)");
    let o = clrmap(&["il", "dump", corelib.to_str().unwrap(), "--method", "System.Math::Max", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let mut overloads: Vec<&str> = v["methods"].as_array().unwrap().iter().map(|m| m["full_name"].as_str().unwrap()).collect();
    overloads.sort_unstable();
    overloads.dedup();
    assert!(overloads.contains(&"System.Math::Max(int32,int32)") && overloads.contains(&"System.Math::Max(float64,float64)"), "{overloads:?}");
    // R2R instantiations (section 109): the type's arguments from the instantiation signature,
    // in text and in JSON; `name` stays as docs/output.md#il-to-native-maps has it.
    let o = clrmap(&["il", "dump", corelib.to_str().unwrap(), "--method", "System.Collections.Generic.List`1::Add", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let adds = v["methods"].as_array().unwrap();
    assert!(adds.iter().all(|m| m["name"] == "System.Collections.Generic.List`1::Add"));
    let mut full: Vec<&str> = adds.iter().map(|m| m["full_name"].as_str().unwrap()).collect();
    full.sort_unstable();
    full.dedup();
    assert_eq!(full.len(), adds.len(), "{full:?}");
    assert!(full.contains(&"System.Collections.Generic.List`1<int32>::Add(!0)"), "{full:?}");
    let text = stdout(&clrmap(&["il", "dump", corelib.to_str().unwrap(), "--method", "System.Collections.Generic.List`1::Add"]));
    assert!(text.lines().any(|l| l.contains(" System.Collections.Generic.List`1<class System.__Canon>::Add(!0)  rva 0x")), "{text}");
    // A trace: the same notation as an image and a capture, with the instantiation
    // (the runtime's own text for it is `Frames.Box`1[System.Int32]`).
    let text = stdout(&clrmap(&["il", "dump", "examples/frames.nettrace", "--module", "Frames.dll"]));
    assert!(text.contains(" Frames.Box`1<int32>::Make(!0)  "), "{text}");
    assert!(!text.contains("[System.Int32]"), "{text}");
}

#[test]
fn trace_bodies_say_their_kind_and_tier_in_one_vocabulary() {
    // The example trace ran Frames' debug build with TieredCompilation off (its runtimeconfig):
    // the JIT compiles a debuggable assembly's methods with MinOpts and everything else fully
    // optimized, and the trace's MethodFlags say so (bits 7-9), with the "jitted" bit set.
    let v: serde_json::Value = serde_json::from_str(&stdout(&clrmap(&["il", "dump", "examples/frames.nettrace", "--json"]))).unwrap();
    let methods = v["methods"].as_array().unwrap();
    let (mut own, mut optimized, mut others) = (0, 0, 0);
    for m in methods {
        assert_eq!(m["kind"], "jit", "{m}");
        if m["module"] == "Frames.dll" {
            assert_eq!(m["tier"], "minopt", "{m}");
            own += 1;
        } else {
            others += 1;
            optimized += usize::from(m["tier"] == "optimized");
        }
    }
    assert!(own >= 50 && optimized * 10 >= others * 9, "{own} own, {optimized} of {others} optimized");
    // Text: module, kind and tier after the size.
    let text = stdout(&clrmap(&["il", "dump", "examples/frames.nettrace", "--module", "Frames.dll"]));
    assert!(text.lines().filter(|l| l.starts_with("0x")).all(|l| l.ends_with("  Frames.dll  jit minopt")), "{text}");
}

#[test]
fn perf_files_from_a_trace_need_no_pid() {
    // The trace's Trace object names its process: the jitdump is that process's, and every body
    // in `il dump --json` carries the same pid.
    let dir = std::env::temp_dir().join(format!("clrmap-daily-perf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dump = dir.join("jit.dump");
    let o = clrmap(&["perf", "jitdump", "examples/frames.nettrace", "-o", dump.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout(&clrmap(&["il", "dump", "examples/frames.nettrace", "--json"]))).unwrap();
    let pids: std::collections::BTreeSet<u64> = v["methods"].as_array().unwrap().iter().map(|m| m["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 1);
    let header = std::fs::read(&dump).unwrap();
    // jitdump header: magic, version, total size, ELF machine, pad1, pid (u32 at offset 20).
    let pid = u32::from_le_bytes(header[20..24].try_into().unwrap());
    assert_eq!(pids.into_iter().next(), Some(u64::from(pid)));
    let o = clrmap(&["perf", "map", "examples/frames.nettrace", "-o", dir.join("perf.map").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

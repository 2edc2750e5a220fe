//! `clrmap il dump | at | frame | vars` on real ReadyToRun images: tests/fixtures/r2r/Frames.dll
//! (Crossgen2 10.0.12, scripts/build-r2r-fixture.sh; its maps are proven equal to the live 10.0
//! runtime's below) and the 3.1 CoreLib (installed by scripts/install-dotnet.sh; mandatory when
//! CI=true).

use crate::support::*;

/// The ReadyToRun fixture: a .NET 10 image of Frames.cs, the same on every machine.
const IMAGE: &str = "tests/fixtures/r2r/Frames.dll";

#[test]
fn dump_json_has_the_contract_shape() {
    let o = clrmap(&["il", "dump", IMAGE, "--method", "Frames.Nested::Inner", "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let m = &v["methods"][0];
    // Token, RVA, code size and map as the live 10.0.12 runtime answers them for this body
    // (the_fixtures_maps_equal_the_live_10_runtimes below).
    assert_eq!(m["token"], 0x0600_0008);
    assert_eq!(m["code_size"], 14);
    assert_eq!(m["name"], "Frames.Nested::Inner");
    assert_eq!(m["rva"], 0x11940);
    assert_eq!(m["map"][0]["il"], "PROLOG");
    // Field order as in the contract (a parsed Value sorts keys, so check the text).
    assert!(stdout(&o).contains(r#"{"token":100663304,"rva":72000,"code_size":14,"name":"Frames.Nested::Inner","map":[{"il":"PROLOG","#), "{}", stdout(&o));
    assert_eq!(code(&clrmap(&["il", "dump", "Cargo.toml"])), Some(1));
}

#[test]
#[ignore = "needs .NET"]
fn the_fixtures_maps_equal_the_live_10_runtimes() {
    // Frames.dll's ReadyToRun code run by 10.0.12 under the profiler: every body the runtime ran
    // from the image (80 of its 101, instantiations included) has the map, code size and token
    // clrmap reads from the image at the same RVA.
    let rt = runtime("10.0");
    let dir = std::env::temp_dir().join(format!("clrmap-r2r-fixture-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo_root().join(IMAGE), dir.join("Frames.dll")).unwrap();
    std::fs::copy(repo_root().join("tests/fixtures/frames/release-portable/Frames.runtimeconfig.json"), dir.join("Frames.runtimeconfig.json")).unwrap();
    let so = repo_root().join("target/debug/libclrmap_profiler.so");
    let cap = dir.join("run.capture");
    let o = clrmap(&["profile", "-o", cap.to_str().unwrap(), "--profiler", so.to_str().unwrap(), "--", rt.dotnet.to_str().unwrap(), dir.join("Frames.dll").to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let dump: serde_json::Value = serde_json::from_str(&stdout(&clrmap(&["il", "dump", IMAGE, "--json"]))).unwrap();
    let ours: std::collections::HashMap<u64, &serde_json::Value> = dump["methods"].as_array().unwrap().iter().map(|m| (m["rva"].as_u64().unwrap(), m)).collect();
    let special = |il: &serde_json::Value| match il.as_str() {
        Some("PROLOG") => 0xFFFF_FFFE,
        Some("EPILOG") => 0xFFFF_FFFD,
        Some("NO_MAPPING") => 0xFFFF_FFFF,
        _ => il.as_u64().unwrap(),
    };
    let mut equal = 0;
    for line in std::fs::read_to_string(&cap).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        if r["kind"] != "r2r" || !r["module"].as_str().unwrap_or("").ends_with("/Frames.dll") {
            continue;
        }
        let rva = r["rva"].as_u64().unwrap();
        let m = ours.get(&rva).unwrap_or_else(|| panic!("the runtime ran a body at RVA {rva:#x} that clrmap does not list"));
        assert_eq!((&m["token"], &m["code_size"]), (&r["token"], &r["code_size"]), "{rva:#x}");
        let map: Vec<[u64; 3]> = m["map"].as_array().unwrap().iter().map(|e| [special(&e["il"]), e["native_start"].as_u64().unwrap(), e["native_end"].as_u64().unwrap()]).collect();
        let live: Vec<[u64; 3]> = r["map"].as_array().unwrap().iter().map(|e| [0, 1, 2].map(|i| e[i].as_u64().unwrap())).collect();
        assert_eq!(map, live, "{rva:#x}");
        equal += 1;
    }
    assert!(equal >= 70, "only {equal} bodies compared");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn at_resolves_an_rva_and_a_return_address() {
    // Nested::Inner is [0x11940, 0x1194E); 0x1194E-0x1194F is padding before Recurse at 0x11950
    // (its RUNTIME_FUNCTIONs, read by an independent reader of the table, and il dump agree).
    let o = clrmap(&["il", "at", IMAGE, "0x11948"]);
    assert!(stdout(&o).starts_with("0x06000008 Frames.Nested::Inner +0x8: IL 0x"), "{}", stdout(&o));
    let o = clrmap(&["il", "at", IMAGE, "0x11940"]);
    assert_eq!(stdout(&o), "0x06000008 Frames.Nested::Inner +0x0: PROLOG (IL 0)\n");
    assert_eq!(code(&clrmap(&["il", "at", IMAGE, "0x10"])), Some(1));
    // A return address of 0x11950 (Recurse's first byte) is a call at 0x1194F: in no method, not
    // Recurse's prolog. One byte further it is inside Recurse, and so is its call.
    let o = clrmap(&["il", "at", IMAGE, "0x11950"]);
    assert!(stdout(&o).starts_with("0x06000009 Frames.Nested::Recurse +0x0: PROLOG"), "{}", stdout(&o));
    assert_eq!(code(&clrmap(&["il", "at", IMAGE, "0x1194F"])), Some(1));
    let o = clrmap(&["il", "at", IMAGE, "0x11950", "--return-address"]);
    assert_eq!(code(&o), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("not_found"), "{}", stderr(&o));
    let o = clrmap(&["il", "at", IMAGE, "0x11951", "--return-address"]);
    assert!(stdout(&o).starts_with("0x06000009 Frames.Nested::Recurse +0x0: PROLOG"), "{}", stdout(&o));
}

#[test]
#[ignore = "needs .NET"]
fn vars_print_where_the_calling_convention_puts_the_arguments() {
    // The 3.1 CoreLib's AppContext::Setup(char** pNames, char** pValues, int count): at offset 0
    // the three arguments of this static method are where the System V x64 calling convention
    // puts them (rdi, rsi, rdx): an independent check of the register numbering; their names come
    // from the Param table.
    let corelib = corelib("3.1");
    let o = clrmap(&["il", "vars", &corelib, "--method", "0x06000099"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let body: Vec<&str> = text.lines().skip(1).collect();
    assert!(text.starts_with("0x06000099 System.AppContext::Setup  rva 0x"), "{text}");
    assert_eq!(
        body,
        [
            "  arg 0 pNames             [0x0, 0x1B)  rdi",
            "  arg 1 pValues            [0x0, 0x1B)  rsi",
            "  arg 2 count              [0x0, 0x1B)  rdx",
            "  local 0                  [0x22, 0x6D)  r12",
            "  arg 2 count              [0x1B, 0x75)  rbx",
            "  arg 0 pNames             [0x1B, 0x75)  r14",
            "  arg 1 pValues            [0x1B, 0x75)  r15",
        ]
    );
    let o = clrmap(&["il", "vars", &corelib, "--method", "0x06000099", "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["vars"][0], serde_json::json!({"number": 0, "kind": "arg", "index": 0, "name": "pNames", "start": 0, "end": 27, "loc": {"kind": "reg", "reg": 7}}));
    assert_eq!(v["vars"][3]["kind"], "local");
}

#[test]
fn profile_never_overwrites_a_file_that_is_not_a_capture() {
    let dir = std::env::temp_dir().join("clrmap-profile-o");
    std::fs::create_dir_all(&dir).unwrap();
    let precious = dir.join("Program.dll");
    std::fs::write(&precious, b"MZ not a capture").unwrap();
    let o = clrmap(&["profile", "-o", precious.to_str().unwrap(), "--profiler", "Cargo.toml", "--", "true"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a clrmap capture"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&precious).unwrap(), b"MZ not a capture");
}

#[test]
fn il_frame_answers_get_frame_props() {
    // More::Run's main body is [0x11B50, 0x11DBE), followed by four funclets (0x11DBE, 0x11DCF,
    // 0x11DE6, 0x11E0C): the image's RUNTIME_FUNCTIONs, read by an independent reader of the table
    // (the library's frameprops test checks every funclet of the CoreLibs against the EH clauses).
    let o = clrmap(&["il", "frame", IMAGE, "0x11DBF", "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((v["code_start_rva"].as_u64(), v["parent_frame_start_rva"].as_u64(), v["funclet"].as_bool()), (Some(0x11DBE), Some(0x11B50), Some(true)));
    // Its parent's main body: a frame of its own, no parent; same method.
    let o = clrmap(&["il", "frame", IMAGE, "0x11B55", "--json"]);
    let w: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((w["code_start_rva"].as_u64(), w["parent_frame_start_rva"].as_u64(), &w["token"]), (Some(0x11B50), Some(0), &v["token"]));
    let o = clrmap(&["il", "frame", IMAGE, "0x11945"]);
    assert_eq!(stdout(&o), "0x11940 0x06000008 Frames.Nested::Inner (no parent frame)\n");
    // Padding between methods: in no frame.
    let o = clrmap(&["il", "frame", IMAGE, "0x1194E"]);
    assert_eq!(code(&o), Some(1));
    assert_eq!(stderr(&o), "error: not_found at RVA 0x1194E: expected an RVA inside a RUNTIME_FUNCTION of the image\n");
}

/// The first example of `clrmap il at --help` and `clrmap il frame --help`: run as written, it
/// prints the line the README shows under the same command, and the help's own text says so too.
/// The method is checked apart, from `il dump`: the RVA lies in that method's code (for a funclet,
/// the parent frame is the method's start).
#[test]
fn at_and_frame_help_examples_print_what_the_readme_shows() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let mut printed = Vec::new();
    for command in ["at", "frame"] {
        let help = stdout(&clrmap(&["il", command, "--help"]));
        let at = help.find("Example: `").unwrap() + "Example: `".len();
        let example = &help[at..at + help[at..].find('`').unwrap()];
        let words: Vec<&str> = example.split_whitespace().collect();
        assert_eq!(words[..3], ["clrmap", "il", command], "{example}");
        let o = clrmap(&words[1..]);
        assert_eq!(code(&o), Some(0), "{example}: {}", stderr(&o));
        let line = stdout(&o).lines().next().unwrap_or_default().to_owned();
        let shown = readme.split(&format!("$ {example}\n")).nth(1).and_then(|rest| rest.lines().next()).unwrap_or_else(|| panic!("the README does not show `{example}`"));
        assert_eq!(line, shown, "{example}");
        assert!(help.split_whitespace().collect::<Vec<_>>().join(" ").contains(&format!("prints `{line}`")), "{example}: the help shows another line\n{help}");
        printed.push((words[words.len() - if command == "at" { 2 } else { 1 }].to_owned(), line));
    }
    // The methods, independently: each one's RVA and size from `il dump --json`.
    let dump: serde_json::Value = serde_json::from_str(&stdout(&clrmap(&["il", "dump", IMAGE, "--json"]))).unwrap();
    let method = |token: u64| dump["methods"].as_array().unwrap().iter().find(|m| m["token"] == token).unwrap().clone();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    // `il at ADDRESS --return-address` looks up the call before ADDRESS.
    let (address, line) = &printed[0];
    let token = hex(line.split_whitespace().next().unwrap());
    let m = method(token);
    let (rva, size) = (m["rva"].as_u64().unwrap(), m["code_size"].as_u64().unwrap());
    assert!((rva..rva + size).contains(&(hex(address) - 1)), "{line}: {m}");
    assert!(line.contains(m["name"].as_str().unwrap()), "{line}: {m}");
    let (_, line) = &printed[1];
    let token = hex(line.split(" of ").nth(1).unwrap().split_whitespace().next().unwrap());
    let m = method(token);
    assert!(line.contains(m["name"].as_str().unwrap()) && line.ends_with(&format!("(parent frame at 0x{:X})", m["rva"].as_u64().unwrap())), "{line}: {m}");
}

//! `clrmap il dump | at | vars` on the real 3.1.23 CoreLib (installed by scripts/install-dotnet.sh;
//! mandatory when CI=true).

use crate::support::*;

fn corelib() -> Option<String> {
    Some(crate::support::corelib("3.1"))
}

#[test]
#[ignore = "needs .NET"]
fn dump_json_has_the_contract_shape() {
    let Some(corelib) = corelib() else { return };
    let o = clrmap(&["il", "dump", &corelib, "--method", "System.AppContext::Setup", "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let m = &v["methods"][0];
    // Contract §4's example method: token, code size and map as the runtime returns them.
    assert_eq!(m["token"], 100663449);
    assert_eq!(m["code_size"], 132);
    assert_eq!(m["name"], "System.AppContext::Setup");
    // The entry RUNTIME_FUNCTION of token 0x06000099 begins at 0x393480 in this image.
    assert_eq!(m["rva"], 0x393480);
    assert_eq!(m["map"][0], serde_json::json!({"il":"PROLOG","native_start":0,"native_end":27}));
    assert_eq!(m["map"][1], serde_json::json!({"il":0,"native_start":27,"native_end":30}));
    // Field order as in the contract (a parsed Value sorts keys, so check the text).
    assert!(stdout(&o).contains(r#"{"token":100663449,"rva":3748992,"code_size":132,"name":"System.AppContext::Setup","map":[{"il":"PROLOG","#));
}

#[test]
#[ignore = "needs .NET"]
fn at_resolves_an_rva_and_vars_print() {
    let Some(corelib) = corelib() else { return };
    // 0x393480 + 0x1C lies in IL 0's range [0x1B, 0x1E).
    let o = clrmap(&["il", "at", &corelib, "0x39349C"]);
    assert_eq!(stdout(&o), "0x06000099 System.AppContext::Setup +0x1C: IL 0x0000\n", "{}", stderr(&o));
    // As a return address, 0x39349B is the call before it: still IL 0; the prolog answers IL 0.
    let o = clrmap(&["il", "at", &corelib, "0x393480"]);
    assert_eq!(stdout(&o), "0x06000099 System.AppContext::Setup +0x0: PROLOG (IL 0)\n");
    assert_eq!(code(&clrmap(&["il", "at", &corelib, "0x10"])), Some(1));
    // il vars in full. At offset 0 the three arguments of this static method are where the
    // System V x64 calling convention puts them (rdi, rsi, rdx): an independent check of the
    // register numbering; their names come from the Param table.
    let o = clrmap(&["il", "vars", &corelib, "--method", "0x06000099"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "0x06000099 System.AppContext::Setup  rva 0x393480\n\
         \x20 arg 0 pNames             [0x0, 0x1B)  rdi\n\
         \x20 arg 1 pValues            [0x0, 0x1B)  rsi\n\
         \x20 arg 2 count              [0x0, 0x1B)  rdx\n\
         \x20 local 0                  [0x22, 0x6D)  r12\n\
         \x20 arg 2 count              [0x1B, 0x75)  rbx\n\
         \x20 arg 0 pNames             [0x1B, 0x75)  r14\n\
         \x20 arg 1 pValues            [0x1B, 0x75)  r15\n"
    );
    let o = clrmap(&["il", "vars", &corelib, "--method", "0x06000099", "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["vars"][0], serde_json::json!({"number": 0, "kind": "arg", "index": 0, "name": "pNames", "start": 0, "end": 27, "loc": {"kind": "reg", "reg": 7}}));
    assert_eq!(v["vars"][3]["kind"], "local");
    assert_eq!(code(&clrmap(&["il", "dump", "Cargo.toml"])), Some(1));
}

fn corelib80() -> Option<String> {
    Some(crate::support::corelib("8.0"))
}

#[test]
#[ignore = "needs .NET"]
fn a_return_address_belongs_to_the_method_of_the_call_before_it() {
    // .NET 8.0.4 CoreLib: List`1::Add's body starts at RVA 0x402DB0 and 0x402DAF is padding
    // after the method before it. A return address of 0x402DB0 is a call at 0x402DAF: in no
    // method, not List`1::Add's prolog (issue 14).
    let Some(corelib) = corelib80() else { return };
    let o = clrmap(&["il", "at", &corelib, "0x402DB0"]);
    assert!(stdout(&o).starts_with("0x06008373 System.Collections.Generic.List`1::Add +0x0: PROLOG"), "{}", stdout(&o));
    assert_eq!(code(&clrmap(&["il", "at", &corelib, "0x402DAF"])), Some(1));
    let o = clrmap(&["il", "at", &corelib, "0x402DB0", "--return-address"]);
    assert_eq!(code(&o), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("not_found"), "{}", stderr(&o));
    // One byte further, the return address is inside Add, and so is its call.
    let o = clrmap(&["il", "at", &corelib, "0x402DB1", "--return-address"]);
    assert!(stdout(&o).starts_with("0x06008373 System.Collections.Generic.List`1::Add +0x0: PROLOG"), "{}", stdout(&o));
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
#[ignore = "needs .NET"]
fn il_frame_answers_get_frame_props() {
    // .NET 8.0.4 CoreLib: a funclet at 0x10AF92 whose method starts at 0x10AEB0 (found from the
    // RUNTIME_FUNCTION chain; the library test checks every funclet against the EH clauses).
    let Some(corelib) = corelib80() else { return };
    let o = clrmap(&["il", "frame", &corelib, "0x10AF93", "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((v["code_start_rva"].as_u64(), v["parent_frame_start_rva"].as_u64(), v["funclet"].as_bool()), (Some(0x10AF92), Some(0x10AEB0), Some(true)));
    // Its parent's main body: a frame of its own, no parent; same method.
    let o = clrmap(&["il", "frame", &corelib, "0x10AEB5", "--json"]);
    let w: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((w["code_start_rva"].as_u64(), w["parent_frame_start_rva"].as_u64(), &w["token"]), (Some(0x10AEB0), Some(0), &v["token"]));
    let o = clrmap(&["il", "frame", &corelib, "0x402DB5"]);
    assert_eq!(stdout(&o), "0x402DB0 0x06008373 System.Collections.Generic.List`1::Add (no parent frame)\n");
    // Padding between methods: in no frame.
    let o = clrmap(&["il", "frame", &corelib, "0x402DAF"]);
    assert_eq!(code(&o), Some(1));
    assert_eq!(stderr(&o), "error: not_found at RVA 0x402DAF: expected an RVA inside a RUNTIME_FUNCTION of the image\n");
}

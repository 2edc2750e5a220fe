//! `clrmap symbolize`, `il at` and `pdb lines` on the shipped example: `examples/frames.nettrace`
//! is an EventPipe trace of the Frames fixture (tests/fixtures/frames/debug-embedded, tiering
//! off) on .NET 8.0.4, and `examples/frames.stdout` is what the program printed in that same run:
//! for every frame of `new StackTrace(true)`, its token, native offset, IL offset, file, line and
//! column. The runtime's own lines are the expected answers.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::*;

const TRACE: &str = "examples/frames.nettrace";
const SYMBOLS: &str = "tests/fixtures/frames/debug-embedded";

/// Frames.dll's code starts in the trace, by token (one body each: tiering was off).
fn starts() -> HashMap<u32, u64> {
    let o = clrmap(&["il", "dump", TRACE, "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let mut seen: HashMap<u32, Vec<u64>> = HashMap::new();
    for m in v["methods"].as_array().unwrap() {
        if m["module"] == "Frames.dll" {
            seen.entry(m["token"].as_u64().unwrap() as u32).or_default().push(m["start"].as_u64().unwrap());
        }
    }
    seen.into_iter().filter(|(_, s)| s.len() == 1).map(|(t, s)| (t, s[0])).collect()
}

/// The runtime's frames of one capture point: (return address, method, file, line, column).
fn runtime_frames(capture: &str) -> Vec<(u64, String, String, u32, u32)> {
    let starts = starts();
    let text = std::fs::read_to_string(repo_root().join("examples/frames.stdout")).unwrap();
    text.lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| f[0] == "F" && f[1] == capture)
        .map(|f| {
            let token = u32::from_str_radix(&f[3][2..], 16).unwrap();
            let native: u64 = f[5].parse().unwrap();
            (starts[&token] + native, f[10].to_owned(), f[7].to_owned(), f[8].parse().unwrap(), f[9].parse().unwrap())
        })
        .collect()
}

fn symbolize_stdin(args: &[&str], input: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clrmap")).args(args).current_dir(repo_root()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn stdin_addresses_print_in_llvm_symbolizers_layout() {
    // llvm-symbolizer's documented output: per address, the function name, then
    // `file:line:column`, then an empty line; `??` and `??:0:0` when unknown (an address in no
    // body, or input that is not an address).
    let frames = runtime_frames("3");
    assert_eq!(frames.len(), 7, "capture 3 is seven frames deep");
    let mut input = String::new();
    let mut expected = String::new();
    for (address, method, file, line, column) in &frames {
        input.push_str(&format!("0x{address:x}\n"));
        expected.push_str(&format!("{method}\n{file}:{line}:{column}\n\n"));
    }
    input.push_str("0x10\nnot-an-address\n");
    expected.push_str("??\n??:0:0\n\n??\n??:0:0\n\n");
    let o = symbolize_stdin(&["symbolize", TRACE, "--symbol-path", SYMBOLS, "--return-address"], &input);
    assert_eq!(stdout(&o), expected);
    // The input that is not an address is also named on stderr, and makes the exit status 1
    // (tests/cli/addresses.rs).
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(": line 9 is not-an-address: "), "{}", stderr(&o));
    // Addresses as arguments give the same text.
    let mut args = vec!["symbolize", TRACE, "--symbol-path", SYMBOLS, "--return-address"];
    let hex: Vec<String> = frames.iter().map(|f| format!("{}", f.0)).collect();
    args.extend(hex.iter().map(String::as_str));
    let o = clrmap(&args);
    let text = stdout(&o);
    assert!(expected.starts_with(&text) && text.matches("\n\n").count() == 7, "{text}");
}

#[test]
fn json_lines_follow_contract_section_5() {
    let frames = runtime_frames("3");
    let (address, method, file, line, column) = &frames[1];
    let o = clrmap(&["symbolize", "--json", TRACE, "--symbol-path", SYMBOLS, "--return-address", &address.to_string(), "0x10"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    // Field order as in the contract.
    assert!(
        lines[0]
            .starts_with(&format!(r#"{{"address":{address},"module":"Frames.dll","token":100663304,"method":"{method}","il_offset":1,"file":"{file}","line":{line},"column":{column},"end_line":"#)),
        "{}",
        lines[0]
    );
    assert_eq!(lines[1], r#"{"address":16,"module":null,"token":null,"method":null,"il_offset":null,"file":null,"line":null,"column":null,"end_line":null,"end_column":null}"#);
}

#[test]
fn il_at_prints_the_line_and_errors_are_clear() {
    let frames = runtime_frames("3");
    let (address, method, file, line, column) = &frames[1];
    let o = clrmap(&["il", "at", TRACE, &format!("0x{address:X}"), "--return-address", "--symbol-path", SYMBOLS]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with(&format!("0x06000008 {method} +0x26: IL 0x0001 at {file}:{line}:{column}\n")), "{}", stdout(&o));
    // A PDB that is not this module's is named as such: exit 1, kind pdb_mismatch.
    let o = clrmap(&["symbolize", TRACE, "--pdb", "tests/fixtures/frames/release-portable/Frames.pdb", "0x10"]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("pdb_mismatch"), "{}", stderr(&o));
    // 3.1's rule only makes sense for return addresses: bad usage.
    assert_eq!(code(&clrmap(&["symbolize", TRACE, "--clr31", "0x10"])), Some(2));
    // Not a source at all.
    assert_eq!(code(&clrmap(&["symbolize", "Cargo.toml", "0x10"])), Some(1));
}

#[test]
fn pdb_lines_lists_documents_and_points() {
    let o = clrmap(&["pdb", "lines", "tests/fixtures/frames/debug-portable/Frames.dll", "--method", "Nested::Inner"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    // The runtime says IL 1 of Inner is line 105, column 13 (examples/frames.stdout). With
    // --method, only the documents the method's points name are listed (Other.cs is not).
    assert_eq!(
        stdout(&o),
        "documents: 2\n    1  /_/src/Frames.cs\n0x06000008 Frames.Nested::Inner\n  IL 0x0000  /_/src/Frames.cs:104:9-104:10\n  IL 0x0001  /_/src/Frames.cs:105:13-105:29\n  IL 0x0007  /_/src/Frames.cs:106:13-106:26\n  IL 0x000D  /_/src/Frames.cs:107:9-107:10\n"
    );
    // The embedded PDB of the same source gives the same points; a standalone PDB works alone
    // (its methods named from the assembly beside it).
    let embedded = clrmap(&["pdb", "lines", "tests/fixtures/frames/debug-embedded/Frames.dll", "--method", "0x06000008"]);
    assert_eq!(stdout(&embedded), stdout(&o));
    let alone = clrmap(&["pdb", "lines", "tests/fixtures/frames/debug-portable/Frames.pdb", "--json"]);
    assert_eq!(code(&alone), Some(0), "{}", stderr(&alone));
    assert!(stdout(&alone).contains(r#"{"token":100663304,"name":"Frames.Nested::Inner","points":[{"il":0,"document":1,"start_line":104,"start_column":9,"end_line":104,"end_column":10}"#));
    // A Windows PDB is refused by name.
    let dir = std::env::temp_dir().join("clrmap-msf-test");
    std::fs::create_dir_all(&dir).unwrap();
    let msf = dir.join("Windows.pdb");
    std::fs::write(&msf, b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0 and more").unwrap();
    let o = clrmap(&["pdb", "lines", msf.to_str().unwrap()]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("unsupported_pdb"), "{}", stderr(&o));
}

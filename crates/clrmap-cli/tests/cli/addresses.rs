//! Addresses in, frames out: how `symbolize` and `il at` read what they are
//! given (stdin lines bounded in memory, one bad line one bad input, no sign, `--hex`), how text
//! output escapes strings from files and processes, and errors that echo the input and say what
//! to do instead.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

const TRACE: &str = "examples/frames.nettrace";
const SYMBOLS: &str = "tests/fixtures/frames/debug-embedded";
/// A return address in Frames.Nested::Inner (IL 1, /_/src/Frames.cs:105:13; see symbolize.rs).
const INNER: u64 = 0x7F8C_E522_5927;

fn temp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clrmap-cli-addresses-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Run `clrmap ARGS` with `input` on stdin.
fn with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clrmap")).args(args).current_dir(repo_root()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    o
}

/// The text answer for one good address, from the arguments.
fn answer(address: &str) -> String {
    let o = clrmap(&["symbolize", TRACE, "--symbol-path", SYMBOLS, "--return-address", address]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    stdout(&o)
}

const UNKNOWN: &str = "??\n??:0:0\n\n";

#[test]
fn each_bad_line_is_one_bad_input_and_the_stream_goes_on() {
    let inner = answer(&format!("0x{INNER:X}"));
    assert_eq!(inner, "Frames.Nested::Inner\n/_/src/Frames.cs:105:13\n\n");
    // Bare hex, a sign after 0x, a sign, bytes that are not UTF-8, and a good address last.
    let mut input = b"7f3c5fa31f93\n0x+7F8\n+16\n\0\n".to_vec();
    input.extend_from_slice(b"0x1\xff\n  0x");
    input.extend_from_slice(format!("{INNER:x}  \r\n").as_bytes());
    let args = ["symbolize", TRACE, "--symbol-path", SYMBOLS, "--return-address"];
    let o = with_stdin(&args, &input);
    // One answer per input, in order; the last one is the runtime's.
    assert_eq!(stdout(&o), format!("{}{inner}", UNKNOWN.repeat(5)), "{}", stderr(&o));
    assert_eq!(code(&o), Some(1), "some inputs were bad");
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 6, "{err}");
    // Each names its line, where it starts in stdin, and the input as given (escaped).
    assert_eq!(lines[0], "error: bad_address at offset 0: line 1 is 7f3c5fa31f93: hex needs 0x, or --hex to read bare hex (without it, digits alone are decimal)");
    assert!(lines[1].starts_with("error: bad_address at offset 13: line 2 is 0x+7F8: "), "{}", lines[1]);
    assert!(lines[2].starts_with("error: bad_address at offset 20: line 3 is +16: a sign"), "{}", lines[2]);
    assert!(lines[3].starts_with(r"error: bad_address at offset 24: line 4 is \x00: "), "{}", lines[3]);
    assert_eq!(lines[4], r"error: bad_address at offset 26: line 5 is 0x1\xff: not UTF-8 text");
    assert_eq!(lines[5], "error: bad_address: 5 of 6 inputs were not addresses (each is named above and answered ??)");

    // JSON: every line of stdout is JSON; a bad input is an error object in its place, carrying
    // the input.
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let o = with_stdin(&json_args, &input);
    assert_eq!(code(&o), Some(1));
    let out = stdout(&o);
    let values: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(values.len(), 6, "{out}");
    let inputs: Vec<&str> = values[..5].iter().map(|v| v["error"]["input"].as_str().unwrap()).collect();
    assert_eq!(inputs, ["7f3c5fa31f93", "0x+7F8", "+16", "\u{0}", "0x1\u{fffd}"]);
    let offsets: Vec<u64> = values[..5].iter().map(|v| v["error"]["offset"].as_u64().unwrap()).collect();
    assert_eq!(offsets, [0, 13, 20, 24, 26]);
    assert!(values[..5].iter().all(|v| v["error"]["kind"] == "bad_address" && v["error"]["message"].as_str().unwrap().starts_with("line ")));
    // Field order as the error object of docs/output.md#errors, with "input" before "message".
    assert!(out.starts_with(r#"{"error":{"kind":"bad_address","offset":0,"input":"7f3c5fa31f93","message":"line 1: hex needs 0x"#), "{out}");
    assert_eq!(values[5]["address"], INNER);
    assert_eq!(values[5]["line"], 105);
    // stderr: the summary, as one JSON error line.
    let summary: serde_json::Value = serde_json::from_str(stderr(&o).trim_end()).unwrap();
    assert_eq!(summary["error"]["kind"], "bad_address");

    // Arguments: the same rule, exit 1, and the good ones still answered.
    let o = clrmap(&["symbolize", TRACE, "--symbol-path", SYMBOLS, "--return-address", "+16", &INNER.to_string()]);
    assert_eq!(code(&o), Some(1));
    assert_eq!(stdout(&o), format!("{UNKNOWN}{inner}"));
    assert!(stderr(&o).starts_with("error: bad_address: argument 1 is +16: a sign is not part of a number\n"), "{}", stderr(&o));
    // An address in no body is not bad input: `??`, exit 0.
    let o = with_stdin(&args, b"0x10\n\n16\n");
    assert_eq!((code(&o), stdout(&o), stderr(&o)), (Some(0), UNKNOWN.repeat(2), String::new()));
}

/// A tool that drives `symbolize` as it drives llvm-symbolizer writes one address and waits for
/// its answer before the next: each answer (a bad input's too, its stderr line after it) reaches
/// stdout while stdin stays open.
///
/// stderr is sent into stdout's pipe (`2>&1`): the order of lines across two pipes read by two
/// threads is not observable, and CI once saw the stderr line first that way. In one pipe the
/// order is the order the command wrote in.
#[test]
fn each_answer_is_written_before_the_next_address_is() {
    use std::io::{BufRead, BufReader};
    let inner = answer(&format!("0x{INNER:X}"));
    let mut child = Command::new("sh")
        .args(["-c", "exec \"$0\" \"$@\" 2>&1", env!("CARGO_BIN_EXE_clrmap"), "symbolize", TRACE, "--symbol-path", SYMBOLS, "--return-address"])
        .current_dir(repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The merged lines, each as it comes, from a thread (a read never blocks the test).
    let (lines, from) = std::sync::mpsc::channel::<String>();
    let pipe = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || BufReader::new(pipe).lines().map_while(Result::ok).for_each(|l| drop(lines.send(l))));
    let deadline = Instant::now() + Duration::from_secs(60);
    let take = |n: usize| -> Vec<String> { (0..n).map(|_| from.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("an answer did not come while stdin was open")).collect() };
    let text = |got: &[String]| got.iter().map(|l| format!("{l}\n")).collect::<String>();
    for _ in 0..3 {
        writeln!(stdin, "0x{INNER:x}").unwrap();
        stdin.flush().unwrap();
        assert_eq!(text(&take(3)), inner);
    }
    // A bad input: its `??` answer first, then its line on stderr.
    writeln!(stdin, "+16").unwrap();
    stdin.flush().unwrap();
    let got = take(4);
    assert_eq!(text(&got[..3]), UNKNOWN, "{got:?}");
    assert!(got[3].starts_with("error: bad_address at offset "), "{got:?}");
    writeln!(stdin, "0x{INNER:x}").unwrap();
    stdin.flush().unwrap();
    assert_eq!(text(&take(3)), inner);
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert_eq!(status.code(), Some(1), "one input was bad");
}

#[test]
fn hex_reads_bare_hex_as_perf_script_prints_it() {
    let inner = answer(&format!("0x{INNER:X}"));
    // perf script -F ip prints each address as bare lowercase hex, indented.
    let o = with_stdin(&["symbolize", TRACE, "--symbol-path", SYMBOLS, "--return-address", "--hex"], format!("\t    {INNER:x}\n0x{INNER:x}\n").as_bytes());
    assert_eq!((code(&o), stdout(&o)), (Some(0), inner.repeat(2)), "{}", stderr(&o));
    // With --hex, digits alone are hex too; as arguments, and for il at.
    let o = clrmap(&["symbolize", TRACE, "--hex", "--symbol-path", SYMBOLS, "--return-address", "7F8CE5225927"]);
    assert_eq!(stdout(&o), inner);
    let decimal = clrmap(&["il", "at", TRACE, "--hex", "16"]);
    assert!(stderr(&decimal).contains("at address 0x16:"), "{}", stderr(&decimal));
    // Without it, bare hex is an error that says to use it.
    let o = clrmap(&["il", "at", TRACE, "7f8ce5225927"]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).starts_with("error: bad_address: 7f8ce5225927: not an address: hex needs 0x, or --hex"), "{}", stderr(&o));
    let o = clrmap(&["il", "at", TRACE, "0x+10", "--json"]);
    assert_eq!(code(&o), Some(1));
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim_end()).unwrap();
    assert_eq!((&v["error"]["kind"], &v["error"]["input"]), (&serde_json::json!("bad_address"), &serde_json::json!("0x+10")));
}

#[test]
fn an_overlong_line_is_one_bad_input_in_bounded_memory() {
    // 300 MB of digits with no newline, then a good address: under a 256 MB address-space limit
    // (the `limited` rule of hostile.rs for a stdin input), the line is skipped, not held.
    let script = format!(
        "ulimit -v {}; {{ head -c 300000000 /dev/zero | tr '\\0' 7; printf '\\n0x{INNER:x}\\n'; }} | exec timeout 20 '{}' symbolize {TRACE} --return-address --symbol-path {SYMBOLS}",
        256 * 1024,
        env!("CARGO_BIN_EXE_clrmap")
    );
    let t = Instant::now();
    let o = Command::new("sh").arg("-c").arg(&script).current_dir(repo_root()).output().unwrap();
    let took = t.elapsed();
    assert_eq!(code(&o), Some(1), "killed or failed after {took:?}: {}", stderr(&o));
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(stdout(&o), format!("{UNKNOWN}Frames.Nested::Inner\n/_/src/Frames.cs:105:13\n\n"));
    let first = stderr(&o).lines().next().unwrap().to_owned();
    assert_eq!(first, format!("error: bad_address at offset 0: line 1 is {}...: a line of 300000000 bytes, longer than 4096: not an address", "7".repeat(64)));
    // A line of exactly the limit is still read (and is bad only because it is no address).
    let mut line = vec![b' '; 4096 - 4];
    line.extend_from_slice(b"0x10\n");
    let o = with_stdin(&["symbolize", TRACE], &line);
    assert_eq!((code(&o), stdout(&o)), (Some(0), UNKNOWN.to_owned()), "{}", stderr(&o));
}

/// examples/frames.nettrace with Frames.Nested::Inner renamed `I` + newline + `ESC[m` (the
/// trace's method names are UTF-16 in its MethodLoad events).
fn forged_trace() -> PathBuf {
    let bytes = std::fs::read(repo_root().join(TRACE)).unwrap();
    let from: Vec<u8> = "Inner".encode_utf16().flat_map(u16::to_le_bytes).collect();
    let to: Vec<u8> = "I\n\u{1b}[m".encode_utf16().flat_map(u16::to_le_bytes).collect();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut hits = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(&from) {
            out.extend_from_slice(&to);
            i += from.len();
            hits += 1;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    assert!(hits > 0);
    temp("forged.nettrace", &out)
}

/// Frames.dll's embedded PDB with its document `Frames.cs` renamed to `F` + newline + `ESC[1m.cs`
/// (same length), written out as a standalone PDB (its id still matches the assembly).
fn forged_pdb() -> PathBuf {
    let dll = std::fs::read(repo_root().join(SYMBOLS).join("Frames.dll")).unwrap();
    let image = clrmap::pe::PeImage::parse(&dll).unwrap();
    let mut pdb = clrmap::pdb::embedded::embedded_pdb(&image).unwrap().unwrap();
    let at: Vec<usize> = pdb.windows(9).enumerate().filter(|(_, w)| w == b"Frames.cs").map(|(i, _)| i).collect();
    assert_eq!(at.len(), 1, "one document-name part Frames.cs");
    pdb[at[0]..at[0] + 9].copy_from_slice(b"F\n\x1b[1m.cs");
    temp("Frames.pdb", &pdb)
}

#[test]
fn text_output_escapes_control_characters() {
    let trace = forged_trace();
    let trace = trace.to_str().unwrap();
    let pdb = forged_pdb();
    let pdb = pdb.to_str().unwrap();
    let address = format!("0x{INNER:X}");
    // One frame is three lines, whatever the names hold: no forged frame, no raw ESC.
    let o = clrmap(&["symbolize", trace, "--return-address", &address]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), "Frames.Nested::I\\x0a\\x1b[m\n??:0:0\n\n".to_owned()));
    let o = clrmap(&["symbolize", trace, "--pdb", pdb, "--return-address", &address]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Frames.Nested::I\\x0a\\x1b[m\n/_/src/F\\x0a\\x1b[1m.cs:105:13\n\n");
    let o = clrmap(&["il", "at", trace, "--pdb", pdb, "--return-address", &address]);
    assert_eq!(stdout(&o), "0x06000008 Frames.Nested::I\\x0a\\x1b[m +0x26: IL 0x0001 at /_/src/F\\x0a\\x1b[1m.cs:105:13\n", "{}", stderr(&o));
    let o = clrmap(&["il", "dump", trace, "--module", "Frames.dll"]);
    assert!(stdout(&o).contains("0x06000008 Frames.Nested::I\\x0a\\x1b[m(int32)  start 0x"), "{}", stdout(&o));
    assert!(!stdout(&o).contains('\u{1b}'));
    // An error message that names what the file holds (near names) is escaped too.
    let o = clrmap(&["il", "dump", trace, "--method", "Frames.Nested::I\n\u{1b}[n"]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("near names: Frames.Nested::I\\x0a\\x1b[m"), "{}", stderr(&o));
    assert!(!stderr(&o).contains('\u{1b}'));
    // JSON keeps the strings exactly (serde_json's escapes).
    let o = clrmap(&["symbolize", trace, "--pdb", pdb, "--return-address", "--json", &address]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((v["method"].as_str(), v["file"].as_str()), (Some("Frames.Nested::I\n\u{1b}[m"), Some("/_/src/F\n\u{1b}[1m.cs")));
    // pdb lines: the document list and every point.
    let o = clrmap(&["pdb", "lines", pdb, "--method", "0x06000008"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("documents: 2\n    1  /_/src/F\\x0a\\x1b[1m.cs\n0x06000008 "), "{text}");
    assert!(text.contains("\n  IL 0x0001  /_/src/F\\x0a\\x1b[1m.cs:105:13-105:29\n"), "{text}");
    assert!(!text.contains('\u{1b}'));
}

#[test]
fn an_il_only_assembly_says_what_to_use_instead() {
    let o = clrmap(&["symbolize", "tests/fixtures/frames/debug-portable/Frames.dll", "0x10"]);
    assert_eq!(code(&o), Some(1));
    let err = stderr(&o);
    assert!(
        err.starts_with("error: bad_ready_to_run at offset 0: expected a ManagedNativeHeader (this is not a ReadyToRun image)\nnote: Frames.dll has no ReadyToRun code (an IL-only assembly)"),
        "{err}"
    );
    for way in ["--pid PID in place of the file", "`clrmap profile -o app.capture -- dotnet app.dll`", "`clrmap trace collect --pid PID -o app.nettrace`"] {
        assert!(err.contains(way), "{way}: {err}");
    }
    let o = clrmap(&["symbolize", "tests/fixtures/frames/debug-portable/Frames.dll", "0x10", "--json"]);
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim_end()).unwrap();
    assert_eq!(v["error"]["kind"], "bad_ready_to_run");
    assert!(v["error"]["message"].as_str().unwrap().contains("; note: Frames.dll has no ReadyToRun code"), "{v}");
    // il at and il dump too.
    for args in [&["il", "at", "tests/fixtures/frames/debug-portable/Frames.dll", "0x10"][..], &["il", "dump", "tests/fixtures/frames/debug-portable/Frames.dll"]] {
        let o = clrmap(args);
        assert_eq!(code(&o), Some(1));
        assert!(stderr(&o).contains("\nnote: Frames.dll has no ReadyToRun code (an IL-only assembly)"), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_missing_profiler_says_where_it_looked_and_how_to_build_it() {
    // A copy of the binary alone in a directory: no profiler beside it or above it.
    let dir = std::env::temp_dir().join(format!("clrmap-cli-noprofiler-{}", std::process::id()));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("clrmap");
    std::fs::copy(env!("CARGO_BIN_EXE_clrmap"), &exe).unwrap();
    let o = Command::new(&exe).args(["profile", "-o", "x.capture", "--", "true"]).env_remove("CLRMAP_PROFILER_PATH").current_dir(&dir).output().unwrap();
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let canonical = bin.canonicalize().unwrap();
    assert!(err.contains(&format!("it is not at {}/libclrmap_profiler.so nor at {}/../libclrmap_profiler.so", canonical.display(), canonical.display())), "{err}");
    assert!(err.contains("cargo build -p clrmap-profiler") && err.contains("--profiler PATH") && err.contains("CLRMAP_PROFILER_PATH"), "{err}");
    assert!(!dir.join("x.capture").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The two runtimes' CoreLibs (ReadyToRun images).
fn corelibs() -> [String; 2] {
    [corelib("3.1"), corelib("8.0")]
}

#[test]
#[ignore = "needs .NET"]
fn an_address_beyond_every_rva_is_echoed_and_explained() {
    for corelib in corelibs() {
        let o = clrmap(&["il", "at", &corelib, "0x123456789"]);
        assert_eq!(code(&o), Some(1));
        let err = stderr(&o);
        assert!(err.starts_with("error: not_found: 0x123456789: beyond every RVA: an image takes RVAs"), "{err}");
        assert!(!err.contains("0xFFFFFFFF"), "{err}");
        let o = clrmap(&["il", "at", &corelib, "4886718345", "--json"]);
        let v: serde_json::Value = serde_json::from_str(stderr(&o).trim_end()).unwrap();
        assert_eq!(v["error"]["input"], "4886718345");
        assert_eq!(v["error"]["kind"], "not_found");
        assert!(v["error"].get("rva").is_none(), "{v}");
        // symbolize answers ?? (an address in no body is no error) and says why, once.
        let o = clrmap(&["symbolize", &corelib, "0x123456789", "0x223456789"]);
        assert_eq!((code(&o), stdout(&o)), (Some(0), UNKNOWN.repeat(2)));
        assert_eq!(stderr(&o), "warning: 0x123456789 is beyond every RVA (answered ??): an image takes RVAs, offsets from its load address, not absolute addresses\n");
        // Inside the 32-bit range, the RVA is named as before.
        let o = clrmap(&["il", "at", &corelib, "0xFFFFFFF0"]);
        assert_eq!(stderr(&o), "error: not_found at RVA 0xFFFFFFF0: expected an RVA inside a method with a map\n");
    }
}

#[test]
#[ignore = "needs .NET"]
fn ps_rows_escape_the_command_line() {
    for rt in all_runtimes() {
        let host = rt.label();
        // Hot.dll runs for its first argument's seconds; the second is only carried along.
        let mut child = Command::new(&rt.dotnet).args(["tests/fixtures/perf/Hot.dll", "20", "a\nb\u{1b}[m"]).current_dir(repo_root()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let pid = child.id().to_string();
        let t = Instant::now();
        let mut row = None;
        while row.is_none() && t.elapsed() < Duration::from_secs(15) {
            std::thread::sleep(Duration::from_millis(300));
            let o = clrmap(&["ps"]);
            // The row and anything after it: a forged line would follow the row.
            let text = stdout(&o);
            row = text.lines().position(|l| l.split_whitespace().next() == Some(pid.as_str())).map(|i| text.lines().skip(i).collect::<Vec<_>>().join("\n"));
            row = row.filter(|r| r.contains("Hot.dll"));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let row = row.unwrap_or_else(|| panic!("{host}: no ps row for {pid}"));
        assert!(row.lines().next().unwrap().ends_with("Hot.dll 20 a\\x0ab\\x1b[m"), "{host}: {row}");
        assert!(!row.contains('\u{1b}'), "{host}: {row}");
    }
}

/// `bytes` with every `from` replaced by `to` (same length); asserts there was one at least.
fn patched(mut bytes: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at: Vec<usize> = bytes.windows(from.len()).enumerate().filter(|(_, w)| *w == from).map(|(i, _)| i).collect();
    assert!(!at.is_empty());
    for i in at {
        bytes[i..i + to.len()].copy_from_slice(to);
    }
    bytes
}

#[test]
fn names_from_metadata_and_traces_are_escaped_in_text() {
    // Frames.dll with its type Frames.More renamed Frames.<newline><ESC>[m (#Strings holds
    // "More" once).
    let dll = std::fs::read(repo_root().join("tests/fixtures/frames/debug-portable/Frames.dll")).unwrap();
    let dll = temp("More.dll", &patched(dll, b"\0More\0", b"\0\n\x1b[m\0"));
    let dll = dll.to_str().unwrap();
    // meta specs: the MethodSpec line of More::Visit is one line, escaped.
    let o = clrmap(&["meta", "specs", dll]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("\n0x2B000002\tFrames.\\x0a\\x1b[m::Visit<string>(!!0)\n"), "{}", stdout(&o));
    assert!(!stdout(&o).contains('\u{1b}'));
    // JSON keeps the name exactly.
    let o = clrmap(&["meta", "specs", dll, "--json"]);
    assert!(stdout(&o).contains(r#""name":"Frames.\n\u001b[m::Visit""#), "{}", stdout(&o));
    // sig decode: CLASS TypeDef row 10 (Frames.More in the unpatched file).
    assert_eq!(stdout(&clrmap(&["sig", "decode", "12", "28", "--metadata", "tests/fixtures/frames/debug-portable/Frames.dll"])), "class Frames.More\n");
    let o = clrmap(&["sig", "decode", "12", "28", "--metadata", dll]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), "class Frames.\\x0a\\x1b[m\n".to_owned()), "{}", stderr(&o));
    // dict show and lookup --metadata: a dictionary of one item, CLASS TypeDef row 10.
    let map = {
        let mut b = clrmap::gdmap::DictionaryMapBuilder::new();
        b.add_payload(0x1000, &[0x01, 0x12, 0x28]).unwrap();
        temp("More.gdmap", &b.build().unwrap())
    };
    let map = map.to_str().unwrap();
    let o = clrmap(&["dict", "show", map, "--metadata", dll]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).ends_with("\n0x00001000  +0       class Frames.\\x0a\\x1b[m\n"), "{}", stdout(&o));
    let o = clrmap(&["dict", "lookup", map, "0x1000", "--metadata", dll]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), "class Frames.\\x0a\\x1b[m\n".to_owned()), "{}", stderr(&o));
    let o = clrmap(&["dict", "lookup", map, "0x1000", "--metadata", dll, "--json"]);
    assert!(stdout(&o).contains(r#""types":["class Frames.\n\u001b[m"]"#), "{}", stdout(&o));
    // trace stats: a provider name from the trace.
    let trace = std::fs::read(repo_root().join(TRACE)).unwrap();
    let utf16 = |s: &str| -> Vec<u8> { s.encode_utf16().flat_map(u16::to_le_bytes).collect() };
    let trace = temp("provider.nettrace", &patched(trace, &utf16("Microsoft-DotNETCore-EventPipe"), &utf16("Microsoft-DotNETCore-Event\n\u{1b}[m")));
    let o = clrmap(&["trace", "stats", trace.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("\n         1  Microsoft-DotNETCore-Event\\x0a\\x1b[m 1 v1"), "{}", stdout(&o));
    assert!(!stdout(&o).contains('\u{1b}'));
}

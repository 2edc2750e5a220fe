//! `clrmap stacktrace` (docs/output.md#printed-stack-traces): the binary over real runtime text, FILE and stdin, and over
//! hostile input under a memory and time limit.
//!
//! The oracle is the runtime: tests/dotnet/stacktrace/Shop.cs, compiled by Roslyn csc
//! (scripts/install-roslyn.sh), printed by 8.0.4 with ShowILOffsets on, with its PDB beside it and
//! without. The command over the second text, with a folder that holds only the PDB, must print
//! the first.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::support::{clrmap, code, corelib, dotnet_file, host, repo_root, stderr, stdout};

struct Shop {
    pdbs: PathBuf,
    with_text: String,
    without_text: PathBuf,
    text31: PathBuf,
}

const RUNTIMECONFIG: &str = r#"{
  "runtimeOptions": {
    "tfm": "netcoreapp3.1",
    "rollForward": "LatestMajor",
    "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.0" },
    "configProperties": {
      "System.Globalization.Invariant": true,
      "Switch.System.Diagnostics.StackTrace.ShowILOffsets": true
    }
  }
}
"#;

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Shop.dll (+ Lib.dll without a PDB) built by csc against 3.1.23, run on 8.0.4 with and without
/// its PDB, and on 3.1.23 without it; once per test run.
fn shop() -> &'static Shop {
    static SHOP: OnceLock<Shop> = OnceLock::new();
    SHOP.get_or_init(|| {
        let csc = dotnet_file("roslyn/csc");
        let dotnet80 = host("8.0");
        let dotnet31 = host("3.1");
        let corelib = corelib("3.1");
        let fw = Path::new(&corelib).parent().unwrap().to_path_buf();
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-stacktrace");
        let _ = std::fs::remove_dir_all(&base);
        let (with, without, pdbs) = (base.join("with"), base.join("without"), base.join("pdbs"));
        for d in [&with, &without, &pdbs] {
            std::fs::create_dir_all(d).unwrap();
        }
        let src = repo_root().join("tests/dotnet/stacktrace");
        let compile = |out: &Path, extra: &[&str], source: &str| {
            let mut c = Command::new(&csc);
            c.current_dir(&src).args(["-nologo", "-noconfig", "-nostdlib", "-langversion:7.3", "-deterministic"]);
            c.arg(format!("-pathmap:{}/=/_/src/", src.display()));
            for a in ["System.Private.CoreLib", "System.Runtime", "System.Console", "System.Collections", "System.Threading.Tasks", "System.Diagnostics.StackTrace", "System.Runtime.Extensions"] {
                c.arg(format!("-r:{}", fw.join(format!("{a}.dll")).display()));
            }
            c.args(extra).arg(format!("-out:{}", out.display())).arg(source);
            run_ok(&mut c);
        };
        compile(&with.join("Lib.dll"), &["-target:library", "-debug-"], "Lib.cs");
        let lib_ref = format!("-r:{}", with.join("Lib.dll").display());
        compile(&with.join("Shop.dll"), &["-target:exe", "-optimize-", "-debug:portable", &lib_ref], "Shop.cs");
        std::fs::write(with.join("Shop.runtimeconfig.json"), RUNTIMECONFIG).unwrap();
        for f in ["Shop.dll", "Lib.dll", "Shop.runtimeconfig.json"] {
            std::fs::copy(with.join(f), without.join(f)).unwrap();
        }
        std::fs::copy(with.join("Shop.pdb"), pdbs.join("Shop.pdb")).unwrap();
        let with_text = run_ok(Command::new(&dotnet80).arg(with.join("Shop.dll")));
        let without_text = base.join("without.txt");
        std::fs::write(&without_text, run_ok(Command::new(&dotnet80).arg(without.join("Shop.dll")))).unwrap();
        let text31 = base.join("text31.txt");
        std::fs::write(&text31, run_ok(Command::new(&dotnet31).arg(without.join("Shop.dll")))).unwrap();
        Shop { pdbs, with_text, without_text, text31 }
    })
}

/// `clrmap ARGS` with `input` on stdin.
fn clrmap_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clrmap")).args(args).current_dir(repo_root()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

#[test]
#[ignore = "needs .NET"]
fn a_file_and_stdin_give_the_text_the_runtime_prints_with_the_pdb() {
    let s = shop();
    let without = std::fs::read_to_string(&s.without_text).unwrap();
    assert_ne!(without, s.with_text);
    assert!(without.contains(" in Shop.dll:token 0x") && s.with_text.contains(" in /_/src/Shop.cs:line "), "{without}");
    let pdbs = s.pdbs.to_str().unwrap();
    let o = clrmap(&["stacktrace", s.without_text.to_str().unwrap(), "--symbol-path", pdbs]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), s.with_text);
    assert_eq!(stderr(&o), "");
    let o = clrmap_stdin(&["stacktrace", "--symbol-path", pdbs], without.as_bytes());
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), s.with_text);
    // --pdb names the PDB itself.
    let o = clrmap(&["stacktrace", s.without_text.to_str().unwrap(), "--pdb", s.pdbs.join("Shop.pdb").to_str().unwrap()]);
    assert_eq!(stdout(&o), s.with_text);
    // Without a PDB to be found, nothing changes.
    let o = clrmap(&["stacktrace", s.without_text.to_str().unwrap()]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), without));
}

#[test]
#[ignore = "needs .NET"]
fn what_31_prints_passes_through() {
    let s = shop();
    let text = std::fs::read_to_string(&s.text31).unwrap();
    assert!(!text.contains(":token") && text.contains("   at Shop.Pricing.Report(String where)\n"), "{text}");
    let o = clrmap(&["stacktrace", s.text31.to_str().unwrap(), "--symbol-path", s.pdbs.to_str().unwrap()]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), text));
}

#[test]
fn each_line_is_written_as_soon_as_it_is_read() {
    // A pipe that stays open: the first line must come out before the input ends.
    let mut child = Command::new(env!("CARGO_BIN_EXE_clrmap")).args(["stacktrace"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"   at A.B() in A.dll:token 0x6000001+0x1\n").unwrap();
    stdin.flush().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let n = std::io::Read::read(&mut stdout, &mut buf).unwrap_or(0);
        let _ = tx.send(buf[..n].to_vec());
    });
    let got = rx.recv_timeout(Duration::from_secs(10));
    drop(stdin);
    let _ = child.wait();
    assert_eq!(got.unwrap(), b"   at A.B() in A.dll:token 0x6000001+0x1\n");
}

#[test]
fn errors_and_warnings() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-stacktrace-errors");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("trace.txt");
    std::fs::write(&text, "x\n   at A.B() in Broken.dll:token 0x6000001+0x1\n   at A.C() in Broken.dll:token 0x6000002+0x2\n").unwrap();
    std::fs::write(dir.join("Broken.pdb"), b"not a PDB at all").unwrap();
    // A broken PDB: the text goes through whole, one warning names the file, status 0.
    let o = clrmap(&["stacktrace", text.to_str().unwrap(), "--symbol-path", dir.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).as_bytes(), std::fs::read(&text).unwrap());
    let err = stderr(&o);
    // The warning, and the note that nothing got a line.
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(err.starts_with("warning: Broken.dll: PDB not used: ") && err.contains("Broken.pdb") && err.contains("unsupported_pdb"), "{err}");
    assert_eq!(err.lines().nth(1), Some("note: none of the 2 frames printed without a PDB got a line: no PDB of their modules was found"), "{err}");
    // A FILE or a --pdb that cannot be read: status 1, naming it.
    let missing = dir.join("missing.txt");
    let o = clrmap(&["stacktrace", missing.to_str().unwrap()]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("missing.txt"), "{}", stderr(&o));
    let o = clrmap(&["stacktrace", text.to_str().unwrap(), "--pdb", dir.join("Nope.pdb").to_str().unwrap()]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("Nope.pdb") && stdout(&o).is_empty(), "{}", stderr(&o));
    // A --pdb that is not a portable PDB: status 1 with its kind, before any output.
    let o = clrmap(&["stacktrace", text.to_str().unwrap(), "--pdb", dir.join("Broken.pdb").to_str().unwrap()]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("unsupported_pdb") && stderr(&o).contains("Broken.pdb") && stdout(&o).is_empty(), "{}", stderr(&o));
    // A directory is not a file to read.
    let o = clrmap(&["stacktrace", dir.to_str().unwrap()]);
    assert_eq!(code(&o), Some(1));
    // Bad usage: 2.
    let o = clrmap(&["stacktrace", "--symbol-servers", "http://127.0.0.1:1/"]);
    assert_eq!(code(&o), Some(2));
}

#[test]
fn help_has_a_working_example() {
    let o = clrmap(&["stacktrace", "--help"]);
    assert_eq!(code(&o), Some(0));
    let help = stdout(&o);
    assert!(help.contains("--symbol-path <DIR>") && help.contains("--pdb <FILE>") && help.contains("ShowILOffsets"), "{help}");
    // The example runs as written, from the repository root, and prints what it says.
    let line = "   at Frames.Program.Main(String[] args) in Frames.dll:token 0x600003e+0x6\\n";
    let command = format!("printf '{line}' | clrmap stacktrace --symbol-path tests/fixtures/frames/debug-portable");
    assert!(help.contains(&command), "{help}");
    let printed = "   at Frames.Program.Main(String[] args) in /_/src/Frames.cs:line 696";
    assert!(help.contains(&format!("prints `{printed}`")), "{help}");
    let o = clrmap_stdin(&["stacktrace", "--symbol-path", "tests/fixtures/frames/debug-portable"], line.replace("\\n", "\n").as_bytes());
    assert_eq!((code(&o), stdout(&o)), (Some(0), format!("{printed}\n")));
    // The runtime's own answer for that frame (token 0x0600003E, IL offset 6), from the run that
    // wrote examples/frames.stdout with the PDB present.
    let oracle = std::fs::read_to_string(repo_root().join("examples/frames.stdout")).unwrap();
    let row: Vec<&str> = oracle.lines().map(|l| l.split('\t').collect::<Vec<_>>()).find(|f| f.len() > 8 && f[3] == "0x0600003E" && f[6] == "6").unwrap();
    assert_eq!((row[7], row[8]), ("/_/src/Frames.cs", "696"));
}

/// Run `clrmap stacktrace ARGS` under `ulimit -v` (256 MB + 4x the input) and a time limit, stdout
/// to `sink`; it must end with status 0 within `secs`.
fn limited(args: &[&str], input: u64, sink: &Path, secs: u64) -> Output {
    let kb = (256 << 20) / 1024 + 4 * input / 1024 + 1;
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!("ulimit -v {kb}; exec timeout 60 '{}' stacktrace {} > '{}'", env!("CARGO_BIN_EXE_clrmap"), quoted.join(" "), sink.display());
    let t = Instant::now();
    let o = Command::new("sh").arg("-c").arg(&script).current_dir(repo_root()).output().unwrap();
    let took = t.elapsed();
    assert_eq!(o.status.code(), Some(0), "{args:?}: after {took:?}, stderr {}", String::from_utf8_lossy(&o.stderr));
    assert!(took < Duration::from_secs(secs), "{args:?} took {took:?}");
    o
}

#[test]
fn hostile_text_stays_bounded_and_passes_through() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-stacktrace-hostile");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // One 16 MiB line with no newline that looks like a frame at its end, then 200,000 frames
    // each naming another module (each looked up in the symbol directory, none found).
    let input = dir.join("input.txt");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..16 {
            f.write_all(&chunk).unwrap();
        }
        f.write_all(b" at A.B() in A.dll:token 0x6000001+0x1\r\n").unwrap();
        for i in 0..200_000u32 {
            writeln!(f, "   at A.B() in M{i}.dll:token 0x6000001+0x{i:x}").unwrap();
        }
        f.write_all(b"\xff\xfe tail without a newline").unwrap();
    }
    let size = std::fs::metadata(&input).unwrap().len();
    let sink = dir.join("out.txt");
    // Far less than the input may be held: the limit is for the input, not 4x it.
    let o = limited(&[input.to_str().unwrap(), "--symbol-path", dir.to_str().unwrap()], size / 8, &sink, 60);
    assert_eq!(stderr(&o), "note: none of the 200000 frames printed without a PDB got a line: no PDB of their modules was found\n");
    assert!(std::fs::read(&sink).unwrap() == std::fs::read(&input).unwrap(), "the output differs from the input");
}

#[test]
fn a_line_larger_than_the_memory_limit_streams_through() {
    // 600 MiB in one line from a pipe, under a 256 MB limit: held whole, it could not fit.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-stacktrace-hostile-pipe");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kb = (256 << 20) / 1024;
    let script = format!(
        "set -o pipefail; (head -c 629145600 /dev/zero | tr '\\0' a; printf ' at A.B() in A.dll:token 0x6000001+0x1\\n') | (ulimit -v {kb}; exec timeout 60 '{}' stacktrace --symbol-path '{}') | wc -c",
        env!("CARGO_BIN_EXE_clrmap"),
        dir.display()
    );
    let t = Instant::now();
    let o = Command::new("bash").arg("-c").arg(&script).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "after {:?}: {}", t.elapsed(), String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), (629145600 + " at A.B() in A.dll:token 0x6000001+0x1\n".len()).to_string());
    assert!(t.elapsed() < Duration::from_secs(60), "took {:?}", t.elapsed());
}

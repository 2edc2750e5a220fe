//! `clrmap::stacktrace` (docs/output.md#printed-stack-traces): printed stack traces turned into source lines.
//!
//! The oracle is the runtime itself: tests/dotnet/stacktrace/Shop.cs, compiled here by Roslyn csc
//! (scripts/install-roslyn.sh) with a portable PDB, runs on each current runtime (8.0, 9.0, 10.0) with ShowILOffsets on, once
//! with the PDB beside it and once without. Rewriting the second text with a folder that holds
//! only the PDB must give the first, byte for byte. The hand-made PDB tests need no runtime.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use clrmap::pdb::writer::{PdbWriter, Point};
use clrmap::stacktrace::{Notice, Options, Rewriter, Stats};

use crate::support::{current_runtimes, repo_root, runtime};

/// Rewrite `text` with these symbol directories: the output, the notices as text, the stats.
fn rewrite(text: &[u8], dirs: &[&Path]) -> (Vec<u8>, Vec<String>, Stats) {
    rewrite_with(text, Options { dirs: dirs.iter().map(|d| d.to_path_buf()).collect(), pdbs: Vec::new(), servers: None }, 64 * 1024)
}

fn rewrite_with(text: &[u8], options: Options, buffer: usize) -> (Vec<u8>, Vec<String>, Stats) {
    let mut r = Rewriter::new(options).unwrap();
    let mut out = Vec::new();
    let mut notices = Vec::new();
    let stats = r.rewrite(std::io::BufReader::with_capacity(buffer, text), &mut out, &mut |n: Notice| notices.push(n.to_string())).unwrap();
    (out, notices, stats)
}

/// The program's outputs and the folders the tests use.
pub struct Shop {
    /// Shop.dll, Shop.pdb, Lib.dll (no PDB), the runtimeconfig.
    pub with: PathBuf,
    /// Shop.pdb alone.
    pub pdbs: PathBuf,
    /// Shop.dll built with its PDB embedded (the same source and options otherwise).
    pub embedded: PathBuf,
    /// Shop.dll of the debug build beside the Shop.pdb of a release build.
    pub other: PathBuf,
    /// Each current runtime's output (8.0, 9.0, 10.0) with the PDB, and without.
    pub current: Vec<Texts>,
    /// 3.1's output with the PDB, and without.
    pub text31_with: String,
    pub text31_without: String,
}

/// What one runtime printed.
pub struct Texts {
    /// Its version.
    pub version: String,
    /// The output with the PDB beside Shop.dll.
    pub with: String,
    /// The output without it.
    pub without: String,
}

/// The runtimeconfig of every build: the 3.1 framework rolled forward (so one file runs on
/// both runtimes), invariant globalization, and the switch that prints IL offsets.
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

fn csc() -> PathBuf {
    let home = std::env::var_os("CLRMAP_DOTNET_HOME").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".dotnet"));
    let csc = home.join("roslyn/csc");
    assert!(csc.is_file(), "{} is missing: run scripts/install-roslyn.sh", csc.display());
    csc
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Compile `sources` (in tests/dotnet/stacktrace) into `out` with Roslyn csc against the 3.1
/// framework, deterministically, with the source folder mapped to /_/src/.
fn compile(framework: &Path, out: &Path, extra: &[&str], sources: &[&str]) {
    let src = repo_root().join("tests/dotnet/stacktrace");
    let mut c = Command::new(csc());
    c.current_dir(&src).args(["-nologo", "-noconfig", "-nostdlib", "-langversion:7.3", "-deterministic"]);
    c.arg(format!("-pathmap:{}/=/_/src/", src.display()));
    for a in ["System.Private.CoreLib", "System.Runtime", "System.Console", "System.Collections", "System.Threading.Tasks", "System.Diagnostics.StackTrace", "System.Runtime.Extensions"] {
        c.arg(format!("-r:{}", framework.join(format!("{a}.dll")).display()));
    }
    c.args(extra).arg(format!("-out:{}", out.display())).args(sources);
    run_ok(&mut c);
}

/// Build Shop (and Lib) once per test run, and run it on both runtimes.
pub fn shop() -> &'static Shop {
    static SHOP: OnceLock<Shop> = OnceLock::new();
    SHOP.get_or_init(|| {
        let rt31 = runtime("3.1");
        let fw = &rt31.framework;
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stacktrace");
        let _ = std::fs::remove_dir_all(&base);
        let dirs: Vec<PathBuf> = ["with", "without", "pdbs", "embedded", "release", "other"].iter().map(|d| base.join(d)).collect();
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        let [with, without, pdbs, embedded, release, other] = <[PathBuf; 6]>::try_from(dirs).unwrap();
        let lib = with.join("Lib.dll");
        compile(fw, &lib, &["-target:library", "-debug-"], &["Lib.cs"]);
        let lib_ref = format!("-r:{}", lib.display());
        compile(fw, &with.join("Shop.dll"), &["-target:exe", "-optimize-", "-debug:portable", &lib_ref], &["Shop.cs"]);
        compile(fw, &embedded.join("Shop.dll"), &["-target:exe", "-optimize-", "-debug:embedded", &lib_ref], &["Shop.cs"]);
        compile(fw, &release.join("Shop.dll"), &["-target:exe", "-optimize+", "-debug:portable", &lib_ref], &["Shop.cs"]);
        std::fs::write(with.join("Shop.runtimeconfig.json"), RUNTIMECONFIG).unwrap();
        for f in ["Shop.dll", "Lib.dll", "Shop.runtimeconfig.json"] {
            std::fs::copy(with.join(f), without.join(f)).unwrap();
        }
        std::fs::copy(with.join("Shop.pdb"), pdbs.join("Shop.pdb")).unwrap();
        std::fs::copy(with.join("Shop.dll"), other.join("Shop.dll")).unwrap();
        std::fs::copy(release.join("Shop.pdb"), other.join("Shop.pdb")).unwrap();
        let run = |dotnet: &Path, dir: &Path| run_ok(Command::new(dotnet).arg(dir.join("Shop.dll")));
        Shop {
            current: current_runtimes().iter().map(|rt| Texts { version: rt.version.clone(), with: run(&rt.dotnet, &with), without: run(&rt.dotnet, &without) }).collect(),
            text31_with: run(&rt31.dotnet, &with),
            text31_without: run(&rt31.dotnet, &without),
            with,
            pdbs,
            embedded,
            other,
        }
    })
}

/// The lines of a text that are frames printed without a PDB.
fn token_frames(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.contains(":token 0x")).collect()
}

#[test]
#[ignore = "needs .NET"]
fn the_text_without_the_pdb_becomes_the_text_with_it() {
    let s = shop();
    for t in &s.current {
        // What the runtime printed: every kind of frame the test is about, in both forms.
        for want in [
            "g__Local|",
            "<Report>b__",
            "Convert[U]",
            "Nested.Deeper.Fail",
            "Items()+MoveNext()",
            "Pricing.Inner(Int32 n)",
            "Pricing.LoadAsync(Int32 n)",
            "AsyncMethodBuilderCore.Start",
            "(Inner Exception #1)",
            "<---",
        ] {
            assert!(t.with.contains(want) && t.without.contains(want), "{want} missing:\n{}", t.without);
        }
        assert!(t.with.contains(" in /_/src/Shop.cs:line "), "{}", t.with);
        assert!(!t.without.contains("Shop.cs"), "{}", t.without);
        // Tokens and offsets with a-f digits among the frames to rewrite.
        let shop_frames: Vec<&str> = token_frames(&t.without).into_iter().filter(|l| l.contains(" in Shop.dll:token ")).collect();
        let hex_letters = |l: &&str| l.rsplit(":token 0x").next().unwrap().bytes().any(|b| (b'a'..=b'f').contains(&b));
        assert!(shop_frames.iter().filter(|l| hex_letters(l)).count() >= 5, "{shop_frames:#?}");
        // Lib.dll (no PDB) and framework frames keep their tokens in both runs; so do the kickoff
        // methods of async methods run synchronously (the compiler gives them no sequence points).
        for kept in [" in Lib.dll:token 0x6000001+0x1", " in System.Private.CoreLib.dll:token 0x", "SyncPart(Int32 depth) in Shop.dll:token 0x"] {
            assert!(t.with.contains(kept), "{kept}:\n{}", t.with);
        }

        let (out, notices, stats) = rewrite(t.without.as_bytes(), &[&s.pdbs]);
        assert_eq!(String::from_utf8(out).unwrap(), t.with);
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(stats.frames as usize, token_frames(&t.without).len());
        assert_eq!(stats.rewritten as usize, token_frames(&t.without).len() - token_frames(&t.with).len());
        assert!(stats.rewritten >= 30, "{}: {stats:?}", t.version);
        println!("{}: {} frames, {} rewritten, equal to the runtime's own text with the PDB", t.version, stats.frames, stats.rewritten);
    }
}

#[test]
#[ignore = "needs .NET"]
fn upper_case_hex_crlf_and_one_byte_reads_give_the_same_lines() {
    let s = shop();
    for t in &s.current {
        // Hex digits upper-cased in every frame (as another printer might write them); the frames
        // left as they are keep their upper case.
        let upper = |text: &str| -> String {
            text.lines()
                .map(|l| match l.rfind(":token 0x") {
                    Some(i) => format!("{}:token 0x{}\n", &l[..i], l[i + 9..].to_ascii_uppercase().replace("+0X", "+0x")),
                    None => format!("{l}\n"),
                })
                .collect()
        };
        let text = upper(&t.without);
        assert_ne!(text, t.without);
        assert!(text.contains("+0xDB"), "{text}");
        let (out, _, _) = rewrite(text.as_bytes(), &[&s.pdbs]);
        assert_eq!(String::from_utf8(out).unwrap(), upper(&t.with));
        // CRLF line endings are kept, and lines split across reads are whole again.
        let crlf = t.without.replace('\n', "\r\n");
        let options = Options { dirs: vec![s.pdbs.clone()], pdbs: Vec::new(), servers: None };
        let (out, _, _) = rewrite_with(crlf.as_bytes(), options.clone(), 1);
        assert_eq!(String::from_utf8(out).unwrap(), t.with.replace('\n', "\r\n"));
        // No final newline.
        let cut = t.without.trim_end_matches('\n');
        let (out, _, _) = rewrite_with(cut.as_bytes(), options, 3);
        assert_eq!(String::from_utf8(out).unwrap(), t.with.trim_end_matches('\n'));
    }
}

#[test]
#[ignore = "needs .NET"]
fn an_assembly_found_gives_its_own_pdb_embedded_or_beside_it() {
    let s = shop();
    for t in &s.current {
        // The assembly and its PDB, as the runtime had them. Lib.dll is found too, and said to
        // have no PDB.
        let (out, notices, _) = rewrite(t.without.as_bytes(), &[&s.with]);
        assert_eq!(String::from_utf8(out).unwrap(), t.with);
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(notices[0].starts_with("Lib.dll: found ") && notices[0].contains("names no PDB"), "{notices:?}");
        // The same source built with its PDB embedded: the same tokens, offsets and lines.
        let (out, notices, _) = rewrite(t.without.as_bytes(), &[&s.embedded]);
        assert_eq!(String::from_utf8(out).unwrap(), t.with);
        assert!(notices.is_empty(), "{notices:?}");
        // The assembly beside a PDB of another build: its own PDB is looked for in every symbol
        // directory, and found in the second.
        let (out, notices, _) = rewrite(t.without.as_bytes(), &[&s.other, &s.pdbs]);
        assert_eq!(String::from_utf8(out).unwrap(), t.with);
        assert!(notices.is_empty(), "{notices:?}");
        // Alone, the assembly decides: the PDB beside it, which a lookup by name would take as is,
        // is of another build. Nothing changes, and the notice names the file passed over.
        let (out, notices, stats) = rewrite(t.without.as_bytes(), &[&s.other]);
        assert_eq!(String::from_utf8(out).unwrap(), t.without);
        assert_eq!(stats.rewritten, 0);
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(notices[0].starts_with("Shop.dll: found ") && notices[0].contains("another build"), "{notices:?}");
        assert!(notices[0].contains(&s.other.join("Shop.pdb").display().to_string()), "{notices:?}");
    }
}

#[test]
#[ignore = "needs .NET"]
fn a_named_pdb_stands_for_its_module() {
    let s = shop();
    for t in &s.current {
        let options = Options { dirs: Vec::new(), pdbs: vec![s.pdbs.join("Shop.pdb")], servers: None };
        let (out, _, _) = rewrite_with(t.without.as_bytes(), options, 4096);
        assert_eq!(String::from_utf8(out).unwrap(), t.with);
    }
}

#[test]
#[ignore = "needs .NET"]
fn what_31_prints_passes_through() {
    let s = shop();
    // 3.1 has no ShowILOffsets: without the PDB, a frame is just `at METHOD`, with nothing to
    // look up, and with it, the line (its own rule for return addresses, not 8.0's).
    assert!(!s.text31_without.contains(":token"), "{}", s.text31_without);
    assert!(s.text31_without.contains("   at Shop.Pricing.Report(String where)\n"), "{}", s.text31_without);
    assert!(s.text31_with.contains(" in /_/src/Shop.cs:line "), "{}", s.text31_with);
    for text in [&s.text31_without, &s.text31_with] {
        let (out, notices, stats) = rewrite(text.as_bytes(), &[&s.pdbs, &s.with]);
        assert_eq!(&String::from_utf8(out).unwrap(), text);
        assert!(notices.is_empty());
        assert_eq!((stats.frames, stats.rewritten), (0, 0));
    }
}

/// A PDB written by hand: Shop.pdb with 12 methods; method 0xb has points at IL 0 (line 10),
/// a hidden one at 4 and one at 0x1a (line 12); method 0xc has none.
fn hand_pdb() -> Vec<u8> {
    let mut w = PdbWriter::new([3; 20]);
    let name = w.document_name("/src/Shop.cs");
    let doc = w.document(name);
    let empty = w.blob(&[]);
    for _ in 0..10 {
        w.method(0, empty);
    }
    let points = w.points_blob(&[Point::visible(0, 10, 9, 10, 30), Point::hidden(4), Point::visible(0x1a, 12, 13, 12, 40)]);
    w.method(doc, points);
    w.method(0, empty);
    w.build()
}

#[test]
fn frames_of_a_hand_made_pdb() {
    let top = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stacktrace-hand");
    let _ = std::fs::remove_dir_all(&top);
    let dir = top.join("symbols");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("Shop.pdb"), hand_pdb()).unwrap();
    let text: &[u8] = b"Unhandled exception. System.Exception: \xff not UTF-8\r\n\
        \x20  at Shop.A.B(String in) in Shop.dll:token 0x600000b+0x1b\r\n\
        \x20  at Shop.A.B(String in) in Shop.dll:token 0x600000B+0x5\n\
        \x20  at Shop.A.B(String in) in Shop.dll:token 0x600000b+0x3\n\
        \x20  at Shop.A.C() in Shop.dll:token 0x600000c+0x0\n\
        \x20  at Shop.A.D() in Shop.dll:token 0x600000d+0x0\n\
        \x20  at Shop.A.B(String in) in Shop.dll:token 0x200000b+0x1b\n\
        \x20  at Other.E() in Other.dll:token 0x600000b+0x1b\n\
        \x20  at X.Y() in ../Shop.dll:token 0x600000b+0x1b\n\
        2024-05-01 12:00:00 ERROR at Shop.A.B(String in) in Shop.dll:token 0x600000b+0x1a<---";
    // The runtime's rule by hand: the last visible point at or before the offset (0x1b -> the
    // point at 0x1a, line 12; 5 and 3 -> the point at 0, line 10, the hidden one skipped); no
    // point, no such method, another table, another module, a name with a separator: unchanged.
    let want: &[u8] = b"Unhandled exception. System.Exception: \xff not UTF-8\r\n\
        \x20  at Shop.A.B(String in) in /src/Shop.cs:line 12\r\n\
        \x20  at Shop.A.B(String in) in /src/Shop.cs:line 10\n\
        \x20  at Shop.A.B(String in) in /src/Shop.cs:line 10\n\
        \x20  at Shop.A.C() in Shop.dll:token 0x600000c+0x0\n\
        \x20  at Shop.A.D() in Shop.dll:token 0x600000d+0x0\n\
        \x20  at Shop.A.B(String in) in Shop.dll:token 0x200000b+0x1b\n\
        \x20  at Other.E() in Other.dll:token 0x600000b+0x1b\n\
        \x20  at X.Y() in ../Shop.dll:token 0x600000b+0x1b\n\
        2024-05-01 12:00:00 ERROR at Shop.A.B(String in) in /src/Shop.cs:line 12<---";
    // A PDB outside the symbol directory, where `../Shop.dll` would lead.
    std::fs::write(top.join("Shop.pdb"), hand_pdb()).unwrap();
    let (out, notices, stats) = rewrite(text, &[&dir]);
    assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(want));
    assert_eq!(out, want);
    assert!(notices.is_empty(), "{notices:?}");
    assert_eq!(stats, Stats { lines: 10, frames: 9, rewritten: 4 });
}

#[test]
fn a_broken_pdb_is_named_once_and_its_frames_are_kept() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stacktrace-broken");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("Broken.pdb"), b"BSJB but nothing else").unwrap();
    let mut pdb = hand_pdb();
    let len = pdb.len();
    pdb.truncate(len / 2);
    std::fs::write(dir.join("Cut.pdb"), pdb).unwrap();
    let text =
        "   at A.B() in Broken.dll:token 0x6000001+0x1\n   at A.B() in Broken.dll:token 0x6000002+0x1\n   at A.B() in Cut.dll:token 0x600000b+0x1b\n   at A.B() in Cut.dll:token 0x600000b+0x1b\n";
    let (out, notices, stats) = rewrite(text.as_bytes(), &[&dir]);
    assert_eq!(String::from_utf8(out).unwrap(), text);
    assert_eq!(stats.rewritten, 0);
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(notices[0].starts_with("Broken.dll: PDB not used: ") && notices[0].contains(&dir.join("Broken.pdb").display().to_string()), "{notices:?}");
    assert!(notices[1].starts_with("Cut.dll: PDB not used: ") && notices[1].contains("Cut.pdb"), "{notices:?}");
}

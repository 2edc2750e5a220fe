//! Source-level features: `symbolize --context` with `--source-root` (a local file is
//! used only when its hash is the PDB's), `pdb sources --extract` (a name that climbs out is
//! refused) and `--verify` (one changed byte is spotted).

use std::path::PathBuf;

use crate::support::*;

const TRACE: &str = "examples/frames.nettrace";
const SYMBOLS: &str = "tests/fixtures/frames/debug-embedded";
const SAMPLE: &str = "tests/fixtures/sentry/symbolic/Sentry.Samples.Console.Basic.pdb";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-sources-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A Frames.dll address with a line in Frames.cs: the first one `symbolize --json` answers so
/// among the trace's method starts.
fn frames_address() -> (u64, u32) {
    let o = clrmap(&["il", "dump", TRACE, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for m in v["methods"].as_array().unwrap().iter().filter(|m| m["module"] == "Frames.dll") {
        let a = m["start"].as_u64().unwrap().to_string();
        let o = clrmap(&["symbolize", "--json", TRACE, "--symbol-path", SYMBOLS, &a]);
        let f: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
        if f["file"] == "/_/src/Frames.cs" {
            return (m["start"].as_u64().unwrap(), f["line"].as_u64().unwrap() as u32);
        }
    }
    panic!("no Frames.cs line in the trace");
}

#[test]
fn symbolize_context_reads_a_source_root_only_when_its_hash_is_the_pdbs() {
    let (address, line) = frames_address();
    let a = address.to_string();
    let source = std::fs::read_to_string(repo_root().join("tests/dotnet/frames/Frames.cs")).unwrap();
    let want: Vec<&str> = source.lines().collect();
    let at = line as usize - 1;
    let o = clrmap(&["symbolize", "--json", TRACE, "--symbol-path", SYMBOLS, "--context", "2", "--source-root", "/_/src=tests/dotnet/frames", &a]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let f: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(f["context_line"], want[at], "{f}");
    assert_eq!(f["pre_context"], serde_json::json!(want[at.saturating_sub(2)..at]), "{f}");
    assert_eq!(f["post_context"], serde_json::json!(want[at + 1..(at + 3).min(want.len())]), "{f}");
    // Text: llvm-symbolizer's two lines, then the source lines, then the empty line.
    let o = clrmap(&["symbolize", TRACE, "--symbol-path", SYMBOLS, "--context", "1", "--source-root", "/_/src=tests/dotnet/frames", &a]);
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[1].starts_with(&format!("/_/src/Frames.cs:{line}:")), "{text}");
    assert_eq!(lines[3], format!("> {line}| {}", want[at]), "{text}");
    assert_eq!(lines.last(), Some(&""), "{text}");
    // One byte changed: the file is not the PDB's, and gives no context.
    let dir = tmp("changed");
    let mut changed = source.clone().into_bytes();
    changed[0] ^= 0x20;
    std::fs::write(dir.join("Frames.cs"), changed).unwrap();
    let root = format!("/_/src={}", dir.display());
    let o = clrmap(&["symbolize", "--json", TRACE, "--symbol-path", SYMBOLS, "--context", "2", "--source-root", &root, &a]);
    let f: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(f.get("context_line").is_none(), "{f}");
    assert_eq!(f["line"], line);
    // Bounded.
    assert_eq!(code(&clrmap(&["symbolize", TRACE, "--context", "21", &a])), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pdb_sources_lists_extracts_and_verifies() {
    let dir = tmp("extract");
    let out = dir.join("out");
    let o = clrmap(&["pdb", "sources", SAMPLE, "--json", "--extract", out.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0]["language"], "csharp");
    assert_eq!(rows[0]["hash_algorithm"], "sha256");
    assert_eq!(rows[0]["embedded"]["size"], 204);
    let program = out.join("dev/sentry-dotnet/samples/Sentry.Samples.Console.Basic/Program.cs");
    assert_eq!(std::fs::read(&program).unwrap(), std::fs::read(repo_root().join("tests/fixtures/sentry/symbolic/contents/Program.cs")).unwrap());
    // --verify: the extracted tree matches; one changed byte differs; a missing file is missing.
    let root = out.join("dev/sentry-dotnet/samples/Sentry.Samples.Console.Basic");
    let verify = |root: &std::path::Path| {
        let o = clrmap(&["pdb", "sources", SAMPLE, "--json", "--verify", root.to_str().unwrap()]);
        let rows: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        (code(&o), rows.iter().map(|r| r["verify"]["status"].as_str().unwrap().to_owned()).collect::<Vec<_>>())
    };
    assert_eq!(verify(&root), (Some(0), vec!["match".to_owned(); 4]));
    let mut bytes = std::fs::read(&program).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&program, bytes).unwrap();
    std::fs::remove_file(root.join("obj/release/net6.0/Sentry.Samples.Console.Basic.AssemblyInfo.cs")).unwrap();
    assert_eq!(verify(&root), (Some(1), vec!["differ".to_owned(), "match".to_owned(), "match".to_owned(), "missing".to_owned()]));
    // Text names each status too.
    let o = clrmap(&["pdb", "sources", SAMPLE, "--verify", root.to_str().unwrap()]);
    assert!(stdout(&o).contains("verify: differ") && stdout(&o).contains("verify: missing"), "{}", stdout(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pdb_sources_refuses_a_name_that_climbs_out() {
    // The sample's names all start with the part `C:`; made `..`, every name climbs out.
    let mut bytes = std::fs::read(repo_root().join(SAMPLE)).unwrap();
    let at: Vec<usize> = bytes.windows(3).enumerate().filter(|(_, w)| *w == b"\x02C:").map(|(i, _)| i).collect();
    assert_eq!(at.len(), 1, "one name part C:");
    bytes[at[0] + 1..at[0] + 3].copy_from_slice(b"..");
    let dir = tmp("climb");
    let pdb = dir.join("climb.pdb");
    std::fs::write(&pdb, bytes).unwrap();
    let inner = dir.join("a").join("b");
    std::fs::create_dir_all(&inner).unwrap();
    let o = clrmap(&["pdb", "sources", pdb.to_str().unwrap(), "--json", "--extract", inner.to_str().unwrap()]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert!(r["name"].as_str().unwrap().starts_with("..\\dev"), "{r}");
        assert!(r["error"].as_str().unwrap().contains("climbs out"), "{r}");
        assert!(r.get("extracted").is_none(), "{r}");
    }
    // Nothing was written anywhere under the temporary directory but the PDB itself.
    let files: Vec<_> = walk(&dir);
    assert_eq!(files, vec![pdb.clone()]);
    // A symbolic link on the way is refused too.
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&inner, out.join("dev")).unwrap();
    let o = clrmap(&["pdb", "sources", SAMPLE, "--json", "--extract", out.to_str().unwrap()]);
    assert_eq!(code(&o), Some(1));
    assert!(stdout(&o).contains("symbolic link"), "{}", stdout(&o));
    assert_eq!(walk(&inner), Vec::<PathBuf>::new());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            out.extend(walk(&p));
        } else if m.is_file() {
            out.push(p);
        }
    }
    out.sort();
    out
}

//! Source-level features on a PDB the .NET SDK builds here (tests/dotnet/sources: embedded
//! sources, a SourceLink map, a deterministic `/_/src` path map): `pdb sources` lists, extracts and
//! verifies what the compiler wrote, and `clrmap serve` answers a frame with its SourceLink URL and
//! context lines from the embedded text, for a module named by its PDB id in the compact 40-digit
//! form. Needs the SDK (`dotnet` on PATH), so it is ignored by default like the runtime tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::serve::{post_json, Serve};
use crate::support::*;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-sdk-sources-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Build tests/dotnet/sources in a copy under `dir`; the output directory.
fn build(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    for f in ["Hello.csproj", "Hello.cs", "sourcelink.json"] {
        std::fs::copy(repo_root().join("tests/dotnet/sources").join(f), src.join(f)).unwrap();
    }
    let out = dir.join("out");
    let o = Command::new("dotnet").args(["build", "-c", "Release", "-o"]).arg(&out).current_dir(&src).env("DOTNET_CLI_TELEMETRY_OPTOUT", "1").output().expect("dotnet runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    out
}

#[test]
#[ignore = "needs .NET"]
fn sdk_built_pdb_sources_source_links_and_context() {
    let dir = tmp("build");
    let out = build(&dir);
    let pdb = out.join("Hello.pdb");
    let source = std::fs::read(repo_root().join("tests/dotnet/sources/Hello.cs")).unwrap();
    // pdb sources: the compiler's documents, embedded, with their URLs.
    let extract = dir.join("extract");
    let o = clrmap(&["pdb", "sources", pdb.to_str().unwrap(), "--json", "--extract", extract.to_str().unwrap()]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let hello = rows.iter().find(|r| r["name"] == "/_/src/Hello.cs").unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(hello["language"], "csharp");
    assert_eq!(hello["hash_algorithm"], "sha256");
    assert_eq!(hello["embedded"]["size"], source.len());
    assert_eq!(hello["source_link"], "https://raw.example.invalid/org/hello/0123abcd/Hello.cs");
    assert_eq!(std::fs::read(extract.join("_/src/Hello.cs")).unwrap(), source);
    // --verify against the project: Hello.cs matches (the generated file is under obj/ there too).
    let o = clrmap(&["pdb", "sources", pdb.to_str().unwrap(), "--json", "--verify", dir.join("src").to_str().unwrap()]);
    let rows: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.iter().find(|r| r["name"] == "/_/src/Hello.cs").unwrap()["verify"]["status"], "match");
    // pdb lines names the URL too.
    let o = clrmap(&["pdb", "lines", out.join("Hello.dll").to_str().unwrap()]);
    assert!(stdout(&o).contains("source link: https://raw.example.invalid/org/hello/0123abcd/Hello.cs"), "{}", stdout(&o));
    // The service, by PDB id in SSQP's 40-digit form (GUID then the stamp as its age).
    let bytes = std::fs::read(&pdb).unwrap();
    let id = clrmap::pdb::PortablePdb::parse(&bytes).unwrap().id();
    let debug_id = format!("{}{:08x}", id.guid_hex().to_ascii_lowercase(), id.stamp());
    assert_eq!(debug_id.len(), 40);
    let s = Serve::start(&["--symbol-path", out.to_str().unwrap()]);
    let body = serde_json::json!({"modules": [{"type": "pe_dotnet", "debug_file": "Hello.pdb", "debug_id": debug_id}], "stacktraces": [{"frames": [{"function_id": "0x1", "instruction_addr": "0xb", "addr_mode": "rel:0"}]}]}).to_string();
    let (status, v) = post_json(&s, "/symbolicate", &body);
    assert_eq!(status, 200, "{v}");
    let f = &v["stacktraces"][0]["frames"][0];
    let lines: Vec<&str> = std::str::from_utf8(&source).unwrap().lines().collect();
    assert_eq!((f["file"].as_str(), f["line"].as_u64()), (Some("/_/src/Hello.cs"), Some(8)), "{f}");
    assert_eq!(f["source_link"], "https://raw.example.invalid/org/hello/0123abcd/Hello.cs");
    assert_eq!(f["context_line"], lines[7], "{f}");
    assert_eq!(f["pre_context"], serde_json::json!(lines[2..7]), "{f}");
    assert_eq!(f["post_context"], serde_json::json!(lines[8..]), "{f}");
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Sentry's .NET symbolication suite as Sentry sends it (getsentry/symbolicator,
//! `crates/symbolicator-native/tests/integration/symbolication.rs`: the `test_dotnet_*` tests):
//! each request, as written there, over real HTTP to `clrmap serve` on loopback, with Sentry's
//! fixture PDBs behind a loopback symbol server in Sentry's layout. Every frame must have the
//! snapshot's `abs_path` (our `file`) and `lineno` (our `line`), its `source_link`, and its context
//! lines where they come from the source the PDB embeds (tests/fixtures/sentry/README.md).

use crate::serve::Serve;
use crate::support::repo_root;
use crate::symbol_server::Server;

/// One frame of a snapshot: (abs_path, lineno, source_link, pre_context, context_line,
/// post_context), read from insta's YAML.
#[derive(Debug, Default, Clone)]
struct Expected {
    abs_path: Option<String>,
    lineno: Option<u64>,
    source_link: Option<String>,
    pre_context: Vec<String>,
    context_line: Option<String>,
    post_context: Vec<String>,
}

/// A YAML scalar as insta writes it: double-quoted (JSON's escapes) or plain.
fn scalar(v: &str) -> String {
    let v = v.trim();
    if v.starts_with('"') {
        serde_json::from_str(v).unwrap()
    } else {
        v.to_owned()
    }
}

/// The frames of a snapshot, in order.
fn snapshot(test: &str) -> Vec<Expected> {
    let text = std::fs::read_to_string(repo_root().join(format!("tests/fixtures/sentry/snapshots/dotnet_{test}.snap"))).unwrap();
    let mut frames: Vec<Expected> = Vec::new();
    let mut list: Option<&'static str> = None;
    for line in text.lines().skip_while(|l| *l != "stacktraces:").take_while(|l| *l != "modules:") {
        let t = line.trim_start();
        if t.starts_with("- status:") {
            frames.push(Expected::default());
            list = None;
            continue;
        }
        let Some(f) = frames.last_mut() else { continue };
        if let (Some(which), Some(item)) = (list, t.strip_prefix("- ")) {
            if line.starts_with("          -") {
                match which {
                    "pre" => f.pre_context.push(scalar(item)),
                    _ => f.post_context.push(scalar(item)),
                }
                continue;
            }
        }
        list = None;
        let Some((key, value)) = t.split_once(':') else {
            continue;
        };
        match key {
            "abs_path" => f.abs_path = Some(scalar(value)),
            "lineno" => f.lineno = Some(value.trim().parse().unwrap()),
            "source_link" => f.source_link = Some(scalar(value)),
            "context_line" => f.context_line = Some(scalar(value)),
            "pre_context" => list = Some("pre"),
            "post_context" => list = Some("post"),
            _ => {}
        }
    }
    frames
}

/// Symbolicator's request: its `modules` and `stacktraces` as the test writes them.
fn request(modules: &str, stacktraces: &str) -> String {
    format!("{{\"modules\":{modules},\"stacktraces\":{stacktraces}}}")
}

const FIVE_FRAMES: &str = r#"[{
  "frames":[{
    "instruction_addr": 10,
    "function_id": 6,
    "addr_mode":"rel:0"
  }, {
    "instruction_addr": 6,
    "function_id": 5,
    "addr_mode": "rel:0"
  }, {
    "instruction_addr": 0,
    "function_id": 3,
    "addr_mode": "rel:0"
  }, {
    "instruction_addr": 0,
    "function_id": 2,
    "addr_mode": "rel:0"
  }, {
    "instruction_addr": 45,
    "function_id": 1,
    "addr_mode": "rel:0"
  }]
}]"#;

/// The requests of the five tests: (snapshot, modules, stacktraces).
fn requests() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        ("integration", r#"[{"type":"pe_dotnet","debug_file":"integration.pdb","debug_id":"0c1033f78632492e91c6c314b72e1920e60b819d"}]"#, FIVE_FRAMES),
        ("windows_pdb", r#"[{"type":"pe_dotnet","debug_file":"crash.pdb","debug_id":"3249d99d0c4049318610f4e4fb0b6936"}]"#, FIVE_FRAMES),
        (
            "embedded_sources",
            r#"[{"type":"pe_dotnet","debug_file":"portable-embedded.pdb","debug_id":"b6919861-510c-4887-9994-943f64f70c37-870b9ef9"}]"#,
            r#"[{"frames":[{"instruction_addr": 47,"function_id": 5,"addr_mode":"rel:0"}]}]"#,
        ),
        (
            "source_links",
            r#"[{"type":"pe_dotnet","debug_file":"source-links.pdb","debug_id":"37e9e8a6-1a8e-404e-b93c-6902e277ff55-a09672e1"}]"#,
            r#"[{"frames":[{"instruction_addr": 1,"function_id": 7,"addr_mode":"rel:0"}]}]"#,
        ),
        (
            "only_source_links",
            r#"[{"type":"pe_dotnet","debug_file":"source-links.pdb","debug_id":"0c380a12-8221-4069-8565-bee6b3ac196e-a596286e"}]"#,
            r#"[{"frames":[{"instruction_addr": "0x2f","function_id": "0x5","addr_mode":"rel:0"}]}]"#,
        ),
    ]
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-sentry-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Does the PDB behind a request embed the source of document `name`? (Context lines come only
/// from there: Sentry's other context lines were fetched through SourceLink.)
fn embeds_source(test: &str, name: &str) -> bool {
    let file = match test {
        "embedded_sources" => "portable-embedded.pdb/B6919861510C48879994943F64F70C37ffffffff/portable-embedded.pdb",
        "source_links" => "source-links.pdb/37E9E8A61A8E404EB93C6902E277FF55ffffffff/source-links.pdb",
        "only_source_links" => "source-links.pdb/0C380A12822140698565BEE6B3AC196Effffffff/source-links.pdb",
        _ => return false,
    };
    let bytes = std::fs::read(repo_root().join("tests/fixtures/sentry/symbols").join(file)).unwrap();
    let pdb = clrmap::pdb::PortablePdb::parse(&bytes).unwrap();
    let embeds = (1..=pdb.document_count()).any(|rid| pdb.document(rid).unwrap().name == name && pdb.embedded_source(rid).unwrap().is_some());
    embeds
}

#[test]
fn sentrys_dotnet_suite_over_http_through_a_symbol_server() {
    let root = tmp("suite");
    // The server's store is a copy: the server writes its log beside the store.
    let store = root.join("store");
    copy_tree(&repo_root().join("tests/fixtures/sentry/symbols"), &store);
    let srv = Server::start(&store, "ok", None);
    let cache = root.join("cache");
    let s = Serve::start(&["--symbol-server", &srv.url, "--cache", cache.to_str().unwrap()]);
    let mut checked = 0;
    for (test, modules, stacktraces) in requests() {
        let (status, v) = crate::serve::post_json(&s, "/symbolicate", &request(modules, stacktraces));
        assert_eq!(status, 200, "{test}: {v}");
        let frames = v["stacktraces"][0]["frames"].as_array().unwrap_or_else(|| panic!("{test}: {v}"));
        let expected = snapshot(test);
        assert_eq!(frames.len(), expected.len(), "{test}: {v}");
        for (got, want) in frames.iter().zip(&expected) {
            if test == "windows_pdb" {
                // Sentry: "unsupported: Only portable PDB files can be used for .NET symbolication".
                assert_eq!(got["error"]["kind"], "unsupported_pdb_format", "{got}");
                assert!(got["error"]["message"].as_str().unwrap().contains("only portable PDB files"), "{got}");
                assert_eq!(got["line"], serde_json::Value::Null);
                checked += 1;
                continue;
            }
            assert!(got.get("error").is_none(), "{test}: {got}");
            assert_eq!(got["file"].as_str(), want.abs_path.as_deref(), "{test}: {got}");
            assert_eq!(got["line"].as_u64(), want.lineno, "{test}: {got}");
            assert_eq!(got["source_link"].as_str(), want.source_link.as_deref(), "{test}: {got}");
            if embeds_source(test, want.abs_path.as_deref().unwrap()) {
                assert_eq!(got["context_line"].as_str(), want.context_line.as_deref(), "{test}: {got}");
                let list = |k: &str| got[k].as_array().map(|a| a.iter().map(|l| l.as_str().unwrap().to_owned()).collect::<Vec<_>>()).unwrap_or_default();
                assert_eq!(list("pre_context"), want.pre_context, "{test}: {got}");
                assert_eq!(list("post_context"), want.post_context, "{test}: {got}");
            } else {
                assert!(got.get("context_line").is_none(), "{test}: {got}");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 5 + 5 + 1 + 1 + 1);
    // Of Sentry's context lines, those of the embedded-sources test come from the PDB.
    assert!(embeds_source("embedded_sources", "C:\\dev\\sentry-dotnet\\samples\\Sentry.Samples.Console.Basic\\Program.cs"));
    // Asked to leave context out, an answer has none.
    let (modules, stacktraces) = (requests()[2].1, requests()[2].2);
    let body = format!("{{\"context_lines\":0,\"modules\":{modules},\"stacktraces\":{stacktraces}}}");
    let (status, v) = crate::serve::post_json(&s, "/symbolicate", &body);
    assert_eq!(status, 200, "{v}");
    assert!(v["stacktraces"][0]["frames"][0].get("context_line").is_none(), "{v}");
    assert_eq!(v["stacktraces"][0]["frames"][0]["line"], 13);
    let (status, v) = crate::serve::post_json(&s, "/symbolicate", &body.replace("\"context_lines\":0", "\"context_lines\":21"));
    assert_eq!((status, v["error"]["kind"].as_str()), (400, Some("bad_value")), "{v}");
    drop(s);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn sentrys_fixtures_from_a_symbol_path_too() {
    // The same PDBs read from a directory in the SSQP layout, no server: the same answers, and
    // the Windows PDB still its own kind.
    let s = Serve::start(&["--symbol-path", "tests/fixtures/sentry/symbols"]);
    for (test, modules, stacktraces) in requests() {
        let (status, v) = crate::serve::post_json(&s, "/symbolicate", &request(modules, stacktraces));
        assert_eq!(status, 200, "{test}: {v}");
        let frames = v["stacktraces"][0]["frames"].as_array().unwrap();
        for (got, want) in frames.iter().zip(snapshot(test)) {
            if test == "windows_pdb" {
                assert_eq!(got["error"]["kind"], "unsupported_pdb_format", "{got}");
            } else {
                assert_eq!((got["file"].as_str(), got["line"].as_u64()), (want.abs_path.as_deref(), want.lineno), "{test}: {got}");
            }
        }
    }
}

//! `clrmap serve` (docs/output.md#the-service): the real binary, over real HTTP from outside the
//! process (`curl`, and raw sockets for slow clients), on loopback only.
//!
//! The oracle for lines is the runtime's own `StackTrace` in `examples/frames.stdout` (token, IL
//! offset, file, line, column and method of every frame the Frames fixture printed, built as
//! tests/fixtures/frames/debug-portable); the service must answer each request form as the
//! runtime did, and as the CLI (`pdb lines`, `stacktrace`, `symbolize`) does on the same symbols.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{clrmap, code, repo_root, stderr, stdout};
use crate::symbol_server::Server;

const DEBUG: &str = "tests/fixtures/frames/debug-portable";

/// A running `clrmap serve`, killed when dropped; its stderr log lines collected.
pub(crate) struct Serve {
    pub child: Child,
    pub port: u16,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    pub(crate) fn start(args: &[&str]) -> Serve {
        Self::start_bin(Path::new(env!("CARGO_BIN_EXE_clrmap")), args)
    }

    pub(crate) fn start_bin(bin: &Path, args: &[&str]) -> Serve {
        let mut child =
            Command::new(bin).args(["serve", "--listen", "127.0.0.1:0"]).args(args).current_dir(repo_root()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        let v: serde_json::Value = serde_json::from_str(&first).unwrap_or_else(|_| panic!("first log line {first:?}"));
        assert_eq!(v["event"], "listening", "{first}");
        let port = v["listen"].as_str().unwrap().rsplit(':').next().unwrap().parse().unwrap();
        let log = Arc::new(Mutex::new(vec![first]));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in err.lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Serve { child, port, log }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The log lines of answered requests.
    fn requests(&self) -> Vec<serde_json::Value> {
        self.log.lock().unwrap().iter().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).filter(|v| v["event"] == "request").collect()
    }

    /// Peak resident memory, in KiB (VmHWM).
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap().trim().trim_end_matches(" kB").trim().parse().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One curl exchange: (status, headers, body).
pub(crate) fn curl(args: &[&str]) -> (u16, String, Vec<u8>) {
    let o = Command::new("curl").args(["-s", "-S", "--max-time", "60", "-D", "-"]).args(args).output().expect("curl is installed (Debian: apt-get install curl)");
    assert!(o.status.success(), "curl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    let text = o.stdout;
    // Headers (of the last response: a 100 Continue may come first), then the body.
    let mut at = 0;
    let mut head = String::new();
    while let Some(end) = find(&text[at..], b"\r\n\r\n") {
        let block = String::from_utf8_lossy(&text[at..at + end]).into_owned();
        at += end + 4;
        head = block;
        if !head.starts_with("HTTP/1.1 100") {
            break;
        }
    }
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head, text[at..].to_vec())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

pub(crate) fn post_json(s: &Serve, path: &str, body: &str) -> (u16, serde_json::Value) {
    let (status, _, b) = curl(&["-H", "Content-Type: application/json", "--data-binary", body, &s.url(path)]);
    (status, serde_json::from_slice(&b).unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&b))))
}

/// Every frame of the runtime's own stack traces: (token, IL offset, file, line, column, method).
pub(crate) fn runtime_frames() -> Vec<(u32, u32, String, u32, u32, String)> {
    let text = std::fs::read_to_string(repo_root().join("examples/frames.stdout")).unwrap();
    let mut v: Vec<_> = text
        .lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| (f[0] == "F" || f[0] == "E") && f[4] == "Frames.dll")
        .map(|f| (u32::from_str_radix(&f[3][2..], 16).unwrap(), f[6].parse().unwrap(), f[7].to_owned(), f[8].parse().unwrap(), f[9].parse().unwrap(), f[10].to_owned()))
        .collect();
    v.sort();
    v.dedup();
    assert!(v.len() > 40, "{}", v.len());
    v
}

/// The GUID of a PDB in `Guid.ToString("N")` and `D` forms and its stamp, from its `#Pdb` stream's
/// first 20 bytes, found here by the spec (not by clrmap).
fn pdb_ids(pdb: &Path) -> (String, String, u32) {
    let bytes = std::fs::read(pdb).unwrap();
    let at = find(&bytes, b"#Pdb\0").unwrap();
    // Stream headers: offset (4), size (4), name; the offset is the 8 bytes before the name.
    let offset = u32::from_le_bytes(bytes[at - 8..at - 4].try_into().unwrap()) as usize;
    let root = find(&bytes, b"BSJB").unwrap();
    let id = &bytes[root + offset..root + offset + 20];
    let g = &id[..16];
    let n: String = [g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6]].iter().chain(&g[8..]).map(|b| format!("{b:02x}")).collect();
    let d = format!("{}-{}-{}-{}-{}", &n[..8], &n[8..12], &n[12..16], &n[16..20], &n[20..]);
    (n, d, u32::from_le_bytes(id[16..20].try_into().unwrap()))
}

/// `clrmap pdb lines --json` over the fixture's assembly: token → its name and its visible points
/// (il, start/end).
fn cli_points() -> std::collections::HashMap<u64, (String, Vec<serde_json::Value>)> {
    let o = clrmap(&["pdb", "lines", &format!("{DEBUG}/Frames.dll"), "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| {
            (
                v["token"].as_u64().unwrap(),
                (v["name"].as_str().unwrap().to_owned(), v["points"].as_array().unwrap().iter().filter(|p| p["start_line"] != 0xfeefee && p["hidden"] != true).cloned().collect()),
            )
        })
        .collect()
}

/// Check answers against the runtime's frames (`named`: the assembly was found, so methods are
/// named; from a PDB alone they are null). A frame the runtime printed with no line (an async
/// kickoff method, whose PDB has no sequence points) must have none here either.
pub(crate) fn check_answers(answers: &[serde_json::Value], module: &str, named: bool) {
    let frames = runtime_frames();
    let points = cli_points();
    assert_eq!(answers.len(), frames.len());
    for (a, (token, il, file, line, column, method)) in answers.iter().zip(&frames) {
        let want = if file.is_empty() {
            serde_json::json!({"module": module, "token": token, "method": method, "il_offset": il, "file": null, "line": null, "column": null, "end_line": null, "end_column": null})
        } else {
            serde_json::json!({"module": module, "token": token, "method": method, "il_offset": il, "file": file, "line": line, "column": column})
        };
        // The method as the CLI names it (`pdb lines`: nested types joined by `/`, where the
        // runtime's text has `+`).
        // (`pdb lines` lists only methods with sequence points: for the others, the runtime's
        // name with `/`.)
        let (cli_name, cli_points) = points.get(&u64::from(*token)).cloned().unwrap_or_else(|| (method.replace('+', "/"), Vec::new()));
        assert_eq!(cli_name.replace('/', "+"), *method);
        let want_method = if named { serde_json::json!(cli_name) } else { serde_json::Value::Null };
        assert_eq!(a["method"], want_method, "method of {a} (runtime: {want})");
        for k in ["module", "token", "il_offset", "file", "line", "column"] {
            assert_eq!(a[k], want[k], "{k} of {a} (runtime: {want})");
        }
        assert!(a.get("error").is_none(), "{a}");
        if file.is_empty() {
            assert_eq!((&a["end_line"], &a["end_column"]), (&serde_json::Value::Null, &serde_json::Value::Null));
            continue;
        }
        // The end of the sequence point: the CLI's last visible point at or before the offset.
        let p = cli_points.iter().rev().find(|p| p["il"].as_u64().unwrap() <= u64::from(*il)).unwrap();
        assert_eq!((&a["end_line"], &a["end_column"]), (&p["end_line"], &p["end_column"]), "{a}");
        assert!(a.get("error").is_none(), "{a}");
    }
}

#[test]
fn healthz_metrics_and_every_error_status() {
    let s = Serve::start(&["--symbol-path", DEBUG, "--max-body", "4096", "--max-frames", "2"]);
    let (status, head, body) = curl(&[&s.url("/healthz")]);
    assert_eq!((status, body.as_slice()), (200, &b"ok"[..]), "{head}");
    let (status, _, body) = curl(&["-X", "GET", &s.url("/nope")]);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, &v["error"]["kind"]), (404, &serde_json::json!("not_found")));
    let (status, head, _) = curl(&[&s.url("/symbolicate")]);
    assert_eq!(status, 405);
    assert!(head.to_ascii_lowercase().contains("\nallow: post"), "{head}");
    let (status, _, _) = curl(&["-X", "POST", &s.url("/healthz")]);
    assert_eq!(status, 405);
    for (body, kind) in [
        ("{", "bad_json"),
        (r#"{"modules":[{"name":"Frames.dll""#, "bad_json"),
        ("[1,2]", "bad_value"),
        (r#"{"modules":[]}"#, "missing_field"),
        (r#"{"modules":[{"name":"Frames.dll"}],"frames":[{"module":0,"il_offset":1}]}"#, "missing_field"),
        (r#"{"modules":[{"name":"Frames.dll"}],"frames":[{"module":1,"token":1,"il_offset":1}]}"#, "bad_value"),
        (r#"{"modules":[{"name":"Frames.dll"}],"frames":[{"module":0,"token":-5,"il_offset":1}]}"#, "bad_value"),
    ] {
        let (status, v) = post_json(&s, "/symbolicate", body);
        assert_eq!((status, v["error"]["kind"].as_str().unwrap()), (400, kind), "{body}: {v}");
        assert!(!v["error"]["message"].as_str().unwrap().is_empty());
    }
    // Invalid UTF-8, to both POST endpoints.
    let bad = std::env::temp_dir().join(format!("clrmap-serve-{}-bad-utf8", std::process::id()));
    std::fs::write(&bad, b"{\"modules\":[{\"name\":\"\xff\xfe\"}],\"frames\":[]}").unwrap();
    for path in ["/symbolicate", "/stacktrace"] {
        let (status, _, body) = curl(&["--data-binary", &format!("@{}", bad.display()), &s.url(path)]);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!((status, v["error"]["kind"].as_str().unwrap()), (400, "bad_utf8"), "{path}");
    }
    // 413: over the body limit (declared, and chunked with no length), over the frame limit.
    let big = "x".repeat(5000);
    let (status, _, _) = curl(&["--data-binary", &big, &s.url("/symbolicate")]);
    assert_eq!(status, 413);
    let (status, _, body) = curl(&["-H", "Transfer-Encoding: chunked", "--data-binary", &big, &s.url("/stacktrace")]);
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    let three =
        r#"{"modules":[{"name":"Frames.dll"}],"frames":[{"module":0,"token":100663297,"il_offset":1},{"module":0,"token":100663297,"il_offset":1},{"module":0,"token":100663297,"il_offset":1}]}"#;
    let (status, v) = post_json(&s, "/symbolicate", three);
    assert_eq!((status, v["error"]["kind"].as_str().unwrap()), (413, "too_many_frames"), "{v}");
    // Metrics: Prometheus text, every name clrmap_, the requests above counted by status.
    let (status, head, body) = curl(&[&s.url("/metrics")]);
    assert_eq!(status, 200);
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain"), "{head}");
    let text = String::from_utf8(body).unwrap();
    for line in text.lines() {
        let name = line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE ")).unwrap_or(line);
        assert!(name.starts_with("clrmap_"), "{line}");
    }
    for want in [
        "clrmap_requests_total{endpoint=\"healthz\",status=\"200\"} 1",
        "clrmap_requests_total{endpoint=\"other\",status=\"404\"} 1",
        "clrmap_requests_total{endpoint=\"symbolicate\",status=\"400\"} 8",
        "clrmap_requests_total{endpoint=\"symbolicate\",status=\"413\"} 2",
        "clrmap_requests_total{endpoint=\"stacktrace\",status=\"413\"} 1",
        "clrmap_request_duration_seconds_count{endpoint=\"symbolicate\"} 11",
        "clrmap_symbol_cache_hits_total 0",
    ] {
        assert!(text.lines().any(|l| l == want), "{want} not in\n{text}");
    }
    // One JSON log line per request (the metrics request's own line may still be on its way).
    std::thread::sleep(Duration::from_millis(200));
    let logs = s.requests();
    assert_eq!(logs.len(), 17, "{logs:?}");
    assert!(logs.iter().all(|l| l["status"].is_u64() && l["ms"].is_f64() && l["path"].is_string()), "{logs:?}");
}

/// `--request-log off`: no line a request, while the service's own events are still written and
/// `/metrics` still counts every request.
#[test]
fn request_log_off_writes_no_request_lines_and_still_counts() {
    let s = Serve::start(&["--symbol-path", DEBUG, "--request-log", "off"]);
    let body = r#"{"modules":[{"name":"Frames.dll"}],"frames":[{"module":0,"token":100663297,"il_offset":1}]}"#;
    for _ in 0..5 {
        let (status, v) = post_json(&s, "/symbolicate", body);
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["frames"][0]["line"], 26, "{v}");
    }
    let (status, _, text) = curl(&[&s.url("/metrics")]);
    assert_eq!(status, 200);
    let text = String::from_utf8(text).unwrap();
    assert!(text.lines().any(|l| l == "clrmap_requests_total{endpoint=\"symbolicate\",status=\"200\"} 5"), "{text}");
    // The same requests on a service with the default writes their lines (so the check below
    // can fail), and this one wrote its first line only.
    let logged = Serve::start(&["--symbol-path", DEBUG]);
    assert_eq!(post_json(&logged, "/symbolicate", body).0, 200);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(logged.requests().len(), 1, "{:?}", logged.log.lock().unwrap());
    assert!(s.requests().is_empty(), "{:?}", s.log.lock().unwrap());
    assert_eq!(s.log.lock().unwrap().len(), 1, "only the listening line: {:?}", s.log.lock().unwrap());
    // Anything else is a usage error (status 2).
    let o = clrmap(&["serve", "--listen", "127.0.0.1:0", "--request-log", "sometimes"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
}

#[test]
fn symbolicate_answers_as_the_runtime_and_the_cli_in_each_form() {
    let s = Serve::start(&["--symbol-path", DEBUG]);
    let frames = runtime_frames();
    let (n, d, stamp) = pdb_ids(&repo_root().join(DEBUG).join("Frames.pdb"));
    // docs/output.md#the-service: by the assembly's name, and by the PDB's name and id.
    for module in [serde_json::json!({"name": "Frames.dll"}), serde_json::json!({"name": "Frames.dll", "pdb": "Frames.pdb", "pdb_id": n})] {
        let req = serde_json::json!({"modules": [module], "frames": frames.iter().map(|f| serde_json::json!({"module": 0, "token": f.0, "il_offset": f.1})).collect::<Vec<_>>()});
        let (status, v) = post_json(&s, "/symbolicate", &req.to_string());
        assert_eq!(status, 200, "{v}");
        check_answers(v["frames"].as_array().unwrap(), "Frames.dll", true);
    }
    // Sentry's .NET frames, in symbolicator's request form: a pe_dotnet debug image and frames
    // with rel:N, the MethodDef index and the IL offset as hex strings (extra fields ignored).
    let image = serde_json::json!({"type": "pe_dotnet", "debug_id": format!("{d}-{stamp:x}"), "debug_file": "/_/obj/Debug/Frames.pdb", "code_file": "/app/Frames.dll", "code_id": "AAAAAAAA2000"});
    let sentry_frames: Vec<_> = frames
        .iter()
        .map(|f| serde_json::json!({"addr_mode": "rel:0", "function_id": format!("0x{:x}", f.0 & 0xff_ffff), "instruction_addr": format!("0x{:x}", f.1), "module": "Frames.Program", "in_app": true}))
        .collect();
    let req = serde_json::json!({"modules": [image], "stacktraces": [{"frames": sentry_frames}]});
    let (status, v) = post_json(&s, "/symbolicate", &req.to_string());
    assert_eq!(status, 200, "{v}");
    check_answers(v["stacktraces"][0]["frames"].as_array().unwrap(), "Frames.dll", true);
    // A debug_id whose age is above the PDB's stamp (Sentry's rule: the age is a lower bound):
    // every frame says so, nothing else is guessed.
    let wrong = serde_json::json!({"modules": [{"type": "pe_dotnet", "debug_id": format!("{d}-{:x}", stamp.saturating_add(1)), "debug_file": "Frames.pdb"}], "frames": [{"addr_mode": "rel:0", "function_id": "0x8", "instruction_addr": "0x27"}]});
    let (status, v) = post_json(&s, "/symbolicate", &wrong.to_string());
    assert_eq!(status, 200);
    assert_eq!(v["frames"][0]["error"]["kind"], "not_found", "{v}");
    assert_eq!(v["frames"][0]["line"], serde_json::Value::Null);
    // The OpenTelemetry eBPF profiler's jitted frames: 0xf, the MethodDef index, the IL offset.
    let mvid = crate_mvid(&repo_root().join(DEBUG).join("Frames.dll"));
    let otel: Vec<_> = frames.iter().map(|f| serde_json::json!({"module": 0, "address": ((0xf000_0000u64 + u64::from(f.0 & 0xff_ffff)) << 32) + u64::from(f.1)})).collect();
    let req = serde_json::json!({"modules": [{"name": "Frames.dll", "mvid": mvid}], "frames": otel});
    let (status, v) = post_json(&s, "/symbolicate", &req.to_string());
    assert_eq!(status, 200, "{v}");
    check_answers(v["frames"].as_array().unwrap(), "Frames.dll", true);
    // Another module's MVID: not this assembly, so no line.
    let req = serde_json::json!({"modules": [{"name": "Frames.dll", "mvid": "00000000-0000-0000-0000-000000000001"}], "frames": [{"module": 0, "address": 0xf000_0008_0000_0027u64}]});
    let (_, v) = post_json(&s, "/symbolicate", &req.to_string());
    assert_eq!(v["frames"][0]["error"]["kind"], "not_found", "{v}");
}

/// The MVID of an assembly, read here by ECMA-335 (the Module row's Mvid is GUID heap index 1 in
/// every assembly the C# compiler writes), not by clrmap.
fn crate_mvid(dll: &Path) -> String {
    let bytes = std::fs::read(dll).unwrap();
    let at = find(&bytes, b"#GUID\0").unwrap();
    let offset = u32::from_le_bytes(bytes[at - 8..at - 4].try_into().unwrap()) as usize;
    let root = find(&bytes, b"BSJB").unwrap();
    let g = &bytes[root + offset..root + offset + 16];
    let n: String = [g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6]].iter().chain(&g[8..]).map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &n[..8], &n[8..12], &n[12..16], &n[16..20], &n[20..])
}

#[test]
fn stacktrace_answers_as_the_cli_and_the_runtime() {
    let s = Serve::start(&["--symbol-path", DEBUG]);
    let mut text = String::from("Unhandled exception. System.Exception: boom\n");
    let mut want = text.clone();
    for (token, il, file, line, _, method) in runtime_frames() {
        let m = method.replace("::", ".");
        let frame = format!("   at {m}() in Frames.dll:token 0x{token:x}+0x{il:x}\n");
        text.push_str(&frame);
        // A frame the runtime printed with no line (file ""): not compared with the runtime.
        want.push_str(&if file.is_empty() { frame } else { format!("   at {m}() in {file}:line {line}\n") });
    }
    text.push_str("   at Other.Thing() in Other.dll:token 0x6000001+0x0\nno newline at the end");
    want.push_str("   at Other.Thing() in Other.dll:token 0x6000001+0x0\nno newline at the end");
    let file = std::env::temp_dir().join(format!("clrmap-serve-{}-trace.txt", std::process::id()));
    std::fs::write(&file, &text).unwrap();
    let (status, head, body) = curl(&["-H", "Content-Type: text/plain", "--data-binary", &format!("@{}", file.display()), &s.url("/stacktrace")]);
    assert_eq!(status, 200);
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain"), "{head}");
    // Line by line as the runtime printed it; an async kickoff frame the runtime printed with no
    // line is left to printed stack traces' own rule (docs/stacktrace.md), checked against the CLI below.
    let got = String::from_utf8(body.clone()).unwrap();
    let kept: Vec<bool> = std::iter::once(false).chain(runtime_frames().iter().map(|f| f.2.is_empty())).chain([false, false]).collect();
    assert_eq!(got.split('\n').count(), want.split('\n').count());
    for ((g, w), k) in got.split('\n').zip(want.split('\n')).zip(kept) {
        if !k {
            assert_eq!(g, w);
        }
    }
    let o = clrmap(&["stacktrace", file.to_str().unwrap(), "--symbol-path", DEBUG]);
    assert_eq!(o.stdout, body);
}

/// The cache entry of a PDB in the SSQP layout under `root`.
fn ssqp_pdb(root: &Path) -> PathBuf {
    let (n, _, _) = pdb_ids(&repo_root().join(DEBUG).join("Frames.pdb"));
    let dir = root.join("frames.pdb").join(format!("{n}ffffffff"));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("frames.pdb")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-serve-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn upstream_faults_give_frame_errors_in_bounded_time_and_junk_in_the_cache_is_replaced() {
    let frames = runtime_frames();
    let (n, _, _) = pdb_ids(&repo_root().join(DEBUG).join("Frames.pdb"));
    let req = serde_json::json!({"modules": [{"name": "Frames.dll", "pdb": "Frames.pdb", "pdb_id": n}], "frames": frames.iter().map(|f| serde_json::json!({"module": 0, "token": f.0, "il_offset": f.1})).collect::<Vec<_>>()}).to_string();
    let root = tmp("upstream");
    std::fs::copy(repo_root().join(DEBUG).join("Frames.pdb"), ssqp_pdb(&root.join("store"))).unwrap();
    // A port nothing listens on: down.
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut servers = vec![(None, format!("http://127.0.0.1:{down}"))];
    for mode in ["hang", "500", "truncate", "404"] {
        let srv = Server::start(&root.join("store"), mode, None);
        let url = srv.url.clone();
        servers.push((Some(srv), url));
    }
    for (i, (_srv, url)) in servers.iter().enumerate() {
        let cache = root.join(format!("cache{i}"));
        let s = Serve::start(&["--symbol-server", url, "--cache", cache.to_str().unwrap(), "--symbol-timeout", "2s"]);
        let t = Instant::now();
        let (status, v) = post_json(&s, "/symbolicate", &req);
        assert_eq!(status, 200, "{url}: {v}");
        assert!(t.elapsed() < Duration::from_secs(8), "{url}: {:?}", t.elapsed());
        for f in v["frames"].as_array().unwrap() {
            assert_eq!(f["error"]["kind"], "not_found", "{url}: {f}");
            // The message names the server and what went wrong with it.
            let m = f["error"]["message"].as_str().unwrap();
            assert!(m.contains(&format!("symbol server {url}")), "{m}");
            assert_eq!(f["line"], serde_json::Value::Null);
        }
        // Still up, and the failure counted.
        assert_eq!(curl(&[&s.url("/healthz")]).0, 200);
        let metrics = String::from_utf8(curl(&[&s.url("/metrics")]).2).unwrap();
        assert!(metrics.lines().any(|l| l == "clrmap_symbol_fetch_failures_total 1"), "{metrics}");
        // No entry left in the cache but what the fetch may have left complete (none here).
        let entry = ssqp_pdb(&cache);
        assert!(!entry.exists(), "{url}: {}", entry.display());
    }
    // A working server, with junk planted in the cache where the PDB goes: the junk is replaced
    // by the real PDB and every answer is the runtime's.
    let ok = Server::start(&root.join("store"), "ok", None);
    let cache = root.join("cache-junk");
    let entry = ssqp_pdb(&cache);
    std::fs::write(&entry, b"BSJB but not a PDB at all").unwrap();
    std::fs::write(cache.join("frames.pdb").join("stray.tmp"), b"junk").unwrap();
    let s = Serve::start(&["--symbol-server", &ok.url, "--cache", cache.to_str().unwrap()]);
    let (status, v) = post_json(&s, "/symbolicate", &req);
    assert_eq!(status, 200, "{v}");
    // From the PDB alone (the server holds no assembly): no method names.
    check_answers(v["frames"].as_array().unwrap(), "Frames.dll", false);
    assert_eq!(std::fs::read(&entry).unwrap(), std::fs::read(repo_root().join(DEBUG).join("Frames.pdb")).unwrap());
    // The filled cache alone, with no server: read as a symbol path, the same answers.
    drop(s);
    let s = Serve::start(&["--cache", cache.to_str().unwrap()]);
    let (status, v) = post_json(&s, "/symbolicate", &req);
    assert_eq!(status, 200, "{v}");
    check_answers(v["frames"].as_array().unwrap(), "Frames.dll", false);
    std::fs::remove_dir_all(&root).unwrap();
}

/// A client sending `bytes` one a second; returns once the server has closed the connection
/// (or `limit` passed): how long that took.
fn trickle(port: u16, bytes: &'static [u8], limit: Duration) -> Option<Duration> {
    let t = Instant::now();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(1000))).unwrap();
    for b in bytes {
        if c.write_all(std::slice::from_ref(b)).is_err() {
            return Some(t.elapsed());
        }
        let mut buf = [0u8; 512];
        match c.read(&mut buf) {
            Ok(_) => return Some(t.elapsed()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return Some(t.elapsed()),
        }
        if t.elapsed() > limit {
            return None;
        }
    }
    None
}

#[test]
fn slow_clients_time_out_without_holding_others_up() {
    let s = Serve::start(&["--symbol-path", DEBUG, "--header-timeout", "3s", "--request-timeout", "4s"]);
    let port = s.port;
    // 10 trickle their headers, 10 trickle a body after complete headers.
    let mut clients = Vec::new();
    for i in 0..20 {
        let bytes: &'static [u8] = if i % 2 == 0 {
            b"POST /symbolicate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
        } else {
            b"{\"modules\":[{\"name\":\"Frames.dll\"}],\"frames\":[{\"module\":0,\"token\":100663297,\"il_offset\":1}]}"
        };
        let head = i % 2 == 1;
        clients.push(std::thread::spawn(move || {
            if head {
                let t = Instant::now();
                let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
                c.write_all(b"POST /symbolicate HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n").unwrap();
                c.set_read_timeout(Some(Duration::from_millis(1000))).unwrap();
                for b in bytes {
                    let _ = c.write_all(std::slice::from_ref(b));
                    let mut buf = [0u8; 512];
                    if let Ok(n) = c.read(&mut buf) {
                        return Some((t.elapsed(), String::from_utf8_lossy(&buf[..n]).into_owned()));
                    }
                    if t.elapsed() > Duration::from_secs(20) {
                        return None;
                    }
                }
                None
            } else {
                trickle(port, bytes, Duration::from_secs(20)).map(|d| (d, String::new()))
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(500));
    // Meanwhile others are answered promptly.
    for _ in 0..20 {
        let t = Instant::now();
        let (status, v) = post_json(&s, "/symbolicate", r#"{"modules":[{"name":"Frames.dll"}],"frames":[{"module":0,"token":100663297,"il_offset":1}]}"#);
        assert_eq!((status, v["frames"][0]["line"].as_u64()), (200, Some(26)));
        assert!(t.elapsed() < Duration::from_millis(1500), "{:?}", t.elapsed());
        std::thread::sleep(Duration::from_millis(100));
    }
    // And each slow client is cut off near its timeout: headers at ~3 s, a body at ~4 s (408).
    for (i, c) in clients.into_iter().enumerate() {
        let (took, answer) = c.join().unwrap().unwrap_or_else(|| panic!("client {i} was never cut off"));
        assert!(took < Duration::from_secs(8), "client {i}: {took:?}");
        if i % 2 == 1 {
            assert!(answer.starts_with("HTTP/1.1 408"), "client {i}: {answer:?}");
        }
    }
}

#[test]
fn a_gigabyte_body_is_refused_fast_in_bounded_memory() {
    let s = Serve::start(&["--symbol-path", DEBUG]);
    // Declared: a sparse 1 GiB file uploaded with its length (curl -T streams it).
    let dir = tmp("gig");
    let file = dir.join("gig");
    std::fs::File::create(&file).unwrap().set_len(1 << 30).unwrap();
    let t = Instant::now();
    let (status, _, body) = curl(&["-X", "POST", "-T", file.to_str().unwrap(), &s.url("/symbolicate")]);
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // Chunked, with no length (curl -T - streams stdin): read up to the limit, then refused.
    let t = Instant::now();
    let o = Command::new("sh").arg("-c").arg(format!("head -c 1073741824 /dev/zero | curl -s -o /dev/null -w '%{{http_code}}' -X POST -T - {}", s.url("/stacktrace"))).output().unwrap();
    let code = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(code, "413");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert_eq!(curl(&[&s.url("/healthz")]).0, 200);
    let rss = s.peak_rss_kib();
    assert!(rss < 256 * 1024, "peak RSS {rss} KiB");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_million_frames_is_refused_at_the_frame_limit_in_bounded_memory() {
    // A body limit high enough to let the whole request in: the frame limit stops it, while
    // parsing, at frame 100,001.
    let s = Serve::start(&["--symbol-path", DEBUG, "--max-body", "100000000"]);
    let dir = tmp("million");
    let file = dir.join("body.json");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
    w.write_all(br#"{"modules":[{"name":"Frames.dll"}],"frames":["#).unwrap();
    for i in 0..1_000_000 {
        if i > 0 {
            w.write_all(b",").unwrap();
        }
        w.write_all(br#"{"module":0,"token":100663297,"il_offset":1}"#).unwrap();
    }
    w.write_all(b"]}").unwrap();
    drop(w);
    let t = Instant::now();
    let (status, _, body) = curl(&["--data-binary", &format!("@{}", file.display()), &s.url("/symbolicate")]);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, v["error"]["kind"].as_str().unwrap()), (413, "too_many_frames"), "{v}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // With the default 8 MiB body limit, the same body is refused before it is read.
    let s2 = Serve::start(&["--symbol-path", DEBUG]);
    let (status, _, _) = curl(&["--data-binary", &format!("@{}", file.display()), &s2.url("/symbolicate")]);
    assert_eq!(status, 413);
    // The body itself is held (up to the limit); what is parsed from it stops at 100,000.
    let rss = s.peak_rss_kib();
    assert!(rss < 256 * 1024, "peak RSS {rss} KiB");
    // 100,000 frames (the limit) are answered.
    let req = serde_json::json!({"modules": [{"name": "Frames.dll"}], "frames": vec![serde_json::json!({"module": 0, "token": 100663297u32, "il_offset": 1}); 100_000]});
    std::fs::write(&file, req.to_string()).unwrap();
    let (status, _, body) = curl(&["--data-binary", &format!("@{}", file.display()), &s.url("/symbolicate")]);
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["frames"].as_array().unwrap().len(), 100_000);
    assert_eq!(v["frames"][99_999]["line"], 26);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sigterm_finishes_the_request_in_flight_and_accepts_nothing_new() {
    // A request held up by a hanging symbol server (2 s), SIGTERM while it is in flight.
    let root = tmp("term");
    let hang = Server::start(&root, "hang", None);
    let (n, _, _) = pdb_ids(&repo_root().join(DEBUG).join("Frames.pdb"));
    let mut s = Serve::start(&["--symbol-server", &hang.url, "--cache", root.join("cache").to_str().unwrap(), "--symbol-timeout", "2s"]);
    let url = s.url("/symbolicate");
    let req = serde_json::json!({"modules": [{"pdb": "Frames.pdb", "pdb_id": n}], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}).to_string();
    let pending = std::thread::spawn(move || curl(&["--data-binary", &req, &url]));
    std::thread::sleep(Duration::from_millis(700));
    let pid = s.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    // Nothing new is accepted.
    assert!(TcpStream::connect(("127.0.0.1", s.port)).is_err());
    let (status, _, body) = pending.join().unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let t = Instant::now();
    let exit = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "serve did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(exit.code(), Some(0));
    std::thread::sleep(Duration::from_millis(100));
    let log = s.log.lock().unwrap().join("\n");
    assert!(log.contains("\"event\":\"shutdown\"") && log.contains("\"clean\":true"), "{log}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A PE file's TimeDateStamp and SizeOfImage, read here by the PE/COFF spec (not by clrmap).
fn pe_key(bytes: &[u8]) -> (u32, u32) {
    let pe = u32::from_le_bytes(bytes[0x3c..0x40].try_into().unwrap()) as usize;
    assert_eq!(&bytes[pe..pe + 4], b"PE\0\0");
    let ts = u32::from_le_bytes(bytes[pe + 8..pe + 12].try_into().unwrap());
    let size = u32::from_le_bytes(bytes[pe + 24 + 56..pe + 24 + 60].try_into().unwrap());
    (ts, size)
}

#[test]
#[ignore = "needs .NET"]
fn ready_to_run_frames_answer_as_clrmap_symbolize_from_a_symbol_path_and_a_symbol_server() {
    for corelib in [crate::support::corelib("3.1"), crate::support::corelib("8.0")] {
        let bytes = std::fs::read(&corelib).unwrap();
        let (ts, size) = pe_key(&bytes);
        // RVAs inside bodies (each method's start + 3, from `il dump`), and some in none.
        let o = clrmap(&["il", "dump", &corelib, "--json"]);
        assert_eq!(code(&o), Some(0), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
        let mut rvas: Vec<u64> = v["methods"].as_array().unwrap().iter().step_by(997).map(|m| m["rva"].as_u64().unwrap() + 3).collect();
        rvas.extend([0x10, 0x7fff_fff0]);
        let args: Vec<String> = rvas.iter().map(|r| format!("0x{r:x}")).collect();
        let mut expected = Vec::new();
        for ret in [false, true] {
            let mut a: Vec<&str> = vec!["symbolize", &corelib, "--json"];
            if ret {
                a.push("--return-address");
            }
            a.extend(args.iter().map(String::as_str));
            let o = clrmap(&a);
            assert_eq!(code(&o), Some(0), "{}", stderr(&o));
            for line in stdout(&o).lines().filter(|l| l.starts_with("{\"address\"")) {
                let mut f: serde_json::Value = serde_json::from_str(line).unwrap();
                f.as_object_mut().unwrap().remove("address");
                expected.push(f);
            }
        }
        assert_eq!(expected.len(), rvas.len() * 2);
        assert!(expected.iter().filter(|f| f["method"].is_string()).count() > 5);
        let module = serde_json::json!({"name": "System.Private.CoreLib.dll", "pe_timestamp": ts, "pe_size_of_image": size});
        // The OpenTelemetry form (an address below the JIT tag is an RVA), and `rva`.
        let frames: Vec<_> = [false, true].iter().flat_map(|ret| rvas.iter().map(move |r| serde_json::json!({"module": 0, "address": r, "return_address": ret}))).collect();
        let req = serde_json::json!({"modules": [module], "frames": frames}).to_string();
        let fw = Path::new(&corelib).parent().unwrap().to_str().unwrap().to_owned();
        let s = Serve::start(&["--symbol-path", &fw]);
        let (status, v) = post_json(&s, "/symbolicate", &req);
        assert_eq!(status, 200);
        for (got, want) in v["frames"].as_array().unwrap().iter().zip(&expected) {
            assert_eq!(got, want, "{corelib}");
        }
        assert_eq!(v["frames"].as_array().unwrap().len(), expected.len());
        // From a symbol server only, by the SSQP PE key (TimeDateStamp as %08X, SizeOfImage %x).
        let root = tmp("r2r");
        let dir = root.join("store/system.private.corelib.dll").join(format!("{ts:08X}{size:x}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&corelib, dir.join("system.private.corelib.dll")).unwrap();
        let srv = Server::start(&root.join("store"), "ok", None);
        let s = Serve::start(&["--symbol-server", &srv.url, "--cache", root.join("cache").to_str().unwrap()]);
        let frames: Vec<_> = [false, true].iter().flat_map(|ret| rvas.iter().map(move |r| serde_json::json!({"module": 0, "rva": r, "return_address": ret}))).collect();
        let req = serde_json::json!({"modules": [{"code_file": "/usr/share/dotnet/System.Private.CoreLib.dll", "code_id": format!("{ts:08X}{size:x}")}], "frames": frames}).to_string();
        let (status, v) = post_json(&s, "/symbolicate", &req);
        assert_eq!(status, 200);
        for (got, want) in v["frames"].as_array().unwrap().iter().zip(&expected) {
            assert_eq!(got, want, "{corelib}");
        }
        assert_eq!(v["frames"].as_array().unwrap().len(), expected.len());
        // A key of another build: nothing found, each frame says so.
        let req = serde_json::json!({"modules": [{"name": "System.Private.CoreLib.dll", "pe_timestamp": ts ^ 1, "pe_size_of_image": size}], "frames": [{"module": 0, "rva": rvas[0]}]}).to_string();
        let (_, v) = post_json(&s, "/symbolicate", &req);
        assert_eq!(v["frames"][0]["error"]["kind"], "not_found", "{v}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}

#[test]
#[ignore = "needs wrk and nginx (Debian: apt-get install wrk nginx-light)"]
fn scale_out_behind_nginx_short() {
    // scripts/bench-serve.sh for 3 s a phase with this binary: load through one replica, then two
    // behind nginx sharing one cache filled at once from a loopback symbol server (answers equal,
    // the cache entry exactly the PDB, both replicas used), then one killed mid-load (no failed
    // request). The script checks each and ends with `bench-serve: OK`.
    let o = Command::new("bash").arg(repo_root().join("scripts/bench-serve.sh")).env("BENCH_SECONDS", "3").env("CLRMAP_BIN", env!("CARGO_BIN_EXE_clrmap")).current_dir(repo_root()).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.trim_end().ends_with("bench-serve: OK"), "{out}{}", String::from_utf8_lossy(&o.stderr));
    for phase in ["single", "nginx-2-replicas", "nginx-one-killed"] {
        let line = out.lines().find(|l| l.starts_with(&format!("bench: {phase} requests="))).unwrap_or_else(|| panic!("{out}"));
        assert!(line.contains(" non2xx=0") && line.contains(" socket_errors=0"), "{line}");
    }
    // Beside nginx sending the same answers as static files, at 1, 50 and 1000 frames.
    for n in [1, 50, 1000] {
        for who in ["clrmap", "nginx"] {
            let line = out.lines().find(|l| l.starts_with(&format!("bench: peer-{who}-{n} requests="))).unwrap_or_else(|| panic!("{out}"));
            assert!(line.contains(" non2xx=0") && line.contains(" socket_errors=0"), "{line}");
        }
        assert!(out.lines().any(|l| l.starts_with(&format!("bench: peer frames={n} clrmap_rate="))), "{out}");
    }
}

#[test]
fn an_answer_over_the_request_timeout_is_503_and_the_service_stays_up() {
    // A symbol server that never answers (5 s symbol timeout), a 1 s request timeout.
    let root = tmp("timeout");
    let hang = Server::start(&root, "hang", None);
    let (n, _, _) = pdb_ids(&repo_root().join(DEBUG).join("Frames.pdb"));
    let s = Serve::start(&["--symbol-server", &hang.url, "--cache", root.join("cache").to_str().unwrap(), "--symbol-timeout", "5s", "--request-timeout", "1s", "--symbol-path", DEBUG]);
    let req = serde_json::json!({"modules": [{"pdb": "Other.pdb", "pdb_id": n}], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}).to_string();
    let t = Instant::now();
    let (status, v) = post_json(&s, "/symbolicate", &req);
    assert_eq!((status, v["error"]["kind"].as_str()), (503, Some("timeout")), "{v}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // Meanwhile (the lookup still running in the background) others are answered.
    let (status, v) = post_json(&s, "/symbolicate", r#"{"modules":[{"name":"Frames.dll"}],"frames":[{"module":0,"token":100663297,"il_offset":1}]}"#);
    assert_eq!((status, v["frames"][0]["line"].as_u64()), (200, Some(26)));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_lru_is_bounded_by_its_flag() {
    // Two modules (the same PDB by name and by id: two entries) asked in turn, three times.
    let (n, _, _) = pdb_ids(&repo_root().join(DEBUG).join("Frames.pdb"));
    let bodies = [
        r#"{"modules":[{"name":"Frames.dll"}],"frames":[{"module":0,"token":100663297,"il_offset":1}]}"#.to_owned(),
        serde_json::json!({"modules": [{"pdb": "Frames.pdb", "pdb_id": n}], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}).to_string(),
    ];
    let metric = |text: &str, name: &str| -> u64 { text.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).unwrap().parse().unwrap() };
    for (lru, misses, hits) in [("128", 2, 4), ("0", 6, 0)] {
        let s = Serve::start(&["--symbol-path", DEBUG, "--lru-mb", lru]);
        for _ in 0..3 {
            for b in &bodies {
                let (status, v) = post_json(&s, "/symbolicate", b);
                assert_eq!((status, v["frames"][0]["line"].as_u64()), (200, Some(26)), "{v}");
            }
        }
        let text = String::from_utf8(curl(&[&s.url("/metrics")]).2).unwrap();
        assert_eq!((metric(&text, "clrmap_symbol_cache_misses_total"), metric(&text, "clrmap_symbol_cache_hits_total")), (misses, hits), "--lru-mb {lru}");
        // With no room, one entry (the last) is all it keeps.
        let entries = metric(&text, "clrmap_symbol_lru_entries");
        assert_eq!(entries, if lru == "0" { 1 } else { 2 });
    }
}

//! `clrmap serve` against hostile clients and upstreams: the real binary over real
//! HTTP on loopback, raw sockets from outside the process, and symbol servers started here that
//! answer what a hostile one would (404s, redirects to `file:`, slow answers). Memory limits come
//! from the documented deployment (docs/service.md: the systemd unit's `MemoryMax`, the
//! Kubernetes manifest's memory limit), enforced with `prlimit --as` (the address space, a
//! stricter bound than resident memory: no cgroup is needed). Every loop is bounded in count and
//! time.
//!
//! `CLRMAP_HOSTILE_BIN` runs these tests against another build of `clrmap` (to show a fault on
//! the code before its fix).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{code, repo_root, stderr};

const DEBUG: &str = "tests/fixtures/frames/debug-portable";
const GIB: u64 = 1 << 30;

fn bin() -> PathBuf {
    std::env::var_os("CLRMAP_HOSTILE_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_clrmap")))
}

/// A running `clrmap serve` (under `prlimit --as=LIMIT` when a limit is given), killed when
/// dropped.
struct Svc {
    child: Child,
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl Svc {
    fn start(limit: Option<u64>, args: &[&str]) -> Svc {
        let mut cmd = match limit {
            Some(bytes) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--as={bytes}")).arg("--").arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        let mut child = cmd.args(["serve", "--listen", "127.0.0.1:0"]).args(args).current_dir(repo_root()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
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
        Svc { child, port, log }
    }

    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status.lines().find_map(|l| l.strip_prefix(field)).unwrap().trim().trim_end_matches(" kB").trim().parse().unwrap()
    }

    /// Peak resident memory, bytes.
    fn peak_rss(&self) -> u64 {
        self.status_kib("VmHWM:") * 1024
    }

    fn rss(&self) -> u64 {
        self.status_kib("VmRSS:") * 1024
    }

    /// Still running, and answering /healthz.
    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none() && http(self.port, "GET", "/healthz", b"").0 == 200
    }

    fn metric(&self, name: &str) -> u64 {
        let (status, _, body) = http(self.port, "GET", "/metrics", b"");
        assert_eq!(status, 200);
        let text = String::from_utf8(body).unwrap();
        text.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).unwrap_or_else(|| panic!("no {name} in {text}")).parse().unwrap()
    }

    fn requests_logged(&self) -> usize {
        self.log.lock().unwrap().iter().filter(|l| l.contains("\"event\":\"request\"") && l.contains("/symbolicate")).count()
    }
}

impl Drop for Svc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 exchange on a new connection: (status, head, body). Any failure (the service
/// gone) is status 0.
fn http(port: u16, method: &str, path: &str, body: &[u8]) -> (u16, String, Vec<u8>) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new(), Vec::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    if s.write_all(head.as_bytes()).is_err() || s.write_all(body).is_err() {
        return (0, String::new(), Vec::new());
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (0, String::from_utf8_lossy(&out).into_owned(), Vec::new());
    };
    let head = String::from_utf8_lossy(&out[..end]).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head, out[end + 4..].to_vec())
}

fn post(svc: &Svc, body: &str) -> (u16, serde_json::Value) {
    let (status, head, b) = http(svc.port, "POST", "/symbolicate", body.as_bytes());
    let v = serde_json::from_slice(&b).unwrap_or_else(|_| panic!("status {status}, not JSON: {head} {}", String::from_utf8_lossy(&b[..b.len().min(2000)])));
    (status, v)
}

/// What a hostile upstream answers one path with.
#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    delay: Duration,
}

impl Reply {
    fn status(status: u16) -> Reply {
        Reply { status, headers: Vec::new(), body: Vec::new(), delay: Duration::ZERO }
    }
    fn file(body: Vec<u8>) -> Reply {
        Reply { status: 200, headers: Vec::new(), body, delay: Duration::ZERO }
    }
    fn redirect(to: &str) -> Reply {
        Reply { status: 302, headers: vec![("Location".to_owned(), to.to_owned())], body: Vec::new(), delay: Duration::ZERO }
    }
}

type Handler = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

/// A symbol server on loopback, answering each GET by `handler`, with a log of the paths asked.
struct Upstream {
    url: String,
    port: u16,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Upstream {
    fn start(handler: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Handler = Arc::new(handler);
        let (log, halt) = (asked.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if halt.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                let (handler, log) = (handler.clone(), log.clone());
                std::thread::spawn(move || {
                    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                        match conn.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let text = String::from_utf8_lossy(&head);
                    let path = text.split(' ').nth(1).unwrap_or("").to_owned();
                    log.lock().unwrap().push(path.clone());
                    let r = handler(&path);
                    std::thread::sleep(r.delay);
                    let mut out = format!("HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n", r.status, r.body.len());
                    for (k, v) in &r.headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    out.push_str("\r\n");
                    let _ = conn.write_all(out.as_bytes());
                    let _ = conn.write_all(&r.body);
                });
            }
        });
        Upstream { url: format!("http://127.0.0.1:{port}"), port, asked, stop }
    }

    fn count(&self, path: &str) -> usize {
        self.asked.lock().unwrap().iter().filter(|p| p.eq_ignore_ascii_case(path)).count()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(repo_root().join(DEBUG).join(name)).unwrap()
}

/// `G`: the GUID of the fixture's PDB, `Guid.ToString("N")`.
fn pdb_guid() -> String {
    let id = clrmap::pdb::PortablePdb::parse(&fixture("Frames.pdb")).unwrap().id().0;
    let g = &id[..16];
    [g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6]].iter().chain(&g[8..]).map(|b| format!("{b:02x}")).collect()
}

/// The SSQP path of the fixture's PDB.
fn pdb_key_path() -> String {
    format!("/frames.pdb/{}ffffffff/frames.pdb", pdb_guid())
}

/// The fixture assembly's PE key (TimeDateStamp, SizeOfImage), read from its headers here.
fn pe_key() -> (u32, u32) {
    let b = fixture("Frames.dll");
    let pe = u32::from_le_bytes(b[0x3c..0x40].try_into().unwrap()) as usize;
    (u32::from_le_bytes(b[pe + 8..pe + 12].try_into().unwrap()), u32::from_le_bytes(b[pe + 80..pe + 84].try_into().unwrap()))
}

fn dll_key_path() -> String {
    let (t, z) = pe_key();
    format!("/frames.dll/{t:08x}{z:x}/frames.dll")
}

/// A flag's value in the systemd unit or the Kubernetes manifest of docs/service.md, and its
/// memory limit in bytes: (flags, limit).
fn deployment(which: &str) -> (Vec<String>, u64) {
    let doc = std::fs::read_to_string(repo_root().join("docs/service.md")).unwrap();
    if which == "systemd" {
        let unit = doc.split("```ini").nth(1).unwrap().split("```").next().unwrap();
        let exec = unit.split("ExecStart=").nth(1).unwrap();
        let mut line = String::new();
        for l in exec.lines() {
            line.push_str(l.trim_end_matches('\\').trim());
            line.push(' ');
            if !l.trim_end().ends_with('\\') {
                break;
            }
        }
        let flags: Vec<String> = line.split_whitespace().skip(2).map(str::to_owned).collect();
        let max = unit.lines().find_map(|l| l.strip_prefix("MemoryMax=")).unwrap().trim();
        (flags, size(max))
    } else {
        let yaml = doc.split("```yaml").nth(1).unwrap().split("```").next().unwrap();
        let args = yaml.split("args: [").nth(1).unwrap().split(']').next().unwrap();
        let flags: Vec<String> = args.split(',').map(|a| a.trim().trim_matches('"').to_owned()).filter(|a| !a.is_empty()).skip(1).collect();
        let limits = yaml.split("limits: {memory: ").nth(1).unwrap().split('}').next().unwrap();
        (flags, size(limits.trim()))
    }
}

/// `1G`, `512Mi`, `1Gi`: bytes (systemd's and Kubernetes' suffixes are both powers of two here).
fn size(text: &str) -> u64 {
    let (n, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: u64 = n.parse().unwrap();
    n * match unit {
        "G" | "Gi" => GIB,
        "M" | "Mi" => 1 << 20,
        "" => 1,
        other => panic!("unit {other}"),
    }
}

/// The deployment's flags with what points at the world replaced by what is on this machine:
/// `--listen` dropped (the harness adds a loopback one), symbol paths and servers and the cache
/// replaced.
fn local_flags(flags: &[String], symbol_path: &Path, server: &str, cache: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = flags.iter();
    while let Some(f) = it.next() {
        match f.as_str() {
            "--listen" | "--symbol-path" | "--symbol-server" | "--cache" => {
                it.next();
            }
            _ => out.push(f.clone()),
        }
    }
    out.extend(["--symbol-path".to_owned(), s(symbol_path).to_owned(), "--symbol-server".to_owned(), server.to_owned(), "--cache".to_owned(), s(cache).to_owned()]);
    out
}

/// The first hostile request: one module named by 1 MiB of `A` and `.dll`, and `frames` frames
/// pointing at it.
fn long_name_request(frames: usize) -> String {
    let name = format!("{}.dll", "A".repeat(1 << 20));
    let frames: Vec<_> = (0..frames).map(|i| serde_json::json!({"module": 0, "token": 100663297, "il_offset": i})).collect();
    serde_json::json!({"modules": [{"name": name}], "frames": frames}).to_string()
}

/// A body of `frames` frames of a module that is found nowhere (each answered with an error):
/// about 45 bytes a frame in, over 200 out.
fn missing_frames_request(frames: usize) -> String {
    let frames: Vec<_> = (0..frames).map(|i| serde_json::json!({"module": 0, "token": 100663297 + (i % 1000), "il_offset": i})).collect();
    serde_json::json!({"modules": [{"name": "Nowhere.dll", "pe_timestamp": 1, "pe_size_of_image": 2}], "frames": frames}).to_string()
}

#[test]
fn a_megabyte_module_name_cannot_kill_the_service_and_answers_are_bounded() {
    let (flags, limit) = deployment("systemd");
    let root = tmp("long-name");
    let up = Upstream::start(|_| Reply::status(404));
    let args = local_flags(&flags, &root, &up.url, &root.join("cache"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut svc = Svc::start(Some(limit), &args);
    let body = long_name_request(2000);
    assert!(body.len() > 1_000_000 && body.len() < 1_200_000, "{}", body.len());
    let t = Instant::now();
    let (status, v) = post(&svc, &body);
    assert_eq!(status, 200, "{v}");
    let frames = v["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 2000);
    for f in frames {
        // The name is not repeated: no module, and a message that names the module by index.
        assert_eq!((&f["module"], &f["error"]["kind"]), (&serde_json::Value::Null, &serde_json::json!("bad_module")), "{}", &f.to_string()[..300.min(f.to_string().len())]);
        let m = f["error"]["message"].as_str().unwrap();
        assert!(m.starts_with("modules[0]: its name is 1048580 bytes") && m.len() < 200, "{m}");
    }
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    eprintln!("measured: 1 MiB name x 2000 frames: answered in {:?}, peak RSS {}", t.elapsed(), svc.peak_rss());
    assert!(svc.alive());
    // An answer over --max-answer is 413, and the service goes on.
    drop(svc);
    let mut args = args.clone();
    args.extend(["--max-answer", "100000"]);
    let mut svc = Svc::start(Some(limit), &args);
    let (status, v) = post(&svc, &missing_frames_request(2000));
    assert_eq!((status, v["error"]["kind"].as_str()), (413, Some("answer_too_large")), "{v}");
    let (status, v) = post(&svc, &missing_frames_request(10));
    assert_eq!((status, v["frames"][9]["error"]["kind"].as_str()), (200, Some("not_found")), "{v}");
    assert!(svc.alive());
    assert!(svc.peak_rss() < limit / 4, "peak RSS {}", svc.peak_rss());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_pdb_path_in_a_request_reads_nothing_outside_the_symbol_paths() {
    let root = tmp("outside");
    let (outside, empty) = (root.join("outside"), root.join("empty"));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(&empty).unwrap();
    for f in ["Frames.pdb", "Frames.dll"] {
        std::fs::write(outside.join(f), fixture(f)).unwrap();
    }
    let g = pdb_guid();
    let abs = s(&outside.join("Frames.pdb")).to_owned();
    let bodies = [
        serde_json::json!({"modules": [{"pdb": abs, "pdb_id": g}], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}),
        serde_json::json!({"modules": [{"name": "Frames.dll", "pdb": abs, "pdb_id": g}], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}),
        serde_json::json!({"modules": [{"type": "pe_dotnet", "debug_file": abs, "debug_id": g}], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}),
        serde_json::json!({"modules": [{"pdb": format!("../outside/Frames.pdb"), "pdb_id": g}], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}),
    ];
    let svc = Svc::start(None, &["--symbol-path", s(&empty)]);
    for b in &bodies {
        let (status, v) = post(&svc, &b.to_string());
        let f = &v["frames"][0];
        assert_eq!(status, 200, "{v}");
        assert_eq!((&f["line"], &f["method"], &f["error"]["kind"]), (&serde_json::Value::Null, &serde_json::Value::Null, &serde_json::json!("not_found")), "{b}: {f}");
    }
    // The same requests, with that folder a symbol path: the PDB is found by its file name.
    let svc = Svc::start(None, &["--symbol-path", s(&outside)]);
    for b in &bodies {
        let (status, v) = post(&svc, &b.to_string());
        assert_eq!((status, v["frames"][0]["line"].as_u64()), (200, Some(26)), "{v}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_wrong_mvid_never_evicts_a_good_cache_entry_and_a_key_is_downloaded_once() {
    let (dll, pdb) = (fixture("Frames.dll"), fixture("Frames.pdb"));
    let (dll_path, pdb_path) = (dll_key_path(), pdb_key_path());
    let (d2, p2) = (dll_path.clone(), pdb_path.clone());
    // Slow answers, so that requests in parallel overlap their downloads.
    let up = Upstream::start(move |p| {
        let mut r = if p.eq_ignore_ascii_case(&d2) {
            Reply::file(dll.clone())
        } else if p.eq_ignore_ascii_case(&p2) {
            Reply::file(pdb.clone())
        } else {
            Reply::status(404)
        };
        r.delay = Duration::from_millis(300);
        r
    });
    let root = tmp("mvid");
    let cache = root.join("cache");
    let svc = Svc::start(None, &["--symbol-server", &up.url, "--cache", s(&cache)]);
    let (t, z) = pe_key();
    let module = |mvid: Option<String>| {
        let mut m = serde_json::json!({"name": "Frames.dll", "pe_timestamp": t, "pe_size_of_image": z});
        if let Some(mvid) = mvid {
            m["mvid"] = serde_json::json!(mvid);
        }
        m
    };
    let (status, v) = post(&svc, &serde_json::json!({"modules": [module(None)], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}).to_string());
    assert_eq!((status, v["frames"][0]["line"].as_u64()), (200, Some(26)), "{v}");
    let entry = cache.join(dll_path.trim_start_matches('/'));
    assert_eq!(std::fs::read(&entry).unwrap(), fixture("Frames.dll"));
    // 50 modules of that PE key, each with another wrong MVID: a frame error each, naming the
    // MVID; the entry stays, and nothing is downloaded again.
    let wrong = |i: usize| format!("{i:032x}");
    let modules: Vec<_> = (1..=50).map(|i| module(Some(wrong(i)))).collect();
    let frames: Vec<_> = (0..50).map(|i| serde_json::json!({"module": i, "token": 100663297, "il_offset": 1})).collect();
    let (status, v) = post(&svc, &serde_json::json!({"modules": modules, "frames": frames}).to_string());
    assert_eq!(status, 200, "{v}");
    for f in v["frames"].as_array().unwrap() {
        assert_eq!(f["error"]["kind"], "not_found", "{f}");
        assert!(f["error"]["message"].as_str().unwrap().contains("MVID"), "{f}");
    }
    assert_eq!(std::fs::read(&entry).unwrap(), fixture("Frames.dll"));
    assert_eq!((up.count(&dll_path), up.count(&pdb_path)), (1, 1), "{:?}", up.asked.lock().unwrap());
    // A new service on an empty cache, four requests at once for the same key (each module
    // another MVID, so that no two share an LRU entry): one download.
    drop(svc);
    let cache2 = root.join("cache2");
    let svc = Arc::new(Svc::start(None, &["--symbol-server", &up.url, "--cache", s(&cache2)]));
    let workers: Vec<_> = (100..104)
        .map(|i| {
            let (svc, body) = (svc.clone(), serde_json::json!({"modules": [module(Some(wrong(i)))], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}).to_string());
            std::thread::spawn(move || post(&svc, &body))
        })
        .collect();
    for w in workers {
        let (status, v) = w.join().unwrap();
        assert_eq!((status, v["frames"][0]["error"]["kind"].as_str()), (200, Some("not_found")), "{v}");
    }
    assert_eq!(up.count(&dll_path), 2, "{:?}", up.asked.lock().unwrap());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_miss_is_forgotten_after_the_negative_ttl() {
    let root = tmp("ttl");
    let dir = root.join("symbols");
    std::fs::create_dir_all(&dir).unwrap();
    let published = Arc::new(AtomicBool::new(false));
    let (flag, pdb, key) = (published.clone(), fixture("Frames.pdb"), pdb_key_path());
    let up = Upstream::start(move |p| if flag.load(Ordering::SeqCst) && p.eq_ignore_ascii_case(&key) { Reply::file(pdb.clone()) } else { Reply::status(404) });
    // One service searching the folder, one asking the server, each forgetting a miss after 1 s.
    let local = Svc::start(None, &["--symbol-path", s(&dir), "--negative-ttl", "1s"]);
    let remote = Svc::start(None, &["--symbol-server", &up.url, "--cache", s(&root.join("cache")), "--negative-ttl", "1s"]);
    let by_name = r#"{"modules":[{"name":"Frames.dll"}],"frames":[{"module":0,"token":100663297,"il_offset":1}]}"#;
    let by_id = serde_json::json!({"modules": [{"pdb": "Frames.pdb", "pdb_id": pdb_guid()}], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}).to_string();
    let asks = [(&local, by_name), (&remote, by_id.as_str())];
    for (svc, b) in asks {
        let (status, v) = post(svc, b);
        assert_eq!((status, v["frames"][0]["error"]["kind"].as_str()), (200, Some("not_found")), "{v}");
    }
    assert_eq!(up.count(&pdb_key_path()), 1);
    // Published: an assembly and its PDB copied into the folder, the PDB on the server. Within
    // the TTL the miss is still remembered (the server is not asked again) ...
    std::fs::write(dir.join("Frames.dll"), fixture("Frames.dll")).unwrap();
    std::fs::write(dir.join("Frames.pdb"), fixture("Frames.pdb")).unwrap();
    published.store(true, Ordering::SeqCst);
    for (svc, b) in asks {
        let (_, v) = post(svc, b);
        assert_eq!(v["frames"][0]["error"]["kind"], "not_found", "{v}");
    }
    assert_eq!(up.count(&pdb_key_path()), 1);
    // ... and soon after it, both are found.
    std::thread::sleep(Duration::from_millis(1500));
    for (svc, b) in asks {
        let (status, v) = post(svc, b);
        assert_eq!((status, v["frames"][0]["line"].as_u64()), (200, Some(26)), "{v}");
    }
    assert_eq!(up.count(&pdb_key_path()), 2);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn upstream_failures_cost_the_same_however_many_came_before() {
    let up = Upstream::start(|_| Reply::status(404));
    let root = tmp("failures");
    let svc = Svc::start(None, &["--symbol-server", &up.url, "--cache", s(&root.join("cache"))]);
    const BATCH: usize = 1500;
    const BATCHES: usize = 8;
    let mut times = Vec::new();
    for b in 0..BATCHES {
        // Each module another PDB id: a new key, a new 404, a new note.
        let modules: Vec<_> = (0..BATCH).map(|i| serde_json::json!({"pdb": "Gone.pdb", "pdb_id": format!("{:08x}{:024x}", b, i)})).collect();
        let frames: Vec<_> = (0..BATCH).map(|i| serde_json::json!({"module": i, "token": 100663297, "il_offset": 1})).collect();
        let t = Instant::now();
        let (status, v) = post(&svc, &serde_json::json!({"modules": modules, "frames": frames}).to_string());
        times.push(t.elapsed());
        assert_eq!(status, 200, "{v}");
        let m = v["frames"][BATCH - 1]["error"]["message"].as_str().unwrap();
        // Each frame names its own key's 404, and no other note.
        assert!(m.contains("not on the server (404)") && m.matches("symbol server http").count() == 1, "{m}");
    }
    assert_eq!(svc.metric("clrmap_symbol_fetch_failures_total"), (BATCH * BATCHES) as u64);
    // Work that grew with the failures before (a list of notes scanned per failure) would make
    // the last batches several times the first. One batch slowed by a loaded machine is not
    // that: the faster of the last two is compared with the slower of the first two.
    let first = times[0].max(times[1]);
    let last = times[BATCHES - 1].min(times[BATCHES - 2]);
    eprintln!("measured: {BATCHES} batches of {BATCH} upstream 404s took {times:?}");
    assert!(last < first * 3 + Duration::from_millis(1000), "batches took {times:?}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn clients_that_never_read_hold_bounded_memory_and_are_cut_off() {
    let (flags, limit) = deployment("systemd");
    let root = tmp("unread");
    let up = Upstream::start(|_| Reply::status(404));
    let mut args = local_flags(&flags, &root, &up.url, &root.join("cache"));
    args.extend(["--write-timeout".to_owned(), "2s".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut svc = Svc::start(Some(limit), &args);
    let body = missing_frames_request(100_000);
    assert!(body.len() > 4_000_000 && body.len() < 5_000_000, "{}", body.len());
    // 30 clients send 4.5 MB each and never read a byte of their answers.
    let mut clients = Vec::new();
    for _ in 0..30 {
        let mut c = TcpStream::connect(("127.0.0.1", svc.port)).unwrap();
        let head = format!("POST /symbolicate HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", body.len());
        c.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
        // A client the service refuses (503 `busy`) mid-body may find its connection closed.
        let _ = c.write_all(head.as_bytes());
        let _ = c.write_all(body.as_bytes());
        clients.push(c);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while svc.requests_logged() < 30 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(svc.requests_logged(), 30, "{:?}", svc.log.lock().unwrap());
    let statuses: Vec<u16> = svc
        .log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["path"] == "/symbolicate")
        .map(|v| v["status"].as_u64().unwrap() as u16)
        .collect();
    // Answered, or told the service is busy: nothing else.
    assert!(statuses.iter().all(|s| *s == 200 || *s == 503) && statuses.contains(&200), "{statuses:?}");
    let held_peak = svc.metric("clrmap_buffered_bytes_peak");
    eprintln!("measured: 30 unread clients: statuses {statuses:?}, buffered peak {held_peak}, peak RSS {}", svc.peak_rss());
    assert!(held_peak <= 256 << 20, "{held_peak}");
    let peak = svc.peak_rss();
    assert!(peak < limit / 2, "peak RSS {peak}");
    // Past the write timeout, every unread answer is dropped and its connection closed (the
    // deadline leaves room for a loaded machine).
    // The values are asserted as last read: each read is a connection of its own, and asking
    // again at once may find the one before not yet reaped (CI once read 2 that way).
    let deadline = Instant::now() + Duration::from_secs(90);
    let (mut buffered, mut connections) = (u64::MAX, u64::MAX);
    while Instant::now() < deadline {
        // Connections first: the read before it was 200 ms ago.
        connections = svc.metric("clrmap_connections");
        buffered = svc.metric("clrmap_buffered_bytes");
        if buffered == 0 && connections <= 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(buffered == 0 && connections <= 1, "{buffered} bytes buffered, {connections} connections");
    for c in &mut clients {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sink = Vec::new();
        // What the kernel buffered, then the end (or a reset): never the whole answer.
        let _ = c.read_to_end(&mut sink);
        assert!(sink.len() < 20 << 20, "{}", sink.len());
    }
    assert!(svc.alive());
    assert!(svc.rss() < limit / 2, "RSS {}", svc.rss());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn connections_over_the_bound_are_answered_503_and_closed() {
    let svc = Svc::start(None, &["--max-connections", "4"]);
    let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(("127.0.0.1", svc.port)).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut over = TcpStream::connect(("127.0.0.1", svc.port)).unwrap();
    over.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = String::new();
    let _ = over.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503") && answer.contains("too_many_connections"), "{answer}");
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut status = 0;
    while status != 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        status = http(svc.port, "GET", "/healthz", b"").0;
    }
    assert_eq!(status, 200);
    assert_eq!(svc.metric("clrmap_connections_refused_total"), 1);
}

#[test]
fn the_lru_counts_what_missing_modules_hold_and_evicts_in_constant_time() {
    let svc = Svc::start(None, &["--lru-mb", "32"]);
    const MODULES: usize = 10_000;
    let mut before = (0, 0);
    let mut slowest = Duration::ZERO;
    let mut first = Duration::ZERO;
    for r in 0..40 {
        let modules: Vec<_> = (0..MODULES).map(|i| serde_json::json!({"pdb": format!("m{r:03}x{i:06}.pdb")})).collect();
        let frames: Vec<_> = (0..MODULES).map(|i| serde_json::json!({"module": i, "token": 100663297, "il_offset": 1})).collect();
        let t = Instant::now();
        let (status, v) = post(&svc, &serde_json::json!({"modules": modules, "frames": frames}).to_string());
        assert_eq!((status, v["frames"][0]["error"]["kind"].as_str()), (200, Some("not_found")), "{v}");
        if r == 0 {
            // The baseline: after one request, whose transient memory the allocator keeps.
            first = t.elapsed();
            before = (svc.rss(), svc.metric("clrmap_symbol_lru_bytes"));
        }
        slowest = slowest.max(t.elapsed());
    }
    // Full, the LRU evicts one entry per new one at the cost of adding it.
    assert!(slowest < first * 4 + Duration::from_secs(1), "first {first:?}, slowest {slowest:?}");
    let (bytes, entries) = (svc.metric("clrmap_symbol_lru_bytes"), svc.metric("clrmap_symbol_lru_entries"));
    assert!(bytes <= 32 << 20 && entries > 10_000, "{bytes} bytes, {entries} entries");
    // What the entries really hold (resident memory grown) is within what they are counted.
    let (grown, counted) = (svc.rss().saturating_sub(before.0), bytes - before.1);
    eprintln!("measured: LRU {bytes} bytes in {entries} entries; RSS grew {grown} while the count grew {counted}; first request {first:?}, slowest {slowest:?}");
    assert!(grown < counted + counted / 2, "RSS grew {grown}, the LRU count grew {counted} ({entries} entries)");
}

#[test]
fn redirects_to_urls_without_a_host_are_refused_and_never_a_panic() {
    let root = tmp("redirect");
    let pdb = fixture("Frames.pdb");
    for target in ["file:///etc/passwd", "data:text/plain,BSJB", "unix:/run/x.sock", "mailto:a@b.c", "about:blank"] {
        let t = target.to_owned();
        let up = Upstream::start(move |_| Reply::redirect(&t));
        let cache = root.join(format!("cache-{}", target.split(':').next().unwrap()));
        let o = Command::new(bin())
            .args(["symbolize", "examples/frames.nettrace", "--return-address", "--symbol-server", &up.url, "--cache", s(&cache), "0x7F8CE5225927"])
            .current_dir(repo_root())
            .output()
            .unwrap();
        assert_ne!(code(&o), Some(101), "{target}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{target}: {}", stderr(&o));
        assert_eq!(code(&o), Some(0), "{target}: {}", stderr(&o));
        // The service: the frame's error says the redirect was not followed.
        let svc = Svc::start(None, &["--symbol-server", &up.url, "--cache", s(&cache)]);
        let (status, v) = post(&svc, &serde_json::json!({"modules": [{"pdb": "Frames.pdb", "pdb_id": pdb_guid()}], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}]}).to_string());
        assert_eq!(status, 200, "{v}");
        let m = v["frames"][0]["error"]["message"].as_str().unwrap();
        assert!(m.contains("not followed"), "{target}: {m}");
    }
    // A redirect loop stops; a redirect to an http URL on loopback is followed.
    let key = pdb_key_path();
    let up = Upstream::start(move |p| {
        if p.starts_with("/loop") {
            Reply::redirect("/loop")
        } else if p.starts_with("/real") {
            Reply::file(pdb.clone())
        } else if p.eq_ignore_ascii_case(&key) {
            Reply::redirect("/real/Frames.pdb")
        } else {
            Reply::redirect("/loop")
        }
    });
    let svc = Svc::start(None, &["--symbol-server", &up.url, "--cache", s(&root.join("cache-http"))]);
    let (status, v) = post(&svc, &serde_json::json!({"modules": [{"pdb": "Frames.pdb", "pdb_id": pdb_guid()}, {"pdb": "Other.pdb", "pdb_id": "0123456789abcdef0123456789abcdef"}], "frames": [{"module": 0, "token": 100663297, "il_offset": 1}, {"module": 1, "token": 100663297, "il_offset": 1}]}).to_string());
    assert_eq!((status, v["frames"][0]["line"].as_u64()), (200, Some(26)), "{v}");
    assert!(v["frames"][1]["error"]["message"].as_str().unwrap().contains("more than 4 redirects"), "{v}");
    assert!(up.count("/loop") <= 5, "{:?}", up.asked.lock().unwrap());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_string_module_is_never_an_index() {
    let svc = Svc::start(None, &["--symbol-path", DEBUG]);
    let modules = serde_json::json!([{"name": "Nowhere.dll"}, {"name": "Frames.dll"}]);
    let (status, v) = post(&svc, &serde_json::json!({"modules": modules, "frames": [{"module": "1", "token": 100663297, "il_offset": 1}]}).to_string());
    assert_eq!((status, v["error"]["kind"].as_str()), (400, Some("missing_field")), "{v}");
    // With Sentry's addr_mode, its own `module` string (a name, here of digits) is ignored.
    let (status, v) = post(&svc, &serde_json::json!({"modules": modules, "frames": [{"module": "0", "addr_mode": "rel:1", "token": 100663297, "il_offset": 1}]}).to_string());
    assert_eq!((status, v["frames"][0]["line"].as_u64(), v["frames"][0]["module"].as_str()), (200, Some(26), Some("Frames.dll")), "{v}");
}

#[test]
fn the_documented_deployments_hold_under_their_memory_limits() {
    for which in ["systemd", "kubernetes"] {
        let (flags, limit) = deployment(which);
        let root = tmp(&format!("deploy-{which}"));
        let up = Upstream::start(|_| Reply::status(404));
        let args = local_flags(&flags, &root, &up.url, &root.join("cache"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut svc = Svc::start(Some(limit), &args);
        // Every hostile load at once: the long name, 30 clients never reading 4.5 MB
        // answers each, and a flood of modules found nowhere.
        let long = long_name_request(2000);
        let (status, _) = post(&svc, &long);
        assert_eq!(status, 200, "{which}");
        let body = missing_frames_request(100_000);
        let mut clients = Vec::new();
        for _ in 0..30 {
            let Ok(mut c) = TcpStream::connect(("127.0.0.1", svc.port)) else {
                break;
            };
            let head = format!("POST /symbolicate HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", body.len());
            c.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
            let _ = c.write_all(head.as_bytes());
            let _ = c.write_all(body.as_bytes());
            clients.push(c);
        }
        for r in 0..5 {
            let modules: Vec<_> = (0..10_000).map(|i| serde_json::json!({"pdb": format!("d{r}x{i:06}.pdb"), "pdb_id": format!("{r:08x}{i:024x}")})).collect();
            let frames: Vec<_> = (0..10_000).map(|i| serde_json::json!({"module": i, "token": 100663297, "il_offset": 1})).collect();
            let (status, _, _) = http(svc.port, "POST", "/symbolicate", serde_json::json!({"modules": modules, "frames": frames}).to_string().as_bytes());
            assert!(status == 200 || status == 503, "{which}: {status}");
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while svc.requests_logged() < 36 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(svc.alive(), "{which}");
        let peak = svc.peak_rss();
        eprintln!("measured: {which} (limit {limit}): peak RSS {peak}, buffered peak {}", svc.metric("clrmap_buffered_bytes_peak"));
        // With margin: under half the limit.
        assert!(peak < limit / 2, "{which}: peak RSS {peak} of {limit}");
        drop(clients);
        std::fs::remove_dir_all(&root).unwrap();
    }
}

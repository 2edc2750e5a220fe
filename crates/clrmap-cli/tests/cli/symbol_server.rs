//! Symbol servers, through the real binary, against the loopback SSQP server
//! `tests/symsrv/server.py` (nothing here reaches any other server).
//!
//! The oracle for lines is the runtime's own `StackTrace` in `examples/frames.stdout`
//! (`pdb_identity::inner_frame`): a PDB fetched from a server must answer exactly as the PDB on
//! disk does.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::pdb_identity::inner_frame;
use crate::support::{clrmap, code, repo_root, stderr, stdout};

const TRACE: &str = "examples/frames.nettrace";
const DEBUG_PDB: &str = "tests/fixtures/frames/debug-portable/Frames.pdb";
const RELEASE: &str = "tests/fixtures/frames/release-portable";

/// A running `tests/symsrv/server.py`, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub url: String,
    pub log: PathBuf,
}

impl Server {
    /// Serve `root` (SSQP layout) in `mode`; `wrong` is the file the `wrong` mode sends.
    pub(crate) fn start(root: &Path, mode: &str, wrong: Option<&Path>) -> Server {
        let log = root.with_extension(format!("{mode}.log"));
        let _ = std::fs::remove_file(&log);
        let mut cmd = Command::new("python3");
        cmd.arg(repo_root().join("tests/symsrv/server.py")).arg("--root").arg(root).arg("--mode").arg(mode).arg("--log").arg(&log);
        if let Some(w) = wrong {
            cmd.arg("--wrong").arg(w);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("python3 runs tests/symsrv/server.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port: u16 = line.trim().parse().unwrap_or_else(|_| panic!("server.py printed {line:?}"));
        Server { child, url: format!("http://127.0.0.1:{port}"), log }
    }

    /// The paths asked so far, with their SymbolChecksum headers.
    pub(crate) fn requests(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let (p, h) = l.split_once('\t').unwrap();
                (p.to_owned(), h.to_owned())
            })
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-cli-symsrv-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The SSQP key of a portable PDB, computed here from the spec, not by clrmap: the GUID in
/// `Guid.ToString("N")` form (first three fields little-endian), then `ffffffff`.
fn key_of(pdb: &Path) -> String {
    let id = clrmap::pdb::PortablePdb::parse(&std::fs::read(pdb).unwrap()).unwrap().id().0;
    let g = &id[..16];
    let n: String = [g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6]].iter().chain(&g[8..]).map(|b| format!("{b:02x}")).collect();
    let name = pdb.file_name().unwrap().to_str().unwrap().to_lowercase();
    format!("{name}/{n}ffffffff/{name}")
}

/// A server root holding `pdb` under its key, the key's directories upper-cased where the spec
/// prints them so (the server matches without regard to case, as Microsoft's does).
fn store(name: &str, pdb: &Path) -> PathBuf {
    let root = tmp(name);
    let key = key_of(pdb);
    let (file, rest) = key.split_once('/').unwrap();
    let (index, _) = rest.split_once('/').unwrap();
    let dir = root.join(file.replace("frames", "Frames")).join(index.replace("ffffffff", "FFFFFFFF"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(pdb, dir.join("Frames.pdb")).unwrap();
    root
}

/// Every regular file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_trace_symbolizes_with_its_pdb_from_a_server_then_from_the_cache() {
    let (address, expected) = inner_frame();
    let root = store("trace-root", &repo_root().join(DEBUG_PDB));
    let cache = tmp("trace-cache");
    let server = Server::start(&root, "ok", None);
    // No PDB on disk anywhere: the recorded module path is gone, and nothing is in a symbol path.
    let o = clrmap(&["symbolize", TRACE, "--symbol-server", &server.url, "--cache", s(&cache), "--return-address", &address]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), expected.clone()), "{}", stderr(&o));
    let key = key_of(&repo_root().join(DEBUG_PDB));
    assert!(server.requests().iter().any(|(p, _)| p == &format!("/{key}")), "{:?}", server.requests());
    // The cache holds the file under the same key, whole, and nothing else (no temporary file).
    assert_eq!(files(&cache), vec![cache.join(&key)]);
    assert_eq!(std::fs::read(cache.join(&key)).unwrap(), std::fs::read(repo_root().join(DEBUG_PDB)).unwrap());
    // The server stopped: the same answer, from the cache.
    drop(server);
    let o = clrmap(&["symbolize", TRACE, "--symbol-server", "http://127.0.0.1:9", "--cache", s(&cache), "--return-address", &address]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), expected.clone()), "{}", stderr(&o));
    // The cache is itself a symbol store: as a --symbol-path, with no server at all.
    let o = clrmap(&["symbolize", TRACE, "--symbol-path", s(&cache), "--return-address", &address]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), expected), "{}", stderr(&o));
    // And from the environment variable.
    let server = Server::start(&root, "ok", None);
    let cache2 = tmp("trace-cache-env");
    let o = Command::new(env!("CARGO_BIN_EXE_clrmap"))
        .args(["symbolize", TRACE, "--cache", s(&cache2), "--return-address", &inner_frame().0])
        .env("CLRMAP_SYMBOL_SERVER", format!("http://127.0.0.1:9;{}", server.url))
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert_eq!(stdout(&o), inner_frame().1, "{}", stderr(&o));
}

#[test]
fn an_assembly_alone_gets_its_pdb_with_the_symbol_checksum_header() {
    let want = clrmap(&["pdb", "lines", &format!("{RELEASE}/Frames.dll")]);
    assert_eq!(code(&want), Some(0));
    let root = store("alone-root", &repo_root().join(RELEASE).join("Frames.pdb"));
    let alone = tmp("alone");
    std::fs::copy(repo_root().join(RELEASE).join("Frames.dll"), alone.join("Frames.dll")).unwrap();
    let cache = tmp("alone-cache");
    let server = Server::start(&root, "ok", None);
    let o = clrmap(&["pdb", "lines", s(&alone.join("Frames.dll")), "--symbol-server", &server.url, "--cache", s(&cache)]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), stdout(&want)), "{}", stderr(&o));
    // The image's PdbChecksum entry, sent as the SSQP SymbolChecksum header: ALGORITHM:HEX.
    let bytes = std::fs::read(repo_root().join(RELEASE).join("Frames.dll")).unwrap();
    let image = clrmap::pe::PeImage::parse(&bytes).unwrap();
    let (alg, sum) = image.pdb_checksums()[0];
    let header = format!("{alg}:{}", sum.iter().map(|b| format!("{b:02X}")).collect::<String>());
    assert_eq!(alg, "SHA256");
    assert_eq!(server.requests(), vec![(format!("/{}", key_of(&repo_root().join(RELEASE).join("Frames.pdb"))), header)]);
}

/// Each fault: a clear error naming the server, within the timeout, and no cache entry.
#[test]
fn faulty_servers_give_clear_errors_in_time_and_leave_no_cache_entry() {
    let root = store("faults-root", &repo_root().join(RELEASE).join("Frames.pdb"));
    let alone = tmp("faults-alone");
    std::fs::copy(repo_root().join(RELEASE).join("Frames.dll"), alone.join("Frames.dll")).unwrap();
    let wrong = repo_root().join(DEBUG_PDB);
    for (mode, says) in [
        ("404", "not on the server (404)"),
        ("500", "HTTP 500"),
        ("truncate", "the body was cut"),
        ("wrong", "is not the one the key names"),
        ("hang", "unreachable: no answer within 2s"),
        ("huge", "over the 268435456 allowed"),
        // A chunked body past the bound: stopped there, or (a debug build on a loaded machine
        // reads slowly) by the timeout first.
        ("chunked", "the body is over 268435456 bytes|no whole answer within 2s"),
        ("junk", "does not start as the file the key names does"),
        // 4 GiB of zeros, gzipped: stopped at the bound on inflated bytes, or (a debug build
        // inflates slowly) by the timeout first; bounded in memory either way.
        ("bomb", "the body is over 268435456 bytes|no whole answer within 2s"),
    ] {
        let cache = tmp(&format!("faults-cache-{mode}"));
        let server = Server::start(&root, mode, Some(&wrong));
        let t = Instant::now();
        let o = crate::hostile::limited(&["pdb", "lines", s(&alone.join("Frames.dll")), "--symbol-server", &server.url, "--cache", s(&cache), "--symbol-timeout", "2s"], 0, "/dev/null", 15);
        let took = t.elapsed();
        let err = stderr(&o);
        assert_eq!(code(&o), Some(1), "{mode}: {err}");
        assert!(err.starts_with("error: not_found"), "{mode}: {err}");
        assert!(err.contains(&format!("note: symbol server {}: frames.pdb/", server.url)) && says.split('|').any(|w| err.contains(w)), "{mode}: {err}");
        // Bounded by the 2 s timeout (with room for a loaded machine); a server that never
        // answers costs that timeout, once.
        assert!(took < Duration::from_secs(12), "{mode}: {took:?}");
        if mode == "hang" {
            assert!(took >= Duration::from_secs(2), "{mode}: {took:?}");
        }
        assert_eq!(files(&cache), Vec::<PathBuf>::new(), "{mode}: a cache entry or temporary file was left");
    }
}

/// A server that does not answer costs its timeout once per run, not once per module; a 404 is
/// asked once per key.
#[test]
fn a_dead_server_costs_its_timeout_once() {
    let (address, expected) = inner_frame();
    let root = store("dead-root", &repo_root().join(DEBUG_PDB));
    let hang = Server::start(&tmp("dead-empty"), "hang", None);
    let ok = Server::start(&root, "ok", None);
    let cache = tmp("dead-cache");
    // Frames.dll and a CoreLib address: two modules, two keys.
    let corelib = "0x7f8ce5220021";
    let t = Instant::now();
    let o = clrmap(&["symbolize", TRACE, "--symbol-server", &hang.url, "--symbol-server", &ok.url, "--cache", s(&cache), "--symbol-timeout", "1s", "--return-address", &address, corelib, &address]);
    let took = t.elapsed();
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with(&expected), "{}", stdout(&o));
    assert_eq!(hang.requests().len(), 1, "{:?}", hang.requests());
    assert!(took < Duration::from_millis(2500), "{took:?}");
    assert!(stderr(&o).contains(&format!("note: symbol server {}: ", hang.url)) && stderr(&o).contains("not asked again in this run"), "{}", stderr(&o));
    // Each key asked of the good server at most once.
    let asked = ok.requests();
    let mut keys: Vec<&String> = asked.iter().map(|(p, _)| p).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), asked.len(), "{asked:?}");
}

/// Junk at a key in the cache is not used: it is replaced by the server's good file.
#[test]
fn junk_in_the_cache_is_replaced() {
    let (address, expected) = inner_frame();
    let root = store("junk-root", &repo_root().join(DEBUG_PDB));
    let cache = tmp("junk-cache");
    let key = key_of(&repo_root().join(DEBUG_PDB));
    std::fs::create_dir_all(cache.join(&key).parent().unwrap()).unwrap();
    std::fs::write(cache.join(&key), b"BSJB and then nothing a PDB has").unwrap();
    // Another build's PDB in another entry of the same name, and a directory where a file goes.
    std::fs::create_dir_all(cache.join("frames.pdb/00000000000000000000000000000000ffffffff/frames.pdb")).unwrap();
    let server = Server::start(&root, "ok", None);
    let o = clrmap(&["symbolize", TRACE, "--symbol-server", &server.url, "--cache", s(&cache), "--return-address", &address]);
    assert_eq!((code(&o), stdout(&o)), (Some(0), expected), "{}", stderr(&o));
    assert_eq!(std::fs::read(cache.join(&key)).unwrap(), std::fs::read(repo_root().join(DEBUG_PDB)).unwrap());
}

/// `stacktrace`: the text names a module, not a PDB id; with the assembly in a symbol path and
/// its PDB only on a server, the assembly's CodeView id is what the server is asked for, and the
/// frame reads as the runtime prints it with the PDB (line 696: examples/frames.stdout, checked by
/// the stacktrace tests).
#[test]
fn stacktrace_asks_the_server_for_the_pdb_of_an_assembly_it_finds() {
    let root = store("st-root", &repo_root().join(DEBUG_PDB));
    let alone = tmp("st-alone");
    std::fs::copy(repo_root().join("tests/fixtures/frames/debug-portable/Frames.dll"), alone.join("Frames.dll")).unwrap();
    let cache = tmp("st-cache");
    let server = Server::start(&root, "ok", None);
    let text = tmp("st-text").join("crash.log");
    std::fs::write(&text, "boom\n   at Frames.Program.Main(String[] args) in Frames.dll:token 0x600003e+0x6\n").unwrap();
    let o = clrmap(&["stacktrace", s(&text), "--symbol-path", s(&alone), "--symbol-server", &server.url, "--cache", s(&cache)]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "boom\n   at Frames.Program.Main(String[] args) in /_/src/Frames.cs:line 696\n");
    assert_eq!(server.requests().len(), 1);
    // Without the server: unchanged, and a note says why.
    let o = clrmap(&["stacktrace", s(&text), "--symbol-path", s(&alone), "--cache", s(&tmp("st-cache-empty"))]);
    assert_eq!(stdout(&o), "boom\n   at Frames.Program.Main(String[] args) in Frames.dll:token 0x600003e+0x6\n");
    assert!(stderr(&o).contains("Frames.pdb (PDB GUID"), "{}", stderr(&o));
}

/// Why there is no line, with `--json`: one `{"note":{...}}` object per reason on stderr, with
/// fields: the PDB wanted (name, id), where it was looked for, and each server's answer.
#[test]
fn why_there_is_no_line_comes_as_json_fields() {
    let (address, _) = inner_frame();
    let root = tmp("why-root");
    let server = Server::start(&root, "404", None);
    let cache = tmp("why-cache");
    let o = clrmap(&["symbolize", TRACE, "--json", "--symbol-path", RELEASE, "--symbol-server", &server.url, "--cache", s(&cache), "--return-address", &address]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let notes: Vec<serde_json::Value> = stderr(&o).lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"))["note"].clone()).collect();
    let kinds: Vec<&str> = notes.iter().map(|n| n["kind"].as_str().unwrap()).collect();
    // The Release build in the symbol path, passed over with both ids.
    let other = notes.iter().find(|n| n["kind"] == "another_build").unwrap_or_else(|| panic!("{kinds:?}"));
    assert_eq!(
        (other["module"].as_str(), other["pdb_id"].as_str(), other["wanted"].as_str()),
        (Some("Frames.dll"), Some("9ED8E112586740F1BB0468042B4A8251"), Some("647EB43C81D2457284149EDC98BD7DB7"))
    );
    assert!(other["path"].as_str().unwrap().ends_with("release-portable/Frames.dll"), "{other}");
    // What was wanted and every place it was looked for, the server included.
    let looked = notes.iter().find(|n| n["kind"] == "looked_for").unwrap_or_else(|| panic!("{kinds:?}"));
    assert_eq!((looked["pdb"].as_str(), looked["pdb_id"].as_str()), (Some("Frames.pdb"), Some("647EB43C81D2457284149EDC98BD7DB7")));
    let places: Vec<&str> = looked["places"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(places.iter().any(|p| p.starts_with("tests/fixtures/frames/release-portable/Frames.pdb")) && places.contains(&format!("symbol server {}", server.url).as_str()), "{places:?}");
    // The server's answer, with its key.
    let srv = notes.iter().find(|n| n["kind"] == "server").unwrap_or_else(|| panic!("{kinds:?}"));
    assert_eq!(srv["server"].as_str(), Some(server.url.as_str()));
    assert_eq!(srv["key"].as_str().unwrap(), key_of(&repo_root().join(DEBUG_PDB)));
    assert_eq!(srv["message"].as_str(), Some("not on the server (404)"));
}

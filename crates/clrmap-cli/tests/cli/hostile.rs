//! Hostile inputs through the real binary, under a memory limit of 256 MB plus 4× the input size
//! (`ulimit -v`) and a time limit: each must exit 0 or 1 (never killed, never 101) within seconds.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use clrmap::gdmap::DictionaryMapBuilder;
use clrmap::metadata::{table, Metadata};

use super::support::{repo_root, stdout};

fn temp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clrmap-cli-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Run `clrmap ARGS` under `ulimit -v` (256 MB + 4× `input`) and a 20 s `timeout`, stdout to
/// `sink` (a file, or /dev/null). Asserts exit 0/1 within `secs` seconds.
pub(crate) fn limited(args: &[&str], input: u64, sink: &str, secs: u64) -> Output {
    let kb = (256 << 20) / 1024 + 4 * input / 1024 + 1;
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    // A hang guard a little past the bound the test asserts (never below 20 s).
    let guard = secs.max(20) + 5;
    let script = format!("ulimit -v {kb}; exec timeout {guard} '{}' {} > '{sink}'", env!("CARGO_BIN_EXE_clrmap"), quoted.join(" "));
    let t = Instant::now();
    let o = Command::new("sh").arg("-c").arg(&script).current_dir(repo_root()).output().unwrap();
    let took = t.elapsed();
    let code = o.status.code();
    assert!(matches!(code, Some(0 | 1)), "{args:?}: exit {code:?} after {took:?}, stderr {}", String::from_utf8_lossy(&o.stderr));
    assert!(took < Duration::from_secs(secs), "{args:?} took {took:?}");
    o
}

/// Frames.dll with TypeSpec row 1's blob set to `blob` (see the library's hostile tests).
fn with_typespec1(blob: &[u8]) -> Vec<u8> {
    let mut bytes = std::fs::read(repo_root().join("tests/fixtures/frames/debug-portable/Frames.dll")).unwrap();
    let (heap_start, blobs) = {
        let md = Metadata::parse(&bytes).unwrap();
        let heap_start = md.blobs().0.offset() as usize;
        let blobs: Vec<(usize, usize)> = (1..=md.tables().rows(table::TYPE_SPEC)).map(|rid| md.type_spec(rid).unwrap()).map(|r| (r.offset() as usize, r.len())).collect();
        (heap_start, blobs)
    };
    let table: Vec<u8> = blobs.iter().flat_map(|&(at, _)| ((at - 1 - heap_start) as u16).to_le_bytes()).collect();
    let (at, _) = *blobs.iter().find(|&&(_, len)| len == blob.len()).unwrap();
    bytes[at..at + blob.len()].copy_from_slice(blob);
    let hits: Vec<usize> = bytes.windows(table.len()).enumerate().filter(|(_, w)| *w == table).map(|(i, _)| i).collect();
    assert_eq!(hits.len(), 1);
    bytes[hits[0]..hits[0] + 2].copy_from_slice(&((at - 1 - heap_start) as u16).to_le_bytes());
    bytes
}

#[test]
fn self_referential_typespec_is_bounded_everywhere() {
    // The issue's patch: `int32[] modreq(TS#1) modreq(TS#1)`.
    let dll = with_typespec1(&[0x1F, 0x06, 0x1F, 0x06, 0x1D, 0x08]);
    let size = dll.len() as u64;
    let dll = temp("self-ref.dll", &dll);
    let dll = dll.to_str().unwrap();
    let out = temp("self-ref.out", b"");
    let out = out.to_str().unwrap();

    // The TypeSpec contains itself: `too_deep` wherever it is named, never its raw token
    // (which stands for a token that names no row).
    limited(&["meta", "specs", dll], size, out, 5);
    let text = std::fs::read_to_string(out).unwrap();
    assert!(text.starts_with("0x1B000001\t!error too_deep\n"), "{}", &text[..text.len().min(300)]);

    let o = limited(&["sig", "decode", "1F", "06", "08", "--metadata", dll], size, out, 5);
    assert_eq!((o.status.code(), std::fs::read_to_string(out).unwrap().as_str()), (Some(1), ""));
    assert!(String::from_utf8_lossy(&o.stderr).contains("too_deep"), "{}", String::from_utf8_lossy(&o.stderr));

    // A map whose only type names TS#1.
    let map = temp("self-ref.gdmap", &{
        let mut b = DictionaryMapBuilder::new();
        b.add_payload(0x1000, &[0x01, 0x1F, 0x06, 0x08]).unwrap();
        b.build().unwrap()
    });
    let map = map.to_str().unwrap();
    for json in [false, true] {
        let mut args = vec!["dict", "show", map, "--metadata", dll];
        if json {
            args.push("--json");
        }
        let o = limited(&args, size, out, 5);
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains("too_deep"), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = limited(&["dict", "lookup", map, "0x1000", "--metadata", dll, "--json"], size, out, 5);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"kind\":\"too_deep\""), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A valid map of `entries` entries sharing one item of rank-64 arrays with every size and lower
/// bound written out (the issue's 295 KB map has 65,536 entries and a 33 KB item).
fn wide_map(entries: u32, arrays: usize) -> Vec<u8> {
    // ARRAY int32, rank 64, 64 sizes of 0x1FFFFFFF, 64 lower bounds of -0x10000000.
    let mut ty = vec![0x14, 0x08, 0x40, 0x40];
    for _ in 0..64 {
        ty.extend_from_slice(&[0xDF, 0xFF, 0xFF, 0xFF]);
    }
    ty.push(0x40);
    for _ in 0..64 {
        ty.extend_from_slice(&[0xC0, 0x00, 0x00, 0x01]);
    }
    let mut payload = vec![];
    let count = arrays as u32;
    assert!(count < 0x4000);
    payload.extend_from_slice(&(0x8000u16 | count as u16).to_be_bytes());
    for _ in 0..arrays {
        payload.extend_from_slice(&ty);
    }
    let mut b = DictionaryMapBuilder::new();
    for i in 0..entries {
        b.add_payload(0x1000 + 8 * i, &payload).unwrap();
    }
    b.build().unwrap()
}

#[test]
fn dict_show_json_streams_a_large_valid_map() {
    // 16,384 entries × ~100 KB of text each: 1.6 GB of output from a 180 KB map.
    let map = wide_map(16_384, 64);
    let size = map.len() as u64;
    let path = temp("wide.gdmap", &map);
    let path = path.to_str().unwrap();
    // Every form within the limit, output discarded.
    for args in [vec!["dict", "show", path, "--json"], vec!["dict", "show", path]] {
        limited(&args, size, "/dev/null", 15);
    }
    // The first entry is the same in both forms, and the JSON is the one serde_json would give.
    let small = temp("wide-small.gdmap", &wide_map(3, 2));
    let o = super::support::clrmap(&["dict", "show", small.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(stdout(&o).starts_with("{\"sorted\":true,\"count\":3,\"heap_size\":1037,\"entries\":[{\"rva\":4096,\"offset\":0,\"types\":[\"int32["));
    assert!(stdout(&o).ends_with("]\"]}]}\n"));
    assert_eq!(v["entries"].as_array().unwrap().len(), 3);
    let t = v["entries"][2]["types"][1].as_str().unwrap();
    assert!(t.starts_with("int32[-268435456...268435454,"), "{t}");
}

#[test]
fn a_methodspec_whose_blob_fails_still_names_its_method_in_json() {
    // Frames.dll with MethodSpec row 1's Instantiation pointed at TypeSpec row 1's blob, which has
    // no 0x0A header: the line fails, and the JSON still says which method it was for.
    let mut bytes = std::fs::read(repo_root().join("tests/fixtures/frames/debug-portable/Frames.dll")).unwrap();
    let (at, blob) = {
        let md = Metadata::parse(&bytes).unwrap();
        let row = md.tables().row(table::METHOD_SPEC, 1).unwrap();
        // MethodSpec: Method (2-byte coded index here), Instantiation (2-byte blob index).
        (row.offset() as usize + 2, md.tables().row(table::TYPE_SPEC, 1).unwrap().get(0).unwrap() as u16)
    };
    bytes[at..at + 2].copy_from_slice(&blob.to_le_bytes());
    let dll = temp("bad-methodspec.dll", &bytes);
    let o = super::support::clrmap(&["meta", "specs", dll.to_str().unwrap()]);
    assert!(stdout(&o).contains("\n0x2B000001\t!error bad_calling_convention\n0x2B000002\tFrames.More::Visit<string>(!!0)\n"), "{}", stdout(&o));
    let o = super::support::clrmap(&["meta", "specs", dll.to_str().unwrap(), "--json"]);
    let line = stdout(&o).lines().find(|l| l.starts_with("{\"token\":721420289,")).unwrap().to_owned();
    assert_eq!(line, r#"{"token":721420289,"error":"bad_calling_convention","method":100663306,"name":"Frames.Generic::Pass"}"#);
}

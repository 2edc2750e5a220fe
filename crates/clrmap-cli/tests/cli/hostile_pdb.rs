//! Hostile portable PDBs through the real binary: rows that share one huge
//! sequence-point blob, Document rows that share one long name, an embedded-PDB zip bomb, a
//! huge candidate PDB, and errors inside an inflated embedded PDB. Each run is under a memory
//! limit of 256 MB plus 4x the input (`ulimit -v`) and a time limit, and must end with exit 0 or 1.
//! The PDBs are built here by the library's test writer (`clrmap::pdb::writer`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use clrmap::pdb::writer::PdbWriter;
use clrmap::pe::PeImage;

use super::support::{all_runtimes, repo_root};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clrmap-cli-hostile-pdb-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run `clrmap ARGS` under `ulimit -v` (256 MB + 4x `input`) and a 60 s `timeout`, stdout to
/// `sink`. Asserts exit 0/1 within `secs` seconds.
fn limited(args: &[&str], input: u64, sink: &Path, secs: u64) -> Output {
    let kb = (256 << 20) / 1024 + 4 * input / 1024 + 1;
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!("ulimit -v {kb}; exec timeout 60 '{}' {} > '{}'", env!("CARGO_BIN_EXE_clrmap"), quoted.join(" "), sink.display());
    let t = Instant::now();
    let o = Command::new("sh").arg("-c").arg(&script).current_dir(repo_root()).output().unwrap();
    let took = t.elapsed();
    let code = o.status.code();
    assert!(matches!(code, Some(0 | 1)), "{args:?}: exit {code:?} after {took:?}, stderr {}", String::from_utf8_lossy(&o.stderr));
    assert!(took < Duration::from_secs(secs), "{args:?} took {took:?}");
    o
}

fn frames_dll() -> Vec<u8> {
    std::fs::read(repo_root().join("tests/fixtures/frames/debug-portable/Frames.dll")).unwrap()
}

/// Frames.dll's PDB id (what its CodeView entry names).
fn frames_id(dll: &[u8]) -> [u8; 20] {
    PeImage::parse(dll).unwrap().codeview().unwrap().unwrap().pdb_id()
}

/// 100,000 MethodDebugInformation rows that all name one blob of 200,000 points (1 MB).
fn shared_blob_pdb(id: [u8; 20]) -> Vec<u8> {
    let mut w = PdbWriter::new(id);
    let name = w.document_name("/src/Frames.cs");
    let doc = w.document(name);
    let blob = w.many_points_blob(200_000);
    w.methods_sharing(100_000, doc, blob);
    w.build()
}

/// A capture of `bodies` jitted bodies of `module`, tokens 0x06000001 on, 256 bytes each at
/// 0x10000 + 256·i, each mapped to IL 0..=0xF0 in 16 entries.
fn capture(module: &Path, bodies: u32) -> String {
    let mut text = String::from("{\"format\":\"clrmap-capture\",\"version\":1,\"pid\":4242}\n");
    for i in 0..bodies {
        let map: Vec<String> = (0..16).map(|k| format!("[{},{},{}]", k * 16, k * 16, k * 16 + 16)).collect();
        text.push_str(&format!(
            "{{\"kind\":\"jit\",\"pid\":4242,\"function_id\":{},\"module\":\"{}\",\"token\":{},\"start\":{},\"rva\":null,\"code_size\":256,\"body\":0,\"map\":[{}],\"map1\":null}}\n",
            0x1000 + i,
            module.display(),
            0x0600_0001 + i,
            0x10000 + 256 * u64::from(i),
            map.join(",")
        ));
    }
    text
}

#[test]
fn a_blob_shared_by_every_method_is_decoded_once_and_printed_within_a_bound() {
    let d = dir("shared-blob");
    let dll = frames_dll();
    let pdb = shared_blob_pdb(frames_id(&dll));
    let dll_path = d.join("Frames.dll");
    std::fs::write(&dll_path, &dll).unwrap();
    let pdb_path = d.join("Frames.pdb");
    std::fs::write(&pdb_path, &pdb).unwrap();
    let cap = d.join("app.capture");
    std::fs::write(&cap, capture(&dll_path, 2_000)).unwrap();
    let size = (pdb.len() + dll.len()) as u64;
    let out = d.join("out");
    let (cap_s, pdb_s, out_s) = (cap.to_str().unwrap(), pdb_path.to_str().unwrap(), out.to_str().unwrap());

    // symbolize and il at: one method's lines, from the shared blob (IL 0x23 is point 0x23, line 0x24).
    let o = limited(&["symbolize", cap_s, "--json", "0x10023"], size, &out, 20);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("\"il_offset\":32") && text.contains("\"line\":33") && text.contains("\"file\":\"/src/Frames.cs\""), "{text}{}", String::from_utf8_lossy(&o.stderr));
    limited(&["il", "at", cap_s, "0x10123"], size, &out, 20);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("0x06000002 ") && text.contains("IL 0x0020 at /src/Frames.cs:33:1"), "{text}");

    // perf map never needs the lines; perf jitdump needs 2,000 methods' lines, all one blob.
    limited(&["perf", "map", cap_s, "-o", out_s], size, Path::new("/dev/null"), 20);
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 2_000);
    limited(&["perf", "jitdump", cap_s, "-o", out_s], size, Path::new("/dev/null"), 30);
    let jitdump = std::fs::read(&out).unwrap();
    assert!(jitdump.windows(14).filter(|w| w == b"/src/Frames.cs").count() >= 2_000 * 16, "every body has its 16 lines");

    // pdb lines: 2x10^10 points in all; it stops at the bound, and says so.
    let o = limited(&["pdb", "lines", pdb_s], size, &out, 30);
    let text = std::fs::read_to_string(&out).unwrap();
    let bound = clrmap::pdb::point_budget(pdb.len());
    assert_eq!(bound, pdb.len() as u64, "a PDB of more than 2^20 bytes prints at most a point per byte");
    assert!(bound > 1_600_000 && bound < 1_800_000);
    assert_eq!(text.lines().filter(|l| l.starts_with("  IL ")).count() as u64, bound);
    // 8 whole methods of 200,000 points, then part of the 9th.
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("warning:") && stderr.contains(&format!("output stopped in method 0x06000009 after {bound} sequence points")), "{stderr}");
    let o = limited(&["pdb", "lines", pdb_s, "--json"], size, &out, 30);
    assert_eq!(o.status.code(), Some(0));
    let text = std::fs::read_to_string(&out).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["warning"]["kind"], "output_limit", "{last}");
    assert_eq!(last["warning"]["limit"], "sequence_points");
    assert_eq!(last["warning"]["method"], 0x0600_0009);
    assert_eq!(last["warning"]["printed_points"], bound);
    let points: usize = text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).filter_map(|v| v["points"].as_array().map(Vec::len)).sum();
    assert_eq!(points as u64, bound, "every method line is whole JSON");

    // --method picks one method: all of its 200,000 points, no warning.
    let o = limited(&["pdb", "lines", pdb_s, "--method", "0x06000007"], size, &out, 20);
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().filter(|l| l.starts_with("  IL ")).count(), 200_000);
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_document_name_shared_by_every_row_is_decoded_once_and_printed_within_a_bound() {
    let d = dir("shared-name");
    let dll = frames_dll();
    let mut w = PdbWriter::new(frames_id(&dll));
    // One 60 KiB name (600 parts of one 100-byte blob) named by 100,000 Document rows.
    let part = w.blob(&[b'x'; 100]);
    let name = w.document_name_of_parts(b'/', &[part; 600]);
    for _ in 0..100_000 {
        w.document(name);
    }
    let blob = w.many_points_blob(3);
    w.method(77_777, blob);
    let pdb = w.build();
    let pdb_path = d.join("Frames.pdb");
    std::fs::write(&pdb_path, &pdb).unwrap();
    let pdb_s = pdb_path.to_str().unwrap();
    let out = d.join("out");
    let size = pdb.len() as u64;
    assert!(size < 1 << 20);

    let o = limited(&["pdb", "lines", pdb_s], size, &out, 30);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("output stopped in the document list after 0 sequence points"), "{stderr}");
    let printed = std::fs::metadata(&out).unwrap().len();
    assert!(printed <= (64 << 20) + 100_000 * 8, "{printed} bytes");
    let o = limited(&["pdb", "lines", pdb_s, "--json"], size, &out, 30);
    let text = std::fs::read_to_string(&out).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!((last["warning"]["kind"].as_str(), last["warning"]["limit"].as_str()), (Some("output_limit"), Some("document_names")), "{last}");
    assert!(o.stderr.is_empty());

    // --method lists only the documents the method's points name.
    let o = limited(&["pdb", "lines", pdb_s, "--method", "0x06000001"], size, &out, 10);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 1 + 1 + 3, "{}", &text[..text.len().min(500)]);
    assert_eq!(lines[0], "documents: 100000");
    assert!(lines[1].starts_with("  77777  xxx") && lines[1].len() == 2 + 5 + 2 + 600 * 100 + 599);
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = limited(&["pdb", "lines", pdb_s, "--method", "0x06000001", "--json"], size, &out, 10);
    let text = std::fs::read_to_string(&out).unwrap();
    let docs: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let docs = docs["documents"].as_array().unwrap();
    assert_eq!(docs.len(), 100_000);
    assert_eq!(docs.iter().filter(|d| d.is_null()).count(), 99_999);
    assert_eq!(docs[77_776].as_str().unwrap().len(), 600 * 100 + 599);
    assert!(o.stderr.is_empty());
}

/// Frames.dll (debug-embedded) with its embedded PDB entry pointing at `data`, appended at the end.
fn with_embedded(data: &[u8]) -> Vec<u8> {
    let mut dll = std::fs::read(repo_root().join("tests/fixtures/frames/debug-embedded/Frames.dll")).unwrap();
    let entry = {
        let image = PeImage::parse(&dll).unwrap();
        image.debug_entries().unwrap().into_iter().find(|e| e.kind == clrmap::pe::DEBUG_TYPE_EMBEDDED_PORTABLE_PDB).unwrap()
    };
    // The directory entry: ... Type (17), SizeOfData, AddressOfRawData, PointerToRawData.
    let mut pattern = 17u32.to_le_bytes().to_vec();
    pattern.extend_from_slice(&entry.size.to_le_bytes());
    let at = dll.windows(8).position(|w| w == pattern).unwrap();
    while dll.len() % 16 != 0 {
        dll.push(0);
    }
    let pointer = dll.len() as u32;
    dll[at + 4..at + 8].copy_from_slice(&(data.len() as u32).to_le_bytes());
    dll[at + 12..at + 16].copy_from_slice(&pointer.to_le_bytes());
    dll.extend_from_slice(data);
    dll
}

#[test]
fn an_embedded_pdb_zip_bomb_is_refused_before_it_is_inflated() {
    let d = dir("bomb");
    // 1 GiB of zeros deflates to about 1 MB.
    let data = clrmap::pdb::writer::zip_bomb_entry(1 << 30, 1024);
    assert!(data.len() < 2 << 20);
    let dll = with_embedded(&data);
    let path = d.join("Frames.dll");
    std::fs::write(&path, &dll).unwrap();
    let p = path.to_str().unwrap();
    let out = d.join("out");
    let size = dll.len() as u64;
    let o = limited(&["pdb", "lines", p], size, &out, 10);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("bad_pdb") && stderr.contains("an embedded PDB of at most 64 MiB or 32 times its deflated size"), "{stderr}");
    // A stream of zeros within the bound is refused after its first 4 KiB: it is not a PDB.
    let data = clrmap::pdb::writer::zip_bomb_entry(30 << 20, 30);
    let dll = with_embedded(&data);
    let zeros = d.join("Zeros.dll");
    std::fs::write(&zeros, &dll).unwrap();
    let o = limited(&["pdb", "lines", zeros.to_str().unwrap()], dll.len() as u64, &out, 10);
    assert!(String::from_utf8_lossy(&o.stderr).contains("a deflate stream that inflates to a portable PDB (BSJB)"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn errors_inside_an_inflated_embedded_pdb_say_so() {
    let d = dir("inflated-error");
    // A PDB whose one method's blob is cut short: the error is at an offset of the inflated PDB.
    let mut w = PdbWriter::new([9; 20]);
    let name = w.document_name("a.cs");
    let doc = w.document(name);
    let blob = w.blob(&[0x00, 0x00, 0x01]);
    w.method(doc, blob);
    let pdb = w.build();
    let data = clrmap::pdb::writer::embedded_entry(&pdb);
    let dll = with_embedded(&data);
    let path = d.join("Frames.dll");
    std::fs::write(&path, &dll).unwrap();
    let p = path.to_str().unwrap();
    let out = d.join("out");
    let o = limited(&["pdb", "lines", p], dll.len() as u64, &out, 10);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    // The blob's bytes: LocalSignature, δIL, then ΔLines is missing. Its offset in the inflated PDB:
    let cut = pdb.windows(4).rposition(|w| w == [0x03, 0x00, 0x00, 0x01]).unwrap() + 4;
    assert!(stderr.contains(&format!("bad_pdb at offset {cut} of the embedded PDB, inflated")), "{stderr}");
    let o = limited(&["pdb", "lines", p, "--json"], dll.len() as u64, &out, 10);
    let e: serde_json::Value = serde_json::from_str(String::from_utf8_lossy(&o.stderr).trim()).unwrap();
    assert_eq!((e["error"]["kind"].as_str(), e["error"]["offset"].as_u64(), e["error"]["inflated_offset"].as_u64()), (Some("bad_pdb"), None, Some(cut as u64)), "{e}");
}

#[test]
fn a_huge_candidate_pdb_is_checked_before_it_is_read() {
    let d = dir("sparse");
    let dll_path = d.join("Frames.dll");
    std::fs::write(&dll_path, frames_dll()).unwrap();
    // A sparse file of 4 GiB where the CodeView entry names Frames.pdb: no PDB at all.
    let f = std::fs::File::create(d.join("Frames.pdb")).unwrap();
    f.set_len(4 << 30).unwrap();
    drop(f);
    let p = dll_path.to_str().unwrap();
    let out = d.join("out");
    let o = limited(&["pdb", "lines", p], 1 << 20, &out, 10);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr.contains("not_found"), "{stderr}");
    // 1 GiB of another build's PDB (a real header, another id): skipped after its header.
    let mut w = PdbWriter::new([0x55; 20]);
    let name = w.document_name("a.cs");
    w.document(name);
    let head = w.build();
    let mut f = std::fs::File::create(d.join("Frames.pdb")).unwrap();
    std::io::Write::write_all(&mut f, &head).unwrap();
    f.set_len(1 << 30).unwrap();
    drop(f);
    let o = limited(&["pdb", "lines", p], 1 << 20, &out, 10);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not_found"), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&d);
}

/// A ReadyToRun CoreLib copied beside a hostile PDB of its id: every MethodDebugInformation row
/// names one blob of 200,000 points, and the first method with a local in its native variable
/// info has 100,000 locals (25,000 names on each of slots 0-3). Returns (dir, CoreLib path,
/// that method's token, the RVA of its code, the input size).
fn corelib_with_hostile_pdb(corelib: &Path, tag: &str) -> (PathBuf, PathBuf, u32, u32, u64) {
    use clrmap::metadata::{table, Metadata};
    use clrmap::r2r::ReadyToRunImage;
    let bytes = std::fs::read(corelib).unwrap();
    let image = ReadyToRunImage::parse(&bytes).unwrap();
    let md = Metadata::parse(&bytes).unwrap();
    let (token, rva) = image
        .entry_points()
        .unwrap()
        .into_iter()
        .find_map(|e| {
            let info = image.debug_info(e.runtime_function).ok()??;
            let argc = md.method_args(e.token)?.names.len() as i32;
            info.vars.iter().any(|v| v.number >= argc && v.number < argc + 4).then(|| (e.token, image.runtime_functions()[e.runtime_function as usize].begin))
        })
        .unwrap();
    let cv = PeImage::parse(&bytes).unwrap().codeview().unwrap().unwrap();
    let mut w = PdbWriter::new(cv.pdb_id());
    let methods = md.tables().rows(table::METHOD_DEF);
    w.method_defs = methods;
    let name = w.document_name("/src/hostile.cs");
    let doc = w.document(name);
    let blob = w.many_points_blob(200_000);
    w.methods_sharing(methods, doc, blob);
    let first = w.variable_count() + 1;
    for i in 0..100_000u32 {
        let s = w.string(&format!("v{i}"));
        w.variable(0, (i % 4) as u16, s);
    }
    w.scope(token & 0x00FF_FFFF, first, 0, 0x1000);
    let pdb = w.build();
    let d = dir(tag);
    let lib = d.join("System.Private.CoreLib.dll");
    std::fs::write(&lib, &bytes).unwrap();
    std::fs::write(d.join(cv.file_name()), &pdb).unwrap();
    (d, lib, token, rva, (bytes.len() + pdb.len()) as u64)
}

#[test]
#[ignore = "needs .NET"]
fn an_image_whose_pdb_shares_one_blob_answers_at_once() {
    for (i, rt) in all_runtimes().iter().enumerate() {
        let (d, lib, token, rva, size) = corelib_with_hostile_pdb(&rt.corelib(), &format!("corelib-{i}"));
        let out = d.join("out");
        let (lib_s, rva_s) = (lib.to_str().unwrap(), format!("0x{rva:X}"));
        // symbolize and il at load the image's PDB when the image is opened: the eager table
        // held every method's 200,000 points (6x10^9 and more).
        let o = limited(&["symbolize", lib_s, &rva_s], size, &out, 20);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("/src/hostile.cs:1:1"), "{}: {text}{}", rt.version, String::from_utf8_lossy(&o.stderr));
        limited(&["il", "at", lib_s, &rva_s], size, &out, 20);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.starts_with(&format!("0x{token:08X} ")) && text.contains("at /src/hostile.cs:1:1"), "{}: {text}", rt.version);
        // il vars: 100,000 local names in one method (22 s when each name was compared with
        // every other); each slot's names are joined up to 4 KiB, then `/...`.
        let o = limited(&["il", "vars", lib_s, "--method", &format!("0x{token:08X}")], size, &out, 10);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.lines().any(|l| l.contains("local 0 v0/v4/v8/") && l.contains("/...")), "{}: {text}{}", rt.version, String::from_utf8_lossy(&o.stderr));
        let _ = std::fs::remove_dir_all(&d);
    }
}

//! Which PDB answers for a module, and why not: a trace's recorded PDB id is
//! read and checked, so another build's assembly or PDB never answers; the right PDB answers for a
//! recording from another machine, named by `--pdb` or alone in a symbol directory; a `--pdb`
//! that cannot be read is named with the reason; a PDB finds its assembly beside it by id.
//!
//! `examples/frames.nettrace` is a .NET 8.0.4 trace of tests/fixtures/frames/debug-embedded run
//! from a temporary directory that no longer exists (a recording from another machine), and
//! `examples/frames.stdout` is what the program's own `StackTrace` printed in that run: the
//! expected lines. The fixtures' debug builds share one PDB id (deterministic builds of the same
//! source); the release builds have another.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use clrmap::fs::OpenError;
use clrmap::locate::{locate_pdb, open_pdb, open_pdb_with, PdbOrigin, SymbolPaths};
use clrmap::pe::PeImage;
use clrmap::symbolizer::{read_trace, FrameKind, Options, Symbolizer};
use clrmap::ErrorKind;

use crate::support::fixture;

const TRACE: &str = "examples/frames.nettrace";

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn frames(variant: &str, file: &str) -> PathBuf {
    fixture(&format!("tests/fixtures/frames/{variant}/{file}"))
}

/// The CodeView GUID of a fixture's Frames.dll, read from the file itself.
fn codeview_guid(variant: &str) -> [u8; 16] {
    let bytes = std::fs::read(frames(variant, "Frames.dll")).unwrap();
    PeImage::parse(&bytes).unwrap().codeview().unwrap().unwrap().guid
}

const DEBUG_GUID: &str = "647EB43C81D2457284149EDC98BD7DB7";
const RELEASE_GUID: &str = "9ED8E112586740F1BB0468042B4A8251";

fn options(pdb: Option<PathBuf>, dirs: &[PathBuf]) -> Options {
    Options { symbols: SymbolPaths { pdb, dirs: dirs.to_vec(), servers: None } }
}

/// The runtime's own frames (`F` lines of examples/frames.stdout): (return address, file, line,
/// column), by the code starts the trace gives Frames.dll's methods.
fn runtime_frames() -> Vec<(u64, String, u32, u32)> {
    let sym = Symbolizer::open(&fixture(TRACE), Options::default()).unwrap();
    let mut starts: HashMap<u32, Vec<u64>> = HashMap::new();
    for b in sym.store().bodies() {
        if b.module.as_deref() == Some("Frames.dll") {
            starts.entry(b.token).or_default().push(b.start.unwrap());
        }
    }
    let text = std::fs::read_to_string(fixture("examples/frames.stdout")).unwrap();
    let mut out: Vec<(u64, String, u32, u32)> = text
        .lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| f[0] == "F" && !f[7].is_empty())
        .filter_map(|f| {
            let token = u32::from_str_radix(&f[3][2..], 16).unwrap();
            let start = starts.get(&token).filter(|s| s.len() == 1)?[0];
            Some((start + f[5].parse::<u64>().unwrap(), f[7].to_owned(), f[8].parse().unwrap(), f[9].parse().unwrap()))
        })
        .collect();
    out.sort();
    out.dedup();
    assert!(out.len() > 20, "{} frames", out.len());
    out
}

/// Every runtime frame answered by `sym` exactly as the runtime printed it.
fn assert_runtime_lines(sym: &Symbolizer, what: &str) {
    for (address, file, line, column) in runtime_frames() {
        let f = sym.symbolize(address, FrameKind::ReturnAddress);
        assert_eq!((f.at.file, f.at.line, f.at.column), (Some(file.as_str()), Some(line), Some(column)), "{what}: 0x{address:x}");
    }
}

#[test]
fn the_trace_records_each_modules_pdb_id() {
    let file = std::fs::File::open(fixture(TRACE)).unwrap();
    let opened = read_trace(std::io::BufReader::new(file)).unwrap();
    let pdbs = &opened.pdbs;
    assert!(opened.warnings.is_empty());
    // Every module path of a Frames.dll body has its recorded id: the GUID of the build that ran.
    let paths: Vec<&String> = opened.bodies.iter().filter(|b| b.module.as_deref() == Some("Frames.dll")).filter_map(|b| b.module_path.as_ref()).collect();
    assert!(!paths.is_empty());
    for p in paths {
        let rec = &pdbs[p];
        assert_eq!(rec.guid, codeview_guid("debug-embedded"), "{p}");
        assert_eq!((rec.age, rec.file_name()), (1, "Frames.pdb"));
    }
    assert_ne!(codeview_guid("debug-embedded"), codeview_guid("release-portable"));
    // CoreLib's too (its PDB path is the runtime build's).
    assert!(pdbs.iter().any(|(p, r)| p.ends_with("System.Private.CoreLib.dll") && r.file_name() == "System.Private.CoreLib.pdb"));
}

#[test]
fn another_build_in_the_symbol_path_never_answers() {
    let expected = runtime_frames();
    // The Release build (assembly and PDB, matching each other) is not the build that ran.
    let sym = Symbolizer::open(&fixture(TRACE), options(None, &[frames("release-portable", "Frames.dll").parent().unwrap().to_owned()])).unwrap();
    for (address, ..) in &expected {
        let f = sym.symbolize(*address, FrameKind::ReturnAddress);
        assert!(f.at.method.is_some());
        assert_eq!((f.at.file, f.at.line), (None, None), "0x{address:x}: a line from the Release PDB");
    }
    // Not one address of any Frames.dll body, at any offset (before: thousands answered with the
    // Release build's lines).
    let mut every = 0;
    for b in sym.store().bodies().iter().filter(|b| b.module.as_deref() == Some("Frames.dll")) {
        for offset in 0..u64::from(b.code_size) {
            every += 1;
            assert_eq!(sym.symbolize(b.start.unwrap() + offset, FrameKind::Leaf).at.line, None, "0x{:x}", b.start.unwrap() + offset);
        }
    }
    assert!(every > 10_000, "{every} addresses");
    // And the user is told what was passed over (GUIDs as Python's uuid.UUID(bytes_le=...)
    // prints the CodeView GUID bytes: 12e1d89e... for Release, 3cb47e64... for Debug).
    let note = |file: &str| format!("Frames.dll: {} is another build (PDB GUID {RELEASE_GUID}, not the {DEBUG_GUID} wanted); not used", frames("release-portable", file).display());
    // Then what was wanted and where it was looked for: beside the module's recorded path, at
    // the recorded build path (not absolute here), in the symbol directory.
    let notes = sym.notes();
    assert_eq!(notes[..2], [note("Frames.dll"), note("Frames.pdb")]);
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(notes[2].starts_with(&format!("Frames.dll: Frames.pdb (PDB GUID {DEBUG_GUID}) was looked for at ")), "{notes:?}");
    assert!(notes[2].ends_with(&format!("{} (flat and by key)", frames("release-portable", "Frames.pdb").display())), "{notes:?}");
    // Nor a Release PDB alone, nor the Debug assembly with the Release PDB beside it.
    let mixed = tmp("pdb-identity-mixed");
    std::fs::copy(frames("debug-portable", "Frames.dll"), mixed.join("Frames.dll")).unwrap();
    std::fs::copy(frames("release-portable", "Frames.pdb"), mixed.join("Frames.pdb")).unwrap();
    let sym = Symbolizer::open(&fixture(TRACE), options(None, &[mixed])).unwrap();
    assert_eq!(sym.symbolize(expected[0].0, FrameKind::ReturnAddress).at.line, None);
    // With the right build later in the path, that one answers: the wrong one is passed over.
    let dirs = [frames("release-portable", "Frames.dll").parent().unwrap().to_owned(), frames("debug-portable", "Frames.dll").parent().unwrap().to_owned()];
    assert_runtime_lines(&Symbolizer::open(&fixture(TRACE), options(None, &dirs)).unwrap(), "release, then debug");
}

#[test]
fn the_right_pdb_alone_answers_for_a_recording_from_another_machine() {
    // The assembly is nowhere: the PDB is found by the recorded id alone.
    let flat = tmp("pdb-identity-flat");
    std::fs::copy(frames("debug-portable", "Frames.pdb"), flat.join("Frames.pdb")).unwrap();
    assert_runtime_lines(&Symbolizer::open(&fixture(TRACE), options(None, &[flat])).unwrap(), "flat");
    // A symbol-server layout: the key is the GUID and the PDB's stamp (which the trace does not
    // carry), or the GUID and FFFFFFFF; lower case too.
    // Guid.ToString("N") of the CodeView GUID bytes 3cb47e64 d281 7245 84149edc98bd7db7
    // (Data1-3 little-endian), as Python's uuid.UUID(bytes_le=...) prints it.
    let guid = DEBUG_GUID;
    let bytes = std::fs::read(frames("debug-portable", "Frames.pdb")).unwrap();
    let stamp = clrmap::pdb::PortablePdb::parse(&bytes).unwrap().id().stamp();
    for key in [format!("{guid}{stamp:08X}"), format!("{guid}FFFFFFFF"), format!("{guid}{stamp:08x}").to_ascii_lowercase()] {
        let store = tmp("pdb-identity-store");
        let dir = store.join("Frames.pdb").join(&key);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(frames("debug-portable", "Frames.pdb"), dir.join("Frames.pdb")).unwrap();
        assert_runtime_lines(&Symbolizer::open(&fixture(TRACE), options(None, &[store])).unwrap(), &key);
    }
    // The id in the key is checked too: the Release PDB filed under the Debug id is not used.
    let store = tmp("pdb-identity-lying-store");
    let dir = store.join("Frames.pdb").join(format!("{guid}FFFFFFFF"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(frames("release-portable", "Frames.pdb"), dir.join("Frames.pdb")).unwrap();
    let sym = Symbolizer::open(&fixture(TRACE), options(None, &[store])).unwrap();
    assert_eq!(sym.symbolize(runtime_frames()[0].0, FrameKind::ReturnAddress).at.line, None);
}

#[test]
fn pdb_named_for_a_recording_from_another_machine() {
    // The module's recorded path does not exist here; --pdb with the right PDB answers.
    let sym = Symbolizer::open(&fixture(TRACE), options(Some(frames("debug-portable", "Frames.pdb")), &[])).unwrap();
    assert_runtime_lines(&sym, "--pdb debug-portable/Frames.pdb");
    // Its id decides, not its name: renamed, it still answers.
    let renamed = tmp("pdb-identity-renamed").join("symbols-of-the-day.pdb");
    std::fs::copy(frames("debug-portable", "Frames.pdb"), &renamed).unwrap();
    assert_runtime_lines(&Symbolizer::open(&fixture(TRACE), options(Some(renamed), &[])).unwrap(), "--pdb renamed");
    // The wrong build's PDB is refused at its id.
    let e = Symbolizer::open(&fixture(TRACE), options(Some(frames("release-portable", "Frames.pdb")), &[])).unwrap_err();
    let OpenError::Input { path, error } = e else { panic!("{e}") };
    assert_eq!((path, error.kind), (frames("release-portable", "Frames.pdb"), ErrorKind::PdbMismatch));
}

#[test]
fn a_pdb_of_no_module_is_named_with_its_id_and_the_modules_ids() {
    // The release PDB under another name: neither its id nor its name is a module's.
    let other = tmp("pdb-identity-no-module").join("Other.pdb");
    std::fs::copy(frames("release-portable", "Frames.pdb"), &other).unwrap();
    let e = Symbolizer::open(&fixture(TRACE), options(Some(other.clone()), &[])).unwrap_err();
    let OpenError::NoModule { path, error, detail } = &e else { panic!("{e}") };
    assert_eq!((path, error.kind), (&other, ErrorKind::PdbMismatch));
    assert!(detail.starts_with(&format!("this PDB's id is {RELEASE_GUID}; the source's modules: ")), "{detail}");
    // Frames.dll's entry is the id the trace recorded for it (the debug build's).
    assert!(detail.contains(&format!("Frames.dll (PDB Frames.pdb {DEBUG_GUID})")), "{detail}");
    // Each module once: the trace's module paths, counted apart (eight: none left unnamed; the
    // bound is checked in the symbolizer's own tests).
    let paths: std::collections::HashSet<String> = Symbolizer::open(&fixture(TRACE), Options::default()).unwrap().store().bodies().iter().filter_map(|b| b.module_path.clone()).collect();
    let listed = detail.split_once("modules: ").unwrap().1.split(", ").filter(|m| !m.starts_with("and ")).count();
    assert_eq!(listed, paths.len().min(8), "{detail}");
    assert_eq!(detail.contains(" more"), paths.len() > 8, "{detail}");
    // The whole message names the PDB and both ids.
    let text = e.to_string();
    assert!(text.starts_with(&format!("{}: pdb_mismatch: expected a module of the source that this PDB belongs to; ", other.display())), "{text}");
}

#[test]
fn an_unreadable_pdb_is_named_with_the_reason() {
    let dir = tmp("pdb-identity-unreadable");
    let fifo = dir.join("fifo.pdb");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let looped = dir.join("loop.pdb");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let huge = dir.join("huge.pdb");
    std::fs::File::create(&huge).unwrap().set_len((4 << 30) + 1).unwrap();
    let cases: [(PathBuf, &str); 6] = [
        (PathBuf::from("/dev/null"), "character device"),
        (fifo, "FIFO"),
        (dir.clone(), "directory"),
        (looped, "symbolic links"),
        (dir.join("missing.pdb"), "No such file"),
        (huge, "too large: 4294967297 bytes"),
    ];
    let assembly = std::fs::read(frames("debug-portable", "Frames.dll")).unwrap();
    let image = PeImage::parse(&assembly).unwrap();
    for (pdb, reason) in &cases {
        let paths = SymbolPaths { pdb: Some(pdb.clone()), dirs: Vec::new(), servers: None };
        // Every way in: an assembly's PDB, `pdb lines ASSEMBLY --pdb`, a trace's module.
        let errors = [
            locate_pdb(&image, Some(&frames("debug-portable", "Frames.dll")), &paths).unwrap_err(),
            open_pdb(&frames("debug-portable", "Frames.dll"), &paths).unwrap_err(),
            Symbolizer::open(&fixture(TRACE), Options { symbols: paths.clone() }).unwrap_err(),
        ];
        for e in errors {
            let text = e.to_string();
            assert!(matches!(&e, OpenError::Io { path, .. } if path == pdb), "{text}");
            assert!(text.contains(&pdb.display().to_string()) && text.contains(reason), "{pdb:?}: {text}");
        }
    }
}

#[test]
fn a_pdb_finds_its_assembly_beside_it_by_id() {
    let names = |opened: &clrmap::locate::OpenedPdb| opened.assembly.as_deref().map(|a| clrmap::metadata::Metadata::parse(a).unwrap().method_name(0x0600_0008));
    // Beside it, with the PDB's stem: the method names come from it.
    let opened = open_pdb(&frames("debug-portable", "Frames.pdb"), &SymbolPaths::default()).unwrap();
    assert_eq!(names(&opened), Some(Some("Frames.Nested::Inner".to_owned())));
    // Another build beside it is not its assembly.
    let dir = tmp("pdb-identity-beside");
    std::fs::copy(frames("debug-portable", "Frames.pdb"), dir.join("Frames.pdb")).unwrap();
    std::fs::copy(frames("release-portable", "Frames.dll"), dir.join("Frames.dll")).unwrap();
    let opened = open_pdb(&dir.join("Frames.pdb"), &SymbolPaths::default()).unwrap();
    assert!(opened.assembly.is_none());
    assert!(matches!(opened.pdb.origin, PdbOrigin::Explicit(_)));
    // An .exe of the same stem is found; so is one in a symbol directory.
    std::fs::remove_file(dir.join("Frames.dll")).unwrap();
    std::fs::copy(frames("debug-portable", "Frames.dll"), dir.join("Frames.exe")).unwrap();
    assert!(open_pdb(&dir.join("Frames.pdb"), &SymbolPaths::default()).unwrap().assembly.is_some());
    std::fs::remove_file(dir.join("Frames.exe")).unwrap();
    assert!(open_pdb(&dir.join("Frames.pdb"), &SymbolPaths::default()).unwrap().assembly.is_none());
    let in_dir = SymbolPaths { pdb: None, dirs: vec![frames("debug-portable", "Frames.dll").parent().unwrap().to_owned()], servers: None };
    assert!(open_pdb(&dir.join("Frames.pdb"), &in_dir).unwrap().assembly.is_some());
    // Named by the user: used when it matches, pdb_mismatch when it does not.
    let named = open_pdb_with(&dir.join("Frames.pdb"), &SymbolPaths::default(), Some(&frames("debug-embedded", "Frames.dll"))).unwrap();
    assert_eq!(names(&named), Some(Some("Frames.Nested::Inner".to_owned())));
    let e = open_pdb_with(&dir.join("Frames.pdb"), &SymbolPaths::default(), Some(&frames("release-portable", "Frames.dll"))).unwrap_err();
    assert!(matches!(&e, OpenError::Input { error, .. } if error.kind == ErrorKind::PdbMismatch), "{e}");
    let e = open_pdb_with(&dir.join("Frames.pdb"), &SymbolPaths::default(), Some(&dir.join("none.dll"))).unwrap_err();
    assert!(matches!(&e, OpenError::Io { path, .. } if path == &dir.join("none.dll")), "{e}");
}

#[test]
fn open_error_lives_below_the_pdb_layer() {
    // One type at both paths: users' code that names the old path still compiles.
    let e: clrmap::symbolizer::OpenError = OpenError::Unrecognized { path: PathBuf::from("x") };
    assert!(e.to_string().starts_with("x: "));
}

/// A diagnostics server at `socket` whose every session streams `trace` and then closes (what a
/// process would send for a snapshot, replayed from a real trace).
fn fake_server(socket: &Path, trace: Vec<u8>) {
    use std::io::{Read, Write};
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    // The reply's header: magic, size (the header and the session id), OK (0xFF 0x00), reserved.
    let mut reply = b"DOTNET_IPC_V1\0".to_vec();
    reply.extend_from_slice(&28u16.to_le_bytes());
    reply.extend_from_slice(&[0xFF, 0x00, 0, 0]);
    reply.extend_from_slice(&7u64.to_le_bytes());
    reply.extend_from_slice(&trace);
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let reply = reply.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(300)));
                let _ = s.read(&mut buf);
                let _ = s.write_all(&reply);
            });
        }
    });
}

#[test]
fn a_snapshot_of_a_process_checks_the_recorded_ids_too() {
    // `--pid`: the rundown carries the same module events. An assembly rebuilt on disk after
    // the process loaded it is another build, and not used.
    let dir = tmp("pdb-identity-snapshot");
    let socket = dir.join("diag.sock");
    fake_server(&socket, std::fs::read(fixture(TRACE)).unwrap());
    let client = clrmap::diag::Client::connect_path(&socket, std::time::Duration::from_secs(5));
    let opened = clrmap::diag::snapshot_client(&client).unwrap();
    let frames_path = opened.bodies.iter().find(|b| b.module.as_deref() == Some("Frames.dll")).unwrap().module_path.clone().unwrap();
    assert_eq!(opened.pdbs[&frames_path].guid, codeview_guid("debug-embedded"));
    let release = frames("release-portable", "Frames.dll").parent().unwrap().to_owned();
    let sym = Symbolizer::from_opened(opened, None, options(None, &[release])).unwrap();
    let (address, ..) = runtime_frames()[0].clone();
    assert_eq!(sym.symbolize(address, FrameKind::ReturnAddress).at.line, None);
    // Two files of another build, then where the PDB was looked for.
    assert_eq!(sym.notes().len(), 3, "{:?}", sym.notes());
    // The right PDB answers as the runtime printed.
    let opened = clrmap::diag::snapshot_client(&client).unwrap();
    assert_runtime_lines(&Symbolizer::from_opened(opened, None, options(Some(frames("debug-portable", "Frames.pdb")), &[])).unwrap(), "snapshot, --pdb");
}

#[test]
fn an_assemblys_codeview_guid_is_read_from_its_headers_alone() {
    use clrmap::locate::peek_codeview_guid;
    let mut files: Vec<PathBuf> = ["debug-portable", "debug-embedded", "release-portable", "release-embedded"].iter().map(|v| frames(v, "Frames.dll")).collect();
    files.push(fixture("tests/fixtures/perf/Hot.dll"));
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let whole = PeImage::parse(&bytes).unwrap().codeview().unwrap().map(|cv| cv.guid);
        let peeked = peek_codeview_guid(&mut std::fs::File::open(&path).unwrap());
        assert_eq!(peeked, whole, "{path:?}");
        assert!(peeked.is_some());
    }
    // Not an image, or cut inside its headers: none.
    let pdb = std::fs::read(frames("debug-portable", "Frames.pdb")).unwrap();
    assert_eq!(peek_codeview_guid(&mut std::io::Cursor::new(pdb)), None);
    let dll = std::fs::read(frames("debug-portable", "Frames.dll")).unwrap();
    for cut in [0, 2, 63, 64, 0x80, 0x100, 0x200] {
        assert_eq!(peek_codeview_guid(&mut std::io::Cursor::new(&dll[..cut.min(dll.len())])), None, "cut at {cut}");
    }
}

#[test]
#[ignore = "needs .NET"]
fn every_framework_assemblys_codeview_guid_is_read_from_its_headers_alone() {
    // ReadyToRun images of both runtimes: PE32+ (x64), many sections.
    for rt in crate::support::runtimes("every_framework_assemblys_codeview_guid_is_read_from_its_headers_alone") {
        let mut checked = 0;
        for path in rt.assemblies() {
            let bytes = std::fs::read(&path).unwrap();
            let Ok(image) = PeImage::parse(&bytes) else { continue };
            let whole = image.codeview().ok().flatten().map(|cv| cv.guid);
            let peeked = clrmap::locate::peek_codeview_guid(&mut std::fs::File::open(&path).unwrap());
            assert_eq!(peeked, whole, "{}: {path:?}", rt.version);
            checked += usize::from(peeked.is_some());
        }
        assert!(checked > 100, "{}: {checked} assemblies with a CodeView entry", rt.version);
    }
}

#[test]
#[ignore = "needs .NET"]
fn an_assembly_rebuilt_after_the_run_is_not_used_on_both_runtimes() {
    // A fresh trace on each runtime records Frames.dll's PDB id (ModuleLoad version 2 on 3.1.23
    // and 8.0.4). Then the Release build is put at the module's path, as a rebuild would: the
    // trace's lines must not come from it, and say so.
    for rt in crate::support::runtimes("an_assembly_rebuilt_after_the_run_is_not_used_on_both_runtimes") {
        let dir = tmp(&format!("pdb-identity-rebuilt-{}", rt.version));
        for f in ["Frames.dll", "Frames.pdb", "Frames.runtimeconfig.json"] {
            std::fs::copy(frames("debug-portable", f), dir.join(f)).unwrap();
        }
        let mut c = std::process::Command::new(&rt.dotnet);
        c.arg(dir.join("Frames.dll")).env("COMPlus_TieredCompilation", "0").env("DOTNET_TieredCompilation", "0");
        c.env("COMPlus_EnableEventPipe", "1").env("COMPlus_EventPipeConfig", "Microsoft-Windows-DotNETRuntime:0x60098:5");
        let out = dir.join("trace");
        std::fs::create_dir_all(&out).unwrap();
        // 3.1 wants an existing directory; 8.0 wants a file path.
        if rt.version.starts_with("3.") {
            c.env("COMPlus_EventPipeOutputPath", &out);
        } else {
            c.env("DOTNET_EventPipeOutputPath", out.join("frames.nettrace"));
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}: {}", rt.version, String::from_utf8_lossy(&o.stderr));
        let trace = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "nettrace")).unwrap();
        let opened = read_trace(std::io::BufReader::new(std::fs::File::open(&trace).unwrap())).unwrap();
        let module = dir.join("Frames.dll").to_string_lossy().into_owned();
        assert_eq!(opened.pdbs.get(&module).map(|r| r.guid), Some(codeview_guid("debug-portable")), "{}: {:?}", rt.version, opened.pdbs.keys().collect::<Vec<_>>());
        // A frame with a line, from the run's own output (F lines: token, native offset, file).
        let stdout = String::from_utf8(o.stdout).unwrap();
        let f: Vec<&str> = stdout.lines().map(|l| l.split('\t').collect::<Vec<_>>()).find(|f| f[0] == "F" && f[3] == "0x06000008" && !f[7].is_empty()).unwrap();
        let start = opened.bodies.iter().find(|b| b.module.as_deref() == Some("Frames.dll") && b.token == 0x0600_0008).unwrap().start.unwrap();
        let address = start + f[5].parse::<u64>().unwrap();
        let kind = if rt.version.starts_with("3.") { FrameKind::ReturnAddressAsIs } else { FrameKind::ReturnAddress };
        let line: u32 = f[8].parse().unwrap();
        let sym = Symbolizer::open(&trace, Options::default()).unwrap();
        assert_eq!(sym.symbolize(address, kind).at.line, Some(line), "{}: the build that ran", rt.version);
        // The rebuild.
        for f in ["Frames.dll", "Frames.pdb"] {
            std::fs::copy(frames("release-portable", f), dir.join(f)).unwrap();
        }
        let sym = Symbolizer::open(&trace, Options::default()).unwrap();
        assert_eq!(sym.symbolize(address, kind).at.line, None, "{}: a line from the rebuilt Release build", rt.version);
        assert!(sym.notes().iter().any(|n| n.contains(&format!("{module} is another build"))), "{}: {:?}", rt.version, sym.notes());
        // Its PDB, kept elsewhere, still answers.
        let keep = tmp(&format!("pdb-identity-rebuilt-keep-{}", rt.version));
        std::fs::copy(frames("debug-portable", "Frames.pdb"), keep.join("Frames.pdb")).unwrap();
        let sym = Symbolizer::open(&trace, options(None, &[keep])).unwrap();
        assert_eq!(sym.symbolize(address, kind).at.line, Some(line), "{}: the kept PDB", rt.version);
    }
}

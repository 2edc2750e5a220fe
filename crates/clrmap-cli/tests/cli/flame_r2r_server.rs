//! `clrmap flame` over a CPU trace of a ReadyToRun library of our own (tests/dotnet/r2rlib: a hot
//! loop on the line marked `// HOT`, compiled by Crossgen2 of the runtime's own version, as the
//! framework's assemblies are), whose PDB is nowhere on disk: only a loopback SSQP symbol server
//! (`tests/symsrv/server.py`) holds it. The hot frame gets its IL offset from the image's maps
//! either way, and its line only from the server; without it, a note says the PDB was not found.
//! The IL offset is read with `clrmap symbolize --json` at the hot method's most sampled address,
//! the symbolizer flame uses, under the same leaf rule; `flame --il-offsets` must print the same
//! offset, with and without the PDB, and put each offset on the line the PDB gives it.
//! The oracles: the runtime's own `StackTrace(true)`, printed by the program from the hot line
//! (its line, and the IL offset it reports, which `clrmap pdb lines` maps to the same line), and
//! the line read from the source.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clrmap::ilmap::CodeKind;
use clrmap::symbolizer::{FrameKind, Options, Symbolizer};

use crate::support::*;
use crate::symbol_server::Server;

const SRC: &str = "tests/dotnet/r2rlib";
const HOT_METHOD: &str = "R2r.Hot::Spin";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The 1-based line of `// HOT` in R2rLib.cs, read from the source.
fn hot_line() -> u32 {
    let text = std::fs::read_to_string(repo_root().join(SRC).join("R2rLib.cs")).unwrap();
    let lines: Vec<usize> = text.lines().enumerate().filter(|(_, l)| l.trim_end().ends_with("// HOT")).map(|(i, _)| i + 1).collect();
    assert_eq!(lines.len(), 1, "one `// HOT` line in R2rLib.cs: {lines:?}");
    u32::try_from(lines[0]).unwrap()
}

fn run_ok(c: &mut Command, what: &str) -> Output {
    let o = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(o.status.success(), "{what}: {}{}", stdout(&o), stderr(&o));
    o
}

/// Crossgen2 `version` (NuGet's Microsoft.NETCore.App.Crossgen2.linux-x64, the runtime's own
/// version, as scripts/build-r2r-fixture.sh gets 10.0.12), restored by the SDK when missing.
fn crossgen2(version: &str) -> PathBuf {
    let o = run_ok(Command::new("dotnet").args(["nuget", "locals", "global-packages", "--list"]), "dotnet nuget locals");
    let packs = stdout(&o).lines().find_map(|l| l.strip_prefix("global-packages: ")).map(|p| PathBuf::from(p.trim().trim_end_matches('/'))).unwrap();
    let tool = packs.join(format!("microsoft.netcore.app.crossgen2.linux-x64/{version}/tools/crossgen2"));
    if !tool.is_file() {
        let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("crossgen2-restore-{version}"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(
            work.join("cg.csproj"),
            format!(
                r#"<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup><TargetFramework>net10.0</TargetFramework></PropertyGroup>
  <ItemGroup><PackageDownload Include="Microsoft.NETCore.App.Crossgen2.linux-x64" Version="[{version}]" /></ItemGroup>
</Project>
"#
            ),
        )
        .unwrap();
        run_ok(Command::new("dotnet").args(["restore", "--nologo"]).current_dir(&work), &format!("restoring Crossgen2 {version}"));
    }
    assert!(tool.is_file(), "{} is missing", tool.display());
    tool
}

/// The built program for `rt`: `il/` holds R2rLib.dll and App.dll as csc wrote them (optimized,
/// portable PDBs, paths mapped to `/_/src/`), `run/` the program as it runs: App.dll, its
/// runtimeconfig, and R2rLib.dll compiled ahead of time against `rt`'s framework by Crossgen2 of
/// `rt`'s version, with R2rLib.pdb beside it (for the runtime's StackTrace).
fn build(rt: &Runtime, dir: &Path) -> (PathBuf, PathBuf) {
    let (il, run) = (dir.join("il"), dir.join("run"));
    std::fs::create_dir_all(&il).unwrap();
    std::fs::create_dir_all(&run).unwrap();
    let src = repo_root().join(SRC);
    let compile = |extra: &[String], out: &str, source: &str| {
        let mut c = Command::new(dotnet_file("roslyn/csc"));
        c.current_dir(&src).args(["-nologo", "-noconfig", "-nostdlib", "-deterministic", "-optimize+", "-debug:portable"]);
        c.arg(format!("-pathmap:{}/=/_/src/", src.display()));
        for a in ["System.Private.CoreLib", "System.Runtime", "System.Console", "System.Runtime.Extensions", "System.Diagnostics.StackTrace"] {
            c.arg(format!("-r:{}", rt.file(&format!("{a}.dll")).display()));
        }
        c.args(extra).arg(format!("-out:{}", il.join(out).display())).arg(source);
        run_ok(&mut c, &format!("csc {source}"));
    };
    compile(&["-target:library".to_owned()], "R2rLib.dll", "R2rLib.cs");
    compile(&["-target:exe".to_owned(), format!("-r:{}", il.join("R2rLib.dll").display())], "App.dll", "App.cs");
    let mut cg = Command::new(crossgen2(&rt.version));
    cg.arg(il.join("R2rLib.dll")).arg("-r").arg(format!("{}/*.dll", rt.framework.display()));
    cg.args(["--targetos", "linux", "--targetarch", "x64", "-O", "-o"]).arg(run.join("R2rLib.dll"));
    run_ok(&mut cg, &format!("crossgen2 {}", rt.version));
    for f in ["App.dll", "App.pdb", "R2rLib.pdb"] {
        std::fs::copy(il.join(f), run.join(f)).unwrap();
    }
    std::fs::write(run.join("App.runtimeconfig.json"), rt.runtimeconfig()).unwrap();
    (il, run)
}

/// `clrmap ARGS` with no symbol server from the environment.
fn clrmap_alone(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clrmap")).args(args).env_remove("CLRMAP_SYMBOL_SERVER").current_dir(repo_root()).output().unwrap()
}

/// The runtime's own frame of the hot method, printed by the program: (IL offset, line).
fn stacktrace_frame(out: &str) -> (u32, u32) {
    let l = out.lines().find(|l| l.starts_with("frame Spin il ")).unwrap_or_else(|| panic!("no frame line: {out}"));
    let f: Vec<&str> = l.split(' ').collect();
    (f[3].parse().unwrap(), f[5].parse().unwrap())
}

/// The line `clrmap pdb lines ASSEMBLY --pdb PDB --json` gives IL offset `il` of `method`: that
/// of the last visible sequence point at or before it.
fn pdb_line(assembly: &Path, pdb: &Path, method: &str, il: u64) -> Option<u64> {
    let o = clrmap_alone(&["pdb", "lines", s(assembly), "--pdb", s(pdb), "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let m: serde_json::Value = text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).find(|v| v["name"] == method).unwrap_or_else(|| panic!("{method} in {text}"));
    let points = m["points"].as_array().unwrap();
    // Hidden points are passed over, as the runtime's StackTrace passes them over.
    let at = points.iter().rfind(|p| p["il"].as_u64().unwrap() <= il && p["hidden"] != true)?;
    at["start_line"].as_u64()
}

/// Collapsed stacks as (frames, samples).
fn collapsed(path: &Path) -> Vec<(Vec<String>, u64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack.split(';').map(str::to_owned).collect(), n.parse().unwrap())
        })
        .collect()
}

/// The samples of each leaf frame of `method` (`method` or `method (File.cs:LINE)`).
fn leaves_of(stacks: &[(Vec<String>, u64)], method: &str) -> HashMap<String, u64> {
    let mut by = HashMap::new();
    for (frames, n) in stacks {
        let leaf = frames.last().unwrap();
        if leaf == method || leaf.starts_with(&format!("{method} (")) {
            *by.entry(leaf.clone()).or_default() += n;
        }
    }
    by
}

/// The samples of each leaf frame of `method` flame printed with `--il-offsets`, by (IL offset,
/// line): every such leaf must read `method [IL_xxxx]` or `method [IL_xxxx] (R2rLib.cs:LINE)`.
fn il_leaves_of(stacks: &[(Vec<String>, u64)], method: &str) -> HashMap<(u64, Option<u64>), u64> {
    let mut by = HashMap::new();
    for (frames, n) in stacks {
        let leaf = frames.last().unwrap();
        let Some(rest) = leaf.strip_prefix(&format!("{method} [IL_")) else {
            assert!(!leaf.starts_with(method), "a frame of {method} without its IL offset: {leaf}");
            continue;
        };
        let (hex, rest) = rest.split_once(']').unwrap_or_else(|| panic!("{leaf}"));
        assert!(hex.len() >= 4 && hex.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{leaf}");
        let il = u64::from_str_radix(hex, 16).unwrap();
        let line = match rest {
            "" => None,
            r => Some(r.strip_prefix(" (R2rLib.cs:").and_then(|r| r.strip_suffix(')')).unwrap_or_else(|| panic!("{leaf}")).parse().unwrap()),
        };
        *by.entry((il, line)).or_default() += n;
    }
    by
}

/// `clrmap symbolize TRACE --json [--return-address] ADDRESS` with `extra`: (il_offset, line) and stderr.
fn symbolize(trace: &Path, address: u64, kind: FrameKind, extra: &[&str]) -> (Option<u64>, Option<u64>, String) {
    let a = format!("{address:#x}");
    let mut args = vec!["symbolize", s(trace), "--json", &a];
    if kind == FrameKind::ReturnAddress {
        args.push("--return-address");
    }
    args.extend_from_slice(extra);
    let o = clrmap_alone(&args);
    assert_eq!(code(&o), Some(0), "{args:?}: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    assert_eq!(v["method"], HOT_METHOD, "{v}");
    (v["il_offset"].as_u64(), v["line"].as_u64(), stderr(&o))
}

/// A server root holding `pdb` under the SSQP key the image's CodeView entry gives (the GUID's
/// `N` form, first three fields little-endian, then `ffffffff`), computed here, not by clrmap:
/// the request's path and the GUID's `N` form.
fn store(root: &Path, guid: &[u8; 16], pdb: &Path) -> (String, String) {
    let g = guid;
    let n: String = [g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6]].iter().chain(&g[8..]).map(|b| format!("{b:02x}")).collect();
    let key = format!("r2rlib.pdb/{n}ffffffff/r2rlib.pdb");
    let at = root.join(&key);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::copy(pdb, &at).unwrap();
    (format!("/{key}"), n)
}

#[test]
#[ignore = "needs .NET"]
fn a_ready_to_run_frame_gets_its_line_from_a_symbol_server() {
    let line = u64::from(hot_line());
    for rt in current_runtimes() {
        let host = rt.label();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flame-r2r-server-{}", rt.version));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (il, run) = build(&rt, &dir);

        // The image keeps the IL assembly's CodeView entry: it names the PDB csc wrote, by id.
        let image = std::fs::read(run.join("R2rLib.dll")).unwrap();
        let pe = clrmap::pe::PeImage::parse(&image).unwrap();
        let cv = pe.codeview().unwrap().unwrap_or_else(|| panic!("{host}: the image has no CodeView entry"));
        let pdb_bytes = std::fs::read(il.join("R2rLib.pdb")).unwrap();
        let pdb_id = clrmap::pdb::PortablePdb::parse(&pdb_bytes).unwrap().id().0;
        assert!(cv.is_portable() && cv.pdb_id() == pdb_id, "{host}: the image's CodeView names another PDB");
        let guid = cv.guid;

        // Record it, with the PDB beside the image for the runtime's StackTrace.
        let trace = dir.join("cpu.nettrace");
        let o = clrmap_alone(&["trace", "collect", "--cpu", "-o", s(&trace), "--", s(&rt.dotnet), s(&run.join("App.dll")), "2"]);
        assert_eq!(code(&o), Some(0), "{host}: {}", stderr(&o));
        let printed = stdout(&o);
        assert!(printed.contains(&format!("at R2r.Hot.Spin(Int64 rounds, Int64 mark) in /_/src/R2rLib.cs:line {line}")), "{host}: {printed}");
        let (rt_il, rt_line) = stacktrace_frame(&printed);
        assert_eq!(u64::from(rt_line), line, "{host}: {printed}");

        // Then the PDB out of reach: not beside the image, not where csc wrote it, in no symbol
        // path; only the server has it.
        let away = dir.join("away");
        std::fs::create_dir_all(&away).unwrap();
        let pdb = away.join("R2rLib.pdb");
        std::fs::rename(il.join("R2rLib.pdb"), &pdb).unwrap();
        std::fs::remove_file(run.join("R2rLib.pdb")).unwrap();
        // The runtime's IL offset maps to its line in the PDB as clrmap reads it.
        assert_eq!(pdb_line(&il.join("R2rLib.dll"), &pdb, HOT_METHOD, u64::from(rt_il)), Some(line), "{host}: IL {rt_il}");

        // The hot method ran as ReadyToRun code, never jitted: every body the trace names is
        // the image's.
        let traced = Symbolizer::open(&trace, Options::default()).unwrap();
        let bodies: Vec<_> = traced.store().bodies().iter().filter(|b| b.name.as_deref() == Some(HOT_METHOD)).collect();
        assert!(!bodies.is_empty() && bodies.iter().all(|b| b.kind == Some(CodeKind::R2r)), "{host}: {:?}", bodies.iter().map(|b| (b.kind, b.start)).collect::<Vec<_>>());
        // The hottest sampled address in it, read as flame reads a leaf (a sample the sampler
        // marked external has its leaf read as a return address).
        let mut hot: HashMap<(u64, bool), u64> = HashMap::new();
        let file = std::fs::File::open(&trace).unwrap();
        clrmap::nettrace::read_samples(std::io::BufReader::new(file), |sm| {
            if let Some(&leaf) = sm.frames.first() {
                let kind = if sm.managed { FrameKind::Leaf } else { FrameKind::ReturnAddress };
                if traced.body(leaf, kind).and_then(|b| b.name.as_deref()) == Some(HOT_METHOD) {
                    *hot.entry((leaf, sm.managed)).or_default() += 1;
                }
            }
        })
        .unwrap();
        let (&(address, managed), &count) = hot.iter().max_by_key(|(k, n)| (**n, **k)).unwrap_or_else(|| panic!("{host}: no sample in {HOT_METHOD}"));
        let kind = if managed { FrameKind::Leaf } else { FrameKind::ReturnAddress };
        assert!(count >= 50, "{host}: the hottest address has {count} samples");

        // Without the server: the IL offset, no line, and a note that the PDB was not found.
        let cache = dir.join("cache");
        let (no_il, no_line, err) = symbolize(&trace, address, kind, &[]);
        assert!(no_il.is_some() && no_line.is_none(), "{host}: {no_il:?} {no_line:?}");
        let root = dir.join("server");
        let (key, n) = store(&root, &guid, &pdb);
        let note = format!("note: R2rLib.dll: R2rLib.pdb (PDB GUID {}) was looked for at", n.to_uppercase());
        let looked_for = |err: &str| {
            err.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .any(|v| v["note"]["kind"] == "looked_for" && v["note"]["module"] == "R2rLib.dll" && v["note"]["pdb_id"] == n.to_uppercase().as_str())
        };
        assert!(looked_for(&err), "{host}: {err}");
        let out = dir.join("alone.collapsed");
        let o = clrmap_alone(&["flame", s(&trace), "--format", "collapsed", "-o", s(&out)]);
        assert_eq!(code(&o), Some(0), "{host}: {}", stderr(&o));
        assert!(stderr(&o).contains(&note), "{host}: {}", stderr(&o));
        let alone = leaves_of(&collapsed(&out), HOT_METHOD);
        assert_eq!(alone.keys().collect::<Vec<_>>(), vec![HOT_METHOD], "{host}: {alone:?}");
        // With --il-offsets and no PDB: the frame still says where in the method it was, the IL
        // offset `symbolize` gives the hottest address (which the PDB, read apart, puts on the
        // HOT line), and no sample is lost to the split.
        let out = dir.join("alone-il.collapsed");
        let o = clrmap_alone(&["flame", s(&trace), "--il-offsets", "-o", s(&out)]);
        assert_eq!(code(&o), Some(0), "{host}: {}", stderr(&o));
        let alone_il = il_leaves_of(&collapsed(&out), HOT_METHOD);
        assert!(alone_il.keys().all(|(_, l)| l.is_none()), "{host}: a line without a PDB: {alone_il:?}");
        assert!(alone_il.get(&(no_il.unwrap(), None)).is_some_and(|&n| n >= count), "{host}: IL {no_il:?} has fewer than {count} samples: {alone_il:?}");
        assert_eq!(alone_il.values().sum::<u64>(), alone.values().sum::<u64>(), "{host}: {alone_il:?}");

        // With the server: the same IL offset, now with the HOT line, which the PDB gives it.
        let server = Server::start(&root, "ok", None);
        let (il_off, got_line, err) = symbolize(&trace, address, kind, &["--symbol-server", &server.url, "--cache", s(&cache)]);
        assert_eq!((il_off, got_line), (no_il, Some(line)), "{host}: {err}");
        assert_eq!(pdb_line(&il.join("R2rLib.dll"), &pdb, HOT_METHOD, il_off.unwrap()), Some(line), "{host}: IL {il_off:?}");
        assert_eq!(server.requests().iter().filter(|(p, _)| p == &key).count(), 1, "{host}: {:?}", server.requests());
        // flame, with an empty cache: the server is asked again, once, and the hot frame has
        // the line.
        let _ = std::fs::remove_dir_all(&cache);
        let out = dir.join("server.collapsed");
        let o = clrmap_alone(&["flame", s(&trace), "--format", "collapsed", "--symbol-server", &server.url, "--cache", s(&cache), "-o", s(&out)]);
        assert_eq!(code(&o), Some(0), "{host}: {}", stderr(&o));
        assert!(!stderr(&o).contains("R2rLib.pdb (PDB GUID"), "{host}: {}", stderr(&o));
        assert_eq!(server.requests().iter().filter(|(p, _)| p == &key).count(), 2, "{host}: {:?}", server.requests());
        let served = leaves_of(&collapsed(&out), HOT_METHOD);
        let hot_frame = format!("{HOT_METHOD} (R2rLib.cs:{line})");
        let (top, top_n) = served.iter().max_by_key(|(_, n)| **n).unwrap();
        assert_eq!(top, &hot_frame, "{host}: {served:?}");
        assert!(!served.contains_key(HOT_METHOD), "{host}: a frame of {HOT_METHOD} without its line: {served:?}");
        // Every sample of the method kept, now split by line.
        assert_eq!(served.values().sum::<u64>(), alone.values().sum::<u64>(), "{host}");
        assert!(*top_n >= count, "{host}: {top_n} < {count}");
        // --il-offsets with the server: each frame has both, and each IL offset is on the line
        // the PDB gives it (read by `clrmap pdb lines`); the same offsets as without the PDB.
        let out = dir.join("server-il.collapsed");
        let o = clrmap_alone(&["flame", s(&trace), "--il-offsets", "--symbol-server", &server.url, "--cache", s(&cache), "-o", s(&out)]);
        assert_eq!(code(&o), Some(0), "{host}: {}", stderr(&o));
        let served_il = il_leaves_of(&collapsed(&out), HOT_METHOD);
        for (&(il_at, l), n) in &served_il {
            assert_eq!(l, pdb_line(&il.join("R2rLib.dll"), &pdb, HOT_METHOD, il_at), "{host}: IL {il_at:#x} ({n} samples)");
            assert_eq!(alone_il.get(&(il_at, None)), Some(n), "{host}: IL {il_at:#x}: {alone_il:?} {served_il:?}");
        }
        assert_eq!(served_il.len(), alone_il.len(), "{host}: {served_il:?}");
        assert!(served_il.contains_key(&(no_il.unwrap(), Some(line))), "{host}: {served_il:?}");
        eprintln!("{host}: {count} samples at {address:#x} ({kind:?}): IL {il_off:?}, line {line}; the runtime's StackTrace: IL {rt_il}, line {rt_line}; flame: {served:?}");
    }
}

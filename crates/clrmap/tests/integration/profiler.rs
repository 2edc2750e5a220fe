//! The final judge: a live CLR profiler (crates/clrmap-profiler) records what the runtime answers
//! to GetILToNativeMapping, and clrmap's offline answers must be identical. Runs the C# workload
//! (tests/dotnet/programs) on both real runtimes. Needs `target/debug/libclrmap_profiler.so`,
//! which `cargo build --workspace` (scripts/test.sh) builds first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clrmap::capture::{read_captured, CapturedBody};
use clrmap::ilmap::{CodeKind, MapEntry};
use clrmap::r2r::ReadyToRunImage;

use crate::support::{self, Runtime};

pub(crate) const CLSID: &str = "{8C0F4F8E-6A3B-4C1E-9D2A-5B7E3C1F0A11}";

pub(crate) fn profiler_path() -> PathBuf {
    support::built("libclrmap_profiler.so")
}

/// Compile the workload for `rt` into its own directory.
pub(crate) fn workload(rt: &Runtime, mcs: &Path, test: &str) -> PathBuf {
    // One directory per test and runtime: the tests run in parallel.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("workload-{test}-{}", rt.version));
    std::fs::create_dir_all(&dir).unwrap();
    let dll = dir.join("Workload.dll");
    support::mcs_compile(mcs, &dll, &["-r:System.Core.dll"], &[support::repo_root().join("tests/dotnet/programs/Workload.cs")]);
    std::fs::write(dir.join("Workload.runtimeconfig.json"), rt.runtimeconfig()).unwrap();
    dll
}

/// Run the workload, with the profiler when `capture` is given. Returns stdout.
fn run(rt: &Runtime, dll: &Path, capture: Option<(&Path, &Path, bool)>) -> String {
    let mut c = Command::new(&rt.dotnet);
    // Not COMPlus_EnableDiagnostics=0: on .NET 8 it turns profilers off too.
    c.arg(dll).env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1");
    if let Some((so, out, disable_r2r)) = capture {
        c.env("CORECLR_ENABLE_PROFILING", "1").env("CORECLR_PROFILER", CLSID).env("CORECLR_PROFILER_PATH", so).env("CLRMAP_PROFILER_OUTPUT", out);
        if disable_r2r {
            c.env("CLRMAP_PROFILER_DISABLE_R2R", "1");
        }
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{} workload failed: {}", rt.version, String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// clrmap's maps of an image's bodies, keyed by (token, rva); cached per module path.
fn image_maps<'c>(cache: &'c mut HashMap<String, HashMap<(u32, u32), Vec<MapEntry>>>, path: &str) -> &'c HashMap<(u32, u32), Vec<MapEntry>> {
    cache.entry(path.to_owned()).or_insert_with(|| {
        let bytes = std::fs::read(path).unwrap();
        let image = ReadyToRunImage::parse(&bytes).unwrap();
        image.code_bodies().unwrap().into_iter().map(|b| ((b.token, b.rva.unwrap()), b.map)).collect()
    })
}

/// SizeOfImage from a module's PE optional header, read with `object` (an independent reader).
fn size_of_image(path: &str) -> u32 {
    use object::read::pe::ImageNtHeaders;
    let bytes = std::fs::read(path).unwrap();
    let dos = object::pe::ImageDosHeader::parse(&bytes[..]).unwrap();
    let mut off = u64::from(dos.nt_headers_offset());
    let (nt, _) = object::pe::ImageNtHeaders64::parse(&bytes[..], &mut off).unwrap();
    nt.optional_header.size_of_image.get(object::LittleEndian)
}

fn capture(rt: &Runtime, dll: &Path, so: &Path, disable_r2r: bool) -> Vec<CapturedBody> {
    let out = dll.with_file_name(format!("capture-{disable_r2r}.jsonl"));
    // The profiler appends (a child process shares its parent's capture): start afresh.
    let _ = std::fs::remove_file(&out);
    let plain = run(rt, dll, None);
    let profiled = run(rt, dll, Some((so, &out, disable_r2r)));
    assert_eq!(plain, profiled, "{}: the profiler changed the program's output", rt.version);
    let text = std::fs::read_to_string(&out).unwrap_or_else(|_| panic!("{}: the profiler did not load (no capture)", rt.version));
    assert!(text.contains("\"kind\":\"end\""), "{}: no orderly shutdown record", rt.version);
    // What the profiler itself writes (the reader also drops such RVAs from older captures).
    for line in text.lines().filter(|l| l.starts_with("{\"kind\":\"jit\"")) {
        assert!(line.contains("\"rva\":null"), "{}: the profiler gave jitted code an RVA: {}", rt.version, &line[..line.len().min(300)]);
    }
    read_captured(&text).unwrap()
}

#[test]
#[ignore = "needs .NET"]
fn live_runtime_maps_equal_clrmaps_maps_on_both_runtimes() {
    let (rts, mcs) = support::runtimes_and_mcs("profiler::live_runtime_maps_equal_clrmaps_maps");
    let so = profiler_path();
    for rt in &rts {
        live_maps_equal_clrmaps(rt, &mcs, &so);
    }
}

/// .NET 11.0.0 (R2R 26.1: bit-packed bounds with 3 source bits), run from its linux-x64 runtime
/// pack laid out by scripts/install-dotnet.sh with the SDK's host: the runtime's own maps of the
/// framework's ReadyToRun methods equal clrmap's.
#[test]
#[ignore = "needs .NET"]
fn live_runtime_maps_equal_clrmaps_maps_on_net11() {
    let (_, mcs) = support::runtimes_and_mcs("profiler::live_runtime_maps_equal_clrmaps_maps_on_net11");
    let rt = support::net11_runtime();
    live_maps_equal_clrmaps(&rt, &mcs, &profiler_path());
}

/// Run the workload on `rt` under the profiler: every ReadyToRun body the runtime ran has the map
/// clrmap reads from its image; jitted code has no RVA; tiering gives later bodies their own maps.
fn live_maps_equal_clrmaps(rt: &Runtime, mcs: &Path, so: &Path) {
    let dll = workload(rt, mcs, "equal");
    let bodies = capture(rt, &dll, so, false);
    let mut cache = HashMap::new();
    let (mut equal, mut modules) = (0usize, std::collections::BTreeSet::new());
    for b in bodies.iter().filter(|b| b.kind == CodeKind::R2r) {
        let rva = b.body.rva.expect("an R2R body has an RVA in its module");
        let maps = image_maps(&mut cache, &b.module_path);
        let ours = maps.get(&(b.body.token, rva)).unwrap_or_else(|| panic!("{}: the runtime ran 0x{:08X} at RVA 0x{rva:X} of {}, clrmap has no such body", rt.version, b.body.token, b.module_path));
        assert_eq!(ours, &b.body.map, "{} 0x{:08X} @0x{rva:X} in {}", rt.version, b.body.token, b.module_path);
        equal += 1;
        modules.insert(b.body.module.clone().unwrap_or_default());
    }
    println!("{}: {equal} ReadyToRun maps equal to the live runtime's, across {modules:?}", rt.version);
    // An RVA only for ReadyToRun code inside its module's image; never for jitted code, even
    // when the JIT's code heap lies within 4 GiB of a module's base.
    let mut sizes: HashMap<String, u32> = HashMap::new();
    for b in &bodies {
        match (b.kind, b.body.rva) {
            (CodeKind::Jit, rva) => assert_eq!(rva, None, "{}: jitted 0x{:08X} in {} has an RVA", rt.version, b.body.token, b.module_path),
            (_, Some(rva)) => {
                let size = *sizes.entry(b.module_path.clone()).or_insert_with(|| size_of_image(&b.module_path));
                assert!(rva < size, "{}: RVA 0x{rva:X} past SizeOfImage 0x{size:X} of {}", rt.version, b.module_path);
            }
            (_, None) => panic!("{}: an R2R body without an RVA", rt.version),
        }
    }
    assert!(equal > 300, "{}: only {equal} R2R methods compared", rt.version);

    // Tiering (docs/format-notes.md#the-profiling-api): a method with two bodies has two maps, and GetILToNativeMapping
    // by FunctionID answers with the first body's.
    let jit: Vec<&CapturedBody> = bodies.iter().filter(|b| b.kind == CodeKind::Jit).collect();
    let mut tiered = 0;
    for later in jit.iter().filter(|b| b.index >= 1) {
        let Some(first) = jit.iter().find(|b| b.body.function_id == later.body.function_id && b.index == 0) else { continue };
        assert_eq!(later.map1.as_ref(), Some(&first.body.map), "{}: Map1 must answer with the first body", rt.version);
        if later.body.map != first.body.map {
            tiered += 1;
        }
    }
    println!("{}: {} jitted bodies; {tiered} tier-1 bodies with a map unlike their tier-0 body's", rt.version, jit.len());
    assert!(tiered > 0, "{}: no method reached tier 1 with a different map", rt.version);
}

#[test]
#[ignore = "needs .NET"]
fn jitted_maps_of_r2r_methods_differ_from_the_image() {
    // With COR_PRF_DISABLE_ALL_NGEN_IMAGES the runtime jits even CoreLib: the same methods get JIT
    // maps, which must often differ from the R2R maps, or the equality test above proves nothing.
    let (rts, mcs) = support::runtimes_and_mcs("profiler::jitted_maps_of_r2r_methods_differ");
    let so = profiler_path();
    for rt in &rts {
        let dll = workload(rt, &mcs, "jit");
        let bodies = capture(rt, &dll, &so, true);
        assert!(!bodies.iter().any(|b| b.kind == CodeKind::R2r), "{}: R2R code ran although disabled", rt.version);
        let mut cache = HashMap::new();
        let (mut compared, mut differ) = (0, 0);
        for b in bodies.iter().filter(|b| b.kind == CodeKind::Jit && b.index == 0) {
            if !b.module_path.contains("Microsoft.NETCore.App") {
                continue;
            }
            let Ok(bytes) = std::fs::read(&b.module_path) else { continue };
            if ReadyToRunImage::parse(&bytes).is_err() {
                continue;
            }
            let maps = image_maps(&mut cache, &b.module_path);
            // The R2R body of a non-generic method: the only entry with this token.
            let same: Vec<&Vec<MapEntry>> = maps.iter().filter(|((t, _), _)| *t == b.body.token).map(|(_, m)| m).collect();
            if let [r2r] = same.as_slice() {
                compared += 1;
                if **r2r != b.body.map {
                    differ += 1;
                }
            }
        }
        println!("{}: {compared} framework methods jitted and compared with their R2R maps; {differ} differ", rt.version);
        assert!(compared > 100 && differ > 0, "{}: compared {compared}, differ {differ}", rt.version);
    }
}

//! ReadyToRun debug info against the real runtimes: every method with debug info in every R2R
//! assembly of both shared frameworks (3.1.23: R2R 3.1; 8.0.4: R2R 9.1) decodes, generic
//! instantiations from section 109 included, and every map keeps the contract's invariants.
//!
//! Then the Windows x86 and x64 frameworks of 3.1.23 (scripts/install-r2r-images.sh), whose
//! RUNTIME_FUNCTIONs have another layout (r2r::machine): no runtime for them runs here, so they
//! are checked structurally, and against each other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clrmap::ilmap::IlOffset;
use clrmap::metadata::Metadata;
use clrmap::r2r::{Machine, Os, ReadyToRunImage};

use crate::support::{repo_root, runtimes};

#[test]
#[ignore = "needs .NET"]
fn every_method_of_every_r2r_assembly_decodes() {
    for rt in runtimes("r2r::every_method_of_every_r2r_assembly_decodes") {
        let (mut images, mut bodies, mut instantiations, mut entries) = (0, 0usize, 0usize, 0usize);
        let mut majors = std::collections::BTreeSet::new();
        for f in rt.assemblies() {
            let bytes = std::fs::read(&f).unwrap();
            let image = match ReadyToRunImage::parse(&bytes) {
                Ok(i) => i,
                Err(e) if e.kind == clrmap::ErrorKind::BadReadyToRun && e.offset().unwrap() == 0 => continue, // IL-only
                Err(e) => panic!("{}: {e}", f.display()),
            };
            images += 1;
            majors.insert((image.major, image.minor));
            let md = Metadata::parse(&bytes).unwrap();
            let list = image.code_bodies().unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let eps = image.entry_points().unwrap();
            entries += eps.len();
            instantiations += eps.iter().filter(|e| e.instantiation).count();
            for b in &list {
                assert!(b.code_size > 0, "{} 0x{:08X}", f.display(), b.token);
                // docs/output.md#il-to-native-maps: ranges inside the code, PROLOG first, IL ascending, EPILOG, NO_MAPPING last.
                for w in b.map.windows(2) {
                    assert!((w[0].il.sort_key(), w[0].native_start) <= (w[1].il.sort_key(), w[1].native_start));
                }
                for e in &b.map {
                    assert!(e.native_start <= e.native_end && e.native_end <= b.code_size, "{} 0x{:08X} {e:?}", f.display(), b.token);
                }
                if b.token >> 24 == 0x06 {
                    assert!(md.method_name(b.token).is_some());
                }
                let _ = b.map.iter().any(|e| e.il == IlOffset::Prolog);
            }
            println!("{}: {} bodies", f.file_name().unwrap().to_string_lossy(), list.len());
            bodies += list.len();
        }
        println!("{}: {images} R2R images {majors:?}, {entries} entry points ({instantiations} from section 109), {bodies} bodies with debug info", rt.version);
        assert!(images > 80 && bodies > 50_000 && instantiations > 1_000, "too little data");
    }
}

/// Independent cross-checks of how bodies are attributed (docs/format-notes.md#the-runtimes-map):
/// the RUNTIME_FUNCTION table is sorted and non-overlapping; no function precedes the first entry
/// point, so each function is claimed either as an entry or by exactly one funclet chain; the
/// functions claimed as funclets carry no debug info of their own (edge case 18); and when one
/// RUNTIME_FUNCTION is the entry of several methods (3.1 CoreLib: P/Invoke methods sharing one
/// compiled stub, e.g. `Interop/Kernel32::SetEvent`/`ResetEvent`/`ReleaseMutex`), it has no debug
/// info, so no code body is reported twice.
#[test]
#[ignore = "needs .NET"]
fn every_runtime_function_is_claimed_by_exactly_one_method() {
    for rt in runtimes("r2r::every_runtime_function_is_claimed_by_exactly_one_method") {
        let (mut functions, mut entry_functions, mut funclets, mut shared) = (0usize, 0usize, 0usize, 0usize);
        for f in rt.assemblies() {
            let bytes = std::fs::read(&f).unwrap();
            let Ok(image) = ReadyToRunImage::parse(&bytes) else { continue };
            let rfs = image.runtime_functions();
            for w in rfs.windows(2) {
                assert!(w[0].begin < w[0].end && w[0].end <= w[1].begin, "{}: {w:?}", f.display());
            }
            let eps = image.entry_points().unwrap();
            let mut owners = vec![0u32; rfs.len()];
            for e in &eps {
                owners[e.runtime_function as usize] += 1;
            }
            let first = owners.iter().position(|&n| n > 0).unwrap_or(rfs.len());
            assert!(rfs.is_empty() || first == 0, "{}: {first} RUNTIME_FUNCTIONs before the first entry point", f.display());
            for (i, &n) in owners.iter().enumerate() {
                let has_debug = image.debug_info(i as u32).unwrap().is_some();
                match n {
                    0 => {
                        funclets += 1;
                        assert!(!has_debug, "{}: funclet {i} has debug info", f.display());
                    }
                    1 => entry_functions += 1,
                    _ => {
                        entry_functions += 1;
                        shared += 1;
                        assert!(!has_debug, "{}: RUNTIME_FUNCTION {i} is the entry of {n} methods and has debug info", f.display());
                    }
                }
            }
            let bodies = image.code_bodies().unwrap();
            let starts: std::collections::HashSet<u32> = bodies.iter().filter_map(|b| b.rva).collect();
            assert_eq!(starts.len(), bodies.len(), "{}: a code body reported twice", f.display());
            functions += rfs.len();
        }
        println!("{}: {functions} RUNTIME_FUNCTIONs = {entry_functions} entry functions ({shared} shared by several methods) + {funclets} funclets", rt.version);
        assert_eq!(functions, entry_functions + funclets);
        assert!(funclets > 1_000, "too few funclets");
    }
}

/// A Windows framework installed by `scripts/install-r2r-images.sh`: 10.0.12's from NuGet on the SDK
/// machine, 3.1.23's from PyPI elsewhere.
struct WindowsFramework {
    arch: &'static str,
    machine: Machine,
    version: String,
    dir: PathBuf,
}

/// The win-x86 and win-x64 frameworks of one version; a missing one fails the test (which is
/// `#[ignore = "needs .NET"]`, run by scripts/test.sh).
fn windows_frameworks(test: &str) -> Vec<WindowsFramework> {
    let home = std::env::var_os("CLRMAP_DOTNET_HOME").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".dotnet"));
    let found: Vec<WindowsFramework> = [("x86", Machine::X86), ("x64", Machine::X64)]
        .into_iter()
        .flat_map(|(arch, machine)| {
            let versions = std::fs::read_dir(home.join("win").join(arch)).into_iter().flatten().flatten();
            versions.map(move |v| WindowsFramework { arch, machine, version: v.file_name().to_string_lossy().into_owned(), dir: v.path() })
        })
        .filter(|f| f.dir.join(".complete").is_file() && f.dir.join("System.Private.CoreLib.dll").is_file())
        .collect();
    assert!(found.len() == 2 && found[0].version == found[1].version, "{test}: a Windows ReadyToRun framework is missing: run scripts/install-r2r-images.sh");
    found
}

fn dlls(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "dll")).collect();
    v.sort();
    v
}

/// What one image holds: MethodDef entry points, instantiations, code bodies with debug info,
/// RUNTIME_FUNCTIONs, and those claimed as funclets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    methods: usize,
    instantiations: usize,
    bodies: usize,
    functions: usize,
    funclets: usize,
}

/// The structural checks of an image whose code no runtime here can run:
/// - the RUNTIME_FUNCTIONs are sorted, each with code, none overlapping the next, and each inside
///   one section's raw data;
/// - every RUNTIME_FUNCTION is claimed exactly once: the first is an entry point, and each other
///   is an entry point or a funclet of the entry before it; funclets and RUNTIME_FUNCTIONs shared
///   by several methods carry no debug info;
/// - every method with debug info decodes (bounds and variables), and `code_bodies` reports each
///   body once, with its bounds inside its code (it fails otherwise), covering exactly its chain
///   of RUNTIME_FUNCTIONs.
///
/// Returns the counts, and the gaps between the end of each function and the next start.
fn check_structure(f: &Path, image: &ReadyToRunImage<'_>) -> (Counts, Vec<u32>) {
    let name = f.display();
    let rfs = image.runtime_functions();
    let mut gaps = Vec::with_capacity(rfs.len());
    for w in rfs.windows(2) {
        assert!(w[0].begin < w[0].end && w[0].end <= w[1].begin, "{name}: {w:?}");
        gaps.push(w[1].begin - w[0].end);
    }
    for rf in rfs {
        assert!(image.pe().reader_at(rf.begin, rf.end - rf.begin).is_ok(), "{name}: {rf:?} outside the sections");
    }
    let eps = image.entry_points().unwrap();
    let mut owners = vec![0u32; rfs.len()];
    for e in &eps {
        owners[e.runtime_function as usize] += 1;
    }
    assert!(rfs.is_empty() || owners[0] > 0, "{name}: a RUNTIME_FUNCTION before the first entry point");
    let mut counts = Counts { functions: rfs.len(), ..Counts::default() };
    for (i, &n) in owners.iter().enumerate() {
        let debug = image.debug_info(i as u32).unwrap_or_else(|e| panic!("{name}: RUNTIME_FUNCTION {i}: {e}"));
        if n != 1 {
            assert!(debug.is_none(), "{name}: RUNTIME_FUNCTION {i}, claimed by {n} methods, has debug info");
        }
        if n == 0 {
            counts.funclets += 1;
        }
    }
    counts.methods = eps.iter().filter(|e| !e.instantiation).count();
    counts.instantiations = eps.len() - counts.methods;
    let bodies = image.code_bodies().unwrap_or_else(|e| panic!("{name}: {e}"));
    let by_start: BTreeMap<u32, &clrmap::ilmap::CodeBody> = bodies.iter().map(|b| (b.rva.unwrap(), b)).collect();
    assert_eq!(by_start.len(), bodies.len(), "{name}: a code body reported twice");
    for (i, rf) in rfs.iter().enumerate() {
        let Some(b) = by_start.get(&rf.begin) else { continue };
        // The body's code is this function and the funclets after it, up to the next entry.
        let last = (i + 1..rfs.len()).take_while(|&j| owners[j] == 0).last().unwrap_or(i);
        assert_eq!(b.code_size, rfs[last].end - rf.begin, "{name}: body at 0x{:X}", rf.begin);
        for e in &b.map {
            assert!(e.native_start <= e.native_end && e.native_end <= b.code_size, "{name} 0x{:08X} {e:?}", b.token);
        }
    }
    counts.bodies = bodies.len();
    (counts, gaps)
}

/// The acceptance test of the per-machine layouts: a win-x86 framework (8-byte RUNTIME_FUNCTIONs,
/// lengths from the x86 GC info) and a win-x64 framework (12-byte) decode every body and pass the
/// structural checks. On 3.1.23 their counts agree image by image, except in two assemblies whose
/// x86 and x64 compilations differ by a few methods, and the x86 images hold no funclets (3.1's x86
/// code has none: R2R 14 brought them). On 10.0.12 both have funclets, and the images carry the
/// ReadyToRun version of the Linux 10.0 framework.
///
/// The code lengths are right, not merely inside bounds: code is packed, each function starting
/// at the next multiple of the code alignment (4 bytes on x86, 16 on x64) nearly always, so the
/// gap between a function's end and the next start is below the alignment for all but a few
/// (539 of 133,563 on x86, 27 of 142,630 on x64, none of 64 bytes). Lengths read with the wrong
/// layout leave gaps and overlaps of any size.
#[test]
#[ignore = "needs .NET"]
fn windows_x86_and_x64_frameworks_decode_and_pass_the_structural_checks() {
    let frameworks = windows_frameworks("r2r::windows_x86_and_x64_frameworks_decode_and_pass_the_structural_checks");
    let old = frameworks[0].version.starts_with("3.");
    // 3.1's images are R2R 3.1; newer ones carry the version of the same release's Linux images.
    let expected_version = if old {
        (3, 1)
    } else {
        let channel = frameworks[0].version.rsplit_once('.').unwrap().0.to_owned();
        let linux = std::fs::read(crate::support::runtime(&channel).corelib()).unwrap();
        let image = ReadyToRunImage::parse(&linux).unwrap();
        (image.major, image.minor)
    };
    let mut per_arch: Vec<BTreeMap<String, Counts>> = Vec::new();
    for fw in &frameworks {
        let mut images = BTreeMap::new();
        let mut gaps: Vec<u32> = Vec::new();
        for f in dlls(&fw.dir) {
            let bytes = std::fs::read(&f).unwrap();
            let image = match ReadyToRunImage::parse(&bytes) {
                Ok(i) => i,
                // Native DLLs and IL-only assemblies.
                Err(e) if e.offset().unwrap() == 0 && matches!(e.kind, clrmap::ErrorKind::BadReadyToRun | clrmap::ErrorKind::BadImage) => continue,
                Err(e) => panic!("{}: {e}", f.display()),
            };
            assert_eq!((image.machine(), image.os()), (fw.machine, Os::Windows), "{}", f.display());
            assert_eq!((image.major, image.minor), expected_version, "{}", f.display());
            let (counts, g) = check_structure(&f, &image);
            gaps.extend(g);
            images.insert(f.file_name().unwrap().to_string_lossy().into_owned(), counts);
        }
        let total = |g: fn(&Counts) -> usize| images.values().map(g).sum::<usize>();
        // 3.1's x86 code is packed at 4 bytes; 10.0's x86 code, like all x64 code, at 16 (measured:
        // no gap of 16 bytes or more between 10.0.12's win-x86 functions).
        let alignment = if fw.machine == Machine::X86 && old { 4 } else { 16 };
        let unaligned = gaps.iter().filter(|&&g| g >= alignment).count();
        let max_gap = gaps.iter().copied().max().unwrap_or(0);
        println!(
            "win-{} {}: {} R2R images, {} RUNTIME_FUNCTIONs ({} funclets), {} methods + {} instantiations, {} bodies with debug info; {unaligned} of {} gaps between functions of {alignment} bytes or more, the largest {max_gap}",
            fw.arch,
            fw.version,
            images.len(),
            total(|c| c.functions),
            total(|c| c.funclets),
            total(|c| c.methods),
            total(|c| c.instantiations),
            total(|c| c.bodies),
            gaps.len(),
        );
        // 10.0's framework has fewer ReadyToRun images (91 on win-x86; its facades are IL only).
        assert!(images.len() > if old { 150 } else { 80 } && total(|c| c.bodies) > 130_000, "win-{}: too little data", fw.arch);
        assert!(unaligned * 100 < gaps.len() && max_gap < 64, "win-{}: code lengths that leave gaps", fw.arch);
        if fw.machine == Machine::X86 && old {
            assert_eq!(total(|c| c.funclets), 0, "3.1's x86 code has no funclets");
        } else {
            assert!(total(|c| c.funclets) > 1_000, "too few x64 funclets");
        }
        per_arch.push(images);
    }
    if let ([x86, x64], true) = (&per_arch[..], old) {
        assert_eq!(x86.keys().collect::<Vec<_>>(), x64.keys().collect::<Vec<_>>(), "the same R2R assemblies");
        let key = |c: &Counts| (c.methods, c.instantiations, c.bodies);
        let differ: Vec<&String> = x86.keys().filter(|k| key(&x86[*k]) != key(&x64[*k])).collect();
        for k in &differ {
            println!("{k}: x86 {:?}, x64 {:?}", x86[*k], x64[*k]);
            let (a, b) = (x86[*k].bodies as f64, x64[*k].bodies as f64);
            assert!((a - b).abs() / b < 0.01, "{k}: x86 and x64 body counts differ by 1% or more");
        }
        assert!(differ.len() <= 2, "x86 and x64 counts differ in {differ:?}");
    }
}

/// What decoding every method's whole debug info found in one set of images.
#[derive(Debug, Default)]
struct Whole {
    images: usize,
    versions: std::collections::BTreeSet<(u16, u16)>,
    methods: usize,
    bounds: usize,
    async_bounds: usize,
    vars: usize,
    call_returns: usize,
    fat: usize,
    async_points: usize,
    numbers_checked: usize,
}

/// The IL argument and local counts of a MethodDef, from its signature and its IL header's
/// LocalVarSig (ECMA-335 II.22.26, II.25.4, II.23.2.6): an independent bound on variable numbers.
fn args_and_locals(pe: &clrmap::pe::PeImage<'_>, md: &Metadata<'_>, token: u32) -> Option<u32> {
    use clrmap::metadata::table;
    if token >> 24 != 0x06 {
        return None;
    }
    let row = md.tables().row(table::METHOD_DEF, token & 0x00FF_FFFF).ok()?;
    // ImplFlags 0x2000 (MethodImplAttributes.Async, .NET 11's runtime-async methods): the body
    // crossgen2 compiled has more locals than the method's own IL (on 11.0.0, every variable
    // numbered past the metadata's counts, 2,318 of 815,076 on linux-x64, is in such a method).
    if row.get(1).ok()? & 0x2000 != 0 {
        return None;
    }
    let mut sig = md.blobs().get(row.get(4).ok()?).ok()?;
    let conv = sig.u8("").ok()?;
    if conv & 0x10 != 0 {
        sig.compressed_u32("").ok()?; // GenParamCount
    }
    // HASTHIS (0x20): `this` is argument 0.
    let args = sig.compressed_u32("").ok()? + u32::from(conv & 0x20 != 0);
    let rva = row.get(0).ok()?;
    let mut body = pe.reader_from(rva).ok()?;
    let first = body.u8("").ok()?;
    if first & 3 == 2 {
        return Some(args); // tiny header: no locals
    }
    body.skip(7, "").ok()?; // flags/size byte, MaxStack, CodeSize
    let local_sig = body.u32("").ok()?;
    if local_sig == 0 {
        return Some(args);
    }
    let row = md.tables().row(table::STAND_ALONE_SIG, local_sig & 0x00FF_FFFF).ok()?;
    let mut locals = md.blobs().get(row.get(0).ok()?).ok()?;
    (locals.u8("").ok()? == 0x07).then_some(())?;
    Some(args + locals.compressed_u32("").ok()?)
}

/// Decode every entry point's debug info whole (bounds, variables, and the fat header's chunks),
/// each chunk ending exactly where its last entry does (`r2r::debuginfo`), and every code body.
fn decode_whole(files: &[PathBuf]) -> Whole {
    let mut w = Whole::default();
    for f in files {
        let bytes = std::fs::read(f).unwrap();
        let image = match ReadyToRunImage::parse(&bytes) {
            Ok(i) => i,
            Err(e) if e.kind == clrmap::ErrorKind::BadReadyToRun && e.offset().unwrap() == 0 => continue, // IL-only
            Err(e) => panic!("{}: {e}", f.display()),
        };
        w.images += 1;
        w.versions.insert((image.major, image.minor));
        let md = Metadata::parse(&bytes).unwrap();
        let sizes: std::collections::HashMap<u32, u32> = image.code_bodies().unwrap_or_else(|e| panic!("{}: {e}", f.display())).iter().map(|b| (b.rva.unwrap(), b.code_size)).collect();
        for e in image.entry_points().unwrap() {
            let Some(d) = image.debug_info(e.runtime_function).unwrap_or_else(|err| panic!("{} 0x{:08X}: {err}", f.display(), e.token)) else { continue };
            let code_size = sizes[&image.runtime_functions()[e.runtime_function as usize].begin];
            w.methods += 1;
            w.bounds += d.bounds.len();
            w.async_bounds += d.bounds.iter().filter(|b| b.source.0 & clrmap::ilmap::SourceTypes::ASYNC != 0).count();
            w.vars += d.vars.len();
            w.call_returns += d.vars.iter().filter(|v| v.call_return_il.is_some()).count();
            w.async_points += d.async_points.len();
            if !d.uninstrumented_bounds.is_empty() || !d.async_points.is_empty() || d.opaque_sizes != (0, 0) {
                w.fat += 1;
            }
            // Argument and local numbers below the method's own counts, from its metadata and IL
            // header: read in the wrong layout (a start or a length taken for a number) they are not.
            if let Some(n) = args_and_locals(image.pe(), &md, e.token) {
                w.numbers_checked += d.vars.len();
                for v in d.vars.iter().filter(|v| v.number >= 0) {
                    assert!((v.number as u32) < n, "{} 0x{:08X} ({n} args and locals): {v:?}", f.display(), e.token);
                }
            }
            for v in &d.vars {
                // Live ranges inside the method's code: read in the wrong layout (a number taken
                // for a start, a start for a length) they are not.
                assert!(v.start <= v.end && v.end <= code_size, "{} 0x{:08X} (code 0x{code_size:X}): {v:?}", f.display(), e.token);
                // Arguments and locals, or one of the special numbers -1 to -5.
                assert!(v.number >= -5, "{} 0x{:08X}: {v:?}", f.display(), e.token);
            }
        }
    }
    w
}

/// Every method's whole debug info on every installed runtime: bounds, and the variables that
/// 3.1 to 10.0 store start-first (10.0.12's R2R 16 included, whose bounds are bit-packed).
#[test]
#[ignore = "needs .NET"]
fn every_method_of_every_r2r_assembly_decodes_whole_with_its_variables() {
    for rt in runtimes("r2r::every_method_of_every_r2r_assembly_decodes_whole_with_its_variables") {
        let w = decode_whole(&rt.assemblies());
        println!("{}: {w:?}", rt.version);
        assert!(w.images > 80 && w.methods > 50_000 && w.vars > 100_000 && w.numbers_checked > 100_000, "{}: too little data", rt.version);
        assert_eq!((w.fat, w.async_bounds, w.call_returns), (0, 0, 0), "{}: only .NET 11 has these", rt.version);
    }
}

/// The images of .NET 11.0.0's runtime packs (linux-x64, linux-arm64, win-x64), laid out by
/// scripts/install-dotnet.sh; a missing pack fails the test.
fn net11_packs() -> Vec<(&'static str, Vec<PathBuf>)> {
    let home = std::env::var_os("CLRMAP_DOTNET_HOME").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".dotnet"));
    ["linux-x64", "linux-arm64", "win-x64"]
        .into_iter()
        .map(|rid| {
            let dir = home.join("packs").join(rid).join("11.0.0");
            assert!(dir.is_dir(), "{}: the 11.0.0 {rid} pack is missing: run scripts/install-dotnet.sh", dir.display());
            let files = dlls(&dir);
            assert!(files.len() > 150, "{}: the 11.0.0 {rid} pack is missing: run scripts/install-dotnet.sh", dir.display());
            (rid, files)
        })
        .collect()
}

/// Every method of every ReadyToRun image of the three 11.0.0 packs decodes whole in R2R 26's
/// layout: bit-packed bounds with 3 source bits (Async=4 included), number-first variables.
#[test]
#[ignore = "needs .NET"]
fn every_method_of_the_net11_packs_decodes_whole() {
    for (rid, files) in net11_packs() {
        let w = decode_whole(&files);
        println!("11.0.0 {rid}: {w:?}");
        assert_eq!(w.versions.iter().copied().collect::<Vec<_>>(), [(26, 1)], "{rid}: 11.0.0's images are R2R 26.1");
        assert!(w.images > 90 && w.methods > 100_000 && w.vars > 200_000 && w.numbers_checked > 200_000, "{rid}: too little data");
        assert!(w.async_bounds > 100, "{rid}: runtime-async methods' bounds carry the Async source bit");
        // The numbers check tells the layouts apart: read start-first (10.0's variables), most of
        // 11.0.0's CoreLib variables fall past their method's argument and local counts.
        let corelib = files.iter().find(|f| f.ends_with("System.Private.CoreLib.dll")).unwrap();
        let bytes = std::fs::read(corelib).unwrap();
        let md = Metadata::parse(&bytes).unwrap();
        let wrong = clrmap::r2r::DebugInfoLayout { vars: clrmap::r2r::VarsLayout::StartFirst, ..clrmap::r2r::DebugInfoLayout::FAT3 };
        let (mut checked, mut past) = (0usize, 0usize);
        for layout in [clrmap::r2r::DebugInfoLayout::FAT3, wrong] {
            let image = ReadyToRunImage::parse_assuming(&bytes, Some(layout)).unwrap();
            (checked, past) = (0, 0);
            for e in image.entry_points().unwrap() {
                let (Some(n), Ok(Some(d))) = (args_and_locals(image.pe(), &md, e.token), image.debug_info(e.runtime_function)) else { continue };
                checked += d.vars.len();
                past += d.vars.iter().filter(|v| v.number >= 0 && v.number as u32 >= n).count();
            }
            if layout == clrmap::r2r::DebugInfoLayout::FAT3 {
                assert_eq!(past, 0, "{rid}");
            }
        }
        println!("11.0.0 {rid}: read start-first, {past} of {checked} CoreLib variables are past their method's counts");
        assert!(past * 4 > checked, "{rid}: the wrong layout should fail the numbers check");
    }
}

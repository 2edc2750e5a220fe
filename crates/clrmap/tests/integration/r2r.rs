//! ReadyToRun debug info against the real runtimes: every method with debug info in every R2R
//! assembly of both shared frameworks (3.1.23: R2R 3.1; 8.0.4: R2R 9.1) decodes, generic
//! instantiations from section 109 included, and every map keeps the contract's invariants.

use clrmap::ilmap::IlOffset;
use clrmap::metadata::Metadata;
use clrmap::r2r::ReadyToRunImage;

use crate::support::runtimes;

#[test]
fn every_method_of_every_r2r_assembly_decodes() {
    for rt in runtimes("r2r::every_method_of_every_r2r_assembly_decodes") {
        let (mut images, mut bodies, mut instantiations, mut entries) = (0, 0usize, 0usize, 0usize);
        let mut majors = std::collections::BTreeSet::new();
        for f in rt.assemblies() {
            let bytes = std::fs::read(&f).unwrap();
            let image = match ReadyToRunImage::parse(&bytes) {
                Ok(i) => i,
                Err(e) if e.kind == clrmap::ErrorKind::BadReadyToRun && e.offset == 0 => continue, // IL-only
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
                // Contract §4: ranges inside the code, PROLOG first, IL ascending, EPILOG, NO_MAPPING last.
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

/// Independent cross-checks of how bodies are attributed (ilmap.md "Reading ... code sizes"):
/// the RUNTIME_FUNCTION table is sorted and non-overlapping; no function precedes the first entry
/// point, so each function is claimed either as an entry or by exactly one funclet chain; the
/// functions claimed as funclets carry no debug info of their own (edge case 18); and when one
/// RUNTIME_FUNCTION is the entry of several methods (3.1 CoreLib: P/Invoke methods sharing one
/// compiled stub, e.g. `Interop/Kernel32::SetEvent`/`ResetEvent`/`ReleaseMutex`), it has no debug
/// info, so no code body is reported twice.
#[test]
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
        println!(
            "{}: {functions} RUNTIME_FUNCTIONs = {entry_functions} entry functions ({shared} shared by several methods) + {funclets} funclets",
            rt.version
        );
        assert_eq!(functions, entry_functions + funclets);
        assert!(funclets > 1_000, "too few funclets");
    }
}

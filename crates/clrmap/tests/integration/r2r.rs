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

//! `GetFrameProps` over ReadyToRun images (`r2r::frames`) on both CoreLibs (3.1.23: R2R 3.1;
//! 8.0.4: R2R 9.1), for every RUNTIME_FUNCTION, funclets first:
//!
//! * against the RUNTIME_FUNCTION chains, walked here from the entry points: inside a main body
//!   the frame is the method and there is no parent; inside a funclet the frame is the funclet and
//!   the parent is the method whose entry precedes it; padding between functions and RVAs before
//!   the first or past the last function are `not_found` at that RVA;
//! * against the exception info (section 104), which the funclets' placement does not come from:
//!   the funclets of a method start exactly at its EH clauses' handler starts and filter starts
//!   (clauses marked duplicated aside).

use std::collections::{BTreeMap, BTreeSet};

use clrmap::r2r::frames::FrameIndex;
use clrmap::r2r::ReadyToRunImage;
use clrmap::read::Location;
use clrmap::ErrorKind;

use crate::support::runtimes;

/// Section 104: method start RVA → the native offsets where its handler and filter funclets
/// start (CORCOMPILE_EXCEPTION_LOOKUP_TABLE, then CORCOMPILE_EXCEPTION_CLAUSEs of 6 u32s).
fn funclet_offsets_from_eh_info(image: &ReadyToRunImage<'_>) -> BTreeMap<u32, BTreeSet<u32>> {
    let mut out = BTreeMap::new();
    let Some(mut table) = image.section(104).unwrap() else { return out };
    let mut lookup = Vec::new();
    while !table.is_empty() {
        lookup.push((table.u32("MethodStartRVA").unwrap(), table.u32("ExceptionInfoRVA").unwrap()));
    }
    // The last entry is a sentinel whose ExceptionInfoRVA ends the clauses of the one before.
    for w in lookup.windows(2) {
        let ((start, info), (_, next)) = (w[0], w[1]);
        let mut r = image.pe().reader_at(info, next - info).unwrap();
        let set: &mut BTreeSet<u32> = out.entry(start).or_default();
        while !r.is_empty() {
            let flags = r.u32("Flags").unwrap();
            let (_try_start, _try_end) = (r.u32("TryStartPC").unwrap(), r.u32("TryEndPC").unwrap());
            let (handler_start, _handler_end) = (r.u32("HandlerStartPC").unwrap(), r.u32("HandlerEndPC").unwrap());
            let class_or_filter = r.u32("ClassToken/FilterOffset").unwrap();
            // A clause the JIT duplicated (COR_ILEXCEPTION_CLAUSE_DUPLICATED, 0x8) names no
            // funclet of its own.
            if flags & 8 != 0 {
                continue;
            }
            set.insert(handler_start);
            if flags & 1 != 0 {
                set.insert(class_or_filter); // COR_ILEXCEPTION_CLAUSE_FILTER
            }
        }
    }
    out
}

#[test]
#[ignore = "needs .NET"]
fn every_funclet_of_corelib_has_its_method_as_parent() {
    for rt in runtimes("frameprops::every_funclet_of_corelib_has_its_method_as_parent") {
        let bytes = std::fs::read(rt.framework.join("System.Private.CoreLib.dll")).unwrap();
        let image = ReadyToRunImage::parse(&bytes).unwrap();
        let index = FrameIndex::new(&image).unwrap();
        let rfs = image.runtime_functions();
        assert_eq!(index.runtime_functions(), rfs);
        // The chains: an entry RUNTIME_FUNCTION, then the funclets up to the next entry.
        let entries: BTreeSet<usize> = image.entry_points().unwrap().iter().map(|e| e.runtime_function as usize).collect();
        assert!(entries.contains(&0), "{}: code before the first entry point", rt.version);
        let mut chains: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut owner = 0;
        for i in 0..rfs.len() {
            if entries.contains(&i) {
                owner = i;
                chains.insert(i, Vec::new());
            } else {
                chains.get_mut(&owner).unwrap().push(i);
            }
        }
        let (mut funclets, mut methods_with_funclets, mut padding) = (0usize, 0usize, 0usize);
        let eh = funclet_offsets_from_eh_info(&image);
        for (&m, chain) in &chains {
            let main = rfs[m];
            for rva in [main.begin, main.begin + (main.end - main.begin) / 2, main.end - 1] {
                let p = index.frame_props(rva).unwrap();
                assert_eq!((p.code_start, p.code_end, p.parent_start, p.parent_frame_start_rva()), (main.begin, main.end, None, 0), "{} {rva:#x}", rt.version);
                assert_eq!((p.runtime_function, p.method_runtime_function), (m as u32, m as u32));
            }
            let mut starts = BTreeSet::new();
            for &f in chain {
                let fun = rfs[f];
                for rva in [fun.begin, fun.begin + (fun.end - fun.begin) / 2, fun.end - 1] {
                    let p = index.frame_props(rva).unwrap();
                    assert_eq!((p.code_start, p.code_end, p.parent_start), (fun.begin, fun.end, Some(main.begin)), "{} funclet {rva:#x}", rt.version);
                    assert!(p.is_funclet() && p.parent_frame_start_rva() == main.begin);
                    assert_eq!((p.runtime_function, p.method_runtime_function), (f as u32, m as u32));
                }
                starts.insert(fun.begin - main.begin);
                funclets += 1;
            }
            // Independent of the chains: the EH clauses say where the method's funclets start.
            let from_eh = eh.get(&main.begin).cloned().unwrap_or_default();
            assert_eq!(starts, from_eh, "{}: method at {:#x}: funclets vs EH handler/filter starts", rt.version, main.begin);
            methods_with_funclets += usize::from(!chain.is_empty());
        }
        // Padding between functions, and RVAs outside every function, are in no frame.
        let mut outside = vec![0, rfs[0].begin - 1, rfs[rfs.len() - 1].end, u32::MAX];
        for w in rfs.windows(2) {
            if w[0].end < w[1].begin {
                outside.extend([w[0].end, w[1].begin - 1]);
                padding += 1;
            }
        }
        for rva in outside {
            let e = index.frame_props(rva).unwrap_err();
            assert_eq!((e.kind, e.location), (ErrorKind::NotFound, Location::Rva(rva)), "{} {rva:#x}", rt.version);
        }
        // The one-shot form answers the same.
        let last = *chains.iter().rev().find(|(_, c)| !c.is_empty()).unwrap().1.last().unwrap();
        assert_eq!(image.frame_props(rfs[last].begin).unwrap(), index.frame_props(rfs[last].begin).unwrap());
        println!(
            "{}: {} RUNTIME_FUNCTIONs, {} methods, {funclets} funclets in {methods_with_funclets} methods (equal to the EH clauses' handler and filter starts), {padding} gaps",
            rt.version,
            rfs.len(),
            chains.len()
        );
        assert!(funclets > 1_000 && methods_with_funclets > 500, "too few funclets");
    }
}

//! The C ABI's open on a ReadyToRun image whose PDB is hostile: every
//! MethodDebugInformation row names one blob of 200,000 points. Opening loads the image's PDB;
//! the eager line table held every method's points (over 6x10^9) and killed the host process.
//! Each open runs in a child process (this test binary again) under a memory limit of 256 MB plus
//! 4x the input and a time limit, and must succeed within seconds.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::arithmetic_side_effects, unsafe_code)]

use std::ffi::CString;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use clrmap::metadata::{table, Metadata};
use clrmap::pdb::writer::PdbWriter;
use clrmap::pe::PeImage;
use clrmap_capi::*;

mod support;
use support::corelibs;

/// In the child: open the image both ways; both must succeed.
fn open_both(path: &str) {
    let c = CString::new(path).unwrap();
    let mut info = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    assert_eq!(unsafe { clrmap_profiler_info_open(c.as_ptr(), &mut info) }, CLRMAP_S_OK);
    // SAFETY: the object is live; this is its last reference.
    assert_eq!(unsafe { ((*(*info).lpVtbl).Release)(info) }, 0);
    let mut sym = std::ptr::null_mut();
    // SAFETY: as above; no PDB and no symbol paths.
    assert_eq!(unsafe { clrmap_symbolizer_open(c.as_ptr(), std::ptr::null(), std::ptr::null(), 0, &mut sym) }, CLRMAP_S_OK);
    // SAFETY: made by clrmap_symbolizer_open, released once.
    unsafe { clrmap_symbolizer_release(sym) };
}

#[test]
#[ignore = "needs .NET"]
fn opening_an_image_whose_pdb_shares_one_blob_is_bounded() {
    if let Ok(path) = std::env::var("CLRMAP_TEST_HOSTILE_OPEN") {
        return open_both(&path);
    }
    for (i, rel) in corelibs().iter().enumerate() {
        let bytes = std::fs::read(rel).unwrap();
        let cv = PeImage::parse(&bytes).unwrap().codeview().unwrap().unwrap();
        let methods = Metadata::parse(&bytes).unwrap().tables().rows(table::METHOD_DEF);
        let mut w = PdbWriter::new(cv.pdb_id());
        w.method_defs = methods;
        let name = w.document_name("/src/hostile.cs");
        let doc = w.document(name);
        let blob = w.many_points_blob(200_000);
        w.methods_sharing(methods, doc, blob);
        let pdb = w.build();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-hostile-pdb-{i}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("System.Private.CoreLib.dll");
        std::fs::write(&lib, &bytes).unwrap();
        std::fs::write(dir.join(cv.file_name()), &pdb).unwrap();
        let kb = (256 << 20) / 1024 + 4 * (bytes.len() + pdb.len()) as u64 / 1024 + 1;
        let me = std::env::current_exe().unwrap();
        let script = format!("ulimit -v {kb}; exec timeout 60 '{}' --exact opening_an_image_whose_pdb_shares_one_blob_is_bounded --include-ignored --nocapture", me.display());
        let t = Instant::now();
        let o = Command::new("sh").arg("-c").arg(&script).env("CLRMAP_TEST_HOSTILE_OPEN", &lib).output().unwrap();
        let took = t.elapsed();
        assert!(o.status.success(), "{}: {:?} after {took:?}: {}{}", rel.display(), o.status, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(took < Duration::from_secs(20), "{}: {took:?}", rel.display());
        assert!(String::from_utf8_lossy(&o.stdout).contains("test result: ok. 1 passed"), "{}: the child ran no open: {}", rel.display(), String::from_utf8_lossy(&o.stdout));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

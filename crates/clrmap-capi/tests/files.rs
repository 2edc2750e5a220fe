//! The C ABI on files from elsewhere: devices and FIFOs are refused at once with
//! CLRMAP_E_BAD_FILE_TYPE (never read, never a hang), and a torn trace opens with every whole
//! event.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::arithmetic_side_effects, unsafe_code)]

use std::ffi::CString;
use std::path::Path;
use std::time::{Duration, Instant};

use clrmap_capi::*;

fn open_info(path: &Path) -> (HRESULT, *mut ICorProfilerInfo) {
    let c = CString::new(path.to_str().unwrap()).unwrap();
    let mut info = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    let hr = unsafe { clrmap_profiler_info_open(c.as_ptr(), &mut info) };
    (hr, info)
}

#[test]
fn devices_and_fifos_are_refused_without_reading() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-files");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("trace.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let started = Instant::now();
    for path in [Path::new("/dev/zero"), fifo.as_path(), dir.as_path()] {
        let (hr, info) = open_info(path);
        assert_eq!(hr, CLRMAP_E_BAD_FILE_TYPE, "{}", path.display());
        assert!(info.is_null());
        let c = CString::new(path.to_str().unwrap()).unwrap();
        let mut p = std::ptr::null_mut();
        // SAFETY: as above.
        assert_eq!(unsafe { clrmap_symbol_provider_open(c.as_ptr(), &mut p) }, CLRMAP_E_BAD_FILE_TYPE, "{}", path.display());
        let mut s = std::ptr::null_mut();
        // SAFETY: as above; no symbol paths.
        assert_eq!(unsafe { clrmap_symbolizer_open(c.as_ptr(), std::ptr::null(), std::ptr::null(), 0, &mut s) }, CLRMAP_E_BAD_FILE_TYPE);
    }
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(open_info(&dir.join("missing")).0, CLRMAP_E_FILE_NOT_FOUND);
}

#[test]
fn a_torn_trace_opens_with_every_whole_event() {
    let whole = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/frames.nettrace")).unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-torn");
    std::fs::create_dir_all(&dir).unwrap();
    let torn = dir.join("torn.nettrace");
    std::fs::write(&torn, &whole[..whole.len() / 3]).unwrap();
    let (hr, info) = open_info(&torn);
    assert_eq!(hr, CLRMAP_S_OK);
    let mut n = 0u32;
    // SAFETY: a live object; a size query.
    assert_eq!(unsafe { clrmap_profiler_info_function_ids(info, std::ptr::null_mut(), 0, &mut n) }, CLRMAP_S_FALSE);
    assert!(n > 10, "{n} functions kept");
    // SAFETY: the object is live; this is its last reference.
    assert_eq!(unsafe { ((*(*info).lpVtbl).Release)(info) }, 0);
}

//! The C ABI's inlined frames and symbol servers: the same chains as the
//! library's `Symbolizer::symbolize_inlined`, by the two-call buffer protocol, on a real 8.0.4
//! trace with inline trees; and a PDB fetched from a loopback SSQP server (tests/symsrv/server.py)
//! answering as the PDB on disk does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::arithmetic_side_effects, unsafe_code)]

use std::ffi::{CStr, CString};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clrmap::symbolizer::{FrameKind, Options, Symbolizer};
use clrmap_capi::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn text(p: *const std::os::raw::c_char) -> Option<String> {
    // SAFETY: the symbolizer's strings are NUL-terminated and live until it is released.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// A frame's fields as the library gives them: (module, token, method, il, file, line, column).
type Fields = (Option<String>, Option<u32>, Option<String>, Option<u32>, Option<String>, Option<u32>, Option<u32>);

fn c_fields(f: &ClrmapFrame) -> Fields {
    let method = f.flags & CLRMAP_FRAME_METHOD != 0;
    let line = f.flags & CLRMAP_FRAME_LINE != 0;
    let il = f.flags & CLRMAP_FRAME_IL_OFFSET != 0;
    // Token 0 is a dynamic method's: a known body with no token.
    (text(f.module), (method && f.token != 0).then_some(f.token), text(f.method), il.then_some(f.il_offset), text(f.file), line.then_some(f.line), line.then_some(f.column))
}

#[test]
fn inlined_frames_through_the_c_abi_are_the_librarys() {
    let trace = repo().join("tests/fixtures/inlines/attach-8.0.4.nettrace");
    let lib = Symbolizer::open(&trace, Options::default()).unwrap();
    assert!(lib.has_inline_trees());
    let source = CString::new(trace.to_str().unwrap()).unwrap();
    let mut sym = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path, no PDB, no symbol paths, a valid out-pointer.
    assert_eq!(unsafe { clrmap_symbolizer_open_with_servers(source.as_ptr(), std::ptr::null(), std::ptr::null(), 0, std::ptr::null(), &mut sym) }, CLRMAP_S_OK);
    let (mut chains, mut deepest) = (0, 0);
    for body in lib.store().bodies() {
        let start = body.start.unwrap();
        for offset in (0..body.code_size).step_by(3) {
            let address = start + u64::from(offset);
            let (f, inlined) = lib.symbolize_inlined(address, FrameKind::Leaf);
            let mut count = 0u32;
            // First call: how many.
            // SAFETY: the symbolizer is live; no buffer with capacity 0.
            let hr = unsafe { clrmap_symbolizer_symbolize_inlined(sym, address, CLRMAP_FRAME_LEAF, std::ptr::null_mut(), 0, &mut count) };
            assert_eq!((hr, count as usize), (CLRMAP_S_OK, inlined.len() + 1));
            let mut frames = vec![unsafe { std::mem::zeroed::<ClrmapFrame>() }; count as usize];
            // SAFETY: room for `count` frames.
            let hr = unsafe { clrmap_symbolizer_symbolize_inlined(sym, address, CLRMAP_FRAME_LEAF, frames.as_mut_ptr(), count, &mut count) };
            assert_eq!(hr, CLRMAP_S_OK);
            let want: Vec<Fields> = inlined
                .iter()
                .map(|i| (i.at.module.map(str::to_owned), i.at.token, i.at.method.map(str::to_owned), i.at.il_offset, i.at.file.map(str::to_owned), i.at.line, i.at.column))
                .chain(std::iter::once((f.at.module.map(str::to_owned), f.at.token, f.at.method.map(str::to_owned), f.at.il_offset, f.at.file.map(str::to_owned), f.at.line, f.at.column)))
                .collect();
            let got: Vec<Fields> = frames.iter().map(c_fields).collect();
            assert_eq!(got, want, "{address:#x}");
            // Too small a buffer: what fits, and the whole count.
            if count > 1 {
                chains += 1;
                deepest = deepest.max(count);
                let mut one = [unsafe { std::mem::zeroed::<ClrmapFrame>() }];
                let mut n = 0u32;
                // SAFETY: room for one frame.
                assert_eq!(unsafe { clrmap_symbolizer_symbolize_inlined(sym, address, CLRMAP_FRAME_LEAF, one.as_mut_ptr(), 1, &mut n) }, CLRMAP_S_OK);
                assert_eq!((n, c_fields(&one[0])), (count, got[0].clone()));
            }
        }
    }
    assert!(chains > 50 && deepest >= 3, "{chains} addresses with inlined frames, {deepest} frames at most");
    // An address in no body: one frame, S_FALSE; bad arguments.
    let mut count = 0u32;
    let mut one = [unsafe { std::mem::zeroed::<ClrmapFrame>() }];
    // SAFETY: as above.
    unsafe {
        assert_eq!(clrmap_symbolizer_symbolize_inlined(sym, 0x10, CLRMAP_FRAME_LEAF, one.as_mut_ptr(), 1, &mut count), CLRMAP_S_FALSE);
        assert_eq!((count, one[0].flags), (1, 0));
        assert_eq!(clrmap_symbolizer_symbolize_inlined(sym, 0x10, 9, one.as_mut_ptr(), 1, &mut count), CLRMAP_E_INVALIDARG);
        assert_eq!(clrmap_symbolizer_symbolize_inlined(sym, 0x10, CLRMAP_FRAME_LEAF, std::ptr::null_mut(), 1, &mut count), CLRMAP_E_POINTER);
        assert_eq!(clrmap_symbolizer_symbolize_inlined(sym, 0x10, CLRMAP_FRAME_LEAF, one.as_mut_ptr(), 1, std::ptr::null_mut()), CLRMAP_E_POINTER);
        clrmap_symbolizer_release(sym);
    }
}

#[test]
fn a_symbolizer_with_a_symbol_server_answers_as_with_the_pdb_on_disk() {
    // The .NET 8.0.4 trace of the Frames fixture, recorded elsewhere; its PDB only on the server.
    let trace = repo().join("examples/frames.nettrace");
    let pdb = repo().join("tests/fixtures/frames/debug-portable/Frames.pdb");
    let id = clrmap::pdb::PortablePdb::parse(&std::fs::read(&pdb).unwrap()).unwrap().id().0;
    let g = &id[..16];
    let n: String = [g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6]].iter().chain(&g[8..]).map(|b| format!("{b:02x}")).collect();
    let root = std::env::temp_dir().join(format!("clrmap-capi-symsrv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join(format!("frames.pdb/{n}ffffffff"))).unwrap();
    std::fs::copy(&pdb, root.join(format!("frames.pdb/{n}ffffffff/frames.pdb"))).unwrap();
    let mut server = Command::new("python3").arg(repo().join("tests/symsrv/server.py")).arg("--root").arg(&root).stdout(Stdio::piped()).spawn().expect("python3 runs tests/symsrv/server.py");
    let mut port = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut port).unwrap();
    let url = CString::new(format!("http://127.0.0.1:{}", port.trim())).unwrap();
    let cache = CString::new(root.join("cache").to_str().unwrap()).unwrap();
    let urls = [url.as_ptr()];
    let servers = ClrmapSymbolServers { servers: urls.as_ptr(), count: 1, timeout_ms: 5000, cache: cache.as_ptr() };
    let source = CString::new(trace.to_str().unwrap()).unwrap();
    let mut sym = std::ptr::null_mut();
    // SAFETY: NUL-terminated strings, a live ClrmapSymbolServers, a valid out-pointer.
    assert_eq!(unsafe { clrmap_symbolizer_open_with_servers(source.as_ptr(), std::ptr::null(), std::ptr::null(), 0, &servers, &mut sym) }, CLRMAP_S_OK);
    // The oracle: the library with the PDB named on disk.
    let options = Options { symbols: clrmap::locate::SymbolPaths { pdb: Some(pdb.clone()), dirs: Vec::new(), servers: None } };
    let lib = Symbolizer::open(&trace, options).unwrap();
    let mut lines = 0;
    for body in lib.store().bodies().iter().filter(|b| b.module.as_deref() == Some("Frames.dll")) {
        let address = body.start.unwrap() + u64::from(body.code_size / 2);
        let want = lib.symbolize(address, FrameKind::Leaf);
        let mut f = unsafe { std::mem::zeroed::<ClrmapFrame>() };
        // SAFETY: the symbolizer is live; a valid out-pointer.
        assert_eq!(unsafe { clrmap_symbolizer_symbolize(sym, address, CLRMAP_FRAME_LEAF, &mut f) }, CLRMAP_S_OK);
        assert_eq!((text(f.file), (f.flags & CLRMAP_FRAME_LINE != 0).then_some(f.line)), (want.at.file.map(str::to_owned), want.at.line), "{address:#x}");
        lines += usize::from(want.at.line.is_some());
    }
    assert!(lines > 20, "{lines}");
    // SAFETY: made by clrmap_symbolizer_open_with_servers, released once.
    unsafe { clrmap_symbolizer_release(sym) };
    // A NULL server string is E_POINTER; no symbolizer.
    let bad = [std::ptr::null()];
    let servers = ClrmapSymbolServers { servers: bad.as_ptr(), count: 1, timeout_ms: 0, cache: std::ptr::null() };
    let mut none = std::ptr::null_mut();
    // SAFETY: as above.
    assert_eq!(unsafe { clrmap_symbolizer_open_with_servers(source.as_ptr(), std::ptr::null(), std::ptr::null(), 0, &servers, &mut none) }, CLRMAP_E_POINTER);
    assert!(none.is_null());
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&root);
}

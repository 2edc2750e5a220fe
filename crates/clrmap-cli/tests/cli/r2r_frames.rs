//! ReadyToRun frames in a trace are answered by their image's own maps: a trace recorded here of
//! a program that runs framework code (tests/fixtures/cpu/Cpu.dll) gives CoreLib's ReadyToRun
//! methods, at every native offset their maps hold, the method and IL offset that the image
//! itself gives at the same RVA (the image route, which the test suite proves against the
//! runtime's own stack traces), on every runtime installed here.

use std::path::Path;

use clrmap::ilmap::CodeKind;
use clrmap::symbolizer::{FrameKind, Options, Symbolizer};

use super::support::*;

#[test]
#[ignore = "needs .NET"]
fn a_traces_ready_to_run_frames_answer_as_their_image_does() {
    // CoreCLR 3.1 cannot be started suspended for a trace (it has no diagnostic ports): .NET 5+.
    for rt in all_runtimes().into_iter().filter(|rt| rt.channel != "3.1") {
        let host = rt.label();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("r2r-frames-{}", rt.version));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("cpu.nettrace");
        let cpu = repo_root().join("tests/fixtures/cpu/Cpu.dll");
        let o = clrmap(&["trace", "collect", "-o", trace.to_str().unwrap(), "--", rt.dotnet.to_str().unwrap(), cpu.to_str().unwrap(), "1"]);
        assert_eq!(code(&o), Some(0), "{host}: {}", stderr(&o));
        let traced = Symbolizer::open(&trace, Options::default()).unwrap();
        let corelib = rt.corelib();
        let image = Symbolizer::open(&corelib, Options::default()).unwrap();
        let r2r: Vec<_> = traced.store().bodies().iter().filter(|b| b.kind == Some(CodeKind::R2r) && b.module.as_deref() == Some("System.Private.CoreLib.dll")).collect();
        let mapped: Vec<_> = r2r.iter().filter(|b| !b.map.is_empty()).collect();
        assert!(mapped.len() >= 20 && mapped.len() * 10 >= r2r.len() * 9, "{host}: {} of {} ReadyToRun CoreLib bodies have a map", mapped.len(), r2r.len());
        let mut compared = 0;
        for b in mapped {
            let (start, rva) = (b.start.unwrap(), u64::from(b.rva.unwrap()));
            for e in &b.map {
                for off in [e.native_start, e.native_end.saturating_sub(1)] {
                    let t = traced.symbolize(start + u64::from(off), FrameKind::Leaf);
                    let i = image.symbolize(rva + u64::from(off), FrameKind::Leaf);
                    assert_eq!((t.at.token, t.at.il_offset), (i.at.token, i.at.il_offset), "{host}: {:?} at +0x{off:X}", b.name);
                    compared += 1;
                }
            }
        }
        assert!(compared >= 100, "{host}: {compared} offsets compared");
    }
}

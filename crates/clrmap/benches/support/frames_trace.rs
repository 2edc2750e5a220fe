//! A real EventPipe trace of the Frames.dll fixture, recorded at bench time on 8.0.4 the way
//! tests/integration/frames.rs records it: tiering off, the JIT/loader/method keywords at
//! verbose, the fixture copied to its own directory (the trace names the module by that path,
//! and its PDB is found beside it).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// (the trace, the directory holding Frames.dll and Frames.pdb), or a note on stderr and `None`.
pub fn record(name: &str) -> Option<(PathBuf, PathBuf)> {
    let dotnet = crate::dotnet::dotnet80()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/frames/release-portable");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    let trace = dir.join("frames.nettrace");
    let out = Command::new(&dotnet)
        .arg(dir.join("Frames.dll"))
        .env("COMPlus_TieredCompilation", "0")
        .env("DOTNET_TieredCompilation", "0")
        .env("COMPlus_EnableEventPipe", "1")
        .env("COMPlus_EventPipeConfig", "Microsoft-Windows-DotNETRuntime:0x60098:5")
        .env("DOTNET_EventPipeOutputPath", &trace)
        .output()
        .expect("cannot run dotnet");
    assert!(out.status.success(), "8.0.4 Frames.dll failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(trace.is_file(), "no trace written at {}", trace.display());
    Some((trace, dir))
}

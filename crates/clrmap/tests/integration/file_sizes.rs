//! No source file of the workspace's crates grows past a length one can read whole: a file over
//! the limit is split by what its parts do (the way `r2r/debuginfo.rs` keeps its tests beside it).

use std::path::{Path, PathBuf};

use crate::support::rust_files;

/// The most lines a `.rs` file under `crates/*/src` may have.
const MAX_LINES: usize = 800;

/// Every `.rs` file under each crate's `src/`, the crates being the folders of `crates/`.
fn workspace_sources() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    files
}

#[test]
fn no_source_file_is_over_the_limit() {
    let files = workspace_sources();
    // The walk sees every crate: the library's, the CLI's, the C ABI's and the profiler's roots.
    for root in ["clrmap/src/lib.rs", "clrmap-cli/src/main.rs", "clrmap-capi/src/lib.rs", "clrmap-profiler/src/lib.rs"] {
        assert!(files.iter().any(|f| f.ends_with(root)), "{root} not found among {} files", files.len());
    }
    let mut over = Vec::new();
    for file in &files {
        let lines = std::fs::read_to_string(file).unwrap().lines().count();
        if lines > MAX_LINES {
            over.push(format!("{}: {lines} lines", file.display()));
        }
    }
    assert!(over.is_empty(), "files over {MAX_LINES} lines (split them):\n{}", over.join("\n"));
}

//! Attaching to a process that did not start with `DOTNET_RichDebugInfo=1`: it reports no inline
//! trees, and `profile --pid` says so once and carries on.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{clrmap, code, host, repo_root, stderr};

const NOTE: &str = "did not start with DOTNET_RichDebugInfo=1";

#[test]
#[ignore = "needs .NET"]
fn an_attach_without_rich_debug_info_says_so_once() {
    let dotnet = host("8.0");
    for (env, noted) in [(None, true), (Some("1"), false)] {
        let mut cmd = Command::new(&dotnet);
        cmd.arg(repo_root().join("tests/fixtures/perf/Hot.dll")).arg("6").stdout(Stdio::null()).current_dir(repo_root());
        cmd.env_remove("DOTNET_RichDebugInfo").env_remove("COMPlus_RichDebugInfo");
        if let Some(v) = env {
            cmd.env("DOTNET_RichDebugInfo", v);
        }
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(700));
        // The library's own reading of the process's environment.
        assert_eq!(clrmap::diag::rich_debug_info_enabled(child.id()), Some(!noted));
        let out = std::env::temp_dir().join(format!("clrmap-attach-inlines-{}-{noted}.capture", std::process::id()));
        let pid = child.id().to_string();
        let o = clrmap(&["profile", "--pid", &pid, "-o", out.to_str().unwrap(), "--duration", "1s"]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(code(&o), Some(0), "{}", stderr(&o));
        assert_eq!(stderr(&o).matches(NOTE).count(), usize::from(noted), "{}", stderr(&o));
        // The capture is whole either way.
        let o = clrmap(&["il", "dump", out.to_str().unwrap(), "--module", "Hot.dll"]);
        assert_eq!(code(&o), Some(0), "{}", stderr(&o));
        let _ = std::fs::remove_file(&out);
    }
}

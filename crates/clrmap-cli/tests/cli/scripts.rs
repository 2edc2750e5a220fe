//! The install scripts, as a user without root meets them.

use std::os::unix::fs::symlink;
use std::process::Command;

use super::support::{host, repo_root, stderr, stdout};

/// `scripts/install-dotnet.sh` run by a user who is not root and has no mcs, over runtimes that
/// are already installed: it says mcs is missing and how to get it, and succeeds (it used to exit
/// 1, failing `scripts/test.sh` before anything ran).
#[test]
#[ignore = "needs .NET"]
fn install_dotnet_succeeds_for_a_user_without_mcs_or_root() {
    host("8.0");
    host("3.1");
    // A PATH with only what the script needs when the runtimes are there: no mcs, no sudo.
    let bin = std::env::temp_dir().join(format!("clrmap-nomcs-{}", std::process::id()));
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["mkdir", "id", "dirname"] {
        let real = ["/usr/bin", "/bin"].iter().map(|d| std::path::Path::new(d).join(tool)).find(|p| p.exists()).unwrap();
        let _ = symlink(real, bin.join(tool));
    }
    let home = std::env::var("CLRMAP_DOTNET_HOME").map(std::path::PathBuf::from).unwrap_or_else(|_| repo_root().join(".dotnet"));
    let mut cmd = Command::new("/bin/bash");
    cmd.arg(repo_root().join("scripts/install-dotnet.sh")).env_clear().env("PATH", &bin).env("CLRMAP_DOTNET_HOME", &home);
    // As root, drop to nobody (setpriv, util-linux); otherwise this user already is not root.
    let is_root = Command::new("id").arg("-u").output().map(|o| stdout(&o).trim() == "0").unwrap_or(false);
    let o = if is_root {
        let mut c = Command::new("/usr/bin/setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/bash"]).arg(repo_root().join("scripts/install-dotnet.sh"));
        c.env_clear().env("PATH", &bin).env("CLRMAP_DOTNET_HOME", &home).output().unwrap()
    } else {
        cmd.output().unwrap()
    };
    let _ = std::fs::remove_dir_all(&bin);
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), stderr(&o));
    assert!(stderr(&o).contains("apt-get install mono-mcs"), "{}", stderr(&o));
    assert!(stdout(&o).contains("mcs:        missing"), "{}", stdout(&o));
    assert!(stdout(&o).contains("dotnet 8.0."), "{}", stdout(&o));
}

//! Finding a process's diagnostics socket: `dotnet-diagnostic-{pid}-{key}-socket` in the process's
//! `$TMPDIR` (else `/tmp`), where the key is the process start time in jiffies since boot (field 22
//! of `/proc/{pid}/stat`). A process in a container has its socket under `/proc/{pid}/root/tmp`,
//! named with its pid inside the container (the last `NSpid` of `/proc/{pid}/status`).

use std::path::{Path, PathBuf};

use super::{DiagError, DiagErrorKind};

const PREFIX: &str = "dotnet-diagnostic-";
const SUFFIX: &str = "-socket";
/// Files read from /proc are small; more than this is refused.
const MAX_PROC_FILE: u64 = 1 << 20;

fn read_proc(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    std::fs::File::open(path)?.take(MAX_PROC_FILE).read_to_end(&mut out)?;
    Ok(out)
}

/// The process start time (jiffies since boot): the disambiguation key of its socket name.
pub fn start_key(pid: u32) -> Result<u64, DiagError> {
    let stat = read_proc(&PathBuf::from(format!("/proc/{pid}/stat"))).map_err(|e| proc_error(pid, &e))?;
    parse_start_key(&String::from_utf8_lossy(&stat)).ok_or_else(|| DiagError::new(DiagErrorKind::Io, format!("/proc/{pid}/stat has no start time")))
}

/// Field 22 of `/proc/{pid}/stat`. The command name (field 2) may hold spaces and parentheses, so
/// fields are counted after its last `)`.
pub fn parse_start_key(stat: &str) -> Option<u64> {
    let after = stat.rsplit_once(')')?.1;
    // Fields 3.. follow; field 22 is the 20th of them.
    after.split_whitespace().nth(19)?.parse().ok()
}

fn proc_error(pid: u32, e: &std::io::Error) -> DiagError {
    match e.kind() {
        std::io::ErrorKind::NotFound => DiagError::new(DiagErrorKind::NoSuchProcess, format!("no process {pid}")),
        std::io::ErrorKind::PermissionDenied => DiagError::new(DiagErrorKind::PermissionDenied, format!("cannot read /proc/{pid}: {e}")),
        _ => DiagError::new(DiagErrorKind::Io, format!("cannot read /proc/{pid}: {e}")),
    }
}

/// Whether process `pid` has exited: it has no `/proc` entry, or it is a zombie (exited, not yet
/// reaped by its parent).
pub fn exited(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    matches!(state, None | Some("Z" | "X"))
}

/// The process's command line from `/proc/{pid}/cmdline` (arguments joined by spaces).
pub fn proc_cmdline(pid: u32) -> Option<String> {
    let raw = read_proc(&PathBuf::from(format!("/proc/{pid}/cmdline"))).ok()?;
    let parts: Vec<String> = raw.split(|&b| b == 0).filter(|p| !p.is_empty()).map(|p| String::from_utf8_lossy(p).into_owned()).collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// The short command name (`/proc/{pid}/comm`).
pub fn proc_comm(pid: u32) -> Option<String> {
    let raw = read_proc(&PathBuf::from(format!("/proc/{pid}/comm"))).ok()?;
    Some(String::from_utf8_lossy(&raw).trim_end().to_owned())
}

/// The runtime version from the path of the `libcoreclr.so` the process mapped
/// (`.../Microsoft.NETCore.App/8.0.4/libcoreclr.so`), when the maps are readable.
pub fn mapped_runtime_version(pid: u32) -> Option<String> {
    let maps = read_proc(&PathBuf::from(format!("/proc/{pid}/maps"))).ok()?;
    let maps = String::from_utf8_lossy(&maps);
    maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.ends_with("/libcoreclr.so")).and_then(|p| {
        let dir = Path::new(p).parent()?;
        let version = dir.file_name()?.to_string_lossy().into_owned();
        version.chars().next().is_some_and(|c| c.is_ascii_digit()).then_some(version)
    })
}

/// `TMPDIR` from the process's own environment, when readable.
fn proc_tmpdir(pid: u32) -> Option<PathBuf> {
    let env = read_proc(&PathBuf::from(format!("/proc/{pid}/environ"))).ok()?;
    env.split(|&b| b == 0).find_map(|kv| kv.strip_prefix(b"TMPDIR=")).filter(|v| !v.is_empty()).map(|v| PathBuf::from(String::from_utf8_lossy(v).into_owned()))
}

/// Did the process start with the JIT's rich debug info on (`DOTNET_RichDebugInfo=1`, or
/// `COMPlus_RichDebugInfo=1`)? Read from its own environment (`/proc/PID/environ`, as set at
/// start); `None` when that cannot be read. A process that started without it never reports
/// inline trees, so an attach can say so once (docs/rich-debug-info.md).
pub fn rich_debug_info_enabled(pid: u32) -> Option<bool> {
    let env = read_proc(&PathBuf::from(format!("/proc/{pid}/environ"))).ok()?;
    // The runtime reads DOTNET_ first, then COMPlus_ (CLRConfig); the value is hex, so "1" and "01".
    let value = |prefix: &[u8]| env.split(|&b| b == 0).find_map(|kv| kv.strip_prefix(prefix)).map(|v| String::from_utf8_lossy(v).into_owned());
    let set = value(b"DOTNET_RichDebugInfo=").or_else(|| value(b"COMPlus_RichDebugInfo="));
    Some(set.is_some_and(|v| u32::from_str_radix(v.trim(), 16).is_ok_and(|n| n != 0)))
}

/// The pid inside the process's own namespace (the last `NSpid`), if it differs.
fn namespaced_pid(pid: u32) -> Option<u32> {
    let status = read_proc(&PathBuf::from(format!("/proc/{pid}/status"))).ok()?;
    let status = String::from_utf8_lossy(&status);
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok().filter(|&p| p != pid)
}

/// Our own temporary directory: `$TMPDIR`, else `/tmp`.
pub fn tmp_dir() -> PathBuf {
    std::env::var_os("TMPDIR").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// Where a process's diagnostics socket is: its exact name in the process's `$TMPDIR`, ours,
/// `/tmp`, and the process's own root's `/tmp` (containers).
///
/// Errors: `no_such_process` when there is no such pid; `not_dotnet` when it has no socket (not a
/// .NET process, or diagnostics disabled with `DOTNET_EnableDiagnostics=0`).
pub fn socket_path(pid: u32) -> Result<PathBuf, DiagError> {
    let key = start_key(pid)?;
    let mut dirs: Vec<PathBuf> = Vec::new();
    dirs.extend(proc_tmpdir(pid));
    dirs.push(tmp_dir());
    dirs.push(PathBuf::from("/tmp"));
    let mut names = vec![format!("{PREFIX}{pid}-{key}{SUFFIX}")];
    let root_tmp = PathBuf::from(format!("/proc/{pid}/root/tmp"));
    for dir in &dirs {
        for name in &names {
            let p = dir.join(name);
            if is_socket(&p) {
                return Ok(p);
            }
        }
    }
    // In a container: the socket carries the pid the process has there.
    if let Some(ns) = namespaced_pid(pid) {
        names.push(format!("{PREFIX}{ns}-{key}{SUFFIX}"));
    }
    for name in &names {
        let p = root_tmp.join(name);
        if is_socket(&p) {
            return Ok(p);
        }
    }
    let what = proc_comm(pid).map(|c| format!(" ({c})")).unwrap_or_default();
    Err(DiagError::new(
        DiagErrorKind::NotDotnet,
        format!("process {pid}{what} has no .NET diagnostics socket: it is not a .NET (Core 3.0+) process, or its diagnostics are disabled (DOTNET_EnableDiagnostics=0)"),
    ))
}

fn is_socket(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

/// A `dotnet-diagnostic-{pid}-{key}-socket` name's pid and key.
pub fn parse_socket_name(name: &str) -> Option<(u32, u64)> {
    let mid = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let (pid, key) = mid.split_once('-')?;
    Some((pid.parse().ok()?, key.parse().ok()?))
}

/// Every live process with a diagnostics socket in our temporary directory or `/tmp`, sorted by
/// pid: a socket whose process has gone, or whose pid now names a process started at another time,
/// is left out.
pub fn list_sockets() -> Vec<(u32, PathBuf)> {
    let mut dirs = vec![tmp_dir()];
    if dirs.first().is_none_or(|d| d != Path::new("/tmp")) {
        dirs.push(PathBuf::from("/tmp"));
    }
    let mut found: std::collections::BTreeMap<u32, PathBuf> = std::collections::BTreeMap::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some((pid, key)) = parse_socket_name(&name.to_string_lossy()) else { continue };
            if start_key(pid).ok() == Some(key) && is_socket(&e.path()) {
                found.entry(pid).or_insert_with(|| e.path());
            }
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_key_counts_fields_after_the_last_parenthesis() {
        let stat = "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 987654 1000 200 18446744073709551615";
        assert_eq!(parse_start_key(stat), Some(987_654));
        assert_eq!(parse_start_key("1 (x) S 1"), None);
        assert_eq!(parse_socket_name("dotnet-diagnostic-42-987654-socket"), Some((42, 987_654)));
        assert_eq!(parse_socket_name("dotnet-diagnostic-42-socket"), None);
    }

    #[test]
    fn our_own_process_has_a_key_and_a_missing_pid_is_no_such_process() {
        assert!(start_key(std::process::id()).is_ok());
        // Pids are below 2^22 on Linux.
        assert_eq!(socket_path(u32::MAX - 1).unwrap_err().kind, DiagErrorKind::NoSuchProcess);
        assert_eq!(socket_path(std::process::id()).unwrap_err().kind, DiagErrorKind::NotDotnet);
    }
}

//! The runtime's major version, the one fact the frame rule and the inline trees branch on: read
//! once from what a trace or a capture records, and branched on everywhere else.

/// The major version of a .NET runtime from what it reports (`8.0.4`, `v4.0.30319`) and, where
/// known, a path inside its shared framework directory
/// (`.../Microsoft.NETCore.App/3.1.23/libcoreclr.so`). CoreCLR before .NET 5 reports the .NET
/// Framework-compatible 4.0.30319: the directory then tells 3.1 from 2.x, and without one it is
/// taken as 3 (a runtime before .NET 5, which is what the frame rule depends on).
pub fn runtime_major(reported: &str, path: Option<&str>) -> Option<u16> {
    let major = |v: &str| v.trim_start_matches('v').split('.').next().and_then(|m| m.parse::<u16>().ok());
    let from_path = path.and_then(|p| {
        let mut parts = p.rsplit(['/', '\\']);
        let _file = parts.next();
        let version = parts.next()?;
        (parts.next()? == "Microsoft.NETCore.App").then(|| major(version)).flatten()
    });
    match major(reported) {
        Some(4) => Some(from_path.unwrap_or(3)),
        Some(m) => Some(m),
        None => from_path,
    }
}

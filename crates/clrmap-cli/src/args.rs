//! Arguments and argument parsers that several commands share: the frame options of
//! `symbolize` and `il at`, numbers, durations and the `--method` filter. One home below the
//! commands, so no command module imports another.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clrmap::locate::SymbolPaths;
use clrmap::r2r::DebugInfoLayout;
use clrmap::symbolizer::{FrameKind, OpenError, Options, Symbolizer};
use clrmap::ErrorKind;

use crate::output::CliError;

/// Where PDBs come from, and how addresses are read: shared by `symbolize` and `il at`.
#[derive(Debug, Args)]
pub struct FrameArgs {
    /// The addresses are return addresses (frames below the leaf): look up the call before each,
    /// as the runtime does for stack traces.
    #[arg(long)]
    pub return_address: bool,
    /// With --return-address: use CoreCLR 3.1's rule, which finds the IL offset at the return
    /// address itself (the instruction after the call), whatever the source says. Without it, the
    /// rule follows the runtime version the trace or capture recorded (3.1's rule for a runtime
    /// before .NET 5); a source that records none (an image, an older capture outside a shared
    /// framework directory) gets the rule of .NET 5 and later.
    #[arg(long, requires = "return_address")]
    pub clr31: bool,
    /// A portable PDB to use (it must match its assembly's CodeView id, or this fails with
    /// pdb_mismatch).
    #[arg(long)]
    pub pdb: Option<PathBuf>,
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// A running .NET process instead of a file: a rundown snapshot of every method it has
    /// jitted so far, taken through its diagnostics port. Addresses are absolute.
    #[arg(long)]
    pub pid: Option<u32>,
    /// With --pid: how long the whole snapshot may take, connect and rundown included (`10s`,
    /// `500ms`, `2m`; default 10s); past it the command fails with a timeout (status 8).
    #[arg(long, requires = "pid", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Read addresses without 0x as hex (`7f3c5fa31f93`), as `perf script` and addr2line print
    /// them. Without it, digits alone are decimal and hex needs 0x.
    #[arg(long)]
    pub hex: bool,
    #[command(flatten)]
    pub layout: LayoutArgs,
}

/// `--assume-layout MAJOR`: for every command that reads ReadyToRun images.
#[derive(Clone, Copy, Debug, Default, Args)]
pub struct LayoutArgs {
    /// Read a ReadyToRun image whose major is newer than clrmap knows (unsupported_version) as
    /// if its debug info were laid out as this major's, e.g. `26` (.NET 11). A try, not a
    /// promise: the maps may be wrong if the layout changed.
    #[arg(long = "assume-layout", value_name = "MAJOR", value_parser = parse_layout)]
    pub assume_layout: Option<DebugInfoLayout>,
}

/// A major whose debug info layout clrmap knows (3 to the newest proven).
fn parse_layout(s: &str) -> Result<DebugInfoLayout, String> {
    DebugInfoLayout::parse(s).ok_or_else(|| format!("a ReadyToRun major from 3 to {} (clrmap knows their layouts)", clrmap::r2r::NEWEST_PROVEN_MAJOR))
}

/// Where PDBs (and assemblies) are looked for: `--symbol-path` directories and the symbol
/// servers with their cache. Every command that reads PDBs flattens it; a command whose
/// directories mean more than this says so with `mut_arg` on its own `symbol_path`.
#[derive(Clone, Debug, Default, Args)]
pub struct SymbolArgs {
    /// A directory to search for PDBs, flat or in the symbol-server layout (repeatable).
    #[arg(long = "symbol-path", value_name = "DIR")]
    pub symbol_path: Vec<PathBuf>,
    /// Symbol servers and their cache.
    #[command(flatten)]
    pub servers: ServerArgs,
}

impl SymbolArgs {
    /// The library's symbol paths from the flags (and, for servers, the environment), with the
    /// PDB the user named, if any.
    pub fn paths(&self, pdb: Option<PathBuf>) -> SymbolPaths {
        SymbolPaths { pdb, dirs: self.symbol_path.clone(), servers: self.servers.servers() }
    }

    /// The service's symbol paths: a server's misses are forgotten after `forget_after`, and with
    /// no server to fill it, a cache folder (SSQP layout) is still read, as one more symbol path,
    /// so replicas can share one filled elsewhere.
    pub fn service_paths(&self, forget_after: Duration) -> SymbolPaths {
        let servers = self.servers.config().map(|mut c| {
            c.forget_after = forget_after;
            std::sync::Arc::new(clrmap::symsrv::SymbolServers::new(c))
        });
        let mut dirs = self.symbol_path.clone();
        if let (None, Some(cache)) = (&servers, &self.servers.cache) {
            dirs.push(cache.clone());
        }
        SymbolPaths { pdb: None, dirs, servers }
    }
}

/// SSQP symbol servers (`--symbol-server`, or `CLRMAP_SYMBOL_SERVER`) and the cache their files
/// go to: for every command that reads PDBs.
#[derive(Clone, Debug, Default, Args)]
pub struct ServerArgs {
    /// A symbol server speaking SSQP (`https://msdl.microsoft.com/download/symbols` holds the
    /// framework's PDBs), asked for a PDB found nowhere on disk (repeatable, asked in order).
    /// Without it, the servers in CLRMAP_SYMBOL_SERVER (URLs separated by `;`).
    #[arg(long = "symbol-server", value_name = "URL")]
    pub symbol_server: Vec<String>,
    /// Where fetched files are kept, in the symbol-server layout (so it can be served, or given
    /// as a --symbol-path): default $XDG_CACHE_HOME/clrmap/symbols, else ~/.cache/clrmap/symbols.
    /// A cached file is used without asking any server.
    #[arg(long = "cache", value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// How long one exchange with a symbol server may take (default 30s). A server that does not
    /// answer in time, or cannot be reached, is not asked again in the run.
    #[arg(long = "symbol-timeout", value_parser = parse_duration, value_name = "DURATION")]
    pub symbol_timeout: Option<Duration>,
}

impl ServerArgs {
    /// The servers the flags (or the environment) ask for; `None` when there are none.
    pub fn servers(&self) -> Option<std::sync::Arc<clrmap::symsrv::SymbolServers>> {
        self.config().map(|config| std::sync::Arc::new(clrmap::symsrv::SymbolServers::new(config)))
    }

    /// The servers' configuration from the flags (or the environment); `None` when there are none.
    pub fn config(&self) -> Option<clrmap::symsrv::Config> {
        let mut urls = self.symbol_server.clone();
        if urls.is_empty() {
            if let Some(env) = std::env::var_os("CLRMAP_SYMBOL_SERVER") {
                urls = env.to_string_lossy().split(';').map(str::trim).filter(|u| !u.is_empty()).map(str::to_owned).collect();
            }
        }
        if urls.is_empty() {
            return None;
        }
        let mut config = clrmap::symsrv::Config::new(urls);
        if let Some(dir) = &self.cache {
            config.cache = dir.clone();
        }
        if let Some(t) = self.symbol_timeout {
            config.timeout = t;
        }
        Some(config)
    }
}

impl FrameArgs {
    /// The symbol options the flags ask for.
    pub fn options(&self) -> Options {
        Options { symbols: self.symbols.paths(self.pdb.clone()) }
    }

    /// The frame kind the flags ask for, for addresses of `sym`'s source: with
    /// `--return-address`, 3.1's rule where the source recorded a runtime before .NET 5, or where
    /// `--clr31` asks for it.
    pub fn kind(&self, sym: &Symbolizer) -> FrameKind {
        FrameKind::from_return_address(self.return_address, sym.runtime_major()).with_clr31(self.clr31)
    }

    /// Open a source (or, with `--pid`, a running process) with these symbol options.
    pub fn open_or_pid(&self, source: Option<&std::path::Path>) -> Result<Symbolizer, CliError> {
        match (self.pid, source) {
            (Some(pid), _) => crate::open::symbolizer_for_pid(pid, self.timeout, self.options()),
            (None, Some(source)) => self.open(source),
            (None, None) => Err(CliError::Usage("give a SOURCE file or --pid".into())),
        }
    }

    /// Open a source with these symbol options.
    pub fn open(&self, source: &std::path::Path) -> Result<Symbolizer, CliError> {
        let sym = Symbolizer::open_assuming(source, self.options(), self.layout.assume_layout).map_err(|e| open_failed(source, e))?;
        crate::open::warn(source, sym.warnings());
        Ok(sym)
    }
}

/// A source that did not open, as an error; an IL-only assembly (no ManagedNativeHeader), often
/// a newcomer's first try, with a note on what to give instead.
pub fn open_failed(source: &std::path::Path, e: OpenError) -> CliError {
    match e {
        OpenError::Input { error, .. } if error.kind == ErrorKind::BadReadyToRun && error.offset() == Some(0) => CliError::Noted { error, note: il_only_note(source) },
        e => crate::open::open_error(e),
    }
}

/// What to do with an IL-only assembly (one with no ReadyToRun code).
fn il_only_note(source: &std::path::Path) -> String {
    let name = source.file_name().map_or_else(|| source.display().to_string(), |n| n.to_string_lossy().into_owned());
    let name = crate::output::Text(&name);
    format!(
        "note: {name} has no ReadyToRun code (an IL-only assembly): the runtime compiles its methods while the program runs, \
         so their code, addresses and maps exist only in that process. Read them from the running process with \
         --pid PID in place of the file, or from a recording of a run given in place of the file: a capture \
         (`clrmap profile -o app.capture -- dotnet app.dll`) or a trace (`clrmap trace collect --pid PID -o app.nettrace`). \
         Only a ReadyToRun image (precompiled, like the runtime's System.*.dll) carries its code in the file; its \
         addresses are RVAs."
    )
}

/// `0x`-prefixed hex or decimal.
pub fn parse_u32(s: &str) -> Result<u32, String> {
    let v = number(s, false).map_err(|why| format!("not a 32-bit number: {s} ({why})"))?;
    u32::try_from(v).map_err(|_| format!("not a 32-bit number: {s} (more than 32 bits)"))
}

/// An address as `symbolize` and `il at` read it: `0x`-prefixed hex, or with `hex` bare hex
/// (as `perf script` and addr2line print addresses), else decimal. The error says why, in a few
/// words, and what to give instead; the caller names the input.
pub fn parse_address(s: &str, hex: bool) -> Result<u64, String> {
    number(s, hex)
}

/// A number: `0x` and hex digits, or (with `bare_hex`) hex digits alone, or decimal digits. Only
/// digits: no sign, no space, no `_` (Rust's own parsers take a leading `+`).
fn number(s: &str, bare_hex: bool) -> Result<u64, String> {
    let hex_digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_hexdigit());
    let too_big = || "more than 64 bits".to_owned();
    if s.is_empty() {
        return Err("empty".into());
    }
    if s.starts_with(['+', '-']) {
        return Err("a sign is not part of a number".into());
    }
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if !hex_digits(h) {
            return Err("0x must be followed by hex digits only".into());
        }
        return u64::from_str_radix(h, 16).map_err(|_| too_big());
    }
    if bare_hex {
        if !hex_digits(s) {
            return Err("not hex digits".into());
        }
        return u64::from_str_radix(s, 16).map_err(|_| too_big());
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|_| too_big());
    }
    if hex_digits(s) {
        return Err("hex needs 0x, or --hex to read bare hex (without it, digits alone are decimal)".into());
    }
    Err("not hex with 0x, nor decimal".into())
}

/// `10`, `10s`, `500ms`, `2m`: a duration (plain numbers are seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let v: f64 = num.parse().map_err(|_| format!("not a duration: {s} (say 30s, 500ms or 2m)"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(format!("not a duration unit: {unit} (ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("not a duration: {s}"))
}

/// Does a method's name or token match the user's filter?
pub fn name_matches(token: u32, name: Option<&str>, filter: &str) -> bool {
    match parse_u32(filter) {
        Ok(t) => token == t,
        // `Type::Method` or `Method` matches at a `.` or `::` boundary.
        Err(_) => name.is_some_and(|n| n == filter || n.strip_suffix(filter).is_some_and(|head| head.ends_with('.') || head.ends_with("::"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("2y").is_err() && parse_duration("x").is_err() && parse_duration("-1s").is_err());
    }

    #[test]
    fn numbers_are_digits_only() {
        assert_eq!(parse_address("0x7F8a", false), Ok(0x7f8a));
        assert_eq!(parse_address("4096", false), Ok(4096));
        assert_eq!(parse_address("4096", true), Ok(0x4096));
        assert_eq!(parse_address("0x4096", true), Ok(0x4096));
        assert_eq!(parse_address("7f3c5fa31f93", true), Ok(0x7f3c_5fa3_1f93));
        assert_eq!(parse_address("0xFFFFFFFFFFFFFFFF", false), Ok(u64::MAX));
        for bad in ["", "+5", "0x+7F8", "-1", "0x", "0x-1", "7f3c", "1_000", " 5", "0x1 ", "0x10000000000000000", "18446744073709551616", "0x１"] {
            assert!(parse_address(bad, false).is_err(), "{bad:?}");
        }
        for bad in ["+7f", "g", "0x+7f", "7f 3c"] {
            assert!(parse_address(bad, true).is_err(), "{bad:?}");
        }
        assert!(parse_address("7f3c", false).unwrap_err().contains("--hex"));
        assert!(parse_u32("+5").is_err() && parse_u32("0x100000000").is_err());
        assert_eq!(parse_u32("0x06000008"), Ok(0x0600_0008));
    }
}

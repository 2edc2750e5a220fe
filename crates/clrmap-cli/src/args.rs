//! Arguments and argument parsers that several commands share: the frame options of
//! `symbolize` and `il at`, numbers, durations and the `--method` filter. One home below the
//! commands, so no command module imports another.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clrmap::pdb::locate::SymbolPaths;
use clrmap::symbolizer::{FrameKind, Options, Symbolizer};

use crate::output::CliError;

/// Where PDBs come from, and how addresses are read: shared by `symbolize` and `il at`.
#[derive(Debug, Args)]
pub struct FrameArgs {
    /// The addresses are return addresses (frames below the leaf): look up the call before each,
    /// as the runtime does for stack traces.
    #[arg(long)]
    pub return_address: bool,
    /// With --return-address: CoreCLR 3.1's rule, which finds the IL offset at the return
    /// address itself (the instruction after the call).
    #[arg(long, requires = "return_address")]
    pub clr31: bool,
    /// A portable PDB to use (it must match its assembly's CodeView id, or this fails with
    /// pdb_mismatch).
    #[arg(long)]
    pub pdb: Option<PathBuf>,
    /// A directory to search for PDBs, flat or in the symbol-server layout (repeatable).
    #[arg(long = "symbol-path")]
    pub symbol_path: Vec<PathBuf>,
    /// A running .NET process instead of a file: a rundown snapshot of every method it has
    /// jitted so far, taken through its diagnostics port. Addresses are absolute.
    #[arg(long)]
    pub pid: Option<u32>,
}

impl FrameArgs {
    /// The symbol options the flags ask for.
    pub fn options(&self) -> Options {
        Options { symbols: SymbolPaths { pdb: self.pdb.clone(), dirs: self.symbol_path.clone() } }
    }

    /// The frame kind the flags ask for.
    pub fn kind(&self) -> FrameKind {
        match (self.return_address, self.clr31) {
            (false, _) => FrameKind::Leaf,
            (true, false) => FrameKind::ReturnAddress,
            (true, true) => FrameKind::ReturnAddressAsIs,
        }
    }

    /// Open a source (or, with `--pid`, a running process) with these symbol options.
    pub fn open_or_pid(&self, source: Option<&std::path::Path>) -> Result<Symbolizer, CliError> {
        match (self.pid, source) {
            (Some(pid), _) => crate::open::symbolizer_for_pid(pid, self),
            (None, Some(source)) => self.open(source),
            (None, None) => Err(CliError::Usage("give a SOURCE file or --pid".into())),
        }
    }

    /// Open a source with these symbol options.
    pub fn open(&self, source: &std::path::Path) -> Result<Symbolizer, CliError> {
        let sym = Symbolizer::open(source, self.options()).map_err(crate::open::open_error)?;
        crate::open::warn(source, sym.warnings());
        Ok(sym)
    }
}

/// `0x`-prefixed hex or decimal.
pub fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("not a 32-bit number: {s} ({e})"))
}

/// `0x`-prefixed hex or decimal, 64 bits.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("not a 64-bit number: {s} ({e})"))
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
}

//! `clrmap symbolize`: addresses to method, IL offset and source line, in llvm-symbolizer's
//! layout or as JSON lines (contract §5).

use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use clrmap::pdb::locate::SymbolPaths;
use clrmap::symbolizer::{Frame, FrameKind, OpenError, Options, Symbolizer};

use crate::cmd::il::parse_u64;
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
    /// jitted so far, taken through its diagnostics port (docs/attach.md). Addresses are absolute.
    #[arg(long)]
    pub pid: Option<u32>,
}

impl FrameArgs {
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
            (Some(pid), _) => crate::cmd::diag::symbolizer_for_pid(pid, self),
            (None, Some(source)) => self.open(source),
            (None, None) => Err(CliError::Usage("give a SOURCE file or --pid".into())),
        }
    }

    /// Open a source with these symbol options.
    pub fn open(&self, source: &std::path::Path) -> Result<Symbolizer, CliError> {
        let options = Options { symbols: SymbolPaths { pdb: self.pdb.clone(), dirs: self.symbol_path.clone() } };
        let sym = Symbolizer::open(source, options).map_err(open_error)?;
        crate::cmd::il::warn(source, sym.warnings());
        Ok(sym)
    }
}

/// An open error as the CLI reports it: a kind and location for bad input, a message otherwise.
pub fn open_error(e: OpenError) -> CliError {
    match e {
        OpenError::Input { error, .. } => CliError::input(error),
        e @ OpenError::Io { .. } => CliError::Kinded { kind: "io", message: e.to_string() },
        e @ OpenError::Unrecognized { .. } => CliError::Kinded { kind: "unrecognized_source", message: e.to_string() },
    }
}

/// `clrmap symbolize SOURCE [ADDRESS...]`
#[derive(Debug, Args)]
pub struct SymbolizeArgs {
    /// A ReadyToRun image (addresses are RVAs), a .nettrace or a capture (absolute addresses).
    /// Not given with --pid.
    #[arg(required_unless_present = "pid")]
    pub source: Option<PathBuf>,
    /// Addresses, hex with 0x or decimal. Without any, one per line is read from stdin.
    pub addresses: Vec<String>,
    #[command(flatten)]
    pub frame: FrameArgs,
    /// One JSON object per line (contract §5) instead of llvm-symbolizer's layout.
    #[arg(long)]
    pub json: bool,
}

/// Write one frame: llvm-symbolizer's layout (function, `file:line:column`, blank line) or a JSON
/// line.
pub fn write_frame(f: &Frame<'_>, json: bool, out: &mut dyn Write) -> std::io::Result<()> {
    if json {
        serde_json::to_writer(&mut *out, f).map_err(crate::output::json_io)?;
        return out.write_all(b"\n");
    }
    writeln!(out, "{}", f.method.unwrap_or("??"))?;
    match (f.file, f.line) {
        (Some(file), Some(line)) => writeln!(out, "{file}:{line}:{}\n", f.column.unwrap_or(0)),
        _ => out.write_all(b"??:0:0\n\n"),
    }
}

/// Run `symbolize`. An input that is not an address is answered as an unknown address, as
/// llvm-symbolizer does since LLVM 18.
pub fn run(args: SymbolizeArgs, out: &mut dyn Write) -> Result<(), CliError> {
    // With --pid there is no SOURCE: what clap took for one is the first address.
    let mut addresses = args.addresses.clone();
    let source = match (args.frame.pid, &args.source) {
        (Some(_), Some(first)) => {
            addresses.insert(0, first.to_string_lossy().into_owned());
            None
        }
        (_, source) => source.clone(),
    };
    let sym = args.frame.open_or_pid(source.as_deref())?;
    let kind = args.frame.kind();
    let answer = |text: &str, out: &mut dyn Write| -> std::io::Result<()> {
        let f = match parse_u64(text.trim()) {
            Ok(a) => sym.symbolize(a, kind),
            Err(_) => Frame::default(),
        };
        write_frame(&f, args.json, out)
    };
    if !addresses.is_empty() {
        for a in &addresses {
            answer(a, out)?;
        }
        return Ok(());
    }
    let stdin = std::io::stdin();
    let mut input = std::io::BufReader::with_capacity(1 << 16, stdin.lock());
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if !line.trim().is_empty() {
            answer(&line, out)?;
        }
        // A tool that drives us as it drives llvm-symbolizer writes one address and waits for
        // the answer: flush whenever no more input is already waiting, and only then, so a
        // stream of a million addresses costs a few writes, not a million.
        if input.buffer().is_empty() {
            out.flush()?;
        }
    }
}

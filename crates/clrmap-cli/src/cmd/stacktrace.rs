//! `clrmap stacktrace`: printed exceptions and stack traces in, the same text out, with each
//! `in MODULE:token 0x..+0x..` frame whose PDB is found turned into `in FILE:line N`
//! (docs/output.md#printed-stack-traces, docs/stacktrace.md).

use std::io::{BufReader, Write};
use std::path::PathBuf;

use clap::Args;

use clrmap::stacktrace::{Notice, Options, Rewriter};

use crate::output::{CliError, Text};

/// `clrmap stacktrace [FILE]`
#[derive(Debug, Args)]
#[command(mut_arg("symbol_path", |a| a.help(SYMBOL_PATH_HELP)))]
pub struct StacktraceArgs {
    /// The text to read: an exception or stack trace as .NET prints it, alone or inside a log.
    /// Without it, stdin is read (and each line is written as soon as it is complete).
    pub file: Option<PathBuf>,
    /// Where PDBs are looked for (`--symbol-path`, whose help is [`SYMBOL_PATH_HELP`]), and the
    /// symbol servers with their cache: asked for the PDB of an assembly found in a
    /// --symbol-path, by the id its CodeView entry names.
    #[command(flatten)]
    pub symbols: crate::args::SymbolArgs,
    /// A portable PDB to use for the module of the same name (`Shop.pdb` for `Shop.dll` or
    /// `Shop.exe`), before any --symbol-path (repeatable). It is used as is: the text carries no
    /// id to check it against.
    #[arg(long, value_name = "FILE")]
    pub pdb: Vec<PathBuf>,
}

/// `--symbol-path` for stack traces: the text names modules, not files, so a directory is looked
/// in for the module's assembly first.
const SYMBOL_PATH_HELP: &str = "A directory to look for PDBs in (repeatable, searched in order): the module's assembly \
     (`DIR/Shop.dll`, whose own PDB is then used: embedded, beside it, or in a symbol directory, only if its id matches \
     the assembly), else `DIR/Shop.pdb` by name";

/// Run it. A PDB that is found but cannot be used is named on stderr and its frames are left as
/// printed; the exit status stays 0 (the output is the whole text). A FILE or --pdb that cannot
/// be read, or a --pdb that is not a portable PDB, is an error (status 1) before any output.
pub fn run(a: StacktraceArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut rewriter = Rewriter::new(Options { servers: a.symbols.servers.servers(), dirs: a.symbols.symbol_path, pdbs: a.pdb }).map_err(crate::open::open_error)?;
    // A PDB that cannot be used is a warning; an assembly with no PDB of its build, a note.
    let mut notice = |n: Notice| match n {
        Notice::BadPdb { .. } => eprintln!("warning: {}", Text(&n.to_string())),
        Notice::NoMatchingPdb { .. } => eprintln!("note: {}", Text(&n.to_string())),
    };
    let stats = match a.file {
        Some(path) => {
            let file = clrmap::fs::open_input(&path).map_err(crate::open::open_error)?;
            rewriter.rewrite(BufReader::with_capacity(64 * 1024, file), out, &mut notice).map_err(CliError::Io)?
        }
        None => {
            let stdin = std::io::stdin();
            rewriter.rewrite(stdin.lock(), out, &mut notice).map_err(CliError::Io)?
        }
    };
    for note in rewriter.summary(&stats) {
        eprintln!("note: {}", Text(&note));
    }
    Ok(())
}

//! `clrmap meta`: ECMA-335 metadata of .NET assemblies.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use clrmap::metadata::{spec_lines, Metadata};

use crate::output::{read_file, CliError};

/// `clrmap meta ...`
#[derive(Debug, Subcommand)]
pub enum MetaCommand {
    /// Print every TypeSpec row as `0x1B0000NN<TAB>type` and every MethodSpec row as
    /// `0x2B0000NN<TAB><A1,A2,...>`, in token order, with real names. A blob that does not
    /// decode prints `0x...<TAB>!error <kind>`.
    ///
    /// Example: `clrmap meta specs .dotnet/3.1/dotnetcore2/bin/shared/Microsoft.NETCore.App/3.1.23/System.Linq.dll`
    #[command(verbatim_doc_comment)]
    Specs {
        /// The assembly (PE32 or PE32+, ReadyToRun images included).
        assembly: PathBuf,
    },
}

/// Print the spec lines of `bytes`.
pub fn specs(bytes: &[u8], out: &mut dyn Write) -> Result<(), CliError> {
    let md = Metadata::parse(bytes).map_err(CliError::input)?;
    for line in spec_lines(&md, &md) {
        match line.text {
            Ok(t) => writeln!(out, "0x{:08X}\t{t}", line.token)?,
            Err(e) => writeln!(out, "0x{:08X}\t!error {}", line.token, e.kind)?,
        }
    }
    Ok(())
}

/// Run a `meta` command.
pub fn run(cmd: MetaCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        MetaCommand::Specs { assembly } => specs(&read_file(&assembly)?, out),
    }
}

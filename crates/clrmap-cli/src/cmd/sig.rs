//! `clrmap sig`: ECMA-335 type signatures.

use std::io::Write;

use clap::Subcommand;

use crate::output::CliError;

/// `clrmap sig ...`
#[derive(Debug, Subcommand)]
pub enum SigCommand {
    /// Decode one type signature given as hex bytes and print it in ILAsm notation.
    ///
    /// Example: `clrmap sig decode 15 12 15 01 08` prints `class 0x01000005<int32>`.
    Decode {
        /// The signature bytes in hex: separate bytes (`15 12 15 01 08`) or one string (`1512150108`).
        #[arg(required = true)]
        hex: Vec<String>,
        /// Print a structural JSON tree instead of the ILAsm text.
        #[arg(long)]
        json: bool,
    },
}

/// Run a `sig` command.
pub fn run(cmd: SigCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        SigCommand::Decode { hex, json } => {
            let _ = (hex, json, &out);
            Err(CliError::Message("not yet implemented".into()))
        }
    }
}

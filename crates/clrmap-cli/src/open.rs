//! Opening what a command reads, and reporting how that went, the same way for every command:
//! source files, running processes (their exit statuses, docs/attach.md) and the warnings of a
//! torn source.

use std::path::Path;
use std::process::ExitCode;

use clrmap::diag::{self, DiagError, DiagErrorKind};
use clrmap::symbolizer::{OpenError, OpenedSource};

use crate::output::CliError;

/// An open error as the CLI reports it: a kind and location for bad input, a message otherwise.
pub fn open_error(e: OpenError) -> CliError {
    match e {
        // The offset alone does not say which file it is in when one command reads several (an
        // assembly, its PDB, a PDB found in a symbol path): the note names it.
        OpenError::Input { path, error } if error.offset().is_some() => {
            let note = format!("note: the offset is in {}", crate::output::Text(&path.display().to_string()));
            CliError::Noted { error, note }
        }
        OpenError::Input { error, .. } => CliError::input(error),
        // The ids make the message longer than a library error's static words: the same kind,
        // no location, and the words after the error's own.
        OpenError::NoModule { error, detail, .. } => CliError::Kinded { kind: error.kind.as_str(), message: format!("{}; {detail}", error.message()) },
        e @ OpenError::Io { .. } => CliError::Kinded { kind: "io", message: e.to_string() },
        e @ OpenError::Unrecognized { .. } => CliError::Kinded { kind: "unrecognized_source", message: e.to_string() },
    }
}

/// Say on stderr where a torn source stopped being read (everything whole before it was kept).
pub fn warn(source: &Path, warnings: &[clrmap::Error]) {
    for w in warnings {
        // The message may quote the file's own bytes (a name, a token's text): escaped, so a file
        // cannot write control sequences to the user's terminal.
        let message = w.message();
        eprintln!("warning: {}: {}{}: {}; every whole record before it was kept", crate::output::Text(&source.display().to_string()), w.kind, w.location, crate::output::Text(&message));
    }
}

/// Say on stderr why a module has no lines (`Symbolizer::why_notes`): what was wanted, where it
/// was looked for, and what was found instead. Asked after the lookups, which find the modules'
/// PDBs. In text, `note: ...` lines; with `json`, one `{"note":{"module":...,"kind":...,...}}`
/// object per line, with the reason's fields.
pub fn notes(sym: &clrmap::symbolizer::Symbolizer, json: bool) {
    for note in sym.why_notes() {
        if json {
            if let Ok(text) = serde_json::to_string(&serde_json::json!({ "note": note })) {
                eprintln!("{text}");
            }
        } else {
            eprintln!("note: {}", crate::output::Text(&note.to_string()));
        }
    }
}

/// The exit status of a diagnostics-port error (module docs).
pub fn exit_status(kind: DiagErrorKind) -> u8 {
    match kind {
        DiagErrorKind::NoSuchProcess => 3,
        DiagErrorKind::NotDotnet => 4,
        DiagErrorKind::PermissionDenied => 5,
        DiagErrorKind::UnsupportedCommand => 6,
        DiagErrorKind::Protocol | DiagErrorKind::ServerError | DiagErrorKind::Timeout => 8,
        DiagErrorKind::BadArgument => 2,
        DiagErrorKind::Io => 1,
        DiagErrorKind::TargetExited => EXIT_TARGET_EXITED,
        // As a shell reports a command ended by SIGINT.
        DiagErrorKind::Interrupted => 130,
    }
}

/// Status 7: the target exited mid-session.
pub const EXIT_TARGET_EXITED: u8 = 7;

/// Print a diagnostics-port error on stderr and give its exit status.
pub fn report(e: &DiagError) -> ExitCode {
    eprintln!("error: {}: {}", e.kind, e.message);
    ExitCode::from(exit_status(e.kind))
}

/// Every jitted method's map in process `pid`, now (`--pid` of `il dump`, `il at`, `symbolize`).
/// A rundown snapshot of process `pid`'s jitted methods, now (`il dump --pid`). A
/// diagnostics-port error carries its own exit status (module docs).
/// `timeout` bounds the whole snapshot (`--timeout`; `diag::DEFAULT_TIMEOUT`, 10 s, if none).
pub fn snapshot(pid: u32, timeout: Option<std::time::Duration>) -> Result<OpenedSource, CliError> {
    match diag::snapshot(pid, timeout.unwrap_or(diag::DEFAULT_TIMEOUT)) {
        Ok(s) => {
            for w in &s.warnings {
                eprintln!("warning: process {pid}: the stream stopped early ({w}); every whole event before it was kept");
            }
            Ok(s)
        }
        Err(e) => Err(CliError::Status(format!("{}: {}", e.kind, e.message), exit_status(e.kind))),
    }
}

/// A symbolizer over process `pid`'s jitted methods, now, with the PDB options of `frame`
/// (`il at --pid`, `symbolize --pid`).
pub fn symbolizer_for_pid(pid: u32, timeout: Option<std::time::Duration>, options: clrmap::symbolizer::Options) -> Result<clrmap::symbolizer::Symbolizer, CliError> {
    clrmap::symbolizer::Symbolizer::from_opened(snapshot(pid, timeout)?, None, options).map_err(open_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_status() {
        let kinds = [DiagErrorKind::NoSuchProcess, DiagErrorKind::NotDotnet, DiagErrorKind::PermissionDenied, DiagErrorKind::UnsupportedCommand];
        let codes: std::collections::BTreeSet<u8> = kinds.iter().map(|&k| exit_status(k)).chain([EXIT_TARGET_EXITED, exit_status(DiagErrorKind::Protocol)]).collect();
        assert_eq!(codes.len(), 6);
    }
}

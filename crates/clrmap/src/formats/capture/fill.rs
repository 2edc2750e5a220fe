//! Names written into a capture after its recording, on the machine that made it.
//!
//! The profiler records each body by module, token and type arguments; naming it needs the
//! module's metadata, which the profiler does not read inside the runtime's callbacks (a callback
//! that parses an assembly delays the JIT, and one runtime (8.0) has been seen to lose an attach
//! over it). So `clrmap profile`, once the process has ended or detached, reads the capture back and
//! gives every body that has no `name` the `name` and `full_name` its module's metadata gives
//! ([`BodyNamer`], the rules of [`super::name_captured`]), while the assemblies are still where
//! the process loaded them. A capture so filled names every method when read later without its
//! assemblies (on another machine, after a rebuild). Captures without names still read: their
//! bodies are named when read, where the assemblies are at hand.

use std::io::{self, Write};

use super::{BodyNamer, Header, Record};
use crate::base::ilmap::CodeKind;

/// Copy the capture `input` to `out`, line by line, adding `name` and `full_name` to each body
/// record that has none and whose module (of the recorded build) can be read here. Every other
/// line, and a body whose module cannot be read, is copied as it is, byte for byte; so is a torn
/// last line. Gives how many bodies were named.
pub fn fill_names(input: &[u8], out: &mut dyn Write) -> io::Result<usize> {
    let mut namer = BodyNamer::reading_files();
    let mut named = 0usize;
    for line in input.split_inclusive(|&b| b == b'\n') {
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        match name_line(text, &mut namer) {
            Some(filled) => {
                out.write_all(filled.as_bytes())?;
                if line.ends_with(b"\n") {
                    out.write_all(b"\n")?;
                }
                named = named.saturating_add(1);
            }
            None => out.write_all(line)?,
        }
    }
    Ok(named)
}

/// The line with names added, or `None` to keep it as it is.
fn name_line(text: &[u8], namer: &mut BodyNamer) -> Option<String> {
    // Only body records need reading: skip the others without parsing them.
    if !(text.starts_with(b"{\"kind\":\"jit\"") || text.starts_with(b"{\"kind\":\"r2r\"")) {
        return None;
    }
    let record: Record = serde_json::from_slice(text).ok()?;
    let (mut body, kind) = match record {
        Record::Jit(b) => (b, CodeKind::Jit),
        Record::R2r(b) => (b, CodeKind::R2r),
        _ => return None,
    };
    if body.name.is_some() {
        return None;
    }
    let mvid = body.mvid.as_deref().and_then(crate::formats::metadata::parse_mvid);
    let (name, full) = namer.name(&body.module, mvid, body.token, kind, body.rva, &body.class_args, &body.method_args)?;
    body.name = Some(name);
    body.full_name = full;
    let record = if kind == CodeKind::R2r { Record::R2r(body) } else { Record::Jit(body) };
    serde_json::to_string(&record).ok()
}

/// Whether every process that wrote to the capture has ended its recording (an `end` record for
/// each header's process): only then is the file whole, and safe to rewrite. A .NET child
/// process inherits the capture and appends to it; while one still runs, the file is left alone.
pub fn every_process_ended(input: &[u8]) -> bool {
    let mut started = std::collections::BTreeSet::new();
    let mut ended = std::collections::BTreeSet::new();
    for line in input.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if line.starts_with(b"{\"format\"") {
            match serde_json::from_slice::<Header>(line) {
                Ok(h) => started.insert(h.pid),
                Err(_) => return false,
            };
        } else if line.starts_with(b"{\"kind\":\"end\"") {
            if let Ok(Record::End(e)) = serde_json::from_slice::<Record>(line) {
                ended.insert(e.pid.unwrap_or_default());
            }
        }
    }
    !started.is_empty() && started.is_subset(&ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_body_lines_without_names_change_and_a_torn_line_stays() {
        // A module that cannot be read names nothing: every byte is kept.
        let capture = b"{\"format\":\"clrmap-capture\",\"version\":1,\"pid\":7}\n{\"kind\":\"jit\",\"pid\":7,\"function_id\":1,\"module\":\"/nowhere/A.dll\",\"token\":100663297,\"start\":4096,\"code_size\":8,\"body\":0,\"map\":[]}\n{\"kind\":\"end\",\"pid\":7}\n{\"kind\":\"ji";
        let mut out = Vec::new();
        assert_eq!(fill_names(capture, &mut out).unwrap(), 0);
        assert_eq!(out, capture);
        // Ended, but for the torn tail; a second process without its end is not.
        assert!(every_process_ended(capture));
        let mut two = capture.to_vec();
        two.extend_from_slice(b"\n{\"format\":\"clrmap-capture\",\"version\":1,\"pid\":8}\n");
        assert!(!every_process_ended(&two));
        assert!(!every_process_ended(b""));
    }
}

//! Source lines for a dump's ReadyToRun frames. A ReadyToRun method's code is its image's, mapped
//! at the module's base, so the image file on disk answers for it exactly as it answers
//! `clrmap symbolize IMAGE --return-address RVA`: the method, its IL offset by the runtime's frame
//! rule (a return address is looked up at the call, `rva - 1`), and the PDB's line where the PDB is
//! found (beside the image, in the symbol paths, on the symbol servers). One rule, the
//! symbolizer's; nothing here decides an IL offset or a line.
//!
//! Jitted frames get none: the runtime's descriptor (10.0) describes no debug info for jitted
//! code, so their IL offsets are not read from the core (docs/dumps.md).

use std::collections::BTreeMap;
use std::path::Path;

use super::DumpReport;
use crate::answers::symbolizer::{FrameKind, Options, Symbolizer};
use crate::symbols::source::SymbolPaths;

/// Give every ReadyToRun frame of `report` its IL offset, file, line and column where the
/// module's image (and its PDB) answers; an image that cannot be opened is one note, and its
/// frames keep their method and native offset.
pub fn add_lines(report: &mut DumpReport, symbols: &SymbolPaths) {
    let mut by_module: BTreeMap<String, Vec<(usize, usize)>> = BTreeMap::new();
    for (ti, t) in report.threads.iter().enumerate() {
        for (fi, f) in t.frames.iter().enumerate() {
            if let (Some(path), Some(_)) = (&f.module, f.rva) {
                by_module.entry(path.clone()).or_default().push((ti, fi));
            }
        }
    }
    for (path, frames) in by_module {
        let s = match Symbolizer::open(Path::new(&path), Options { symbols: symbols.clone() }) {
            Ok(s) => s,
            Err(e) => {
                report.notes.push(format!("{path}: no IL offsets or lines for its ReadyToRun frames: {e}"));
                continue;
            }
        };
        for (ti, fi) in frames {
            let Some(f) = report.threads.get_mut(ti).and_then(|t| t.frames.get_mut(fi)) else { continue };
            let Some(rva) = f.rva else { continue };
            let kind = if f.leaf { FrameKind::Leaf } else { FrameKind::ReturnAddress };
            let answer = s.symbolize(u64::from(rva), kind);
            // The image's own token for the code must be the one the walk found: another
            // build of the file at that path answers nothing.
            if answer.at.token.is_some() && answer.at.token != f.token {
                continue;
            }
            f.il_offset = answer.at.il_offset;
            f.file = answer.at.file.map(str::to_owned);
            f.line = answer.at.line;
            f.column = answer.at.column;
        }
        for n in s.notes() {
            if !report.notes.contains(&n) {
                report.notes.push(n);
            }
        }
    }
}

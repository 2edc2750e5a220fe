//! Source lines for a dump's ReadyToRun frames. A ReadyToRun method's code is its image's, mapped
//! at the module's base, so the image file on disk answers for it exactly as it answers
//! `clrmap symbolize IMAGE --return-address RVA`: the method, its IL offset by the runtime's frame
//! rule (a return address is looked up at the call, `rva - 1`), and the PDB's line where the PDB is
//! found (beside the image, in the symbol paths, on the symbol servers). One rule, the
//! symbolizer's; nothing here decides an IL offset or a line.
//!
//! A jitted frame's IL offset comes from the debug info the runtime keeps beside its code (read
//! from the core by names.rs), by the same frame rule; its line from its module's PDB.

use std::collections::BTreeMap;
use std::path::Path;

use super::{DumpFrame, DumpReport};
use crate::answers::symbolizer::{FrameKind, ModuleSymbols, Options, Symbolizer};
use crate::base::ilmap::runtime_il_offset;
use crate::symbols::source::SymbolPaths;

/// Give every ReadyToRun frame of `report` its IL offset, file, line and column where the
/// module's image (and its PDB) answers; an image that cannot be opened is one note, and its
/// frames keep their method and native offset.
pub fn add_lines(report: &mut DumpReport, symbols: &SymbolPaths) {
    let mut by_module: BTreeMap<String, Vec<(usize, usize)>> = BTreeMap::new();
    // Jitted frames and inlined frames (`None`: the frame itself; `Some(i)`: its i-th inlined
    // frame), by module.
    let mut jitted: BTreeMap<String, Vec<(usize, usize, Option<usize>)>> = BTreeMap::new();
    for (ti, t) in report.threads.iter().enumerate() {
        for (fi, f) in t.frames.iter().enumerate() {
            match (&f.module, f.rva, f.il_offset) {
                (Some(path), Some(_), _) => by_module.entry(path.clone()).or_default().push((ti, fi)),
                (Some(path), None, Some(_)) => jitted.entry(path.clone()).or_default().push((ti, fi, None)),
                _ => {}
            }
            for (ii, i) in f.inlined.iter().enumerate() {
                if let (Some(path), Some(_)) = (&i.module, i.il_offset) {
                    jitted.entry(path.clone()).or_default().push((ti, fi, Some(ii)));
                }
            }
        }
    }
    // Jitted and inlined frames: the line at their IL offset in their module's PDB.
    let mut files = crate::formats::metadata::ModuleFiles::default();
    for (path, frames) in jitted {
        let Some(bytes) = files.read(&path) else { continue };
        let lines = match ModuleSymbols::load(&bytes, Some(Path::new(&path)), symbols) {
            Ok(Some(l)) => l,
            Ok(None) => continue,
            Err(e) => {
                report.notes.push(format!("{path}: no lines for its jitted frames: {e}"));
                continue;
            }
        };
        for (ti, fi, ii) in frames {
            let Some(f) = report.threads.get_mut(ti).and_then(|t| t.frames.get_mut(fi)) else { continue };
            match ii {
                None => {
                    if let (Some(token), Some(il)) = (f.token, f.il_offset) {
                        if let Some((line, column, file)) = lines.line(token, il) {
                            f.line = Some(line);
                            f.column = Some(column);
                            f.file = file.map(str::to_owned);
                        }
                    }
                }
                Some(ii) => {
                    let Some(i) = f.inlined.get_mut(ii) else { continue };
                    if let (Some(token), Some(il)) = (i.token, i.il_offset) {
                        if let Some((line, column, end_line, end_column, file)) = lines.span(token, il) {
                            (i.line, i.column, i.end_line, i.end_column) = (Some(line), Some(column), Some(end_line), Some(end_column));
                            i.file = file.map(str::to_owned);
                        }
                    }
                }
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

/// A jitted frame's IL offset from its map, by the rule `symbolize` follows for .NET 5 and later:
/// a return address is looked up at the call (`offset - 1`), the leaf as it is.
pub(super) fn jit_il_offset(f: &mut DumpFrame) {
    let Some((map, size)) = f.jit_map.take() else { return };
    let Some(native) = f.native_offset.and_then(|o| u32::try_from(o).ok()) else { return };
    if map.is_empty() {
        return;
    }
    let offset = if f.leaf { native } else { native.saturating_sub(1) };
    f.il_offset = Some(runtime_il_offset(&map, size, offset).1);
}

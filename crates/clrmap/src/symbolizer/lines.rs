//! One module's line table: every method's visible sequence points, decoded once from its PDB
//! and laid out for binary search.

use std::collections::HashSet;

use crate::ilmap::{runtime_il_offset, MapEntry};
use crate::pdb::PortablePdb;

use super::LineRow;

/// A visible sequence point, compact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinePoint {
    pub il: u32,
    /// Index into `ModuleLines::documents`.
    pub document: u32,
    pub line: u32,
    pub column: u32,
    pub end_line: u32,
    pub end_column: u32,
}

/// The most bytes of document names one module keeps: names are shared by many points, but a
/// hostile PDB could give each of a million rows a 64 KiB name.
const NAME_BUDGET: usize = 64 << 20;

/// The line table of one module.
#[derive(Debug, Default)]
pub(crate) struct ModuleLines {
    /// Document names by row − 1 (`None`: not referenced, unreadable, or over the budget).
    documents: Vec<Option<Box<str>>>,
    /// MethodDef row − 1 → range into `points`.
    methods: Vec<(u32, u32)>,
    points: Vec<LinePoint>,
    /// Methods whose sequence points did not decode (they give no lines).
    pub bad_methods: u32,
}

impl ModuleLines {
    /// Decode every method's visible points. A method whose blob is malformed keeps no points;
    /// the others are unaffected.
    pub fn build(pdb: &PortablePdb<'_>) -> Self {
        let mut lines = ModuleLines::default();
        let methods = pdb.method_count();
        lines.methods = Vec::with_capacity(methods as usize);
        let mut used: HashSet<u32> = HashSet::new();
        for rid in 1..=methods {
            let first = lines.points.len();
            let ok = pdb.sequence_points(0x0600_0000 | rid).and_then(|points| {
                for p in points {
                    let p = p?;
                    if !p.is_hidden() {
                        used.insert(p.document);
                        lines.points.push(LinePoint {
                            il: p.il_offset,
                            document: p.document.saturating_sub(1),
                            line: p.start_line,
                            column: p.start_column,
                            end_line: p.end_line,
                            end_column: p.end_column,
                        });
                    }
                }
                Ok(())
            });
            if ok.is_err() {
                lines.points.truncate(first);
                lines.bad_methods = lines.bad_methods.saturating_add(1);
            }
            let start = u32::try_from(first).unwrap_or(u32::MAX);
            let end = u32::try_from(lines.points.len()).unwrap_or(u32::MAX);
            lines.methods.push((start, end));
        }
        let mut budget = NAME_BUDGET;
        lines.documents = (1..=pdb.document_count())
            .map(|rid| {
                if !used.contains(&rid) {
                    return None;
                }
                let name = pdb.document(rid).ok()?.name;
                budget = budget.checked_sub(name.len())?;
                Some(name.into_boxed_str())
            })
            .collect();
        lines
    }

    /// The runtime's line for an IL offset: the last visible point at or before it.
    pub fn line(&self, method: u32, il: u32) -> Option<(&LinePoint, Option<&str>)> {
        let rid = method & 0x00FF_FFFF;
        if method >> 24 != 0x06 || rid == 0 {
            return None;
        }
        let &(start, end) = self.methods.get(rid.checked_sub(1)? as usize)?;
        let points = self.points.get(start as usize..end as usize)?;
        let n = points.partition_point(|p| p.il <= il);
        let p = points.get(n.checked_sub(1)?)?;
        let file = self.documents.get(p.document as usize).and_then(|d| d.as_deref());
        Some((p, file))
    }

    /// A body's line table: for each native offset where the runtime's line changes, that line,
    /// by the same rule as [`super::Symbolizer::symbolize`] for a leaf frame, then one more row
    /// at `code_size` repeating the last line (a table ends at its last row's address, symbols.md
    /// §5). Between two offsets where a map entry starts or ends, the runtime's IL offset, and so
    /// the line, cannot change, so those offsets are the only ones tried. A region with no line
    /// after one with a line gets line 0 (no source line); leading regions with no line get no row.
    pub fn rows(&self, token: u32, map: &[MapEntry], code_size: u32) -> Vec<LineRow> {
        let mut cuts: Vec<u32> = std::iter::once(0)
            .chain(map.iter().flat_map(|e| [e.native_start, e.native_end]))
            .filter(|&o| o < code_size)
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut rows: Vec<LineRow> = Vec::new();
        for offset in cuts {
            let (_, il) = runtime_il_offset(map, code_size, offset);
            let row = match self.line(token, il) {
                Some((p, file)) => LineRow { native_offset: offset, file: file.unwrap_or("").to_owned(), line: p.line, column: p.column },
                None => match rows.last() {
                    Some(last) => LineRow { native_offset: offset, file: last.file.clone(), line: 0, column: 0 },
                    None => continue,
                },
            };
            if rows.last().is_some_and(|l| l.file == row.file && l.line == row.line && l.column == row.column) {
                continue;
            }
            rows.push(row);
        }
        if let Some(last) = rows.last() {
            if last.native_offset < code_size {
                let end = LineRow { native_offset: code_size, ..last.clone() };
                rows.push(end);
            }
        }
        rows
    }
}

//! One module's line table: every method's visible sequence points, decoded once from its PDB
//! and laid out for binary search.

use std::collections::HashSet;

use crate::pdb::PortablePdb;

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
}

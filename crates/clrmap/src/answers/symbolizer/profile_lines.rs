//! Line tables for profilers (perf's jitdump, flame graphs): which source line each native range
//! of a body *is*, as a native line table says it for inlined code. One home for the rule, used
//! offline ([`super::Symbolizer::profile_line_table`]) and in process (the profiler's jitdump).
//!
//! This is not the runtime's stack-trace rule ([`super::Symbolizer::line_table`], which
//! `symbolize` keeps): that rule gives code the JIT made up itself (NO_MAPPING) the method's
//! first line, and inlined code the line of the caller's statement. Here, at each native offset:
//! 1. in the flat map's prolog or epilog: the line the stack-trace rule gives (the method's own);
//! 2. where the JIT's inline tree has a chain (an inlinee's code): the innermost frame that has a
//!    line; an inlinee whose module has no PDB (framework code) falls back outward, to its call
//!    site in its parent, and so on to the physical method at the outermost call site;
//! 3. where the tree's mapping is the physical method's own (context 0): its IL offset, which
//!    also covers code the flat map calls NO_MAPPING;
//! 4. otherwise the flat map: a real IL offset's line, and **line 0** for NO_MAPPING: an honest
//!    unknown, never the method's first line.
//!
//! A chain cut by an unknown parent (dotnet/runtime#98755) uses its inlinees, then the flat map.

use crate::base::ilmap::{runtime_il_offset, IlOffset, MapEntry};
use crate::formats::inlines::InlineTree;

use super::LineRow;

/// A source position: (document name, line, column).
pub type Position = (String, u32, u32);

/// The frame a line is asked for: the body's own method, or an inlinee (by its MethodID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// The physical method.
    Body,
    /// An inlinee, by MethodID.
    Inlinee(u64),
}

/// The rows of a body's profile line table: a row wherever the line changes, a row of line 0
/// where the line is unknown after a known one, and a last row at `code_size`. `line_of(who, il)`
/// answers a method's line at an IL offset by the runtime's rule (`None`: no PDB, no point).
pub fn profile_rows(map: &[MapEntry], code_size: u32, tree: Option<&InlineTree>, mut line_of: impl FnMut(Who, u32) -> Option<Position>) -> Vec<LineRow> {
    let mut cuts: Vec<u32> = std::iter::once(0)
        .chain(map.iter().flat_map(|e| [e.native_start, e.native_end]))
        .chain(tree.into_iter().flat_map(|t| t.mappings().iter().map(|m| m.native_offset)))
        .filter(|&o| o < code_size)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut rows: Vec<LineRow> = Vec::new();
    for offset in cuts {
        let position = position_at(map, code_size, tree, offset, &mut line_of);
        let row = match position {
            Some((file, line, column)) => LineRow { native_offset: offset, file, line, column },
            None => match rows.last() {
                Some(last) => LineRow { native_offset: offset, file: last.file.clone(), line: 0, column: 0 },
                None => LineRow { native_offset: offset, file: String::new(), line: 0, column: 0 },
            },
        };
        if rows.last().is_some_and(|l| l.file == row.file && l.line == row.line && l.column == row.column) {
            continue;
        }
        rows.push(row);
    }
    // Leading rows with no file at all (unknown before anything is known) say nothing.
    let first_known = rows.iter().position(|r| !r.file.is_empty()).unwrap_or(rows.len());
    rows.drain(..first_known);
    if let Some(last) = rows.last() {
        if last.native_offset < code_size {
            let end = LineRow { native_offset: code_size, ..last.clone() };
            rows.push(end);
        }
    }
    rows
}

/// A body's tree with the body's flat-map boundaries, sorted: what the per-address query needs
/// to clip the tree's mappings in O(log n).
#[derive(Clone, Debug)]
pub struct BodyTree {
    /// The tree.
    pub tree: std::sync::Arc<InlineTree>,
    bounds: Box<[u32]>,
}

impl BodyTree {
    /// The tree of a body with this flat map.
    pub fn new(tree: std::sync::Arc<InlineTree>, map: &[MapEntry]) -> BodyTree {
        let mut bounds: Vec<u32> = map.iter().flat_map(|e| [e.native_start, e.native_end]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        BodyTree { tree, bounds: bounds.into() }
    }

    /// Does the tree's mapping at `offset` still hold there (see `current`), by binary search.
    pub fn current(&self, offset: u32) -> bool {
        let Some(m) = self.tree.mapping_at(offset) else { return false };
        let below = self.bounds.partition_point(|&b| b <= offset);
        let boundary = below.checked_sub(1).and_then(|i| self.bounds.get(i)).copied().unwrap_or(0);
        m.native_offset >= boundary
    }
}

/// Does the tree's mapping at `offset` still hold there? Mappings are points, not ranges: one
/// holds from its native offset up to the next mapping, clipped by the flat map's boundaries
/// (docs/rich-debug-info.md). So a mapping before the last flat boundary at or before `offset` is stale,
/// and the flat map rules there.
pub(super) fn current(tree: &InlineTree, map: &[MapEntry], offset: u32) -> bool {
    tree.holds_at(map, offset)
}

/// The position of one native offset by the module's rule.
fn position_at(map: &[MapEntry], code_size: u32, tree: Option<&InlineTree>, offset: u32, line_of: &mut impl FnMut(Who, u32) -> Option<Position>) -> Option<Position> {
    let (region, il) = runtime_il_offset(map, code_size, offset);
    if matches!(region, Some(IlOffset::Prolog | IlOffset::Epilog)) {
        return line_of(Who::Body, il);
    }
    if let Some(tree) = tree.filter(|t| current(t, map, offset)) {
        let chain = tree.chain(offset);
        if let Some((last, inner)) = chain.steps.split_last() {
            let (inner, root) = if chain.parent_unknown { (chain.steps.as_slice(), None) } else { (inner, Some(last)) };
            for step in inner {
                // A call site the runtime did not give has no line (crate::formats::inlines::NO_CALL_SITE).
                if let Some(p) = step.known_il_offset().and_then(|il| line_of(Who::Inlinee(step.method_id), il)) {
                    return Some(p);
                }
            }
            // The outermost call site, when known; else the flat map's answer below.
            if let Some(root_il) = root.and_then(|r| r.known_il_offset()) {
                return line_of(Who::Body, root_il);
            }
        } else if let Some(m) = tree.mapping_at(offset).filter(|m| m.inlinee == 0) {
            // The physical method's own code, at the IL offset the JIT knows for it.
            return line_of(Who::Body, m.il_offset);
        }
    }
    match region {
        Some(IlOffset::Il(_)) => line_of(Who::Body, il),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::read::Reader;
    use crate::formats::inlines::raw::{encode_blob, RawMapping, RawNode};

    fn entry(il: IlOffset, start: u32, end: u32) -> MapEntry {
        MapEntry { il, native_start: start, native_end: end }
    }

    /// IL offset → line: the body's lines are 100 + il, an inlinee's 500 + il (module A), and
    /// inlinee 2's module has no PDB.
    fn lines(who: Who, il: u32) -> Option<Position> {
        match who {
            Who::Body => Some(("Body.cs".to_owned(), 100 + il, 1)),
            Who::Inlinee(0xA) => Some(("A.cs".to_owned(), 500 + il, 1)),
            Who::Inlinee(_) => None,
        }
    }

    #[test]
    fn no_mapping_is_line_zero_and_a_tree_gives_the_innermost_line_that_has_one() {
        // 0..4 prolog, 4..10 IL 2, 10..30 NO_MAPPING, 30..40 IL 8, 40..44 epilog.
        let map = [entry(IlOffset::Prolog, 0, 4), entry(IlOffset::Il(2), 4, 10), entry(IlOffset::NoMapping, 10, 30), entry(IlOffset::Il(8), 30, 40), entry(IlOffset::Epilog, 40, 44)];
        let rows = profile_rows(&map, 44, None, lines);
        let got: Vec<(u32, u32)> = rows.iter().map(|r| (r.native_offset, r.line)).collect();
        // Prolog and epilog: the stack-trace rule (IL 0; the map's last IL offset, 8);
        // NO_MAPPING: 0, not the method's first line.
        assert_eq!(got, [(0, 100), (4, 102), (10, 0), (30, 108), (44, 108)]);

        // A tree: node 1 (method A) inlined at IL 5 of the body; node 2 (no PDB) inlined at IL 3
        // of A. Mappings: 10 → node 2 at IL 1; 20 → node 1 at IL 7; 26 → node 0 at IL 6.
        let nodes = [
            RawNode { method: 0x1, il_offset: u32::MAX, child: 1, sibling: 0 },
            RawNode { method: 0xA, il_offset: 5, child: 2, sibling: 0 },
            RawNode { method: 0xB, il_offset: 3, child: 0, sibling: 0 },
        ];
        let mappings = [
            RawMapping { il_offset: 1, inlinee: 2, native_offset: 10, source: 0 },
            RawMapping { il_offset: 7, inlinee: 1, native_offset: 20, source: 0 },
            RawMapping { il_offset: 6, inlinee: 0, native_offset: 26, source: 0 },
        ];
        let blob = encode_blob(&nodes, &mappings);
        let tree = InlineTree::parse(Reader::new(&blob, 0)).unwrap();
        let rows = profile_rows(&map, 44, Some(&tree), lines);
        let got: Vec<(u32, &str, u32)> = rows.iter().map(|r| (r.native_offset, r.file.as_str(), r.line)).collect();
        assert_eq!(
            got,
            [
                (0, "Body.cs", 100),
                (4, "Body.cs", 102),
                // Node 2 has no lines: its call site in A (IL 3).
                (10, "A.cs", 503),
                // Node 1 at IL 7.
                (20, "A.cs", 507),
                // Context 0 at IL 6 covers the rest of the NO_MAPPING range.
                (26, "Body.cs", 106),
                // A flat boundary clips the context-0 mapping: IL 8 from the flat map; the
                // epilog's is the same line.
                (30, "Body.cs", 108),
                (44, "Body.cs", 108),
            ]
        );
    }
}

//! The `inline_tree` fuzz target's checks, in the library so that the stable test suite replays
//! the kept inputs through exactly the same code (tests/integration/inlines.rs).
//!
//! Not part of the API: it panics when an invariant breaks, which is what a fuzzer needs.
#![allow(clippy::panic, clippy::indexing_slicing, clippy::arithmetic_side_effects, clippy::unwrap_used, clippy::expect_used)]

use super::{InlineCollector, InlineTree, Parent};
use crate::base::read::Reader;

/// Every invariant of one parsed tree: each mapping's inlinee is a node; each chain is no longer
/// than the node count, starts at the mapping's node, follows parents, and ends at node 0 or at
/// a node whose parent is unknown (and says so).
pub fn check_tree(t: &InlineTree) {
    let n = t.nodes().len();
    assert!(n >= 1);
    assert_eq!(t.nodes()[0].parent, Parent::Root);
    for (i, node) in t.nodes().iter().enumerate().skip(1) {
        assert_ne!(node.parent, Parent::Root, "only node 0 is the root");
        if let Parent::Node(p) = node.parent {
            assert!((p as usize) < n && p as usize != i);
        }
    }
    let maps = t.mappings();
    assert!(maps.windows(2).all(|w| w[0].native_offset <= w[1].native_offset));
    for m in maps {
        assert!((m.inlinee as usize) < n);
        let c = t.chain(m.native_offset);
        assert!(c.steps.len() <= n, "a chain longer than the tree");
        let Some(first) = c.steps.first() else {
            // Empty only where the mapping in force is the root's.
            assert_eq!(t.mapping_at(m.native_offset).map(|m| m.inlinee), Some(0));
            continue;
        };
        assert_ne!(first.node, 0);
        for w in c.steps.windows(2) {
            assert_eq!(t.nodes()[w[0].node as usize].parent, Parent::Node(w[1].node));
            assert_eq!(w[1].il_offset, t.nodes()[w[0].node as usize].il_offset);
        }
        let last = c.steps.last().unwrap();
        if c.parent_unknown {
            assert_eq!(t.nodes()[last.node as usize].parent, Parent::Unknown);
        } else {
            assert_eq!(last.node, 0);
        }
    }
}

/// The target: the input is a blob (parsed, checked, its orphans recovered by an arbitrary but
/// deterministic rule, checked again), then a stored rich chunk (parsed and checked), then the same bytes as a run of event payloads
/// (`u16 length` + payload; bit 15 of the length makes it a MethodDetails payload) fed to a
/// collector, whose trees are all checked.
pub fn fuzz_check(data: &[u8]) {
    if let Ok(mut t) = InlineTree::parse(Reader::new(data, 0)) {
        check_tree(&t);
        let mut k = 0u32;
        t.recover_parents(|caller, il, callee| {
            k = k.wrapping_add(1);
            match (caller ^ callee ^ u64::from(il) ^ u64::from(k)) % 3 {
                0 => Some(true),
                1 => Some(false),
                _ => None,
            }
        });
        check_tree(&t);
    }
    // The same bytes as a stored rich chunk (what a core holds).
    if let Ok(t) = InlineTree::parse_stored(Reader::new(data, 0)) {
        check_tree(&t);
    }
    let mut c = InlineCollector::new();
    let mut r = Reader::new(data, 0);
    while let Ok(len) = r.u16("a length") {
        let Ok(p) = r.split(usize::from(len & 0x7FFF).min(r.len()), "a payload") else { break };
        let _ = if len & 0x8000 != 0 { c.method_details(p) } else { c.rich_debug_info(p) };
    }
    let inlines = c.finish();
    for (_, t) in inlines.trees() {
        check_tree(t);
    }
    for e in inlines.errors() {
        assert!(e.error.offset().is_none_or(|o| o <= data.len() as u64));
    }
}

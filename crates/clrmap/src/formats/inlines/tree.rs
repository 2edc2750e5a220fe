//! The inline tree as a parent relation, its checks, and the chain query.
//!
//! The wire gives each node a first `Child` and a next `Sibling` (ordinals, 0 = none:
//! cordebuginfo.h `InlineTreeNode`). Readers want the other direction: from the code's inline
//! context up to the physical method. So the links are turned into one parent per node, and every
//! fault that would make that relation something other than a forest is an error here, once, at
//! parse time: after that, no query can loop.

use super::blob::{read_blob, Blob};
use crate::base::read::{Error, ErrorKind, Reader, Result};

/// The deepest inline nesting accepted (levels below the root). The JIT stops inlining far sooner
/// (`DEFAULT_MAX_INLINE_DEPTH` is 20 in dotnet/runtime's `src/coreclr/jit/jit.h`; `DOTNET_JITInlineDepth` can change it); this bound
/// makes every chain cheap even on hostile input, and matches the limit for nested types
/// (docs/output.md#strictness: deeper than 100 is `too_deep`).
pub const MAX_INLINE_DEPTH: u32 = 100;

/// A node's parent, as far as the tree says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Parent {
    /// Node 0 itself: the physical method, which has no parent.
    Root,
    /// The node with this index: the method whose IL holds the call at the node's `il_offset`.
    Node(u32),
    /// Not reachable from node 0 (dotnet/runtime#98755: the JIT wrote `Child` or `Sibling` 0 where
    /// the next context was a failed inline), and not recovered (see
    /// [`InlineTree::recover_parents`]). Never guessed.
    Unknown,
}

/// A node's `il_offset` when its call site is not known: the JIT's `BAD_IL_OFFSET`, what node 0
/// carries, and what [`InlineTree::forget_call_sites`] writes where the runtime's values cannot be
/// trusted (see [`super::call_sites_known`]).
pub const NO_CALL_SITE: u32 = u32::MAX;

/// One inline context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InlineNode {
    /// The method (the runtime's MethodDesc, the MethodID of method events; name it through
    /// [`super::MethodDetails`]).
    pub method_id: u64,
    /// The IL offset of the call instruction in the parent's method; [`NO_CALL_SITE`] on node 0
    /// and wherever the call site is not known.
    pub il_offset: u32,
    /// The parent.
    pub parent: Parent,
}

impl InlineNode {
    /// The IL offset of the call in the parent's method, if known.
    pub fn call_site(&self) -> Option<u32> {
        (self.il_offset != NO_CALL_SITE).then_some(self.il_offset)
    }
}

/// One rich mapping: from `native_offset` on (up to the next mapping, clipped by the flat map's
/// boundaries: mappings are points, not ranges), the code belongs to node `inlinee` at IL offset
/// `il_offset` of that node's method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RichMapping {
    /// Native offset from the body's start.
    pub native_offset: u32,
    /// The node (inline context); 0 is the physical method.
    pub inlinee: u32,
    /// The IL offset in the inlinee's method.
    pub il_offset: u32,
    /// `ICorDebugInfo::SourceTypes` bits (1 sequence point, 2 stack empty, 4 call site,
    /// 0x10 call instruction).
    pub source: u8,
}

/// One step of a chain: a node and the IL offset in its method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainStep {
    /// The node's index.
    pub node: u32,
    /// The node's method (MethodID).
    pub method_id: u64,
    /// For the innermost step, the mapping's IL offset; for each outer step, the call site of
    /// the step before it (the child's `il_offset`: [`NO_CALL_SITE`] when not known, and then
    /// the step has no line).
    pub il_offset: u32,
}

impl ChainStep {
    /// The IL offset, unless it is [`NO_CALL_SITE`] (a call site not known).
    pub fn known_il_offset(&self) -> Option<u32> {
        (self.il_offset != NO_CALL_SITE).then_some(self.il_offset)
    }
}

/// The inline chain at one native offset, innermost first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    /// Innermost inlinee first; node 0 (the physical method, at the outermost call site) last,
    /// unless `parent_unknown`.
    pub steps: Vec<ChainStep>,
    /// The last step's node has [`Parent::Unknown`]: the chain stops there, short of node 0.
    pub parent_unknown: bool,
}

impl Chain {
    /// No inlined code here: the flat IL-to-native map rules.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// One body's inline tree and rich mappings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InlineTree {
    nodes: Vec<InlineNode>,
    /// Sorted by native offset; ties keep the runtime's order (the later one is the code that
    /// follows).
    mappings: Vec<RichMapping>,
    /// For a node whose parent is unknown: the first node of its sibling run (all of a run share
    /// one parent, so recovering the first recovers the run). `u32::MAX` elsewhere.
    run_head: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl InlineTree {
    /// Decode a reassembled blob (docs/rich-debug-info.md §2) and check it. Every fault is an
    /// error with the absolute offset of the field at fault (the reader's offsets):
    /// - `bad_debug_info`: counts whose records do not fit (at the count), bytes after the last
    ///   mapping, no node at all (at the node count), a `Child`, `Sibling` or `Inlinee` ordinal
    ///   ≥ the node count (at that field), a root with a sibling, two links to one node (at the
    ///   second link, in node order), and a cycle (at the link into its lowest node);
    /// - `too_deep`: a node more than [`MAX_INLINE_DEPTH`] levels below the first node of its
    ///   tree (at the link into it).
    pub fn parse(blob: Reader<'_>) -> Result<InlineTree> {
        Self::from_records(blob.offset(), read_blob(blob)?)
    }

    /// The tree of decoded records (the wire blob's, or a stored chunk's: stored.rs), checked as
    /// [`Self::parse`] says; `head` is where the node count is (for a tree without nodes).
    pub(crate) fn from_records(head: u64, records: Blob) -> Result<InlineTree> {
        let Blob { nodes: raw, mappings: raw_maps } = records;
        let n = raw.len();
        if n == 0 {
            // The JIT always reports its root context (a tier-0 body has a lone root).
            return Err(Error::new(ErrorKind::BadDebugInfo, head, "an inline tree with its root node"));
        }
        let bad = |at: u64, what: &'static str| Error::new(ErrorKind::BadDebugInfo, at, what);
        // Ordinals in range, and at most one link into each node. `incoming[i]` is the offset of
        // the one field that links to i (for errors about i).
        let mut incoming: Vec<u64> = vec![u64::MAX; n];
        for (at, node) in &raw {
            for (link, field, what) in [(node.child, at.child, "a Child ordinal below the node count"), (node.sibling, at.sibling, "a Sibling ordinal below the node count")] {
                if link == 0 {
                    continue;
                }
                let slot = incoming.get_mut(link as usize).ok_or_else(|| bad(field, what))?;
                if *slot != u64::MAX {
                    return Err(bad(field, "one link into each inline tree node"));
                }
                *slot = field;
            }
        }
        if let Some((at, root)) = raw.first() {
            if root.sibling != 0 {
                return Err(bad(at.sibling, "a root node without a sibling"));
            }
        }
        // Parents and depths by walking from each node no link reaches: node 0 first, then the
        // heads of the pieces dotnet/runtime#98755 cut off. Each node has at most one link into it, so each is
        // reached at most once; what is never reached lies on a cycle.
        let mut parent: Vec<Option<Parent>> = vec![None; n];
        let mut depth: Vec<u32> = vec![0; n];
        let mut run_head: Vec<u32> = vec![NONE; n];
        let child_of = |i: u32| raw.get(i as usize).map_or(0, |(_, r)| r.child);
        let sibling_of = |i: u32| raw.get(i as usize).map_or(0, |(_, r)| r.sibling);
        let mut work: Vec<u32> = Vec::new();
        // The blob counts its nodes in a u32, so every index fits one.
        for start in 0..u32::try_from(n).unwrap_or(u32::MAX) {
            let reached = incoming.get(start as usize).is_some_and(|&o| o != u64::MAX);
            if reached {
                continue;
            }
            // A head and its sibling run share one parent: the root's is none; an orphan's is
            // unknown.
            if start == 0 {
                if let Some(slot) = parent.first_mut() {
                    *slot = Some(Parent::Root);
                }
                work.push(0);
            } else {
                let mut cur = start;
                while cur != 0 {
                    let field = incoming.get(cur as usize).copied().unwrap_or(0);
                    match parent.get_mut(cur as usize) {
                        Some(slot @ None) => *slot = Some(Parent::Unknown),
                        _ => return Err(bad(field, "an inline tree without cycles")),
                    }
                    if let Some(h) = run_head.get_mut(cur as usize) {
                        *h = start;
                    }
                    work.push(cur);
                    cur = sibling_of(cur);
                }
            }
            while let Some(x) = work.pop() {
                let d = depth.get(x as usize).copied().unwrap_or(0);
                let mut c = child_of(x);
                while c != 0 {
                    let field = incoming.get(c as usize).copied().unwrap_or(0);
                    match parent.get_mut(c as usize) {
                        Some(slot @ None) => *slot = Some(Parent::Node(x)),
                        _ => return Err(bad(field, "an inline tree without cycles")),
                    }
                    let cd = d.saturating_add(1);
                    if cd > MAX_INLINE_DEPTH {
                        return Err(Error::new(ErrorKind::TooDeep, field, "inline nesting at most 100 levels deep"));
                    }
                    if let Some(slot) = depth.get_mut(c as usize) {
                        *slot = cd;
                    }
                    work.push(c);
                    c = sibling_of(c);
                }
            }
        }
        let mut nodes = Vec::with_capacity(n);
        for (i, (_, r)) in raw.iter().enumerate() {
            let Some(p) = parent.get(i).copied().flatten() else {
                // Every node of a cycle has one link into it; name the lowest one's.
                let field = incoming.get(i).copied().unwrap_or(0);
                return Err(bad(field, "an inline tree without cycles"));
            };
            nodes.push(InlineNode { method_id: r.method, il_offset: r.il_offset, parent: p });
        }
        let mut mappings = Vec::with_capacity(raw_maps.len());
        for (at, m) in &raw_maps {
            if m.inlinee as usize >= n {
                return Err(bad(*at, "an Inlinee ordinal below the node count"));
            }
            mappings.push(RichMapping { native_offset: m.native_offset, inlinee: m.inlinee, il_offset: m.il_offset, source: m.source });
        }
        // Stable: among mappings at one native offset, the runtime's last is the one whose code
        // follows (the JIT records them in emission order).
        mappings.sort_by_key(|m| m.native_offset);
        Ok(InlineTree { nodes, mappings, run_head })
    }

    /// The nodes; node 0 is the physical method.
    pub fn nodes(&self) -> &[InlineNode] {
        &self.nodes
    }

    /// The rich mappings, sorted by native offset.
    pub fn mappings(&self) -> &[RichMapping] {
        &self.mappings
    }

    /// The mapping in force at `native_offset`: the last one at or before it. `None` before the
    /// first. Callers clip with the body's size and the flat map's boundaries.
    pub fn mapping_at(&self, native_offset: u32) -> Option<&RichMapping> {
        let i = self.mappings.partition_point(|m| m.native_offset <= native_offset);
        self.mappings.get(i.checked_sub(1)?)
    }

    /// Does the mapping in force at `native_offset` still hold there? Mappings are points, not
    /// ranges: one holds from its native offset up to the next mapping, clipped by the flat map's
    /// boundaries (docs/rich-debug-info.md), so a mapping before the last boundary of `map` at or
    /// before the offset is stale, and the flat map rules there. `false` before the first mapping.
    pub fn holds_at(&self, map: &[crate::base::ilmap::MapEntry], native_offset: u32) -> bool {
        let Some(m) = self.mapping_at(native_offset) else { return false };
        let boundary = map.iter().flat_map(|e| [e.native_start, e.native_end]).filter(|&b| b <= native_offset).max().unwrap_or(0);
        m.native_offset >= boundary
    }

    /// Forget every call site (each node's `il_offset` but node 0's becomes [`NO_CALL_SITE`]):
    /// for a tree from a runtime whose JIT does not fill them in ([`super::call_sites_known`]).
    /// Chains then still name every inlinee and its own IL offset, but an outer step's IL offset
    /// (and so its line) is unknown, and [`Self::recover_parents`] leaves the orphans alone.
    /// Returns how many nodes had one.
    pub fn forget_call_sites(&mut self) -> usize {
        let mut forgotten = 0usize;
        for n in self.nodes.iter_mut().skip(1) {
            if n.il_offset != NO_CALL_SITE {
                n.il_offset = NO_CALL_SITE;
                forgotten = forgotten.saturating_add(1);
            }
        }
        forgotten
    }

    /// Give back forgotten call sites ([`Self::forget_call_sites`]) where the parent's IL settles
    /// them: `sites(parent, callee)` answers the IL offsets in the parent's method of the calls
    /// the IL reader accepts as calls to `callee` (`None`: it cannot tell, e.g. a call it cannot
    /// decide or no IL at hand). A node gets an offset only when its parent is known, no sibling
    /// has the same method, and the answer is exactly one offset; otherwise it stays unknown.
    /// Returns how many nodes got one.
    pub fn recover_call_sites(&mut self, mut sites: impl FnMut(u64, u64) -> Option<Vec<u32>>) -> usize {
        let mut recovered = 0usize;
        for i in 1..self.nodes.len() {
            let Some(&n) = self.nodes.get(i) else { break };
            let Parent::Node(p) = n.parent else { continue };
            if n.call_site().is_some() {
                continue;
            }
            let twins = self.nodes.iter().filter(|m| m.parent == n.parent && m.method_id == n.method_id).count();
            let Some(&parent) = self.nodes.get(p as usize) else { continue };
            if twins != 1 {
                continue;
            }
            if let Some([at]) = sites(parent.method_id, n.method_id).as_deref() {
                if let Some(slot) = self.nodes.get_mut(i) {
                    slot.il_offset = *at;
                    recovered = recovered.saturating_add(1);
                }
            }
        }
        recovered
    }

    /// How many nodes have an unknown parent.
    pub fn unknown_parents(&self) -> usize {
        self.nodes.iter().filter(|n| n.parent == Parent::Unknown).count()
    }

    /// Native offset → the chain, innermost inlinee first, node 0 last: each step is a node and
    /// the IL offset in its method (the mapping's for the innermost, the child's call site for
    /// each parent). Empty when no mapping is in force there or the mapping's context is node 0
    /// itself (then the flat map rules). Never longer than the node count; a chain that reaches
    /// a node with [`Parent::Unknown`] ends with that node and says so.
    pub fn chain(&self, native_offset: u32) -> Chain {
        match self.mapping_at(native_offset) {
            Some(m) => self.chain_from(m.inlinee, m.il_offset),
            None => Chain::default(),
        }
    }

    /// The chain from `node` at `il_offset` outwards (empty for node 0 or an index out of range).
    pub fn chain_from(&self, node: u32, il_offset: u32) -> Chain {
        let mut chain = Chain::default();
        if node == 0 {
            return chain;
        }
        let (mut cur, mut il) = (node, il_offset);
        // Bounded by the node count: parse rejected cycles, and recovery adds none.
        for _ in 0..self.nodes.len() {
            let Some(n) = self.nodes.get(cur as usize) else { break };
            chain.steps.push(ChainStep { node: cur, method_id: n.method_id, il_offset: il });
            match n.parent {
                Parent::Root => return chain,
                Parent::Unknown => {
                    chain.parent_unknown = true;
                    return chain;
                }
                Parent::Node(p) => {
                    il = n.il_offset;
                    cur = p;
                }
            }
        }
        // Only a tree broken after parse could get here: say the chain is cut.
        chain.parent_unknown = true;
        chain
    }

    /// Recover orphans' parents by the rule of docs/rich-debug-info.md: ordinals follow creation order, so
    /// a parent has a lower index, and the parent's IL at the orphan's `il_offset` is a `call`,
    /// `callvirt` or `newobj` to the orphan's method. `is_call(caller, il_offset, callee)` answers
    /// from the caller's IL: `Some(true)` if it is such a call, `Some(false)` if not, `None` if it
    /// cannot tell (no IL at hand). An orphan's run gets a parent only when exactly one candidate
    /// says yes and none cannot tell; otherwise it stays [`Parent::Unknown`]. Candidates inside
    /// the orphan run's own subtrees are skipped (no cycle can arise). The work is bounded: at most
    /// `64 · nodes + 4096` questions and steps up the tree in all, after which the rest stay
    /// unknown, as does a run whose head has no call site ([`NO_CALL_SITE`]). Returns how many
    /// nodes got a parent.
    pub fn recover_parents(&mut self, mut is_call: impl FnMut(u64, u32, u64) -> Option<bool>) -> usize {
        let mut budget = self.nodes.len().saturating_mul(64).saturating_add(4096);
        let mut recovered: usize = 0;
        for head in 1..u32::try_from(self.nodes.len()).unwrap_or(u32::MAX) {
            if self.run_head.get(head as usize) != Some(&head) {
                continue;
            }
            let Some(&orphan) = self.nodes.get(head as usize) else { continue };
            // Without its call site there is no evidence to weigh: the run stays unknown.
            if orphan.parent != Parent::Unknown || orphan.call_site().is_none() {
                continue;
            }
            let mut found: Option<u32> = None;
            let mut undecided = false;
            for cand in 0..head {
                if budget == 0 {
                    undecided = true;
                    break;
                }
                if self.in_subtree_of(cand, head, &mut budget) {
                    continue;
                }
                let Some(c) = self.nodes.get(cand as usize) else { break };
                budget = budget.saturating_sub(1);
                match is_call(c.method_id, orphan.il_offset, orphan.method_id) {
                    Some(true) if found.is_none() => found = Some(cand),
                    Some(true) | None => {
                        undecided = true;
                        break;
                    }
                    Some(false) => {}
                }
            }
            if let (Some(p), false) = (found, undecided) {
                for i in 0..self.nodes.len() {
                    if self.run_head.get(i) == Some(&head) {
                        if let Some(n) = self.nodes.get_mut(i) {
                            n.parent = Parent::Node(p);
                            recovered = recovered.saturating_add(1);
                        }
                        if let Some(h) = self.run_head.get_mut(i) {
                            *h = NONE;
                        }
                    }
                }
            }
        }
        recovered
    }

    /// Whether `node` lies in the piece headed by the run of `head`: its ancestry ends at a node
    /// of that run (any of the run, not only `head`: the whole run gets the new parent, so a
    /// candidate below a sibling of `head` would close a cycle). Bounded by the node count.
    /// Each step up costs one unit of `budget`; when it runs out the answer is "inside" (the
    /// candidate is refused, never risked).
    fn in_subtree_of(&self, node: u32, head: u32, budget: &mut usize) -> bool {
        let mut cur = node;
        for _ in 0..=self.nodes.len() {
            if *budget == 0 {
                return true;
            }
            *budget = budget.saturating_sub(1);
            match self.nodes.get(cur as usize).map(|n| n.parent) {
                Some(Parent::Node(p)) => cur = p,
                Some(Parent::Unknown) => return self.run_head.get(cur as usize) == Some(&head),
                _ => return false,
            }
        }
        // Not reachable on a checked tree; refuse the candidate rather than risk a cycle.
        true
    }
}

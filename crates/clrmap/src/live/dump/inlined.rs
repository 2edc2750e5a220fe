//! Inlined frames of a core's jitted frames (`dump --inlines`, [`super::Options::inlines`]).
//!
//! A process run with `DOTNET_RichDebugInfo=1` keeps each jitted body's inline tree and rich
//! mappings in the body's debug info ([`crate::formats::r2r::jitted_debug_info`],
//! [`InlineTree::parse_stored`]); the core holds them. Their nodes name MethodDescs, named here as
//! every frame's MethodDesc is (names.rs). Then the rule is `symbolize --inlines`'s
//! (answers/symbolizer/inlined.rs), so that a core and a trace of the same process give the same
//! chain:
//! 1. a tree from a runtime that does not fill in call sites ([`call_sites_known`]) has them
//!    forgotten; orphans get back the parents their callers' IL settles, and call sites the IL
//!    settles are given back ([`il::recover_tree`], [`il::recover_call_sites`]);
//! 2. the native offset is the frame rule's (a return address at the call, `offset - 1`);
//!    inside the flat map's prolog or epilog, or where the rich mapping no longer holds
//!    ([`InlineTree::holds_at`]), there is no chain;
//! 3. the chain's inlinees, innermost first, each at its IL offset; the frame itself at the
//!    outermost call site where the chain reaches it and that call site is known.

use std::collections::HashMap;
use std::path::PathBuf;

use super::{DumpFrame, DumpInlinedFrame};
use crate::base::ilmap::{runtime_il_offset, IlOffset, MapEntry};
use crate::formats::inlines::{call_sites_known, il, InlineTree};

/// A jitted body's inline tree, as a core holds it, ready for its frames.
#[derive(Clone, Debug, Default)]
pub struct BodyInlines {
    /// The tree.
    pub tree: InlineTree,
    /// Each node's method (by node index; node 0 is the body's own), where its MethodDesc reads.
    pub methods: Vec<Option<NodeMethod>>,
    /// The body's flat IL-to-native map and code size.
    pub map: Vec<MapEntry>,
    /// The code size.
    pub code_size: u32,
}

/// A node's method, from its MethodDesc.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeMethod {
    /// Its MethodDef token (none for a dynamic method).
    pub token: Option<u32>,
    /// Its module's path.
    pub module: Option<String>,
    /// A dynamic method's name (it has no token to name it by).
    pub name: Option<String>,
}

/// The most module bytes read for the IL that settles orphans and call sites.
const MAX_IL_BYTES: u64 = 1 << 30;

/// Give every frame with a tree its inlined frames (unnamed and without lines yet: names.rs and
/// lines.rs do those, as for every frame). `runtime_major` decides whether the trees' call sites
/// can be trusted.
pub(super) fn add_inlined<'f>(frames: impl Iterator<Item = &'f mut DumpFrame>, runtime_major: Option<u16>) {
    let mut frames: Vec<&mut DumpFrame> = frames.filter(|f| f.jit_inlines.is_some()).collect();
    if frames.is_empty() {
        return;
    }
    let known = call_sites_known(runtime_major);
    // The modules whose IL may settle orphans and call sites, each read once.
    let mut paths: Vec<PathBuf> = Vec::new();
    for f in frames.iter() {
        if let Some(b) = &f.jit_inlines {
            paths.extend(b.methods.iter().flatten().filter_map(|m| m.module.as_ref().map(PathBuf::from)));
        }
    }
    paths.sort();
    paths.dedup();
    let bytes = il::read_modules(paths.iter().map(PathBuf::as_path), MAX_IL_BYTES);
    let modules = il::IlModules::new(&bytes);
    // One body's tree is settled once, however many frames run in it.
    let mut settled: HashMap<(u64, u32), InlineTree> = HashMap::new();
    for f in frames.iter_mut() {
        let Some(b) = f.jit_inlines.take() else { continue };
        let key = (f.ip.wrapping_sub(f.native_offset.unwrap_or(0)), b.code_size);
        let tree = settled.entry(key).or_insert_with(|| settle(&b, known, &modules)).clone();
        chain_into(f, &b, &tree);
    }
}

/// The body's tree with its call sites forgotten where they cannot be trusted, and what the IL
/// settles given back.
fn settle(b: &BodyInlines, known: bool, modules: &il::IlModules<'_>) -> InlineTree {
    let mut tree = b.tree.clone();
    if !known {
        tree.forget_call_sites();
    }
    let mut places: HashMap<u64, (PathBuf, u32)> = HashMap::new();
    for (node, m) in tree.nodes().iter().zip(&b.methods) {
        if let Some(NodeMethod { token: Some(token), module: Some(path), .. }) = m {
            places.entry(node.method_id).or_insert_with(|| (PathBuf::from(path), *token));
        }
    }
    let at = |mid: u64| places.get(&mid).cloned();
    il::recover_tree(&mut tree, modules, at);
    il::recover_call_sites(&mut tree, modules, at);
    tree
}

/// One frame's chain, by the frame rule at its native offset.
fn chain_into(f: &mut DumpFrame, b: &BodyInlines, tree: &InlineTree) {
    let Some(native) = f.native_offset.and_then(|o| u32::try_from(o).ok()) else { return };
    if b.map.is_empty() {
        return;
    }
    let offset = if f.leaf { native } else { native.saturating_sub(1) };
    let (region, _) = runtime_il_offset(&b.map, b.code_size, offset);
    if matches!(region, Some(IlOffset::Prolog | IlOffset::Epilog)) || !tree.holds_at(&b.map, offset) {
        return;
    }
    let chain = tree.chain(offset);
    let (inner, root) = match (chain.parent_unknown, chain.steps.split_last()) {
        (_, None) => (&[][..], None),
        (false, Some((root, inner))) => (inner, Some(root)),
        (true, Some(_)) => (chain.steps.as_slice(), None),
    };
    for step in inner {
        let who = b.methods.get(step.node as usize).and_then(Option::as_ref);
        f.inlined.push(DumpInlinedFrame {
            module: who.and_then(|w| w.module.clone()),
            token: who.and_then(|w| w.token),
            method: who.and_then(|w| w.name.clone()),
            il_offset: step.known_il_offset(),
            ..DumpInlinedFrame::default()
        });
    }
    if let Some(il) = root.and_then(|r| r.known_il_offset()) {
        f.il_offset = Some(il);
    }
}

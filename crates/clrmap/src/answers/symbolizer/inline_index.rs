//! The JIT's inline trees of a source, by body, and their inlinees named: what `--inlines` and
//! the profile line rule ask of a body beyond its flat map.
//!
//! Kept apart from the code index ([`super::code_index`]): most sources carry no tree, and an
//! answer without `--inlines` never looks here. Inlinees name their modules by index in
//! [`super::modules::Modules`], which gives them lines like any body's module.

use std::collections::HashMap;
use std::sync::Arc;

use crate::base::ilmap::MapStore;
use crate::formats::inlines::InlineTree;

use super::inlined::{InlineeMethod, SourceInlines};
use super::modules::{Module, Modules};
use super::profile_lines::BodyTree;
use super::source::RecordedPdbs;

/// (pid, an id: a body's code start or an inlinee's MethodID).
type Key = (Option<u32>, u64);

/// An inlinee, named from its defining module's metadata, with that module (for its lines).
#[derive(Debug)]
pub(super) struct Inlinee {
    pub(super) token: u32,
    pub(super) name: Option<String>,
    pub(super) module: Option<usize>,
    /// No assembly of the module's recorded build was found, and these are the places looked
    /// at: why `name` is `None` (noted when the inlinee is answered).
    pub(super) missing: Option<Vec<String>>,
}

/// Inline trees by body, and the inlinees they name.
#[derive(Debug)]
pub(super) struct InlineIndex {
    /// The JIT's inline trees by (pid, code start).
    trees: HashMap<Key, Arc<InlineTree>>,
    /// The same trees by body index, with each body's flat-map boundaries, for the query.
    body_trees: Vec<Option<BodyTree>>,
    inlinees: Vec<Inlinee>,
    /// (pid, MethodID) → index in `inlinees`.
    inlinee_index: HashMap<Key, usize>,
    /// Per body with a tree: each node's index in `inlinees`, looked up once (no hashing per
    /// address).
    body_nodes: Vec<Box<[Option<usize>]>>,
}

impl InlineIndex {
    /// Tie a source's trees to the bodies of `store`, and name their inlinees (adding to
    /// `modules` each inlinee module that has no body).
    pub(super) fn new(inlines: SourceInlines, store: &MapStore, modules: &mut Modules, pdbs: &RecordedPdbs, mvids: &HashMap<String, [u8; 16]>) -> InlineIndex {
        let named = name_inlinees(&inlines.methods, modules, pdbs, mvids);
        let trees = inlines.trees;
        let body_trees: Vec<Option<BodyTree>> = store.bodies().iter().map(|b| Some(BodyTree::new(Arc::clone(trees.get(&(b.pid, b.start?))?), &b.map))).collect();
        let (keys, inlinees): (Vec<Key>, Vec<Inlinee>) = named.into_iter().unzip();
        let inlinee_index: HashMap<Key, usize> = keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect();
        let body_nodes = store
            .bodies()
            .iter()
            .zip(&body_trees)
            .map(|(b, t)| t.as_ref().map(|t| t.tree.nodes().iter().map(|n| inlinee_index.get(&(b.pid, n.method_id)).copied()).collect()).unwrap_or_default())
            .collect();
        InlineIndex { trees, body_trees, inlinees, inlinee_index, body_nodes }
    }

    /// No body has a tree.
    pub(super) fn is_empty(&self) -> bool {
        self.trees.is_empty()
    }

    /// The tree of the body at `index`.
    pub(super) fn tree(&self, index: usize) -> Option<&BodyTree> {
        self.body_trees.get(index).and_then(Option::as_ref)
    }

    /// The inlinee of node `node` of the tree of the body at `index`.
    pub(super) fn node_inlinee(&self, index: usize, node: usize) -> Option<&Inlinee> {
        self.body_nodes.get(index).and_then(|n| n.get(node).copied().flatten()).and_then(|i| self.inlinees.get(i))
    }

    /// An inlinee by process and MethodID.
    pub(super) fn inlinee(&self, pid: Option<u32>, method_id: u64) -> Option<&Inlinee> {
        self.inlinee_index.get(&(pid, method_id)).and_then(|&i| self.inlinees.get(i))
    }
}

/// Name each inlinee from its defining module's metadata, adding a module for each inlinee
/// module that has no body in the source (so its PDB gives lines the same way). An assembly is
/// the module's only where it is of the recorded build: its CodeView GUID is the recorded PDB's
/// (traces), its MVID the recorded one (captures); otherwise the inlinee has no name.
fn name_inlinees(methods: &HashMap<Key, InlineeMethod>, modules: &mut Modules, pdbs: &RecordedPdbs, mvids: &HashMap<String, [u8; 16]>) -> HashMap<Key, Inlinee> {
    let mut by_path: HashMap<String, usize> = modules.iter().enumerate().filter_map(|(i, m)| Some((m.path.as_ref()?.to_string_lossy().into_owned(), i))).collect();
    // Per module: its metadata's bytes, read once (None: no assembly of its build found).
    let mut assemblies: HashMap<usize, Option<Vec<u8>>> = HashMap::new();
    let mut out = HashMap::with_capacity(methods.len());
    for (key, m) in methods {
        let module = m.module_path.as_ref().map(|p| match by_path.get(p) {
            Some(&i) => i,
            None => {
                let name = p.rsplit(['/', '\\']).next().map(str::to_owned);
                let i = modules.push(Module::recorded(name, p, pdbs.get(p).cloned(), mvids.get(p).copied()));
                by_path.insert(p.clone(), i);
                i
            }
        });
        let name = module.and_then(|i| {
            let bytes = assemblies.entry(i).or_insert_with(|| modules.get(i).and_then(|m| m.query().assembly(modules.symbols())));
            let md = crate::formats::metadata::Metadata::parse(bytes.as_deref()?).ok()?;
            md.method_name(m.token)
        });
        let missing = module
            .filter(|i| assemblies.get(i).is_some_and(Option::is_none))
            .and_then(|i| modules.get(i))
            .map(|m| m.query().assembly_candidates(modules.symbols()).map(|p| p.display().to_string()).collect());
        out.insert(*key, Inlinee { token: m.token, name, module, missing });
    }
    out
}

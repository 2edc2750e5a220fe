//! Inlined frames (docs/output.md#inlined-frames, `--inlines`): the JIT's inline trees ([`crate::formats::inlines`]) of a
//! trace or capture, tied to its bodies, and their inlinees named and given lines like every other
//! method.
//!
//! The rule, for an address in a body that has a tree (docs/rich-debug-info.md):
//! 1. the native offset is the one the frame rule looks up ([`super::FrameKind`]: the call for a
//!    return address);
//! 2. inside the flat map's prolog or epilog the code is the physical method's own: no chain;
//! 3. otherwise the last rich mapping at or before the offset names an inline context and an IL
//!    offset in it ([`InlineTree::chain`]); context 0 (the physical method) gives no chain, and
//!    the flat map's answer stands;
//! 4. each inlinee, innermost first, is named by its MethodDef token in the module that defines
//!    it, and gets the line of its IL offset by the runtime's rule (the last visible sequence
//!    point at or before it); each parent's IL offset is the call instruction's;
//! 5. the physical method is answered at the outermost call site, by the same rule.
//!
//! A chain cut by a node whose parent is unknown (dotnet/runtime#98755) gives the inlinees it
//! knows, and the physical frame keeps the flat map's answer: nothing is guessed.

use std::collections::HashMap;
use std::sync::Arc;

use crate::formats::inlines::InlineTree;

/// One inlinee: who it is, as the source recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineeMethod {
    /// Its MethodDef token, in its defining module.
    pub token: u32,
    /// The defining module's path in the traced process.
    pub module_path: Option<String>,
}

/// A source's inline trees by body, and its inlinees by MethodID: what [`super::OpenedSource`]
/// carries for `--inlines`. Keys carry the bodies' process id (a capture can hold several
/// processes; a trace's bodies carry its one process id).
#[derive(Clone, Debug, Default)]
pub struct SourceInlines {
    /// (pid, the body's code start) → its tree.
    pub trees: HashMap<(Option<u32>, u64), Arc<InlineTree>>,
    /// (pid, MethodID) → the inlinee.
    pub methods: HashMap<(Option<u32>, u64), InlineeMethod>,
}

impl SourceInlines {
    /// No body has a tree.
    pub fn is_empty(&self) -> bool {
        self.trees.is_empty()
    }

    /// A trace's trees and inlinees. `type_modules` is BulkType's TypeID → ModuleID: the module
    /// that defines an inlinee is its type's (a generic instantiation over another module's types
    /// may be *loaded* by that other module, which MethodDetails names); without it, the loader
    /// module.
    pub fn from_trace(bodies: &[crate::base::ilmap::CodeBody], trace: &crate::formats::nettrace::TraceInlines, type_modules: &HashMap<u64, u64>) -> SourceInlines {
        let mut out = SourceInlines::default();
        for body in bodies {
            let (Some(start), Some(tree)) = (body.start, trace.tree_of(body)) else { continue };
            for node in tree.nodes().iter().skip(1) {
                let key = (body.pid, node.method_id);
                if out.methods.contains_key(&key) {
                    continue;
                }
                let Some(d) = trace.inlines.method(node.method_id) else { continue };
                let module = type_modules.get(&d.type_id).copied().unwrap_or(d.loader_module_id);
                out.methods.insert(key, InlineeMethod { token: d.token, module_path: trace.module_path(module).map(str::to_owned) });
            }
            out.trees.insert((body.pid, start), Arc::new(tree.clone()));
        }
        out
    }
}

impl SourceInlines {
    /// Give back, from the IL, the call sites a runtime did not fill in
    /// ([`crate::formats::inlines::call_sites_known`]): where a node's parent's IL has exactly one call to
    /// the node's method ([`crate::formats::inlines::il::recover_call_sites`]). Each tree's root is placed
    /// by its body (`bodies`: module path and token), each inlinee by what the source recorded.
    /// Returns how many call sites were recovered.
    pub fn recover_call_sites(&mut self, bodies: &[crate::base::ilmap::CodeBody]) -> usize {
        use crate::formats::inlines::il::{read_modules, recover_call_sites, IlModules};
        use std::path::PathBuf;
        let forgotten = |t: &InlineTree| t.nodes().iter().skip(1).any(|n| n.call_site().is_none() && n.parent != crate::formats::inlines::Parent::Unknown);
        let mut roots: HashMap<(Option<u32>, u64), (u64, PathBuf, u32)> = HashMap::new();
        for b in bodies {
            let (Some(start), Some(fid), Some(path)) = (b.start, b.function_id, b.module_path.as_ref()) else { continue };
            if self.trees.get(&(b.pid, start)).is_some_and(|t| forgotten(t)) {
                roots.insert((b.pid, start), (fid, PathBuf::from(path), b.token));
            }
        }
        if roots.is_empty() {
            return 0;
        }
        let mut paths: Vec<PathBuf> = roots.values().map(|(_, p, _)| p.clone()).collect();
        for (key, _) in roots.iter() {
            let Some(t) = self.trees.get(key) else { continue };
            paths.extend(t.nodes().iter().skip(1).filter_map(|n| self.methods.get(&(key.0, n.method_id))?.module_path.as_ref().map(PathBuf::from)));
        }
        let bytes = read_modules(paths.iter().map(PathBuf::as_path), 1 << 30);
        let modules = IlModules::new(&bytes);
        let mut recovered = 0usize;
        for (key, (root_id, root_path, root_token)) in roots {
            let methods = &self.methods;
            let Some(tree) = self.trees.get_mut(&key) else { continue };
            let got = recover_call_sites(Arc::make_mut(tree), &modules, |mid| {
                if mid == root_id {
                    return Some((root_path.clone(), root_token));
                }
                let m = methods.get(&(key.0, mid))?;
                Some((PathBuf::from(m.module_path.as_ref()?), m.token))
            });
            recovered = recovered.saturating_add(got);
        }
        recovered
    }
}

#[cfg(feature = "serde")]
impl SourceInlines {
    /// A capture's trees and inlinees: the profiler recorded each event 189 payload with its
    /// body's code start, and each MethodDetails with the inlinee's module and token as the
    /// runtime answered `GetFunctionInfo` (so the defining module, whatever loaded it). On a
    /// runtime whose JIT does not fill in the call sites (`runtime_major`, the capture's:
    /// [`crate::formats::inlines::call_sites_known`]) the trees come with them forgotten.
    pub fn from_capture(recorded: &[crate::formats::capture::CapturedInline], runtime_major: Option<u16>) -> SourceInlines {
        use crate::base::read::Reader;
        use crate::formats::capture::InlineEventKind;
        let mut out = SourceInlines::default();
        let mut collectors: HashMap<u32, crate::formats::inlines::InlineCollector> = HashMap::new();
        // (pid, start) → (MethodID, NativeCodeId), from each chunk's header (docs/rich-debug-info.md §2).
        let mut starts: HashMap<(u32, u64), (u64, u64)> = HashMap::new();
        for c in recorded {
            let collector = collectors.entry(c.pid).or_default();
            match c.kind {
                InlineEventKind::RichDebugInfo => {
                    let _ = collector.rich_debug_info(Reader::new(&c.payload, 0));
                    let mut r = Reader::new(&c.payload, 0);
                    let (Ok(()), Ok(method_id), Ok(code_id)) = (r.skip(2, "ClrInstanceID"), r.u64("MethodID"), r.u64("NativeCodeId")) else { continue };
                    if let Some(start) = c.start {
                        starts.insert((c.pid, start), (method_id, code_id));
                    }
                }
                InlineEventKind::MethodDetails => {
                    let _ = collector.method_details(Reader::new(&c.payload, 0));
                    if let Some(token) = c.token {
                        out.methods.insert((Some(c.pid), c.method_id), InlineeMethod { token, module_path: c.module.clone() });
                    }
                }
                // Named by the profiler (a session without MethodDetails): no payload.
                InlineEventKind::Inlinee => {
                    if let Some(token) = c.token {
                        out.methods.insert((Some(c.pid), c.method_id), InlineeMethod { token, module_path: c.module.clone() });
                    }
                }
            }
        }
        let known = crate::formats::inlines::call_sites_known(runtime_major);
        let finished: HashMap<u32, crate::formats::inlines::Inlines> = collectors
            .into_iter()
            .map(|(pid, c)| {
                let mut inlines = c.finish();
                if !known {
                    inlines.forget_call_sites();
                }
                (pid, inlines)
            })
            .collect();
        for ((pid, start), (method_id, code_id)) in starts {
            if let Some(tree) = finished.get(&pid).and_then(|i| i.tree(method_id, code_id)) {
                out.trees.insert((Some(pid), start), Arc::new(tree.clone()));
            }
        }
        out
    }
}

/// A BulkType event's (TypeID, ModuleID) pairs ([`crate::formats::nettrace::bulk_type`]). A
/// value cut short ends the list: the pairs before it are kept.
pub fn bulk_type_modules(e: &crate::formats::nettrace::Event<'_>, out: &mut HashMap<u64, u64>) {
    if e.meta.provider != crate::formats::nettrace::RUNTIME || e.meta.event_id != 15 {
        return;
    }
    out.extend(crate::formats::nettrace::bulk_type::values(e.payload).map(|t| (t.type_id, t.module_id)));
}

/// One inlined frame of an answer (docs/output.md#inlined-frames): an inlinee at an IL offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct InlinedFrame<'s> {
    /// The inlinee and its line (in JSON, its fields are the inlined frame's own). Its IL offset
    /// is the one in the inlinee: the mapping's for the innermost, the call site of the frame
    /// inside it for the others (`None` where the runtime did not give that call site:
    /// [`crate::formats::inlines::call_sites_known`]).
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub at: super::SourceLocation<'s>,
}

//! The JIT's inline trees: which methods were inlined into a jitted body, where, and which native
//! code belongs to which of them ("rich debug info", .NET 7 and later; docs/rich-debug-info.md).
//!
//! The runtime reports them, with `DOTNET_RichDebugInfo=1` at start, as event 189
//! (`JittedMethodRichDebugInfo`, provider Microsoft-Windows-DotNETRuntimePrivate, keyword
//! 0x40000), cut into chunks, and names the inlined MethodDescs with `MethodDetails` (runtime
//! provider, event 72, keyword 0x4000000000). An [`InlineCollector`] takes both payloads, from a
//! trace or from a profiler capture that recorded them, and [`InlineCollector::finish`] gives the
//! [`Inlines`]: one [`InlineTree`] per (MethodID, NativeCodeId), and the details by MethodID.
//! [`InlineTree::chain`] answers native offset → inline chain, innermost first.
//!
//! * raw.rs: the wire records and their sources; blob.rs: reading a blob; stored.rs: the same
//!   records as the runtime stores them with a jitted body's debug info
//!   ([`InlineTree::parse_stored`], what a core holds); tree.rs: the checks and the chain; details.rs: MethodDetails; assemble.rs: chunk reassembly; il.rs: the IL
//!   evidence that recovers the parents dotnet/runtime#98755 cut off ([`il::recover_tree`]).
//!
//! Hostile input never loops or panics: every count is checked against the bytes left before
//! anything is allocated, every ordinal against the node count, cycles and double links are
//! errors, nesting is bounded ([`MAX_INLINE_DEPTH`]), and chunk sets that cannot be completed are
//! dropped and counted.

mod assemble;
mod blob;
mod details;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod fuzzcheck;
pub mod il;
pub mod raw;
mod stored;
mod tree;

use std::collections::HashMap;

pub use details::MethodDetails;
pub use stored::encode_stored;
pub use tree::{Chain, ChainStep, InlineNode, InlineTree, Parent, RichMapping, MAX_INLINE_DEPTH, NO_CALL_SITE};

use crate::base::read::{Error, Reader, Result};

/// Whether the inline trees of a runtime of this major version carry true call sites (each
/// node's `ILOffset`: the IL offset of the call in the parent's method). `None` (not known) is
/// taken as yes, as before .NET 10.
///
/// .NET 10 does not fill them in. The JIT copies a node's `ILOffset` from the inline candidate's
/// info (`InlineStrategy::NewContext` in `src/coreclr/jit/inline.cpp`: `m_ActualCallOffset =
/// info->ilOffset`); in 10.0 that field is no longer set (most likely since dotnet/runtime#111782,
/// 10.0 preview 1, which removed an IL offset of the inliner's as unused), so a node carries
/// whatever the JIT's arena held. Measured on 10.0.12 (tests/dotnet/attach/Attach.cs, a live
/// trace with `DOTNET_RichDebugInfo=1`): 113 links whose parent is known, 1 whose ILOffset is a
/// call to the inlinee in the parent's IL, 111 where it is not (values such as 0xD412FF98 and
/// 0x48484848, the low half of the JIT's own heap addresses, and plausible ones such as 4 for
/// `Enumerable.Aggregate`'s call to `TryGetSpan` at 0x18); on 9.0.20, 61 confirmed and none
/// wrong of 98. The tree's shape (`Child`, `Sibling`), its methods and its rich mappings are
/// sound on 10.0.12: only the call sites are forgotten ([`Inlines::forget_call_sites`]); the
/// symbolizer gives back those the IL settles (`SourceInlines::recover_call_sites`).
pub fn call_sites_known(runtime_major: Option<u16>) -> bool {
    runtime_major.is_none_or(|m| m < 10)
}

/// A body's tree could not be read: which body, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyError {
    /// The root method's MethodID.
    pub method_id: u64,
    /// The body's NativeCodeId.
    pub native_code_id: u64,
    /// The fault; its offset is the byte's in the input the chunks came from (the trace).
    pub error: Error,
}

/// Reassembles event 189 chunks per (MethodID, NativeCodeId) and keeps MethodDetails by
/// MethodID. Feed it payloads in the order they were written; [`InlineCollector::finish`] ends it.
#[derive(Debug, Default)]
pub struct InlineCollector {
    pending: HashMap<(u64, u64), assemble::Pending>,
    out: Inlines,
}

impl InlineCollector {
    /// A collector with nothing in it.
    pub fn new() -> Self {
        Self::default()
    }

    /// One event 189 payload. An error is returned for a payload whose header cannot be read
    /// (`bad_trace`), and for the blob it completes if that is malformed (then it is also kept in
    /// [`Inlines::errors`]). A chunk set that cannot be completed is dropped and counted
    /// ([`Inlines::dropped`]).
    pub fn rich_debug_info(&mut self, payload: Reader<'_>) -> Result<()> {
        let (h, data) = assemble::chunk(payload)?;
        let key = (h.method_id, h.native_code_id);
        let pending = self.pending.entry(key).or_default();
        let outcome = pending.add(&h, data);
        if !pending.is_started() {
            self.pending.remove(&key);
        }
        if outcome.torn {
            self.out.dropped = self.out.dropped.saturating_add(1);
        }
        if outcome.duplicate {
            self.out.duplicates = self.out.duplicates.saturating_add(1);
        }
        let Some(blob) = outcome.complete else { return Ok(()) };
        match InlineTree::parse(Reader::new(&blob.bytes, 0)) {
            Ok(tree) => {
                // A second compilation with the same key (rare: the code version manager reuses
                // NativeCodeId 0 only for a method's default version) replaces the first.
                if self.out.trees.insert(key, tree).is_some() {
                    self.out.replaced = self.out.replaced.saturating_add(1);
                }
                Ok(())
            }
            Err(e) => {
                let error = blob.locate(e);
                self.out.errors.push(BodyError { method_id: h.method_id, native_code_id: h.native_code_id, error });
                Err(error)
            }
        }
    }

    /// One MethodDetails payload (`bad_trace` if it is malformed). The latest for a MethodID
    /// wins (a MethodDesc's details do not change while it lives).
    pub fn method_details(&mut self, payload: Reader<'_>) -> Result<()> {
        let d = MethodDetails::parse(payload)?;
        self.out.methods.insert(d.method_id, d);
        Ok(())
    }

    /// What was collected. Chunk sets begun and never completed (a missing chunk, no last chunk)
    /// are dropped and counted; never a panic.
    pub fn finish(self) -> Inlines {
        let mut out = self.out;
        let torn = self.pending.values().filter(|p| p.is_started()).count();
        out.dropped = out.dropped.saturating_add(torn);
        out
    }
}

/// Inline trees by (MethodID, NativeCodeId), and MethodDetails by MethodID.
#[derive(Clone, Debug, Default)]
pub struct Inlines {
    trees: HashMap<(u64, u64), InlineTree>,
    methods: HashMap<u64, MethodDetails>,
    errors: Vec<BodyError>,
    dropped: usize,
    duplicates: usize,
    replaced: usize,
}

impl Inlines {
    /// The tree of the body with this MethodID and NativeCodeId (MethodLoadVerbose V2's
    /// `ReJITID`; 0 for a method's first body).
    pub fn tree(&self, method_id: u64, native_code_id: u64) -> Option<&InlineTree> {
        self.trees.get(&(method_id, native_code_id))
    }

    /// One tree, to change (recover its orphans' parents).
    pub fn tree_mut(&mut self, method_id: u64, native_code_id: u64) -> Option<&mut InlineTree> {
        self.trees.get_mut(&(method_id, native_code_id))
    }

    /// Every tree, by (MethodID, NativeCodeId), in no particular order.
    pub fn trees(&self) -> impl Iterator<Item = ((u64, u64), &InlineTree)> {
        self.trees.iter().map(|(&k, t)| (k, t))
    }

    /// The MethodDetails of a MethodID (an inline tree node's `method_id`).
    pub fn method(&self, method_id: u64) -> Option<&MethodDetails> {
        self.methods.get(&method_id)
    }

    /// No tree and no details: the trace or capture carried no rich debug info (a 3.1 runtime, a
    /// process started without `DOTNET_RichDebugInfo=1`, or the private keyword not enabled).
    pub fn is_empty(&self) -> bool {
        self.trees.is_empty() && self.methods.is_empty()
    }

    /// How many trees there are.
    pub fn len(&self) -> usize {
        self.trees.len()
    }

    /// The bodies whose blob was malformed.
    pub fn errors(&self) -> &[BodyError] {
        &self.errors
    }

    /// How many chunk sets were dropped: torn (a conflicting chunk) or never completed.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// How many chunks came twice with the same bytes (ignored).
    pub fn duplicates(&self) -> usize {
        self.duplicates
    }

    /// How many trees replaced an earlier one of the same key.
    pub fn replaced(&self) -> usize {
        self.replaced
    }

    /// Forget every tree's call sites ([`InlineTree::forget_call_sites`]); how many there were.
    pub fn forget_call_sites(&mut self) -> usize {
        self.trees.values_mut().map(InlineTree::forget_call_sites).fold(0usize, usize::saturating_add)
    }
}

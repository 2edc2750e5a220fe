//! CPU profiles from the runtime's sampler: a trace's ThreadSample stacks
//! ([`crate::formats::nettrace::read_samples`]), every frame symbolized with its source line, aggregated
//! by stack, and written as collapsed stacks (flamegraph.pl, inferno), a speedscope file or a
//! gzipped pprof `profile.proto`.
//!
//! Frames are read by the runtime's rule: the leaf of a managed sample at its own address; the
//! callers, and the leaf of a sample taken in external (native) code, which is the return address
//! of its call out, as return addresses ([`FrameKind::ReturnAddress`], by the recorded runtime's
//! rule). Where the trace carries the JIT's inline trees, an address in inlined code gives its
//! inlinees too. A frame reads `Method (File.cs:LINE)`, or `Method` without a line; an address in
//! no known body reads as its hex (`0x7f3c5fa31f93`) for the first [`MAX_UNKNOWN_NAMES`] such
//! addresses and `[unknown]` past them.
//!
//! Memory: samples are streamed and counted into a call tree (one node per distinct stack
//! prefix), so it grows with the distinct stacks, not with the trace; the tree is bounded
//! ([`MAX_NODES`]): a sample that would need a node past it counts at its deepest known caller
//! ([`Stats::folded`]).
//!
//! ```no_run
//! use clrmap::symbolizer::Symbolizer;
//! let path = std::path::Path::new("app.nettrace");
//! let sym = Symbolizer::open(path, Default::default()).unwrap();
//! let (profile, _fault) = clrmap::profile::Profile::read(&sym, std::fs::File::open(path).unwrap(), false).unwrap();
//! profile.write_collapsed(&mut std::io::stdout().lock()).unwrap();
//! ```

mod collapsed;
mod pprof;
mod speedscope;

use std::collections::{HashMap, HashSet};
use std::io::Read;

use crate::answers::symbolizer::{FrameKind, Symbolizer};
use crate::base::read::{Error, Result};
use crate::formats::nettrace::{read_samples, IntMap, Sample};

/// Distinct unknown addresses named by their hex; past this many they are all `[unknown]`.
pub const MAX_UNKNOWN_NAMES: usize = 10_000;
/// The call tree's bound in nodes (about 40 bytes each).
pub const MAX_NODES: usize = 2 << 20;
/// Symbolized addresses kept (the cache is emptied when full).
pub const MAX_CACHED_ADDRESSES: usize = 1 << 20;
/// Stacks kept in the stack-to-node cache (emptied when full).
pub const MAX_CACHED_STACKS: usize = 1 << 20;
/// The sampling interval assumed when the trace does not say (1 ms, the runtime's default).
pub const DEFAULT_INTERVAL_NS: u64 = 1_000_000;

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `frame;frame;...;leaf COUNT` lines, root first (flamegraph.pl, inferno).
    Collapsed,
    /// speedscope's JSON file format, one sampled profile per thread.
    Speedscope,
    /// gzipped pprof `profile.proto`.
    Pprof,
}

impl Format {
    /// Every format, in the order front ends list them.
    pub const ALL: [Format; 3] = [Format::Collapsed, Format::Speedscope, Format::Pprof];

    /// True when the format keeps threads apart.
    pub fn per_thread(self) -> bool {
        !matches!(self, Format::Collapsed)
    }

    /// The format's name, as front ends take it (`--format collapsed`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Collapsed => "collapsed",
            Format::Speedscope => "speedscope",
            Format::Pprof => "pprof",
        }
    }

    /// One sentence a front end's help shows for the format: what reads it.
    pub fn about(self) -> &'static str {
        match self {
            Format::Collapsed => "`frame;frame;...;leaf COUNT` lines, root first, threads merged: for flamegraph.pl and inferno-flamegraph",
            Format::Speedscope => "speedscope's JSON file (open it at speedscope.app or in the speedscope npm package's app): one profile per thread",
            Format::Pprof => "A gzipped pprof profile.proto (go tool pprof, Pyroscope, Grafana, Parca), sample types samples/count and cpu/nanoseconds",
        }
    }

    /// The format of a [`name`](Format::name).
    ///
    /// ```
    /// use clrmap::profile::Format;
    /// assert_eq!(Format::from_name("pprof"), Some(Format::Pprof));
    /// assert!(Format::ALL.iter().all(|f| Format::from_name(f.name()) == Some(*f)));
    /// ```
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// One frame as the outputs show it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FrameInfo {
    /// `Ns.Type::Method`, or the address in hex, or `[unknown]`.
    pub name: String,
    /// The document as the PDB stores it.
    pub file: Option<String>,
    /// The line.
    pub line: Option<u32>,
    /// The frame's IL offset, as `StackFrame.GetILOffset()` reports it; kept only when asked
    /// ([`ReadOptions::il_offsets`]), since it splits a method's frames by offset.
    pub il_offset: Option<u32>,
}

impl FrameInfo {
    /// The frame's name as a function: `Method`, or `Method [IL_001a]` with its IL offset (in
    /// ildasm's label notation, lowercase hex, at least four digits).
    pub fn label(&self) -> String {
        match self.il_offset {
            Some(il) => format!("{} [IL_{il:04x}]", self.name),
            None => self.name.clone(),
        }
    }

    /// `Method (File.cs:LINE)`: the file's last path component; `Method` without a line;
    /// `Method [IL_001a] (File.cs:LINE)` with its IL offset ([`Self::label`]).
    pub fn text(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => {
                let base = f.rsplit(['/', '\\']).next().unwrap_or(f);
                format!("{} ({base}:{l})", self.label())
            }
            _ => self.label(),
        }
    }
}

/// How a profile is read ([`Profile::read_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// One call tree per thread, or all threads merged.
    pub per_thread: bool,
    /// The call tree's bound in nodes (at most [`MAX_NODES`]): past it, samples count at their
    /// deepest known caller ([`Stats::folded`]).
    pub max_nodes: usize,
    /// Count only the samples the sampler took while their thread ran managed code
    /// ([`Profile::read_running`]).
    pub running: bool,
    /// Give each managed frame its IL offset ([`FrameInfo::il_offset`]): a frame is then one IL
    /// offset of a method, not one line, and a frame without a line (no PDB) still says where in
    /// the method it was.
    pub il_offsets: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { per_thread: false, max_nodes: MAX_NODES, running: false, il_offsets: false }
    }
}

/// What was read and made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// The trace reader's counts (samples, unknown stack ids, stacks dropped...).
    pub trace: crate::formats::nettrace::Stats,
    /// Samples counted into the profile.
    pub samples: u64,
    /// Samples whose stack needed a node past [`MAX_NODES`]: counted at their deepest caller.
    pub folded: u64,
    /// Frames whose address is in no known body.
    pub unknown_frames: u64,
    /// Distinct stacks in the profile.
    pub stacks: u64,
    /// Samples the sampler took outside managed code (type external: the thread waited, or ran
    /// native code), counted or not.
    pub samples_external: u64,
    /// Those left out ([`Profile::read_running`]).
    pub samples_left_out: u64,
    /// Threads all of whose samples were left out.
    pub threads_left_out: u64,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    parent: u32,
    /// A location (or, for a thread's root, unused).
    loc: u32,
    samples: u64,
}

const NO_PARENT: u32 = u32::MAX;
const NO_NODE: u32 = u32::MAX;
/// Marks a cached node that is a caller of the stack (the tree was full): node ids are below
/// [`MAX_NODES`], far under this bit.
const FOLDED: u32 = 1 << 31;
/// Stack keys below this are counted in per-thread arrays.
const DENSE_KEYS: u64 = 1 << 20;
/// The bound on those arrays' entries in all (8 bytes each).
pub const MAX_DENSE_ENTRIES: usize = 4 << 20;

impl Builder<'_> {
    /// Where a (thread, key) is counted in the arrays, made room for; `None` past their bounds.
    fn dense_index(&mut self, thread: u64, key: u64) -> Option<(usize, usize)> {
        if key >= DENSE_KEYS {
            return None;
        }
        let key = usize::try_from(key).ok()?;
        // A thread's samples come in runs: the last thread's arrays are known without a hash.
        let known = match self.last_thread {
            Some((last, t)) if last == thread => Some(t),
            _ => self.dense_threads.get(&thread).map(|&t| t as usize),
        };
        let t = match known {
            Some(t) => t,
            None => {
                if self.dense.len() >= 256 {
                    return None;
                }
                let t = self.dense.len();
                self.dense.push(Vec::new());
                self.dense_nodes.push(Vec::new());
                self.dense_threads.insert(thread, u32::try_from(t).ok()?);
                t
            }
        };
        self.last_thread = Some((thread, t));
        let v = self.dense.get_mut(t)?;
        if v.len() <= key {
            let grow = key.saturating_add(1).saturating_sub(v.len());
            if self.dense_entries.saturating_add(grow) > MAX_DENSE_ENTRIES {
                return None;
            }
            v.resize(key.saturating_add(1), 0);
            self.dense_nodes.get_mut(t)?.resize(key.saturating_add(1), NO_NODE);
            self.dense_entries = self.dense_entries.saturating_add(grow);
        }
        Some((t, key))
    }
}

/// A profile: frames, locations (a frame with its inlinees: one physical address's chain) and
/// the call tree of locations, per thread or merged.
#[derive(Debug, Default)]
pub struct Profile {
    frames: Vec<FrameInfo>,
    frame_ids: HashMap<FrameInfo, u32>,
    /// Each location's frames, outermost first (the physical method, then its inlinees).
    locations: Vec<Vec<u32>>,
    location_ids: HashMap<Vec<u32>, u32>,
    nodes: Vec<Node>,
    children: IntMap<(u32, u32), u32>,
    /// Each root: the thread (0 for a merged profile) and its node.
    roots: Vec<(u64, u32)>,
    root_of: IntMap<u64, u32>,
    per_thread: bool,
    max_nodes: usize,
    interval_ns: u64,
    /// The trace's duration in ns (first to last sample), where the trace says.
    duration_ns: u64,
    stats: Stats,
}

/// The reading state that the finished profile does not keep.
struct Builder<'s> {
    sym: &'s Symbolizer,
    caller: FrameKind,
    inlines: bool,
    il_offsets: bool,
    address_locs: IntMap<(u64, bool), u32>,
    /// (thread, stack key) → the stack's leaf node and the samples counted here since they were
    /// last added to it (one memory access per sample).
    stack_nodes: IntMap<(u64, u64), (u32, u64)>,
    /// The same for small stack keys (the trace reader's keys are dense): per thread, indexed by
    /// key, so a sample costs one access to a small array ([`MAX_DENSE_ENTRIES`] in all, 256
    /// threads): 1 + the samples pending, 0 where the stack has no node yet...
    dense: Vec<Vec<u32>>,
    /// ...and the node, read only when a stack is first seen and when counts are added up.
    dense_nodes: Vec<Vec<u32>>,
    dense_threads: IntMap<u64, u32>,
    /// The last thread counted in the arrays, and its index there.
    last_thread: Option<(u64, usize)>,
    dense_entries: usize,
    unknown_names: usize,
    /// The location `[unknown]`, once made.
    unknown_loc: Option<u32>,
    path: Vec<u32>,
    first_ts: Option<u64>,
    last_ts: u64,
    /// Only samples taken in managed code are counted.
    running: bool,
    /// Threads with a sample left out, and threads with a sample counted.
    left_out: HashSet<u64>,
    counted: HashSet<u64>,
}

impl Profile {
    /// Read a trace's samples (the trace `sym` was opened from, read again from `trace`) into a
    /// profile, threads apart or merged. `Err` when `trace` is no trace; the fault that ended a
    /// torn trace early is beside the profile of what was whole.
    pub fn read<R: Read>(sym: &Symbolizer, trace: R, per_thread: bool) -> Result<(Profile, Option<Error>)> {
        Self::read_bounded(sym, trace, per_thread, MAX_NODES)
    }

    /// [`Self::read`] with a call tree of at most `max_nodes` nodes (at most [`MAX_NODES`]):
    /// past it, samples count at their deepest known caller ([`Stats::folded`]).
    pub fn read_bounded<R: Read>(sym: &Symbolizer, trace: R, per_thread: bool, max_nodes: usize) -> Result<(Profile, Option<Error>)> {
        Self::read_running(sym, trace, per_thread, max_nodes, false)
    }

    /// [`Self::read_bounded`], counting with `running` only the samples the sampler took while
    /// their thread ran managed code (type managed): the time threads spent waiting, or in native
    /// code, is left out ([`Stats::samples_left_out`]), and a thread that never ran managed code
    /// while sampled (an idle pool worker, the pool's gate thread) is left out whole
    /// ([`Stats::threads_left_out`]). The sampler calls a sample managed when the thread was in
    /// cooperative mode as the runtime stopped it, and external when it was in preemptive mode:
    /// blocked in a wait or a system call, or running native code.
    pub fn read_running<R: Read>(sym: &Symbolizer, trace: R, per_thread: bool, max_nodes: usize, running: bool) -> Result<(Profile, Option<Error>)> {
        Self::read_with(sym, trace, &ReadOptions { per_thread, max_nodes, running, il_offsets: false })
    }

    /// Read a trace's samples as `options` say ([`Self::read`] and the others are this with
    /// fewer options).
    pub fn read_with<R: Read>(sym: &Symbolizer, trace: R, options: &ReadOptions) -> Result<(Profile, Option<Error>)> {
        let ReadOptions { per_thread, max_nodes, running, il_offsets } = *options;
        let mut p = Profile { per_thread, max_nodes: max_nodes.min(MAX_NODES), ..Profile::default() };
        let mut b = Builder {
            sym,
            caller: FrameKind::ReturnAddress.for_runtime(sym.runtime_major()),
            inlines: sym.has_inline_trees(),
            il_offsets,
            address_locs: IntMap::default(),
            stack_nodes: IntMap::default(),
            dense: Vec::new(),
            dense_nodes: Vec::new(),
            dense_threads: IntMap::default(),
            last_thread: None,
            dense_entries: 0,
            unknown_names: 0,
            unknown_loc: None,
            path: Vec::new(),
            first_ts: None,
            last_ts: 0,
            running,
            left_out: HashSet::new(),
            counted: HashSet::new(),
        };
        let (trace_stats, fault) = read_samples(trace, |s| p.add(&mut b, s))?;
        p.flush(&mut b);
        p.interval_ns = match trace_stats.sampling_rate_ns {
            Some(n) if n > 0 => u64::from(n),
            _ => DEFAULT_INTERVAL_NS,
        };
        if let (Some(first), Some(freq)) = (b.first_ts, trace_stats.qpc_frequency.filter(|&f| f > 0)) {
            let ticks = u128::from(b.last_ts.saturating_sub(first));
            p.duration_ns = u64::try_from(ticks.saturating_mul(1_000_000_000).checked_div(u128::from(freq)).unwrap_or(0)).unwrap_or(u64::MAX);
        }
        p.stats.trace = trace_stats;
        p.stats.threads_left_out = b.left_out.difference(&b.counted).count() as u64;
        p.stats.stacks = p.nodes.iter().filter(|n| n.samples > 0).count() as u64;
        Ok((p, fault))
    }

    /// The counts.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The sampling interval in nanoseconds (the trace's, or [`DEFAULT_INTERVAL_NS`]).
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Write the profile in `format`; `name` names it (speedscope shows it).
    pub fn write(&self, format: Format, name: &str, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        match format {
            Format::Collapsed => self.write_collapsed(out),
            Format::Speedscope => self.write_speedscope(name, out),
            Format::Pprof => self.write_pprof(out),
        }
    }

    fn add(&mut self, b: &mut Builder<'_>, s: &Sample<'_>) {
        if !s.managed {
            self.stats.samples_external = self.stats.samples_external.saturating_add(1);
        }
        if b.running {
            if !s.managed {
                b.left_out.insert(s.thread_id);
                self.stats.samples_left_out = self.stats.samples_left_out.saturating_add(1);
                return;
            }
            b.counted.insert(s.thread_id);
        }
        let thread = if self.per_thread { s.thread_id } else { 0 };
        if b.first_ts.is_none() {
            b.first_ts = Some(s.timestamp);
        }
        b.last_ts = b.last_ts.max(s.timestamp);
        // The stack's leaf node: from the cache when this stack was seen on this thread.
        if let Some((t, k)) = b.dense_index(thread, s.stack_key) {
            if let Some(c) = b.dense.get_mut(t).and_then(|v| v.get_mut(k)) {
                if *c == u32::MAX {
                    let n = b.dense_nodes.get(t).and_then(|v| v.get(k)).copied().unwrap_or(NO_NODE);
                    if let Some(node) = self.nodes.get_mut(n as usize) {
                        node.samples = node.samples.saturating_add(u64::from(c.saturating_sub(1)));
                        self.stats.samples = self.stats.samples.saturating_add(u64::from(c.saturating_sub(1)));
                    }
                    *c = 1;
                }
                if *c != 0 {
                    *c = c.saturating_add(1);
                    return;
                }
            }
            if b.stack_nodes.is_empty() || !b.stack_nodes.contains_key(&(thread, s.stack_key)) {
                match self.insert(b, thread, s) {
                    Some((n, false)) => {
                        if let (Some(c), Some(slot)) = (b.dense.get_mut(t).and_then(|v| v.get_mut(k)), b.dense_nodes.get_mut(t).and_then(|v| v.get_mut(k))) {
                            (*c, *slot) = (2, n);
                        }
                        return;
                    }
                    Some((n, true)) => return self.cache(b, thread, s.stack_key, n | FOLDED),
                    None => return,
                }
            }
        }
        if let Some((_, pending)) = b.stack_nodes.get_mut(&(thread, s.stack_key)) {
            *pending = pending.saturating_add(1);
            return;
        }
        if let Some((n, folded)) = self.insert(b, thread, s) {
            self.cache(b, thread, s.stack_key, if folded { n | FOLDED } else { n });
        }
    }

    /// Cache a stack's node (with [`FOLDED`] when it is a caller of the stack), one sample pending.
    fn cache(&mut self, b: &mut Builder<'_>, thread: u64, key: u64, node: u32) {
        if b.stack_nodes.len() >= MAX_CACHED_STACKS {
            self.flush(b);
        }
        b.stack_nodes.insert((thread, key), (node, 1));
    }

    /// Add the cache's pending counts to their nodes, and empty it.
    fn flush(&mut self, b: &mut Builder<'_>) {
        for (counts, nodes) in b.dense.iter_mut().zip(&b.dense_nodes) {
            for (c, &n) in counts.iter_mut().zip(nodes).filter(|(c, _)| **c > 1) {
                let pending = u64::from(c.saturating_sub(1));
                if let Some(node) = self.nodes.get_mut(n as usize) {
                    node.samples = node.samples.saturating_add(pending);
                    self.stats.samples = self.stats.samples.saturating_add(pending);
                }
                *c = 1;
            }
        }
        for (_, (n, pending)) in b.stack_nodes.drain() {
            if n & FOLDED != 0 {
                self.stats.folded = self.stats.folded.saturating_add(pending);
            }
            if let Some(node) = self.nodes.get_mut((n & !FOLDED) as usize) {
                node.samples = node.samples.saturating_add(pending);
                self.stats.samples = self.stats.samples.saturating_add(pending);
            }
        }
    }

    /// The node of a sample's stack, made where missing, or its deepest caller past the bound
    /// (`true`).
    fn insert(&mut self, b: &mut Builder<'_>, thread: u64, s: &Sample<'_>) -> Option<(u32, bool)> {
        let mut node = match self.root_of.get(&thread) {
            Some(&r) => r,
            None => {
                let r = u32::try_from(self.nodes.len()).ok()?;
                self.nodes.push(Node { parent: NO_PARENT, loc: 0, samples: 0 });
                self.roots.push((thread, r));
                self.root_of.insert(thread, r);
                r
            }
        };
        b.path.clear();
        let leaf_kind = if s.managed { FrameKind::Leaf } else { b.caller };
        for (i, &address) in s.frames.iter().enumerate() {
            let kind = if i == 0 { leaf_kind } else { b.caller };
            let loc = self.location(b, address, kind);
            b.path.push(loc);
        }
        let mut folded = false;
        // Root first: the last frame is the outermost caller.
        for &loc in b.path.iter().rev() {
            node = match self.children.get(&(node, loc)) {
                Some(&c) => c,
                None if self.nodes.len() < self.max_nodes => {
                    let c = u32::try_from(self.nodes.len()).ok()?;
                    self.nodes.push(Node { parent: node, loc, samples: 0 });
                    self.children.insert((node, loc), c);
                    c
                }
                None => {
                    folded = true;
                    break;
                }
            };
        }
        Some((node, folded))
    }

    /// The location of one address: its frames (physical, then inlinees outermost first).
    fn location(&mut self, b: &mut Builder<'_>, address: u64, kind: FrameKind) -> u32 {
        let leaf = kind == FrameKind::Leaf;
        if let Some(&l) = b.address_locs.get(&(address, leaf)) {
            return l;
        }
        let mut frames = Vec::new();
        if b.unknown_names >= MAX_UNKNOWN_NAMES {
            if let Some(l) = b.unknown_loc {
                if b.sym.body(address, kind).is_none() {
                    self.stats.unknown_frames = self.stats.unknown_frames.saturating_add(1);
                    return l;
                }
            }
        }
        let (frame, inlined) = if b.inlines { b.sym.symbolize_inlined(address, kind) } else { (b.sym.symbolize(address, kind), Vec::new()) };
        let mut bucket = false;
        let keep_il = b.il_offsets;
        let il = move |offset: Option<u32>| offset.filter(|_| keep_il);
        let physical = match (frame.at.method, frame.at.token) {
            (Some(m), _) => FrameInfo { name: m.to_owned(), file: frame.at.file.map(str::to_owned), line: frame.at.line, il_offset: il(frame.at.il_offset) },
            // A body with no name: its module and token.
            (None, Some(t)) => {
                FrameInfo { name: format!("{}!0x{t:08x}", frame.at.module.unwrap_or("??")), file: frame.at.file.map(str::to_owned), line: frame.at.line, il_offset: il(frame.at.il_offset) }
            }
            (None, None) => {
                self.stats.unknown_frames = self.stats.unknown_frames.saturating_add(1);
                let name = if b.unknown_names < MAX_UNKNOWN_NAMES {
                    b.unknown_names = b.unknown_names.saturating_add(1);
                    format!("{address:#x}")
                } else {
                    bucket = true;
                    "[unknown]".to_owned()
                };
                FrameInfo { name, file: None, line: None, il_offset: None }
            }
        };
        frames.push(self.frame(physical));
        for f in inlined.iter().rev() {
            let info = FrameInfo { name: f.at.method.unwrap_or("[inlined]").to_owned(), file: f.at.file.map(str::to_owned), line: f.at.line, il_offset: il(f.at.il_offset) };
            frames.push(self.frame(info));
        }
        let loc = match self.location_ids.get(&frames) {
            Some(&l) => l,
            None => {
                let l = u32::try_from(self.locations.len()).unwrap_or(u32::MAX);
                self.location_ids.insert(frames.clone(), l);
                self.locations.push(frames);
                l
            }
        };
        if bucket {
            b.unknown_loc = Some(loc);
            return loc;
        }
        if b.address_locs.len() >= MAX_CACHED_ADDRESSES {
            b.address_locs.clear();
        }
        b.address_locs.insert((address, leaf), loc);
        loc
    }

    fn frame(&mut self, info: FrameInfo) -> u32 {
        if let Some(&id) = self.frame_ids.get(&info) {
            return id;
        }
        let id = u32::try_from(self.frames.len()).unwrap_or(u32::MAX);
        self.frames.push(info.clone());
        self.frame_ids.insert(info, id);
        id
    }

    /// Every node with samples of its own, with its thread: (thread, node, samples).
    fn stacks(&self) -> impl Iterator<Item = (u64, u32, u64)> + '_ {
        let mut thread_of_root: IntMap<u32, u64> = IntMap::default();
        for &(t, r) in &self.roots {
            thread_of_root.insert(r, t);
        }
        self.nodes.iter().enumerate().filter(|(_, n)| n.samples > 0).filter_map(move |(i, n)| {
            let i = u32::try_from(i).ok()?;
            let root = self.root(i);
            Some((thread_of_root.get(&root).copied().unwrap_or(0), i, n.samples))
        })
    }

    fn root(&self, mut node: u32) -> u32 {
        // Bounded: every parent is an earlier node.
        while let Some(n) = self.nodes.get(node as usize) {
            if n.parent == NO_PARENT {
                break;
            }
            node = n.parent;
        }
        node
    }

    /// A node's locations, leaf first (its root excluded).
    fn locations_leaf_first(&self, mut node: u32, out: &mut Vec<u32>) {
        out.clear();
        while let Some(n) = self.nodes.get(node as usize) {
            if n.parent == NO_PARENT {
                break;
            }
            out.push(n.loc);
            node = n.parent;
        }
    }

    /// A node's frames, root first (each location's physical frame before its inlinees).
    fn frames_root_first(&self, node: u32, locs: &mut Vec<u32>, out: &mut Vec<u32>) {
        self.locations_leaf_first(node, locs);
        out.clear();
        for &l in locs.iter().rev() {
            if let Some(fs) = self.locations.get(l as usize) {
                out.extend_from_slice(fs);
            }
        }
    }
}

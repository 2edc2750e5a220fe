//! The symbolization layer: any native address of a .NET process to its method, IL offset and
//! source line, by the runtime's own stack-trace rules (docs/output.md#frame-rules).
//!
//! A [`Symbolizer`] opens a source of code bodies (a ReadyToRun image, an EventPipe trace or a
//! clrmap capture), indexes the bodies once, and answers each address with a [`Frame`]:
//!
//! 1. the body whose code holds the address (for a return address: the address − 1, the call);
//! 2. the IL offset the runtime reports for that native offset
//!    ([`crate::base::ilmap::runtime_il_offset`]);
//! 3. the last visible sequence point at or before that IL offset, from the PDB of the body's
//!    module ([`crate::formats::pdb`]), found and matched by [`crate::symbols::locate`] when the module is first
//!    hit. A module whose recorded path does not exist here (a recording from another machine) is
//!    looked for by file name in the symbol directories too. Where the source recorded the PDB id
//!    of the image that ran (a trace's ModuleLoad events), an assembly or PDB of another build is
//!    never used: lines come only from a PDB with that id, found with or without the assembly.
//!    A module named by several paths (links, `..`) is loaded once, by file identity.
//!
//! ```no_run
//! use clrmap::symbolizer::{FrameKind, Symbolizer};
//! let sym = Symbolizer::open("app.capture".as_ref(), Default::default()).unwrap();
//! let frame = sym.symbolize(0x7f12_3456_7890, FrameKind::ReturnAddress);
//! if let (Some(file), Some(line)) = (frame.file, frame.line) {
//!     println!("{} at {file}:{line}", frame.method.unwrap_or("??"));
//! }
//! ```

mod frame_kind;
mod inlined;
mod lines;
pub mod profile_lines;
mod source;
mod vars;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::base::fs::{file_id, read_input};
use crate::base::fs::{read_regular, MAX_FILE};
use crate::base::ilmap::{runtime_il_offset, CodeBody, IlOffset, MapStore};
use crate::base::read::{Error, ErrorKind};
use crate::formats::pdb::PortablePdb;
use crate::formats::pe::PeImage;
use crate::symbols::locate::{check_explicit, check_recorded, find_pdb, locate_pdb_noting, why_no_pdb_structured, FoundPdb, PassedOver, PdbOrigin, RecordedPdb, SymbolPaths};
use crate::symbols::why::{Note, Why};

pub use crate::base::fs::OpenError;
pub use frame_kind::FrameKind;
pub use inlined::{bulk_type_modules, InlinedFrame, InlineeMethod, SourceInlines};
use lines::ModuleLines;
pub use lines::{SourceContext, MAX_CONTEXT_LINE};
pub use source::{note_recorded_pdb, open_source, open_source_assuming, read_trace, OpenedSource, RecordedPdbs, SourceKind};
pub use vars::{name_var, LocalNames, VarKind, VarName};

/// Options: where PDBs are looked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Explicit PDB and symbol directories.
    pub symbols: SymbolPaths,
}

/// The answer for one address (docs/output.md#symbolized-frames). Every field but `address` is `None` where unknown;
/// an address in no known body has only `address`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Frame<'s> {
    /// The address asked about.
    pub address: u64,
    /// The module's file name (`Frames.dll`).
    pub module: Option<&'s str>,
    /// The MethodDef token.
    pub token: Option<u32>,
    /// `Ns.Type::Method`.
    pub method: Option<&'s str>,
    /// The IL offset `StackFrame.GetILOffset()` reports (PROLOG and NO_MAPPING report 0).
    pub il_offset: Option<u32>,
    /// The document name exactly as the PDB stores it.
    pub file: Option<&'s str>,
    /// Start line of the chosen sequence point.
    pub line: Option<u32>,
    /// Start column.
    pub column: Option<u32>,
    /// End line.
    pub end_line: Option<u32>,
    /// End column.
    pub end_column: Option<u32>,
    /// The document's URL by the PDB's SourceLink map (absent when it has none).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub source_link: Option<&'s str>,
    /// The body's code start (an RVA for an image).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub code_start: Option<u64>,
    /// The native offset looked up, from the code start (after any return-address adjustment).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub native_offset: Option<u32>,
    /// The kind of map entry that held the offset (`None`: no entry did).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub region: Option<IlOffset>,
    /// The body's FunctionID, for traces and captures (the code start for an image).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub function_id: Option<u64>,
}

/// One row of a body's line table ([`Symbolizer::line_table`], [`ModuleSymbols::line_table`]):
/// from `native_offset` (bytes from the code start) up to the next row's, the code is this line.
/// The last row is at the code size and only closes the table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LineRow {
    /// Offset from the body's code start.
    pub native_offset: u32,
    /// The document name exactly as the PDB stores it.
    pub file: String,
    /// The line (0: no source line for this region).
    pub line: u32,
    /// The column (0 with line 0).
    pub column: u32,
}

/// The line table of one assembly, loaded without a source of bodies: for a live profiler, which
/// knows each body's module, token and map as the runtime reports them.
#[derive(Debug)]
pub struct ModuleSymbols {
    lines: ModuleLines,
}

impl ModuleSymbols {
    /// The lines of an assembly (its bytes, and its path for a PDB beside it), from the first
    /// matching PDB, as [`Symbolizer`] finds it. `Ok(None)`: the assembly has no PDB to be found.
    pub fn load(assembly: &[u8], path: Option<&Path>, symbols: &SymbolPaths) -> Result<Option<Self>, Error> {
        Ok(load_lines(assembly, path, symbols)?.map(|lines| ModuleSymbols { lines }))
    }

    /// A body's line table, by the runtime's stack-trace rule at every offset (see
    /// [`Symbolizer::line_table`]).
    pub fn line_table(&self, token: u32, map: &[crate::base::ilmap::MapEntry], code_size: u32) -> Vec<LineRow> {
        self.lines.rows(token, map, code_size)
    }

    /// The lines of a portable PDB alone (its bytes), for a caller that matched it to its
    /// assembly itself. Nothing is decoded until a method is asked about.
    pub fn from_pdb(pdb: Vec<u8>) -> Result<Self, Error> {
        Ok(ModuleSymbols { lines: ModuleLines::new(pdb)? })
    }

    /// A method's line at an IL offset, by the runtime's rule (the last visible sequence point at
    /// or before it): (line, column, the document's name where it could be read).
    pub fn line(&self, token: u32, il: u32) -> Option<(u32, u32, Option<&str>)> {
        self.lines.line(token, il).map(|(p, file)| (p.line, p.column, file))
    }

    /// [`ModuleSymbols::line`] with the sequence point's end: (line, column, end line, end
    /// column, the document's name where it could be read).
    pub fn span(&self, token: u32, il: u32) -> Option<(u32, u32, u32, u32, Option<&str>)> {
        self.lines.line(token, il).map(|(p, file)| (p.line, p.column, p.end_line, p.end_column, file))
    }

    /// [`ModuleSymbols::span`], the Document row and its SourceLink URL, from one look-up.
    pub fn span_at(&self, token: u32, il: u32) -> Option<SpanAt<'_>> {
        let (p, file) = self.lines.line(token, il)?;
        Some(SpanAt { line: p.line, column: p.column, end_line: p.end_line, end_column: p.end_column, file, document: p.document, source_link: self.lines.source_link(p.document) })
    }

    /// The SourceLink URL of the document of a method's line at an IL offset.
    pub fn source_link(&self, token: u32, il: u32) -> Option<&str> {
        self.lines.source_link(self.document(token, il)?)
    }

    /// The Document row of a method's line at an IL offset (by [`ModuleSymbols::line`]'s rule).
    pub fn document(&self, token: u32, il: u32) -> Option<u32> {
        self.lines.line(token, il).map(|(p, _)| p.document)
    }

    /// The portable PDB's bytes.
    pub fn pdb_bytes(&self) -> &[u8] {
        self.lines.pdb_bytes()
    }
}

/// A method's line at an IL offset, with where its document is ([`ModuleSymbols::span_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanAt<'a> {
    /// Start line.
    pub line: u32,
    /// Start column.
    pub column: u32,
    /// End line.
    pub end_line: u32,
    /// End column.
    pub end_column: u32,
    /// The document's name where it could be read.
    pub file: Option<&'a str>,
    /// The Document row.
    pub document: u32,
    /// The document's URL by the PDB's SourceLink map.
    pub source_link: Option<&'a str>,
}

/// One module of the source: where its file is, the PDB the recording names for it, and its line
/// table once first needed.
#[derive(Debug)]
struct Module {
    name: Option<String>,
    path: Option<PathBuf>,
    recorded: Option<RecordedPdb>,
    /// The MVID a capture recorded for it: only an assembly with this MVID is the module's.
    mvid: Option<[u8; 16]>,
    lines: OnceLock<Option<Arc<ModuleLines>>>,
}

impl Module {
    /// The module as the symbol locator asks for it.
    fn query(&self) -> crate::symbols::module::RecordedModule<'_> {
        crate::symbols::module::RecordedModule { name: self.name.as_deref(), path: self.path.as_deref(), recorded: self.recorded.as_ref(), mvid: self.mvid }
    }
}

/// One file (device and inode) as the module of the source's recorded identity: paths that name
/// it are one module only where they were recorded with one PDB id and one MVID.
type FileKey = (u64, u64, Option<RecordedPdb>, Option<[u8; 16]>);

/// Bodies indexed by address, and the line tables of their modules.
#[derive(Debug)]
pub struct Symbolizer {
    kind: SourceKind,
    store: MapStore,
    modules: Vec<Module>,
    /// Body index → module index.
    body_module: Vec<Option<usize>>,
    options: Options,
    warnings: Vec<Error>,
    /// Line tables by PDB id: modules that find the same PDB (one file named by several paths,
    /// or copies of one build) share one table and one copy of its bytes.
    by_pdb: Mutex<HashMap<[u8; 20], Arc<ModuleLines>>>,
    /// The GUID of the PDB the user named, for a many-module source: it belongs to each module
    /// that recorded this GUID (whatever its name), and to a module that recorded none whose
    /// file name has its stem.
    explicit_guid: Option<[u8; 16]>,
    /// Why modules hit have no lines ([`Self::notes`]).
    notes: Mutex<Vec<Note>>,
    /// For an image source: why it has no PDB, said once an address in it wanted a line.
    image_why: Vec<Note>,
    /// An address in a body whose module has no lines was answered.
    missed_lines: std::sync::atomic::AtomicBool,
    /// The major version of the runtime that ran the bodies, where the source records it.
    runtime_major: Option<u16>,
    /// The JIT's inline trees by (pid, code start), and the inlinees named (`--inlines`).
    trees: HashMap<(Option<u32>, u64), Arc<crate::formats::inlines::InlineTree>>,
    /// The same trees by body index, with each body's flat-map boundaries, for the query.
    body_trees: Vec<Option<profile_lines::BodyTree>>,
    inlinees: Vec<Inlinee>,
    /// (pid, MethodID) → index in `inlinees`.
    inlinee_index: HashMap<(Option<u32>, u64), usize>,
    /// Per body with a tree: each node's index in `inlinees`, looked up once (no hashing per
    /// address).
    body_nodes: Vec<Box<[Option<usize>]>>,
}

/// An inlinee, named from its defining module's metadata, with that module (for its lines).
#[derive(Debug)]
struct Inlinee {
    token: u32,
    name: Option<String>,
    module: Option<usize>,
}

impl Symbolizer {
    /// Open a source file and index its bodies. A PDB the user named is checked now: if it
    /// belongs to no module of the source, this fails with `pdb_mismatch`.
    pub fn open(path: &Path, options: Options) -> Result<Self, OpenError> {
        Self::open_assuming(path, options, None)
    }

    /// Like [`Symbolizer::open`], but a ReadyToRun image is read in the debug info layout
    /// `assume` when one is given, whatever its major says (the user's `--assume-layout`): for an
    /// image newer than this reader, which is otherwise `unsupported_version`.
    pub fn open_assuming(path: &Path, options: Options, assume: Option<crate::formats::r2r::DebugInfoLayout>) -> Result<Self, OpenError> {
        let opened = open_source_assuming(path, assume)?;
        Self::from_opened(opened, Some(path), options)
    }

    /// Index already opened bodies. `path` is the source file (for an image: the assembly).
    pub fn from_opened(opened: OpenedSource, path: Option<&Path>, options: Options) -> Result<Self, OpenError> {
        let OpenedSource { kind, mut bodies, image, warnings, runtime_major, pdbs, mvids, inlines, named } = opened;
        // A trace's ReadyToRun methods, named without a map: their frames get their method.
        bodies.extend(named);
        let mut modules: Vec<Module> = Vec::new();
        let mut body_module = Vec::with_capacity(bodies.len());
        let mut passed = Vec::new();
        // Why the one image of an image source has no PDB (notes for the user).
        let mut why = Vec::new();
        let mut explicit_guid = None;
        if let Some(bytes) = image {
            // One module: the image itself. Its lines are loaded now, so a PDB the user named
            // that is not its own fails here.
            let name = path.and_then(Path::file_name).map(|f| f.to_string_lossy().into_owned());
            let image = PeImage::parse(&bytes).map_err(|error| OpenError::Input { path: path.map(Path::to_owned).unwrap_or_default(), error })?;
            let lines = match locate_pdb_noting(&image, path, &options.symbols, &mut passed)? {
                Some(found) => {
                    let at = match &found.origin {
                        PdbOrigin::Explicit(p) => p.clone(),
                        _ => path.map(Path::to_owned).unwrap_or_default(),
                    };
                    // An embedded PDB's offsets are into its inflated bytes, not the image's.
                    let embedded = found.origin == PdbOrigin::Embedded;
                    let located = |error| if embedded { crate::formats::pdb::embedded::inflated(error) } else { error };
                    Some(ModuleLines::new(found.bytes).map_err(|error| OpenError::Input { path: at, error: located(error) })?)
                }
                None => {
                    why = why_no_pdb_structured(&image, path, &options.symbols, &passed);
                    None
                }
            };
            let lines = OnceLock::from(lines.map(Arc::new));
            modules.push(Module { name, path: path.map(Path::to_owned), recorded: None, mvid: None, lines });
            body_module.resize(bodies.len(), Some(0));
        } else {
            // One module per file: by path, and paths that name the same file (links, `..`,
            // `//`) by its identity, so that a module is read and held once.
            let mut by_path: HashMap<String, usize> = HashMap::new();
            let mut by_file: HashMap<FileKey, usize> = HashMap::new();
            for b in &bodies {
                let Some(p) = b.module_path.as_deref() else {
                    body_module.push(None);
                    continue;
                };
                let i = match by_path.get(p) {
                    Some(&i) => i,
                    None => {
                        let recorded = pdbs.get(p).cloned();
                        let key = file_id(Path::new(p)).map(|(dev, ino)| (dev, ino, recorded.clone(), mvids.get(p).copied()));
                        let i = match key.as_ref().and_then(|k| by_file.get(k)) {
                            Some(&i) => i,
                            None => {
                                modules.push(Module { name: b.module.clone(), path: Some(PathBuf::from(p)), recorded, mvid: mvids.get(p).copied(), lines: OnceLock::new() });
                                let i = modules.len().saturating_sub(1);
                                if let Some(k) = key {
                                    by_file.insert(k, i);
                                }
                                i
                            }
                        };
                        by_path.insert(p.to_owned(), i);
                        i
                    }
                };
                body_module.push(Some(i));
            }
            if let Some(pdb) = &options.symbols.pdb {
                explicit_guid = Some(check_explicit_for(&modules, &options.symbols, pdb)?);
            }
        }
        let inlinees = name_inlinees(&inlines.methods, &mut modules, &pdbs, &mvids, &options.symbols);
        let trees = inlines.trees;
        let store = MapStore::new(bodies);
        let body_trees: Vec<Option<profile_lines::BodyTree>> = store.bodies().iter().map(|b| Some(profile_lines::BodyTree::new(Arc::clone(trees.get(&(b.pid, b.start?))?), &b.map))).collect();
        let (keys, inlinees): (Vec<(Option<u32>, u64)>, Vec<Inlinee>) = inlinees.into_iter().unzip();
        let inlinee_index: HashMap<(Option<u32>, u64), usize> = keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect();
        let body_nodes = store
            .bodies()
            .iter()
            .zip(&body_trees)
            .map(|(b, t)| t.as_ref().map(|t| t.tree.nodes().iter().map(|n| inlinee_index.get(&(b.pid, n.method_id)).copied()).collect()).unwrap_or_default())
            .collect();
        let mut sym = Symbolizer {
            image_why: Vec::new(),
            missed_lines: std::sync::atomic::AtomicBool::new(false),
            explicit_guid,
            kind,
            store,
            modules,
            body_module,
            options,
            warnings,
            by_pdb: Mutex::new(HashMap::new()),
            notes: Mutex::new(Vec::new()),
            runtime_major,
            trees,
            body_trees,
            inlinees,
            inlinee_index,
            body_nodes,
        };
        if let Some(image) = sym.modules.first() {
            let name = image.name.as_deref().unwrap_or("the image");
            sym.image_why = why.into_iter().map(|why| Note { module: Some(name.to_owned()), why }).collect();
        }
        Ok(sym)
    }

    /// Faults past which the source was not read (a torn trace or capture); every whole record
    /// before them was kept.
    pub fn warnings(&self) -> &[Error] {
        &self.warnings
    }

    /// What the source is.
    pub fn kind(&self) -> SourceKind {
        self.kind
    }

    /// The major version of the runtime that ran the bodies, where the source records it (a
    /// trace's or snapshot's RuntimeInformation event, a capture's header; 3 for CoreCLR 3.1):
    /// the frame rule depends on it ([`FrameKind::ReturnAddressAsIs`] before .NET 5).
    pub fn runtime_major(&self) -> Option<u16> {
        self.runtime_major
    }

    /// The bodies, as a GetILToNativeMapping store.
    pub fn store(&self) -> &MapStore {
        &self.store
    }

    /// The body that holds an address, by the frame kind's rule.
    pub fn body(&self, address: u64, kind: FrameKind) -> Option<&CodeBody> {
        let lookup = if kind == FrameKind::Leaf { address } else { address.saturating_sub(1) };
        self.store.body_containing(lookup)
    }

    /// Answer one address.
    pub fn symbolize(&self, address: u64, kind: FrameKind) -> Frame<'_> {
        self.frame(address, kind, true).0
    }

    /// [`Self::symbolize`], with the body's index; the line only when `with_line`.
    fn frame(&self, address: u64, kind: FrameKind, with_line: bool) -> (Frame<'_>, Option<usize>) {
        let mut frame = Frame { address, ..Frame::default() };
        let lookup = if kind == FrameKind::Leaf { address } else { address.saturating_sub(1) };
        let Some(index) = self.store.index_containing(lookup) else { return (frame, None) };
        let Some(body) = self.store.bodies().get(index) else { return (frame, None) };
        let start = body.start.or(body.rva.map(u64::from)).unwrap_or(0);
        // The IL offset is looked up at the call for ReturnAddress, at the return address
        // itself for 3.1's rule.
        let at = if kind == FrameKind::ReturnAddress { lookup } else { address };
        let offset = u32::try_from(at.saturating_sub(start)).unwrap_or(u32::MAX);
        let (region, il) = runtime_il_offset(&body.map, body.code_size, offset);
        let module = self.body_module.get(index).copied().flatten().and_then(|m| self.modules.get(m));
        // The body's own module name first: one module may be named by several paths.
        frame.module = body.module.as_deref().or(module.and_then(|m| m.name.as_deref()));
        frame.token = Some(body.token);
        frame.method = body.name.as_deref();
        if body.map.is_empty() && body.rva.is_none() {
            // A ReadyToRun method a trace names without its map (that is in its image), or a
            // jitted body the runtime gave a map of no entries (a runtime-async thunk): the
            // method, and no IL offset or line rather than a guess.
            frame.code_start = Some(start);
            frame.native_offset = Some(offset);
            frame.function_id = body.function_id.or(Some(start));
            return (frame, Some(index));
        }
        frame.il_offset = Some(il);
        frame.code_start = Some(start);
        frame.native_offset = Some(offset);
        frame.region = region;
        frame.function_id = body.function_id.or(Some(start));
        if with_line {
            self.set_line(&mut frame, index, il);
        }
        (frame, Some(index))
    }

    /// A frame's line: the body at `index`'s, at IL offset `il`, by the runtime's rule (cleared
    /// when there is none).
    fn set_line<'s>(&'s self, frame: &mut Frame<'s>, index: usize, il: u32) {
        let module = self.body_module.get(index).copied().flatten().and_then(|m| self.modules.get(m));
        let token = self.store.bodies().get(index).map_or(0, |b| b.token);
        let lines = module.and_then(|m| self.lines(m));
        if lines.is_none() {
            self.missed_lines.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        (frame.file, frame.line, frame.column, frame.end_line, frame.end_column, frame.source_link) = match lines.and_then(|l| Some((l, l.line(token, il)?))) {
            Some((l, (p, file))) => (file, Some(p.line), Some(p.column), Some(p.end_line), Some(p.end_column), l.source_link(p.document)),
            None => (None, None, None, None, None, None),
        };
    }

    /// Context lines around the line [`Self::symbolize`] gives `address` (`each_side` lines before
    /// and after): from the source the PDB embeds, else from a `roots` file whose hash is the
    /// document's. `None` when the frame has no line or no such text.
    pub fn context(&self, address: u64, kind: FrameKind, each_side: u32, roots: &[crate::formats::pdb::sources::SourceRoot]) -> Option<SourceContext> {
        let (frame, index) = self.frame(address, kind, false);
        let index = index?;
        let module = self.body_module.get(index).copied().flatten().and_then(|m| self.modules.get(m))?;
        let lines = self.lines(module)?;
        let token = self.store.bodies().get(index)?.token;
        let (p, _) = lines.line(token, frame.il_offset?)?;
        lines.context(p.document, p.line, each_side, roots)
    }

    /// True when the source carries the JIT's inline trees for at least one body (a trace or
    /// capture of a .NET 7+ run started with `DOTNET_RichDebugInfo=1`).
    pub fn has_inline_trees(&self) -> bool {
        !self.trees.is_empty()
    }

    /// Answer one address with its inlined frames (docs/output.md#inlined-frames; the rule is in
    /// `inlined.rs`): the inlinees whose code holds it, innermost first, and the physical frame
    /// at the outermost call site. Where no inline tree covers the address, the frame is exactly
    /// [`Self::symbolize`]'s and there are no inlined frames.
    pub fn symbolize_inlined(&self, address: u64, kind: FrameKind) -> (Frame<'_>, Vec<InlinedFrame<'_>>) {
        let mut inlined = Vec::new();
        let (mut frame, index) = self.frame(address, kind, false);
        let Some(index) = index else { return (frame, inlined) };
        let il = frame.il_offset.unwrap_or(0);
        let chain = match (self.body_trees.get(index).and_then(Option::as_ref), frame.region, frame.native_offset) {
            (Some(t), region, Some(offset)) if !matches!(region, Some(IlOffset::Prolog | IlOffset::Epilog)) && t.current(offset) => t.tree.chain(offset),
            _ => Default::default(),
        };
        let (inner, root) = match (chain.parent_unknown, chain.steps.split_last()) {
            (_, None) => (&[][..], None),
            (false, Some((root, inner))) => (inner, Some(root)),
            (true, Some(_)) => (chain.steps.as_slice(), None),
        };
        let nodes = self.body_nodes.get(index);
        for step in inner {
            let who = nodes.and_then(|n| n.get(step.node as usize).copied().flatten()).and_then(|i| self.inlinees.get(i));
            let module = who.and_then(|w| w.module).and_then(|m| self.modules.get(m));
            let mut f = InlinedFrame {
                module: module.and_then(|m| m.name.as_deref()),
                token: who.map(|w| w.token),
                method: who.and_then(|w| w.name.as_deref()),
                il_offset: step.known_il_offset(),
                ..InlinedFrame::default()
            };
            if let (Some(w), Some(lines), Some(il)) = (who, module.and_then(|m| self.lines(m)), step.known_il_offset()) {
                if let Some((p, file)) = lines.line(w.token, il) {
                    (f.file, f.line, f.column, f.end_line, f.end_column) = (file, Some(p.line), Some(p.column), Some(p.end_line), Some(p.end_column));
                }
            }
            inlined.push(f);
        }
        // The physical method: at the outermost call site when the chain reaches it and the
        // call site is known, else (no chain, one cut by an unknown parent, or a call site the
        // runtime did not give: crate::formats::inlines::call_sites_known) exactly the flat answer.
        match root.and_then(|r| r.known_il_offset()) {
            Some(root_il) => {
                frame.il_offset = Some(root_il);
                self.set_line(&mut frame, index, root_il);
            }
            // A body answered without an IL offset (a ReadyToRun method a trace names without
            // its map) gets no line.
            None if frame.il_offset.is_some() => self.set_line(&mut frame, index, il),
            None => {}
        }
        (frame, inlined)
    }

    /// The line table of the body at `index` in [`Self::store`]'s bodies: a row wherever the line
    /// that [`Self::symbolize`] gives a leaf address changes, and a last row at the code size
    /// (docs/perf.md#format-notes: perf ends a table at its last row). Empty when the body's module has no
    /// PDB, or no body has that index. For every offset `o` of the body, the last row at or before
    /// `o` has the file and line `symbolize(start + o, FrameKind::Leaf)` answers (line 0 where it
    /// answers none after a row with a line).
    pub fn line_table(&self, index: usize) -> Vec<LineRow> {
        let Some(body) = self.store.bodies().get(index) else { return Vec::new() };
        let module = self.body_module.get(index).copied().flatten().and_then(|m| self.modules.get(m));
        match module.and_then(|m| self.lines(m)) {
            Some(lines) => lines.rows(body.token, &body.map, body.code_size),
            None => Vec::new(),
        }
    }

    /// The profile line table of the body at `index` ([`profile_lines`]: inlined code at the
    /// innermost frame that has a line, NO_MAPPING at line 0), for perf's jitdump and flame
    /// graphs. Empty when no frame of the body has a line.
    pub fn profile_line_table(&self, index: usize) -> Vec<LineRow> {
        let Some(body) = self.store.bodies().get(index) else { return Vec::new() };
        let module = self.body_module.get(index).copied().flatten().and_then(|m| self.modules.get(m));
        let tree = self.body_trees.get(index).and_then(Option::as_ref).map(|t| t.tree.as_ref());
        profile_lines::profile_rows(&body.map, body.code_size, tree, |who, il| {
            let (module, token) = match who {
                profile_lines::Who::Body => (module, body.token),
                profile_lines::Who::Inlinee(id) => {
                    let w = self.inlinee_index.get(&(body.pid, id)).and_then(|&i| self.inlinees.get(i))?;
                    (w.module.and_then(|m| self.modules.get(m)), w.token)
                }
            };
            let (p, file) = self.lines(module?)?.line(token, il)?;
            Some((file.unwrap_or("").to_owned(), p.line, p.column))
        })
    }

    fn lines<'s>(&'s self, module: &'s Module) -> Option<&'s ModuleLines> {
        module
            .lines
            .get_or_init(|| {
                // The PDB the user named belongs to the modules that recorded its id, or, where
                // none is recorded, to the module named like it; to no other.
                let mut symbols = self.options.symbols.clone();
                let belongs = match &module.recorded {
                    Some(r) => self.explicit_guid == Some(r.guid),
                    None => symbols.pdb.as_deref().is_some_and(|pdb| same_stem(pdb, module.name.as_deref())),
                };
                if !belongs {
                    symbols.pdb = None;
                }
                let mut lookup = crate::symbols::module::Lookup::default();
                let found = module.query().pdb(&symbols, &mut lookup);
                self.note(module, lookup.passed);
                self.note_mvids(module, lookup.other_builds);
                if found.is_none() {
                    self.push_notes(module, lookup.why);
                }
                let found = found?;
                let id = PortablePdb::parse(&found.bytes).ok()?.id().0;
                // A PDB another module already holds is not kept twice.
                let mut shared = self.by_pdb.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(lines) = shared.get(&id) {
                    return Some(Arc::clone(lines));
                }
                let lines = Arc::new(build_lines(found)?);
                shared.insert(id, Arc::clone(&lines));
                Some(lines)
            })
            .as_deref()
    }

    /// Note the files of another build passed over while looking for a module's PDB.
    fn note(&self, module: &Module, passed: Vec<PassedOver>) {
        self.push_notes(module, passed.iter().map(PassedOver::why).collect());
    }

    /// Note the assemblies passed over because their MVID is not the one the capture recorded.
    fn note_mvids(&self, module: &Module, passed: Vec<(PathBuf, [u8; 16])>) {
        let Some(want) = module.mvid else { return };
        let wanted = crate::formats::metadata::mvid_text(&want);
        let why = passed.into_iter().map(|(path, mvid)| Why::AnotherBuildMvid { path: path.display().to_string(), mvid: crate::formats::metadata::mvid_text(&mvid), wanted: wanted.clone() });
        self.push_notes(module, why.collect());
    }

    /// Keep each reason once, with the module's name.
    fn push_notes(&self, module: &Module, why: Vec<Why>) {
        let mut notes = self.notes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for why in why {
            let note = Note { module: Some(module.name.clone().unwrap_or_else(|| "a module".to_owned())), why };
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }

    /// Why the modules hit so far have no lines, one line each (for a user who wonders why an
    /// address has no line): each assembly or PDB of another build passed over, with both ids;
    /// a Windows PDB; where the PDB was looked for; what each symbol server answered. Modules are
    /// looked up when an address in them is first answered.
    pub fn notes(&self) -> Vec<String> {
        self.why_notes().iter().map(ToString::to_string).collect()
    }

    /// [`Self::notes`], as values with fields (for JSON).
    pub fn why_notes(&self) -> Vec<Note> {
        let mut notes = Vec::new();
        if self.missed_lines.load(std::sync::atomic::Ordering::Relaxed) {
            notes.extend(self.image_why.iter().cloned());
        }
        notes.extend(self.notes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned());
        // What the symbol servers said (each names its server and key), once: a module's own
        // notes may already hold what a server said of its key.
        if let Some(servers) = &self.options.symbols.servers {
            for why in servers.failures() {
                if !notes.iter().any(|n| n.why == why) {
                    notes.push(Note { module: None, why });
                }
            }
        }
        notes
    }
}

/// Name each inlinee from its defining module's metadata, adding a module for each inlinee
/// module that has no body in the source (so its PDB gives lines the same way). An assembly is
/// the module's only where it is of the recorded build: its CodeView GUID is the recorded PDB's
/// (traces), its MVID the recorded one (captures); otherwise the inlinee has no name.
fn name_inlinees(
    methods: &HashMap<(Option<u32>, u64), InlineeMethod>,
    modules: &mut Vec<Module>,
    pdbs: &RecordedPdbs,
    mvids: &HashMap<String, [u8; 16]>,
    symbols: &SymbolPaths,
) -> HashMap<(Option<u32>, u64), Inlinee> {
    let mut by_path: HashMap<String, usize> = modules.iter().enumerate().filter_map(|(i, m)| Some((m.path.as_ref()?.to_string_lossy().into_owned(), i))).collect();
    // Per module: its metadata's bytes, read once (None: no assembly of its build found).
    let mut assemblies: HashMap<usize, Option<Vec<u8>>> = HashMap::new();
    let mut out = HashMap::with_capacity(methods.len());
    for (key, m) in methods {
        let module = m.module_path.as_ref().map(|p| match by_path.get(p) {
            Some(&i) => i,
            None => {
                let name = p.rsplit(['/', '\\']).next().map(str::to_owned);
                modules.push(Module { name, path: Some(PathBuf::from(p)), recorded: pdbs.get(p).cloned(), mvid: mvids.get(p).copied(), lines: OnceLock::new() });
                let i = modules.len().saturating_sub(1);
                by_path.insert(p.clone(), i);
                i
            }
        });
        let name = module.and_then(|i| {
            let bytes = assemblies.entry(i).or_insert_with(|| modules.get(i).and_then(|m| m.query().assembly(symbols)));
            let md = crate::formats::metadata::Metadata::parse(bytes.as_deref()?).ok()?;
            md.method_name(m.token)
        });
        out.insert(*key, Inlinee { token: m.token, name, module });
    }
    out
}

/// A module's line table from its PDB; `None` if the PDB does not parse.
fn build_lines(found: FoundPdb) -> Option<ModuleLines> {
    ModuleLines::new(found.bytes).ok()
}

/// `Frames.pdb` and `Frames.dll`: the same name before the extension, ignoring case.
fn same_stem(pdb: &Path, module: Option<&str>) -> bool {
    let stem = |p: &Path| p.file_stem().map(|s| s.to_string_lossy().to_lowercase());
    module.is_some_and(|m| stem(Path::new(m)) == stem(pdb))
}

/// The line table of one assembly, from the first matching PDB. A PDB the user named is used
/// only for the assembly it belongs to; its mismatch is an error only when the caller decides.
fn load_lines(assembly: &[u8], path: Option<&Path>, symbols: &SymbolPaths) -> Result<Option<ModuleLines>, Error> {
    let image = PeImage::parse(assembly)?;
    let Some(found) = find_pdb(&image, path, symbols)? else { return Ok(None) };
    let embedded = found.origin == crate::symbols::locate::PdbOrigin::Embedded;
    let lines = ModuleLines::new(found.bytes).map_err(|e| if embedded { crate::formats::pdb::embedded::inflated(e) } else { e })?;
    Ok(Some(lines))
}

/// For a many-module source: the PDB the user named must belong to a module: one whose recorded
/// id it has (whatever the file names), or one whose file name has its stem (`Frames.pdb` →
/// `Frames.dll`) and whose id it has: the one the source recorded, or else the CodeView id of the
/// module's assembly (where the process loaded it, or in a symbol directory). A PDB that cannot
/// be read is an error naming it and why. Gives the PDB's GUID.
fn check_explicit_for(modules: &[Module], symbols: &SymbolPaths, pdb: &Path) -> Result<[u8; 16], OpenError> {
    let bytes = read_input(pdb, MAX_FILE)?;
    let input = |error: Error| OpenError::Input { path: pdb.to_owned(), error };
    let guid = PortablePdb::parse(&bytes).map_err(input)?.id().guid();
    if modules.iter().any(|m| m.recorded.as_ref().is_some_and(|r| r.guid == guid)) {
        return Ok(guid);
    }
    let mut last = Error::nowhere(ErrorKind::PdbMismatch, "a module of the source that this PDB belongs to");
    for m in modules.iter().filter(|m| same_stem(pdb, m.name.as_deref())) {
        // Matched: the module's lines come from this PDB when first needed.
        if let Some(recorded) = &m.recorded {
            match check_recorded(recorded, &bytes) {
                Ok(()) => return Ok(guid),
                Err(e) => last = e,
            }
            continue;
        }
        // No recorded id: the first assembly found is the module's, and names its PDB.
        let image = m.query().assembly_candidates(symbols).find_map(|path| read_regular(&path, MAX_FILE).ok().filter(|b| PeImage::parse(b).is_ok()));
        let Some(assembly) = image else {
            last = Error::nowhere(ErrorKind::PdbMismatch, "the module's assembly, at its recorded path or in a symbol directory, to check the PDB against (the source records no PDB id)");
            continue;
        };
        let image = PeImage::parse(&assembly).map_err(input)?;
        match check_explicit(&image, &bytes) {
            Ok(()) => return Ok(guid),
            Err(e) => last = e,
        }
    }
    Err(input(last))
}

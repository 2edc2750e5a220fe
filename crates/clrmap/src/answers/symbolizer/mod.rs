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
//! if let (Some(file), Some(line)) = (frame.at.file, frame.at.line) {
//!     println!("{} at {file}:{line}", frame.at.method.unwrap_or("??"));
//! }
//! ```

mod code_index;
mod frame_kind;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod fuzzcheck;
mod inline_index;
mod inlined;
mod lines;
mod modules;
pub mod profile_lines;
mod r2r_frames;
mod source;
mod vars;

use std::path::Path;

use crate::base::ilmap::{CodeBody, IlOffset, MapStore};
use crate::base::read::Error;
use crate::formats::pe::PeImage;
use crate::symbols::locate::{find_pdb, SymbolPaths};
use crate::symbols::why::Note;

use code_index::CodeIndex;
use inline_index::InlineIndex;
use modules::{Module, Modules};

pub use crate::base::fs::OpenError;
pub use frame_kind::FrameKind;
pub use inlined::{bulk_type_modules, InlinedFrame, InlineeMethod, SourceInlines};
use lines::ModuleLines;
#[cfg(feature = "serde")]
pub(crate) use lines::{LinePoint, MethodPoints};
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
    /// The method and its source line (in JSON, its fields are the frame's own).
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub at: SourceLocation<'s>,
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

/// Where an answer is: the method, its IL offset and that offset's source line. A [`Frame`] and
/// each of its [`InlinedFrame`]s have one, so that every reader finds a line in one place, named
/// once. Every field is `None` where unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SourceLocation<'s> {
    /// The module's file name (`Frames.dll`).
    pub module: Option<&'s str>,
    /// The MethodDef token.
    pub token: Option<u32>,
    /// `Ns.Type::Method`.
    pub method: Option<&'s str>,
    /// The IL offset `StackFrame.GetILOffset()` reports (PROLOG and NO_MAPPING report 0). In an
    /// inlined frame: the mapping's for the innermost, the call site of the frame inside it for
    /// the others (`None` where the runtime did not give that call site:
    /// [`crate::formats::inlines::call_sites_known`]).
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

    /// A MethodDef token's points (`None`: no such method, or no points), for a caller that keeps
    /// them beside what it makes per method: [`ModuleSymbols::span_at`]'s line is
    /// `method_points(token)?.at(il)`, its file [`ModuleSymbols::document_name`] and its link
    /// [`ModuleSymbols::document_link`] of the point's document.
    // Only the service (built with `serde`) keeps something per method.
    #[cfg(feature = "serde")]
    pub(crate) fn method_points(&self, token: u32) -> Option<lines::MethodPoints> {
        self.lines.method_points(token)
    }

    /// The name of Document row `row`, where it could be read.
    #[cfg(feature = "serde")]
    pub(crate) fn document_name(&self, row: u32) -> Option<&str> {
        self.lines.document(row)
    }

    /// The SourceLink URL of Document row `row`.
    #[cfg(feature = "serde")]
    pub(crate) fn document_link(&self, row: u32) -> Option<&str> {
        self.lines.source_link(row)
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

/// Bodies indexed by address, and the line tables of their modules.
///
/// Three parts, each with one job: the code index says which body (and module) holds an
/// address; the modules find and hold each module's lines when first needed, with the notes of
/// what they passed over; the inline index says which inlinees a body's code is. An answer is
/// put together here from the three, so each rule about frames lives in one place.
#[derive(Debug)]
pub struct Symbolizer {
    kind: SourceKind,
    warnings: Vec<Error>,
    /// The major version of the runtime that ran the bodies, where the source records it.
    runtime_major: Option<u16>,
    code: CodeIndex,
    modules: Modules,
    /// The JIT's inline trees by body, and the inlinees named (`--inlines`).
    inlines: InlineIndex,
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
        // A trace's ReadyToRun methods, named without a map: their frames get their method, and
        // their image's map where the image of the recorded build is found.
        bodies.extend(named);
        if kind == SourceKind::Trace {
            r2r_frames::fill_from_images(&mut bodies, &pdbs, &options.symbols);
        }
        let (mut modules, body_module) = match image {
            Some(bytes) => (Modules::of_image(&bytes, path, options.symbols)?, vec![Some(0); bodies.len()]),
            None => {
                let (list, body_module) = code_index::modules_of(&bodies, &pdbs, &mvids);
                (Modules::of_recording(list, options.symbols)?, body_module)
            }
        };
        let code = CodeIndex::new(bodies, body_module);
        let inlines = InlineIndex::new(inlines, code.store(), &mut modules, &pdbs, &mvids);
        Ok(Symbolizer { kind, warnings, runtime_major, code, modules, inlines })
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
        self.code.store()
    }

    /// The body that holds an address, by the frame kind's rule.
    pub fn body(&self, address: u64, kind: FrameKind) -> Option<&CodeBody> {
        self.code.body(self.code.index_at(address, kind)?)
    }

    /// Answer one address.
    #[inline]
    pub fn symbolize(&self, address: u64, kind: FrameKind) -> Frame<'_> {
        // Filled in place: the answer is large, and a copy per address shows in a profile.
        let mut frame = Frame { address, ..Frame::default() };
        self.fill(&mut frame, kind, true);
        frame
    }

    /// The module of the body at `index`.
    fn module_of(&self, index: usize) -> Option<&Module> {
        self.modules.get(self.code.module_of(index)?)
    }

    /// [`Self::symbolize`], with the body's index; the line only when `with_line`.
    fn frame(&self, address: u64, kind: FrameKind, with_line: bool) -> (Frame<'_>, Option<usize>) {
        let mut frame = Frame { address, ..Frame::default() };
        let index = self.fill(&mut frame, kind, with_line);
        (frame, index)
    }

    /// Fill `frame` (only its address set) as [`Self::frame`] answers it; the body's index.
    fn fill<'s>(&'s self, frame: &mut Frame<'s>, kind: FrameKind, with_line: bool) -> Option<usize> {
        let address = frame.address;
        let lookup = code_index::lookup_address(address, kind);
        let index = self.code.index_at(address, kind)?;
        let body = self.code.body(index)?;
        let start = body.start.or(body.rva.map(u64::from)).unwrap_or(0);
        // The IL offset is looked up at the call for ReturnAddress, at the return address
        // itself for 3.1's rule.
        let at = if kind == FrameKind::ReturnAddress { lookup } else { address };
        let offset = u32::try_from(at.saturating_sub(start)).unwrap_or(u32::MAX);
        let (region, il) = self.code.store().runtime_il_offset(index, offset);
        let module = self.module_of(index);
        // The body's own module name first: one module may be named by several paths.
        frame.at.module = body.module.as_deref().or(module.and_then(|m| m.name.as_deref()));
        // Token 0: a dynamic method (an IL stub), which no module's metadata holds.
        frame.at.token = (body.token != 0).then_some(body.token);
        frame.at.method = body.name.as_deref();
        if body.map.is_empty() && body.rva.is_none() {
            // A ReadyToRun method a trace names without its map (that is in its image), a jitted
            // body the runtime gave a map of no entries (a runtime-async thunk), or a dynamic
            // method (an IL stub, sent with no map): the method, and no IL offset or line rather
            // than a guess.
            frame.code_start = Some(start);
            frame.native_offset = Some(offset);
            frame.function_id = body.function_id.or(Some(start));
            return Some(index);
        }
        frame.at.il_offset = Some(il);
        frame.code_start = Some(start);
        frame.native_offset = Some(offset);
        frame.region = region;
        frame.function_id = body.function_id.or(Some(start));
        if with_line {
            self.set_line(frame, index, il);
        }
        Some(index)
    }

    /// A frame's line: the body at `index`'s, at IL offset `il`, by the runtime's rule (cleared
    /// when there is none).
    fn set_line<'s>(&'s self, frame: &mut Frame<'s>, index: usize, il: u32) {
        let token = self.code.body(index).map_or(0, |b| b.token);
        let lines = self.module_of(index).and_then(|m| self.modules.lines(m));
        if lines.is_none() {
            self.modules.missed_lines();
        }
        (frame.at.file, frame.at.line, frame.at.column, frame.at.end_line, frame.at.end_column, frame.source_link) = match lines.and_then(|l| Some((l, l.line(token, il)?))) {
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
        let lines = self.modules.lines(self.module_of(index)?)?;
        let token = self.code.body(index)?.token;
        let (p, _) = lines.line(token, frame.at.il_offset?)?;
        lines.context(p.document, p.line, each_side, roots)
    }

    /// True when the source carries the JIT's inline trees for at least one body (a trace or
    /// capture of a .NET 7+ run started with `DOTNET_RichDebugInfo=1`).
    pub fn has_inline_trees(&self) -> bool {
        !self.inlines.is_empty()
    }

    /// Answer one address with its inlined frames (docs/output.md#inlined-frames; the rule is in
    /// `inlined.rs`): the inlinees whose code holds it, innermost first, and the physical frame
    /// at the outermost call site. Where no inline tree covers the address, the frame is exactly
    /// [`Self::symbolize`]'s and there are no inlined frames.
    pub fn symbolize_inlined(&self, address: u64, kind: FrameKind) -> (Frame<'_>, Vec<InlinedFrame<'_>>) {
        let mut inlined = Vec::new();
        let (mut frame, index) = self.frame(address, kind, false);
        let Some(index) = index else { return (frame, inlined) };
        let il = frame.at.il_offset.unwrap_or(0);
        let chain = match (self.inlines.tree(index), frame.region, frame.native_offset) {
            (Some(t), region, Some(offset)) if !matches!(region, Some(IlOffset::Prolog | IlOffset::Epilog)) && t.current(offset) => t.tree.chain(offset),
            _ => Default::default(),
        };
        let (inner, root) = match (chain.parent_unknown, chain.steps.split_last()) {
            (_, None) => (&[][..], None),
            (false, Some((root, inner))) => (inner, Some(root)),
            (true, Some(_)) => (chain.steps.as_slice(), None),
        };
        for step in inner {
            let who = self.inlines.node_inlinee(index, step.node as usize);
            let module = who.and_then(|w| w.module).and_then(|m| self.modules.get(m));
            if let (Some(m), Some(places)) = (module, who.and_then(|w| w.missing.as_ref())) {
                self.modules.note_missing_assembly(m, places);
            }
            let mut f = InlinedFrame {
                at: SourceLocation {
                    module: module.and_then(|m| m.name.as_deref()),
                    token: who.map(|w| w.token),
                    method: who.and_then(|w| w.name.as_deref()),
                    il_offset: step.known_il_offset(),
                    ..SourceLocation::default()
                },
            };
            if let (Some(w), Some(lines), Some(il)) = (who, module.and_then(|m| self.modules.lines(m)), step.known_il_offset()) {
                if let Some((p, file)) = lines.line(w.token, il) {
                    (f.at.file, f.at.line, f.at.column, f.at.end_line, f.at.end_column) = (file, Some(p.line), Some(p.column), Some(p.end_line), Some(p.end_column));
                }
            }
            inlined.push(f);
        }
        // The physical method: at the outermost call site when the chain reaches it and the
        // call site is known, else (no chain, one cut by an unknown parent, or a call site the
        // runtime did not give: crate::formats::inlines::call_sites_known) exactly the flat answer.
        match root.and_then(|r| r.known_il_offset()) {
            Some(root_il) => {
                frame.at.il_offset = Some(root_il);
                self.set_line(&mut frame, index, root_il);
            }
            // A body answered without an IL offset (a ReadyToRun method a trace names without
            // its map) gets no line.
            None if frame.at.il_offset.is_some() => self.set_line(&mut frame, index, il),
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
        let Some(body) = self.code.body(index) else { return Vec::new() };
        match self.module_of(index).and_then(|m| self.modules.lines(m)) {
            Some(lines) => lines.rows(body.token, &body.map, body.code_size),
            None => Vec::new(),
        }
    }

    /// The profile line table of the body at `index` ([`profile_lines`]: inlined code at the
    /// innermost frame that has a line, NO_MAPPING at line 0), for perf's jitdump and flame
    /// graphs. Empty when no frame of the body has a line.
    pub fn profile_line_table(&self, index: usize) -> Vec<LineRow> {
        let Some(body) = self.code.body(index) else { return Vec::new() };
        let module = self.module_of(index);
        let tree = self.inlines.tree(index).map(|t| t.tree.as_ref());
        profile_lines::profile_rows(&body.map, body.code_size, tree, |who, il| {
            let (module, token) = match who {
                profile_lines::Who::Body => (module, body.token),
                profile_lines::Who::Inlinee(id) => {
                    let w = self.inlines.inlinee(body.pid, id)?;
                    (w.module.and_then(|m| self.modules.get(m)), w.token)
                }
            };
            let (p, file) = self.modules.lines(module?)?.line(token, il)?;
            Some((file.unwrap_or("").to_owned(), p.line, p.column))
        })
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
        self.modules.why_notes()
    }
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

//! Opening a source of code bodies: a ReadyToRun image (`MZ`), an EventPipe trace (`Nettrace`) or
//! a clrmap capture (`{"format":"clrmap-capture"`), recognized by their first bytes.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use crate::base::fs::{open_input, read_input, OpenError, MAX_FILE};
use crate::base::ilmap::CodeBody;
use crate::base::read::Error;
use crate::formats::metadata::Metadata;
use crate::formats::r2r::ReadyToRunImage;
use crate::symbols::locate::RecordedPdb;

use super::inlined::SourceInlines;

/// What kind of file a source is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// A ReadyToRun image: addresses are RVAs.
    ReadyToRun,
    /// An EventPipe trace: absolute addresses of the traced process.
    Trace,
    /// A capture written by the clrmap profiler: absolute addresses.
    Capture,
}

impl SourceKind {
    /// `r2r`, `trace` or `capture`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::ReadyToRun => "r2r",
            SourceKind::Trace => "trace",
            SourceKind::Capture => "capture",
        }
    }
}

/// A source's bodies, with names where the source or its modules' metadata give them.
#[derive(Debug)]
pub struct OpenedSource {
    /// What it is.
    pub kind: SourceKind,
    /// The bodies.
    pub bodies: Vec<CodeBody>,
    /// For an image: its bytes (kept for its PDB and metadata).
    pub image: Option<Vec<u8>>,
    /// Faults past which nothing was read (a torn trace or capture): every whole record before
    /// them is in `bodies`.
    pub warnings: Vec<Error>,
    /// The major version of the runtime that ran the bodies, where the source records it (a
    /// trace's RuntimeInformation event, a capture's header): it chooses the frame rule.
    pub runtime_major: Option<u16>,
    /// For a trace (or a snapshot of a process) and a capture: the PDB each module's image named,
    /// by module path ([`RecordedPdbs`]). Empty for images and captures written before the
    /// profiler recorded it.
    pub pdbs: RecordedPdbs,
    /// For a capture: the MVID of each module the runtime loaded, by module path, as the
    /// profiler recorded it. An assembly with another MVID is of another build: the
    /// [`Symbolizer`](super::Symbolizer) takes no lines from it. Empty for other sources.
    pub mvids: HashMap<String, [u8; 16]>,
    /// The JIT's inline trees the source carries, by body, and their inlinees (traces and
    /// captures of .NET 7+ runs with `DOTNET_RichDebugInfo=1`; empty otherwise).
    pub inlines: SourceInlines,
    /// For a trace: the ReadyToRun methods it names without a map (their maps are in their
    /// images), so that the symbolizer names their frames (no IL offset, no line). Not part of
    /// `bodies`, which are the maps the trace carries.
    pub named: Vec<CodeBody>,
}

/// For a trace: the PDB each module's image named, by the module path its bodies carry
/// ([`CodeBody::module_path`]), as the runtime recorded it when it loaded the module. The
/// [`Symbolizer`](super::Symbolizer) uses only a PDB with this id for the module's lines.
pub type RecordedPdbs = HashMap<String, RecordedPdb>;

/// Read a trace: its bodies, a fault past which it was not read, the runtime's version and the
/// PDB ids its modules were loaded with. Only a stream that is not a trace at all is an error.
pub fn read_trace<R: Read>(reader: R) -> Result<OpenedSource, Error> {
    let mut pdbs = HashMap::new();
    let mut runtime_major = None;
    let mut type_modules = HashMap::new();
    let (bodies, mut trace_inlines, warning) = crate::formats::nettrace::read_code_bodies_and_inlines_clr(reader, |e| {
        runtime_major = runtime_major.or_else(|| crate::formats::nettrace::runtime_information(e).and_then(|r| r.major()));
        note_recorded_pdb(e, &mut pdbs);
        super::inlined::bulk_type_modules(e, &mut type_modules);
    })?;
    // Trees that .NET 8 broke (dotnet/runtime#98755) get back the parents their callers' IL
    // settles; the rest stay unknown (docs/rich-debug-info.md).
    if trace_inlines.inlines.trees().any(|(_, t)| t.nodes().iter().any(|n| n.parent == crate::formats::inlines::Parent::Unknown)) {
        trace_inlines.recover_parents_from_il(&bodies, &type_modules);
    }
    let mut inlines = SourceInlines::from_trace(&bodies, &trace_inlines, &type_modules);
    // .NET 10 gives no call sites; the IL settles those it can (crate::formats::inlines::call_sites_known).
    inlines.recover_call_sites(&bodies);
    let named = std::mem::take(&mut trace_inlines.named_r2r);
    Ok(OpenedSource { kind: SourceKind::Trace, bodies, image: None, warnings: warning.into_iter().collect(), runtime_major, pdbs, mvids: HashMap::new(), inlines, named })
}

/// Keep the module path and PDB id of a module load event (see [`RecordedPdbs`]); other events
/// are passed over. For a reader of trace events that builds its own [`OpenedSource`].
pub fn note_recorded_pdb(e: &crate::formats::nettrace::Event<'_>, pdbs: &mut RecordedPdbs) {
    if let Some((path, pdb)) = recorded_pdb(e) {
        // One path, one file: the first load names it.
        pdbs.entry(path).or_insert(pdb);
    }
}

/// A ModuleLoad (runtime 152) or rundown ModuleDCStart/DCEnd (153/154) event's module path and
/// PDB: version 2 adds, after the IL path, `utf16z ModuleNativePath, u16 ClrInstanceID, GUID
/// ManagedPdbSignature, u32 ManagedPdbAge, utf16z ManagedPdbBuildPath` (ClrEtwAll.man). `None`
/// for other events, older versions, and modules without a CodeView entry (a zero GUID).
fn recorded_pdb(e: &crate::formats::nettrace::Event<'_>) -> Option<(String, RecordedPdb)> {
    use crate::formats::nettrace::{utf16z, RUNDOWN, RUNTIME};
    match (e.meta.provider.as_str(), e.meta.event_id) {
        (RUNTIME, 152) | (RUNDOWN, 153) | (RUNDOWN, 154) => {}
        _ => return None,
    }
    let mut r = e.payload;
    r.skip(8 + 8 + 4 + 4, "ModuleID, AssemblyID, ModuleFlags, Reserved1").ok()?;
    let il_path = utf16z(&mut r).ok()?;
    let _native_path = utf16z(&mut r).ok()?;
    let _clr_instance = r.u16("ClrInstanceID").ok()?;
    let guid: [u8; 16] = r.array("ManagedPdbSignature").ok()?;
    let age = r.u32("ManagedPdbAge").ok()?;
    let path = utf16z(&mut r).ok()?;
    if guid == [0; 16] || il_path.is_empty() {
        return None;
    }
    Some((il_path, RecordedPdb { guid, age, path, checksums: Vec::new() }))
}

/// A body's name and its name with parameter types, from its module's metadata.
fn name_body(md: &Metadata<'_>, body: &mut CodeBody) {
    body.name = md.method_name(body.token);
    body.full_name = body.name.as_ref().and_then(|n| md.method_full_name(body.token, n));
}

/// Read and decode a source file.
pub fn open_source(path: &Path) -> Result<OpenedSource, OpenError> {
    open_source_assuming(path, None)
}

/// Like [`open_source`], but a ReadyToRun image is read in the debug info layout `assume` when one
/// is given, whatever its major ([`ReadyToRunImage::parse_assuming`], `--assume-layout`).
pub fn open_source_assuming(path: &Path, assume: Option<crate::formats::r2r::DebugInfoLayout>) -> Result<OpenedSource, OpenError> {
    let io = |error: std::io::Error| OpenError::Io { path: path.to_owned(), error };
    let input = |error: Error| OpenError::Input { path: path.to_owned(), error };
    // A trace is streamed (memory follows its events, not its size); the others are read whole.
    // What cannot be read is named with the reason (a directory, a FIFO, a device, too large).
    let mut head = [0u8; 8];
    let n = open_input(path)?.read(&mut head).map_err(io)?;
    if head.get(..n) == Some(b"Nettrace") {
        let file = open_input(path)?;
        return read_trace(std::io::BufReader::with_capacity(1 << 20, file)).map_err(input);
    }
    let bytes = read_input(path, MAX_FILE)?;
    // Captures are JSON lines: without the `serde` feature there is no reader for them.
    #[cfg(feature = "serde")]
    if bytes.starts_with(b"{\"format\":\"clrmap-capture\"") {
        let capture = crate::formats::capture::read_capture(&bytes).map_err(input)?;
        let warnings: Vec<Error> = capture.warning.into_iter().collect();
        // The PDB id each module's image named, as the profiler read it at load time: the PDB is
        // then found by that id, with or without the assembly (as for traces).
        let pdbs = capture.recorded_pdbs();
        let mut captured = capture.bodies;
        // Names come from each module's own metadata, never from an assembly of another build
        // (crate::formats::capture::name_captured).
        crate::formats::capture::name_captured(&mut captured);
        let mvids: HashMap<String, [u8; 16]> = captured.iter().filter_map(|c| Some((c.module_path.clone(), c.mvid?))).collect();
        let bodies: Vec<CodeBody> = captured.into_iter().map(|c| c.body).collect();
        let mut inlines = SourceInlines::from_capture(&capture.inlines, capture.runtime_major);
        inlines.recover_call_sites(&bodies);
        return Ok(OpenedSource { kind: SourceKind::Capture, bodies, image: None, warnings, runtime_major: capture.runtime_major, pdbs, mvids, inlines, named: Vec::new() });
    }
    if bytes.starts_with(b"MZ") {
        let image = ReadyToRunImage::parse_assuming(&bytes, assume).map_err(input)?;
        let mut bodies = image.code_bodies().map_err(input)?;
        if let Ok(md) = Metadata::parse(&bytes) {
            for b in &mut bodies {
                name_body(&md, b);
                // An instantiation's full name carries its arguments, from its signature.
                if let Some(name) = b.signature.and_then(|at| crate::formats::r2r::instantiation_name(&bytes, at, &md)) {
                    b.full_name = Some(name);
                }
            }
        }
        return Ok(OpenedSource {
            kind: SourceKind::ReadyToRun,
            bodies,
            image: Some(bytes),
            warnings: Vec::new(),
            runtime_major: None,
            pdbs: HashMap::new(),
            mvids: HashMap::new(),
            inlines: SourceInlines::default(),
            named: Vec::new(),
        });
    }
    Err(OpenError::Unrecognized { path: path.to_owned() })
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::arithmetic_side_effects)]
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};

    use crate::answers::symbolizer::{FrameKind, Options, Symbolizer};
    use crate::formats::capture::{Body, Header, ModuleRecord, PdbRecord, Record};
    use crate::symbols::locate::SymbolPaths;

    fn repo(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("clrmap-source-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A capture of the run `examples/frames.nettrace` recorded (its Frames.dll bodies, from a
    /// directory that no longer exists), with or without the profiler's `module` record naming
    /// the PDB id of Frames.dll's image; and the runtime's own frames of that run
    /// (`examples/frames.stdout`: return address, file, line, column).
    fn capture_of_the_trace(with_module: bool) -> (String, Vec<(u64, String, u32, u32)>) {
        let trace = super::read_trace(std::io::BufReader::new(std::fs::File::open(repo("examples/frames.nettrace")).unwrap())).unwrap();
        let bodies: Vec<&crate::base::ilmap::CodeBody> = trace.bodies.iter().filter(|b| b.module.as_deref() == Some("Frames.dll")).collect();
        let path = bodies[0].module_path.clone().unwrap();
        assert!(!Path::new(&path).exists(), "{path}");
        let image = std::fs::read(repo("tests/fixtures/frames/debug-embedded/Frames.dll")).unwrap();
        let cv = crate::formats::pe::PeImage::parse(&image).unwrap().codeview().unwrap().unwrap();
        let mut text = Header { format: crate::formats::capture::FORMAT.into(), version: crate::formats::capture::VERSION, pid: 1, ..Header::default() }.to_line();
        if with_module {
            let pdb = PdbRecord { guid: crate::formats::metadata::mvid_text(&cv.guid), age: cv.age, path: cv.path.to_owned() };
            text.push_str(&Record::Module(ModuleRecord { pid: Some(1), module: path.clone(), mvid: None, pdb: Some(pdb), pdb_checksums: Vec::new() }).to_line());
        }
        let mut starts: HashMap<u32, Vec<u64>> = HashMap::new();
        for b in &bodies {
            starts.entry(b.token).or_default().push(b.start.unwrap());
            let map = b.map.iter().map(|e| [e.il.to_raw(), e.native_start, e.native_end]).collect();
            let body =
                Body { pid: Some(1), function_id: 1, module: path.clone(), token: b.token, start: b.start.unwrap(), code_size: b.code_size, body: b.version.unwrap_or(0), map, ..Body::default() };
            text.push_str(&Record::Jit(body).to_line());
        }
        let stdout = std::fs::read_to_string(repo("examples/frames.stdout")).unwrap();
        let mut frames: Vec<(u64, String, u32, u32)> = stdout
            .lines()
            .map(|l| l.split('\t').collect::<Vec<_>>())
            .filter(|f| f[0] == "F" && !f[7].is_empty())
            .filter_map(|f| {
                let token = u32::from_str_radix(&f[3][2..], 16).unwrap();
                let start = starts.get(&token).filter(|s| s.len() == 1)?[0];
                Some((start + f[5].parse::<u64>().unwrap(), f[7].to_owned(), f[8].parse().unwrap(), f[9].parse().unwrap()))
            })
            .collect();
        frames.sort();
        frames.dedup();
        assert!(frames.len() > 20, "{} frames", frames.len());
        (text, frames)
    }

    #[test]
    fn a_capture_finds_the_pdb_by_its_recorded_id_without_the_assembly() {
        let dir = tmp("pdb-only");
        std::fs::copy(repo("tests/fixtures/frames/debug-portable/Frames.pdb"), dir.join("Frames.pdb")).unwrap();
        let options = || Options { symbols: SymbolPaths { pdb: None, dirs: vec![dir.clone()], servers: None } };
        let (text, frames) = capture_of_the_trace(true);
        let capture = dir.join("run.capture");
        std::fs::write(&capture, &text).unwrap();
        let opened = super::open_source(&capture).unwrap();
        assert_eq!(opened.pdbs.len(), 1);
        let sym = Symbolizer::open(&capture, options()).unwrap();
        for (address, file, line, column) in &frames {
            let f = sym.symbolize(*address, FrameKind::ReturnAddress);
            assert_eq!((f.at.file, f.at.line, f.at.column), (Some(file.as_str()), Some(*line), Some(*column)), "0x{address:x}");
        }
        // Without the module record (a capture written before it was recorded) the PDB alone
        // gives nothing: no assembly says which PDB is the module's.
        let (old, _) = capture_of_the_trace(false);
        std::fs::write(&capture, &old).unwrap();
        let sym = Symbolizer::open(&capture, options()).unwrap();
        assert_eq!(sym.symbolize(frames[0].0, FrameKind::ReturnAddress).at.line, None);
        // Another build's PDB under the name is not used.
        std::fs::copy(repo("tests/fixtures/frames/release-portable/Frames.pdb"), dir.join("Frames.pdb")).unwrap();
        std::fs::write(&capture, &text).unwrap();
        let sym = Symbolizer::open(&capture, options()).unwrap();
        assert_eq!(sym.symbolize(frames[0].0, FrameKind::ReturnAddress).at.line, None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

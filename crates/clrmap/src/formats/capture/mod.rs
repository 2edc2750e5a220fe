//! Live captures written by the clrmap profiler (`crates/clrmap-profiler`;
//! `docs/capture-format.md`): JSON lines, a header line per process, then one line per code body.
//!
//! A capture is input from elsewhere and often torn: a process killed mid-write leaves half a
//! line (perhaps cut inside a UTF-8 character). Every whole line counts; a torn last line is
//! reported as a warning, never as the loss of the whole file. Several processes may append to
//! one file (a .NET program that starts a .NET child, which inherits the profiler): each writes
//! its own header and tags its records with its pid.

mod fill;
mod naming;
mod record;

pub use fill::{every_process_ended, fill_names};
pub use naming::{name_captured, BodyNamer, ModuleBytes, ModuleLoader};

pub use record::{Body, End, Header, Hex, InlineEvent, InlineSession, ModuleRecord, PdbChecksum, PdbRecord, Record, RtType};

use crate::base::ilmap::{CodeBody, CodeKind, IlOffset, MapEntry};
use crate::base::read::{Error, ErrorKind, Result};
use crate::formats::pdb::RecordedPdb;

/// The capture format's name in its header line.
pub const FORMAT: &str = "clrmap-capture";
/// The version this reader understands.
pub const VERSION: u32 = 1;

/// One recorded body, with what `GetILToNativeMapping(functionId)` answered for its function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedBody {
    /// The body, its map from `GetILToNativeMapping3(start)` (R2R: `GetILToNativeMapping`).
    pub body: CodeBody,
    /// The module's full path as the runtime reported it.
    pub module_path: String,
    /// ReadyToRun or jitted.
    pub kind: CodeKind,
    /// The body's version: its place among the function's recorded bodies (0 = first).
    pub index: u32,
    /// For jitted bodies: what `GetILToNativeMapping(functionId)` returned at the same time.
    pub map1: Option<Vec<MapEntry>>,
    /// The process that recorded it.
    pub pid: u32,
    /// Jitted before an attached profiler came (enumerated at attach).
    pub before_attach: bool,
    /// The owner type's type arguments, as the profiler recorded them (empty if not generic, or
    /// in a capture written before they were recorded).
    pub class_args: Vec<RtType>,
    /// The method's own type arguments.
    pub method_args: Vec<RtType>,
    /// The module's MVID as the runtime loaded it, in the Module table's byte order (`None` in
    /// captures written before it was recorded, or where it is not a GUID): an assembly at
    /// `module_path` with another MVID is of another build, and is not used.
    pub mvid: Option<[u8; 16]>,
}

/// A module as the profiler met it: the PDB its loaded image names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedModule {
    /// The process that recorded it.
    pub pid: u32,
    /// The module's path as the runtime reported it (as [`CapturedBody::module_path`]).
    pub path: String,
    /// The module's MVID as the runtime loaded it (Module table byte order).
    pub mvid: Option<[u8; 16]>,
    /// The PDB the image's portable CodeView entry names, with its PdbChecksum entries; `None`
    /// where the image names no portable PDB (or the record's GUID is not one).
    pub pdb: Option<RecordedPdb>,
}

/// Which runtime event an inline record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InlineEventKind {
    /// `JittedMethodRichDebugInfo` (Microsoft-Windows-DotNETRuntimePrivate, id 189).
    RichDebugInfo,
    /// `MethodDetails` (Microsoft-Windows-DotNETRuntime, id 72).
    MethodDetails,
    /// No event: an inlinee the profiler named itself (`module`, `mvid`, `token`), where the
    /// session had no MethodDetails. Its payload is empty.
    Inlinee,
}

/// One runtime event the profiler recorded for the inline trees, its payload unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedInline {
    /// The event.
    pub kind: InlineEventKind,
    /// The process that recorded it.
    pub pid: u32,
    /// The payload's MethodID, as the profiler read it (a body's `function_id`).
    pub method_id: u64,
    /// Rich debug info: the code start of the body it belongs to, where the profiler could tell.
    pub start: Option<u64>,
    /// MethodDetails and inlinees: the method's module path, as the profiler asked the runtime
    /// (`GetFunctionInfo`, then `GetModuleInfo`).
    pub module: Option<String>,
    /// MethodDetails and inlinees: the module's MVID (Module table byte order).
    pub mvid: Option<[u8; 16]>,
    /// MethodDetails and inlinees: the MethodDef token.
    pub token: Option<u32>,
    /// The event's payload, as the runtime wrote it.
    pub payload: Vec<u8>,
}

/// A recorded event's raw payload, for `clrmap::inlines::InlineCollector`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InlinePayload<'a> {
    /// An event 189 payload (one chunk of a body's blob).
    RichDebugInfo(&'a [u8]),
    /// A MethodDetails payload.
    MethodDetails(&'a [u8]),
}

impl CapturedInline {
    /// The event's payload, by kind (`None` for an inlinee the profiler named: no event).
    pub fn payload(&self) -> Option<InlinePayload<'_>> {
        match self.kind {
            InlineEventKind::RichDebugInfo => Some(InlinePayload::RichDebugInfo(&self.payload)),
            InlineEventKind::MethodDetails => Some(InlinePayload::MethodDetails(&self.payload)),
            InlineEventKind::Inlinee => None,
        }
    }
}

impl Capture {
    /// Every recorded runtime event's payload, in file order, with the process that recorded it.
    pub fn inline_payloads(&self) -> impl Iterator<Item = (u32, InlinePayload<'_>)> {
        self.inlines.iter().filter_map(|i| Some((i.pid, i.payload()?)))
    }
}

// The GUID text rule lives with the metadata that holds MVIDs (so the symbolizer has it without
// the capture reader's `serde` feature).
pub use crate::formats::metadata::{mvid_text, parse_mvid};

/// Everything whole in a capture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    /// The bodies, in file order.
    pub bodies: Vec<CapturedBody>,
    /// The processes that wrote a header, in file order.
    pub pids: Vec<u32>,
    /// The processes that wrote the end record (orderly shutdown, or detach).
    pub ended: Vec<u32>,
    /// The processes whose profiler was attached to them while running.
    pub attached: Vec<u32>,
    /// Whole records of kinds this reader does not know (skipped).
    pub skipped: u64,
    /// A torn last line (`bad_capture` at its offset): everything before it was kept.
    pub warning: Option<Error>,
    /// The JIT's inline-tree events the profiler received in process (`clrmap profile` on .NET 5
    /// and later, with `DOTNET_RichDebugInfo=1`), in file order; empty in captures written
    /// before they were recorded, on 3.1, and with `--no-inlines`.
    pub inlines: Vec<CapturedInline>,
    /// The processes whose profiler asked for inline trees, with what the runtime answered.
    pub inline_sessions: Vec<InlineSession>,
    /// The major version of the runtime that recorded it (the first header that tells), for
    /// version-dependent rules. Captures written before headers recorded it: the version
    /// directory of the core library's path (`.../Microsoft.NETCore.App/3.1.23/...`) where a body
    /// of it was recorded, else `None`.
    pub runtime_major: Option<u16>,
    /// The modules the profiler recorded code of, with the PDB id each one's image names, in
    /// file order; empty in captures written before these were recorded.
    pub modules: Vec<CapturedModule>,
}

impl Capture {
    /// The PDB each module's image named, by module path (the first record of a path wins), as
    /// `symbolizer::RecordedPdbs` holds them for traces.
    pub fn recorded_pdbs(&self) -> std::collections::HashMap<String, RecordedPdb> {
        let mut out = std::collections::HashMap::new();
        for m in &self.modules {
            if let Some(pdb) = &m.pdb {
                out.entry(m.path.clone()).or_insert_with(|| pdb.clone());
            }
        }
        out
    }
}

fn entries(raw: &[[u32; 3]]) -> Vec<MapEntry> {
    raw.iter().map(|&[il, s, e]| MapEntry { il: IlOffset::from_raw(il), native_start: s, native_end: e }).collect()
}

/// The record kinds this reader knows.
const KNOWN_KINDS: [&str; 8] = ["jit", "r2r", "end", "inline_session", "rich_debug_info", "method_details", "inlinee", "module"];

/// A JSON object whose `kind` is a string this reader does not know.
fn is_other_kind(text: &str) -> bool {
    let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(text) else { return false };
    matches!(o.get("kind"), Some(serde_json::Value::String(k)) if !KNOWN_KINDS.contains(&k.as_str()))
}

/// Read a capture. The first line must be a header; a malformed line with more after it is
/// `bad_capture` at its offset. The last line, if it is not whole (no newline, and not valid
/// UTF-8 JSON), becomes [`Capture::warning`]. Records after an `end` record are kept: threads can
/// still be jitting while the runtime shuts down.
pub fn read_capture(bytes: &[u8]) -> Result<Capture> {
    let mut out = Capture::default();
    let mut offset = 0u64;
    let mut pid = 0u32;
    let mut rest = bytes;
    let mut first = true;
    while !rest.is_empty() {
        let at = offset;
        let (line, whole) = match rest.iter().position(|&b| b == b'\n') {
            Some(n) => (rest.get(..n).unwrap_or(&[]), true),
            None => (rest, false),
        };
        let consumed = line.len().saturating_add(usize::from(whole));
        rest = rest.get(consumed..).unwrap_or(&[]);
        offset = offset.saturating_add(consumed as u64);
        let torn = |out: &mut Capture| out.warning = Some(Error::new(ErrorKind::BadCapture, at, "a whole last line (the capture is torn here)"));
        let Ok(text) = core::str::from_utf8(line) else {
            if !whole {
                torn(&mut out);
                break;
            }
            return Err(Error::new(ErrorKind::BadCapture, at, "a UTF-8 line"));
        };
        let text = text.trim_end();
        if text.is_empty() {
            continue;
        }
        if first || text.starts_with("{\"format\"") {
            let h: Header = match serde_json::from_str(text) {
                Ok(h) => h,
                Err(_) if !whole && !first => {
                    torn(&mut out);
                    break;
                }
                Err(_) => return Err(Error::new(ErrorKind::BadCapture, at, "a clrmap-capture header line")),
            };
            if h.format != FORMAT || h.version != VERSION {
                return Err(Error::new(ErrorKind::BadCapture, at, "clrmap-capture version 1"));
            }
            first = false;
            pid = h.pid;
            if out.runtime_major.is_none() {
                let reported = h.runtime_version_string.as_deref().or(h.runtime_version.as_deref());
                out.runtime_major = reported.and_then(|v| crate::base::ilmap::runtime_major(v, h.runtime_path.as_deref()));
            }
            out.pids.push(pid);
            if h.attach {
                out.attached.push(pid);
            }
            continue;
        }
        let record = match serde_json::from_str::<Record>(text) {
            Ok(r) => r,
            Err(_) if !whole => {
                torn(&mut out);
                break;
            }
            // A whole record of a kind this reader does not know (a newer profiler's): skipped,
            // so the records it does know are not lost with it.
            Err(_) if is_other_kind(text) => {
                out.skipped = out.skipped.saturating_add(1);
                continue;
            }
            Err(_) => return Err(Error::new(ErrorKind::BadCapture, at, "a JSON body record")),
        };
        let (kind, l) = match record {
            Record::End(e) => {
                out.ended.push(e.pid.unwrap_or(pid));
                continue;
            }
            Record::InlineSession(mut i) => {
                i.pid = Some(i.pid.unwrap_or(pid));
                out.inline_sessions.push(i);
                continue;
            }
            Record::RichDebugInfo(e) => {
                out.inlines.push(captured_inline(InlineEventKind::RichDebugInfo, e, pid));
                continue;
            }
            Record::MethodDetails(e) => {
                out.inlines.push(captured_inline(InlineEventKind::MethodDetails, e, pid));
                continue;
            }
            Record::Inlinee(e) => {
                out.inlines.push(captured_inline(InlineEventKind::Inlinee, e, pid));
                continue;
            }
            Record::Module(m) => {
                out.modules.push(captured_module(m, pid));
                continue;
            }
            Record::Jit(b) => (CodeKind::Jit, b),
            Record::R2r(b) => (CodeKind::R2r, b),
        };
        let record_pid = l.pid.unwrap_or(pid);
        let module = std::path::Path::new(&l.module).file_name().map(|f| f.to_string_lossy().into_owned());
        out.bodies.push(CapturedBody {
            body: CodeBody {
                token: l.token,
                // An RVA only for ReadyToRun code: jitted code lies in no module's image, whatever
                // an old profiler wrote (docs/capture-format.md).
                rva: if kind == CodeKind::R2r { l.rva } else { None },
                code_size: l.code_size,
                // The names the profiler recorded: kept where the module file cannot be had
                // (name_captured names the body from it where it can).
                name: l.name,
                full_name: l.full_name,
                signature: None,
                module,
                module_path: Some(l.module.clone()),
                function_id: Some(l.function_id),
                start: Some(l.start),
                kind: Some(kind),
                tier: None,
                version: Some(l.body),
                pid: Some(record_pid),
                map: entries(&l.map),
            },
            module_path: l.module,
            kind,
            index: l.body,
            map1: l.map1.as_deref().map(entries),
            pid: record_pid,
            before_attach: l.before_attach,
            class_args: l.class_args,
            method_args: l.method_args,
            mvid: l.mvid.as_deref().and_then(parse_mvid),
        });
    }
    if out.runtime_major.is_none() {
        out.runtime_major = out.bodies.iter().find(|b| b.module_path.ends_with("/System.Private.CoreLib.dll")).and_then(|b| crate::base::ilmap::runtime_major("", Some(&b.module_path)));
    }
    Ok(out)
}

fn captured_module(m: ModuleRecord, pid: u32) -> CapturedModule {
    let checksums: Vec<(String, Vec<u8>)> = m.pdb_checksums.into_iter().map(|c| (c.algorithm, c.checksum.0)).collect();
    let pdb = m.pdb.and_then(|p| Some(RecordedPdb { guid: parse_mvid(&p.guid)?, age: p.age, path: p.path, checksums }));
    CapturedModule { pid: m.pid.unwrap_or(pid), path: m.module, mvid: m.mvid.as_deref().and_then(parse_mvid), pdb }
}

fn captured_inline(kind: InlineEventKind, e: InlineEvent, pid: u32) -> CapturedInline {
    CapturedInline { kind, pid: e.pid.unwrap_or(pid), method_id: e.method_id, start: e.start, module: e.module, mvid: e.mvid.as_deref().and_then(parse_mvid), token: e.token, payload: e.payload.0 }
}

/// Read a capture's bodies, ignoring a torn tail (see [`read_capture`] for the warning).
pub fn read_captured(text: &str) -> Result<Vec<CapturedBody>> {
    Ok(read_capture(text.as_bytes())?.bodies)
}

/// The capture's code bodies, for the map store.
pub fn read_code_bodies(text: &str) -> Result<Vec<CodeBody>> {
    Ok(read_captured(text)?.into_iter().map(|c| c.body).collect())
}

/// The `capture` fuzz target's checks, shared with the stable replay of its seeds and
/// regressions: reading never fails after a header that parses except at a malformed whole line,
/// a warning points inside the input, and a prefix that ends at a line break keeps no more
/// records than the whole and exactly the whole's first ones.
#[doc(hidden)]
#[allow(clippy::panic, clippy::indexing_slicing)]
pub fn fuzz_check(data: &[u8]) {
    let Ok(whole) = read_capture(data) else { return };
    if let Some(w) = &whole.warning {
        assert!(w.offset().is_some_and(|o| o < data.len() as u64), "warning past the input");
    }
    for (i, _) in data.iter().enumerate().filter(|(_, &b)| b == b'\n').take(64) {
        let Ok(prefix) = read_capture(&data[..=i]) else { panic!("a prefix of a readable capture failed") };
        assert!(prefix.warning.is_none(), "a prefix ending at a line break is torn");
        assert!(prefix.bodies.len() <= whole.bodies.len());
        assert_eq!(prefix.bodies[..], whole.bodies[..prefix.bodies.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "{\"format\":\"clrmap-capture\",\"version\":1,\"pid\":7}\n";

    fn record(token: u32, pid: Option<u32>) -> String {
        let pid = pid.map_or(String::new(), |p| format!(",\"pid\":{p}"));
        format!(
            "{{\"kind\":\"jit\"{pid},\"function_id\":1,\"module\":\"/x/\u{e9}t\u{e9}/A.dll\",\"token\":{token},\"start\":4096,\"rva\":5,\"code_size\":8,\"body\":0,\"map\":[[0,0,8]],\"map1\":null}}\n"
        )
    }

    #[test]
    fn every_cut_keeps_every_whole_record() {
        let text = format!("{HEADER}{}{}{}", record(1, None), record(2, None), record(3, None));
        let bytes = text.as_bytes();
        let whole_ends: Vec<usize> = bytes.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i + 1).collect();
        for cut in whole_ends[0]..=bytes.len() {
            let c = read_capture(&bytes[..cut]).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            let whole = whole_ends.iter().filter(|&&e| e <= cut).count() - 1;
            // A cut right before the newline leaves a line that is whole JSON: it counts too.
            assert!(c.bodies.len() == whole || c.bodies.len() == whole + 1, "cut {cut}: {} bodies", c.bodies.len());
            assert_eq!(c.warning.is_some(), c.bodies.len() == whole && !whole_ends.contains(&cut), "cut {cut}");
            // Jitted code never has an RVA.
            assert!(c.bodies.iter().all(|b| b.body.rva.is_none()));
        }
    }

    #[test]
    fn the_runtime_comes_from_the_header_or_for_old_captures_from_corelibs_directory() {
        let header = |extra: &str| format!("{{\"format\":\"clrmap-capture\",\"version\":1,\"pid\":7{extra}}}\n");
        let major = |text: String| read_capture(text.as_bytes()).unwrap().runtime_major;
        // What 8.0.4 and 3.1.23 write (3.1 reports v4.0.30319; its library's directory tells).
        assert_eq!(major(header(",\"runtime_version\":\"8.0.4.0\",\"runtime_version_string\":\"8.0.4\"")), Some(8));
        let v31 = ",\"runtime_version\":\"4.0.30319.0\",\"runtime_version_string\":\"v4.0.30319\"";
        assert_eq!(major(header(&format!("{v31},\"runtime_path\":\"/d/shared/Microsoft.NETCore.App/3.1.23/libcoreclr.so\""))), Some(3));
        // Before .NET 5 without a shared framework directory: still before 5.
        assert_eq!(major(header(v31)), Some(3));
        // An old capture: the core library's path, else nothing (the caller's default rule).
        let corelib = "{\"kind\":\"r2r\",\"function_id\":1,\"module\":\"/d/shared/Microsoft.NETCore.App/3.1.23/System.Private.CoreLib.dll\",\"token\":100663297,\"start\":4096,\"rva\":4096,\"code_size\":8,\"body\":0,\"map\":[]}\n";
        assert_eq!(major(format!("{}{corelib}", header(""))), Some(3));
        assert_eq!(major(format!("{}{}", header(""), record(1, None))), None);
    }

    #[test]
    fn the_module_mvid_is_read_and_old_captures_without_it_still_read() {
        // The GUID text form: Data1..Data3 most significant first, stored little-endian.
        let text = "00112233-4455-6677-8899-aabbccddeeff";
        let bytes = [0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff];
        assert_eq!(parse_mvid(text), Some(bytes));
        assert_eq!(parse_mvid("{00112233-4455-6677-8899-AABBCCDDEEFF}"), Some(bytes));
        // Every form the library reads a GUID in (`Guid::parse`), the dashless one too.
        assert_eq!(parse_mvid("00112233445566778899aabbccddeeff"), Some(bytes));
        assert_eq!(mvid_text(&bytes), text);
        for bad in ["", "{00112233445566778899aabbccddeeff}", "0011223-34455-6677-8899-aabbccddeeff", "0011223g-4455-6677-8899-aabbccddeeff"] {
            assert_eq!(parse_mvid(bad), None, "{bad}");
        }
        let with = format!("{{\"kind\":\"jit\",\"function_id\":1,\"module\":\"/a/A.dll\",\"mvid\":\"{text}\",\"token\":1,\"start\":4096,\"code_size\":8,\"body\":0,\"map\":[]}}\n");
        let c = read_capture(format!("{HEADER}{with}{}", record(2, None)).as_bytes()).unwrap();
        let got: Vec<Option<[u8; 16]>> = c.bodies.iter().map(|b| b.mvid).collect();
        assert_eq!(got, [Some(bytes), None]);
        // What the profiler writes reads back.
        let body = Body { module: "/a/A.dll".into(), mvid: Some(mvid_text(&bytes)), token: 1, ..Body::default() };
        let line = Record::Jit(body).to_line();
        assert!(line.contains(&format!("\"mvid\":\"{text}\"")), "{line}");
        assert_eq!(read_capture(format!("{HEADER}{line}").as_bytes()).unwrap().bodies[0].mvid, Some(bytes));
    }

    #[test]
    fn versions_are_read_for_both_kinds() {
        let r2r = "{\"kind\":\"r2r\",\"function_id\":1,\"module\":\"A.dll\",\"token\":1,\"start\":4096,\"rva\":4096,\"code_size\":8,\"body\":0,\"map\":[]}\n";
        let jit = "{\"kind\":\"jit\",\"function_id\":1,\"module\":\"A.dll\",\"token\":1,\"start\":8192,\"code_size\":8,\"body\":1,\"map\":[]}\n";
        let c = read_capture(format!("{HEADER}{r2r}{jit}").as_bytes()).unwrap();
        let got: Vec<(CodeKind, Option<u32>)> = c.bodies.iter().map(|b| (b.kind, b.body.version)).collect();
        assert_eq!(got, [(CodeKind::R2r, Some(0)), (CodeKind::Jit, Some(1))]);
    }

    #[test]
    fn several_processes_and_records_after_end() {
        let text = format!("{HEADER}{}{{\"kind\":\"end\"}}\n{}{{\"format\":\"clrmap-capture\",\"version\":1,\"pid\":9}}\n{}", record(1, Some(7)), record(2, Some(7)), record(3, Some(9)));
        let c = read_capture(text.as_bytes()).unwrap();
        assert_eq!(c.pids, [7, 9]);
        assert_eq!(c.ended, [7]);
        let got: Vec<(u32, u32)> = c.bodies.iter().map(|b| (b.body.token, b.pid)).collect();
        assert_eq!(got, [(1, 7), (2, 7), (3, 9)]);
        // A record of a kind this reader does not know is skipped, not fatal.
        let newer = format!("{HEADER}{}{{\"kind\":\"gc\",\"pid\":7}}\n{}", record(1, None), record(2, None));
        let c = read_capture(newer.as_bytes()).unwrap();
        assert_eq!((c.bodies.len(), c.skipped), (2, 1));
        // A bad line with more after it is an error at its offset.
        let bad = format!("{HEADER}garbage\n{}", record(1, None));
        assert_eq!(read_capture(bad.as_bytes()).unwrap_err().offset().unwrap(), HEADER.len() as u64);
    }

    #[test]
    fn inline_records_keep_their_payloads_and_a_malformed_payload_is_an_error() {
        let session = "{\"kind\":\"inline_session\",\"pid\":7,\"hr\":0,\"rich_debug_info\":true}\n";
        let rdi = "{\"kind\":\"rich_debug_info\",\"pid\":7,\"method_id\":16,\"start\":4096,\"payload\":\"00Ff10\"}\n";
        let details = "{\"kind\":\"method_details\",\"method_id\":32,\"module\":\"/a/A.dll\",\"token\":100663297,\"payload\":\"\"}\n";
        let inlinee = "{\"kind\":\"inlinee\",\"pid\":7,\"method_id\":48,\"module\":\"/a/B.dll\",\"token\":100663298}\n";
        let c = read_capture(format!("{HEADER}{}{session}{rdi}{details}{inlinee}{}", record(1, None), record(2, None)).as_bytes()).unwrap();
        assert_eq!((c.bodies.len(), c.skipped), (2, 0));
        assert_eq!(c.inline_sessions, [InlineSession { pid: Some(7), hr: 0, rich_debug_info: true, method_details: false }]);
        let got: Vec<(u32, InlinePayload<'_>)> = c.inline_payloads().collect();
        assert_eq!(got, [(7, InlinePayload::RichDebugInfo(&[0x00, 0xFF, 0x10])), (7, InlinePayload::MethodDetails(&[]))]);
        assert_eq!((c.inlines[0].method_id, c.inlines[0].start), (16, Some(4096)));
        assert_eq!((c.inlines[1].module.as_deref(), c.inlines[1].token, c.inlines[1].start), (Some("/a/A.dll"), Some(0x0600_0001), None));
        // An inlinee the profiler named: no event, so no payload for the decoder.
        assert_eq!((c.inlines[2].kind, c.inlines[2].method_id, c.inlines[2].token), (InlineEventKind::Inlinee, 48, Some(0x0600_0002)));
        assert_eq!((c.inlines[2].module.as_deref(), c.inlines[2].payload()), (Some("/a/B.dll"), None));
        let line = Record::Inlinee(InlineEvent { pid: Some(7), method_id: 48, token: Some(1), ..InlineEvent::default() }).to_line();
        assert!(!line.contains("payload"), "{line}");
        // What the profiler writes reads back, byte for byte.
        let bytes: Vec<u8> = (0..=255).collect();
        let line = Record::RichDebugInfo(InlineEvent { pid: Some(7), method_id: 1, payload: Hex(bytes.clone()), ..InlineEvent::default() }).to_line();
        assert!(line.starts_with("{\"kind\":\"rich_debug_info\""), "{line}");
        assert_eq!(read_capture(format!("{HEADER}{line}").as_bytes()).unwrap().inlines[0].payload, bytes);
        // A payload that is not hex is a malformed record at its offset, not a skipped one.
        for bad in ["0", "0g", "\u{e9}\u{e9}", "{}"] {
            let text = format!("{HEADER}{{\"kind\":\"rich_debug_info\",\"payload\":{}}}\n{}", if bad == "{}" { bad.to_owned() } else { format!("\"{bad}\"") }, record(1, None));
            let e = read_capture(text.as_bytes()).unwrap_err();
            assert_eq!((e.kind, e.offset()), (ErrorKind::BadCapture, Some(HEADER.len() as u64)), "{bad}");
        }
        // A torn inline record at the end is the usual warning; everything before it is kept.
        let torn = format!("{HEADER}{}{}", record(1, None), &rdi[..rdi.len() - 10]);
        let c = read_capture(torn.as_bytes()).unwrap();
        assert!(c.warning.is_some() && c.inlines.is_empty() && c.bodies.len() == 1);
    }

    #[test]
    fn module_records_give_each_modules_pdb_id_with_its_checksums() {
        let guid = "647eb43c-81d2-4572-8414-9edc98bd7db7";
        let bytes = parse_mvid(guid).unwrap();
        let module = ModuleRecord {
            pid: Some(7),
            module: "/app/A.dll".into(),
            mvid: Some("00112233-4455-6677-8899-aabbccddeeff".into()),
            pdb: Some(PdbRecord { guid: guid.into(), age: 1, path: "/_/obj/A.pdb".into() }),
            pdb_checksums: vec![PdbChecksum { algorithm: "SHA256".into(), checksum: Hex(vec![0xAB, 0x01]) }],
        };
        let line = Record::Module(module.clone()).to_line();
        assert!(line.starts_with("{\"kind\":\"module\"") && line.contains("\"checksum\":\"ab01\""), "{line}");
        // A second record of the path (another process) does not replace the first; a record
        // without a PDB (or with a GUID that is not one) gives no id.
        let second = Record::Module(ModuleRecord { pdb: Some(PdbRecord { guid: "00000000-0000-0000-0000-000000000001".into(), ..PdbRecord::default() }), ..module.clone() }).to_line();
        let bare = Record::Module(ModuleRecord { module: "/app/B.dll".into(), pdb: None, pdb_checksums: Vec::new(), ..module.clone() }).to_line();
        let bad = "{\"kind\":\"module\",\"module\":\"/app/C.dll\",\"pdb\":{\"guid\":\"not a guid\",\"age\":1,\"path\":\"C.pdb\"}}\n";
        let c = read_capture(format!("{HEADER}{line}{}{second}{bare}{bad}", record(1, None)).as_bytes()).unwrap();
        assert_eq!((c.bodies.len(), c.skipped, c.modules.len()), (1, 0, 4));
        let want = RecordedPdb { guid: bytes, age: 1, path: "/_/obj/A.pdb".into(), checksums: vec![("SHA256".into(), vec![0xAB, 0x01])] };
        assert_eq!(c.modules[0].pdb.as_ref(), Some(&want));
        assert_eq!((c.modules[0].pid, c.modules[0].mvid), (7, parse_mvid("00112233-4455-6677-8899-aabbccddeeff")));
        assert_eq!((c.modules[3].pid, &c.modules[3].pdb), (7, &None));
        let pdbs = c.recorded_pdbs();
        assert_eq!(pdbs.len(), 1);
        assert_eq!(pdbs["/app/A.dll"], want);
        // A capture without module records (written before them) reads as before, with no ids.
        let old = read_capture(format!("{HEADER}{}", record(1, None)).as_bytes()).unwrap();
        assert!(old.modules.is_empty() && old.recorded_pdbs().is_empty());
    }
}

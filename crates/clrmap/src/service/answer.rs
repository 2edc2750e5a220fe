//! Writing `POST /symbolicate` answers: each frame's JSON object streamed straight into the
//! answer's bytes, from fields borrowed from the parsed symbols (no tree of values, no string
//! copied per frame), and the answer's bound.

use super::ident::Ident;
use super::lru::Slot;
use super::ANSWER_STEP;
use crate::answers::symbolizer::{FrameKind, MAX_CONTEXT_LINE};
use crate::formats::pdb::WINDOWS_PDB_MESSAGE;

/// Why an answer stopped being written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    TooLarge,
    Busy,
    /// A module the frames need is not in the LRU, and the caller may not load it here.
    NotCached,
}

/// An answer's bytes, bounded by the configured largest answer and by the room its server
/// grants.
pub(super) struct Bounded<'a> {
    pub(super) buf: Vec<u8>,
    pub(super) max: u64,
    granted: u64,
    room: &'a mut dyn FnMut(u64) -> bool,
}

impl<'a> Bounded<'a> {
    pub(super) fn new(max: u64, room: &'a mut dyn FnMut(u64) -> bool) -> Self {
        Bounded { buf: Vec::new(), max, granted: 0, room }
    }

    /// Room for `bytes` more, asked for now (within the bound), so that an answer of about that
    /// size is written without growing its buffer by copying.
    /// A guess only: where the server grants less room, nothing is reserved and the answer
    /// grows as it is written.
    pub(super) fn reserve(&mut self, bytes: u64) {
        let want = u64::try_from(self.buf.len()).unwrap_or(u64::MAX).saturating_add(bytes).min(self.max);
        // Room refused here is asked again as the answer really grows.
        let _ = self.grow_to(want);
    }

    /// Append `data`, asking for room as the buffer grows.
    pub(super) fn push(&mut self, data: &[u8]) -> Result<(), Stop> {
        let want = u64::try_from(self.buf.len().saturating_add(data.len())).unwrap_or(u64::MAX);
        if want > self.max {
            return Err(Stop::TooLarge);
        }
        self.grow_to(want)?;
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// A buffer of at least `want` bytes' capacity (at most the bound), its room granted.
    fn grow_to(&mut self, want: u64) -> Result<(), Stop> {
        // The room asked for is the buffer's capacity (what it really holds), grown by doubling
        // up to the bound.
        let cap = u64::try_from(self.buf.capacity()).unwrap_or(u64::MAX);
        if want > cap {
            let target = want.max(cap.saturating_mul(2)).max(ANSWER_STEP).min(self.max);
            while target > self.granted {
                if !(self.room)(ANSWER_STEP) {
                    return Err(Stop::Busy);
                }
                self.granted = self.granted.saturating_add(ANSWER_STEP);
            }
            let extra = usize::try_from(target).unwrap_or(usize::MAX).saturating_sub(self.buf.len());
            self.buf.reserve_exact(extra);
        }
        Ok(())
    }
}

/// One frame's answer: docs/output.md#symbolized-frames' fields but `address`, and an `error` where the module's symbols were
/// not found. Every string is borrowed from the request's modules or the parsed symbols.
#[derive(Clone, Debug, Default)]
struct FrameOut<'a> {
    module: Option<Json<'a>>,
    token: Option<u32>,
    method: Option<Json<'a>>,
    il_offset: Option<u32>,
    file: Option<Json<'a>>,
    line: Option<u32>,
    column: Option<u32>,
    end_line: Option<u32>,
    end_column: Option<u32>,
    /// The document's URL by the PDB's SourceLink map (no field when none).
    source_link: Option<&'a str>,
    /// Sentry's context lines, from the source the PDB embeds (no fields when none). Boxed: a
    /// frame without them (most) moves and drops a pointer, not three lists.
    context: Option<Box<Context>>,
    /// (kind, message), when the module's symbols were not found.
    error: Option<(&'static str, &'a str)>,
}

/// Context lines: those before the frame's line, its own, those after.
type Context = (Vec<String>, String, Vec<String>);

/// A string field: text to escape, or one a cache already holds as JSON (quotes included).
#[derive(Clone, Copy, Debug)]
enum Json<'a> {
    Text(&'a str),
    Escaped(&'a [u8]),
}

impl<'a> Json<'a> {
    fn text(s: Option<&'a str>) -> Option<Json<'a>> {
        s.map(Json::Text)
    }
}

impl FrameOut<'_> {
    /// The JSON object, in the field order clients have always seen. `out` is a run's buffer,
    /// used again for every run: it grows once, so no frame reserves its own room.
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"module\":");
        opt_json(out, self.module);
        out.extend_from_slice(b",\"token\":");
        opt_u32(out, self.token);
        out.extend_from_slice(b",\"method\":");
        opt_json(out, self.method);
        out.extend_from_slice(b",\"il_offset\":");
        opt_u32(out, self.il_offset);
        out.extend_from_slice(b",\"file\":");
        opt_json(out, self.file);
        out.extend_from_slice(b",\"line\":");
        opt_u32(out, self.line);
        out.extend_from_slice(b",\"column\":");
        opt_u32(out, self.column);
        out.extend_from_slice(b",\"end_line\":");
        opt_u32(out, self.end_line);
        out.extend_from_slice(b",\"end_column\":");
        opt_u32(out, self.end_column);
        self.write_tail(out);
    }

    /// The fields after `end_column` (each only where there is one), and the object's end.
    fn write_tail(&self, out: &mut Vec<u8>) {
        if let Some(link) = self.source_link {
            out.extend_from_slice(b",\"source_link\":");
            string(out, link);
        }
        if let Some((pre, this, post)) = self.context.as_deref() {
            if !pre.is_empty() {
                out.extend_from_slice(b",\"pre_context\":");
                strings(out, pre);
            }
            out.extend_from_slice(b",\"context_line\":");
            string(out, this);
            if !post.is_empty() {
                out.extend_from_slice(b",\"post_context\":");
                strings(out, post);
            }
        }
        if let Some((kind, message)) = self.error {
            out.extend_from_slice(b",\"error\":");
            crate::base::json::ErrorObject { kind, location: None, input: None, message }.write_inner(out);
        }
        out.push(b'}');
    }
}

/// What one frame asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ask {
    /// A jitted (or any IL) frame: token and IL offset, answered from the PDB.
    Il { token: u32, il: u32 },
    /// A ReadyToRun frame: an RVA in the image, answered through its map.
    Rva { rva: u32, kind: FrameKind },
}

/// What the frames of a request are answered from: each module's identity and the slots found
/// for it (its PDB for IL frames, its image for RVAs), all looked up before any frame is written.
pub(super) struct Found<'a> {
    pub(super) idents: &'a [Ident],
    pub(super) pdbs: &'a [Option<Slot>],
    pub(super) images: &'a [Option<Slot>],
    pub(super) context: u32,
}

impl Found<'_> {
    /// Write each frame's object, comma-separated (a comma first unless `first`), into `out`.
    pub(super) fn write_run(&self, asks: &[(usize, Ask)], first: bool, out: &mut Vec<u8>) {
        for (i, (module, ask)) in asks.iter().enumerate() {
            if i > 0 || !first {
                out.push(b',');
            }
            self.write_frame(*module, *ask, out);
        }
    }

    fn write_frame(&self, module: usize, ask: Ask, out: &mut Vec<u8>) {
        let Some(ident) = self.idents.get(module) else { return };
        if let Some(why) = &ident.bad {
            return FrameOut { error: Some(("bad_module", why)), ..FrameOut::default() }.write(out);
        }
        // Every slot a frame asks for was looked up before the first frame is written.
        let unknown = || FrameOut { module: name_of(ident), ..FrameOut::default() };
        match ask {
            Ask::Il { token, il } => match self.pdbs.get(module).and_then(Option::as_ref) {
                Some(slot) => answer_il(ident, slot, token, il, self.context, out),
                None => unknown().write(out),
            },
            Ask::Rva { rva, kind } => match self.images.get(module).and_then(Option::as_ref) {
                Some(slot) => answer_rva(ident, slot, rva, kind, out),
                None => unknown().write(out),
            },
        }
    }
}

/// The module's name as the request gave it, escaped once per request.
fn name_of(ident: &Ident) -> Option<Json<'_>> {
    match ident.name_json() {
        Some(json) => Some(Json::Escaped(json)),
        None => Json::text(ident.name.as_deref()),
    }
}

fn missing<'a>(ident: &'a Ident, why: &'a str) -> FrameOut<'a> {
    // A Windows PDB where the module's PDB was: its own kind, with Sentry's words first.
    let kind = if why.starts_with(WINDOWS_PDB_MESSAGE) { "unsupported_pdb_format" } else { "not_found" };
    FrameOut { module: name_of(ident), error: Some((kind, why)), ..FrameOut::default() }
}

fn answer_il(ident: &Ident, slot: &Slot, token: u32, il: u32, context: u32, out: &mut Vec<u8>) {
    let pdb = match slot {
        Slot::Pdb(p) => p,
        Slot::Missing(why) => return FrameOut { token: Some(token), il_offset: Some(il), ..missing(ident, why) }.write(out),
        Slot::Image(_) => return FrameOut { module: name_of(ident), token: Some(token), il_offset: Some(il), ..FrameOut::default() }.write(out),
    };
    // Written from parts made once: the module's `{"module":NAME`, a MethodDef's
    // `,"token":T,"method":NAME,"il_offset":` (beside its points, so the method is found once
    // for both), a document's `,"file":NAME,"line":` and `,"source_link":URL`, and a sequence
    // point's numbers, in FrameOut's order, so the bytes are FrameOut's.
    ident.head.put(out);
    let Some(method) = pdb.method_json(token) else {
        // Not a MethodDef of the module's metadata or PDB: no name and no points.
        out.extend_from_slice(b",\"token\":");
        number(out, token);
        out.extend_from_slice(b",\"method\":null,\"il_offset\":");
        number(out, il);
        return out.extend_from_slice(NO_LINE);
    };
    method.head.put(out);
    number(out, il);
    let Some((at, point)) = method.line_at(il) else { return out.extend_from_slice(NO_LINE) };
    let document = pdb.document_json(point.document);
    match document {
        Some(document) => document.file.put(out),
        None => out.extend_from_slice(b",\"file\":null,\"line\":"),
    }
    if !method.put_tail(at, out) {
        span_numbers(out, [point.line, point.column, point.end_line, point.end_column]);
    }
    if let Some(link) = document.and_then(|d| d.link.as_ref()) {
        link.put(out);
    }
    let text = Some(point.document).filter(|_| context > 0).and_then(|rid| pdb.source(rid));
    match text.and_then(|t| crate::formats::pdb::sources::context(&t, point.line, context, context, MAX_CONTEXT_LINE)) {
        Some(context) => FrameOut { context: Some(Box::new(context)), ..FrameOut::default() }.write_tail(out),
        None => out.push(b'}'),
    }
}

/// What follows `"il_offset":N` in a frame with no line.
const NO_LINE: &[u8] = b",\"file\":null,\"line\":null,\"column\":null,\"end_line\":null,\"end_column\":null}";

fn answer_rva(ident: &Ident, slot: &Slot, rva: u32, kind: FrameKind, out: &mut Vec<u8>) {
    let sym = match slot {
        Slot::Image(s) => s,
        Slot::Missing(why) => return missing(ident, why).write(out),
        Slot::Pdb(_) => return FrameOut { module: name_of(ident), ..FrameOut::default() }.write(out),
    };
    // The frame rule for this image's runtime, as the CLI and the C ABI take it.
    let kind = FrameKind::from_return_address(kind != FrameKind::Leaf, sym.runtime_major());
    let f = sym.symbolize(u64::from(rva), kind);
    FrameOut {
        // As `clrmap symbolize` answers: an RVA inside no body has every field null. Otherwise the
        // module's name as the request gave it (a file from a symbol server's cache is named in
        // lower case).
        module: f.at.module.map(|m| name_of(ident).unwrap_or(Json::Text(m))),
        token: f.at.token,
        method: Json::text(f.at.method),
        il_offset: f.at.il_offset,
        file: Json::text(f.at.file),
        line: f.at.line,
        column: f.at.column,
        end_line: f.at.end_line,
        end_column: f.at.end_column,
        ..FrameOut::default()
    }
    .write(out);
}

/// What follows a frame's `"line":`: `L,"column":C,"end_line":EL,"end_column":EC` (a
/// sequence point's tail, made once per point where it is kept: `PdbModule::method_json`).
pub(super) fn span_numbers(out: &mut Vec<u8>, [line, column, end_line, end_column]: [u32; 4]) {
    number(out, line);
    out.extend_from_slice(b",\"column\":");
    number(out, column);
    out.extend_from_slice(b",\"end_line\":");
    number(out, end_line);
    out.extend_from_slice(b",\"end_column\":");
    number(out, end_column);
}

// Inlined: a call per number (seven a frame) cost more than its digits.
#[inline(always)]
fn opt_u32(out: &mut Vec<u8>, v: Option<u32>) {
    match v {
        Some(n) => number(out, n),
        None => out.extend_from_slice(b"null"),
    }
}

/// Each number below 100 as its two digits.
const PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// The two digits of `n` below 100.
fn pair(n: u32) -> [u8; 2] {
    let at = usize::try_from(n).unwrap_or(0).saturating_mul(2);
    PAIRS.get(at..at.saturating_add(2)).and_then(|p| p.try_into().ok()).unwrap_or([b'0'; 2])
}

/// A decimal number, without going through `fmt`. Below 10,000 (IL offsets, lines, columns),
/// its four places as one word: two pairs of digits, shifted past the leading zeros and stored
/// at once.
#[inline(always)]
pub(super) fn number(out: &mut Vec<u8>, n: u32) {
    if n < 10_000 {
        let [a, b] = pair(n / 100);
        let [c, d] = pair(n % 100);
        let len = 1u32.saturating_add(u32::from(n >= 10)).saturating_add(u32::from(n >= 100)).saturating_add(u32::from(n >= 1000));
        let word = u32::from_le_bytes([a, b, c, d]).checked_shr(4u32.saturating_sub(len).saturating_mul(8)).unwrap_or(0);
        let at = out.len();
        out.extend_from_slice(&word.to_le_bytes());
        out.truncate(at.saturating_add(usize::try_from(len).unwrap_or(4)));
        return;
    }
    wide_number(out, n);
}

/// [`number`] at 10,000 and over (tokens): ten places appended at once (a store of a constant,
/// with no call), the digits written over them two at a time, and cut back to the number's own.
/// Written in place: digits built on the stack and copied out would be read back wider than they
/// were written, which stalls the copy.
fn wide_number(out: &mut Vec<u8>, n: u32) {
    let len = n.checked_ilog10().map_or(1, |l| usize::try_from(l).unwrap_or(0).saturating_add(1));
    let at = out.len();
    out.extend_from_slice(&[b'0'; 10]);
    let Some(digits) = out.get_mut(at..at.saturating_add(len)) else { return };
    let (mut n, mut end) = (n, len);
    while n >= 10 {
        let pair = usize::try_from(n % 100).unwrap_or(0).saturating_mul(2);
        n /= 100;
        end = end.saturating_sub(2);
        if let (Some(to), Some(from)) = (digits.get_mut(end..end.saturating_add(2)), PAIRS.get(pair..pair.saturating_add(2))) {
            to.copy_from_slice(from);
        }
    }
    // An odd count of digits leaves the first one.
    if let (Some(d), 1) = (digits.get_mut(0), end) {
        *d = b'0'.saturating_add(u8::try_from(n).unwrap_or(0));
    }
    out.truncate(at.saturating_add(len));
}

fn opt_json(out: &mut Vec<u8>, v: Option<Json<'_>>) {
    match v {
        Some(Json::Text(s)) => string(out, s),
        Some(Json::Escaped(b)) => out.extend_from_slice(b),
        None => out.extend_from_slice(b"null"),
    }
}

fn strings(out: &mut Vec<u8>, v: &[String]) {
    out.push(b'[');
    for (i, s) in v.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, s);
    }
    out.push(b']');
}

pub(super) use crate::base::json::string;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // Strings are written by `base::json::string`, tested there against serde_json.
    fn numbers_are_written_as_serde_json_writes_them() {
        // Each count of digits at its ends, and a spread of numbers between (after other bytes).
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let spread = std::iter::from_fn(|| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            Some(u32::try_from(seed >> 32).unwrap_or(0) >> (seed % 32))
        });
        let ends = (0..10u32).flat_map(|p| [10u32.pow(p), 10u32.pow(p) - 1, 10u32.pow(p) + 1]);
        for n in ends.chain([0, 100663297, u32::MAX]).chain(spread.take(100_000)) {
            let mut out = b"x".to_vec();
            number(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes());
        }
    }

    /// A frame written from the parts made once (the module's, the method's, each point's and
    /// the document's) is, byte for byte, the frame [`FrameOut::write`] writes from the lookup's
    /// fields: every method of the Frames fixture (and tokens past its table), at every IL
    /// offset up to past each body, with context lines asked, twice (parts made, then reused),
    /// with the points' tails kept and with none kept.
    #[test]
    fn frames_from_parts_made_once_are_frame_out_s_bytes() {
        use crate::answers::symbolizer::ModuleSymbols;
        use crate::service::pdb_module::PdbModule;
        use crate::service::request::ModuleIn;
        use std::sync::Arc;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/frames/debug-portable");
        let lines = |dir: &std::path::Path| ModuleSymbols::from_pdb(std::fs::read(dir.join("Frames.pdb")).unwrap()).unwrap();
        let pdb = |budget: Option<usize>, assembly: bool| {
            let module = PdbModule::new(lines(&dir), assembly.then(|| std::fs::read(dir.join("Frames.dll")).unwrap()));
            Slot::Pdb(Arc::new(match budget {
                Some(b) => module.with_tail_budget(b),
                None => module,
            }))
        };
        let oracle = lines(&dir);
        let assembly = std::fs::read(dir.join("Frames.dll")).unwrap();
        let image = crate::formats::pe::PeImage::parse(&assembly).unwrap();
        let names = crate::formats::metadata::Metadata::from_pe(&image).unwrap();
        let ident = Ident::from_module(&ModuleIn { name: Some("Fr\"ames.dll".into()), ..ModuleIn::default() }, 0).unwrap();
        let mut frames = 0;
        // The tails kept, none kept (a module over its budget), and no assembly found (no
        // names): the same bytes.
        for (slot, assembly) in [(pdb(None, true), true), (pdb(Some(0), true), true), (pdb(None, false), false)] {
            for _ in 0..2 {
                for token in (0x0600_0000..0x0600_0040).chain([0x0700_0001, 0x06FF_FFFF]) {
                    for il in (0..200).chain([u32::MAX]) {
                        let mut fast = Vec::new();
                        answer_il(&ident, &slot, token, il, 3, &mut fast);
                        let span = oracle.span_at(token, il);
                        let name = names.method_name(token).filter(|_| assembly).map(|n| {
                            let mut json = Vec::new();
                            string(&mut json, &n);
                            json
                        });
                        let want = FrameOut {
                            module: name_of(&ident),
                            token: Some(token),
                            method: name.as_deref().map(Json::Escaped),
                            il_offset: Some(il),
                            file: span.and_then(|s| s.file).map(Json::Text),
                            line: span.map(|s| s.line),
                            column: span.map(|s| s.column),
                            end_line: span.map(|s| s.end_line),
                            end_column: span.map(|s| s.end_column),
                            source_link: span.and_then(|s| s.source_link),
                            ..FrameOut::default()
                        };
                        let mut slow = Vec::new();
                        want.write(&mut slow);
                        assert_eq!(String::from_utf8_lossy(&fast), String::from_utf8_lossy(&slow), "token {token:#x} il {il}");
                        frames += usize::from(span.is_some());
                    }
                }
            }
        }
        assert!(frames > 1000, "{frames} frames with a line");
    }

    #[test]
    fn a_frame_object_is_valid_json_with_every_field() {
        let f = FrameOut {
            module: Some(Json::Text("A.dll")),
            token: Some(0x0600_0001),
            method: Some(Json::Escaped(br#""N.C::M""#)),
            file: Some(Json::Text("/src/\"x\".cs")),
            line: Some(3),
            source_link: Some("https://x/y.cs"),
            context: Some(Box::new((vec!["a".into()], "b".into(), Vec::new()))),
            error: Some(("not_found", "why")),
            ..FrameOut::default()
        };
        let mut out = Vec::new();
        f.write(&mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["file"], "/src/\"x\".cs");
        assert_eq!(v["il_offset"], serde_json::Value::Null);
        assert_eq!(v["pre_context"][0], "a");
        assert!(v.get("post_context").is_none());
        assert_eq!(v["error"]["kind"], "not_found");
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 13);
    }
}

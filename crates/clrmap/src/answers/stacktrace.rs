//! Printed stack traces turned into source lines (`clrmap stacktrace`, docs/output.md#printed-stack-traces).
//!
//! .NET 8 prints a frame whose module has no PDB, when the app sets
//! `Switch.System.Diagnostics.StackTrace.ShowILOffsets`, as
//!
//! ```text
//!    at Shop.Pricing.Report(String where) in Shop.dll:token 0x6000004+0x1b
//! ```
//!
//! (the module's scope name, the method's MetadataToken and the frame's IL offset, lowercase hex).
//! With the PDB beside the assembly the same frame reads
//!
//! ```text
//!    at Shop.Pricing.Report(String where) in /_/src/Shop.cs:line 36
//! ```
//!
//! A [`Rewriter`] copies text from a reader to a writer, line by line, and turns each frame of
//! the first form whose PDB it finds into the second, by the runtime's own line rule (the last
//! visible sequence point at or before the IL offset, [`ModuleSymbols::line`]). Every other byte
//! is copied unchanged: other lines, line endings (LF or CRLF), invalid UTF-8, a last line
//! without a newline. A line longer than [`MAX_LINE`] is copied unchanged without being held
//! whole, so memory stays bounded whatever the input.
//!
//! A frame is a line with the word `at ` (at its start, after blanks, or after a blank: a log
//! prefix is fine), then ` in MODULE:token 0xT+0xO` with T and O of 1 to 8 hex digits in either
//! case, at the end of the line or followed by text that does not go on with a letter, digit or
//! `_` (AggregateException ends its last inner frame with `<---`; that text is kept). Only the
//! ` in MODULE:token ...` part changes.
//!
//! # Finding a module's PDB
//! The text names a module (`Shop.dll`), not a PDB id. For each symbol directory in order:
//! 1. if the directory holds the assembly itself (`DIR/Shop.dll`, a PE image), its PDB is the
//!    one [`crate::symbols::locate`] finds for it: embedded, beside it, or in a symbol directory,
//!    and only one whose id equals the assembly's CodeView entry. The first assembly found
//!    decides: when no PDB of its build is found, the module gets no lines (a PDB of another
//!    build would give wrong lines), and the files passed over are reported;
//! 2. otherwise the PDB by name, `DIR/Shop.pdb` (the module name without `.dll` or `.exe`, with
//!    `.pdb`), used as is: the text carries no id to check it against.
//!
//! A PDB the user named ([`Options::pdbs`]) stands for the module of its stem (`Shop.pdb` for
//! `Shop.dll`, `Shop.exe` or `Shop`) before any directory is searched.
//!
//! Each module name is looked up once per [`Rewriter`]. A module with no PDB keeps its frames as
//! printed; so does a frame whose method has no visible sequence point at or before its offset,
//! exactly as the runtime prints it then. A PDB that cannot be read or parsed is reported once
//! ([`Notice`]) and its frames are kept.
//!
//! # State machines
//! For an `async` method or an iterator, the runtime prints the frame of the state machine's
//! `MoveNext` under the *kickoff* method's name and token, with `MoveNext`'s IL offset. The
//! PDB's StateMachineMethod table pairs them, so the line is looked up in `MoveNext`. The kickoff
//! method's own frame (an async method running synchronously, under the builder's
//! `Start[TStateMachine](TStateMachine& stateMachine)`) has the same name and token: a frame with
//! a kickoff token printed just below a builder's `Start` frame is that kickoff method itself, and
//! its line (usually none: the compiler gives it no sequence points) is looked up there.
//!
//! ```
//! use clrmap::stacktrace::{Options, Rewriter};
//! let mut rewriter = Rewriter::new(Options::default()).unwrap();
//! let text = "System.Exception: x\n   at A.B() in A.dll:token 0x6000001+0x5\n";
//! let mut out = Vec::new();
//! rewriter.rewrite(text.as_bytes(), &mut out, &mut |_| {}).unwrap();
//! assert_eq!(out, text.as_bytes()); // no symbol path: nothing found, nothing changed
//! ```

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::answers::symbolizer::ModuleSymbols;
use crate::base::fs::{read_input, OpenError, MAX_FILE};
use crate::formats::metadata::table;
use crate::formats::pdb::PortablePdb;
use crate::formats::pe::PeImage;
use crate::symbols::locate::{locate_pdb_noting, why_no_pdb, SymbolPaths};
use crate::symbols::module;

/// The longest line looked at, in bytes (line ending included). A longer line is copied through
/// unchanged, in pieces.
pub const MAX_LINE: usize = 64 * 1024;

/// How many module names without a PDB are remembered; past that, such a name is looked up
/// again each time (so a text naming millions of modules costs time, not memory).
const MAX_MISSES: usize = 4096;

/// Where PDBs are looked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Symbol directories, searched in order.
    pub dirs: Vec<PathBuf>,
    /// PDBs the user named: each stands for the module of its file stem.
    pub pdbs: Vec<PathBuf>,
    /// Symbol servers: asked for the PDB of an assembly found in a symbol directory, by the id
    /// its CodeView entry names (the text alone names no id to ask for).
    pub servers: Option<std::sync::Arc<crate::symbols::symsrv::SymbolServers>>,
}

/// Something the rewriter tells once, while the text still goes through unchanged.
#[derive(Debug)]
pub enum Notice {
    /// A PDB was found for a module but cannot be used: its frames are left as printed.
    BadPdb {
        /// The module name as printed.
        module: String,
        /// The file and what is wrong with it.
        error: OpenError,
    },
    /// The assembly of a module was found, but no PDB of its build: its frames are left as
    /// printed.
    NoMatchingPdb {
        /// The module name as printed.
        module: String,
        /// The assembly found.
        assembly: PathBuf,
        /// Why, one reason each: files of another build passed over (with both ids), where the
        /// PDB was looked for ([`crate::symbols::locate::why_no_pdb`]).
        why: Vec<String>,
    },
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::BadPdb { module, error } => write!(f, "{module}: PDB not used: {error}"),
            Notice::NoMatchingPdb { module, assembly, why } => {
                write!(f, "{module}: found {}, but no PDB of its build, so its frames are kept", assembly.display())?;
                for w in why {
                    write!(f, "; {w}")?;
                }
                Ok(())
            }
        }
    }
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Lines read (a last line without a newline counts).
    pub lines: u64,
    /// Frames of the `MODULE:token 0x..+0x..` form seen.
    pub frames: u64,
    /// Frames rewritten with a source line.
    pub rewritten: u64,
}

/// One module's PDB: its lines, and the state machines' kickoff method → `MoveNext`.
#[derive(Debug)]
struct ModulePdb {
    symbols: ModuleSymbols,
    /// Kickoff MethodDef row → MoveNext MethodDef row.
    kickoff: HashMap<u32, u32>,
}

impl ModulePdb {
    /// Parse a PDB's bytes once: `Err` when they are not a portable PDB.
    fn new(bytes: Vec<u8>) -> crate::base::read::Result<Self> {
        let kickoff = {
            let pdb = PortablePdb::parse(&bytes)?;
            let mut map = HashMap::new();
            for row in pdb.tables().table(table::STATE_MACHINE_METHOD).iter() {
                if let (Ok(move_next), Ok(kickoff)) = (row.get(0), row.get(1)) {
                    map.entry(kickoff).or_insert(move_next);
                }
            }
            map
        };
        Ok(ModulePdb { symbols: ModuleSymbols::from_pdb(bytes)?, kickoff })
    }
}

/// A frame found in a line: where its ` in MODULE:token ...` part starts, and its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameText<'a> {
    /// Offset of the space before `in` (everything before it is kept).
    keep: usize,
    /// The method as printed (after `at `).
    method: &'a [u8],
    module: &'a str,
    token: u32,
    il: u32,
    /// What follows the offset on the line (kept).
    suffix: &'a [u8],
}

/// Copies text, rewriting the frames whose PDB it finds. Keeps each module's PDB for its
/// lifetime.
#[derive(Debug)]
pub struct Rewriter {
    options: Options,
    /// PDBs the user named, parsed, by the stem of their file name.
    named: Vec<(String, Arc<ModulePdb>)>,
    /// Module name → its PDB (`None`: none found, or unusable).
    cache: HashMap<String, Option<Arc<ModulePdb>>>,
    misses: usize,
    /// Which of `named` a frame's module asked for.
    used: Vec<bool>,
}

impl Rewriter {
    /// A rewriter for these options. Each PDB the user named is read now, and must be a
    /// portable PDB: `Err` names the first that cannot be read ([`OpenError::Io`]) or is not one
    /// ([`OpenError::Input`], with its kind and offset).
    pub fn new(options: Options) -> Result<Self, OpenError> {
        let mut named = Vec::new();
        for p in &options.pdbs {
            let bytes = read_input(p, MAX_FILE)?;
            let pdb = ModulePdb::new(bytes).map_err(|error| OpenError::Input { path: p.clone(), error })?;
            let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            named.push((stem, Arc::new(pdb)));
        }
        let used = vec![false; named.len()];
        Ok(Rewriter { options, named, cache: HashMap::new(), misses: 0, used })
    }

    /// What a user should hear once the text is through, so a run that changed nothing is never
    /// silent: no frame of the `MODULE:token` form at all; frames, but none given a line; and each
    /// `--pdb` that no frame's module asked for (its stem names no module of the text).
    pub fn summary(&self, stats: &Stats) -> Vec<String> {
        let mut notes = Vec::new();
        if stats.frames == 0 {
            notes.push("no frame printed without its PDB (`in MODULE:token 0x6000001+0x1b`) was in the text: nothing to rewrite".to_owned());
        } else if stats.rewritten == 0 {
            notes.push(format!("none of the {} frames printed without a PDB got a line: no PDB of their modules was found", stats.frames));
        }
        for ((stem, _), used) in self.named.iter().zip(&self.used) {
            if !used {
                notes.push(format!("the PDB given for {stem}.dll (or {stem}.exe) was not used: no frame of the text is in that module"));
            }
        }
        notes
    }

    /// Copy `input` to `output`, line by line, rewriting each frame whose PDB is found. Notices
    /// go to `notice` as they happen (once per module). The output is flushed whenever the input
    /// has nothing more buffered, so a pipe sees each line as soon as it is complete. Only I/O
    /// errors stop it.
    pub fn rewrite<R: BufRead, W: Write>(&mut self, mut input: R, mut output: W, notice: &mut dyn FnMut(Notice)) -> io::Result<Stats> {
        let mut stats = Stats::default();
        let mut line: Vec<u8> = Vec::new();
        // The line being read is longer than MAX_LINE: copy it through up to its newline.
        let mut passing = false;
        // The previous line was a builder's Start frame.
        let mut after_start = false;
        loop {
            let chunk = match input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                break;
            }
            let mut rest = chunk;
            while !rest.is_empty() {
                let (piece, complete) = match rest.iter().position(|&b| b == b'\n') {
                    Some(i) => (rest.get(..=i).unwrap_or(rest), true),
                    None => (rest, false),
                };
                rest = rest.get(piece.len()..).unwrap_or_default();
                if passing {
                    output.write_all(piece)?;
                } else if line.len().saturating_add(piece.len()) > MAX_LINE {
                    output.write_all(&line)?;
                    output.write_all(piece)?;
                    line.clear();
                    passing = true;
                    after_start = false;
                } else {
                    line.extend_from_slice(piece);
                }
                if complete {
                    stats.lines = stats.lines.saturating_add(1);
                    if passing {
                        passing = false;
                    } else {
                        after_start = self.line(&line, after_start, &mut output, &mut stats, notice)?;
                        line.clear();
                    }
                }
            }
            let used = chunk.len();
            input.consume(used);
            output.flush()?;
        }
        if !line.is_empty() && !passing {
            stats.lines = stats.lines.saturating_add(1);
            self.line(&line, after_start, &mut output, &mut stats, notice)?;
        } else if passing {
            stats.lines = stats.lines.saturating_add(1);
        }
        output.flush()?;
        Ok(stats)
    }

    /// Write one whole line (with its ending, if any), rewritten if it is a frame with a line.
    /// Returns whether it is a builder's `Start` frame.
    fn line<W: Write>(&mut self, line: &[u8], after_start: bool, output: &mut W, stats: &mut Stats, notice: &mut dyn FnMut(Notice)) -> io::Result<bool> {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        let ending = line.get(body.len()..).unwrap_or_default();
        let Some(frame) = parse_frame(body) else {
            output.write_all(line)?;
            return Ok(is_builder_start(method_of(body)));
        };
        stats.frames = stats.frames.saturating_add(1);
        let starts = is_builder_start(Some(frame.method));
        match self.source_line(&frame, after_start, notice) {
            Some((file, number)) => {
                stats.rewritten = stats.rewritten.saturating_add(1);
                output.write_all(body.get(..frame.keep).unwrap_or_default())?;
                write!(output, " in {file}:line {number}")?;
                output.write_all(frame.suffix)?;
                output.write_all(ending)?;
            }
            None => output.write_all(line)?,
        }
        Ok(starts)
    }

    /// The file and line the runtime prints for a frame with its PDB, if the PDB is found and
    /// gives one.
    fn source_line(&mut self, frame: &FrameText<'_>, after_start: bool, notice: &mut dyn FnMut(Notice)) -> Option<(String, u32)> {
        let pdb = self.module(frame.module, notice)?;
        let rid = frame.token & 0x00FF_FFFF;
        let mut token = frame.token;
        if frame.token >> 24 == 0x06 {
            if let Some(&move_next) = pdb.kickoff.get(&rid) {
                // Printed under the kickoff method's name: MoveNext's frame, unless it is the
                // kickoff method itself, called by a builder's Start just above.
                let stub = after_start && !frame.method.ends_with(b"+MoveNext()");
                if !stub {
                    token = 0x0600_0000 | (move_next & 0x00FF_FFFF);
                }
            }
        }
        let (line, _, file) = pdb.symbols.line(token, frame.il)?;
        Some((file?.to_owned(), line))
    }

    /// The PDB of a module, looked up once.
    fn module(&mut self, module: &str, notice: &mut dyn FnMut(Notice)) -> Option<Arc<ModulePdb>> {
        if let Some(known) = self.cache.get(module) {
            return known.clone();
        }
        let stem = module::module_stem(module);
        if let Some(used) = self.named.iter().position(|(s, _)| s == stem).and_then(|i| self.used.get_mut(i)) {
            *used = true;
        }
        let found = self.find(module, notice);
        if found.is_some() || self.misses < MAX_MISSES {
            if found.is_none() {
                self.misses = self.misses.saturating_add(1);
            }
            self.cache.insert(module.to_owned(), found.clone());
        }
        found
    }

    /// Find and parse a module's PDB (see the module docs for the order).
    fn find(&self, module: &str, notice: &mut dyn FnMut(Notice)) -> Option<Arc<ModulePdb>> {
        if !module::plain_file_name(module) {
            return None;
        }
        let stem = module::module_stem(module);
        if let Some((_, pdb)) = self.named.iter().find(|(s, _)| s == stem) {
            return Some(Arc::clone(pdb));
        }
        let open = |path: &Path, bytes: Vec<u8>, notice: &mut dyn FnMut(Notice)| match ModulePdb::new(bytes) {
            Ok(pdb) => Some(Arc::new(pdb)),
            Err(error) => {
                notice(Notice::BadPdb { module: module.to_owned(), error: OpenError::Input { path: path.to_owned(), error } });
                None
            }
        };
        let paths = SymbolPaths { pdb: None, dirs: self.options.dirs.clone(), servers: self.options.servers.clone() };
        // The assembly first (it proves which PDB is the module's), then the PDB by name.
        if let Some((assembly, image)) = module::find_image(module, None, None, &paths).ok().and_then(|(p, b)| PeImage::parse(&b).is_ok().then_some((p, b))) {
            let Ok(image) = PeImage::parse(&image) else { return None };
            let mut passed = Vec::new();
            return match locate_pdb_noting(&image, Some(&assembly), &paths, &mut passed) {
                Ok(Some(found)) => {
                    let path = found.origin.path().map_or_else(|| assembly.clone(), Path::to_owned);
                    open(&path, found.bytes, notice)
                }
                Ok(None) => {
                    let why = why_no_pdb(&image, Some(&assembly), &paths, &passed);
                    notice(Notice::NoMatchingPdb { module: module.to_owned(), assembly, why });
                    None
                }
                Err(error) => {
                    notice(Notice::BadPdb { module: module.to_owned(), error });
                    None
                }
            };
        }
        let (path, bytes) = module::pdb_by_name(&module::pdb_name_of(module), &paths)?;
        match bytes {
            Ok(bytes) => open(&path, bytes, notice),
            Err(error) => {
                notice(Notice::BadPdb { module: module.to_owned(), error });
                None
            }
        }
    }
}

/// The method of a frame line, if it has the `at ` word: the bytes after `at ` (up to ` in `
/// when there is one).
fn method_of(body: &[u8]) -> Option<&[u8]> {
    let at = find_at(body)?;
    let method = body.get(at..)?;
    Some(match rfind(method, b" in ") {
        Some(i) => method.get(..i)?,
        None => method,
    })
}

/// Is this the frame of an async method builder's `Start[TStateMachine](TStateMachine& ...)`?
fn is_builder_start(method: Option<&[u8]>) -> bool {
    let Some(m) = method else { return false };
    let Some(start) = find(m, b".Start[") else { return false };
    let rest = m.get(start..).unwrap_or_default();
    find(rest, b"](").is_some() && find(rest, b"& ").is_some() && rest.ends_with(b")")
}

/// Where the method starts in a frame line: after the first `at ` that begins the line (after
/// blanks) or follows a blank.
fn find_at(body: &[u8]) -> Option<usize> {
    let mut from = 0usize;
    loop {
        let i = from.checked_add(find(body.get(from..)?, b"at ")?)?;
        let before = i.checked_sub(1).and_then(|p| body.get(p).copied());
        if before.is_none_or(|b| b == b' ' || b == b'\t') {
            return i.checked_add(3);
        }
        from = i.checked_add(1)?;
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// 1 to 8 hex digits (either case) at the start of `text`: their value and how many.
fn leading_hex(text: &[u8]) -> Option<(u32, usize)> {
    let digits = text.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 8 {
        return None;
    }
    let s = core::str::from_utf8(text.get(..digits)?).ok()?;
    Some((u32::from_str_radix(s, 16).ok()?, digits))
}

/// A frame printed without its PDB: `... at METHOD in MODULE:token 0xTOKEN+0xOFFSET`, at the end
/// of the line (line ending removed) or followed by text that does not go on with a letter,
/// digit or `_` (AggregateException ends its last inner frame with `<---`).
fn parse_frame(body: &[u8]) -> Option<FrameText<'_>> {
    let marker = rfind(body, b":token 0x")?;
    let after = body.get(marker.checked_add(9)?..)?;
    let (token, n) = leading_hex(after)?;
    let after = after.get(n..)?.strip_prefix(b"+0x")?;
    let (il, n) = leading_hex(after)?;
    let suffix = after.get(n..)?;
    if suffix.first().is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let head = body.get(..marker)?;
    let keep = rfind(head, b" in ")?;
    let module = core::str::from_utf8(head.get(keep.checked_add(4)?..)?).ok()?;
    let method_start = find_at(head.get(..keep)?)?;
    let method = head.get(method_start..keep)?;
    if method.is_empty() || module.is_empty() {
        return None;
    }
    Some(FrameText { keep, method, module, token, il, suffix })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_from_the_end_of_the_line() {
        let f = parse_frame(b"   at Shop.Pricing.Report(String where) in Shop.dll:token 0x6000004+0x1b").unwrap();
        assert_eq!((f.module, f.token, f.il, f.method), ("Shop.dll", 0x0600_0004, 0x1b, &b"Shop.Pricing.Report(String where)"[..]));
        assert_eq!(f.keep, "   at Shop.Pricing.Report(String where)".len());
        assert_eq!(f.suffix, b"");
        let f = parse_frame(b"   at A.B() in A.dll:token 0x6000005+0xdb<---").unwrap();
        assert_eq!((f.token, f.il, f.suffix), (0x0600_0005, 0xdb, &b"<---"[..]));
        // Upper-case hex, a parameter named `in`, a log prefix.
        let f = parse_frame(b"12:00 INFO at A.B(String in) in My App.dll:token 0x600000A+0xFF").unwrap();
        assert_eq!((f.module, f.token, f.il, f.method), ("My App.dll", 0x0600_000A, 0xff, &b"A.B(String in)"[..]));
        for not in [
            &b"   at A.B() in A.dll:token 0x6000001+0x"[..],
            b"   at A.B() in A.dll:token 0x+0x1",
            b"   at A.B() in A.dll:token 0x6000001+0x123456789",
            b"   at A.B() in A.dll:token 0x6000001+0x1f_",
            b"   at A.B() in A.dll:token 0x6000001+0x1fg",
            b"   at A.B() in :token 0x6000001+0x1",
            b"   atA.B() in A.dll:token 0x6000001+0x1",
            b"   at A.B() A.dll:token 0x6000001+0x1",
            b"   at A.B() in /_/src/A.cs:line 5",
            b"",
        ] {
            assert_eq!(parse_frame(not), None, "{}", String::from_utf8_lossy(not));
        }
    }

    #[test]
    fn builder_start_frames() {
        let start = b"   at System.Runtime.CompilerServices.AsyncMethodBuilderCore.Start[TStateMachine](TStateMachine& stateMachine) in System.Private.CoreLib.dll:token 0x6006233+0x28";
        assert!(is_builder_start(method_of(start)));
        assert!(is_builder_start(method_of(b"   at System.Runtime.CompilerServices.AsyncMethodBuilderCore.Start[TStateMachine](TStateMachine& stateMachine)")));
        assert!(!is_builder_start(method_of(b"   at Shop.Pricing.SyncPart() in Shop.dll:token 0x6000008+0x1f")));
        assert!(!is_builder_start(method_of(b"Start[T](T& x)")));
    }

    #[test]
    fn long_lines_pass_through_and_bytes_are_kept() {
        let mut text = Vec::new();
        text.extend_from_slice(b"a\r\n\xff\xfe bad utf-8\n");
        text.extend(std::iter::repeat_n(b'x', MAX_LINE * 3));
        text.extend_from_slice(b" in A.dll:token 0x6000001+0x1\n   at A.B() in A.dll:token 0x6000001+0x1");
        let mut r = Rewriter::new(Options::default()).unwrap();
        let mut out = Vec::new();
        // A small reader buffer: lines arrive in many pieces.
        let stats = r.rewrite(std::io::BufReader::with_capacity(7, &text[..]), &mut out, &mut |_| {}).unwrap();
        assert_eq!(out, text);
        assert_eq!(stats, Stats { lines: 4, frames: 1, rewritten: 0 });
    }
}

//! `clrmap dict`: generic dictionary maps (GetGenericDictionaryInfo).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use clrmap::gdmap::{DictionaryMap, DictionaryMapBuilder, Lookup, SortedFlag};
use clrmap::signature::{check_names, parse_type_list, stream_one, HexTokens, TypeNames};
use clrmap::{Error, ErrorKind};

use crate::args::parse_u32;
use crate::output::{read_file, CliError, IoFmt, JsonEscape, TextEscape};

/// `clrmap dict ...`
#[derive(Debug, Subcommand)]
pub enum DictCommand {
    /// Print a whole map: header, then each entry's RVA, heap offset and types.
    ///
    /// The map is validated strictly first; the first fault exits 1 with its kind and offset.
    ///
    /// Example: `clrmap dict show examples/two-lists.gdmap --json`
    #[command(verbatim_doc_comment)]
    Show {
        /// The map file.
        file: PathBuf,
        /// One JSON object: {"entries":[{"rva":N,"types":["..."]}]}.
        #[arg(long)]
        json: bool,
        /// Name tokens from this assembly's metadata (`class System.String`) instead of printing 0x... tokens.
        /// An entry whose types name a row there that cannot be named (a TypeSpec that does not
        /// decode, one that contains itself, a type whose name cannot be read) shows
        /// `!error <kind>` in place of its types (JSON: "error":"<kind>" in place of "types");
        /// every entry is still printed, then the command exits 1 naming the first such fault.
        #[arg(long, value_name = "ASSEMBLY")]
        metadata: Option<PathBuf>,
    },
    /// Print the types of the dictionary at one RVA, one type per line.
    ///
    /// Example: `clrmap dict lookup examples/two-lists.gdmap 0x2010`
    #[command(verbatim_doc_comment)]
    Lookup {
        /// The map file.
        file: PathBuf,
        /// The dictionary's RVA: hex with 0x, or decimal.
        #[arg(value_parser = parse_u32)]
        rva: u32,
        /// A JSON object {"rva","offset","types"}.
        #[arg(long)]
        json: bool,
        /// Name tokens from this assembly's metadata. A type that names a row there that cannot
        /// be named exits 1 with the fault's kind and offset, and prints nothing.
        #[arg(long, value_name = "ASSEMBLY")]
        metadata: Option<PathBuf>,
    },
    /// Check a map strictly (sorted, in bounds, every signature whole); exit 0 if valid, 1 with the first fault.
    ///
    /// With --lint, also list what is legal but suspect: unreferenced heap bytes, overlapping
    /// items, non-canonical compressed integers, duplicate entries.
    ///
    /// Example: `clrmap dict validate examples/two-lists.gdmap --lint`
    #[command(verbatim_doc_comment)]
    Validate {
        /// The map file.
        file: PathBuf,
        /// Also report non-fatal findings.
        #[arg(long)]
        lint: bool,
        /// JSON on stdout (and the error as JSON on stderr).
        #[arg(long)]
        json: bool,
    },
    /// Build a map from a manifest of RVA → types, written in the notation `sig decode` prints (`class 0x01000005<int32>`), tokens
    /// as 0x... (see examples/two-lists.manifest).
    ///
    /// Text manifest: one `RVA: type, type, ...` per line; `#` starts a comment.
    /// JSON manifest: `[{"rva": 4096, "types": ["int32"]}, ...]`, or the output of `dict show --json`.
    ///
    /// Example: `clrmap dict build examples/two-lists.manifest -o /tmp/out.gdmap --sort`
    #[command(verbatim_doc_comment)]
    Build {
        /// The manifest (text, or JSON if it starts with `[` or `{`).
        manifest: PathBuf,
        /// Where to write the map.
        #[arg(short, long)]
        output: PathBuf,
        /// Sort the entries by RVA (and so set the sorted flag).
        #[arg(long)]
        sort: bool,
    },
    /// Build a realistic map from an assembly: one entry per MethodSpec (its blob after 0x0A) and
    /// per GENERICINST TypeSpec (its argument list); identical instantiations share one item.
    /// RVAs are synthetic: 0x01000000 + 16·row for TypeSpecs, 0x02000000 + 16·row for MethodSpecs.
    ///
    /// Example: `clrmap dict from-assembly tests/fixtures/frames/release-portable/Frames.dll -o /tmp/frames.gdmap`, then
    /// `clrmap dict show /tmp/frames.gdmap --metadata tests/fixtures/frames/release-portable/Frames.dll`
    #[command(verbatim_doc_comment)]
    FromAssembly {
        /// The assembly.
        assembly: PathBuf,
        /// Where to write the map.
        #[arg(short, long)]
        output: PathBuf,
        /// Put MethodSpecs before TypeSpecs, so the directory is out of RVA order (flag clear).
        #[arg(long)]
        unsorted: bool,
    },
}

/// Run `f` with the token namer chosen by `--metadata`: real names, or 0x... tokens.
fn with_names<T>(metadata: Option<&PathBuf>, f: impl FnOnce(&dyn TypeNames) -> Result<T, CliError>) -> Result<T, CliError> {
    match metadata {
        None => f(&HexTokens),
        Some(path) => {
            let bytes = read_file(path)?;
            let md = clrmap::metadata::Metadata::parse(&bytes).map_err(CliError::input)?;
            f(&md)
        }
    }
}

/// Print the types of one item as `t1, t2` (text) or `"t1","t2"` (JSON), each streamed as it is
/// decoded. The item must have been validated.
pub(crate) fn write_types(types: &[u8], count: u32, json: bool, names: &dyn TypeNames, w: &mut dyn core::fmt::Write) -> Result<core::fmt::Result, Error> {
    let mut r = clrmap::read::Reader::new(types, 0);
    for i in 0..count {
        let step = (|| -> Result<core::fmt::Result, Error> {
            if i > 0 && w.write_str(if json { "," } else { ", " }).is_err() {
                return Ok(Err(core::fmt::Error));
            }
            if !json {
                // Names from a file are escaped as all text output escapes them (output::Text).
                let mut w = TextEscape::new(w);
                return stream_one(&mut r, names, &mut w).map(|res| res.and_then(|()| w.finish()));
            }
            if w.write_str("\"").is_err() {
                return Ok(Err(core::fmt::Error));
            }
            if let Err(e) = stream_one(&mut r, names, &mut JsonEscape(w))? {
                return Ok(Err(e));
            }
            Ok(w.write_str("\""))
        })()?;
        if step.is_err() {
            return Ok(step);
        }
    }
    Ok(Ok(()))
}

/// Keeps what is written in memory up to a limit, and fails past it (the item is then checked
/// first and streamed).
struct Bounded {
    buf: Vec<u8>,
    limit: usize,
}

impl core::fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        if self.buf.len().saturating_add(s.len()) > self.limit {
            return Err(core::fmt::Error);
        }
        self.buf.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// The most bytes of one item's printed types rendered in memory (and kept for reuse), and of
/// all the kept ones.
const ITEM_CACHE_LIMIT: usize = 1 << 20;
const CACHE_LIMIT: usize = 64 << 20;

/// Map a printer's result: a decoding error is bad input, a writing error is I/O.
fn finish_write(r: Result<core::fmt::Result, Error>, io: Option<std::io::Error>, json: bool) -> Result<(), CliError> {
    match (r, io) {
        (Err(e), _) => Err(CliError::input_json(e, json)),
        (Ok(_), Some(e)) => Err(CliError::Io(e)),
        (Ok(Ok(())), None) => Ok(()),
        (Ok(Err(_)), None) => Err(CliError::Io(std::io::Error::other("formatting failed"))),
    }
}

/// Decode all `count` types of an item and name every token in them, writing nothing: the
/// fault that printing them would meet, found before anything is written.
fn check_types(types: &[u8], count: u32, names: &dyn TypeNames) -> Result<(), Error> {
    let mut r = clrmap::read::Reader::new(types, 0);
    for _ in 0..count {
        check_names(&mut r, names)?;
    }
    Ok(())
}

/// What an entry's line shows after its RVA and offset.
enum Shown<'a> {
    /// The printed types, whole.
    Text(&'a [u8]),
    /// A type names a row of the metadata that cannot be named: `!error <kind>`.
    Fault(Error),
    /// Too long to hold: checked whole, to be streamed.
    Stream,
}

/// The entries whose types could not be named: how many, and the first one's fault and RVA.
struct Faults {
    count: u64,
    first: Option<(Error, u32)>,
}

impl Faults {
    /// The command's error when any entry's types could not be named (`metadata` is where the
    /// fault's offset is), after every line was printed.
    fn into_result(self, entries: u32, metadata: Option<&Path>, json: bool) -> Result<(), CliError> {
        let Some((error, rva)) = self.first else { return Ok(()) };
        let place = if json { "has \"error\":\"<kind>\" in place of \"types\"" } else { "shows `!error <kind>` in place of its types" };
        let source = metadata.map_or_else(|| "the metadata".to_owned(), |p| p.display().to_string());
        let note = format!("note: the offset is in {source}; {} of {entries} entries name a type there that cannot be named (the first at RVA 0x{rva:08X}), and each {place}", self.count);
        Err(CliError::Noted { error, note })
    }
}

/// `dict show` with a chosen token namer (the metadata-aware form passes real names).
///
/// Both forms stream: each entry is printed as it is reached, and the printed types of an item
/// shared by many entries are kept (up to a bound) rather than rendered again. Only whole lines
/// are written: an entry whose types name a row of `names` that cannot be named
/// ([`TypeNames::name_fault`]) shows `!error <kind>` (JSON: `"error":"<kind>"`) in place of its
/// types, found before any of its line is written, and the command fails after the last line
/// with the first such fault (its offset is in `metadata`).
pub fn show(bytes: &[u8], json: bool, names: &dyn TypeNames, metadata: Option<&Path>, out: &mut dyn Write) -> Result<(), CliError> {
    let fail = |e| CliError::input_json(e, json);
    let map = DictionaryMap::parse(bytes).map_err(fail)?;
    map.validate().map_err(fail)?;
    let sorted = map.is_sorted_flag_set();
    if json {
        // docs/output.md#generic-dictionary-maps's JSON, field order included: the bytes serde_json gives the whole object.
        write!(out, "{{\"sorted\":{sorted},\"count\":{},\"heap_size\":{},\"entries\":[", map.len(), map.heap_size())?;
    } else {
        writeln!(out, "sorted: {}  entries: {}  heap: {} bytes", if sorted { "yes" } else { "no" }, map.len(), map.heap_size())?;
    }
    // Per item offset: its printed types, or its fault.
    let mut cache: HashMap<u32, Result<Vec<u8>, Error>> = HashMap::new();
    let mut too_big: HashSet<u32> = HashSet::new();
    let mut cached = 0usize;
    let mut faults = Faults { count: 0, first: None };
    for (i, e) in map.entries().enumerate() {
        // Decide what the line shows before writing any of it.
        let item = map.item_of(&e).map_err(fail)?;
        let mut fresh: Option<Result<Vec<u8>, Error>> = None;
        let shown = match cache.get(&e.offset) {
            Some(Ok(text)) => Shown::Text(text),
            Some(Err(err)) => Shown::Fault(*err),
            None => {
                let held = if too_big.contains(&e.offset) {
                    None
                } else {
                    let mut w = Bounded { buf: Vec::new(), limit: ITEM_CACHE_LIMIT };
                    match write_types(item.type_bytes(), item.count, json, names, &mut w) {
                        Ok(Ok(())) => Some(Ok(w.buf)),
                        Err(err) => Some(Err(err)),
                        // Past the limit.
                        Ok(Err(_)) => None,
                    }
                };
                match held {
                    Some(r) => fresh.insert(r).as_ref().map(|t| Shown::Text(t)).unwrap_or_else(|err| Shown::Fault(*err)),
                    None => {
                        too_big.insert(e.offset);
                        match check_types(item.type_bytes(), item.count, names) {
                            Ok(()) => Shown::Stream,
                            Err(err) => {
                                fresh = Some(Err(err));
                                Shown::Fault(err)
                            }
                        }
                    }
                }
            }
        };
        if json {
            write!(out, "{}{{\"rva\":{},\"offset\":{},", if i > 0 { "," } else { "" }, e.rva, e.offset)?;
        } else {
            write!(out, "0x{:08X}  +{:<6}  ", e.rva, e.offset)?;
        }
        match shown {
            Shown::Text(text) if json => {
                out.write_all(b"\"types\":[")?;
                out.write_all(text)?;
                out.write_all(b"]}")?;
            }
            Shown::Text(text) => {
                out.write_all(text)?;
                out.write_all(b"\n")?;
            }
            Shown::Fault(err) => {
                faults.count = faults.count.saturating_add(1);
                faults.first.get_or_insert((err, e.rva));
                if json {
                    write!(out, "\"error\":\"{}\"}}", err.kind)?;
                } else {
                    writeln!(out, "!error {}", err.kind)?;
                }
            }
            Shown::Stream => {
                if json {
                    out.write_all(b"\"types\":[")?;
                }
                let mut w = IoFmt::new(out);
                let r = write_types(item.type_bytes(), item.count, json, names, &mut w);
                let io = w.take_error();
                finish_write(r, io, json)?;
                out.write_all(if json { b"]}" } else { b"\n" })?;
            }
        }
        if let Some(r) = fresh {
            let size = r.as_ref().map_or(core::mem::size_of::<Error>(), Vec::len);
            if cached.saturating_add(size) <= CACHE_LIMIT {
                cached = cached.saturating_add(size);
                cache.insert(e.offset, r);
            }
        }
    }
    if json {
        out.write_all(b"]}\n")?;
    }
    faults.into_result(map.len(), metadata, json)
}

/// `dict lookup` with a chosen token namer. Every type is checked, its names included, before
/// anything is written: a type that names a row of `names` that cannot be named fails the
/// command with nothing on stdout (its offset is in `metadata`).
pub fn lookup(bytes: &[u8], rva: u32, json: bool, names: &dyn TypeNames, metadata: Option<&Path>, out: &mut dyn Write) -> Result<(), CliError> {
    let fail = |e| CliError::input_json(e, json);
    let map = DictionaryMap::parse(bytes).map_err(fail)?;
    let l = Lookup::new(map, SortedFlag::Verify).map_err(fail)?;
    let e = l.find(rva).ok_or_else(|| fail(Error::at_rva(ErrorKind::NotFound, rva, "an entry with this RVA")))?;
    let item = map.item_of(&e).map_err(fail)?;
    item.validate().map_err(fail)?;
    if let Err(error) = check_types(item.type_bytes(), item.count, names) {
        let source = metadata.map_or_else(|| "the metadata".to_owned(), |p| p.display().to_string());
        let note = format!("note: the offset is in {source}; the dictionary at RVA 0x{:08X} names a type there that cannot be named", e.rva);
        return Err(CliError::Noted { error, note });
    }
    if json {
        write!(out, "{{\"rva\":{},\"offset\":{},\"types\":[", e.rva, e.offset)?;
        let mut w = IoFmt::new(out);
        let r = write_types(item.type_bytes(), item.count, true, names, &mut w);
        let io = w.take_error();
        finish_write(r, io, json)?;
        out.write_all(b"]}\n")?;
    } else {
        let mut r = clrmap::read::Reader::new(item.type_bytes(), 0);
        for _ in 0..item.count {
            let mut w = IoFmt::new(out);
            let mut escaped = TextEscape::new(&mut w);
            let res = stream_one(&mut r, names, &mut escaped).map(|res| res.and_then(|()| escaped.finish()));
            let io = w.take_error();
            finish_write(res, io, json)?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

fn validate(bytes: &[u8], lint: bool, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let fail = |e| CliError::input_json(e, json);
    let map = DictionaryMap::parse(bytes).map_err(fail)?;
    let lints = if lint { map.lint().map_err(fail)? } else { map.validate().map(|()| Vec::new()).map_err(fail)? };
    if json {
        // The bytes serde_json gives {"valid","sorted","count","heap_size","lints"}, one lint at a time.
        write!(out, "{{\"valid\":true,\"sorted\":{},\"count\":{},\"heap_size\":{},\"lints\":[", map.is_sorted_flag_set(), map.len(), map.heap_size())?;
        for (i, l) in lints.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *out, l).map_err(crate::output::json_io)?;
        }
        out.write_all(b"]}\n")?;
    } else {
        writeln!(out, "valid: {} entries, heap {} bytes", map.len(), map.heap_size())?;
        for l in &lints {
            writeln!(out, "lint: {} at offset {} ({} bytes)", l.kind.as_str(), l.offset, l.length)?;
        }
    }
    Ok(())
}

/// One manifest entry.
#[derive(Debug, serde::Deserialize)]
struct ManifestEntry {
    rva: u32,
    types: Vec<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum JsonManifest {
    List(Vec<ManifestEntry>),
    Map { entries: Vec<ManifestEntry> },
}

/// Parse a manifest into (RVA, type texts) pairs; errors name the line.
fn read_manifest(text: &str) -> Result<Vec<(u32, String)>, CliError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        let m: JsonManifest = serde_json::from_str(text).map_err(|e| CliError::Message(format!("manifest: bad JSON: {e}")))?;
        let entries = match m {
            JsonManifest::List(l) => l,
            JsonManifest::Map { entries } => entries,
        };
        return Ok(entries.into_iter().map(|e| (e.rva, e.types.join(","))).collect());
    }
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (rva, types) = line.split_once(':').ok_or_else(|| CliError::Message(format!("manifest line {}: expected `RVA: type, ...`", n.saturating_add(1))))?;
        let rva = parse_u32(rva.trim()).map_err(|e| CliError::Message(format!("manifest line {}: {e}", n.saturating_add(1))))?;
        out.push((rva, types.trim().to_owned()));
    }
    Ok(out)
}

fn build(manifest: &[u8], sort: bool) -> Result<Vec<u8>, CliError> {
    let text = std::str::from_utf8(manifest).map_err(|_| CliError::Message("manifest: not UTF-8".into()))?;
    let mut b = DictionaryMapBuilder::new();
    b.sort_by_rva(sort);
    for (i, (rva, types)) in read_manifest(text)?.into_iter().enumerate() {
        let parsed = parse_type_list(&types).map_err(|e| CliError::Message(format!("manifest entry {} (RVA 0x{rva:X}): {e} in `{types}`", i.saturating_add(1))))?;
        b.add(rva, &parsed).map_err(|e| CliError::Message(format!("manifest entry {} (RVA 0x{rva:X}): {}: {}", i.saturating_add(1), e.kind, e.message())))?;
    }
    b.build().map_err(CliError::input)
}

/// Write a map whole or not at all, never through a link or into a FIFO planted at `path`
/// (`clrmap::fs::write_new`).
fn write_output(path: &std::path::Path, bytes: &[u8]) -> Result<(), CliError> {
    clrmap::fs::write_new(path, bytes).map_err(|e| CliError::Kinded { kind: "io", message: format!("cannot write {}: {e}", path.display()) })
}

/// Run a `dict` command.
pub fn run(cmd: DictCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        DictCommand::Show { file, json, metadata } => {
            let bytes = read_file(&file)?;
            with_names(metadata.as_ref(), |names| show(&bytes, json, names, metadata.as_deref(), out))
        }
        DictCommand::Lookup { file, rva, json, metadata } => {
            let bytes = read_file(&file)?;
            with_names(metadata.as_ref(), |names| lookup(&bytes, rva, json, names, metadata.as_deref(), out))
        }
        DictCommand::FromAssembly { assembly, output, unsorted } => {
            let bytes = read_file(&assembly)?;
            let md = clrmap::metadata::Metadata::parse(&bytes).map_err(CliError::input)?;
            let map = clrmap::gdmap::instantiation_map(&md, !unsorted).map_err(CliError::input)?;
            write_output(&output, &map)?;
            let parsed = DictionaryMap::parse(&map).map_err(CliError::input)?;
            writeln!(out, "wrote {} ({} entries, {} bytes)", output.display(), parsed.len(), map.len())?;
            Ok(())
        }
        DictCommand::Validate { file, lint, json } => validate(&read_file(&file)?, lint, json, out),
        DictCommand::Build { manifest, output, sort } => {
            let bytes = build(&read_file(&manifest)?, sort)?;
            write_output(&output, &bytes)?;
            let map = DictionaryMap::parse(&bytes).map_err(CliError::input)?;
            writeln!(out, "wrote {} ({} entries, {} bytes)", output.display(), map.len(), bytes.len())?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escape_is_serde_json_s() {
        let mut all: String = (0u32..0x80).filter_map(char::from_u32).collect();
        all.push_str("é€𝄞\u{7f}\u{2028}");
        for s in [all.as_str(), "", "plain", "a\"b\\c\nd"] {
            let mut mine = String::new();
            core::fmt::Write::write_str(&mut JsonEscape(&mut mine), s).unwrap();
            assert_eq!(format!("\"{mine}\""), serde_json::to_string(s).unwrap());
        }
    }

    #[test]
    fn manifest_forms() {
        let t = read_manifest("# c\n0x10: int32, string\n\n32 : class 0x01000005<int32,int8> # x\n").unwrap();
        assert_eq!(t, [(0x10, "int32, string".to_owned()), (32, "class 0x01000005<int32,int8>".to_owned())]);
        let j = read_manifest(r#"[{"rva":16,"types":["int32","string"]}]"#).unwrap();
        assert_eq!(j, [(16, "int32,string".to_owned())]);
        let j = read_manifest(r#"{"sorted":true,"entries":[{"rva":16,"offset":0,"types":["int32"]}]}"#).unwrap();
        assert_eq!(j, [(16, "int32".to_owned())]);
        assert!(read_manifest("nocolon").is_err());
    }
}

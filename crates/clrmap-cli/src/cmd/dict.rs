//! `clrmap dict`: generic dictionary maps (GetGenericDictionaryInfo).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use clrmap::gdmap::{DictionaryMap, DictionaryMapBuilder, Lookup, SortedFlag};
use clrmap::signature::{parse_type_list, HexTokens, TypeNames};
use clrmap::{Error, ErrorKind};

use crate::output::{read_file, CliError};

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
        /// One JSON object, as the output contract §3 gives it.
        #[arg(long)]
        json: bool,
        /// Name tokens from this assembly's metadata (contract §1) instead of printing 0x... tokens.
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
        /// Name tokens from this assembly's metadata.
        #[arg(long, value_name = "ASSEMBLY")]
        metadata: Option<PathBuf>,
    },
    /// Check a map strictly (output contract §3); exit 0 if valid, 1 with the first fault.
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
    /// Build a map from a manifest of RVA → types, written in the contract's notation with tokens
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
    /// Example: `clrmap dict from-assembly System.Linq.dll -o linq.gdmap`, then
    /// `clrmap dict show linq.gdmap --metadata System.Linq.dll`
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

/// `0x`-prefixed hex or decimal.
pub fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("not a 32-bit number: {s} ({e})"))
}

/// Contract §3's JSON, field order included.
#[derive(serde::Serialize)]
struct JsonMap<'a> {
    sorted: bool,
    count: u32,
    heap_size: usize,
    entries: Vec<JsonEntry<'a>>,
}

#[derive(serde::Serialize)]
struct JsonEntry<'a> {
    rva: u32,
    offset: u32,
    types: &'a [String],
}

#[derive(serde::Serialize)]
struct JsonValidation<'a> {
    valid: bool,
    sorted: bool,
    count: u32,
    heap_size: usize,
    lints: &'a [clrmap::gdmap::Lint],
}

/// One rendered entry: RVA, heap offset, types (shared between entries of one item).
type Row = (u32, u32, std::rc::Rc<Vec<String>>);

/// Render every entry's types, decoding each distinct item once.
fn render_all(map: &DictionaryMap<'_>, names: &dyn TypeNames) -> Result<Vec<Row>, Error> {
    let mut cache: HashMap<u32, std::rc::Rc<Vec<String>>> = HashMap::new();
    let mut rows = Vec::with_capacity(map.len() as usize);
    for e in map.entries() {
        let types = match cache.get(&e.offset) {
            Some(t) => t.clone(),
            None => {
                let t = std::rc::Rc::new(map.item_of(&e)?.render(names)?);
                cache.insert(e.offset, t.clone());
                t
            }
        };
        rows.push((e.rva, e.offset, types));
    }
    Ok(rows)
}

/// `dict show` with a chosen token namer (the metadata-aware form passes real names).
pub fn show(bytes: &[u8], json: bool, names: &dyn TypeNames, out: &mut dyn Write) -> Result<(), CliError> {
    let fail = |e| CliError::input_json(e, json);
    let map = DictionaryMap::parse(bytes).map_err(fail)?;
    map.validate().map_err(fail)?;
    let rows = render_all(&map, names).map_err(fail)?;
    if json {
        let entries: Vec<JsonEntry<'_>> =
            rows.iter().map(|(rva, offset, types)| JsonEntry { rva: *rva, offset: *offset, types }).collect();
        let v = JsonMap { sorted: map.is_sorted_flag_set(), count: map.len(), heap_size: map.heap_size(), entries };
        writeln!(out, "{}", serde_json::to_string(&v).map_err(std::io::Error::other)?)?;
    } else {
        writeln!(
            out,
            "sorted: {}  entries: {}  heap: {} bytes",
            if map.is_sorted_flag_set() { "yes" } else { "no" },
            map.len(),
            map.heap_size()
        )?;
        for (rva, offset, types) in &rows {
            writeln!(out, "0x{rva:08X}  +{offset:<6}  {}", types.join(", "))?;
        }
    }
    Ok(())
}

/// `dict lookup` with a chosen token namer.
pub fn lookup(bytes: &[u8], rva: u32, json: bool, names: &dyn TypeNames, out: &mut dyn Write) -> Result<(), CliError> {
    let fail = |e| CliError::input_json(e, json);
    let map = DictionaryMap::parse(bytes).map_err(fail)?;
    let l = Lookup::new(map, SortedFlag::Verify).map_err(fail)?;
    let e = l.find(rva).ok_or_else(|| fail(Error::new(ErrorKind::NotFound, 0, "an entry with this RVA")))?;
    let types = map.item_of(&e).and_then(|i| i.render(names)).map_err(fail)?;
    if json {
        let v = JsonEntry { rva: e.rva, offset: e.offset, types: &types };
        writeln!(out, "{}", serde_json::to_string(&v).map_err(std::io::Error::other)?)?;
    } else {
        for t in types {
            writeln!(out, "{t}")?;
        }
    }
    Ok(())
}

fn validate(bytes: &[u8], lint: bool, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let fail = |e| CliError::input_json(e, json);
    let map = DictionaryMap::parse(bytes).map_err(fail)?;
    let lints = if lint { map.lint().map_err(fail)? } else { map.validate().map(|()| Vec::new()).map_err(fail)? };
    if json {
        let v = JsonValidation {
            valid: true,
            sorted: map.is_sorted_flag_set(),
            count: map.len(),
            heap_size: map.heap_size(),
            lints: &lints,
        };
        writeln!(out, "{}", serde_json::to_string(&v).map_err(std::io::Error::other)?)?;
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
        let m: JsonManifest =
            serde_json::from_str(text).map_err(|e| CliError::Message(format!("manifest: bad JSON: {e}")))?;
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
        let (rva, types) = line
            .split_once(':')
            .ok_or_else(|| CliError::Message(format!("manifest line {}: expected `RVA: type, ...`", n.saturating_add(1))))?;
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
        let parsed = parse_type_list(&types)
            .map_err(|e| CliError::Message(format!("manifest entry {} (RVA 0x{rva:X}): {e} in `{types}`", i.saturating_add(1))))?;
        b.add(rva, &parsed)
            .map_err(|e| CliError::Message(format!("manifest entry {} (RVA 0x{rva:X}): {}: {}", i.saturating_add(1), e.kind, e.message())))?;
    }
    b.build().map_err(CliError::input)
}

/// Run a `dict` command.
pub fn run(cmd: DictCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        DictCommand::Show { file, json, metadata } => {
            let bytes = read_file(&file)?;
            with_names(metadata.as_ref(), |names| show(&bytes, json, names, out))
        }
        DictCommand::Lookup { file, rva, json, metadata } => {
            let bytes = read_file(&file)?;
            with_names(metadata.as_ref(), |names| lookup(&bytes, rva, json, names, out))
        }
        DictCommand::FromAssembly { assembly, output, unsorted } => {
            let bytes = read_file(&assembly)?;
            let md = clrmap::metadata::Metadata::parse(&bytes).map_err(CliError::input)?;
            let map = clrmap::metadata::instantiation_map(&md, !unsorted).map_err(CliError::input)?;
            std::fs::write(&output, &map)
                .map_err(|e| CliError::Message(format!("cannot write {}: {e}", output.display())))?;
            let parsed = DictionaryMap::parse(&map).map_err(CliError::input)?;
            writeln!(out, "wrote {} ({} entries, {} bytes)", output.display(), parsed.len(), map.len())?;
            Ok(())
        }
        DictCommand::Validate { file, lint, json } => validate(&read_file(&file)?, lint, json, out),
        DictCommand::Build { manifest, output, sort } => {
            let bytes = build(&read_file(&manifest)?, sort)?;
            std::fs::write(&output, &bytes)
                .map_err(|e| CliError::Message(format!("cannot write {}: {e}", output.display())))?;
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

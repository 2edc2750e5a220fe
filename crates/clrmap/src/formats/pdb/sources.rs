//! What a portable PDB says about its source files (PortablePdb-Metadata.md, "Document table"
//! and "CustomDebugInformation table"): each document's hash and language, the source text a
//! compiler embedded (`<EmbedAllSources>`), and the SourceLink map from document paths to URLs.
//!
//! ```text
//! CustomDebugInformation (0x37): Parent (HasCustomDebugInformation) | Kind (guid) | Value (blob)
//! Embedded source (Kind 0E8A571B-6926-466E-B4AD-8AB04611F5FE, Parent a Document):
//!     format (i32: 0 the text as is; > 0 the text's size, then the text deflated) | bytes
//! SourceLink (Kind CC110556-A091-4D38-9FEC-25AB9A351A6A, Parent the Module):
//!     UTF-8 JSON {"documents": {"C:\\src\\*": "https://host/repo/commit/*", ...}}
//! ```
//!
//! SourceLink's rule (the Source Link specification, dotnet/designs
//! `accepted/2020/diagnostics/source-link.md`): a key ending in `*` matches every path that
//! starts with the key's text before the `*` (compared ignoring ASCII case); the URL is the
//! value with its `*` replaced by the rest of the path, its `\` turned into `/`. Any other key
//! matches the path exactly. Of the keys that match, the longest wins.

use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::metadata::schema::{table, Coded};

use super::PortablePdb;

/// A GUID in GUID byte order (Data1, Data2, Data3 little-endian), as the `#GUID` heap holds it.
const fn guid(d1: u32, d2: u16, d3: u16, d4: [u8; 8]) -> [u8; 16] {
    let a = d1.to_le_bytes();
    let b = d2.to_le_bytes();
    let c = d3.to_le_bytes();
    [a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d4[0], d4[1], d4[2], d4[3], d4[4], d4[5], d4[6], d4[7]]
}

/// The Kind of the SourceLink custom debug information.
pub const SOURCE_LINK: [u8; 16] = guid(0xCC11_0556, 0xA091, 0x4D38, [0x9F, 0xEC, 0x25, 0xAB, 0x9A, 0x35, 0x1A, 0x6A]);
/// The Kind of a document's embedded source.
pub const EMBEDDED_SOURCE: [u8; 16] = guid(0x0E8A_571B, 0x6926, 0x466E, [0xB4, 0xAD, 0x8A, 0xB0, 0x46, 0x11, 0xF5, 0xFE]);

/// Document hash algorithms: SHA-1.
pub const HASH_SHA1: [u8; 16] = guid(0xff18_16ec, 0xaa5e, 0x4d10, [0x87, 0xf7, 0x6f, 0x49, 0x63, 0x83, 0x34, 0x60]);
/// SHA-256.
pub const HASH_SHA256: [u8; 16] = guid(0x8829_d00f, 0x11b8, 0x4213, [0x87, 0x8b, 0x77, 0x0e, 0x85, 0x97, 0xac, 0x16]);

/// The languages compilers write (PortablePdb-Metadata.md, "Document table: Language").
const LANGUAGES: [([u8; 16], &str); 3] = [
    (guid(0x3f51_62f8, 0x07c6, 0x11d3, [0x90, 0x53, 0x00, 0xc0, 0x4f, 0xa3, 0x02, 0xa1]), "csharp"),
    (guid(0x3a12_d0b8, 0xc26c, 0x11d0, [0xb4, 0x42, 0x00, 0xa0, 0x24, 0x4a, 0x1d, 0xd2]), "visualbasic"),
    (guid(0xab4f_38c9, 0xb6e6, 0x43ba, [0xbe, 0x3b, 0x58, 0x08, 0x0b, 0x2c, 0xcc, 0xe3]), "fsharp"),
];

/// A language GUID's name (`csharp`, `visualbasic`, `fsharp`), `None` for another.
pub fn language_name(language: &[u8; 16]) -> Option<&'static str> {
    LANGUAGES.iter().find(|(g, _)| g == language).map(|(_, n)| *n)
}

/// A hash algorithm GUID's name (`sha1`, `sha256`), `None` for another (or none).
pub fn hash_name(algorithm: &[u8; 16]) -> Option<&'static str> {
    match *algorithm {
        HASH_SHA1 => Some("sha1"),
        HASH_SHA256 => Some("sha256"),
        _ => None,
    }
}

/// A GUID (GUID byte order) in its dashed lower-case form.
pub fn guid_text(g: &[u8; 16]) -> String {
    let [a0, a1, a2, a3, b0, b1, c0, c1, d @ ..] = *g;
    let mut s = format!("{:08x}-{:04x}-{:04x}-", u32::from_le_bytes([a0, a1, a2, a3]), u16::from_le_bytes([b0, b1]), u16::from_le_bytes([c0, c1]));
    for (i, b) in d.iter().enumerate() {
        if i == 2 {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The largest embedded source text inflated: 64 MiB (and never more than 1032 times its
/// deflated size, deflate's limit).
pub const MAX_SOURCE: usize = 64 << 20;

/// A document's embedded source, as the PDB holds it (not yet inflated).
#[derive(Clone, Copy, Debug)]
pub struct EmbeddedSource<'a> {
    /// 0: `data` is the text; otherwise the text's size, and `data` is deflated.
    format: u32,
    data: Reader<'a>,
    /// Where the blob's format field is.
    at: u64,
}

impl<'a> EmbeddedSource<'a> {
    /// Whether the text is stored deflated.
    pub fn is_compressed(&self) -> bool {
        self.format != 0
    }

    /// The text's size in bytes.
    pub fn size(&self) -> u64 {
        if self.format == 0 {
            self.data.len() as u64
        } else {
            u64::from(self.format)
        }
    }

    /// The bytes stored in the PDB (deflated or not).
    pub fn stored_size(&self) -> u64 {
        self.data.len() as u64
    }

    /// The text, inflated when stored deflated: `bad_pdb` at the blob for a stream that does not
    /// inflate to its declared size, or for a text over `max` bytes (checked before inflating).
    pub fn text(&self, max: usize) -> Result<Vec<u8>> {
        let size = usize::try_from(self.size()).unwrap_or(usize::MAX);
        if size > max.min(MAX_SOURCE) {
            return Err(Error::new(ErrorKind::BadPdb, self.at, "an embedded source within the size limit"));
        }
        if self.format == 0 {
            return Ok(self.data.as_slice().to_vec());
        }
        if self.size() > (self.data.len() as u64).saturating_mul(1032) {
            return Err(Error::new(ErrorKind::BadPdb, self.at, "an embedded source size its deflate stream can hold"));
        }
        super::embedded::inflate(self.data.as_slice(), size, self.data.offset())
    }
}

/// One Document row, with what it says about its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocumentInfo {
    /// The name, as the PDB stores it.
    pub name: String,
    /// The hash algorithm's GUID (zero: none).
    pub hash_algorithm: [u8; 16],
    /// The file's hash.
    pub hash: Vec<u8>,
    /// The language GUID (zero: none).
    pub language: [u8; 16],
}

impl<'a> PortablePdb<'a> {
    /// Document row `rid` with its hash.
    pub fn document_info(&self, rid: u32) -> Result<DocumentInfo> {
        let row = self.tables.row(table::DOCUMENT, rid).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        let name = self.document_name(row.get(0)?)?;
        let hash_algorithm = self.guid(row.get(1)?)?;
        let hash = self.blobs.get(row.get(2)?).map_err(|e| e.with_kind(ErrorKind::BadPdb))?.as_slice().to_vec();
        let language = self.guid(row.get(3)?)?;
        Ok(DocumentInfo { name, hash_algorithm, hash, language })
    }

    /// The CustomDebugInformation rows of `kind` whose parent is row `rid` of table `parent`
    /// (`None`: any parent): (parent table, parent row, value). Rows of another kind cost a few
    /// reads each; the table is at most the PDB.
    pub fn custom_debug_information(&self, kind: [u8; 16], parent: Option<(u8, u32)>) -> impl Iterator<Item = Result<(u8, u32, Reader<'a>)>> + '_ {
        let tables = Coded::HasCustomDebugInformation.tables();
        let bits = Coded::HasCustomDebugInformation.tag_bits();
        let rows = self.tables.rows(table::CUSTOM_DEBUG_INFORMATION);
        (1..=rows).filter_map(move |rid| {
            let found = (|| -> Result<Option<(u8, u32, Reader<'a>)>> {
                let row = self.tables.row(table::CUSTOM_DEBUG_INFORMATION, rid).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
                if self.guid(row.get(1)?)? != kind {
                    return Ok(None);
                }
                let coded = row.get(0)?;
                let tag = coded & ((1u32 << bits).saturating_sub(1));
                let Some(Some(t)) = tables.get(tag as usize) else {
                    return Err(Error::new(ErrorKind::BadPdb, row.offset(), "a HasCustomDebugInformation parent of a known table"));
                };
                let owner = coded >> bits;
                if parent.is_some_and(|p| p != (*t, owner)) {
                    return Ok(None);
                }
                let value = self.blobs.get(row.get(2)?).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
                Ok(Some((*t, owner, value)))
            })();
            found.transpose()
        })
    }

    /// The value of the CustomDebugInformation row of `kind` whose parent is row `rid` of table
    /// `parent`: found by binary search, as the table is sorted by its Parent column
    /// (PortablePdb-Metadata.md), so asking for every document costs O(log rows) each. In a table
    /// that is not sorted the row may not be found (never a wrong row: parent and kind are checked).
    fn custom_of(&self, kind: [u8; 16], parent: u8, rid: u32) -> Result<Option<Reader<'a>>> {
        let tables = Coded::HasCustomDebugInformation.tables();
        let Some(tag) = tables.iter().position(|t| *t == Some(parent)) else {
            return Ok(None);
        };
        let bits = Coded::HasCustomDebugInformation.tag_bits();
        let want = u64::from(rid) << bits | tag as u64;
        let rows = self.tables.rows(table::CUSTOM_DEBUG_INFORMATION);
        let row = |r: u32| self.tables.row(table::CUSTOM_DEBUG_INFORMATION, r).map_err(|e| e.with_kind(ErrorKind::BadPdb));
        // The first row whose parent is not below `want`.
        let (mut lo, mut hi) = (1u32, rows.saturating_add(1));
        while lo < hi {
            let mid = lo.saturating_add(hi.saturating_sub(lo) / 2);
            if u64::from(row(mid)?.get(0)?) < want {
                lo = mid.saturating_add(1);
            } else {
                hi = mid;
            }
        }
        let mut r = lo;
        while r <= rows {
            let found = row(r)?;
            if u64::from(found.get(0)?) != want {
                break;
            }
            if self.guid(found.get(1)?)? == kind {
                let value = self.blobs.get(found.get(2)?).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
                return Ok(Some(value));
            }
            r = r.saturating_add(1);
        }
        Ok(None)
    }

    /// The embedded source of Document row `rid`, if the compiler embedded one.
    pub fn embedded_source(&self, rid: u32) -> Result<Option<EmbeddedSource<'a>>> {
        let Some(mut value) = self.custom_of(EMBEDDED_SOURCE, table::DOCUMENT, rid)? else {
            return Ok(None);
        };
        let at = value.offset();
        let format = value.u32("the embedded source's format").map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
        if format > i32::MAX as u32 {
            return Err(Error::new(ErrorKind::BadPdb, at, "an embedded source format of 0 or a positive size"));
        }
        Ok(Some(EmbeddedSource { format, data: value, at }))
    }

    /// Every document that has an embedded source, in row order: (row, source).
    pub fn embedded_sources(&self) -> impl Iterator<Item = Result<(u32, EmbeddedSource<'a>)>> + '_ {
        (1..=self.document_count()).filter_map(move |rid| self.embedded_source(rid).map(|s| s.map(|s| (rid, s))).transpose())
    }

    /// The module's SourceLink map, if the PDB has one: `bad_pdb` at its blob when it is not the
    /// JSON the specification describes.
    pub fn source_link(&self) -> Result<Option<SourceLink>> {
        // The module's row is 1; a compiler writes exactly one SourceLink.
        let Some(found) = self.custom_debug_information(SOURCE_LINK, None).find(|r| r.as_ref().map_or(true, |(t, _, _)| *t == table::MODULE)) else {
            return Ok(None);
        };
        let (_, _, value) = found?;
        SourceLink::parse(value.as_slice()).map(Some).map_err(|_| Error::new(ErrorKind::BadPdb, value.offset(), "SourceLink JSON: {\"documents\": {path: url, ...}}"))
    }
}

/// One SourceLink rule.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    /// The key, without its `*`.
    path: String,
    /// The key ended in `*`.
    wildcard: bool,
    /// The value.
    url: String,
}

/// A SourceLink map: document paths to URLs.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SourceLink {
    rules: Vec<Rule>,
}

/// The most rules one map may have.
const MAX_RULES: usize = 4096;

impl SourceLink {
    /// Parse SourceLink JSON: `{"documents": {"PATH" or "PREFIX*": "URL" or "URL-WITH-*", ...}}`.
    /// A key with a `*` anywhere but at its end, or a wildcard key whose value has no `*`, is
    /// ignored, as in the specification's reference reader.
    pub fn parse(json: &[u8]) -> core::result::Result<Self, String> {
        let json = json.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(json);
        let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| e.to_string())?;
        let documents = value.get("documents").and_then(serde_json::Value::as_object).ok_or("no \"documents\" object")?;
        if documents.len() > MAX_RULES {
            return Err(format!("more than {MAX_RULES} SourceLink rules"));
        }
        let map = documents.iter().map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())).ok_or("a SourceLink URL that is not a string")).collect::<core::result::Result<Vec<_>, _>>()?;
        let rules = map
            .into_iter()
            .filter_map(|(key, url)| match key.strip_suffix('*') {
                Some(path) if !path.contains('*') && url.matches('*').count() == 1 => Some(Rule { path: path.to_owned(), wildcard: true, url }),
                None if !key.contains('*') && !url.contains('*') => Some(Rule { path: key, wildcard: false, url }),
                _ => None,
            })
            .collect();
        Ok(SourceLink { rules })
    }

    /// The URL of a document, by the longest key that matches its path.
    pub fn url(&self, path: &str) -> Option<String> {
        let mut best: Option<(&Rule, &str)> = None;
        for rule in &self.rules {
            let rest = if rule.wildcard {
                match path.get(..rule.path.len()) {
                    Some(head) if head.eq_ignore_ascii_case(&rule.path) => path.get(rule.path.len()..),
                    _ => None,
                }
            } else {
                path.eq_ignore_ascii_case(&rule.path).then_some("")
            };
            let Some(rest) = rest else { continue };
            // An exact key is as long as the whole path, so it beats every prefix.
            let len = if rule.wildcard { rule.path.len() } else { usize::MAX };
            let best_len = best.map(|(r, _)| if r.wildcard { r.path.len() } else { usize::MAX });
            if best_len.is_none_or(|b| len > b) {
                best = Some((rule, rest));
            }
        }
        let (rule, rest) = best?;
        if !rule.wildcard {
            return Some(rule.url.clone());
        }
        Some(rule.url.replacen('*', &rest.replace('\\', "/"), 1))
    }

    /// How many rules the map has.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the map has no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// A file's hash by a document's algorithm: `None` for an algorithm clrmap does not compute.
pub fn hash_file(algorithm: &[u8; 16], bytes: &[u8]) -> Option<Vec<u8>> {
    use sha2::Digest;
    match *algorithm {
        HASH_SHA256 => Some(sha2::Sha256::digest(bytes).to_vec()),
        HASH_SHA1 => Some(sha1(bytes).to_vec()),
        _ => None,
    }
}

/// SHA-1 (FIPS 180-4), for the document hashes of older compilers.
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
    let bits = (data.len() as u64).wrapping_mul(8);
    let mut tail = data.chunks_exact(64).remainder().to_vec();
    tail.push(0x80);
    while tail.len() % 64 != 56 {
        tail.push(0);
    }
    tail.extend_from_slice(&bits.to_be_bytes());
    for block in data.chunks_exact(64).chain(tail.chunks_exact(64)) {
        let mut w = [0u32; 80];
        for (slot, word) in w.iter_mut().zip(block.chunks_exact(4)) {
            *slot = u32::from_be_bytes([word.first().copied().unwrap_or(0), word.get(1).copied().unwrap_or(0), word.get(2).copied().unwrap_or(0), word.get(3).copied().unwrap_or(0)]);
        }
        for i in 16usize..80 {
            let x = w.get(i.wrapping_sub(3)).copied().unwrap_or(0)
                ^ w.get(i.wrapping_sub(8)).copied().unwrap_or(0)
                ^ w.get(i.wrapping_sub(14)).copied().unwrap_or(0)
                ^ w.get(i.wrapping_sub(16)).copied().unwrap_or(0);
            if let Some(slot) = w.get_mut(i) {
                *slot = x.rotate_left(1);
            }
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (slot, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *slot = slot.wrapping_add(v);
        }
    }
    let mut out = [0u8; 20];
    for (chunk, v) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&v.to_be_bytes());
    }
    out
}

/// A document name as a relative path under an extraction directory: its parts (split at `/` and
/// `\`), with a drive (`C:`) and empty or `.` parts dropped. `None` when a part is `..` (the name
/// climbs out) or holds a NUL, or when nothing is left: such a name is refused, never rewritten.
pub fn relative_path(name: &str) -> Option<std::path::PathBuf> {
    let mut out = std::path::PathBuf::new();
    for (i, part) in name.split(['/', '\\']).enumerate() {
        let drive = i == 0 && part.len() == 2 && part.ends_with(':') && part.starts_with(|c: char| c.is_ascii_alphabetic());
        if part.is_empty() || part == "." || drive {
            continue;
        }
        if part == ".." || part.contains(['\0', ':']) {
            return None;
        }
        out.push(part);
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// One line-mapping rule: a document path prefix (`/_/src`) and the local directory it stands
/// for, as `--source-root PREFIX=DIR` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceRoot {
    /// The prefix of document names (compared ignoring ASCII case, either separator).
    pub prefix: String,
    /// The local directory.
    pub dir: std::path::PathBuf,
}

impl SourceRoot {
    /// Parse `PREFIX=DIR`.
    pub fn parse(text: &str) -> Option<SourceRoot> {
        let (prefix, dir) = text.split_once('=')?;
        (!dir.is_empty()).then(|| SourceRoot { prefix: prefix.to_owned(), dir: dir.into() })
    }

    /// The local file for a document name, when its name starts with this prefix and the rest is
    /// a relative path that stays under the directory.
    pub fn local(&self, name: &str) -> Option<std::path::PathBuf> {
        let norm = |s: &str| s.replace('\\', "/");
        let (name_n, prefix_n) = (norm(name), norm(self.prefix.trim_end_matches(['/', '\\'])));
        let head = name_n.get(..prefix_n.len())?;
        if !head.eq_ignore_ascii_case(&prefix_n) {
            return None;
        }
        let rest = name_n.get(prefix_n.len()..)?;
        if !(rest.is_empty() || rest.starts_with('/') || prefix_n.is_empty()) {
            return None;
        }
        Some(self.dir.join(relative_path(rest)?))
    }
}

/// The first of `roots` that maps `name` to a local file whose hash is the document's: the
/// file's bytes. A file that differs (or an algorithm clrmap does not compute) is never used.
pub fn local_source(roots: &[SourceRoot], doc: &DocumentInfo, max: u64) -> Option<Vec<u8>> {
    roots.iter().find_map(|root| {
        let path = root.local(&doc.name)?;
        let bytes = crate::base::fs::read_regular(&path, max).ok()?;
        (hash_file(&doc.hash_algorithm, &bytes).as_deref() == Some(doc.hash.as_slice())).then_some(bytes)
    })
}

/// Lines `line - before ..= line + after` of a text (1-based), split at `\n` with a `\r` before
/// it dropped, each cut to `max_line` bytes: (before, the line, after). `None` when the text has
/// no such line. Text that is not UTF-8 is read lossily.
pub fn context(text: &[u8], line: u32, before: u32, after: u32, max_line: usize) -> Option<(Vec<String>, String, Vec<String>)> {
    let index = usize::try_from(line.checked_sub(1)?).ok()?;
    let text = text.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(text);
    let cut = |l: &[u8]| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        let l = l.get(..max_line.min(l.len())).unwrap_or(l);
        String::from_utf8_lossy(l).into_owned()
    };
    // A text ending in a newline has no (empty) line after it.
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    let first = index.saturating_sub(before as usize);
    let mut lines = text.split(|b| *b == b'\n').skip(first);
    let pre: Vec<String> = lines.by_ref().take(index.saturating_sub(first)).map(cut).collect();
    if pre.len() != index.saturating_sub(first) {
        return None;
    }
    let this = cut(lines.next()?);
    let post: Vec<String> = lines.take(after as usize).map(cut).collect();
    Some((pre, this, post))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_sources_are_found_by_their_document_and_kind() {
        use crate::formats::pdb::writer::PdbWriter;
        let mut w = PdbWriter::new([1; 20]);
        for name in ["/a.cs", "/b.cs", "/c.cs"] {
            let n = w.document_name(name);
            w.document(n);
        }
        let deflated = miniz_oxide::deflate::compress_to_vec(b"line one\nline two\n", 6);
        let mut packed = 18u32.to_le_bytes().to_vec();
        packed.extend_from_slice(&deflated);
        // Sorted by parent: document 1 (raw), document 3 (another kind, then deflated), the Module.
        w.custom_debug_information(1 << 5 | 22, EMBEDDED_SOURCE, b"\0\0\0\0raw text");
        w.custom_debug_information(3 << 5 | 22, [9; 16], b"other");
        w.custom_debug_information(3 << 5 | 22, EMBEDDED_SOURCE, &packed);
        let bytes = w.build();
        let pdb = PortablePdb::parse(&bytes).unwrap();
        assert_eq!(pdb.embedded_source(1).unwrap().unwrap().text(100).unwrap(), b"raw text");
        assert!(pdb.embedded_source(2).unwrap().is_none());
        let three = pdb.embedded_source(3).unwrap().unwrap();
        assert!(three.is_compressed());
        assert_eq!(three.text(100).unwrap(), b"line one\nline two\n");
        // Over the caller's bound: refused before inflating.
        assert_eq!(three.text(10).unwrap_err().kind, ErrorKind::BadPdb);
        assert!(pdb.embedded_source(4).unwrap().is_none());
        assert_eq!(pdb.embedded_sources().count(), 2);
        assert!(pdb.source_link().unwrap().is_none());
    }

    #[test]
    fn sha1_of_known_texts() {
        let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(&sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(hex(&sha1(b"abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(hex(&sha1(&[b'a'; 1000])), "291e9a6c66994949b57ba5e650361e98fc36b1ba");
    }

    #[test]
    fn source_link_longest_prefix_wins_and_exact_keys_beat_prefixes() {
        let json = br#"{"documents":{"C:\\src\\*":"https://a/*","C:\\src\\lib\\*":"https://b/x/*?raw","C:\\src\\one.cs":"https://c/one","D:\\*z":"https://bad/*"}}"#;
        let map = SourceLink::parse(json).unwrap();
        assert_eq!(map.len(), 3);
        assert_eq!(map.url("C:\\src\\app\\Program.cs").as_deref(), Some("https://a/app/Program.cs"));
        assert_eq!(map.url("c:\\SRC\\lib\\deep\\A.cs").as_deref(), Some("https://b/x/deep/A.cs?raw"));
        assert_eq!(map.url("C:\\src\\one.cs").as_deref(), Some("https://c/one"));
        assert_eq!(map.url("E:\\other.cs"), None);
        assert!(SourceLink::parse(b"{\"documents\":3}").is_err());
        assert!(SourceLink::parse(b"not json").is_err());
    }

    #[test]
    fn relative_paths_never_climb_out() {
        assert_eq!(relative_path("C:\\dev\\app\\Program.cs"), Some(std::path::PathBuf::from("dev/app/Program.cs")));
        assert_eq!(relative_path("/_/src/./a.cs"), Some(std::path::PathBuf::from("_/src/a.cs")));
        assert_eq!(relative_path("/_/src/../../etc/passwd"), None);
        assert_eq!(relative_path("..\\x.cs"), None);
        assert_eq!(relative_path("a\0b"), None);
        assert_eq!(relative_path("C:"), None);
        assert_eq!(relative_path("dir/C:x"), None);
    }

    #[test]
    fn context_lines_around_a_line() {
        let text = b"one\r\ntwo\nthree\nfour\n";
        assert_eq!(context(text, 2, 5, 5, 100), Some((vec!["one".into()], "two".into(), vec!["three".into(), "four".into()])));
        assert_eq!(context(text, 4, 1, 5, 100), Some((vec!["three".into()], "four".into(), vec![])));
        assert_eq!(context(text, 5, 1, 1, 100), None);
        assert_eq!(context(b"a\n\nb", 2, 1, 1, 100), Some((vec!["a".into()], String::new(), vec!["b".into()])));
        assert_eq!(context(text, 9, 1, 1, 100), None);
        assert_eq!(context(text, 0, 1, 1, 100), None);
        assert_eq!(context(b"abcdef", 1, 0, 0, 3), Some((vec![], "abc".into(), vec![])));
    }
}

//! Live captures written by the clrmap profiler (`crates/clrmap-profiler`;
//! `docs/capture-format.md`): JSON lines, a header line, then one line per code body.

use serde::Deserialize;

use crate::ilmap::{CodeBody, IlOffset, MapEntry};
use crate::read::{Error, ErrorKind, Result};

/// The capture format's name in its header line.
pub const FORMAT: &str = "clrmap-capture";
/// The version this reader understands.
pub const VERSION: u32 = 1;

#[derive(Deserialize)]
struct Header {
    format: String,
    version: u32,
}

#[derive(Deserialize)]
struct Line {
    kind: String,
    #[serde(default)]
    function_id: u64,
    #[serde(default)]
    module: String,
    #[serde(default)]
    token: u32,
    #[serde(default)]
    start: u64,
    #[serde(default)]
    rva: Option<u32>,
    #[serde(default)]
    code_size: u32,
    #[serde(default)]
    body: u32,
    #[serde(default)]
    map: Vec<[u32; 3]>,
    #[serde(default)]
    map1: Option<Vec<[u32; 3]>>,
}

/// One recorded body, with what `GetILToNativeMapping(functionId)` answered for its function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedBody {
    /// The body, its map from `GetILToNativeMapping3(start)` (R2R: `GetILToNativeMapping`).
    pub body: CodeBody,
    /// The module's full path as the runtime reported it.
    pub module_path: String,
    /// `"r2r"` or `"jit"`.
    pub kind: String,
    /// For jitted bodies: the body's index among the function's code versions (0 = first).
    pub index: u32,
    /// For jitted bodies: what `GetILToNativeMapping(functionId)` returned at the same time.
    pub map1: Option<Vec<MapEntry>>,
}

fn entries(raw: &[[u32; 3]]) -> Vec<MapEntry> {
    raw.iter().map(|&[il, s, e]| MapEntry { il: IlOffset::from_raw(il), native_start: s, native_end: e }).collect()
}

/// Read a capture. Errors are `bad_capture` at the byte offset of the line at fault. A missing
/// final `{"kind":"end"}` line (the process died) is not an error: every whole line counts.
pub fn read_captured(text: &str) -> Result<Vec<CapturedBody>> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let at = offset;
        offset = offset.saturating_add(line.len() as u64);
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        if n == 0 {
            let h: Header = serde_json::from_str(line).map_err(|_| Error::new(ErrorKind::BadCapture, at, "a clrmap-capture header line"))?;
            if h.format != FORMAT || h.version != VERSION {
                return Err(Error::new(ErrorKind::BadCapture, at, "clrmap-capture version 1"));
            }
            continue;
        }
        let Ok(l) = serde_json::from_str::<Line>(line) else {
            // A line cut by a crash ends the capture; anything else is an error.
            if !line.ends_with('}') && offset as usize == text.len() {
                break;
            }
            return Err(Error::new(ErrorKind::BadCapture, at, "a JSON body record"));
        };
        if l.kind == "end" {
            break;
        }
        let module = std::path::Path::new(&l.module).file_name().map(|f| f.to_string_lossy().into_owned());
        let tier = if l.kind == "r2r" { "r2r".to_owned() } else { format!("jit#{}", l.body) };
        out.push(CapturedBody {
            body: CodeBody {
                token: l.token,
                rva: l.rva,
                code_size: l.code_size,
                name: None,
                module,
                module_path: Some(l.module.clone()),
                function_id: Some(l.function_id),
                start: Some(l.start),
                tier: Some(tier),
                map: entries(&l.map),
            },
            module_path: l.module,
            kind: l.kind,
            index: l.body,
            map1: l.map1.as_deref().map(entries),
        });
    }
    Ok(out)
}

/// The capture's code bodies, for the map store.
pub fn read_code_bodies(text: &str) -> Result<Vec<CodeBody>> {
    Ok(read_captured(text)?.into_iter().map(|c| c.body).collect())
}

//! Names for what a walk finds: a MethodDesc's token and module (RuntimeTypeSystem and Loader
//! contracts), a ReadyToRun function's method (the image's entry points), and the names those
//! tokens have in the modules' metadata, read from the files the process loaded.

use std::collections::HashMap;

use super::code::CodeBlock;
use super::target::Target;
use super::{DumpFrame, ExceptionInfo};
use crate::formats::metadata::Metadata;
use crate::formats::r2r::ReadyToRunImage;

/// The most bytes of module files read for names, in all.
const MAX_MODULE_BYTES: u64 = 1 << 30;
/// The largest module file read.
const MAX_MODULE_FILE: u64 = 512 << 20;
/// The longest string read from the process (paths, messages, names), in code units.
const MAX_STRING: usize = 4096;

/// A ReadyToRun image's function begins (sorted) and each function's method token.
type R2rTokens = (Vec<u32>, Vec<Option<u32>>);

/// Caches of module files, their ReadyToRun entry points and names.
#[derive(Debug, Default)]
pub struct Names {
    files: HashMap<String, Option<std::sync::Arc<Vec<u8>>>>,
    /// Per ReadyToRun module: for each RUNTIME_FUNCTION index (sorted by begin), its method's
    /// token, funclets taking their entry's.
    r2r: HashMap<String, Option<R2rTokens>>,
    names: HashMap<(String, u32), Option<String>>,
    read: u64,
    /// How the runtime's debug info of jitted code is laid out (by its major version); `None`
    /// where no layout is known, and jitted frames get no IL offset.
    pub jit_layout: Option<crate::formats::r2r::DebugInfoLayout>,
    /// Read jitted bodies' inline trees (`dump --inlines`).
    pub inlines: bool,
    /// The runtime's major version.
    pub runtime_major: Option<u16>,
}

/// The most bytes of one jitted method's debug info read (its encoding ends it; a blob runs
/// to no more than its method's bounds and variables).
const MAX_DEBUG_INFO: usize = 1 << 20;

impl Names {
    /// Names for a core of the runtime at `path` (libcoreclr.so's): its major version decides
    /// how jitted code's debug info is laid out.
    pub(super) fn for_runtime(path: &str) -> Names {
        let runtime_major = crate::base::ilmap::runtime_major("", Some(path));
        Names { jit_layout: runtime_major.and_then(crate::formats::r2r::DebugInfoLayout::for_jitted_code), runtime_major, ..Names::default() }
    }

    fn file(&mut self, path: &str) -> Option<std::sync::Arc<Vec<u8>>> {
        if let Some(f) = self.files.get(path) {
            return f.clone();
        }
        let size = std::fs::metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len()).unwrap_or(u64::MAX);
        let bytes = if size <= MAX_MODULE_FILE && self.read.saturating_add(size) <= MAX_MODULE_BYTES {
            crate::base::fs::read_regular(std::path::Path::new(path), MAX_MODULE_FILE).ok().map(std::sync::Arc::new)
        } else {
            None
        };
        self.read = self.read.saturating_add(bytes.as_ref().map_or(0, |b| b.len() as u64));
        self.files.insert(path.to_owned(), bytes.clone());
        bytes
    }

    /// Name every frame (and inlined frame) that has a module and a token but no name yet: each
    /// module's metadata is parsed once for all its frames.
    pub fn name_frames<'f>(&mut self, frames: impl Iterator<Item = &'f mut DumpFrame>) {
        let mut by_module: HashMap<String, Vec<(&'f mut Option<String>, u32)>> = HashMap::new();
        for f in frames {
            for i in f.inlined.iter_mut() {
                if let (None, Some(token), Some(path)) = (&i.method, i.token, &i.module) {
                    by_module.entry(path.clone()).or_default().push((&mut i.method, token));
                }
            }
            if let (None, Some(token), Some(path)) = (&f.method, f.token, &f.module) {
                by_module.entry(path.clone()).or_default().push((&mut f.method, token));
            }
        }
        for (path, frames) in by_module {
            let Some(bytes) = self.file(&path) else { continue };
            let Ok(md) = Metadata::parse(&bytes) else { continue };
            for (method, token) in frames {
                let key = (path.clone(), token);
                let name = self.names.entry(key).or_insert_with(|| md.method_name(token)).clone();
                *method = name;
            }
        }
    }

    fn type_name(&mut self, path: &str, token: u32) -> Option<String> {
        self.file(path).and_then(|b| Metadata::parse(&b).ok().and_then(|md| md.type_name(token).ok()))
    }

    /// The method token of the ReadyToRun function that begins at `begin` in the image at `path`.
    fn r2r_token(&mut self, path: &str, begin: u32) -> Option<u32> {
        if !self.r2r.contains_key(path) {
            let table = self.file(path).and_then(|b| {
                let image = ReadyToRunImage::parse(&b).ok()?;
                let functions = image.runtime_functions();
                let mut tokens = vec![None; functions.len()];
                for e in image.entry_points().ok()? {
                    if let Some(slot) = tokens.get_mut(e.runtime_function as usize) {
                        *slot = Some(e.token);
                    }
                }
                // Funclets follow their method's entry function.
                let mut last = None;
                for slot in tokens.iter_mut() {
                    match slot {
                        Some(t) => last = Some(*t),
                        None => *slot = last,
                    }
                }
                Some((functions.iter().map(|f| f.begin).collect(), tokens))
            });
            self.r2r.insert(path.to_owned(), table);
        }
        let (begins, tokens) = self.r2r.get(path)?.as_ref()?;
        let i = begins.binary_search(&begin).ok()?;
        tokens.get(i).copied().flatten()
    }

    /// A managed frame for code `block` at `ip`.
    pub fn frame(&mut self, t: Target<'_, '_>, block: &CodeBlock, ip: u64, sp: u64) -> DumpFrame {
        let mut f = DumpFrame { kind: "managed".to_owned(), ip, sp, native_offset: Some(ip.wrapping_sub(block.start)), ..DumpFrame::default() };
        if let Some(md) = block.method_desc {
            f.code = Some("jit");
            // The body's map, from the debug info the runtime keeps with the code: its IL offset
            // is then found by the frame rule once the walk knows whether `ip` is a return
            // address (lines.rs).
            if let (Some((ptr, size)), Some(layout)) = (block.debug_info, self.jit_layout) {
                let whole = t.core.bytes_up_to(ptr, MAX_DEBUG_INFO).ok();
                let parts = whole.and_then(|b| crate::formats::r2r::jitted_debug_info(crate::base::read::Reader::new(b, ptr), layout));
                if let Some(Ok(info)) = parts.map(|p| crate::formats::r2r::decode_debug_info_parts(p.info, layout, false)) {
                    let map = crate::base::ilmap::public_map(&info.bounds, size);
                    // The inline tree the runtime stored beside it (a malformed one is left out:
                    // the frame keeps its flat answer).
                    if let Some(Ok(tree)) = parts.and_then(|p| p.rich).filter(|_| self.inlines).map(crate::formats::inlines::InlineTree::parse_stored) {
                        let methods = tree.nodes().iter().map(|n| node_method(t, n.method_id)).collect();
                        f.jit_inlines = Some(Box::new(super::inlined::BodyInlines { tree, methods, map: map.clone(), code_size: size }));
                    }
                    f.jit_map = Some((map, size));
                }
            }
            if let Some((token, module, dynamic)) = method_desc(t, md) {
                if let Some(name) = dynamic {
                    // Named as the runtime's own method events name a dynamic method (their
                    // namespace is `dynamicClass`), so a core and a trace agree.
                    f.method = Some(format!("dynamicClass::{name}"));
                } else {
                    f.token = Some(token);
                    f.module = module_path(t, module);
                }
            }
        } else if let Some(module) = block.r2r_module {
            f.code = Some("r2r");
            // The image is mapped at the range section's base: the RVA answers from the file.
            f.rva = u32::try_from(ip.wrapping_sub(block.unwind_base)).ok();
            if let (Some(path), Some((begin, _, _))) = (module_path(t, module), block.function) {
                f.token = self.r2r_token(&path, begin);
                f.module = Some(path);
            }
        }
        f
    }

    /// The exception object at `obj`: its type (from its MethodTable's TypeDef) and message.
    pub fn exception(&mut self, t: Target<'_, '_>, obj: u64) -> ExceptionInfo {
        let mut info = ExceptionInfo { address: obj, ..ExceptionInfo::default() };
        let unmask = t.d.global("ObjectToMethodTableUnmask").unwrap_or(7);
        if let Ok(mt) = t.core.u64(obj).map(|m| m & !unmask) {
            // MethodTable::m_dwFlags2 keeps the TypeDef's row in its upper 24 bits.
            let rid = t.u32(mt, "MethodTable", "MTFlags2").map(|f| f >> 8).ok();
            let module = t.ptr(mt, "MethodTable", "Module").ok().and_then(|m| module_path(t, m));
            if let (Some(rid), Some(path)) = (rid, module) {
                info.type_name = self.type_name(&path, 0x0200_0000 | rid);
            }
        }
        if let Ok(msg) = t.ptr(obj, "Exception", "_message") {
            if msg != 0 {
                info.message = string_object(t, msg);
            }
        }
        info
    }
}

/// An inline tree node's method, by its MethodDesc.
fn node_method(t: Target<'_, '_>, md: u64) -> Option<super::inlined::NodeMethod> {
    let (token, module, dynamic) = method_desc(t, md)?;
    Some(match dynamic {
        Some(name) => super::inlined::NodeMethod { token: None, module: None, name: Some(name) },
        None => super::inlined::NodeMethod { token: Some(token), module: module_path(t, module), name: None },
    })
}

/// A `System.String` object's text.
fn string_object(t: Target<'_, '_>, s: u64) -> Option<String> {
    let len = t.u32(s, "String", "m_StringLength").ok()? as usize;
    let at = t.at(s, "String", "m_FirstChar").ok()?;
    let len = len.min(MAX_STRING);
    let bytes = t.core.bytes(at, len.checked_mul(2)?).ok()?;
    let units: Vec<u16> = bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c.first().copied().unwrap_or(0), c.get(1).copied().unwrap_or(0)])).collect();
    Some(String::from_utf16_lossy(&units))
}

/// A module's path (`Module::Path`, a NUL-terminated UTF-16 string).
pub fn module_path(t: Target<'_, '_>, module: u64) -> Option<String> {
    let p = t.ptr(module, "Module", "Path").ok()?;
    if p == 0 {
        return None;
    }
    t.core.utf16_string(p, MAX_STRING).ok().filter(|s| !s.is_empty())
}

/// A MethodDesc's token, its module, and for a dynamic method (classification 7) its name
/// instead (RuntimeTypeSystem contract).
///
/// The MethodDesc's chunk is `ChunkIndex * MethodDescAlignment` bytes plus the chunk's own size
/// before it; the token's low `MethodDescTokenRemainderBitCount` bits are in the MethodDesc's
/// `Flags3AndTokenRemainder`, the rest in the chunk's `FlagsAndTokenRange`.
fn method_desc(t: Target<'_, '_>, md: u64) -> Option<(u32, u64, Option<String>)> {
    let align = t.d.global("MethodDescAlignment").unwrap_or(8);
    let chunk_size = t.d.size("MethodDescChunk").unwrap_or(24);
    let index = u64::from(t.u8(md, "MethodDesc", "ChunkIndex").ok()?);
    let chunk = md.wrapping_sub(index.wrapping_mul(align)).wrapping_sub(chunk_size);
    let bits = u32::try_from(t.d.global("MethodDescTokenRemainderBitCount").unwrap_or(12)).ok()?.min(24);
    let remainder = u32::from(t.u16(md, "MethodDesc", "Flags3AndTokenRemainder").ok()?) & ((1u32 << bits).wrapping_sub(1));
    let range = u32::from(t.u16(chunk, "MethodDescChunk", "FlagsAndTokenRange").ok()?) & ((1u32 << (24u32.wrapping_sub(bits))).wrapping_sub(1));
    let token = 0x0600_0000 | (range << bits) | remainder;
    let mt = t.ptr(chunk, "MethodDescChunk", "MethodTable").ok()?;
    let module = t.ptr(mt, "MethodTable", "Module").ok()?;
    let classification = t.u16(md, "MethodDesc", "Flags").ok()? & 7;
    let dynamic = if classification == 7 {
        let name = t.ptr(md, "DynamicMethodDesc", "MethodName").ok().and_then(|p| t.core.c_string(p, MAX_STRING).ok());
        Some(name.map(|n| String::from_utf8_lossy(&n).into_owned()).unwrap_or_else(|| "<dynamic method>".to_owned()))
    } else {
        None
    };
    Some((token, module, dynamic))
}

//! The live Linux perf route (`CLRMAP_PROFILER_PERF`): `jit-PID.dump` with source lines, and
//! `perf-PID.map` (docs/perf.md). Names and lines come from the clrmap library, as offline.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;

use crate::com::{IlMap, Info};
use clrmap::inlines::InlineTree;
use clrmap::symbolizer::profile_lines::{profile_rows, Position, Who};

/// One module, as the jitdump needs it: names from its metadata, lines from its PDB.
pub struct PerfModule {
    metadata: Option<clrmap::metadata::Metadata<'static>>,
    symbols: Option<clrmap::symbolizer::ModuleSymbols>,
}

/// The live jitdump and perf map.
pub struct Perf {
    dump: File,
    map: File,
    /// perf's marker: the dump mapped PROT_EXEC for the process's lifetime.
    _marker: memmap2::Mmap,
    next_index: u64,
    modules: HashMap<String, PerfModule>,
    /// An inlinee's MethodID → its module path and MethodDef token (`None`: the runtime did not
    /// say), asked once.
    inlinees: HashMap<u64, Option<(String, u32)>>,
    symbols: clrmap::locate::SymbolPaths,
    pid: u32,
    /// The runtime's own perf map, for its stubs' names (`CLRMAP_PROFILER_RUNTIME_MAP`).
    runtime_map: Option<RuntimeMap>,
}

/// The perf map the runtime writes into a private directory (`clrmap profile --perf` sets
/// `DOTNET_PerfMapEnabled=3` and `DOTNET_PerfMapJitDumpPath` to it, on .NET 8 and later: a perf
/// map only, no jitdump of its own). Its stub lines (`stub<N> KIND<OWNER>`, perfmap.cpp
/// `PerfMap::LogStubs`) are copied into our jitdump and perf map as the file grows.
struct RuntimeMap {
    path: std::path::PathBuf,
    file: Option<File>,
    /// The bytes after the last whole line read.
    partial: Vec<u8>,
}

/// The longest line of the runtime's perf map kept while waiting for its end (a runtime's
/// method name with its signature is well under it); a longer one is dropped.
const MAX_RUNTIME_MAP_LINE: usize = 64 << 10;

/// A stub line of the runtime's perf map: `0xADDR SIZE stub...` (address with `0x` on .NET 8,
/// size in hex, the name to the end of the line). Method lines and torn lines are `None`.
pub fn runtime_stub_line(line: &str) -> Option<(u64, u64, &str)> {
    let mut parts = line.splitn(3, ' ');
    let address = parts.next()?;
    let address = u64::from_str_radix(address.strip_prefix("0x").unwrap_or(address), 16).ok()?;
    let size = u64::from_str_radix(parts.next()?, 16).ok()?;
    let name = parts.next()?.trim_end();
    let stub = name.starts_with("stub<") || name.starts_with("stub ");
    (stub && address != 0 && size != 0 && size < 1 << 20 && !name.contains('\0')).then_some((address, size, name))
}

/// Copy the stub lines the runtime added to its perf map since the last call into the jitdump
/// (code loads with zeros for code: a stub's memory may go with a collectible assembly, so it is
/// never read) and our perf map.
pub fn pull_stubs(perf: &mut Perf) {
    use std::io::Read;
    let Some(rt) = perf.runtime_map.as_mut() else { return };
    if rt.file.is_none() {
        rt.file = File::open(&rt.path).ok();
    }
    let Some(file) = rt.file.as_mut() else { return };
    let mut fresh = Vec::new();
    if file.read_to_end(&mut fresh).is_err() || fresh.is_empty() {
        return;
    }
    rt.partial.extend_from_slice(&fresh);
    let Some(end) = rt.partial.iter().rposition(|&b| b == b'\n') else {
        if rt.partial.len() > MAX_RUNTIME_MAP_LINE {
            rt.partial.clear();
        }
        return;
    };
    let whole: Vec<u8> = rt.partial.drain(..=end).collect();
    let timestamp = monotonic_ns();
    let tid = thread_id();
    let mut out = Vec::new();
    let mut map = String::new();
    for line in whole.split(|&b| b == b'\n') {
        let Ok(line) = std::str::from_utf8(line) else { continue };
        let Some((address, size, name)) = runtime_stub_line(line) else { continue };
        perf.next_index = perf.next_index.saturating_add(1);
        let load = clrmap::jitdump::CodeLoad { timestamp, pid: perf.pid, tid, address, code_size: size, code_index: perf.next_index, name, code: None };
        if let Some(r) = clrmap::jitdump::encode_code_load(&load) {
            out.extend(r);
            map.push_str(&clrmap::jitdump::perf_map_line(address, size, name));
        }
    }
    if !out.is_empty() {
        let _ = perf.dump.write_all(&out);
        let _ = perf.map.write_all(map.as_bytes());
    }
}

/// CLOCK_MONOTONIC in ns: the clock `perf record -k 1` stamps samples with.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer to a timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

fn thread_id() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Create `DIR/jit-PID.dump` (header written) and `DIR/perf-PID.map`, and map the dump PROT_EXEC:
/// the mmap event perf records is how `perf inject --jit` finds the file. The names are
/// predictable (in /tmp by default), so whatever another user planted there is never written
/// through: see [`open_output`]. A refusal of either file writes neither.
pub fn start_perf(dir: &std::path::Path) -> std::io::Result<Perf> {
    let pid = std::process::id();
    let dump_path = dir.join(format!("jit-{pid}.dump"));
    let map_path = dir.join(format!("perf-{pid}.map"));
    let dump = open_output(&dump_path)?;
    let map = match open_output(&map_path) {
        Ok(m) => m,
        Err(e) => {
            // Leave no jitdump behind: it would say the perf files were written.
            if dump.created {
                let _ = std::fs::remove_file(&dump_path);
            }
            return Err(e);
        }
    };
    let started = begin_perf(dump.file, map.file, pid);
    if started.is_err() {
        let _ = std::fs::remove_file(&dump_path);
        let _ = std::fs::remove_file(&map_path);
    }
    started.map_err(|e| with_path(&dump_path, e))
}

/// Write the jitdump's header into the (validated, emptied) files and map it.
fn begin_perf(mut dump: File, map: File, pid: u32) -> std::io::Result<Perf> {
    let header = clrmap::jitdump::FileHeader { elf_machine: clrmap::jitdump::host_machine(), pid, timestamp: monotonic_ns(), flags: 0 };
    dump.write_all(&header.encode())?;
    dump.sync_all()?;
    // SAFETY: a read-only, executable mapping of the header we just wrote; nothing reads it (it
    // only marks the file for perf), and the file is only appended to.
    let marker = unsafe { memmap2::MmapOptions::new().len(clrmap::jitdump::HEADER_SIZE as usize).map_exec(&dump)? };
    let dirs = std::env::var_os("CLRMAP_PROFILER_SYMBOL_PATH").map(|v| std::env::split_paths(&v).collect()).unwrap_or_default();
    let runtime_map = std::env::var_os("CLRMAP_PROFILER_RUNTIME_MAP").map(|d| RuntimeMap { path: std::path::Path::new(&d).join(format!("perf-{pid}.map")), file: None, partial: Vec::new() });
    let symbols = clrmap::locate::SymbolPaths { pdb: None, dirs, servers: None };
    Ok(Perf { dump, map, _marker: marker, next_index: 0, modules: HashMap::new(), inlinees: HashMap::new(), symbols, pid, runtime_map })
}

/// An output file opened by [`open_output`], empty.
struct Output {
    file: File,
    /// Made by this open (not there before).
    created: bool,
}

fn with_path(path: &std::path::Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Open a perf output file for writing, emptied, without ever writing through what someone else
/// planted at its predictable name: a new file is made exclusively; an existing name is opened
/// without following a symbolic link (O_NOFOLLOW) and without blocking (O_NONBLOCK: a FIFO with no
/// reader), and used only if it is a regular file of this user with no other hard link (a stale
/// file of an earlier process of the same pid). Nothing is truncated before these checks pass.
fn open_output(path: &std::path::Path) -> std::io::Result<Output> {
    use std::io::{Error, ErrorKind};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let refused = |why: &str| Error::new(ErrorKind::PermissionDenied, format!("{}: {why}; refused, nothing written there", path.display()));
    match std::fs::OpenOptions::new().read(true).write(true).create_new(true).custom_flags(flags).open(path) {
        Ok(file) => return Ok(Output { file, created: true }),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(with_path(path, e)),
    }
    let file = match std::fs::OpenOptions::new().read(true).write(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(refused("a symbolic link is there (not followed)")),
        Err(e) => return Err(with_path(path, e)),
    };
    let meta = file.metadata().map_err(|e| with_path(path, e))?;
    if !meta.file_type().is_file() {
        return Err(refused("not a regular file (a FIFO, device or socket is there)"));
    }
    // SAFETY: geteuid takes no arguments and cannot fail.
    if meta.uid() != unsafe { libc::geteuid() } {
        return Err(refused("the file there belongs to another user"));
    }
    if meta.nlink() != 1 {
        return Err(refused("the file there has other hard links"));
    }
    file.set_len(0).map_err(|e| with_path(path, e))?;
    Ok(Output { file, created: false })
}

/// A module's metadata and PDB lines, loaded the first time one of its bodies is written. The
/// file is memory-mapped and the mapping kept for the process's lifetime.
fn perf_module(symbols: &clrmap::locate::SymbolPaths, path: &str) -> PerfModule {
    let mapped = File::open(path).ok().and_then(|f| {
        // SAFETY: a read-only mapping of a module file the runtime has loaded; it is never
        // unmapped (leaked), so the slices borrowed from it stay valid.
        let m = unsafe { memmap2::Mmap::map(&f) }.ok()?;
        let m: &'static memmap2::Mmap = Box::leak(Box::new(m));
        Some(m.as_ref())
    });
    let Some(bytes) = mapped else { return PerfModule { metadata: None, symbols: None } };
    let metadata = clrmap::metadata::Metadata::parse(bytes).ok();
    let symbols = clrmap::symbolizer::ModuleSymbols::load(bytes, Some(std::path::Path::new(path)), symbols).ok().flatten();
    PerfModule { metadata, symbols }
}

/// The name a body gets in the jitdump and the perf map, as offline
/// ([`clrmap::jitdump::build::perf_name`]): the method's full name with its parameter types.
fn body_name(md: Option<&clrmap::metadata::Metadata<'static>>, file_name: Option<&str>, token: u32) -> String {
    clrmap::jitdump::build::perf_name(md, file_name, token)
}

/// Write one body to the jitdump (debug info, then the code load with the bytes of its first code
/// range) and the perf map. `size` is the body's code size (all ranges, as the capture gives
/// it); the lines follow the capture's map over it and the JIT's inline `tree` for the body, by
/// the profile rule ([`profile_rows`]), as the offline route computes them.
#[allow(clippy::too_many_arguments)]
pub fn perf_record(
    perf: &mut Perf,
    info: Info,
    module: &str,
    token: u32,
    start: usize,
    size: usize,
    first: usize,
    map: impl FnOnce() -> Option<Vec<IlMap>>,
    tree: Option<&InlineTree>,
    timestamp: u64,
) {
    let pid = perf.pid;
    if start == 0 || first == 0 {
        return;
    }
    pull_stubs(perf);
    let symbols = &perf.symbols;
    perf.modules.entry(module.to_owned()).or_insert_with(|| perf_module(symbols, module));
    // Each inlinee's module and token, and its module's lines, loaded once.
    if let Some(tree) = tree {
        for node in tree.nodes().iter().skip(1) {
            let id = node.method_id;
            let at = perf.inlinees.entry(id).or_insert_with(|| usize::try_from(id).ok().and_then(|fid| info.function_info(fid)).map(|(path, _, token, _)| (path, token)));
            if let Some((path, _)) = at {
                perf.modules.entry(path.clone()).or_insert_with(|| perf_module(symbols, path));
            }
        }
    }
    let Some(m) = perf.modules.get(module) else { return };
    let file_name = std::path::Path::new(module).file_name().map(|f| f.to_string_lossy().into_owned());
    let name = body_name(m.metadata.as_ref(), file_name.as_deref(), token);
    let code_size = u32::try_from(size).unwrap_or(u32::MAX);
    let (modules, inlinees) = (&perf.modules, &perf.inlinees);
    let line_of = |who: Who, il: u32| -> Option<Position> {
        let (sym, token) = match who {
            Who::Body => (m.symbols.as_ref()?, token),
            Who::Inlinee(id) => {
                let (path, token) = inlinees.get(&id)?.as_ref()?;
                (modules.get(path)?.symbols.as_ref()?, *token)
            }
        };
        let (line, column, file) = sym.line(token, il)?;
        Some((file.unwrap_or("").to_owned(), line, column))
    };
    // The map is asked for only where there are lines to make of it: a body whose module or one
    // of whose inlinees' modules has a PDB (the framework ships none, so most ReadyToRun methods
    // need no map at all).
    let inlinee_lines =
        tree.is_some_and(|t| t.nodes().iter().skip(1).any(|n| inlinees.get(&n.method_id).and_then(Option::as_ref).and_then(|(p, _)| modules.get(p)).is_some_and(|m| m.symbols.is_some())));
    let rows = if m.symbols.is_some() || inlinee_lines {
        let entries: Vec<clrmap::ilmap::MapEntry> =
            map().unwrap_or_default().iter().map(|e| clrmap::ilmap::CorDebugIlToNativeMap { il_offset: e.il, native_start_offset: e.start, native_end_offset: e.end }.into()).collect();
        profile_rows(&entries, code_size, tree, line_of)
    } else {
        Vec::new()
    };
    let mut out = Vec::new();
    if !rows.is_empty() {
        let lines = clrmap::jitdump::line_entries(start as u64, &rows);
        if let Some(r) = clrmap::jitdump::encode_debug_info(timestamp, start as u64, &lines) {
            out = r;
        }
    }
    // SAFETY: [start, start + first) is the body's first code range, as the runtime reported it
    // (GetCodeInfo2/4): published, mapped and readable code that the runtime never frees while
    // the module is loaded.
    let code = unsafe { std::slice::from_raw_parts(start as *const u8, first) };
    perf.next_index = perf.next_index.saturating_add(1);
    let load = clrmap::jitdump::CodeLoad { timestamp, pid, tid: thread_id(), address: start as u64, code_size: first as u64, code_index: perf.next_index, name: &name, code: Some(code) };
    let Some(r) = clrmap::jitdump::encode_code_load(&load) else { return };
    out.extend(r);
    // One write per body: a process killed mid-run leaves every whole record.
    let _ = perf.dump.write_all(&out);
    let _ = perf.map.write_all(clrmap::jitdump::perf_map_line(start as u64, first as u64, &name).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::runtime_stub_line;

    #[test]
    fn only_the_runtime_maps_stub_lines_are_taken() {
        // .NET 8's lines (perfmap.cpp: `%p %x %s`).
        assert_eq!(runtime_stub_line("0x7f1d6db70000 d8 stub<1> AllocateTemporaryEntryPoints<PRECODE_STUB>"), Some((0x7f1d_6db7_0000, 0xd8, "stub<1> AllocateTemporaryEntryPoints<PRECODE_STUB>")));
        assert_eq!(runtime_stub_line("7f7f148308f0 18 stub<679> GenerateResolveStub<GenerateResolveStub>"), Some((0x7f7f_1483_08f0, 0x18, "stub<679> GenerateResolveStub<GenerateResolveStub>")));
        assert_eq!(runtime_stub_line("0x10 4 stub GenerateDispatchStub<GenerateDispatchStub>").map(|s| s.2), Some("stub GenerateDispatchStub<GenerateDispatchStub>"));
        // Methods (ours name them), torn or empty lines, zero addresses or sizes: not taken.
        assert_eq!(runtime_stub_line("0x7f1d6dc31920 36c int32 [PerfInline] PerfInline::Main(string[])[QuickJitted]"), None);
        assert_eq!(runtime_stub_line("0x7f1d6dc31920 36c"), None);
        assert_eq!(runtime_stub_line("zz 36c stub<1> X<Y>"), None);
        assert_eq!(runtime_stub_line("0x0 36c stub<1> X<Y>"), None);
        assert_eq!(runtime_stub_line("0x10 0 stub<1> X<Y>"), None);
        assert_eq!(runtime_stub_line(""), None);
        assert_eq!(runtime_stub_line("0x10 ffffffffffff stub<1> X<Y>"), None);
    }
}

//! Jitdump records and perf maps from a source of bodies (a capture or a trace), offline.
//!
//! Offline there is no process memory. ReadyToRun code is the same bytes as in its module's file
//! (the loader maps sections as they are; relocations are in data, not in R2R method code), so a
//! body with an RVA gets its code from the image; jitted code is zeros, and `perf annotate` has no
//! instructions for it. Module load addresses, body addresses and sizes come from the capture or
//! trace, the lines from each module's PDB by the profile rule
//! ([`crate::answers::symbolizer::Symbolizer::profile_line_table`]).

use std::collections::{HashMap, HashSet};

use crate::answers::symbolizer::Symbolizer;
use crate::base::ilmap::CodeBody;
use crate::base::read::Error;

use std::io::{Read, Seek, SeekFrom, Write};

use super::read::{scan, StreamError};
use super::{encode_code_load, encode_debug_info, line_entries, perf_map_line, CodeLoad, FileHeader, LineEntry, JIT_CODE_DEBUG_INFO, JIT_CODE_LOAD, JIT_CODE_UNWINDING_INFO};

/// One body as clrmap writes it: its range, symbol name and line entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Absolute code start.
    pub address: u64,
    /// Code size.
    pub code_size: u64,
    /// Symbol name ([`symbol_name`]).
    pub name: String,
    /// Debug-info entries (empty: no PDB, so no debug-info record).
    pub lines: Vec<LineEntry>,
    /// The process that ran it, when the source says.
    pub pid: Option<u32>,
    /// The code bytes, where known offline (ReadyToRun code, from its image); else zeros are
    /// written.
    pub code: Option<Vec<u8>>,
}

/// The symbol name clrmap gives a body: `Ns.Type::Method`, or `Module.dll!0x06000012` when its
/// module's metadata could not be read.
pub fn symbol_name(name: Option<&str>, module: Option<&str>, token: u32) -> String {
    match name {
        Some(n) => n.to_owned(),
        None => format!("{}!0x{token:08X}", module.unwrap_or("??")),
    }
}

/// The symbol a method's code gets in a jitdump and a perf map, live and offline alike: the
/// method's full name with its parameter types from its module's metadata (docs/output.md#il-to-native-maps
/// `full_name` of the method's definition: `Ns.Type::Method(int32,string)`), so that overloads are
/// told apart in `perf report`; else [`symbol_name`] with the module's file name and the token.
/// Type arguments are left out: the live route knows them only at a cost, and both routes must
/// name a body alike.
pub fn perf_name(md: Option<&crate::formats::metadata::Metadata<'_>>, module: Option<&str>, token: u32) -> String {
    match md.and_then(|md| md.body_names(token, &[], &[])) {
        Some((name, full)) => full.unwrap_or(name),
        None => symbol_name(None, module, token),
    }
}

/// A body's symbol ([`perf_name`]): from its module's metadata where the source named the body
/// from it (the same build), else the name the source gave.
fn name_of(body: &CodeBody, images: &mut Images) -> String {
    if body.name.is_some() {
        if let Some(bytes) = body.module_path.as_deref().and_then(|p| images.bytes(p)) {
            if let Ok(md) = crate::formats::metadata::Metadata::parse(bytes) {
                if md.method_name(body.token).is_some() {
                    return perf_name(Some(&md), body.module.as_deref(), body.token);
                }
            }
        }
    }
    symbol_name(body.full_name.as_deref().or(body.name.as_deref()), body.module.as_deref(), body.token)
}

/// Every body with an absolute address (captures and traces; an image has only RVAs) of process
/// `pid` (all when `None`; bodies that name no process are always kept), in address order.
pub fn plan(sym: &Symbolizer, pid: Option<u32>) -> Vec<Planned> {
    let mut out = Vec::new();
    let mut images = Images::default();
    for (i, body) in sym.store().bodies().iter().enumerate() {
        let Some(start) = body.start else { continue };
        if body.code_size == 0 || pid.is_some_and(|p| body.pid.is_some_and(|b| b != p)) {
            continue;
        }
        // The profile rule: inlined code at its innermost line, NO_MAPPING at line 0.
        let lines = line_entries(start, &sym.profile_line_table(i));
        let code = match (body.rva, body.module_path.as_deref()) {
            (Some(rva), Some(path)) => images.code(path, rva, body.code_size),
            _ => None,
        };
        let name = name_of(body, &mut images);
        out.push(Planned { address: start, code_size: u64::from(body.code_size), name, lines, pid: body.pid, code });
    }
    out.sort_by_key(|p| p.address);
    out
}

/// Module files read for their ReadyToRun code, each once (`None`: unreadable, not a PE file).
#[derive(Default)]
struct Images(HashMap<String, Option<Vec<u8>>>);

impl Images {
    /// The bytes of the module file at `path` (read once; `None`: unreadable).
    fn bytes(&mut self, path: &str) -> Option<&[u8]> {
        self.0.entry(path.to_owned()).or_insert_with(|| crate::base::fs::read_regular(std::path::Path::new(path), crate::base::fs::MAX_FILE).ok()).as_deref()
    }

    /// `size` bytes of code at `rva` in the image at `path`, when one section's raw data holds
    /// them all.
    fn code(&mut self, path: &str, rva: u32, size: u32) -> Option<Vec<u8>> {
        let bytes = self.0.entry(path.to_owned()).or_insert_with(|| crate::base::fs::read_regular(std::path::Path::new(path), crate::base::fs::MAX_FILE).ok()).as_deref()?;
        let image = crate::formats::pe::PeImage::parse(bytes).ok()?;
        let mut code = image.reader_at(rva, size).ok()?;
        Some(code.bytes(size as usize, "code").ok()?.to_vec())
    }
}

/// A whole jitdump: the header, then for each body its debug-info record (when it has lines) and
/// its code load, all stamped `header.timestamp`, code indexes from 1, thread 0, and the code
/// bytes where known (else zeros).
pub fn write_new(planned: &[Planned], header: FileHeader) -> Vec<u8> {
    let mut out = header.encode().to_vec();
    let mut index = 0u64;
    for p in planned {
        index = index.saturating_add(1);
        push_body(&mut out, p, header.timestamp, header.pid, index);
    }
    out
}

fn push_body(out: &mut Vec<u8>, p: &Planned, timestamp: u64, pid: u32, index: u64) {
    if !p.lines.is_empty() {
        if let Some(r) = encode_debug_info(timestamp, p.address, &p.lines) {
            out.extend(r);
        }
    }
    let code = p.code.as_deref().filter(|c| c.len() as u64 == p.code_size);
    let load = CodeLoad { timestamp, pid, tid: 0, address: p.address, code_size: p.code_size, code_index: index, name: &p.name, code };
    if let Some(r) = encode_code_load(&load) {
        out.extend(r);
    }
}

/// What [`enrich`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Enriched {
    /// The file's records kept as they were.
    pub kept: usize,
    /// Debug-info records added before the file's own code loads.
    pub lines_added: usize,
    /// Bodies the file did not have (ReadyToRun methods), added with their lines.
    pub loads_added: usize,
}

/// Enrich a jitdump another writer made (the runtime, with `DOTNET_PerfMapEnabled=1`) for the
/// same run: every record and timestamp is kept; a debug-info record is added before each code
/// load that has none and whose address is a planned body's; planned bodies the file lacks (the
/// runtime logs no ReadyToRun method) are added with fresh code indexes.
///
/// An added body needs a timestamp after its module was mapped, or perf lets the module's own
/// mapping hide it. `order` is the source's recording order (code starts, as the capture or the
/// trace lists them): an added body takes the timestamp of the next body in that order that the
/// file has, and goes just before it: before that body's debug-info and unwinding-info records,
/// since perf gives those to the next code load in the file. One with none goes at the end, with
/// the last timestamp. A code load whose group already has a debug-info record keeps it. A torn
/// tail of the file is dropped (its warning is returned). Enriching twice adds nothing.
pub fn enrich(dump: &[u8], planned: &[Planned], order: &[u64]) -> Result<(Vec<u8>, Enriched, Option<Error>), Error> {
    let mut out = Vec::with_capacity(dump.len());
    match enrich_stream(&mut std::io::Cursor::new(dump), dump.len() as u64, planned, order, &mut out) {
        Ok((stats, warning)) => Ok((out, stats, warning)),
        Err(StreamError::Input(e)) => Err(e),
        // A slice and a vector do not fail.
        Err(StreamError::Io(_)) => Err(Error::new(crate::base::read::ErrorKind::Truncated, 0, "a readable jitdump")),
    }
}

/// [`enrich`], streaming: `dump` (`len` bytes) is read twice, once to find its records
/// ([`scan`]) and once to copy them to `out`, so memory follows the number of records, not the
/// file's size. The file must not change in between (a file that shrinks is an I/O error).
pub fn enrich_stream<R: Read + Seek, W: Write>(dump: &mut R, len: u64, planned: &[Planned], order: &[u64], out: &mut W) -> Result<(Enriched, Option<Error>), StreamError> {
    dump.seek(SeekFrom::Start(0))?;
    let scanned = scan(&mut std::io::BufReader::new(&mut *dump), len)?;
    let records = &scanned.records;
    let by_address: HashMap<u64, &Planned> = planned.iter().map(|p| (p.address, p)).collect();
    let present: HashMap<u64, usize> = records.iter().enumerate().filter_map(|(i, r)| r.load.map(|(address, _)| (address, i))).collect();
    let mut next_index = records.iter().filter_map(|r| r.load.map(|(_, index)| index)).max().unwrap_or(0);
    let last_time = records.iter().map(|r| r.timestamp).max().unwrap_or(scanned.header.timestamp);

    // Each added body: the record it goes before (None: the end), in recording order. That is
    // the first record of the code load's group: perf gives a debug-info (and an unwinding-info)
    // record to the next code load in the file, so nothing may come between them.
    let ids: Vec<u32> = records.iter().map(|r| r.id).collect();
    let group = group_starts(&ids);
    let mut before: HashMap<Option<usize>, (usize, Vec<&Planned>)> = HashMap::new();
    let mut placed: HashSet<u64> = HashSet::new();
    let mut pending: Vec<&Planned> = Vec::new();
    for start in order {
        if let Some(&i) = present.get(start) {
            let first = group.get(i).copied().unwrap_or(i);
            before.entry(Some(first)).or_insert_with(|| (i, Vec::new())).1.append(&mut pending);
        } else if let Some(p) = by_address.get(start) {
            if placed.insert(p.address) {
                pending.push(p);
            }
        }
    }
    for p in planned {
        if !present.contains_key(&p.address) && !placed.contains(&p.address) {
            pending.push(p);
        }
    }
    before.entry(None).or_insert_with(|| (usize::MAX, Vec::new())).1.append(&mut pending);

    let mut stats = Enriched::default();
    let pid = scanned.header.pid;
    let mut buf = Vec::new();
    let mut add = |out: &mut W, list: Option<&Vec<&Planned>>, timestamp: u64, stats: &mut Enriched| -> std::io::Result<()> {
        for p in list.into_iter().flatten() {
            next_index = next_index.saturating_add(1);
            buf.clear();
            push_body(&mut buf, p, timestamp, pid, next_index);
            out.write_all(&buf)?;
            stats.loads_added = stats.loads_added.saturating_add(1);
        }
        Ok(())
    };
    dump.seek(SeekFrom::Start(0))?;
    let mut input = std::io::BufReader::new(&mut *dump);
    copy_exact(&mut input, out, u64::from(scanned.header_size))?;
    for (i, r) in records.iter().enumerate() {
        // An added body takes the timestamp of the code load whose group it goes before.
        if let Some((load, list)) = before.get(&Some(i)) {
            let timestamp = records.get(*load).map_or(r.timestamp, |l| l.timestamp);
            add(out, Some(list), timestamp, &mut stats)?;
        }
        let first = group.get(i).copied().unwrap_or(i);
        let has_debug = ids.get(first..i).is_some_and(|g| g.contains(&JIT_CODE_DEBUG_INFO));
        if let (JIT_CODE_LOAD, Some((address, _)), false) = (r.id, r.load, has_debug) {
            let lines = by_address.get(&address).map(|p| &p.lines).filter(|l| !l.is_empty());
            if let Some(rec) = lines.and_then(|l| encode_debug_info(r.timestamp, address, l)) {
                out.write_all(&rec)?;
                stats.lines_added = stats.lines_added.saturating_add(1);
            }
        }
        copy_exact(&mut input, out, r.range.end.saturating_sub(r.range.start))?;
        stats.kept = stats.kept.saturating_add(1);
    }
    add(out, before.get(&None).map(|(_, list)| list), last_time, &mut stats)?;
    Ok((stats, scanned.warning))
}

/// Copy exactly `n` bytes (the file shrank if it has fewer).
fn copy_exact<R: Read, W: Write>(input: &mut R, out: &mut W, n: u64) -> std::io::Result<()> {
    if std::io::copy(&mut input.take(n), out)? != n {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the jitdump changed while it was read"));
    }
    Ok(())
}

/// For each record (by id), the first record of its group: for a code load, the debug-info and
/// unwinding-info records right before it (perf gives them to it); any other record is its own.
fn group_starts(ids: &[u32]) -> Vec<usize> {
    let mut out = Vec::with_capacity(ids.len());
    let mut run_start = 0usize;
    for (i, &id) in ids.iter().enumerate() {
        match id {
            JIT_CODE_DEBUG_INFO | JIT_CODE_UNWINDING_INFO => {
                out.push(i);
                // A run of them starts at the first one.
                if i == 0 || ids.get(i.saturating_sub(1)).is_none_or(|p| !matches!(*p, JIT_CODE_DEBUG_INFO | JIT_CODE_UNWINDING_INFO)) {
                    run_start = i;
                }
            }
            JIT_CODE_LOAD => {
                let attached = i > 0 && ids.get(i.saturating_sub(1)).is_some_and(|p| matches!(*p, JIT_CODE_DEBUG_INFO | JIT_CODE_UNWINDING_INFO));
                out.push(if attached { run_start } else { i });
            }
            _ => out.push(i),
        }
    }
    out
}

/// A perf map (`perf-PID.map`): one `START SIZE NAME` line per body, in address order.
pub fn perf_map(planned: &[Planned]) -> String {
    planned.iter().map(|p| perf_map_line(p.address, p.code_size, &p.name)).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::super::read::parse;
    use super::super::*;
    use super::*;

    fn planned(address: u64, line: u32) -> Planned {
        let lines = vec![LineEntry { address, line, column: 1, file: "a.cs".into() }, LineEntry { address: address + 16, line, column: 1, file: "a.cs".into() }];
        Planned { address, code_size: 16, name: format!("M{address:x}"), lines, pid: Some(7), code: None }
    }

    /// A runtime-like dump: code loads only, no debug info.
    fn runtime_dump(loads: &[(u64, u64)]) -> Vec<u8> {
        let mut f = FileHeader { elf_machine: EM_X86_64, pid: 7, timestamp: 1, flags: 0 }.encode().to_vec();
        for (i, &(addr, t)) in loads.iter().enumerate() {
            let code = [0xCCu8; 16];
            f.extend(encode_code_load(&CodeLoad { timestamp: t, pid: 7, tid: 8, address: addr, code_size: 16, code_index: i as u64 + 1, name: "[rt]", code: Some(&code) }).unwrap());
        }
        f
    }

    #[test]
    fn enrich_keeps_records_adds_lines_and_places_added_bodies_by_recording_order() {
        let dump = runtime_dump(&[(0x100, 10), (0x200, 20)]);
        // Recording order: jit 0x100, r2r 0x900, jit 0x200, r2r 0x800 (after the last known).
        let plan = vec![planned(0x100, 3), planned(0x200, 4), planned(0x800, 5), planned(0x900, 6)];
        let (out, stats, warn) = enrich(&dump, &plan, &[0x100, 0x900, 0x200, 0x800]).unwrap();
        assert!(warn.is_none());
        assert_eq!(stats, Enriched { kept: 2, lines_added: 2, loads_added: 2 });
        let d = parse(&out).unwrap();
        let seq: Vec<(u32, u64, u64)> = d.records.iter().map(|r| (r.id, r.load.as_ref().map_or_else(|| r.debug.as_ref().unwrap().0, |l| l.code_address), r.timestamp)).collect();
        assert_eq!(seq, vec![(2, 0x100, 10), (0, 0x100, 10), (2, 0x900, 20), (0, 0x900, 20), (2, 0x200, 20), (0, 0x200, 20), (2, 0x800, 20), (0, 0x800, 20)]);
        let indexes: Vec<u64> = d.records.iter().filter_map(|r| r.load.as_ref().map(|l| l.code_index)).collect();
        assert_eq!(indexes, vec![1, 3, 2, 4]);
        // The runtime's records are byte-identical.
        assert_eq!(&out[d.records[1].range.clone()], &dump[40..40 + d.records[1].range.len()]);
        // Idempotent.
        let (again, stats, _) = enrich(&out, &plan, &[0x100, 0x900, 0x200, 0x800]).unwrap();
        assert_eq!(again, out);
        assert_eq!(stats.lines_added + stats.loads_added, 0);
    }

    /// A file that already has line records (an earlier enrich, or a writer with lines): an
    /// added body goes before the next body's debug-info record, never between it and its code
    /// load (perf gives a debug-info record to the next code load), and a second enrich adds
    /// nothing.
    #[test]
    fn enrich_never_separates_a_debug_info_from_its_code_load() {
        let mut dump = FileHeader { elf_machine: EM_X86_64, pid: 7, timestamp: 1, flags: 0 }.encode().to_vec();
        for (i, (addr, t)) in [(0x100u64, 10u64), (0x200, 20), (0x300, 30)].into_iter().enumerate() {
            dump.extend(encode_debug_info(t - 1, addr, &planned(addr, 9).lines).unwrap());
            if addr == 0x300 {
                // An unwinding-info record belongs to the next code load too.
                let mut u = Vec::new();
                push_prefix(&mut u, JIT_CODE_UNWINDING_INFO, 40, t - 1);
                u.extend_from_slice(&[0u8; 24]);
                dump.extend(u);
            }
            let code = [0xCCu8; 16];
            dump.extend(encode_code_load(&CodeLoad { timestamp: t, pid: 7, tid: 8, address: addr, code_size: 16, code_index: i as u64 + 1, name: "[rt]", code: Some(&code) }).unwrap());
        }
        let plan = vec![planned(0x100, 3), planned(0x200, 4), planned(0x300, 5), planned(0x800, 6), planned(0x900, 7)];
        let order = [0x100, 0x900, 0x200, 0x800, 0x300];
        let (out, stats, _) = enrich(&dump, &plan, &order).unwrap();
        assert_eq!(stats, Enriched { kept: 7, lines_added: 0, loads_added: 2 });
        let d = parse(&out).unwrap();
        let seq: Vec<(u32, u64, u64)> = d.records.iter().map(|r| (r.id, r.load.as_ref().map(|l| l.code_address).or(r.debug.as_ref().map(|d| d.0)).unwrap_or(0), r.timestamp)).collect();
        assert_eq!(
            seq,
            vec![(2, 0x100, 9), (0, 0x100, 10), (2, 0x900, 20), (0, 0x900, 20), (2, 0x200, 19), (0, 0x200, 20), (2, 0x800, 30), (0, 0x800, 30), (2, 0x300, 29), (4, 0, 29), (0, 0x300, 30),]
        );
        // Every debug-info record is followed by its own code load's group.
        for (i, r) in d.records.iter().enumerate().filter(|(_, r)| r.id == JIT_CODE_DEBUG_INFO) {
            let load = d.records[i + 1..].iter().find(|r| r.id == JIT_CODE_LOAD).unwrap();
            assert_eq!(r.debug.as_ref().unwrap().0, load.load.as_ref().unwrap().code_address);
        }
        let (again, stats, _) = enrich(&out, &plan, &order).unwrap();
        assert_eq!(stats.lines_added + stats.loads_added, 0);
        assert_eq!(again, out);
    }

    #[test]
    fn write_new_pairs_debug_info_with_each_load() {
        let plan = vec![planned(0x100, 3), Planned { lines: vec![], ..planned(0x200, 0) }];
        let d = parse(&write_new(&plan, FileHeader { elf_machine: EM_X86_64, pid: 7, timestamp: 5, flags: 0 })).unwrap();
        let ids: Vec<u32> = d.records.iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![2, 0, 0]);
        assert_eq!(perf_map(&plan), "100 10 M100\n200 10 M200\n");
    }
}

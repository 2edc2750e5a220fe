//! The JIT's inline trees: the profiler's own EventPipe session, started in
//! `Initialize` through ICorProfilerInfo12::EventPipeStartSession (.NET 5 and later), receives
//! in process, through ICorProfilerCallback10::EventPipeEventDelivered, every
//! `JittedMethodRichDebugInfo` (Microsoft-Windows-DotNETRuntimePrivate, keyword 0x40000, id 189)
//! and `MethodDetails` (Microsoft-Windows-DotNETRuntime, keyword 0x4000000000, id 72; its JIT
//! keyword too, see [`JIT_KEYWORD`]) the runtime sends, and writes each payload unchanged into
//! the capture (docs/capture-format.md).
//!
//! The runtime sends them only with `DOTNET_RichDebugInfo=1` in the environment at start-up
//! (`clrmap profile` sets it unless `--no-inlines`). A profiler session is synchronous: the
//! runtime calls `EventPipeEventDelivered` on the thread that writes the event, the compiling
//! thread, just before the profiler's `JITCompilationFinished` for the same body (prestub.cpp:
//! `JitCompileCodeLockedEventWrapper` calls `ETW::MethodLog::MethodJitted`, which sends MethodLoad,
//! the IL map, event 189 and MethodDetails, then the profiler's JITCompilationFinished). So event
//! 189's payloads wait in a thread-local until that callback says the body's code start.
//!
//! Locking: this side has its own lock. It may be taken while the main state's lock is held
//! (JITCompilationFinished writes the pending trees), never the other way round: an event
//! callback takes only this one, so an event the runtime writes while a callback holds the main
//! lock cannot deadlock. An event written while this lock is held on the same thread (reentry)
//! is dropped and counted.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

use clrmap::capture::{Hex, InlineEvent, InlineSession, Record};

use crate::com::{Hresult, Info, Info12, S_OK};

/// The private runtime provider (event 189).
const PRIVATE_PROVIDER: &str = "Microsoft-Windows-DotNETRuntimePrivate";
/// The runtime provider (MethodDetails).
const RUNTIME_PROVIDER: &str = "Microsoft-Windows-DotNETRuntime";
/// JittedMethodRichDebugInfoKeyword.
const RICH_DEBUG_INFO_KEYWORD: u64 = 0x4_0000;
/// MethodDiagnosticKeyword.
const METHOD_DIAGNOSTIC_KEYWORD: u64 = 0x40_0000_0000;
/// JitKeyword: the runtime calls `ETW::MethodLog::MethodJitted`, which sends event 189, only
/// when this keyword is on at the verbose level (prestub.cpp, `JitCompileCodeLockedEventWrapper`).
const JIT_KEYWORD: u64 = 0x10;
/// TRACE_LEVEL_VERBOSE.
const VERBOSE: u32 = 5;
const RICH_DEBUG_INFO_EVENT: u32 = 189;
const METHOD_DETAILS_EVENT: u32 = 72;
/// COR_PRF_HIGH_MONITOR_EVENT_PIPE: deliver the session's events to EventPipeEventDelivered.
const COR_PRF_HIGH_MONITOR_EVENT_PIPE: u32 = 0x80;

struct Side {
    info: Info,
    info12: Info12,
    /// The capture (`None`: perf only, the trees serve the jitdump's lines alone).
    out: Option<File>,
    pid: u32,
    /// EVENTPIPE_PROVIDER → which of the two providers it is (asked once per handle).
    providers: HashMap<usize, Provider>,
    /// ModuleID → its path and MVID text.
    modules: HashMap<usize, Option<(String, Option<String>)>>,
    /// MethodID → the MethodDetails payload recorded for it: the runtime sends one for each
    /// inlinee of each body (a method inlined into 20 bodies, 20 times); measured on 8.0.4, the
    /// same bytes for one MethodDesc each time (Frames.dll: 640 events, 328 MethodIDs, 328
    /// distinct payloads). A repeat is not written again; a different payload would be.
    details: HashMap<u64, Vec<u8>>,
    /// Whether the runtime provider is on the session (MethodDetails name the inlinees); if not,
    /// the profiler names each inlinee itself, once per MethodID, in `named`.
    method_details: bool,
    named: HashSet<u64>,
    /// Events dropped because they arrived while this thread was inside this side already.
    reentered: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Provider {
    Private,
    Runtime,
    Other,
}

fn side() -> &'static OnceLock<Mutex<Side>> {
    static SIDE: OnceLock<Mutex<Side>> = OnceLock::new();
    &SIDE
}

thread_local! {
    /// Event 189 payloads this thread received for a body whose JITCompilationFinished has not
    /// come yet, with their MethodID.
    static PENDING: RefCell<Vec<(u64, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
    /// Inside this side's lock on this thread.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Event 189 payloads this thread received since the last JITCompilationFinished, with their
/// MethodIDs: to be handed to [`body_finished`] (empty without a session).
pub fn take_pending() -> Vec<(u64, Vec<u8>)> {
    // Without a session the thread-local is never touched: its destructor would keep glibc from
    // unloading the library after an attached profiler detaches.
    if side().get().is_none() {
        return Vec::new();
    }
    PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()))
}

/// The inline tree of method `fid` among `pending` payloads ([`take_pending`]), reassembled from
/// its chunks and parsed as offline (`None`: none, or torn or malformed).
pub fn tree_of(fid: u64, pending: &[(u64, Vec<u8>)]) -> Option<clrmap::inlines::InlineTree> {
    let mut collector = clrmap::inlines::InlineCollector::new();
    let mut key = None;
    for (method_id, payload) in pending.iter().filter(|(m, _)| *m == fid) {
        let _ = collector.rich_debug_info(clrmap::read::Reader::new(payload, 0));
        let code_id = payload.get(10..18).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        key = code_id.map(|c| (*method_id, c)).or(key);
    }
    let (method_id, code_id) = key?;
    collector.finish().tree(method_id, code_id).cloned()
}

/// Called at JITCompilationFinished of `fid` on this thread with the payloads [`take_pending`]
/// gave and the code start of the body just recorded (`None`: none new): the pending trees of
/// that method get it.
pub fn body_finished(fid: u64, start: Option<u64>, pending: Vec<(u64, Vec<u8>)>) {
    let Some(side) = side().get() else { return };
    if pending.is_empty() {
        return;
    }
    with_side(side, |s| {
        if s.out.is_none() {
            return;
        }
        if !s.method_details {
            name_inlinees(s, &pending);
        }
        for (method_id, payload) in pending {
            let start = start.filter(|_| method_id == fid);
            write(s, &Record::RichDebugInfo(InlineEvent { pid: Some(s.pid), method_id, start, payload: Hex(payload), ..InlineEvent::default() }));
        }
    });
}

/// Without MethodDetails: an `inlinee` record for each inlinee of these trees not named yet.
/// The blob is the chunks' bytes after their 34-byte headers, in order (docs/rich-debug-info.md):
/// `u32 nodes; u32 mappings;` then 20-byte nodes, each starting with its u64 Method. Only a
/// whole tree (its last chunk here) is read, and never past its bytes.
fn name_inlinees(s: &mut Side, pending: &[(u64, Vec<u8>)]) {
    let mut blob = Vec::new();
    for (_, payload) in pending {
        blob.extend_from_slice(payload.get(34..).unwrap_or(&[]));
        let chunk = payload.get(26..30).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes);
        if chunk & 0x8000_0000 == 0 {
            continue;
        }
        let nodes = blob.get(..4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes) as usize;
        for k in 1..nodes.min(blob.len() / 20) {
            let method_id = u64_at(&blob, k.saturating_mul(20).saturating_add(8));
            if method_id == 0 || !s.named.insert(method_id) {
                continue;
            }
            let (module, mvid, token) = resolve(s, method_id);
            write(s, &Record::Inlinee(InlineEvent { pid: Some(s.pid), method_id, module, mvid, token, ..InlineEvent::default() }));
        }
        blob.clear();
    }
}

/// A method's module path, MVID text and MethodDef token, as the runtime answers for its
/// FunctionID (a MethodDesc, as the events' MethodIDs are).
fn resolve(s: &mut Side, method_id: u64) -> (Option<String>, Option<String>, Option<u32>) {
    let info = s.info;
    let Some((module_id, token)) = usize::try_from(method_id).ok().and_then(|fid| info.function_ids(fid)) else { return (None, None, None) };
    let pid = s.pid;
    let mut line = None;
    let m = s.modules.entry(module_id).or_insert_with(|| {
        let (path, _) = info.module_info(module_id)?;
        let mvid = info.module_mvid(module_id);
        // An inlinee's module may have no body of its own: its PDB id goes out here (modules.rs).
        line = crate::modules::record_line(pid, &path, mvid);
        Some((path, mvid.map(|m| clrmap::capture::mvid_text(&m))))
    });
    let m = m.clone();
    if let (Some(line), Some(out)) = (line, s.out.as_mut()) {
        let _ = out.write_all(line.as_bytes());
    }
    match m {
        Some((path, mvid)) => (Some(path), mvid, Some(token)),
        None => (None, None, Some(token)),
    }
}

/// Run `f` under this side's lock, unless this thread is inside it already (then the event is
/// dropped and counted).
fn with_side(side: &Mutex<Side>, f: impl FnOnce(&mut Side)) {
    if INSIDE.with(Cell::get) {
        if let Ok(mut s) = side.try_lock() {
            s.reentered = s.reentered.saturating_add(1);
        }
        return;
    }
    INSIDE.with(|i| i.set(true));
    if let Ok(mut s) = side.lock() {
        f(&mut s);
    }
    INSIDE.with(|i| i.set(false));
}

fn write(s: &mut Side, record: &Record) {
    if let Some(out) = s.out.as_mut() {
        let _ = out.write_all(record.to_line().as_bytes());
    }
}

/// Start the session: `unknown` is what Initialize received, `mask` the COR_PRF_MONITOR mask
/// already set, `out` the capture (`None`: perf only, the trees go to the jitdump's lines). On a
/// runtime without ICorProfilerInfo12 (3.1) nothing happens and nothing is recorded. Otherwise
/// the capture gets an `inline_session` record with the runtime's answer.
pub fn start(unknown: *mut std::ffi::c_void, info: Info, mask: u32, out: Option<&File>) {
    // SAFETY: `unknown` is the runtime's IUnknown, as Initialize receives it.
    let Some(info12) = (unsafe { Info12::from_unknown(unknown) }) else { return };
    let (mut out, side_out) = match out {
        Some(f) => match (f.try_clone(), f.try_clone()) {
            (Ok(a), Ok(b)) => (Some(a), Some(b)),
            _ => return,
        },
        None => (None, None),
    };
    let pid = std::process::id();
    let rich_debug_info = ["DOTNET_RichDebugInfo", "COMPlus_RichDebugInfo"].iter().any(|v| std::env::var(v).is_ok_and(|v| v.trim() == "1"));
    let mut hr = info12.set_event_mask2(mask, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    let mut method_details = false;
    if hr == S_OK {
        // The side must be in place before the session starts: events may come at once.
        let providers = [(PRIVATE_PROVIDER, RICH_DEBUG_INFO_KEYWORD, VERBOSE), (RUNTIME_PROVIDER, METHOD_DIAGNOSTIC_KEYWORD | JIT_KEYWORD, VERBOSE)];
        let providers = if jit_keyword_without_event_pipe() { &providers[..1] } else { &providers[..] };
        method_details = providers.len() == 2;
        let _ = side().set(Mutex::new(Side {
            info,
            info12,
            out: side_out,
            pid,
            providers: HashMap::new(),
            modules: HashMap::new(),
            details: HashMap::new(),
            method_details,
            named: HashSet::new(),
            reentered: 0,
        }));
        hr = match info12.start_session(providers) {
            Ok(_) => S_OK,
            Err(hr) => hr,
        };
    }
    let line = Record::InlineSession(InlineSession { pid: Some(pid), hr, rich_debug_info, method_details }).to_line();
    if let Some(out) = out.as_mut() {
        let _ = out.write_all(line.as_bytes());
    }
}

/// Whether the runtime's own configuration already turns the runtime provider's JIT keyword on at
/// the verbose level, without EventPipe: `DOTNET_EnableEventLog=1` with a `DOTNET_LTTngConfig`
/// entry (`provider:keywords:level`, keywords in hex, an empty level meaning verbose) for
/// Microsoft-Windows-DotNETRuntime that has it, or none at all (eventtracebase.h,
/// `XplatEventLogger::InitializeLogger`; `clrmap profile` sets these, with
/// `DOTNET_EventSourceFilter` matching no EventSource and `DOTNET_LTTng=0`). Then the session
/// needs only the private provider: enabling the runtime provider on an EventPipe session also
/// enables its managed twin, NativeRuntimeEventSource, which builds its event descriptions by
/// reflection at start-up (measured on 8.0.4: Frames.dll runs 300 more framework methods, and
/// the run costs about 15% more CPU).
fn jit_keyword_without_event_pipe() -> bool {
    let var = |name: &str| std::env::var(format!("DOTNET_{name}")).or_else(|_| std::env::var(format!("COMPlus_{name}"))).ok();
    jit_keyword_in(var("EnableEventLog").as_deref(), var("LTTngConfig").as_deref())
}

/// [`jit_keyword_without_event_pipe`] on the two settings' values.
fn jit_keyword_in(enable_event_log: Option<&str>, config: Option<&str>) -> bool {
    if enable_event_log.is_none_or(|v| u32::from_str_radix(v.trim(), 16) != Ok(1)) {
        return false;
    }
    // No configuration: every keyword of every provider (the runtime's default with the log on).
    let Some(config) = config.filter(|c| !c.is_empty()) else { return true };
    config.split(',').any(|entry| {
        let mut parts = entry.split(':');
        let (provider, keywords, level) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let keywords = keywords.trim();
        let keywords = keywords.strip_prefix("0x").or_else(|| keywords.strip_prefix("0X")).unwrap_or(keywords);
        let on = u64::from_str_radix(keywords, 16).is_ok_and(|k| k & JIT_KEYWORD != 0);
        let verbose = level.trim().is_empty() || level.trim().parse::<u32>().is_ok_and(|l| l == 0 || l >= VERBOSE);
        // `*` counts only as the runtime takes it: every keyword, verbose.
        let every = provider == "*" && u64::from_str_radix(keywords, 16) == Ok(u64::MAX) && level.trim().parse::<u32>() == Ok(VERBOSE);
        (provider.eq_ignore_ascii_case(RUNTIME_PROVIDER) && on && verbose) || every
    })
}

fn u64_at(payload: &[u8], at: usize) -> u64 {
    payload.get(at..at.saturating_add(8)).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes)
}

/// One event from the session (ICorProfilerCallback10::EventPipeEventDelivered).
pub fn delivered(provider: usize, event_id: u32, payload: &[u8]) -> Hresult {
    if event_id != RICH_DEBUG_INFO_EVENT && event_id != METHOD_DETAILS_EVENT {
        return S_OK;
    }
    let Some(side) = side().get() else { return S_OK };
    with_side(side, |s| record(s, provider, event_id, payload));
    S_OK
}

fn record(s: &mut Side, provider: usize, event_id: u32, payload: &[u8]) {
    let which = match s.providers.get(&provider) {
        Some(&p) => p,
        None => {
            let p = match s.info12.provider_name(provider).as_deref() {
                Some(PRIVATE_PROVIDER) => Provider::Private,
                Some(RUNTIME_PROVIDER) => Provider::Runtime,
                _ => Provider::Other,
            };
            s.providers.insert(provider, p);
            p
        }
    };
    let record = match (which, event_id) {
        (Provider::Private, RICH_DEBUG_INFO_EVENT) => {
            // ClrInstanceID (u16), then the MethodID (docs/rich-debug-info.md). Kept until the profiler's
            // JITCompilationFinished for the body (next on this thread) tells its code start;
            // chunks of another method still pending never got theirs (a dynamic method's
            // DynamicMethodJITCompilationFinished): written without it.
            let method_id = u64_at(payload, 2);
            let stale = PENDING.with(|p| {
                let mut p = p.borrow_mut();
                let stale = if p.iter().any(|(m, _)| *m != method_id) { std::mem::take(&mut *p) } else { Vec::new() };
                p.push((method_id, payload.to_vec()));
                stale
            });
            for (method_id, payload) in stale {
                write(s, &Record::RichDebugInfo(InlineEvent { pid: Some(s.pid), method_id, payload: Hex(payload), ..InlineEvent::default() }));
            }
            return;
        }
        (Provider::Runtime, METHOD_DETAILS_EVENT) => {
            // MethodID first (ClrEtwAll.man, MethodDetails): a MethodDesc, which is the FunctionID.
            let method_id = u64_at(payload, 0);
            if s.details.get(&method_id).is_some_and(|p| p.as_slice() == payload) {
                return;
            }
            s.details.insert(method_id, payload.to_vec());
            let (module, mvid, token) = resolve(s, method_id);
            Record::MethodDetails(InlineEvent { pid: Some(s.pid), method_id, start: None, module, mvid, token, payload: Hex(payload.to_vec()) })
        }
        _ => return,
    };
    write(s, &record);
}

#[cfg(test)]
mod tests {
    use super::jit_keyword_in;

    #[test]
    fn the_jit_keyword_is_on_only_as_the_runtime_reads_its_lttng_settings() {
        // What `clrmap profile` sets.
        assert!(jit_keyword_in(Some("1"), Some("Microsoft-Windows-DotNETRuntime:10:5")));
        // The log off, or not the JIT keyword, or below verbose, or another provider: off.
        assert!(!jit_keyword_in(None, Some("Microsoft-Windows-DotNETRuntime:10:5")));
        assert!(!jit_keyword_in(Some("0"), Some("Microsoft-Windows-DotNETRuntime:10:5")));
        assert!(!jit_keyword_in(Some("1"), Some("Microsoft-Windows-DotNETRuntime:8:5")));
        assert!(!jit_keyword_in(Some("1"), Some("Microsoft-Windows-DotNETRuntime:10:4")));
        assert!(!jit_keyword_in(Some("1"), Some("Microsoft-Windows-DotNETRuntimePrivate:10:5")));
        assert!(!jit_keyword_in(Some("1"), Some("*:10:5")));
        // Hex keywords with or without 0x, level 0 or none (verbose), a second entry, `*` with
        // everything, and no configuration at all (every provider).
        assert!(jit_keyword_in(Some("1"), Some("microsoft-windows-dotnetruntime:0xFFFF:0")));
        assert!(jit_keyword_in(Some("1"), Some("Other:1:5,Microsoft-Windows-DotNETRuntime:30:")));
        assert!(jit_keyword_in(Some("1"), Some("*:FFFFFFFFFFFFFFFF:5")));
        assert!(jit_keyword_in(Some("1"), None) && jit_keyword_in(Some("1"), Some("")));
        // Unparsable: off (the session then takes the runtime provider itself, which works).
        assert!(!jit_keyword_in(Some("1"), Some("Microsoft-Windows-DotNETRuntime:zz:5")));
    }
}

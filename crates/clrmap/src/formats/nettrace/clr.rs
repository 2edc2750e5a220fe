//! The CLR's method events in a trace (docs/format-notes.md#eventpipe-traces):
//! MethodLoadVerbose 143 / MethodDCEndVerbose 144 and the IL maps 190 / 150, paired into code
//! bodies whose maps equal what `GetILToNativeMapping3(start)` returns.

use std::collections::HashMap;

// Names of trace bodies in the contract's notation (nettrace/naming.rs).
#[path = "naming.rs"]
mod naming;

use super::stream::{utf16z, Event};
use crate::base::ilmap::{CodeBody, CodeKind, IlOffset, MapEntry, Tier};
use crate::base::read::{Reader, Result};

/// `Microsoft-Windows-DotNETRuntime`.
pub const RUNTIME: &str = "Microsoft-Windows-DotNETRuntime";
/// `Microsoft-Windows-DotNETRuntimeRundown`.
pub const RUNDOWN: &str = "Microsoft-Windows-DotNETRuntimeRundown";

/// MethodLoadVerbose / MethodDCEndVerbose (versions 0-2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodLoad {
    /// MethodID (the MethodDesc; the profiler's FunctionID).
    pub method_id: u64,
    /// ModuleID.
    pub module_id: u64,
    /// Code start.
    pub start: u64,
    /// Code size.
    pub size: u32,
    /// MethodDef token.
    pub token: u32,
    /// MethodFlags (bits 7-9: optimization tier).
    pub flags: u32,
    /// `Namespace` (the type's full name) and `Name`.
    pub namespace: String,
    /// The method's name.
    pub name: String,
    /// `MethodSignature`, as the runtime prints it (`instance void  (!0)`); empty if absent.
    pub signature: String,
    /// Version 2's `ReJITID` after `ClrInstanceID`: the body's NativeCodeId (.NET 7+: the native
    /// code version, which pairs the body with its inline tree, event 189); 0 in versions 0-1
    /// (a method's first body).
    pub native_code_id: u64,
}

/// ModuleLoad (152) / ModuleDCEnd (rundown 154): `u64 ModuleID, u64 AssemblyID, u32 ModuleFlags,
/// u32 Reserved1, utf16z ModuleILPath, utf16z ModuleNativePath, ...` (ClrEtwAll.man).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleLoad {
    /// ModuleID (the MethodLoad events' ModuleID).
    pub module_id: u64,
    /// AssemblyID.
    pub assembly_id: u64,
    /// The module's IL path.
    pub il_path: String,
}

/// Decode a module load/DCEnd payload.
pub fn module_load(p: Reader<'_>) -> Result<ModuleLoad> {
    let mut r = p;
    let module_id = r.u64("ModuleID")?;
    let assembly_id = r.u64("AssemblyID")?;
    let _flags = r.u32("ModuleFlags")?;
    let _reserved = r.u32("Reserved1")?;
    let il_path = utf16z(&mut r)?;
    Ok(ModuleLoad { module_id, assembly_id, il_path })
}

/// RuntimeInformationStart (runtime 187) / RuntimeInformationDCStart (rundown 187): `u16
/// ClrInstanceID, u16 Sku, u16 BclMajorVersion, BclMinorVersion, BclBuildNumber, BclQfeNumber,
/// u16 VMMajorVersion, VMMinorVersion, VMBuildNumber, VMQfeNumber, u32 StartupFlags, u8
/// StartupMode, utf16z CommandLine, GUID ComObjectGuid, utf16z RuntimeDllPath` (ClrEtwAll.man).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeInformation {
    /// The VM's version, as the runtime reports it (CoreCLR before .NET 5 reports 4.0.x).
    pub vm: [u16; 4],
    /// The runtime library's path (`.../Microsoft.NETCore.App/3.1.23/libcoreclr.so`).
    pub dll_path: String,
}

impl RuntimeInformation {
    /// The runtime's major version (see [`runtime_major`]).
    pub fn major(&self) -> Option<u16> {
        runtime_major(&format!("{}.{}.{}", self.vm[0], self.vm[1], self.vm[2]), Some(&self.dll_path))
    }
}

/// Decode a runtime information event; `None` for any other event.
pub fn runtime_information(e: &Event<'_>) -> Option<RuntimeInformation> {
    if e.meta.event_id != 187 || !matches!(e.meta.provider.as_str(), RUNTIME | RUNDOWN) {
        return None;
    }
    let mut r = e.payload;
    r.skip(2 * 6, "ClrInstanceID, Sku and the BCL version").ok()?;
    let mut vm = [0u16; 4];
    for v in &mut vm {
        *v = r.u16("the VM version").ok()?;
    }
    r.skip(4 + 1, "StartupFlags, StartupMode").ok()?;
    let _command_line = utf16z(&mut r).ok()?;
    r.skip(16, "ComObjectGuid").ok()?;
    let dll_path = utf16z(&mut r).unwrap_or_default();
    Some(RuntimeInformation { vm, dll_path })
}

pub use crate::base::ilmap::runtime_major;

/// MethodILToNativeMap / MethodDCEndILToNativeMap: IL-sorted starts, no ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IlMapEvent {
    /// MethodID.
    pub method_id: u64,
    /// ReJITID (on .NET 7+, the native code version id).
    pub rejit_id: u64,
    /// (IL offset, native start) pairs in event order.
    pub entries: Vec<(u32, u32)>,
}

/// Decode a method load/unload/DCEnd payload.
pub fn method_load(p: Reader<'_>) -> Result<MethodLoad> {
    let mut r = p;
    Ok(MethodLoad {
        method_id: r.u64("MethodID")?,
        module_id: r.u64("ModuleID")?,
        start: r.u64("MethodStartAddress")?,
        size: r.u32("MethodSize")?,
        token: r.u32("MethodToken")?,
        flags: r.u32("MethodFlags")?,
        namespace: utf16z(&mut r)?,
        name: utf16z(&mut r)?,
        signature: utf16z(&mut r).unwrap_or_default(),
        // `u16 ClrInstanceID` (V1+), then `u64 ReJITID` (V2 only: ClrEtwAll.man
        // MethodLoadVerbose_V2); absent fields leave 0.
        native_code_id: match r.u16("ClrInstanceID") {
            Ok(_) => r.u64("ReJITID").unwrap_or(0),
            Err(_) => 0,
        },
    })
}

/// Decode an IL-map payload: `u64 MethodID, u64 ReJITID, u8 extent, u16 count, u32 IL[count],
/// u32 native[count], u16 ClrInstanceID` (version 1 adds a u64 after it).
pub fn il_map(p: Reader<'_>) -> Result<IlMapEvent> {
    let mut r = p;
    let method_id = r.u64("MethodID")?;
    let rejit_id = r.u64("ReJITID")?;
    let _extent = r.u8("MethodExtent")?;
    let count = usize::from(r.u16("CountOfMapEntries")?);
    let mut ils = r.split(count.saturating_mul(4), "the IL offsets")?;
    let mut natives = r.split(count.saturating_mul(4), "the native offsets")?;
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        entries.push((ils.u32("an IL offset")?, natives.u32("a native offset")?));
    }
    Ok(IlMapEvent { method_id, rejit_id, entries })
}

/// Rebuild end offsets ("Checked against traces"): stable-sort by native start, each range ends
/// where the next starts, the last at the method's size; then keep the event's IL order.
pub fn rebuild_map(entries: &[(u32, u32)], size: u32) -> Vec<MapEntry> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| entries.get(i).map_or(0, |e| e.1));
    let mut ends = vec![size; entries.len()];
    for w in order.windows(2) {
        if let ([a, b], Some(next)) = (w, w.get(1).and_then(|&b| entries.get(b))) {
            let _ = b;
            if let Some(slot) = ends.get_mut(*a) {
                *slot = next.1;
            }
        }
    }
    entries.iter().zip(ends).map(|(&(il, start), end)| MapEntry { il: IlOffset::from_raw(il), native_start: start, native_end: end }).collect()
}

/// `Microsoft-Windows-DotNETRuntimePrivate`.
const PRIVATE: &str = "Microsoft-Windows-DotNETRuntimePrivate";

/// The name of a CLR event: its `symbol` in the runtime's manifest (src/coreclr/vm/ClrEtwAll.man,
/// without a `_V1`-style version suffix), for the events of the runtime, rundown and private
/// providers that clrmap reads or that traces usually hold. The runtime does not write names into
/// a trace's metadata, so tools carry the table.
pub fn event_name(provider: &str, id: u32) -> Option<&'static str> {
    Some(match (provider, id) {
        ("Microsoft-DotNETCore-EventPipe", 1) => "ProcessInfo",
        (super::SAMPLE_PROFILER, 0) => "ThreadSample",
        (RUNTIME, 1) => "GCStart",
        (RUNTIME, 2) => "GCEnd",
        (RUNTIME, 15) => "BulkType",
        (RUNTIME, 72) => "MethodDetails",
        (RUNTIME, 80) => "ExceptionThrown",
        (RUNTIME, 141) => "MethodLoad",
        (RUNTIME, 142) => "MethodUnload",
        (RUNTIME, 143) => "MethodLoadVerbose",
        (RUNTIME, 144) => "MethodUnloadVerbose",
        (RUNTIME, 145) => "MethodJittingStarted",
        (RUNTIME, 146) => "MethodJitMemoryAllocatedForCode",
        (RUNTIME, 151) => "DomainModuleLoad",
        (RUNTIME, 152) => "ModuleLoad",
        (RUNTIME, 153) => "ModuleUnload",
        (RUNTIME, 154) => "AssemblyLoad",
        (RUNTIME, 155) => "AssemblyUnload",
        (RUNTIME, 156) => "AppDomainLoad",
        (RUNTIME, 157) => "AppDomainUnload",
        (RUNTIME, 159) => "R2RGetEntryPoint",
        (RUNTIME, 160) => "R2RGetEntryPointStart",
        (RUNTIME, 185) => "MethodJitInliningSucceeded",
        (RUNTIME, 186) => "MethodJitInliningFailedAnsi",
        (RUNTIME, 187) => "RuntimeInformationStart",
        (RUNTIME, 188) => "MethodJitTailCallSucceeded",
        (RUNTIME, 189) => "MethodJitTailCallFailedAnsi",
        (RUNTIME, 190) => "MethodILToNativeMap",
        (RUNTIME, 191) => "MethodJitTailCallFailed",
        (RUNTIME, 192) => "MethodJitInliningFailed",
        (RUNTIME, 280) => "TieredCompilationSettings",
        (RUNTIME, 281) => "TieredCompilationPause",
        (RUNTIME, 282) => "TieredCompilationResume",
        (RUNTIME, 283) => "TieredCompilationBackgroundJitStart",
        (RUNTIME, 284) => "TieredCompilationBackgroundJitStop",
        (RUNDOWN, 0) => "CLRStackWalkDCStart",
        (RUNDOWN, 10) => "GCSettingsRundown",
        (RUNDOWN, 141) => "MethodDCStart",
        (RUNDOWN, 142) => "MethodDCEnd",
        (RUNDOWN, 143) => "MethodDCStartVerbose",
        (RUNDOWN, 144) => "MethodDCEndVerbose",
        (RUNDOWN, 145) => "DCStartComplete",
        (RUNDOWN, 146) => "DCEndComplete",
        (RUNDOWN, 147) => "DCStartInit",
        (RUNDOWN, 148) => "DCEndInit",
        (RUNDOWN, 149) => "MethodDCStartILToNativeMap",
        (RUNDOWN, 150) => "MethodDCEndILToNativeMap",
        (RUNDOWN, 151) => "DomainModuleDCStart",
        (RUNDOWN, 152) => "DomainModuleDCEnd",
        (RUNDOWN, 153) => "ModuleDCStart",
        (RUNDOWN, 154) => "ModuleDCEnd",
        (RUNDOWN, 155) => "AssemblyDCStart",
        (RUNDOWN, 156) => "AssemblyDCEnd",
        (RUNDOWN, 157) => "AppDomainDCStart",
        (RUNDOWN, 158) => "AppDomainDCEnd",
        (RUNDOWN, 187) => "RuntimeInformationDCStart",
        (RUNDOWN, 280) => "TieredCompilationSettingsDCStart",
        (PRIVATE, 189) => "JittedMethodRichDebugInfo",
        _ => return None,
    })
}

/// `name` and `full_name` from the runtime's text alone (a module whose metadata is not at hand):
/// nested types with `/`, the owner's type arguments in the type notation (value-typeness unknown:
/// `class` for all but primitives) and the runtime's parameter list.
fn names_from_text(namespace: &str, method: &str, signature: &str) -> (String, Option<String>) {
    let owner = naming::parse_owner(namespace);
    let plain = owner.as_ref().map_or_else(|| namespace.replace('+', "/"), |o| o.name.replace('+', "/"));
    let name = if namespace.is_empty() { method.to_owned() } else { format!("{plain}::{method}") };
    let args: Vec<String> = owner.map(|o| o.args.iter().map(|a| naming::render_text(a, &Default::default())).collect()).unwrap_or_default();
    let full = signature.find('(').and_then(|i| signature.get(i..)).map(|params| {
        let mut owner = plain.clone();
        if !args.is_empty() {
            owner = format!("{owner}<{}>", args.join(","));
        }
        let head = if namespace.is_empty() { method.to_owned() } else { format!("{owner}::{method}") };
        format!("{head}{}", naming::params_from_text(params))
    });
    (name, full)
}

/// The ModuleID of a body in no module's metadata (a dynamic method): no ModuleLoad names it.
const NO_MODULE: u64 = u64::MAX;

/// Pairs maps with bodies while events stream by.
#[derive(Debug, Default)]
pub struct MethodTable {
    bodies: Vec<CodeBody>,
    /// (MethodID, start) → body index.
    by_key: HashMap<(u64, u64), usize>,
    /// Last runtime-provider load per (MethodID, capture thread): where a JIT-time map goes.
    last_load: HashMap<(u64, u64), usize>,
    /// Rundown maps waiting for their DCEnd event (the map comes first).
    pending_rundown: HashMap<(u64, u64), IlMapEvent>,
    /// ModuleID → the module's IL path.
    modules: HashMap<u64, String>,
    /// Body index → its ModuleID.
    body_module: Vec<u64>,
    /// Body index → its owner type as the runtime printed it (`Box`1[System.Int32]`).
    body_owner: Vec<String>,
    /// Body index → its NativeCodeId (MethodLoad's `native_code_id`).
    body_code_id: Vec<u64>,
    /// The bodies a map event came for, empty ones included: .NET 11's runtime-async thunks
    /// (the Task-returning body of an async method, beside its async variant of the same
    /// MethodDef) get a map of no entries, and are still named.
    mapped: std::collections::HashSet<usize>,
    /// Event 189 chunks and MethodDetails, as they stream by.
    inlines: crate::formats::inlines::InlineCollector,
    /// BulkType's types by TypeID: what names a MethodDetails' type arguments.
    types: HashMap<u64, super::bulk_type::TypeValue>,
}

impl MethodTable {
    fn body(&mut self, m: &MethodLoad) -> usize {
        let key = (m.method_id, m.start);
        if let Some(&i) = self.by_key.get(&key) {
            return i;
        }
        // Without the module's metadata (named again from it in `read_code_bodies_partial`):
        // the runtime's text, in the contract's notation as far as it allows.
        let (name, full_name) = names_from_text(&m.namespace, &m.name, &m.signature);
        // A dynamic method (MethodFlags bit 0: an IL stub, a DynamicMethod) has no metadata in
        // any module: the runtime's text (`dynamicClass::IL_STUB_PInvoke`) is its only name, and
        // no token or module is given, so nothing renames it from a module file. The runtime
        // sends stubs no IL map, and they are kept without one.
        let dynamic = m.flags & 1 != 0;
        self.bodies.push(CodeBody {
            token: if dynamic { 0 } else { m.token },
            rva: None,
            code_size: m.size,
            name: Some(name),
            module: None,
            module_path: None,
            full_name,
            signature: None,
            function_id: Some(m.method_id),
            start: Some(m.start),
            kind: Some(CodeKind::from_method_flags(m.flags)),
            tier: Tier::from_method_flags(m.flags),
            version: None,
            pid: None,
            map: Vec::new(),
        });
        self.body_module.push(if dynamic { NO_MODULE } else { m.module_id });
        self.body_owner.push(m.namespace.clone());
        self.body_code_id.push(m.native_code_id);
        let i = self.bodies.len().saturating_sub(1);
        if dynamic {
            self.mapped.insert(i);
        }
        self.by_key.insert(key, i);
        i
    }

    fn attach(&mut self, i: usize, map: &IlMapEvent) {
        self.mapped.insert(i);
        if let Some(b) = self.bodies.get_mut(i) {
            if b.map.is_empty() {
                b.map = rebuild_map(&map.entries, b.code_size);
            }
        }
    }

    /// Feed one event.
    pub fn event(&mut self, e: &Event<'_>) {
        let (provider, id) = (e.meta.provider.as_str(), e.meta.event_id);
        match (provider, id) {
            // JIT time: MethodLoadVerbose, then its map on the same thread.
            (RUNTIME, 143) => {
                if let Ok(m) = method_load(e.payload) {
                    let i = self.body(&m);
                    self.last_load.insert((m.method_id, e.capture_thread_id), i);
                }
            }
            (RUNTIME, 190) => {
                if let Ok(map) = il_map(e.payload) {
                    if let Some(&i) = self.last_load.get(&(map.method_id, e.capture_thread_id)) {
                        self.attach(i, &map);
                    }
                }
            }
            // Rundown: the map (150) comes before its MethodDCEndVerbose (144).
            (RUNDOWN, 150) => {
                if let Ok(map) = il_map(e.payload) {
                    self.pending_rundown.insert((map.method_id, e.capture_thread_id), map);
                }
            }
            (RUNDOWN, 144) => {
                if let Ok(m) = method_load(e.payload) {
                    let i = self.body(&m);
                    if let Some(map) = self.pending_rundown.remove(&(m.method_id, e.capture_thread_id)) {
                        self.attach(i, &map);
                    }
                }
            }
            // The JIT's inline trees (docs/rich-debug-info.md): a fault in one body's chunks is
            // kept in the collector (errors, dropped sets) and costs no other body anything.
            (PRIVATE, 189) => {
                let _ = self.inlines.rich_debug_info(e.payload);
            }
            // MethodDetails: names the inlinees' MethodDescs, and a generic method's
            // instantiation (its TypeParameters, named by the BulkType before it).
            (RUNTIME, 72) => {
                let _ = self.inlines.method_details(e.payload);
            }
            (RUNTIME, 15) => {
                self.types.extend(super::bulk_type::values(e.payload).map(|t| (t.type_id, t)));
            }
            // ModuleLoad (runtime 152) and ModuleDCEnd (rundown 154): names for ModuleIDs.
            (RUNTIME, 152) | (RUNDOWN, 154) | (RUNDOWN, 153) => {
                if let Ok(m) = module_load(e.payload) {
                    self.modules.insert(m.module_id, m.il_path);
                }
            }
            _ => {}
        }
    }

    /// The inline trees and method details seen so far, what pairs a body with its tree (code
    /// start → (MethodID, NativeCodeId)), and every module's path by ModuleID; the table keeps its
    /// bodies.
    fn take_inlines(&mut self) -> TraceInlines {
        let inlines = std::mem::take(&mut self.inlines).finish();
        let bodies = self.bodies.iter().zip(&self.body_code_id);
        let code_ids = bodies.filter_map(|(b, &id)| Some((b.start?, (b.function_id?, id)))).collect();
        TraceInlines { inlines, code_ids, modules: self.modules.clone(), named_r2r: Vec::new(), runtime_major: None }
    }

    /// The bodies that have a map (jitted code; R2R methods get no map events).
    pub fn into_bodies(self) -> Vec<CodeBody> {
        self.into_bodies_and_owners().0.into_iter().filter(|b| !b.map.is_empty()).collect()
    }

    /// The bodies that have a map, each with its owner type as the runtime printed it, and every
    /// module path the trace names.
    fn into_bodies_and_owners(self) -> (Vec<CodeBody>, Vec<String>, Vec<String>) {
        let modules = self.modules;
        let mapped = self.mapped;
        let (bodies, owners) = self
            .bodies
            .into_iter()
            .zip(self.body_module)
            .zip(self.body_owner)
            .enumerate()
            // A jitted body without a map event is of no use; a ReadyToRun one is still named (its
            // map is in its image, not in the trace: the frame gets its method, no line), and so
            // is a jitted body whose map event has no entries (a runtime-async thunk).
            .filter(|(i, ((b, _), _))| !b.map.is_empty() || b.kind == Some(CodeKind::R2r) || mapped.contains(i))
            .map(|(_, ((mut b, m), owner))| {
                if let Some(path) = modules.get(&m) {
                    b.module = Some(path.rsplit(['/', '\\']).next().unwrap_or("").to_owned());
                    b.module_path = Some(path.clone());
                }
                (b, owner)
            })
            .unzip();
        let mut paths: Vec<String> = modules.into_values().collect();
        paths.sort();
        paths.dedup();
        (bodies, owners, paths)
    }
}

/// Every jitted body of a trace, with its rebuilt map. A trace cut anywhere is an error here;
/// [`read_code_bodies_partial`] keeps what came before the cut.
pub fn read_code_bodies<R: std::io::Read>(r: R) -> Result<Vec<CodeBody>> {
    match read_code_bodies_partial(r)? {
        (_, Some(fault)) => Err(fault),
        (bodies, None) => Ok(bodies),
    }
}

/// A trace's inline trees (event 189) and MethodDetails, with what pairs them with the trace's
/// code bodies and names an inlinee's module.
#[derive(Clone, Debug, Default)]
pub struct TraceInlines {
    /// The trees by (MethodID, NativeCodeId), and the MethodDetails by MethodID.
    pub inlines: crate::formats::inlines::Inlines,
    /// Code start → (MethodID, NativeCodeId), from MethodLoadVerbose / MethodDCEndVerbose.
    code_ids: HashMap<u64, (u64, u64)>,
    /// ModuleID → the module's IL path (ModuleLoad / ModuleDCEnd).
    modules: HashMap<u64, String>,
    /// The ReadyToRun methods the trace names (load and rundown events: start, size, token,
    /// module), which have no map in it, and the jitted bodies whose map has no entries
    /// (runtime-async thunks): named from their modules, with an empty map.
    pub named_r2r: Vec<CodeBody>,
    /// The traced runtime's major version, as it reported it (RuntimeInformation) or as its
    /// framework modules' directory says. On a runtime whose JIT does not fill in the call sites
    /// ([`crate::formats::inlines::call_sites_known`], .NET 10) the trees come with them forgotten
    /// ([`crate::formats::inlines::NO_CALL_SITE`]).
    pub runtime_major: Option<u16>,
}

impl TraceInlines {
    /// The (MethodID, NativeCodeId) of the body that starts at `start`.
    pub fn code_id(&self, start: u64) -> Option<(u64, u64)> {
        self.code_ids.get(&start).copied()
    }

    /// The inline tree of a body read from the same trace (by its `start`), if the trace has one.
    pub fn tree_of(&self, body: &CodeBody) -> Option<&crate::formats::inlines::InlineTree> {
        let (method_id, native_code_id) = self.code_id(body.start?)?;
        self.inlines.tree(method_id, native_code_id)
    }

    /// The IL path of a module (an inlinee's `MethodDetails::loader_module_id`).
    pub fn module_path(&self, module_id: u64) -> Option<&str> {
        self.modules.get(&module_id).map(String::as_str)
    }

    /// Recover the parents of the trees' dotnet/runtime#98755 orphans from the methods' IL
    /// ([`crate::formats::inlines::il::recover_tree`]), reading each module the trace names once from
    /// its recorded path on this machine. A tree's root is placed by its body (`bodies`, from
    /// the same trace: module path and token); an inlinee by its MethodDetails token, in the
    /// module of its type where `type_modules` (TypeID → ModuleID, from BulkType events) knows
    /// it, else in its loader module (the defining one unless the method is a generic
    /// instantiation over another module's types). A module not found answers "cannot tell",
    /// so its orphans stay unknown. Returns how many nodes got a parent.
    pub fn recover_parents_from_il(&mut self, bodies: &[CodeBody], type_modules: &HashMap<u64, u64>) -> usize {
        use std::path::PathBuf;
        // Which trees have orphans, and where each method involved is defined.
        let mut keys = Vec::new();
        let mut roots: HashMap<(u64, u64), (PathBuf, u32)> = HashMap::new();
        for b in bodies {
            let (Some(start), Some(path)) = (b.start, b.module_path.as_ref()) else { continue };
            if let Some(key) = self.code_id(start) {
                roots.insert(key, (PathBuf::from(path), b.token));
            }
        }
        let mut places: HashMap<u64, (PathBuf, u32)> = HashMap::new();
        for (key, tree) in self.inlines.trees() {
            if tree.unknown_parents() == 0 {
                continue;
            }
            keys.push(key);
            for n in tree.nodes().iter().skip(1) {
                let Some(d) = self.inlines.method(n.method_id) else { continue };
                let module = type_modules.get(&d.type_id).copied().unwrap_or(d.loader_module_id);
                if let Some(path) = self.modules.get(&module) {
                    places.insert(n.method_id, (PathBuf::from(path), d.token));
                }
            }
        }
        let paths: Vec<PathBuf> = places.values().chain(keys.iter().filter_map(|k| roots.get(k))).map(|(p, _)| p.clone()).collect();
        let bytes = crate::formats::inlines::il::read_modules(paths.iter().map(PathBuf::as_path), 1 << 30);
        let modules = crate::formats::inlines::il::IlModules::new(&bytes);
        let mut recovered = 0usize;
        for key in keys {
            let root = roots.get(&key).cloned();
            let Some(tree) = self.inlines.tree_mut(key.0, key.1) else { continue };
            let got = crate::formats::inlines::il::recover_tree(tree, &modules, |mid| if mid == key.0 { root.clone() } else { places.get(&mid).cloned() });
            recovered = recovered.saturating_add(got);
        }
        recovered
    }
}

/// [`read_code_bodies_partial_with`], also keeping the JIT's inline trees (event 189, with
/// `DOTNET_RichDebugInfo=1` on .NET 7+) and MethodDetails: the bodies, the trees and what pairs
/// them, and the fault that cut the trace (a warning, as there). A trace without them (3.1, or
/// the private provider's keyword 0x40000 not enabled) gives empty [`TraceInlines::inlines`].
pub fn read_code_bodies_and_inlines<R: std::io::Read>(r: R, also: impl FnMut(&Event<'_>)) -> Result<(Vec<CodeBody>, TraceInlines, Option<crate::base::read::Error>)> {
    read_all(r, also)
}

/// The bytes of the stream header (magic, the serialization signature's length and text): a file
/// that fails inside them is not a trace at all.
const HEADER_LEN: u64 = 8 + 4 + 20;

/// Every jitted body of a trace, keeping every whole event before a cut or a fault: a process
/// killed mid-run leaves a torn trace, and what it wrote whole is still true. The fault comes back
/// as a warning (its kind and absolute offset). Only a file that is not a trace is an error.
pub fn read_code_bodies_partial<R: std::io::Read>(r: R) -> Result<(Vec<CodeBody>, Option<crate::base::read::Error>)> {
    read_code_bodies_partial_with(r, |_| {})
}

/// [`read_code_bodies_partial`], in the same single pass also showing every event to `also` (for
/// what a reader needs besides the bodies, such as the modules' PDB ids).
pub fn read_code_bodies_partial_with<R: std::io::Read>(r: R, also: impl FnMut(&Event<'_>)) -> Result<(Vec<CodeBody>, Option<crate::base::read::Error>)> {
    read_all(r, also).map(|(bodies, _, fault)| (bodies, fault))
}

/// [`read_code_bodies_and_inlines`], showing `also` only the events of the runtime's own
/// providers (runtime, rundown and private): those [`MethodTable`] reads. A trace's samples and
/// other providers' events are read past without a call each.
pub fn read_code_bodies_and_inlines_clr<R: std::io::Read>(r: R, also: impl FnMut(&Event<'_>)) -> Result<(Vec<CodeBody>, TraceInlines, Option<crate::base::read::Error>)> {
    read_all_where(r, |m| matches!(m.provider.as_str(), RUNTIME | RUNDOWN | PRIVATE), also)
}

/// The one pass behind [`read_code_bodies_partial_with`] and [`read_code_bodies_and_inlines`].
fn read_all<R: std::io::Read>(r: R, also: impl FnMut(&Event<'_>)) -> Result<(Vec<CodeBody>, TraceInlines, Option<crate::base::read::Error>)> {
    read_all_where(r, |_| true, also)
}

/// [`read_all`] over the events whose metadata `want` accepts (every event [`MethodTable`] and
/// the runtime information need must be among them).
fn read_all_where<R: std::io::Read>(r: R, want: impl Fn(&super::EventMeta) -> bool, mut also: impl FnMut(&Event<'_>)) -> Result<(Vec<CodeBody>, TraceInlines, Option<crate::base::read::Error>)> {
    let mut table = MethodTable::default();
    let mut reported_major = None;
    let (stats, fault) = super::stream::read_events_partial_where(r, want, |e| {
        reported_major = reported_major.or_else(|| runtime_information(e).and_then(|i| i.major()));
        table.event(e);
        also(e);
    });
    if let Some(e) = fault.as_ref().filter(|e| e.offset().is_none_or(|o| o < HEADER_LEN)) {
        return Err(*e);
    }
    let mut inlines = table.take_inlines();
    // The runtime's version: as it reported it, else from a framework module's directory
    // (`.../Microsoft.NETCore.App/10.0.12/System.Private.CoreLib.dll`).
    inlines.runtime_major = reported_major.or_else(|| inlines.modules.values().find_map(|p| runtime_major("", Some(p))));
    if !crate::formats::inlines::call_sites_known(inlines.runtime_major) {
        inlines.inlines.forget_call_sites();
    }
    // Every body ran in the traced process (the Trace object's process id).
    let types = std::mem::take(&mut table.types);
    let module_ids = table.modules.clone();
    let (mut bodies, owners, modules) = table.into_bodies_and_owners();
    // A generic method's own type arguments: from its MethodDetails (sent at JIT time with the
    // MethodDiagnostic keyword; a rundown has none), each described by a BulkType and named from
    // its module's metadata as a capture's are. One that cannot be named leaves the body named
    // as the generic definition.
    let lists: Vec<Vec<crate::formats::metadata::RtType>> = bodies
        .iter()
        .map(|b| {
            let Some(d) = b.function_id.and_then(|id| inlines.inlines.method(id)).filter(|d| d.token == b.token) else { return Vec::new() };
            d.type_parameters.iter().map(|&t| super::bulk_type::runtime_type(t, &types, &module_ids)).collect::<Option<Vec<_>>>().unwrap_or_default()
        })
        .collect();
    let list_refs: Vec<&[crate::formats::metadata::RtType]> = lists.iter().map(Vec::as_slice).collect();
    let method_args = crate::formats::metadata::runtime_type::render_types(&list_refs, &HashMap::new());
    naming::name_from_modules(&mut bodies, &owners, &method_args, &modules);
    for b in &mut bodies {
        b.pid = stats.process_id;
    }
    // The bodies are those with a map; ReadyToRun methods the trace names without one (their
    // maps are in their images) and jitted bodies whose map has no entries (runtime-async
    // thunks) go apart, for a reader that wants them named.
    let (bodies, named): (Vec<CodeBody>, Vec<CodeBody>) = bodies.into_iter().partition(|b| !b.map.is_empty());
    inlines.named_r2r = named;
    Ok((bodies, inlines, fault))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pass that shows `also` the runtime's own events only finds what the pass over every
    /// event finds, and shows `also` exactly the runtime's events of the other.
    #[test]
    fn the_runtime_events_pass_finds_what_the_whole_pass_finds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        for name in ["flame/hot-8.0.4.nettrace", "flame/hot-3.1.23.nettrace", "inlines/attach-8.0.4.nettrace"] {
            let bytes = std::fs::read(root.join(name)).unwrap();
            let seen = |e: &Event<'_>| (e.meta.provider.clone(), e.meta.event_id, e.timestamp, e.payload.offset());
            let (mut all, mut clr) = (Vec::new(), Vec::new());
            let (bodies, inlines, fault) = read_code_bodies_and_inlines(&bytes[..], |e| all.push(seen(e))).unwrap();
            let (bodies2, inlines2, fault2) = read_code_bodies_and_inlines_clr(&bytes[..], |e| clr.push(seen(e))).unwrap();
            assert!(!bodies.is_empty(), "{name}");
            assert_eq!((bodies, fault), (bodies2, fault2), "{name}");
            assert_eq!((inlines.code_ids, inlines.modules, inlines.named_r2r, inlines.runtime_major), (inlines2.code_ids, inlines2.modules, inlines2.named_r2r, inlines2.runtime_major), "{name}");
            assert_eq!(inlines.inlines.trees().count(), inlines2.inlines.trees().count(), "{name}");
            let others = all.len() - clr.len();
            all.retain(|(p, ..)| matches!(p.as_str(), RUNTIME | RUNDOWN | PRIVATE));
            assert_eq!(all, clr, "{name}");
            assert!(others > 0, "{name}: the trace has other providers' events (the samples)");
        }
    }

    #[test]
    fn ends_are_rebuilt_in_native_order_and_il_order_is_kept() {
        // IL-sorted as the event carries it: PROLOG, 0, 0 (second range), 8, EPILOG, NO_MAPPING.
        let e = [(0xFFFF_FFFE, 0), (0, 4), (0, 0x20), (8, 0x10), (0xFFFF_FFFD, 0x1C), (0xFFFF_FFFF, 0x1C)];
        let m = rebuild_map(&e, 0x30);
        let got: Vec<(u32, u32)> = m.iter().map(|x| (x.native_start, x.native_end)).collect();
        // Native order: 0, 4, 0x10, 0x1C (EPILOG), 0x1C (NO_MAPPING; ties keep event order), 0x20.
        assert_eq!(got, [(0, 4), (4, 0x10), (0x20, 0x30), (0x10, 0x1C), (0x1C, 0x1C), (0x1C, 0x20)]);
        assert_eq!(m[0].il, IlOffset::Prolog);
    }
}

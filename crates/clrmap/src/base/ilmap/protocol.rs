//! The two-call buffer protocol of `ICorProfilerInfo::GetILToNativeMapping` (corprof.idl), over a
//! store of code bodies, with the runtime's exact results (docs/format-notes.md#the-profiling-api).
//!
//! `cMap` and `*pcMap` are **element counts**. The docs' remarks say to multiply `*pcMap` by the
//! struct size before comparing it with `cMap`; that is wrong (both are counts). Compare
//! `*pcMap > cMap` directly.

use std::collections::HashMap;

use super::model::{CodeBody, CorDebugIlToNativeMap, IlOffset};
use super::symbolize::RuntimeIlIndex;

/// `S_OK`.
pub const S_OK: i32 = 0;
/// `E_INVALIDARG` (0x80070057).
pub const E_INVALIDARG: i32 = 0x8007_0057_u32 as i32;

/// Code bodies keyed by FunctionID and by code start, answering the profiler API's questions.
///
/// FunctionIDs: for a trace or a capture, the runtime's own (a trace's MethodID). For a
/// ReadyToRun image, which has no runtime, a body's FunctionID is its code-start RVA and its
/// code start is the same RVA: the image is treated as loaded at base 0.
#[derive(Clone, Debug, Default)]
pub struct MapStore {
    bodies: Vec<CodeBody>,
    /// FunctionID → index of its first body (GetILToNativeMapping answers with the first body, as
    /// the runtime does with the default native code version; docs/format-notes.md#the-profiling-api).
    by_function: HashMap<u64, usize>,
    /// Code start → body index.
    by_start: HashMap<u64, usize>,
    /// (start, end, index) sorted by start, for address look-ups.
    ranges: Vec<(u64, u64, usize)>,
    /// Each body's IL offsets by native offset, as `runtime_il_offset` answers them.
    il: RuntimeIlIndex,
}

impl MapStore {
    /// A store over `bodies`. A body without `function_id`/`start` uses its RVA for both.
    pub fn new(mut bodies: Vec<CodeBody>) -> Self {
        let mut store = MapStore::default();
        for (i, b) in bodies.iter_mut().enumerate() {
            let start = b.start.or(b.rva.map(u64::from));
            let fid = b.function_id.or(start);
            if let Some(f) = fid {
                store.by_function.entry(f).or_insert(i);
            }
            if let Some(s) = start {
                store.by_start.entry(s).or_insert(i);
                store.ranges.push((s, s.saturating_add(u64::from(b.code_size)), i));
            }
        }
        store.ranges.sort_unstable();
        for b in &bodies {
            store.il.push(&b.map, b.code_size);
        }
        store.bodies = bodies;
        store
    }

    /// All bodies.
    pub fn bodies(&self) -> &[CodeBody] {
        &self.bodies
    }

    /// FunctionIDs, sorted.
    pub fn function_ids(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.by_function.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// The first body of a function.
    pub fn body_of_function(&self, function_id: u64) -> Option<&CodeBody> {
        self.by_function.get(&function_id).and_then(|&i| self.bodies.get(i))
    }

    /// The body starting at `start`.
    pub fn body_at_start(&self, start: u64) -> Option<&CodeBody> {
        self.by_start.get(&start).and_then(|&i| self.bodies.get(i))
    }

    /// The body whose code contains `address` (start ≤ address < start + size).
    pub fn body_containing(&self, address: u64) -> Option<&CodeBody> {
        self.index_containing(address).and_then(|i| self.bodies.get(i))
    }

    /// The index (in [`MapStore::bodies`]) of the body whose code contains `address`.
    pub fn index_containing(&self, address: u64) -> Option<usize> {
        let i = self.ranges.partition_point(|r| r.0 <= address);
        let (start, end, idx) = *self.ranges.get(i.checked_sub(1)?)?;
        (address >= start && address < end).then_some(idx)
    }

    /// [`super::runtime_il_offset`] of the body at `index` (in [`MapStore::bodies`]) at native
    /// `offset`, by a binary search made when the store was; `(None, 0)` for no such body.
    #[inline]
    pub fn runtime_il_offset(&self, index: usize, offset: u32) -> (Option<IlOffset>, u32) {
        self.il.answer(index, offset)
    }

    /// `GetILToNativeMapping(functionId, cMap, pcMap, map)`: forwards to Map2 with ReJITID 0.
    pub fn get_il_to_native_mapping(&self, function_id: u64, c_map: u32, pc_map: Option<&mut u32>, map: Option<&mut [CorDebugIlToNativeMap]>) -> i32 {
        self.get_il_to_native_mapping2(function_id, 0, c_map, pc_map, map)
    }

    /// `GetILToNativeMapping2`: the ReJITID is ignored, as the runtime ignores it (docs/format-notes.md#the-profiling-api):
    /// the answer is always the function's first body.
    pub fn get_il_to_native_mapping2(&self, function_id: u64, _rejit_id: u64, c_map: u32, pc_map: Option<&mut u32>, map: Option<&mut [CorDebugIlToNativeMap]>) -> i32 {
        if function_id == 0 {
            return E_INVALIDARG;
        }
        if c_map > 0 && (pc_map.is_none() || map.is_none()) {
            return E_INVALIDARG;
        }
        match self.body_of_function(function_id) {
            // No code for this function: the runtime's chosen code start is 0, and Map3 refuses it.
            None => E_INVALIDARG,
            Some(b) => copy_out(b, c_map, pc_map, map),
        }
    }

    /// `GetILToNativeMapping3(pNativeCodeStartAddress, cMap, pcMap, map)`: one specific body.
    pub fn get_il_to_native_mapping3(&self, code_start: u64, c_map: u32, pc_map: Option<&mut u32>, map: Option<&mut [CorDebugIlToNativeMap]>) -> i32 {
        if code_start == 0 || (c_map > 0 && (pc_map.is_none() || map.is_none())) {
            return E_INVALIDARG;
        }
        match self.body_at_start(code_start) {
            None => E_INVALIDARG,
            Some(b) => copy_out(b, c_map, pc_map, map),
        }
    }
}

/// Copy min(cMap, count) entries and always report the full count; truncation is S_OK.
fn copy_out(body: &CodeBody, c_map: u32, pc_map: Option<&mut u32>, map: Option<&mut [CorDebugIlToNativeMap]>) -> i32 {
    let count = u32::try_from(body.map.len()).unwrap_or(u32::MAX);
    if let Some(pc) = pc_map {
        *pc = count;
    }
    if let Some(out) = map {
        for (slot, e) in out.iter_mut().take(c_map as usize).zip(&body.map) {
            *slot = (*e).into();
        }
    }
    S_OK
}

//! Frames of a ReadyToRun image: which method, and which funclet of it, holds a code RVA.
//!
//! This is `ICorDebugSymbolProvider2::GetFrameProps(codeRva, &codeStartRva, &parentFrameStartRva)`
//! over an image. cordebug.idl: "For a given code-rva, gives the method start rva (pCodeStartRva)
//! and parent frame's start rva (pParentFrameStartRva). If there is no parent frame, then
//! pParentFrameStartRva is set to 0."
//!
//! A frame is one RUNTIME_FUNCTION: a method's main body or one of its funclets (the runtime runs
//! each funclet as a frame of its own). The runtime finds a method from a funclet as CoreCLR's
//! `ReadyToRunJitManager::JitCodeToMethodInfo` does: the funclets of a method follow its entry
//! RUNTIME_FUNCTION in the table, so it walks back from the code's RUNTIME_FUNCTION to the
//! nearest one that is a method entry point (section 103 or 109), and a RUNTIME_FUNCTION is a
//! funclet when its start is not the method's (`LazyIsFunclet`). So:
//!
//! * in a main body: `code_start` is the method's start, `parent_start` is `None` (0 in C);
//! * in a funclet: `code_start` is the funclet's start, `parent_start` the method's start.
//!
//! An RVA is in a frame when `begin <= rva < end` of its RUNTIME_FUNCTION. Alignment padding
//! between two functions is in none (CoreCLR's own look-up gives it to the function before; a
//! symbol provider is asked about code, and padding is none). An RVA in no frame is `not_found`
//! at that RVA. Images with hot/cold split code (section 120, which no shipped framework has)
//! are `unsupported_version`: their cold parts follow other methods' entries.

use super::image::{ReadyToRunImage, RuntimeFunction};
use crate::base::read::{Error, ErrorKind, Result};

/// Section 120 (readytorun.h `HotColdMap`): pairs of (cold, hot) RUNTIME_FUNCTION indexes.
const HOT_COLD_MAP: u32 = 120;

/// The frame holding a code RVA (the answer of `GetFrameProps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameProps {
    /// The start RVA of the frame: the method's for its main body, the funclet's for a funclet
    /// (`*pCodeStartRva`).
    pub code_start: u32,
    /// The end RVA (exclusive) of the frame's RUNTIME_FUNCTION.
    pub code_end: u32,
    /// For a funclet, the start RVA of its parent method's main body; `None` for a main body
    /// (`*pParentFrameStartRva` is then 0).
    pub parent_start: Option<u32>,
    /// The index of the frame's RUNTIME_FUNCTION.
    pub runtime_function: u32,
    /// The index of the method's entry RUNTIME_FUNCTION (equal to `runtime_function` for a main
    /// body).
    pub method_runtime_function: u32,
}

impl FrameProps {
    /// `*pParentFrameStartRva`: the parent method's start for a funclet, 0 otherwise.
    pub fn parent_frame_start_rva(&self) -> u32 {
        self.parent_start.unwrap_or(0)
    }

    /// True when the frame is a funclet.
    pub fn is_funclet(&self) -> bool {
        self.parent_start.is_some()
    }
}

/// Every RUNTIME_FUNCTION of an image with the entry RUNTIME_FUNCTION of its method, built once
/// so that each [`FrameIndex::frame_props`] is a binary search.
#[derive(Clone, Debug)]
pub struct FrameIndex {
    functions: Vec<RuntimeFunction>,
    /// For each RUNTIME_FUNCTION, the index of its method's entry; `None` before the first entry.
    method: Vec<Option<u32>>,
}

impl FrameIndex {
    /// Index an image's RUNTIME_FUNCTIONs by method: reads sections 102, 103 and 109.
    pub fn new(image: &ReadyToRunImage<'_>) -> Result<Self> {
        if let Some(map) = image.section(HOT_COLD_MAP)? {
            if !map.is_empty() {
                return Err(Error::new(ErrorKind::UnsupportedVersion, map.offset(), "no hot/cold split code (section 120)"));
            }
        }
        let functions = image.runtime_functions().to_vec();
        let mut is_entry = vec![false; functions.len()];
        for e in image.entry_points()? {
            match is_entry.get_mut(e.runtime_function as usize) {
                Some(slot) => *slot = true,
                None => return Err(Error::new(ErrorKind::BadReadyToRun, 0, "an entry point's RUNTIME_FUNCTION index inside the table")),
            }
        }
        let mut method = Vec::with_capacity(functions.len());
        let mut current = None;
        for (i, &entry) in is_entry.iter().enumerate() {
            if entry {
                current = u32::try_from(i).ok();
            }
            method.push(current);
        }
        Ok(FrameIndex { functions, method })
    }

    /// The RUNTIME_FUNCTIONs, sorted by start.
    pub fn runtime_functions(&self) -> &[RuntimeFunction] {
        &self.functions
    }

    /// The index of the RUNTIME_FUNCTION that holds `rva` (`begin <= rva < end`).
    pub fn runtime_function_at(&self, rva: u32) -> Option<usize> {
        let i = self.functions.partition_point(|f| f.begin <= rva).checked_sub(1)?;
        let f = self.functions.get(i)?;
        (rva < f.end).then_some(i)
    }

    /// `GetFrameProps(rva)`: the frame holding `rva` and, for a funclet, its parent method.
    /// `not_found` at the RVA when no RUNTIME_FUNCTION holds it; `bad_ready_to_run` at the RVA
    /// when one does but no method entry point precedes it.
    pub fn frame_props(&self, rva: u32) -> Result<FrameProps> {
        let Some(i) = self.runtime_function_at(rva) else {
            return Err(Error::at_rva(ErrorKind::NotFound, rva, "an RVA inside a RUNTIME_FUNCTION of the image"));
        };
        let (Some(f), Some(&Some(m))) = (self.functions.get(i), self.method.get(i)) else {
            return Err(Error::at_rva(ErrorKind::BadReadyToRun, rva, "a method entry point at or before the code's RUNTIME_FUNCTION"));
        };
        let Some(main) = self.functions.get(m as usize) else {
            return Err(Error::at_rva(ErrorKind::BadReadyToRun, rva, "a method entry point at or before the code's RUNTIME_FUNCTION"));
        };
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        Ok(FrameProps { code_start: f.begin, code_end: f.end, parent_start: (index != m).then_some(main.begin), runtime_function: index, method_runtime_function: m })
    }
}

impl ReadyToRunImage<'_> {
    /// `GetFrameProps(rva)` for one RVA. For many, build a [`FrameIndex`] once.
    pub fn frame_props(&self, rva: u32) -> Result<FrameProps> {
        FrameIndex::new(self)?.frame_props(rva)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(functions: &[(u32, u32)], entries: &[bool]) -> FrameIndex {
        let mut current = None;
        let method = entries
            .iter()
            .enumerate()
            .map(|(i, &e)| {
                if e {
                    current = u32::try_from(i).ok();
                }
                current
            })
            .collect();
        FrameIndex { functions: functions.iter().map(|&(begin, end)| RuntimeFunction { begin, end }).collect(), method }
    }

    #[test]
    fn main_bodies_funclets_padding_and_orphans() {
        // rf0: orphan; rf1: method A; rf2, rf3: A's funclets; rf4: method B.
        let ix = index(&[(0x100, 0x110), (0x200, 0x250), (0x250, 0x260), (0x270, 0x280), (0x300, 0x310)], &[false, true, false, false, true]);
        let p = ix.frame_props(0x200).unwrap();
        assert_eq!((p.code_start, p.parent_frame_start_rva(), p.is_funclet()), (0x200, 0, false));
        assert_eq!(ix.frame_props(0x24F).unwrap().code_start, 0x200);
        let p = ix.frame_props(0x250).unwrap();
        assert_eq!((p.code_start, p.parent_frame_start_rva(), p.runtime_function, p.method_runtime_function), (0x250, 0x200, 2, 1));
        let p = ix.frame_props(0x27F).unwrap();
        assert_eq!((p.code_start, p.code_end, p.parent_start), (0x270, 0x280, Some(0x200)));
        assert_eq!(ix.frame_props(0x305).unwrap().parent_start, None);
        for rva in [0, 0xFF, 0x110, 0x260, 0x26F, 0x280, 0x310, u32::MAX] {
            let e = ix.frame_props(rva).unwrap_err();
            assert_eq!((e.kind, e.location), (ErrorKind::NotFound, crate::base::read::Location::Rva(rva)), "{rva:#x}");
        }
        assert_eq!(ix.frame_props(0x105).unwrap_err().kind, ErrorKind::BadReadyToRun);
        assert_eq!(index(&[], &[]).frame_props(0).unwrap_err().kind, ErrorKind::NotFound);
    }
}

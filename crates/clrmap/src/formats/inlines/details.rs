//! `MethodDetails` (runtime provider, event 72): what names an inlinee's MethodDesc.

use crate::base::read::{ErrorKind, Reader, Result};

/// One `MethodDetails` event: a MethodDesc's token, type and loader module (raw.rs for the
/// layout and its source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodDetails {
    /// `MethodID`: the MethodDesc (an inline tree node's `method_id`).
    pub method_id: u64,
    /// `TypeID`: the owning type's TypeHandle (BulkType events name it and its module).
    pub type_id: u64,
    /// `MethodToken`: the MethodDef token, in the module that defines the method.
    pub token: u32,
    /// `LoaderModuleID`: the ModuleID of the method's loader module (ModuleLoad names its
    /// path). For a method that is not generic, or generic only over its own module's types,
    /// this is the defining module; a generic instantiation over another module's types may be
    /// loaded by that other module.
    pub loader_module_id: u64,
    /// `TypeParameters`: the method's own instantiation, as TypeIDs (empty if not generic).
    pub type_parameters: Vec<u64>,
}

impl MethodDetails {
    /// Decode one payload. A field cut short is `bad_trace` at its first byte; a
    /// `TypeParameterCount` whose TypeIDs do not fit in the payload is `bad_trace` at the count
    /// (checked before allocating).
    pub fn parse(payload: Reader<'_>) -> Result<MethodDetails> {
        let mut r = payload;
        let bad = |e: crate::base::read::Error| e.with_kind(ErrorKind::BadTrace);
        let method_id = r.u64("MethodDetails' MethodID").map_err(bad)?;
        let type_id = r.u64("MethodDetails' TypeID").map_err(bad)?;
        let token = r.u32("MethodDetails' MethodToken").map_err(bad)?;
        let count_at = r;
        let count = r.u32("MethodDetails' TypeParameterCount").map_err(bad)?;
        let loader_module_id = r.u64("MethodDetails' LoaderModuleID").map_err(bad)?;
        if u64::from(count).saturating_mul(8) > r.len() as u64 {
            return Err(count_at.error(ErrorKind::BadTrace, "a TypeParameterCount whose TypeIDs fit in the event"));
        }
        let mut type_parameters = Vec::with_capacity(count as usize);
        for _ in 0..count {
            type_parameters.push(r.u64("a TypeParameters entry").map_err(bad)?);
        }
        Ok(MethodDetails { method_id, type_id, token, loader_module_id, type_parameters })
    }
}

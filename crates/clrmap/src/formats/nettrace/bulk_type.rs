//! `BulkType` (runtime provider, event 15; ClrEtwAll.man's `BulkType` template): the runtime names
//! the TypeHandles other events give as bare TypeIDs. With the MethodDiagnostic keyword it sends
//! one before each `MethodDetails`, naming the method's type and its type arguments
//! (`ETW::MethodLog::SendMethodDetailsEvent`, eventtrace.cpp), so a trace can name a generic
//! method's instantiation (`Pass<int32>`), which the method events leave out.
//!
//! Layout: `u32 Count, u16 ClrInstanceID`, then `Count` values of `u64 TypeID, u64 ModuleID, u32
//! TypeNameID, u32 Flags, u8 CorElementType, utf16z Name, u32 TypeParameterCount, u64
//! TypeParameters[TypeParameterCount]`.

use std::collections::HashMap;

use crate::base::read::Reader;
use crate::formats::metadata::RtType;

/// The smallest value: its fixed fields and an empty name. A count cannot ask for more values
/// than the payload holds at this size.
const MIN_VALUE_SIZE: usize = 8 + 8 + 4 + 4 + 1 + 2 + 4;

/// `Flags`' array rank (eventtracepriv.h `kEtwTypeFlagsArrayRankMask`, bits 8–13; the
/// `kEtwTypeFlagsArray` bit 3 marks an array).
const FLAG_ARRAY: u32 = 0x8;
const RANK_SHIFT: u32 = 8;
const RANK_MASK: u32 = 0x3F00;

const ELEMENT_TYPE_ARRAY: u8 = 0x14;
const ELEMENT_TYPE_SZARRAY: u8 = 0x1D;

/// The deepest type argument nesting described (deeper is not named).
const MAX_DEPTH: u32 = 32;

/// One value of a BulkType event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeValue {
    /// `TypeID`: the TypeHandle.
    pub type_id: u64,
    /// `ModuleID`: the module that defines the type.
    pub module_id: u64,
    /// `TypeNameID`: the type's TypeDef token in that module (the generic definition's for an
    /// instantiation; 0 for an array).
    pub type_name_id: u32,
    /// `Flags`: array-ness and rank, among others.
    pub flags: u32,
    /// `CorElementType`: `0x11` for a value type, a primitive's own code, `0x12` for a class,
    /// `0x1D` and `0x14` for arrays.
    pub element_type: u8,
    /// `Name`: the runtime's text of the type, without its type arguments
    /// (`System.Collections.Generic.List`1`, `Frames.Outer+Inner`).
    pub name: String,
    /// `TypeParameters`: a generic instantiation's arguments, or an array's element.
    pub parameters: Vec<u64>,
}

/// The values of one BulkType payload, lazily: a value cut short ends the list (those before it
/// are whole and kept).
pub fn values(payload: Reader<'_>) -> impl Iterator<Item = TypeValue> + '_ {
    let mut r = payload;
    let count = r.u32("BulkType's Count").ok().filter(|_| r.skip(2, "ClrInstanceID").is_ok()).unwrap_or(0);
    let count = count.min(u32::try_from(r.len() / MIN_VALUE_SIZE).unwrap_or(u32::MAX));
    (0..count).map_while(move |_| {
        let type_id = r.u64("TypeID").ok()?;
        let module_id = r.u64("ModuleID").ok()?;
        let type_name_id = r.u32("TypeNameID").ok()?;
        let flags = r.u32("Flags").ok()?;
        let element_type = r.u8("CorElementType").ok()?;
        let name = super::utf16z(&mut r).ok()?;
        let n = r.u32("TypeParameterCount").ok()?;
        // Checked against the bytes left before any allocation.
        if u64::from(n).saturating_mul(8) > r.len() as u64 {
            return None;
        }
        let parameters = (0..n).map(|_| r.u64("TypeParameters")).collect::<Result<Vec<u64>, _>>().ok()?;
        Some(TypeValue { type_id, module_id, type_name_id, flags, element_type, name, parameters })
    })
}

/// A type the trace's BulkType events name, as the runtime type a capture records
/// ([`RtType`]: module path and TypeDef token, type arguments, an array's
/// element and rank), so both are named by one rule: the defining module's metadata. The events
/// carry the type's text only with the GCHeapAndTypeNames keyword; its module and token always.
/// `None` where a type on the way was never described or its module never loaded.
pub fn runtime_type(type_id: u64, types: &HashMap<u64, TypeValue>, modules: &HashMap<u64, String>) -> Option<RtType> {
    runtime_type_at(type_id, types, modules, 0)
}

fn runtime_type_at(type_id: u64, types: &HashMap<u64, TypeValue>, modules: &HashMap<u64, String>, depth: u32) -> Option<RtType> {
    if depth > MAX_DEPTH {
        return None;
    }
    let t = types.get(&type_id)?;
    let next = depth.saturating_add(1);
    let args = t.parameters.iter().map(|&p| runtime_type_at(p, types, modules, next)).collect::<Option<Vec<RtType>>>()?;
    if t.flags & FLAG_ARRAY != 0 || matches!(t.element_type, ELEMENT_TYPE_ARRAY | ELEMENT_TYPE_SZARRAY) {
        // A vector is rank 1; an array of rank 1 is written as one too.
        let rank = ((t.flags & RANK_MASK) >> RANK_SHIFT).max(1);
        return (args.len() == 1).then_some(RtType { args, rank: Some(rank), ..RtType::default() });
    }
    Some(RtType { module: Some(modules.get(&t.module_id)?.clone()), token: t.type_name_id, args, ..RtType::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(out: &mut Vec<u8>, id: u64, token: u32, flags: u32, et: u8, params: &[u64]) {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&7u64.to_le_bytes());
        out.extend_from_slice(&token.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.push(et);
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&u32::try_from(params.len()).unwrap().to_le_bytes());
        for p in params {
            out.extend_from_slice(&p.to_le_bytes());
        }
    }

    #[test]
    fn values_become_runtime_types_and_a_cut_keeps_the_whole_ones() {
        let mut p = Vec::new();
        p.extend_from_slice(&4u32.to_le_bytes());
        p.extend_from_slice(&1u16.to_le_bytes());
        value(&mut p, 1, 0x0200_0010, 0, 0x08, &[]);
        value(&mut p, 2, 0x0200_0020, 0, 0x11, &[1]);
        value(&mut p, 3, 0, FLAG_ARRAY | (2 << RANK_SHIFT), ELEMENT_TYPE_ARRAY, &[1]);
        value(&mut p, 4, 0, 0, ELEMENT_TYPE_SZARRAY, &[2]);
        let all: Vec<TypeValue> = values(Reader::new(&p, 0)).collect();
        assert_eq!(all.len(), 4);
        let types: HashMap<u64, TypeValue> = all.into_iter().map(|t| (t.type_id, t)).collect();
        let modules: HashMap<u64, String> = [(7, "/m/System.Private.CoreLib.dll".to_owned())].into_iter().collect();
        let int = RtType { module: Some("/m/System.Private.CoreLib.dll".into()), token: 0x0200_0010, ..RtType::default() };
        let pair = RtType { module: Some("/m/System.Private.CoreLib.dll".into()), token: 0x0200_0020, args: vec![int.clone()], ..RtType::default() };
        assert_eq!(runtime_type(1, &types, &modules), Some(int.clone()));
        assert_eq!(runtime_type(2, &types, &modules), Some(pair.clone()));
        assert_eq!(runtime_type(3, &types, &modules), Some(RtType { args: vec![int], rank: Some(2), ..RtType::default() }));
        assert_eq!(runtime_type(4, &types, &modules), Some(RtType { args: vec![pair], rank: Some(1), ..RtType::default() }));
        assert_eq!(runtime_type(99, &types, &modules), None);
        // A module the trace never loaded names nothing.
        assert_eq!(runtime_type(1, &types, &HashMap::new()), None);
        // Cut inside the last value: the three before it stay.
        assert_eq!(values(Reader::new(&p[..p.len() - 3], 0)).count(), 3);
        // A count far past the payload asks for no more than fits.
        let mut q = p.clone();
        q[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(values(Reader::new(&q, 0)).count(), 4);
        // A type whose argument is itself (a hostile loop) ends at the depth bound.
        let looped: HashMap<u64, TypeValue> =
            [(9, TypeValue { type_id: 9, module_id: 7, type_name_id: 0x0200_0001, flags: 0, element_type: 0x12, name: String::new(), parameters: vec![9] })].into_iter().collect();
        assert_eq!(runtime_type(9, &looped, &modules), None);
    }
}

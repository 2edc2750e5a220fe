//! A realistic generic dictionary map built from an assembly's own instantiations (docs/format-notes.md#dictionary-maps-from-assemblies):
//! what `clrmap dict from-assembly` writes. It lives with the maps, not with the metadata: the
//! metadata layer knows nothing of dictionary maps.

use super::DictionaryMapBuilder;
use crate::base::read::{Error, ErrorKind, Result};
use crate::formats::metadata::{table, Metadata};

/// The synthetic RVA of a TypeSpec's dictionary in [`instantiation_map`]: 0x01000000 + 16·row.
pub const fn type_spec_rva(rid: u32) -> u32 {
    0x0100_0000u32.wrapping_add(rid.wrapping_mul(16))
}

/// The synthetic RVA of a MethodSpec's dictionary in [`instantiation_map`]: 0x02000000 + 16·row.
pub const fn method_spec_rva(rid: u32) -> u32 {
    0x0200_0000u32.wrapping_add(rid.wrapping_mul(16))
}

/// A realistic generic dictionary map from an assembly (docs/format-notes.md#dictionary-maps-from-assemblies): one entry per MethodSpec
/// (its blob after the 0x0A byte) and per GENERICINST TypeSpec (its argument list), at the
/// synthetic RVAs [`type_spec_rva`] and [`method_spec_rva`]. Rows must number under 2^20 for the
/// two ranges to stay apart; larger tables are `out_of_range`. Identical instantiations share
/// one item. `sorted`: TypeSpecs then MethodSpecs, ascending, flag set; otherwise MethodSpecs
/// first, so the directory is really out of order and the flag is clear.
pub fn instantiation_map(md: &Metadata<'_>, sorted: bool) -> Result<Vec<u8>> {
    let (specs, methods) = (md.tables().rows(table::TYPE_SPEC), md.tables().rows(table::METHOD_SPEC));
    if specs >= 1 << 20 || methods >= 1 << 20 {
        return Err(Error::nowhere(ErrorKind::OutOfRange, "fewer than 2^20 TypeSpec and MethodSpec rows"));
    }
    let mut type_entries = Vec::new();
    for rid in 1..=specs {
        let mut r = md.type_spec(rid)?;
        // II.23.2.14: GENERICINST (CLASS|VALUETYPE) TypeDefOrRefEncoded GenArgCount Type+.
        if r.peek_u8("a TypeSpec blob").ok() != Some(0x15) {
            continue;
        }
        r.u8("GENERICINST")?;
        r.u8("CLASS or VALUETYPE")?;
        r.coded_type_token("the generic type")?;
        type_entries.push((type_spec_rva(rid), r.as_slice()));
    }
    let mut method_entries = Vec::new();
    for rid in 1..=methods {
        let mut r = md.method_spec(rid)?.instantiation;
        let at = r.offset();
        if r.u8("the MethodSpec header 0x0A")? != 0x0A {
            return Err(Error::new(ErrorKind::BadCallingConvention, at, "the MethodSpec header 0x0A"));
        }
        method_entries.push((method_spec_rva(rid), r.as_slice()));
    }
    let mut b = DictionaryMapBuilder::new();
    let order: [&[(u32, &[u8])]; 2] = if sorted { [&type_entries, &method_entries] } else { [&method_entries, &type_entries] };
    for (rva, payload) in order.into_iter().flatten() {
        b.add_payload(*rva, payload)?;
    }
    b.build()
}

//! READYTORUN method signatures in section 109 (ilmap.md "Reading InstanceMethodEntryPoints"):
//! flags, then owner type, method RID, instantiation and constraint. Types use the runtime's
//! zapsig flavour of the ECMA grammar, so they are skipped with the zapsig-aware skipper.

use crate::read::{Error, ErrorKind, Reader, Result};
use crate::signature::skip_zapsig_type;

const UNBOXING_STUB: u32 = 0x01;
const INSTANTIATING_STUB: u32 = 0x02;
const METHOD_INSTANTIATION: u32 = 0x04;
const SLOT_INSTEAD_OF_TOKEN: u32 = 0x08;
const MEMBER_REF_TOKEN: u32 = 0x10;
const CONSTRAINED: u32 = 0x20;
const OWNER_TYPE: u32 = 0x40;
const UPDATE_CONTEXT: u32 = 0x80;

/// Skip one method signature and return its method token (MethodDef, or MemberRef with
/// MemberRefToken; a slot number gives token 0).
pub fn skip_method_signature(r: &mut Reader<'_>) -> Result<u32> {
    let at = r.offset();
    let flags = r.compressed_u32("READYTORUN_METHOD_SIG flags")?;
    let known = UNBOXING_STUB | INSTANTIATING_STUB | METHOD_INSTANTIATION | SLOT_INSTEAD_OF_TOKEN | MEMBER_REF_TOKEN | CONSTRAINED | OWNER_TYPE | UPDATE_CONTEXT;
    if flags & !known != 0 {
        return Err(Error::new(ErrorKind::BadReadyToRun, at, "known READYTORUN_METHOD_SIG flags"));
    }
    if flags & UPDATE_CONTEXT != 0 {
        r.compressed_u32("a module index")?;
    }
    if flags & OWNER_TYPE != 0 {
        skip_zapsig_type(r)?;
    }
    let rid = r.compressed_u32("a method RID or slot")?;
    let token = if flags & SLOT_INSTEAD_OF_TOKEN != 0 {
        0
    } else if flags & MEMBER_REF_TOKEN != 0 {
        0x0A00_0000 | rid
    } else {
        0x0600_0000 | rid
    };
    if flags & METHOD_INSTANTIATION != 0 {
        let n = r.compressed_u32("a method instantiation count")?;
        for _ in 0..n {
            skip_zapsig_type(r)?;
        }
    }
    if flags & CONSTRAINED != 0 {
        skip_zapsig_type(r)?;
    }
    Ok(token)
}

//! READYTORUN method signatures in section 109 (docs/format-notes.md#readytorun-images;
//! dotnet/runtime `src/coreclr/inc/readytorun.h` `ReadyToRunMethodSigFlags`): flags, then the
//! owner type, the method's RID, its instantiation and a constraint. Their types are zapsig types
//! ([`crate::formats::signature::decode_zapsig_type`]).
//!
//! A body's full name comes from here: the owner type carries the type's arguments and the
//! instantiation the method's (``System.Collections.Generic.List`1<int32>::Add(!0)``), which is
//! what tells the instantiations of one method apart.

use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::metadata::Metadata;
use crate::formats::signature::{decode_zapsig_type, SpanRenderer, ZapsigProvider};

const UNBOXING_STUB: u32 = 0x01;
const INSTANTIATING_STUB: u32 = 0x02;
const METHOD_INSTANTIATION: u32 = 0x04;
const SLOT_INSTEAD_OF_TOKEN: u32 = 0x08;
const MEMBER_REF_TOKEN: u32 = 0x10;
const CONSTRAINED: u32 = 0x20;
const OWNER_TYPE: u32 = 0x40;
const UPDATE_CONTEXT: u32 = 0x80;
/// The runtime-async variant of a method (.NET 11; R2R 26.1's images carry it in section 109,
/// e.g. System.ComponentModel.Annotations). A marker with no field of its own, like UnboxingStub.
pub const ASYNC_VARIANT: u32 = 0x100;

/// One READYTORUN method signature, its types read through a provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodSig<T> {
    /// The READYTORUN_METHOD_SIG flags.
    pub flags: u32,
    /// UpdateContext (R2R ≥ 6): the module the token belongs to, when not the image's own.
    pub module: Option<u32>,
    /// OwnerType: the exact owner, with the type's arguments.
    pub owner: Option<T>,
    /// The method: a MethodDef, or a MemberRef with MemberRefToken; 0 for a slot number.
    pub token: u32,
    /// MethodInstantiation: the method's arguments.
    pub instantiation: Vec<T>,
    /// Constrained: the constraint type.
    pub constraint: Option<T>,
}

/// Read one method signature (readytorun.h: the fields in flag order).
pub fn read_method_signature<P: ZapsigProvider>(r: &mut Reader<'_>, provider: &mut P) -> Result<MethodSig<P::Type>> {
    let at = r.offset();
    let flags = r.compressed_u32("READYTORUN_METHOD_SIG flags")?;
    let known = UNBOXING_STUB | INSTANTIATING_STUB | METHOD_INSTANTIATION | SLOT_INSTEAD_OF_TOKEN | MEMBER_REF_TOKEN | CONSTRAINED | OWNER_TYPE | UPDATE_CONTEXT | ASYNC_VARIANT;
    if flags & !known != 0 {
        return Err(Error::new(ErrorKind::BadReadyToRun, at, "known READYTORUN_METHOD_SIG flags"));
    }
    let module = if flags & UPDATE_CONTEXT != 0 { Some(r.compressed_u32("a module index")?) } else { None };
    let owner = if flags & OWNER_TYPE != 0 { Some(decode_zapsig_type(r, provider)?) } else { None };
    let rid = r.compressed_u32("a method RID or slot")?;
    let token = if flags & SLOT_INSTEAD_OF_TOKEN != 0 {
        0
    } else if flags & MEMBER_REF_TOKEN != 0 {
        0x0A00_0000 | (rid & 0x00FF_FFFF)
    } else {
        0x0600_0000 | (rid & 0x00FF_FFFF)
    };
    let mut instantiation = Vec::new();
    if flags & METHOD_INSTANTIATION != 0 {
        let n = r.compressed_u32("a method instantiation count")?;
        // Each type takes at least one byte: a count beyond the bytes left is a fault, found
        // by the reads below without allocating for it.
        instantiation.reserve((n as usize).min(r.len()));
        for _ in 0..n {
            instantiation.push(decode_zapsig_type(r, provider)?);
        }
    }
    let constraint = if flags & CONSTRAINED != 0 { Some(decode_zapsig_type(r, provider)?) } else { None };
    Ok(MethodSig { flags, module, owner, token, instantiation, constraint })
}

/// Skip one method signature and return its method token (MethodDef, or MemberRef with
/// MemberRefToken; a slot number gives token 0).
pub fn skip_method_signature(r: &mut Reader<'_>) -> Result<u32> {
    read_method_signature(r, &mut ()).map(|s| s.token)
}

/// `class N` or `valuetype N` without its keyword: a type as the owner part of a method name.
fn owner_text(text: &str) -> &str {
    text.strip_prefix("class ").or_else(|| text.strip_prefix("valuetype ")).unwrap_or(text)
}

/// The full name of the body whose method signature starts at file offset `at` of `image`, in
/// the contract's notation: ``Ns.Type`1<int32>::Method<string>(!0,!!0)``. The owner and the
/// method's arguments come from the signature, the method's name and its parameter types from
/// `md` ([`Metadata::method_full_name`], which also puts a conversion operator's return type
/// first). Stubs say so after the name, as R2RDump does: `" [UNBOX]"`, `" [INST]"`. `None` when
/// the signature does not read or names a method of another module.
pub fn instantiation_name(image: &[u8], at: u64, md: &Metadata<'_>) -> Option<String> {
    let bytes = image.get(usize::try_from(at).ok()?..)?;
    let mut printer = SpanRenderer::new(md);
    let sig = read_method_signature(&mut Reader::new(bytes, at), &mut printer).ok()?;
    if sig.module.is_some() {
        return None;
    }
    let plain = md.method_name(sig.token)?;
    let mut display = match (&sig.owner, plain.rsplit_once("::")) {
        (Some(owner), Some((_, method))) => format!("{}::{method}", owner_text(printer.text(*owner))),
        _ => plain.clone(),
    };
    if !sig.instantiation.is_empty() {
        display.push('<');
        for (i, a) in sig.instantiation.iter().enumerate() {
            if i > 0 {
                display.push(',');
            }
            display.push_str(printer.text(*a));
        }
        display.push('>');
    }
    let mut out = md.method_full_name(sig.token, &display)?;
    if sig.flags & UNBOXING_STUB != 0 {
        out.push_str(" [UNBOX]");
    }
    if sig.flags & INSTANTIATING_STUB != 0 {
        out.push_str(" [INST]");
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::signature::HexTokens;

    /// Read a signature with hex token names: flags, module, owner, token, arguments, constraint.
    fn read(bytes: &[u8]) -> (u32, Option<u32>, Option<String>, u32, Vec<String>, Option<String>) {
        let mut printer = SpanRenderer::new(&HexTokens);
        let mut r = Reader::new(bytes, 0);
        let s = read_method_signature(&mut r, &mut printer).unwrap();
        assert!(r.is_empty(), "{bytes:02X?}");
        let text = |t: &crate::formats::signature::Span| printer.text(*t).to_owned();
        (s.flags, s.module, s.owner.as_ref().map(text), s.token, s.instantiation.iter().map(text).collect(), s.constraint.as_ref().map(text))
    }

    #[test]
    fn fields_follow_the_flags() {
        // OwnerType: GENERICINST CLASS TypeDef#1 <int32>, then MethodDef RID 0x73.
        let (flags, module, owner, token, args, constraint) = read(&[0x40, 0x15, 0x12, 0x04, 0x01, 0x08, 0x73]);
        assert_eq!((flags, module, token), (0x40, None, 0x0600_0073));
        assert_eq!(owner.as_deref(), Some("class 0x02000001<int32>"));
        assert!(args.is_empty() && constraint.is_none());
        // UpdateContext module 3, MethodInstantiation <__Canon, char>, MemberRef RID 2 (flags 0x94,
        // a two-byte compressed integer).
        let (_, module, owner, token, args, _) = read(&[0x80, 0x94, 0x03, 0x02, 0x02, 0x3E, 0x03]);
        assert_eq!((module, owner, token), (Some(3), None, 0x0A00_0002));
        assert_eq!(args, ["class System.__Canon", "char"]);
        // Constrained, with a slot instead of a token.
        let (_, _, _, token, _, constraint) = read(&[0x28, 0x05, 0x11, 0x08]);
        assert_eq!((token, constraint.as_deref()), (0, Some("valuetype 0x02000002")));
        assert_eq!(skip_method_signature(&mut Reader::new(&[0x40, 0x15, 0x12, 0x04, 0x01, 0x08, 0x73], 0)).unwrap(), 0x0600_0073);
    }

    #[test]
    fn unknown_flags_and_bad_types_are_faults() {
        // 0x200 is no flag; 0x100 is AsyncVariant, a marker alone (11.0.0's `81 00 ...`).
        let e = skip_method_signature(&mut Reader::new(&[0x82, 0x00, 0x01], 0)).unwrap_err();
        assert_eq!((e.kind, e.offset()), (ErrorKind::BadReadyToRun, Some(0)));
        assert_eq!(skip_method_signature(&mut Reader::new(&[0x81, 0x00, 0x01], 0)).unwrap(), 0x0600_0001);
        // An owner type with VOID in it.
        let e = skip_method_signature(&mut Reader::new(&[0x40, 0x01, 0x01], 0)).unwrap_err();
        assert_eq!((e.kind, e.offset()), (ErrorKind::BadElementType, Some(1)));
    }
}

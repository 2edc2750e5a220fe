//! Methods named by token, a MethodDef (II.22.26) or a MemberRef (II.22.25), as `Owner::Name`
//! with their parameter types `(P1,P2)` in the notation of docs/output.md#type-signatures: what tells overloads
//! apart in a body's name, and what `meta specs` prints around a MethodSpec's arguments.

use super::schema::table;
use super::Metadata;
use crate::base::read::{Error, ErrorKind, Reader, Result};
use crate::formats::signature::{decode_return_type, stream_one, SpanRenderer, TypeNames};

/// The longest parameter list printed (names are bounded one by one; this bounds their sum).
const MAX_PARAMS_TEXT: usize = 64 << 10;

/// A MethodSpec row (II.22.29): the method it instantiates and its Instantiation blob.
#[derive(Clone, Copy, Debug)]
pub struct MethodSpecRow<'a> {
    /// The generic method: a MethodDef (0x06) or MemberRef (0x0A) token. Its row may be 0 or
    /// past its table in a hostile file; naming it then falls back to this raw token.
    pub method: u32,
    /// The Instantiation blob (II.23.2.15: `0x0A GenArgCount Type+`).
    pub instantiation: Reader<'a>,
}

/// The `0x...` form a token prints as when it names nothing, as the type printer does (docs/output.md#type-signatures).
fn raw(token: u32) -> String {
    format!("0x{token:08X}")
}

impl<'a> Metadata<'a> {
    /// MethodSpec row `rid`. Its Method column is a MethodDefOrRef coded index (II.24.2.6: one
    /// tag bit, 0 MethodDef, 1 MemberRef).
    pub fn method_spec(&self, rid: u32) -> Result<MethodSpecRow<'a>> {
        let row = self.tables.row(table::METHOD_SPEC, rid)?;
        let coded = row.get(0)?;
        let kind = if coded & 1 == 0 { table::METHOD_DEF } else { table::MEMBER_REF };
        let method = u32::from(kind) << 24 | (coded >> 1) & 0x00FF_FFFF;
        Ok(MethodSpecRow { method, instantiation: self.blobs.get(row.get(1)?)? })
    }

    /// `Owner::Name` for a MethodDef or MemberRef token; `Ok(None)` for another table or a row that
    /// is not there. A MemberRef's owner is its Class (II.22.25, MemberRefParent): a type is
    /// named as the notation names its token (a TypeSpec as its own signature, so a method of a generic
    /// instantiation reads `class N<A>::Name`), a ModuleRef as `[.module M]`, and a MethodDef
    /// (a vararg call site) by that method's own owner. An owner that names no row prints as its
    /// raw token, as the type printer does; a row that is there but cannot be named is an error
    /// (a TypeSpec's fault, or `bad_metadata` at the row: a name that cannot be read, a MethodDef
    /// that no TypeDef owns).
    pub fn member_name(&self, token: u32) -> Result<Option<String>> {
        let rid = token & 0x00FF_FFFF;
        match (token >> 24) as u8 {
            table::METHOD_DEF => {
                let Ok(row) = self.tables.row(table::METHOD_DEF, rid) else { return Ok(None) };
                self.method_name(token).map(Some).ok_or(Error::new(ErrorKind::BadMetadata, row.offset(), "a MethodDef with a name and a TypeDef that owns it"))
            }
            table::MEMBER_REF => {
                let Ok(row) = self.tables.row(table::MEMBER_REF, rid) else { return Ok(None) };
                let bad = || Error::new(ErrorKind::BadMetadata, row.offset(), "a MemberRef whose name and parent can be read");
                let name = row.get(1).and_then(|i| self.strings.get(i)).map_err(|_| bad())?;
                let class = row.get(0)?;
                // MemberRefParent: 3 tag bits; TypeDef, TypeRef, ModuleRef, MethodDef, TypeSpec.
                let (tag, parent) = (class & 7, class >> 3);
                let owner = match tag {
                    0 | 1 | 4 => {
                        let kind = [table::TYPE_DEF, table::TYPE_REF, 0, 0, table::TYPE_SPEC].get(tag as usize).copied().unwrap_or(0);
                        let parent = u32::from(kind) << 24 | parent;
                        let mut owner = String::new();
                        match self.write_type_name(parent, &mut owner) {
                            Ok(()) => owner,
                            Err(_) => match self.name_fault(parent) {
                                Some(e) => return Err(e),
                                None => raw(parent),
                            },
                        }
                    }
                    2 => {
                        let module = u32::from(table::MODULE_REF) << 24 | parent;
                        match self.tables.row(table::MODULE_REF, parent) {
                            Ok(m) => format!("[.module {}]", m.get(0).and_then(|i| self.strings.get(i)).map_err(|_| bad())?),
                            Err(_) => raw(module),
                        }
                    }
                    3 => {
                        let def = u32::from(table::METHOD_DEF) << 24 | parent;
                        let method = self.member_name(def)?.unwrap_or_else(|| raw(def));
                        // The call site names the same method as its MethodDef: keep the owner.
                        match method.rsplit_once("::") {
                            Some((owner, _)) => owner.to_owned(),
                            None => method,
                        }
                    }
                    _ => raw(class),
                };
                Ok(Some(format!("{owner}::{name}")))
            }
            _ => Ok(None),
        }
    }

    /// A MethodDef's parameter types in the contract's notation, as `(int32,!0)`: what tells
    /// overloads apart. `None` for another token or a signature that does not decode.
    pub fn method_params(&self, token: u32) -> Option<String> {
        if token >> 24 != u32::from(table::METHOD_DEF) {
            return None;
        }
        self.member_params(token).ok().flatten()
    }

    /// A MethodDef's or a method MemberRef's parameter types, as `(int32,!0)`. `Ok(None)` for
    /// another token or a row that is not there; an error for a signature that does not decode,
    /// is not a method's (a field MemberRef's), or names a row that cannot be named.
    pub fn member_params(&self, token: u32) -> Result<Option<String>> {
        let rid = token & 0x00FF_FFFF;
        // The Signature column: MethodDef's 5th (II.22.26), MemberRef's 3rd (II.22.25).
        let (id, column) = match (token >> 24) as u8 {
            table::METHOD_DEF => (table::METHOD_DEF, 4),
            table::MEMBER_REF => (table::MEMBER_REF, 2),
            _ => return Ok(None),
        };
        let Ok(row) = self.tables.row(id, rid) else { return Ok(None) };
        let sig = row.get(column).and_then(|i| self.blobs.get(i))?;
        signature_text(sig, self, false).map(|(_, params)| Some(params))
    }

    /// A body's full name: `display` (the method's name as the caller shows it, with its owner's
    /// and its own arguments where known) followed by its parameter types, `Ns.Type::M(int32)`.
    ///
    /// Conversion operators (`op_Implicit`, `op_Explicit`, and C#'s `op_CheckedExplicit`) are
    /// the methods that the CLS lets overload on their return type alone (ECMA-335 Partition I,
    /// "Conversion operators"), so theirs leads, as in an ILAsm member reference:
    /// `uint8 System.Half::op_Explicit(valuetype System.Half)`.
    pub fn method_full_name(&self, token: u32, display: &str) -> Option<String> {
        if token >> 24 != u32::from(table::METHOD_DEF) {
            return None;
        }
        let simple = display.rsplit_once("::").map_or(display, |(_, m)| m);
        let simple = simple.split_once('<').map_or(simple, |(m, _)| m);
        let conversion = matches!(simple, "op_Implicit" | "op_Explicit" | "op_CheckedExplicit");
        let row = self.tables.row(table::METHOD_DEF, token & 0x00FF_FFFF).ok()?;
        let sig = row.get(4).and_then(|i| self.blobs.get(i)).ok()?;
        let (ret, params) = signature_text(sig, self, conversion).ok()?;
        Some(match ret {
            Some(ret) => format!("{ret} {display}{params}"),
            None => format!("{display}{params}"),
        })
    }
}

/// The parameter list of a MethodDefSig or MethodRefSig (II.23.2.1-2: calling convention,
/// `[GenParamCount]`, ParamCount, RetType, Param*) as `(P1,P2)`, and the return type too when
/// `with_return`; the error when it does not decode (a FIELD, LOCAL_SIG, PROPERTY or GENERICINST
/// blob is `bad_calling_convention`; a list past 64 KB of text `too_deep`). A varargs SENTINEL
/// ends the list with `...`: the types after it belong to one call site, not to the method.
fn signature_text(sig: Reader<'_>, names: &dyn TypeNames, with_return: bool) -> Result<(Option<String>, String)> {
    let mut sig = sig;
    let at = sig.offset();
    let cc = sig.u8("a calling convention")?;
    // A FIELD (6), LOCAL_SIG (7), PROPERTY (8) or GENERICINST (0xA) blob is not a method's.
    if !matches!(cc & 0x0F, 0..=5 | 9) {
        return Err(Error::new(ErrorKind::BadCallingConvention, at, "a method's calling convention"));
    }
    if cc & 0x10 != 0 {
        sig.compressed_u32("a generic parameter count")?;
    }
    let count = sig.compressed_u32("a parameter count")?;
    // RetType (II.23.2.11), the one place VOID is legal: the signature module's rule.
    let ret = if with_return {
        let mut printer = SpanRenderer::new(names);
        let span = decode_return_type(&mut sig, &mut printer)?;
        if let Some(e) = printer.fault() {
            return Err(e);
        }
        Some(printer.text(span).to_owned())
    } else {
        // Validated, and its names checked, without keeping the text.
        let mut printer = SpanRenderer::new(names);
        decode_return_type(&mut sig, &mut printer)?;
        if let Some(e) = printer.fault() {
            return Err(e);
        }
        None
    };
    let mut out = String::from("(");
    for i in 0..count {
        if i > 0 {
            out.push(',');
        }
        if sig.peek_u8("a parameter")? == 0x41 {
            out.push_str("...");
            break;
        }
        let param_at = sig.offset();
        if stream_one(&mut sig, names, &mut out)?.is_err() {
            return Err(Error::new(ErrorKind::TooDeep, param_at, "a parameter whose name can be written"));
        }
        // Names are bounded one by one; this bounds their sum.
        if out.len() > MAX_PARAMS_TEXT {
            return Err(Error::new(ErrorKind::TooDeep, param_at, "parameter types within 64 KB of text"));
        }
    }
    out.push(')');
    Ok((ret, out))
}

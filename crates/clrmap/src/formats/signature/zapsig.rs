//! The runtime's *zapsig* type signatures: the flavour of II.23.2.12 that ReadyToRun images write
//! in their method signatures (section 109's instantiations, fixups), with codes ECMA-335 does not
//! have. dotnet/runtime `src/coreclr/inc/corhdr.h` `CorElementTypeZapSig`;
//! docs/format-notes.md#readytorun-images.
//!
//! | code | name | operands |
//! |---|---|---|
//! | 0x3B | VAR_ZAPSIG | a GenericParam RID (compressed) |
//! | 0x3C | NATIVE_ARRAY_TEMPLATE_ZAPSIG | an SZARRAY or ARRAY type |
//! | 0x3D | NATIVE_VALUETYPE_ZAPSIG | a value type (its native layout) |
//! | 0x3E | CANON_ZAPSIG | none: `System.__Canon`, the stand-in for any reference type in shared code |
//! | 0x3F | MODULE_ZAPSIG | a module index (compressed), then a type whose token is that module's |
//!
//! MODULE_ZAPSIG may also stand between GENERICINST and its `CLASS | VALUETYPE`. As in
//! ILCompiler.Reflection.ReadyToRun (`R2RSignatureDecoder.ParseType`), a module override covers
//! the generic type's token but not its arguments, which are read in the signature's own module.
//!
//! This grammar is its own ([`Zapsig`]); it shares the ECMA productions, the depth limit and the
//! VOID rule with the strict decoder, which never accepts these codes (docs/output.md#strictness).

use super::decode::{bad_element_type, class_or_value_type, deeper, Decoder, Grammar};
use super::position::Position;
use super::provider::TypeProvider;
use crate::base::read::{Reader, Result};

const VAR_ZAPSIG: u8 = 0x3B;
const NATIVE_ARRAY_TEMPLATE_ZAPSIG: u8 = 0x3C;
const NATIVE_VALUETYPE_ZAPSIG: u8 = 0x3D;
const CANON_ZAPSIG: u8 = 0x3E;
const MODULE_ZAPSIG: u8 = 0x3F;

/// What a zapsig type can be beyond an ECMA one.
pub trait ZapsigProvider: TypeProvider {
    /// CANON_ZAPSIG: `System.__Canon`.
    fn canon(&mut self) -> Self::Type;
    /// VAR_ZAPSIG: a generic parameter, named by its GenericParam row.
    fn generic_param(&mut self, rid: u32) -> Self::Type;
    /// MODULE_ZAPSIG: the tokens named from here on belong to module `index` of the image's
    /// reference table; `None`: to the signature's own module again.
    #[inline]
    fn module(&mut self, _index: Option<u32>) {}
}

/// Skipping and validating only.
impl ZapsigProvider for () {
    fn canon(&mut self) {}
    fn generic_param(&mut self, _: u32) {}
}

/// The zapsig grammar: ECMA-335's codes and the five above.
pub(super) struct Zapsig;

impl<P: ZapsigProvider> Grammar<P> for Zapsig {
    fn extra(d: &mut Decoder<'_, P, Self>, r: &mut Reader<'_>, code: u8, at: u64, depth: u32, pos: Position) -> Result<P::Type> {
        match code {
            VAR_ZAPSIG => {
                let rid = r.compressed_u32("a GenericParam RID")?;
                Ok(d.provider.generic_param(rid))
            }
            // Layout markers on the type that follows: the type itself is what a name shows.
            NATIVE_ARRAY_TEMPLATE_ZAPSIG | NATIVE_VALUETYPE_ZAPSIG => d.ty(r, deeper(depth), Position::Plain),
            CANON_ZAPSIG => Ok(d.provider.canon()),
            MODULE_ZAPSIG => {
                let index = r.compressed_u32("a module index")?;
                d.provider.module(Some(index));
                let inner = d.ty(r, deeper(depth), pos);
                d.provider.module(None);
                inner
            }
            _ => Err(bad_element_type(at)),
        }
    }

    fn generic_type(d: &mut Decoder<'_, P, Self>, r: &mut Reader<'_>) -> Result<(bool, u32)> {
        if r.peek_u8("CLASS or VALUETYPE")? == MODULE_ZAPSIG {
            r.u8("MODULE_ZAPSIG")?;
            let index = r.compressed_u32("a module index")?;
            d.provider.module(Some(index));
        }
        class_or_value_type(r)
    }

    fn generic_type_named(d: &mut Decoder<'_, P, Self>) {
        // The arguments are read in the signature's own module.
        d.provider.module(None);
    }
}

/// Decode one zapsig type (depth 1) from `r` through `provider`.
pub fn decode_zapsig_type<P: ZapsigProvider>(r: &mut Reader<'_>, provider: &mut P) -> Result<P::Type> {
    Decoder::<P, Zapsig>::new(provider).ty(r, 1, Position::Plain)
}

/// Skip one zapsig type: validate it and move past it, allocating nothing.
pub fn skip_zapsig_type(r: &mut Reader<'_>) -> Result<()> {
    decode_zapsig_type(r, &mut ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::read::ErrorKind;
    use crate::formats::signature::{skip_type, HexTokens, SpanRenderer};

    fn render(bytes: &[u8]) -> String {
        let mut p = SpanRenderer::new(&HexTokens);
        let mut r = Reader::new(bytes, 0);
        let span = decode_zapsig_type(&mut r, &mut p).unwrap();
        assert!(r.is_empty(), "{bytes:02X?}");
        p.text(span).to_owned()
    }

    #[test]
    fn zapsig_codes_render_and_the_strict_decoder_rejects_them() {
        let cases: &[(&[u8], &str)] = &[
            // GENERICINST CLASS TypeDef#1 <CANON>: List`1<__Canon>.
            (&[0x15, 0x12, 0x04, 0x01, 0x3E], "class 0x02000001<class System.__Canon>"),
            // MODULE_ZAPSIG 2 VALUETYPE TypeRef#3: a token of module 2.
            (&[0x3F, 0x02, 0x11, 0x0D], "valuetype [#2]0x01000003"),
            // GENERICINST MODULE_ZAPSIG 1 CLASS TypeDef#5 <CLASS TypeDef#6>: the argument is the
            // signature's own.
            (&[0x15, 0x3F, 0x01, 0x12, 0x14, 0x01, 0x12, 0x18], "class [#1]0x02000005<class 0x02000006>"),
            // NATIVE_VALUETYPE_ZAPSIG VALUETYPE TypeDef#2: the type itself.
            (&[0x3D, 0x11, 0x08], "valuetype 0x02000002"),
            // SZARRAY VAR_ZAPSIG 7: the GenericParam row's token.
            (&[0x1D, 0x3B, 0x07], "0x2A000007[]"),
        ];
        for &(b, want) in cases {
            assert_eq!(render(b), want, "{b:02X?}");
            let e = skip_type(&mut Reader::new(b, 0)).unwrap_err();
            assert_eq!(e.kind, ErrorKind::BadElementType, "{b:02X?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20_000))]
        /// The zapsig grammar extends the strict one: whatever the strict decoder accepts, it
        /// accepts too, stopping at the same byte and printing the same text.
        #[test]
        fn strict_types_read_the_same_as_zapsig(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24)) {
            let mut strict = Reader::new(&bytes, 0);
            let mut p = SpanRenderer::new(&HexTokens);
            if let Ok(span) = crate::formats::signature::decode_type(&mut strict, &mut p) {
                let want = p.text(span).to_owned();
                let mut zap = Reader::new(&bytes, 0);
                let mut q = SpanRenderer::new(&HexTokens);
                let got = decode_zapsig_type(&mut zap, &mut q).map(|s| q.text(s).to_owned());
                proptest::prop_assert_eq!(got.ok(), Some(want));
                proptest::prop_assert_eq!(zap.len(), strict.len());
            }
        }
    }

    #[test]
    fn ecma_rules_still_hold() {
        // VOID outside a return, and an unknown code, are faults here too.
        for b in [&[0x01u8][..], &[0x1D, 0x01], &[0x40], &[0x15, 0x3F, 0x01, 0x08]] {
            assert_eq!(skip_zapsig_type(&mut Reader::new(b, 0)).unwrap_err().kind, ErrorKind::BadElementType, "{b:02X?}");
        }
        assert!(skip_zapsig_type(&mut Reader::new(&[0x0F, 0x3F, 0x01, 0x01], 0)).is_ok(), "PTR MODULE_ZAPSIG VOID keeps the position");
    }
}

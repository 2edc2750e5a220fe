//! Spec tables and hand-checked renderings for the signature codec.

use super::*;
use crate::base::read::{ErrorKind, Reader};

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
}

fn render_hex(s: &str) -> String {
    let text = render(&hex(s), &HexTokens).unwrap();
    assert_eq!(stream_hex_bytes(&hex(s)), text, "stream renderer on {s}");
    text
}

/// The streaming renderer's text for one whole type.
fn stream_hex_bytes(bytes: &[u8]) -> String {
    let mut r = Reader::new(bytes, 0);
    let mut out = String::new();
    stream_one(&mut r, &HexTokens, &mut out).unwrap().unwrap();
    assert!(r.is_empty());
    out
}

/// A resolver that names some tokens, fails cleanly on others, and fails half-way on one.
struct Picky;

impl TypeNames for Picky {
    fn write_type_name(&self, token: u32, out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        match token {
            0x0200_0001 => out.write_str("A.B"),
            0x0200_0002 => {
                out.write_str("partial")?;
                Err(core::fmt::Error)
            }
            _ => Err(core::fmt::Error),
        }
    }
}

#[test]
fn stream_renderer_falls_back_like_the_span_renderer() {
    // class TypeDef#1, class TypeDef#3 (unnamed: raw token).
    for (h, want) in [("12 04", "class A.B"), ("12 0C", "class 0x02000003"), ("1F 0C 08", "int32 modreq(0x02000003)")] {
        let b = hex(h);
        assert_eq!(render(&b, &Picky).unwrap(), want);
        let mut out = String::new();
        stream_one(&mut Reader::new(&b, 0), &Picky, &mut out).unwrap().unwrap();
        assert_eq!(out, want);
    }
    // A name that fails after writing cannot be taken back: the stream fails.
    let mut out = String::new();
    assert!(stream_one(&mut Reader::new(&hex("12 08"), 0), &Picky, &mut out).unwrap().is_err());
}

fn err_hex(s: &str) -> (ErrorKind, u64) {
    let e = render(&hex(s), &HexTokens).unwrap_err();
    (e.kind, e.offset().unwrap())
}

/// Every production, rendered as docs/output.md#type-signatures says, checked by hand against the bytes.
#[test]
fn renderings() {
    let cases = [
        // Primitives.
        ("02", "bool"),
        ("03", "char"),
        ("04", "int8"),
        ("05", "uint8"),
        ("06", "int16"),
        ("07", "uint16"),
        ("08", "int32"),
        ("09", "uint32"),
        ("0A", "int64"),
        ("0B", "uint64"),
        ("0C", "float32"),
        ("0D", "float64"),
        ("0E", "string"),
        ("16", "typedref"),
        ("18", "native int"),
        ("19", "native uint"),
        ("1C", "object"),
        // CLASS TypeRef#0x12 = coded (0x12<<2)|1 = 0x49; VALUETYPE TypeDef#2 = 0x08.
        ("12 49", "class 0x01000012"),
        ("11 08", "valuetype 0x02000002"),
        // GENERICINST CLASS TypeRef#5 <int32> (docs/format-notes.md#generic-dictionary-map).
        ("15 12 15 01 08", "class 0x01000005<int32>"),
        ("15 11 15 02 08 0E", "valuetype 0x01000005<int32,string>"),
        ("15 12 15 01 15 12 15 01 08", "class 0x01000005<class 0x01000005<int32>>"),
        ("1D 08", "int32[]"),
        ("1D 1D 0E", "string[][]"),
        // ARRAY int32 rank 2, 1 size (3), 1 lower bound (0): docs/format-notes.md#generic-dictionary-map.
        ("14 08 02 01 03 01 00", "int32[0...2,...]"),
        // Size only: 0...H. Lower bound only (-3 = 7B): L.... Neither: `...`.
        ("14 08 01 01 03 00", "int32[0...2]"),
        ("14 08 01 00 01 7B", "int32[-3...]"),
        ("14 08 01 00 00", "int32[...]"),
        ("14 08 03 02 02 05 01 7E", "int32[63...64,0...4,...]"),
        // Size 0 with lower bound 5: H = L + S - 1 = 4.
        ("14 08 01 01 00 01 0A", "int32[5...4]"),
        ("0F 08", "int32*"),
        ("0F 01", "void*"),
        ("0F 0F 01", "void**"),
        ("10 08", "int32&"),
        ("10 16", "typedref&"),
        ("13 00", "!0"),
        ("13 81 00", "!256"),
        ("1E 03", "!!3"),
        // Modifiers are suffixes, rendered recursively (docs/output.md#type-signatures).
        ("1F 49 08", "int32 modreq(0x01000012)"),
        ("20 49 1F 08 08", "int32 modreq(0x02000002) modopt(0x01000012)"),
        // A modifier may name a TypeSpec (tag 2).
        ("20 06 08", "int32 modopt(0x1B000001)"),
        ("0F 20 49 01", "void modopt(0x01000012)*"),
        ("1D 20 49 08", "int32 modopt(0x01000012)[]"),
        // FNPTR: default, instance, explicit, each calling convention, sentinel.
        ("1B 00 00 01", "method void *()"),
        ("1B 00 02 08 0E 1C", "method int32 *(string,object)"),
        ("1B 20 00 01", "method instance void *()"),
        ("1B 60 00 01", "method instance explicit void *()"),
        ("1B 01 01 08 08", "method unmanaged cdecl int32 *(int32)"),
        ("1B 02 00 01", "method unmanaged stdcall void *()"),
        ("1B 03 00 01", "method unmanaged thiscall void *()"),
        ("1B 04 00 01", "method unmanaged fastcall void *()"),
        ("1B 09 00 01", "method unmanaged void *()"),
        ("1B 05 02 01 08 41 0E", "method vararg void *(int32,...,string)"),
        ("1B 05 01 01 41 0E", "method vararg void *(...,string)"),
        ("1B 10 02 01 01 1E 00", "method void *(!!0)"),
        ("1B 00 01 10 08 10 08", "method int32& *(int32&)"),
        ("1B 00 01 16 16", "method typedref *(typedref)"),
        ("1B 00 00 20 49 01", "method void modopt(0x01000012) *()"),
        ("1B 00 00 0F 08", "method int32* *()"),
    ];
    for (bytes, want) in cases {
        assert_eq!(render_hex(bytes), want, "bytes {bytes}");
        // The parser reads the printer's text back to the same tree, and the encoder writes the
        // same bytes (every case above is canonical and has explicit bounds where it prints them,
        // except size-only dimensions, which the parser gives an explicit lower bound 0).
        let tree = decode_type(&mut Reader::new(&hex(bytes), 0), &mut TreeProvider).unwrap();
        assert_eq!(write_type(&tree, &HexTokens), want);
        let mut enc = Vec::new();
        encode_type(&tree, &mut enc).unwrap();
        assert_eq!(enc, hex(bytes), "encode {want}");
        let parsed = parse_type(want).unwrap();
        assert_eq!(write_type(&parsed, &HexTokens), want, "parse {want}");
    }
}

/// Every error kind of docs/output.md#strictness, with its offset.
#[test]
fn errors() {
    use ErrorKind::*;
    let cases = [
        // Runtime-internal, obsolete and END codes, at the offending byte.
        ("00", BadElementType, 0),
        ("17", BadElementType, 0),
        ("1A", BadElementType, 0),
        ("21 00", BadElementType, 0),
        ("22 00", BadElementType, 0),
        ("3B 00", BadElementType, 0),
        ("3E", BadElementType, 0),
        ("3F 00 08", BadElementType, 0),
        ("1D 40", BadElementType, 1),
        ("80", BadElementType, 0),
        ("FF", BadElementType, 0),
        ("50", BadElementType, 0),
        // SENTINEL outside an FNPTR parameter list; PINNED anywhere in a type.
        ("41 08", BadElementType, 0),
        ("1D 45 08", BadElementType, 1),
        ("45 08", BadElementType, 0),
        // VOID other than as an FNPTR return or under PTR.
        ("01", BadElementType, 0),
        ("1D 01", BadElementType, 1),
        ("10 01", BadElementType, 1),
        ("15 12 15 01 01", BadElementType, 4),
        ("1B 00 01 01 01", BadElementType, 4),
        // Two sentinels.
        ("1B 05 02 01 41 08 41 08", BadElementType, 6),
        // GENERICINST must be followed by CLASS or VALUETYPE.
        ("15 08 15 01 08", BadElementType, 1),
        // Tokens: tag 3, row 0, TypeSpec after CLASS/VALUETYPE/GENERICINST.
        ("12 03", BadToken, 1),
        ("12 01", BadToken, 1),
        ("12 00", BadToken, 1),
        ("12 06", BadToken, 1),
        ("11 06", BadToken, 1),
        ("15 12 06 01 08", BadToken, 2),
        ("1F 03 08", BadToken, 1),
        // A row past 24 bits (fuzzer regression fuzz/regressions/signature/row-past-24-bits).
        ("20 CE 8E 8E B9 08", BadToken, 1),
        ("08 08", ItemLengthMismatch, 1),
        // Compressed integers: lead byte 0xE0-0xFF.
        ("13 E0 00 00 00", BadCompressedInteger, 1),
        ("12 FF", BadCompressedInteger, 1),
        // Zero generic arguments.
        ("15 12 15 00", EmptyInstantiation, 3),
        // Array shapes: rank 0, NumSizes > rank, NumLoBounds > rank.
        ("14 08 00 00 00", BadArrayShape, 2),
        ("14 08 01 02 01 01 00", BadArrayShape, 3),
        ("14 08 01 00 02 00 00", BadArrayShape, 4),
        ("14 08 41 00 00", BadArrayShape, 2),
        // Calling conventions: 6, 7, 8, 0xA, 0xB, >= 0xC, reserved 0x80.
        ("1B 06 00 01", BadCallingConvention, 1),
        ("1B 07 00 01", BadCallingConvention, 1),
        ("1B 08 00 01", BadCallingConvention, 1),
        ("1B 0A 00 01", BadCallingConvention, 1),
        ("1B 0B 00 01", BadCallingConvention, 1),
        ("1B 0C 00 01", BadCallingConvention, 1),
        ("1B 0F 00 01", BadCallingConvention, 1),
        ("1B 80 00 01", BadCallingConvention, 1),
        // Truncation: the cursor's generic kind, at the field that runs out.
        ("", Truncated, 0),
        ("12", Truncated, 1),
        ("15 12 15 02 08", Truncated, 5),
        ("13 80", Truncated, 1),
    ];
    for (bytes, kind, offset) in cases {
        assert_eq!(err_hex(bytes), (kind, offset), "bytes {bytes}");
    }
}

#[test]
fn depth_limit() {
    // 99 SZARRAYs + int32: the int32 stands at depth 100, the deepest allowed.
    let mut ok = vec![0x1D; 99];
    ok.push(0x08);
    assert!(render(&ok, &HexTokens).is_ok());
    // One more: the int32 is the first type past the limit, at offset 100.
    let mut deep = vec![0x1D; 100];
    deep.push(0x08);
    let e = render(&deep, &HexTokens).unwrap_err();
    assert_eq!((e.kind, e.offset().unwrap()), (ErrorKind::TooDeep, 100));
    // Any depth up to 64 works through every nesting production.
    let mut mixed = Vec::new();
    for i in 0..63 {
        mixed.extend_from_slice(match i % 4 {
            0 => &[0x0F][..],
            1 => &[0x15, 0x12, 0x15, 0x01],
            2 => &[0x20, 0x49],
            _ => &[0x1B, 0x00, 0x00],
        });
    }
    mixed.push(0x08);
    assert!(render(&mixed, &HexTokens).is_ok());
}

#[test]
fn deep_ptr_chain_is_too_deep_not_a_stack_overflow() {
    let mut chain = vec![0x0F; 10_000];
    chain.push(0x01);
    let e = render(&chain, &HexTokens).unwrap_err();
    assert_eq!((e.kind, e.offset().unwrap()), (ErrorKind::TooDeep, 100));
    let text = format!("void{}", "*".repeat(10_000));
    assert_eq!(parse_type(&text).unwrap_err().kind, ErrorKind::TooDeep);
}

#[test]
fn local_types_allow_pinned() {
    let mut r = Reader::new(&[0x45, 0x10, 0x08], 0);
    let mut printer = SpanRenderer::new(&HexTokens);
    let t = decode_local_type(&mut r, &mut printer).unwrap();
    assert_eq!(printer.text(t), "int32& pinned");
}

#[test]
fn parser_rejects_garbage_and_accepts_spaces_after_commas() {
    assert_eq!(parse_type("int33").unwrap_err().kind, ErrorKind::BadNotation);
    assert_eq!(parse_type("class 0x123456789").unwrap_err().kind, ErrorKind::BadNotation);
    assert_eq!(parse_type("int32[...,0...2]").unwrap_err().kind, ErrorKind::BadArrayShape);
    let t = parse_type("class 0x01000005<int32, string>").unwrap();
    assert_eq!(t.to_string(), "class 0x01000005<int32,string>");
    let list = parse_type_list("string, class 0x01000005<int32,int8>, int32[0...2,...]").unwrap();
    assert_eq!(list.len(), 3);
}

pub(crate) mod roundtrip {
    use super::super::*;
    use crate::base::read::Reader;
    use proptest::prelude::*;

    fn token() -> impl Strategy<Value = u32> {
        (prop_oneof![Just(0x0100_0000u32), Just(0x0200_0000u32)], 1u32..0x00FF_FFFF).prop_map(|(t, r)| t | r)
    }

    fn any_token() -> impl Strategy<Value = u32> {
        (prop_oneof![Just(0x0100_0000u32), Just(0x0200_0000u32), Just(0x1B00_0000u32)], 1u32..0x00FF_FFFF).prop_map(|(t, r)| t | r)
    }

    fn leaf() -> impl Strategy<Value = Type> {
        prop_oneof![
            (2u8..=0x1C).prop_filter_map("primitive", |c| Primitive::from_code(c).map(Type::primitive)),
            (any::<bool>(), token()).prop_map(|(value_type, token)| Type::Named { value_type, token }),
            (0u32..0x1FFF_FFFF).prop_map(|index| Type::Var { index }),
            (0u32..0x1FFF_FFFF).prop_map(|index| Type::MVar { index }),
        ]
    }

    pub(crate) fn ty() -> impl Strategy<Value = Type> {
        leaf().prop_recursive(6, 48, 4, |inner| {
            prop_oneof![
                inner.clone().prop_map(|t| Type::SzArray { element: Box::new(t) }),
                inner.clone().prop_map(|t| Type::Ptr { element: Box::new(t) }),
                Just(Type::Ptr { element: Box::new(Type::primitive(Primitive::Void)) }),
                inner.clone().prop_map(|t| Type::ByRef { element: Box::new(t) }),
                (any::<bool>(), any_token(), inner.clone()).prop_map(|(required, modifier, t)| Type::Modified { required, modifier, element: Box::new(t) }),
                (any::<bool>(), token(), prop::collection::vec(inner.clone(), 1..4)).prop_map(|(value_type, token, args)| Type::GenericInst { value_type, token, args }),
                (inner.clone(), 1u32..6, prop::collection::vec(0u32..0x1FFF_FFFF, 0..3), prop::collection::vec(-0x1000_0000i32..0x0FFF_FFFF, 0..3)).prop_map(
                    |(t, rank, mut sizes, mut lower_bounds)| {
                        sizes.truncate(rank as usize);
                        lower_bounds.truncate(rank as usize);
                        Type::Array { element: Box::new(t), shape: ArrayShape { rank, sizes, lower_bounds } }
                    }
                ),
                (prop::sample::select(vec![0u8, 1, 2, 3, 4, 5, 9, 0x20, 0x60, 0x25, 0x10]), 0u32..4, inner.clone(), prop::collection::vec(inner, 0..4), 0usize..5).prop_map(
                    |(cc, gpc, ret, params, s)| {
                        let sentinel = if cc & 0x0F == 5 && s < params.len() { Some(s) } else { None };
                        let generic_parameter_count = if cc & 0x10 != 0 { gpc } else { 0 };
                        Type::FnPtr { signature: Box::new(MethodSignature { calling_convention: CallingConvention(cc), generic_parameter_count, return_type: ret, parameters: params, sentinel }) }
                    }
                ),
            ]
        })
    }

    proptest! {
        #[test]
        fn encode_decode_encode(t in ty()) {
            let mut bytes = Vec::new();
            encode_type(&t, &mut bytes).unwrap();
            let mut r = Reader::new(&bytes, 0);
            let back = decode_type(&mut r, &mut TreeProvider).unwrap();
            prop_assert!(r.is_empty());
            prop_assert_eq!(&back, &t);
            let mut again = Vec::new();
            encode_type(&back, &mut again).unwrap();
            prop_assert_eq!(again, bytes);
        }

        #[test]
        fn print_parse(t in ty()) {
            // Printing then parsing gives the same text (the tree may differ only where the
            // notation cannot tell a size-only dimension from one with lower bound 0).
            let text = write_type(&t, &HexTokens);
            let parsed = parse_type(&text).unwrap();
            prop_assert_eq!(write_type(&parsed, &HexTokens), text);
        }

        #[test]
        fn span_renderer_equals_tree_renderer(t in ty()) {
            let mut bytes = Vec::new();
            encode_type(&t, &mut bytes).unwrap();
            prop_assert_eq!(render(&bytes, &HexTokens).unwrap(), write_type(&t, &HexTokens));
        }

        #[test]
        fn stream_renderer_equals_tree_renderer(t in ty()) {
            let mut bytes = Vec::new();
            encode_type(&t, &mut bytes).unwrap();
            prop_assert_eq!(super::stream_hex_bytes(&bytes), write_type(&t, &HexTokens));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = render(&bytes, &HexTokens);
        }
    }
}

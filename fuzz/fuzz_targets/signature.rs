//! The signature decoders: never panic; whatever decodes re-encodes canonically and decodes back
//! to the same tree, and its printed text parses back to the same text. The zapsig decoder reads
//! whatever the strict one accepts to the same text.
#![no_main]

use clrmap::read::Reader;
use clrmap::signature::{decode_type, decode_zapsig_type, encode_type, parse_type, write_type, HexTokens, SpanRenderer, TreeProvider};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data, 0);
    if let Ok(tree) = decode_type(&mut r, &mut TreeProvider) {
        let mut bytes = Vec::new();
        encode_type(&tree, &mut bytes).expect("a decoded type encodes");
        let back = decode_type(&mut Reader::new(&bytes, 0), &mut TreeProvider).expect("canonical bytes decode");
        assert_eq!(back, tree);
        let text = write_type(&tree, &HexTokens);
        let parsed = parse_type(&text).expect("printed text parses");
        assert_eq!(write_type(&parsed, &HexTokens), text);
        let mut zap = SpanRenderer::new(&HexTokens);
        let span = decode_zapsig_type(&mut Reader::new(data, 0), &mut zap).expect("a strict type is a zapsig type");
        assert_eq!(zap.text(span), text);
    } else {
        let _ = decode_zapsig_type(&mut Reader::new(data, 0), &mut SpanRenderer::new(&HexTokens));
    }
});

//! The signature decoder: never panics; whatever decodes re-encodes canonically and decodes back
//! to the same tree, and its printed text parses back to the same text.
#![no_main]

use clrmap::read::Reader;
use clrmap::signature::{decode_type, encode_type, parse_type, write_type, HexTokens, TreeProvider};
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
    }
});

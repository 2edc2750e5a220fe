//! The dictionary map: parse, full validation (both paths, same answer), lint, and a lookup of
//! every entry never panic;
//! a valid map rewrites to a valid map with the same entries and types.
#![no_main]

use clrmap::gdmap::{DictionaryMap, DictionaryMapBuilder, Lookup, SortedFlag};
use clrmap::signature::{HexTokens, TreeProvider};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(map) = DictionaryMap::parse(data) else { return };
    // The fast proof never changes the answer: `validate` equals the in-order check, fault included.
    let result = map.validate();
    assert_eq!(result, map.validate_in_order());
    let valid = result.is_ok();
    let _ = map.lint();
    for flag in [SortedFlag::Trust, SortedFlag::Verify, SortedFlag::Ignore] {
        if let Ok(l) = Lookup::new(map, flag) {
            for e in map.entries() {
                if let Some(found) = l.find(e.rva) {
                    assert_eq!(found.rva, e.rva);
                    if let Ok(item) = map.item_of(&found) {
                        let _ = item.render(&HexTokens);
                    }
                }
            }
        }
    }
    if valid {
        let rebuilt = DictionaryMapBuilder::from_map(&map).expect("a valid map rewrites").build().expect("builds");
        let m2 = DictionaryMap::parse(&rebuilt).expect("rewritten map parses");
        m2.validate().expect("rewritten map is valid");
        assert_eq!(m2.len(), map.len());
        for (a, b) in map.entries().zip(m2.entries()) {
            assert_eq!(a.rva, b.rva);
            let ta = map.item_of(&a).unwrap().decode(&mut TreeProvider).unwrap();
            let tb = m2.item_of(&b).unwrap().decode(&mut TreeProvider).unwrap();
            assert_eq!(ta, tb);
        }
    }
});

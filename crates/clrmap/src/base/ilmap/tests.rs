//! The protocol's truncation, size query and E_INVALIDARG cases (docs/format-notes.md#the-profiling-api).

use super::*;

fn store() -> MapStore {
    let map = vec![
        MapEntry { il: IlOffset::Prolog, native_start: 0, native_end: 4 },
        MapEntry { il: IlOffset::Il(0), native_start: 4, native_end: 9 },
        MapEntry { il: IlOffset::Epilog, native_start: 9, native_end: 10 },
    ];
    let tier0 = CodeBody { token: 0x0600_0001, function_id: Some(77), start: Some(0x1000), code_size: 10, map: map.clone(), ..CodeBody::default() };
    let tier1 = CodeBody { token: 0x0600_0001, function_id: Some(77), start: Some(0x2000), code_size: 10, map: map[1..].to_vec(), ..CodeBody::default() };
    MapStore::new(vec![tier0, tier1])
}

#[test]
fn size_query_then_fill() {
    let s = store();
    let mut n = 0;
    assert_eq!(s.get_il_to_native_mapping(77, 0, Some(&mut n), None), S_OK);
    assert_eq!(n, 3);
    let mut buf = vec![CorDebugIlToNativeMap::default(); n as usize];
    let mut m = 0;
    assert_eq!(s.get_il_to_native_mapping(77, n, Some(&mut m), Some(&mut buf)), S_OK);
    assert_eq!(m, 3);
    assert_eq!(buf[0], CorDebugIlToNativeMap { il_offset: 0xFFFF_FFFE, native_start_offset: 0, native_end_offset: 4 });
    assert_eq!(buf[2].il_offset, 0xFFFF_FFFD);
}

#[test]
fn truncation_is_s_ok_with_the_full_count() {
    let s = store();
    let mut buf = vec![CorDebugIlToNativeMap { il_offset: 9, native_start_offset: 9, native_end_offset: 9 }; 3];
    let mut n = 0;
    assert_eq!(s.get_il_to_native_mapping(77, 1, Some(&mut n), Some(&mut buf)), S_OK);
    assert_eq!(n, 3, "the full count, not the copied count");
    assert_eq!(buf[0].il_offset, 0xFFFF_FFFE);
    assert_eq!(buf[1].il_offset, 9, "nothing past cMap is written");
}

#[test]
fn invalid_arguments() {
    let s = store();
    let mut n = 0;
    let mut buf = vec![CorDebugIlToNativeMap::default(); 3];
    assert_eq!(s.get_il_to_native_mapping(0, 0, Some(&mut n), None), E_INVALIDARG);
    assert_eq!(s.get_il_to_native_mapping(77, 3, None, Some(&mut buf)), E_INVALIDARG);
    assert_eq!(s.get_il_to_native_mapping(77, 3, Some(&mut n), None), E_INVALIDARG);
    assert_eq!(s.get_il_to_native_mapping(78, 0, Some(&mut n), None), E_INVALIDARG, "no code for that function");
    assert_eq!(s.get_il_to_native_mapping3(0, 0, Some(&mut n), None), E_INVALIDARG);
    assert_eq!(s.get_il_to_native_mapping3(0x1234, 0, Some(&mut n), None), E_INVALIDARG);
}

#[test]
fn map1_answers_with_the_first_body_and_map3_with_each() {
    let s = store();
    let mut n = 0;
    assert_eq!(s.get_il_to_native_mapping2(77, 5, 0, Some(&mut n), None), S_OK);
    assert_eq!(n, 3, "ReJITID ignored: the first body");
    assert_eq!(s.get_il_to_native_mapping3(0x2000, 0, Some(&mut n), None), S_OK);
    assert_eq!(n, 2);
    assert_eq!(s.body_containing(0x2009).unwrap().start, Some(0x2000));
    assert!(s.body_containing(0x200A).is_none());
    assert_eq!(s.function_ids(), [77]);
}

//! `clrmap sig decode`.

use crate::support::*;

#[test]
fn decodes_the_readme_example() {
    let o = clrmap(&["sig", "decode", "15", "12", "15", "01", "08"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "class 0x01000005<int32>\n");
    let o = clrmap(&["sig", "decode", "1512150108"]);
    assert_eq!(stdout(&o), "class 0x01000005<int32>\n");
}

#[test]
fn json_tree() {
    let o = clrmap(&["sig", "decode", "--json", "1D 08"]);
    assert_eq!(code(&o), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["text"], "int32[]");
    assert_eq!(v["type"]["kind"], "sz_array");
    assert_eq!(v["type"]["element"]["type"], "i4");
}

#[test]
fn bad_input_exits_1_with_kind_and_offset() {
    let o = clrmap(&["sig", "decode", "15", "12", "15", "00"]);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("empty_instantiation at offset 3"), "{}", stderr(&o));
    let o = clrmap(&["sig", "decode", "--json", "12", "03"]);
    assert_eq!(code(&o), Some(1));
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
    assert_eq!(v["error"]["kind"], "bad_token");
    assert_eq!(v["error"]["offset"], 1);
}

#[test]
fn bad_usage_exits_2() {
    assert_eq!(code(&clrmap(&["sig", "decode", "1"])), Some(2));
    assert_eq!(code(&clrmap(&["sig", "decode", "zz"])), Some(2));
    assert_eq!(code(&clrmap(&["sig", "decode"])), Some(2));
    assert_eq!(code(&clrmap(&["nonsense"])), Some(2));
    assert_eq!(code(&clrmap(&["sig", "decode", "--help"])), Some(0));
}

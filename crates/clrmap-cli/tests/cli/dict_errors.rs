//! `dict show` and `dict lookup` with `--metadata` naming a row that cannot be named:
//! stdout holds only whole lines. `dict show` prints every entry, the ones whose types cannot be
//! named as `!error <kind>` in place of their types (as `meta specs` prints a row), and exits 1
//! after the last one naming the first fault; `dict lookup` prints nothing and exits 1 (as `sig
//! decode --metadata` does). The assemblies are the patched Frames.dll fixtures of meta_errors.rs.

use clrmap::metadata::{table, Metadata};

use super::meta_errors::{bad_typespec, cyclic_typespec, frames, targets, temp};
use super::support::{clrmap, code, stderr, stdout};

/// A map built by `clrmap dict build --sort` from `manifest`.
fn build(name: &str, manifest: &str) -> String {
    let m = temp(&format!("{name}.manifest"), manifest.as_bytes());
    let map = temp(&format!("{name}.gdmap"), b"");
    let o = clrmap(&["dict", "build", &m, "-o", &map, "--sort"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    map
}

/// The offset of the byte that `bad_typespec` patched: the Box`1<string> TypeSpec's first byte.
fn patched_at() -> u64 {
    Metadata::parse(&frames()).unwrap().type_spec(targets().1).unwrap().offset()
}

/// Four entries: a sound item, an item whose second type has a modifier naming the bad TypeSpec
/// (shared by two entries), and `class Frames.Trace` (TypeDef 2, the first type of
/// tests/dotnet/frames/Frames.cs; csc emits TypeDefs in source order after `<Module>`).
/// Each call builds its own file: tests run in parallel, and one writing the map while another
/// reads it made `lookup` see an empty map now and then.
fn four_entries() -> String {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ts = 0x1B00_0000 | targets().1;
    build(&format!("four-{n}"), &format!("0x1000: int32, string\n0x2000: string, int32 modreq(0x{ts:08X})\n0x3000: string, int32 modreq(0x{ts:08X})\n0x4000: class 0x02000002\n"))
}

#[test]
fn the_map_is_the_one_built_by_hand() {
    // Header 4 | sorted; (RVA, offset) x 4; items `L T types`: int32 string; string CMOD_REQD
    // TypeSpec int32; CLASS TypeDef#2. Identical instantiations share one item.
    let coded = (targets().1 << 2 | 2) as u8;
    let mut want = vec![0x04, 0, 0, 0x80];
    for (rva, off) in [(0x1000u32, 0u32), (0x2000, 4), (0x3000, 4), (0x4000, 10)] {
        want.extend(rva.to_le_bytes());
        want.extend(off.to_le_bytes());
    }
    want.extend([0x03, 0x02, 0x08, 0x0E, 0x05, 0x02, 0x0E, 0x1F, coded, 0x08, 0x03, 0x01, 0x12, 0x08]);
    assert!(coded < 0x80);
    assert_eq!(std::fs::read(four_entries()).unwrap(), want);
}

#[test]
fn show_prints_error_in_place_of_the_types_and_exits_1_at_the_end() {
    let map = four_entries();
    let dll = temp("dict-bad-typespec.dll", &bad_typespec());
    let o = clrmap(&["dict", "show", &map, "--metadata", &dll]);
    assert_eq!(
        stdout(&o),
        "sorted: yes  entries: 4  heap: 14 bytes\n\
         0x00001000  +0       int32, string\n\
         0x00002000  +4       !error bad_element_type\n\
         0x00003000  +4       !error bad_element_type\n\
         0x00004000  +10      class Frames.Trace\n"
    );
    assert_eq!(code(&o), Some(1));
    let err = stderr(&o);
    let (first, note) = err.split_once('\n').unwrap();
    assert!(first.starts_with(&format!("error: bad_element_type at offset {}: ", patched_at())), "{err}");
    assert_eq!(
        note,
        format!("note: the offset is in {dll}; 2 of 4 entries name a type there that cannot be named (the first at RVA 0x00002000), and each shows `!error <kind>` in place of its types\n")
    );

    // JSON: the whole object, each bad entry with "error" in place of "types".
    let o = clrmap(&["dict", "show", &map, "--metadata", &dll, "--json"]);
    assert_eq!(
        stdout(&o),
        "{\"sorted\":true,\"count\":4,\"heap_size\":14,\"entries\":[\
         {\"rva\":4096,\"offset\":0,\"types\":[\"int32\",\"string\"]},\
         {\"rva\":8192,\"offset\":4,\"error\":\"bad_element_type\"},\
         {\"rva\":12288,\"offset\":4,\"error\":\"bad_element_type\"},\
         {\"rva\":16384,\"offset\":10,\"types\":[\"class Frames.Trace\"]}]}\n"
    );
    serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap();
    assert_eq!(code(&o), Some(1));
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
    assert_eq!(v["error"]["kind"], "bad_element_type");
    assert_eq!(v["error"]["offset"], patched_at());
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            &("; note: the offset is in ".to_owned()
                + &dll
                + "; 2 of 4 entries name a type there that cannot be named (the first at RVA 0x00002000), and each has \"error\":\"<kind>\" in place of \"types\"")
        ),
        "{message}"
    );

    // The same map against the sound assembly: every line named, exit 0.
    let sound = temp("dict-sound.dll", &frames());
    let o = clrmap(&["dict", "show", &map, "--metadata", &sound]);
    assert_eq!((code(&o), stderr(&o).as_str()), (Some(0), ""));
    assert!(stdout(&o).contains("\n0x00002000  +4       string, int32 modreq(class Frames.Box`1<string>)\n"), "{}", stdout(&o));
}

#[test]
fn lookup_prints_nothing_when_a_type_cannot_be_named() {
    let map = four_entries();
    let dll = temp("dict-bad-typespec-lookup.dll", &bad_typespec());
    // The first type (`string`) is sound: the old code printed its line, then failed.
    let o = clrmap(&["dict", "lookup", &map, "0x2000", "--metadata", &dll]);
    assert_eq!((code(&o), stdout(&o).as_str()), (Some(1), ""));
    let err = stderr(&o);
    assert!(err.starts_with(&format!("error: bad_element_type at offset {}: ", patched_at())), "{err}");
    assert!(err.ends_with(&format!("\nnote: the offset is in {dll}; the dictionary at RVA 0x00002000 names a type there that cannot be named\n")), "{err}");
    let o = clrmap(&["dict", "lookup", &map, "0x3000", "--metadata", &dll, "--json"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (Some(1), ""));
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
    assert_eq!((v["error"]["kind"].as_str(), v["error"]["offset"].as_u64()), (Some("bad_element_type"), Some(patched_at())));
    // The sound entries of the same map still answer.
    let o = clrmap(&["dict", "lookup", &map, "0x1000", "--metadata", &dll]);
    assert_eq!((code(&o), stdout(&o).as_str()), (Some(0), "int32\nstring\n"));
    let o = clrmap(&["dict", "lookup", &map, "0x4000", "--metadata", &dll, "--json"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (Some(0), "{\"rva\":16384,\"offset\":10,\"types\":[\"class Frames.Trace\"]}\n"));
}

#[test]
fn a_cyclic_typespec_is_too_deep_on_its_line() {
    let map = build("cyclic", "0x10: int32\n0x20: string, int32 modreq(0x1B000001)\n");
    let dll = temp("dict-cyclic.dll", &cyclic_typespec());
    let o = clrmap(&["dict", "show", &map, "--metadata", &dll]);
    assert_eq!(stdout(&o), "sorted: yes  entries: 2  heap: 9 bytes\n0x00000010  +0       int32\n0x00000020  +3       !error too_deep\n");
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).starts_with("error: too_deep at offset "), "{}", stderr(&o));
    assert!(stderr(&o).contains("; 1 of 2 entries name a type there that cannot be named (the first at RVA 0x00000020)"), "{}", stderr(&o));
    let o = clrmap(&["dict", "lookup", &map, "0x20", "--metadata", &dll]);
    assert_eq!((code(&o), stdout(&o).as_str()), (Some(1), ""));
    assert!(stderr(&o).starts_with("error: too_deep at offset "), "{}", stderr(&o));
}

/// TypeDef 2 (`Frames.Trace`) with its Name pointing past the #Strings heap.
fn unnamed_typedef() -> (Vec<u8>, u64) {
    let mut bytes = frames();
    let (row, name) = {
        let md = Metadata::parse(&bytes).unwrap();
        let tables = md.tables();
        let row = tables.row(table::TYPE_DEF, 2).unwrap();
        assert!(tables.table(table::TYPE_DEF).row_size() == 14, "2-byte heap indexes");
        (row.offset(), row.get(1).unwrap())
    };
    let at = row as usize + 4;
    assert_eq!(u32::from(u16::from_le_bytes([bytes[at], bytes[at + 1]])), name);
    bytes[at..at + 2].copy_from_slice(&0xFFFFu16.to_le_bytes());
    (bytes, row)
}

#[test]
fn a_typedef_whose_name_cannot_be_read_is_bad_metadata_on_its_line() {
    let (dll, row) = unnamed_typedef();
    let dll = temp("dict-unnamed-typedef.dll", &dll);
    let map = build("typedef", "0x10: int32, class 0x02000002\n0x20: string\n");
    let o = clrmap(&["dict", "show", &map, "--metadata", &dll, "--json"]);
    assert_eq!(stdout(&o), "{\"sorted\":true,\"count\":2,\"heap_size\":8,\"entries\":[{\"rva\":16,\"offset\":0,\"error\":\"bad_metadata\"},{\"rva\":32,\"offset\":5,\"types\":[\"string\"]}]}\n");
    assert_eq!(code(&o), Some(1));
    let v: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
    assert_eq!((v["error"]["kind"].as_str(), v["error"]["offset"].as_u64()), (Some("bad_metadata"), Some(row)));
}

#[test]
fn an_item_too_long_to_hold_is_checked_before_it_is_streamed() {
    // 140,000 `string`s print as 1,119,998 bytes, past the 1 MiB an item is rendered in memory.
    let ts = 0x1B00_0000 | targets().1;
    let many = vec!["string"; 140_000].join(", ");
    let map = build("long", &format!("0x10: {many}\n0x20: {many}, int32 modreq(0x{ts:08X})\n0x30: int32\n"));
    let dll = temp("dict-bad-typespec-long.dll", &bad_typespec());
    let o = clrmap(&["dict", "show", &map, "--metadata", &dll]);
    assert_eq!(code(&o), Some(1));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[1], format!("0x00000010  +0       {many}"));
    assert!(lines[2].starts_with("0x00000020  +") && lines[2].ends_with("  !error bad_element_type") && lines[2].len() < 60, "{}", &lines[2][..lines[2].len().min(200)]);
    assert!(lines[3].starts_with("0x00000030  +") && lines[3].ends_with("  int32"), "{}", lines[3]);
    let o = clrmap(&["dict", "lookup", &map, "0x20", "--metadata", &dll]);
    assert_eq!((code(&o), stdout(&o).len()), (Some(1), 0));
}

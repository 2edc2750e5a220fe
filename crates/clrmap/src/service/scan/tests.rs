//! The cursor against serde's model: wherever the cursor answers, serde answers the same request.

use super::*;
use crate::service::request::with_frame_budget;

fn serde(body: &str, max: usize) -> Result<Request, String> {
    with_frame_budget(max, || serde_json::from_str::<Request>(body)).map_err(|e| e.to_string())
}

/// The cursor's answer, checked against serde's wherever it gives one.
fn both(body: &str, max: usize) -> Option<Request> {
    let read_it = fuzzcheck::check(body.as_bytes(), max);
    let fast = read(body, max);
    assert_eq!(read_it, fast.is_some());
    fast
}

/// Bodies as clients write them: every field form, skipped values of every kind.
const READ: &[&str] = &[
    r#"{"modules":[{"name":"Frames.dll"}],"frames":[{"module":0,"token":100663297,"il_offset":1}]}"#,
    r#" { "modules" : [ { "name" : "A.dll" , "pdb_id" : "497b72f6390a44fc878e5a2d63b6cc4b" } ] ,
        "frames" : [ { "module" : 0 , "token" : "0x06000001" , "il_offset" : "12" } , {"module":0,"rva":4660,"return_address":true} ] } "#,
    r#"{"debug_meta":{"images":[{"type":"pe_dotnet","debug_id":"497b72f6-390a-44fc-878e-5a2d63b6cc4b-c0b21b72","debug_file":"C:\\src\\A.pdb","code_file":"/app/A.dll","code_id":"AAAAAAAA2000"}],"sdk":{"x":[1,2.5,-3e-7,{"y":null}]}},
        "stacktraces":[{"frames":[{"addr_mode":"rel:0","function_id":"0x2","instruction_addr":"0x1a","module":"System.Foo","abs_path":"C:\\src\\a\u00e9.cs","in_app":true,"vars":{}}]},{"frames":null},{}],
        "context_lines":3}"#,
    r#"{"images":[{"build_id":"497b72f6390a44fc878e5a2d63b6cc4b","pe_timestamp":1,"pe_size_of_image":"0x2000"}],"frames":[{"module":0,"address":17293822569102704666},{"module":null,"addr_mode":null,"token":null,"return_address":false}]}"#,
    r#"{"frames":[],"modules":null,"debug_meta":null,"stacktraces":null,"context_lines":null,"extra":"\"\\\/\b\f\n\r\t\uABCD"}"#,
    r#"{"frames":[{"module":0,"token":1,"il_offset":0,"nested":[[[[{"a":[true,false,null,0,-0,0.0,1E+2]}]]]]}]}"#,
    "{\"frames\":[{\"module\":0,\"token\":1,\"il_offset\":0,\"name\":\"\u{1F600} ünïcödé\"}]}",
    r#"{"modules":[{"name":"A\u0041\"\\\/\b\f\n\r\t\ud83d\ude00.dll","code_file":"C:\\app\\A.dll"}],"frames":[{"module":0,"token":"\u0030x1","il_offset":0}]}"#,
    r#"{"frames":[]}"#,
    r#"{}"#,
];

/// Bodies the cursor leaves to serde (each for its reason), whatever serde makes of them.
const LEFT: &[&str] = &[
    r#"{"modules":[{"name":"A\ud83d.dll"}],"frames":[]}"#,
    r#"{"modules":[{"name":"A\ude00.dll"}],"frames":[]}"#,
    r#"{"modules":[{"name":"A\ud83d\u0041.dll"}],"frames":[]}"#,
    r#"{"frames":[{"module":0,"token":-1,"il_offset":0}]}"#,
    r#"{"frames":[{"module":0,"token":1.5,"il_offset":0}]}"#,
    r#"{"frames":[{"module":0,"token":1e3,"il_offset":0}]}"#,
    r#"{"frames":[{"module":0,"token":18446744073709551616,"il_offset":0}]}"#,
    r#"{"frames":[{"module":0,"token":01,"il_offset":0}]}"#,
    r#"{"frames":[{"module":0,"token":1,"token":2,"il_offset":0}]}"#,
    r#"{"modules":[],"images":[],"frames":[]}"#,
    r#"{"frames":[[0,1,2]]}"#,
    r#"{"frames":[{"module":true}]}"#,
    r#"{"frames":[{"module":0,"token":"0x","il_offset":0}]}"#,
    r#"{"frames":[{"module":0,"tok\u0065n":1,"il_offset":0}]}"#,
    r#"{"frames":[{"module":0,"token":1,"il_offset":0},]}"#,
    r#"{"frames":[{"module":0,"token":1,"il_offset":0}]} x"#,
    r#"{"frames":[{"module":0,"token":1,"il_offset":0}"#,
    r#"{"frames":[{"x":"\q"}]}"#,
    r#"{"frames":[{"x":"\u12"}]}"#,
    "{\"frames\":[{\"x\":\"a\tb\"}]}",
    r#"[1,2]"#,
    "",
];

#[test]
fn the_cursor_reads_what_clients_send_as_serde_does() {
    for body in READ {
        assert!(both(body, 1000).is_some(), "the cursor left {body} to serde");
    }
    // The service's own reading: straight into asks, for the bodies whose frames all ask well.
    for body in &READ[..3] {
        assert!(read_asked(body.as_bytes(), 1000).is_some(), "{body}");
    }
    let asked = read_asked(READ[1].as_bytes(), 1000).map(|a| a.groups);
    assert_eq!(asked, Some(vec![vec![(0, Ask::Il { token: 0x0600_0001, il: 12 }), (0, Ask::Rva { rva: 4660, kind: crate::answers::symbolizer::FrameKind::ReturnAddress })]]));
    // A frame without its module's index is left to serde, which names it.
    assert_eq!(read_asked(READ[3].as_bytes(), 1000), None);
    let r = both(READ[2], 1000).unwrap_or_default();
    let traces = r.stacktraces.unwrap_or_default();
    assert_eq!(traces.len(), 3);
    assert_eq!(traces.first().and_then(|t| t.frames.as_ref()).map(|f| f.0.len()), Some(1));
}

#[test]
fn the_cursor_leaves_the_rest_to_serde() {
    for body in LEFT {
        assert_eq!(read(body, 1000), None, "{body}");
    }
    // Deeper than its limit, and over the frame and module budgets.
    let deep = format!(r#"{{"x":{}{}}}"#, "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    assert_eq!(read(&deep, 10), None);
    let shallow = format!(r#"{{"x":{}{}}}"#, "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
    assert!(both(&shallow, 10).is_some());
    let three = r#"{"frames":[{"module":0},{"module":0},{"module":0}]}"#;
    assert!(both(three, 3).is_some());
    assert_eq!(read(three, 2), None);
    assert!(serde(three, 2).is_err_and(|e| e.starts_with(crate::service::request::TOO_MANY_FRAMES)));
    let modules = format!(r#"{{"modules":[{}]}}"#, vec!["{}"; MAX_MODULES + 1].join(","));
    assert_eq!(read(&modules, 10), None);
}

/// A body of many short lists holds about its frames, not a guess per list of the bytes left.
#[test]
fn short_lists_give_back_the_room_they_did_not_use() {
    let one = r#"{"frames":[{"module":0,"token":1,"il_offset":0}]},{"frames":[]}"#;
    let body = format!(r#"{{"modules":[{{}}],"stacktraces":[{}]}}"#, vec![one; 2000].join(","));
    let asked = read_asked(body.as_bytes(), 100_000).unwrap_or_else(|| panic!("not read"));
    assert_eq!(asked.groups.len(), 4000);
    assert!(asked.groups.iter().all(|g| g.capacity() <= 2 * g.len()), "{:?}", asked.groups.iter().map(Vec::capacity).max());
    // One long list is reserved once, for about its frames.
    let long = format!(r#"{{"modules":[{{}}],"frames":[{}]}}"#, vec![r#"{"module":0,"token":1,"il_offset":0}"#; 1000].join(","));
    let asked = read_asked(long.as_bytes(), 100_000).unwrap_or_else(|| panic!("not read"));
    assert!(asked.groups.iter().all(|g| g.len() == 1000 && g.capacity() <= 2000));
}

/// Bodies cut, spliced and sprinkled with JSON's own bytes: wherever the cursor answers, serde
/// gives the same request.
#[test]
fn mutated_bodies_are_read_alike_or_left_to_serde() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        usize::try_from(seed % u64::try_from(n.max(1)).unwrap_or(1)).unwrap_or(0)
    };
    let alphabet: &[&str] = &["{", "}", "[", "]", ",", ":", "\"", "\\", "0", "1", "-", ".", "e", "null", "true", " ", "\"token\":", "\"module\":", "\"frames\":", "\u{e9}", "x"];
    let (mut read_count, mut total) = (0, 0);
    for round in 0..20_000 {
        let base = READ.get(round % READ.len()).copied().unwrap_or("");
        let mut body: Vec<char> = base.chars().collect();
        for _ in 0..=next(3) {
            let at = next(body.len() + 1);
            match next(3) {
                0 if !body.is_empty() => {
                    let end = (at + 1 + next(8)).min(body.len());
                    body.drain(at.min(end)..end);
                }
                1 => {
                    let piece = alphabet.get(next(alphabet.len())).copied().unwrap_or("");
                    for (i, ch) in piece.chars().enumerate() {
                        body.insert((at + i).min(body.len()), ch);
                    }
                }
                _ => {
                    let from = next(body.len() + 1);
                    let end = (from + next(12)).min(body.len());
                    let piece: Vec<char> = body.get(from..end).map(<[char]>::to_vec).unwrap_or_default();
                    for (i, ch) in piece.into_iter().enumerate() {
                        body.insert((at + i).min(body.len()), ch);
                    }
                }
            }
        }
        let body: String = body.into_iter().collect();
        total += 1;
        if both(&body, 1 + next(4)).is_some() {
            read_count += 1;
        }
    }
    // The mutations leave many bodies valid: the comparison is not empty.
    assert!(read_count > total / 20, "the cursor read {read_count} of {total}");
}

/// The common frame's own reader (`Cursor::il_frame`) against serde, at its edges: whitespace,
/// numbers at and past its 19 digits, a float or a leading zero after its digits, the keys in
/// another order or with a fourth, a token over 32 bits (read, but no ask).
#[test]
fn the_common_frame_is_read_as_serde_reads_it() {
    let frame = |f: &str| format!(r#"{{"modules":[{{"name":"A.dll"}}],"frames":[{f},{{"module":0,"token":7,"il_offset":8}}]}}"#);
    let read_alike = [
        r#"{"module":0,"token":100663297,"il_offset":12}"#,
        " {\t\"module\" :\n0 , \"token\"\r: 1 ,\"il_offset\": 0 } ",
        r#"{"module":0,"token":9999999999999999999,"il_offset":0}"#,
        r#"{"module":0,"token":10000000000000000000,"il_offset":0}"#,
        r#"{"module":0,"token":18446744073709551615,"il_offset":0}"#,
        r#"{"module":0,"token":4294967296,"il_offset":0}"#,
        r#"{"token":1,"module":0,"il_offset":0}"#,
        r#"{"module":0,"token":1,"il_offset":0,"in_app":true}"#,
        r#"{"module":0,"token":"0x06000001","il_offset":0}"#,
    ];
    for f in read_alike {
        let body = frame(f);
        let request = both(&body, 10).unwrap_or_else(|| panic!("the cursor left {body} to serde"));
        assert_eq!(request.frames.map(|f| f.0.len()), Some(2), "{body}");
    }
    let left = [
        r#"{"module":0,"token":18446744073709551616,"il_offset":0}"#,
        r#"{"module":0,"token":1,"il_offset":1.5}"#,
        r#"{"module":0,"token":1,"il_offset":1e2}"#,
        r#"{"module":0,"token":01,"il_offset":0}"#,
        r#"{"module":0,"token":-1,"il_offset":0}"#,
        r#"{"module":0,"token":1,"il_offset":0"#,
        r#"{"module":0,"token":1,"token":2,"il_offset":0}"#,
    ];
    for f in left {
        let body = frame(f);
        assert_eq!(read(&body, 10), None, "{body}");
    }
    // The asks: the common frame's, and a token over 32 bits left to serde's frame checks.
    let asked = read_asked(frame(read_alike[0]).as_bytes(), 10).map(|a| a.groups);
    assert_eq!(asked, Some(vec![vec![(0, Ask::Il { token: 100663297, il: 12 }), (0, Ask::Il { token: 7, il: 8 })]]));
    assert_eq!(read_asked(frame(read_alike[5]).as_bytes(), 10), None);
}

/// What each module is asked, noted while reading, is what a pass over the asks finds, at module
/// indices in the word (below 32) and past it; a frame naming a module the request does not have,
/// or one past the modules' budget, sends the body to serde.
#[test]
fn each_module_s_kinds_are_those_its_frames_ask() {
    let modules = (0..40).map(|_| "{}").collect::<Vec<_>>().join(",");
    let frames = [(0, "\"token\":1,\"il_offset\":2"), (31, "\"rva\":16"), (32, "\"token\":1,\"il_offset\":2"), (39, "\"rva\":16"), (39, "\"token\":3,\"il_offset\":4"), (0, "\"address\":4096")];
    let list = frames.iter().map(|(m, rest)| format!("{{\"module\":{m},{rest}}}")).collect::<Vec<_>>().join(",");
    let body = format!(r#"{{"modules":[{modules}],"frames":[{list}]}}"#);
    let asked = read_asked(body.as_bytes(), 100).unwrap_or_else(|| panic!("not read: {body}"));
    let want = |m: usize| match m {
        0 | 39 => ASKS_IL | ASKS_RVA,
        31 => ASKS_RVA,
        32 => ASKS_IL,
        _ => 0,
    };
    for m in 0..45 {
        assert_eq!((m, asked.kinds.get(m)), (m, want(m)));
        assert_eq!((m, Kinds::of(&asked.groups).get(m)), (m, want(m)));
    }
    assert_eq!(asked.kinds, Kinds::of(&asked.groups));
    for past in [40usize, 10_000, 10_001] {
        let body = format!(r#"{{"modules":[{modules}],"frames":[{{"module":{past},"token":1,"il_offset":2}}]}}"#);
        assert!(read_asked(body.as_bytes(), 100).is_none(), "{past}");
    }
}

/// The cursor reads bytes, and checks UTF-8 only where strings are: a body it reads is valid
/// UTF-8, and one with a byte that is not (in a name, a key, an escaped or a skipped string, or
/// between values), or with a character cut at its end, is left to the service's check of the
/// whole body. Each body is read once it is mended, so the byte alone is what stops it.
#[test]
fn the_cursor_reads_no_body_that_is_not_utf8() {
    let shapes = [
        r#"{"modules":[{"name":"A@.dll"}],"frames":[{"module":0,"token":1,"il_offset":0}]}"#,
        r#"{"modules":[{"name":"A\n@.dll"}],"frames":[{"module":0,"token":1,"il_offset":0}]}"#,
        r#"{"modules":[{"name":"A.dll","x@":1}],"frames":[{"module":0,"token":1,"il_offset":0}]}"#,
        r#"{"modules":[{"name":"A.dll"}],"frames":[{"module":0,"token":1,"il_offset":0,"skipped":"a\"@"}]}"#,
        r#"{"modules":[{"name":"A.dll"}],"frames":[{"module":0,"token":1,"il_offset":0}]}@"#,
        r#"{"modules":[{"name":"A.dll","code_file":"C:\\@\\A.dll"}],"frames":[{"module":0,"token":1,"il_offset":0}]}"#,
    ];
    for shape in shapes {
        let mended = shape.replace('@', "é");
        assert!(fuzzcheck::check(mended.as_bytes(), 10) || mended.ends_with('é'), "{mended}");
        for bad in [&b"\xff"[..], b"\xc3", b"\xe9", b"\xed\xa0\x80", b"\xc3\xa9\xa9"] {
            let body: Vec<u8> = shape.as_bytes().split(|&b| b == b'@').collect::<Vec<_>>().join(bad);
            assert!(!fuzzcheck::check(&body, 10), "{}", String::from_utf8_lossy(&body));
            assert_eq!(read_asked(&body, 10), None);
        }
    }
}

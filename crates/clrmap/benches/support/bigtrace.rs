//! Build a large `.nettrace` from a real one: its block objects are written again and again, each
//! with the padding its new file offset needs (a block's body is 4-byte aligned in the file).
#![allow(dead_code, clippy::arithmetic_side_effects, clippy::indexing_slicing, clippy::unwrap_used, clippy::type_complexity)]

fn i32_at(b: &[u8], at: usize) -> usize {
    i32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

/// (type header bytes, block body) of every block object, and where the first one starts.
fn blocks(real: &[u8]) -> (usize, Vec<(&[u8], &[u8])>) {
    let mut at = 8 + 4 + 20; // magic, length, "!FastSerialization.1"
    let mut first = None;
    let mut out = Vec::new();
    while real[at] == 5 {
        let start = at;
        // 5, then the type: 5 1 version minReader len name 6.
        let name_len = i32_at(real, at + 1 + 1 + 1 + 4 + 4);
        let header_end = at + 1 + 1 + 1 + 4 + 4 + 4 + name_len + 1;
        let name = &real[header_end - 1 - name_len..header_end - 1];
        at = header_end;
        if name == b"Trace" {
            at += 48 + 1;
            continue;
        }
        first.get_or_insert(start);
        let size = i32_at(real, at);
        at += 4;
        at += (4 - at % 4) % 4;
        out.push((&real[start..header_end], &real[at..at + size]));
        at += size + 1; // body, EndObject
    }
    (first.unwrap(), out)
}

pub fn grow(real: &[u8], at_least: usize) -> Vec<u8> {
    let (first, list) = blocks(real);
    let mut out = real[..first].to_vec();
    while out.len() < at_least {
        for (header, body) in &list {
            out.extend_from_slice(header);
            out.extend_from_slice(&(body.len() as i32).to_le_bytes());
            out.resize(out.len() + (4 - out.len() % 4) % 4, 0);
            out.extend_from_slice(body);
            out.push(6);
        }
    }
    out.push(1); // NullReference: the end of the stream.
    out
}

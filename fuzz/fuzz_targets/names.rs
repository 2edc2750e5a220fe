//! Names resolved through metadata: a small real assembly (Frames.dll) with the input patched
//! into its metadata, then every TypeDef, TypeRef and TypeSpec token named and every TypeSpec
//! printed. Each name stays within `MAX_NAME_BYTES` (or fails, to print raw), each printed type
//! within its blob's bytes times a constant plus one bounded name per token, and libFuzzer's
//! -timeout and -rss_limit_mb catch a name whose work or memory explodes.
//!
//! Input: patches `[offset lo, offset hi, length, bytes...]*`, offsets relative to 4 KB before
//! the #Blob heap (so they reach the tables and both heaps).
#![no_main]

use clrmap::metadata::{table, Metadata, MAX_NAME_BYTES};
use clrmap::read::Reader;
use clrmap::signature::{stream_one, TypeNames};
use libfuzzer_sys::fuzz_target;

static FRAMES: &[u8] = include_bytes!("../../tests/fixtures/frames/debug-portable/Frames.dll");

/// Counts what is written and keeps nothing.
struct Count(usize);

impl core::fmt::Write for Count {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = FRAMES.to_vec();
    let base = match Metadata::parse(FRAMES) {
        Ok(md) => (md.blobs().0.offset() as usize).saturating_sub(4096),
        Err(_) => return,
    };
    let mut rest = data;
    while let [lo, hi, len, tail @ ..] = rest {
        let at = base + usize::from(u16::from_le_bytes([*lo, *hi]));
        let n = usize::from(*len).min(tail.len());
        for (i, b) in tail[..n].iter().enumerate() {
            if let Some(slot) = bytes.get_mut(at + i) {
                *slot = *b;
            }
        }
        rest = &tail[n..];
    }
    let Ok(md) = Metadata::parse(&bytes) else { return };
    for (kind, id) in [(0x02u32, table::TYPE_DEF), (0x01, table::TYPE_REF), (0x1B, table::TYPE_SPEC)] {
        for rid in 1..=md.tables().rows(id).min(2000) {
            let token = kind << 24 | rid;
            let mut name = String::new();
            match md.write_type_name(token, &mut name) {
                Ok(()) => assert!(name.len() <= MAX_NAME_BYTES, "{token:08X}: {} bytes", name.len()),
                Err(_) => assert!(name.is_empty(), "{token:08X}: a failed name wrote {name:?}"),
            }
        }
    }
    for rid in 1..=md.tables().rows(table::TYPE_SPEC).min(2000) {
        let Ok(blob) = md.type_spec(rid) else { continue };
        let mut out = Count(0);
        if let Ok(Ok(())) = stream_one(&mut Reader::new(blob.as_slice(), 0), &md, &mut out) {
            // Each byte prints at most ~26 characters of its own (an array bound) or names one
            // token; JSON escaping at most doubles it (names hold no control characters here
            // beyond what \u00XX makes six of).
            let bound = (blob.len() + 1) * (MAX_NAME_BYTES + 64);
            assert!(out.0 <= bound, "TypeSpec {rid}: {} bytes from a {}-byte blob", out.0, blob.len());
        }
    }
});

//! The debug-info decoders (nibble and bit-packed bounds, variables) over arbitrary blobs, for
//! every R2R major family, and the public-map transform over whatever they return.
#![no_main]

use clrmap::ilmap::public_map;
use clrmap::r2r::{decode_debug_info, DebugInfoLayout};
use clrmap::read::Reader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for layout in [DebugInfoLayout::NIBBLE, DebugInfoLayout::BITPACKED2, DebugInfoLayout::FAT3_PREVIEW, DebugInfoLayout::FAT3] {
        if let Ok(info) = decode_debug_info(Reader::new(data, 0), layout) {
            let size = info.bounds.iter().map(|b| b.native_offset).max().unwrap_or(0).saturating_add(1);
            let map = public_map(&info.bounds, size);
            assert!(map.len() <= info.bounds.len());
        }
    }
});

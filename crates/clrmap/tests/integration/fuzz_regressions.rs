//! Replays every input kept in `fuzz/regressions/<target>/` (crashes the fuzzers once found) and
//! `fuzz/seeds/<target>/` through the same checks as the fuzz targets, on stable.

use clrmap::gdmap::{DictionaryMap, DictionaryMapBuilder, Lookup, SortedFlag};
use clrmap::read::Reader;
use clrmap::signature::{decode_type, decode_zapsig_type, encode_type, parse_type, write_type, HexTokens, SpanRenderer, TreeProvider};

use crate::support::repo_root;

fn inputs(target: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for dir in ["regressions", "seeds"] {
        let d = repo_root().join("fuzz").join(dir).join(target);
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd {
                out.push(std::fs::read(e.unwrap().path()).unwrap());
            }
        }
    }
    out
}

/// Run `check` on every kept input of `target`, which must have some.
fn replay(target: &str, check: impl Fn(&[u8])) {
    let all = inputs(target);
    assert!(!all.is_empty(), "no inputs kept for {target}");
    for data in all {
        check(&data);
    }
}

#[test]
fn signature_inputs() {
    replay("signature", |data| {
        if let Ok(tree) = decode_type(&mut Reader::new(data, 0), &mut TreeProvider) {
            let mut bytes = Vec::new();
            encode_type(&tree, &mut bytes).unwrap();
            assert_eq!(decode_type(&mut Reader::new(&bytes, 0), &mut TreeProvider).unwrap(), tree);
            let text = write_type(&tree, &HexTokens);
            assert_eq!(write_type(&parse_type(&text).unwrap(), &HexTokens), text);
            let mut zap = SpanRenderer::new(&HexTokens);
            let span = decode_zapsig_type(&mut Reader::new(data, 0), &mut zap).unwrap();
            assert_eq!(zap.text(span), text);
        } else {
            let _ = decode_zapsig_type(&mut Reader::new(data, 0), &mut SpanRenderer::new(&HexTokens));
        }
    });
}

#[test]
fn gdmap_inputs() {
    replay("gdmap", |data| {
        let Ok(map) = DictionaryMap::parse(data) else { return };
        let valid = map.validate().is_ok();
        let _ = map.lint();
        if let Ok(l) = Lookup::new(map, SortedFlag::Trust) {
            for e in map.entries() {
                if let Some(f) = l.find(e.rva) {
                    if let Ok(i) = map.item_of(&f) {
                        let _ = i.render(&HexTokens);
                    }
                }
            }
        }
        if valid {
            let rebuilt = DictionaryMapBuilder::from_map(&map).unwrap().build().unwrap();
            DictionaryMap::parse(&rebuilt).unwrap().validate().unwrap();
        }
    });
}

#[test]
fn r2r_inputs() {
    // Every map of every image that decodes keeps the contract's invariants.
    replay("r2r", |data| {
        let Ok(image) = clrmap::r2r::ReadyToRunImage::parse(data) else { return };
        if let Ok(bodies) = image.code_bodies() {
            for b in bodies {
                for e in &b.map {
                    assert!(e.native_start <= e.native_end && e.native_end <= b.code_size);
                }
            }
        }
    });
}

#[test]
fn bounds_inputs() {
    for data in inputs("bounds") {
        for major in [3u16, 9, 16, 17, 26] {
            let layout = clrmap::r2r::DebugInfoLayout::for_major(major).unwrap();
            let _ = clrmap::r2r::decode_debug_info(clrmap::read::Reader::new(&data, 0), layout);
        }
    }
}

#[test]
fn pdb_inputs() {
    // The `pdb` target's own checks (`clrmap::pdb::fuzzcheck`), on stable.
    replay("pdb", clrmap::pdb::fuzzcheck::fuzz_check_pdb);
}

#[test]
fn embedded_pdb_inputs() {
    // The `embedded_pdb` target's own checks (`clrmap::pdb::fuzzcheck`), on stable.
    replay("embedded_pdb", clrmap::pdb::fuzzcheck::fuzz_check_embedded);
}

#[test]
fn capture_inputs() {
    // The `capture` target's own checks (`clrmap::capture::fuzz_check`), on stable.
    replay("capture", clrmap::capture::fuzz_check);
}

#[test]
fn jitdump_inputs() {
    // The `jitdump` target's own checks (`clrmap::jitdump::fuzzcheck::fuzz_check`), on stable;
    // the seeds are a jitdump clrmap wrote for examples/frames.nettrace, whole and torn.
    replay("jitdump", clrmap::jitdump::fuzzcheck::fuzz_check);
    // And every cut of the whole seed: a torn tail keeps every whole record, by both readers.
    let whole = std::fs::read(repo_root().join("fuzz/seeds/jitdump/frames-six-records.dump")).unwrap();
    for cut in 0..=whole.len() {
        clrmap::jitdump::fuzzcheck::fuzz_check(&whole[..cut]);
    }
}

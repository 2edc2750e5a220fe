//! ReadyToRun code in a recording answered by its image's own maps.
//!
//! A trace names the ReadyToRun methods that ran (their method events give the start address,
//! the token and the module) but carries no map for them: the map is in the image, where the
//! runtime itself reads it for a stack trace. So each such module's image is found as its
//! assembly is (the recorded path, the symbol directories, the installed .NETs' same framework
//! version: `symbols::module`), and only when it is of the build the trace recorded (its
//! CodeView GUID is the recorded PDB's). Its load address is then derived from the trace: every
//! method whose token has exactly one body in the image says `start - rva`, and the address
//! most of them agree on (a page-aligned one) is taken. Each recorded body whose `start - base`
//! is its image body's RVA, with the same token, gets that body's map; the frame rule then
//! answers it as it answers the image itself.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::source::RecordedPdbs;
use crate::base::ilmap::{CodeBody, CodeKind};
use crate::formats::r2r::ReadyToRunImage;
use crate::symbols::locate::SymbolPaths;
use crate::symbols::module::RecordedModule;

/// The image is mapped at a page boundary: a base that is not one is no load address.
const PAGE: u64 = 0x1000;

/// Give the ReadyToRun bodies of `bodies` that have no map the maps of their images. Gives how
/// many bodies got one.
pub(super) fn fill_from_images(bodies: &mut [CodeBody], pdbs: &RecordedPdbs, symbols: &SymbolPaths) -> usize {
    let mut by_module: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, b) in bodies.iter().enumerate() {
        if b.kind == Some(CodeKind::R2r) && b.map.is_empty() && b.start.is_some() {
            if let Some(path) = &b.module_path {
                by_module.entry(path.clone()).or_default().push(i);
            }
        }
    }
    let mut filled = 0usize;
    // One buffer for every image, so that its pages are made once (the largest image's), not
    // once an image.
    let mut bytes = Vec::new();
    for (path, list) in by_module {
        // Without a recorded id an image of another build could not be told apart: none is used.
        let Some(recorded) = pdbs.get(&path) else { continue };
        let name = path.rsplit(['/', '\\']).next();
        let module = RecordedModule { name, path: Some(Path::new(&path)), recorded: Some(recorded), mvid: None };
        if !module.assembly_into(symbols, &mut bytes) {
            continue;
        }
        let Ok(image) = ReadyToRunImage::parse(&bytes) else { continue };
        // The image's bodies (token, RVA), all of them checked, give the load address; then
        // only the bodies at the recorded starts get their maps made.
        let mut starts = Vec::new();
        if image.code_bodies_where(|_| false, |b| starts.extend(b.rva.map(|rva| (b.token, rva)))).is_err() {
            continue;
        }
        let Some(base) = load_address(bodies, &list, &starts) else { continue };
        let wanted: HashSet<u32> = list.iter().filter_map(|&i| bodies.get(i)).filter_map(|b| rva_from(b, base)).collect();
        let mut image_bodies = Vec::new();
        let keep = |b: CodeBody| {
            if b.rva.is_some_and(|rva| wanted.contains(&rva)) {
                image_bodies.push(b);
            }
        };
        if image.code_bodies_where(|rva| wanted.contains(&rva), keep).is_err() {
            continue;
        }
        filled = filled.saturating_add(give_maps(bodies, &list, base, &image_bodies));
    }
    filled
}

/// One module: the load address the recorded starts agree on, then each body's map by its RVA.
#[cfg(test)]
fn fill_module(bodies: &mut [CodeBody], list: &[usize], image_bodies: &[CodeBody]) -> usize {
    let starts: Vec<(u32, u32)> = image_bodies.iter().filter_map(|b| Some((b.token, b.rva?))).collect();
    let Some(base) = load_address(bodies, list, &starts) else { return 0 };
    give_maps(bodies, list, base, image_bodies)
}

/// The load address most of the recorded starts (`list` in `bodies`) agree on, by the image's
/// bodies (`starts`: token and RVA): each token with one body in the image votes `start - rva`.
fn load_address(bodies: &[CodeBody], list: &[usize], starts: &[(u32, u32)]) -> Option<u64> {
    let mut rvas_of: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(token, rva) in starts {
        rvas_of.entry(token).or_default().push(rva);
    }
    let mut votes: HashMap<u64, usize> = HashMap::new();
    for b in list.iter().filter_map(|&i| bodies.get(i)) {
        if let (Some(start), Some([rva])) = (b.start, rvas_of.get(&b.token).map(Vec::as_slice)) {
            if let Some(base) = start.checked_sub(u64::from(*rva)).filter(|base| base % PAGE == 0) {
                let n = votes.entry(base).or_default();
                *n = n.saturating_add(1);
            }
        }
    }
    votes.into_iter().max_by_key(|&(base, n)| (n, core::cmp::Reverse(base))).map(|(base, _)| base)
}

/// A recorded body's RVA in an image loaded at `base`.
fn rva_from(b: &CodeBody, base: u64) -> Option<u32> {
    b.start.and_then(|s| s.checked_sub(base)).and_then(|r| u32::try_from(r).ok())
}

/// Each recorded body (`list` in `bodies`) whose RVA at `base` is an image body's (the first
/// of `image_bodies` there) with the same token gets that body's map. Gives how many did.
fn give_maps(bodies: &mut [CodeBody], list: &[usize], base: u64, image_bodies: &[CodeBody]) -> usize {
    let mut at_rva: HashMap<u32, &CodeBody> = HashMap::new();
    for b in image_bodies {
        if let Some(rva) = b.rva {
            at_rva.entry(rva).or_insert(b);
        }
    }
    let mut filled = 0usize;
    for &i in list {
        let Some(b) = bodies.get_mut(i) else { continue };
        let rva = rva_from(b, base);
        let Some(found) = rva.and_then(|r| at_rva.get(&r)).filter(|f| f.token == b.token) else { continue };
        b.map = found.map.clone();
        b.rva = found.rva;
        if b.code_size == 0 {
            b.code_size = found.code_size;
        }
        filled = filled.saturating_add(1);
    }
    filled
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::arithmetic_side_effects)]
    use super::*;
    use crate::base::ilmap::{IlOffset, MapEntry};

    fn body(token: u32, rva: Option<u32>, start: Option<u64>, map: Vec<MapEntry>) -> CodeBody {
        CodeBody { token, rva, start, map, kind: Some(CodeKind::R2r), code_size: 16, ..CodeBody::default() }
    }

    #[test]
    fn the_base_most_starts_agree_on_gives_each_body_its_map() {
        let entry = |il: u32| vec![MapEntry { il: IlOffset::Il(il), native_start: 0, native_end: 16 }];
        // Token 2 has two bodies in the image (two instantiations): it casts no vote.
        let image = [body(1, Some(0x1000), None, entry(1)), body(2, Some(0x2000), None, entry(2)), body(2, Some(0x3000), None, entry(3)), body(4, Some(0x4000), None, entry(4))];
        let base = 0x7f00_0000_0000u64;
        let mut recorded = vec![
            body(1, None, Some(base + 0x1000), vec![]),
            body(2, None, Some(base + 0x3000), vec![]),
            body(4, None, Some(base + 0x4000), vec![]),
            // A start that is no body of the image with its token: left without a map.
            body(5, None, Some(base + 0x4000), vec![]),
            // One stray start votes for another base, and loses.
            body(4, None, Some(0x1000 + 0x4000), vec![]),
        ];
        let filled = fill_module(&mut recorded, &[0, 1, 2, 3, 4], &image);
        assert_eq!(filled, 3);
        assert_eq!(recorded[1].map, entry(3));
        assert_eq!(recorded[1].rva, Some(0x3000));
        assert!(recorded[3].map.is_empty() && recorded[4].map.is_empty());
    }
}

//! The `module` records: what each loaded module's image says about its PDB (its portable
//! CodeView entry and its PdbChecksum entries), so that a capture finds the module's PDB by id
//! even after the assembly is gone (docs/capture-format.md).
//!
//! The image is the file at the module's path, read when the profiler first meets the module (its
//! first recorded body, or an inlinee of it), and used only if its MVID is the one the runtime
//! loaded: a file replaced since the load gives no PDB id, never another build's.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use clrmap::capture::{Hex, ModuleRecord, PdbChecksum, PdbRecord, Record};
use clrmap::metadata::{mvid_text, Metadata};
use clrmap::pe::PeImage;

/// The largest module file read for its debug directory (framework assemblies are tens of MiB).
const MAX_MODULE: u64 = 1 << 30;

/// Module paths whose record was written in this recording.
fn written() -> &'static Mutex<HashSet<String>> {
    static WRITTEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    WRITTEN.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Forget what was written (a fresh recording after an attach).
pub fn reset() {
    if let Ok(mut w) = written().lock() {
        w.clear();
    }
}

/// The `module` record line for the module at `path` (with the MVID the runtime gave, Module
/// table byte order), the first time this recording meets the path; `None` after that, and for
/// a module without a path (loaded from memory).
pub fn record_line(pid: u32, path: &str, mvid: Option<[u8; 16]>) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    {
        let mut w = written().lock().ok()?;
        if !w.insert(path.to_owned()) {
            return None;
        }
    }
    let mut record = ModuleRecord { pid: Some(pid), module: path.to_owned(), mvid: mvid.as_ref().map(mvid_text), ..ModuleRecord::default() };
    if let Some((pdb, checksums)) = image_pdb(Path::new(path), mvid) {
        record.pdb = Some(pdb);
        record.pdb_checksums = checksums;
    }
    Some(Record::Module(record).to_line())
}

/// The portable CodeView entry and the PdbChecksum entries of the image at `path`, if its MVID is
/// `mvid` (where the runtime told it).
pub fn image_pdb(path: &Path, mvid: Option<[u8; 16]>) -> Option<(PdbRecord, Vec<PdbChecksum>)> {
    let bytes = clrmap::fs::read_regular(path, MAX_MODULE).ok()?;
    pdb_of(&bytes, mvid)
}

/// [`image_pdb`] of an image's bytes.
fn pdb_of(bytes: &[u8], mvid: Option<[u8; 16]>) -> Option<(PdbRecord, Vec<PdbChecksum>)> {
    let image = PeImage::parse(bytes).ok()?;
    if let Some(want) = mvid {
        if Metadata::from_pe(&image).ok()?.mvid()? != want {
            return None;
        }
    }
    let cv = image.codeview().ok()??;
    if !cv.is_portable() || cv.guid == [0; 16] {
        return None;
    }
    let pdb = PdbRecord { guid: mvid_text(&cv.guid), age: cv.age, path: cv.path.to_owned() };
    let checksums = image.pdb_checksums().into_iter().map(|(algorithm, sum)| PdbChecksum { algorithm: algorithm.to_owned(), checksum: Hex(sum.to_vec()) }).collect();
    Some((pdb, checksums))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(file: &str) -> Vec<u8> {
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/frames/debug-portable").join(file)).unwrap()
    }

    #[test]
    fn the_codeview_entry_is_recorded_only_for_the_loaded_build() {
        let bytes = fixture("Frames.dll");
        let image = PeImage::parse(&bytes).unwrap();
        let cv = image.codeview().unwrap().unwrap();
        let mvid = Metadata::from_pe(&image).unwrap().mvid().unwrap();
        let (pdb, checksums) = pdb_of(&bytes, Some(mvid)).unwrap();
        assert_eq!((pdb.guid, pdb.age, pdb.path.as_str()), (mvid_text(&cv.guid), cv.age, cv.path));
        // The same id as the PDB beside it has (checked by clrmap's PDB reader, not by this code).
        let pdb_id = clrmap::pdb::PortablePdb::parse(&fixture("Frames.pdb")).unwrap().id().guid();
        assert_eq!(parse_guid(&pdb_of(&bytes, None).unwrap().0.guid), pdb_id);
        let want: Vec<(String, Vec<u8>)> = image.pdb_checksums().into_iter().map(|(a, s)| (a.to_owned(), s.to_vec())).collect();
        assert_eq!(checksums.into_iter().map(|c| (c.algorithm, c.checksum.0)).collect::<Vec<_>>(), want);
        // Another build's MVID: nothing, rather than the wrong id.
        let mut other = mvid;
        other[0] ^= 1;
        assert_eq!(pdb_of(&bytes, Some(other)), None);
        assert_eq!(pdb_of(b"not an image", None), None);
    }

    fn parse_guid(text: &str) -> [u8; 16] {
        clrmap::capture::parse_mvid(text).unwrap()
    }
}

//! Which body holds an address, and which module that body is in: the bodies sorted by their
//! code ranges ([`MapStore`]) and each body's module index.
//!
//! Kept apart from the modules' line tables ([`super::modules`]) and the inline trees
//! ([`super::inline_index`]): finding the body is the same for every answer and needs no file,
//! while lines and inlinees are looked up only for answers that want them.

use std::collections::HashMap;
use std::path::Path;

use crate::base::fs::file_id;
use crate::base::ilmap::{CodeBody, MapStore};
use crate::symbols::locate::RecordedPdb;

use super::modules::Module;
use super::source::RecordedPdbs;
use super::FrameKind;

/// Bodies by address, each with its module's index in [`super::modules::Modules`].
#[derive(Debug)]
pub(super) struct CodeIndex {
    store: MapStore,
    /// Body index → module index.
    body_module: Vec<Option<usize>>,
}

/// One file (device and inode) as the module of the source's recorded identity: paths that name
/// it are one module only where they were recorded with one PDB id and one MVID.
type FileKey = (u64, u64, Option<RecordedPdb>, Option<[u8; 16]>);

impl CodeIndex {
    /// Index `bodies`; `body_module` gives each one's module, in the same order.
    pub(super) fn new(bodies: Vec<CodeBody>, body_module: Vec<Option<usize>>) -> CodeIndex {
        CodeIndex { store: MapStore::new(bodies), body_module }
    }

    /// The bodies, as a GetILToNativeMapping store.
    pub(super) fn store(&self) -> &MapStore {
        &self.store
    }

    /// The index of the body that holds an address, by the frame kind's rule.
    pub(super) fn index_at(&self, address: u64, kind: FrameKind) -> Option<usize> {
        self.store.index_containing(lookup_address(address, kind))
    }

    /// The body at `index`.
    pub(super) fn body(&self, index: usize) -> Option<&CodeBody> {
        self.store.bodies().get(index)
    }

    /// The index of the module of the body at `index`.
    pub(super) fn module_of(&self, index: usize) -> Option<usize> {
        self.body_module.get(index).copied().flatten()
    }
}

/// The address whose body answers: the call (the address − 1) for a return address, which may
/// be just past its body's code.
pub(super) fn lookup_address(address: u64, kind: FrameKind) -> u64 {
    if kind == FrameKind::Leaf {
        address
    } else {
        address.saturating_sub(1)
    }
}

/// The modules of a trace's or capture's bodies, and each body's module index. One module per
/// file: by path, and paths that name the same file (links, `..`, `//`) by its identity, so that
/// a module is read and held once.
pub(super) fn modules_of(bodies: &[CodeBody], pdbs: &RecordedPdbs, mvids: &HashMap<String, [u8; 16]>) -> (Vec<Module>, Vec<Option<usize>>) {
    let mut modules: Vec<Module> = Vec::new();
    let mut body_module = Vec::with_capacity(bodies.len());
    let mut by_path: HashMap<String, usize> = HashMap::new();
    let mut by_file: HashMap<FileKey, usize> = HashMap::new();
    for b in bodies {
        let Some(p) = b.module_path.as_deref() else {
            body_module.push(None);
            continue;
        };
        let i = match by_path.get(p) {
            Some(&i) => i,
            None => {
                let recorded = pdbs.get(p).cloned();
                let key = file_id(Path::new(p)).map(|(dev, ino)| (dev, ino, recorded.clone(), mvids.get(p).copied()));
                let i = match key.as_ref().and_then(|k| by_file.get(k)) {
                    Some(&i) => i,
                    None => {
                        modules.push(Module::recorded(b.module.clone(), p, recorded, mvids.get(p).copied()));
                        let i = modules.len().saturating_sub(1);
                        if let Some(k) = key {
                            by_file.insert(k, i);
                        }
                        i
                    }
                };
                by_path.insert(p.to_owned(), i);
                i
            }
        };
        body_module.push(Some(i));
    }
    (modules, body_module)
}

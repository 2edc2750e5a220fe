//! What a recording (a trace's ModuleLoad event, a capture's `module` record) says about a
//! module's PDB: the CodeView entry of the image the runtime loaded. Finding the PDB it names is
//! [`crate::symbols::locate`]'s work.

/// What a recording says about a module's PDB: the CodeView entry of the image the runtime
/// loaded, as a trace's ModuleLoad event carries it (`ManagedPdbSignature`, `ManagedPdbAge`,
/// `ManagedPdbBuildPath`; a capture's `module` records, docs/capture-format.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RecordedPdb {
    /// The CodeView GUID, in GUID byte order: the first 16 bytes of the portable PDB's id.
    pub guid: [u8; 16],
    /// The CodeView age (1 for a portable PDB).
    pub age: u32,
    /// The PDB path as the build wrote it (`/_/Frames.pdb`, `C:\src\obj\Frames.pdb`).
    pub path: String,
    /// The image's PdbChecksum entries, `(algorithm, checksum)`, where the recording has them (a
    /// capture's; traces carry none): sent to symbol servers as the `SymbolChecksum` header.
    pub checksums: Vec<(String, Vec<u8>)>,
}

impl RecordedPdb {
    /// The PDB's file name: the recorded path's last component (either separator).
    pub fn file_name(&self) -> &str {
        self.path.rsplit(['/', '\\']).next().unwrap_or(&self.path)
    }

    /// The GUID as the symbol-server key writes it (32 upper-case hex digits).
    pub fn guid_hex(&self) -> String {
        crate::base::guid::Guid(self.guid).key_hex()
    }
}

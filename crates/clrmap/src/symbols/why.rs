//! Why a module has no lines: what was wanted, where it was looked for, and what was found
//! instead. One value per reason, printed as a `note:` line in text and as
//! fields in JSON (`{"note":{"module":...,"kind":"another_build",...}}`).

/// One reason a module's PDB was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(tag = "kind", rename_all = "snake_case"))]
pub enum Why {
    /// The assembly has no CodeView entry and no embedded PDB.
    NoPdbNamed,
    /// The assembly's debug directory cannot be read.
    BadDebugDirectory {
        /// The reader's error, as text.
        message: String,
    },
    /// The assembly names only a Windows (MSF) PDB, which clrmap does not read.
    WindowsPdb {
        /// The path the build wrote.
        pdb: String,
        /// Its GUID (32 upper-case hex digits, as symbol-server keys print it).
        pdb_id: String,
        /// Its age.
        age: u32,
    },
    /// A file where the PDB was looked for is a Windows (MSF) PDB, which clrmap does not read.
    WindowsPdbFile {
        /// The file.
        path: String,
    },
    /// The CodeView entry names something that is not a file name.
    NotAFileName {
        /// The path the build wrote.
        pdb: String,
    },
    /// A file where the PDB or assembly was looked for, of another build.
    AnotherBuild {
        /// The file.
        path: String,
        /// The PDB GUID it has.
        pdb_id: String,
        /// The PDB GUID that was wanted.
        wanted: String,
    },
    /// An assembly whose MVID is not the one a capture recorded.
    AnotherBuildMvid {
        /// The file.
        path: String,
        /// Its MVID.
        mvid: String,
        /// The MVID the capture recorded.
        wanted: String,
    },
    /// A symbol server did not give the file.
    Server {
        /// The server's base URL.
        server: String,
        /// The SSQP key asked for.
        key: String,
        /// What happened.
        message: String,
    },
    /// No assembly of the recorded build was found for a module, so the methods that need its
    /// metadata (the inlinees of a tree) are not named.
    NoAssembly {
        /// Where it was looked for, in order.
        places: Vec<String>,
    },
    /// The PDB that was wanted, and every place it was looked for.
    LookedFor {
        /// Its file name.
        pdb: String,
        /// Its GUID.
        pdb_id: String,
        /// Where it was looked for (files, directories, symbol servers), in order.
        places: Vec<String>,
    },
}

impl core::fmt::Display for Why {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Why::NoPdbNamed => f.write_str("the assembly names no PDB: it has no CodeView debug entry and no embedded PDB"),
            Why::BadDebugDirectory { message } => write!(f, "the assembly's debug directory cannot be read: {message}"),
            Why::WindowsPdb { pdb, pdb_id, age } => {
                write!(f, "the assembly names only a Windows PDB, {pdb} (GUID {pdb_id}, age {age}), which clrmap does not read: it reads portable PDBs")
            }
            Why::WindowsPdbFile { path } => write!(f, "{path} is a Windows (MSF) PDB: {}; not used", crate::formats::pdb::WINDOWS_PDB_MESSAGE),
            Why::NotAFileName { pdb } => write!(f, "the assembly's CodeView entry names {pdb:?}, which is not a file name"),
            Why::AnotherBuild { path, pdb_id, wanted } => write!(f, "{path} is another build (PDB GUID {pdb_id}, not the {wanted} wanted); not used"),
            Why::AnotherBuildMvid { path, mvid, wanted } => write!(f, "{path} is another build (MVID {mvid}, not the {wanted} the capture recorded); not used"),
            Why::Server { server, key, message } => write!(f, "symbol server {server}: {key}: {message}"),
            Why::NoAssembly { places } if places.is_empty() => f.write_str("no assembly of the recorded build was found (the recording names no file to look for); its inlined methods are not named"),
            Why::NoAssembly { places } => {
                write!(f, "no assembly of the recorded build was found at {} (give --symbol-path DIR holding it); its inlined methods are not named", places.join(", "))
            }
            Why::LookedFor { pdb, pdb_id, places } if places.is_empty() => {
                write!(f, "{pdb} (PDB GUID {pdb_id}) was looked for nowhere: give --pdb, --symbol-path or --symbol-server")
            }
            Why::LookedFor { pdb, pdb_id, places } => write!(f, "{pdb} (PDB GUID {pdb_id}) was looked for at {}", places.join(", ")),
        }
    }
}

/// A reason, with the module it is about (its file name, where known).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Note {
    /// The module's file name.
    pub module: Option<String>,
    /// Why.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub why: Why,
}

impl core::fmt::Display for Note {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.module {
            Some(m) => write!(f, "{m}: {}", self.why),
            None => self.why.fmt(f),
        }
    }
}

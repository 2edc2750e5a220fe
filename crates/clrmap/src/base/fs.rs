//! Reading input files named by the user or by another file (a capture's module paths): only
//! regular files, and never more than a bound, so a name like `/dev/zero` or a FIFO costs an
//! error, not a hang or all memory. And writing output files: whole or not at all, never
//! through a name someone else planted ([`NewFile`]).

use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The largest input file read whole (PDBs, assemblies named by captures and traces): 4 GiB.
pub const MAX_FILE: u64 = 4 << 30;

/// Open a regular file for reading. Anything else is `InvalidInput`, found before the open (which
/// would block on a FIFO).
pub fn open_regular(path: &Path) -> io::Result<std::fs::File> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    std::fs::File::open(path)
}

/// Read a regular file of at most `limit` bytes. Anything else (a directory, a device, a FIFO,
/// a socket) is `InvalidInput`, found from the file's metadata before any read.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    read_regular_into(path, limit, &mut bytes)?;
    Ok(bytes)
}

/// [`read_regular`] into `bytes`, which is cleared first and keeps its memory: a caller that
/// reads large files one after another (a trace's ReadyToRun images) pays for fresh pages once,
/// not once a file. After an error `bytes` holds no file's bytes but maybe some of this one's.
pub fn read_regular_into(path: &Path, limit: u64, bytes: &mut Vec<u8>) -> io::Result<()> {
    bytes.clear();
    // Look before opening: opening a FIFO for reading blocks until someone writes to it.
    if !std::fs::metadata(path)?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    if meta.len() > limit {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "file too large"));
    }
    // The length comes from the file system and is bounded above; read no more than it says
    // even if the file grows meanwhile.
    bytes.reserve(usize::try_from(meta.len()).unwrap_or(0));
    file.take(meta.len()).read_to_end(bytes)?;
    Ok(())
}

/// Open `path` for reading only if it is a regular file itself, not a link to one: the last
/// component is opened with `O_NOFOLLOW` (a symbolic link is refused by the kernel) and
/// `O_NONBLOCK` (a FIFO planted there cannot block the open), and the opened file is checked to
/// be regular. Meant for paths that another process can write to (a capture written by a
/// profiled process): whatever it plants there costs an error, never a hang or a read of
/// something else. A link is `InvalidInput` "a symbolic link", anything else not regular is
/// `InvalidInput` "not a regular file".
pub fn open_regular_nofollow(path: &Path) -> io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| match e {
        rustix::io::Errno::LOOP => io::Error::new(io::ErrorKind::InvalidInput, "a symbolic link"),
        e => io::Error::from(e),
    })?;
    let file = std::fs::File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(file)
}

/// Read what a regular file holds from `offset` on, at most `limit` bytes (bounded by the
/// length the file has when opened, so a file that grows meanwhile costs no more), opened as by
/// [`open_regular_nofollow`]. Returns the bytes and the file's length when it was opened (less
/// than `offset` means the file was truncated or replaced since the last read).
pub fn read_regular_nofollow_from(path: &Path, offset: u64, limit: u64) -> io::Result<(Vec<u8>, u64)> {
    use std::io::{Seek, SeekFrom};
    let mut file = open_regular_nofollow(path)?;
    let len = file.metadata()?.len();
    let want = len.saturating_sub(offset).min(limit);
    let mut bytes = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
    if want > 0 {
        file.seek(SeekFrom::Start(offset))?;
        file.take(want).read_to_end(&mut bytes)?;
    }
    Ok((bytes, len))
}

/// Read a regular file whole, at most `limit` bytes, opened as by [`open_regular_nofollow`]: a
/// larger file is `InvalidInput` "file too large".
pub fn read_regular_nofollow(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular_nofollow(path)?;
    let len = file.metadata()?.len();
    if len > limit {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "file too large"));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// A new file being written beside its destination, under a name of its own, that becomes the
/// destination only at [`NewFile::commit`]: until then an existing file there is untouched, and
/// a `NewFile` dropped without a commit is removed. The rule for every file clrmap writes for
/// the user (`trace collect -o`, `perf jitdump`, `perf map`).
///
/// - The temporary name (`.NAME.<random>.clrmap-tmp` in the same directory) is created
///   exclusively (`O_CREAT | O_EXCL`): a file or a symbolic link planted there is never written
///   through; another name is tried.
/// - The destination must be absent, a regular file, or a symbolic link; a directory, FIFO,
///   device or socket is refused (`InvalidInput` "not a regular file") before anything is
///   written, so nothing ever opens it. A symbolic link is replaced by the new file, never
///   written through (as `mv` does).
/// - An existing regular destination's permission bits are kept.
/// - Errors are those of the file system; callers name the destination in their message.
#[derive(Debug)]
pub struct NewFile {
    file: std::fs::File,
    tmp: PathBuf,
    path: PathBuf,
    committed: bool,
}

/// Check that `path` may be replaced: absent, a regular file or a symbolic link.
fn replaceable(path: &Path) -> io::Result<Option<std::fs::Metadata>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => Ok(Some(m)),
        Ok(m) if m.file_type().is_symlink() => Ok(None),
        Ok(_) => Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A number no other process can guess (std's hasher keys are random per process), for a
/// temporary name.
fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

impl NewFile {
    /// Create the temporary file for `path` (see the type's rules).
    pub fn create(path: &Path) -> io::Result<NewFile> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let existing = replaceable(path)?;
        let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut last = io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name");
        for _ in 0..16 {
            let mut tmp_name = std::ffi::OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(format!(".{:016x}.clrmap-tmp", nonce()));
            let tmp = dir.join(tmp_name);
            // create_new is O_CREAT | O_EXCL: it fails on any existing name, a dangling link too.
            match std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o666).open(&tmp) {
                Ok(file) => {
                    let new = NewFile { file, tmp, path: path.to_path_buf(), committed: false };
                    if let Some(m) = existing {
                        new.file.set_permissions(std::fs::Permissions::from_mode(m.permissions().mode() & 0o777))?;
                    }
                    return Ok(new);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// The file being written.
    pub fn file(&mut self) -> &mut std::fs::File {
        &mut self.file
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file's path (for a caller that must remove it without unwinding, such as a
    /// signal handler that exits the process).
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// Flush the file to disk and rename it over the destination. On failure the temporary file
    /// is removed and the destination is as it was.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.sync_all()?;
        // Checked again: a directory or FIFO put there meanwhile is refused, not replaced.
        replaceable(&self.path)?;
        std::fs::rename(&self.tmp, &self.path)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Write `bytes` as the new content of `path`, atomically: through a [`NewFile`], so `path` is
/// either as it was or the whole new file, never empty or half written, and nothing planted at a
/// temporary name is written through.
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut new = NewFile::create(path)?;
    new.file().write_all(bytes)?;
    new.commit()
}

/// Why an input file could not be opened: what the file layer, the PDB layer and the symbolizer
/// report (re-exported as `clrmap::symbolizer::OpenError`, where it lived before).
#[derive(Debug)]
pub enum OpenError {
    /// The file could not be read (missing, not a regular file, too large): the path and the
    /// reason.
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// The file is malformed: a kind and a location.
    Input {
        /// The file.
        path: PathBuf,
        /// The error.
        error: crate::base::read::Error,
    },
    /// The file is none of the known sources.
    Unrecognized {
        /// The file.
        path: PathBuf,
    },
    /// A PDB the user named belongs to no module of the source. `error` is the `pdb_mismatch`
    /// (with no location, as the PDB is whole); `detail` names the PDB's id and the PDB ids the
    /// source's modules recorded, so the user sees which build each is without another tool.
    NoModule {
        /// The PDB.
        path: PathBuf,
        /// The error.
        error: crate::base::read::Error,
        /// The ids, as words (`this PDB's id is ...; the source's modules: ...`).
        detail: String,
    },
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Io { path, error } => write!(f, "cannot read {}: {error}", path.display()),
            OpenError::Input { path, error } => write!(f, "{}: {error}", path.display()),
            OpenError::NoModule { path, error, detail } => write!(f, "{}: {error}; {detail}", path.display()),
            OpenError::Unrecognized { path } => {
                write!(f, "{}: neither a ReadyToRun image, a .nettrace trace nor a clrmap capture", path.display())
            }
        }
    }
}

impl std::error::Error for OpenError {}

/// What kind of file system object a non-regular file is, for an error that says why it was
/// refused.
fn what_is(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// [`read_regular`], with an error that names the path and says why: what the file is when it
/// is not a regular file (a directory, a FIFO, a device, a socket), its size and the bound when
/// it is too large, and the system's reason otherwise (missing, a symbolic-link loop, no
/// permission).
pub fn read_input(path: &Path, limit: u64) -> Result<Vec<u8>, OpenError> {
    check_input(path, Some(limit))?;
    read_regular(path, limit).map_err(|error| OpenError::Io { path: path.to_owned(), error })
}

/// [`open_regular`], with an error that names the path and says why, as [`read_input`]'s does
/// (for a file streamed rather than read whole, so with no bound on its size).
pub fn open_input(path: &Path) -> Result<std::fs::File, OpenError> {
    check_input(path, None)?;
    open_regular(path).map_err(|error| OpenError::Io { path: path.to_owned(), error })
}

/// Why `path` cannot be read as an input file of at most `limit` bytes, from its metadata.
fn check_input(path: &Path, limit: Option<u64>) -> Result<(), OpenError> {
    let io = |error: io::Error| OpenError::Io { path: path.to_owned(), error };
    match std::fs::metadata(path) {
        Err(e) => Err(io(e)),
        Ok(meta) if !meta.is_file() => {
            let what = what_is(&meta);
            let reason = if what == "not a regular file" { what.to_owned() } else { format!("not a regular file but {what}") };
            Err(io(io::Error::new(io::ErrorKind::InvalidInput, reason)))
        }
        Ok(meta) if limit.is_some_and(|l| meta.len() > l) => {
            let reason = format!("file too large: {} bytes, more than the {} bytes read whole", meta.len(), limit.unwrap_or_default());
            Err(io(io::Error::new(io::ErrorKind::InvalidInput, reason)))
        }
        Ok(_) => Ok(()),
    }
}

/// A file's identity, the same for every path that names it (symbolic links, `..`, hard links):
/// its device and inode. `None` where it cannot be read, or on systems without inodes.
pub fn file_id(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The longest file name a module may give (the common file-system limit).
const MAX_NAME: usize = 255;

/// Whether `name` names a file in the directory it is joined to, and nothing else: not empty,
/// `.` or `..`, no separator or NUL, at most 255 bytes. Every name that comes from an input (an
/// image's CodeView entry, a recording, a printed stack trace, a request) passes here before it
/// is joined to a symbol directory, so no input can make clrmap read outside one.
pub fn plain_file_name(name: &str) -> bool {
    !(name.is_empty() || name == "." || name == ".." || name.len() > MAX_NAME || name.contains(['/', '\\', '\0']))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("clrmap-fs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn mkfifo(p: &Path) {
        assert!(std::process::Command::new("mkfifo").arg(p).status().unwrap().success());
    }

    /// The directory's entries other than `keep`.
    fn others(d: &Path, keep: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| !keep.contains(&n.as_str())).collect();
        v.sort();
        v
    }

    #[test]
    fn a_new_file_replaces_only_at_commit_and_leaves_nothing_behind() {
        let d = dir("commit");
        let out = d.join("out.nettrace");
        std::fs::write(&out, b"old").unwrap();
        let mut new = NewFile::create(&out).unwrap();
        new.file().write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"old", "untouched until the commit");
        drop(new);
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
        assert_eq!(others(&d, &["out.nettrace"]), Vec::<String>::new(), "the temporary file is removed");
        write_new(&out, b"new").unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        assert_eq!(others(&d, &["out.nettrace"]), Vec::<String>::new());
        // Relative to the current directory, too (a bare name has an empty parent).
        assert!(NewFile::create(Path::new("")).is_err());
    }

    #[test]
    fn links_are_replaced_never_written_through_and_special_files_refused_without_blocking() {
        let d = dir("links");
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let out = d.join("out");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        write_new(&out, b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(std::fs::symlink_metadata(&out).unwrap().is_file());
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        // The old fixed temporary name, planted: not written through.
        std::os::unix::fs::symlink(&victim, d.join(".out.clrmap-tmp")).unwrap();
        write_new(&out, b"newer").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // A FIFO (no reader: opening it for writing would block) and a directory: refused.
        let fifo = d.join("fifo");
        mkfifo(&fifo);
        assert_eq!(write_new(&fifo, b"x").unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(write_new(&d, b"x").unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(others(&d, &["victim", "out", ".out.clrmap-tmp", "fifo"]), Vec::<String>::new());
    }

    #[test]
    fn a_failed_commit_removes_the_temporary_file_and_keeps_the_destination() {
        let d = dir("fail");
        let out = d.join("out");
        let mut new = NewFile::create(&out).unwrap();
        new.file().write_all(b"new").unwrap();
        // A directory put at the destination meanwhile, with a file in it.
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("inside"), b"kept").unwrap();
        assert!(new.commit().is_err());
        assert_eq!(std::fs::read(out.join("inside")).unwrap(), b"kept");
        assert_eq!(others(&d, &["out"]), Vec::<String>::new());
        // Permission bits of an existing file are kept.
        use std::os::unix::fs::PermissionsExt;
        let f = d.join("f");
        std::fs::write(&f, b"old").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_new(&f, b"new").unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o640);
    }

    #[test]
    fn nofollow_reads_refuse_links_fifos_and_devices_at_once() {
        let d = dir("nofollow");
        let file = d.join("capture");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_regular_nofollow(&file, 100).unwrap(), b"0123456789");
        assert_eq!(read_regular_nofollow(&file, 9).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(read_regular_nofollow_from(&file, 4, 3).unwrap(), (b"456".to_vec(), 10));
        assert_eq!(read_regular_nofollow_from(&file, 12, 3).unwrap(), (Vec::new(), 10));
        let link = d.join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_regular_nofollow(&link, 100).unwrap_err();
        assert_eq!((e.kind(), e.to_string().as_str()), (io::ErrorKind::InvalidInput, "a symbolic link"));
        let to_file = d.join("to-file");
        std::os::unix::fs::symlink(&file, &to_file).unwrap();
        assert_eq!(read_regular_nofollow(&to_file, 100).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let fifo = d.join("fifo");
        mkfifo(&fifo);
        let e = read_regular_nofollow(&fifo, 100).unwrap_err();
        assert_eq!((e.kind(), e.to_string().as_str()), (io::ErrorKind::InvalidInput, "not a regular file"));
        assert_eq!(read_regular_nofollow(Path::new("/dev/zero"), 100).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(read_regular_nofollow(&d.join("missing"), 100).unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}

//! [`DirStorage`]: a real directory on disk (positional I/O, `flock`-style writer lock).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{LockGuard, OpenMode, Storage, StorageFile};

/// `O_NOFOLLOW` for this platform (std does not export it; the value differs between
/// architectures and systems).
const O_NOFOLLOW: i32 = libc::O_NOFOLLOW;
/// `ELOOP`: what opening a symlink with `O_NOFOLLOW` fails with.
const ELOOP: i32 = libc::ELOOP;

/// A real directory on disk. It never writes through a symlink it did not create: files are
/// opened with `O_NOFOLLOW`, new ones with `O_EXCL` too, and a symlink where a directory is
/// expected is refused by [`Storage::create_dir`].
#[derive(Clone, Debug)]
pub struct DirStorage {
    root: PathBuf,
}

impl DirStorage {
    /// Storage rooted at `root` (not created until something is written).
    pub fn new(root: &Path) -> DirStorage {
        DirStorage {
            root: root.to_path_buf(),
        }
    }

    /// Fails when `dir`, or a directory between the root and it, exists but is a symlink or
    /// not a directory: creating files under it would write elsewhere.
    fn check_no_symlinked_dirs(&self, dir: &str) -> io::Result<()> {
        let mut at = self.root.clone();
        for part in dir.split('/').filter(|p| !p.is_empty()) {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => {}
                Ok(m) if m.is_symlink() => return Err(symlink_refused(&at)),
                Ok(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{} is not a directory", at.display()),
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn path(&self, name: &str) -> PathBuf {
        if name.is_empty() {
            self.root.clone()
        } else {
            self.root.join(name)
        }
    }
}

/// The error for a symlink found where ctxlog creates or writes a file or directory.
fn symlink_refused(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is a symlink: ctxlog never follows a symlink in a conversation directory",
            path.display()
        ),
    )
}

#[derive(Debug)]
struct DiskFile {
    file: File,
}

impl StorageFile for DiskFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }
    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// The writer lock: an exclusive `flock` on the `lock` file, held by this open file.
struct DiskLock {
    file: File,
}

impl Drop for DiskLock {
    /// Unlocks before the file is closed. A `flock` belongs to the open file, which a child
    /// process another thread is spawning shares until it runs `exec` (the descriptor is
    /// close-on-exec, but the fork copied it): closing ours alone would leave the lock held
    /// for that moment, and a writer opened right after this one was dropped would find the
    /// conversation locked. Unlocking releases it through every copy at once.
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

impl Storage for DirStorage {
    fn location(&self) -> PathBuf {
        self.root.clone()
    }

    fn open(&self, name: &str, mode: OpenMode) -> io::Result<Option<Box<dyn StorageFile>>> {
        let mut opts = OpenOptions::new();
        opts.read(true);
        match mode {
            OpenMode::Read => {}
            OpenMode::Write => {
                opts.write(true);
            }
            OpenMode::Create => {
                opts.write(true).create(true);
            }
            OpenMode::CreateNew => {
                opts.write(true).create_new(true);
            }
        }
        opts.custom_flags(O_NOFOLLOW);
        let creates = matches!(mode, OpenMode::Create | OpenMode::CreateNew);
        match opts.open(self.path(name)) {
            Ok(file) => Ok(Some(Box::new(DiskFile { file }))),
            Err(e) if e.kind() == io::ErrorKind::NotFound && !creates => Ok(None),
            Err(e) if e.raw_os_error() == Some(ELOOP) => Err(symlink_refused(&self.path(name))),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(io::Error::new(
                e.kind(),
                format!(
                    "{} already exists (a symlink or file planted where a new file is made)",
                    self.path(name).display()
                ),
            )),
            Err(e) => Err(e),
        }
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        self.path(name).try_exists()
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        std::fs::rename(self.path(from), self.path(to))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match std::fs::remove_file(self.path(name)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Creates `dir` and any missing ancestors, then syncs the parent of each directory it
    /// created: a new conversation directory is otherwise an unsynced entry of the store's
    /// root, and a power loss could take it, with every acknowledged commit inside it.
    fn create_dir(&self, dir: &str) -> io::Result<()> {
        self.check_no_symlinked_dirs(dir)?;
        let path = self.path(dir);
        let mut missing = Vec::new();
        let mut at = Some(path.as_path());
        while let Some(p) = at.filter(|p| !p.as_os_str().is_empty()) {
            if p.try_exists()? {
                break;
            }
            missing.push(p.to_path_buf());
            at = p.parent();
        }
        std::fs::create_dir_all(&path)?;
        for created in missing.iter().rev() {
            let parent = match created.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            File::open(parent)?.sync_all()?;
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &str) -> io::Result<()> {
        File::open(self.path(dir))?.sync_all()
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let rd = match std::fs::read_dir(self.path(dir)) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in rd {
            out.push(entry?.file_name().to_string_lossy().into_owned());
        }
        out.sort();
        Ok(out)
    }

    fn resolves_inside(&self, name: &str, within: &str) -> io::Result<bool> {
        let target = match std::fs::canonicalize(self.path(name)) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let base = std::fs::canonicalize(self.path(within))?;
        Ok(target.starts_with(&base) && target != base)
    }

    fn try_lock(&self, wait: Option<Duration>) -> io::Result<Option<LockGuard>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(O_NOFOLLOW)
            .open(self.path(crate::format::names::LOCK))
            .map_err(|e| match e.raw_os_error() {
                Some(ELOOP) => symlink_refused(&self.path(crate::format::names::LOCK)),
                _ => e,
            })?;
        let deadline = wait.map(|w| Instant::now() + w);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Some(Box::new(DiskLock { file }))),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => return Err(e),
            }
            match deadline {
                Some(d) if Instant::now() < d => std::thread::sleep(Duration::from_millis(10)),
                _ => return Ok(None),
            }
        }
    }

    fn is_dir(&self, name: &str) -> io::Result<bool> {
        match std::fs::symlink_metadata(self.path(name)) {
            Ok(m) => Ok(m.is_dir()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `std::fs::remove_dir_all`, which removes symlinks rather than following them.
    fn remove_all(&self, dir: &str) -> io::Result<()> {
        match std::fs::remove_dir_all(self.path(dir)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn scoped(&self, dir: &str) -> Arc<dyn Storage> {
        Arc::new(DirStorage::new(&self.path(dir)))
    }
}

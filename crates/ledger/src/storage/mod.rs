//! All file I/O goes through these traits, so every scenario runs on disk and in memory, and
//! tests can inject failed writes, failed syncs and torn writes.
//!
//! A [`Storage`] is one conversation directory; it hands out [`StorageFile`]s by relative name
//! (`"ledger.log"`, `"artifacts/sha256-…"`). Three backends ship: [`DirStorage`] (a real
//! directory), [`MemStorage`] (shared in-memory files, cheap to "reopen") and
//! [`FaultyStorage`] (wraps another and fails on command, see [`FaultPlan`]).
//!
//! A store of many conversations is a storage too: [`Storage::scoped`] gives the storage of
//! one of its subdirectories, [`Storage::is_dir`] and [`Storage::remove_all`] do the
//! store-level work, so that it can be crash- and fault-tested like the ledger's own.

use std::any::Any;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

mod dir;
mod faulty;
mod mem;

pub use dir::DirStorage;
pub use faulty::{FaultPlan, FaultyStorage};
pub use mem::MemStorage;

/// One file: positional reads and writes, length, truncation, durability.
pub trait StorageFile: Send + Sync {
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// True when the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Fills `buf` from `offset`; fails with `UnexpectedEof` if the file is shorter.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes all of `data` at `offset`, extending the file if needed.
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Truncates or extends the file to `len`.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// Makes everything written so far durable (fsync / fdatasync).
    fn sync(&mut self) -> io::Result<()>;
}

/// How [`Storage::open`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    Write,
    /// Read and write; created empty if missing.
    Create,
    /// Read and write; created, and an error (`AlreadyExists`) if anything is there already
    /// (`O_EXCL`: a planted symlink is never followed). For temporary and new files; remove a
    /// stale one first ([`Storage::remove`] never follows a symlink).
    CreateNew,
}

/// A held writer lock; released when dropped.
pub type LockGuard = Box<dyn Any + Send + Sync>;

/// A conversation directory: named files, renames, directory sync, the writer lock.
pub trait Storage: Send + Sync {
    /// Where this storage lives, for error messages (`<dir>` or `mem:<name>`).
    fn location(&self) -> PathBuf;
    /// Opens `name` (relative, `/`-separated). `Ok(None)` when it is missing and `mode` is not
    /// [`OpenMode::Create`] or [`OpenMode::CreateNew`]. The disk backend never follows a
    /// symlink at `name` itself (`O_NOFOLLOW`): opening one is an error.
    fn open(&self, name: &str, mode: OpenMode) -> io::Result<Option<Box<dyn StorageFile>>>;
    /// True when `name` exists.
    fn exists(&self, name: &str) -> io::Result<bool>;
    /// Atomically renames `from` to `to` (replacing `to`).
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Removes `name` if present.
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Creates the directory `dir` (and the root) if missing. The disk backend makes the new
    /// directory entries durable (it syncs their parents), and refuses (an error) when `dir`
    /// or a directory between the root and it is a symlink or not a directory.
    fn create_dir(&self, dir: &str) -> io::Result<()>;
    /// Makes renames and creations inside `dir` (`""` = root) durable.
    fn sync_dir(&self, dir: &str) -> io::Result<()>;
    /// Names of the entries directly inside `dir` (empty if it does not exist).
    fn list(&self, dir: &str) -> io::Result<Vec<String>>;
    /// True when `name`, after resolving symlinks, stays inside the directory `within`.
    /// Missing files count as not inside.
    fn resolves_inside(&self, name: &str, within: &str) -> io::Result<bool>;
    /// Takes the exclusive writer lock, waiting up to `wait`. `Ok(None)` = held elsewhere.
    fn try_lock(&self, wait: Option<Duration>) -> io::Result<Option<LockGuard>>;
    /// True when `name` is a directory (`""`: the root). A symlink is not a directory here,
    /// whatever it points to; a missing entry is `Ok(false)`.
    fn is_dir(&self, name: &str) -> io::Result<bool>;
    /// Removes the directory tree `dir` (`""`: the root itself) and everything in it; a
    /// missing `dir` is `Ok`. Never follows symlinks: a symlink inside the tree (or `dir`
    /// itself, when it is one) is removed, not what it points to.
    fn remove_all(&self, dir: &str) -> io::Result<()>;
    /// A storage rooted at the subdirectory `dir` of this one (not created until something is
    /// written). It shares this storage's state: files written through it are this
    /// storage's files under `dir/`, so in-memory crash images and fault plans cover it too.
    fn scoped(&self, dir: &str) -> Arc<dyn Storage>;
}

/// A shared storage is a storage (so `FaultyStorage<Arc<dyn Storage>>` wraps any backend).
impl<S: Storage + ?Sized> Storage for Arc<S> {
    fn location(&self) -> PathBuf {
        (**self).location()
    }
    fn open(&self, name: &str, mode: OpenMode) -> io::Result<Option<Box<dyn StorageFile>>> {
        (**self).open(name, mode)
    }
    fn exists(&self, name: &str) -> io::Result<bool> {
        (**self).exists(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        (**self).rename(from, to)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        (**self).remove(name)
    }
    fn create_dir(&self, dir: &str) -> io::Result<()> {
        (**self).create_dir(dir)
    }
    fn sync_dir(&self, dir: &str) -> io::Result<()> {
        (**self).sync_dir(dir)
    }
    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        (**self).list(dir)
    }
    fn resolves_inside(&self, name: &str, within: &str) -> io::Result<bool> {
        (**self).resolves_inside(name, within)
    }
    fn try_lock(&self, wait: Option<Duration>) -> io::Result<Option<LockGuard>> {
        (**self).try_lock(wait)
    }
    fn is_dir(&self, name: &str) -> io::Result<bool> {
        (**self).is_dir(name)
    }
    fn remove_all(&self, dir: &str) -> io::Result<()> {
        (**self).remove_all(dir)
    }
    fn scoped(&self, dir: &str) -> Arc<dyn Storage> {
        (**self).scoped(dir)
    }
}

/// Locks `m`, ignoring poisoning (a panicking test thread must not wedge the others).
pub(crate) fn lock_poisonless<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;

//! All file I/O goes through these traits, so every scenario runs on disk and in memory, and
//! tests can inject failed writes, failed syncs and torn writes.
//!
//! A [`Storage`] is one conversation directory; it hands out [`StorageFile`]s by relative name
//! (`"ledger.log"`, `"artifacts/sha256-…"`). Three backends ship: [`DirStorage`] (a real
//! directory), [`MemStorage`] (shared in-memory files, cheap to "reopen") and
//! [`FaultyStorage`] (wraps another and fails on command, see [`FaultPlan`]).

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

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
}

/// A held writer lock; released when dropped.
pub type LockGuard = Box<dyn Any + Send + Sync>;

/// A conversation directory: named files, renames, directory sync, the writer lock.
pub trait Storage: Send + Sync {
    /// Where this storage lives, for error messages (`<dir>` or `mem:<name>`).
    fn location(&self) -> PathBuf;
    /// Opens `name` (relative, `/`-separated). `Ok(None)` when it is missing and `mode` is not
    /// [`OpenMode::Create`].
    fn open(&self, name: &str, mode: OpenMode) -> io::Result<Option<Box<dyn StorageFile>>>;
    /// True when `name` exists.
    fn exists(&self, name: &str) -> io::Result<bool>;
    /// Atomically renames `from` to `to` (replacing `to`).
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Removes `name` if present.
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Creates the directory `dir` (and the root) if missing. The disk backend makes the new
    /// directory entries durable (it syncs their parents).
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
}

// ---- directory backend ------------------------------------------------------------------

/// A real directory on disk.
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

    fn path(&self, name: &str) -> PathBuf {
        if name.is_empty() {
            self.root.clone()
        } else {
            self.root.join(name)
        }
    }
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

struct DiskLock {
    _file: File,
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
        }
        match opts.open(self.path(name)) {
            Ok(file) => Ok(Some(Box::new(DiskFile { file }))),
            Err(e) if e.kind() == io::ErrorKind::NotFound && mode != OpenMode::Create => Ok(None),
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
            .open(self.path(crate::format::names::LOCK))?;
        let deadline = wait.map(|w| Instant::now() + w);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Some(Box::new(DiskLock { _file: file }))),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => return Err(e),
            }
            match deadline {
                Some(d) if Instant::now() < d => std::thread::sleep(Duration::from_millis(10)),
                _ => return Ok(None),
            }
        }
    }
}

// ---- in-memory backend ------------------------------------------------------------------

#[derive(Default)]
struct MemState {
    files: BTreeMap<String, Arc<Mutex<MemData>>>,
    dirs: BTreeSet<String>,
    locked: bool,
    /// Keep a copy of each file as of its last sync, for [`MemStorage::crash_image`].
    track_durability: bool,
}

/// One in-memory file: its bytes, and (when durability is tracked) its bytes as of the last
/// sync (`None`: never synced).
#[derive(Clone, Default)]
struct MemData {
    bytes: Vec<u8>,
    durable: Option<Vec<u8>>,
    track: bool,
}

impl MemData {
    fn new(bytes: Vec<u8>, track: bool) -> Arc<Mutex<MemData>> {
        Arc::new(Mutex::new(MemData {
            bytes,
            durable: None,
            track,
        }))
    }
}

/// In-memory files. Clones share the same files, so a test can drop a ledger and reopen the
/// "same directory". By default sync is a no-op (it can be faulted by wrapping in
/// [`FaultyStorage`]); [`MemStorage::with_crash_tracking`] also remembers what each file held
/// at its last sync, so [`MemStorage::crash_image`] can simulate a power loss.
#[derive(Clone, Default)]
pub struct MemStorage {
    state: Arc<Mutex<MemState>>,
}

fn lock_poisonless<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl MemStorage {
    /// An empty in-memory directory.
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    /// An empty in-memory directory that tracks what each file held at its last sync (each
    /// sync copies the file: for tests).
    pub fn with_crash_tracking() -> MemStorage {
        let m = MemStorage::default();
        lock_poisonless(&m.state).track_durability = true;
        m
    }

    /// What the directory could hold after a power loss now: each file keeps what it held at
    /// its last sync plus a prefix of what was appended since, `keep(name, unsynced_len)`
    /// bytes of it (a file rewritten in place since its last sync reverts to the synced
    /// bytes). Files never synced start empty. Renames and creations count as durable. The
    /// image tracks durability too, as of now.
    pub fn crash_image(&self, keep: &mut dyn FnMut(&str, usize) -> usize) -> MemStorage {
        let st = lock_poisonless(&self.state);
        let mut files = BTreeMap::new();
        for (name, data) in &st.files {
            let d = lock_poisonless(data);
            let durable = d.durable.clone().unwrap_or_default();
            let mut bytes = durable.clone();
            if d.bytes.starts_with(&durable) {
                let extra = &d.bytes[durable.len()..];
                bytes.extend_from_slice(&extra[..keep(name, extra.len()).min(extra.len())]);
            }
            let image = MemData {
                durable: Some(bytes.clone()),
                bytes,
                track: true,
            };
            files.insert(name.clone(), Arc::new(Mutex::new(image)));
        }
        let state = MemState {
            files,
            dirs: st.dirs.clone(),
            locked: false,
            track_durability: true,
        };
        MemStorage {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// A copy of the bytes of `name`, if it exists (for tests and crash images).
    pub fn file_bytes(&self, name: &str) -> Option<Vec<u8>> {
        let st = lock_poisonless(&self.state);
        st.files.get(name).map(|f| lock_poisonless(f).bytes.clone())
    }

    /// Replaces (or creates) `name` with `bytes` (for tests and crash images).
    pub fn set_file_bytes(&self, name: &str, bytes: Vec<u8>) {
        let mut st = lock_poisonless(&self.state);
        let track = st.track_durability;
        st.files
            .insert(name.to_string(), MemData::new(bytes, track));
    }

    /// An independent deep copy (a snapshot of the directory).
    pub fn deep_clone(&self) -> MemStorage {
        let st = lock_poisonless(&self.state);
        let files = st
            .files
            .iter()
            .map(|(k, v)| (k.clone(), Arc::new(Mutex::new(lock_poisonless(v).clone()))))
            .collect();
        MemStorage {
            state: Arc::new(Mutex::new(MemState {
                files,
                dirs: st.dirs.clone(),
                locked: false,
                track_durability: st.track_durability,
            })),
        }
    }
}

struct MemFile {
    data: Arc<Mutex<MemData>>,
    writable: bool,
}

fn read_only_error() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, "file opened read-only")
}

impl StorageFile for MemFile {
    fn len(&self) -> io::Result<u64> {
        Ok(lock_poisonless(&self.data).bytes.len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = lock_poisonless(&self.data);
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let end = start
            .checked_add(buf.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        if end > data.bytes.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&data.bytes[start..end]);
        Ok(())
    }
    fn write_at(&mut self, offset: u64, src: &[u8]) -> io::Result<()> {
        if !self.writable {
            return Err(read_only_error());
        }
        let mut data = lock_poisonless(&self.data);
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        let end = start
            .checked_add(src.len())
            .ok_or(io::ErrorKind::InvalidInput)?;
        if data.bytes.len() < end {
            data.bytes.resize(end, 0);
        }
        data.bytes[start..end].copy_from_slice(src);
        Ok(())
    }
    fn set_len(&mut self, len: u64) -> io::Result<()> {
        if !self.writable {
            return Err(read_only_error());
        }
        let len = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        lock_poisonless(&self.data).bytes.resize(len, 0);
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        let mut data = lock_poisonless(&self.data);
        if data.track {
            data.durable = Some(data.bytes.clone());
        }
        Ok(())
    }
}

struct MemLock {
    state: Arc<Mutex<MemState>>,
}

impl Drop for MemLock {
    fn drop(&mut self) {
        lock_poisonless(&self.state).locked = false;
    }
}

fn parent_of(name: &str) -> &str {
    name.rfind('/').map_or("", |i| &name[..i])
}

impl Storage for MemStorage {
    fn location(&self) -> PathBuf {
        PathBuf::from("mem:")
    }

    fn open(&self, name: &str, mode: OpenMode) -> io::Result<Option<Box<dyn StorageFile>>> {
        let mut st = lock_poisonless(&self.state);
        let parent = parent_of(name);
        let data = match st.files.get(name) {
            Some(d) => d.clone(),
            None if mode == OpenMode::Create => {
                if !parent.is_empty() && !st.dirs.contains(parent) {
                    return Err(io::ErrorKind::NotFound.into());
                }
                let d = MemData::new(Vec::new(), st.track_durability);
                st.files.insert(name.to_string(), d.clone());
                d
            }
            None => return Ok(None),
        };
        Ok(Some(Box::new(MemFile {
            data,
            writable: mode != OpenMode::Read,
        })))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        let st = lock_poisonless(&self.state);
        Ok(st.files.contains_key(name) || st.dirs.contains(name))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut st = lock_poisonless(&self.state);
        let d = st.files.remove(from).ok_or(io::ErrorKind::NotFound)?;
        st.files.insert(to.to_string(), d);
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        lock_poisonless(&self.state).files.remove(name);
        Ok(())
    }

    fn create_dir(&self, dir: &str) -> io::Result<()> {
        lock_poisonless(&self.state).dirs.insert(dir.to_string());
        Ok(())
    }

    fn sync_dir(&self, _dir: &str) -> io::Result<()> {
        Ok(())
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let st = lock_poisonless(&self.state);
        let prefix = format!("{dir}/");
        Ok(st
            .files
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter(|rest| !rest.contains('/'))
            .map(str::to_string)
            .collect())
    }

    fn resolves_inside(&self, name: &str, within: &str) -> io::Result<bool> {
        let st = lock_poisonless(&self.state);
        let exists = st.files.contains_key(name) || st.dirs.contains(name);
        let inside = within.is_empty() || name.starts_with(&format!("{within}/"));
        Ok(exists
            && inside
            && !name
                .split('/')
                .any(|c| c == ".." || c == "." || c.is_empty()))
    }

    fn try_lock(&self, _wait: Option<Duration>) -> io::Result<Option<LockGuard>> {
        let mut st = lock_poisonless(&self.state);
        if st.locked {
            return Ok(None);
        }
        st.locked = true;
        Ok(Some(Box::new(MemLock {
            state: self.state.clone(),
        })))
    }
}

// ---- fault injection --------------------------------------------------------------------

/// What [`FaultyStorage`] should break. Counters count calls across all files opened through
/// the storage (writes and syncs of every file, including sidecars and artifacts).
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    /// Fail the write whose 0-based number (counting from now) is this.
    pub fail_write: Option<u64>,
    /// Fail the sync (file or directory) whose 0-based number is this.
    pub fail_sync: Option<u64>,
    /// Tear write number `.0`: write only its first `.1` bytes, then fail.
    pub tear_write: Option<(u64, usize)>,
    /// Restrict faults to file names containing this (e.g. `"ledger.log"`).
    pub only_files: Option<String>,
    /// Writes counted so far (of files the plan applies to).
    pub writes: u64,
    /// Syncs counted so far (of files and directories the plan applies to).
    pub syncs: u64,
    /// How many faults fired so far.
    pub fired: u64,
}

impl FaultPlan {
    fn applies(&self, name: &str) -> bool {
        self.only_files.as_deref().is_none_or(|f| name.contains(f))
    }
}

/// Wraps a storage and fails writes or syncs according to a shared [`FaultPlan`].
#[derive(Clone)]
pub struct FaultyStorage<S> {
    inner: S,
    plan: Arc<Mutex<FaultPlan>>,
}

impl<S: Storage> FaultyStorage<S> {
    /// Wraps `inner` with no faults planned.
    pub fn new(inner: S) -> FaultyStorage<S> {
        FaultyStorage {
            inner,
            plan: Arc::new(Mutex::new(FaultPlan::default())),
        }
    }

    /// Replaces the plan (counters restart from zero).
    pub fn set_plan(&self, plan: FaultPlan) {
        *lock_poisonless(&self.plan) = plan;
    }

    /// The current plan and its counters.
    pub fn plan(&self) -> FaultPlan {
        lock_poisonless(&self.plan).clone()
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} failure"))
}

struct FaultyFile {
    name: String,
    inner: Box<dyn StorageFile>,
    plan: Arc<Mutex<FaultPlan>>,
}

impl StorageFile for FaultyFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut plan = lock_poisonless(&self.plan);
        if !plan.applies(&self.name) {
            drop(plan);
            return self.inner.write_at(offset, data);
        }
        let n = plan.writes;
        plan.writes += 1;
        if plan.fail_write == Some(n) {
            plan.fired += 1;
            return Err(injected("write"));
        }
        if let Some((at, keep)) = plan.tear_write
            && at == n
        {
            plan.fired += 1;
            drop(plan);
            self.inner.write_at(offset, &data[..keep.min(data.len())])?;
            return Err(injected("torn write"));
        }
        drop(plan);
        self.inner.write_at(offset, data)
    }
    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&mut self) -> io::Result<()> {
        let mut plan = lock_poisonless(&self.plan);
        if plan.applies(&self.name) {
            let n = plan.syncs;
            plan.syncs += 1;
            if plan.fail_sync == Some(n) {
                plan.fired += 1;
                return Err(injected("sync"));
            }
        }
        drop(plan);
        self.inner.sync()
    }
}

impl<S: Storage> Storage for FaultyStorage<S> {
    fn location(&self) -> PathBuf {
        self.inner.location()
    }
    fn open(&self, name: &str, mode: OpenMode) -> io::Result<Option<Box<dyn StorageFile>>> {
        Ok(self.inner.open(name, mode)?.map(|inner| {
            Box::new(FaultyFile {
                name: name.to_string(),
                inner,
                plan: self.plan.clone(),
            }) as Box<dyn StorageFile>
        }))
    }
    fn exists(&self, name: &str) -> io::Result<bool> {
        self.inner.exists(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn create_dir(&self, dir: &str) -> io::Result<()> {
        self.inner.create_dir(dir)
    }
    fn sync_dir(&self, dir: &str) -> io::Result<()> {
        let mut plan = lock_poisonless(&self.plan);
        if plan.applies(dir) {
            let n = plan.syncs;
            plan.syncs += 1;
            if plan.fail_sync == Some(n) {
                plan.fired += 1;
                return Err(injected("directory sync"));
            }
        }
        drop(plan);
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn resolves_inside(&self, name: &str, within: &str) -> io::Result<bool> {
        self.inner.resolves_inside(name, within)
    }
    fn try_lock(&self, wait: Option<Duration>) -> io::Result<Option<LockGuard>> {
        self.inner.try_lock(wait)
    }
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
}

//! [`MemStorage`]: shared in-memory files, with optional durability tracking for crash images.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{LockGuard, OpenMode, Storage, StorageFile, lock_poisonless};

#[derive(Default)]
struct MemState {
    files: BTreeMap<String, Arc<Mutex<MemData>>>,
    dirs: BTreeSet<String>,
    /// The directories whose writer lock is held (`""`: the root).
    locked: BTreeSet<String>,
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
/// [`FaultyStorage`](super::FaultyStorage)); [`MemStorage::with_crash_tracking`] also remembers what each file held
/// at its last sync, so [`MemStorage::crash_image`] can simulate a power loss.
///
/// [`Storage::scoped`] gives a view of a subdirectory that shares the same files: names
/// through it are stored with the prefix `dir/`.
#[derive(Clone, Default)]
pub struct MemStorage {
    state: Arc<Mutex<MemState>>,
    /// The directory this view is rooted at (`""`: the root), without a trailing `/`.
    prefix: String,
}

impl MemStorage {
    /// The stored name of `name` (relative to this view).
    fn full(&self, name: &str) -> String {
        match (self.prefix.is_empty(), name.is_empty()) {
            (true, _) => name.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) => format!("{}/{name}", self.prefix),
        }
    }

    fn with_state(&self, state: MemState) -> MemStorage {
        MemStorage {
            state: Arc::new(Mutex::new(state)),
            prefix: self.prefix.clone(),
        }
    }

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
            locked: BTreeSet::new(),
            track_durability: true,
        };
        self.with_state(state)
    }

    /// A copy of the bytes of `name`, if it exists (for tests and crash images).
    pub fn file_bytes(&self, name: &str) -> Option<Vec<u8>> {
        let st = lock_poisonless(&self.state);
        let name = self.full(name);
        st.files
            .get(&name)
            .map(|f| lock_poisonless(f).bytes.clone())
    }

    /// Replaces (or creates) `name` with `bytes` (for tests and crash images).
    pub fn set_file_bytes(&self, name: &str, bytes: Vec<u8>) {
        let mut st = lock_poisonless(&self.state);
        let track = st.track_durability;
        st.files.insert(self.full(name), MemData::new(bytes, track));
    }

    /// An independent deep copy (a snapshot of the directory).
    pub fn deep_clone(&self) -> MemStorage {
        let st = lock_poisonless(&self.state);
        let files = st
            .files
            .iter()
            .map(|(k, v)| (k.clone(), Arc::new(Mutex::new(lock_poisonless(v).clone()))))
            .collect();
        self.with_state(MemState {
            files,
            dirs: st.dirs.clone(),
            locked: BTreeSet::new(),
            track_durability: st.track_durability,
        })
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
    dir: String,
}

impl Drop for MemLock {
    fn drop(&mut self) {
        lock_poisonless(&self.state).locked.remove(&self.dir);
    }
}

/// True when the stored name `name` is `dir` or lies under it (`""` holds everything).
fn within(name: &str, dir: &str) -> bool {
    dir.is_empty() || name == dir || name.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

fn parent_of(name: &str) -> &str {
    name.rfind('/').map_or("", |i| &name[..i])
}

impl Storage for MemStorage {
    fn location(&self) -> PathBuf {
        PathBuf::from("mem:").join(&self.prefix)
    }

    fn open(&self, name: &str, mode: OpenMode) -> io::Result<Option<Box<dyn StorageFile>>> {
        let name = self.full(name);
        let mut st = lock_poisonless(&self.state);
        let parent = parent_of(&name);
        let data = match st.files.get(&name) {
            Some(_) if mode == OpenMode::CreateNew => {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            Some(d) => d.clone(),
            None if matches!(mode, OpenMode::Create | OpenMode::CreateNew) => {
                if !parent.is_empty() && !st.dirs.contains(parent) {
                    return Err(io::ErrorKind::NotFound.into());
                }
                let d = MemData::new(Vec::new(), st.track_durability);
                st.files.insert(name, d.clone());
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
        let name = self.full(name);
        let st = lock_poisonless(&self.state);
        Ok(st.files.contains_key(&name) || st.dirs.contains(&name))
    }

    /// Renames a file, or a directory with everything in it (as `rename(2)` does).
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (self.full(from), self.full(to));
        let mut st = lock_poisonless(&self.state);
        if let Some(d) = st.files.remove(&from) {
            st.files.insert(to, d);
            return Ok(());
        }
        if !st.dirs.contains(&from) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let moved = |name: &str| {
            name.strip_prefix(from.as_str())
                .filter(|rest| rest.starts_with('/'))
                .map(|rest| format!("{to}{rest}"))
        };
        let files: Vec<String> = st
            .files
            .keys()
            .filter(|k| moved(k).is_some())
            .cloned()
            .collect();
        for name in files {
            if let (Some(d), Some(new)) = (st.files.remove(&name), moved(&name)) {
                st.files.insert(new, d);
            }
        }
        let dirs: Vec<String> = st
            .dirs
            .iter()
            .filter(|k| moved(k).is_some())
            .cloned()
            .collect();
        for name in dirs {
            st.dirs.remove(&name);
            if let Some(new) = moved(&name) {
                st.dirs.insert(new);
            }
        }
        st.dirs.remove(&from);
        st.dirs.insert(to);
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        lock_poisonless(&self.state).files.remove(&self.full(name));
        Ok(())
    }

    fn create_dir(&self, dir: &str) -> io::Result<()> {
        lock_poisonless(&self.state).dirs.insert(self.full(dir));
        Ok(())
    }

    fn sync_dir(&self, _dir: &str) -> io::Result<()> {
        Ok(())
    }

    /// Files and directories directly inside `dir`, sorted (a directory implied by a file
    /// path counts too).
    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let dir = self.full(dir);
        let st = lock_poisonless(&self.state);
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let names: BTreeSet<String> = st
            .files
            .keys()
            .chain(&st.dirs)
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter_map(|rest| rest.split('/').next())
            .filter(|first| !first.is_empty())
            .map(str::to_string)
            .collect();
        Ok(names.into_iter().collect())
    }

    fn resolves_inside(&self, name: &str, within: &str) -> io::Result<bool> {
        let st = lock_poisonless(&self.state);
        let full = self.full(name);
        let exists = st.files.contains_key(&full) || st.dirs.contains(&full);
        let inside = within.is_empty() || name.starts_with(&format!("{within}/"));
        Ok(exists
            && inside
            && !name
                .split('/')
                .any(|c| c == ".." || c == "." || c.is_empty()))
    }

    fn try_lock(&self, _wait: Option<Duration>) -> io::Result<Option<LockGuard>> {
        let mut st = lock_poisonless(&self.state);
        if !st.locked.insert(self.prefix.clone()) {
            return Ok(None);
        }
        Ok(Some(Box::new(MemLock {
            state: self.state.clone(),
            dir: self.prefix.clone(),
        })))
    }

    fn is_dir(&self, name: &str) -> io::Result<bool> {
        let name = self.full(name);
        let st = lock_poisonless(&self.state);
        let prefix = format!("{name}/");
        Ok(name.is_empty()
            || st.dirs.contains(&name)
            || st
                .files
                .keys()
                .chain(&st.dirs)
                .any(|k| k.starts_with(&prefix)))
    }

    fn remove_all(&self, dir: &str) -> io::Result<()> {
        let dir = self.full(dir);
        let mut st = lock_poisonless(&self.state);
        st.files.retain(|k, _| !within(k, &dir));
        st.dirs.retain(|k| !within(k, &dir));
        Ok(())
    }

    fn scoped(&self, dir: &str) -> Arc<dyn Storage> {
        Arc::new(MemStorage {
            state: self.state.clone(),
            prefix: self.full(dir),
        })
    }
}

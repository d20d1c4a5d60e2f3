//! [`FaultyStorage`]: wraps another storage and fails writes or syncs on command.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{LockGuard, OpenMode, Storage, StorageFile, lock_poisonless};

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
    /// Panic at the write whose 0-based number is this, before writing anything: the thread
    /// dies inside the operation (a caller's `catch_unwind` sees the panic).
    pub panic_write: Option<u64>,
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
        if plan.panic_write == Some(n) {
            plan.fired += 1;
            drop(plan);
            panic!("injected panic at write {n} of {}", self.name);
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
    fn is_dir(&self, name: &str) -> io::Result<bool> {
        self.inner.is_dir(name)
    }
    fn remove_all(&self, dir: &str) -> io::Result<()> {
        self.inner.remove_all(dir)
    }
    /// The scoped inner storage, wrapped with this storage's (shared) fault plan.
    fn scoped(&self, dir: &str) -> Arc<dyn Storage> {
        Arc::new(FaultyStorage {
            inner: self.inner.scoped(dir),
            plan: self.plan.clone(),
        })
    }
}

//! Failure class: cost that grows with the ledger (docs/design.md#l7-bounded-memory).
//!
//! Guarantee: opening a conversation (writer or reader) and reading its last turns reads a
//! bounded number of bytes that does not grow with the log: the sidecar index is checked
//! against the log's tail, not rebuilt; only `turns.idx` and `notes.idx` (8 bytes per turn
//! and per note) are read whole.
//! Measured by counting every byte read through the storage trait, for a ledger ten times
//! larger than another. (Timings for a multi-hundred-MB ledger: `large_ledger.rs`, ignored.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use ctxlog_ledger::storage::{LockGuard, OpenMode};
use ctxlog_ledger::{
    Ledger, LedgerRead, MemStorage, Options, Reader, Storage, StorageFile, SyncMode,
};

/// Counts bytes read through it.
#[derive(Clone)]
struct Counting {
    inner: MemStorage,
    read: Arc<AtomicU64>,
}

struct CountingFile {
    inner: Box<dyn StorageFile>,
    read: Arc<AtomicU64>,
}

impl StorageFile for CountingFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read.fetch_add(buf.len() as u64, Ordering::SeqCst);
        self.inner.read_at(offset, buf)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
}

impl Storage for Counting {
    fn location(&self) -> PathBuf {
        self.inner.location()
    }
    fn open(&self, name: &str, mode: OpenMode) -> io::Result<Option<Box<dyn StorageFile>>> {
        Ok(self.inner.open(name, mode)?.map(|inner| {
            Box::new(CountingFile {
                inner,
                read: self.read.clone(),
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
    /// Not counted: these tests read through the root only.
    fn scoped(&self, dir: &str) -> Arc<dyn Storage> {
        self.inner.scoped(dir)
    }
}

/// A ledger of `turns` agent turns (user, call, result, reply), each about 1 KiB, with a
/// note every 10 turns.
fn build(turns: u64) -> MemStorage {
    let m = MemStorage::new();
    let mut opts = Options::default();
    opts.sync(SyncMode::Never);
    let (mut ledger, _) = Ledger::open_with(Arc::new(m.clone()), &opts).unwrap();
    let filler = "f".repeat(800);
    for i in 0..turns {
        let id = format!("c{i}");
        ledger
            .commit(&commit(vec![
                user(&format!("q{i}")),
                call(&id),
                result(&id, &filler),
                assistant("ok"),
            ]))
            .unwrap();
        if i % 10 == 0 {
            ledger
                .commit(&commit(vec![note(&format!("n{i}"))]))
                .unwrap();
        }
    }
    m
}

/// Bytes read by: open a writer, read the last 3 turns, commit one turn with an id; then
/// open a reader and read the last 3 turns.
fn bytes_read(m: &MemStorage) -> (u64, u64, u64) {
    let c = Counting {
        inner: m.clone(),
        read: Arc::new(AtomicU64::new(0)),
    };
    let (mut ledger, report) = Ledger::open_with(Arc::new(c.clone()), &Options::default()).unwrap();
    assert!(report.is_clean() && !report.index_rebuilt);
    let tail = ledger.last_turns(3).unwrap();
    assert_eq!(tail.len(), 12);
    let notes = ledger.note_seqs().len();
    let mut t = turn(0);
    t.id = Some("fresh".into());
    ledger.commit(&t).unwrap();
    let writer = c.read.swap(0, Ordering::SeqCst);
    drop(ledger);
    let reader = Reader::open_with(Arc::new(c.clone())).unwrap();
    assert_eq!(reader.last_turns(3).unwrap().len(), 10);
    assert_eq!(reader.note_seqs().len(), notes);
    let read = c.read.swap(0, Ordering::SeqCst);
    (
        writer,
        read,
        m.file_bytes("ledger.log").unwrap().len() as u64,
    )
}

#[test]
fn open_and_tail_reads_do_not_grow_with_the_ledger() {
    let (w_small, r_small, log_small) = bytes_read(&build(300));
    let (w_big, r_big, log_big) = bytes_read(&build(3_000));
    assert!(log_big > 9 * log_small);
    // The only growth allowed is turns.idx and notes.idx: 8 bytes per turn and per note (and
    // the commits.idx entries, read once by the first id-carrying commit: none here but
    // "fresh").
    let allowed = 8 * (2_700 + 270) + 4_096;
    assert!(
        w_big <= w_small + allowed,
        "writer read {w_small} then {w_big} bytes"
    );
    assert!(
        r_big <= r_small + allowed,
        "reader read {r_small} then {r_big} bytes"
    );
    assert!(
        w_big < log_big / 50,
        "writer read {w_big} of {log_big} bytes"
    );
    eprintln!(
        "log {log_small} → {log_big} bytes; writer read {w_small} → {w_big}; reader {r_small} → {r_big}"
    );
}

//! The concurrency of one [`Store`](super::Store): per conversation a [`Slot`] holding its
//! writer (leased to one caller at a time, with the queue of commits waiting for it: group
//! commit) and a pool of read handles. "Lease" names a caller's hold on the writer; a "turn"
//! is always a conversation's turn.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, RwLock};

use ctxlog_ledger::{CommitReceipt, NewCommit};

use crate::{Conversation, Error, Result, Snapshot};

/// Read handles kept per conversation for reuse.
pub(super) const POOLED_READERS: usize = 4;

/// One conversation's cached handles.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) writer: Mutex<WriterState>,
    /// Signalled when the writer is handed back.
    pub(super) writer_free: Condvar,
    pub(super) readers: Mutex<Vec<Snapshot>>,
    /// Reads hold it shared; operations that delete or replace files readers have open (the
    /// recall index on reindex and erase, the whole directory on erase of all) hold it
    /// exclusively, so no read runs on a file being replaced.
    pub(super) files: RwLock<()>,
}

#[derive(Default)]
pub(super) struct WriterState {
    pub(super) busy: bool,
    pub(super) handle: Option<Conversation>,
    /// Commits waiting for the writer, oldest first: the next holder writes them all as one
    /// batch (group commit).
    pub(super) queue: Vec<Queued>,
    /// Results of commits a batch wrote, until their callers pick them up.
    pub(super) done: HashMap<u64, Result<CommitReceipt>>,
    pub(super) next_ticket: u64,
}

/// A commit waiting in a conversation's queue.
pub(super) struct Queued {
    pub(super) ticket: u64,
    pub(super) commit: NewCommit,
}

/// Exclusive use of a conversation's writer slot; hands it back when dropped, with the
/// results of the batch written meanwhile.
pub(super) struct WriterLease<'a> {
    slot: &'a Slot,
    /// The writer, when open (a lease starts with the one kept from the last, if any).
    pub(super) handle: Option<Conversation>,
    /// The queued commits this lease took to write (their callers wait for an answer).
    pub(super) taken: Vec<u64>,
    /// Their results, handed to their callers when the lease ends.
    pub(super) answers: Vec<(u64, Result<CommitReceipt>)>,
}

impl<'a> WriterLease<'a> {
    pub(super) fn new(slot: &'a Slot, handle: Option<Conversation>) -> WriterLease<'a> {
        WriterLease {
            slot,
            handle,
            taken: Vec::new(),
            answers: Vec::new(),
        }
    }
}

impl Drop for WriterLease<'_> {
    fn drop(&mut self) {
        // A panic while writing may leave staged, unwritten commits in the writer's memory:
        // it is closed here, its lock released before anyone else can take the writer, and
        // the next commit reopens the conversation from disk, as after a crash.
        let handle = self.handle.take().filter(|_| !std::thread::panicking());
        let mut state = lock(&self.slot.writer);
        state.handle = handle;
        state.busy = false;
        state.done.extend(self.answers.drain(..));
        for ticket in self.taken.drain(..) {
            state.done.entry(ticket).or_insert_with(|| {
                Err(Error::Internal {
                    reason: "the thread writing this commit panicked: it was not acknowledged \
                             (it may be in the log, as after a crash)"
                        .into(),
                })
            });
        }
        drop(state);
        // Every waiter: the callers of the batch just written pick up their results, one
        // of the others takes the writer.
        self.slot.writer_free.notify_all();
    }
}

/// A poisoned lock only means another thread panicked while holding it; the state it guards
/// is handed back whole by the leases above, so it stays usable.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Hands a read handle back to `slot`'s pool (up to [`POOLED_READERS`]).
pub(super) fn pool_reader(slot: &Slot, handle: Snapshot) {
    let mut pool = lock(&slot.readers);
    if pool.len() < POOLED_READERS {
        pool.push(handle);
    }
}

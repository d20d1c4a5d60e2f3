//! [`GroupWriter`]: one conversation's writer shared by threads, committing whatever they
//! queued meanwhile as one batch with one sync (group commit, SPEC L1).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::{Error, Result};
use crate::event::NewCommit;
use crate::ledger::{CommitReceipt, Ledger};

/// A [`Ledger`] shared by threads, with group commit.
///
/// [`GroupWriter::commit`] queues the commit, then waits for the writer. The thread that
/// gets it (the leader) takes every commit queued so far, its own included, and writes them
/// with [`Ledger::commit_batch`]: one append and one sync for all. Commits that arrive while
/// it syncs form the next batch. Each caller gets its own commit's result, and only after the
/// sync that covers its bytes: a receipt means what a receipt of [`Ledger::commit`] means
/// (with [`crate::SyncMode::PerCommit`], on disk). A refused commit (invalid, too large, an
/// id conflict) fails alone; the others of its batch are written. When the batch's write or
/// sync fails, every commit of it fails (none was acknowledged; a failed sync poisons the
/// writer, as for a single commit).
///
/// With one thread there is nothing to group: each commit is a batch of one. The gain is for
/// many threads committing to the same conversation, which a plain `Mutex<Ledger>` would
/// serialize one sync each (`docs/benchmarks.md`, "Commit throughput under concurrency").
///
/// ```
/// use std::sync::Arc;
/// use ctxlog_ledger::{EventBody, GroupWriter, Ledger, LedgerRead, NewCommit, Options};
/// # fn main() -> ctxlog_ledger::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let (ledger, _) = Ledger::open(dir.path(), &Options::default())?;
/// let writer = Arc::new(GroupWriter::new(ledger));
/// let threads: Vec<_> = (0..4)
///     .map(|t| {
///         let writer = writer.clone();
///         std::thread::spawn(move || {
///             writer.commit(&NewCommit {
///                 id: None,
///                 events: vec![EventBody::User { text: format!("from thread {t}") }],
///             })
///         })
///     })
///     .collect();
/// for t in threads {
///     t.join().unwrap()?;
/// }
/// assert_eq!(writer.with(|ledger| ledger.last_seq()), 4);
/// # Ok(()) }
/// ```
pub struct GroupWriter {
    ledger: Mutex<Ledger>,
    queue: Mutex<Queue>,
}

/// Commits waiting for a leader, and the results of batches not yet picked up.
#[derive(Default)]
struct Queue {
    next_ticket: u64,
    waiting: Vec<(u64, NewCommit)>,
    done: HashMap<u64, Result<CommitReceipt>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl GroupWriter {
    /// Shares `ledger` between threads.
    pub fn new(ledger: Ledger) -> GroupWriter {
        GroupWriter {
            ledger: Mutex::new(ledger),
            queue: Mutex::new(Queue::default()),
        }
    }

    /// Commits `commit` in the next batch and returns its receipt once the batch is synced.
    ///
    /// # Errors
    /// As [`Ledger::commit`]. A failed write or sync of the batch fails every commit of it;
    /// [`Error::Poisoned`] also once a thread panicked while holding the writer (reopen the
    /// conversation to go on).
    pub fn commit(&self, commit: &NewCommit) -> Result<CommitReceipt> {
        let ticket = {
            let mut q = lock(&self.queue);
            let ticket = q.next_ticket;
            q.next_ticket += 1;
            q.waiting.push((ticket, commit.clone()));
            ticket
        };
        // A thread that panicked while writing a batch may have left staged commits in the
        // writer's memory that were never written: refuse, as after a failed sync.
        let Ok(mut ledger) = self.ledger.lock() else {
            let mut q = lock(&self.queue);
            q.done.remove(&ticket);
            q.waiting.retain(|(t, _)| *t != ticket);
            return Err(Error::Poisoned);
        };
        // A leader that held the writer meanwhile may have taken this commit: it left the
        // result before letting go of the writer.
        if let Some(result) = lock(&self.queue).done.remove(&ticket) {
            return result;
        }
        let (tickets, commits): (Vec<u64>, Vec<NewCommit>) =
            std::mem::take(&mut lock(&self.queue).waiting)
                .into_iter()
                .unzip();
        let results = match ledger.commit_batch(&commits) {
            Ok(results) => results,
            Err(e) => tickets.iter().map(|_| Err(e.for_each_commit())).collect(),
        };
        let mut mine = None;
        let mut q = lock(&self.queue);
        for (t, result) in tickets.into_iter().zip(results) {
            if t == ticket {
                mine = Some(result);
            } else {
                q.done.insert(t, result);
            }
        }
        drop(q);
        drop(ledger);
        // Only a panic inside an earlier batch can have lost this commit's result.
        mine.unwrap_or(Err(Error::Poisoned))
    }

    /// Runs `f` with the writer (to read, erase, or commit alone), between batches. After a
    /// thread panicked while holding the writer, its in-memory state may be wrong: reopen.
    pub fn with<T>(&self, f: impl FnOnce(&mut Ledger) -> T) -> T {
        f(&mut lock(&self.ledger))
    }

    /// The writer back, once no thread shares it.
    pub fn into_inner(self) -> Ledger {
        self.ledger
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

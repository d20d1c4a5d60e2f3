//! The one writer of a conversation: open (lock, recover), commit (validate, store artifacts,
//! append, sync, update the sidecars), erase.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::commit::Preparer;
use crate::erase::{ErasureReport, Reach};
use crate::error::{Error, Result};
use crate::event::{ArtifactRef, EventBody, EventKind, NewCommit, SystemMarker};
use crate::files::{io_err, now_ms};
use crate::format::{CommitEntry, names};
use crate::options::{Options, SyncMode};
use crate::recovery::{self, RecoveryReport};
use crate::rules;
use crate::scan::Tail;
use crate::state::{LedgerState, Mark};
use crate::storage::{DirStorage, LockGuard, Storage};
use crate::tombstone::Tombstone;
use crate::validate::{self, Origin, TurnState};

/// What a commit wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CommitReceipt {
    /// Seq of the first event written.
    pub first_seq: u64,
    /// Seq of the last event written.
    pub last_seq: u64,
    /// True when this is the receipt of an earlier commit with the same id and content:
    /// nothing was written this time.
    pub replayed: bool,
}

/// A commit checked and applied to the writer's in-memory state, not yet written.
struct Staged {
    receipt: CommitReceipt,
    /// Its records (empty for a replayed id).
    bytes: Vec<u8>,
    /// Artifacts to store (synced) before the records.
    artifacts: Vec<Vec<u8>>,
}

/// The one writer of a conversation. Holds the directory's OS lock until dropped.
///
/// The committed state is a `LedgerState`; besides it the writer keeps only caches that
/// are rebuilt on first use (the idempotency table, the open turn) and the poison latch.
pub struct Ledger {
    state: LedgerState,
    options: Options,
    /// Commit id hash → its entry; loaded on first use.
    ids: Option<HashMap<[u8; 32], CommitEntry>>,
    /// The open turn; rebuilt on first use.
    turn: Option<TurnState>,
    /// The time of the last event (ms; 0 when empty); loaded on first use.
    last_ms: Option<i64>,
    /// Set after a failed sync (or an unrecoverable failed write): commits are refused.
    poisoned: bool,
    _lock: LockGuard,
}

impl Ledger {
    /// Opens (creating if missing) the conversation directory `dir` for writing.
    ///
    /// Takes the directory's lock (fails with [`Error::Locked`] if another writer holds it,
    /// after `lock_wait`), cuts and saves a torn tail, rebuilds a stale sidecar index, and
    /// fails closed with [`Error::Corrupt`] if a bad record has valid records after it.
    /// When an erasure was interrupted after replacing the log (`erase.pending` exists), it
    /// finishes it first: unreferenced artifacts and recovered tails are deleted (one read of
    /// the whole log, only in that case; see [`Ledger::erase`]).
    pub fn open(dir: &Path, options: &Options) -> Result<(Ledger, RecoveryReport)> {
        Ledger::open_with(Arc::new(DirStorage::new(dir)), options)
    }

    /// [`Ledger::open`] over any storage backend.
    pub fn open_with(
        storage: Arc<dyn Storage>,
        options: &Options,
    ) -> Result<(Ledger, RecoveryReport)> {
        let st = storage.as_ref();
        st.create_dir("").map_err(io_err(st, ""))?;
        let lock = st
            .try_lock(options.lock_wait)
            .map_err(io_err(st, names::LOCK))?
            .ok_or_else(|| Error::Locked {
                path: st.location(),
            })?;
        recovery::remove_stale_temporaries(st)?;
        let recreated = recovery::recreate_if_torn_at_creation(st, options.sync)?;
        recovery::create_log_if_missing(st, options.sync)?;
        if options.check_on_open {
            recovery::check_whole_log(st)?;
        }
        crate::carry::restore_index(&storage)?;
        let (state, report) = load_and_recover(storage.clone(), options, recreated)?;
        let mut ledger = Ledger {
            state,
            options: options.clone(),
            ids: None,
            turn: None,
            last_ms: None,
            poisoned: false,
            _lock: lock,
        };
        let _ = ledger.state.flush_sidecars();
        let keep = report
            .saved_to
            .as_ref()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .map(str::to_owned);
        let syncs = ledger.syncs();
        crate::erase::finish_pending(&mut ledger.state, syncs, keep.as_deref())?;
        Ok((ledger, report))
    }

    /// The options this writer was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// True after a failed sync (or an unrecoverable failed write): commits are refused with
    /// [`Error::Poisoned`] until the conversation is reopened.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Appends `commit` atomically and, by default, durably.
    ///
    /// Validates first (nothing is written on any error but I/O), answers a repeated id from
    /// the idempotency table (same content → the original receipt, different → [`Error::Conflict`]),
    /// stores large tool outputs as synced artifacts, then appends all records in one write
    /// and syncs per [`SyncMode`]. On a failed write the log is truncated back; on a failed
    /// sync the writer is poisoned. In-memory state changes only after success.
    ///
    /// An event takes its original time from [`NewCommit::times`] when it has one (an import
    /// keeps each message's time; the times are part of the commit's content for
    /// idempotency), otherwise the clock, or the last event's time when the clock is behind
    /// it, so times never go backwards within a conversation.
    ///
    /// ```
    /// use ctxlog_ledger::{EventBody, Ledger, LedgerRead, NewCommit, Options};
    /// # fn main() -> ctxlog_ledger::Result<()> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let (mut ledger, _) = Ledger::open(dir.path(), &Options::default())?;
    /// let turn = NewCommit::new(vec![
    ///     EventBody::User { text: "hello".into(), parts: vec![], provider_item: None },
    ///     EventBody::Assistant { text: "hi".into(), provider_item: None },
    /// ]);
    /// let may_2023 = 1_683_554_160_000;
    /// ledger.commit(&turn.clone().with_times(vec![Some(may_2023), Some(may_2023 + 30_000)]))?;
    /// let times: Vec<i64> = ledger.events(1..=2)?.iter().map(|e| e.ts_ms).collect();
    /// assert_eq!(times, [may_2023, may_2023 + 30_000]);
    /// // An explicit time before the last event is refused; nothing is written.
    /// assert!(ledger.commit(&turn.with_times(vec![Some(may_2023)])).is_err());
    /// assert_eq!(ledger.last_seq(), 2);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidCommit`] for an invalid turn, an id conflict ([`Error::Conflict`]), an
    /// explicit time earlier than the event before it (the conversation's last event for the
    /// first), or more times than events; [`Error::TooLarge`] over a cap; [`Error::Poisoned`];
    /// I/O. Nothing is written on error.
    pub fn commit(&mut self, commit: &NewCommit) -> Result<CommitReceipt> {
        self.commit_from(commit, Origin::Application)
    }

    /// Appends one system marker (retention, import). Applications cannot write these through
    /// [`Ledger::commit`].
    ///
    /// # Errors
    /// [`Error::InvalidCommit`] for a [`SystemMarker::Tombstone`]: tombstones are written only
    /// by [`Ledger::erase`] and [`Ledger::append_tombstone`], which also write the
    /// placeholders they cover. A tombstone
    /// appended alone would hide itself from readers (`from < seq`) or claim seqs it does not
    /// cover (`to > seq`), which `verify` rejects and a later erasure would trip over.
    /// Otherwise as [`Ledger::commit`].
    pub fn commit_marker(&mut self, marker: SystemMarker) -> Result<CommitReceipt> {
        if matches!(
            marker,
            SystemMarker::Tombstone { .. } | SystemMarker::Loss { .. }
        ) {
            return Err(Error::invalid(
                "tombstones and loss records are written by erase, repair and append_tombstone \
                 only (with the placeholders they cover)",
            ));
        }
        let commit = NewCommit::new(vec![EventBody::System { marker }]);
        self.commit_from(&commit, Origin::Internal)
    }

    /// Appends an erased range decided elsewhere, as it was (an import rebuilding an export's
    /// tombstone, docs/design.md#e4-export-and-import): the tombstone at `t.from` and a covered
    /// placeholder for every seq up to `t.to`, all at time `t.at_ms`, in one commit without an id,
    /// laid out exactly as [`Ledger::erase`] lays out a run. No content is ever carried.
    ///
    /// `t.from` must be the next seq. Appending the same tombstone again where it already
    /// stands writes nothing (the receipt says `replayed`), so re-running an import is
    /// harmless. The tombstone's time is the erasure's, outside the events' timeline: it is
    /// not compared with the events' times, and the next event's time is compared with the
    /// last event before it (docs/design.md#l10-event-times).
    ///
    /// ```
    /// use ctxlog_ledger::rules::Tombstone;
    /// use ctxlog_ledger::{EventBody, Ledger, LedgerRead, NewCommit, Options};
    /// # fn main() -> ctxlog_ledger::Result<()> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let (mut ledger, _) = Ledger::open(dir.path(), &Options::default())?;
    /// let t = Tombstone {
    ///     from: 1,
    ///     to: 3,
    ///     at_ms: 1_700_000_000_000,
    ///     reason: "GDPR".into(),
    ///     loss_offset: None,
    /// };
    /// assert!(!ledger.append_tombstone(&t)?.replayed);
    /// assert!(ledger.append_tombstone(&t)?.replayed); // already there: nothing written
    /// let turn = NewCommit::new(vec![EventBody::User { text: "hi".into(), parts: vec![], provider_item: None }])
    ///     .with_times(vec![Some(1_600_000_000_000)]);
    /// ledger.commit(&turn)?; // earlier than the erasure: fine
    /// let seqs: Vec<u64> = ledger.events(1..=4)?.iter().map(|e| e.seq).collect();
    /// assert_eq!(seqs, [1, 4]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidCommit`] when `t.from` is not the next seq, `t.to < t.from`, the time
    /// is negative, or the reason is empty or over [`crate::MAX_ERASE_REASON_BYTES`]; the caps
    /// ([`Error::TooLarge`]); [`Error::Poisoned`]; I/O. Nothing is written on error.
    pub fn append_tombstone(&mut self, t: &Tombstone) -> Result<CommitReceipt> {
        self.check_usable()?;
        let state = &self.state;
        let mut stored = |seq: u64| state.raw_event(seq).map(Some);
        let receipt = CommitReceipt {
            first_seq: t.from,
            last_seq: t.to,
            replayed: true,
        };
        if crate::tombstone::check_append(t, self.state.last_seq(), &mut stored)? {
            return Ok(receipt);
        }
        let commit = NewCommit::new(t.bodies().collect());
        let times = vec![t.at_ms; commit.events.len()];
        let preparer = Preparer {
            state: &self.state,
            options: &self.options,
        };
        let prepared = preparer.prepare(&commit, &times, None)?;
        preparer.check_caps(&prepared)?;
        // Staged and written as a commit is (the same rollback on a failed write or sync).
        // System events leave the open turn as it was; the last event's time is unchanged.
        let mark = self.state.mark();
        let cached = (self.turn.clone(), self.last_ms);
        let (appended, bytes, artifacts) = prepared.into_parts();
        self.state.apply(appended);
        self.write_staged(&mark, cached, &bytes, &artifacts)?;
        Ok(CommitReceipt {
            replayed: false,
            ..receipt
        })
    }

    /// Stores `content` as an artifact (synced per the sync mode) and returns its reference,
    /// for applications that attach artifacts themselves.
    pub fn put_artifact(&mut self, content: &[u8]) -> Result<ArtifactRef> {
        self.check_usable()?;
        let sync = self.syncs();
        crate::artifact::write(
            self.state.storage().as_ref(),
            content,
            sync,
            &mut self.poisoned,
        )
    }

    /// The seqs written by the commit that carried idempotency id `id`, if any (from the
    /// idempotency table, which is rebuilt from the log: an erased commit's id is gone).
    ///
    /// # Errors
    /// Log corruption or I/O while loading the table.
    pub fn commit_seqs(&mut self, id: &str) -> Result<Option<(u64, u64)>> {
        let key = rules::commit_id_hash(id);
        Ok(self.ids()?.get(&key).map(|e| (e.first_seq, e.last_seq)))
    }

    /// Checks, without changing anything, that [`Ledger::erase`] would accept `range` and
    /// `reason`: a non-empty range inside `1..=last_seq`, a reason of at most
    /// [`crate::MAX_ERASE_REASON_BYTES`], and `artifacts/` and `recovered/` inside the conversation
    /// directory. Callers that must prepare (e.g. drop a cache) before erasing check first.
    ///
    /// # Errors
    /// [`Error::BadRange`]; [`Error::Io`] for an escaping directory.
    pub fn check_erase(&self, range: &RangeInclusive<u64>, reason: &str) -> Result<()> {
        self.check_erase_reaching(range, Reach::Turns, reason)
    }

    /// As [`Ledger::check_erase`], for an erasure that reaches as `how` says: a
    /// [`Reach::Tail`] range must also end at the last seq.
    ///
    /// # Errors
    /// As [`Ledger::check_erase`].
    pub fn check_erase_reaching(
        &self,
        range: &RangeInclusive<u64>,
        how: Reach,
        reason: &str,
    ) -> Result<()> {
        crate::erase::check(&self.state, range, how, reason)
    }

    /// True when earlier erasures already cover all of `range` (after widening it to whole
    /// turns, as [`Ledger::erase`] does): erasing it again changes nothing
    /// (docs/design.md#e6-listing-and-tombstones).
    ///
    /// # Errors
    /// Log corruption or I/O while reading the tombstones.
    pub fn is_erased(&self, range: &RangeInclusive<u64>) -> Result<bool> {
        self.is_erased_reaching(range, Reach::Turns)
    }

    /// As [`Ledger::is_erased`], for an erasure that reaches as `how` says.
    ///
    /// # Errors
    /// As [`Ledger::is_erased`].
    pub fn is_erased_reaching(&self, range: &RangeInclusive<u64>, how: Reach) -> Result<bool> {
        Ok(crate::erase::already_erased(&self.state, range, how)?.is_some())
    }

    /// Erases `range` (docs/design.md#e1-erasure): rewrites the log without its content,
    /// atomically, and deletes every file that could still hold erased bytes.
    ///
    /// The range is first **widened to whole turns** (a turn runs from a user event to the
    /// event before the next one, or an earlier erased range next to it), so a tool call is
    /// never separated from its result, and to cover any earlier tombstone it overlaps; the
    /// report gives the range actually erased.
    /// Seqs are preserved: seq `from` becomes a tombstone recording the range, the time and
    /// `reason` (never the content), seqs `from+1..=to` become covered placeholders that
    /// readers skip. Commits cut by the range lose their id (so an erased commit's id, or a
    /// partly erased one's, no longer replays: a retry writes it again).
    ///
    /// Steps: the new log (fresh ledger id) is written to `ledger.log.tmp` and synced; the
    /// marker `erase.pending` is created (directory synced); the new log is renamed over
    /// `ledger.log` and the directory synced: a crash before the rename leaves the old ledger,
    /// after it the new one. Then every artifact no kept event references is deleted (with any
    /// `artifacts/.tmp-*`), every file under `recovered/` is deleted, the marker is removed,
    /// and the four sidecars are deleted and rebuilt. A crash between the rename and the
    /// marker's removal is finished by the next writer open ([`Ledger::open`] sees the
    /// marker and deletes what is still unreferenced), so erased artifacts and recovered
    /// tails do not outlive an interrupted erasure.
    ///
    /// A range that earlier erasures already cover entirely changes nothing (no byte is
    /// written; a tombstone keeps its reason and time): the report says
    /// `already_erased`, with no events erased and the ledger id unchanged.
    ///
    /// ```
    /// use ctxlog_ledger::{EventBody, Ledger, LedgerRead, NewCommit, Options};
    /// # fn main() -> ctxlog_ledger::Result<()> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let (mut ledger, _) = Ledger::open(dir.path(), &Options::default())?;
    /// for text in ["keep this", "my password is hunter2", "keep this too"] {
    ///     ledger.commit(&NewCommit::new(vec![
    ///         EventBody::User { text: text.into(), parts: vec![], provider_item: None },
    ///         EventBody::Assistant { text: "ok".into(), provider_item: None },
    ///     ]))?;
    /// }
    /// // Seq 4 is asked for; its whole turn (3-4) is erased.
    /// let report = ledger.erase(4..=4, "secret shared by mistake")?;
    /// assert_eq!((report.from, report.to, report.events), (3, 4, 2));
    /// let seqs: Vec<u64> = ledger.events(1..=6)?.iter().map(|e| e.seq).collect();
    /// assert_eq!(seqs, [1, 2, 3, 5, 6]); // 3 is the tombstone, 4 is skipped
    /// assert!(ctxlog_ledger::verify(dir.path())?.is_clean());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::BadRange`] (nothing changed) when `from` is 0, `from > to`, `to` is past the
    /// last seq, or `reason` is over [`crate::MAX_ERASE_REASON_BYTES`]; [`Error::Poisoned`];
    /// [`Error::Corrupt`] when the log does not check out (including a tombstone that claims
    /// seqs past the end); [`Error::Io`] (nothing changed) when `artifacts/` or `recovered/`
    /// resolves outside the conversation directory; I/O. A failure before the rename
    /// leaves the old ledger; one after it poisons this writer (reopen to continue) and makes
    /// its reads of events and artifacts fail with [`Error::Poisoned`] too (the handle it
    /// holds on the replaced log still holds the erased content).
    pub fn erase(&mut self, range: RangeInclusive<u64>, reason: &str) -> Result<ErasureReport> {
        self.erase_reaching(range, Reach::Turns, reason)
    }

    /// Erases `range` as [`Ledger::erase`] does, reaching as `how` says: [`Reach::Tail`]
    /// *retracts* the newest events, exactly the seqs asked for (no widening to whole
    /// turns; the range must end at the last seq), under one tombstone. The turn they were
    /// part of stays open: a later commit continues it.
    ///
    /// ```
    /// # use ctxlog_ledger::{Ledger, Options, NewCommit, EventBody, Reach};
    /// # fn main() -> ctxlog_ledger::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let (mut ledger, _) = Ledger::open(dir.path(), &Options::default())?;
    /// ledger.commit(&NewCommit::new(vec![
    ///     EventBody::User { text: "hi".into(), parts: vec![], provider_item: None },
    ///     EventBody::Assistant { text: "a reply to take back".into(), provider_item: None },
    /// ]))?;
    /// let report = ledger.erase_reaching(2..=2, Reach::Tail, "retracted")?;
    /// assert_eq!((report.from, report.to, report.events), (2, 2, 1));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Ledger::erase`]; [`Error::BadRange`] (nothing changed) for a [`Reach::Tail`]
    /// range that does not end at the last seq.
    pub fn erase_reaching(
        &mut self,
        range: RangeInclusive<u64>,
        how: Reach,
        reason: &str,
    ) -> Result<ErasureReport> {
        self.erase_reaching_then(range, how, reason, &mut || Ok(()))
    }

    /// Erases `range` as [`Ledger::erase_reaching`] does, running `before_replace` once every
    /// check has passed and the rewritten log is written, just before it replaces the old
    /// one: where a caller drops what it derived from the old content (a search index), so
    /// that a refused erasure leaves that too as it was, and a finished one leaves nothing
    /// derived from the erased text. Not run when the range is already erased.
    ///
    /// # Errors
    /// As [`Ledger::erase_reaching`]; an error of `before_replace` (nothing changed).
    pub fn erase_reaching_then(
        &mut self,
        range: RangeInclusive<u64>,
        how: Reach,
        reason: &str,
        before_replace: &mut dyn FnMut() -> Result<()>,
    ) -> Result<ErasureReport> {
        self.check_usable()?;
        let syncs = self.syncs();
        let report = crate::erase::erase(
            &mut self.state,
            (range, how, reason),
            syncs,
            &mut self.poisoned,
            before_replace,
        )?;
        self.ids = None;
        self.turn = None;
        self.last_ms = None;
        Ok(report)
    }

    fn syncs(&self) -> bool {
        self.options.syncs()
    }

    fn check_usable(&self) -> Result<()> {
        if self.poisoned {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }

    fn commit_from(&mut self, commit: &NewCommit, origin: Origin) -> Result<CommitReceipt> {
        self.check_usable()?;
        let mark = self.state.mark();
        let cached = (self.turn.clone(), self.last_ms);
        let staged = self.stage(commit, origin)?;
        if staged.receipt.replayed {
            return Ok(staged.receipt);
        }
        self.write_staged(&mark, cached, &staged.bytes, &staged.artifacts)?;
        Ok(staged.receipt)
    }

    /// Commits several commits with one append and one sync (group commit,
    /// docs/design.md#l1-durable-append).
    ///
    /// Each commit is checked as [`Ledger::commit`] checks it, against the conversation as it
    /// stands after the commits before it in the batch: a refused one (invalid, too large,
    /// an id conflict) gets its own error in the result and is left out, and the others are
    /// still written; a repeated id, also one repeated within the batch, gets the original
    /// receipt. Then the artifacts of the accepted commits are stored (synced), their
    /// records appended in one write (each commit keeps its own end-of-commit record, so a
    /// torn write cuts back to a commit boundary) and the log synced once. A receipt is
    /// returned only after that sync: it means exactly what a receipt of
    /// [`Ledger::commit`] means.
    ///
    /// ```
    /// use ctxlog_ledger::{EventBody, Ledger, LedgerRead, NewCommit, Options};
    /// # fn main() -> ctxlog_ledger::Result<()> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let (mut ledger, _) = Ledger::open(dir.path(), &Options::default())?;
    /// let turn = |text: &str| {
    ///     NewCommit::new(vec![
    ///         EventBody::User { text: text.into(), parts: vec![], provider_item: None },
    ///         EventBody::Assistant { text: "ok".into(), provider_item: None },
    ///     ])
    /// };
    /// let empty = NewCommit::new(vec![]);
    /// let results = ledger.commit_batch(&[turn("one"), empty, turn("two")])?;
    /// assert_eq!(results[0].as_ref().unwrap().last_seq, 2);
    /// assert!(results[1].is_err()); // refused alone
    /// assert_eq!(results[2].as_ref().unwrap().first_seq, 3);
    /// assert_eq!(ledger.last_seq(), 4);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The outer error is the batch's write or sync failing (as for [`Ledger::commit`]: the
    /// log is cut back, a failed sync poisons the writer): then no commit of the batch is
    /// acknowledged. [`Error::Poisoned`] before anything is done. Each inner error is one
    /// commit's refusal, with nothing of it written.
    pub fn commit_batch<C: Borrow<NewCommit>>(
        &mut self,
        commits: &[C],
    ) -> Result<Vec<Result<CommitReceipt>>> {
        self.check_usable()?;
        // Load every cache before staging: staged events are not in the log yet.
        if commits.iter().any(|c| c.borrow().id.is_some()) {
            self.ids()?;
        }
        self.turn_state()?;
        self.last_ms()?;
        let mark = self.state.mark();
        let cached = (self.turn.clone(), self.last_ms);
        let mut results = Vec::with_capacity(commits.len());
        let (mut bytes, mut artifacts) = (Vec::new(), Vec::new());
        for commit in commits {
            match self.stage(commit.borrow(), Origin::Application) {
                Ok(staged) => {
                    bytes.extend_from_slice(&staged.bytes);
                    artifacts.extend(staged.artifacts);
                    results.push(Ok(staged.receipt));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if !bytes.is_empty() {
            self.write_staged(&mark, cached, &bytes, &artifacts)?;
        }
        Ok(results)
    }

    /// Checks `commit` and applies it to the in-memory state ahead of its write (a repeated
    /// id is answered without staging anything). On error nothing is staged.
    fn stage(&mut self, commit: &NewCommit, origin: Origin) -> Result<Staged> {
        let key = rules::idempotency_key(commit)?;
        if let (Some(id), Some(key)) = (&commit.id, &key)
            && let Some(receipt) = self.replay(id, key)?
        {
            return Ok(Staged {
                receipt,
                bytes: Vec::new(),
                artifacts: Vec::new(),
            });
        }
        rules::check_after(commit, self.state.last_seq())?;
        let state = self.turn_state()?.clone();
        let last_ms = self.last_ms()?;
        let times = rules::resolve_times(commit.events.len(), &commit.times, last_ms, now_ms())?;
        let next = self.state.last_seq() + 1;
        let kind_of = |seq: u64| self.state.kind(seq);
        let new_state = validate::check_events(&commit.events, &state, next, origin, &kind_of)?;
        let preparer = Preparer {
            state: &self.state,
            options: &self.options,
        };
        let prepared = preparer.prepare(commit, &times, key)?;
        preparer.check_caps(&prepared)?;
        let receipt = CommitReceipt {
            first_seq: next,
            last_seq: next + commit.events.len() as u64 - 1,
            replayed: false,
        };
        if let (Some(c), Some(ids)) = (prepared.commit, &mut self.ids) {
            ids.insert(c.id_hash, c);
        }
        let (appended, bytes, artifacts) = prepared.into_parts();
        self.state.apply(appended);
        self.turn = Some(new_state);
        self.last_ms = times.last().copied().or(self.last_ms);
        Ok(Staged {
            receipt,
            bytes,
            artifacts,
        })
    }

    /// Artifacts first (synced), then the staged records in one write, then the sync
    /// (docs/design.md#l6-artifacts, docs/design.md#l8-failed-io). On failure the staged commits
    /// are taken back: the state returns to `mark`, the open turn and last time to `cached`, and
    /// the idempotency table is reloaded on next use.
    fn write_staged(
        &mut self,
        mark: &Mark,
        cached: (Option<TurnState>, Option<i64>),
        bytes: &[u8],
        artifacts: &[Vec<u8>],
    ) -> Result<()> {
        let sync = self.syncs();
        let st = self.state.storage().clone();
        // No write onto damage: the log must end where this writer's last commit ended, and
        // that commit's last record must check out (docs/ledger-format.md, "What a writer sees").
        let mut result = self.state.check_tail(mark);
        for a in artifacts {
            if result.is_err() {
                break;
            }
            result = crate::artifact::write(st.as_ref(), a, sync, &mut self.poisoned).map(drop);
        }
        if result.is_ok() {
            result = self
                .state
                .write_staged(mark, bytes, sync, &mut self.poisoned);
        }
        if result.is_err() {
            self.state.rollback(mark);
            (self.turn, self.last_ms) = cached;
            self.ids = None;
            return result;
        }
        let _ = self.state.flush_sidecars();
        Ok(())
    }

    /// The receipt of an earlier commit with this id, or a conflict.
    /// A commit whose seqs a repair gave up is [`Error::Lost`], whatever its content
    /// (docs/design.md#l11-repair).
    fn replay(&mut self, id: &str, key: &([u8; 32], [u8; 32])) -> Result<Option<CommitReceipt>> {
        let Some(e) = self.ids()?.get(&key.0).cloned() else {
            return Ok(None);
        };
        if self.state.kind(e.last_seq) == Some(EventKind::System)
            && let Some((from, to)) =
                crate::tombstone::lost_range(e.last_seq, &self.state.raw_event(e.last_seq)?.body)
        {
            return Err(Error::Lost {
                id: id.to_string(),
                from,
                to,
            });
        }
        rules::replay(id, &key.1, &e.digest, (e.first_seq, e.last_seq)).map(Some)
    }

    /// The idempotency table, loaded on first use (one read of `commits.idx`, or one scan of
    /// the log when an entry of it is damaged).
    fn ids(&mut self) -> Result<&HashMap<[u8; 32], CommitEntry>> {
        if self.ids.is_none() {
            let entries = self.state.commit_entries()?;
            let map = entries.into_iter().map(|e| (e.id_hash, e)).collect();
            self.ids = Some(map);
        }
        Ok(self.ids.get_or_insert_with(HashMap::new))
    }

    /// The time of the last event (0 when there is none), read once: erased ranges are
    /// stepped over, a tombstone's time being the erasure's, not an event's
    /// (docs/design.md#l10-event-times).
    fn last_ms(&mut self) -> Result<i64> {
        if let Some(ms) = self.last_ms {
            return Ok(ms);
        }
        let mut seq = self.state.last_seq();
        let mut ms = 0;
        while seq > 0 {
            let event = self.state.raw_event(seq)?;
            match crate::tombstone::erased_from(seq, &event.body) {
                Some(from) => seq = from - 1,
                None => {
                    ms = event.ts_ms;
                    break;
                }
            }
        }
        self.last_ms = Some(ms);
        Ok(ms)
    }

    /// The open turn, rebuilt on first use from the last user event onward.
    fn turn_state(&mut self) -> Result<&TurnState> {
        if self.turn.is_none() {
            let mut state = TurnState::default();
            if let Some(&start) = self.state.user_seqs().last() {
                for e in self.state.events(start..=self.state.last_seq())? {
                    state.apply(&e.body);
                }
            }
            self.turn = Some(state);
        }
        Ok(self.turn.get_or_insert_with(TurnState::default))
    }
}

/// Loads the state, cuts a torn tail, makes unindexed commits durable and attaches the
/// sidecars; returns the state and what was repaired.
fn load_and_recover(
    storage: Arc<dyn Storage>,
    options: &Options,
    recreated: Option<RecoveryReport>,
) -> Result<(LedgerState, RecoveryReport)> {
    let loaded = LedgerState::load(storage, true)?;
    let mut report = recreated.unwrap_or_default();
    let mut state = loaded.state;
    if let Tail::Torn { offset, reason } = loaded.tail {
        report = recovery::cut_tail(&mut state, offset, loaded.file_len, reason)?;
    }
    report.last_good_seq = state.last_seq();
    report.index_rebuilt = !state.sidecars_valid();
    if options.sync == SyncMode::PerCommit && state.has_unindexed() {
        // Commits past the index may be those of a process killed before its sync: make
        // them durable before this writer builds on them or acknowledges a retry of one.
        state.sync_log()?;
    }
    state.attach_sidecars()?;
    Ok((state, report))
}

delegate_ledger_read!(Ledger);

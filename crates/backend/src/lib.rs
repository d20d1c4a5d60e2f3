//! The backend seam: where conversations live.
//!
//! A [`Backend`] opens, creates, lists, verifies and erases conversations, and says where a
//! conversation's recall cache lives. What it opens are ledger handles behind two traits:
//! [`LedgerView`] (read: events, turns, notes, artifacts; catch up with what others committed)
//! and [`LedgerWriter`] (append commits with idempotency, erase). Everything above this seam
//! (projection, recall, the operations) works on these traits only, so a second engine (a
//! database) is a second implementation of this crate's traits and nothing else changes.
//!
//! Two engines implement it: the embedded file store (`ctxlog::backend::FileBackend`, one
//! directory per conversation, every byte written through the ledger's
//! [`Storage`](ctxlog_ledger::Storage) trait) and PostgreSQL (the `ctxlog-postgres` crate).
//! The file ledger's own handles ([`Ledger`], [`Reader`]) are the file store's
//! [`LedgerWriter`] and [`LedgerView`]; the implementations are here.
//!
//! The rules every engine must apply the same way (commit validation, the idempotency
//! digest, artifact offloading, caps, widening an erasure) are public in
//! [`ctxlog_ledger::rules`].

// Layers, lowest first: error, secret, places, then this file.
mod error;
mod places;
mod secret;

use std::fmt::Debug;
use std::ops::RangeInclusive;
use std::path::PathBuf;

use ctxlog_ledger::{
    CommitReceipt, ErasureReport, Ledger, LedgerRead, NewCommit, Reach, Reader, RecoveryReport,
    RepairReport, SalvageReport, Salvaged, VerifyReport,
};
use serde::{Deserialize, Serialize};

pub use ctxlog_event::ConversationName;
pub use error::{Error, Result};
pub use places::{PlaceDigest, PlaceMark, PlacesUpdate};
pub use secret::{Secret, SecretName, from_hex, new_secret, to_hex};

/// A read handle on one conversation's ledger. Takes no lock; sees a committed prefix.
pub trait LedgerView: LedgerRead + Send + Sync {
    /// Brings the view up to date with what is committed. When the ledger was rewritten
    /// (erasure), the view starts over and [`LedgerRead::ledger_id`] changes.
    ///
    /// # Errors
    /// Ledger read errors, e.g. [`ctxlog_ledger::Error::Corrupt`].
    fn catch_up(&mut self) -> ctxlog_ledger::Result<()>;
    /// False when the last catch-up found the conversation gone: erased whole by another
    /// replica since the view was opened (the view then holds nothing). A file store view
    /// always says true.
    fn exists(&self) -> bool {
        true
    }
}

/// The one writer of a conversation (one writer per conversation, across processes). It is always current: nobody else writes.
pub trait LedgerWriter: LedgerView {
    /// Appends `commit` atomically and durably: on disk before it returns, replayed for a
    /// repeated id, refused whole over a cap, and never again after a failed sync
    /// (docs/ledger-format.md). Each event keeps its explicit time ([`NewCommit::times`]) or
    /// takes the clock; an explicit time earlier than the event before it is refused.
    ///
    /// # Errors
    /// Invalid turns, caps, id conflicts, I/O; nothing is written on error.
    fn commit(&mut self, commit: &NewCommit) -> ctxlog_ledger::Result<CommitReceipt>;
    /// Several commits acknowledged together: one result per commit, in order, each returned
    /// only when that commit is as durable as a receipt of [`LedgerWriter::commit`] says. A
    /// refused commit fails alone; the outer error fails them all (none written). The file
    /// ledger writes them with one append and one sync ([`Ledger::commit_batch`]); the
    /// default commits them one at a time (the PostgreSQL backend: one transaction each).
    ///
    /// # Errors
    /// Only a failure that fails the whole batch (a failed write or sync, a poisoned writer).
    fn commit_batch(
        &mut self,
        commits: &[&NewCommit],
    ) -> ctxlog_ledger::Result<Vec<ctxlog_ledger::Result<CommitReceipt>>> {
        Ok(commits.iter().map(|commit| self.commit(commit)).collect())
    }
    /// The seqs written by the commit that carried `id`, if any.
    ///
    /// # Errors
    /// Ledger read errors.
    fn commit_seqs(&mut self, id: &str) -> ctxlog_ledger::Result<Option<(u64, u64)>>;
    /// Checks an erasure request without changing anything (`how`: see [`Reach`]; a
    /// [`Reach::Tail`] range must end at the last seq, [`ctxlog_ledger::rules::check_reach`]).
    ///
    /// # Errors
    /// [`ctxlog_ledger::Error::BadRange`] for a range or reason the erasure would refuse.
    fn check_erase(
        &self,
        range: &RangeInclusive<u64>,
        how: Reach,
        reason: &str,
    ) -> ctxlog_ledger::Result<()>;
    /// True when earlier erasures already cover all of `range` (widened as `how` says):
    /// erasing it again changes nothing (a tombstone is never rewritten).
    ///
    /// # Errors
    /// Log corruption or I/O.
    fn is_erased(&self, range: &RangeInclusive<u64>, how: Reach) -> ctxlog_ledger::Result<bool>;
    /// Erases `range` (widened to whole turns, or exactly the newest events for
    /// [`Reach::Tail`]) for `reason`: the data is removed, a tombstone records the range,
    /// when and why (docs/lifecycle.md). `before_replace` runs once the erasure can no
    /// longer be refused, just before the old content is replaced (the file store's rename,
    /// PostgreSQL's commit): the caller drops what it derived from that content there, so a
    /// refused erasure leaves it as it was. Not run when the range is already erased.
    ///
    /// # Errors
    /// As [`LedgerWriter::check_erase`]; damage the erasure would reach; an error of
    /// `before_replace` (nothing erased); I/O.
    fn erase(
        &mut self,
        range: RangeInclusive<u64>,
        how: Reach,
        reason: &str,
        before_replace: &mut dyn FnMut() -> ctxlog_ledger::Result<()>,
    ) -> ctxlog_ledger::Result<ErasureReport>;
    /// Appends an erased range decided elsewhere, as it was (an import rebuilding an
    /// export's tombstone; see [`ctxlog_ledger::Ledger::append_tombstone`]).
    ///
    /// # Errors
    /// [`ctxlog_ledger::Error::InvalidCommit`] when it does not start at the next seq (and
    /// does not already stand there), or its range, time or reason is invalid; caps; I/O.
    fn append_tombstone(
        &mut self,
        t: &ctxlog_ledger::rules::Tombstone,
    ) -> ctxlog_ledger::Result<CommitReceipt>;
    /// True after a failed sync: the writer must be reopened before it commits again.
    fn is_poisoned(&self) -> bool;
}

/// A writer just opened, with what opening it found.
pub struct OpenedWriter {
    /// The writer.
    pub writer: Box<dyn LedgerWriter>,
    /// What opening it cut (a torn tail after a crash), if anything.
    pub recovery: RecoveryReport,
    /// True when this open created the conversation.
    pub created: bool,
}

/// One conversation in a listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationInfo {
    /// The conversation's name.
    pub name: String,
    /// How many live events it holds: the events applications committed, not counting
    /// erased or lost ones or ctxlog's own markers (tombstones and their placeholders, loss
    /// records, import markers). Seqs are never reused, so this can be below the newest seq.
    pub events: u64,
    /// The size of its ledger in bytes.
    pub bytes: u64,
    /// The time of its newest event, milliseconds since the epoch (0 when empty); when its
    /// last turn was erased, the erasure's time (its tombstone's).
    pub last_activity_ms: i64,
    /// Set when the conversation could not be read: what is wrong (no server path), and the
    /// figures above are 0 except `bytes`. The other conversations list as usual
    /// (docs/design.md#l11-repair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

/// Where conversations live: the embedded file store, or a database.
pub trait Backend: Send + Sync + Debug {
    /// Where the store is, for messages (a directory, or a URL without credentials).
    fn location(&self) -> String;
    /// Opens `name` for writing, creating it when `create` is set (else
    /// [`Error::NotFound`]). Fails with [`ctxlog_ledger::Error::Locked`] when another
    /// process holds the writer.
    ///
    /// # Errors
    /// As above; a torn tail is cut and reported, a corrupt record fails closed.
    fn open_writer(&self, name: &ConversationName, create: bool) -> Result<OpenedWriter>;
    /// Opens `name` for reading.
    ///
    /// # Errors
    /// [`Error::NotFound`] when it does not exist; ledger errors.
    fn open_view(&self, name: &ConversationName) -> Result<Box<dyn LedgerView>>;
    /// Removes a conversation this store just created whose first commit was refused, so a
    /// rejected request leaves no trace. `writer` is the handle that created it.
    ///
    /// # Errors
    /// I/O.
    fn discard_created(&self, name: &ConversationName, writer: Box<dyn LedgerWriter>)
    -> Result<()>;
    /// Every conversation, in no particular order.
    ///
    /// # Errors
    /// I/O or ledger errors.
    fn list(&self) -> Result<Vec<ConversationInfo>>;
    /// Checks every record and artifact of `name`; writes nothing.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`ctxlog_ledger::Error::Corrupt`] naming offset and seq.
    fn verify(&self, name: &ConversationName) -> Result<VerifyReport>;
    /// Every intact record of `name`, damaged or not, in order, with the damaged ranges
    /// between them ([`ctxlog_ledger::salvage_with`]); writes nothing
    /// (docs/design.md#l11-repair).
    ///
    /// # Errors
    /// [`Error::NotFound`]; I/O; whatever `visit` returns.
    fn salvage(
        &self,
        name: &ConversationName,
        visit: &mut dyn FnMut(Salvaged) -> ctxlog_ledger::Result<()>,
    ) -> Result<SalvageReport>;
    /// Erases the whole conversation: every copy of its data is gone when this
    /// returns Ok. `writer` is its writer, held so no commit is in flight.
    ///
    /// # Errors
    /// I/O; nothing is reported erased unless it was.
    fn erase_all(&self, name: &ConversationName, writer: Box<dyn LedgerWriter>) -> Result<()>;
    /// Erases the whole conversation `name` when no writer can be opened on it because it is
    /// damaged (class corrupt): as [`Backend::erase_all`], holding only what keeps other
    /// writers out meanwhile (the file store: the writer lock). The default refuses: an
    /// engine whose writer opens on damage never needs it.
    ///
    /// # Errors
    /// [`ctxlog_ledger::Error::Locked`] when another writer holds it; I/O.
    fn erase_all_damaged(&self, name: &ConversationName) -> Result<()> {
        Err(Error::InvalidRequest {
            reason: format!(
                "conversation \"{name}\" is damaged and this store cannot erase it whole"
            ),
        })
    }
    /// Plans the repair of `name` (docs/design.md#l11-repair) and, with `accept_loss`, carries
    /// it out: every intact record kept, every lost seq covered by a loss record, the damaged
    /// bytes saved aside, the sidecars rebuilt ([`ctxlog_ledger::repair_with`]). The caller
    /// has closed every handle it holds on `name`. The default refuses.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`ctxlog_ledger::Error::Locked`] when another process writes it;
    /// I/O.
    fn repair(&self, name: &ConversationName, accept_loss: bool) -> Result<RepairReport> {
        let _ = accept_loss;
        Err(Error::InvalidRequest {
            reason: format!(
                "this store cannot repair conversation \"{name}\" yet; `export --salvage` \
                 writes its intact records"
            ),
        })
    }
    /// The file of `name`'s recall index: a local, disposable cache rebuilt from the ledger, on this machine whichever engine holds the ledger.
    fn recall_cache(&self, name: &ConversationName) -> PathBuf;
    /// The store's secret `name`: [`new_secret`] bytes kept by the store, created by the
    /// first call. Race-safe across processes: when several create it at once, one
    /// creation wins and every call returns its bytes, now and later.
    ///
    /// # Errors
    /// I/O or database errors; a stored secret that is not 32 bytes (the message says how
    /// to replace it).
    fn secret(&self, name: SecretName<'_>) -> Result<Secret>;
    /// A value of `name` that changes with every commit to it (the file store: its log's
    /// length; PostgreSQL: its last seq), 0 when it does not exist: read before its events,
    /// it tells [`Backend::places_behind`] whether commits came since.
    ///
    /// # Errors
    /// I/O or database errors.
    fn place_stamp(&self, name: &ConversationName) -> Result<i64>;
    /// How far `name` is indexed in the places index, if at all (module `places`).
    ///
    /// # Errors
    /// I/O or database errors.
    fn place_mark(&self, name: &ConversationName) -> Result<Option<PlaceMark>>;
    /// Adds the places of `name`'s events committed after `expected` (the mark read before
    /// them; `None`: none was), and moves its mark on, in one transaction, only if its mark
    /// is still `expected`. False when it was not (another process indexed it, or its
    /// places were forgotten meanwhile): nothing written.
    ///
    /// # Errors
    /// I/O or database errors.
    fn put_places(
        &self,
        name: &ConversationName,
        expected: Option<PlaceMark>,
        update: PlacesUpdate<'_>,
    ) -> Result<bool>;
    /// Deletes every place of `name` and moves its mark to a new generation at seq 0: no
    /// digest of its events is left in the index when this returns (deleted rows are
    /// overwritten). Called after an erasure, retention, repair or a rewrite replaced its
    /// events.
    ///
    /// # Errors
    /// I/O or database errors.
    fn forget_places(&self, name: &ConversationName) -> Result<()>;
    /// The places of events with `digest` (conversation, index among the events it holds
    /// that a client sends back), newest written first, at most `limit`.
    ///
    /// # Errors
    /// I/O or database errors.
    fn places_of(&self, digest: &PlaceDigest, limit: usize) -> Result<Vec<(String, u64)>>;
    /// The conversations with commits their mark does not cover (no mark, or another
    /// stamp), found without reading any event; the marks of conversations that no longer
    /// exist are dropped with their places.
    ///
    /// # Errors
    /// I/O or database errors.
    fn places_behind(&self) -> Result<Vec<String>>;
}

impl LedgerView for Ledger {
    fn catch_up(&mut self) -> ctxlog_ledger::Result<()> {
        Ok(())
    }
}

impl LedgerView for Reader {
    fn catch_up(&mut self) -> ctxlog_ledger::Result<()> {
        Reader::refresh(self)
    }
}

impl LedgerWriter for Ledger {
    fn commit(&mut self, commit: &NewCommit) -> ctxlog_ledger::Result<CommitReceipt> {
        Ledger::commit(self, commit)
    }
    fn commit_batch(
        &mut self,
        commits: &[&NewCommit],
    ) -> ctxlog_ledger::Result<Vec<ctxlog_ledger::Result<CommitReceipt>>> {
        Ledger::commit_batch(self, commits)
    }
    fn commit_seqs(&mut self, id: &str) -> ctxlog_ledger::Result<Option<(u64, u64)>> {
        Ledger::commit_seqs(self, id)
    }
    fn check_erase(
        &self,
        range: &RangeInclusive<u64>,
        how: Reach,
        reason: &str,
    ) -> ctxlog_ledger::Result<()> {
        Ledger::check_erase_reaching(self, range, how, reason)
    }
    fn is_erased(&self, range: &RangeInclusive<u64>, how: Reach) -> ctxlog_ledger::Result<bool> {
        Ledger::is_erased_reaching(self, range, how)
    }
    fn erase(
        &mut self,
        range: RangeInclusive<u64>,
        how: Reach,
        reason: &str,
        before_replace: &mut dyn FnMut() -> ctxlog_ledger::Result<()>,
    ) -> ctxlog_ledger::Result<ErasureReport> {
        Ledger::erase_reaching_then(self, range, how, reason, before_replace)
    }
    fn append_tombstone(
        &mut self,
        t: &ctxlog_ledger::rules::Tombstone,
    ) -> ctxlog_ledger::Result<CommitReceipt> {
        Ledger::append_tombstone(self, t)
    }
    fn is_poisoned(&self) -> bool {
        Ledger::is_poisoned(self)
    }
}

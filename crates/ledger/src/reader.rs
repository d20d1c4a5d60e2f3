//! Read access: the [`LedgerRead`] trait and the lock-free [`Reader`].

use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::event::{ArtifactRef, Event, EventKind};
use crate::files::io_err;
use crate::format::names;
use crate::state::LedgerState;
use crate::storage::{DirStorage, OpenMode, Storage};

/// Reading a ledger. Implemented by the writer ([`crate::Ledger`]) and by [`Reader`]. Every method
/// costs in proportion to what it reads, not to the ledger's size
/// (docs/design.md#l7-bounded-memory): kinds and turn starts and note seqs come from the sidecar
/// index, events are read by offset.
pub trait LedgerRead {
    /// The ledger's random id (32 hex digits), written at creation; caches use it to tell
    /// which ledger they were built from.
    fn ledger_id(&self) -> &str;
    /// Seq of the last committed event; 0 when empty.
    fn last_seq(&self) -> u64;
    /// The kind of `seq`, from the index (no payload read); `None` outside `1..=last_seq`.
    fn kind(&self, seq: u64) -> Option<EventKind>;
    /// Seqs of the user events (turn starts), ascending.
    fn user_seqs(&self) -> &[u64];
    /// Seqs of the note events, ascending (from the `notes.idx` sidecar, held in memory: no
    /// read). Lets a projection find every note, pinned ones included, without asking the
    /// kind of every seq.
    fn note_seqs(&self) -> &[u64];
    /// The stored size in bytes of event `seq`'s record (header + payload).
    fn record_len(&self, seq: u64) -> Option<u64>;
    /// The stored size in bytes of every record before event `seq`'s (a running sum of
    /// [`record_len`](Self::record_len), kept in the index: no read). Non-decreasing with
    /// `seq` and unchanged by appends; `None` outside `1..=last_seq`.
    fn record_offset(&self, seq: u64) -> Option<u64>;
    /// One event. Fails with [`Error::NoSuchSeq`] outside the ledger or for an erased seq
    /// covered by a tombstone (see [`crate::Ledger::erase`]), [`Error::Corrupt`] if its record
    /// does not check out.
    fn event(&self, seq: u64) -> Result<Event> {
        let mut v = self.events(seq..=seq)?;
        v.pop().ok_or(Error::NoSuchSeq {
            seq,
            last_seq: self.last_seq(),
        })
    }
    /// Events in `range` (inclusive), with one contiguous read. An empty range gives `[]`.
    /// Erased seqs are skipped: an erased range reads as its tombstone (a `system` event at
    /// the range's first seq) alone, so the result can be shorter than the range.
    fn events(&self, range: RangeInclusive<u64>) -> Result<Vec<Event>>;
    /// The content of an artifact of this conversation, verified against its hash. Refuses
    /// (with [`Error::BadArtifactRef`], before opening anything) a name that is not
    /// `sha256-<64 hex>` or that resolves outside the conversation directory.
    fn artifact(&self, r: &ArtifactRef) -> Result<Vec<u8>>;
    /// The events of the last `n` turns (and whatever follows the last user event). When
    /// there are fewer than `n` turns, everything from seq 1.
    fn last_turns(&self, n: usize) -> Result<Vec<Event>> {
        let seqs = self.user_seqs();
        let from = if n == 0 {
            self.last_seq() + 1
        } else if n >= seqs.len() {
            1
        } else {
            seqs[seqs.len() - n]
        };
        self.events(from..=self.last_seq())
    }
}

delegate_ledger_read!(Reader);

/// A read-only view of a conversation. Takes no lock, never writes, never blocks the writer,
/// and sees only complete commits (an incomplete tail is ignored, not cut). Fails closed with
/// [`Error::Corrupt`] like the writer.
pub struct Reader {
    state: LedgerState,
}

impl Reader {
    /// Opens the conversation directory `dir` for reading. Fails with [`Error::Io`]
    /// (`NotFound`) when it holds no ledger.
    pub fn open(dir: &Path) -> Result<Reader> {
        Reader::open_with(Arc::new(DirStorage::new(dir)))
    }

    /// [`Reader::open`] over any storage backend.
    pub fn open_with(storage: Arc<dyn Storage>) -> Result<Reader> {
        Ok(Reader {
            state: LedgerState::load(storage, false)?.state,
        })
    }

    /// Catches up with commits made since open (or the last refresh). If the log was replaced
    /// (a rewrite such as erasure), the view is rebuilt from scratch.
    pub fn refresh(&mut self) -> Result<()> {
        let st = self.state.storage().clone();
        let replaced = {
            let log = st
                .open(names::LOG, OpenMode::Read)
                .map_err(io_err(st.as_ref(), names::LOG))?;
            match log {
                None => true,
                Some(f) => !self.state.is_same_log(f.as_ref())?,
            }
        };
        if replaced {
            self.state = LedgerState::load(st, false)?.state;
            return Ok(());
        }
        self.state.catch_up()
    }

    /// How many events are live: not a system marker (an erasure's tombstone and the
    /// placeholders it covers, a loss record, an import or retention marker). Read from the
    /// index in bounded chunks.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when an index entry is damaged and its record cannot be located.
    pub fn live_events(&self) -> Result<u64> {
        self.state.live_events()
    }

    /// The time of the newest record in ms since the epoch (0 when empty): the last event's,
    /// or, when the last seqs are erased, the erasure's (their tombstone and placeholders
    /// carry its time). A conversation's last activity.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when that record does not check out.
    pub fn newest_ms(&self) -> Result<i64> {
        match self.state.last_seq() {
            0 => Ok(0),
            seq => Ok(self.state.raw_event(seq)?.ts_ms),
        }
    }
}

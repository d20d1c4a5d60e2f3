//! Read access: the [`LedgerRead`] trait and the lock-free [`Reader`].

use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::Arc;

use crate::core::{Core, io_err};
use crate::error::{Error, Result};
use crate::event::{ArtifactRef, Event, EventKind};
use crate::format::{LOG_HEADER_LEN, names};
use crate::ledger::Ledger;
use crate::scan::{self, ScanStart, Tail};
use crate::storage::{DirStorage, OpenMode, Storage};

/// Reading a ledger. Implemented by the writer ([`Ledger`]) and by [`Reader`]. Every method
/// costs in proportion to what it reads, not to the ledger's size (SPEC L7): kinds and turn
/// starts and note seqs come from the sidecar index, events are read by offset.
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

impl LedgerRead for Core {
    fn ledger_id(&self) -> &str {
        &self.id_hex
    }
    fn last_seq(&self) -> u64 {
        self.last_seq
    }
    fn kind(&self, seq: u64) -> Option<EventKind> {
        Core::kind(self, seq)
    }
    fn user_seqs(&self) -> &[u64] {
        &self.user_seqs
    }
    fn note_seqs(&self) -> &[u64] {
        &self.note_seqs
    }
    fn record_len(&self, seq: u64) -> Option<u64> {
        self.entry(seq).ok().map(|e| u64::from(e.record_len))
    }
    fn events(&self, range: RangeInclusive<u64>) -> Result<Vec<Event>> {
        Core::events(self, range)
    }
    fn artifact(&self, r: &ArtifactRef) -> Result<Vec<u8>> {
        Core::artifact(self, r)
    }
}

macro_rules! delegate_read {
    ($t:ty) => {
        impl LedgerRead for $t {
            fn ledger_id(&self) -> &str {
                self.core.ledger_id()
            }
            fn last_seq(&self) -> u64 {
                self.core.last_seq
            }
            fn kind(&self, seq: u64) -> Option<EventKind> {
                self.core.kind(seq)
            }
            fn user_seqs(&self) -> &[u64] {
                &self.core.user_seqs
            }
            fn note_seqs(&self) -> &[u64] {
                &self.core.note_seqs
            }
            fn record_len(&self, seq: u64) -> Option<u64> {
                LedgerRead::record_len(&self.core, seq)
            }
            fn events(&self, range: RangeInclusive<u64>) -> Result<Vec<Event>> {
                self.core.events(range)
            }
            fn artifact(&self, r: &ArtifactRef) -> Result<Vec<u8>> {
                self.core.artifact(r)
            }
        }
    };
}

delegate_read!(Ledger);
delegate_read!(Reader);

/// A read-only view of a conversation. Takes no lock, never writes, never blocks the writer,
/// and sees only complete commits (an incomplete tail is ignored, not cut). Fails closed with
/// [`Error::Corrupt`] like the writer.
pub struct Reader {
    core: Core,
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
            core: Core::load(storage, false)?.core,
        })
    }

    /// Catches up with commits made since open (or the last refresh). If the log was replaced
    /// (a rewrite such as erasure), the view is rebuilt from scratch.
    pub fn refresh(&mut self) -> Result<()> {
        let st = self.core.storage.clone();
        let replaced = {
            let log = st
                .open(names::LOG, OpenMode::Read)
                .map_err(io_err(st.as_ref(), names::LOG))?;
            match log {
                None => true,
                Some(f) => !same_log(self, f.as_ref())?,
            }
        };
        if replaced {
            self.core = Core::load(st, false)?.core;
            return Ok(());
        }
        self.catch_up()
    }

    fn catch_up(&mut self) -> Result<()> {
        let st = self.core.storage.clone();
        let file_len = self
            .core
            .log
            .len()
            .map_err(io_err(st.as_ref(), names::LOG))?;
        let last = self.core.entry(self.core.last_seq).ok();
        let start = ScanStart {
            offset: self.core.log_len.max(LOG_HEADER_LEN as u64),
            last_seq: self.core.last_seq,
            turns: self.core.user_seqs.len() as u32,
            commits: last.map_or(0, |e| e.commits),
            turns_crc: self.core.turns_crc,
            notes: self.core.note_seqs.len() as u32,
            notes_crc: self.core.notes_crc,
        };
        let found = scan::scan(self.core.log.as_ref(), file_len, start)
            .map_err(io_err(st.as_ref(), names::LOG))?;
        if let Tail::Corrupt {
            offset,
            seq,
            reason,
        } = found.tail()
        {
            return Err(Error::Corrupt {
                path: self.core.log_path(),
                offset,
                seq: Some(seq),
                reason,
            });
        }
        if let Some(e) = found.entries.last() {
            self.core.turns_crc = e.turns_crc;
            self.core.notes_crc = e.notes_crc;
        }
        self.core.overlay.extend(found.entries);
        self.core.user_seqs.extend(found.user_seqs);
        self.core.note_seqs.extend(found.note_seqs);
        self.core.log_len = found.good_end;
        self.core.last_seq = found.last_seq;
        Ok(())
    }
}

/// True when `f` is the same log the reader has open (same header, not shorter).
fn same_log(r: &Reader, f: &dyn crate::storage::StorageFile) -> Result<bool> {
    let st = r.core.storage.as_ref();
    let len = f.len().map_err(io_err(st, names::LOG))?;
    if len < r.core.log_len || len < LOG_HEADER_LEN as u64 {
        return Ok(false);
    }
    let mut b = [0u8; LOG_HEADER_LEN];
    f.read_at(0, &mut b).map_err(io_err(st, names::LOG))?;
    let mine = r.core.header.encode();
    Ok(b == mine)
}

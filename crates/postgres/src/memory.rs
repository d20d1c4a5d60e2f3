//! What a [`super::PgLedger`] handle keeps in memory between calls: the conversation's
//! committed index (per seq: kind and record size; the user and note seqs), and the read
//! cache of decoded events, tagged with the ledger id they were read under (rows never
//! change under one ledger id: only an erasure rewrites them, and it gives the conversation
//! a new id).

use std::collections::BTreeMap;

use ctxlog_ledger::{Event, EventKind};

/// The committed index of a conversation, as of the last catch-up.
#[derive(Clone, Debug, Default)]
pub(super) struct Index {
    pub(super) ledger_id: String,
    pub(super) bytes: u64,
    pub(super) last_ts_ms: i64,
    pub(super) kinds: Vec<EventKind>,
    pub(super) lens: Vec<u32>,
    /// The running sum of `lens`: the stored size of every record up to each seq.
    pub(super) ends: Vec<u64>,
    pub(super) user_seqs: Vec<u64>,
    pub(super) note_seqs: Vec<u64>,
}

impl Index {
    pub(super) fn last_seq(&self) -> u64 {
        self.kinds.len() as u64
    }

    /// The record size of `seq` (0 past the end).
    pub(super) fn len_of(&self, seq: u64) -> u64 {
        let len = self.lens.get((seq as usize).wrapping_sub(1));
        len.map_or(0, |&l| u64::from(l))
    }

    /// The stored size of every record before `seq` (`None` outside `1..=last_seq`).
    pub(super) fn offset_of(&self, seq: u64) -> Option<u64> {
        match seq {
            0 => None,
            1 => self.ends.first().map(|_| 0),
            _ => self
                .ends
                .get(seq as usize - 1)
                .and(self.ends.get(seq as usize - 2).copied()),
        }
    }

    pub(super) fn push(&mut self, seq: u64, kind: EventKind, len: u32) {
        self.kinds.push(kind);
        self.lens.push(len);
        self.ends
            .push(self.ends.last().copied().unwrap_or(0) + u64::from(len));
        match kind {
            EventKind::User => self.user_seqs.push(seq),
            EventKind::Note => self.note_seqs.push(seq),
            _ => {}
        }
    }
}

/// The decoded events a handle has read, all under one ledger id, at most
/// [`EventCache::MAX_BYTES`] of records (the newest seqs are kept: projections read the tail).
#[derive(Debug, Default)]
pub(super) struct EventCache {
    ledger_id: String,
    events: BTreeMap<u64, Event>,
    bytes: u64,
}

impl EventCache {
    /// Record bytes kept per handle at most. A store pools up to 4 read handles per
    /// conversation it has read, so this bounds the cache at 8 MiB of records per
    /// conversation; a projection's tail (its budget, at most a model's context) fits.
    const MAX_BYTES: u64 = 2 << 20;

    /// Events `from..=to` if every one of them is cached under `ledger_id`.
    pub(super) fn get(&self, ledger_id: &str, from: u64, to: u64) -> Option<Vec<Event>> {
        if self.ledger_id != ledger_id || (to - from + 1) as usize > self.events.len() {
            return None;
        }
        let events: Vec<Event> = self
            .events
            .range(from..=to)
            .map(|(_, e)| e.clone())
            .collect();
        (events.len() as u64 == to - from + 1).then_some(events)
    }

    /// Keeps `events`, read under `ledger_id` (what was cached under another id goes).
    pub(super) fn put(&mut self, ledger_id: &str, index: &Index, events: &[Event]) {
        if self.ledger_id != ledger_id {
            *self = EventCache {
                ledger_id: ledger_id.to_string(),
                ..EventCache::default()
            };
        }
        for e in events {
            if self.events.insert(e.seq, e.clone()).is_none() {
                self.bytes += index.len_of(e.seq);
            }
        }
        while self.bytes > Self::MAX_BYTES {
            let Some((seq, _)) = self.events.pop_first() else {
                break;
            };
            self.bytes = self.bytes.saturating_sub(index.len_of(seq));
        }
    }
}

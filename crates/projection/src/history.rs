//! Where events come from: the [`History`] trait the caller implements.

use std::convert::Infallible;

use ctxlog_event::{Event, EventBody, EventKind, turn_starts};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// An inclusive range of seqs, `first..=last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SeqRange {
    /// First seq in the range.
    pub first: u64,
    /// Last seq in the range (inclusive).
    pub last: u64,
}

impl SeqRange {
    /// The range `first..=last`.
    pub fn new(first: u64, last: u64) -> SeqRange {
        SeqRange { first, last }
    }

    /// The range covering `events` (which must be in seq order), or `None` if empty.
    pub fn of(events: &[Event]) -> Option<SeqRange> {
        Some(SeqRange::new(events.first()?.seq, events.last()?.seq))
    }

    /// Whether `seq` is in the range.
    pub fn contains(&self, seq: u64) -> bool {
        self.first <= seq && seq <= self.last
    }
}

/// A conversation's stored events, as the projector reads them.
///
/// The projector pulls only what it needs: with the `turns` policy it asks for
/// [`turn_count`](History::turn_count), then for the seq ranges of turns newest first, and
/// loads a turn's events only when its size is not already in the caller's
/// [`SizeCache`](crate::SizeCache) or when the turn goes into the body. An implementation
/// over a ledger with a seq → offset index answers each call in time proportional to what it
/// returns.
///
/// A *turn* is a user event and every event after it up to the next user event; events before
/// the first user event form the *preamble* (docs/design.md#3-concepts). Turn indices count from 0,
/// the oldest.
///
/// The projector never modifies anything through this trait (docs/design.md#p10-no-mutation): every
/// method takes `&self`.
pub trait History {
    /// The error reading events can fail with; it is carried in [`crate::Error::History`].
    type Error: std::error::Error + Send + Sync + 'static;

    /// How many turns the history holds.
    fn turn_count(&self) -> Result<usize, Self::Error>;

    /// The seq range of turn `index` (0 = oldest), without loading its events.
    fn turn_seqs(&self, index: usize) -> Result<SeqRange, Self::Error>;

    /// The events of turn `index`, in seq order, starting with its user event.
    fn turn(&self, index: usize) -> Result<Vec<Event>, Self::Error>;

    /// The events before the first user event (notes, imports), in seq order; all events if
    /// there is no user event.
    fn preamble(&self) -> Result<Vec<Event>, Self::Error>;

    /// The whole text of a tool result whose output is stored as an artifact (the event holds
    /// a head/tail excerpt of it), or `None` when the event has no artifact or the history
    /// cannot read artifacts. The projector sends it, or as much of it as fits
    /// (docs/design.md#p12-room-is-used).
    ///
    /// The default returns `None`: results are sent as their events hold them.
    fn artifact_text(&self, event: &Event) -> Result<Option<String>, Self::Error> {
        let _ = event;
        Ok(None)
    }

    /// Where turn `index` starts in the history's own measure of stored bytes: the stored size
    /// of every event before its first one (a ledger's record offset). Non-decreasing with
    /// `index` and unchanged by appends, so a grid over it is a pure function of the history;
    /// `window: stable` anchors its blocks on it (docs/projection.md, "Windows").
    ///
    /// The default adds up the JSON length of every event before the turn, reading the whole
    /// history before it; implementations that keep record offsets should override it.
    fn turn_offset(&self, index: usize) -> Result<u64, Self::Error> {
        let mut bytes = json_len(&self.preamble()?);
        for i in 0..index.min(self.turn_count()?) {
            bytes += json_len(&self.turn(i)?);
        }
        Ok(bytes)
    }

    /// Every `note` event of the conversation, in seq order. Used to find pinned notes and
    /// explicit supersessions, which are mandatory wherever they were written
    /// (docs/design.md#p4-mandatory-input, docs/design.md#p6-agent-tiers).
    ///
    /// The default reads the whole history; implementations with an index should override it.
    fn notes(&self) -> Result<Vec<Event>, Self::Error> {
        let mut notes: Vec<Event> = self.preamble()?;
        for i in 0..self.turn_count()? {
            notes.extend(self.turn(i)?);
        }
        notes.retain(|e| e.kind() == EventKind::Note);
        Ok(notes)
    }
}

/// A [`History`] over events held in memory (tests, imports, the naive reference rule).
///
/// Turn boundaries and note positions are computed once, in [`SliceHistory::new`], so a
/// projection over it costs in proportion to the window, like one over an indexed ledger.
#[derive(Clone, Debug)]
pub struct SliceHistory<'a> {
    events: &'a [Event],
    starts: Vec<usize>,
    notes: Vec<usize>,
    /// The JSON length of the events before each turn, computed on first use.
    offsets: std::sync::OnceLock<Vec<u64>>,
}

/// The JSON length of `events` added up: the stored-size measure of histories without a ledger.
fn json_len(events: &[Event]) -> u64 {
    events
        .iter()
        .map(|e| serde_json::to_vec(e).map_or(0, |v| v.len() as u64))
        .sum()
}

impl<'a> SliceHistory<'a> {
    /// Wraps `events`, which must be in seq order.
    pub fn new(events: &'a [Event]) -> SliceHistory<'a> {
        SliceHistory {
            events,
            starts: turn_starts(events),
            notes: (0..events.len())
                .filter(|&i| matches!(events[i].body, EventBody::Note { .. }))
                .collect(),
            offsets: std::sync::OnceLock::new(),
        }
    }

    /// The wrapped events.
    pub fn events(&self) -> &'a [Event] {
        self.events
    }

    fn turn_slice(&self, index: usize) -> &'a [Event] {
        let Some(&start) = self.starts.get(index) else {
            return &[];
        };
        let end = self
            .starts
            .get(index + 1)
            .copied()
            .unwrap_or(self.events.len());
        &self.events[start..end]
    }
}

impl History for SliceHistory<'_> {
    type Error = Infallible;

    fn turn_count(&self) -> Result<usize, Infallible> {
        Ok(self.starts.len())
    }

    fn turn_seqs(&self, index: usize) -> Result<SeqRange, Infallible> {
        Ok(SeqRange::of(self.turn_slice(index)).unwrap_or(SeqRange::new(0, 0)))
    }

    fn turn(&self, index: usize) -> Result<Vec<Event>, Infallible> {
        Ok(self.turn_slice(index).to_vec())
    }

    fn preamble(&self) -> Result<Vec<Event>, Infallible> {
        let end = self.starts.first().copied().unwrap_or(self.events.len());
        Ok(self.events[..end].to_vec())
    }

    fn notes(&self) -> Result<Vec<Event>, Infallible> {
        Ok(self.notes.iter().map(|&i| self.events[i].clone()).collect())
    }

    fn turn_offset(&self, index: usize) -> Result<u64, Infallible> {
        let offsets = self.offsets.get_or_init(|| {
            let mut at = 0;
            let mut offsets = Vec::with_capacity(self.starts.len());
            let mut next = 0;
            for &start in &self.starts {
                at += json_len(&self.events[next..start]);
                next = start;
                offsets.push(at);
            }
            offsets
        });
        Ok(offsets
            .get(index)
            .copied()
            .unwrap_or_else(|| offsets.last().copied().unwrap_or(0)))
    }
}

/// The result of a [`History`] call, its error turned into [`Error::History`].
pub(crate) fn read<T, E: std::error::Error + Send + Sync + 'static>(
    r: std::result::Result<T, E>,
) -> Result<T> {
    r.map_err(|e| Error::History(Box::new(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, body: EventBody) -> Event {
        Event {
            seq,
            ts_ms: 0,
            body,
        }
    }

    #[test]
    fn slice_history_splits_preamble_and_turns() {
        let events = vec![
            ev(
                1,
                EventBody::Note {
                    text: "n".into(),
                    pinned: true,
                    supersedes: None,
                    provider_item: None,
                },
            ),
            ev(
                2,
                EventBody::User {
                    text: "a".into(),
                    parts: Vec::new(),
                    provider_item: None,
                },
            ),
            ev(
                3,
                EventBody::Assistant {
                    text: "b".into(),
                    provider_item: None,
                },
            ),
            ev(
                4,
                EventBody::User {
                    text: "c".into(),
                    parts: Vec::new(),
                    provider_item: None,
                },
            ),
        ];
        let h = SliceHistory::new(&events);
        assert_eq!(h.turn_count().unwrap(), 2);
        assert_eq!(h.preamble().unwrap().len(), 1);
        assert_eq!(h.turn_seqs(0).unwrap(), SeqRange::new(2, 3));
        assert_eq!(h.turn(1).unwrap().len(), 1);
        assert_eq!(h.notes().unwrap().len(), 1);
    }
}

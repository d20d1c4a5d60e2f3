//! The ledger seen by the projector ([`projection::History`]) and by the recall index
//! ([`recall::LedgerSource`]). Both read through the ledger's seq index, so they cost in
//! proportion to what they return (docs/design.md#l7-bounded-memory, docs/design.md#p9-cost).

use ctxlog_ledger::{ArtifactRef, Event, LedgerRead};
use ctxlog_projection::{History, SeqRange};
use ctxlog_recall::{ArtifactSource, LedgerSource, SourceError};

/// How many events one ledger read fetches when streaming to the recall index.
const READ_CHUNK: u64 = 512;

/// A ledger as a [`History`]: turns are located from the user-event seqs of the index.
pub(crate) struct LedgerHistory<'a, L: ?Sized>(pub(crate) &'a L);

impl<L: LedgerRead + ?Sized> LedgerHistory<'_, L> {
    /// The events `first..=last`, each image or document part with its bytes back as base64
    /// `data` (read from its artifact, hash checked): the projector sends them as they are.
    fn read(&self, first: u64, last: u64) -> Result<Vec<Event>, ctxlog_ledger::Error> {
        if first > last {
            return Ok(Vec::new());
        }
        let mut events = self.0.events(first..=last)?;
        for event in &mut events {
            event.body.inline_parts(|r| self.0.artifact(r))?;
        }
        Ok(events)
    }
}

impl<L: LedgerRead + ?Sized> History for LedgerHistory<'_, L> {
    type Error = ctxlog_ledger::Error;

    fn turn_count(&self) -> Result<usize, Self::Error> {
        Ok(self.0.user_seqs().len())
    }

    fn turn_seqs(&self, index: usize) -> Result<SeqRange, Self::Error> {
        let starts = self.0.user_seqs();
        let first = starts.get(index).copied().unwrap_or(0);
        let last = match starts.get(index + 1) {
            Some(next) => next - 1,
            None => self.0.last_seq(),
        };
        Ok(SeqRange::new(first, last))
    }

    fn turn(&self, index: usize) -> Result<Vec<Event>, Self::Error> {
        let range = self.turn_seqs(index)?;
        if range.first == 0 {
            return Ok(Vec::new());
        }
        self.read(range.first, range.last)
    }

    fn preamble(&self) -> Result<Vec<Event>, Self::Error> {
        let end = match self.0.user_seqs().first() {
            Some(first_user) => first_user - 1,
            None => self.0.last_seq(),
        };
        self.read(1, end)
    }

    /// Read through [`LedgerRead::artifact`], which refuses references outside the
    /// conversation and checks the content hash.
    fn artifact_text(&self, event: &Event) -> Result<Option<String>, Self::Error> {
        let ctxlog_ledger::EventBody::ToolResult {
            artifact: Some(artifact),
            ..
        } = &event.body
        else {
            return Ok(None);
        };
        let bytes = self.0.artifact(artifact)?;
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// The record offset of the turn's first event, from the ledger's index (no read). Past the
    /// last turn: the end of the last record.
    fn turn_offset(&self, index: usize) -> Result<u64, Self::Error> {
        let seq = self.0.user_seqs().get(index).copied();
        let last = self.0.last_seq();
        Ok(match seq.and_then(|s| self.0.record_offset(s)) {
            Some(offset) => offset,
            None => self.0.record_offset(last).unwrap_or(0) + self.0.record_len(last).unwrap_or(0),
        })
    }

    /// Note seqs come from the ledger's note index, so only the notes themselves are read.
    fn notes(&self) -> Result<Vec<Event>, Self::Error> {
        self.0
            .note_seqs()
            .iter()
            .map(|&seq| self.0.event(seq))
            .collect()
    }
}

/// A ledger as the recall index's [`LedgerSource`].
pub(crate) struct LedgerFeed<'a, L: ?Sized>(pub(crate) &'a L);

impl<L: LedgerRead + ?Sized> ArtifactSource for LedgerFeed<'_, L> {
    /// The ledger refuses references outside the conversation (docs/design.md#r7-scope) and checks
    /// the hash.
    fn artifact_text(&self, artifact: &ArtifactRef) -> Result<String, SourceError> {
        let bytes = self.0.artifact(artifact)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl<L: LedgerRead + ?Sized> LedgerSource for LedgerFeed<'_, L> {
    fn ledger_id(&self) -> String {
        self.0.ledger_id().to_string()
    }

    fn head_seq(&self) -> u64 {
        self.0.last_seq()
    }

    fn visit_after(
        &self,
        after: u64,
        visit: &mut dyn FnMut(&Event) -> ctxlog_recall::Result<()>,
    ) -> ctxlog_recall::Result<()> {
        let last = self.0.last_seq();
        let mut next = after.saturating_add(1);
        while next <= last {
            let end = (next + READ_CHUNK - 1).min(last);
            let events = self
                .0
                .events(next..=end)
                .map_err(|e| ctxlog_recall::Error::Source {
                    seq: next,
                    source: Box::new(e),
                })?;
            events.iter().try_for_each(&mut *visit)?;
            next = end + 1;
        }
        Ok(())
    }
}

//! The store's places index, kept by the backend ([`crate::backend::Backend::places_of`]):
//! the digest of each stored event a client sends back ([`call::stored_digest`] of the
//! events [`call::sent_back`] keeps) → its conversation and index among them. How a
//! client that dropped its own oldest messages is found again, by any process or replica
//! over the store, without reading every conversation per call.
//!
//! It is disposable and caught up per conversation from its mark (the last seq indexed):
//! only what was committed since is read. A conversation's places are written after each
//! reply a call commits, and before a lookup every conversation with commits its mark does
//! not cover (another process's or replica's, an import) is caught up. An erasure,
//! retention or repair forgets the conversation's places once its events are replaced, and
//! a mark that moved meanwhile makes a writer that read before it write nothing, so no
//! digest of an erased event comes back.

use ctxlog_backend::PlacesUpdate;
use ctxlog_ledger::EventBody;

use super::Store;
use crate::call::{self, Digest};
use crate::ops::LogRequest;
use crate::{ConversationName, Error, Result};

impl Store {
    /// Writes the places of what `conversation` committed since its mark: reads the
    /// conversation's stamp, its mark, then the events after the mark. A conversation
    /// rewritten since (a system marker after the mark: an erasure, retention or repair
    /// this process did not forget, or it is shorter) is forgotten and indexed from its
    /// start. A mark another process moved meanwhile leaves the index as that process wrote
    /// it.
    pub(crate) fn index_places(&self, conversation: &str) -> Result<()> {
        let name = ConversationName::new(conversation)?;
        for _ in 0..2 {
            let stamp = self.backend.place_stamp(&name)?;
            let mark = self.backend.place_mark(&name)?;
            let from = mark.map_or(0, |m| m.last_seq);
            let tail = match self.log(&LogRequest {
                conversation: conversation.to_owned(),
                from: from + 1,
                limit: None,
            }) {
                Ok(tail) => tail,
                Err(Error::NotFound { .. }) => return Ok(()),
                Err(e) => return Err(e),
            };
            let rewritten = from > 0
                && (tail.last_seq < from
                    || tail
                        .events
                        .iter()
                        .any(|e| matches!(e.body, EventBody::System { .. })));
            if rewritten {
                self.backend.forget_places(&name)?;
                continue;
            }
            if mark.is_some_and(|m| m.stamp == stamp && tail.last_seq == m.last_seq) {
                return Ok(());
            }
            let digests: Vec<Digest> = call::sent_back(&tail.events)
                .into_iter()
                .map(|e| call::stored_digest(&e.body))
                .collect();
            let update = PlacesUpdate {
                last_seq: tail.last_seq.max(from),
                stamp,
                digests: &digests,
            };
            self.backend.put_places(&name, mark, update)?;
            return Ok(());
        }
        Ok(())
    }

    /// Catches up every conversation with commits its mark does not cover (found by the
    /// backend without reading any event), so a lookup sees them.
    pub(crate) fn index_behind(&self) -> Result<()> {
        for conversation in self.backend.places_behind()? {
            match self.index_places(&conversation) {
                // A damaged conversation has no places: the others are still indexed.
                Err(e) if e.class() == crate::ErrorClass::Corrupt => {}
                result => result?,
            }
        }
        Ok(())
    }

    /// Forgets the places of `name` once its events were replaced or erased.
    pub(crate) fn forget_places(&self, name: &ConversationName) -> Result<()> {
        Ok(self.backend.forget_places(name)?)
    }
}

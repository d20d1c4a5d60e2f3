//! The two operations of a relayed model call ([`crate::call`] has the rules): the client's
//! new messages committed and the upstream body projected, then the provider's reply
//! committed.
//!
//! Recognition is bounded: the store keeps, per conversation, the digest of each stored
//! event ([`Transcript`]) and reads only the events committed since it last looked; a resent
//! event the client sent before is matched by the digest of its bytes as sent, without
//! redacting or decoding it again. Where stored events are, to find a client that dropped
//! its oldest messages, is the backend's places index ([`super::places`]), not this
//! process's memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use ctxlog_ledger::{CommitReceipt, EventBody, NewCommit, ToolStatus};
use ctxlog_projection::{Policy, Window, WireFormat};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::{Store, lock};
use crate::call::{
    self, CallRequest, ClientCall, Digest, PreparedCall, RecallStep, RecallStepRequest,
    ReplyRequest,
};
use crate::ops::{CommitRequest, LogRequest, ProjectRequest};
use crate::{Error, Result};

/// How often a call reads the conversation again when another call on it committed between
/// its read and its commit ([`NewCommit::after`]), before it gives up with the conflict.
const MOVED_RETRIES: usize = 3;

/// What recognition keeps of one conversation between calls: the digests of its stored
/// events (those a client sends back), read up to `last_seq`.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    /// The last seq read.
    last_seq: u64,
    /// Per stored event a client sends back, in order: its digest as stored
    /// ([`call::stored_digest`]).
    stored: Vec<Digest>,
    /// Per such event (and past the end, for events committed but not read back yet): the
    /// digest of the client's event it was matched with or committed from
    /// ([`call::sent_digest`]).
    sent: Vec<Option<Digest>>,
    /// Whether the last of them awaits a reply (a user message or tool results).
    awaits_reply: bool,
}

/// The transcripts of a store's conversations, the most recently used ones kept within
/// `max_bytes` of digests ([`StoreBuilder::recognition_cache`](crate::StoreBuilder::recognition_cache);
/// the one in use is always kept). An evicted conversation's transcript is read again from
/// the store on its next call (its events then match by their digests as stored).
#[derive(Debug)]
pub(crate) struct Transcripts {
    max_bytes: usize,
    cache: Mutex<TranscriptCache>,
}

#[derive(Debug, Default)]
struct TranscriptCache {
    /// Counts uses: each entry holds the count of its last use.
    clock: u64,
    entries: HashMap<String, CacheEntry>,
    /// The entries by their last use, oldest first.
    order: BTreeMap<u64, String>,
    /// The sum of the entries' sizes.
    bytes: usize,
}

#[derive(Debug)]
struct CacheEntry {
    used: u64,
    /// The transcript's size when last measured ([`Transcript::bytes`]).
    bytes: usize,
    transcript: Arc<Mutex<Transcript>>,
}

impl Transcripts {
    pub(crate) fn new(max_bytes: usize) -> Transcripts {
        Transcripts {
            max_bytes,
            cache: Mutex::default(),
        }
    }

    /// The transcript of `conversation` (empty until first read), now the most recently
    /// used.
    fn get(&self, conversation: &str) -> Arc<Mutex<Transcript>> {
        let mut cache = lock(&self.cache);
        cache.clock += 1;
        let now = cache.clock;
        let cache = &mut *cache;
        if let Some(entry) = cache.entries.get_mut(conversation) {
            cache.order.remove(&entry.used);
            entry.used = now;
            cache.order.insert(now, conversation.to_owned());
            return entry.transcript.clone();
        }
        let transcript: Arc<Mutex<Transcript>> = Arc::default();
        cache.entries.insert(
            conversation.to_owned(),
            CacheEntry {
                used: now,
                bytes: 0,
                transcript: Arc::clone(&transcript),
            },
        );
        cache.order.insert(now, conversation.to_owned());
        transcript
    }

    /// Records the size of `conversation`'s transcript, and drops the least recently used
    /// ones while the cache holds more than its bound (never the most recently used).
    fn measured(&self, conversation: &str, bytes: usize) {
        let mut cache = lock(&self.cache);
        let cache = &mut *cache;
        if let Some(entry) = cache.entries.get_mut(conversation) {
            cache.bytes = cache.bytes - entry.bytes + bytes;
            entry.bytes = bytes;
        }
        while cache.bytes > self.max_bytes && cache.entries.len() > 1 {
            let Some((_, oldest)) = cache.order.pop_first() else {
                break;
            };
            if let Some(entry) = cache.entries.remove(&oldest) {
                cache.bytes -= entry.bytes;
            }
        }
    }

    #[cfg(test)]
    fn cached(&self) -> Vec<String> {
        let mut names: Vec<String> = lock(&self.cache).entries.keys().cloned().collect();
        names.sort();
        names
    }
}

impl Transcript {
    /// The memory its digests take, in bytes.
    fn bytes(&self) -> usize {
        size_of::<Transcript>()
            + self.stored.capacity() * size_of::<Digest>()
            + self.sent.capacity() * size_of::<Option<Digest>>()
    }

    /// Reads what was committed since `last_seq`; everything again when the conversation
    /// is not the one read (a system marker: an erasure, retention or repair rewrote it; or
    /// it is shorter: erased whole).
    fn refresh(&mut self, store: &Store, conversation: &str) -> Result<()> {
        let tail = match store.log(&LogRequest {
            conversation: conversation.to_owned(),
            from: self.last_seq + 1,
            limit: None,
        }) {
            Ok(log) => log,
            Err(Error::NotFound { .. }) => {
                *self = Transcript::default();
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let rewritten = tail.last_seq < self.last_seq
            || tail
                .events
                .iter()
                .any(|e| matches!(e.body, EventBody::System { .. }));
        if rewritten && self.last_seq > 0 {
            *self = Transcript::default();
            return self.refresh(store, conversation);
        }
        for event in call::sent_back(&tail.events) {
            self.stored.push(call::stored_digest(&event.body));
            self.awaits_reply = matches!(
                event.body,
                EventBody::User { .. } | EventBody::ToolResult { .. }
            );
        }
        self.sent
            .resize(self.sent.len().max(self.stored.len()), None);
        self.last_seq = tail.last_seq;
        store.transcripts.measured(conversation, self.bytes());
        Ok(())
    }

    /// Records that stored events from `at` on are the client's `sent` ones.
    fn matched(&mut self, at: usize, sent: &[Digest]) {
        if self.sent.len() < at + sent.len() {
            self.sent.resize(at + sent.len(), None);
        }
        for (slot, digest) in self.sent[at..].iter_mut().zip(sent) {
            *slot = Some(*digest);
        }
    }
}

impl Store {
    /// Prepares a relayed call: recognises the client's messages the conversation already
    /// holds, commits the new ones (tool results before the projection; a trailing user
    /// message once the body is projected, so a call refused for its size stores no input),
    /// and projects the conversation into the body to send upstream, within the window
    /// ([`call::budget`]), with the client's other fields passed through. A call that sends
    /// nothing new while the conversation awaits a reply (a retry after a failed upstream
    /// call) projects the stored input again and commits nothing.
    ///
    /// Each commit follows the seq recognition read ([`NewCommit::after`]): a call on the
    /// same conversation that committed in between makes this one read it again (its
    /// messages then either are stored already or do not continue it). Each commit's id
    /// derives from the seq it follows and its events, so a client's identical request sent
    /// twice at once commits once. Messages that do not continue the named conversation go
    /// to a fork of it ([`PreparedCall::conversation`] names it), as without a name; a
    /// `previous` response that is not the conversation's latest is a branch: the call goes
    /// to a fork holding the conversation up to that response.
    ///
    /// # Errors
    /// [`Error::BadInput`] for a body that is not a request of the format, or whose new
    /// messages do not end in a user message or tool results (nothing to answer);
    /// [`Error::InvalidRequest`] for a `previous` response that was never stored;
    /// projection errors (class over budget when the mandatory part does not fit);
    /// ledger errors.
    pub fn prepare_call(&self, request: &CallRequest) -> Result<PreparedCall> {
        self.prepare_relayed(request, &|_| None)
    }

    /// [`Store::prepare_call`] for a caller that gives Responses ids of its own (the
    /// gateway): the body's `previous_response_id`, read with the rest of the body (parsed
    /// once), is mapped by `response_ids` to the conversation it names (over
    /// [`CallRequest::conversation`]: a client's chain may have gone on in a fork) and the
    /// seq of the input its response answered, as [`CallRequest::previous`] (which, when
    /// given, is taken instead).
    ///
    /// # Errors
    /// As [`Store::prepare_call`]; [`Error::InvalidRequest`] whose reason starts
    /// [`call::NO_STORED_RESPONSE`] and names the id ([`call::unknown_response_id`]) for an
    /// id `response_ids` does not know, or whose call has no stored reply.
    pub fn prepare_relayed(
        &self,
        request: &CallRequest,
        response_ids: &dyn Fn(&str) -> Option<(String, u64)>,
    ) -> Result<PreparedCall> {
        let (head, messages) = call::read_head(request.format, &request.body)?;
        let id = head.previous_id.as_deref().unwrap_or_default();
        let resolved;
        let (request, previous) = match (request.previous, &head.previous_id) {
            (Some(seq), _) => (request, Some(seq)),
            (None, None) => (request, None),
            (None, Some(id)) => {
                let (conversation, seq) =
                    response_ids(id).ok_or_else(|| Error::InvalidRequest {
                        reason: format!(
                            "{} '{id}': this store never gave that response id",
                            call::NO_STORED_RESPONSE
                        ),
                    })?;
                resolved = CallRequest {
                    conversation,
                    ..request.clone()
                };
                (&resolved, Some(seq))
            }
        };
        let mut attempt = 0;
        loop {
            let result = if request.conversation.is_empty() {
                self.prepare_unnamed(request, &head, &messages)
            } else {
                self.prepare_once(request, previous.map(|seq| (id, seq)), &head, &messages)
            };
            match result {
                Err(e) if is_moved(&e) && attempt < MOVED_RETRIES => attempt += 1,
                result => return result,
            }
        }
    }

    /// A call without a conversation name: the conversation is the one the client's
    /// transcript continues, found by the fingerprints of its events
    /// ([`call::root_name`], [`call::fork_name`]); a transcript that diverges from it forks
    /// a new conversation holding the client's events.
    fn prepare_unnamed(
        &self,
        request: &CallRequest,
        head: &ClientCall,
        messages: &Value,
    ) -> Result<PreparedCall> {
        let client = call::with_events(request.format, head, messages, &[])?;
        let sent: Vec<Digest> = client.events.iter().map(call::sent_digest).collect();
        let chain = call::fingerprints(&sent);
        let Some(root) = chain.first() else {
            return Err(Error::BadInput {
                reason: "the request holds no message to recognise a conversation by".into(),
            });
        };
        let root = call::root_name(root);
        let name = match self.divergence(&root, &client.events, &sent)? {
            // A new chat, or one that continues its first conversation.
            None if self.holds(&root)? => root,
            at => match self.trimmed(&client.events, &sent)? {
                // A client that dropped its oldest messages, continuing a conversation.
                Some(name) => name,
                None if at.is_none() => root,
                None => self.follow_forks(root, "", &client.events, &sent, &chain)?,
            },
        };
        let named = CallRequest {
            conversation: name,
            ..request.clone()
        };
        self.prepare_read(&named, None, &client, &sent)
    }

    /// Whether conversation `name` holds events a client sends back.
    fn holds(&self, name: &str) -> Result<bool> {
        let transcript = self.transcript(name);
        let mut t = lock(&transcript);
        t.refresh(self, name)?;
        Ok(!t.stored.is_empty())
    }

    /// The conversation a client that dropped its own oldest messages continues: one whose
    /// stored events, from some event after its first on to its end, are the client's first
    /// events, and hold a model reply (so two chats that share a message, or a few messages
    /// of the user's, never meet: the model's reply in that conversation is resent too).
    /// Found by the places of the client's first event in the store's places index
    /// ([`super::places`], caught up first with what any process committed), each verified
    /// against the stored events; of several, the one whose events the client resends most
    /// of. `None` when there is none.
    fn trimmed(&self, events: &[EventBody], sent: &[Digest]) -> Result<Option<String>> {
        let Some(first) = events.first() else {
            return Ok(None);
        };
        self.index_behind()?;
        let digest = self.as_stored(first);
        let mut best: Option<(usize, String)> = None;
        for (name, start) in self.backend().places_of(&digest, MAX_PLACES)? {
            let Ok(start) = usize::try_from(start) else {
                continue;
            };
            if start == 0 || best.as_ref().is_some_and(|(_, b)| *b == name) {
                continue;
            }
            let transcript = self.transcript(&name);
            let mut t = lock(&transcript);
            t.refresh(self, &name)?;
            let Some(n) = t
                .stored
                .len()
                .checked_sub(start)
                .filter(|n| *n <= events.len())
            else {
                continue;
            };
            let replied = events[..n].iter().any(|e| {
                matches!(
                    e,
                    EventBody::Assistant { .. }
                        | EventBody::ToolCall { .. }
                        | EventBody::Opaque { .. }
                )
            });
            let mut same = self.matcher(&t, events, sent);
            // A client whose first event is also the stored first edits or regenerates
            // (the rules of its first conversation apply), never trims.
            if n == 0 || !replied || same(0, 0) || !(0..n).all(|i| same(start + i, i)) {
                continue;
            }
            if best.as_ref().is_none_or(|(m, b)| (n, &name) > (*m, b)) {
                best = Some((n, name));
            }
        }
        Ok(best.map(|(_, name)| name))
    }

    /// The conversation the client's events continue, from `name` on: `name` when they
    /// continue it (or it does not exist), else the first fork from where they leave it
    /// that they continue, or the next new one ([`call::fork_name`] of the common part's
    /// fingerprint in `chain` and `base`, the name the client gave, if any).
    fn follow_forks(
        &self,
        mut name: String,
        base: &str,
        events: &[EventBody],
        sent: &[Digest],
        chain: &[Digest],
    ) -> Result<String> {
        // Each hop moves to a fork that shares more of the client's events.
        for _ in 0..=events.len() {
            let Some(at) = self.divergence(&name, events, sent)? else {
                break;
            };
            let mut fork = 0;
            name = loop {
                let candidate = call::fork_name(&chain[at - 1], base, fork);
                match self.divergence(&candidate, events, sent)? {
                    // A sibling branch from the same point: the next one.
                    Some(other) if other == at => fork += 1,
                    _ => break candidate,
                }
            };
        }
        Ok(name)
    }

    /// Where the client's events leave conversation `name`: `None` when they continue it
    /// (or it does not exist); else the index of the first event that differs (the length
    /// of the client's events when they are a shorter part of it: a regenerated reply).
    fn divergence(
        &self,
        name: &str,
        events: &[EventBody],
        sent: &[Digest],
    ) -> Result<Option<usize>> {
        let transcript = self.transcript(name);
        let mut t = lock(&transcript);
        t.refresh(self, name)?;
        let stored = t.stored.len();
        let mut same = self.matcher(&t, events, sent);
        let at = (0..stored.min(events.len()))
            .find(|&i| !same(i, i))
            .unwrap_or(stored.min(events.len()));
        Ok((at < stored).then_some(at.max(1)))
    }

    /// A call on a named conversation, continuing the response `previous` names (its id,
    /// and the seq of the input it answered), if any.
    fn prepare_once(
        &self,
        request: &CallRequest,
        previous: Option<(&str, u64)>,
        head: &ClientCall,
        messages: &Value,
    ) -> Result<PreparedCall> {
        let previous = match previous {
            Some((id, seq)) => Some(self.response_after(&request.conversation, id, seq)?),
            None => None,
        };
        let calls = previous.as_ref().map_or(&[][..], |p| p.calls.as_slice());
        let client = call::with_events(request.format, head, messages, calls)?;
        let sent: Vec<Digest> = client.events.iter().map(call::sent_digest).collect();
        if let Some(response) = previous.as_ref().filter(|p| !p.latest) {
            // A branch from an earlier response: a fork holding the conversation up to it.
            let (name, fork) = self.branch(&request.conversation, response, &client.events)?;
            let branch = CallRequest {
                conversation: name,
                ..request.clone()
            };
            return self.prepare_read(&branch, Some(&fork), &client, &sent);
        }
        match self.prepare_read(request, previous.as_ref(), &client, &sent) {
            // A named conversation whose history the client's leaves: a fork of it.
            Err(Error::Diverged { .. }) if previous.is_none() && !client.events.is_empty() => {
                let chain = call::fingerprints(&sent);
                let base = &request.conversation;
                let name = self.follow_forks(base.clone(), base, &client.events, &sent, &chain)?;
                let fork = CallRequest {
                    conversation: name,
                    ..request.clone()
                };
                self.prepare_read(&fork, None, &client, &sent)
            }
            result => result,
        }
    }

    /// [`Store::prepare_once`] with the client's call already read (`sent`: the digest of
    /// each of its events), continuing `previous` when the client named a response.
    fn prepare_read(
        &self,
        request: &CallRequest,
        previous: Option<&StoredResponse>,
        client: &ClientCall,
        sent: &[Digest],
    ) -> Result<PreparedCall> {
        let transcript = self.transcript(&request.conversation);
        let (known, start, stored_seq, awaits_reply) = {
            let mut t = lock(&transcript);
            t.refresh(self, &request.conversation)?;
            match previous {
                // The same branch call again, its items stored and not answered (the first
                // call failed, or waits for the provider): a retry.
                Some(p) if p.resent => (
                    client.events.len(),
                    t.stored.len().saturating_sub(client.events.len()),
                    t.last_seq,
                    t.awaits_reply,
                ),
                // The client's items continue the named response: all of them are new.
                Some(p) => (0, t.stored.len(), p.last_seq, false),
                None => {
                    let (known, start) = self.recognise(&t, &client.events, sent)?;
                    t.matched(start, &sent[..known]);
                    (known, start, t.last_seq, t.awaits_reply)
                }
            }
        };
        let new = &client.events[known..];
        let (before, input) = match new.last() {
            Some(EventBody::User {
                text,
                parts,
                provider_item: None,
            }) if parts.is_empty() => (&new[..new.len() - 1], Some(text.clone())),
            // A message with media is committed first and projected as the stored input.
            Some(EventBody::User { .. } | EventBody::ToolResult { .. }) => (new, None),
            // A retry of a call whose input is stored and not answered yet.
            None if awaits_reply => (new, None),
            _ => {
                return Err(Error::BadInput {
                    reason: "the messages sent end with nothing new for the model to answer: \
                             the last message must be a new user message or the results of \
                             the model's tool calls"
                        .into(),
                });
            }
        };
        let mut last_seq = stored_seq;
        let at = start + known;
        if !before.is_empty() {
            last_seq = self.commit_events(&request.conversation, last_seq, before)?;
            lock(&transcript).matched(at, &sent[known..known + before.len()]);
        }
        let budget = call::budget(request, &client.model, client.reserve)?;
        let trailing = &new[before.len()..];
        let projection = self.project(&project_request(request, client, input, budget)?)?;
        if !trailing.is_empty() {
            last_seq = self.commit_events(&request.conversation, last_seq, trailing)?;
            lock(&transcript).matched(at + before.len(), &sent[known + before.len()..]);
        }
        Ok(PreparedCall {
            conversation: request.conversation.clone(),
            body: projection.body,
            stream: client.stream,
            recognised: known as u64,
            committed: new.len() as u64,
            last_seq,
            budget,
            tokens: projection.report.tokens,
        })
    }

    /// How many of the client's events `t` holds, and where in it they start
    /// ([`call::recognised`]): an event matches by the digest of its bytes as sent, else
    /// (redacted, its media as stored) by its digest as stored.
    fn recognise(
        &self,
        t: &Transcript,
        events: &[EventBody],
        sent: &[Digest],
    ) -> Result<(usize, usize)> {
        call::recognised(t.stored.len(), events.len(), self.matcher(t, events, sent))
    }

    /// Whether stored event `s` of `t` is the client's event `c` ([`Store::recognise`]).
    fn matcher<'a>(
        &'a self,
        t: &'a Transcript,
        events: &'a [EventBody],
        sent: &'a [Digest],
    ) -> impl FnMut(usize, usize) -> bool + 'a {
        let mut as_stored: Vec<Option<Digest>> = vec![None; events.len()];
        move |s, c| {
            if t.sent[s] == Some(sent[c]) {
                return true;
            }
            let digest = *as_stored[c].get_or_insert_with(|| self.as_stored(&events[c]));
            t.stored[s] == digest
        }
    }

    /// The digest a client's event would have as stored: redacted, its media as stored.
    fn as_stored(&self, event: &EventBody) -> Digest {
        let redacted = self
            .redactor()
            .redact_commit(&NewCommit::new(vec![event.clone()]))
            .into_owned()
            .events;
        redacted
            .into_iter()
            .next()
            .map(call::parts_as_stored)
            .map_or([0; 32], |e| call::stored_digest(&e))
    }

    /// The stored response to the input that ends at seq `input` of `conversation`: the
    /// model's events after it, up to the next input (a user message or tool results), if
    /// the conversation went on ([`StoredResponse::latest`] false).
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] when no reply follows `input` (the call failed, or the seq
    /// is past the end).
    fn response_after(&self, conversation: &str, id: &str, input: u64) -> Result<StoredResponse> {
        let not_found = || Error::InvalidRequest {
            reason: format!(
                "{} '{id}': the call it names (conversation {conversation}, after seq \
                 {input}) failed or was never answered",
                call::NO_STORED_RESPONSE
            ),
        };
        let log = match self.log(&LogRequest {
            conversation: conversation.to_owned(),
            from: input + 1,
            limit: None,
        }) {
            Ok(log) => log,
            Err(Error::NotFound { .. }) => return Err(not_found()),
            Err(e) => return Err(e),
        };
        let next_input = log.events.iter().position(|e| {
            call::comparable(&e.body)
                && matches!(
                    e.body,
                    EventBody::User { .. } | EventBody::ToolResult { .. }
                )
        });
        let (reply, last_seq) = match next_input {
            Some(0) => return Err(not_found()),
            Some(i) => (&log.events[..i], log.events[i - 1].seq),
            None => (&log.events[..], log.last_seq),
        };
        let reply: Vec<&EventBody> = call::sent_back(reply)
            .into_iter()
            .map(|e| &e.body)
            .collect();
        if reply.is_empty() || input > log.last_seq {
            return Err(not_found());
        }
        let calls = reply
            .iter()
            .filter_map(|b| match b {
                EventBody::ToolCall { call_id, tool, .. } => Some((call_id.clone(), tool.clone())),
                _ => None,
            })
            .collect();
        Ok(StoredResponse {
            last_seq,
            calls,
            latest: next_input.is_none(),
            resent: false,
        })
    }

    /// A branch from `response`, a response of `conversation` that is not its latest: a fork
    /// holding the conversation up to the response (its events whole, artifacts inlined;
    /// markers left out), named by [`call::fork_name`] of the response's place and the
    /// conversation, the first such fork that holds only that part, or that part and the
    /// client's `items` awaiting their reply (the same branch call sent again: a retry; a new
    /// fork when each went on), and the response in it.
    fn branch(
        &self,
        conversation: &str,
        response: &StoredResponse,
        items: &[EventBody],
    ) -> Result<(String, StoredResponse)> {
        // The same call again, its items stored after the response in the conversation
        // itself (the call that went on was this one, and its provider call failed).
        let after = self.log(&LogRequest {
            conversation: conversation.to_owned(),
            from: response.last_seq + 1,
            limit: None,
        })?;
        if self.are_items(after.events.iter().map(|e| &e.body), items) {
            let retry = StoredResponse {
                last_seq: after.last_seq,
                calls: response.calls.clone(),
                latest: true,
                resent: true,
            };
            return Ok((conversation.to_owned(), retry));
        }
        let events: Vec<EventBody> = self.read(conversation, |snapshot| {
            let ledger = snapshot.ledger();
            ledger
                .events(1..=response.last_seq)?
                .iter()
                .filter(|e| !matches!(e.body, EventBody::System { .. }))
                .map(|e| crate::transfer::whole_body(ledger, e))
                .collect()
        })?;
        let place: Digest = Sha256::new()
            .chain_update(conversation.as_bytes())
            .chain_update([0])
            .chain_update(response.last_seq.to_le_bytes())
            .finalize()
            .into();
        let common: Vec<Digest> = events.iter().map(call::stored_digest).collect();
        for n in 0..=MAX_BRANCHES {
            let name = call::fork_name(&place, conversation, n);
            let (last_seq, resent) = match self.log(&LogRequest {
                conversation: name.clone(),
                from: 1,
                limit: None,
            }) {
                Err(Error::NotFound { .. }) => (self.commit_events(&name, 0, &events)?, false),
                Err(e) => return Err(e),
                Ok(log) => {
                    let held: Vec<&EventBody> = log
                        .events
                        .iter()
                        .map(|e| &e.body)
                        .filter(|b| !matches!(b, EventBody::System { .. }))
                        .collect();
                    let (part, rest) = held.split_at(common.len().min(held.len()));
                    if !part
                        .iter()
                        .map(|b| call::stored_digest(b))
                        .eq(common.iter().copied())
                    {
                        continue;
                    }
                    let resent = !rest.is_empty();
                    if resent && !self.are_items(rest.iter().copied(), items) {
                        continue;
                    }
                    (log.last_seq, resent)
                }
            };
            let fork = StoredResponse {
                last_seq,
                calls: response.calls.clone(),
                latest: true,
                resent,
            };
            return Ok((name, fork));
        }
        Err(Error::Diverged {
            reason: format!(
                "{MAX_BRANCHES} branches from this response of conversation {conversation} \
                 already went on: continue one of them (its latest response), or name a new \
                 conversation"
            ),
        })
    }

    /// Whether the stored events `held` (system markers aside) are the client's `items`.
    fn are_items<'a>(
        &self,
        held: impl Iterator<Item = &'a EventBody>,
        items: &[EventBody],
    ) -> bool {
        held.filter(|b| !matches!(b, EventBody::System { .. }))
            .map(call::stored_digest)
            .eq(items.iter().map(|e| self.as_stored(e)))
    }

    /// The recognition state of `conversation` (empty until first read).
    fn transcript(&self, conversation: &str) -> Arc<Mutex<Transcript>> {
        self.transcripts.get(conversation)
    }

    /// Commits a provider's reply to a relayed call, read by the import parser of its format
    /// (so that the same message resent by the client is recognised), right after
    /// `request.after` when given.
    ///
    /// # Errors
    /// [`Error::BadInput`] for a message the parser refuses or that holds nothing;
    /// [`ctxlog_ledger::Error::Moved`] (class conflict) when the conversation moved on past
    /// `request.after`; ledger errors.
    pub fn commit_reply(&self, request: &ReplyRequest) -> Result<CommitReceipt> {
        let events = reply_events(request.format, &request.message)?;
        let sent: Vec<Digest> = events.iter().map(call::sent_digest).collect();
        let mut commit = NewCommit::new(events);
        if let Some(after) = request.after {
            commit = commit.with_after(after);
        }
        let receipt = self.commit(&CommitRequest {
            conversation: request.conversation.clone(),
            commit,
        })?;
        // The reply as the client will resend it: recognised by its digest as sent.
        let transcript = self.transcript(&request.conversation);
        let mut t = lock(&transcript);
        if t.refresh(self, &request.conversation).is_ok() && t.last_seq == receipt.last_seq {
            let at = t.stored.len().saturating_sub(sent.len());
            t.matched(at, &sent);
        }
        drop(t);
        // The reply is committed whatever happens here: a place not written now is written
        // by the catch-up before the next lookup ([`Store::index_behind`]).
        let _ = self.index_places(&request.conversation);
        Ok(receipt)
    }

    /// Answers a recall step: a model reply whose only calls are calls of the recall tool
    /// (at most `request.max_calls`), made to a call that offered it
    /// ([`CallRequest::recall_tool`]). Each call is answered by [`Store::recall_tool`] and
    /// stored, right after `request.after`, as the gateway's own events (the reply's text,
    /// reasoning and other items in their place, then the calls and their results under ids
    /// starting [`call::RECALL_CALL_PREFIX`]), which recognition skips when the client,
    /// which never saw the step, resends its history ([`call::sent_back`]). The conversation, the step included, is projected
    /// again as the next body to send upstream. `None` when the reply is not such a step.
    ///
    /// # Errors
    /// [`ctxlog_ledger::Error::Moved`] (class conflict) when the conversation moved on past
    /// `request.after`; projection errors; ledger errors.
    pub fn answer_recall(&self, request: &RecallStepRequest) -> Result<Option<RecallStep>> {
        let call = &request.call;
        // A reply the parser refuses, or an empty one, is no step: it is relayed as it came.
        let Ok(reply) = reply_events(call.format, &request.reply) else {
            return Ok(None);
        };
        let Some(arguments) = call::recall_arguments(&reply)
            .filter(|a| call.recall_tool && a.len() <= request.max_calls)
        else {
            return Ok(None);
        };
        // What the model wrote before its calls (text, reasoning, thinking) stays in its
        // place, as the gateway's own: recognition skips it with the step
        // ([`call::sent_back`]).
        let mut calls: Vec<EventBody> = reply
            .into_iter()
            .filter(|e| !matches!(e, EventBody::ToolCall { .. }))
            .collect();
        let mut results = Vec::with_capacity(arguments.len());
        for (k, arguments) in arguments.into_iter().enumerate() {
            let call_id = format!("{}{}-{k}", call::RECALL_CALL_PREFIX, request.after);
            let output = self.recall_tool(&call.conversation, &arguments);
            results.push(EventBody::ToolResult {
                call_id: call_id.clone(),
                tool: call::RECALL_TOOL_NAME.into(),
                status: if output.is_error {
                    ToolStatus::Error
                } else {
                    ToolStatus::Ok
                },
                exit_code: None,
                text: output.json.to_string(),
                artifact: None,
                parts: Vec::new(),
                provider_item: None,
            });
            calls.push(EventBody::ToolCall {
                call_id,
                tool: call::RECALL_TOOL_NAME.into(),
                arguments,
                provider_item: None,
            });
        }
        let answered = results.len();
        calls.extend(results);
        let last_seq = self.commit_events(&call.conversation, request.after, &calls)?;
        let (client, _) = call::read_head(call.format, &call.body)?;
        let budget = call::budget(call, &client.model, client.reserve)?;
        let projection = self.project(&project_request(call, &client, None, budget)?)?;
        Ok(Some(RecallStep {
            answered,
            prepared: PreparedCall {
                conversation: call.conversation.clone(),
                body: projection.body,
                stream: client.stream,
                recognised: 0,
                committed: calls.len() as u64,
                last_seq,
                budget,
                tokens: projection.report.tokens,
            },
        }))
    }

    /// Commits `events` right after seq `after`, under an id derived from both; the new last
    /// seq.
    fn commit_events(&self, conversation: &str, after: u64, events: &[EventBody]) -> Result<u64> {
        let mut digest = Sha256::new();
        digest.update(after.to_le_bytes());
        for event in events {
            digest.update(serde_json::to_vec(event).unwrap_or_default());
            digest.update([0]);
        }
        let id = ctxlog_backend::to_hex(&digest.finalize()[..12]);
        let receipt = self.commit(&CommitRequest {
            conversation: conversation.to_owned(),
            commit: NewCommit::new(events.to_vec())
                .with_id(format!("call-{id}"))
                .with_after(after),
        })?;
        Ok(receipt.last_seq)
    }
}

/// A stored response a Responses client continues ([`Store::prepare_call`] with
/// `previous`).
struct StoredResponse {
    /// The response's end: its last event's seq.
    last_seq: u64,
    /// The tool calls it made (call id, tool), which the client's items may answer.
    calls: Vec<(String, String)>,
    /// Whether it is the conversation's latest (nothing was committed after it).
    latest: bool,
    /// Whether the client's items are stored right after it already, awaiting their reply
    /// (a branch call sent again, [`Store::branch`]).
    resent: bool,
}

/// How many places of a client's first event a trimmed history is looked for in
/// ([`Store::trimmed`]), newest first: a message sent in many conversations (a greeting)
/// costs a bounded number of reads.
const MAX_PLACES: usize = 32;

/// How many branches from one response ([`Store::branch`]) are looked for before a call is
/// refused.
const MAX_BRANCHES: u64 = 64;

/// Whether `e` is a commit refused because the conversation moved on.
fn is_moved(e: &Error) -> bool {
    matches!(e.ledger_cause(), Some(ctxlog_ledger::Error::Moved { .. }))
}
/// The projection of a relayed call: whole turns in a cache-stable window (consecutive calls
/// share their prefix, so the provider's prompt cache stays warm), no recall pages or notices
/// (nothing the client did not send), the client's system prompt, tools and fields. No cache
/// hints of ctxlog's own: the client's `cache_control` and cache keys pass through as sent.
fn project_request(
    request: &CallRequest,
    client: &ClientCall,
    input: Option<String>,
    budget: Option<u64>,
) -> Result<ProjectRequest> {
    let named_recall = |t: &Value| {
        t.get("name")
            .or_else(|| t.get("function").and_then(|f| f.get("name")))
            .and_then(Value::as_str)
            == Some(call::RECALL_TOOL_NAME)
    };
    if request.recall_tool && client.tools.iter().any(named_recall) {
        return Err(Error::BadInput {
            reason: format!(
                "the gateway offers its own recall tool (--recall-tool), and one of the \
                 request's tools is named {:?} too: rename yours, or run the gateway without \
                 --recall-tool",
                call::RECALL_TOOL_NAME
            ),
        });
    }
    // Anthropic's max_tokens and Responses' max_output_tokens are the projector's own.
    let anthropic = matches!(
        request.format,
        WireFormat::AnthropicMessages | WireFormat::OpenAiResponses
    );
    Ok(ProjectRequest {
        conversation: request.conversation.clone(),
        input,
        system: client.system.clone(),
        model: Some(client.model.clone()),
        format: request.format,
        max_tokens: budget,
        reserve_output: client.reserve.filter(|_| anthropic),
        policy: Policy::Turns,
        window: Window::Stable,
        stored_input: true,
        recall: Some(0),
        tools: client.tools.clone(),
        fields: client.fields.clone(),
        recall_tool: request.recall_tool,
        ..ProjectRequest::default()
    })
}

/// A provider's reply read as events by the import parser of its format: a Responses reply
/// is its list of output items; the others, one message.
///
/// # Errors
/// [`Error::BadInput`] for a message the parser refuses or that holds nothing.
fn reply_events(format: WireFormat, message: &Value) -> Result<Vec<EventBody>> {
    let messages = match message {
        Value::Array(items) if format == WireFormat::OpenAiResponses => Value::Array(items.clone()),
        message => Value::Array(vec![message.clone()]),
    };
    let events = crate::transfer::reply_events(format, messages)?;
    if events.is_empty() {
        return Err(Error::BadInput {
            reason: "the reply holds no text and no tool call".into(),
        });
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::Transcripts;

    #[test]
    fn the_least_recently_used_transcripts_are_evicted_past_the_byte_bound() {
        let t = Transcripts::new(250);
        let a = t.get("a");
        t.measured("a", 100);
        t.get("b");
        t.measured("b", 100);
        // "a" used again: "b" is now the oldest.
        assert!(std::sync::Arc::ptr_eq(&a, &t.get("a")));
        t.get("c");
        t.measured("c", 100);
        assert_eq!(t.cached(), ["a", "c"]);
        // An evicted one comes back empty (read again from the store), evicting the least
        // recently used ("a", before "c").
        let b = t.get("b");
        assert_eq!(b.lock().unwrap().last_seq, 0);
        t.measured("b", 100);
        assert_eq!(t.cached(), ["b", "c"]);
        // One larger than the bound is kept while it is the one in use.
        t.get("d");
        t.measured("d", 1000);
        assert_eq!(t.cached(), ["d"]);
    }
}

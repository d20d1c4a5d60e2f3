//! [`Store`]: a long-lived set of conversations over a [`Backend`], and the operations on it
//! (docs/design.md#i0-one-operations-layer; request and response types in [`crate::ops`]).
//!
//! A store serves many calls from many threads. It keeps each conversation's writer open
//! between commits, and a small pool of read handles (with their size caches and recall
//! index) between reads. Commits to one conversation are serialized inside the process:
//! they queue for the writer (for at most [`StoreBuilder::writer_wait`], if set), and whoever
//! gets the writer writes everything queued as one batch with one sync (group commit,
//! [`Store::commit`]); reads never wait for commits and run in parallel with each other.

mod builder;
mod call;
mod lease;
mod places;
mod transfer;

use lease::{Queued, Slot, WriterLease, lock, pool_reader};

pub use builder::{DEFAULT_RECOGNITION_CACHE, StoreBuilder};

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ctxlog_ledger::{CommitReceipt, NewCommit, Options};
use ctxlog_projection::{Count, Projection, SizeCache, SliceHistory, WireFormat};
use ctxlog_recall::{Progress, RecallResult, SearchOptions};

use crate::backend::{Backend, OpenedWriter};
use crate::handle::RecallSetup;
use crate::ops::{
    AllMarker, CommitRequest, CountRequest, EraseRequest, EraseResponse, EraseTarget,
    GcConversation, GcRequest, GcResponse, ListRequest, ListResponse, LogRequest, LogResponse,
    ProjectRequest, RecallIndexCheck, RecallRequest, ReindexRequest, ReindexResponse,
    RepairRequest, RepairResponse, VerifyRequest, VerifyResponse,
};
use crate::redact::Redactor;
use crate::retention::RetentionPolicy;
use crate::{Conversation, ConversationName, Error, Result, Snapshot, StoreConfig};

/// A set of conversations and the operations on them.
///
/// ```
/// use ctxlog::ops::{CommitRequest, ProjectRequest};
/// # fn main() -> ctxlog::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let store = ctxlog::Store::open(dir.path())?;
/// let turn = CommitRequest::from_json("demo", br#"{"user":"hi","assistant":"hello"}"#, None)?;
/// let receipt = store.commit(&turn)?;
/// assert_eq!((receipt.first_seq, receipt.last_seq), (1, 2));
/// let projection = store.project(&ProjectRequest {
///     conversation: "demo".into(),
///     input: Some("and now?".into()),
///     max_bytes: Some(4096),
///     ..Default::default()
/// })?;
/// assert_eq!(projection.report.turns.kept, 1);
/// # Ok(()) }
/// ```
pub struct Store {
    backend: Arc<dyn Backend>,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    writer_wait: Option<Duration>,
    /// Applied to every commit before it is written (docs/design.md#e5-redaction).
    redactor: Arc<Redactor>,
    /// The configured retention policy, and whether opening a writer applies it
    /// (docs/design.md#e2-retention).
    retention: RetentionPolicy,
    retain_on_open: bool,
    /// What relayed calls recognise of each conversation ([`call::Transcript`]).
    transcripts: call::Transcripts,
    /// How conversations' recall indexes are opened (the semantic leg's model).
    recall: RecallSetup,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// The embedded file store at `root` with the ledger's default [`Options`] and the
    /// root's configuration (`ctxlog.toml`, if it has one). Shorthand for
    /// [`StoreBuilder::dir`]`(root).build()`; the builder sets everything else.
    ///
    /// Nothing is created until the first conversation is: read-only use of a store leaves
    /// no trace, and a new root is created (and its entry synced) with its first ledger.
    ///
    /// # Errors
    /// A configuration file that cannot be read or does not check out
    /// ([`StoreBuilder::build`]).
    pub fn open(root: impl AsRef<Path>) -> Result<Store> {
        StoreBuilder::dir(root).build()
    }

    /// The embedded file store at `root`; every conversation is opened with `options`.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn with_options(root: impl AsRef<Path>, options: Options) -> Result<Store> {
        StoreBuilder::dir(root).options(options).build()
    }

    /// A store over any backend, with the default [`StoreConfig`]: the built-in secret shapes
    /// and secret-named environment values (read now) are redacted; no retention policy.
    ///
    /// # Errors
    /// As [`StoreBuilder::build`].
    pub fn with_backend(backend: Arc<dyn Backend>) -> Result<Store> {
        StoreBuilder::backend(backend).build()
    }

    /// A store over `backend` with `config` applied: redaction (the environment is read now)
    /// and the retention policy.
    pub(crate) fn configured(
        backend: Arc<dyn Backend>,
        config: &StoreConfig,
        writer_wait: Option<Duration>,
        recognition_cache: usize,
    ) -> Result<Store> {
        let retention = config.retention.policy();
        retention.check()?;
        Ok(Store {
            backend,
            slots: Mutex::new(HashMap::new()),
            writer_wait,
            redactor: Arc::new(Redactor::new(&config.redaction)?),
            retention,
            retain_on_open: config.retention.on_open,
            transcripts: call::Transcripts::new(recognition_cache),
            recall: RecallSetup::new(&config.recall)?,
        })
    }

    /// What this store redacts commits with.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The backend.
    pub fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    /// The store's secret `name` (1 to 32 characters from `a-z 0-9 -`): 32 random bytes the
    /// store keeps, created by the first call in any process and the same for every process
    /// over the store from then on ([`Backend::secret`]: a file of the store's root, a row
    /// of a database's schema).
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for a name outside the rule; I/O or database errors; a
    /// stored secret that does not read back (the message names it and how to replace it).
    pub fn secret(&self, name: &str) -> Result<crate::backend::Secret> {
        let name = crate::backend::SecretName::new(name)?;
        Ok(self.backend.secret(name)?)
    }

    /// Opens `name` for writing, creating it if needed: the low-level handle, outside the
    /// store's cache. Holds the conversation's writer lock until dropped (the store's own
    /// commits to it get [`ctxlog_ledger::Error::Locked`] meanwhile); a torn tail left by a
    /// crash is cut and reported ([`Conversation::recovery`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`ctxlog_ledger::Error::Locked`] if another writer holds it;
    /// [`ctxlog_ledger::Error::Corrupt`] if a record before the tail is damaged.
    pub fn conversation(&self, name: &str) -> Result<Conversation> {
        self.open_writer(&ConversationName::new(name)?, true)
    }

    /// Opens `name` for reading only: takes no lock, writes nothing to the ledger, and sees
    /// every commit acknowledged before the call.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::NotFound`], or a ledger error.
    pub fn snapshot(&self, name: &str) -> Result<Snapshot> {
        self.open_snapshot(&ConversationName::new(name)?)
    }

    fn open_writer(&self, name: &ConversationName, create: bool) -> Result<Conversation> {
        Ok(self.writer_handle(name, self.backend.open_writer(name, create)?))
    }

    /// The conversation handle of a writer the backend opened: its recall cache and this
    /// store's redactor.
    fn writer_handle(&self, name: &ConversationName, opened: OpenedWriter) -> Conversation {
        let mut handle = Conversation::new(
            name.clone(),
            opened.writer,
            opened.recovery,
            self.backend.recall_cache(name),
        );
        handle.set_redactor(Some(self.redactor.clone()));
        handle.set_recall_setup(self.recall.clone());
        handle
    }

    /// The writer of an existing `name` for a request that reads before it writes (an
    /// erasure, retention): the one `lease` kept from an earlier request, caught up first —
    /// on PostgreSQL other replicas may have committed or erased since, or erased the
    /// conversation whole, and then it holds nothing and is opened afresh, as a read does
    /// (not found, or the conversation created anew) — else one opened now. Never creates
    /// the conversation.
    fn current_writer(
        &self,
        lease: &mut WriterLease<'_>,
        name: &ConversationName,
    ) -> Result<Conversation> {
        if let Some(mut handle) = lease.handle.take() {
            handle.catch_up()?;
            if handle.ledger().exists() {
                return Ok(handle);
            }
        }
        self.open_writer(name, false)
    }

    fn open_snapshot(&self, name: &ConversationName) -> Result<Snapshot> {
        let view = self.backend.open_view(name)?;
        let mut handle = Snapshot::new(
            name.clone(),
            view,
            Default::default(),
            self.backend.recall_cache(name),
        );
        handle.set_recall_setup(self.recall.clone());
        Ok(handle)
    }

    fn slot(&self, name: &ConversationName) -> Arc<Slot> {
        lock(&self.slots)
            .entry(name.to_string())
            .or_default()
            .clone()
    }

    /// Waits for the writer slot of `name` (queued behind other commits of this process).
    fn writer_lease<'a>(&self, slot: &'a Slot, name: &ConversationName) -> Result<WriterLease<'a>> {
        let start = Instant::now();
        let mut state = lock(&slot.writer);
        while state.busy {
            state = match self.writer_wait {
                None => slot
                    .writer_free
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
                Some(wait) => {
                    let left = wait
                        .checked_sub(start.elapsed())
                        .ok_or_else(|| Error::Busy {
                            name: name.to_string(),
                            waited_ms: start.elapsed().as_millis() as u64,
                        })?;
                    slot.writer_free
                        .wait_timeout(state, left)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0
                }
            };
        }
        state.busy = true;
        let handle = state.handle.take();
        Ok(WriterLease::new(slot, handle))
    }

    /// A read handle of `name` from the pool, or a new one.
    fn reader(&self, slot: &Slot, name: &ConversationName) -> Result<Snapshot> {
        let pooled = lock(&slot.readers).pop();
        match pooled {
            Some(handle) => Ok(handle),
            None => self.open_snapshot(name),
        }
    }

    /// Runs `f` on a read handle of `name`. A pooled handle whose catch-up (every read
    /// path's first step) found the conversation gone, erased whole by another replica, held
    /// nothing by then; it is dropped, and `f` runs on a handle opened afresh: not found (the
    /// backend deletes this machine's recall cache of it), or the conversation created anew
    /// meanwhile.
    pub(crate) fn read<T>(
        &self,
        name: &str,
        f: impl FnMut(&mut Snapshot) -> Result<T>,
    ) -> Result<T> {
        self.read_handle(name, f)
            .map_err(|e| e.in_conversation(name))
    }

    fn read_handle<T>(
        &self,
        name: &str,
        mut f: impl FnMut(&mut Snapshot) -> Result<T>,
    ) -> Result<T> {
        let name = ConversationName::new(name)?;
        let slot = self.slot(&name);
        let _files = slot
            .files
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut handle = self.reader(&slot, &name)?;
        let result = f(&mut handle);
        if handle.ledger().exists() && !log_gone(&result) {
            pool_reader(&slot, handle);
            return result;
        }
        // Gone (erased whole by another process or replica): every pooled handle holds files
        // that no longer exist; they are closed, and `f` runs on a handle opened afresh (not
        // found, or the conversation created anew meanwhile).
        drop(handle);
        lock(&slot.readers).clear();
        f(&mut self.open_snapshot(&name)?)
    }

    /// Runs `f` with no read of `name` in flight, after closing the pooled read handles (they
    /// hold files that `f` deletes or replaces).
    fn exclusive<T, E>(&self, slot: &Slot, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let _files = slot
            .files
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        lock(&slot.readers).clear();
        f()
    }

    /// Commits one turn, creating the conversation on its first commit (docs/design.md#4-ledger).
    /// If the commit is refused and this call created the conversation, it is removed again: a
    /// rejected request leaves no trace (docs/design.md#9-bad-input-and-faults).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::Busy`], [`Error::BadInput`] for a commit id that
    /// matches a redaction rule ([`Redactor::check_commit_id`]), and the ledger's refusals:
    /// invalid turns, caps, [`ctxlog_ledger::Error::Conflict`],
    /// [`ctxlog_ledger::Error::Locked`], I/O.
    ///
    /// Concurrent commits to one conversation share syncs (group commit): a commit that
    /// finds the writer busy queues; the next caller to get the writer writes every queued
    /// commit as one batch ([`Conversation::commit_batch`]: on the file backend one append
    /// and one sync) and each caller gets its own result, only after the sync that covers
    /// its bytes. A refused commit fails alone. The writer wait ([`StoreBuilder::writer_wait`])
    /// applies while a commit is queued; once a batch has taken it, it waits for that batch.
    pub fn commit(&self, request: &CommitRequest) -> Result<CommitReceipt> {
        self.commit_queued(request)
            .map_err(|e| e.in_conversation(&request.conversation))
    }

    fn commit_queued(&self, request: &CommitRequest) -> Result<CommitReceipt> {
        let name = ConversationName::new(&request.conversation)?;
        // Refused before it queues (the writer checks it again, for handles used directly).
        if let Some(id) = &request.commit.id {
            self.redactor.check_commit_id(id)?;
        }
        let slot = self.slot(&name);
        let start = Instant::now();
        let mut state = lock(&slot.writer);
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push(Queued {
            ticket,
            commit: request.commit.clone(),
        });
        loop {
            if let Some(result) = state.done.remove(&ticket) {
                return result;
            }
            if !state.busy {
                break;
            }
            let queued = state.queue.iter().any(|q| q.ticket == ticket);
            state = match self.writer_wait {
                Some(wait) if queued => {
                    let Some(left) = wait.checked_sub(start.elapsed()) else {
                        state.queue.retain(|q| q.ticket != ticket);
                        return Err(Error::Busy {
                            name: name.to_string(),
                            waited_ms: start.elapsed().as_millis() as u64,
                        });
                    };
                    slot.writer_free
                        .wait_timeout(state, left)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0
                }
                _ => slot
                    .writer_free
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            };
        }
        // Not answered and the writer free: this commit is still queued, and this caller
        // writes the queue.
        state.busy = true;
        let lease = WriterLease::new(&slot, state.handle.take());
        drop(state);
        self.write_queue(&slot, &name, lease, ticket)
    }

    /// Writes every commit queued on `slot` as one batch with the writer `lease` holds, and
    /// answers each: `ticket`'s here, the others' for their callers when the lease ends.
    fn write_queue(
        &self,
        slot: &Slot,
        name: &ConversationName,
        mut lease: WriterLease<'_>,
        ticket: u64,
    ) -> Result<CommitReceipt> {
        // Opening fails this commit alone; the others stay queued and the next one tries.
        let (handle, created) = match self.ensure_writer(slot, name, &mut lease.handle) {
            Ok(opened) => opened,
            Err(e) => {
                lock(&slot.writer).queue.retain(|q| q.ticket != ticket);
                return Err(e);
            }
        };
        let batch = std::mem::take(&mut lock(&slot.writer).queue);
        let commits: Vec<&NewCommit> = batch.iter().map(|q| &q.commit).collect();
        // Taken before writing: should the write panic, the lease answers them on drop.
        lease.taken = batch.iter().map(|q| q.ticket).collect();
        let answers = batch_answers(handle.commit_batch(&commits), batch.len());
        let mut mine = None;
        for (queued, answer) in batch.iter().zip(answers) {
            if queued.ticket == ticket {
                mine = Some(answer);
            } else {
                lease.answers.push((queued.ticket, answer));
            }
        }
        // Every commit of the batch refused and the conversation new: it is removed again.
        self.settle_writer(slot, name, &mut lease, created)?;
        mine.unwrap_or_else(|| {
            Err(Error::Internal {
                reason: "the commit left the queue unanswered".into(),
            })
        })
    }

    /// Appends an export's tombstone as it was (an import; see
    /// [`ctxlog_ledger::Ledger::append_tombstone`]), creating the conversation like a commit.
    pub(crate) fn append_tombstone(
        &self,
        conversation: &str,
        t: &ctxlog_ledger::rules::Tombstone,
    ) -> Result<CommitReceipt> {
        self.write(conversation, |handle| handle.append_tombstone(t))
    }

    /// Runs `write` on the writer of `conversation`, creating the conversation if missing;
    /// if `write` fails and this call created it, it is removed again.
    pub(crate) fn write<T>(
        &self,
        conversation: &str,
        write: impl FnOnce(&mut Conversation) -> Result<T>,
    ) -> Result<T> {
        let name = ConversationName::new(conversation)?;
        let slot = self.slot(&name);
        let mut lease = self.writer_lease(&slot, &name)?;
        let written = self
            .ensure_writer(&slot, &name, &mut lease.handle)
            .map(|(handle, created)| (write(handle), created));
        let (result, created) = written.map_err(|e| e.in_conversation(conversation))?;
        self.settle_writer(&slot, &name, &mut lease, created)?;
        result.map_err(|e| e.in_conversation(conversation))
    }

    /// The writer of `name` in `writer` (a lease's), opened into it unless it holds one,
    /// creating the conversation if missing (and applying retention on open, if configured);
    /// and true when this call created the conversation.
    fn ensure_writer<'l>(
        &self,
        slot: &Slot,
        name: &ConversationName,
        writer: &'l mut Option<Conversation>,
    ) -> Result<(&'l mut Conversation, bool)> {
        if let Some(handle) = writer.take() {
            return Ok((writer.insert(handle), false));
        }
        let opened = self.backend.open_writer(name, true)?;
        let created = opened.created;
        let mut handle = self.writer_handle(name, opened);
        if self.retain_on_open && !created && !self.retention.is_empty() {
            self.retain(slot, &mut handle, &self.retention)?;
        }
        Ok((writer.insert(handle), created))
    }

    /// After writing through `lease`: a conversation this lease created that still holds
    /// nothing (its commits were refused) is removed again, so a rejected request leaves no
    /// trace (docs/design.md#9-bad-input-and-faults); a writer whose sync failed is dropped (the
    /// next commit reopens, docs/design.md#l8-failed-io).
    fn settle_writer(
        &self,
        slot: &Slot,
        name: &ConversationName,
        lease: &mut WriterLease<'_>,
        created: bool,
    ) -> Result<()> {
        let Some(handle) = lease.handle.as_ref() else {
            return Ok(());
        };
        if created && handle.last_seq() == 0 {
            if let Some(handle) = lease.handle.take() {
                // A read may have opened the new files meanwhile: let it finish first.
                self.exclusive(slot, || {
                    self.backend.discard_created(name, handle.into_writer())
                })?;
            }
        } else if handle.is_poisoned() {
            lease.handle = None;
        }
        Ok(())
    }

    /// Events of a conversation, `from` on (what `ctxlog log` prints).
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::InvalidRequest`] for `from` 0 (seqs start at 1); ledger
    /// read errors.
    pub fn log(&self, request: &LogRequest) -> Result<LogResponse> {
        check_first_seq("from", Some(request.from))?;
        self.read(&request.conversation, |snapshot| {
            snapshot.catch_up()?;
            let to = match request.limit {
                Some(n) => request.from.saturating_add(n).saturating_sub(1),
                None => u64::MAX,
            };
            Ok(LogResponse {
                last_seq: snapshot.last_seq(),
                events: snapshot.events(request.from..=to)?,
            })
        })
    }

    /// Checks every record's checksum, the sidecar index, the artifacts and the recall index
    /// (a full read of each); writes nothing. Artifact problems are in the report;
    /// [`crate::ops::verify_problem`] turns them into the corruption error. A damaged recall
    /// index is reported, not an error (`reindex` rebuilds it).
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`ctxlog_ledger::Error::Corrupt`] naming the offset and seq.
    pub fn verify(&self, request: &VerifyRequest) -> Result<VerifyResponse> {
        let name = ConversationName::new(&request.conversation)?;
        let ledger = self
            .backend
            .verify(&name)
            .map_err(|e| Error::from(e).in_conversation(&request.conversation))?;
        Ok(VerifyResponse::new(
            ledger,
            RecallIndexCheck::of(&self.backend.recall_cache(&name)),
        ))
    }

    /// The exact request body for one model call (docs/design.md#5-projection). A conversation with
    /// no commits yet projects the mandatory input alone, nothing is created, and `report.notes`
    /// says that the conversation has no commits (a typo in its name looks like this).
    ///
    /// # Errors
    /// [`ctxlog_projection::Error::MandatoryExceedsBudget`] (class over budget) when the
    /// mandatory input alone does not fit; invalid requests (class usage); ledger errors.
    pub fn project(&self, request: &ProjectRequest) -> Result<Projection> {
        self.project_with(request, true)
    }

    /// [`project`](Self::project), for a caller that sends the body and does not read the
    /// report's token figures (the CLI without `--report`, the server without
    /// `?report=true`). Unless the request has a token budget, nothing is tokenized, so a
    /// fresh process builds no tokenizer: the report's counted token figures (`tokens`,
    /// `mandatory.tokens`, each tier's `tokens`) are 0. The body and everything else in the
    /// report are what [`project`](Self::project) returns, and
    /// [`ctxlog_projection::Error::MandatoryExceedsBudget`] still names the tokens needed.
    ///
    /// # Errors
    /// As [`project`](Self::project).
    pub fn project_body(&self, request: &ProjectRequest) -> Result<Projection> {
        self.project_with(request, false)
    }

    fn project_with(&self, request: &ProjectRequest, token_figures: bool) -> Result<Projection> {
        check_recall_k(request.recall)?;
        let plain = request.to_projection_with(token_figures)?;
        match self.read(&request.conversation, |snapshot| snapshot.project(&plain)) {
            Err(Error::NotFound { .. }) => {
                let mut projection = ctxlog_projection::project(
                    &SliceHistory::new(&[]),
                    &plain,
                    &mut SizeCache::new(),
                )?;
                projection
                    .report
                    .notes
                    .push(no_commits_note(&request.conversation));
                Ok(projection)
            }
            result => result,
        }
    }

    /// Bytes and tokens of a request body (docs/design.md#p3-tokens), counted as the projector
    /// counts, by the rule of its format: the one given, or the one its shape shows
    /// ([`crate::ops::detect_format`]).
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] when no format is given and the shape could be either;
    /// [`ctxlog_projection::Error`] for a body that is not such a request.
    pub fn count(&self, request: &CountRequest) -> Result<Count> {
        crate::ops::check_input_size(
            request.body.len() as u64,
            crate::ops::MAX_INPUT_BYTES,
            "the body",
        )?;
        let format = match request.format {
            Some(format) => format,
            // Not a request body at all: the counter says what is wrong with it (bad input).
            None if !crate::ops::looks_like_a_request(&request.body) => WireFormat::OpenAiChat,
            None => {
                crate::ops::detect_format(&request.body).ok_or_else(|| Error::InvalidRequest {
                    reason: "cannot tell the body's wire format from its shape (it could be \
                             openai-chat or anthropic-messages); give the format (--format)"
                        .into(),
                })?
            }
        };
        Ok(ctxlog_projection::count(
            &request.body,
            format,
            request.tokenizer,
        )?)
    }

    /// Searches a conversation's history (docs/design.md#6-recall).
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::InvalidRequest`] for a limit outside 1 to
    /// [`ctxlog_recall::MAX_LIMIT`] or seq 0 (seqs start at 1);
    /// [`ctxlog_recall::Error::Damaged`] naming `ctxlog reindex`.
    pub fn recall(&self, request: &RecallRequest) -> Result<RecallResult> {
        if !(1..=ctxlog_recall::MAX_LIMIT).contains(&request.limit) {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "limit must be from 1 to {}, not {}",
                    ctxlog_recall::MAX_LIMIT,
                    request.limit
                ),
            });
        }
        check_first_seq("seq", request.seq)?;
        let options = SearchOptions {
            seq: request.seq,
            offset: request.offset,
            limit: request.limit,
            ..Default::default()
        };
        self.read(&request.conversation, |snapshot| {
            snapshot.recall(&request.query, &options)
        })
    }

    /// Answers a call of the recall tool that a model made (its arguments as produced),
    /// as the tool's JSON result. Failures become a tool error the model can read.
    pub fn recall_tool(
        &self,
        conversation: &str,
        arguments: &serde_json::Value,
    ) -> ctxlog_recall::ToolOutput {
        self.read(conversation, |snapshot| Ok(snapshot.recall_tool(arguments)))
            .unwrap_or_else(|e| {
                ctxlog_recall::tool_error("conversation_unavailable", &e.to_string())
            })
    }

    /// Deletes and rebuilds a conversation's recall index, calling `progress` after each
    /// event. Repairs a damaged index.
    ///
    /// # Errors
    /// [`Error::NotFound`]; I/O or SQLite failures; ledger read errors.
    pub fn reindex(
        &self,
        request: &ReindexRequest,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ReindexResponse> {
        let name = ConversationName::new(&request.conversation)?;
        let slot = self.slot(&name);
        let stats = self
            .exclusive(&slot, || self.open_snapshot(&name)?.reindex(progress))
            .map_err(|e| e.in_conversation(&request.conversation))?;
        Ok(ReindexResponse {
            events_indexed: stats.events_indexed,
            pages_written: stats.pages_written,
            indexed_through: stats.indexed_through,
            artifact_failures: stats.artifact_failures,
        })
    }

    /// Erases a turn, a seq range or a whole conversation for real (docs/design.md#e1-erasure).
    /// Never creates a conversation: a missing one is [`Error::NotFound`]. The reason is redacted,
    /// as a commit's text is, before the tombstone records it.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`ctxlog_ledger::Error::BadRange`] (nothing changed);
    /// [`Error::InvalidRequest`] for a commit id that matches a redaction rule
    /// ([`Redactor::check_erase_id`]); [`ctxlog_ledger::Error::Locked`] when another process
    /// writes it; I/O. Intact seqs of a damaged conversation are erased at once (the damage
    /// is left as it was). An erasure of some seqs that reaches the damage (damaged seqs, or
    /// seqs sharing a commit with one, whose bytes may hold their text) is class `corrupt`,
    /// changes nothing, and its message names the repair to run first
    /// ([`crate::ops::erase_damage_hint`]); an erasure of all of it works anyway.
    pub fn erase(&self, request: &EraseRequest) -> Result<EraseResponse> {
        self.erase_now(request).map_err(|e| match request.target {
            EraseTarget::All => e.in_conversation(&request.conversation),
            _ => e.in_erasure(&request.conversation),
        })
    }

    fn erase_now(&self, request: &EraseRequest) -> Result<EraseResponse> {
        let name = ConversationName::new(&request.conversation)?;
        request.check()?;
        let slot = self.slot(&name);
        let mut lease = self.writer_lease(&slot, &name)?;
        let all = request.target == EraseTarget::All;
        let erased_all = EraseResponse::All {
            erased: AllMarker::All,
            conversation: name.to_string(),
        };
        let handle = match self.current_writer(&mut lease, &name) {
            // A conversation too damaged to open a writer on can still be erased whole.
            Err(e) if all && e.class() == crate::ErrorClass::Corrupt => {
                self.exclusive(&slot, || self.backend.erase_all_damaged(&name))?;
                self.forget_places(&name)?;
                return Ok(erased_all);
            }
            handle => handle?,
        };
        if all {
            // The slot stays: a commit queued behind this one must share its locks with the
            // reads that come after it.
            self.exclusive(&slot, || {
                self.backend.erase_all(&name, handle.into_writer())
            })?;
            self.forget_places(&name)?;
            return Ok(erased_all);
        }
        let handle = lease.handle.insert(handle);
        let report = self.exclusive(&slot, || handle.erase(&request.target, &request.reason))?;
        // Once the events are replaced: a catch-up that read them before finds the mark
        // moved and writes nothing.
        self.forget_places(&name)?;
        Ok(report.into())
    }

    /// Repairs a damaged conversation (docs/design.md#l11-repair): plans (a dry run writes
    /// nothing) and, with `accept_loss`, keeps every intact record, covers every lost seq with
    /// a loss record (the seq counter never goes back; a replayed id of a lost commit is class
    /// `lost`), saves the damaged bytes under `recovered/`, and rebuilds the sidecars and the
    /// recall index (on its next use). This process's handles on the conversation are closed first; another
    /// process writing it makes this [`ctxlog_ledger::Error::Locked`].
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`ctxlog_ledger::Error::Locked`]; I/O.
    pub fn repair(&self, request: &RepairRequest) -> Result<RepairResponse> {
        let name = ConversationName::new(&request.conversation)?;
        let in_conv = |e: Error| e.in_conversation(&request.conversation);
        if !request.accept_loss {
            return self
                .backend
                .repair(&name, false)
                .map_err(|e| in_conv(e.into()));
        }
        let slot = self.slot(&name);
        let mut lease = self.writer_lease(&slot, &name)?;
        drop(lease.handle.take());
        // The log gets a new ledger id: the recall index, built for the old one, is rebuilt
        // from the intact records by the next read that needs it.
        let report = self
            .exclusive(&slot, || self.backend.repair(&name, true))
            .map_err(|e| in_conv(e.into()))?;
        self.forget_places(&name)?;
        Ok(report)
    }

    /// The store's conversations, newest activity first.
    ///
    /// # Errors
    /// I/O or ledger errors.
    pub fn list(&self, _request: &ListRequest) -> Result<ListResponse> {
        let mut conversations = self.backend.list()?;
        conversations.sort_by(|a, b| {
            b.last_activity_ms
                .cmp(&a.last_activity_ms)
                .then_with(|| a.name.cmp(&b.name))
        });
        Ok(ListResponse { conversations })
    }
}

/// True when `result` failed because the conversation's log no longer exists (a file store
/// handle's catch-up after another process erased the conversation whole).
fn log_gone<T>(result: &Result<T>) -> bool {
    matches!(
        result.as_ref().err().and_then(Error::ledger_cause),
        Some(ctxlog_ledger::Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound
    )
}

impl Store {
    /// Applies a retention policy (docs/design.md#e2-retention) to one conversation or to all of
    /// them: the whole turns it selects are erased through the erasure path, each contiguous run
    /// under one tombstone whose reason is `retention: ` and the rules that selected it. Pinned
    /// notes are exempt unless the policy includes them; earlier tombstones are never rewritten
    /// (docs/design.md#e6-listing-and-tombstones). A dry run reads only and reports what would go.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] when no rule results or a rule is invalid (nothing changed);
    /// [`Error::NotFound`] for a named conversation that does not exist; as [`Store::erase`].
    /// When one conversation of a store-wide run fails, the ones before it stay collected.
    pub fn gc(&self, request: &GcRequest) -> Result<GcResponse> {
        let policy = self.retention.overridden_by(&request.policy());
        policy.check()?;
        if policy.is_empty() {
            return Err(Error::InvalidRequest {
                reason:
                    "no retention rule: give older_than, keep_turns or max_bytes (--older-than, \
                         --keep-turns, --max-bytes), or a [retention] table in ctxlog.toml"
                        .into(),
            });
        }
        let mut response = GcResponse {
            dry_run: request.dry_run,
            policy: policy.clone(),
            ..Default::default()
        };
        let names = match &request.conversation {
            Some(name) => vec![(ConversationName::new(name)?, None)],
            None => {
                let mut names = Vec::new();
                for info in self.backend.list()? {
                    names.push((ConversationName::new(&info.name)?, info.damage));
                }
                names.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
                names
            }
        };
        let store_wide = request.conversation.is_none();
        for (name, damage) in names {
            // A store-wide run passes over a damaged conversation (marked in its entry) and
            // goes on with the others: one damaged conversation never stops retention.
            let report = match damage {
                Some(damage) => damaged_gc_report(&name, damage),
                None => match self.gc_one(&name, &policy, request.dry_run) {
                    Err(e) if store_wide && e.class() == crate::ErrorClass::Corrupt => {
                        damaged_gc_report(&name, e.without_path())
                    }
                    result => result?,
                },
            };
            response.seqs_removed += report.seqs_removed;
            response.bytes_freed += report.bytes_freed;
            response.conversations.push(report);
        }
        Ok(response)
    }

    /// Applies `policy` to the conversation `name` (in a dry run, plans it on a read handle).
    fn gc_one(
        &self,
        name: &ConversationName,
        policy: &RetentionPolicy,
        dry_run: bool,
    ) -> Result<GcConversation> {
        if dry_run {
            return self.read(name.as_str(), |snapshot| {
                snapshot.catch_up()?;
                let now = crate::retention::now_ms();
                let plan = crate::retention::plan(snapshot.ledger(), policy, now)?;
                let after = plan.bytes_after_estimate;
                Ok(gc_report(name.as_str(), plan, after, policy))
            });
        }
        let slot = self.slot(name);
        let mut lease = self.writer_lease(&slot, name)?;
        let retained = self.current_writer(&mut lease, name).and_then(|handle| {
            let handle = lease.handle.insert(handle);
            self.retain(&slot, handle, policy)
        });
        // Retention erases seqs as an erasure does: on a damaged log it names the repair first.
        retained.map_err(|e| e.in_erasure(name.as_str()))
    }

    /// Erases what `policy` selects in the conversation behind `handle` (its writer).
    fn retain(
        &self,
        slot: &Slot,
        handle: &mut Conversation,
        policy: &RetentionPolicy,
    ) -> Result<GcConversation> {
        let plan = crate::retention::plan(handle.ledger(), policy, crate::retention::now_ms())?;
        for removal in &plan.removals {
            let target = EraseTarget::Seqs {
                from: removal.from,
                to: removal.to,
            };
            self.exclusive(slot, || handle.erase(&target, &removal.reason))?;
        }
        if !plan.removals.is_empty() {
            self.forget_places(handle.name())?;
        }
        let after = crate::retention::ledger_bytes(handle.ledger());
        Ok(gc_report(handle.name().as_str(), plan, after, policy))
    }
}

/// The entry of a conversation a store-wide retention run passed over because it is damaged.
fn damaged_gc_report(name: &ConversationName, damage: String) -> GcConversation {
    GcConversation {
        conversation: name.to_string(),
        damage: Some(damage),
        ..Default::default()
    }
}

/// One conversation's part of a [`GcResponse`]; `after` is the ledger's size after (measured,
/// or the plan's estimate in a dry run).
fn gc_report(
    name: &str,
    plan: crate::retention::Plan,
    after: u64,
    policy: &RetentionPolicy,
) -> GcConversation {
    let note = policy.max_bytes.filter(|&max| after > max).map(|max| {
        format!(
            "the ledger stays over max_bytes ({after} > {max}): what is left is pinned, already \
             erased (tombstones), or in turns smaller than the tombstone records that would \
             replace them"
        )
    });
    GcConversation {
        conversation: name.to_string(),
        seqs_removed: plan.removals.iter().map(|r| r.to - r.from + 1).sum(),
        turns_removed: plan.removals.iter().map(|r| r.turns).sum(),
        removed: plan.removals,
        pinned_kept: plan.pinned_kept,
        bytes_before: plan.bytes_before,
        bytes_after: after,
        bytes_freed: plan.bytes_before as i64 - after as i64,
        note,
        damage: None,
    }
}

/// The report note for a projection of a conversation with no commits (maybe a typo).
pub(crate) fn no_commits_note(name: &str) -> String {
    format!(
        "conversation {name:?} has no commits yet: the body holds no history (check the name \
         if you expected some)"
    )
}

/// At most [`ctxlog_recall::MAX_LIMIT`] recalled pages, like the recall limit.
fn check_recall_k(k: Option<usize>) -> Result<()> {
    match k {
        Some(k) if k > ctxlog_recall::MAX_LIMIT => Err(Error::InvalidRequest {
            reason: format!(
                "recall must be from 0 to {} pages, not {k}",
                ctxlog_recall::MAX_LIMIT
            ),
        }),
        _ => Ok(()),
    }
}

/// Seqs start at 1: a request naming seq 0 is a usage error, not an empty answer or a
/// silent shift to seq 1.
fn check_first_seq(field: &str, seq: Option<u64>) -> Result<()> {
    match seq {
        Some(0) => Err(Error::InvalidRequest {
            reason: format!("{field} must be at least 1 (seqs start at 1), not 0"),
        }),
        _ => Ok(()),
    }
}

/// One answer per commit of a batch of `n`: each commit's own result, or, when the whole
/// batch failed, that failure for every one of them (a ledger error as each commit's own).
fn batch_answers(
    results: Result<Vec<Result<CommitReceipt>>>,
    n: usize,
) -> Vec<Result<CommitReceipt>> {
    match results {
        Ok(results) => results,
        Err(Error::Ledger(e)) => (0..n).map(|_| Err(e.for_each_commit().into())).collect(),
        Err(e) => {
            let reason = e.to_string();
            (0..n)
                .map(|_| {
                    Err(Error::Internal {
                        reason: reason.clone(),
                    })
                })
                .collect()
        }
    }
}

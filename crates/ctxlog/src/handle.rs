//! [`Handle`]: one open conversation, for writing ([`Conversation`]) or reading ([`Snapshot`]).
//!
//! A handle pairs a ledger handle from the [`Backend`](crate::backend::Backend) with the
//! caches that make repeated work cheap: per-event sizes for projections (docs/design.md#p9-cost)
//! and the open recall index. Most applications call the operations on [`Store`](crate::Store),
//! which keeps handles for them; a handle is the lower-level API underneath.

use std::borrow::Cow;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxlog_ledger::{
    CommitReceipt, ErasureReport, Event, EventKind, NewCommit, Reach, RecoveryReport,
};
use ctxlog_projection::{
    PageSource, PageSourceError, Projection, ProjectionRequest, RecalledPage, SizeCache,
};
use ctxlog_recall::{IndexConfig, Progress, RecallIndex, RecallResult, SearchOptions, UpdateStats};

use crate::adapters::{LedgerFeed, LedgerHistory};
use crate::backend::{LedgerView, LedgerWriter};
use crate::ops::EraseTarget;
use crate::redact::Redactor;
use crate::{ConversationName, Result};

/// An open conversation over a ledger handle `L` (a [`LedgerWriter`] or a [`LedgerView`]).
/// Reading, projecting and recalling work on both.
pub struct Handle<L: ?Sized> {
    name: ConversationName,
    ledger: Box<L>,
    recovery: RecoveryReport,
    /// Where the recall index lives (a local, disposable cache).
    recall_path: PathBuf,
    /// Per-event serialized sizes and token counts, reused across projections
    /// (docs/design.md#p9-cost).
    sizes: SizeCache,
    /// The recall index, opened on first use.
    recall: Option<RecallIndex>,
    /// What commits are redacted with before they are written (docs/design.md#e5-redaction)
    /// [default: nothing].
    redactor: Option<Arc<Redactor>>,
    /// How the recall index is opened [default: the lexical ranking alone].
    recall_setup: RecallSetup,
}

/// How a conversation's recall index is opened: with the semantic leg's model when the store's
/// `[recall] embeddings` names one (feature `semantic`), else the lexical ranking alone.
#[derive(Clone, Debug, Default)]
pub struct RecallSetup {
    #[cfg(feature = "semantic")]
    embedder: Option<Arc<ctxlog_recall::embed::Embedder>>,
}

impl RecallSetup {
    /// The setup `config` asks for: its model loaded (once per store).
    ///
    /// # Errors
    /// [`crate::Error::InvalidRequest`] when the model directory cannot be loaded, or when a
    /// model is named in a build without the `semantic` feature.
    pub fn new(config: &crate::RecallConfig) -> Result<RecallSetup> {
        let Some(dir) = &config.embeddings else {
            return Ok(RecallSetup::default());
        };
        let invalid = |why: String| crate::Error::InvalidRequest {
            reason: format!(
                "[recall] embeddings = {:?}: {why}",
                dir.display().to_string()
            ),
        };
        #[cfg(feature = "semantic")]
        {
            let model = ctxlog_recall::embed::Embedder::load(dir)
                .map_err(|e| invalid(format!("{e} (the directory must hold all-MiniLM-L6-v2's config.json, model.safetensors and tokenizer.json)")))?;
            Ok(RecallSetup {
                embedder: Some(Arc::new(model)),
            })
        }
        #[cfg(not(feature = "semantic"))]
        Err(invalid(
            "this ctxlog was built without the semantic leg; build it with `--features semantic`, \
             or remove the setting"
                .into(),
        ))
    }

    /// Opens the index at `path` for `ledger_id` with this setup.
    fn open(&self, path: &Path, ledger_id: &str) -> Result<RecallIndex> {
        let index = RecallIndex::open(path, ledger_id)?;
        Ok(self.apply(index))
    }

    #[cfg_attr(not(feature = "semantic"), allow(clippy::unused_self))]
    fn apply(&self, index: RecallIndex) -> RecallIndex {
        #[cfg(feature = "semantic")]
        let index = {
            let mut index = index;
            index.set_embedder(self.embedder.clone());
            index
        };
        index
    }
}

/// A conversation opened for writing; holds the writer lock until dropped.
pub type Conversation = Handle<dyn LedgerWriter>;

/// A conversation opened for reading; takes no lock and never writes the ledger.
pub type Snapshot = Handle<dyn LedgerView>;

impl<L: ?Sized> std::fmt::Debug for Handle<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<L: ?Sized> Handle<L> {
    /// A handle over an opened ledger; `recovery` is what opening it cut (empty for readers).
    pub(crate) fn new(
        name: ConversationName,
        ledger: Box<L>,
        recovery: RecoveryReport,
        recall_path: PathBuf,
    ) -> Self {
        Handle {
            name,
            ledger,
            recovery,
            recall_path,
            sizes: SizeCache::new(),
            recall: None,
            redactor: None,
            recall_setup: RecallSetup::default(),
        }
    }

    /// Opens the recall index with `setup` (the store sets its own on the handles it opens).
    pub fn set_recall_setup(&mut self, setup: RecallSetup) -> &mut Self {
        self.recall_setup = setup;
        self.recall = None;
        self
    }

    /// Redacts every commit of this handle with `redactor` before it is written (the store
    /// sets its own on the handles it opens).
    pub fn set_redactor(&mut self, redactor: Option<Arc<Redactor>>) -> &mut Self {
        self.redactor = redactor;
        self
    }

    /// The conversation's name.
    pub fn name(&self) -> &ConversationName {
        &self.name
    }

    /// What opening this conversation recovered (a torn tail cut after a crash), if anything.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The file of the recall index (a disposable cache).
    pub fn recall_path(&self) -> &Path {
        &self.recall_path
    }

    /// Closes and deletes the recall index file (and any SQLite side files next to it).
    fn drop_recall_index(&mut self) -> Result<()> {
        self.recall = None;
        Ok(RecallIndex::delete_files(&self.recall_path)?)
    }
}

impl Conversation {
    /// Appends `commit` atomically and durably (per the store's sync policy), redacted first
    /// when the handle has a redactor (so an idempotent replay is compared redacted too).
    ///
    /// # Errors
    /// [`crate::Error::BadInput`] for an id that matches a redaction rule
    /// ([`Redactor::check_commit_id`]); invalid turns, caps, id conflicts, I/O
    /// ([`ctxlog_ledger::Ledger::commit`]); nothing is written on error.
    pub fn commit(&mut self, commit: &NewCommit) -> Result<CommitReceipt> {
        match &self.redactor {
            Some(redactor) => {
                let commit = redacted(redactor, commit)?;
                Ok(self.ledger.commit(&commit)?)
            }
            None => Ok(self.ledger.commit(commit)?),
        }
    }

    /// Parses a turn in one of the accepted JSON shapes ([`crate::parse_commit`]) and commits it.
    ///
    /// # Errors
    /// [`crate::Error::BadInput`] for unparsable input, else as [`Conversation::commit`].
    pub fn commit_json(&mut self, json: &[u8], id: Option<&str>) -> Result<CommitReceipt> {
        self.commit(&crate::parse_commit(json, id)?)
    }

    /// Several commits, each checked and redacted as [`Conversation::commit`] does it,
    /// acknowledged together ([`LedgerWriter::commit_batch`]: on the file ledger one append
    /// and one sync). One result per commit, in order; a refused commit fails alone, a failed
    /// write or sync fails them all (the outer error).
    ///
    /// # Errors
    /// A failure of the whole batch: I/O, a poisoned writer.
    pub fn commit_batch(&mut self, commits: &[&NewCommit]) -> Result<Vec<Result<CommitReceipt>>> {
        let Some(redactor) = &self.redactor else {
            let results = self.ledger.commit_batch(commits)?;
            return Ok(results.into_iter().map(|r| r.map_err(Into::into)).collect());
        };
        let prepared: Vec<Result<Cow<'_, NewCommit>>> =
            commits.iter().map(|c| redacted(redactor, c)).collect();
        let written: Vec<&NewCommit> = prepared.iter().flatten().map(|c| &**c).collect();
        let mut results = self.ledger.commit_batch(&written)?.into_iter();
        Ok(prepared
            .into_iter()
            .map(|p| match p {
                Err(refused) => Err(refused),
                Ok(_) => match results.next() {
                    Some(result) => result.map_err(Into::into),
                    None => Err(crate::Error::Internal {
                        reason: "the ledger answered fewer commits than it was given".into(),
                    }),
                },
            })
            .collect())
    }

    /// Appends an export's tombstone as it was (an import; see
    /// [`ctxlog_ledger::Ledger::append_tombstone`]), its reason redacted as an erasure's is:
    /// the reason was typed by whoever erased, into whatever store that was.
    ///
    /// # Errors
    /// As [`ctxlog_ledger::Ledger::append_tombstone`].
    pub fn append_tombstone(
        &mut self,
        t: &ctxlog_ledger::rules::Tombstone,
    ) -> Result<CommitReceipt> {
        match &self.redactor {
            Some(redactor) => Ok(self
                .ledger
                .append_tombstone(&redactor.redact_tombstone(t))?),
            None => Ok(self.ledger.append_tombstone(t)?),
        }
    }

    /// The first and last seq of the commit that carried idempotency id `id`, if one did.
    ///
    /// # Errors
    /// Ledger read errors.
    pub fn commit_seqs(&mut self, id: &str) -> Result<Option<(u64, u64)>> {
        Ok(self.ledger.commit_seqs(id)?)
    }

    /// True after a failed sync: this handle refuses commits and must be reopened
    /// (docs/design.md#l8-failed-io).
    pub fn is_poisoned(&self) -> bool {
        self.ledger.is_poisoned()
    }

    /// Erases `what` for `reason` (the reason redacted first when the handle has a
    /// redactor, as a commit's text is): the ledger is rewritten without it, atomically,
    /// widened to whole turns, or for [`EraseTarget::Last`] exactly the newest events (the
    /// report gives the range actually erased; seqs are kept,
    /// the range becomes a tombstone visible in the log); unreferenced artifacts and every
    /// `recovered/` tail are deleted; the recall index is deleted (before the rewrite, so a
    /// crash cannot leave it indexing erased text, and again after) and rebuilt on next use.
    /// A whole conversation is erased by [`crate::Store::erase`].
    ///
    /// # Errors
    /// [`ctxlog_ledger::Error::BadRange`] (nothing changed) for an empty or out-of-ledger
    /// range, a reason over [`ctxlog_ledger::MAX_ERASE_REASON_BYTES`], an id no commit of this
    /// conversation carried, [`EraseTarget::Last`] of more events than the conversation
    /// holds, or [`EraseTarget::All`]; [`crate::Error::InvalidRequest`] for a
    /// commit id that matches a redaction rule ([`Redactor::check_erase_id`]); otherwise as
    /// [`ctxlog_ledger::Ledger::erase`].
    pub fn erase(&mut self, what: &EraseTarget, reason: &str) -> Result<ErasureReport> {
        let redactor = self.redactor.clone();
        let reason = match &redactor {
            Some(redactor) => redactor.redact(reason),
            None => Cow::Borrowed(reason),
        };
        let reason = reason.as_ref();
        let mut how = Reach::Turns;
        let (from, to) = match what {
            EraseTarget::Seqs { from, to } => (*from, *to),
            EraseTarget::Last { events } => {
                how = Reach::Tail;
                (self.newest_events_from(*events)?, self.ledger.last_seq())
            }
            EraseTarget::Commit { id } => {
                if let Some(redactor) = &redactor {
                    redactor.check_erase_id(id)?;
                }
                self.commit_seqs(id)?
                    .ok_or_else(|| ctxlog_ledger::Error::BadRange {
                        reason: format!("no commit of this conversation carries the id {id:?}"),
                    })?
            }
            EraseTarget::All => {
                return Err(ctxlog_ledger::Error::BadRange {
                    reason: "a whole conversation is erased through the store".into(),
                }
                .into());
            }
        };
        // Checked before the recall index is touched, so a refused erasure changes nothing.
        self.ledger.check_erase(&(from..=to), how, reason)?;
        if self.ledger.is_erased(&(from..=to), how)? {
            // Nothing to erase: the ledger writes nothing, and the recall index stays.
            return Ok(self.ledger.erase(from..=to, how, reason, &mut || Ok(()))?);
        }
        // The recall index holds the text to erase: deleted once the erasure cannot be
        // refused any more, just before the ledger replaces its content (so a refused erasure
        // leaves the index too), and again after (a reader may have rebuilt it meanwhile).
        self.recall = None;
        let recall_path = self.recall_path.clone();
        let mut drop_index = || {
            RecallIndex::delete_files(&recall_path).map_err(|e| ctxlog_ledger::Error::Io {
                path: recall_path.clone(),
                source: std::io::Error::other(e.to_string()),
            })
        };
        let report = self.ledger.erase(from..=to, how, reason, &mut drop_index)?;
        self.drop_recall_index()?;
        self.sizes = SizeCache::new();
        Ok(report)
    }

    /// The seq of the `n`-th newest event that is not a system marker (tombstones and their
    /// placeholders are markers): where a retraction of the newest `n` events starts. Reads
    /// kinds from the index only.
    ///
    /// # Errors
    /// [`ctxlog_ledger::Error::BadRange`] (nothing changed) when the conversation holds
    /// fewer than `n` such events.
    fn newest_events_from(&self, n: u64) -> Result<u64> {
        let mut found = 0;
        for seq in (1..=self.ledger.last_seq()).rev() {
            if self.ledger.kind(seq) != Some(EventKind::System) {
                found += 1;
                if found == n {
                    return Ok(seq);
                }
            }
        }
        Err(ctxlog_ledger::Error::BadRange {
            reason: format!(
                "cannot retract the last {n} events: the conversation holds {found} \
                 (not counting erased ones); nothing was erased"
            ),
        }
        .into())
    }

    /// Gives up the writer (for [`crate::backend::Backend::erase_all`] and friends).
    pub(crate) fn into_writer(mut self) -> Box<dyn LedgerWriter> {
        self.recall = None;
        self.ledger
    }
}

impl<L: LedgerView + ?Sized> Handle<L> {
    /// The underlying ledger handle.
    pub fn ledger(&self) -> &L {
        &self.ledger
    }

    /// The seq of the newest event (0 when empty).
    pub fn last_seq(&self) -> u64 {
        self.ledger.last_seq()
    }

    /// The events with seqs in `range` (clamped to what exists).
    ///
    /// # Errors
    /// Ledger read errors.
    pub fn events(&self, range: RangeInclusive<u64>) -> Result<Vec<Event>> {
        let last = self.ledger.last_seq();
        let (start, end) = ((*range.start()).max(1), (*range.end()).min(last));
        if start > end {
            return Ok(Vec::new());
        }
        Ok(self.ledger.events(start..=end)?)
    }

    /// Sees the commits made since the handle was opened (or last caught up). Projecting,
    /// recalling and reindexing do this on their own first. If the ledger was rewritten (its
    /// id changed: erasure), the size cache and the open recall index belong to the old ledger
    /// and are dropped, so nothing erased is ever served or re-indexed from this handle.
    ///
    /// # Errors
    /// Ledger read errors, e.g. [`ctxlog_ledger::Error::Corrupt`].
    pub fn catch_up(&mut self) -> Result<()> {
        let before = self.ledger.ledger_id().to_string();
        self.ledger.catch_up()?;
        if self.ledger.ledger_id() != before {
            self.recall = None;
            self.sizes = SizeCache::new();
        }
        Ok(())
    }

    /// Builds the exact request body for `request` from this conversation
    /// (docs/design.md#5-projection).
    ///
    /// When the request asks for recalled pages (`recall_k > 0`), the projector asks the
    /// recall index (brought up to date first) for pages relevant to the current input that
    /// are older than the history the body keeps in detail. If the index is unusable, the
    /// projection goes ahead without pages and its report says why (docs/design.md#r2-disposable).
    /// The ledger is never written.
    ///
    /// # Errors
    /// [`ctxlog_projection::Error::MandatoryExceedsBudget`] when the mandatory input alone does
    /// not fit; ledger read errors.
    pub fn project(&mut self, request: &ProjectionRequest) -> Result<Projection> {
        self.catch_up()?;
        let indexed_from = self.ledger.ledger_id().to_string();
        let keyed;
        let request = match request.cache_hints() && request.cache_key().is_none() {
            true => {
                keyed = request.with_cache_key(cache_key(&indexed_from));
                &keyed
            }
            false => request,
        };
        let mut pages = IndexPages {
            ledger: &*self.ledger,
            recall: &mut self.recall,
            recall_setup: &self.recall_setup,
            recall_path: &self.recall_path,
            used: false,
            damaged: None,
        };
        let projection = ctxlog_projection::project_with_pages(
            &LedgerHistory(&*self.ledger),
            &mut pages,
            request,
            &mut self.sizes,
        );
        let (used, damaged) = (pages.used, pages.damaged.take());
        if let Some(e) = damaged {
            return Err(e);
        }
        if used {
            self.check_indexed_ledger(&indexed_from)?;
        }
        Ok(projection?)
    }

    /// Searches the conversation's recall index (docs/design.md#6-recall), bringing it up to date
    /// first.
    ///
    /// Every hit is checked against the ledger before it is returned (see [`hits_match`]): a
    /// hit whose record is damaged fails closed as every read of it does, and an index that
    /// disagrees with the ledger is rebuilt once and searched again.
    ///
    /// # Errors
    /// [`ctxlog_recall::Error::Damaged`] when the index file is damaged (its message names
    /// `ctxlog reindex`); [`ctxlog_recall::Error::Stale`] when a rebuilt index still disagrees;
    /// ledger read errors, e.g. [`ctxlog_ledger::Error::Corrupt`] for a hit's damaged record.
    pub fn recall(&mut self, query: &str, options: &SearchOptions) -> Result<RecallResult> {
        self.catch_up()?;
        self.checked(
            |index| index.search(query, options),
            |result| {
                result
                    .hits
                    .iter()
                    .map(|h| (h.seq, h.kind, h.ts_ms))
                    .collect()
            },
        )
    }

    /// Answers a call of the recall tool (arguments as the model produced them); see
    /// [`crate::ops::recall_tool_definition`] for its definition. Bad arguments and index
    /// failures become a tool error the model can read; hits are checked against the ledger
    /// as [`Conversation::recall`] checks them.
    pub fn recall_tool(&mut self, arguments: &serde_json::Value) -> ctxlog_recall::ToolOutput {
        let answer = self.catch_up().and_then(|()| {
            self.checked(
                |index| Ok(index.handle_tool_call(arguments)),
                |output| tool_hits(&output.json),
            )
        });
        match answer {
            Ok(output) => output,
            Err(crate::Error::Recall(e)) if e.is_damaged() => {
                ctxlog_recall::tool_error("index_damaged", &e.to_string())
            }
            Err(e) if e.class() == crate::ErrorClass::Corrupt => {
                ctxlog_recall::tool_error("conversation_damaged", &e.to_string())
            }
            Err(e) => ctxlog_recall::tool_error("index_unavailable", &e.to_string()),
        }
    }

    /// Runs `search` on the synced index and checks the hits `hits` names against the ledger;
    /// an index replaced by another process (erasure) is reopened, and one that disagrees with
    /// the ledger is deleted and rebuilt, once each.
    fn checked<T>(
        &mut self,
        search: impl Fn(&RecallIndex) -> std::result::Result<T, ctxlog_recall::Error>,
        hits: impl Fn(&T) -> Vec<(u64, EventKind, i64)>,
    ) -> Result<T> {
        let mut stale = None;
        for _ in 0..2 {
            let answer = match search(self.synced_index()?) {
                // Another process replaced the file (erasure) between catch-up and search.
                Err(ctxlog_recall::Error::Replaced { .. }) => {
                    self.recall = None;
                    search(self.synced_index()?)?
                }
                result => result?,
            };
            match hits_match(&*self.ledger, &hits(&answer))? {
                None => return Ok(answer),
                Some(seq) => stale = Some(seq),
            }
            self.drop_recall_index()?;
        }
        Err(ctxlog_recall::Error::Stale {
            path: self.recall_path.clone(),
            seq: stale.unwrap_or_default(),
        }
        .into())
    }

    /// Deletes the recall index and rebuilds it from the ledger, calling `progress` as it goes.
    /// This repairs a damaged index.
    ///
    /// # Errors
    /// I/O or SQLite failures; ledger read errors.
    pub fn reindex(&mut self, progress: &mut dyn FnMut(Progress)) -> Result<UpdateStats> {
        self.catch_up()?;
        self.recall = None;
        let index = RecallIndex::recreate(
            &self.recall_path,
            self.ledger.ledger_id(),
            IndexConfig::default(),
        )?;
        let mut index = self.recall_setup.apply(index);
        let stats = index.rebuild(&LedgerFeed(&*self.ledger), progress)?;
        self.recall = Some(index);
        Ok(stats)
    }

    /// The recall index, opened on first use and brought up to date with the ledger.
    fn synced_index(&mut self) -> Result<&mut RecallIndex> {
        let indexed_from = self.ledger.ledger_id().to_string();
        catch_up_index(
            &mut self.recall,
            &self.recall_setup,
            &self.recall_path,
            &*self.ledger,
        )?;
        // Rebuilt from the new ledger if another process rewrote it meanwhile; otherwise
        // this second catch-up finds nothing new.
        self.check_indexed_ledger(&indexed_from)?;
        catch_up_index(
            &mut self.recall,
            &self.recall_setup,
            &self.recall_path,
            &*self.ledger,
        )
    }

    /// After indexing from this handle's view of ledger `indexed_from`: if another process
    /// rewrote (erased) the ledger meanwhile, what was written may hold erased text, so the
    /// index is deleted (to be built again from the new ledger).
    fn check_indexed_ledger(&mut self, indexed_from: &str) -> Result<()> {
        self.ledger.catch_up()?;
        if self.ledger.ledger_id() != indexed_from {
            self.drop_recall_index()?;
            self.sizes = SizeCache::new();
        }
        Ok(())
    }
}

/// The first hit (seq, kind, time as the index recorded them) that the ledger contradicts:
/// its seq no longer holds an event, or one of another kind or time. Reading each hit's record
/// also means a damaged one fails closed ([`ctxlog_ledger::Error::Corrupt`]) instead of being
/// served from the index. Costs one record read per hit (at most the search limit).
/// A stable, non-secret key of a conversation for a provider's prompt cache (OpenAI's
/// `prompt_cache_key`): `ctxlog-` and the first 32 hex digits of the SHA-256 of its ledger id,
/// so it names the conversation without carrying its id or its name.
fn cache_key(ledger_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(ledger_id.as_bytes());
    format!("ctxlog-{}", ctxlog_backend::to_hex(&digest[..16]))
}

fn hits_match<L: LedgerView + ?Sized>(
    ledger: &L,
    hits: &[(u64, EventKind, i64)],
) -> Result<Option<u64>> {
    for (i, &(seq, kind, ts_ms)) in hits.iter().enumerate() {
        // The pages of one event (a listing by seq) are checked once.
        if hits[..i].iter().any(|&(s, ..)| s == seq) {
            continue;
        }
        match ledger.event(seq) {
            Ok(event) if event.kind() == kind && event.ts_ms == ts_ms => {}
            Ok(_) | Err(ctxlog_ledger::Error::NoSuchSeq { .. }) => return Ok(Some(seq)),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(None)
}

/// The hits of a recall tool answer (none for a tool error).
fn tool_hits(json: &serde_json::Value) -> Vec<(u64, EventKind, i64)> {
    let hits = json.get("hits").and_then(|h| h.as_array());
    hits.into_iter()
        .flatten()
        .filter_map(|h| {
            let kind = serde_json::from_value(h.get("kind")?.clone()).ok()?;
            Some((h.get("seq")?.as_u64()?, kind, h.get("ts_ms")?.as_i64()?))
        })
        .collect()
}

/// Opens the recall index at `path` if `slot` holds none, and catches it up with `ledger`.
/// A handle whose file another process replaced (erasure) is reopened once.
fn catch_up_index<'a, L: LedgerView + ?Sized>(
    slot: &'a mut Option<RecallIndex>,
    setup: &RecallSetup,
    path: &Path,
    ledger: &L,
) -> Result<&'a mut RecallIndex> {
    for attempt in 0..2 {
        let mut index = match slot.take() {
            Some(index) => index,
            None => setup.open(path, ledger.ledger_id())?,
        };
        match index.catch_up(&LedgerFeed(ledger)) {
            Ok(_) => return Ok(slot.insert(index)),
            Err(ctxlog_recall::Error::Replaced { .. }) if attempt == 0 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(crate::Error::Internal {
        reason: "recall index replaced twice during one catch-up".into(),
    })
}

/// The recall index as the projector's page source: caught up on first use only, so a
/// projection whose history all fits never touches it.
struct IndexPages<'a, L: ?Sized> {
    ledger: &'a L,
    recall: &'a mut Option<RecallIndex>,
    recall_setup: &'a RecallSetup,
    recall_path: &'a Path,
    /// Whether the index was caught up (the caller then checks the ledger was not rewritten).
    used: bool,
    /// The ledger error a recalled page's record gave (damage): the projection fails closed
    /// with it, as every read of that record does.
    damaged: Option<crate::Error>,
}

impl<L: LedgerView + ?Sized> PageSource for IndexPages<'_, L> {
    fn pages(
        &mut self,
        query: &str,
        before: u64,
        limit: usize,
    ) -> std::result::Result<Vec<RecalledPage>, PageSourceError> {
        self.used = true;
        // Every page is checked against its event, as recall's hits are ([`hits_match`]): an
        // index that disagrees with the ledger is rebuilt once; a damaged record fails closed.
        let mut hits = Vec::new();
        for attempt in 0..2 {
            let index = catch_up_index(
                self.recall,
                self.recall_setup,
                self.recall_path,
                self.ledger,
            )?;
            hits = index.candidates(query, before, limit)?;
            let seen: Vec<_> = hits.iter().map(|h| (h.seq, h.kind, h.ts_ms)).collect();
            match hits_match(self.ledger, &seen) {
                Ok(None) => break,
                Ok(Some(_)) if attempt == 0 => {
                    *self.recall = None;
                    RecallIndex::delete_files(self.recall_path).map_err(crate::Error::from)?;
                }
                Ok(Some(seq)) => {
                    let path = self.recall_path.to_path_buf();
                    return Err(Box::new(ctxlog_recall::Error::Stale { path, seq }));
                }
                Err(e) => {
                    let why = e.to_string();
                    self.damaged = Some(e);
                    return Err(why.into());
                }
            }
        }
        Ok(hits
            .into_iter()
            .map(|hit| RecalledPage {
                seq: hit.seq,
                page: hit.page,
                kind: hit.kind,
                char_start: hit.char_start,
                char_end: hit.char_end,
                text: hit.text,
            })
            .collect())
    }
}

/// `commit` as a redacting handle writes it: its id checked, its texts redacted.
fn redacted<'c>(redactor: &Redactor, commit: &'c NewCommit) -> Result<Cow<'c, NewCommit>> {
    if let Some(id) = &commit.id {
        redactor.check_commit_id(id)?;
    }
    Ok(redactor.redact_commit(commit))
}

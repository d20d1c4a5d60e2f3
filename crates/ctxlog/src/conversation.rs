//! [`Handle`]: one open conversation, for writing ([`Conversation`]) or reading ([`Snapshot`]).

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use ctxlog_ledger::{
    CommitReceipt, ErasureReport, Event, Ledger, LedgerRead, NewCommit, Reader, RecoveryReport,
};
use ctxlog_projection::{Projection, ProjectionRequestBuilder, RecalledPage, SizeCache};
use ctxlog_recall::{IndexConfig, Progress, RecallIndex, RecallResult, SearchOptions, UpdateStats};

use crate::adapters::{LedgerFeed, LedgerHistory};
use crate::store::RECALL_INDEX_FILE;
use crate::{ConversationName, Result};

/// How many recall candidates are fetched per page the projection may include: the projector
/// keeps only pages older than the history it sends in detail, so it is offered a few more.
const CANDIDATES_PER_PAGE: usize = 4;

/// What [`Conversation::erase`] removes. (A whole conversation: [`crate::Store::erase_all`].)
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Erase {
    /// The turn(s) of the commit that carried this idempotency id.
    Turn(String),
    /// Seqs `first..=last` (widened to whole turns).
    Seqs(u64, u64),
}

/// An open conversation over a ledger handle `L`: the writer ([`Conversation`]) or a
/// lock-free reader ([`Snapshot`]). Reading, projecting and recalling work on both.
#[derive(Debug)]
pub struct Handle<L> {
    name: ConversationName,
    dir: PathBuf,
    ledger: L,
    recovery: RecoveryReport,
    /// Per-event serialized sizes and token counts, reused across projections (SPEC P9).
    sizes: SizeCache,
    /// The recall index, opened on first use.
    recall: Option<RecallIndex>,
}

/// How a ledger handle catches up with the ledger on disk before work that must follow it
/// (projecting, recalling, reindexing). The writer is the only one who changes its ledger, so
/// it is always current; a reader refreshes, and notices when the log was rewritten (erasure).
pub trait CatchUp: LedgerRead {
    /// Brings the view up to date with what is committed on disk.
    ///
    /// # Errors
    /// Ledger read errors.
    fn catch_up(&mut self) -> ctxlog_ledger::Result<()>;
}

impl CatchUp for Ledger {
    fn catch_up(&mut self) -> ctxlog_ledger::Result<()> {
        Ok(())
    }
}

impl CatchUp for Reader {
    fn catch_up(&mut self) -> ctxlog_ledger::Result<()> {
        self.refresh()
    }
}

/// A conversation opened for writing; holds the writer lock until dropped.
pub type Conversation = Handle<Ledger>;

/// A conversation opened for reading; takes no lock and never writes the ledger.
pub type Snapshot = Handle<Reader>;

impl<L> Handle<L> {
    /// A handle over an opened ledger; `recovery` is what opening it cut (empty for readers).
    pub(crate) fn new(
        name: ConversationName,
        dir: PathBuf,
        ledger: L,
        recovery: RecoveryReport,
    ) -> Self {
        Handle {
            name,
            dir,
            ledger,
            recovery,
            sizes: SizeCache::new(),
            recall: None,
        }
    }
}

impl Conversation {
    /// Appends `commit` atomically and durably (per the store's sync policy).
    ///
    /// # Errors
    /// See [`Ledger::commit`]: invalid turns, caps, id conflicts, I/O; nothing is written on error.
    pub fn commit(&mut self, commit: &NewCommit) -> Result<CommitReceipt> {
        Ok(self.ledger.commit(commit)?)
    }

    /// Parses a turn in one of the accepted JSON shapes ([`crate::parse_commit`]) and commits it.
    ///
    /// # Errors
    /// [`crate::Error::BadInput`] for unparsable input, else as [`Conversation::commit`].
    pub fn commit_json(&mut self, json: &[u8], id: Option<&str>) -> Result<CommitReceipt> {
        let commit = crate::parse_commit(json, id)?;
        self.commit(&commit)
    }

    /// Erases `what` for `reason` (SPEC E1): the ledger is rewritten without it, atomically,
    /// widened to whole turns (the report gives the range actually erased; seqs are kept,
    /// the range becomes a tombstone visible in the log); unreferenced artifacts and every
    /// `recovered/` tail are deleted; the recall index is deleted (before the rewrite, so a
    /// crash cannot leave it indexing erased text, and again after) and rebuilt on next use.
    ///
    /// # Errors
    /// [`ctxlog_ledger::Error::BadRange`] (nothing changed) for an empty or out-of-ledger
    /// range, a reason over [`ctxlog_ledger::MAX_ERASE_REASON_BYTES`], or an id no commit of
    /// this conversation carried; otherwise as [`Ledger::erase`].
    pub fn erase(&mut self, what: Erase, reason: &str) -> Result<ErasureReport> {
        let (from, to) = match what {
            Erase::Seqs(from, to) => (from, to),
            Erase::Turn(id) => {
                self.ledger
                    .commit_seqs(&id)?
                    .ok_or_else(|| ctxlog_ledger::Error::BadRange {
                        reason: format!("no commit of this conversation carries the id {id:?}"),
                    })?
            }
        };
        // Checked before the recall index is touched, so a refused erasure changes nothing.
        self.ledger.check_erase(&(from..=to), reason)?;
        self.drop_recall_index()?;
        let report = self.ledger.erase(from..=to, reason)?;
        self.drop_recall_index()?;
        self.sizes = SizeCache::new();
        Ok(report)
    }

    /// What opening this conversation recovered (a torn tail cut after a crash), if anything.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }
}

impl Snapshot {
    /// Sees the commits made since the snapshot was opened (or last refreshed). Projecting,
    /// recalling and reindexing do this on their own first.
    ///
    /// # Errors
    /// Ledger read errors, e.g. [`ctxlog_ledger::Error::Corrupt`].
    pub fn refresh(&mut self) -> Result<()> {
        self.current()
    }
}

impl<L: LedgerRead> Handle<L> {
    /// The conversation's name.
    pub fn name(&self) -> &ConversationName {
        &self.name
    }

    /// The conversation's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

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
}

impl<L: CatchUp> Handle<L> {
    /// Catches the handle up with the ledger on disk. If the ledger was rewritten (its id
    /// changed: erasure), the size cache and the open recall index belong to the old ledger and
    /// are dropped, so nothing erased is ever served or re-indexed from this handle.
    fn current(&mut self) -> Result<()> {
        let before = self.ledger.ledger_id().to_string();
        self.ledger.catch_up()?;
        if self.ledger.ledger_id() != before {
            self.recall = None;
            self.sizes = SizeCache::new();
        }
        Ok(())
    }

    /// Builds the exact request body for `request` from this conversation (SPEC §5).
    ///
    /// When the request asks for recalled pages (`recall_k > 0`), the recall index is brought up
    /// to date and asked for pages relevant to the current input that are older than the
    /// history the body keeps in detail. If the index is unusable, the projection goes ahead
    /// without pages and its report says why (SPEC R2). The ledger is never written (P10).
    ///
    /// # Errors
    /// [`ctxlog_projection::Error::MandatoryExceedsBudget`] when the mandatory input alone does
    /// not fit; invalid requests; ledger read errors.
    pub fn project(&mut self, request: &ProjectionRequestBuilder) -> Result<Projection> {
        let plain = request.build()?;
        self.current()?;
        let first = self.project_built(&plain)?;
        // History outranks recalled pages, so the first pass fixes what is kept in detail;
        // pages must come from before it.
        let detail_start = first.report.detail_start.unwrap_or(u64::MAX);
        if plain.recall_k() == 0 || detail_start <= 1 {
            return Ok(first);
        }
        let mut with_pages = request.clone();
        match self.recall_pages(plain.input(), &first.report, plain.recall_k()) {
            Ok(pages) if pages.is_empty() => return Ok(first),
            Ok(pages) => with_pages.recalled(pages),
            Err(e) => with_pages.recall_unavailable(e.to_string()),
        };
        self.project_built(&with_pages.build()?)
    }

    fn project_built(
        &mut self,
        request: &ctxlog_projection::ProjectionRequest,
    ) -> Result<Projection> {
        let history = LedgerHistory(&self.ledger);
        Ok(ctxlog_projection::project(
            &history,
            request,
            &mut self.sizes,
        )?)
    }

    /// Candidate pages for the second pass: relevant to `input`, older than the history
    /// `first` keeps in detail, and not already in its body (pinned notes, earlier requests).
    fn recall_pages(
        &mut self,
        input: &str,
        first: &ctxlog_projection::Report,
        k: usize,
    ) -> Result<Vec<RecalledPage>> {
        let older_than = first.detail_start.unwrap_or(u64::MAX);
        let in_body = |seq: u64| {
            first.pinned.contains(&seq) || first.kept.iter().any(|range| range.contains(seq))
        };
        let index = self.synced_index()?;
        let hits = index.candidates(input, older_than, k.saturating_mul(CANDIDATES_PER_PAGE))?;
        Ok(hits
            .into_iter()
            .filter(|hit| !in_body(hit.seq))
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

    /// Searches the conversation's recall index (SPEC §6), bringing it up to date first.
    ///
    /// # Errors
    /// [`ctxlog_recall::Error::Damaged`] when the index file is damaged (its message names
    /// `ctxlog reindex`); ledger read errors.
    pub fn recall(&mut self, query: &str, options: &SearchOptions) -> Result<RecallResult> {
        self.current()?;
        Ok(self.synced_index()?.search(query, options)?)
    }

    /// Answers a call of the recall tool (arguments as the model produced them); see
    /// [`ctxlog_recall::openai_tool`] and [`ctxlog_recall::anthropic_tool`] for the definitions.
    /// Bad arguments and index failures become a tool error the model can read.
    pub fn recall_tool(&mut self, arguments: &serde_json::Value) -> ctxlog_recall::ToolOutput {
        match self.current().and_then(|()| self.synced_index()) {
            Ok(index) => index.handle_tool_call(arguments),
            Err(crate::Error::Recall(e)) if e.is_damaged() => {
                ctxlog_recall::tool_error("index_damaged", &e.to_string())
            }
            Err(e) => ctxlog_recall::tool_error("index_unavailable", &e.to_string()),
        }
    }

    /// Deletes the recall index and rebuilds it from the ledger, calling `progress` as it goes.
    /// This repairs a damaged index.
    ///
    /// # Errors
    /// I/O or SQLite failures; ledger read errors.
    pub fn reindex(&mut self, progress: &mut dyn FnMut(Progress)) -> Result<UpdateStats> {
        self.current()?;
        self.recall = None;
        let path = self.dir.join(RECALL_INDEX_FILE);
        let mut index =
            RecallIndex::recreate(&path, self.ledger.ledger_id(), IndexConfig::default())?;
        let stats = index.rebuild(&LedgerFeed(&self.ledger), progress)?;
        self.recall = Some(index);
        Ok(stats)
    }

    /// The recall index, opened on first use and brought up to date with the ledger.
    ///
    /// If the ledger was rewritten (erased) by another process while this handle was indexing
    /// from its view, what it wrote may hold erased text: the index is deleted and built
    /// again from the new ledger.
    fn synced_index(&mut self) -> Result<&mut RecallIndex> {
        let indexed_from = self.ledger.ledger_id().to_string();
        let mut index = match self.recall.take() {
            Some(index) => index,
            None => RecallIndex::open(self.dir.join(RECALL_INDEX_FILE), &indexed_from)?,
        };
        index.sync(&LedgerFeed(&self.ledger))?;
        self.ledger.catch_up()?;
        if self.ledger.ledger_id() == indexed_from {
            return Ok(self.recall.insert(index));
        }
        drop(index);
        self.drop_recall_index()?;
        self.sizes = SizeCache::new();
        let mut index =
            RecallIndex::open(self.dir.join(RECALL_INDEX_FILE), self.ledger.ledger_id())?;
        index.sync(&LedgerFeed(&self.ledger))?;
        Ok(self.recall.insert(index))
    }
}

impl<L> Handle<L> {
    /// Closes and deletes the recall index file (and any SQLite side files next to it).
    fn drop_recall_index(&mut self) -> Result<()> {
        self.recall = None;
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let path = self.dir.join(format!("{RECALL_INDEX_FILE}{suffix}"));
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(crate::Error::Io { path, source: e });
                }
                _ => {}
            }
        }
        Ok(())
    }
}

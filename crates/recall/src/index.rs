//! [`RecallIndex`]: the public handle. It decides *when* to create, reset, catch up and read
//! the index; the file itself is `store`, writing pages is `writer`, reading them is `search`.

use std::borrow::Borrow;
use std::path::{Path, PathBuf};

use ctxlog_event::Event;
use rusqlite::{Connection, TransactionBehavior};
use serde_json::Value;

use crate::config::IndexConfig;
use crate::error::{Error, Result};
use crate::hit::{self, Hit, RecallResult};
use crate::rank::Ranking;
use crate::search::{SearchOptions, Searcher, SemanticQuery};
use crate::source::{ArtifactSource, LedgerSource};
use crate::stats::{Progress, ResetReason, UpdateStats};
use crate::store::{self, Access, Contents, FileId, FileLock, Meta};
use crate::tool::{self, ToolOutput};
use crate::writer::{Writer, fingerprint};

/// How many times catching up reopens the index after finding that another process deleted
/// or replaced the file under it, before giving up.
const REOPEN_ATTEMPTS: usize = 4;

/// A per-conversation recall index: an SQLite file with an FTS5 table of event pages.
///
/// The index is a disposable cache of the ledger (docs/design.md#r2-disposable): it records the
/// ledger id it was built for, the last seq it indexed and a fingerprint of that event; any
/// mismatch discards its content, and [`RecallIndex::recreate`] deletes and recreates the file.
/// Every page row carries a checksum of what it tells a caller (text and provenance), checked on
/// every read: a page that fails it makes the index [`Error::Damaged`], never a wrong answer.
///
/// # Journal mode and processes
///
/// The file uses SQLite's rollback journal (not WAL) with `secure_delete`: at rest the index
/// is one file, so deleting it (erasure, `reindex`) leaves no `-wal` copy of erased text, and
/// deleted rows are zeroed. Every connection waits for another's lock up to a 5 s busy
/// timeout, and every write transaction takes the write lock at once (`BEGIN IMMEDIATE`), so
/// handles in several processes continue each other's work instead of failing. A new file is
/// built under a temporary name and linked into place; [`RecallIndex::delete_files`] deletes
/// under SQLite's exclusive lock, and a handle whose file was deleted or replaced reopens the
/// new one before it writes. A symbolic link at the path is refused ([`Error::Symlink`]).
///
/// # Read-only
///
/// Searching an index that is up to date never writes: [`RecallIndex::catch_up`] writes only
/// when there is something to index, and a file (or directory) that does not allow writing is
/// opened read-only.
pub struct RecallIndex {
    conn: Connection,
    path: PathBuf,
    /// The identity of the file `conn` has open.
    file: Option<FileId>,
    access: Access,
    read_only: bool,
    ledger_id: String,
    indexed_through: u64,
    tail_fingerprint: String,
    config: IndexConfig,
    reset: Option<ResetReason>,
    ranking: Ranking,
    /// The semantic leg's model, when the operator configured one.
    #[cfg(feature = "semantic")]
    embedder: Option<std::sync::Arc<crate::embed::Embedder>>,
}

impl std::fmt::Debug for RecallIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecallIndex")
            .field("path", &self.path)
            .field("ledger_id", &self.ledger_id)
            .field("indexed_through", &self.indexed_through)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl RecallIndex {
    /// Opens (or creates) the index at `path` for the ledger `ledger_id`, with the default
    /// [`IndexConfig`].
    ///
    /// An index written for another ledger id or configuration is emptied, and one of an
    /// older schema version is deleted and created anew (see [`RecallIndex::reset_reason`]);
    /// feed it events from seq 1 again. When the file or its directory is not writable, the
    /// index is opened read-only (see [`RecallIndex::is_read_only`]).
    ///
    /// # Errors
    /// [`Error::Damaged`] when the file is not a readable recall index of this schema version
    /// (truncated, garbage, foreign database, newer `user_version`); [`Error::Symlink`] when a
    /// symbolic link is at `path`; [`Error::Sqlite`] or [`Error::Io`] when it cannot be
    /// opened or created.
    pub fn open(path: impl AsRef<Path>, ledger_id: &str) -> Result<RecallIndex> {
        Self::open_with(path, ledger_id, IndexConfig::default())
    }

    /// [`RecallIndex::open`] with an explicit configuration.
    ///
    /// # Errors
    /// As [`RecallIndex::open`].
    pub fn open_with(
        path: impl AsRef<Path>,
        ledger_id: &str,
        config: IndexConfig,
    ) -> Result<RecallIndex> {
        Self::open_as(path.as_ref(), ledger_id, config, Access::ReadWrite)
    }

    /// Opens the existing index at `path` read-only (`SQLITE_OPEN_READ_ONLY`), with the
    /// default configuration: it can be searched, and caught up when it already is.
    ///
    /// # Errors
    /// As [`RecallIndex::open`]; also when the file does not exist, or would have to be
    /// emptied (another ledger or configuration) or recreated (older schema).
    pub fn open_read_only(path: impl AsRef<Path>, ledger_id: &str) -> Result<RecallIndex> {
        Self::open_as(
            path.as_ref(),
            ledger_id,
            IndexConfig::default(),
            Access::ReadOnly,
        )
    }

    /// Deletes the index file (and any SQLite side files) at `path` and creates an empty one.
    /// This is how a damaged index is repaired; follow with [`RecallIndex::catch_up`] or
    /// [`RecallIndex::rebuild`].
    ///
    /// # Errors
    /// As [`RecallIndex::delete_files`] and [`RecallIndex::open`].
    pub fn recreate(
        path: impl AsRef<Path>,
        ledger_id: &str,
        config: IndexConfig,
    ) -> Result<RecallIndex> {
        Self::delete_files(path.as_ref())?;
        Self::open_with(path, ledger_id, config)
    }

    /// Deletes the index at `path` with its SQLite side files (`-journal`, `-wal`, `-shm`)
    /// and temporary files left next to it; files that do not exist are skipped. It first
    /// takes SQLite's exclusive lock (waiting for other processes' transactions up to the
    /// busy timeout), so nobody is writing when the files go; handles still open on the old
    /// file reopen the path before they next write. A symbolic link at `path` is removed,
    /// never followed; an empty directory there is removed.
    ///
    /// # Errors
    /// [`Error::Io`] when a file cannot be removed (or a non-empty directory is at `path`).
    pub fn delete_files(path: impl AsRef<Path>) -> Result<()> {
        store::delete_files(path.as_ref())
    }

    fn open_as(
        path: &Path,
        ledger_id: &str,
        config: IndexConfig,
        access: Access,
    ) -> Result<RecallIndex> {
        let mut upgraded = None;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let shared = FileLock::shared(path);
            let (mut index, contents) = Self::connect(path, ledger_id, config.clone(), access)?;
            let checked = match contents {
                Contents::Outdated(was) if !index.read_only && attempt < REOPEN_ATTEMPTS => {
                    // An older schema (a cache): delete it, with the lock alone, and start over.
                    drop((index, shared));
                    store::delete_files(path)?;
                    upgraded = Some(ResetReason::SchemaChanged { was });
                    continue;
                }
                Contents::Outdated(was) => Err(index.damaged(format!(
                    "schema version {was} is older than {} and cannot be replaced",
                    store::SCHEMA_VERSION
                ))),
                Contents::Current => {
                    store::validate(&index.conn, path).and_then(|()| index.load_meta())
                }
            };
            match checked {
                Ok(()) => {
                    index.reset = index.reset.take().or(upgraded);
                    return Ok(index);
                }
                // Another handle replaced the file while it was being checked (its size is
                // read from the path): check the new one.
                Err(_) if attempt < REOPEN_ATTEMPTS && !index.file_is_current() => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Opens the file at `path` (creating it when missing and writable access is asked) and
    /// says what it holds. Retries when another process deletes the file in between.
    fn connect(
        path: &Path,
        ledger_id: &str,
        config: IndexConfig,
        access: Access,
    ) -> Result<(RecallIndex, Contents)> {
        store::refuse_symlink(path)?;
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(store::damaged(
                path,
                "a directory is where the index file should be",
            ));
        }
        let meta = Meta::empty(ledger_id, &config);
        let mut attempt = 0;
        let (mut conn, read_only, file) = loop {
            attempt += 1;
            if access == Access::ReadWrite {
                store::create_if_missing(path, &meta)?;
            }
            let before = FileId::of(path);
            let opened = store::connect(path, access);
            let after = FileId::of(path);
            let settled = before.is_some() && before == after;
            match opened {
                Ok((conn, ro)) if settled => break (conn, ro, after),
                Err(e) if settled || attempt >= REOPEN_ATTEMPTS => return Err(e),
                Ok(_) if attempt >= REOPEN_ATTEMPTS => return Err(replaced(path)),
                // Another process deleted or replaced the file meanwhile: open it again.
                _ => {}
            }
        };
        let contents = store::prepare(&mut conn, path, &meta)?;
        let index = RecallIndex {
            conn,
            path: path.to_path_buf(),
            file,
            access,
            read_only,
            ledger_id: ledger_id.to_owned(),
            indexed_through: 0,
            tail_fingerprint: String::new(),
            config,
            reset: None,
            ranking: Ranking::default(),
            #[cfg(feature = "semantic")]
            embedder: None,
        };
        Ok((index, contents))
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The ledger id the index belongs to.
    pub fn ledger_id(&self) -> &str {
        &self.ledger_id
    }

    /// The last seq the index has processed (0 when empty).
    pub fn indexed_through(&self) -> u64 {
        self.indexed_through
    }

    /// The configuration the index was built with.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Why the content was discarded when this index was opened, if it was.
    pub fn reset_reason(&self) -> Option<&ResetReason> {
        self.reset.as_ref()
    }

    /// True when the index was opened read-only (asked for, or the file or its directory is
    /// not writable): searching works, and so does catching up when nothing is new.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The ranking knobs in use.
    pub fn ranking(&self) -> &Ranking {
        &self.ranking
    }

    /// Replaces the ranking knobs (for evaluation; the default is the product's).
    pub fn set_ranking(&mut self, ranking: Ranking) {
        self.ranking = ranking;
    }

    /// Indexes `events` whose seq is greater than [`RecallIndex::indexed_through`], in one
    /// transaction. Events must come in increasing seq order; events at or below
    /// `indexed_through` are skipped, except that the event *at* `indexed_through`, when
    /// given, is checked against the stored fingerprint.
    ///
    /// Indexed: user, assistant, note and tool-result text (an artifact's full text read
    /// through `artifacts`; if that fails, the inline excerpt). Never indexed: tool calls,
    /// system markers, and results of the [`TOOL_NAME`](crate::TOOL_NAME) tool (recall
    /// output).
    ///
    /// # Errors
    /// [`Error::Stale`] when the event at `indexed_through` differs from the one indexed (the
    /// ledger was rewritten; nothing is written); [`Error::OutOfOrder`] when a seq does not
    /// follow the previous event's (nothing is written); [`Error::Damaged`] /
    /// [`Error::Sqlite`] on index failures.
    pub fn update<I>(&mut self, events: I, artifacts: &dyn ArtifactSource) -> Result<UpdateStats>
    where
        I: IntoIterator,
        I::Item: Borrow<Event>,
    {
        let _shared = FileLock::shared(&self.path);
        let mut writer = self.begin()?;
        for event in events {
            writer.add(event.borrow(), artifacts)?;
        }
        let done = writer.commit()?;
        Ok(self.finish(done))
    }

    /// Brings the index up to date with `source` (the one verb for this): discards it first
    /// when the ledger id changed, when the ledger is shorter than what was indexed, or when
    /// the last indexed event changed; then indexes every event after `indexed_through`.
    /// When nothing is new, nothing is written (so a read-only index that is current can be
    /// caught up and searched).
    ///
    /// # Errors
    /// Source failures ([`Error::Source`]) and index failures. A failed catch-up leaves the
    /// index at its last committed state (a reset it needed stays done; the events are not
    /// written).
    pub fn catch_up(&mut self, source: &dyn LedgerSource) -> Result<UpdateStats> {
        self.catch_up_with_progress(source, &mut |_| {})
    }

    /// Empties the index and indexes all of `source`, calling `progress` after each event.
    ///
    /// # Errors
    /// As [`RecallIndex::catch_up`].
    pub fn rebuild(
        &mut self,
        source: &dyn LedgerSource,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<UpdateStats> {
        let _shared = FileLock::shared(&self.path);
        self.follow_file()?;
        self.ledger_id = source.ledger_id();
        self.clear()?;
        self.catch_up_with_progress(source, progress)
    }

    /// [`RecallIndex::catch_up`], calling `progress` after each event indexed. Starts over on
    /// the new file when another process deleted or replaced the index meanwhile.
    fn catch_up_with_progress(
        &mut self,
        source: &dyn LedgerSource,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<UpdateStats> {
        let _shared = FileLock::shared(&self.path);
        for _ in 0..REOPEN_ATTEMPTS {
            self.follow_file()?;
            match self.reload_progress() {
                Err(Error::Replaced { .. }) => continue,
                other => other?,
            }
            let reset = self.check_source(source)?;
            if reset.is_none() && source.head_seq() == self.indexed_through {
                return Ok(UpdateStats {
                    indexed_through: self.indexed_through,
                    reset: self.reset.clone(),
                    embedded: self.embed_pages()?,
                    ..UpdateStats::default()
                });
            }
            if reset.is_some() {
                self.ledger_id = source.ledger_id();
                self.clear()?;
            }
            if let Some(done) = self.index_source(source, progress)? {
                let mut stats = self.finish(done);
                stats.reset = reset.or_else(|| self.reset.clone());
                stats.embedded = self.embed_pages()?;
                return Ok(stats);
            }
        }
        Err(replaced(&self.path))
    }

    /// Indexes the events of `source` after what the file has, in one transaction; `None`
    /// (nothing written) when the file at the path is no longer the one this handle has open.
    fn index_source(
        &self,
        source: &dyn LedgerSource,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Option<(UpdateStats, String)>> {
        let head_seq = source.head_seq();
        let mut writer = self.begin()?;
        if !self.file_is_current() {
            return Ok(None);
        }
        source.visit_after(writer.through(), &mut |event| {
            writer.add(event, source)?;
            progress(Progress {
                seq: event.seq,
                head_seq,
            });
            Ok(())
        })?;
        writer.commit().map(Some)
    }

    /// Whether the file at the path is still the one this handle has open.
    fn file_is_current(&self) -> bool {
        self.file.is_some() && FileId::of(&self.path) == self.file
    }

    /// Reopens the path when another process deleted or replaced the file this handle has
    /// open (erasure, `reindex`), keeping the ranking knobs.
    fn follow_file(&mut self) -> Result<()> {
        if self.file_is_current() {
            return Ok(());
        }
        let ranking = self.ranking.clone();
        let reopened = Self::open_as(
            &self.path,
            &self.ledger_id,
            self.config.clone(),
            self.access,
        )?;
        *self = RecallIndex {
            ranking,
            #[cfg(feature = "semantic")]
            embedder: self.embedder.take(),
            ..reopened
        };
        Ok(())
    }

    /// Takes the ledger id, `indexed_through` and tail fingerprint from the file: another
    /// handle (or process) may have indexed further, reset or rebuilt it since this handle
    /// last looked, and deciding from a stale copy would keep rows of a rewritten ledger.
    fn reload_progress(&mut self) -> Result<()> {
        let meta = self.guarded(|s| Meta::read(s.conn, s.path))?;
        self.ledger_id = meta.ledger_id;
        self.indexed_through = meta.indexed_through;
        self.tail_fingerprint = meta.tail;
        Ok(())
    }

    /// Decides whether the index content still describes `source`.
    fn check_source(&self, source: &dyn LedgerSource) -> Result<Option<ResetReason>> {
        if source.ledger_id() != self.ledger_id {
            return Ok(Some(ResetReason::LedgerChanged {
                was: self.ledger_id.clone(),
            }));
        }
        let through = self.indexed_through;
        if through == 0 {
            return Ok(None);
        }
        if source.head_seq() < through {
            return Ok(Some(ResetReason::LedgerRewritten { seq: through }));
        }
        let mut first: Option<(u64, String)> = None;
        let visited = source.visit_after(through - 1, &mut |event| {
            first = Some((event.seq, fingerprint(event)));
            // Only the first event matters; an error is the only way to end a visit early.
            Err(Error::Source {
                seq: event.seq,
                source: Box::new(StopVisit),
            })
        });
        if let (Err(e), None) = (visited, &first) {
            return Err(e);
        }
        let same = first.is_some_and(|(seq, f)| seq == through && f == self.tail_fingerprint);
        Ok((!same).then_some(ResetReason::LedgerRewritten { seq: through }))
    }

    /// Removes every page and resets `indexed_through` to 0 (same ledger id).
    fn clear(&mut self) -> Result<()> {
        let path = self.path.clone();
        let e = |err| Error::sqlite(&path, err);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e)?;
        tx.execute_batch("DELETE FROM pages; DELETE FROM pages_fts; DELETE FROM vectors;")
            .map_err(e)?;
        Meta::empty(&self.ledger_id, &self.config).write(&tx, &path)?;
        tx.commit().map_err(e)?;
        self.conn.execute_batch("VACUUM").map_err(e)?;
        self.indexed_through = 0;
        self.tail_fingerprint.clear();
        Ok(())
    }

    /// Checks the SQLite integrity of the whole file and the FTS5 index (costs a full read).
    ///
    /// # Errors
    /// [`Error::Damaged`] naming the first problem found.
    pub fn verify(&self) -> Result<()> {
        store::verify(&self.conn, &self.path)
    }

    /// Checks the index file at `path` through and through and changes nothing (`ctxlog
    /// verify`): SQLite's `quick_check`, the meta row, FTS5's `integrity-check` — the term
    /// data, which no page row's checksum covers: damage there changes which pages a search
    /// finds, never their text — and every page row against its checksum. Costs a full read.
    /// Returns the number of pages; a file of an older schema version (the next open
    /// recreates it) is not checked further and counts as 0 pages, as does a zero-byte file
    /// (an empty index).
    ///
    /// # Errors
    /// [`Error::Damaged`] naming the first problem; [`Error::Symlink`]; [`Error::Sqlite`] when
    /// the check could not run (the FTS5 check needs a writable file: it runs in a
    /// transaction that is rolled back); [`Error::Io`] when the file cannot be read.
    pub fn check_file(path: impl AsRef<Path>) -> Result<u64> {
        let path = path.as_ref();
        store::refuse_symlink(path)?;
        let len = std::fs::metadata(path)
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })?
            .len();
        if len == 0 {
            return Ok(0);
        }
        let (conn, _) = store::connect(path, Access::ReadWrite)?;
        if let Contents::Outdated(_) = store::stored_contents(&conn, path)? {
            return Ok(0);
        }
        store::validate(&conn, path)?;
        let tx = conn
            .unchecked_transaction()
            .map_err(|e| Error::sqlite(path, e))?;
        Meta::read(&tx, path)?;
        store::verify(&tx, path)?;
        let pages = hit::check_every_page(&tx, path)?;
        tx.rollback().map_err(|e| Error::sqlite(path, e))?;
        Ok(pages)
    }

    fn damaged(&self, reason: impl Into<String>) -> Error {
        store::damaged(&self.path, reason)
    }

    /// Reads the meta table; resets the content when it belongs to another ledger or config.
    fn load_meta(&mut self) -> Result<()> {
        let meta = Meta::read(&self.conn, &self.path)?;
        let reset = if meta.ledger_id != self.ledger_id {
            Some(ResetReason::LedgerChanged {
                was: meta.ledger_id,
            })
        } else if meta.config != self.config.tag() {
            Some(ResetReason::ConfigChanged)
        } else {
            None
        };
        if reset.is_some() {
            self.clear()?;
            self.reset = reset;
        } else {
            self.indexed_through = meta.indexed_through;
            self.tail_fingerprint = meta.tail;
        }
        Ok(())
    }

    /// Starts a write transaction (see [`Writer::begin`]).
    fn begin(&self) -> Result<Writer<'_>> {
        Writer::begin(&self.conn, &self.path, &self.ledger_id, &self.config)
    }

    /// Records what a committed writer reached.
    fn finish(&mut self, (stats, tail): (UpdateStats, String)) -> UpdateStats {
        self.indexed_through = stats.indexed_through;
        self.tail_fingerprint = tail;
        stats
    }

    /// Runs `read` in one read transaction on the file this handle has open, holding the
    /// shared [`FileLock`] (so [`RecallIndex::delete_files`] waits), after checking that it is
    /// still the file at the path. A deleted file's connection must not read: besides serving
    /// a deleted index (erased text), taking its SQLite lock would treat the *new* file's live
    /// journal, which has the same name, as a hot journal of the old one and delete it.
    ///
    /// # Errors
    /// [`Error::Replaced`] when the file was deleted or replaced; what `read` returns.
    fn guarded<T>(&self, read: impl FnOnce(Searcher<'_>) -> Result<T>) -> Result<T> {
        self.guarded_with(None, read)
    }

    /// [`RecallIndex::guarded`] with the question's side of the semantic leg.
    fn guarded_with<T>(
        &self,
        semantic: Option<&SemanticQuery>,
        read: impl FnOnce(Searcher<'_>) -> Result<T>,
    ) -> Result<T> {
        let _shared = FileLock::shared(&self.path);
        if !self.file_is_current() {
            return Err(replaced(&self.path));
        }
        let e = |err| Error::sqlite(&self.path, err);
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred)
            .map_err(e)?;
        tx.query_row("SELECT count(*) FROM meta", [], |r| r.get::<_, i64>(0))
            .map_err(e)?;
        if !self.file_is_current() {
            return Err(replaced(&self.path));
        }
        let result = read(Searcher {
            conn: &self.conn,
            path: &self.path,
            ranking: &self.ranking,
            semantic,
        })?;
        tx.commit().map_err(e)?;
        Ok(result)
    }

    /// Searches the index (docs/design.md#6-recall).
    ///
    /// Ranked results are the best [`Ranking::pool`] (default 200) BM25 candidates, re-ranked;
    /// `offset` and `next_offset` page through them. BM25 scores at most
    /// [`Ranking::max_scored`] (4096) matching rows: when the query's words match more, its
    /// rarest words are ranked and pages matching only the common ones fill the pool newest
    /// first (docs/recall.md, "Ranking").
    ///
    /// The query is reduced to literal words (stop words dropped, stemmed by the index's
    /// Porter tokenizer) and CJK bigrams; no query text is ever interpreted as FTS5 or SQL
    /// syntax, so any string is a valid query. An empty query (or one with no letters or
    /// digits) lists pages newest first. With `opts.seq`, the pages of that event are listed
    /// in order.
    ///
    /// Every hit is checked against its page's checksum before it is returned.
    ///
    /// # Errors
    /// [`Error::Damaged`] when the index file is damaged (including a page whose text or
    /// provenance no longer matches its checksum); [`Error::Replaced`] when another process
    /// deleted or replaced the file since this handle last caught up (catch up and retry);
    /// [`Error::Sqlite`] on other SQLite failures. Never for query text.
    pub fn search(&self, query: &str, opts: &SearchOptions) -> Result<RecallResult> {
        let semantic = match opts.seq {
            Some(_) => None,
            None => self.semantic_query(query)?,
        };
        self.guarded_with(semantic.as_ref(), |s| s.search(query, opts))
    }

    /// Up to `k` pages relevant to `input` from events older than `older_than_seq`, best
    /// first: the candidates for a projection's auto-included recall tier
    /// (docs/design.md#r6-auto-include). An input with no searchable words yields none.
    ///
    /// Every candidate's own text — its body, or its CJK bigram field for CJK terms —
    /// contains at least one of the input's terms: a page that [`RecallIndex::search`] finds
    /// only through its neighbours' context field or its date metadata is never a candidate,
    /// because an auto-included page is spent from the request's budget and should carry the
    /// words asked about. The candidates keep the order `search` gives them (the same
    /// re-ranked pool of the best `max(Ranking::pool, k)` BM25 matches); the filter only
    /// removes pages from it, so fewer than `k` may come back even when `search` has more hits.
    ///
    /// # Errors
    /// As [`RecallIndex::search`]: a candidate failing its checksum is [`Error::Damaged`], so
    /// a projection falls back to no recalled pages.
    pub fn candidates(&self, input: &str, older_than_seq: u64, k: usize) -> Result<Vec<Hit>> {
        let semantic = self.semantic_query(input)?;
        self.guarded_with(semantic.as_ref(), |s| {
            s.candidates(input, older_than_seq, k)
        })
    }

    /// Handles one call of the recall tool: validates `args`, searches, and returns the tool
    /// result JSON (its `query` cut to [`TOOL_QUERY_ECHO_CHARS`](crate::TOOL_QUERY_ECHO_CHARS)).
    /// Never fails: bad arguments give `{"error":{"code":"invalid_arguments",…}}`, a damaged
    /// index (a page failing its checksum included) `{"error":{"code":"index_damaged",…}}`
    /// (naming `ctxlog reindex`), other failures `{"error":{"code":"recall_failed",…}}`.
    pub fn handle_tool_call(&self, args: &Value) -> ToolOutput {
        tool::respond(args, |query, opts| self.search(query, opts))
    }
}

/// The semantic leg (docs/recall.md, "The semantic leg"): the model, page vectors kept up to
/// date with the pages, the question's embedding.
impl RecallIndex {
    /// Uses `embedder` for the semantic leg: [`RecallIndex::catch_up`] computes the vectors of
    /// pages that have none (of another model: all of them), and a search fuses the pages
    /// nearest the question with the lexical ranking. `None` turns the leg off (the vectors
    /// stay in the file, unused).
    #[cfg(feature = "semantic")]
    pub fn set_embedder(&mut self, embedder: Option<std::sync::Arc<crate::embed::Embedder>>) {
        self.embedder = embedder;
    }

    /// The model of the semantic leg, if any.
    #[cfg(feature = "semantic")]
    pub fn embedder(&self) -> Option<&crate::embed::Embedder> {
        self.embedder.as_deref()
    }

    /// How many pages have a vector (of whichever model).
    ///
    /// # Errors
    /// As [`RecallIndex::search`].
    pub fn vector_count(&self) -> Result<u64> {
        self.guarded(|s| {
            s.conn
                .query_row("SELECT count(*) FROM vectors", [], |r| r.get::<_, i64>(0))
                .map(|n| u64::try_from(n).unwrap_or(0))
                .map_err(|e| Error::sqlite(s.path, e))
        })
    }

    /// The question's side of the semantic leg, when the leg is on, the file's vectors are
    /// this model's and the gate lets the leg rank: the gate is read first, so a search it
    /// leaves to the lexical ranking (a conversation of short turns under `LongShare`) costs
    /// no model run.
    #[cfg(feature = "semantic")]
    fn semantic_query(&self, query: &str) -> Result<Option<SemanticQuery>> {
        let Some(embedder) = &self.embedder else {
            return Ok(None);
        };
        if query.trim().is_empty() {
            return Ok(None);
        }
        let (model, gate) = self.guarded(|s| {
            Ok((
                crate::vector::stored_model(s.conn, s.path)?,
                s.semantic_gate()?,
            ))
        })?;
        let Some((min_pages, weight)) = gate else {
            return Ok(None);
        };
        if model.as_deref() != Some(embedder.fingerprint()) {
            return Ok(None);
        }
        Ok(embedder.embed(&[query])?.pop().map(|vector| SemanticQuery {
            vector,
            min_pages,
            weight,
        }))
    }

    #[cfg(not(feature = "semantic"))]
    #[allow(clippy::unnecessary_wraps, clippy::unused_self)]
    fn semantic_query(&self, _query: &str) -> Result<Option<SemanticQuery>> {
        Ok(None)
    }

    /// Computes and stores the vectors of the pages that have none, [`EMBED_BATCH`] pages per
    /// write transaction; the model runs outside any transaction, so other handles are not
    /// kept waiting. Returns how many were stored. Nothing when the leg is off or the index is
    /// read-only.
    #[cfg(feature = "semantic")]
    fn embed_pages(&mut self) -> Result<u64> {
        let Some(embedder) = self.embedder.clone() else {
            return Ok(0);
        };
        if self.read_only {
            return Ok(0);
        }
        let model = embedder.fingerprint();
        let stored_model = self.guarded(|s| crate::vector::stored_model(s.conn, s.path))?;
        if stored_model.as_deref() != Some(model) {
            let _shared = FileLock::shared(&self.path);
            let e = |err| Error::sqlite(&self.path, err);
            let tx =
                rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
                    .map_err(e)?;
            crate::vector::forget_other_model(&tx, &self.path, model)?;
            tx.commit().map_err(e)?;
        }
        let mut stored = 0u64;
        loop {
            let batch = self.guarded(|s| crate::vector::missing(s.conn, s.path, EMBED_BATCH))?;
            if batch.is_empty() {
                return Ok(stored);
            }
            let texts: Vec<&str> = batch.iter().map(|(_, _, t)| t.as_str()).collect();
            let mut vectors = Vec::with_capacity(batch.len());
            for chunk in texts.chunks(MODEL_BATCH) {
                vectors.extend(embedder.embed(chunk)?);
            }
            let rows: Vec<(i64, i64, Vec<f32>)> = batch
                .iter()
                .zip(vectors)
                .map(|((id, checksum, _), v)| (*id, *checksum, v))
                .collect();
            let _shared = FileLock::shared(&self.path);
            if !self.file_is_current() {
                return Err(replaced(&self.path));
            }
            let n = crate::vector::store(&self.conn, &self.path, model, &rows)?;
            stored += n as u64;
            if n == 0 {
                // Every page of the batch was rewritten meanwhile: the next catch-up goes on.
                return Ok(stored);
            }
        }
    }

    #[cfg(not(feature = "semantic"))]
    #[allow(clippy::unnecessary_wraps, clippy::unused_self)]
    fn embed_pages(&mut self) -> Result<u64> {
        Ok(0)
    }
}

/// Pages embedded per write transaction of [`RecallIndex::catch_up`].
#[cfg(feature = "semantic")]
const EMBED_BATCH: usize = 64;
/// Pages per run of the model (padded to the longest of them).
#[cfg(feature = "semantic")]
const MODEL_BATCH: usize = 8;

/// The error when the file at `path` is not the one a handle has open.
fn replaced(path: &Path) -> Error {
    Error::Replaced {
        path: path.to_path_buf(),
    }
}

/// Ends a [`LedgerSource::visit_after`] early.
#[derive(Debug)]
struct StopVisit;

impl std::fmt::Display for StopVisit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("visit stopped")
    }
}

impl std::error::Error for StopVisit {}

#[cfg(test)]
mod tests {
    use ctxlog_event::{Event, EventBody};

    use super::*;
    use crate::source::{MemorySource, NoArtifacts};
    use crate::vector::{self, DIMENSIONS};

    fn note(seq: u64, text: &str) -> Event {
        Event {
            seq,
            ts_ms: 1_000 * seq as i64,
            body: EventBody::Note {
                text: text.into(),
                pinned: false,
                supersedes: None,
                provider_item: None,
            },
        }
    }

    fn unit(i: usize) -> Vec<f32> {
        let mut v = vec![0.0; DIMENSIONS];
        v[i] = 1.0;
        v
    }

    /// Stores a synthetic vector for every page without one: page id `n` gets `unit(n)`.
    fn embed_all(index: &RecallIndex, model: &str) -> usize {
        let missing = index
            .guarded(|s| vector::missing(s.conn, s.path, 100))
            .unwrap_or_default();
        let rows: Vec<_> = missing
            .into_iter()
            .map(|(id, sum, _)| (id, sum, unit(id as usize)))
            .collect();
        vector::store(&index.conn, &index.path, model, &rows).unwrap_or_default()
    }

    /// What `search` finds with `v` as the question's embedding (the gate read as
    /// `RecallIndex::semantic_query` reads it).
    fn search_with(index: &RecallIndex, query: &str, v: Option<&[f32]>) -> Vec<u64> {
        let opts = SearchOptions {
            limit: 10,
            ..SearchOptions::default()
        };
        let gate = index
            .guarded(|s| s.semantic_gate())
            .unwrap_or_else(|e| panic!("{e}"));
        let semantic = v.zip(gate).map(|(v, (min_pages, weight))| SemanticQuery {
            vector: v.to_vec(),
            min_pages,
            weight,
        });
        let result = index.guarded_with(semantic.as_ref(), |s| s.search(query, &opts));
        result
            .map(|r| r.hits.iter().map(|h| h.seq).collect())
            .unwrap_or_default()
    }

    const NOTES: [&str; 3] = [
        "The deploy key lives in the vault.",
        "Lunch was pasta with the team.",
        "My new academic mentor is Robert.",
    ];

    fn indexed() -> (tempfile::TempDir, RecallIndex) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut index = RecallIndex::open(dir.path().join("recall.sqlite"), "l")
            .unwrap_or_else(|e| panic!("{e}"));
        let events: Vec<Event> = (1..=3).map(|s| note(s, NOTES[s as usize - 1])).collect();
        index
            .update(&events, &NoArtifacts)
            .unwrap_or_else(|e| panic!("{e}"));
        (dir, index)
    }

    #[test]
    fn the_semantic_leg_finds_a_page_no_query_word_reaches() {
        let (_dir, mut index) = indexed();
        // Short notes only: the default gate would leave them to the lexical ranking.
        index.set_ranking(crate::rank::Ranking {
            semantic_gate: crate::rank::SemanticGate::Every,
            ..crate::rank::Ranking::default()
        });
        assert_eq!(embed_all(&index, "m"), 3);
        let question = "who guides my essay writing";
        assert!(search_with(&index, question, None).is_empty());
        // Page 3 (the mentor note) is nearest the question's vector.
        assert_eq!(search_with(&index, question, Some(&unit(3)))[0], 3);
        // Fused with the lexical ranking: a lexical match stays, the nearest page joins it.
        let fused = search_with(&index, "vault", Some(&unit(3)));
        assert!(fused.contains(&1) && fused.contains(&3), "{fused:?}");
    }

    #[test]
    fn the_shape_gates_leave_short_turns_to_the_lexical_ranking() {
        use crate::rank::{Ranking, SemanticGate};
        let question = "who guides my essay writing";
        for gate in [SemanticGate::LongEvents, SemanticGate::LongShare] {
            // Only short turns: the gated leg ranks nothing, the lexical ranking (empty) stands.
            let (_dir, mut index) = indexed();
            index.set_ranking(Ranking {
                semantic_gate: gate,
                ..Ranking::default()
            });
            assert_eq!(embed_all(&index, "m"), 3);
            assert!(
                search_with(&index, question, Some(&unit(3))).is_empty(),
                "{gate:?}"
            );
            // A reply of two pages (pages 4 and 5): the leg reaches it.
            let long = format!(
                "{} Robert reviews every draft.",
                "Notes on drafts. ".repeat(150)
            );
            index
                .update([note(4, &long)], &NoArtifacts)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(embed_all(&index, "m"), 2);
            let hits = search_with(&index, question, Some(&unit(5)));
            assert_eq!(hits.first(), Some(&4), "{gate:?}: {hits:?}");
            if gate == SemanticGate::LongEvents {
                assert_eq!(hits, vec![4], "only the long event is ranked");
            }
            // The short note nearest the question is still left out under `LongEvents`, and
            // ranked at a weight of min(1, 2 × 1/4) under `LongShare`.
            let hits = search_with(&index, question, Some(&unit(3)));
            match gate {
                SemanticGate::LongEvents => assert!(!hits.contains(&3), "{hits:?}"),
                _ => assert_eq!(hits.first(), Some(&3), "{hits:?}"),
            }
        }
    }

    #[cfg(feature = "semantic")]
    #[test]
    fn a_gate_that_ranks_nothing_spares_the_question_its_model_run() {
        use crate::rank::{Ranking, SemanticGate};
        let idle = |index: &RecallIndex| {
            index
                .guarded(|s| s.semantic_gate())
                .unwrap_or_else(|e| panic!("{e}"))
                .is_none()
        };
        let (_dir, mut index) = indexed();
        // Short turns only: `LongShare` gives the leg no weight, so nothing is embedded.
        assert!(idle(&index));
        index.set_ranking(Ranking {
            semantic_gate: SemanticGate::Every,
            ..Ranking::default()
        });
        assert!(!idle(&index));
        // The leg alone (no lexical ranking) is never idle.
        index.set_ranking(Ranking {
            lexical_weight: 0.0,
            ..Ranking::default()
        });
        assert!(!idle(&index));
        // One event of two pages among four: `LongShare` ranks at min(1, 2 × 1/4).
        index.set_ranking(Ranking::default());
        let long = "Notes on drafts. ".repeat(150);
        index
            .update([note(4, &long)], &NoArtifacts)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!idle(&index));
    }

    #[test]
    fn vectors_follow_the_pages_and_go_with_them() {
        let (_dir, mut index) = indexed();
        assert_eq!(embed_all(&index, "m"), 3);
        assert_eq!(embed_all(&index, "m"), 0, "nothing left to embed");
        index
            .update([note(4, "A fourth note.")], &NoArtifacts)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(embed_all(&index, "m"), 1, "only the new page");
        assert_eq!(index.vector_count().ok(), Some(4));
        // Another model's vectors are forgotten before new ones are stored.
        assert_eq!(embed_all(&index, "other"), 0);
        assert_eq!(index.vector_count().ok(), Some(0));
        assert_eq!(embed_all(&index, "other"), 4);
        // Emptying the index (a rewritten ledger, reindex) removes every vector with the pages.
        let events: Vec<Event> = (1..=2).map(|s| note(s, NOTES[s as usize - 1])).collect();
        index
            .rebuild(
                &MemorySource {
                    ledger_id: "l".into(),
                    events,
                    artifacts: Default::default(),
                },
                &mut |_| {},
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(index.vector_count().ok(), Some(0));
    }

    #[test]
    fn a_vector_of_a_rewritten_page_is_not_stored() {
        let (_dir, index) = indexed();
        let missing = index
            .guarded(|s| vector::missing(s.conn, s.path, 100))
            .unwrap_or_default();
        let rows: Vec<_> = missing
            .into_iter()
            .map(|(id, sum, _)| (id, sum ^ 1, unit(0)))
            .collect();
        assert_eq!(
            vector::store(&index.conn, &index.path, "m", &rows).ok(),
            Some(0)
        );
    }
}

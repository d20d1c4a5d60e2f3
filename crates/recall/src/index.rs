//! The index file: schema, opening and damage detection, incremental updates and rebuilds.

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use ctxlog_event::{Event, EventKind};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::error::{Error, Result};
use crate::rank::Ranking;
use crate::source::{ArtifactSource, LedgerSource};
use crate::writer::{Neighbour, Writer, fingerprint, write_meta};

/// `PRAGMA application_id` of a recall index ("cxlr").
pub const APPLICATION_ID: i32 = 0x6378_6c72;
/// `PRAGMA user_version`: the schema version this code reads and writes.
pub const SCHEMA_VERSION: i32 = 1;
/// Version of the rules that turn text into index rows (pages, CJK grams, glued words). An
/// index written under other rules is discarded and rebuilt on open, like a changed
/// [`IndexConfig`]. 2: a run's last character and words glued to CJK text are indexed.
const TEXT_VERSION: u32 = 2;
/// The name of the recall tool. Tool results of this tool are never indexed (SPEC R1).
pub const TOOL_NAME: &str = "recall";

const SCHEMA: &str = "
CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT;
CREATE TABLE pages(
    id INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL,
    page INTEGER NOT NULL,
    pages INTEGER NOT NULL,
    kind TEXT NOT NULL,
    tool TEXT,
    status TEXT,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    ts_ms INTEGER NOT NULL,
    supersedes INTEGER,
    cue INTEGER NOT NULL,
    author TEXT,
    episode INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX pages_seq_page ON pages(seq, page);
CREATE INDEX pages_author ON pages(author) WHERE author IS NOT NULL;
CREATE VIRTUAL TABLE pages_fts USING fts5(
    body, ctx, meta, cjk, tokenize = 'porter unicode61 remove_diacritics 2'
);
";

/// How events are turned into index rows. Changing it makes an existing index stale: `open`
/// discards and rebuilds an index written with another configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexConfig {
    /// How many preceding indexed events are copied (abridged) into an event's lower-weighted
    /// context field. Default 2: a reply is found by the words of the question it answers,
    /// which usually come just before it.
    pub context_before: usize,
    /// How many following indexed events are copied into the context field. Default 1: a
    /// statement is found by the words of the reply it got.
    pub context_after: usize,
    /// How many leading characters of each neighbour are copied. Default 400.
    pub context_chars: usize,
    /// A pause longer than this (milliseconds) between indexed events starts a new episode:
    /// neighbours in another episode are not context, and ranking credits pages whose episode
    /// matches well. Default 2 hours.
    pub episode_gap_ms: i64,
    /// Index each event's date in words ("Monday 8 May 2023") as metadata, so questions
    /// naming a date find what was said that day. Default true.
    pub date_metadata: bool,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            context_before: 2,
            context_after: 1,
            context_chars: 400,
            episode_gap_ms: 2 * 3_600_000,
            date_metadata: true,
        }
    }
}

impl IndexConfig {
    /// An index without context or date metadata: each page is its own text only.
    pub fn plain() -> IndexConfig {
        IndexConfig {
            context_before: 0,
            context_after: 0,
            date_metadata: false,
            ..IndexConfig::default()
        }
    }

    /// The configuration as stored in the index. It includes [`TEXT_VERSION`], so an index
    /// whose rows were derived by older text rules is rebuilt too.
    pub(crate) fn tag(&self) -> String {
        format!(
            "text={TEXT_VERSION};before={};after={};chars={};gap={};date={}",
            self.context_before,
            self.context_after,
            self.context_chars,
            self.episode_gap_ms,
            self.date_metadata
        )
    }

    pub(crate) fn window_len(&self) -> usize {
        self.context_before.max(self.context_after)
    }
}

/// Why `open` or `sync` discarded the index content.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResetReason {
    /// The index belonged to another ledger id.
    LedgerChanged {
        /// The id the index was built for.
        was: String,
    },
    /// The index was built with another [`IndexConfig`].
    ConfigChanged,
    /// The ledger is shorter than what was indexed, or the last indexed event changed.
    LedgerRewritten {
        /// The seq found missing or different.
        seq: u64,
    },
}

/// Figures from one `update`, `sync` or `rebuild`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdateStats {
    /// Events read (indexed or skipped as not indexable).
    pub events_seen: u64,
    /// Events whose text was indexed.
    pub events_indexed: u64,
    /// Pages written.
    pub pages_written: u64,
    /// Artifacts that could not be read; the event's inline excerpt was indexed instead.
    pub artifact_failures: u64,
    /// The index's `indexed_through` afterwards.
    pub indexed_through: u64,
    /// Set when the index content was discarded before indexing.
    pub reset: Option<ResetReason>,
}

/// Progress of a rebuild, reported after each event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The seq just processed.
    pub seq: u64,
    /// The ledger's last seq (the goal).
    pub head_seq: u64,
}

/// A per-conversation recall index: an SQLite file with an FTS5 table of event pages.
///
/// The index is a disposable cache of the ledger (SPEC R2): it records the ledger id it was
/// built for, the last seq it indexed and a fingerprint of that event; any mismatch discards
/// its content, and [`RecallIndex::recreate`] deletes and recreates the file.
///
/// # Journal mode
///
/// The file uses SQLite's rollback journal (not WAL) with `secure_delete`: at rest the index
/// is one file, so deleting it (erasure, `reindex`) leaves no `-wal` copy of erased text, and
/// deleted rows are zeroed. Readers wait for a writer up to a 5 s busy timeout.
pub struct RecallIndex {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    ledger_id: String,
    indexed_through: u64,
    tail_fingerprint: String,
    config: IndexConfig,
    reset: Option<ResetReason>,
    pub(crate) ranking: Ranking,
}

impl std::fmt::Debug for RecallIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecallIndex")
            .field("path", &self.path)
            .field("ledger_id", &self.ledger_id)
            .field("indexed_through", &self.indexed_through)
            .finish_non_exhaustive()
    }
}

impl RecallIndex {
    /// Opens (or creates) the index at `path` for the ledger `ledger_id`, with the default
    /// [`IndexConfig`].
    ///
    /// An index written for another ledger id or configuration is emptied (see
    /// [`RecallIndex::reset_reason`]); feed it events from seq 1 again.
    ///
    /// # Errors
    /// [`Error::Damaged`] when the file is not a readable recall index of this schema version
    /// (truncated, garbage, foreign database, other `user_version`); [`Error::Sqlite`] or
    /// [`Error::Io`] when it cannot be opened or created.
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
        let path = path.as_ref().to_path_buf();
        let meta = std::fs::metadata(&path).ok();
        if meta.as_ref().is_some_and(std::fs::Metadata::is_dir) {
            return Err(Error::Damaged {
                path,
                reason: "a directory is where the index file should be".into(),
            });
        }
        let existing = meta.is_some_and(|m| m.len() > 0);
        let conn = connect(&path)?;
        let mut index = RecallIndex {
            conn,
            path,
            ledger_id: ledger_id.to_owned(),
            indexed_through: 0,
            tail_fingerprint: String::new(),
            config,
            reset: None,
            ranking: Ranking::default(),
        };
        if existing {
            index.validate()?;
            index.load_meta()?;
        } else {
            index.create_schema()?;
        }
        Ok(index)
    }

    /// Deletes the index file (and any SQLite side files) at `path` and creates an empty one.
    /// This is how a damaged index is repaired; follow with [`RecallIndex::sync`] or
    /// [`RecallIndex::rebuild`].
    ///
    /// # Errors
    /// [`Error::Io`] when a file cannot be removed; as [`RecallIndex::open`] otherwise.
    pub fn recreate(
        path: impl AsRef<Path>,
        ledger_id: &str,
        config: IndexConfig,
    ) -> Result<RecallIndex> {
        remove_index_files(path.as_ref())?;
        Self::open_with(path, ledger_id, config)
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

    /// Indexes `events` whose seq is greater than [`RecallIndex::indexed_through`], in one
    /// transaction. Events must come in increasing seq order; events at or below
    /// `indexed_through` are skipped, except that the event *at* `indexed_through`, when
    /// given, is checked against the stored fingerprint.
    ///
    /// Indexed: user, assistant, note and tool-result text (an artifact's full text read
    /// through `artifacts`; if that fails, the inline excerpt). Never indexed: tool calls,
    /// system markers, and results of the [`TOOL_NAME`] tool (recall output).
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
        let mut writer = self.begin()?;
        for event in events {
            writer.add(event.borrow(), artifacts)?;
        }
        let done = writer.commit()?;
        Ok(self.finish(done))
    }

    /// Brings the index up to date with `source`: discards it first when the ledger id
    /// changed, when the ledger is shorter than what was indexed, or when the last indexed
    /// event changed; then indexes every event after `indexed_through`.
    ///
    /// # Errors
    /// Source failures ([`Error::Source`]) and index failures. A failed sync leaves the index
    /// at its last committed state (a reset it needed stays done; the events are not written).
    pub fn sync(&mut self, source: &dyn LedgerSource) -> Result<UpdateStats> {
        self.sync_with_progress(source, &mut |_| {})
    }

    /// Empties the index and indexes all of `source`, calling `progress` after each event.
    ///
    /// # Errors
    /// As [`RecallIndex::sync`].
    pub fn rebuild(
        &mut self,
        source: &dyn LedgerSource,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<UpdateStats> {
        self.ledger_id = source.ledger_id();
        self.clear()?;
        self.sync_with_progress(source, progress)
    }

    fn sync_with_progress(
        &mut self,
        source: &dyn LedgerSource,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<UpdateStats> {
        self.refresh()?;
        let reset = self.check_source(source)?;
        if reset.is_some() {
            self.ledger_id = source.ledger_id();
            self.clear()?;
        }
        let head_seq = source.head_seq();
        let mut writer = self.begin()?;
        let from = writer.through;
        source.visit_after(from, &mut |event| {
            writer.add(event, source)?;
            progress(Progress {
                seq: event.seq,
                head_seq,
            });
            Ok(())
        })?;
        let done = writer.commit()?;
        let mut stats = self.finish(done);
        stats.reset = reset.or_else(|| self.reset.clone());
        Ok(stats)
    }

    /// Takes the ledger id, `indexed_through` and tail fingerprint from the file: another
    /// handle (or process) may have indexed further, reset or rebuilt it since this handle
    /// last looked, and deciding from a stale copy would keep rows of a rewritten ledger.
    fn refresh(&mut self) -> Result<()> {
        let (ledger_id, through, tail) = self.read_progress()?;
        self.ledger_id = ledger_id;
        self.indexed_through = through;
        self.tail_fingerprint = tail;
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
        let tx = self
            .conn
            .transaction()
            .map_err(|e| Error::sqlite(&path, e))?;
        tx.execute_batch("DELETE FROM pages; DELETE FROM pages_fts;")
            .map_err(|e| Error::sqlite(&path, e))?;
        write_meta(&tx, &path, &self.ledger_id, 0, "", &self.config)?;
        tx.commit().map_err(|e| Error::sqlite(&path, e))?;
        self.conn
            .execute_batch("VACUUM")
            .map_err(|e| Error::sqlite(&path, e))?;
        self.indexed_through = 0;
        self.tail_fingerprint.clear();
        Ok(())
    }

    /// Checks the SQLite integrity of the whole file and the FTS5 index (costs a full read).
    ///
    /// # Errors
    /// [`Error::Damaged`] naming the first problem found.
    pub fn verify(&self) -> Result<()> {
        let ok: String = self
            .conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if ok != "ok" {
            return Err(self.damaged(format!("quick_check: {ok}")));
        }
        self.conn
            .execute(
                "INSERT INTO pages_fts(pages_fts, rank) VALUES('integrity-check', 1)",
                [],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    pub(crate) fn err(&self, e: rusqlite::Error) -> Error {
        Error::sqlite(&self.path, e)
    }

    fn damaged(&self, reason: impl Into<String>) -> Error {
        Error::Damaged {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    fn create_schema(&mut self) -> Result<()> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction()
            .map_err(|e| Error::sqlite(&path, e))?;
        tx.execute_batch(SCHEMA)
            .map_err(|e| Error::sqlite(&path, e))?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)
            .map_err(|e| Error::sqlite(&path, e))?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(|e| Error::sqlite(&path, e))?;
        write_meta(&tx, &path, &self.ledger_id, 0, "", &self.config)?;
        tx.commit().map_err(|e| Error::sqlite(&path, e))
    }

    /// Checks that the file is a complete recall index of this schema version.
    fn validate(&self) -> Result<()> {
        let pragma = |name: &str| -> Result<i64> {
            self.conn
                .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
                .map_err(|e| self.err(e))
        };
        let app = pragma("application_id")?;
        let version = pragma("user_version")?;
        if app != i64::from(APPLICATION_ID) || version != i64::from(SCHEMA_VERSION) {
            return Err(self.damaged(format!(
                "not a recall index of schema {SCHEMA_VERSION} (application_id {app:#x}, user_version {version})"
            )));
        }
        let expected = pragma("page_count")? * pragma("page_size")?;
        let actual = std::fs::metadata(&self.path)
            .map_err(|source| Error::Io {
                path: self.path.clone(),
                source,
            })?
            .len();
        if i64::try_from(actual).unwrap_or(i64::MAX) < expected {
            return Err(self.damaged(format!(
                "file is {actual} bytes, its header says {expected}: truncated"
            )));
        }
        self.check_schema_text()?;
        // Touch the FTS structure and the newest page so gross damage shows now.
        self.conn
            .query_row(
                "SELECT count(*) FROM (SELECT rowid FROM pages_fts WHERE pages_fts MATCH '\"ctxlog\"' LIMIT 1)",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(|e| self.err(e))?;
        self.conn
            .query_row("SELECT max(id) FROM pages", [], |r| {
                r.get::<_, Option<i64>>(0)
            })
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Checks that every table and index is declared exactly as [`SCHEMA`] declares it (a
    /// table recreated with other columns would otherwise answer every search with nothing).
    fn check_schema_text(&self) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare("SELECT sql FROM sqlite_schema WHERE name = ?1")
            .map_err(|e| self.err(e))?;
        for (name, expected) in schema_statements() {
            let found: Option<String> = stmt
                .query_row([&name], |r| r.get(0))
                .optional()
                .map_err(|e| self.err(e))?;
            match found {
                Some(sql) if normalize_sql(&sql) == expected => {}
                Some(_) => return Err(self.damaged(format!("{name} has another definition"))),
                None => return Err(self.damaged(format!("{name} is missing"))),
            }
        }
        Ok(())
    }

    /// Reads the meta table; resets the content when it belongs to another ledger or config.
    fn load_meta(&mut self) -> Result<()> {
        let get = |key: &str| -> Result<Option<String>> {
            self.conn
                .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .optional()
                .map_err(|e| self.err(e))
        };
        let (Some(ledger), Some(through), Some(tail), Some(config)) = (
            get("ledger_id")?,
            get("indexed_through")?,
            get("tail_fingerprint")?,
            get("config")?,
        ) else {
            return Err(self.damaged("meta rows missing"));
        };
        let through: u64 = through
            .parse()
            .map_err(|_| self.damaged(format!("indexed_through is {through:?}")))?;
        let reset = if ledger != self.ledger_id {
            Some(ResetReason::LedgerChanged { was: ledger })
        } else if config != self.config.tag() {
            Some(ResetReason::ConfigChanged)
        } else {
            None
        };
        if reset.is_some() {
            self.clear()?;
            self.reset = reset;
        } else {
            self.indexed_through = through;
            self.tail_fingerprint = tail;
        }
        Ok(())
    }

    /// Starts a write transaction. It takes SQLite's write lock at once and re-reads how far
    /// the file got, so another handle (another process) that indexed in the meantime is
    /// continued, not duplicated.
    fn begin(&self) -> Result<Writer<'_>> {
        let tx = rusqlite::Transaction::new_unchecked(
            &self.conn,
            rusqlite::TransactionBehavior::Immediate,
        )
        .map_err(|e| self.err(e))?;
        let (ledger_id, through, tail) = self.read_progress()?;
        if ledger_id != self.ledger_id {
            return Err(Error::Stale {
                path: self.path.clone(),
                seq: 0,
            });
        }
        Ok(Writer {
            last: self.last_episode()?,
            window: self.load_window()?,
            tx,
            path: self.path.clone(),
            ledger_id,
            config: self.config.clone(),
            stats: UpdateStats::default(),
            through,
            tail,
            previous: None,
        })
    }

    /// The ledger id, `indexed_through` and tail fingerprint recorded in the file.
    fn read_progress(&self) -> Result<(String, u64, String)> {
        let get = |key: &str| -> Result<String> {
            self.conn
                .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .optional()
                .map_err(|e| self.err(e))?
                .ok_or_else(|| self.damaged(format!("meta row {key} missing")))
        };
        let through = get("indexed_through")?;
        let through = through
            .parse()
            .map_err(|_| self.damaged(format!("indexed_through is {through:?}")))?;
        Ok((get("ledger_id")?, through, get("tail_fingerprint")?))
    }

    /// Records what a committed writer reached.
    fn finish(&mut self, (stats, tail): (UpdateStats, String)) -> UpdateStats {
        self.indexed_through = stats.indexed_through;
        self.tail_fingerprint = tail;
        stats
    }

    /// The time and episode of the newest indexed page.
    fn last_episode(&self) -> Result<Option<(i64, u64)>> {
        self.conn
            .query_row(
                "SELECT ts_ms, episode FROM pages ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64)),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The last indexed events that can be context of the next one, oldest first.
    fn load_window(&self) -> Result<VecDeque<Neighbour>> {
        let k = self.config.window_len();
        if k == 0 {
            return Ok(VecDeque::new());
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT p.seq, p.ts_ms, substr(f.body, 1, ?2) FROM pages p \
                 JOIN pages_fts f ON f.rowid = p.id \
                 WHERE p.page = 0 ORDER BY p.seq DESC LIMIT ?1",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![k as i64, self.config.context_chars as i64], |r| {
                Ok(Neighbour {
                    seq: r.get::<_, i64>(0)? as u64,
                    ts_ms: r.get(1)?,
                    snippet: r.get(2)?,
                })
            })
            .map_err(|e| self.err(e))?;
        let mut window = VecDeque::new();
        for row in rows {
            window.push_front(row.map_err(|e| self.err(e))?);
        }
        Ok(window)
    }
}

/// The name and whitespace-normalized text of each statement of [`SCHEMA`].
fn schema_statements() -> Vec<(String, String)> {
    SCHEMA
        .split(';')
        .map(normalize_sql)
        .filter(|s| !s.is_empty())
        .filter_map(|s| {
            let name = s
                .split(['(', ' '])
                .skip_while(|w| *w != "TABLE" && *w != "INDEX")
                .nth(1)?
                .to_owned();
            Some((name, s))
        })
        .collect()
}

/// `sql` with runs of whitespace made single spaces and the ends trimmed.
fn normalize_sql(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Opens the SQLite connection with the index's pragmas.
fn connect(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| Error::sqlite(path, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| Error::sqlite(path, e))?;
    conn.execute_batch("PRAGMA secure_delete = ON; PRAGMA synchronous = NORMAL;")
        .map_err(|e| Error::sqlite(path, e))?;
    Ok(conn)
}

/// Removes the index file and SQLite's side files, ignoring those that do not exist.
fn remove_index_files(path: &Path) -> Result<()> {
    let mut names = vec![path.to_path_buf()];
    for suffix in ["-journal", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        names.push(PathBuf::from(p));
    }
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        // Only an empty directory is removed: anything inside it is not ours to delete.
        std::fs::remove_dir(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
    }
    for name in names {
        match std::fs::remove_file(&name) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(Error::Io { path: name, source }),
        }
    }
    Ok(())
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

/// Kinds of event the index holds pages for.
pub const INDEXED_KINDS: [EventKind; 4] = [
    EventKind::User,
    EventKind::Assistant,
    EventKind::ToolResult,
    EventKind::Note,
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_bundled_sqlite_has_fts5_and_the_schema_builds() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let fts5: i64 = conn
            .query_row("SELECT sqlite_compileoption_used('ENABLE_FTS5')", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(fts5, 1);
        conn.execute_batch(super::SCHEMA).unwrap();
    }
}

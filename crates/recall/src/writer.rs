//! Writing pages: one transaction that turns events into page rows, keeps the context window
//! and the episode, and records how far the index got.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use ctxlog_event::{Event, EventBody, EventKind};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::config::{IndexConfig, TOOL_NAME};
use crate::error::{Error, Result};
use crate::hit::PageFacts;
use crate::source::ArtifactSource;
use crate::stats::UpdateStats;
use crate::store::Meta;
use crate::text::{
    PAGE_CHARS, author_label, cjk_grams, date_words, has_update_cue, pages, relative_dates,
};

/// An indexed event that may be context of the next ones.
#[derive(Clone, Debug)]
struct Neighbour {
    seq: u64,
    ts_ms: i64,
    snippet: String,
    /// Its text fits one page ([`ContextGate`](crate::ContextGate) decides what that changes).
    fits: bool,
}

/// The full-text row of one page, held until it is final.
struct FtsRow {
    id: i64,
    body: String,
    ctx: String,
    meta: String,
    cjk: String,
}

/// An event whose full-text rows are not written yet: its first page's context field still
/// waits for the events that follow it (`IndexConfig::context_after`).
struct Pending {
    seq: u64,
    rows: Vec<FtsRow>,
}

/// What the page rows of one event record besides their text.
struct RowFacts<'e> {
    tool: Option<&'e str>,
    status: Option<&'static str>,
    supersedes: Option<u64>,
    cue: bool,
    author: Option<String>,
    episode: u64,
    ctx: String,
    meta: String,
}

/// Indexes events inside one transaction.
pub(crate) struct Writer<'a> {
    tx: rusqlite::Transaction<'a>,
    /// Time and episode of the last indexed event.
    last: Option<(i64, u64)>,
    path: PathBuf,
    ledger_id: String,
    config: IndexConfig,
    window: VecDeque<Neighbour>,
    stats: UpdateStats,
    through: u64,
    tail: String,
    /// The seq of the previous event given to this writer.
    previous: Option<u64>,
    /// The last indexed events of this transaction whose full-text rows may still receive a
    /// following event's snippet, oldest first. They are inserted once, when final (or at
    /// commit): updating a row in FTS5 is a delete and an insert, and deleting a row still in
    /// FTS5's pending data flushes it to a new segment, which made every event a segment and
    /// the build mostly merging. Rows go in in rowid order for the same reason.
    pending: VecDeque<Pending>,
}

impl<'a> Writer<'a> {
    /// Starts a write transaction on `conn` for the ledger `ledger_id`. It takes SQLite's
    /// write lock at once and re-reads how far the file got, so another handle (another
    /// process) that indexed in the meantime is continued, not duplicated.
    ///
    /// # Errors
    /// [`Error::Stale`] (seq 0) when the file now belongs to another ledger.
    pub(crate) fn begin(
        conn: &'a Connection,
        path: &Path,
        ledger_id: &str,
        config: &IndexConfig,
    ) -> Result<Writer<'a>> {
        let e = |err| Error::sqlite(path, err);
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
            .map_err(e)?;
        let meta = Meta::read(&tx, path)?;
        if meta.ledger_id != ledger_id {
            return Err(Error::Stale {
                path: path.to_path_buf(),
                seq: 0,
            });
        }
        Ok(Writer {
            last: last_episode(&tx).map_err(e)?,
            window: load_window(&tx, config).map_err(e)?,
            tx,
            path: path.to_path_buf(),
            ledger_id: meta.ledger_id,
            config: config.clone(),
            stats: UpdateStats::default(),
            through: meta.indexed_through,
            tail: meta.tail,
            previous: None,
            pending: VecDeque::new(),
        })
    }

    /// The last seq the file had indexed when this writer began (or this writer reached).
    pub(crate) fn through(&self) -> u64 {
        self.through
    }

    pub(crate) fn add(&mut self, event: &Event, artifacts: &dyn ArtifactSource) -> Result<()> {
        if let Some(after) = self.previous.filter(|&p| p >= event.seq) {
            return Err(Error::OutOfOrder {
                path: self.path.clone(),
                seq: event.seq,
                after,
            });
        }
        self.previous = Some(event.seq);
        if event.seq < self.through {
            return Ok(());
        }
        if event.seq == self.through {
            if fingerprint(event) != self.tail {
                return Err(Error::Stale {
                    path: self.path.clone(),
                    seq: event.seq,
                });
            }
            return Ok(());
        }
        self.stats.events_seen += 1;
        if let Some(text) = self.indexable_text(event, artifacts) {
            self.write_event(event, &text)?;
        }
        self.through = event.seq;
        self.tail = fingerprint(event);
        Ok(())
    }

    /// The text to index for `event`, or `None` when the event is never indexed.
    fn indexable_text(&mut self, event: &Event, artifacts: &dyn ArtifactSource) -> Option<String> {
        match &event.body {
            // With parts: the text, the parts' text and a marker per image or document
            // (`[image]`, `[document NAME]`), never base64.
            body @ EventBody::User { .. } => Some(body.readable_text().into_owned()),
            EventBody::Assistant { text, .. } => Some(text.clone()),
            EventBody::Note { text, .. } => Some(text.clone()),
            EventBody::ToolResult { tool, .. } if tool == TOOL_NAME => None,
            body @ EventBody::ToolResult { text, artifact, .. } => {
                let text = match artifact {
                    None => text.clone(),
                    Some(a) => match artifacts.artifact_text(a) {
                        Ok(full) => full,
                        Err(_) => {
                            self.stats.artifact_failures += 1;
                            text.clone()
                        }
                    },
                };
                let parts = body.parts().iter().map(ctxlog_event::Part::readable_text);
                Some(
                    std::iter::once(text)
                        .chain(parts)
                        .collect::<Vec<_>>()
                        .join("\n"),
                )
            }
            // Only an opaque item's readable text (a reasoning summary, a thinking block's
            // text), never its encrypted parts; an item without any is not indexed.
            body @ EventBody::Opaque { .. } => {
                Some(body.readable_text().into_owned()).filter(|t| !t.is_empty())
            }
            EventBody::ToolCall { .. } | EventBody::System { .. } => None,
        }
    }

    fn write_event(&mut self, event: &Event, text: &str) -> Result<()> {
        let snippet: String = text.chars().take(self.config.context_chars).collect();
        let fits = text.chars().nth(PAGE_CHARS).is_none();
        let row = self.row_facts(event, text, fits);
        if self.config.context_gate.lends(fits) {
            self.append_context(event, &snippet)?;
        }
        let count = self.insert_pages(event, text, &row)?;
        self.remember(event, snippet, fits);
        while self.pending.len() > self.config.context_after {
            self.flush_oldest()?;
        }
        self.stats.events_indexed += 1;
        self.stats.pages_written += count;
        Ok(())
    }

    /// What every page row of `event` records besides its own text.
    /// `fits`: the text fits one page.
    fn row_facts<'e>(&mut self, event: &'e Event, text: &str, fits: bool) -> RowFacts<'e> {
        let (tool, status, supersedes) = match &event.body {
            EventBody::ToolResult { tool, status, .. } => {
                (Some(tool.as_str()), Some(status.as_str()), None)
            }
            EventBody::Note { supersedes, .. } => (None, None, *supersedes),
            _ => (None, None, None),
        };
        let author = match event.kind() {
            EventKind::User | EventKind::Assistant | EventKind::Note => author_label(text),
            _ => None,
        };
        let episode = match self.last {
            Some((ts, ep)) if within(event.ts_ms, ts, self.config.episode_gap_ms) => ep,
            _ => event.seq,
        };
        self.last = Some((event.ts_ms, episode));
        RowFacts {
            tool,
            status,
            supersedes,
            cue: has_update_cue(text) || supersedes.is_some(),
            author,
            episode,
            ctx: if self.config.context_gate.carries(fits) {
                self.context_before(event)
            } else {
                String::new()
            },
            meta: if self.config.date_metadata {
                date_words(event.ts_ms)
            } else {
                String::new()
            },
        }
    }

    /// The context field of a new event: the abridged preceding events of its episode (those
    /// the [`ContextGate`](crate::ContextGate) lets lend their snippet).
    fn context_before(&self, event: &Event) -> String {
        let skip = self.window.len().saturating_sub(self.config.context_before);
        let gate = self.config.context_gate;
        self.window
            .iter()
            .skip(skip)
            .filter(|n| self.same_episode(n, event) && gate.lends(n.fits))
            .map(|n| n.snippet.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn same_episode(&self, n: &Neighbour, event: &Event) -> bool {
        within(event.ts_ms, n.ts_ms, self.config.episode_gap_ms)
    }

    /// Writes the page rows of one event; returns how many.
    fn insert_pages(&mut self, event: &Event, text: &str, row: &RowFacts<'_>) -> Result<u64> {
        let e = |err| Error::sqlite(&self.path, err);
        let slices = pages(text);
        let count = slices.len() as i64;
        let mut insert_page = self
            .tx
            .prepare_cached(
                "INSERT INTO pages(seq, page, pages, kind, tool, status, char_start, char_end, \
                 ts_ms, supersedes, cue, author, episode, checksum) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            )
            .map_err(e)?;
        let kind = event.kind().as_str();
        let mut rows = Vec::with_capacity(slices.len());
        for slice in &slices {
            let facts = PageFacts {
                seq: event.seq,
                page: slice.page as u64,
                pages: count as u64,
                kind,
                tool: row.tool,
                status: row.status,
                char_start: slice.char_start as u64,
                char_end: slice.char_end as u64,
                ts_ms: event.ts_ms,
                text: slice.text,
            };
            insert_page
                .execute(params![
                    event.seq as i64,
                    slice.page as i64,
                    count,
                    kind,
                    row.tool,
                    row.status,
                    slice.char_start as i64,
                    slice.char_end as i64,
                    event.ts_ms,
                    row.supersedes.map(|s| s as i64),
                    row.cue,
                    row.author,
                    row.episode as i64,
                    facts.checksum(),
                ])
                .map_err(e)?;
            let id = self.tx.last_insert_rowid();
            // Context and date describe the event, so only its first page carries them: the
            // pages of a large artifact must not all match its neighbours' words. The dates a
            // page's own relative times name are that page's.
            let (ctx, mut meta) = if slice.page == 0 {
                (row.ctx.clone(), row.meta.clone())
            } else {
                (String::new(), String::new())
            };
            if self.config.date_metadata && self.config.relative_dates {
                let named = relative_dates(slice.text, event.ts_ms);
                if !named.is_empty() {
                    if !meta.is_empty() {
                        meta.push(' ');
                    }
                    meta.push_str(&named);
                }
            }
            rows.push(FtsRow {
                id,
                body: slice.text.to_owned(),
                ctx,
                meta,
                cjk: cjk_grams(slice.text),
            });
        }
        self.pending.push_back(Pending {
            seq: event.seq,
            rows,
        });
        Ok(count as u64)
    }

    /// Inserts the full-text rows of the oldest pending event.
    fn flush_oldest(&mut self) -> Result<()> {
        let Some(done) = self.pending.pop_front() else {
            return Ok(());
        };
        let e = |err| Error::sqlite(&self.path, err);
        let mut insert_fts = self
            .tx
            .prepare_cached(
                "INSERT INTO pages_fts(rowid, body, ctx, meta, cjk) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(e)?;
        for r in &done.rows {
            insert_fts
                .execute(params![r.id, r.body, r.ctx, r.meta, r.cjk])
                .map_err(e)?;
        }
        Ok(())
    }

    /// Appends the new event's snippet to the context of the earlier events it closely follows
    /// (those the [`ContextGate`](crate::ContextGate) lets carry one): in memory for an event of this transaction
    /// (not written yet), else in its stored row (written by an earlier update), the same text
    /// either way.
    fn append_context(&mut self, event: &Event, snippet: &str) -> Result<()> {
        let skip = self.window.len().saturating_sub(self.config.context_after);
        let gate = self.config.context_gate;
        let earlier: Vec<u64> = self
            .window
            .iter()
            .skip(skip)
            .filter(|n| self.same_episode(n, event) && gate.carries(n.fits))
            .map(|n| n.seq)
            .collect();
        if earlier.is_empty() {
            return Ok(());
        }
        let e = |err| Error::sqlite(&self.path, err);
        let mut append = self
            .tx
            .prepare_cached(
                "UPDATE pages_fts SET ctx = ctx || char(10) || ?1 \
                 WHERE rowid = (SELECT id FROM pages WHERE seq = ?2 AND page = 0)",
            )
            .map_err(e)?;
        for seq in earlier {
            let held = self.pending.iter_mut().find(|p| p.seq == seq);
            match held.and_then(|p| p.rows.first_mut()) {
                Some(first) => {
                    first.ctx.push('\n');
                    first.ctx.push_str(snippet);
                }
                None => {
                    append.execute(params![snippet, seq as i64]).map_err(e)?;
                }
            }
        }
        Ok(())
    }

    /// Keeps the new event in the context window.
    fn remember(&mut self, event: &Event, snippet: String, fits: bool) {
        let keep = self.config.window_len();
        if keep == 0 {
            return;
        }
        self.window.push_back(Neighbour {
            seq: event.seq,
            ts_ms: event.ts_ms,
            snippet,
            fits,
        });
        while self.window.len() > keep {
            self.window.pop_front();
        }
    }

    /// Commits; returns the stats and the new tail fingerprint.
    pub(crate) fn commit(mut self) -> Result<(UpdateStats, String)> {
        while !self.pending.is_empty() {
            self.flush_oldest()?;
        }
        let Writer {
            tx,
            path,
            ledger_id,
            config,
            mut stats,
            through,
            tail,
            ..
        } = self;
        let meta = Meta {
            ledger_id,
            indexed_through: through,
            tail,
            config: config.tag(),
        };
        meta.write(&tx, &path)?;
        tx.commit().map_err(|e| Error::sqlite(&path, e))?;
        stats.indexed_through = through;
        Ok((stats, meta.tail))
    }
}

/// True when the times `a` and `b` are at most `gap` apart (never for a negative gap). Any
/// two `i64` times can be compared: the difference cannot overflow.
fn within(a: i64, b: i64, gap: i64) -> bool {
    u64::try_from(gap).is_ok_and(|gap| a.abs_diff(b) <= gap)
}

/// The time and episode of the newest indexed page.
fn last_episode(conn: &Connection) -> rusqlite::Result<Option<(i64, u64)>> {
    conn.query_row(
        "SELECT ts_ms, episode FROM pages ORDER BY seq DESC LIMIT 1",
        [],
        |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64)),
    )
    .optional()
}

/// The last indexed events that can be context of the next one, oldest first.
fn load_window(conn: &Connection, config: &IndexConfig) -> rusqlite::Result<VecDeque<Neighbour>> {
    let k = config.window_len();
    if k == 0 {
        return Ok(VecDeque::new());
    }
    let mut stmt = conn.prepare(
        "SELECT p.seq, p.ts_ms, substr(f.body, 1, ?2), p.pages FROM pages p \
         JOIN pages_fts f ON f.rowid = p.id \
         WHERE p.page = 0 ORDER BY p.seq DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map(params![k as i64, config.context_chars as i64], |r| {
        Ok(Neighbour {
            seq: r.get::<_, i64>(0)? as u64,
            ts_ms: r.get(1)?,
            snippet: r.get(2)?,
            fits: r.get::<_, i64>(3)? <= 1,
        })
    })?;
    let mut window = VecDeque::new();
    for row in rows {
        window.push_front(row?);
    }
    Ok(window)
}

/// A fingerprint of an event's content (FNV-1a 64 of seq, timestamp and JSON body), used to
/// notice that the ledger was rewritten under the index.
pub(crate) fn fingerprint(event: &Event) -> String {
    let body = serde_json::to_string(&event.body).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = event
        .seq
        .to_le_bytes()
        .into_iter()
        .chain(event.ts_ms.to_le_bytes())
        .chain(body.into_bytes());
    for b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

//! Writing pages: one transaction that turns events into page rows, keeps the context window
//! and the episode, and records how far the index got.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use ctxlog_event::{Event, EventBody, EventKind};
use rusqlite::{Connection, params};

use crate::error::{Error, Result};
use crate::index::{IndexConfig, TOOL_NAME, UpdateStats};
use crate::source::ArtifactSource;
use crate::text::{author_label, cjk_grams, date_words, has_update_cue, pages};

/// An indexed event that may be context of the next ones.
#[derive(Clone, Debug)]
pub(crate) struct Neighbour {
    pub(crate) seq: u64,
    pub(crate) ts_ms: i64,
    pub(crate) snippet: String,
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
    pub(crate) tx: rusqlite::Transaction<'a>,
    /// Time and episode of the last indexed event.
    pub(crate) last: Option<(i64, u64)>,
    pub(crate) path: PathBuf,
    pub(crate) ledger_id: String,
    pub(crate) config: IndexConfig,
    pub(crate) window: VecDeque<Neighbour>,
    pub(crate) stats: UpdateStats,
    pub(crate) through: u64,
    pub(crate) tail: String,
    /// The seq of the previous event given to this writer.
    pub(crate) previous: Option<u64>,
}

impl Writer<'_> {
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
            EventBody::User { text } | EventBody::Assistant { text } => Some(text.clone()),
            EventBody::Note { text, .. } => Some(text.clone()),
            EventBody::ToolResult { tool, .. } if tool == TOOL_NAME => None,
            EventBody::ToolResult { text, artifact, .. } => match artifact {
                None => Some(text.clone()),
                Some(a) => match artifacts.artifact_text(a) {
                    Ok(full) => Some(full),
                    Err(_) => {
                        self.stats.artifact_failures += 1;
                        Some(text.clone())
                    }
                },
            },
            EventBody::ToolCall { .. } | EventBody::System { .. } => None,
        }
    }

    fn write_event(&mut self, event: &Event, text: &str) -> Result<()> {
        let snippet: String = text.chars().take(self.config.context_chars).collect();
        let row = self.row_facts(event, text);
        let count = self.insert_pages(event, text, &row)?;
        self.append_context(event, &snippet)?;
        self.remember(event, snippet);
        self.stats.events_indexed += 1;
        self.stats.pages_written += count;
        Ok(())
    }

    /// What every page row of `event` records besides its own text.
    fn row_facts<'e>(&mut self, event: &'e Event, text: &str) -> RowFacts<'e> {
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
            ctx: self.context_before(event),
            meta: if self.config.date_metadata {
                date_words(event.ts_ms)
            } else {
                String::new()
            },
        }
    }

    /// The context field of a new event: the abridged preceding events of its episode.
    fn context_before(&self, event: &Event) -> String {
        let skip = self.window.len().saturating_sub(self.config.context_before);
        self.window
            .iter()
            .skip(skip)
            .filter(|n| self.same_episode(n, event))
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
                 ts_ms, supersedes, cue, author, episode) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )
            .map_err(e)?;
        let mut insert_fts = self
            .tx
            .prepare_cached(
                "INSERT INTO pages_fts(rowid, body, ctx, meta, cjk) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(e)?;
        for slice in &slices {
            insert_page
                .execute(params![
                    event.seq as i64,
                    slice.page as i64,
                    count,
                    event.kind().as_str(),
                    row.tool,
                    row.status,
                    slice.char_start as i64,
                    slice.char_end as i64,
                    event.ts_ms,
                    row.supersedes.map(|s| s as i64),
                    row.cue,
                    row.author,
                    row.episode as i64,
                ])
                .map_err(e)?;
            let id = self.tx.last_insert_rowid();
            // Context and date describe the event, so only its first page carries them: the
            // pages of a large artifact must not all match its neighbours' words.
            let (ctx, meta) = if slice.page == 0 {
                (row.ctx.as_str(), row.meta.as_str())
            } else {
                ("", "")
            };
            insert_fts
                .execute(params![id, slice.text, ctx, meta, cjk_grams(slice.text)])
                .map_err(e)?;
        }
        Ok(count as u64)
    }

    /// Appends the new event's snippet to the context of the earlier events it closely follows.
    fn append_context(&self, event: &Event, snippet: &str) -> Result<()> {
        let skip = self.window.len().saturating_sub(self.config.context_after);
        let earlier: Vec<u64> = self
            .window
            .iter()
            .skip(skip)
            .filter(|n| self.same_episode(n, event))
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
            append.execute(params![snippet, seq as i64]).map_err(e)?;
        }
        Ok(())
    }

    /// Keeps the new event in the context window.
    fn remember(&mut self, event: &Event, snippet: String) {
        let keep = self.config.window_len();
        if keep == 0 {
            return;
        }
        self.window.push_back(Neighbour {
            seq: event.seq,
            ts_ms: event.ts_ms,
            snippet,
        });
        while self.window.len() > keep {
            self.window.pop_front();
        }
    }

    /// Commits; returns the stats and the new tail fingerprint.
    pub(crate) fn commit(self) -> Result<(UpdateStats, String)> {
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
        write_meta(&tx, &path, &ledger_id, through, &tail, &config)?;
        tx.commit().map_err(|e| Error::sqlite(&path, e))?;
        stats.indexed_through = through;
        Ok((stats, tail))
    }
}

/// True when the times `a` and `b` are at most `gap` apart (never for a negative gap). Any
/// two `i64` times can be compared: the difference cannot overflow.
fn within(a: i64, b: i64, gap: i64) -> bool {
    u64::try_from(gap).is_ok_and(|gap| a.abs_diff(b) <= gap)
}

pub(crate) fn write_meta(
    conn: &Connection,
    path: &Path,
    ledger_id: &str,
    through: u64,
    tail: &str,
    config: &IndexConfig,
) -> Result<()> {
    let mut stmt = conn
        .prepare_cached("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)")
        .map_err(|e| Error::sqlite(path, e))?;
    for (key, value) in [
        ("ledger_id", ledger_id.to_owned()),
        ("indexed_through", through.to_string()),
        ("tail_fingerprint", tail.to_owned()),
        ("config", config.tag()),
    ] {
        stmt.execute(params![key, value])
            .map_err(|e| Error::sqlite(path, e))?;
    }
    Ok(())
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

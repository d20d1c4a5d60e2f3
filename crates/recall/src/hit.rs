//! What a search returns (hits with provenance) and how a hit is read back from its row:
//! every page row carries a checksum of what it tells a caller, verified on each read.

use ctxlog_event::{EventKind, ToolStatus};
use serde::Serialize;

/// What every recall result says about misses.
pub const ABSENCE_NOTE: &str = "Recall is a lexical search over indexed pages: a missing hit does \
not prove the content is absent. Try other words, or page through an event with `seq`.";

/// One page found, with its provenance.
///
/// # Format
/// Serialized as `{"seq","kind","tool"?,"status"?,"page","pages","char_start","char_end",
/// "ts_ms","score","text","other_pages"?}`; `char_start`/`char_end` count Unicode scalar values of the
/// event's full text (for tool results with an artifact, the artifact's text).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    /// The event's seq.
    pub seq: u64,
    /// The event's kind.
    pub kind: EventKind,
    /// The tool, for tool results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool status, for tool results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolStatus>,
    /// 0-based page number within the event.
    pub page: u32,
    /// How many pages the event has.
    pub pages: u32,
    /// First character of the page in the event's text (inclusive).
    pub char_start: u64,
    /// End of the page (exclusive).
    pub char_end: u64,
    /// The event's commit time (ms since the Unix epoch).
    pub ts_ms: i64,
    /// Relevance (higher is better; 0 for listings). Comparable within one result only.
    pub score: f64,
    /// The page's text.
    pub text: String,
    /// Other pages of the same event that matched the query, best first (a ranked search
    /// returns one hit per event, its best page; the others are named here). Empty for
    /// listings and when no other page matched.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_pages: Vec<u32>,
}

/// The answer to a search.
///
/// # Format
/// `{"query","hits":[Hit…],"next_offset":N|null,"note"}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecallResult {
    /// The query as given.
    pub query: String,
    /// The hits, best first (or newest first for an empty query, page order for `seq`).
    pub hits: Vec<Hit>,
    /// The offset of the next hits, when there are more.
    pub next_offset: Option<usize>,
    /// Always [`ABSENCE_NOTE`]: a missing hit does not prove absence.
    pub note: String,
}

/// What a page row tells a caller, as stored: the fields its checksum covers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PageFacts<'a> {
    pub(crate) seq: u64,
    pub(crate) page: u64,
    pub(crate) pages: u64,
    pub(crate) kind: &'a str,
    pub(crate) tool: Option<&'a str>,
    pub(crate) status: Option<&'a str>,
    pub(crate) char_start: u64,
    pub(crate) char_end: u64,
    pub(crate) ts_ms: i64,
    pub(crate) text: &'a str,
}

impl PageFacts<'_> {
    /// CRC32C over every field, each length-prefixed or fixed-width so no two rows share an
    /// encoding. Stored as the row's `checksum` (a non-negative `u32` in an SQLite integer).
    pub(crate) fn checksum(&self) -> i64 {
        let mut crc = 0;
        for n in [
            self.seq,
            self.page,
            self.pages,
            self.char_start,
            self.char_end,
        ] {
            crc = crc32c::crc32c_append(crc, &n.to_le_bytes());
        }
        crc = crc32c::crc32c_append(crc, &self.ts_ms.to_le_bytes());
        for field in [Some(self.kind), self.tool, self.status, Some(self.text)] {
            let bytes = field.map_or(&[][..], str::as_bytes);
            let len = field.map_or(u64::MAX, |f| f.len() as u64);
            crc = crc32c::crc32c_append(crc, &len.to_le_bytes());
            crc = crc32c::crc32c_append(crc, bytes);
        }
        i64::from(crc)
    }
}

/// The columns every hit query selects, in [`read_hit`] order (`p` is `pages`, the text comes
/// from `pages_fts`).
pub(crate) const COLUMNS: &str = "p.seq, p.kind, p.tool, p.status, p.page, p.pages, \
p.char_start, p.char_end, p.ts_ms, pages_fts.body, p.checksum";

/// Reads the [`COLUMNS`] of a row as a hit (score 0) and the checksum stored with it.
pub(crate) fn read_hit(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredHit> {
    Ok(StoredHit {
        seq: row.get(0)?,
        kind: row.get(1)?,
        tool: row.get(2)?,
        status: row.get(3)?,
        page: row.get(4)?,
        pages: row.get(5)?,
        char_start: row.get(6)?,
        char_end: row.get(7)?,
        ts_ms: row.get(8)?,
        text: row.get(9)?,
        checksum: row.get(10)?,
    })
}

/// Reads every page row with its text and checks it against its checksum; the number of
/// rows. A page row without its full-text row (or the reverse) is damage too.
pub(crate) fn check_every_page(
    conn: &rusqlite::Connection,
    path: &std::path::Path,
) -> crate::Result<u64> {
    let sqlite = |e| crate::Error::sqlite(path, e);
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {COLUMNS} FROM pages p JOIN pages_fts ON pages_fts.rowid = p.id ORDER BY p.id"
        ))
        .map_err(sqlite)?;
    let mut rows = stmt.query([]).map_err(sqlite)?;
    let mut checked = 0u64;
    while let Some(row) = rows.next().map_err(sqlite)? {
        read_hit(row)
            .map_err(sqlite)?
            .verify()
            .map_err(|reason| crate::store::damaged(path, reason))?;
        checked += 1;
    }
    let count = |table: &str| -> crate::Result<u64> {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| {
            r.get::<_, i64>(0)
        })
        .map(|n| n as u64)
        .map_err(sqlite)
    };
    let (pages, texts) = (count("pages")?, count("pages_fts")?);
    if pages != checked || texts != checked {
        return Err(crate::store::damaged(
            path,
            format!("{pages} page rows and {texts} full-text rows, {checked} of them paired"),
        ));
    }
    Ok(checked)
}

/// A hit's row as read, before its checksum is checked.
#[derive(Debug)]
pub(crate) struct StoredHit {
    seq: i64,
    kind: String,
    tool: Option<String>,
    status: Option<String>,
    page: i64,
    pages: i64,
    char_start: i64,
    char_end: i64,
    ts_ms: i64,
    text: String,
    checksum: i64,
}

impl StoredHit {
    /// The hit, when the row still matches its checksum; otherwise a description of the row
    /// that does not (the caller reports the index as damaged).
    pub(crate) fn verify(self) -> Result<Hit, String> {
        let facts = PageFacts {
            seq: self.seq as u64,
            page: self.page as u64,
            pages: self.pages as u64,
            kind: &self.kind,
            tool: self.tool.as_deref(),
            status: self.status.as_deref(),
            char_start: self.char_start as u64,
            char_end: self.char_end as u64,
            ts_ms: self.ts_ms,
            text: &self.text,
        };
        if facts.checksum() != self.checksum {
            return Err(format!(
                "page {} of seq {} does not match its checksum",
                self.page, self.seq
            ));
        }
        Ok(Hit {
            seq: self.seq as u64,
            kind: kind_from_str(&self.kind),
            status: self.status.as_deref().and_then(status_from_str),
            tool: self.tool,
            page: self.page as u32,
            pages: self.pages as u32,
            char_start: self.char_start as u64,
            char_end: self.char_end as u64,
            ts_ms: self.ts_ms,
            score: 0.0,
            text: self.text,
            other_pages: Vec::new(),
        })
    }
}

fn kind_from_str(s: &str) -> EventKind {
    EventKind::ALL
        .into_iter()
        .find(|k| k.as_str() == s)
        .unwrap_or(EventKind::Note)
}

fn status_from_str(s: &str) -> Option<ToolStatus> {
    [ToolStatus::Ok, ToolStatus::Error, ToolStatus::Interrupted]
        .into_iter()
        .find(|t| t.as_str() == s)
}

//! Searching: literal queries, BM25 ranking with context, supersession and recency, paging.

use std::collections::HashSet;

use ctxlog_event::{EventKind, ToolStatus};
use serde::Serialize;

use crate::error::Result;
use crate::index::RecallIndex;
use crate::rank::{Candidate, Ranking, credit_episodes, lift_superseding};
use crate::text::{Terms, quote};

/// What every recall result says about misses.
pub const ABSENCE_NOTE: &str = "Recall is a lexical search over indexed pages: a missing hit does \
not prove the content is absent. Try other words, or page through an event with `seq`.";

/// Default number of hits per call.
pub const DEFAULT_LIMIT: usize = 5;
/// Largest number of hits per call.
pub const MAX_LIMIT: usize = 50;
/// Most candidates one ranked search considers: [`Ranking::pool`] is clamped to it. Bounds
/// the memory of one search.
pub const MAX_RANKED: usize = 1000;

/// Options of [`RecallIndex::search`]. `Default` is: no seq, offset 0, limit
/// [`DEFAULT_LIMIT`], every kind, every seq.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchOptions {
    /// Page through this one event instead of searching: hits are its pages in order and
    /// `offset` is a page index. The query is ignored.
    pub seq: Option<u64>,
    /// How many hits to skip (the `next_offset` of a previous result).
    pub offset: usize,
    /// How many hits to return, clamped to `1..=MAX_LIMIT`.
    pub limit: usize,
    /// Only pages of these kinds (`None`: all indexed kinds).
    pub kinds: Option<Vec<EventKind>>,
    /// Only pages of events with a seq below this one.
    pub before_seq: Option<u64>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            seq: None,
            offset: 0,
            limit: DEFAULT_LIMIT,
            kinds: None,
            before_seq: None,
        }
    }
}

/// One page found, with its provenance.
///
/// # Format
/// Serialized as `{"seq","kind","tool"?,"status"?,"page","pages","char_start","char_end",
/// "ts_ms","score","text"}`; `char_start`/`char_end` count Unicode scalar values of the
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

impl RecallIndex {
    /// The ranking knobs in use.
    pub fn ranking(&self) -> &Ranking {
        &self.ranking
    }

    /// Replaces the ranking knobs (for evaluation; the default is the product's).
    pub fn set_ranking(&mut self, ranking: Ranking) {
        self.ranking = ranking;
    }

    /// Searches the index (SPEC R3–R5).
    ///
    /// Ranked results are the best [`Ranking::pool`] (default 200) BM25 candidates, re-ranked;
    /// `offset` and `next_offset` page through them.
    ///
    /// The query is reduced to literal words (stop words dropped, stemmed by the index's
    /// Porter tokenizer) and CJK bigrams; no query text is ever interpreted as FTS5 or SQL
    /// syntax, so any string is a valid query. An empty query (or one with no letters or
    /// digits) lists pages newest first. With `opts.seq`, the pages of that event are listed
    /// in order.
    ///
    /// # Errors
    /// [`Error::Damaged`](crate::Error::Damaged) when the index file is damaged;
    /// [`Error::Sqlite`](crate::Error::Sqlite) on other SQLite failures. Never for query text.
    pub fn search(&self, query: &str, opts: &SearchOptions) -> Result<RecallResult> {
        let limit = opts.limit.clamp(1, MAX_LIMIT);
        let terms = self.terms(query);
        let (hits, more) = if let Some(seq) = opts.seq {
            self.event_pages(seq, opts.offset, limit)?
        } else if terms.is_empty() {
            self.newest(opts, limit)?
        } else {
            // Every page of a ranked result is a slice of the same re-ranked pool, so paging
            // with `next_offset` never repeats or skips a hit.
            let ranked = self.ranked(&terms, opts, 0)?;
            let more = ranked.len() > opts.offset.saturating_add(limit);
            let hits = ranked.into_iter().skip(opts.offset).take(limit).collect();
            (hits, more)
        };
        let next_offset = more.then_some(opts.offset.saturating_add(hits.len()));
        Ok(RecallResult {
            query: query.to_owned(),
            hits,
            next_offset,
            note: ABSENCE_NOTE.to_owned(),
        })
    }

    /// Up to `k` pages relevant to `input` from events older than `older_than_seq`, best
    /// first: the candidates for a projection's auto-included recall tier (SPEC R6). An input
    /// with no searchable words yields none.
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
    /// As [`RecallIndex::search`].
    pub fn candidates(&self, input: &str, older_than_seq: u64, k: usize) -> Result<Vec<Hit>> {
        let k = k.min(MAX_RANKED);
        let terms = self.terms(input);
        if terms.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let opts = SearchOptions {
            before_seq: Some(older_than_seq),
            ..SearchOptions::default()
        };
        let own = own_text_expression(&terms);
        let mut hits = Vec::with_capacity(k);
        for cand in self.ranked_candidates(&terms, &opts, k)? {
            if hits.len() == k {
                break;
            }
            if self.matches_own_text(cand.id, &own)? {
                hits.push(cand.hit);
            }
        }
        Ok(hits)
    }

    /// Whether page `id` matches `own` (an [`own_text_expression`]). FTS5 answers a MATCH with
    /// a rowid constraint by seeking each term's list to that row, so one check is cheap.
    fn matches_own_text(&self, id: i64, own: &str) -> Result<bool> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT 1 FROM pages_fts WHERE pages_fts MATCH ?1 AND rowid = ?2")
            .map_err(|e| self.err(e))?;
        stmt.exists(rusqlite::params![own, id])
            .map_err(|e| self.err(e))
    }

    fn terms(&self, query: &str) -> Terms {
        if self.ranking.stop_words {
            Terms::parse(query)
        } else {
            Terms::parse_keeping_stop_words(query)
        }
    }

    /// Ranked hits for `terms`: the best `max(Ranking::pool, want)` BM25 candidates (at most
    /// [`MAX_RANKED`]), re-ranked.
    fn ranked(&self, terms: &Terms, opts: &SearchOptions, want: usize) -> Result<Vec<Hit>> {
        Ok(self
            .ranked_candidates(terms, opts, want)?
            .into_iter()
            .map(|c| c.hit)
            .collect())
    }

    /// [`RecallIndex::ranked`] before the candidates are reduced to their hits.
    fn ranked_candidates(
        &self,
        terms: &Terms,
        opts: &SearchOptions,
        want: usize,
    ) -> Result<Vec<Candidate>> {
        let pool = self.ranking.pool.max(want).clamp(1, MAX_RANKED);
        let mut cands = self.fts(&match_expression(terms), opts, pool)?;
        if self.ranking.author_weight != 0.0 {
            self.credit_authors(&mut cands, &terms.mentioned)?;
        }
        if self.ranking.episode_weight != 0.0 {
            credit_episodes(&mut cands, self.ranking.episode_weight);
        }
        if self.ranking.supersession {
            lift_superseding(&mut cands);
        }
        cands.sort_by(|a, b| {
            b.hit
                .score
                .total_cmp(&a.hit.score)
                .then(b.hit.seq.cmp(&a.hit.seq))
                .then(a.hit.page.cmp(&b.hit.page))
        });
        Ok(cands)
    }

    /// Runs one FTS5 MATCH and returns up to `pool` candidates with BM25 scores (higher is
    /// better).
    fn fts(&self, expr: &str, opts: &SearchOptions, pool: usize) -> Result<Vec<Candidate>> {
        let r = &self.ranking;
        let sql = format!(
            "SELECT {COLUMNS}, p.supersedes, p.cue, -bm25(pages_fts, ?1, ?2, ?3, ?4) AS score, \
             p.author, p.episode, p.id \
             FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid \
             WHERE pages_fts MATCH ?5 AND p.seq < ?6 AND (?7 = '' OR instr(?7, ',' || p.kind || ',') > 0) \
             ORDER BY bm25(pages_fts, ?1, ?2, ?3, ?4) LIMIT ?8"
        );
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(
                rusqlite::params![
                    r.body_weight,
                    r.context_weight,
                    r.meta_weight,
                    r.cjk_weight,
                    expr,
                    before(opts),
                    kinds_filter(opts),
                    sql_int(pool)
                ],
                |row| {
                    let mut hit = hit_from_row(row)?;
                    hit.score = row.get(13)?;
                    Ok(Candidate {
                        hit,
                        supersedes: row.get::<_, Option<i64>>(11)?.map(|s| s as u64),
                        cue: row.get(12)?,
                        author: row.get(14)?,
                        episode: row.get::<_, i64>(15)? as u64,
                        id: row.get(16)?,
                    })
                },
            )
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// Pages newest first (empty query).
    fn newest(&self, opts: &SearchOptions, limit: usize) -> Result<(Vec<Hit>, bool)> {
        let sql = format!(
            "SELECT {COLUMNS} FROM pages p JOIN pages_fts ON pages_fts.rowid = p.id \
             WHERE p.seq < ?1 AND (?2 = '' OR instr(?2, ',' || p.kind || ',') > 0) \
             ORDER BY p.seq DESC, p.page ASC LIMIT ?3 OFFSET ?4"
        );
        self.listing(
            &sql,
            rusqlite::params![
                before(opts),
                kinds_filter(opts),
                (limit + 1) as i64,
                sql_int(opts.offset)
            ],
            limit,
        )
    }

    /// The pages of one event in order, from page `offset`.
    fn event_pages(&self, seq: u64, offset: usize, limit: usize) -> Result<(Vec<Hit>, bool)> {
        let sql = format!(
            "SELECT {COLUMNS} FROM pages p JOIN pages_fts ON pages_fts.rowid = p.id \
             WHERE p.seq = ?1 AND p.page >= ?2 ORDER BY p.page LIMIT ?3"
        );
        self.listing(
            &sql,
            rusqlite::params![sql_int(seq), sql_int(offset), (limit + 1) as i64],
            limit,
        )
    }

    fn listing(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        limit: usize,
    ) -> Result<(Vec<Hit>, bool)> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let mut hits = stmt
            .query_map(params, hit_from_row)
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        let more = hits.len() > limit;
        hits.truncate(limit);
        Ok((hits, more))
    }
}

/// The columns every hit query selects, in [`hit_from_row`] order.
const COLUMNS: &str = "p.seq, p.kind, p.tool, p.status, p.page, p.pages, p.char_start, \
p.char_end, p.ts_ms, pages_fts.body, 0.0";

fn hit_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Hit> {
    let kind: String = row.get(1)?;
    let status: Option<String> = row.get(3)?;
    Ok(Hit {
        seq: row.get::<_, i64>(0)? as u64,
        kind: kind_from_str(&kind),
        tool: row.get(2)?,
        status: status.as_deref().and_then(status_from_str),
        page: row.get::<_, i64>(4)? as u32,
        pages: row.get::<_, i64>(5)? as u32,
        char_start: row.get::<_, i64>(6)? as u64,
        char_end: row.get::<_, i64>(7)? as u64,
        ts_ms: row.get(8)?,
        text: row.get(9)?,
        score: row.get(10)?,
    })
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

fn before(opts: &SearchOptions) -> i64 {
    opts.before_seq.map_or(i64::MAX, sql_int)
}

/// An unsigned number as an SQLite integer, saturating at `i64::MAX`.
fn sql_int(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// `,kind,kind,` for the SQL `instr` filter, or empty for all kinds.
fn kinds_filter(opts: &SearchOptions) -> String {
    match &opts.kinds {
        None => String::new(),
        Some(kinds) if kinds.is_empty() => ",".to_owned(),
        Some(kinds) => {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            format!(",{},", names.join(","))
        }
    }
}

/// The FTS5 expression for `terms`: every word and CJK gram quoted, OR-ed; each multi-gram
/// CJK run also as a quoted phrase (so exact runs score higher); a one-character CJK run as a
/// quoted prefix. Only quoted strings, `OR` and that `*` appear: no user text is syntax.
pub(crate) fn match_expression(terms: &Terms) -> String {
    let mut parts: Vec<String> = terms.words.iter().map(|w| quote(w)).collect();
    let mut grams = HashSet::new();
    for run in &terms.cjk {
        if run.len() > 1 {
            parts.push(quote(&run.join(" ")));
        }
        for g in run {
            if grams.insert(g.as_str()) {
                // A lone character also matches the bigrams it starts (a prefix query on a
                // term this function quoted itself).
                let prefix = if run.len() == 1 { "*" } else { "" };
                parts.push(format!("{}{prefix}", quote(g)));
            }
        }
    }
    parts.join(" OR ")
}

/// [`match_expression`] restricted to a page's own text: the body and CJK bigram columns
/// (FTS5 column filter `{body cjk} : (…)`), so neither the neighbours' context nor the date
/// metadata can make the match.
pub(crate) fn own_text_expression(terms: &Terms) -> String {
    format!("{{body cjk}} : ({})", match_expression(terms))
}

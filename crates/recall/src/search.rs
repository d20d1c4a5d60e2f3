//! Searching: literal queries, BM25 ranking with context, supersession and recency, paging.
//! Every hit read is checked against its row's checksum before it reaches a caller.

use std::collections::HashSet;
use std::path::Path;

use ctxlog_event::EventKind;
use rusqlite::Connection;

use crate::error::Result;
use crate::hit::{ABSENCE_NOTE, COLUMNS, Hit, RecallResult, StoredHit, read_hit};
use crate::rank::{
    Candidate, QueryWords, Ranking, SemanticGate, best_page_per_event, credit_authors,
    credit_episodes, credit_kind, credit_neighbours, diversify_episodes, feedback_terms,
    first_person, fuse, keep_lexical_top, lexical_coverage, lift_superseding, question_parts, sort,
};
use crate::store::damaged;
use crate::text::{Terms, match_expression, match_phrases, quote};
use crate::vector;

/// Default number of hits per call.
pub const DEFAULT_LIMIT: usize = 5;
/// Largest number of hits per call.
pub const MAX_LIMIT: usize = 50;
/// Most candidates one ranked search considers: [`Ranking::pool`] is clamped to it. Bounds
/// the memory of one search.
pub const MAX_RANKED: usize = 1000;
/// Phrases counted a second time (up to the scoring budget left) that may turn out not to fit,
/// per search; the first count of every phrase stops at 1/16 of the budget. Bounds the cost
/// of counting: at 1M pages, counting was over half of a multi-word search's instructions
/// with 4 (docs/benchmarks.md, "Recall at scale"). After the first phrase that does not fit,
/// the other phrases over 1/16 of the budget are common; when all matches fit, none misses.
const COUNTED_COMMON: usize = 1;

/// Options of [`RecallIndex::search`](crate::RecallIndex::search). `Default` is: no seq, offset 0, limit
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

/// Searches one index file: its connection, its path (for errors) and the ranking knobs.
#[derive(Clone, Copy)]
pub(crate) struct Searcher<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) path: &'a Path,
    pub(crate) ranking: &'a Ranking,
    /// The question's side of the semantic leg, when the index has a model and its gate lets
    /// the leg rank.
    pub(crate) semantic: Option<&'a SemanticQuery>,
}

/// The question's side of the semantic leg: its embedding, and what the gate
/// ([`Ranking::semantic_gate`]) lets the leg rank, read once per search
/// ([`Searcher::semantic_gate`]).
pub(crate) struct SemanticQuery {
    pub(crate) vector: Vec<f32>,
    /// The fewest pages an event must have for its pages to be ranked by the leg.
    pub(crate) min_pages: u64,
    /// The leg's weight in the fusion.
    pub(crate) weight: f64,
}

impl Searcher<'_> {
    fn err(&self, e: rusqlite::Error) -> crate::Error {
        crate::Error::sqlite(self.path, e)
    }

    /// The hit of a row that matches its checksum; a row that does not makes the whole
    /// index count as damaged (it is a cache: `ctxlog reindex` rebuilds it from the ledger).
    fn verified(&self, stored: StoredHit) -> Result<Hit> {
        stored.verify().map_err(|reason| damaged(self.path, reason))
    }

    /// Searches the index (docs/design.md#6-recall); see
    /// [`RecallIndex::search`](crate::RecallIndex::search).
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
    /// # Errors
    /// [`Error::Damaged`](crate::Error::Damaged) when the index file is damaged (a page
    /// fails its checksum); [`Error::Sqlite`](crate::Error::Sqlite) on other SQLite failures.
    /// Never for query text.
    pub(crate) fn search(&self, query: &str, opts: &SearchOptions) -> Result<RecallResult> {
        let limit = opts.limit.clamp(1, MAX_LIMIT);
        let terms = self.terms(query);
        let (hits, more) = if let Some(seq) = opts.seq {
            self.event_pages(seq, opts.offset, limit)?
        } else if terms.is_empty() {
            self.newest(opts, limit)?
        } else {
            // Every page of a ranked result is a slice of the same re-ranked pool, so paging
            // with `next_offset` never repeats or skips a hit.
            let ranked: Vec<Hit> = self
                .ranking_of(query, &terms, opts, 0)?
                .into_iter()
                .map(|c| c.hit)
                .collect();
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

    /// Auto-include candidates; see
    /// [`RecallIndex::candidates`](crate::RecallIndex::candidates).
    pub(crate) fn candidates(
        &self,
        input: &str,
        older_than_seq: u64,
        k: usize,
    ) -> Result<Vec<Hit>> {
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
        for cand in self.ranking_of(input, &terms, &opts, k)? {
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

    /// The ranked candidates of `query` (parsed as `terms`): [`Searcher::ranked_candidates`],
    /// or with [`Ranking::multi_part`] and a question of several parts, the rankings of the
    /// whole and of each part fused by reciprocal rank; then, with
    /// [`Ranking::best_page_per_event`], one candidate per event. Search and auto-include
    /// both rank this way.
    fn ranking_of(
        &self,
        query: &str,
        terms: &Terms,
        opts: &SearchOptions,
        want: usize,
    ) -> Result<Vec<Candidate>> {
        let parts = if self.ranking.multi_part {
            question_parts(query)
        } else {
            Vec::new()
        };
        let mut cands = if parts.is_empty() {
            self.ranked_candidates(terms, opts, want)?
        } else {
            let mut rankings = vec![(1.0, self.ranked_candidates(terms, opts, want)?)];
            for part in &parts {
                let t = self.terms(part);
                if !t.is_empty() {
                    rankings.push((1.0, self.ranked_candidates(&t, opts, want)?));
                }
            }
            fuse(rankings)
        };
        if let Some(query) = self.semantic {
            cands = self.fuse_semantic(query, terms, opts, want, cands)?;
        }
        if self.ranking.best_page_per_event {
            cands = best_page_per_event(cands);
        }
        if self.ranking.episode_diversity != 0.0 {
            diversify_episodes(&mut cands, self.ranking.episode_diversity);
        }
        Ok(cands)
    }

    /// The BM25 candidates of `terms`, re-ranked: the best `max(Ranking::pool, want)` (at
    /// most [`MAX_RANKED`]).
    ///
    /// FTS5 computes BM25 for every row that matches before it can sort, so ranking all
    /// matches costs a pass over every page holding any query word (one common word made
    /// that most of the index). The pool is therefore the best BM25 matches of the *ranked*
    /// phrases ([`Searcher::scope`]): all of them when their matches add up to at most
    /// [`Ranking::max_scored`] rows, else the rarest that fit. A phrase left out is common, so
    /// its BM25 weight (inverse document frequency) is low; pages that match only such
    /// phrases fill what is left of the pool newest first, scored 0, below every ranked page.
    fn ranked_candidates(
        &self,
        terms: &Terms,
        opts: &SearchOptions,
        want: usize,
    ) -> Result<Vec<Candidate>> {
        let pool = self.ranking.pool.max(want).clamp(1, MAX_RANKED);
        let (ranked, common) = self.scope(match_phrases(terms))?;
        let mut cands = if ranked.is_empty() {
            Vec::new()
        } else {
            self.fts(&ranked.join(" OR "), opts, pool, Order::Bm25)?
        };
        if cands.len() < pool && !common.is_empty() {
            let seen: HashSet<i64> = cands.iter().map(|c| c.id).collect();
            let rest = self.fts(&common.join(" OR "), opts, pool, Order::Newest)?;
            let room = pool - cands.len();
            cands.extend(
                rest.into_iter()
                    .filter(|c| !seen.contains(&c.id))
                    .take(room),
            );
        }
        if self.ranking.feedback_terms > 0 {
            self.feed_back(&mut cands, terms, opts, pool)?;
        }
        if self.ranking.author_weight != 0.0 {
            let weight = self.ranking.author_weight;
            credit_authors(self.conn, self.path, &mut cands, &terms.mentioned, weight)?;
        }
        if self.ranking.neighbour_weight != 0.0 {
            credit_neighbours(&mut cands, self.ranking.neighbour_weight);
        }
        if self.ranking.episode_weight != 0.0 {
            credit_episodes(&mut cands, self.ranking.episode_weight);
        }
        self.credit_speaker(&mut cands, terms)?;
        if self.ranking.supersession {
            lift_superseding(&mut cands, self.ranking.supersede_by_assistant);
        }
        sort(&mut cands);
        Ok(cands)
    }

    /// The lexical ranking `lexical` fused by reciprocal rank with the semantic leg (and plain
    /// BM25 at [`Ranking::plain_weight`]), as the [`Ranking`] says: kept as it is when the leg
    /// finds nothing or the lexical ranking is strong enough
    /// ([`Ranking::semantic_below_coverage`]); its first events kept first with
    /// [`Ranking::semantic_keep_lexical`].
    fn fuse_semantic(
        &self,
        query: &SemanticQuery,
        terms: &Terms,
        opts: &SearchOptions,
        want: usize,
        lexical: Vec<Candidate>,
    ) -> Result<Vec<Candidate>> {
        let r = self.ranking;
        if r.semantic_below_coverage
            .is_some_and(|t| lexical_coverage(&lexical, &terms.words) >= t)
        {
            return Ok(lexical);
        }
        let pool = r.pool.max(want).clamp(1, MAX_RANKED);
        let nearest = self.nearest_candidates(&query.vector, opts, query.min_pages, pool)?;
        if nearest.is_empty() {
            return Ok(lexical);
        }
        let keep = r.semantic_keep_lexical;
        let top = if keep > 0 {
            lexical.clone()
        } else {
            Vec::new()
        };
        let mut rankings = vec![(r.lexical_weight, lexical), (query.weight, nearest)];
        if r.plain_weight != 0.0 {
            rankings.push((r.plain_weight, self.plain_candidates(terms, opts, pool)?));
        }
        let fused = fuse(rankings);
        Ok(if keep > 0 {
            keep_lexical_top(&top, fused, keep)
        } else {
            fused
        })
    }

    /// How [`Ranking::semantic_gate`] lets the semantic leg rank this index: the fewest pages
    /// an event must have for its pages to be ranked by the leg, and the leg's weight; `None`
    /// when the leg would leave the lexical ranking as it is (no weight beside a lexical
    /// ranking), so the question need not be embedded at all.
    #[cfg_attr(
        not(feature = "semantic"),
        allow(dead_code, reason = "without the leg only the tests read the gate")
    )]
    pub(crate) fn semantic_gate(&self) -> Result<Option<(u64, f64)>> {
        let r = self.ranking;
        let (min_pages, weight) = match r.semantic_gate {
            SemanticGate::Every => (1, r.semantic_weight),
            SemanticGate::LongEvents => (2, r.semantic_weight),
            SemanticGate::LongShare => (1, r.semantic_weight * (2.0 * self.long_share()?).min(1.0)),
        };
        Ok((weight != 0.0 || r.lexical_weight == 0.0).then_some((min_pages, weight)))
    }

    /// The share of the conversation's indexed events that are longer than one page (0 for an
    /// empty index): one pass over the events' first pages, done only when the semantic leg
    /// is gated by it ([`SemanticGate::LongShare`]).
    fn long_share(&self) -> Result<f64> {
        let (events, long): (i64, i64) = self
            .conn
            .query_row(
                "SELECT count(*), coalesce(sum(pages > 1), 0) FROM pages WHERE page = 0",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map_err(|e| self.err(e))?;
        Ok(if events == 0 {
            0.0
        } else {
            long as f64 / events as f64
        })
    }

    /// Plain BM25: the best `pool` pages for the query's ranked phrases in their own text
    /// (body and CJK columns), scored by FTS5 alone, best first.
    fn plain_candidates(
        &self,
        terms: &Terms,
        opts: &SearchOptions,
        pool: usize,
    ) -> Result<Vec<Candidate>> {
        let (ranked, _) = self.scope(match_phrases(terms))?;
        if ranked.is_empty() {
            return Ok(Vec::new());
        }
        let plain = Ranking {
            context_weight: 0.0,
            meta_weight: 0.0,
            ..self.ranking.clone()
        };
        let searcher = Searcher {
            ranking: &plain,
            ..*self
        };
        let expr = own_text(&ranked.join(" OR "));
        let mut cands = searcher.fts(&expr, opts, pool, Order::Bm25)?;
        sort(&mut cands);
        Ok(cands)
    }

    /// The semantic leg: the `pool` pages whose vectors are nearest `query` (cosine), best
    /// first, as candidates scored by their similarity, among pages of events at least
    /// `min_pages` long. Pages without a vector are not in it.
    fn nearest_candidates(
        &self,
        query: &[f32],
        opts: &SearchOptions,
        min_pages: u64,
        pool: usize,
    ) -> Result<Vec<Candidate>> {
        let nearest = vector::nearest(
            self.conn,
            self.path,
            query,
            before(opts),
            &kinds_filter(opts),
            min_pages,
            pool,
        )?;
        let sql = format!(
            "SELECT {COLUMNS}, p.supersedes, p.cue, ?2, p.author, p.episode, p.id \
             FROM pages p JOIN pages_fts ON pages_fts.rowid = p.id WHERE p.id = ?1"
        );
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let mut cands = Vec::with_capacity(nearest.len());
        for (id, similarity) in nearest {
            let row = stmt
                .query_row(rusqlite::params![id, f64::from(similarity)], candidate_row)
                .map_err(|e| self.err(e))?;
            cands.push(self.verified_candidate(row)?);
        }
        Ok(cands)
    }

    /// A candidate read by [`candidate_row`], its hit checked against the row's checksum and
    /// given the row's score.
    fn verified_candidate(
        &self,
        (stored, score, cand): (StoredHit, f64, Candidate),
    ) -> Result<Candidate> {
        let hit = self.verified(stored)?;
        Ok(Candidate {
            hit: Hit { score, ..hit },
            ..cand
        })
    }

    /// Who the question asks about: the assistant's pages when it asks what the assistant
    /// said ([`Ranking::second_person`]), else the user's when it is in the first person
    /// ([`Ranking::first_person_weight`]; with [`Ranking::first_person_own_text`], the whole
    /// credit only to the user's pages whose own text holds a query word ([`QueryWords`]:
    /// read from the candidate's text, no query to SQLite), the others
    /// [`Ranking::first_person_context_share`] of it).
    fn credit_speaker(&self, cands: &mut [Candidate], terms: &Terms) -> Result<()> {
        let r = self.ranking;
        if let (Some(w), true) = (r.second_person, terms.addressee) {
            if w != 0.0 {
                credit_kind(cands, EventKind::Assistant, w);
            }
        } else if r.first_person_weight != 0.0 && first_person(&terms.mentioned) {
            if r.first_person_own_text {
                let wanted = QueryWords::of(terms);
                for c in cands.iter_mut().filter(|c| c.hit.kind == EventKind::User) {
                    let share = if wanted.in_text(&c.hit.text) {
                        1.0
                    } else {
                        r.first_person_context_share
                    };
                    c.hit.score *= 1.0 + r.first_person_weight * share;
                }
            } else {
                credit_kind(cands, EventKind::User, r.first_person_weight);
            }
        }
        Ok(())
    }

    /// Pseudo-relevance feedback: the [`feedback_terms`] of the first pass are searched (within
    /// the scoring budget), and each page they match gains [`Ranking::feedback_weight`] × its
    /// BM25 score for them; pages found only that way join the pool.
    fn feed_back(
        &self,
        cands: &mut Vec<Candidate>,
        terms: &Terms,
        opts: &SearchOptions,
        pool: usize,
    ) -> Result<()> {
        sort(cands);
        let extra = feedback_terms(cands, &terms.words, self.ranking.feedback_terms);
        let (ranked, _) = self.scope(extra.iter().map(|w| quote(w)).collect())?;
        if ranked.is_empty() {
            return Ok(());
        }
        let weight = self.ranking.feedback_weight;
        let at: std::collections::HashMap<i64, usize> =
            cands.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
        for mut c in self.fts(&ranked.join(" OR "), opts, pool, Order::Bm25)? {
            match at.get(&c.id) {
                Some(&i) => cands[i].hit.score += weight * c.hit.score,
                None => {
                    c.hit.score *= weight;
                    cands.push(c);
                }
            }
        }
        Ok(())
    }

    /// Splits `phrases` into those BM25 ranks (rarest first, their matches adding up to at
    /// most [`Ranking::max_scored`] rows) and the common rest. Counting is bounded too: every
    /// phrase is counted up to 1/16 of the budget; those with more are counted again up to
    /// the budget left until [`COUNTED_COMMON`] of them did not fit; the rest are common. So
    /// when all matches together fit the budget, every phrase is ranked.
    fn scope(&self, phrases: Vec<String>) -> Result<(Vec<String>, Vec<String>)> {
        let budget = self.ranking.max_scored;
        let rare = budget / 16;
        let mut counted = Vec::with_capacity(phrases.len());
        let mut over = Vec::new();
        for phrase in phrases {
            let n = self.count_matches(&phrase, rare + 1)?;
            if n <= rare {
                counted.push((n, phrase));
            } else {
                over.push(phrase);
            }
        }
        counted.sort();
        let (mut ranked, mut common) = (Vec::new(), Vec::new());
        let mut left = budget;
        for (n, phrase) in counted {
            if n <= left {
                left -= n;
                ranked.push(phrase);
            } else {
                common.push(phrase);
            }
        }
        // A count that fits costs what it takes from the budget; one that does not costs the
        // budget left, and at most COUNTED_COMMON of those are tried.
        let mut misses = 0;
        for phrase in over {
            let n = if misses < COUNTED_COMMON && left > rare {
                self.count_matches(&phrase, left + 1)?
            } else {
                usize::MAX
            };
            if n <= left {
                left -= n;
                ranked.push(phrase);
            } else {
                misses += 1;
                common.push(phrase);
            }
        }
        Ok((ranked, common))
    }

    /// How many pages match `phrase`, counting at most `cap` (FTS5 walks the phrase's list
    /// of rows without scoring them).
    fn count_matches(&self, phrase: &str, cap: usize) -> Result<usize> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM pages_fts WHERE pages_fts MATCH ?1 LIMIT ?2)",
            )
            .map_err(|e| self.err(e))?;
        let n: i64 = stmt
            .query_row(rusqlite::params![phrase, sql_int(cap)], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Runs one FTS5 MATCH and returns up to `pool` candidates in `order`: with BM25 scores
    /// (higher is better), or newest first with score 0.
    fn fts(
        &self,
        expr: &str,
        opts: &SearchOptions,
        pool: usize,
        order: Order,
    ) -> Result<Vec<Candidate>> {
        let rows = self.fts_rows(expr, opts, pool, order)?;
        rows.into_iter()
            .map(|row| self.verified_candidate(row))
            .collect()
    }

    /// The rows of [`Searcher::fts`], unverified: each stored hit, its score, and the
    /// candidate's ranking facts (with a placeholder hit).
    fn fts_rows(
        &self,
        expr: &str,
        opts: &SearchOptions,
        pool: usize,
        order: Order,
    ) -> Result<Vec<(StoredHit, f64, Candidate)>> {
        let r = &self.ranking;
        // Newest first: FTS5 walks the matches in descending rowid order and stops after
        // `pool` rows pass the filters, scoring none. Ids grow with seq (pages are written in
        // seq order and only ever deleted all together), so the seq bound is a rowid bound
        // FTS5 applies itself.
        let (score, newest, order_by, outer_order) = match order {
            Order::Bm25 => (
                "-bm25(pages_fts, ?1, ?2, ?3, ?4)",
                "",
                "bm25(pages_fts, ?1, ?2, ?3, ?4)",
                "top.score DESC, top.id DESC",
            ),
            Order::Newest => (
                "0.0",
                "AND pages_fts.rowid < coalesce((SELECT id FROM pages WHERE seq >= ?6 \
                 ORDER BY seq, page LIMIT 1), 9223372036854775807)",
                "pages_fts.rowid DESC",
                "top.id DESC",
            ),
        };
        // The inner query picks the `pool` best rows by id and score alone; only those rows'
        // text is read (SQLite's sorter holds every selected column of every matching row, and
        // reading a page's text costs a content lookup of up to 2,048 characters).
        let sql = format!(
            "SELECT {COLUMNS}, p.supersedes, p.cue, top.score, p.author, p.episode, p.id \
             FROM (SELECT pages_fts.rowid AS id, {score} AS score \
                   FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid \
                   WHERE pages_fts MATCH ?5 {newest} AND p.seq < ?6 \
                   AND (?7 = '' OR instr(?7, ',' || p.kind || ',') > 0) \
                   ORDER BY {order_by} LIMIT ?8) AS top \
             JOIN pages p ON p.id = top.id JOIN pages_fts ON pages_fts.rowid = top.id \
             ORDER BY {outer_order}"
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
                candidate_row,
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
            .query_map(params, read_hit)
            .map_err(|e| self.err(e))?
            .map(|row| self.verified(row.map_err(|e| self.err(e))?))
            .collect::<Result<Vec<_>>>()?;
        let more = hits.len() > limit;
        hits.truncate(limit);
        Ok((hits, more))
    }
}

/// Reads a row of [`COLUMNS`] followed by `supersedes, cue, score, author, episode, id`: the
/// stored hit (unverified), its score, and the candidate's ranking facts (with a placeholder
/// hit).
fn candidate_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(StoredHit, f64, Candidate)> {
    let cand = Candidate {
        hit: PLACEHOLDER,
        supersedes: row.get::<_, Option<i64>>(11)?.map(|s| s as u64),
        cue: row.get(12)?,
        author: row.get(14)?,
        episode: row.get::<_, i64>(15)? as u64,
        id: row.get(16)?,
    };
    Ok((read_hit(row)?, row.get(13)?, cand))
}

/// How [`Searcher::fts`] orders and scores its matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// Best BM25 first (every match is scored).
    Bm25,
    /// Newest first, unscored (score 0).
    Newest,
}

/// A hit that stands for "not read yet" while a row's other columns are read.
const PLACEHOLDER: Hit = Hit {
    seq: 0,
    kind: EventKind::Note,
    tool: None,
    status: None,
    page: 0,
    pages: 0,
    char_start: 0,
    char_end: 0,
    ts_ms: 0,
    score: 0.0,
    text: String::new(),
    other_pages: Vec::new(),
};

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

/// [`match_expression`](crate::text::match_expression) restricted to a page's own text: the body and CJK bigram columns
/// (FTS5 column filter `{body cjk} : (…)`), so neither the neighbours' context nor the date
/// metadata can make the match.
pub(crate) fn own_text_expression(terms: &Terms) -> String {
    own_text(&match_expression(terms))
}

/// An FTS5 expression restricted to a page's own text: `{body cjk} : (expr)`.
fn own_text(expr: &str) -> String {
    format!("{{body cjk}} : ({expr})")
}

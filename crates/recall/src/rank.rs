//! Ranking beyond FTS5's BM25: the author field, episode evidence and supersession. Each is
//! a knob of [`Ranking`] so the evaluation can measure it.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::Connection;

use crate::error::{Error, Result};
use crate::hit::Hit;
use crate::text::{FIRST_PERSON, Terms, is_stop_word, words};
use ctxlog_event::EventKind;

/// Ranking knobs. `Default` is what the product uses; the fields exist so the evaluation can
/// measure each idea (docs/recall.md has the ablation).
#[derive(Clone, Debug, PartialEq)]
pub struct Ranking {
    /// BM25 weight of the page's own text. Default 1.0.
    pub body_weight: f64,
    /// BM25 weight of the neighbours' text. Default 0.4.
    pub context_weight: f64,
    /// BM25 weight of the date metadata. Default 1.0.
    pub meta_weight: f64,
    /// BM25 weight of the CJK bigram field. Default 1.0.
    pub cjk_weight: f64,
    /// Lift a newer hit above an older one on the same subject when it supersedes it
    /// (explicit note `supersedes`, or update language). Default true.
    pub supersession: bool,
    /// Let an assistant's page supersede. Long replies use update words ("now", "update",
    /// "instead") in passing, so lifting them reordered whole results by recency: off, only
    /// the user's, notes' and tools' pages supersede (docs/recall.md, "Lever log"). Default
    /// false.
    pub supersede_by_assistant: bool,
    /// Weight of the author field: a page whose speaker label (`"Caroline: …"`) is named in
    /// the query gains `author_weight × idf(label)`, the BM25 score of a one-occurrence term
    /// with the label's inverse page frequency `ln(1 + (N − n + ½)/(n + ½))`. First-person
    /// statements never name their speaker, so without this field a question about a person
    /// cannot prefer what that person said. Default 2.0 (a title-like field). 0 disables.
    pub author_weight: f64,
    /// Weight of episode evidence: each page gains `episode_weight × best score ×
    /// (episode mass / best episode mass)`, where an episode's mass is the sum of its three best
    /// page scores (episodes are runs of events without a pause longer than
    /// [`IndexConfig::episode_gap_ms`](crate::IndexConfig::episode_gap_ms)). Default 0.2.
    pub episode_weight: f64,
    /// Drop stop words from queries (docs/design.md#r3-literal-queries). Default true.
    pub stop_words: bool,
    /// How many candidates are ranked before paging. Default 200.
    pub pool: usize,
    /// Most matching rows one search lets FTS5 score with BM25: phrases are ranked rarest
    /// first while their matches add up to at most this; rarer-than-that phrases fill the
    /// pool newest first (docs/recall.md, "Scale"). Bounds a search's cost whatever the index
    /// size. Default 4096.
    pub max_scored: usize,
    /// Return one hit per event, its best page, naming the event's other matching pages in
    /// [`Hit::other_pages`], so one long event cannot fill a result with its pages.
    /// Default true.
    pub best_page_per_event: bool,
    /// A question in the first person ("my sprint", "I said") is the user asking about what
    /// they said: the user's own pages gain this share of their score (`score × (1 + w)`).
    /// Default 1.0 (doubled).
    pub first_person_weight: f64,
    /// Give a first-person question's user pages the whole credit only when their own text
    /// (not their neighbours' context or the date field) holds a query word: a short user
    /// turn matched only through the reply beside it sits beside the subject, it is not what
    /// the user said about it. Such a page gains [`Ranking::first_person_context_share`] of
    /// the credit. Default true (measured: docs/recall.md, "Lever log").
    pub first_person_own_text: bool,
    /// With [`Ranking::first_person_own_text`], the share of the first-person credit a user
    /// page still gains when only its neighbours' context or its date field matched
    /// (`score × (1 + w × share)`): an instruction turn is often found only through the
    /// reply that acknowledges it. Default 0.5 (×1.5 where own words get ×2).
    pub first_person_context_share: f64,
    /// A question about what the assistant said ("what did you suggest", "your advice":
    /// [`Terms::addressee`](crate::text::Terms::addressee)): with `Some(w)` the assistant's
    /// pages gain this share of their score (`score × (1 + w)`) and the user's pages are not
    /// credited as for a first-person question (`Some(0.0)`: neither is credited). Default
    /// `None`: such a question is ranked like any other (measured: doubling the assistant's
    /// pages lowered BEAM chats 1–10, docs/recall.md, "Lever log").
    pub second_person: Option<f64>,
    /// Neighbouring turns as evidence: each page gains this share of the best score among
    /// the pool's pages of the events just before and after its own (seq ± 1), so a turn
    /// whose neighbour answers the question well rises with it. Default 0 (off).
    pub neighbour_weight: f64,
    /// Spread a result over episodes: after one hit per event is chosen, a hit whose episode
    /// already has `m` better hits has its score divided by `1 + w × m`, so a question whose
    /// evidence lies in several sessions ("what activities does she do?") is not answered by
    /// one session's turns alone. Default 0 (off).
    pub episode_diversity: f64,
    /// Pseudo-relevance feedback (RM3-style): this many terms taken from the best
    /// [`FEEDBACK_PAGES`] pages of a first pass are searched too, their BM25 score added at
    /// [`Ranking::feedback_weight`]. Default 0 (off).
    pub feedback_terms: usize,
    /// Weight of the feedback terms' BM25 score. Default 0.3.
    pub feedback_weight: f64,
    /// A question of several parts (sentences, or clauses joined by "and") is ranked part by
    /// part and the rankings fused by reciprocal rank (with the whole question's). Default
    /// false.
    pub multi_part: bool,
    /// The semantic leg's weight in the reciprocal rank fusion of the lexical ranking with
    /// the pages nearest the question's embedding (only when the index has an embedding
    /// model and page vectors: feature `semantic`). Default 1.0.
    pub semantic_weight: f64,
    /// The lexical ranking's weight in that fusion. Default 1.0; 0 ranks by the semantic leg
    /// alone (for evaluation).
    pub lexical_weight: f64,
    /// Weight in that fusion of plain BM25: the pages' own text (body and CJK columns) scored
    /// by FTS5 alone, without the context and date fields or any credit. Default 0 (not
    /// fused).
    pub plain_weight: f64,
    /// The lexical ranking's first this-many events stay first, in its order; the fusion
    /// fills the places after them. Default 0 (the fusion orders everything).
    pub semantic_keep_lexical: usize,
    /// Fuse only when the lexical ranking is weak: when the best of its first
    /// [`WEAK_TOP_PAGES`] pages holds less than this share of the question's content words in
    /// its own text ([`lexical_coverage`]). Default `None` (always fuse).
    pub semantic_below_coverage: Option<f64>,
    /// How the shape of what is indexed (no knowledge of any data set) gates the semantic
    /// leg. Default [`SemanticGate::LongShare`]: measured on BEAM chats 1–10 and both LoCoMo
    /// halves, it kept the leg's gain on long replies and left short small-talk turns exactly
    /// as the lexical ranking has them (docs/recall.md, "The semantic leg").
    pub semantic_gate: SemanticGate,
}

/// How the shape of the indexed events gates the semantic leg ([`Ranking::semantic_gate`]).
/// Long replies dilute lexical scores (their words are spread over several KB); short
/// small-talk turns make embeddings noisy (a one-line turn is near many questions).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum SemanticGate {
    /// The leg ranks every page at [`Ranking::semantic_weight`].
    Every,
    /// The leg ranks only the pages of events longer than one page; short turns keep their
    /// lexical rank alone.
    LongEvents,
    /// The leg's weight scales with the conversation's share `s` of indexed events longer than
    /// one page: `semantic_weight × min(1, 2s)`, so a conversation of short turns only
    /// (`s` = 0) is ranked lexically and one where half or more of the events are long
    /// replies at the full weight.
    #[default]
    LongShare,
}

/// Pages of the lexical ranking [`Ranking::semantic_below_coverage`] looks at.
pub const WEAK_TOP_PAGES: usize = 3;

/// Pages a feedback pass reads its terms from.
pub const FEEDBACK_PAGES: usize = 3;

impl Default for Ranking {
    fn default() -> Self {
        Ranking {
            body_weight: 1.0,
            context_weight: 0.4,
            meta_weight: 1.0,
            cjk_weight: 1.0,
            supersession: true,
            supersede_by_assistant: false,
            author_weight: 2.0,
            episode_weight: 0.2,
            stop_words: true,
            pool: 200,
            max_scored: 4096,
            best_page_per_event: true,
            first_person_weight: 1.0,
            first_person_own_text: true,
            first_person_context_share: 0.5,
            second_person: None,
            neighbour_weight: 0.0,
            episode_diversity: 0.0,
            feedback_terms: 0,
            feedback_weight: 0.3,
            multi_part: false,
            semantic_weight: 1.0,
            lexical_weight: 1.0,
            plain_weight: 0.0,
            semantic_keep_lexical: 0,
            semantic_below_coverage: None,
            semantic_gate: SemanticGate::LongShare,
        }
    }
}

/// A candidate page with what ranking needs.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub(crate) hit: Hit,
    pub(crate) supersedes: Option<u64>,
    pub(crate) cue: bool,
    pub(crate) author: Option<String>,
    pub(crate) episode: u64,
    /// The page's row id (in `pages` and `pages_fts`).
    pub(crate) id: i64,
}

/// Adds the author-field score (`weight × idf(label)`) to candidates whose speaker label
/// the query names; the label's page frequency is read from the index at `conn`.
pub(crate) fn credit_authors(
    conn: &Connection,
    path: &Path,
    cands: &mut [Candidate],
    mentioned: &[String],
    weight: f64,
) -> Result<()> {
    let named = |label: &str| label.split(' ').all(|w| mentioned.iter().any(|m| m == w));
    let count = |sql: &str, arg: Option<&str>| count(conn, path, sql, arg);
    let mut idf: HashMap<String, f64> = HashMap::new();
    let mut total: Option<f64> = None;
    for c in cands.iter_mut() {
        let Some(label) = c.author.as_deref().filter(|l| named(l)) else {
            continue;
        };
        // Pages are only ever deleted all together, so ids run 1..=count: max(id) is the
        // page count without a scan.
        let n = match total {
            Some(n) => n,
            None => *total.insert(count("SELECT coalesce(max(id), 0) FROM pages", None)?),
        };
        let w = match idf.get(label) {
            Some(w) => *w,
            None => {
                let k = count("SELECT count(*) FROM pages WHERE author = ?1", Some(label))?;
                let w = (1.0 + (n - k + 0.5) / (k + 0.5)).ln();
                idf.insert(label.to_owned(), w);
                w
            }
        };
        c.hit.score += weight * w;
    }
    Ok(())
}

fn count(conn: &Connection, path: &Path, sql: &str, arg: Option<&str>) -> Result<f64> {
    let e = |err| Error::sqlite(path, err);
    let mut stmt = conn.prepare_cached(sql).map_err(e)?;
    let n: i64 = match arg {
        Some(a) => stmt.query_row([a], |r| r.get(0)),
        None => stmt.query_row([], |r| r.get(0)),
    }
    .map_err(e)?;
    Ok(n as f64)
}

/// Adds episode evidence: `weight × best score × mass / best mass`, where an episode's mass is
/// the sum of its three best candidate scores.
pub(crate) fn credit_episodes(cands: &mut [Candidate], weight: f64) {
    let mut scores: HashMap<u64, Vec<f64>> = HashMap::new();
    for c in cands.iter() {
        scores.entry(c.episode).or_default().push(c.hit.score);
    }
    let mass: HashMap<u64, f64> = scores
        .into_iter()
        .map(|(ep, mut v)| {
            v.sort_by(|a, b| b.total_cmp(a));
            (ep, v.iter().take(3).sum())
        })
        .collect();
    let best_mass = mass.values().copied().fold(0.0_f64, f64::max);
    let best = cands.iter().map(|c| c.hit.score).fold(0.0_f64, f64::max);
    if best_mass <= 0.0 {
        return;
    }
    for c in cands.iter_mut() {
        let m = mass.get(&c.episode).copied().unwrap_or(0.0);
        c.hit.score += weight * best * m / best_mass;
    }
}

/// Adds `weight ×` the best score among the candidates of the events just before and after
/// each candidate's own (seq ± 1). Linear in the pool.
pub(crate) fn credit_neighbours(cands: &mut [Candidate], weight: f64) {
    let mut best: HashMap<u64, f64> = HashMap::new();
    for c in cands.iter() {
        let b = best.entry(c.hit.seq).or_insert(f64::MIN);
        *b = b.max(c.hit.score);
    }
    for c in cands.iter_mut() {
        let near = [c.hit.seq.checked_sub(1), c.hit.seq.checked_add(1)]
            .into_iter()
            .flatten()
            .filter_map(|s| best.get(&s).copied())
            .fold(0.0_f64, f64::max);
        c.hit.score += weight * near;
    }
}

/// A word's first five characters: how same-subject tests compare words (a cheap stand-in
/// for stemming).
fn prefix(word: &str) -> String {
    word.chars().take(5).collect()
}

/// The [`prefix`] of each of `words`.
fn prefixes(words: &[String]) -> HashSet<String> {
    words.iter().map(|w| prefix(w)).collect()
}

/// A query's words as a page's own text is checked for them: its content words by
/// [`prefixes`], and its unspaced-script grams as they are.
pub(crate) struct QueryWords<'a> {
    prefixes: HashSet<String>,
    grams: Vec<&'a str>,
}

impl<'a> QueryWords<'a> {
    pub(crate) fn of(terms: &'a Terms) -> Self {
        QueryWords {
            prefixes: prefixes(&terms.words),
            grams: terms.cjk.iter().flatten().map(String::as_str).collect(),
        }
    }

    /// Whether `text` holds one of the words: a content word with the same first five
    /// characters, or one of the grams. A query with neither (nothing to look for) counts as
    /// held, so the check never takes a credit away for lack of words.
    pub(crate) fn in_text(&self, text: &str) -> bool {
        if self.prefixes.is_empty() && self.grams.is_empty() {
            return true;
        }
        self.grams.iter().any(|g| text.contains(g))
            || words(text).any(|w| self.prefixes.contains(&prefix(&w)))
    }
}

/// Content words of a text, for same-subject tests, cut to their first five characters (a
/// crude stemmer: "restart", "restarts" and "restarting" are one word here).
fn content_words(text: &str) -> HashSet<String> {
    words(text)
        .filter(|w| !is_stop_word(w))
        .take(2048)
        .map(|w| prefix(&w))
        .collect()
}

/// Minimum word overlap (Jaccard) for two hits to be "on the same subject".
const SAME_SUBJECT: f64 = 0.2;

/// Puts a newer hit just above an older hit it supersedes: explicitly (a note's
/// `supersedes`), or by update language ("changed to", "now", "instead" …) when both are on
/// the same subject (their content words overlap by at least [`SAME_SUBJECT`]). The newer
/// hit's score becomes the older's plus a hair, so nothing else moves.
pub(crate) fn lift_superseding(cands: &mut [Candidate], by_assistant: bool) {
    let n = cands.len().min(64);
    // Content words are computed only for candidates a comparison needs (most pools have
    // few or no update cues).
    let mut words: Vec<Option<HashSet<String>>> = vec![None; n];
    for newer in 0..n {
        let assistant = cands[newer].hit.kind == EventKind::Assistant;
        if !cands[newer].cue || (assistant && !by_assistant) {
            continue;
        }
        for older in 0..n {
            let (a, b) = (&cands[newer], &cands[older]);
            if b.hit.seq >= a.hit.seq || a.hit.score > b.hit.score {
                continue;
            }
            let explicit = a.supersedes == Some(b.hit.seq);
            let same_subject = explicit || {
                for i in [newer, older] {
                    if words[i].is_none() {
                        words[i] = Some(content_words(&cands[i].hit.text));
                    }
                }
                let (w_new, w_old) = (&words[newer], &words[older]);
                w_new
                    .as_ref()
                    .zip(w_old.as_ref())
                    .is_some_and(|(x, y)| jaccard(x, y) >= SAME_SUBJECT)
            };
            if same_subject {
                let lifted = b.hit.score + b.hit.score.abs() * 1e-6 + 1e-9;
                cands[newer].hit.score = lifted;
            }
        }
    }
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    let inter = a.intersection(b).count() as f64;
    let union = (a.len() + b.len()) as f64 - inter;
    if union == 0.0 { 0.0 } else { inter / union }
}

/// True when the query's words (`mentioned`, stop words included) are in the first person.
pub(crate) fn first_person(mentioned: &[String]) -> bool {
    mentioned.iter().any(|w| FIRST_PERSON.contains(&w.as_str()))
}

/// Multiplies the scores of the pages of `kind` by `1 + weight`.
pub(crate) fn credit_kind(cands: &mut [Candidate], kind: EventKind, weight: f64) {
    for c in cands.iter_mut().filter(|c| c.hit.kind == kind) {
        c.hit.score *= 1.0 + weight;
    }
}

/// Sorts best first: score, then newer, then earlier page.
pub(crate) fn sort(cands: &mut [Candidate]) {
    cands.sort_by(|a, b| {
        b.hit
            .score
            .total_cmp(&a.hit.score)
            .then(b.hit.seq.cmp(&a.hit.seq))
            .then(a.hit.page.cmp(&b.hit.page))
    });
}

/// Keeps the best page of each event (`cands` sorted best first), naming the event's other
/// pages in its [`Hit::other_pages`].
pub(crate) fn best_page_per_event(cands: Vec<Candidate>) -> Vec<Candidate> {
    let mut at: HashMap<u64, usize> = HashMap::new();
    let mut out: Vec<Candidate> = Vec::with_capacity(cands.len());
    for c in cands {
        match at.get(&c.hit.seq) {
            Some(&i) => out[i].hit.other_pages.push(c.hit.page),
            None => {
                at.insert(c.hit.seq, out.len());
                out.push(c);
            }
        }
    }
    out
}

/// Divides each candidate's score (`cands` sorted best first) by `1 + weight × m`, where `m`
/// is how many better candidates share its episode, and sorts again. Linear in the pool.
pub(crate) fn diversify_episodes(cands: &mut [Candidate], weight: f64) {
    let mut seen: HashMap<u64, u32> = HashMap::new();
    for c in cands.iter_mut() {
        let m = seen.entry(c.episode).or_insert(0);
        c.hit.score /= 1.0 + weight * f64::from(*m);
        *m += 1;
    }
    sort(cands);
}

/// Reciprocal rank fusion of several weighted rankings (each best first): a page's score is
/// `Σ weight / (60 + rank)`; the result is sorted best first.
pub(crate) fn fuse(rankings: Vec<(f64, Vec<Candidate>)>) -> Vec<Candidate> {
    let mut by_id: HashMap<i64, Candidate> = HashMap::new();
    for (weight, ranking) in rankings {
        for (rank, mut c) in ranking.into_iter().enumerate() {
            let s = weight / (60.0 + rank as f64 + 1.0);
            by_id
                .entry(c.id)
                .and_modify(|e| e.hit.score += s)
                .or_insert_with(|| {
                    c.hit.score = s;
                    c
                });
        }
    }
    let mut out: Vec<Candidate> = by_id.into_values().collect();
    sort(&mut out);
    out
}

/// The parts of a multi-part question: its sentences, and clauses joined by " and ", each
/// with at least two content words; empty when there are fewer than two such parts.
pub(crate) fn question_parts(query: &str) -> Vec<String> {
    let parts: Vec<String> = query
        .split(['?', ';', '\n'])
        .flat_map(|s| s.split(" and "))
        .map(str::trim)
        .filter(|p| words(p).filter(|w| !is_stop_word(w)).count() >= 2)
        .map(str::to_owned)
        .collect();
    if parts.len() >= 2 { parts } else { Vec::new() }
}

/// The feedback terms of a first pass (`pool` sorted best first): of the content words of its
/// best [`FEEDBACK_PAGES`] pages that the query lacks (three letters or more, not numbers),
/// the 20 most frequent there, ordered by frequency × `ln(pool size / pages of the pool
/// containing the word)`; at most `n`, each seen at least twice.
pub(crate) fn feedback_terms(pool: &[Candidate], query: &[String], n: usize) -> Vec<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for c in pool.iter().take(FEEDBACK_PAGES) {
        for w in words(&c.hit.text).take(2048) {
            let content = w.chars().count() >= 3 && w.chars().any(char::is_alphabetic);
            if !content || is_stop_word(&w) || query.contains(&w) {
                continue;
            }
            match counts.iter_mut().find(|(x, _)| *x == w) {
                Some((_, k)) => *k += 1,
                None => counts.push((w, 1)),
            }
        }
    }
    counts.retain(|(_, k)| *k >= 2);
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts.truncate(20);
    let texts: Vec<String> = pool.iter().map(|c| c.hit.text.to_lowercase()).collect();
    let mut scored: Vec<(f64, String)> = counts
        .into_iter()
        .map(|(w, k)| {
            let df = texts
                .iter()
                .filter(|t| t.contains(w.as_str()))
                .count()
                .max(1);
            (k as f64 * (texts.len() as f64 / df as f64).ln(), w)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored
        .into_iter()
        .filter(|(s, _)| *s > 0.0)
        .take(n)
        .map(|(_, w)| w)
        .collect()
}

/// The best share, among the first [`WEAK_TOP_PAGES`] candidates (sorted best first), of the
/// query's content words (`words`, compared by their first five characters as in
/// same-subject tests) that a candidate's own text holds; 0 without candidates or words.
pub(crate) fn lexical_coverage(cands: &[Candidate], words: &[String]) -> f64 {
    let wanted = prefixes(words);
    if wanted.is_empty() {
        return 0.0;
    }
    cands
        .iter()
        .take(WEAK_TOP_PAGES)
        .map(|c| {
            let have = content_words(&c.hit.text);
            wanted.iter().filter(|w| have.contains(*w)).count() as f64 / wanted.len() as f64
        })
        .fold(0.0, f64::max)
}

/// `fused` with the pages of the first `k` events of `lexical` (both sorted best first) put
/// first, in `lexical`'s order: their scores are lifted above the best of the rest, keeping
/// their order, so a later sort keeps them there.
pub(crate) fn keep_lexical_top(
    lexical: &[Candidate],
    fused: Vec<Candidate>,
    k: usize,
) -> Vec<Candidate> {
    let mut seqs: Vec<u64> = Vec::with_capacity(k);
    for c in lexical {
        if seqs.len() == k {
            break;
        }
        if !seqs.contains(&c.hit.seq) {
            seqs.push(c.hit.seq);
        }
    }
    let mut kept: Vec<Candidate> = lexical
        .iter()
        .filter(|c| seqs.contains(&c.hit.seq))
        .cloned()
        .collect();
    let rest: Vec<Candidate> = fused
        .into_iter()
        .filter(|c| !seqs.contains(&c.hit.seq))
        .collect();
    let top = rest.first().map_or(0.0, |c| c.hit.score);
    let n = kept.len();
    for (i, c) in kept.iter_mut().enumerate() {
        c.hit.score = top + (n - i) as f64 * 1e-6;
    }
    kept.extend(rest);
    kept
}

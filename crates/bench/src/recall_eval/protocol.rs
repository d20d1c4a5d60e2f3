//! The recall protocol: what a user gets from `ctxlog recall CONV QUESTION --limit 10`,
//! measured on several sets beside plain FTS5 BM25 over the same pages, per category, with a
//! 95 % paired bootstrap interval of the difference (docs/recall.md, "Measured results").
//!
//! A question's recall@10 is the share of its evidence events among the seqs of the 10 hits
//! the product's recall call returns (an event counted once, however many of its pages hit).

use std::collections::HashMap;
use std::path::Path;

use ctxlog_ledger::event::Event;
use ctxlog_recall::text::pages;
use ctxlog_recall::{IndexConfig, NoArtifacts, Ranking, RecallIndex, SearchOptions};

use super::Scratch;
use super::generator::Rng;
use super::metrics::{baseline_query, f3, table};

/// Hits per question: the product's `--limit 10`.
pub const LIMIT: usize = 10;
/// Bootstrap resamples.
pub const RESAMPLES: usize = 1000;
/// The bootstrap's fixed seed.
pub const BOOTSTRAP_SEED: u64 = 0xb007_5742_2026;

/// One question: its conversation (index into [`EvalSet::convs`]), text, evidence seqs and
/// category (index into [`EvalSet::categories`]).
#[derive(Clone, Debug)]
pub struct EvalQuestion {
    pub conv: usize,
    pub text: String,
    pub evidence: Vec<u64>,
    pub category: usize,
}

/// A set of conversations and questions with evidence.
#[derive(Clone, Debug)]
pub struct EvalSet {
    pub name: String,
    pub categories: Vec<String>,
    pub convs: Vec<Vec<Event>>,
    pub questions: Vec<EvalQuestion>,
}

/// A ranking configuration under evaluation.
#[derive(Clone, Debug)]
pub struct Variant {
    pub name: String,
    pub config: IndexConfig,
    pub ranking: Ranking,
    /// With the semantic leg (the model given by `--embeddings`).
    pub semantic: bool,
}

impl Variant {
    /// The product's defaults.
    pub fn product() -> Variant {
        Variant {
            name: "ctxlog (default)".into(),
            config: IndexConfig::default(),
            ranking: Ranking::default(),
            semantic: false,
        }
    }

    /// The product's defaults with the semantic leg on.
    pub fn semantic() -> Variant {
        Variant {
            name: "ctxlog + semantic leg".into(),
            semantic: true,
            ..Variant::product()
        }
    }
}

/// The model of `--embeddings`, loaded once (`None`: the option was not given).
#[cfg(feature = "semantic")]
static EMBEDDER: std::sync::OnceLock<std::sync::Arc<ctxlog_recall::embed::Embedder>> =
    std::sync::OnceLock::new();

/// Loads the model of `--embeddings DIR` for the semantic variants.
#[cfg(feature = "semantic")]
pub fn use_embeddings(dir: &Path) -> anyhow::Result<()> {
    let model = ctxlog_recall::embed::Embedder::load(dir)?;
    let _ = EMBEDDER.set(std::sync::Arc::new(model));
    Ok(())
}

/// Without the feature, `--embeddings` is refused with the command that has it.
#[cfg(not(feature = "semantic"))]
pub fn use_embeddings(_dir: &Path) -> anyhow::Result<()> {
    anyhow::bail!(
        "--embeddings needs the semantic leg: cargo run --release -p ctxlog-bench \
         --features semantic --bin recall_eval -- --embeddings DIR"
    )
}

/// Where a semantic variant keeps the index of conversation `c` of `set` between variants and
/// runs (`target/recall-eval-vectors`), so each page is embedded once: every semantic variant
/// uses the default index configuration, and only the ranking differs.
fn vector_cache(set: &EvalSet, c: usize) -> anyhow::Result<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/recall-eval-vectors");
    std::fs::create_dir_all(&dir)?;
    let slug: String = set
        .name
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '-' })
        .collect();
    Ok(dir.join(format!("{slug}-{c}.sqlite")))
}

/// The index of conversation `c` of `set` for variant `v`: a fresh scratch file, or for a
/// semantic variant the cached file, caught up with the events and their page vectors.
fn eval_index(
    set: &EvalSet,
    c: usize,
    events: &[Event],
    v: &Variant,
    scratch: &Scratch,
) -> anyhow::Result<RecallIndex> {
    let ledger_id = format!("eval-{c}");
    if !v.semantic {
        let mut index = RecallIndex::open_with(scratch.path(), &ledger_id, v.config.clone())?;
        index.set_ranking(v.ranking.clone());
        index.update(events, &NoArtifacts)?;
        return Ok(index);
    }
    #[cfg(feature = "semantic")]
    {
        let model = EMBEDDER
            .get()
            .ok_or_else(|| anyhow::anyhow!("a semantic variant needs --embeddings DIR"))?;
        let mut index =
            RecallIndex::open_with(vector_cache(set, c)?, &ledger_id, v.config.clone())?;
        index.set_ranking(v.ranking.clone());
        index.set_embedder(Some(model.clone()));
        let source = ctxlog_recall::MemorySource {
            ledger_id,
            events: events.to_vec(),
            artifacts: HashMap::new(),
        };
        let started = std::time::Instant::now();
        let stats = index.catch_up(&source)?;
        if stats.embedded > 0 {
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "{} conversation {c}: embedded {} pages in {secs:.1} s ({:.1} pages/s)",
                set.name,
                stats.embedded,
                stats.embedded as f64 / secs
            );
        }
        Ok(index)
    }
    #[cfg(not(feature = "semantic"))]
    {
        let _ = vector_cache(set, c)?;
        anyhow::bail!("a semantic variant needs the semantic feature")
    }
}

/// Share of `evidence` among the first [`LIMIT`] distinct seqs of `hits` (seqs best first).
pub fn recall_at_limit(hits: &[u64], evidence: &[u64]) -> f64 {
    let mut seqs: Vec<u64> = Vec::with_capacity(LIMIT);
    for s in hits {
        if !seqs.contains(s) {
            seqs.push(*s);
        }
    }
    let found = evidence.iter().filter(|e| seqs.contains(e)).count();
    found as f64 / evidence.len().max(1) as f64
}

/// Per-question recall@10 of ctxlog under `v`: each conversation indexed from its events,
/// each question asked with limit 10.
pub fn ctxlog_scores(set: &EvalSet, v: &Variant, scratch: &Scratch) -> anyhow::Result<Vec<f64>> {
    Ok(ctxlog_scores_timed(set, v, scratch)?.0)
}

/// [`ctxlog_scores`] and the time of each search call (the question's embedding and the
/// vector scan included for a semantic variant; indexing and embedding pages excluded).
pub fn ctxlog_scores_timed(
    set: &EvalSet,
    v: &Variant,
    scratch: &Scratch,
) -> anyhow::Result<(Vec<f64>, Vec<std::time::Duration>)> {
    let (hits, times) = ctxlog_hits(set, v, scratch)?;
    Ok((scores_of(set, &hits), times))
}

/// Each question's recall@10 from its hits' seqs.
fn scores_of(set: &EvalSet, hits: &[Vec<u64>]) -> Vec<f64> {
    set.questions
        .iter()
        .zip(hits)
        .map(|(q, seqs)| recall_at_limit(seqs, &q.evidence))
        .collect()
}

/// The seqs of the hits of each question of `set` under `v` (limit 10), and the time of each
/// search call.
fn ctxlog_hits(
    set: &EvalSet,
    v: &Variant,
    scratch: &Scratch,
) -> anyhow::Result<(Vec<Vec<u64>>, Vec<std::time::Duration>)> {
    let mut times = Vec::with_capacity(set.questions.len());
    let mut by_conv: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, q) in set.questions.iter().enumerate() {
        by_conv.entry(q.conv).or_default().push(i);
    }
    let mut hits = vec![Vec::new(); set.questions.len()];
    for (c, events) in set.convs.iter().enumerate() {
        let Some(qs) = by_conv.get(&c) else { continue };
        let index = eval_index(set, c, events, v, scratch)?;
        let opts = SearchOptions {
            limit: LIMIT,
            ..SearchOptions::default()
        };
        for &i in qs {
            let q = &set.questions[i];
            let started = std::time::Instant::now();
            let r = index.search(&q.text, &opts)?;
            times.push(started.elapsed());
            hits[i] = r.hits.iter().map(|h| h.seq).collect();
        }
    }
    Ok((hits, times))
}

/// The p50 and p99 of `times` in milliseconds.
fn percentiles(times: &mut [std::time::Duration]) -> (f64, f64) {
    times.sort();
    let at = |q: usize| {
        times
            .get((times.len() * q / 100).min(times.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    (at(50), at(99))
}

/// Per-question recall@10 of plain FTS5 BM25 over the same pages (2,048 characters, 128
/// overlapping; `porter unicode61`): the question's distinct `\w+` terms quoted and OR-ed,
/// `ORDER BY bm25 LIMIT 10`, the seqs of those pages.
pub fn bm25_scores(set: &EvalSet) -> anyhow::Result<Vec<f64>> {
    Ok(scores_of(set, &bm25_hits(set)?))
}

/// The seqs of plain BM25's top 10 pages for each question of `set` ([`bm25_scores`]).
fn bm25_hits(set: &EvalSet) -> anyhow::Result<Vec<Vec<u64>>> {
    let mut hits = vec![Vec::new(); set.questions.len()];
    for (c, events) in set.convs.iter().enumerate() {
        let db = rusqlite::Connection::open_in_memory()?;
        db.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(body, seq UNINDEXED, tokenize='porter unicode61')",
        )?;
        {
            let mut ins = db.prepare("INSERT INTO t(body, seq) VALUES (?1, ?2)")?;
            for e in events {
                let Some(text) = e.body.text() else { continue };
                for p in pages(text) {
                    ins.execute(rusqlite::params![p.text, e.seq as i64])?;
                }
            }
        }
        let mut stmt =
            db.prepare("SELECT seq FROM t WHERE t MATCH ?1 ORDER BY bm25(t) LIMIT ?2")?;
        for (i, q) in set
            .questions
            .iter()
            .enumerate()
            .filter(|(_, q)| q.conv == c)
        {
            let expr = baseline_query(&q.text);
            if !expr.is_empty() {
                hits[i] = stmt
                    .query_map(rusqlite::params![expr, LIMIT as i64], |r| {
                        r.get::<_, i64>(0)
                    })?
                    .map(|s| s.map(|s| s as u64))
                    .collect::<Result<_, _>>()?;
            }
        }
    }
    Ok(hits)
}

/// The questions of `set` where the product's recall@10 is below plain BM25's: each with its
/// category, evidence, and the seqs of both hit lists (an evidence seq marked `*`), so a loss
/// can be read question by question (`recall_eval --losses`).
pub fn losses(set: &EvalSet, scratch: &Scratch) -> anyhow::Result<String> {
    let base = bm25_hits(set)?;
    let (ours, _) = ctxlog_hits(set, &Variant::product(), scratch)?;
    let mut out = format!("\n#### Questions of {} below plain BM25\n\n", set.name);
    for (i, q) in set.questions.iter().enumerate() {
        let (b, o) = (
            recall_at_limit(&base[i], &q.evidence),
            recall_at_limit(&ours[i], &q.evidence),
        );
        if o >= b {
            continue;
        }
        let marked = |seqs: &[u64]| {
            seqs.iter()
                .map(|s| {
                    let kind = set.convs[q.conv]
                        .iter()
                        .find(|e| e.seq == *s)
                        .map_or("?", |e| e.kind().as_str());
                    let star = if q.evidence.contains(s) { "*" } else { "" };
                    format!("{s}{star}({kind})")
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        out.push_str(&format!(
            "- [{}] conv {} {:?}: evidence {:?}; BM25 {b:.2}: {}; ctxlog {o:.2}: {}\n",
            set.categories[q.category],
            q.conv,
            q.text,
            q.evidence,
            marked(&base[i]),
            marked(&ours[i]),
        ));
    }
    Ok(out)
}

/// The 95 % paired bootstrap interval of `mean(a − b)` over the questions `idx`
/// ([`RESAMPLES`] resamples, seed [`BOOTSTRAP_SEED`]).
pub fn interval(a: &[f64], b: &[f64], idx: &[usize]) -> (f64, f64) {
    if idx.is_empty() {
        return (0.0, 0.0);
    }
    let diffs: Vec<f64> = idx.iter().map(|&i| a[i] - b[i]).collect();
    let mut rng = Rng(BOOTSTRAP_SEED);
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let s: f64 = (0..diffs.len())
                .map(|_| diffs[rng.below(diffs.len())])
                .sum();
            s / diffs.len() as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    (
        means[RESAMPLES * 25 / 1000],
        means[RESAMPLES * 975 / 1000 - 1],
    )
}

/// Mean of `s` over `idx`.
pub fn mean(s: &[f64], idx: &[usize]) -> f64 {
    if idx.is_empty() {
        return 0.0;
    }
    idx.iter().map(|&i| s[i]).sum::<f64>() / idx.len() as f64
}

/// The questions of each row of a set's table: all, then each category.
pub fn rows(set: &EvalSet) -> Vec<(String, Vec<usize>)> {
    let mut out = vec![("all".to_owned(), (0..set.questions.len()).collect())];
    for (c, name) in set.categories.iter().enumerate() {
        let idx: Vec<usize> = (0..set.questions.len())
            .filter(|&i| set.questions[i].category == c)
            .collect();
        if !idx.is_empty() {
            out.push((name.clone(), idx));
        }
    }
    out
}

/// A signed difference with its interval: `+0.012 [−0.004, +0.029]`.
pub fn delta(d: f64, (lo, hi): (f64, f64)) -> String {
    format!("{d:+.3} [{lo:+.3}, {hi:+.3}]")
}

/// Where a paired interval of (ctxlog − BM25) lies: wholly under 0, wholly over it, or
/// across it.
fn verdict(ci: (f64, f64)) -> &'static str {
    if ci.1 < 0.0 {
        "below"
    } else if ci.0 > 0.0 {
        "above"
    } else {
        "within"
    }
}

/// The table of one set: each category's questions, BM25, ctxlog, and ctxlog − BM25 with its
/// interval; a category whose interval lies wholly below 0 is marked "below".
pub fn set_table(set: &EvalSet, ours: &[f64], base: &[f64]) -> String {
    let body: Vec<Vec<String>> = rows(set)
        .into_iter()
        .map(|(name, idx)| {
            let d = mean(ours, &idx) - mean(base, &idx);
            let ci = interval(ours, base, &idx);
            let verdict = verdict(ci);
            vec![
                name,
                idx.len().to_string(),
                f3(mean(base, &idx)),
                f3(mean(ours, &idx)),
                delta(d, ci),
                verdict.to_owned(),
            ]
        })
        .collect();
    table(
        &[
            "category",
            "questions",
            "BM25 R@10",
            "ctxlog R@10",
            "ctxlog − BM25 [95 % CI]",
            "vs BM25",
        ],
        &body,
    )
}

/// The categories (with at least `min` questions) where `ours` is below `base` beyond the
/// interval.
pub fn categories_below(set: &EvalSet, ours: &[f64], base: &[f64], min: usize) -> Vec<String> {
    rows(set)
        .into_iter()
        .filter(|(_, idx)| idx.len() >= min && interval(ours, base, idx).1 < 0.0)
        .map(|(name, _)| name)
        .collect()
}

/// The sets found: LoCoMo halves and BEAM when their files are present (a line saying which
/// were skipped otherwise), then the two generators.
pub fn sets(locomo: &Path, beam: &Path) -> anyhow::Result<(Vec<EvalSet>, String)> {
    let mut out = Vec::new();
    let mut notes = String::new();
    if locomo.exists() {
        let (tune, held) = super::locomo::sets(locomo)?;
        out.extend([tune, held]);
    } else {
        notes.push_str(&format!(
            "LoCoMo skipped: `{}` not found.\n",
            locomo.display()
        ));
    }
    if beam.join("1").exists() {
        out.push(super::beam::set(
            beam,
            "BEAM chats 1–10 (tuned on)",
            1..=10,
        )?);
    } else {
        notes.push_str(&format!("BEAM skipped: `{}` not found.\n", beam.display()));
    }
    out.push(super::project::set());
    out.push(super::generator::eval_set(20));
    Ok((out, notes))
}

/// Scores of the product and of BM25 on every set, and the section printing them.
pub fn baseline_section(
    sets: &[EvalSet],
    scratch: &Scratch,
) -> anyhow::Result<(Vec<Vec<f64>>, String)> {
    let mut out = format!(
        "\n### Recall@10 through the product's call, beside plain BM25\n\n\
         Each conversation indexed with the product's defaults; each question asked as \
         `ctxlog recall CONV QUESTION --limit {LIMIT}` asks it; recall@10 = the share of its \
         evidence events among the seqs of those {LIMIT} hits. BM25: plain FTS5 (`porter \
         unicode61`) over the same 2,048-character pages, the question's distinct `\\w+` terms \
         quoted and OR-ed, top {LIMIT} pages. Interval: 95 % paired bootstrap of ctxlog − BM25 \
         over the questions ({RESAMPLES} resamples, seed {BOOTSTRAP_SEED:#x}); \"below\" = the \
         whole interval under 0.\n"
    );
    let mut ours_all = Vec::new();
    for set in sets {
        let base = bm25_scores(set)?;
        let ours = ctxlog_scores(set, &Variant::product(), scratch)?;
        let events: usize = set.convs.iter().map(Vec::len).sum();
        out.push_str(&format!(
            "\n**{}**: {} conversations, {events} events, {} questions.\n\n",
            set.name,
            set.convs.len(),
            set.questions.len()
        ));
        out.push_str(&set_table(set, &ours, &base));
        ours_all.push(ours);
    }
    Ok((ours_all, out))
}

/// The semantic leg's tables: on every set, the product's defaults with the leg on beside
/// plain BM25 (interval of the difference), and its difference from the defaults without it.
pub fn semantic_section(
    sets: &[EvalSet],
    product: &[Vec<f64>],
    scratch: &Scratch,
) -> anyhow::Result<String> {
    let mut out = String::from(
        "\n### Recall@10 with the semantic leg (`--embeddings`), beside plain BM25\n\n\
         The product's defaults with the semantic leg on (all-MiniLM-L6-v2; the pages nearest \
         the question fused with the lexical ranking by reciprocal rank), asked and scored as \
         above. \"Δ default\": the difference from the product's defaults without the leg \
         [95 % paired interval].\n",
    );
    for (set, product) in sets.iter().zip(product) {
        let base = bm25_scores(set)?;
        let (_, mut lexical_times) = ctxlog_scores_timed(set, &Variant::product(), scratch)?;
        let (ours, mut times) = ctxlog_scores_timed(set, &Variant::semantic(), scratch)?;
        let (p50, p99) = percentiles(&mut times);
        let (l50, l99) = percentiles(&mut lexical_times);
        out.push_str(&format!(
            "\n**{}**: search p50 {p50:.2} ms, p99 {p99:.2} ms with the leg (question embedded, \
             vectors scanned), {l50:.2} / {l99:.2} ms without, same run.\n\n",
            set.name
        ));
        let body: Vec<Vec<String>> = rows(set)
            .into_iter()
            .map(|(name, idx)| {
                let d = mean(&ours, &idx) - mean(&base, &idx);
                let ci = interval(&ours, &base, &idx);
                let verdict = verdict(ci);
                let dd = mean(&ours, &idx) - mean(product, &idx);
                vec![
                    name,
                    idx.len().to_string(),
                    f3(mean(&base, &idx)),
                    f3(mean(product, &idx)),
                    f3(mean(&ours, &idx)),
                    delta(d, ci),
                    verdict.to_owned(),
                    delta(dd, interval(&ours, product, &idx)),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "category",
                "questions",
                "BM25 R@10",
                "ctxlog R@10",
                "ctxlog + semantic R@10",
                "+ semantic − BM25 [95 % CI]",
                "vs BM25",
                "Δ default [95 % CI]",
            ],
            &body,
        ));
    }
    Ok(out)
}

/// The lever log: each variant's recall@10 on every set beside the product's, with the paired
/// interval of the difference, and the categories (20+ questions) it lowers beyond theirs.
pub fn lever_section(
    sets: &[EvalSet],
    product: &[Vec<f64>],
    variants: &[Variant],
    scratch: &Scratch,
) -> anyhow::Result<String> {
    let mut header = vec!["variant".to_owned()];
    header.extend(sets.iter().map(|s| s.name.clone()));
    header.push("categories lowered beyond the interval".to_owned());
    let mut body = Vec::new();
    for v in variants {
        let mut row = vec![v.name.clone()];
        let mut lowered = Vec::new();
        for (set, base) in sets.iter().zip(product) {
            let ours = ctxlog_scores(set, v, scratch)?;
            let all: Vec<usize> = (0..ours.len()).collect();
            let d = mean(&ours, &all) - mean(base, &all);
            row.push(format!(
                "{} ({})",
                f3(mean(&ours, &all)),
                delta(d, interval(&ours, base, &all))
            ));
            for c in categories_below(set, &ours, base, 20) {
                lowered.push(format!("{}: {c}", short(&set.name)));
            }
        }
        row.push(if lowered.is_empty() {
            "none".into()
        } else {
            lowered.join("; ")
        });
        body.push(row);
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    Ok(format!(
        "\n### Lever log: each variant against the product's defaults\n\n\
         R@10 (variant − default [95 % CI]) on each set.\n\n{}",
        table(&header, &body)
    ))
}

/// A set's name up to its first parenthesis.
fn short(name: &str) -> &str {
    name.split(" (").next().unwrap_or(name)
}

//! LoCoMo evidence recall@k: each conversation imported as events through the recall crate's public
//! API (one event per dialogue turn, "Speaker: text", the session date as the event time), compared
//! with the plain FTS5 BM25 baseline of the data set's README (`../shared/data/README.md` beside
//! the repository) reimplemented in the same run.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use ctxlog_ledger::event::{Event, EventBody};
use ctxlog_recall::{IndexConfig, NoArtifacts, Ranking, RecallIndex, SearchOptions};
use serde_json::Value;

use super::Scratch;
use super::metrics::{KS, Latency, RecallTable, f3, table};

const CATEGORIES: [&str; 6] = [
    "all",
    "multi-hop (1)",
    "temporal (2)",
    "open-domain (3)",
    "single-hop (4)",
    "adversarial (5)",
];

/// One turn as the app would store it.
struct Turn {
    dia_id: String,
    speaker: String,
    text: String,
    caption: Option<String>,
    ts_ms: i64,
    first_speaker: bool,
}

struct Question {
    text: String,
    evidence: Vec<String>,
    category: usize,
}

struct Conversation {
    id: String,
    turns: Vec<Turn>,
    questions: Vec<Question>,
}

/// Loads the file; returns the conversations and how many questions had no usable evidence.
fn load(path: &Path) -> anyhow::Result<(Vec<Conversation>, usize, usize)> {
    let raw =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let data: Value = serde_json::from_str(&raw).context("parsing LoCoMo JSON")?;
    let samples = data
        .as_array()
        .context("LoCoMo: top level is not an array")?;
    let (mut out, mut skipped, mut unresolved) = (Vec::new(), 0, 0);
    for s in samples {
        let conv = &s["conversation"];
        let speaker_a = conv["speaker_a"].as_str().unwrap_or_default().to_owned();
        let mut turns = Vec::new();
        let mut n = 1;
        while let Some(session) = conv.get(format!("session_{n}")).and_then(Value::as_array) {
            let date = conv[format!("session_{n}_date_time")]
                .as_str()
                .unwrap_or_default();
            let base = ctxlog::transfer::parse_session_date(date)
                .with_context(|| format!("session date {date:?}"))?;
            for (j, t) in session.iter().enumerate() {
                let speaker = t["speaker"].as_str().unwrap_or_default().to_owned();
                turns.push(Turn {
                    dia_id: t["dia_id"].as_str().unwrap_or_default().to_owned(),
                    first_speaker: speaker == speaker_a,
                    speaker,
                    text: t["text"].as_str().unwrap_or_default().to_owned(),
                    caption: t
                        .get("blip_caption")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    ts_ms: base + j as i64 * 30_000,
                });
            }
            n += 1;
        }
        let ids: std::collections::HashSet<&str> =
            turns.iter().map(|t| t.dia_id.as_str()).collect();
        let mut questions = Vec::new();
        for q in s["qa"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let mut evidence = Vec::new();
            for e in q["evidence"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                for id in dia_ids(e.as_str().unwrap_or_default()) {
                    if ids.contains(id.as_str()) {
                        if !evidence.contains(&id) {
                            evidence.push(id);
                        }
                    } else {
                        unresolved += 1;
                    }
                }
            }
            if evidence.is_empty() {
                skipped += 1;
                continue;
            }
            questions.push(Question {
                text: q["question"].as_str().unwrap_or_default().to_owned(),
                evidence,
                category: q["category"].as_u64().unwrap_or(0).clamp(1, 5) as usize,
            });
        }
        out.push(Conversation {
            id: s["sample_id"].as_str().unwrap_or_default().to_owned(),
            turns,
            questions,
        });
    }
    Ok((out, skipped, unresolved))
}

/// Every `D<digits>:<digits>` in `s`.
fn dia_ids(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'D' {
            let mut j = i + 1;
            let d1 = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j > d1 && j < b.len() && b[j] == b':' {
                let d2 = j + 1;
                let mut k = d2;
                while k < b.len() && b[k].is_ascii_digit() {
                    k += 1;
                }
                if k > d2 {
                    out.push(s[i..k].to_owned());
                    i = k;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

/// The conversation as ledger events: one per turn, the first speaker as `user`, the other as
/// `assistant`; text "Speaker: text" plus the image caption when there is one.
fn events(conv: &Conversation) -> Vec<Event> {
    conv.turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut text = format!("{}: {}", t.speaker, t.text);
            if let Some(c) = &t.caption {
                text.push_str(&format!(" [image: {c}]"));
            }
            let body = if t.first_speaker {
                EventBody::User { text }
            } else {
                EventBody::Assistant { text }
            };
            Event {
                seq: i as u64 + 1,
                ts_ms: t.ts_ms,
                body,
            }
        })
        .collect()
}

/// A ranking method under evaluation.
struct Variant {
    name: &'static str,
    config: IndexConfig,
    ranking: Ranking,
}

fn variants(ablation: bool) -> Vec<Variant> {
    let d = IndexConfig::default;
    let r = Ranking::default;
    let plain = IndexConfig::plain();
    let no_date = IndexConfig {
        date_metadata: false,
        ..d()
    };
    let bare = Ranking {
        author_weight: 0.0,
        episode_weight: 0.0,
        ..r()
    };
    let mut v = vec![Variant {
        name: "ctxlog (default)",
        config: d(),
        ranking: r(),
    }];
    if !ablation {
        return v;
    }
    v.extend([
        Variant { name: "A. literal terms, plain index (stop words kept; no context, dates, author, episodes)", config: plain.clone(), ranking: Ranking { stop_words: false, ..bare.clone() } },
        Variant { name: "B. A + stop words dropped", config: plain.clone(), ranking: bare.clone() },
        Variant { name: "C. B + context field: 2 events before, 1 after (weight 0.4)", config: no_date.clone(), ranking: bare.clone() },
        Variant { name: "D. C + date metadata field", config: d(), ranking: bare.clone() },
        Variant { name: "E. D + author field (weight 2)", config: d(), ranking: Ranking { episode_weight: 0.0, ..r() } },
        Variant { name: "F. E + episode evidence (weight 0.2) = default", config: d(), ranking: r() },
        Variant { name: "default − context field", config: IndexConfig { context_before: 0, context_after: 0, ..d() }, ranking: r() },
        Variant { name: "default − date metadata", config: no_date, ranking: r() },
        Variant { name: "default − stop-word removal", config: d(), ranking: Ranking { stop_words: false, ..r() } },
        Variant { name: "default − author field", config: d(), ranking: Ranking { author_weight: 0.0, ..r() } },
        Variant { name: "default − episode evidence", config: d(), ranking: Ranking { episode_weight: 0.0, ..r() } },
        Variant { name: "default − supersession lift", config: d(), ranking: Ranking { supersession: false, ..r() } },
        Variant { name: "author weight 1", config: d(), ranking: Ranking { author_weight: 1.0, ..r() } },
        Variant { name: "author weight 3", config: d(), ranking: Ranking { author_weight: 3.0, ..r() } },
        Variant { name: "episode weight 0.1", config: d(), ranking: Ranking { episode_weight: 0.1, ..r() } },
        Variant { name: "episode weight 0.4", config: d(), ranking: Ranking { episode_weight: 0.4, ..r() } },
        Variant { name: "context 1 before, 1 after", config: IndexConfig { context_before: 1, ..d() }, ranking: r() },
        Variant { name: "context 2 before, 2 after", config: IndexConfig { context_after: 2, ..d() }, ranking: r() },
        Variant { name: "context weight 0.25", config: d(), ranking: Ranking { context_weight: 0.25, ..r() } },
        Variant { name: "context weight 0.6", config: d(), ranking: Ranking { context_weight: 0.6, ..r() } },
    ]);
    v
}

/// Evaluates one variant; returns its table and query latencies.
fn evaluate(
    convs: &[Conversation],
    v: &Variant,
    scratch: &Scratch,
) -> anyhow::Result<(RecallTable, Latency, Vec<RecallTable>)> {
    let mut t = RecallTable::default();
    let mut lat = Latency::default();
    let mut per_conv = Vec::new();
    let mut indexing = std::time::Duration::ZERO;
    for conv in convs {
        let mut c = RecallTable::default();
        let events = events(conv);
        let started = Instant::now();
        let mut index = RecallIndex::open_with(scratch.path(), &conv.id, v.config.clone())?;
        index.set_ranking(v.ranking.clone());
        index.update(&events, &NoArtifacts)?;
        indexing += started.elapsed();
        let seq_of: HashMap<&str, u64> = conv
            .turns
            .iter()
            .enumerate()
            .map(|(i, t)| (t.dia_id.as_str(), i as u64 + 1))
            .collect();
        for q in &conv.questions {
            let started = Instant::now();
            let r = index.search(
                &q.text,
                &SearchOptions {
                    limit: 50,
                    ..SearchOptions::default()
                },
            )?;
            lat.push(started.elapsed());
            let mut ranked: Vec<u64> = Vec::new();
            for h in &r.hits {
                if !ranked.contains(&h.seq) {
                    ranked.push(h.seq);
                }
            }
            let evidence: Vec<u64> = q
                .evidence
                .iter()
                .filter_map(|e| seq_of.get(e.as_str()).copied())
                .collect();
            t.add(q.category, &ranked, &evidence);
            c.add(q.category, &ranked, &evidence);
        }
        per_conv.push(c);
    }
    lat.indexing = indexing;
    Ok((t, lat, per_conv))
}

/// The README's baseline: one FTS5 row per turn "speaker: text", porter unicode61, the
/// question's distinct `\w+` terms quoted and OR-ed, ORDER BY bm25 LIMIT 50.
fn baseline(convs: &[Conversation]) -> anyhow::Result<(RecallTable, Latency, Vec<RecallTable>)> {
    let mut t = RecallTable::default();
    let mut lat = Latency::default();
    let mut per_conv = Vec::new();
    for conv in convs {
        let mut c = RecallTable::default();
        let db = rusqlite::Connection::open_in_memory()?;
        db.execute_batch("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61')")?;
        {
            let mut ins = db.prepare("INSERT INTO t(rowid, body) VALUES (?1, ?2)")?;
            for (i, turn) in conv.turns.iter().enumerate() {
                ins.execute(rusqlite::params![
                    i as i64 + 1,
                    format!("{}: {}", turn.speaker, turn.text)
                ])?;
            }
        }
        let mut stmt =
            db.prepare("SELECT rowid FROM t WHERE t MATCH ?1 ORDER BY bm25(t) LIMIT 50")?;
        for q in &conv.questions {
            let expr = super::metrics::baseline_query(&q.text);
            let started = Instant::now();
            let ranked: Vec<usize> = if expr.is_empty() {
                Vec::new()
            } else {
                stmt.query_map([&expr], |r| r.get::<_, i64>(0))?
                    .collect::<Result<Vec<_>, _>>()?
                    .into_iter()
                    .map(|r| r as usize - 1)
                    .collect()
            };
            lat.push(started.elapsed());
            let ids: Vec<&str> = ranked
                .iter()
                .map(|i| conv.turns[*i].dia_id.as_str())
                .collect();
            let evidence: Vec<&str> = q.evidence.iter().map(String::as_str).collect();
            t.add(q.category, &ids, &evidence);
            c.add(q.category, &ids, &evidence);
        }
        per_conv.push(c);
    }
    Ok((t, lat, per_conv))
}

fn full_table(t: &RecallTable) -> String {
    let mut header = vec!["category", "questions"];
    let labels: Vec<String> = KS.iter().map(|k| format!("R@{k}")).collect();
    header.extend(labels.iter().map(String::as_str));
    let rows: Vec<Vec<String>> = (0..6)
        .map(|c| {
            let mut r = vec![CATEGORIES[c].to_owned(), t.count(c).to_string()];
            r.extend((0..KS.len()).map(|i| f3(t.get(c, i))));
            r
        })
        .collect();
    table(&header, &rows)
}

/// Runs the LoCoMo evaluation and returns its Markdown section.
pub fn run(path: &Path, scratch: &Scratch, ablation: bool) -> anyhow::Result<String> {
    let (convs, skipped, unresolved) = load(path)?;
    let turns: usize = convs.iter().map(|c| c.turns.len()).sum();
    let scored: usize = convs.iter().map(|c| c.questions.len()).sum();
    let (base, base_lat, base_conv) = baseline(&convs)?;
    let mut out = format!(
        "\n### LoCoMo evidence recall\n\n{} conversations, {turns} turns, {scored} questions scored ({skipped} skipped: no evidence id resolves; {unresolved} evidence ids did not resolve). Hit unit: the dialogue turn (one event per turn; hits deduplicated by seq). Recall@k = fraction of a question's evidence turns in the top k, averaged.\n\n",
        convs.len()
    );
    out.push_str("Plain FTS5 BM25 baseline (README recipe, same run):\n\n");
    out.push_str(&full_table(&base));
    let mut results = Vec::new();
    for v in variants(ablation) {
        let (t, lat, per_conv) = evaluate(&convs, &v, scratch)?;
        results.push((v.name, t, lat, per_conv));
    }
    if let Some((_, t, lat, per_conv)) = results.first() {
        out.push_str("\nctxlog recall (default configuration):\n\n");
        out.push_str(&full_table(t));
        out.push_str(&format!(
            "\nQuery latency over {} LoCoMo questions (limit 50, file-backed index, warm cache): ctxlog p50 {:.2} ms, p99 {:.2} ms; baseline (in-memory FTS5, one query) p50 {:.2} ms, p99 {:.2} ms.\n",
            lat.len(),
            lat.percentile_ms(50.0),
            lat.percentile_ms(99.0),
            base_lat.percentile_ms(50.0),
            base_lat.percentile_ms(99.0)
        ));
        out.push_str(&format!(
            "Indexing all {turns} turns (10 index files, default configuration): {:.0} ms, {:.0} events/s.\n",
            lat.indexing.as_secs_f64() * 1000.0,
            turns as f64 / lat.indexing.as_secs_f64().max(1e-9)
        ));
        out.push_str("\nPer conversation (each one a held-out check of the same settings), R@10 all / multi-hop:\n\n");
        out.push_str(&per_conversation(&convs, &base_conv, per_conv));
    }
    let r10 = KS.iter().position(|k| *k == 10).unwrap_or(2);
    let r5 = KS.iter().position(|k| *k == 5).unwrap_or(1);
    let mut rows = vec![ablation_row("FTS5 BM25 baseline", &base, r5, r10)];
    rows.extend(
        results
            .iter()
            .map(|(n, t, _, _)| ablation_row(n, t, r5, r10)),
    );
    let mut header = vec!["method", "all R@5", "all R@10"];
    header.extend(CATEGORIES[1..].iter().copied());
    out.push_str("\nAblation (R@10 per category unless stated):\n\n");
    out.push_str(&table(&header, &rows));
    Ok(out)
}

fn per_conversation(convs: &[Conversation], base: &[RecallTable], ours: &[RecallTable]) -> String {
    let r10 = KS.iter().position(|k| *k == 10).unwrap_or(2);
    let rows: Vec<Vec<String>> = convs
        .iter()
        .zip(base.iter().zip(ours))
        .map(|(c, (b, o))| {
            vec![
                c.id.clone(),
                o.count(0).to_string(),
                format!("{} / {}", f3(b.get(0, r10)), f3(b.get(1, r10))),
                format!("{} / {}", f3(o.get(0, r10)), f3(o.get(1, r10))),
            ]
        })
        .collect();
    table(&["conversation", "questions", "baseline", "ctxlog"], &rows)
}

fn ablation_row(name: &str, t: &RecallTable, r5: usize, r10: usize) -> Vec<String> {
    let mut row = vec![name.to_owned(), f3(t.get(0, r5)), f3(t.get(0, r10))];
    row.extend((1..6).map(|c| f3(t.get(c, r10))));
    row
}

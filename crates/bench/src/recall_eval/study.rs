//! The retrieval study described in docs/design.md#1-the-problem, rebuilt with our own fixture
//! texts: 1 user record, 12 fact records (a prohibition, an approval rule, a configuration and its
//! replacement, a resolved diagnostic …), 3,000 unrelated tool records, 10 answerable and 2
//! unanswerable questions.

use std::time::Instant;

use ctxlog_ledger::event::{Event, EventBody, ToolStatus};
use ctxlog_recall::{NoArtifacts, RecallIndex, SearchOptions};

use super::Scratch;
use super::metrics::{Latency, table};

const USER: &str = "I'm setting up CI for the payments monorepo. Keep track of the rules and \
facts I give you; I will ask about them later.";

/// The 12 facts, in the order they are recorded. Index 3 replaces index 2.
pub const FACTS: [&str; 12] = [
    "Rule: never run database migrations against the production cluster unless a backup snapshot was taken the same day.",
    "Approval rule: any change to the payment service retry policy needs sign-off from Dana Whitfield before it is merged.",
    "Build cache configuration: CI artifacts are cached in the S3 bucket ci-cache-eu with a 14-day expiry.",
    "Build cache configuration changed: CI artifacts now go to the GCS bucket ci-cache-global instead, with a 30-day expiry. This replaces the S3 bucket ci-cache-eu setting.",
    "Diagnosis of the flaky checkout test: a race between the session reaper and the cart writer. Fixed by taking the cart lock first; resolved in commit 4f2a9c1.",
    "The staging environment is reachable at staging.internal.example on port 8443 and only through the corporate VPN.",
    "Unattended runs have no public network access: dependencies are installed from the internal mirror only.",
    "Release branches are cut every second Tuesday and named release/YYYY-MM-DD.",
    "On-call hands over on Mondays at 10:00 UTC; the pager alias is ops-primary.",
    "Audit service logs are retained for 400 days to satisfy the compliance review.",
    "The mobile app supports Android API level 26 and newer.",
    "Feature flags live in config/flags.toml; never toggle them directly in the database.",
];

/// Questions: text and the index of the fact that answers it (`None`: unanswerable).
pub const QUESTIONS: [(&str, Option<usize>); 12] = [
    (
        "Are we allowed to run migrations on the production database?",
        Some(0),
    ),
    (
        "Who must approve a change to the payment retry policy?",
        Some(1),
    ),
    ("Where are CI build artifacts cached?", Some(3)),
    (
        "What caused the flaky checkout test and is it fixed?",
        Some(4),
    ),
    ("How do I connect to staging?", Some(5)),
    (
        "Can the nightly job fetch packages from the internet?",
        Some(6),
    ),
    ("When do we create release branches?", Some(7)),
    ("When is the on-call handover?", Some(8)),
    ("How long do we keep audit logs?", Some(9)),
    ("Where should feature flags be changed?", Some(11)),
    ("What is the database password for staging?", None),
    ("Which cloud region hosts the analytics warehouse?", None),
];

/// Unrelated tool output, varied and sharing everyday CI vocabulary with the facts.
pub fn distractor(i: usize) -> String {
    let n = i * 7919 % 10_007;
    match i % 10 {
        0 => format!(
            "test result: ok. {} passed; 0 failed; 0 ignored; finished in {}.{:02}s",
            n % 300,
            n % 9,
            n % 100
        ),
        1 => format!(
            "   Compiling crate-{} v0.{}.{} (/src/crates/crate-{})",
            n % 97,
            n % 10,
            n % 31,
            n % 97
        ),
        2 => format!(
            "GET /api/v1/items/{n} 200 {}ms user-agent=curl/8.{}",
            n % 90,
            n % 9
        ),
        3 => format!(
            "warning: unused variable `tmp{}` in src/module_{}.rs:{}",
            n % 50,
            n % 40,
            n % 900
        ),
        4 => format!(
            "cache hit for key deps-{n:x}; restored {} files in {} ms",
            n % 4000,
            n % 700
        ),
        5 => format!(
            "npm WARN deprecated left-pad@1.{}.{}: use String.prototype.padStart",
            n % 9,
            n % 20
        ),
        6 => format!(
            "docker: pulled layer sha256:{n:08x} ({} MB) for image worker:{}",
            n % 300,
            n % 12
        ),
        7 => format!(
            "lint: {} files checked, {} formatting issues fixed automatically",
            n % 800,
            n % 5
        ),
        8 => format!(
            "benchmark parse_json/{}: time [{}.{} µs {}.{} µs]",
            n % 64,
            n % 50,
            n % 10,
            n % 50 + 1,
            n % 10
        ),
        _ => format!(
            "git: fetched {} objects, resolving deltas 100% ({}/{}), branch feature-{} up to date",
            n % 5000,
            n % 300,
            n % 300,
            n % 77
        ),
    }
}

fn event(seq: u64, body: EventBody) -> Event {
    Event {
        seq,
        ts_ms: 1_700_000_000_000 + seq as i64 * 20_000,
        body,
    }
}

/// The fixture's events: the user record, the 12 facts (as notes), then 3,000 tool records.
pub fn events() -> Vec<Event> {
    let mut out = vec![event(
        1,
        EventBody::User {
            text: USER.into(),
            parts: Vec::new(),
            provider_item: None,
        },
    )];
    for f in FACTS {
        let seq = out.len() as u64 + 1;
        out.push(event(
            seq,
            EventBody::Note {
                text: f.into(),
                pinned: false,
                supersedes: None,
                provider_item: None,
            },
        ));
    }
    for i in 0..3000 {
        let seq = out.len() as u64 + 1;
        out.push(event(seq, distractor_result(i)));
    }
    out
}

/// Plain FTS5 BM25 (the README recipe: porter unicode61, distinct `\w+` terms quoted and
/// OR-ed): how many questions have their fact in the top 4.
fn plain_bm25_top4(events: &[Event]) -> anyhow::Result<usize> {
    let db = rusqlite::Connection::open_in_memory()?;
    db.execute_batch("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61')")?;
    for e in events {
        if let Some(text) = e.body.text() {
            db.execute(
                "INSERT INTO t(rowid, body) VALUES (?1, ?2)",
                rusqlite::params![e.seq as i64, text],
            )?;
        }
    }
    let mut stmt = db.prepare("SELECT rowid FROM t WHERE t MATCH ?1 ORDER BY bm25(t) LIMIT 4")?;
    let mut found = 0;
    for (q, fact) in QUESTIONS {
        let Some(f) = fact else { continue };
        let expr = super::metrics::baseline_query(q);
        let top: Vec<i64> = stmt
            .query_map([&expr], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        found += usize::from(top.contains(&(fact_seq(f) as i64)));
    }
    Ok(found)
}

fn fact_seq(fact: usize) -> u64 {
    fact as u64 + 2
}

/// Query latency on a large index: the study's facts among 100,000 tool records.
pub fn scale(scratch: &Scratch) -> anyhow::Result<String> {
    const RECORDS: usize = 100_000;
    let mut events = events();
    events.truncate(13);
    for i in 0..RECORDS {
        let seq = events.len() as u64 + 1;
        events.push(event(seq, distractor_result(i)));
    }
    let mut index = RecallIndex::open(scratch.path(), "scale")?;
    let started = Instant::now();
    index.update(&events, &NoArtifacts)?;
    let indexing = started.elapsed();
    let bytes = std::fs::metadata(index.path())
        .map(|m| m.len())
        .unwrap_or(0);
    let mut latency = Latency::default();
    let mut found = 0;
    for _ in 0..5 {
        for (q, fact) in QUESTIONS {
            let t = Instant::now();
            let r = index.search(
                q,
                &SearchOptions {
                    limit: 4,
                    ..SearchOptions::default()
                },
            )?;
            latency.push(t.elapsed());
            found += usize::from(fact.is_some_and(|f| r.hits.iter().any(|h| h.seq == fact_seq(f))));
        }
    }
    Ok(format!(
        "\n### Scale\n\nThe 12 facts among {RECORDS} tool records: indexed in {:.1} s ({:.0} events/s), index file {:.1} MB; {} query runs (the 12 questions × 5): p50 {:.2} ms, p99 {:.2} ms; answer in the top 4 in {found} of 50 answerable runs.\n",
        indexing.as_secs_f64(),
        events.len() as f64 / indexing.as_secs_f64().max(1e-9),
        bytes as f64 / 1e6,
        latency.len(),
        latency.percentile_ms(50.0),
        latency.percentile_ms(99.0),
    ))
}

/// Runs the study and returns its Markdown section.
pub fn run(scratch: &Scratch) -> anyhow::Result<String> {
    let events = events();
    let mut index = RecallIndex::open(scratch.path(), "study")?;
    index.update(&events, &NoArtifacts)?;
    let latest8: Vec<u64> = events.iter().rev().take(8).map(|e| e.seq).collect();
    let mut rows = Vec::new();
    let (mut l8, mut t4, mut t16) = (0, 0, 0);
    let mut latency = Latency::default();
    let mut unanswerable_fp = 0;
    for (q, fact) in QUESTIONS {
        let t = Instant::now();
        let r = index.search(
            q,
            &SearchOptions {
                limit: 16,
                ..SearchOptions::default()
            },
        )?;
        latency.push(t.elapsed());
        let seqs: Vec<u64> = r.hits.iter().map(|h| h.seq).collect();
        let rank = fact.and_then(|f| seqs.iter().position(|s| *s == fact_seq(f)));
        let top_is_fact = seqs.first().is_some_and(|s| (2..=13).contains(s));
        if let Some(f) = fact {
            l8 += usize::from(latest8.contains(&fact_seq(f)));
            t4 += usize::from(rank.is_some_and(|r| r < 4));
            t16 += usize::from(rank.is_some());
        } else {
            unanswerable_fp += usize::from(seqs.iter().take(4).any(|s| (2..=13).contains(s)));
        }
        rows.push(vec![
            q.to_owned(),
            fact.map_or("—".into(), |f| format!("seq {}", fact_seq(f))),
            rank.map_or("—".into(), |r| (r + 1).to_string()),
            seqs.first().map_or("none".into(), |s| {
                format!("seq {s}{}", if top_is_fact { " (fact)" } else { "" })
            }),
        ]);
    }
    let r = index.search(
        "Where are CI build artifacts cached?",
        &SearchOptions {
            limit: 50,
            ..SearchOptions::default()
        },
    )?;
    let pos = |seq| {
        r.hits
            .iter()
            .position(|h| h.seq == seq)
            .map_or("absent".to_string(), |p| (p + 1).to_string())
    };
    let (new_rank, old_rank) = (pos(fact_seq(3)), pos(fact_seq(2)));
    let mut out = String::from("\n### The retrieval study, rebuilt\n\n");
    out.push_str(&format!(
        "The study of [§1](design.md#1-the-problem) on our own fixture texts. {} events: 1 user record, 12 facts (notes), 3,000 unrelated tool records. 10 answerable, 2 unanswerable questions.\n\n",
        events.len()
    ));
    out.push_str(&table(
        &["method", "answer found (of 10)"],
        &[
            vec!["latest 8 records".into(), l8.to_string()],
            vec![
                "plain FTS5 BM25 top-4 (README recipe)".into(),
                plain_bm25_top4(&events)?.to_string(),
            ],
            vec!["ctxlog recall top-4".into(), t4.to_string()],
            vec!["ctxlog recall top-16".into(), t16.to_string()],
        ],
    ));
    out.push_str(&format!(
        "\nUpdated configuration (seq {}) ranks {new_rank}, the configuration it replaces (seq {}) ranks {old_rank} for \"Where are CI build artifacts cached?\".\n",
        fact_seq(3),
        fact_seq(2)
    ));
    out.push_str(&format!(
        "Unanswerable questions with a fact in the top 4: {unanswerable_fp} of 2 (every result carries the note that a miss does not prove absence). Query latency p50 {:.2} ms, p99 {:.2} ms.\n\n",
        latency.percentile_ms(50.0),
        latency.percentile_ms(99.0)
    ));
    out.push_str(&table(&["question", "answer", "rank", "top hit"], &rows));
    Ok(out)
}

/// The `i`th unrelated tool record (a successful shell result).
fn distractor_result(i: usize) -> EventBody {
    EventBody::ToolResult {
        call_id: format!("call-{i}"),
        tool: "shell".into(),
        status: ToolStatus::Ok,
        exit_code: Some(0),
        text: distractor(i),
        artifact: None,
        parts: Vec::new(),
        provider_item: None,
    }
}

//! Recall at scale: recall indexes of 10k, 100k and 1M pages (a page is one row of the index's
//! `pages` / `pages_fts` tables: a slice of at most 2,048 characters of one event's text), built
//! from a deterministic mix of chat turns and tool results of varying size, then queried with a
//! fixed set of rare-term, common-term, multi-term and CJK queries. Run by
//! `scripts/bench-recall-scale`, which runs, per size, this program's `build` step (ctxlog's side,
//! in its own process so its peak RSS is its own), then `crates/bench/recall_scale/fts5_bench.py`
//! (Python's `sqlite3` FTS5 on the same pages and queries), then `report` on both outputs.
//!
//! ```text
//! recall_scale build PAGES DIR     # builds DIR/recall.sqlite and DIR/queries.json, prints one JSON line
//! recall_scale report RESULTS      # RESULTS: the JSON lines of both sides; prints the table
//! recall_scale query DIR QUERY…    # one search per query on DIR/recall.sqlite (for profiling)
//! recall_scale requery DIR BUILD_JSON  # the timed queries again on DIR's index; BUILD_JSON's line with the new times
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use ctxlog_bench::peak_rss_mib;
use ctxlog_ledger::event::{Event, EventBody, ToolStatus};
use ctxlog_recall::text::{Terms, match_expression, pages};
use ctxlog_recall::{NoArtifacts, RecallIndex, SearchOptions};
use serde_json::{Value, json};

/// Hits asked for per query, on both sides.
const K: usize = 10;
/// Timed runs of every query (after one untimed warm-up pass).
const RUNS: usize = 5;
/// Events per `update` call (one transaction each).
const BATCH: usize = 5_000;
/// Size of the generated vocabulary (Zipf-Mandelbrot distributed: weight 1 / (rank + 10), so
/// the most frequent word is about 1.3 % of words, as content words are in English text).
const VOCAB: usize = 30_000;

/// The fixed query set: (category, query).
const QUERIES: &[(&str, &str)] = &[
    ("rare", "kq4417"),
    ("rare", "incident kq1093"),
    ("rare", "what happened to build zr88213"),
    ("rare", "stack trace for req-00c3f9"),
    ("rare", "vomaltrix"),
    ("rare", "the quarnesto setting"),
    ("rare", "kq7301 rollback"),
    ("rare", "zr10457"),
    ("common", "error"),
    ("common", "request failed"),
    ("common", "server timeout"),
    ("common", "the deploy"),
    ("common", "database connection"),
    ("common", "info handled request"),
    ("common", "warn retry"),
    ("common", "user config"),
    (
        "multi",
        "why did the database connection time out after the deploy on the gateway",
    ),
    (
        "multi",
        "which service logged the error about the replica and how long did the retry take",
    ),
    (
        "multi",
        "what did we decide about the cache eviction policy for the billing service",
    ),
    (
        "multi",
        "find the failing test in the scheduler module and the stack trace",
    ),
    ("multi", "gateway latency budget token refresh worker queue"),
    (
        "multi",
        "compare memory usage of the indexer before and after the upgrade",
    ),
    ("multi", "kq4417 database error retry gateway"),
    ("multi", "config flag rollout percentage canary region"),
    ("cjk", "数据库连接超时"),
    ("cjk", "部署 服务器 配置"),
    ("cjk", "项目代码"),
    ("cjk", "用户 错误"),
    ("cjk", "缓存"),
    ("cjk", "日志 监控 告警"),
    ("cjk", "数据库 error"),
    ("cjk", "测试失败"),
];

const COMMON: &[&str] = &[
    "error",
    "request",
    "server",
    "timeout",
    "deploy",
    "database",
    "connection",
    "user",
    "config",
    "retry",
    "failed",
    "gateway",
    "service",
    "cache",
    "latency",
    "replica",
    "queue",
    "worker",
    "token",
    "refresh",
    "test",
    "module",
    "scheduler",
    "memory",
    "indexer",
    "upgrade",
    "billing",
    "policy",
    "eviction",
    "canary",
    "region",
    "rollout",
    "flag",
    "percentage",
    "budget",
    "trace",
    "stack",
    "handled",
    "warn",
    "info",
];
const FILLER: &[&str] = &[
    "the", "a", "we", "it", "is", "was", "to", "of", "and", "in", "on", "for", "that", "this",
    "after", "before", "with", "about", "did", "not",
];
const CJK: &[&str] = &[
    "数据库",
    "连接",
    "超时",
    "部署",
    "服务器",
    "配置",
    "项目",
    "代码",
    "用户",
    "错误",
    "缓存",
    "日志",
    "监控",
    "告警",
    "测试",
    "失败",
    "发布",
    "回滚",
];
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ne", "su", "ta", "ri", "vo", "ze", "qu", "ar", "to", "mal", "nes", "trix",
    "ban", "dor", "pel", "gri", "fo",
];

/// splitmix64: a small deterministic generator (no dependency, same sequence everywhere).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// The generator of pages: a Zipf vocabulary of made-up words plus common English words, log
/// lines for tool results and CJK phrases in some chat turns.
struct Generator {
    rng: Rng,
    words: Vec<String>,
    /// Cumulative Zipf weights of `words`.
    cumulative: Vec<f64>,
}

impl Generator {
    fn new() -> Generator {
        let mut words: Vec<String> = COMMON.iter().map(|w| (*w).to_owned()).collect();
        for i in 0..VOCAB {
            let mut w = String::new();
            let mut n = i + 20;
            while n > 0 {
                w.push_str(SYLLABLES[n % SYLLABLES.len()]);
                n /= SYLLABLES.len();
            }
            words.push(w);
        }
        let mut total = 0.0;
        let cumulative = (1..=words.len())
            .map(|r| {
                total += 1.0 / (r + 10) as f64;
                total
            })
            .collect();
        Generator {
            rng: Rng(0x5eed_5ca1e),
            words,
            cumulative,
        }
    }

    fn word(&mut self) -> &str {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let x = (self.rng.next() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let i = self.cumulative.partition_point(|&c| c < x);
        &self.words[i.min(self.words.len() - 1)]
    }

    fn sentence(&mut self, words: usize, out: &mut String) {
        for i in 0..words {
            if i > 0 {
                out.push(' ');
            }
            if self.rng.chance(35) {
                out.push_str(FILLER[self.rng.below(FILLER.len())]);
            } else {
                let w = self.word().to_owned();
                out.push_str(&w);
            }
        }
        if self.rng.chance(3) {
            out.push_str(&format!(" kq{:04}", self.rng.below(10_000)));
        }
        out.push_str(". ");
    }

    fn chat(&mut self) -> String {
        let mut text = String::new();
        for _ in 0..1 + self.rng.below(5) {
            let n = 5 + self.rng.below(20);
            self.sentence(n, &mut text);
        }
        if self.rng.chance(8) {
            for _ in 0..1 + self.rng.below(4) {
                text.push_str(CJK[self.rng.below(CJK.len())]);
            }
            text.push('。');
        }
        text
    }

    fn tool_output(&mut self) -> String {
        // Log-uniform sizes from ~150 characters to ~16,000.
        let target = (150.0 * (100.0_f64).powf(self.rng.below(1000) as f64 / 1000.0)) as usize;
        let mut text = String::new();
        let build = format!("zr{:05}", self.rng.below(100_000));
        while text.len() < target {
            let level = ["INFO", "INFO", "INFO", "WARN", "ERROR"][self.rng.below(5)];
            text.push_str(&format!(
                "2026-03-{:02}T{:02}:{:02}:{:02}Z {level} {} handled request req-{:06x} in {} ms build {build}: ",
                1 + self.rng.below(28),
                self.rng.below(24),
                self.rng.below(60),
                self.rng.below(60),
                COMMON[self.rng.below(COMMON.len())],
                self.rng.next() & 0xff_ffff,
                self.rng.below(5000),
            ));
            let n = 3 + self.rng.below(10);
            self.sentence(n, &mut text);
            text.push('\n');
        }
        text
    }

    /// The next turn: a user message, an assistant reply, sometimes tool results between them.
    fn turn(&mut self, seq: &mut u64, ts_ms: &mut i64, out: &mut Vec<Event>) {
        let mut push = |body, seq: &mut u64, ts_ms: &mut i64| {
            *seq += 1;
            *ts_ms += 20_000;
            out.push(Event {
                seq: *seq,
                ts_ms: *ts_ms,
                body,
            });
        };
        push(
            EventBody::User {
                text: self.chat(),
                parts: Vec::new(),
                provider_item: None,
            },
            seq,
            ts_ms,
        );
        for _ in 0..[0, 0, 1, 1, 2, 3][self.rng.below(6)] {
            let tool = ["shell", "read_file", "http_get"][self.rng.below(3)].to_owned();
            let call_id = format!("c{seq}");
            push(
                EventBody::ToolCall {
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    arguments: json!({}),
                    provider_item: None,
                },
                seq,
                ts_ms,
            );
            let status = if self.rng.chance(10) {
                ToolStatus::Error
            } else {
                ToolStatus::Ok
            };
            push(
                EventBody::ToolResult {
                    call_id,
                    tool,
                    status,
                    exit_code: None,
                    text: self.tool_output(),
                    artifact: None,
                    parts: Vec::new(),
                    provider_item: None,
                },
                seq,
                ts_ms,
            );
        }
        push(
            EventBody::Assistant {
                text: self.chat(),
                provider_item: None,
            },
            seq,
            ts_ms,
        );
    }
}

/// What the index stores as pages for `event` (none for tool calls).
fn page_facts(event: &Event) -> (u64, u64) {
    match &event.body {
        EventBody::User { text, .. }
        | EventBody::Assistant { text, .. }
        | EventBody::ToolResult { text, .. } => pages(text)
            .iter()
            .fold((0, 0), |(n, b), p| (n + 1, b + p.text.len() as u64)),
        _ => (0, 0),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Builds an index of at least `target` pages in `dir`, times the queries and prints ctxlog's
/// JSON line.
fn build(target: u64, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("recall.sqlite");
    RecallIndex::delete_files(&path)?;
    let mut index = RecallIndex::open(&path, "recall-scale")?;
    fts5_settings(&path)?;
    let mut generator = Generator::new();
    let (mut seq, mut ts_ms) = (0u64, 1_767_225_600_000i64);
    let (mut page_count, mut page_bytes, mut events, mut text_bytes) = (0u64, 0u64, 0u64, 0u64);
    let mut took = Duration::ZERO;
    while page_count < target {
        let mut batch = Vec::with_capacity(BATCH + 8);
        while batch.len() < BATCH && page_count < target {
            let before = batch.len();
            generator.turn(&mut seq, &mut ts_ms, &mut batch);
            for e in &batch[before..] {
                let (n, b) = page_facts(e);
                page_count += n;
                page_bytes += b;
                text_bytes += e.body.text().map_or(0, |t| t.len() as u64);
            }
        }
        events += batch.len() as u64;
        let start = Instant::now();
        let stats = index.update(&batch, &NoArtifacts)?;
        took += start.elapsed();
        if stats.indexed_through != seq {
            bail!("indexed through {} of {seq}", stats.indexed_through);
        }
    }
    let size = std::fs::metadata(&path)?.len();
    let queries: Vec<Value> = QUERIES
        .iter()
        .map(|(category, q)| {
            json!({"category": category, "query": q, "expr": match_expression(&Terms::parse(q))})
        })
        .collect();
    std::fs::write(dir.join("queries.json"), serde_json::to_vec(&queries)?)?;
    let (query_ms, hits) = timed_queries(&index)?;
    let secs = took.as_secs_f64();
    println!(
        "{}",
        json!({
            "side": "ctxlog",
            "pages": page_count,
            "events": events,
            "page_bytes": page_bytes,
            "text_bytes": text_bytes,
            "build_s": secs,
            "events_per_s": events as f64 / secs,
            "pages_per_s": page_count as f64 / secs,
            "mb_per_s": page_bytes as f64 / 1e6 / secs,
            "index_bytes": size,
            "runs": RUNS,
            "query_ms": query_ms,
            "hits": hits,
            "rss_mib": peak_rss_mib(),
        })
    );
    Ok(())
}

/// FTS5 settings to try on the build (`CTXLOG_RECALL_FTS5="automerge=8 pgsz=4000"`; none by
/// default): written into the new index's FTS5 configuration, which FTS5 keeps in the file.
/// For measuring bulk-load settings only; the product does not set them.
fn fts5_settings(path: &Path) -> Result<()> {
    let Ok(settings) = std::env::var("CTXLOG_RECALL_FTS5") else {
        return Ok(());
    };
    let conn = rusqlite::Connection::open(path)?;
    for setting in settings.split_whitespace() {
        let Some((name, value)) = setting.split_once('=') else {
            bail!("CTXLOG_RECALL_FTS5: expected NAME=VALUE, not {setting:?}");
        };
        let value: i64 = value
            .parse()
            .with_context(|| format!("CTXLOG_RECALL_FTS5: {name} must be a number"))?;
        conn.execute(
            "INSERT INTO pages_fts(pages_fts, rank) VALUES(?1, ?2)",
            rusqlite::params![name, value],
        )
        .with_context(|| format!("FTS5 setting {name}={value}"))?;
    }
    Ok(())
}

/// Every query once untimed (warm-up), then [`RUNS`] timed passes: `[[category, ms], …]` and
/// the number of hits.
fn timed_queries(index: &RecallIndex) -> Result<(Value, usize)> {
    let opts = SearchOptions {
        limit: K,
        ..SearchOptions::default()
    };
    for (_, q) in QUERIES {
        index.search(q, &opts)?;
    }
    let mut times = Vec::new();
    let mut hits = 0;
    for _ in 0..RUNS {
        for (category, q) in QUERIES {
            let start = Instant::now();
            let result = index.search(q, &opts)?;
            times.push(json!([category, ms(start.elapsed())]));
            hits += result.hits.len();
        }
    }
    Ok((Value::Array(times), hits))
}

/// Times the queries again on the index `build` left in `dir` and prints `build_line` (the
/// JSON line `build` printed) with its query times replaced: for a query phase that something
/// else disturbed (the doc says when this was used). With `CTXLOG_RECALL_RANKING=before`, the
/// ranking levers added for user ↔ assistant chats are off (one hit per page, no first-person
/// credit, assistant pages supersede), so their cost can be measured under the same load.
fn requery(dir: &Path, build_line: &Path) -> Result<()> {
    let text = std::fs::read_to_string(build_line)
        .with_context(|| format!("reading {}", build_line.display()))?;
    let mut line: Value =
        serde_json::from_str(text.trim()).context("BUILD_JSON is not one JSON line")?;
    let mut index = RecallIndex::open(dir.join("recall.sqlite"), "recall-scale")?;
    if std::env::var("CTXLOG_RECALL_RANKING").as_deref() == Ok("before") {
        index.set_ranking(ctxlog_recall::Ranking {
            best_page_per_event: false,
            first_person_weight: 0.0,
            supersede_by_assistant: true,
            ..ctxlog_recall::Ranking::default()
        });
    }
    let (query_ms, hits) = timed_queries(&index)?;
    line["query_ms"] = query_ms;
    line["hits"] = json!(hits);
    line["requeried"] = json!(true);
    println!("{line}");
    Ok(())
}

/// The side's name, marked when its queries were timed again by `requery`.
fn side_label(v: &Value) -> String {
    let side = v["side"].as_str().unwrap_or("?");
    if v["requeried"] == true {
        format!("{side} (queries re-run)")
    } else {
        side.to_owned()
    }
}

fn stats(v: &Value) -> (f64, f64, f64) {
    let mut all: Vec<f64> = v["query_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x[1].as_f64())
        .collect();
    all.sort_by(f64::total_cmp);
    (
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        all.last().copied().unwrap_or(f64::NAN),
    )
}

fn category_p50(v: &Value, category: &str) -> f64 {
    let mut t: Vec<f64> = v["query_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x[0].as_str() == Some(category))
        .filter_map(|x| x[1].as_f64())
        .collect();
    t.sort_by(f64::total_cmp);
    percentile(&t, 0.5)
}

fn report(results: &Path) -> Result<()> {
    let text = std::fs::read_to_string(results)
        .with_context(|| format!("reading {}", results.display()))?;
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .context("a results line is not JSON")?;
    let mut sizes: Vec<u64> = lines.iter().filter_map(|v| v["pages"].as_u64()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    println!(
        "recall at scale: k = {K}, {} queries × `runs` timed runs per size after one warm-up pass (warm cache), ctxlog `RecallIndex::search` vs Python sqlite3 FTS5 (bm25, ORDER BY rank LIMIT {K})\n",
        QUERIES.len()
    );
    println!(
        "| pages | side | runs | events | page MB | build s | MB/s | pages/s | events/s | index MB | p50 ms | p99 ms | max ms | p50 rare / common / multi / cjk | peak RSS MiB |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    let mut ratios = Vec::new();
    for n in &sizes {
        let side = |name: &str| {
            lines
                .iter()
                .find(|v| v["pages"].as_u64() == Some(*n) && v["side"] == name)
        };
        for v in [side("ctxlog"), side("python-fts5")].into_iter().flatten() {
            let (p50, p99, max) = stats(v);
            let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
            let events = v["events"]
                .as_u64()
                .map_or("—".to_owned(), |e| e.to_string());
            let events_per_s = v["events_per_s"]
                .as_f64()
                .map_or("—".to_owned(), |e| format!("{e:.0}"));
            println!(
                "| {n} | {} | {} | {events} | {:.1} | {:.1} | {:.2} | {:.0} | {events_per_s} | {:.1} | {p50:.2} | {p99:.2} | {max:.2} | {:.2} / {:.2} / {:.2} / {:.2} | {:.1} |",
                side_label(v),
                v["runs"].as_u64().map_or("?".to_owned(), |r| r.to_string()),
                f("page_bytes") / 1e6,
                f("build_s"),
                f("mb_per_s"),
                f("pages_per_s"),
                f("index_bytes") / 1e6,
                category_p50(v, "rare"),
                category_p50(v, "common"),
                category_p50(v, "multi"),
                category_p50(v, "cjk"),
                f("rss_mib"),
            );
        }
        if let (Some(c), Some(p)) = (side("ctxlog"), side("python-fts5")) {
            let (c50, c99, _) = stats(c);
            let (p50, p99, _) = stats(p);
            let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
            ratios.push(format!(
                "{n} pages: build MB/s ctxlog/python {:.2}×, index size {:.2}×, query p50 {:.2}×, p99 {:.2}× (ctxlog time / python time)",
                f(c, "mb_per_s") / f(p, "mb_per_s"),
                f(c, "index_bytes") / f(p, "index_bytes"),
                c50 / p50,
                c99 / p99,
            ));
        }
    }
    println!();
    for r in ratios {
        println!("{r}");
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["build", pages, dir] => {
            let n: u64 = pages
                .parse()
                .with_context(|| format!("PAGES must be a number, not {pages:?}"))?;
            build(n, Path::new(dir))
        }
        ["report", results] => report(Path::new(results)),
        ["requery", dir, build_line] => requery(Path::new(dir), Path::new(build_line)),
        ["query", dir, queries @ ..] => {
            let index = RecallIndex::open(Path::new(dir).join("recall.sqlite"), "recall-scale")?;
            let opts = SearchOptions {
                limit: K,
                ..SearchOptions::default()
            };
            for q in queries {
                let start = Instant::now();
                let hits = index.search(q, &opts)?.hits.len();
                println!("{q:?}: {hits} hits, {:.2} ms", ms(start.elapsed()));
            }
            Ok(())
        }
        _ => bail!(
            "usage: recall_scale build PAGES DIR | report RESULTS_JSONL | query DIR QUERY… | requery DIR BUILD_JSON"
        ),
    }
}

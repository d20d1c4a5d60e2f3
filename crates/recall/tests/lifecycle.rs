#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: an index that no longer matches its ledger (docs/design.md#r2-disposable). The
//! index records the ledger id, the last seq indexed and a fingerprint of that event. Reopening
//! continues incrementally; another ledger id, a shorter ledger or a changed last event discards
//! the content and `catch_up` rebuilds it; `rebuild` reports progress event by event.

mod common;

use common::*;
use ctxlog_recall::{
    Error, IndexConfig, MemorySource, NoArtifacts, RecallIndex, ResetReason, SearchOptions,
};

fn source(id: &str, texts: &[&str]) -> MemorySource {
    MemorySource {
        ledger_id: id.into(),
        events: texts
            .iter()
            .enumerate()
            .map(|(i, t)| note(i as u64 + 1, t))
            .collect(),
        ..MemorySource::default()
    }
}

/// Seqs of the hits whose own text has `q` (neighbours match through their context too).
fn seqs(index: &RecallIndex, q: &str) -> Vec<u64> {
    let r = index
        .search(
            q,
            &SearchOptions {
                limit: 50,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    r.hits
        .iter()
        .filter(|h| h.text.contains(q))
        .map(|h| h.seq)
        .collect()
}

#[test]
fn updates_are_incremental_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut src = source("L1", &["alpha one", "alpha two"]);
    {
        let mut index = RecallIndex::open(&path, "L1").unwrap();
        let stats = index.catch_up(&src).unwrap();
        assert_eq!((stats.events_indexed, stats.indexed_through), (2, 2));
    }
    src.events.push(note(3, "alpha three"));
    let mut index = RecallIndex::open(&path, "L1").unwrap();
    assert_eq!(index.indexed_through(), 2);
    assert_eq!(index.reset_reason(), None);
    let stats = index.catch_up(&src).unwrap();
    assert_eq!((stats.events_indexed, stats.reset), (1, None));
    let mut found = seqs(&index, "alpha");
    found.sort_unstable();
    assert_eq!(found, [1, 2, 3]);
    // Feeding the same events again writes nothing.
    let stats = index.update(&src.events, &NoArtifacts).unwrap();
    assert_eq!(stats.events_indexed, 0);
}

#[test]
fn another_ledger_id_discards_the_content() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut index = RecallIndex::open(&path, "L1").unwrap();
    index.catch_up(&source("L1", &["secret kiwi"])).unwrap();
    drop(index);
    let index = RecallIndex::open(&path, "L2").unwrap();
    assert_eq!(
        index.reset_reason(),
        Some(&ResetReason::LedgerChanged { was: "L1".into() })
    );
    assert_eq!(index.indexed_through(), 0);
    assert!(seqs(&index, "kiwi").is_empty());
    // The same through catch_up with a source whose id changed.
    let mut index = RecallIndex::open(&path, "L2").unwrap();
    index.catch_up(&source("L2", &["mango"])).unwrap();
    let stats = index.catch_up(&source("L3", &["papaya"])).unwrap();
    assert!(matches!(
        stats.reset,
        Some(ResetReason::LedgerChanged { .. })
    ));
    assert!(seqs(&index, "mango").is_empty());
    assert_eq!(seqs(&index, "papaya"), [1]);
}

#[test]
fn a_rewritten_ledger_is_detected_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut index = RecallIndex::open(&path, "L").unwrap();
    index
        .catch_up(&source("L", &["one", "two banana", "three"]))
        .unwrap();
    // Same id, but event 3 changed.
    let changed = source("L", &["one", "two banana", "three cherry", "four"]);
    let stats = index.catch_up(&changed).unwrap();
    assert_eq!(stats.reset, Some(ResetReason::LedgerRewritten { seq: 3 }));
    assert_eq!(seqs(&index, "cherry"), [3]);
    // Same id, but shorter.
    let shorter = source("L", &["one"]);
    let stats = index.catch_up(&shorter).unwrap();
    assert_eq!(stats.reset, Some(ResetReason::LedgerRewritten { seq: 4 }));
    assert!(seqs(&index, "banana").is_empty());
    // `update` refuses a changed tail instead of guessing.
    let err = index
        .update(&source("L", &["uno"]).events, &NoArtifacts)
        .unwrap_err();
    assert!(matches!(err, Error::Stale { seq: 1, .. }), "{err}");
}

#[test]
fn rebuild_reports_progress() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let src = source("L", &["a fig", "b fig", "c fig", "d fig"]);
    index.catch_up(&src).unwrap();
    let mut seen = Vec::new();
    let stats = index
        .rebuild(&src, &mut |p| seen.push((p.seq, p.head_seq)))
        .unwrap();
    assert_eq!(seen, [(1, 4), (2, 4), (3, 4), (4, 4)]);
    assert_eq!(stats.events_indexed, 4);
    assert_eq!(seqs(&index, "fig").len(), 4);
}

#[test]
fn another_config_discards_the_content() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut index = RecallIndex::open(&path, "L").unwrap();
    index.catch_up(&source("L", &["lime"])).unwrap();
    drop(index);
    let config = IndexConfig {
        context_before: 0,
        ..IndexConfig::default()
    };
    let index = RecallIndex::open_with(&path, "L", config).unwrap();
    assert_eq!(index.reset_reason(), Some(&ResetReason::ConfigChanged));
    assert_eq!(index.indexed_through(), 0);
}

#[test]
fn incremental_updates_equal_a_one_shot_build() {
    let texts: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "turn {i} about {} and {}",
                ["apples", "boats", "clouds"][i % 3],
                i * 7
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let src = source("L", &refs);
    let dir = tempfile::tempdir().unwrap();
    let mut whole = RecallIndex::open(dir.path().join("a.sqlite"), "L").unwrap();
    whole.update(&src.events, &NoArtifacts).unwrap();
    let mut pieces = RecallIndex::open(dir.path().join("b.sqlite"), "L").unwrap();
    for chunk in src.events.chunks(3) {
        pieces.update(chunk, &NoArtifacts).unwrap();
    }
    for q in ["apples", "boats 21", "clouds turn", ""] {
        let opts = SearchOptions {
            limit: 50,
            ..SearchOptions::default()
        };
        let a = whole.search(q, &opts).unwrap();
        let b = pieces.search(q, &opts).unwrap();
        assert_eq!(a.hits, b.hits, "{q}");
    }
}

#[test]
fn two_handles_on_one_file_never_index_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut a = RecallIndex::open(&path, "L").unwrap();
    let mut b = RecallIndex::open(&path, "L").unwrap();
    let mut src = source("L", &["walnut one", "walnut two", "walnut three"]);
    a.catch_up(&src).unwrap();
    src.events.push(note(4, "walnut four"));
    // `b` still believes nothing is indexed; it must continue from the file, not redo 1–3.
    let stats = b.catch_up(&src).unwrap();
    assert_eq!(stats.events_indexed, 1);
    a.catch_up(&src).unwrap();
    let mut found = seqs(&a, "walnut");
    found.sort_unstable();
    assert_eq!(found, [1, 2, 3, 4]);
}

/// Regression: `catch_up` decided whether to reset from the handle's own copy of how far the index
/// got. When another handle had indexed further and the ledger was then rewritten after the
/// first handle's point, the first handle kept the other's rows of the old ledger.
#[test]
fn a_stale_handle_still_notices_a_rewritten_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut a = RecallIndex::open(&path, "L").unwrap();
    let mut b = RecallIndex::open(&path, "L").unwrap();
    a.catch_up(&source("L", &["one", "two", "three"])).unwrap();
    b.catch_up(&source(
        "L",
        &["one", "two", "three", "four", "five apricot"],
    ))
    .unwrap();
    // Rewritten after seq 3 (the point `a` last saw), same length.
    let rewritten = source("L", &["one", "two", "three", "four", "five plum"]);
    let stats = a.catch_up(&rewritten).unwrap();
    assert_eq!(stats.reset, Some(ResetReason::LedgerRewritten { seq: 5 }));
    assert!(seqs(&a, "apricot").is_empty());
    assert_eq!(seqs(&a, "plum"), [5]);
    assert_eq!(a.indexed_through(), 5);
    // `b` now sees the file `a` rebuilt and has nothing to do.
    let stats = b.catch_up(&rewritten).unwrap();
    assert_eq!((stats.reset, stats.events_indexed), (None, 0));
    // A handle opened for another ledger takes the file over; the first handle's next catch_up
    // takes it back instead of failing or answering from the other ledger.
    let mut c = RecallIndex::open(&path, "M").unwrap();
    c.catch_up(&source("M", &["mango"])).unwrap();
    let stats = a.catch_up(&rewritten).unwrap();
    assert!(matches!(
        stats.reset,
        Some(ResetReason::LedgerChanged { .. })
    ));
    assert!(seqs(&a, "mango").is_empty());
    assert_eq!(seqs(&a, "plum"), [5]);
}

/// Regression: the episode test subtracted timestamps, which overflowed (a panic in debug
/// builds) for events imported with extreme times.
#[test]
fn extreme_timestamps_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let mut events = vec![
        note(1, "quince early"),
        note(2, "quince late"),
        note(3, "quince zero"),
    ];
    events[0].ts_ms = i64::MIN;
    events[1].ts_ms = i64::MAX;
    events[2].ts_ms = 0;
    index.update(&events, &NoArtifacts).unwrap();
    let mut found = seqs(&index, "quince");
    found.sort_unstable();
    assert_eq!(found, [1, 2, 3]);
}

/// An index written by the previous text rules (no text version in its stored configuration:
/// no glued words, no run-final characters) is rebuilt on open, not searched with gaps.
#[test]
fn an_index_from_older_text_rules_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut index = RecallIndex::open(&path, "L").unwrap();
    index.catch_up(&source("L", &["lime"])).unwrap();
    drop(index);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE meta SET value = 'before=2;after=1;chars=400;gap=7200000;date=true' \
         WHERE key = 'config'",
        [],
    )
    .unwrap();
    drop(conn);
    let mut index = RecallIndex::open(&path, "L").unwrap();
    assert_eq!(index.reset_reason(), Some(&ResetReason::ConfigChanged));
    let stats = index.catch_up(&source("L", &["lime"])).unwrap();
    assert_eq!(stats.events_indexed, 1);
}

/// Regression: an event given out of order to `update` was skipped silently (its seq was
/// below what the same call had reached), leaving a gap no later update filled. Now the call
/// fails and writes nothing.
#[test]
fn out_of_order_events_are_refused_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let events = [note(1, "fig one"), note(3, "fig three"), note(2, "fig two")];
    let err = index.update(&events, &NoArtifacts).unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutOfOrder {
                seq: 2,
                after: 3,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(index.indexed_through(), 0);
    assert!(seqs(&index, "fig").is_empty());
    // Re-feeding what is already indexed, in order, is fine.
    index.update(&events[..2], &NoArtifacts).unwrap();
    index.update(&events[..2], &NoArtifacts).unwrap();
    assert_eq!(index.indexed_through(), 3);
}

/// Every row of both tables, in id order: `pages` and the full-text columns.
fn all_rows(path: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT p.id, p.seq, p.page, p.pages, p.kind, p.tool, p.status, p.char_start, \
             p.char_end, p.ts_ms, p.supersedes, p.cue, p.author, p.episode, p.checksum, \
             f.body, f.ctx, f.meta, f.cjk \
             FROM pages p JOIN pages_fts f ON f.rowid = p.id ORDER BY p.id",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            let cells: Vec<String> = (0..19)
                .map(|i| format!("{:?}", r.get::<_, rusqlite::types::Value>(i).unwrap()))
                .collect();
            Ok(cells.join(" | "))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// The writer holds an event's full-text rows until the event that follows it is known, then
/// inserts them once; an update that ends mid-turn must leave the row so that the next update
/// completes it exactly: split anywhere, the rows equal those of one update of everything.
#[test]
fn an_update_ending_mid_turn_continues_to_the_same_rows() {
    let big = "kiwi log line with request ids and timings\n".repeat(120);
    let mut events = Vec::new();
    for t in 0..6u64 {
        let s = t * 5;
        events.push(user(
            s + 1,
            &format!("question {t} about kiwi and 项目代码"),
        ));
        events.push(ev(
            s + 2,
            ctxlog_event::EventBody::ToolCall {
                call_id: format!("c{t}"),
                tool: "sh".into(),
                arguments: serde_json::json!({}),
                provider_item: None,
            },
        ));
        events.push(tool_result(s + 3, "sh", &big, None));
        events.push(tool_result(s + 4, "recall", "never indexed", None));
        events.push(assistant(s + 5, &format!("answer {t}: kiwi is ripe")));
    }
    // A pause of a day before the fourth turn starts another episode.
    for e in events.iter_mut().skip(15) {
        e.ts_ms += 86_400_000;
    }
    let dir = tempfile::tempdir().unwrap();
    let whole_path = dir.path().join("whole.sqlite");
    let mut whole = RecallIndex::open(&whole_path, "L").unwrap();
    whole.update(&events, &NoArtifacts).unwrap();
    let expected = all_rows(&whole_path);
    assert_eq!(
        expected.len(),
        6 * (1 + 3 + 1),
        "three pages per tool result"
    );
    for size in [1, 2, 3, 4, 7] {
        let path = dir.path().join(format!("pieces-{size}.sqlite"));
        let mut pieces = RecallIndex::open(&path, "L").unwrap();
        for chunk in events.chunks(size) {
            pieces.update(chunk, &NoArtifacts).unwrap();
        }
        assert_eq!(all_rows(&path), expected, "chunks of {size}");
        pieces.verify().unwrap();
    }
}

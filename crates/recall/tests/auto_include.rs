#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: auto-included pages that do not carry the words asked about
//! (docs/design.md#r6-auto-include). A page's context field holds its neighbours' text and its meta
//! field its date, so `search` finds a reply through the question before it — which is worth
//! keeping for interactive search. But an auto-included page is spent from a tight request budget,
//! so `RecallIndex::candidates` returns only pages whose own text (the body, or the CJK bigram
//! field for CJK terms) matches at least one query term, in `search`'s order.

mod common;

use common::*;
use ctxlog_recall::{NoArtifacts, RecallIndex, SearchOptions};

fn index_of(events: &[ctxlog_event::Event]) -> (tempfile::TempDir, RecallIndex) {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    index.update(events, &NoArtifacts).unwrap();
    (dir, index)
}

fn searched(index: &RecallIndex, q: &str) -> Vec<u64> {
    let r = index.search(q, &SearchOptions::default()).unwrap();
    r.hits.iter().map(|h| h.seq).collect()
}

fn candidates(index: &RecallIndex, q: &str, k: usize) -> Vec<u64> {
    let hits = index.candidates(q, u64::MAX, k).unwrap();
    hits.iter().map(|h| h.seq).collect()
}

#[test]
fn a_page_matching_only_through_context_is_a_search_hit_but_not_a_candidate() {
    // Seq 2 never says "deployment" or "region"; its context field holds seq 1's words.
    let (_d, index) = index_of(&[
        user(1, "Which deployment region do we use?"),
        assistant(2, "Tell me a story"),
        user(3, "The weather is fine."),
    ]);
    let q = "Which deployment region?";
    let found = searched(&index, q);
    assert!(
        found.contains(&2),
        "search should reach seq 2 via context: {found:?}"
    );
    assert_eq!(candidates(&index, q, 2), [1]);
    assert_eq!(candidates(&index, q, 10), [1]);
}

#[test]
fn a_page_matching_only_through_its_date_is_not_a_candidate() {
    let mut may = user(1, "We signed the lease.");
    may.ts_ms = 1_683_554_160_000; // Monday 8 May 2023
    let mut nov = user(2, "The lease renewal is due in May.");
    nov.ts_ms = 1_700_000_000_000; // November 2023
    let (_d, index) = index_of(&[may, nov]);
    let found = searched(&index, "May 2023");
    assert!(
        found.contains(&1),
        "search should reach seq 1 via its date: {found:?}"
    );
    let cands = candidates(&index, "May 2023", 5);
    assert!(!cands.contains(&1), "{cands:?}");
    assert_eq!(cands, [2]);
}

#[test]
fn candidates_keep_the_search_order_of_pages_with_own_matches() {
    let (_d, index) = index_of(&[
        note(1, "The cache directory is /var/cache/app."),
        note(2, "Cache size: 2 GB."),
        note(3, "Unrelated: lunch is at noon."),
        note(
            4,
            "The cache directory moved to /srv/cache and the cache size is 4 GB.",
        ),
        note(5, "Nothing here either."),
    ]);
    let q = "cache directory size";
    let own: Vec<u64> = searched(&index, q)
        .into_iter()
        .filter(|s| [1, 2, 4].contains(s))
        .collect();
    assert_eq!(own.len(), 3, "{own:?}");
    assert_eq!(candidates(&index, q, 3), own);
    assert_eq!(candidates(&index, q, 2), own[..2]);
}

#[test]
fn a_cjk_page_matches_through_its_own_bigrams() {
    let (_d, index) = index_of(&[
        note(1, "部署区域是东京。"),
        assistant(2, "Tell me a story"),
        note(3, "午饭在中午。"),
    ]);
    assert_eq!(candidates(&index, "部署区域", 3), [1]);
}

#[test]
fn candidates_honour_older_than_and_k() {
    let (_d, index) = index_of(&[
        note(1, "retry budget is five"),
        note(2, "retry budget is six"),
        note(3, "retry budget is seven"),
    ]);
    let hits = index.candidates("retry budget", 3, 5).unwrap();
    assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), [2, 1]);
    assert!(index.candidates("retry budget", 3, 0).unwrap().is_empty());
    assert_eq!(candidates(&index, "retry budget", 1), [3]);
}

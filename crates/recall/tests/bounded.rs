#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: a search whose cost grows with the index (docs/design.md#r4-ranking,
//! docs/design.md#10-evidence). FTS5 scores every matching row before it sorts, so a common word
//! once made a search a pass over most pages (p99 44 ms at 100,000 tool records). A ranked search
//! now lets BM25 score at most `Ranking::max_scored` matches: rare phrases are ranked, common ones
//! fill the pool newest first below them. These tests use a small budget so an index of a few
//! hundred pages is "large", and check what the bound keeps: rare matches first, every page of the
//! pool still a match, the seq and kind filters, paging, and no change when nothing is left out.

mod common;

use common::*;
use ctxlog_event::EventKind;
use ctxlog_recall::{NoArtifacts, Ranking, RecallIndex, SearchOptions};

/// 300 notes that all say "kiwi"; every 50th also says "mango"; every 7th is a user turn.
fn fixture(max_scored: usize) -> (tempfile::TempDir, RecallIndex) {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("recall.sqlite"), "L").unwrap();
    let events: Vec<_> = (1..=300)
        .map(|i| {
            let mango = if i % 50 == 0 { " mango" } else { "" };
            let text = format!("kiwi {}entry {i}{mango}", "kiwi ".repeat((i % 3) as usize));
            if i % 7 == 0 {
                user(i, &text)
            } else {
                note(i, &text)
            }
        })
        .collect();
    index.update(&events, &NoArtifacts).unwrap();
    index.set_ranking(Ranking {
        max_scored,
        ..Ranking::default()
    });
    (dir, index)
}

fn seqs(index: &RecallIndex, query: &str, opts: &SearchOptions) -> Vec<u64> {
    let r = index.search(query, opts).unwrap();
    r.hits.iter().map(|h| h.seq).collect()
}

fn limit(n: usize) -> SearchOptions {
    SearchOptions {
        limit: n,
        ..SearchOptions::default()
    }
}

#[test]
fn rare_words_rank_first_and_common_ones_fill_newest_first() {
    let (_dir, index) = fixture(64);
    // "kiwi" matches 300 pages (more than the budget): only "mango" (6 pages) is scored.
    let hits = seqs(&index, "mango kiwi", &limit(10));
    let mut mango = hits[..6].to_vec();
    mango.sort_unstable();
    assert_eq!(mango, vec![50, 100, 150, 200, 250, 300], "{hits:?}");
    // Then kiwi pages from the newest-first fill (the 200 newest matches), scored 0 before
    // episode credit (which lifts the mango pages' neighbours among them).
    assert_eq!(hits.len(), 10);
    assert!(
        hits[6..].iter().all(|s| *s > 100 && s % 50 != 0),
        "{hits:?}"
    );
}

#[test]
fn a_query_of_common_words_only_lists_newest_matches() {
    let (_dir, index) = fixture(64);
    assert_eq!(
        seqs(&index, "kiwi", &limit(5)),
        vec![300, 299, 298, 297, 296]
    );
    // The seq bound applies to the newest-first fill too.
    let opts = SearchOptions {
        before_seq: Some(100),
        ..limit(3)
    };
    assert_eq!(seqs(&index, "kiwi", &opts), vec![99, 98, 97]);
    // And so does the kind filter.
    let opts = SearchOptions {
        kinds: Some(vec![EventKind::User]),
        ..limit(3)
    };
    assert_eq!(seqs(&index, "kiwi", &opts), vec![294, 287, 280]);
}

#[test]
fn paging_a_bounded_pool_never_repeats_and_ends_with_the_pool() {
    let (_dir, index) = fixture(64);
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let opts = SearchOptions { offset, ..limit(9) };
        let r = index.search("mango kiwi", &opts).unwrap();
        seen.extend(r.hits.iter().map(|h| h.seq));
        match r.next_offset {
            Some(next) => offset = next,
            None => break,
        }
    }
    let mut distinct = seen.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), seen.len(), "a hit repeated");
    assert_eq!(seen.len(), 200, "paging ends with the pool");
}

#[test]
fn nothing_changes_when_every_match_fits_the_budget() {
    let (_dir, bounded) = fixture(1_000_000);
    let (_dir2, default) = fixture(Ranking::default().max_scored);
    for q in ["mango kiwi", "kiwi", "entry 42 mango"] {
        let a = bounded.search(q, &limit(50)).unwrap();
        let b = default.search(q, &limit(50)).unwrap();
        assert_eq!(a.hits, b.hits, "{q}");
    }
    // With the budget, "mango kiwi" ranks the way BM25 over both words does: the mango
    // pages (both words) first.
    let hits = seqs(&default, "mango kiwi", &limit(6));
    let mut top = hits.clone();
    top.sort_unstable();
    assert_eq!(top, vec![50, 100, 150, 200, 250, 300]);
}

#[test]
fn auto_include_candidates_respect_the_bound_and_the_seq() {
    let (_dir, index) = fixture(64);
    let hits = index.candidates("mango kiwi", 120, 4).unwrap();
    let got: Vec<u64> = hits.iter().map(|h| h.seq).collect();
    assert_eq!(got.len(), 4);
    assert_eq!(
        got[..2]
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        [50, 100].into()
    );
    assert!(got[2..].iter().all(|s| *s < 120 && s % 50 != 0), "{got:?}");
}

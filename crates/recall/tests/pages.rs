#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: content lost at page boundaries or hidden in artifacts (docs/design.md#r1-index,
//! docs/design.md#r5-recall-tool). Event text, including the full text of an artifact, is cut into
//! 2,048-character pages that start every 1,920 characters, so a word straddling a boundary is
//! whole in the next page; `seq` paging returns an event's pages in order with `next_offset`;
//! recall output and system markers are never indexed.

mod common;

use common::*;
use ctxlog_event::{ArtifactRef, EventBody, SystemMarker};
use ctxlog_recall::{
    ContextGate, IndexConfig, NoArtifacts, RecallIndex, SearchOptions, SourceError,
};

/// Filler of distinct but unremarkable words, `n` characters long.
fn filler(n: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.chars().count() < n {
        s.push_str(&format!("row{i} "));
        i += 1;
    }
    s.chars().take(n).collect()
}

/// 7,925 characters: "zebrafinch" at chars 1915..1925 (across the 1,920-char stride, whole
/// in page 0 thanks to the overlap) and "quetzalbird" at 2043..2054 (across page 0's end,
/// whole in page 1, which repeats chars 1920..2048).
fn big_artifact_text() -> String {
    let mut text = filler(1914);
    text.push_str(" zebrafinch ");
    text.push_str(&filler(116));
    text.push_str(" quetzalbird ");
    text.push_str(&filler(5870));
    assert_eq!(text.chars().count(), 7925);
    text
}

fn artifacts(a: &ArtifactRef) -> Result<String, SourceError> {
    if a.name == "sha256-big" {
        Ok(big_artifact_text())
    } else {
        Err("missing".into())
    }
}

#[test]
fn a_word_across_a_page_boundary_is_found_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let events = [
        user(1, "run the long job"),
        tool_result(
            2,
            "shell",
            "head … tail",
            Some(artifact("sha256-big", 7925)),
        ),
    ];
    let stats = index.update(&events, &artifacts).unwrap();
    assert_eq!(stats.artifact_failures, 0);
    assert_eq!(stats.pages_written, 1 + 5);
    let position = |word: &str| {
        let text = big_artifact_text();
        text[..text.find(word).unwrap()].chars().count()
    };
    assert_eq!(position("zebrafinch"), 1915);
    assert_eq!(position("quetzalbird"), 2043);
    let r = index
        .search("zebrafinch", &SearchOptions::default())
        .unwrap();
    let hit = &r.hits[0];
    assert_eq!((hit.seq, hit.page), (2, 0), "{r:?}");
    assert!(hit.text.contains("zebrafinch"));
    let r = index
        .search("quetzalbird", &SearchOptions::default())
        .unwrap();
    let hit = &r.hits[0];
    assert_eq!((hit.seq, hit.page), (2, 1), "{r:?}");
    assert_eq!((hit.char_start, hit.char_end), (1920, 3968));
    assert!(hit.text.contains("quetzalbird"));
    assert_eq!(hit.tool.as_deref(), Some("shell"));
    // Without the overlap neither page would hold the whole word.
    assert!(!hit.text.chars().take(128).collect::<String>().is_empty());
    // The inline excerpt was replaced by the full text.
    assert!(
        index
            .search("tail", &SearchOptions::default())
            .unwrap()
            .hits
            .iter()
            .all(|h| h.seq != 2)
    );
}

#[test]
fn seq_paging_returns_pages_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let events = [tool_result(
        1,
        "shell",
        "x",
        Some(artifact("sha256-big", 7925)),
    )];
    index.update(&events, &artifacts).unwrap();
    let mut offset = 0;
    let mut seen = Vec::new();
    loop {
        let opts = SearchOptions {
            seq: Some(1),
            offset,
            limit: 2,
            ..SearchOptions::default()
        };
        let r = index.search("ignored", &opts).unwrap();
        seen.extend(r.hits.iter().map(|h| (h.page, h.char_start, h.pages)));
        match r.next_offset {
            Some(n) => offset = n,
            None => break,
        }
    }
    let expected: Vec<(u32, u64, u32)> = (0..5).map(|p| (p, u64::from(p) * 1920, 5)).collect();
    assert_eq!(seen, expected);
    // Concatenating the pages minus overlaps gives back the text.
    let opts = SearchOptions {
        seq: Some(1),
        limit: 50,
        ..SearchOptions::default()
    };
    let r = index.search("", &opts).unwrap();
    let mut text = String::new();
    for h in &r.hits {
        let skip = if h.page == 0 { 0 } else { 128 };
        text.extend(h.text.chars().skip(skip));
    }
    assert_eq!(text, big_artifact_text());
    // A seq with no pages is an empty result, not an error.
    let opts = SearchOptions {
        seq: Some(99),
        ..SearchOptions::default()
    };
    assert!(index.search("", &opts).unwrap().hits.is_empty());
}

#[test]
fn unreadable_artifacts_fall_back_to_the_excerpt() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let events = [tool_result(
        1,
        "shell",
        "excerpt quokka",
        Some(artifact("sha256-gone", 9)),
    )];
    let stats = index.update(&events, &artifacts).unwrap();
    assert_eq!(stats.artifact_failures, 1);
    assert_eq!(
        index
            .search("quokka", &SearchOptions::default())
            .unwrap()
            .hits
            .len(),
        1
    );
}

#[test]
fn recall_output_and_markers_are_never_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let events = [
        user(1, "where is the wombat"),
        ev(
            2,
            EventBody::ToolCall {
                call_id: "c".into(),
                tool: "recall".into(),
                arguments: serde_json::json!({"query": "wombat platypus"}),
                provider_item: None,
            },
        ),
        tool_result(3, "recall", "platypus page recalled", None),
        ev(
            4,
            EventBody::System {
                marker: SystemMarker::Import {
                    source: "platypus.jsonl".into(),
                },
            },
        ),
    ];
    let stats = index.update(&events, &artifacts).unwrap();
    assert_eq!(stats.events_seen, 4);
    assert_eq!(stats.events_indexed, 1);
    assert_eq!(index.indexed_through(), 4);
    assert!(
        index
            .search("platypus", &SearchOptions::default())
            .unwrap()
            .hits
            .is_empty()
    );
}

mod properties {
    use ctxlog_recall::text::{PAGE_CHARS, PAGE_OVERLAP, PAGE_STRIDE, pages};
    use proptest::prelude::*;

    proptest! {
        /// Pages cover the text exactly: each starts a stride after the previous one, is at most
        /// PAGE_CHARS long, repeats PAGE_OVERLAP chars, and dropping overlaps gives the text back.
        #[test]
        fn pages_tile_any_text(text in "(?s)[a-zé项🚀 \n]{0,6000}") {
            let ps = pages(&text);
            let n = text.chars().count();
            let mut rebuilt = String::new();
            for (i, p) in ps.iter().enumerate() {
                prop_assert_eq!(p.page, i);
                prop_assert_eq!(p.char_start, i * PAGE_STRIDE);
                prop_assert!(p.char_end - p.char_start <= PAGE_CHARS);
                prop_assert_eq!(p.text.chars().count(), p.char_end - p.char_start);
                let skip = if i == 0 { 0 } else { PAGE_OVERLAP };
                rebuilt.extend(p.text.chars().skip(skip));
            }
            prop_assert_eq!(ps.last().map(|p| p.char_end), Some(n));
            prop_assert_eq!(rebuilt, text);
        }
    }
}

#[test]
fn only_an_events_first_page_carries_its_context() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let events = [
        user(1, "please run the pelican job"),
        tool_result(2, "shell", "x", Some(artifact("sha256-big", 7925))),
    ];
    index.update(&events, &artifacts).unwrap();
    let opts = SearchOptions {
        limit: 50,
        ..SearchOptions::default()
    };
    let r = index.search("pelican", &opts).unwrap();
    let pages: Vec<(u64, u32)> = r.hits.iter().map(|h| (h.seq, h.page)).collect();
    assert_eq!(pages, [(1, 0), (2, 0)]);
}

/// The context gate by length: a reply of several pages carries no neighbour's snippet with
/// `ShortCarry`, lends none with `ShortLend`, and neither with `Short`; short turns around it
/// still share theirs. Indexed in two updates, so the gate also holds for neighbours read back
/// from the file.
#[test]
fn the_context_gate_keeps_long_events_out_of_their_neighbours_context() {
    let long_reply = format!("osprey {}", filler(3000));
    let events = [
        user(1, "please plan the pelican migration"),
        assistant(2, &long_reply),
        user(3, "thanks, and the heron cutover"),
        assistant(4, "noted, the heron cutover is friday"),
    ];
    let seqs = |gate: ContextGate, query: &str| -> Vec<u64> {
        let dir = tempfile::tempdir().unwrap();
        let config = IndexConfig {
            context_gate: gate,
            ..IndexConfig::default()
        };
        let mut index = RecallIndex::open_with(dir.path().join("r.sqlite"), "L", config).unwrap();
        index.update(&events[..2], &NoArtifacts).unwrap();
        index.update(&events[2..], &NoArtifacts).unwrap();
        let opts = SearchOptions {
            limit: 50,
            ..SearchOptions::default()
        };
        let mut seqs: Vec<u64> = index
            .search(query, &opts)
            .unwrap()
            .hits
            .iter()
            .map(|h| h.seq)
            .collect();
        seqs.sort_unstable();
        seqs
    };
    // "pelican" is only in seq 1; "osprey" opens the long reply; "cutover" is in seqs 3 and 4.
    assert_eq!(seqs(ContextGate::Every, "pelican"), [1, 2, 3]);
    assert_eq!(seqs(ContextGate::ShortCarry, "pelican"), [1, 3]);
    assert_eq!(seqs(ContextGate::Every, "osprey"), [1, 2, 3, 4]);
    assert_eq!(seqs(ContextGate::ShortLend, "osprey"), [2]);
    assert_eq!(seqs(ContextGate::ShortLend, "pelican"), [1, 2, 3]);
    assert_eq!(seqs(ContextGate::Short, "pelican"), [1, 3]);
    assert_eq!(seqs(ContextGate::Short, "osprey"), [2]);
    assert_eq!(seqs(ContextGate::Short, "cutover"), [3, 4]);
}

/// Page ranges at the edges: empty text, exactly one page, one character more, the 1,920
/// stride and 3,968 (two full pages), in multi-byte text with combining marks and NUL; `seq`
/// paging ends with no `next_offset` on the last page, also when the limit divides the page
/// count exactly.
#[test]
fn page_ranges_at_the_edges_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let lengths = [
        0usize, 1, 1920, 2047, 2048, 2049, 3967, 3968, 3969, 5888, 5889,
    ];
    let alphabet: Vec<char> = "aé项🚀 \u{301}\0".chars().collect();
    let text_of = |n: usize| -> String { (0..n).map(|i| alphabet[i % alphabet.len()]).collect() };
    let events: Vec<_> = lengths
        .iter()
        .enumerate()
        .map(|(i, &n)| user(i as u64 + 1, &text_of(n)))
        .collect();
    index.update(&events, &NoArtifacts).unwrap();
    for (i, &n) in lengths.iter().enumerate() {
        let seq = i as u64 + 1;
        let chars: Vec<char> = text_of(n).chars().collect();
        let expected_pages = if n <= 2048 {
            1
        } else {
            1 + (n - 2048).div_ceil(1920)
        };
        for limit in [1, expected_pages, 50] {
            let mut offset = 0;
            let mut got = Vec::new();
            loop {
                let opts = SearchOptions {
                    seq: Some(seq),
                    offset,
                    limit,
                    ..SearchOptions::default()
                };
                let r = index.search("", &opts).unwrap();
                assert!(!r.hits.is_empty(), "n={n} offset={offset}");
                got.extend(r.hits);
                match r.next_offset {
                    Some(next) => {
                        assert_eq!(next, got.len(), "n={n}");
                        offset = next;
                    }
                    None => break,
                }
            }
            assert_eq!(got.len(), expected_pages, "n={n} limit={limit}");
            for (p, hit) in got.iter().enumerate() {
                let start = p * 1920;
                let end = (start + 2048).min(n);
                assert_eq!((hit.page as usize, hit.pages as usize), (p, expected_pages));
                assert_eq!(
                    (hit.char_start as usize, hit.char_end as usize),
                    (start, end),
                    "n={n} page {p}"
                );
                let slice: String = chars[start..end].iter().collect();
                assert_eq!(hit.text, slice, "n={n} page {p}");
            }
        }
        // Past the last page: nothing, and no next offset.
        let opts = SearchOptions {
            seq: Some(seq),
            offset: expected_pages,
            ..SearchOptions::default()
        };
        let r = index.search("", &opts).unwrap();
        assert!(r.hits.is_empty() && r.next_offset.is_none());
    }
}

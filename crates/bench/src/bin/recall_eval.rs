//! Retrieval evaluation of ctxlog's recall index: the SPEC §1 study rebuilt with our own
//! fixture, a seeded generator, and LoCoMo evidence recall@k against plain FTS5 BM25.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin recall_eval [-- --locomo PATH] [--no-write]
//! ```
//!
//! Prints the tables and rewrites the generated section of `docs/recall.md` (between the
//! `recall_eval` markers; the hand-written part is left alone).

#[path = "../recall_eval/mod.rs"]
mod recall_eval;

fn main() -> anyhow::Result<()> {
    recall_eval::main()
}

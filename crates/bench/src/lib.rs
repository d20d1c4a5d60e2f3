//! Benchmarks and evaluations for ctxlog. Each is a program under `src/bin/`, run in release
//! mode, that measures ctxlog beside the reference it competes with in one run and prints the
//! figures and their ratios. Results, with the command that produced them, are recorded in
//! `docs/benchmarks.md` (and `docs/recall.md` for retrieval quality).
//!
//! | program | measures |
//! |---|---|
//! | `commit_latency` | commit latency with per-commit fsync vs a plain write+fsync loop |
//! | `projection_bench` | projection time on a 10,000-turn conversation vs the naive suffix rule |
//! | `recall_eval` | retrieval quality (the §1 study, a generator, LoCoMo) vs plain FTS5 BM25 |

//! Crash loops (docs/design.md#10-evidence): `ctxlog` killed with SIGKILL at random
//! moments while it commits, erases and builds its recall index. After every kill, every
//! acknowledged commit is in the log with exactly its events, no commit is present in part,
//! `verify` passes, and no byte of an acknowledged erasure's text is left in the conversation's
//! directory.
//!
//! The loop is the bench program `crash_loop` (run it long with
//! `cargo run --release -p ctxlog-bench --bin crash_loop -- --rounds 1000`); this test runs a
//! short one (`CTXLOG_CRASH_ROUNDS`, default 40) on the debug binary so CI exercises it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../../bench/src/bin/crash_loop.rs"]
mod crash_loop;

#[test]
fn acknowledged_commits_survive_sigkill_and_erased_text_is_gone() {
    let rounds = std::env::var("CTXLOG_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(40);
    let seed = std::env::var("CTXLOG_CRASH_SEED")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let cfg = crash_loop::Config {
        ctxlog: env!("CARGO_BIN_EXE_ctxlog").into(),
        rounds,
        seed,
        rounds_per_conversation: 20,
    };
    let s = crash_loop::run(&cfg).unwrap();
    eprintln!(
        "seed {seed}: {} rounds, {} kills, {} commits acked, {} erasures acked, {} checks",
        s.rounds, s.kills, s.commits_acked, s.erasures_acked, s.acked_checks
    );
    assert!(s.failures.is_empty(), "seed {seed}: {:#?}", s.failures);
    assert_eq!(s.rounds, rounds);
}

//! The repair crash loop (docs/design.md#l11-repair): `ctxlog repair --accept-loss` killed
//! with SIGKILL at random moments leaves either the damaged original or the repaired ledger,
//! never a mix, and loses no intact record. The loop is the bench program
//! `repair_crash_loop` (run it long with `cargo run --release -p ctxlog-bench --bin
//! repair_crash_loop -- --rounds 400`); this test runs a short one
//! (`CTXLOG_REPAIR_CRASH_ROUNDS`, default 24) on the debug binary so CI exercises it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../../bench/src/bin/repair_crash_loop.rs"]
mod repair_crash_loop;

#[test]
fn a_killed_repair_leaves_the_original_or_the_repaired_ledger() {
    let rounds = std::env::var("CTXLOG_REPAIR_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(24);
    let seed = std::env::var("CTXLOG_CRASH_SEED")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let cfg = repair_crash_loop::Config {
        ctxlog: env!("CARGO_BIN_EXE_ctxlog").into(),
        rounds,
        seed,
    };
    let s = repair_crash_loop::run(&cfg).unwrap();
    eprintln!(
        "seed {seed}: {} rounds, {} kills ({} left the original, {} the repaired ledger), {} kept records checked, {} intact records lost",
        s.rounds, s.kills, s.left_original, s.left_repaired, s.kept_checked, s.intact_lost
    );
    assert!(s.failures.is_empty(), "seed {seed}: {:#?}", s.failures);
    assert_eq!(s.intact_lost, 0);
    assert_eq!(s.rounds, rounds);
}

//! Seqs start at 1 (docs/design.md#3-concepts): `log --from 0` and `recall --seq 0` are usage
//! errors (exit 2, one line saying so), not a silent shift to seq 1 or an empty answer; seq 1
//! works. The rule is the facade's, so the HTTP API answers 400 `usage` for the same requests
//! (`crates/server/tests/bad_input_catalogue.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};

#[test]
fn seq_zero_is_a_usage_error_for_log_and_recall() {
    let env = Env::new();
    env.commit("chat", "the zebra question", "striped");
    env.ok(&["recall", "chat", "zebra"], b"");
    let before = snapshot(env.root());
    for args in [
        &["log", "chat", "--from", "0"][..],
        &["log", "chat", "--from", "0", "--limit", "1"][..],
        &["recall", "chat", "--seq", "0"][..],
        &["recall", "chat", "zebra", "--seq", "0"][..],
    ] {
        let out = env.run(args, b"");
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("ctxlog: "), "{args:?}: {err}");
        assert!(err.contains("seqs start at 1"), "{args:?}: {err}");
    }
    assert_eq!(before, snapshot(env.root()));

    // Seq 1 is the first event.
    let log = env.ok(&["--json", "log", "chat", "--from", "1"], b"");
    let first: serde_json::Value =
        serde_json::from_slice(log.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["seq"], 1, "{first}");
    let page: serde_json::Value =
        serde_json::from_slice(&env.ok(&["recall", "chat", "--seq", "1"], b"")).unwrap();
    assert_eq!(page["hits"][0]["seq"], 1, "{page}");
}

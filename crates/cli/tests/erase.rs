//! Failure class: erased data that survives somewhere (docs/design.md#e1-erasure) — in the ledger,
//! a sidecar, an artifact, a recovered tail or the recall index — and erase commands that change
//! things they should not (bad ranges, a second writer).
//!
//! Guarantee: after `ctxlog erase`, the erased text is in no byte of any file under the
//! conversation's directory, even after the recall index is rebuilt by a fresh `recall`;
//! surviving turns still project and recall, seqs are preserved, the tombstone shows in
//! `ctxlog log`, `verify` is clean. Bad ranges exit 2 and a second writer exits 4, with every
//! stored byte unchanged; `--all` removes the directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{Env, code, snapshot, stderr};

const MARKER: &str = "QUOKKA-ERASE-5521";

fn files_with(dir: &Path, needle: &str) -> Vec<String> {
    snapshot(dir)
        .into_iter()
        .filter(|(_, bytes)| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        .map(|(path, _)| path.display().to_string())
        .collect()
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap()
}

/// Turn 1 (seqs 1-2), the secret turn (3-6, id `secret`, with a large tool output that
/// becomes an artifact), turn 3 (7-8); the recall index is built and has indexed the marker.
fn setup(env: &Env) {
    env.commit("c", "first question about llamas", "first answer");
    let big = format!("{}{MARKER}{}", "a ".repeat(12_000), " b".repeat(12_000));
    let turn = serde_json::json!({"id": "secret", "events": [
        {"kind": "user", "text": format!("remember {MARKER}")},
        {"kind": "tool_call", "call_id": "t1", "tool": "shell", "arguments": {"cmd": "cat"}},
        {"kind": "tool_result", "call_id": "t1", "tool": "shell", "status": "ok", "text": big},
        {"kind": "assistant", "text": format!("stored {MARKER}")},
    ]});
    env.ok(&["commit", "c"], turn.to_string().as_bytes());
    env.commit("c", "third question about alpacas", "third answer");
    let hits = json(&env.ok(&["recall", "c", MARKER], b""))["hits"].take();
    assert!(
        hits.to_string().contains(MARKER),
        "indexed before erasure: {hits}"
    );
    let dir = env.conv_dir("c");
    let found = files_with(&dir, MARKER);
    assert!(found.iter().any(|f| f.contains("artifacts")), "{found:?}");
    assert!(
        found.iter().any(|f| f.contains("recall.sqlite")),
        "{found:?}"
    );
}

fn assert_gone_and_healthy(env: &Env) {
    let dir = env.conv_dir("c");
    assert_eq!(files_with(&dir, MARKER), Vec::<String>::new());
    // A fresh recall rebuilds the index: still no marker anywhere, and the rest is found.
    let hits = json(&env.ok(&["recall", "c", MARKER], b""))["hits"].take();
    assert!(!hits.to_string().contains(MARKER), "{hits}");
    let hits = json(&env.ok(&["recall", "c", "alpacas"], b""))["hits"].take();
    assert!(hits.to_string().contains("alpacas"), "{hits}");
    assert!(dir.join("recall.sqlite").exists());
    assert_eq!(files_with(&dir, MARKER), Vec::<String>::new());
    let body = env.ok(&["project", "c", "--input", "next"], b"");
    let body = String::from_utf8(body).unwrap();
    assert!(
        body.contains("llamas") && body.contains("alpacas"),
        "{body}"
    );
    assert!(!body.contains(MARKER));
    env.ok(&["verify", "c"], b"");
}

#[test]
fn erasing_a_turn_by_id_removes_it_from_every_file() {
    let env = Env::new();
    setup(&env);
    let out = json(&env.ok(
        &["erase", "c", "--turn", "secret", "--reason", "GDPR request"],
        b"",
    ));
    assert_eq!(out["erased"], serde_json::json!({"from": 3, "to": 6}));
    assert_eq!(out["events"], 4);
    assert_eq!(out["artifacts_deleted"], 1);
    assert_gone_and_healthy(&env);

    // Seqs are preserved and the tombstone is in the log.
    let log = String::from_utf8(env.ok(&["log", "c"], b"")).unwrap();
    assert!(
        log.contains("tombstone") && log.contains("GDPR request"),
        "{log}"
    );
    let log = String::from_utf8(env.ok(&["log", "c", "--json"], b"")).unwrap();
    let seqs: Vec<u64> = log
        .lines()
        .map(|l| json(l.as_bytes())["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 7, 8]);
    let verify = String::from_utf8(env.ok(&["verify", "c"], b"")).unwrap();
    assert!(verify.contains("erased: 4 seqs"), "{verify}");
    // The erased id no longer names a commit; the next commit continues after seq 8.
    let out = env.run(&["erase", "c", "--turn", "secret"], b"");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let receipt = json(&env.ok(&["commit", "c"], br#"{"user":"u","assistant":"a"}"#));
    assert_eq!(receipt["first_seq"], 9);
}

#[test]
fn erasing_a_seq_range_widens_to_whole_turns() {
    let env = Env::new();
    setup(&env);
    let out = json(&env.ok(&["erase", "c", "--seqs", "5-5"], b""));
    assert_eq!(out["erased"], serde_json::json!({"from": 3, "to": 6}));
    assert_eq!(out["requested"], serde_json::json!({"from": 5, "to": 5}));
    assert_gone_and_healthy(&env);
    let log = String::from_utf8(env.ok(&["log", "c"], b"")).unwrap();
    assert!(log.contains("erased on request"), "{log}");
}

#[test]
fn retracting_the_last_event_takes_back_exactly_it() {
    let env = Env::new();
    setup(&env);
    let out = json(&env.ok(&["erase", "c", "--last", "1"], b""));
    assert_eq!(out["erased"], serde_json::json!({"from": 8, "to": 8}));
    assert_eq!(out["events"], 1);
    let log = String::from_utf8(env.ok(&["log", "c"], b"")).unwrap();
    assert!(log.contains("third question about alpacas"), "{log}");
    assert!(!log.contains("third answer"), "{log}");
    assert!(log.contains("erased on request"), "{log}");
    // The turn stays open: its reply can be committed again.
    let reply = r#"{"events":[{"kind":"assistant","text":"a better third answer"}]}"#;
    env.ok(&["commit", "c"], reply.as_bytes());
    let body = env.ok(&["project", "c", "--input", "next"], b"");
    assert!(String::from_utf8_lossy(&body).contains("a better third answer"));
}

#[test]
fn bad_ranges_exit_2_and_change_nothing() {
    let env = Env::new();
    setup(&env);
    let before = snapshot(env.root());
    for args in [
        &["erase", "c", "--seqs", "0-2"][..],
        &["erase", "c", "--seqs", "5-3"],
        &["erase", "c", "--seqs", "7-99"],
        &["erase", "c", "--seqs", "x"],
        &["erase", "c", "--turn", "nope"],
        &["erase", "c"],
        &["erase", "c", "--all", "--seqs", "1-2"],
        &["erase", "c", "--last", "0"],
        &["erase", "c", "--last", "9"],
        &["erase", "c", "--last", "1", "--seqs", "1-2"],
    ] {
        let out = env.run(args, b"");
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    }
    let out = env.run(&["erase", "missing", "--seqs", "1-1"], b"");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(before, snapshot(env.root()));
}

#[test]
fn a_second_writer_makes_erase_exit_4() {
    let env = Env::new();
    setup(&env);
    let store = ctxlog::Store::open(env.root()).unwrap();
    let held = store.conversation("c").unwrap();
    let before = snapshot(env.root());
    for args in [
        &["erase", "c", "--seqs", "1-2"][..],
        &["erase", "c", "--all"],
    ] {
        let out = env.run(args, b"");
        assert_eq!(code(&out), 4, "{args:?}: {}", stderr(&out));
    }
    assert_eq!(before, snapshot(env.root()));
    drop(held);
}

#[test]
fn erase_all_removes_the_directory() {
    let env = Env::new();
    setup(&env);
    env.commit("other", "keep me", "kept");
    let out = json(&env.ok(&["erase", "c", "--all"], b""));
    assert_eq!(out["erased"], "all");
    assert!(!env.conv_dir("c").exists());
    assert_eq!(files_with(env.root(), MARKER), Vec::<String>::new());
    env.ok(&["verify", "other"], b"");
}

/// Regression: `erase --seqs 3-4 --reason 'GDPR ticket 42'` then `erase --seqs 3-4` rewrote the
/// tombstone's reason and time. A tombstone is an audit record
/// (docs/design.md#e6-listing-and-tombstones): erasing an erased range changes no stored byte and
/// says so (`"already_erased":true`, `"events":0`).
#[test]
fn erasing_an_erased_range_again_changes_nothing() {
    let env = Env::new();
    for i in 0..3 {
        env.commit("c", &format!("question {i}"), &format!("answer {i}"));
    }
    let first = json(&env.ok(
        &["erase", "c", "--seqs", "3-4", "--reason", "GDPR ticket 42"],
        b"",
    ));
    assert_eq!(first["already_erased"], false, "{first}");
    let before = snapshot(&env.conv_dir("c"));
    let again = json(&env.ok(&["erase", "c", "--seqs", "3-4"], b""));
    assert_eq!(again["already_erased"], true, "{again}");
    assert_eq!(again["events"], 0, "{again}");
    assert!(
        snapshot(&env.conv_dir("c")) == before,
        "stored bytes changed"
    );
    let log = String::from_utf8(env.ok(&["log", "c"], b"")).unwrap();
    assert!(log.contains("GDPR ticket 42"), "{log}");
}

/// Regression: with the conversation directory a symlink, `erase --all`
/// printed `{"erased":"all"}` and the ledger stayed in the target. It fails now, saying why,
/// prints nothing on stdout, and the target is left as it was.
#[test]
fn erase_all_through_a_symlinked_conversation_fails_and_leaves_the_target() {
    let env = Env::new();
    env.commit("real", &format!("remember {MARKER}"), "ok");
    let target = env.conv_dir("real");
    let before = snapshot(&target);
    std::os::unix::fs::symlink(&target, env.conv_dir("c")).unwrap();
    let out = env.run(&["erase", "c", "--all"], b"");
    assert_ne!(
        code(&out),
        0,
        "erase --all through a symlink reported success"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr(&out).contains("symlink"), "{}", stderr(&out));
    assert!(snapshot(&target) == before);
}

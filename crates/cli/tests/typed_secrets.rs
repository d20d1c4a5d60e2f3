//! Failure class: a secret a user types outside a turn reaching the store — a key pasted
//! into an erase reason (kept in a tombstone that is never rewritten, exported, re-imported),
//! or used as a commit id (stored in clear: ids are never redacted).
//!
//! Guarantee: an erase reason is redacted like a turn's text before the tombstone records it,
//! so the key is in no file of the store and not in its export; a commit id that matches a
//! redaction rule (`--id`, the turn's `"id"`, `erase --turn`) is refused (exit 1; 2 for an
//! erase target) with one line that names the rule but not the id, and no stored byte
//! changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};

const KEY: &str = "sk-proj-Zq8WfakeFAKEfake0123456789abcdefXYZ";

/// True when no file under the store holds the key.
fn key_in_no_file(env: &Env) -> bool {
    snapshot(env.root())
        .values()
        .all(|bytes| !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()))
}

#[test]
fn a_key_typed_into_an_erase_reason_is_in_no_file_and_not_exported() {
    let env = Env::new();
    for i in 0..3 {
        env.commit("chat", &format!("question {i}"), &format!("answer {i}"));
    }
    let reason = format!("pasted {KEY} by mistake");
    env.ok(
        &["erase", "chat", "--seqs", "1-2", "--reason", &reason],
        b"",
    );
    assert!(key_in_no_file(&env));
    let exported = String::from_utf8(env.ok(&["export", "chat"], b"")).unwrap();
    assert!(!exported.contains(KEY), "{exported}");
    assert!(
        exported.contains(r#""reason":"pasted [redacted:openai-key] by mistake""#),
        "{exported}"
    );
}

#[test]
fn a_commit_id_that_looks_like_a_secret_is_refused() {
    let env = Env::new();
    env.ok(
        &["commit", "chat", "--id", "t1"],
        br#"{"user":"q","assistant":"a"}"#,
    );
    let in_json = format!(r#"{{"id":"{KEY}","user":"q2","assistant":"a2"}}"#);
    // Exit 1 for a commit's id (bad input, as an id over the length cap), 2 for an erase
    // target (usage, as an id no commit carries).
    let cases: [(&[&str], &[u8], &str, i32); 4] = [
        (
            &["commit", "chat", "--id", KEY],
            br#"{"user":"q2","assistant":"a2"}"#,
            "use an id that is not a secret",
            1,
        ),
        (
            &["commit", "chat"],
            in_json.as_bytes(),
            "use an id that is not a secret",
            1,
        ),
        (
            &["commit", "newconv", "--id", KEY],
            br#"{"user":"q"}"#,
            "erase by commit id, replays and imports",
            1,
        ),
        (&["erase", "chat", "--turn", KEY], b"", "--seqs", 2),
    ];
    for (args, stdin, hint, exit) in cases {
        let before = snapshot(env.root());
        let out = env.run(args, stdin);
        let msg = stderr(&out);
        assert_eq!(code(&out), exit, "{args:?}: {msg}");
        assert!(
            msg.starts_with("ctxlog: ") && msg.trim_end().lines().count() == 1,
            "{msg}"
        );
        assert!(
            msg.contains("looks like a secret") && msg.contains("openai-key"),
            "{msg}"
        );
        assert!(msg.contains(hint), "{hint}: {msg}");
        assert!(!msg.contains(&KEY[8..]), "the message echoes the id: {msg}");
        assert_eq!(
            before,
            snapshot(env.root()),
            "{args:?}: stored bytes changed"
        );
    }
    assert!(!env.conv_dir("newconv").exists());
    assert!(key_in_no_file(&env));
}

//! A corrupt ledger is exit 5 whichever command meets it (docs/design.md#i2-command-line): `log`
//! and `verify`, but also `project`, `recall` and `reindex`, which read the ledger through the
//! projector and the recall index. Nothing is changed by any of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};

#[test]
fn every_reader_of_a_corrupt_record_exits_5() {
    let env = Env::new();
    for i in 0..4 {
        env.commit(
            "chat",
            &format!("question {i} alpha"),
            &format!("answer {i}"),
        );
    }
    let log = env.conv_dir("chat").join("ledger.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes.windows(10).position(|w| w == b"question 1").unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(&log, &bytes).unwrap();
    // The recall index is a disposable cache and may be created; the ledger's files may not
    // change.
    let ledger_files = || {
        let mut files = snapshot(env.root());
        files.retain(|path, _| !path.ends_with("recall.sqlite"));
        files
    };
    let before = ledger_files();

    for args in [
        &["log", "chat"][..],
        &["verify", "chat"],
        &["project", "chat", "--input", "hi", "--max-bytes", "100000"],
        &["recall", "chat", "alpha"],
        &["reindex", "chat"],
    ] {
        let out = env.run(args, b"");
        assert_eq!(code(&out), 5, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("seq 3"),
            "{args:?} names the seq: {}",
            stderr(&out)
        );
    }
    assert!(before == ledger_files(), "a ledger file was changed");
}

/// Regression: `truncate -s 700 ledger.log` on a 5-commit ledger made
/// `verify` exit 0 ("torn tail … the next writer cuts them"), `log` show 8 events and the next
/// commit get seq 9, which `ledger.idx` had recorded as committed. The sidecars prove seqs
/// 9-10 were acknowledged: every command exits 5 naming them, and nothing changes.
#[test]
fn a_log_truncated_inside_acknowledged_commits_exits_5_everywhere() {
    let env = Env::new();
    for i in 0..5 {
        env.commit("chat", &format!("question {i}"), &format!("answer {i}"));
    }
    let log = env.conv_dir("chat").join("ledger.log");
    let len = std::fs::metadata(&log).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    file.set_len(len - 40).unwrap();
    drop(file);
    let before = snapshot(&env.conv_dir("chat"));
    for (args, stdin) in [
        (&["verify", "chat"][..], &b""[..]),
        (&["log", "chat"], b""),
        (&["commit", "chat"], br#"{"user":"next","assistant":"x"}"#),
    ] {
        let out = env.run(args, stdin);
        assert_eq!(code(&out), 5, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("seqs 9-10"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(
        snapshot(&env.conv_dir("chat")) == before,
        "a refused command changed files"
    );
}

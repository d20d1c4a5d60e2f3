//! A crash mid-commit leaves a torn tail. `verify` reports it without touching it; the next
//! writer cuts it, saves it under `recovered/` and carries on; `verify` then names the saved
//! tail. Every acknowledged commit is still there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;

use common::{Env, code, stderr};

#[test]
fn a_torn_tail_is_reported_cut_saved_and_named() {
    let env = Env::new();
    env.commit("chat", "first", "one");
    env.commit("chat", "second", "two");
    let log = env.conv_dir("chat").join("ledger.log");
    let good = std::fs::read(&log).unwrap();
    // Half of a third commit: the start of a record header, then nothing.
    let torn = &good[good.len() - 30..];
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(torn)
        .unwrap();

    // The ledger is intact, the torn tail a leftover the next writer cuts: exit 8.
    let out = env.run(&["verify", "chat"], b"");
    assert_eq!(code(&out), 8, "{}", stderr(&out));
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.contains("torn tail: 30 bytes"), "{report}");
    assert_eq!(
        std::fs::read(&log).unwrap().len(),
        good.len() + 30,
        "verify writes nothing"
    );

    env.commit("chat", "third", "three");
    let report = String::from_utf8(env.ok(&["verify", "chat"], b"")).unwrap();
    assert!(report.starts_with("ok: 6 events"), "{report}");
    assert!(
        report.contains("recovered: 1 file(s) kept for forensics"),
        "{report}"
    );
    let saved = std::fs::read_dir(env.conv_dir("chat").join("recovered")).unwrap();
    let saved: Vec<_> = saved
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(saved, vec![torn.to_vec()], "the cut bytes are kept exactly");

    let log = String::from_utf8(env.ok(&["log", "chat"], b"")).unwrap();
    for text in ["first", "second", "third"] {
        assert!(log.contains(text), "{log}");
    }
}

//! A corrupt ledger is exit 5 whichever command meets it (SPEC I2): `log` and `verify`, but
//! also `project`, `recall` and `reindex`, which read the ledger through the projector and
//! the recall index. Nothing is changed by any of them.

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

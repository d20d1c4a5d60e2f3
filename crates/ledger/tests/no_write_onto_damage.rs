//! Failure class: a writer appending onto a log damaged under it (docs/design.md#l11-repair).
//!
//! Guarantee: before each append the writer checks what it can see without a full scan: the
//! log ends where its last commit ended (not cut, nothing appended by anyone else) and that
//! commit's last record checks out. Otherwise the commit is refused as corruption and nothing
//! is written: no commit lands past the end of a cut log (a zero-filled hole) or after junk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxlog_ledger::{Error, EventBody, Ledger, NewCommit, Options};

fn turn(user: &str, assistant: &str) -> NewCommit {
    NewCommit::new(vec![
        EventBody::User {
            text: user.into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: assistant.into(),
            provider_item: None,
        },
    ])
}

fn open(dir: &std::path::Path) -> Ledger {
    Ledger::open(dir, &Options::default()).unwrap().0
}

/// A writer over `dir` holding three commits ("question i" / "answer i").
fn three_commits(dir: &std::path::Path) -> Ledger {
    let mut ledger = open(dir);
    for i in 0..3 {
        ledger
            .commit(&turn(&format!("question {i}"), &format!("answer {i}")))
            .unwrap();
    }
    ledger
}

/// Opens a writer over three commits and hands it, and the log's path, to `damage`; then a
/// fourth commit must be refused as corruption, and the log must be as `damage` left it.
fn refused_after(damage: impl FnOnce(&std::path::Path)) -> Error {
    let tmp = tempfile::tempdir().unwrap();
    let mut ledger = three_commits(tmp.path());
    let log = tmp.path().join("ledger.log");
    damage(&log);
    let before = std::fs::read(&log).unwrap();
    let err = ledger.commit(&turn("one more", "reply")).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert_eq!(std::fs::read(&log).unwrap(), before, "nothing was written");
    // And again: the refusal holds for the next commit too.
    let err2 = ledger.commit(&turn("and more", "reply")).unwrap_err();
    assert!(matches!(err2, Error::Corrupt { .. }), "{err2}");
    err
}

#[test]
fn a_log_cut_under_the_writer_refuses_the_next_commit() {
    let err = refused_after(|log| {
        let len = std::fs::metadata(log).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(log).unwrap();
        file.set_len(len - 30).unwrap();
    });
    assert!(err.to_string().contains("cut under the writer"), "{err}");
}

#[test]
fn bytes_appended_by_someone_else_refuse_the_next_commit() {
    let err = refused_after(|log| {
        let mut bytes = std::fs::read(log).unwrap();
        bytes.extend_from_slice(b"junk from elsewhere");
        std::fs::write(log, bytes).unwrap();
    });
    assert!(err.to_string().contains("something else wrote"), "{err}");
}

#[test]
fn a_damaged_last_record_refuses_the_next_commit() {
    let err = refused_after(|log| {
        let mut bytes = std::fs::read(log).unwrap();
        let at = bytes.windows(8).rposition(|w| w == b"answer 2").unwrap();
        bytes[at] ^= 0x01;
        std::fs::write(log, bytes).unwrap();
    });
    assert!(err.to_string().contains("seq 6"), "{err}");
}

/// What the writer cannot see without a full scan: a flipped byte in an earlier record. Reads
/// of it and `verify` find it; the commit goes through (docs/ledger-format.md).
#[test]
fn a_damaged_middle_record_is_not_seen_by_the_append_check() {
    let tmp = tempfile::tempdir().unwrap();
    let mut ledger = three_commits(tmp.path());
    let log = tmp.path().join("ledger.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes.windows(10).position(|w| w == b"question 1").unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(&log, bytes).unwrap();
    ledger.commit(&turn("one more", "reply")).unwrap();
    let err = ctxlog_ledger::verify(tmp.path()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { seq: Some(3), .. }), "{err}");
}

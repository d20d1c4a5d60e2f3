//! Failure class: damage at the end of the log that takes acknowledged commits with it. Once,
//! `truncate -s 700 ledger.log` on a 5-commit ledger, or one flipped bit in the last record,
//! looked like a torn tail: `verify` said the next writer would cut it, the writer cut it, and
//! the next commit was acknowledged with a seq that had been acknowledged before.
//!
//! Guarantee: a torn write can only cut what was never acknowledged. The sidecars are
//! written only after the log's sync, so an intact `ledger.idx` end-of-commit entry (or
//! `commits.idx` entry) proves its commit was acknowledged. When the log's complete commits
//! end before it, the writer's open, a reader's open and `verify` all fail closed with
//! `Error::Corrupt` naming the missing seqs; nothing is cut, and no seq is reused. Truncating
//! the log at every offset never loses an acknowledged commit silently.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use ctxlog_ledger::{Error, Ledger, LedgerRead, NewCommit, Options, Reader};

/// Five commits (seqs 1-10), the third with an id; the sidecars cover all of them.
fn five_commits(dir: &Path) -> u64 {
    let (mut ledger, _) = Ledger::open(dir, &Options::default()).unwrap();
    for i in 0..5 {
        let mut c = turn(i);
        if i == 2 {
            c.id = Some("third".into());
        }
        ledger.commit(&c).unwrap();
    }
    ledger.last_seq()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn is_corrupt<T>(r: &Result<T, Error>) -> bool {
    matches!(r, Err(Error::Corrupt { .. }))
}

#[test]
fn truncation_at_every_offset_never_silently_loses_an_acknowledged_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let acked = five_commits(&base);
    let len = std::fs::metadata(base.join("ledger.log")).unwrap().len();
    for cut in 0..=len {
        let dir = tmp.path().join(format!("cut-{cut}"));
        copy_dir(&base, &dir);
        let log = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("ledger.log"))
            .unwrap();
        log.set_len(cut).unwrap();
        drop(log);
        let verified = ctxlog_ledger::verify(&dir);
        let read = Reader::open(&dir);
        let opened = Ledger::open(&dir, &Options::default());
        assert_eq!(
            is_corrupt(&verified),
            is_corrupt(&opened),
            "cut at {cut}: verify {verified:?} and the writer's open {:?} disagree",
            opened.as_ref().map(|(_, r)| r)
        );
        assert_eq!(
            is_corrupt(&read),
            is_corrupt(&opened),
            "cut at {cut}: reader"
        );
        match opened {
            Err(Error::Corrupt { reason, .. }) => {
                assert!(
                    reason.contains(&format!("-{acked}")),
                    "cut at {cut}: {reason}"
                );
            }
            Err(e) => panic!("cut at {cut}: {e}"),
            Ok((mut ledger, _)) => {
                assert!(ledger.last_seq() >= acked, "cut at {cut}: lost commits");
                assert_eq!(ledger.events(1..=acked).unwrap().len() as u64, acked);
                let (a, b) = ledger.commit_seqs("third").unwrap().unwrap();
                assert_eq!(ledger.events(a..=b).unwrap().len() as u64, b - a + 1);
                let next = ledger.commit(&turn(99)).unwrap();
                assert_eq!(next.first_seq, acked + 1, "cut at {cut}: a seq reused");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// The reproducer of the issue: `truncate -s 700` on a 5-commit ledger.
#[test]
fn a_log_cut_inside_acknowledged_commits_fails_closed_and_keeps_its_seqs() {
    let tmp = tempfile::tempdir().unwrap();
    five_commits(tmp.path());
    let log = std::fs::OpenOptions::new()
        .write(true)
        .open(tmp.path().join("ledger.log"))
        .unwrap();
    log.set_len(700).unwrap();
    drop(log);
    let before = snapshot_dir(tmp.path());
    let err = ctxlog_ledger::verify(tmp.path()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("-10"), "{err}");
    let err = Ledger::open(tmp.path(), &Options::default()).err().unwrap();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(
        snapshot_dir(tmp.path()) == before,
        "a refused open changed the directory"
    );
}

/// One flipped bit in the last record: a checksum failure with nothing after it looks torn,
/// but `ledger.idx` proves the commit was acknowledged. `verify` fails closed; the writer
/// either fails closed too or (when the index still matches the record's header and open
/// does not read the record) keeps it: nothing is cut, no seq is reused, and reading the
/// damaged event fails rather than serving it.
#[test]
fn a_flipped_bit_in_the_last_acknowledged_record_fails_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    five_commits(&base);
    let mut ledger_bytes = std::fs::read(base.join("ledger.log")).unwrap();
    let len = ledger_bytes.len();
    let last_record = Reader::open(&base).unwrap().record_len(10).unwrap() as usize;
    for at in (len - last_record..len).step_by(7) {
        let dir = tmp.path().join(format!("flip-{at}"));
        copy_dir(&base, &dir);
        ledger_bytes[at] ^= 0x10;
        std::fs::write(dir.join("ledger.log"), &ledger_bytes).unwrap();
        ledger_bytes[at] ^= 0x10;
        let verified = ctxlog_ledger::verify(&dir);
        assert!(is_corrupt(&verified), "bit at {at}: {verified:?}");
        match Ledger::open(&dir, &Options::default()) {
            Err(Error::Corrupt { .. }) => {}
            Err(e) => panic!("bit at {at}: {e}"),
            Ok((mut ledger, recovery)) => {
                assert_eq!(
                    (recovery.bytes_cut, ledger.last_seq()),
                    (0, 10),
                    "bit at {at}"
                );
                assert!(
                    ledger.events(10..=10).is_err(),
                    "bit at {at}: damaged event served"
                );
                match ledger.commit(&turn(9)) {
                    Ok(r) => assert_eq!(r.first_seq, 11, "bit at {at}: a seq reused"),
                    Err(e) => assert!(matches!(e, Error::Corrupt { .. }), "bit at {at}: {e}"),
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A commit torn before it was acknowledged (the process died inside its write: no sidecar
/// entry for it) is still cut as before.
#[test]
fn an_unacknowledged_torn_commit_is_still_cut() {
    let tmp = tempfile::tempdir().unwrap();
    five_commits(tmp.path());
    let c: NewCommit = turn(5);
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(tmp.path().join("ledger.log"))
        .unwrap();
    std::io::Write::write_all(&mut log, &serde_json::to_vec(&c.events).unwrap()[..20]).unwrap();
    drop(log);
    let report = ctxlog_ledger::verify(tmp.path()).unwrap();
    assert_eq!(report.torn_tail_bytes, 20);
    let (ledger, recovery) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    assert_eq!((recovery.bytes_cut, ledger.last_seq()), (20, 10));
}

/// Regression: with the log torn inside acknowledged commits and `ledger.idx` and
/// `commits.idx` zeroed, `turns.idx` (valid header, this ledger id) still listed the user
/// events of the cut commits, yet `verify` passed and the writer cut them. Every surviving
/// witness of acknowledged seqs counts: `turns.idx` and `notes.idx` too.
#[test]
fn turns_idx_alone_is_a_witness_of_acknowledged_seqs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let acked = five_commits(dir);
    let log = std::fs::read(dir.join("ledger.log")).unwrap();
    let cut = log.windows(10).position(|w| w == b"question 3").unwrap();
    std::fs::write(dir.join("ledger.log"), &log[..cut]).unwrap();
    for side in ["ledger.idx", "commits.idx"] {
        let len = std::fs::metadata(dir.join(side)).unwrap().len();
        std::fs::write(dir.join(side), vec![0u8; len as usize]).unwrap();
    }
    let verify = ctxlog_ledger::verify(dir);
    assert!(is_corrupt(&verify), "{verify:?}");
    let open = Ledger::open(dir, &Options::default());
    assert!(
        is_corrupt(&open),
        "the writer cut acknowledged seqs up to {acked}"
    );
    assert_eq!(std::fs::read(dir.join("ledger.log")).unwrap(), &log[..cut]);
}

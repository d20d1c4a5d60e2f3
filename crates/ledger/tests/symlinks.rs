//! Symlinks planted in a conversation directory.
//!
//! Someone who can write into a conversation directory plants a symlink where ctxlog is about
//! to create a temporary or cache file (`artifacts/.tmp-<name>`, `ledger.log.tmp`,
//! `*.idx.tmp`, `recovered/`, `recovered/tail-*`). ctxlog creates such files exclusively and
//! never follows a symlink to them (`O_NOFOLLOW`, `O_EXCL` after removing a stale entry), and
//! refuses a symlink where it expects a directory: the file the symlink points to is never
//! written, and the operation either succeeds without following or fails with a clear error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use ctxlog_ledger::{DirStorage, Storage};
use ctxlog_ledger::{Ledger, LedgerRead, Options, artifact_name, storage::OpenMode};

const VICTIM: &[u8] = b"precious bytes outside the conversation\n";

/// A conversation `conv` and a victim file outside it.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let conv = tmp.path().join("conv");
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, VICTIM).unwrap();
    (tmp, conv, victim)
}

fn plant(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

fn assert_untouched(victim: &Path) {
    assert!(
        std::fs::read(victim).unwrap() == VICTIM,
        "the outside file was written"
    );
}

fn big(n: usize) -> String {
    "artifact text line\n".repeat(n)
}

#[test]
fn a_symlink_at_an_artifact_temporary_is_not_followed() {
    let (_tmp, conv, victim) = setup();
    let mut o = Options::default();
    o.artifact_threshold(1024);
    let (mut ledger, _) = Ledger::open(&conv, &o).unwrap();
    ledger
        .commit(&commit(vec![user("go"), call("c1")]))
        .unwrap();
    let text = big(500);
    std::fs::create_dir_all(conv.join("artifacts")).unwrap();
    let name = artifact_name(text.as_bytes());
    plant(
        &victim,
        &conv.join("artifacts").join(format!(".tmp-{name}")),
    );
    let receipt = ledger.commit(&commit(vec![result("c1", &text)]));
    assert_untouched(&victim);
    if receipt.is_ok() {
        let stored = conv.join("artifacts").join(&name);
        assert!(!std::fs::symlink_metadata(&stored).unwrap().is_symlink());
        assert!(std::fs::read(stored).unwrap() == text.as_bytes());
    }
}

#[test]
fn a_symlink_at_the_log_temporary_is_not_followed_by_erase() {
    let (_tmp, conv, victim) = setup();
    let (mut ledger, _) = Ledger::open(&conv, &Options::default()).unwrap();
    for i in 0..3 {
        ledger.commit(&turn(i)).unwrap();
    }
    plant(&victim, &conv.join("ledger.log.tmp"));
    let erased = ledger.erase(3..=4, "test");
    assert_untouched(&victim);
    let log = std::fs::symlink_metadata(conv.join("ledger.log")).unwrap();
    assert!(!log.is_symlink(), "ledger.log became a symlink");
    if erased.is_ok() {
        drop(ledger);
        assert!(ctxlog_ledger::verify(&conv).unwrap().is_clean());
    }
}

#[test]
fn a_symlink_at_a_sidecar_temporary_is_not_followed_by_a_rebuild() {
    for sidecar in ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"] {
        let (_tmp, conv, victim) = setup();
        let (mut ledger, _) = Ledger::open(&conv, &Options::default()).unwrap();
        ledger.commit(&turn(1)).unwrap();
        drop(ledger);
        std::fs::remove_file(conv.join("ledger.idx")).unwrap();
        plant(&victim, &conv.join(format!("{sidecar}.tmp")));
        let opened = Ledger::open(&conv, &Options::default());
        assert_untouched(&victim);
        if let Ok((ledger, _)) = opened {
            assert_eq!(ledger.last_seq(), 2, "{sidecar}");
        }
    }
}

/// A log with a torn tail: open cuts it aside under `recovered/`.
fn torn(conv: &Path) {
    let (mut ledger, _) = Ledger::open(conv, &Options::default()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    drop(ledger);
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(conv.join("ledger.log"))
        .unwrap();
    std::io::Write::write_all(&mut log, b"half a record").unwrap();
}

#[test]
fn a_symlinked_recovered_directory_is_refused_by_recovery() {
    let (tmp, conv, victim) = setup();
    torn(&conv);
    let outside = tmp.path().join("outside-dir");
    std::fs::create_dir(&outside).unwrap();
    plant(&outside, &conv.join("recovered"));
    let opened = Ledger::open(&conv, &Options::default());
    assert_untouched(&victim);
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "wrote outside"
    );
    let err = opened
        .err()
        .expect("recovery through a symlinked recovered/ must fail");
    assert!(err.to_string().contains("recovered"), "{err}");
}

/// The tail's name carries the clock, so the storage-level guarantee is tested directly: a
/// file created fresh is never a symlink that was already there.
#[test]
fn creating_a_fresh_file_never_follows_a_planted_symlink() {
    let (tmp, conv, victim) = setup();
    std::fs::create_dir_all(conv.join("recovered")).unwrap();
    let st = DirStorage::new(&conv);
    for name in ["recovered/tail-64-1.bin", "x.tmp"] {
        plant(&victim, &conv.join(name));
        let err = st
            .open(name, OpenMode::CreateNew)
            .err()
            .expect("must refuse");
        assert!(!err.to_string().is_empty());
        assert!(
            st.open(name, OpenMode::Write).is_err(),
            "{name}: followed for writing"
        );
        assert!(
            st.open(name, OpenMode::Create).is_err(),
            "{name}: followed for writing"
        );
        assert_untouched(&victim);
    }
    // A symlink where a directory is expected is refused.
    let outside = tmp.path().join("outside-dir");
    std::fs::create_dir(&outside).unwrap();
    plant(&outside, &conv.join("artifacts"));
    assert!(st.create_dir("artifacts").is_err());
    assert!(st.create_dir("artifacts/sub").is_err());
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

/// The writer lock file is never created or opened through a symlink either.
#[test]
fn a_symlink_at_the_lock_file_is_refused() {
    let (tmp, conv, victim) = setup();
    std::fs::create_dir_all(&conv).unwrap();
    let target = tmp.path().join("would-be-created");
    plant(&target, &conv.join("lock"));
    let err = Ledger::open(&conv, &Options::default()).err().unwrap();
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(
        !target.exists(),
        "a file was created outside the conversation"
    );
    assert_untouched(&victim);
}

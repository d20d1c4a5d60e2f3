//! The rest of the symlink and path catalogue (`docs/reliability.md`): a symlink
//! planted at a file ctxlog keeps (not only its temporaries) — `ledger.log`, each sidecar,
//! `erase.pending`, a stored artifact — is never followed for writing: the operation refuses
//! it with an error naming the path, or replaces the link itself, and the file it points at
//! keeps every byte. (`symlinks.rs` covers the temporaries, `recovered/` and `lock`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use ctxlog_ledger::{Ledger, LedgerRead, Options, Reader};

const VICTIM: &[u8] = b"precious bytes outside the conversation\n";

/// A conversation `conv` with two committed turns, and a victim file outside it.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let conv = tmp.path().join("conv");
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, VICTIM).unwrap();
    let (mut ledger, _) = Ledger::open(&conv, &Options::default()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    ledger.commit(&turn(2)).unwrap();
    (tmp, conv, victim)
}

/// Replaces `name` in `conv` with a symlink to `target`.
fn replace_with_link(conv: &Path, name: &str, target: &Path) {
    let path = conv.join(name);
    if path.exists() {
        std::fs::remove_file(&path).unwrap();
    }
    std::os::unix::fs::symlink(target, path).unwrap();
}

fn assert_untouched(victim: &Path, what: &str) {
    assert!(
        std::fs::read(victim).unwrap() == VICTIM,
        "{what}: the outside file was written"
    );
}

/// `ledger.log` a symlink (to a victim file, or to a copy of the real log): the writer and
/// the reader refuse it; nothing is appended through it.
#[test]
fn a_symlinked_log_is_refused_by_the_writer_and_the_reader() {
    let (tmp, conv, victim) = setup();
    replace_with_link(&conv, "ledger.log", &victim);
    let err = Ledger::open(&conv, &Options::default()).err().unwrap();
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(Reader::open(&conv).is_err());
    assert_untouched(&victim, "ledger.log -> victim");

    // A link to a valid ledger elsewhere is refused too: appending would write there.
    let (tmp2, conv2, _) = setup();
    let real = tmp.path().join("real-ledger.log");
    std::fs::rename(conv2.join("ledger.log"), &real).unwrap();
    let before = std::fs::read(&real).unwrap();
    replace_with_link(&conv2, "ledger.log", &real);
    if let Ok((mut ledger, _)) = Ledger::open(&conv2, &Options::default()) {
        let _ = ledger.commit(&turn(3));
    }
    assert_eq!(
        std::fs::read(&real).unwrap(),
        before,
        "appended through the link"
    );
    drop(tmp2);
}

/// Each sidecar a symlink: opening (which may rebuild it) and committing never write
/// through it; the ledger still reads every event or fails with an error.
#[test]
fn a_symlinked_sidecar_is_never_written_through() {
    for sidecar in ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"] {
        let (_tmp, conv, victim) = setup();
        replace_with_link(&conv, sidecar, &victim);
        if let Ok((mut ledger, _)) = Ledger::open(&conv, &Options::default()) {
            assert_eq!(ledger.last_seq(), 4, "{sidecar}");
            let _ = ledger.commit(&turn(3));
            assert!(ledger.events(1..=4).is_ok(), "{sidecar}");
        }
        assert_untouched(&victim, sidecar);
        if let Ok(reader) = Reader::open(&conv) {
            let _ = reader.events(1..=reader.last_seq());
        }
        assert_untouched(&victim, sidecar);
    }
}

/// `erase.pending` planted as a symlink: an erasure creates its marker exclusively (the link
/// is removed first, never followed), and a writer open that finds a planted marker link
/// does not write through it.
#[test]
fn a_symlinked_erase_marker_is_never_written_through() {
    let (_tmp, conv, victim) = setup();
    replace_with_link(&conv, "erase.pending", &victim);
    if let Ok((mut ledger, _)) = Ledger::open(&conv, &Options::default()) {
        let _ = ledger.erase(1..=2, "test");
    }
    assert_untouched(&victim, "erase.pending");
    let log = std::fs::symlink_metadata(conv.join("ledger.log")).unwrap();
    assert!(!log.is_symlink());
}

/// A stored artifact replaced by a symlink: a commit of the same content (which would reuse
/// it) and an erasure that deletes it never write through it.
#[test]
fn a_symlinked_artifact_is_never_written_through() {
    let (_tmp, conv, victim) = setup();
    let mut o = Options::default();
    o.artifact_threshold(1024);
    let text = "artifact text line\n".repeat(500);
    let (mut ledger, _) = Ledger::open(&conv, &o).unwrap();
    ledger
        .commit(&commit(vec![user("go"), call("c1")]))
        .unwrap();
    ledger.commit(&commit(vec![result("c1", &text)])).unwrap();
    drop(ledger);
    let name = ctxlog_ledger::artifact_name(text.as_bytes());
    replace_with_link(&conv.join("artifacts"), &name, &victim);
    let (mut ledger, _) = Ledger::open(&conv, &o).unwrap();
    let _ = ledger.commit(&commit(vec![user("again"), call("c2")]));
    let _ = ledger.commit(&commit(vec![result("c2", &text)]));
    assert_untouched(&victim, "artifact reuse");
    let last = ledger.last_seq();
    let _ = ledger.erase(1..=last, "test");
    assert_untouched(&victim, "artifact erase");
}

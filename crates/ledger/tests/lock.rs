//! Failure class: two writers on one conversation (in one process or in two).
//!
//! Guarantee (docs/design.md#l3-one-writer): the first `Ledger::open` holds an OS lock for the
//! writer's lifetime; a second open gets `Error::Locked` at once (or after `lock_wait`), from this
//! process or another one, and writes nothing. Readers take no lock, never block the writer, and
//! see only complete commits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use ctxlog_ledger::{Error, Ledger, LedgerRead, Options, Reader};

const CHILD_ENV: &str = "CTXLOG_LEDGER_LOCK_CHILD_DIR";

/// The child process of the tests below, not a test of its own: ignored unless they run it
/// (with `--ignored` and its environment).
#[test]
#[ignore = "subprocess entry point, run by the tests in this file"]
fn lock_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    match Ledger::open(Path::new(&dir), &Options::default()) {
        Err(Error::Locked { .. }) => println!("RESULT locked"),
        Ok((ledger, _)) => println!("RESULT opened {}", ledger.last_seq()),
        Err(e) => println!("RESULT error {e}"),
    }
}

fn child_result(dir: &Path) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout
        .lines()
        .find_map(|l| l.find("RESULT ").map(|at| l[at + 7..].to_string()))
        .unwrap_or_default()
}

#[test]
fn a_writer_in_another_process_gets_locked_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    let before = snapshot_dir(tmp.path());
    assert_eq!(child_result(tmp.path()), "locked");
    assert_eq!(
        snapshot_dir(tmp.path()),
        before,
        "the refused writer wrote nothing"
    );
    drop(ledger);
    assert_eq!(child_result(tmp.path()), "opened 2");
}

#[test]
fn a_second_writer_in_this_process_gets_locked_then_may_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let (ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    let t = Instant::now();
    let err = Ledger::open(tmp.path(), &Options::default()).err().unwrap();
    assert!(matches!(err, Error::Locked { .. }), "{err:?}");
    let mut wait = Options::default();
    wait.lock_wait(Some(Duration::from_millis(50)));
    assert!(matches!(
        Ledger::open(tmp.path(), &wait).err().unwrap(),
        Error::Locked { .. }
    ));
    assert!(t.elapsed() >= Duration::from_millis(50), "lock_wait waited");
    let holder = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(ledger);
    });
    wait.lock_wait(Some(Duration::from_secs(30)));
    let (ledger, _) = Ledger::open(tmp.path(), &wait).unwrap();
    holder.join().unwrap();
    drop(ledger);
}

#[test]
fn in_memory_storage_is_locked_the_same_way() {
    let (_m, s) = mem();
    let (ledger, _) = Ledger::open_with(s.clone(), &Options::default()).unwrap();
    assert!(matches!(
        Ledger::open_with(s.clone(), &Options::default())
            .err()
            .unwrap(),
        Error::Locked { .. }
    ));
    drop(ledger);
    assert!(Ledger::open_with(s, &Options::default()).is_ok());
}

#[test]
fn readers_take_no_lock_and_see_complete_commits_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    let mut reader = Reader::open(tmp.path()).unwrap();
    assert_eq!(reader.last_seq(), 2);
    ledger.commit(&turn(2)).unwrap();
    assert_eq!(
        reader.last_seq(),
        2,
        "a reader is a snapshot until refreshed"
    );
    reader.refresh().unwrap();
    assert_eq!(reader.last_seq(), 4);
    assert_eq!(reader.user_seqs(), &[1, 3]);
    // A half-written commit (as a concurrent append looks mid-write) stays invisible.
    let log = tmp.path().join("ledger.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let len = bytes.len();
    // The sidecars as they are mid-write: a writer appends to them only after the log.
    let copy = tempfile::tempdir().unwrap();
    for name in ctxlog_ledger::format::names::LEDGER_FILES {
        std::fs::copy(tmp.path().join(name), copy.path().join(name)).unwrap();
    }
    ledger.commit(&turn(3)).unwrap();
    let full = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(&full[len..len + (full.len() - len) / 2]);
    std::fs::write(copy.path().join("ledger.log"), &bytes).unwrap();
    let partial = Reader::open(copy.path()).unwrap();
    assert_eq!(partial.last_seq(), 4);
    assert_eq!(
        std::fs::read(copy.path().join("ledger.log")).unwrap(),
        bytes,
        "readers never write"
    );
    reader.refresh().unwrap();
    assert_eq!(reader.last_seq(), 6);
    assert_eq!(reader.event(5).unwrap().body, user("question 3"));
}

/// A writer's lock is free the moment the writer is dropped, even while another thread is
/// spawning child processes: a child holds a copy of the lock's file descriptor from its fork
/// until its `exec`, and the lock belongs to the open file, so merely closing ours left the
/// lock held for that moment. Measured before the fix, beside a thread running `true` in a
/// loop: 274 of these 300 reopens found the conversation locked (49 of 300 through
/// `ctxlog::Store`); after it, none.
#[test]
fn a_dropped_writer_lets_go_at_once_while_children_are_spawned() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    // Nothing in the scope panics, so the spawning thread is always told to stop.
    let outcomes: Vec<Result<(), Error>> = std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let _ = Command::new("true").status();
            }
        });
        let outcomes = (0..300)
            .map(|i| {
                let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default())?;
                ledger.commit(&turn(i)).map(drop)
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        outcomes
    });
    let locked = outcomes
        .iter()
        .filter(|o| matches!(o, Err(Error::Locked { .. })))
        .count();
    assert_eq!(
        locked, 0,
        "reopens that found the dropped writer's lock held"
    );
    for outcome in outcomes {
        outcome.unwrap();
    }
}

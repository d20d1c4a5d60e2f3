//! Failure class: the process is killed (SIGKILL) at an arbitrary moment while committing.
//!
//! Guarantee (docs/design.md#l1-durable-append, docs/design.md#l2-recovery): every commit that
//! `commit` acknowledged is present after reopen, byte for byte; no partial commit is ever visible;
//! seqs stay contiguous; and the next writer recovers the torn tail, if any, and continues. The
//! test re-executes its own binary as a child process that commits in a loop and prints each
//! receipt, kills it at random moments for 25 rounds, and checks the ledger after each kill. The
//! same holds with group commit ([`Ledger::commit_batch`]: several commits written by one append
//! and one sync, as the facade's queue hands them over), where some commits of a batch are refused
//! and must not take their neighbours down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use ctxlog_ledger::{EventBody, Ledger, LedgerRead, NewCommit, Options};

const CHILD_ENV: &str = "CTXLOG_LEDGER_CRASH_CHILD_DIR";
const ROUNDS: u64 = 25;
/// Commits per batch in `group_crash_child`.
const BATCH: u64 = 4;

/// In the group-commit test, commits with these ids are invalid (no events): refused alone.
fn refused(id: u64) -> bool {
    id % 7 == 3
}

/// The commit the child writes for `id`: its shape depends on the id, so the parent can
/// recompute it. Every fifth commit carries a large tool output (an artifact).
fn commit_for(id: u64) -> NewCommit {
    let mut events = vec![user(&format!("question {id}"))];
    if id % 2 == 1 {
        let text = if id.is_multiple_of(5) {
            "x".repeat(40_000)
        } else {
            format!("output {id}")
        };
        events.push(call(&format!("c{id}")));
        events.push(result(&format!("c{id}"), &text));
    }
    events.push(assistant(&format!("answer {id}")));
    NewCommit {
        id: Some(format!("commit-{id}")),
        events,
        ..Default::default()
    }
}

/// In a child process: its conversation directory and first commit id (`None` when the
/// test runs on its own).
fn child_env() -> Option<(String, u64)> {
    let dir = std::env::var(CHILD_ENV).ok()?;
    let start = std::env::var("CTXLOG_LEDGER_CRASH_START")
        .ok()?
        .parse()
        .unwrap();
    Some((dir, start))
}

/// The child process of the tests below, not a test of its own: ignored unless they run it
/// (with `--ignored` and its environment).
#[test]
#[ignore = "subprocess entry point, run by the tests in this file"]
fn crash_child() {
    let Some((dir, start)) = child_env() else {
        return;
    };
    let (mut ledger, _) = Ledger::open(Path::new(&dir), &Options::default()).unwrap();
    for id in start.. {
        let r = ledger.commit(&commit_for(id)).unwrap();
        println!("ACK {id} {} {}", r.first_seq, r.last_seq);
    }
}

/// The group-commit child: commits ids `start..` in batches of [`BATCH`]; the ids
/// [`refused`] picks are sent empty and must be refused alone. Not a test of its own (see
/// `crash_child`).
#[test]
#[ignore = "subprocess entry point, run by the tests in this file"]
fn group_crash_child() {
    let Some((dir, start)) = child_env() else {
        return;
    };
    let (mut ledger, _) = Ledger::open(Path::new(&dir), &Options::default()).unwrap();
    for first in (start..).step_by(BATCH as usize) {
        let ids: Vec<u64> = (first..first + BATCH).collect();
        let commits: Vec<NewCommit> = ids
            .iter()
            .map(|&id| {
                let mut commit = commit_for(id);
                if refused(id) {
                    commit.events.clear();
                }
                commit
            })
            .collect();
        let results = ledger.commit_batch(&commits).unwrap();
        for (id, result) in ids.into_iter().zip(results) {
            if refused(id) {
                assert!(result.is_err(), "empty commit {id} refused");
                continue;
            }
            let r = result.unwrap();
            println!("ACK {id} {} {}", r.first_seq, r.last_seq);
        }
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Runs one child from commit id `start`; once it acknowledged its first commit, waits
/// `delay` and kills it. Returns its receipts.
fn run_child(dir: &Path, name: &str, start: u64, delay: Duration) -> Vec<(u64, u64, u64)> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .env("CTXLOG_LEDGER_CRASH_START", start.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // The harness may print "test crash_child ... " before the first line.
            let Some(at) = line.find("ACK ") else {
                continue;
            };
            let parts: Vec<&str> = line[at..].split_whitespace().collect();
            if parts.len() == 4 {
                acks.push((
                    parts[1].parse().unwrap(),
                    parts[2].parse().unwrap(),
                    parts[3].parse().unwrap(),
                ));
                let _ = first_tx.send(());
            }
        }
        acks
    });
    let _ = first_rx.recv_timeout(Duration::from_secs(30));
    std::thread::sleep(delay);
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    reader.join().unwrap()
}

/// Splits the whole ledger into commits by their known shapes; panics on a partial one.
fn commits_in(ledger: &Ledger) -> BTreeMap<u64, (u64, u64)> {
    let events = if ledger.last_seq() == 0 {
        Vec::new()
    } else {
        ledger.events(1..=ledger.last_seq()).unwrap()
    };
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "seqs are contiguous");
    }
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < events.len() {
        let EventBody::User { text, .. } = &events[i].body else {
            panic!("commit must start with user at {i}")
        };
        let id: u64 = text.trim_start_matches("question ").parse().unwrap();
        let want = commit_for(id).events;
        let n = want.len();
        assert!(i + n <= events.len(), "partial commit {id} visible");
        for (k, w) in want.iter().enumerate() {
            let got = &events[i + k].body;
            match (w, got) {
                (
                    EventBody::ToolResult { text: wt, .. },
                    EventBody::ToolResult {
                        text: gt, artifact, ..
                    },
                ) if artifact.is_some() => {
                    let full = ledger.artifact(artifact.as_ref().unwrap()).unwrap();
                    assert_eq!(full, wt.as_bytes(), "artifact of {id}");
                    assert!(gt.len() < wt.len());
                }
                _ => assert_eq!(w, got, "event {k} of commit {id}"),
            }
        }
        out.insert(id, (events[i].seq, events[i + n - 1].seq));
        i += n;
    }
    out
}

#[test]
fn sigkill_during_commits_loses_no_acknowledged_commit() {
    let acked = kill_rounds("crash_child", 60_000);
    assert!(acked >= ROUNDS, "children made progress: {acked}");
}

#[test]
fn sigkill_during_group_commits_loses_no_acknowledged_commit() {
    let acked = kill_rounds("group_crash_child", 60_000);
    assert!(acked >= ROUNDS, "children made progress: {acked}");
}

/// Runs [`ROUNDS`] children of `name`, each killed a random time (under `max_delay_us`) after
/// its first acknowledgement, and checks the ledger after each kill: every acknowledged
/// commit present with its seqs, no partial commit, no refused one, nothing torn left.
/// Returns how many commits were acknowledged.
fn kill_rounds(name: &str, max_delay_us: u64) -> u64 {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("conv");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id()));
    let mut acknowledged: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut next_id = 0;
    let mut cuts = 0;
    for round in 0..ROUNDS {
        let delay = Duration::from_micros(rng.next() % max_delay_us);
        for (id, first, last) in run_child(&dir, name, next_id, delay) {
            acknowledged.insert(id, (first, last));
        }
        let (ledger, report) = Ledger::open(&dir, &Options::default()).unwrap();
        cuts += u64::from(!report.is_clean());
        let present = commits_in(&ledger);
        for (id, seqs) in &acknowledged {
            assert_eq!(
                present.get(id),
                Some(seqs),
                "round {round}: acknowledged commit {id} missing"
            );
        }
        if name == "group_crash_child" {
            assert!(
                present.keys().all(|&id| !refused(id)),
                "round {round}: a refused commit was written"
            );
        }
        next_id = present.keys().next_back().map_or(0, |k| k + 1);
        drop(ledger);
        assert!(ctxlog_ledger::verify(&dir).unwrap().torn_tail_bytes == 0);
    }
    eprintln!(
        "{name}: {} commits acknowledged over {ROUNDS} kills, {cuts} torn tails cut",
        acknowledged.len()
    );
    acknowledged.len() as u64
}

//! Writers can wait (SPEC L3): while another process holds a conversation's writer lock,
//! `commit` exits 4 at once; with `--wait SECS` it waits for the lock and commits once it is
//! free, or exits 4 when the wait is over.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Env, code, stderr};

const TURN: &[u8] = br#"{"user":"queued?","assistant":"yes"}"#;

#[test]
fn a_writer_waits_for_the_lock_with_wait_and_fails_at_once_without() {
    let env = Env::new();
    env.commit("w", "first", "ok");
    // Another writer (this test process) holds the lock.
    let store = ctxlog::Store::open(env.root());
    let holder = store.conversation("w").unwrap();

    let start = Instant::now();
    let out = env.run(&["commit", "w"], TURN);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(start.elapsed() < Duration::from_secs(5));

    let start = Instant::now();
    let out = env.run(&["--wait", "0.5", "commit", "w"], TURN);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(start.elapsed() >= Duration::from_millis(500));

    // A waiting writer commits once the lock is let go.
    let mut child = env.spawn(&["--wait", "30", "commit", "w", "-"]);
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(TURN).unwrap();
    }
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        child.try_wait().unwrap().is_none(),
        "still waiting for the lock"
    );
    drop(holder);
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["first_seq"], 3);
}

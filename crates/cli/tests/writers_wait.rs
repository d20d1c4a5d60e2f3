//! Writers can wait (docs/design.md#l3-one-writer): while another process holds a conversation's
//! writer lock, `commit` exits 4 at once; with `--wait SECS` it waits for the lock and commits once
//! it is free, or exits 4 when the wait is over.

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
    let store = ctxlog::Store::open(env.root()).unwrap();
    let holder = store.conversation("w").unwrap();

    let start = Instant::now();
    let out = env.run(&["commit", "w"], TURN);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(start.elapsed() < Duration::from_secs(5));

    let start = Instant::now();
    let out = env.run(&["--wait", "0.5", "commit", "w"], TURN);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(start.elapsed() >= Duration::from_millis(500));

    // A waiting writer commits once the lock is let go. It is seen waiting (its lock file
    // open, and still running) before the lock is let go, so the test never depends on how
    // soon the child gets there.
    let mut child = env.spawn(&["--wait", "30", "commit", "w", "-"]);
    common::write_stdin(&mut child, TURN.to_vec())
        .join()
        .unwrap();
    wait_until_it_holds_open(&mut child, &env.conv_dir("w").join("lock"));
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

/// Returns once `child` has `file` open: a writer waiting with `--wait` keeps the lock file
/// open while it retries (Linux: read from `/proc/PID/fd`). Panics if the child exits first.
fn wait_until_it_holds_open(child: &mut std::process::Child, file: &std::path::Path) {
    let fds = std::path::PathBuf::from(format!("/proc/{}/fd", child.id()));
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the writer exited ({status}) while the lock was held");
        }
        let open = std::fs::read_dir(&fds).into_iter().flatten().flatten();
        if open
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|p| p == file)
        {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never waited");
        std::thread::yield_now();
    }
}

//! A typo is visible: projecting a conversation with no commits (`ap1` for `app1`) still
//! returns the mandatory body, but the report's `notes` and a line on stderr say that the
//! conversation has no commits yet.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, stderr};
use serde_json::Value;

#[test]
fn projecting_a_conversation_with_no_commits_says_so() {
    let env = Env::new();
    env.commit("app1", "hello", "hi");
    let report = env.root().join("r.json");
    let out = env.run(
        &[
            "project",
            "ap1",
            "--input",
            "hello again",
            "--report",
            report.to_str().unwrap(),
        ],
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"ap1\" has no commits yet"),
        "{}",
        stderr(&out)
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(
        report["notes"][0]
            .as_str()
            .unwrap()
            .contains("no commits yet"),
        "{report}"
    );
    assert!(!env.conv_dir("ap1").exists(), "nothing is created");

    // The right name: no note.
    let out = env.run(
        &[
            "project",
            "app1",
            "--input",
            "hello again",
            "--report",
            report_path(&env),
        ],
        b"",
    );
    assert!(out.status.success());
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

fn report_path(env: &Env) -> &str {
    Box::leak(
        env.root()
            .join("r2.json")
            .to_str()
            .unwrap()
            .to_string()
            .into_boxed_str(),
    )
}

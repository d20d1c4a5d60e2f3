//! `docs/lifecycle.md`'s session runs as written: its first shell block is executed with
//! `ctxlog` bound to the binary under test, must exit 0, and each `# -> TEXT` line must appear
//! in what the commands since the previous check printed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const MARK: &str = "@@ctxlog-doc-check@@";

/// The first ```sh block of the doc, with a mark echoed where each check is.
fn session() -> (String, Vec<String>) {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/lifecycle.md"
    ))
    .unwrap();
    let start = doc.find("```sh\n").unwrap() + "```sh\n".len();
    let end = start + doc[start..].find("\n```\n").unwrap();
    let mut script = String::new();
    let mut checks = Vec::new();
    for line in doc[start..end].lines() {
        match line.strip_prefix("# -> ") {
            Some(expected) => {
                checks.push(expected.to_string());
                script.push_str(&format!("echo {MARK}\n"));
            }
            None => {
                script.push_str(line);
                script.push('\n');
            }
        }
    }
    (script, checks)
}

#[test]
fn the_lifecycle_session_runs_as_documented() {
    let (script, checks) = session();
    assert!(checks.len() >= 8, "{checks:?}");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg("-euo")
        .arg("pipefail")
        .arg("-c")
        .arg(format!("ctxlog() {{ \"$CTXLOG_BIN\" \"$@\"; }}\n{script}"))
        .env("CTXLOG_BIN", env!("CARGO_BIN_EXE_ctxlog"))
        .env_remove("CTXLOG_ROOT")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let segments: Vec<&str> = stdout.split(MARK).collect();
    assert_eq!(segments.len(), checks.len() + 1, "{stdout}");
    for (segment, expected) in segments.iter().zip(&checks) {
        assert!(
            segment.contains(expected.as_str()),
            "expected {expected:?} in:\n{segment}"
        );
    }
}

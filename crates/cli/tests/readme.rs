//! The README's tour runs as written: its shell block is executed with `ctxlog` bound to the
//! binary under test, and must exit 0 and show what the README says it shows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The first ```sh block after the "## A tour" heading.
fn tour() -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let section = &readme[readme.find("## A tour").unwrap()..];
    let start = section.find("```sh\n").unwrap() + "```sh\n".len();
    let end = start + section[start..].find("```").unwrap();
    section[start..end].to_string()
}

#[test]
fn the_readme_tour_runs() {
    let script = tour()
        .lines()
        // Use the binary under test rather than building through cargo.
        .filter(|line| !line.starts_with("ctxlog()"))
        .collect::<Vec<_>>()
        .join("\n");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg("-euo")
        .arg("pipefail")
        .arg("-c")
        .arg(format!("ctxlog() {{ \"$CTXLOG_BIN\" \"$@\"; }}\n{script}"))
        .env("CTXLOG_BIN", env!("CARGO_BIN_EXE_ctxlog"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(r#""first_seq":3"#), "{stdout}");
    assert!(stdout.contains("ok: 6 events"), "{stdout}");
    let body = std::fs::read_to_string(dir.path().join("body.json")).unwrap();
    assert!(
        body.contains("a.txt b.txt") && !body.contains("ZX-81"),
        "400 bytes keep only the newest turn: {body}"
    );
    assert!(
        stdout.contains(r#""hits":[{"seq":1"#),
        "recall finds the first turn: {stdout}"
    );
    let recalled = stdout
        .lines()
        .find(|l| l.starts_with(r#"{"model""#))
        .unwrap();
    assert!(
        recalled.contains("My project code is ZX-81."),
        "the recalled page carries the fact: {recalled}"
    );
    let after_erase: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        after_erase["hits"],
        serde_json::json!([]),
        "erased text is gone"
    );
}

//! The README's tour runs as written: its shell block is executed with `ctxlog` bound to the
//! binary under test, and must exit 0, show what the README says it shows, and leave nothing in
//! the directory it was run from (what it writes goes into its throwaway store).

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
    let script = tour();
    // The tour's `mktemp -d` store lands in `tmp`; it is run from `work`.
    let (work, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let out = Command::new("bash")
        .arg("-euo")
        .arg("pipefail")
        .arg("-c")
        .arg(format!("ctxlog() {{ \"$CTXLOG_BIN\" \"$@\"; }}\n{script}"))
        .env("CTXLOG_BIN", env!("CARGO_BIN_EXE_ctxlog"))
        .env("TMPDIR", tmp.path())
        .env_remove("CTXLOG_ROOT")
        .current_dir(work.path())
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
    let left: Vec<_> = std::fs::read_dir(work.path()).unwrap().collect();
    assert!(
        left.is_empty(),
        "the tour left files where it ran: {left:?}"
    );
    let stores: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(stores.len(), 1, "one throwaway store: {stores:?}");
    let store = stores[0].as_ref().unwrap().path();
    for written in ["report.json", "next.json"] {
        assert!(store.join(written).is_file(), "{written} is in the store");
    }
    let body = std::fs::read_to_string(store.join("body.json")).unwrap();
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

//! `ctxlog demo`, the README's first command, runs on a fresh store and shows what it claims:
//! a refused projection, a narrow body without the old fact, recall finding it, and a wider
//! body with it again. Run twice, it uses a new conversation rather than failing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Env;

#[test]
fn the_demo_runs_and_tells_the_story() {
    let env = Env::new();
    let out = String::from_utf8(env.ok(&["demo"], b"")).unwrap();
    for claim in [
        "refused (exit code 3)",
        "keeps only the newest turn: the project code is absent",
        "`ctxlog recall` finds it",
        "the code is present again",
        "every checksum good",
    ] {
        assert!(out.contains(claim), "missing {claim:?} in:\n{out}");
    }
    let again = String::from_utf8(env.ok(&["demo"], b"")).unwrap();
    assert!(again.contains("conversation \"demo-2\""), "{again}");
}

/// The demo's "Look around" lines run as printed, with `ctxlog` on PATH (as `cargo install
/// --path crates/cli` puts it), from any directory.
#[test]
fn the_look_around_lines_work_as_printed() {
    let env = Env::new();
    let out = String::from_utf8(env.ok(&["demo"], b"")).unwrap();
    let lines: Vec<&str> = out
        .split("Look around:")
        .nth(1)
        .unwrap()
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_ctxlog"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cwd = tempfile::tempdir().unwrap();
    for line in lines {
        assert!(line.starts_with("ctxlog "), "{line}");
        let run = std::process::Command::new("sh")
            .args(["-c", line])
            .env("PATH", &path)
            .env_remove("CTXLOG_ROOT")
            .current_dir(cwd.path())
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(!run.stdout.is_empty(), "{line}");
    }
}

//! Failure class: artifact references that point outside the conversation
//! (docs/design.md#l6-artifacts, docs/design.md#r7-scope), and large tool outputs
//! (docs/design.md#l5-caps).
//!
//! Guarantee: a tool result over the threshold is stored as a content-addressed artifact
//! (written and synced before the commit's record) and the event keeps a head/tail excerpt.
//! Reading an artifact refuses, with `BadArtifactRef` and before opening anything, names that
//! are absolute, contain `..` or separators, are not `sha256-<64 hex>`, or resolve through a
//! symlink outside the conversation directory; content that does not match its name is
//! `ArtifactMismatch`. Commits carrying such references are refused and write nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use ctxlog_ledger::{
    ArtifactRef, Error, EventBody, Ledger, LedgerRead, Options, Reader, artifact_name,
};

fn big_output() -> String {
    let mut s = String::from("HEAD-MARKER ");
    for i in 0..5_000 {
        s.push_str(&format!("line {i} of the build log\n"));
    }
    s.push_str("TAIL-MARKER");
    s
}

#[test]
fn a_large_tool_output_becomes_an_artifact_with_an_excerpt() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    let text = big_output();
    ledger
        .commit(&commit(vec![
            user("build"),
            call("c1"),
            result("c1", &text),
        ]))
        .unwrap();
    let EventBody::ToolResult {
        text: kept,
        artifact: Some(r),
        ..
    } = ledger.event(3).unwrap().body
    else {
        panic!("expected an artifact");
    };
    assert_eq!(r.name, artifact_name(text.as_bytes()));
    assert_eq!(r.bytes, text.len() as u64);
    assert!(kept.starts_with("HEAD-MARKER") && kept.ends_with("TAIL-MARKER"));
    assert!(kept.contains(&r.name) && kept.len() < 5_000);
    assert_eq!(
        std::fs::read(tmp.path().join("artifacts").join(&r.name)).unwrap(),
        text.as_bytes()
    );
    assert_eq!(ledger.artifact(&r).unwrap(), text.as_bytes());
    let reader = Reader::open(tmp.path()).unwrap();
    assert_eq!(reader.artifact(&r).unwrap(), text.as_bytes());
    let report = ctxlog_ledger::verify(tmp.path()).unwrap();
    assert_eq!(report.artifacts, 1);
    assert!(report.is_clean());
    // Same output again: same artifact, stored once.
    ledger
        .commit(&commit(vec![call("c2"), result("c2", &text)]))
        .unwrap();
    assert_eq!(
        std::fs::read_dir(tmp.path().join("artifacts"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn names_outside_the_artifact_namespace_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    let good = ledger.put_artifact(b"content").unwrap();
    let hex = good.name.trim_start_matches("sha256-").to_string();
    for name in [
        "../ledger.log".to_string(),
        "/etc/passwd".to_string(),
        format!("../artifacts/{}", good.name),
        format!("artifacts/{}", good.name),
        format!("sha256-{}", hex.to_uppercase()),
        format!("sha256-{}/..", hex),
        format!("sha256-{}", &hex[..63]),
        format!("sha512-{hex}"),
        "sha256-../../../../etc/passwd".to_string(),
        String::new(),
    ] {
        let r = ArtifactRef {
            name: name.clone(),
            bytes: 7,
        };
        assert!(
            matches!(ledger.artifact(&r), Err(Error::BadArtifactRef { .. })),
            "{name}"
        );
    }
    // A well-formed name that is not stored is missing: a read goes by an event's
    // reference, so the artifact was lost (damage, not a refused name).
    let missing = ArtifactRef {
        name: artifact_name(b"nothing"),
        bytes: 7,
    };
    assert!(matches!(
        ledger.artifact(&missing),
        Err(Error::ArtifactMissing { .. })
    ));
    assert_eq!(ledger.artifact(&good).unwrap(), b"content");
}

#[test]
fn symlinks_that_escape_the_conversation_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let conv = tmp.path().join("conv");
    let (ledger, _) = Ledger::open(&conv, &Options::default()).unwrap();
    let secret = b"secret outside the conversation";
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret"), secret).unwrap();
    let name = artifact_name(secret);
    let r = ArtifactRef {
        name: name.clone(),
        bytes: secret.len() as u64,
    };
    std::fs::create_dir_all(conv.join("artifacts")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), conv.join("artifacts").join(&name)).unwrap();
    assert!(matches!(
        ledger.artifact(&r),
        Err(Error::BadArtifactRef { .. })
    ));
    // The whole artifacts directory as a symlink to the outside.
    std::fs::remove_dir_all(conv.join("artifacts")).unwrap();
    std::fs::write(outside.join(&name), secret).unwrap();
    std::os::unix::fs::symlink(&outside, conv.join("artifacts")).unwrap();
    assert!(matches!(
        ledger.artifact(&r),
        Err(Error::BadArtifactRef { .. })
    ));
    assert!(matches!(
        Reader::open(&conv).unwrap().artifact(&r),
        Err(Error::BadArtifactRef { .. })
    ));
}

#[test]
fn tampered_content_does_not_match_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    let r = ledger.put_artifact(b"original").unwrap();
    std::fs::write(tmp.path().join("artifacts").join(&r.name), b"tampered").unwrap();
    assert!(matches!(
        ledger.artifact(&r),
        Err(Error::ArtifactMismatch { .. })
    ));
}

#[test]
fn commits_with_bad_references_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    ledger
        .commit(&commit(vec![user("go"), call("c1")]))
        .unwrap();
    let stored = ledger.put_artifact(b"full output").unwrap();
    let before = snapshot_dir(tmp.path());
    let with_ref = |name: &str| {
        commit(vec![EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ctxlog_ledger::ToolStatus::Ok,
            exit_code: None,
            text: "excerpt".into(),
            artifact: Some(ArtifactRef {
                name: name.into(),
                bytes: 11,
            }),
            parts: Vec::new(),
            provider_item: None,
        }])
    };
    for name in [
        "../../etc/passwd",
        "/tmp/x",
        &artifact_name(b"never stored"),
    ] {
        let err = ledger.commit(&with_ref(name)).unwrap_err();
        assert!(
            matches!(err, Error::BadArtifactRef { .. }),
            "{name}: {err:?}"
        );
        assert_eq!(snapshot_dir(tmp.path()), before);
    }
    // The right name with the wrong size is refused too.
    let mut wrong_size = with_ref(&stored.name);
    if let EventBody::ToolResult {
        artifact: Some(a), ..
    } = &mut wrong_size.events[0]
    {
        a.bytes = 12;
    }
    assert!(matches!(
        ledger.commit(&wrong_size),
        Err(Error::InvalidCommit { .. })
    ));
    assert_eq!(snapshot_dir(tmp.path()), before);
    let r = ledger.commit(&with_ref(&stored.name)).unwrap();
    assert_eq!(r.first_seq, 3);
}

/// Regression: a missing artifact was reported as "refused artifact reference", which sent
/// operators looking for a path escape, and classed as bad input. The error now says it is
/// missing, and it is damage (the event referencing it is in the ledger).
#[test]
fn a_missing_artifact_is_named_as_missing_not_as_an_escape() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    let r = ledger.put_artifact(b"soon gone").unwrap();
    std::fs::remove_file(tmp.path().join("artifacts").join(&r.name)).unwrap();
    match ledger.artifact(&r) {
        Err(e @ Error::ArtifactMissing { .. }) => {
            assert!(e.to_string().contains("no such artifact"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let report = ctxlog_ledger::verify(tmp.path()).unwrap();
    assert!(
        report.artifact_problems.is_empty(),
        "unreferenced: not a problem"
    );
}

/// Regression: reads refused an `artifacts/` directory that is a symlink to the outside, but
/// writes went through it: a large tool output was stored outside the conversation and the
/// commit acknowledged, referencing an artifact every later read refuses. The write is now
/// refused too, and nothing is written anywhere.
#[test]
fn large_outputs_are_never_written_through_an_escaping_artifacts_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let conv = tmp.path().join("conv");
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let (mut ledger, _) = Ledger::open(&conv, &Options::default()).unwrap();
    ledger
        .commit(&commit(vec![user("go"), call("c1")]))
        .unwrap();
    std::os::unix::fs::symlink(&outside, conv.join("artifacts")).unwrap();
    let before = snapshot_dir(&conv);
    let err = ledger
        .commit(&commit(vec![result("c1", &big_output())]))
        .unwrap_err();
    assert!(matches!(err, Error::BadArtifactRef { .. }), "{err:?}");
    assert!(!ledger.is_poisoned());
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert_eq!(snapshot_dir(&conv), before);
    assert!(matches!(
        ledger.put_artifact(b"x"),
        Err(Error::BadArtifactRef { .. })
    ));
}

/// Regression: a caller-supplied reference was checked for its name and size only, so a
/// commit could reference an artifact whose content had been replaced (same size): it was
/// acknowledged, and every later read failed with `ArtifactMismatch`. It is refused now,
/// with nothing written.
#[test]
fn a_reference_to_a_tampered_artifact_is_refused_at_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    ledger
        .commit(&commit(vec![user("go"), call("c1")]))
        .unwrap();
    let stored = ledger.put_artifact(b"full output").unwrap();
    std::fs::write(
        tmp.path().join("artifacts").join(&stored.name),
        b"FULL OUTPUT",
    )
    .unwrap();
    let before = snapshot_dir(tmp.path());
    let err = ledger
        .commit(&commit(vec![EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ctxlog_ledger::ToolStatus::Ok,
            exit_code: None,
            text: "excerpt".into(),
            artifact: Some(stored),
            parts: Vec::new(),
            provider_item: None,
        }]))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidCommit { .. }), "{err:?}");
    assert_eq!(snapshot_dir(tmp.path()), before);
}

/// Regression: a commit killed between creating `artifacts/.tmp-<name>` and its
/// rename left the temporary file for good (52 files after 691 kills). The writer's open
/// holds the lock, so no temporary file is in use: it removes them all, and nothing else.
#[test]
fn the_writers_open_removes_temporary_artifacts_left_by_killed_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    let kept = ledger.put_artifact(b"kept").unwrap();
    drop(ledger);
    let arts = tmp.path().join("artifacts");
    for i in 0..3 {
        std::fs::write(arts.join(format!(".tmp-sha256-{i:064}")), b"partial").unwrap();
    }
    let (ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(&arts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, std::slice::from_ref(&kept.name));
    assert_eq!(ledger.artifact(&kept).unwrap(), b"kept");
}

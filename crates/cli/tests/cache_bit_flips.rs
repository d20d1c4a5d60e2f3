//! Bit flips in the caches (docs/design.md#l2-recovery, docs/design.md#r2-disposable). The four
//! sidecar index files (`ledger.idx`, `turns.idx`, `notes.idx`, `commits.idx`) and the recall index
//! (`recall.sqlite`) are caches of `ledger.log`. One bit of one of them is flipped in turn; after
//! each flip `log` and `recall` (and, on one flip in [`PROJECT_EVERY`], `project` with and without
//! recalled pages) either give the same answers as on the undamaged conversation or fail with one
//! clear `ctxlog: ` line (a projection with recalled pages may also go ahead without them when its
//! report says recall was unavailable: the fallback for a damaged index,
//! docs/design.md#r2-disposable). Never a wrong event, a wrong body or a recalled text that is not
//! the ledger's.
//!
//! One kind of damage no read can see: FTS5's term data (and the context column), which no
//! page row's checksum covers. A flip there can make a search miss or rank differently, so a
//! projection may recall other pages of the ledger than it did; every such case must then be
//! found by `ctxlog verify` (which runs FTS5's own integrity check) as a damaged recall index.
//!
//! Small files have every bit flipped; for larger ones each byte has one bit flipped (bit
//! `offset % 8`), and `recall.sqlite` is sampled. The conversation directory is restored to
//! its exact bytes before each flip. Two worker threads share the cases.
//!
//! The gate runs one case in [`DEFAULT_STRIDE`] (each spawns the CLI three times or more);
//! `CTXLOG_BIT_FLIP_STRIDE=1 cargo test -p ctxlog-cli --test cache_bit_flips` runs them all
//! (docs/reliability.md has the figures of the full run).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{Env, code, snapshot, stderr};
use serde_json::Value;

const CONV: &str = "flips";
const PROJECT: &[&str] = &["project", CONV, "--input", "What was the zebra code?"];
const PROJECT_RECALL: &[&str] = &[
    "project",
    CONV,
    "--input",
    "What was the zebra code?",
    "--max-bytes",
    "700",
    "--recall",
    "2",
];
const RECALL: &[&str] = &["recall", CONV, "zebra code"];
/// A projection loads the tokenizer (~0.3 s of CPU in a debug build): `log` and `recall` run
/// after every flip, the two projections after one flip in this many (per worker).
const PROJECT_EVERY: usize = 6;

struct Baseline {
    files: BTreeMap<PathBuf, Vec<u8>>,
    /// seq → text of every event with text.
    texts: BTreeMap<u64, String>,
    log: Vec<u8>,
    project: Vec<u8>,
    project_recall: Vec<u8>,
}

fn build() -> (Env, Baseline) {
    let env = Env::new();
    env.commit(
        CONV,
        "The zebra code for the vault is ZX-81.",
        "Noted: ZX-81.",
    );
    env.ok(
        &["commit", CONV],
        br#"{"events":[{"kind":"note","text":"Always answer in French.","pinned":true}]}"#,
    );
    env.ok(
        &["commit", CONV, "--id", "tool-turn"],
        br#"{"events":[{"kind":"user","text":"list the files"},{"kind":"tool_call","call_id":"c1","tool":"sh","arguments":{"cmd":"ls"}},{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","text":"a.txt b.txt zebra.md"},{"kind":"assistant","text":"Three files."}]}"#,
    );
    for i in 0..2 {
        env.commit(
            CONV,
            &format!("Unrelated chatter {i} about lunch and the weather"),
            "Sure.",
        );
    }
    let (log, project, project_recall) = (
        env.ok(&["log", CONV, "--json"], b""),
        env.ok(PROJECT, b""),
        env.ok(PROJECT_RECALL, b""),
    );
    assert!(!hits(&env.ok(RECALL, b"")).is_empty());
    let mut texts = BTreeMap::new();
    for line in String::from_utf8(log.clone()).unwrap().lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        if let Some(t) = e["text"].as_str() {
            texts.insert(e["seq"].as_u64().unwrap(), t.to_string());
        }
    }
    let files = snapshot(&env.conv_dir(CONV));
    let base = Baseline {
        files,
        texts,
        log,
        project,
        project_recall,
    };
    (env, base)
}

fn hits(stdout: &[u8]) -> Vec<Value> {
    let v: Value = serde_json::from_slice(stdout).unwrap();
    v["hits"].as_array().unwrap().clone()
}

fn restore(dir: &Path, files: &BTreeMap<PathBuf, Vec<u8>>, from: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    for (path, bytes) in files {
        let rel = path.strip_prefix(from).unwrap();
        let target = dir.join(rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
}

/// A clear failure: non-zero exit, one line, `ctxlog: ` first.
fn clear_error(out: &Output) -> Result<(), String> {
    let msg = stderr(out);
    if code(out) != 0
        && msg.starts_with("ctxlog: ")
        && msg.trim_end().lines().count() == 1
        && out.status.code().is_some_and(|c| c != 101)
    {
        Ok(())
    } else {
        Err(format!("exit {:?}, stderr {msg:?}", out.status.code()))
    }
}

/// A projection with recalled pages over a damaged index gives the undamaged body, fails clearly,
/// or goes ahead without pages and says so in its report (the fallback for a damaged index,
/// docs/design.md#r2-disposable).
fn check_project_recall(env: &Env, base: &Baseline) -> Option<String> {
    let report = tempfile::NamedTempFile::new().unwrap();
    let report_path = report.path().to_str().unwrap().to_string();
    let mut args: Vec<&str> = PROJECT_RECALL.to_vec();
    args.extend(["--report", report_path.as_str()]);
    let out = env.run(&args, b"");
    if !out.status.success() {
        return clear_error(&out)
            .err()
            .map(|e| format!("{PROJECT_RECALL:?}: unclear failure: {e}"));
    }
    if out.stdout == base.project_recall {
        return None;
    }
    let report: Value = serde_json::from_slice(&std::fs::read(report.path()).unwrap()).unwrap();
    if report["recall"]["unavailable"].is_string() {
        return None;
    }
    // Damage no read sees (see the top of this file): other pages of the ledger, and
    // `verify` must find it.
    let verify = env.run(&["verify", CONV, "--json"], b"");
    let verify: Value = serde_json::from_slice(&verify.stdout).unwrap();
    if verify["recall_index"]["state"] == "damaged" {
        return None;
    }
    Some(format!(
        "{PROJECT_RECALL:?}: different output with exit 0, the report says recall was available and verify finds nothing: {}",
        verify["recall_index"]
    ))
}

/// Checks one damaged copy; returns a description of every wrong answer.
fn check(env: &Env, base: &Baseline, with_projections: bool) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut same_or_error = |args: &[&str], want: &[u8]| {
        let out = env.run(args, b"");
        if out.status.success() {
            if out.stdout != want {
                wrong.push(format!("{args:?}: different output with exit 0"));
            }
        } else if let Err(e) = clear_error(&out) {
            wrong.push(format!("{args:?}: unclear failure: {e}"));
        }
    };
    same_or_error(&["log", CONV, "--json"], &base.log);
    if with_projections {
        same_or_error(PROJECT, &base.project);
        wrong.extend(check_project_recall(env, base));
    }
    let out = env.run(RECALL, b"");
    if out.status.success() {
        // Ranking may legitimately differ on a rebuilt index; the text never may.
        for hit in hits(&out.stdout) {
            let seq = hit["seq"].as_u64().unwrap();
            let (a, b) = (
                hit["char_start"].as_u64().unwrap() as usize,
                hit["char_end"].as_u64().unwrap() as usize,
            );
            let truth: Option<String> = base
                .texts
                .get(&seq)
                .map(|t| t.chars().skip(a).take(b.saturating_sub(a)).collect());
            if truth.as_deref() != hit["text"].as_str() {
                wrong.push(format!("recall served {hit} but the ledger says {truth:?}"));
            }
        }
    } else if let Err(e) = clear_error(&out) {
        wrong.push(format!("recall: unclear failure: {e}"));
    }
    wrong
}

/// One case in this many runs unless `CTXLOG_BIT_FLIP_STRIDE` says otherwise.
const DEFAULT_STRIDE: usize = 5;

/// Flips (file, byte offset, bit) in turn on two workers; panics listing every wrong answer.
fn run_flips(cases: Vec<(&'static str, usize, u8)>) {
    let stride = std::env::var("CTXLOG_BIT_FLIP_STRIDE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(DEFAULT_STRIDE)
        .max(1);
    let cases: Vec<_> = cases.into_iter().step_by(stride).collect();
    let (env0, base) = build();
    let from = env0.conv_dir(CONV);
    let chunks: Vec<Vec<(&str, usize, u8)>> = (0..2)
        .map(|w| cases.iter().skip(w).step_by(2).copied().collect())
        .collect();
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let (base, from) = (&base, &from);
                s.spawn(move || {
                    let env = Env::new();
                    let dir = env.conv_dir(CONV);
                    let mut failures = Vec::new();
                    for (i, (file, offset, bit)) in chunk.into_iter().enumerate() {
                        restore(&dir, &base.files, from);
                        let path = dir.join(file);
                        let mut bytes = std::fs::read(&path).unwrap();
                        bytes[offset] ^= 1 << bit;
                        std::fs::write(&path, bytes).unwrap();
                        for w in check(&env, base, i % PROJECT_EVERY == 0) {
                            failures.push(format!("{file} byte {offset} bit {bit}: {w}"));
                        }
                    }
                    failures
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} wrong answers, first 20:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

fn file_len(name: &str) -> usize {
    let (env, _) = build();
    std::fs::metadata(env.conv_dir(CONV).join(name))
        .unwrap()
        .len() as usize
}

/// Every bit of a small file, one bit per byte of a larger one.
fn sidecar_cases(name: &'static str) -> Vec<(&'static str, usize, u8)> {
    let len = file_len(name);
    if len * 8 <= 400 {
        (0..len)
            .flat_map(|o| (0..8).map(move |b| (name, o, b)))
            .collect()
    } else {
        (0..len).map(|o| (name, o, (o % 8) as u8)).collect()
    }
}

#[test]
fn ledger_idx_flips_are_detected_or_rebuilt() {
    run_flips(sidecar_cases("ledger.idx"));
}

#[test]
fn turns_and_notes_idx_flips_are_detected_or_rebuilt() {
    let mut cases = sidecar_cases("turns.idx");
    cases.extend(sidecar_cases("notes.idx"));
    run_flips(cases);
}

#[test]
fn commits_idx_flips_are_detected_or_rebuilt() {
    run_flips(sidecar_cases("commits.idx"));
}

/// A sample of `recall.sqlite`: the database header, and 8 spread offsets in every page.
#[test]
fn recall_index_flips_never_serve_wrong_text() {
    let len = file_len("recall.sqlite");
    let mut cases: Vec<(&str, usize, u8)> = (0..100)
        .step_by(4)
        .map(|o| ("recall.sqlite", o, (o % 8) as u8))
        .collect();
    for page in (0..len).step_by(4096) {
        for k in 0..8 {
            let o = page + (k * 4096 / 8 + 97 * k) % 4096;
            if o < len && o >= 100 {
                cases.push(("recall.sqlite", o, (k % 8) as u8));
            }
        }
    }
    run_flips(cases);
}

/// Flips inside the stored page text itself: the index may rank, but text it returns must be
/// the ledger's.
#[test]
fn recall_index_text_flips_never_serve_wrong_text() {
    let (env, _) = build();
    let bytes = std::fs::read(env.conv_dir(CONV).join("recall.sqlite")).unwrap();
    let needle = b"zebra";
    let cases: Vec<(&str, usize, u8)> = bytes
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(o, _)| ("recall.sqlite", o + 1, 0))
        .collect();
    assert!(!cases.is_empty(), "the page text is stored in the index");
    run_flips(cases);
}

/// `verify` checks the recall index through and through: a clean one is "ok" with its page
/// count, and a flip in any stored copy of a word — page text, context or FTS5 term data — is
/// a damaged index (exit 8, verdict `attention`: the ledger is intact; `reindex` repairs), and
/// `verify` writes nothing.
#[test]
fn verify_finds_every_flip_inside_a_stored_word() {
    let (env, base) = build();
    let dir = env.conv_dir(CONV);
    let text = String::from_utf8(env.ok(&["verify", CONV], b"")).unwrap();
    assert!(text.starts_with("ok: "), "{text}");
    assert!(text.contains("recall index: ok, 10 pages\n"), "{text}");
    let index = dir.join("recall.sqlite");
    let clean = std::fs::read(&index).unwrap();
    let offsets: Vec<usize> = clean
        .windows(5)
        .enumerate()
        .filter(|(_, w)| *w == b"zebra")
        .map(|(o, _)| o + 1)
        .collect();
    assert!(offsets.len() >= 3, "{offsets:?}");
    for offset in offsets {
        restore(&dir, &base.files, &dir);
        let mut bytes = clean.clone();
        bytes[offset] ^= 1;
        std::fs::write(&index, &bytes).unwrap();
        let out = env.run(&["verify", CONV], b"");
        assert_eq!(code(&out), 8, "byte {offset}: {}", stderr(&out));
        assert!(stderr(&out).contains("ctxlog reindex"), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.starts_with("needs attention: ") && text.contains("is damaged"),
            "byte {offset}: {text}"
        );
        let out = env.run(&["verify", CONV, "--json"], b"");
        assert_eq!(code(&out), 8, "byte {offset}");
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["recall_index"]["state"], "damaged", "byte {offset}");
        assert_eq!(json["verdict"], "attention", "byte {offset}");
        assert_eq!(std::fs::read(&index).unwrap(), bytes, "verify wrote");
    }
    restore(&dir, &base.files, &dir);
    env.ok(&["reindex", CONV], b"");
    let text = String::from_utf8(env.ok(&["verify", CONV], b"")).unwrap();
    assert!(text.contains("recall index: ok, 10 pages\n"), "{text}");
}

//! The scenario that motivates ctxlog (docs/design.md#1-the-problem), through the real binary: a
//! fixture with Chinese, English, double quotes, a newline and an emoji; a boundary table of
//! budgets that keep 0, 1 and 2 whole turns or refuse; and narrow → commit → reopen → widen, in
//! which a fact left out of a narrow request is supplied again by a wider one. A refused projection
//! leaves the ledger's bytes unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};
use serde_json::Value;

const SYSTEM: &str = "You are a careful assistant. 回答要简洁。";
const INPUT: &str = "What is my project code? 我的项目代号是什么？";
const FACT: &str = "ZX-81";

fn fixture(env: &Env) {
    env.commit(
        "lab",
        "我的项目代号是 \"ZX-81\"。\nMy project code is \"ZX-81\" 🚀",
        "记住了：\"ZX-81\" ✅",
    );
    env.commit(
        "lab",
        "What's the weather like in 北京 today?",
        "Sunny, 25°C — 天气晴朗 ☀️",
    );
}

/// Projects at `budget`; returns the body and the report, or the exit code on failure.
fn project(env: &Env, budget: u64) -> Result<(Vec<u8>, Value), i32> {
    let report = env.root().join("report.json");
    let out = env.run(
        &[
            "project",
            "lab",
            "--system",
            SYSTEM,
            "--input",
            INPUT,
            "--max-bytes",
            &budget.to_string(),
            "--report",
            report.to_str().unwrap(),
        ],
        b"",
    );
    if !out.status.success() {
        return Err(code(&out));
    }
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    std::fs::remove_file(env.root().join("report.json")).unwrap();
    assert_eq!(report["bytes"].as_u64().unwrap(), out.stdout.len() as u64);
    assert!(out.stdout.len() as u64 <= budget);
    Ok((out.stdout, report))
}

fn kept(report: &Value) -> u64 {
    report["turns"]["kept"].as_u64().unwrap()
}

#[test]
fn boundary_table_then_narrow_commit_reopen_widen() {
    let env = Env::new();
    fixture(&env);

    // Sizes, read from the reports themselves.
    let (full, report) = project(&env, 1 << 20).unwrap();
    assert_eq!(kept(&report), 2);
    let mandatory = report["mandatory"]["bytes"].as_u64().unwrap();
    let both = full.len() as u64;
    let (one_body, report) = project(&env, both - 1).unwrap();
    assert_eq!(
        kept(&report),
        1,
        "one byte short of both keeps only the newest turn"
    );
    let newest = one_body.len() as u64;

    let rows = [
        (mandatory, Some(0), mandatory),
        (newest, Some(1), newest),
        (both, Some(2), both),
        (both + 100, Some(2), both),
        (mandatory - 1, None, 0),
    ];
    println!("budget → turns kept (body bytes)");
    let ledger = env.conv_dir("lab").join("ledger.log");
    for (budget, want_kept, want_bytes) in rows {
        let before = snapshot(&env.conv_dir("lab"));
        match (project(&env, budget), want_kept) {
            (Ok((body, report)), Some(k)) => {
                assert_eq!(kept(&report), k, "budget {budget}");
                assert_eq!(body.len() as u64, want_bytes, "budget {budget}");
                println!("{budget} → {k} ({})", body.len());
            }
            (Err(3), None) => println!("{budget} → refused (mandatory needs {mandatory})"),
            (other, _) => panic!("budget {budget}: unexpected {other:?}"),
        }
        assert_eq!(
            before,
            snapshot(&env.conv_dir("lab")),
            "projection wrote files"
        );
    }
    assert!(std::fs::read(&ledger).is_ok());

    // The refusal says what the mandatory part needs.
    let out = env.run(
        &[
            "project",
            "lab",
            "--system",
            SYSTEM,
            "--input",
            INPUT,
            "--max-bytes",
            &(mandatory - 1).to_string(),
        ],
        b"",
    );
    assert_eq!(code(&out), 3);
    assert!(
        stderr(&out).contains(&format!("needs {mandatory} bytes")),
        "{}",
        stderr(&out)
    );

    // Narrow: only the newest turn fits, so the project code is absent.
    let (narrow, _) = project(&env, newest).unwrap();
    let narrow = String::from_utf8(narrow).unwrap();
    assert!(!narrow.contains(FACT), "{narrow}");
    assert!(narrow.contains("北京"));

    // The model answers; the reply is committed (each CLI call reopens the ledger).
    env.commit("lab", INPUT, "I don't see it in the recent context.");

    // Widen: the fact is back.
    let (wide, report) = project(&env, 1 << 20).unwrap();
    let wide = String::from_utf8(wide).unwrap();
    assert!(wide.contains(FACT), "{wide}");
    assert_eq!(kept(&report), 3);
    // Raw UTF-8, only quotes, backslashes and control characters escaped.
    assert!(
        wide.contains("我的项目代号是 \\\"ZX-81\\\"。\\nMy project code"),
        "{wide}"
    );
    assert!(wide.contains("🚀"));
}

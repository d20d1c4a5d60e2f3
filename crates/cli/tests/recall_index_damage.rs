//! The recall index is a disposable cache (docs/design.md#r2-disposable): when its file is damaged
//! (garbage, truncated, another schema), explicit `ctxlog recall` fails with a clear error naming
//! `ctxlog reindex`; a projection that asked for recalled pages still succeeds, without pages, and
//! its report says why; `ctxlog reindex` repairs it. The ledger is never touched.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};
use serde_json::Value;

fn conversation(env: &Env) {
    env.commit(
        "agent",
        "The staging database password rotates every Tuesday.",
        "Noted.",
    );
    for i in 0..6 {
        env.commit(
            "agent",
            &format!("Unrelated chatter number {i} about lunch"),
            "Sure.",
        );
    }
}

fn recall_hits(env: &Env, query: &str) -> Vec<Value> {
    let out = env.ok(&["recall", "agent", query], b"");
    let result: Value = serde_json::from_slice(&out).unwrap();
    assert!(result["note"].as_str().unwrap().contains("does not prove"));
    result["hits"].as_array().unwrap().clone()
}

fn damage(env: &Env, how: &str) {
    let index = env.conv_dir("agent").join("recall.sqlite");
    match how {
        "garbage" => std::fs::write(&index, vec![0xA5; 8192]).unwrap(),
        "truncated" => {
            let bytes = std::fs::read(&index).unwrap();
            std::fs::write(&index, &bytes[..bytes.len() / 3]).unwrap();
        }
        "foreign" => {
            std::fs::remove_file(&index).unwrap();
            let conn = rusqlite::Connection::open(&index).unwrap();
            conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
                .unwrap();
        }
        _ => unreachable!(),
    }
}

#[test]
fn damaged_index_errors_clearly_projection_falls_back_and_reindex_repairs() {
    for how in ["garbage", "truncated", "foreign"] {
        let env = Env::new();
        conversation(&env);
        let hits = recall_hits(&env, "database password");
        assert_eq!(hits[0]["seq"], 1, "{how}");

        damage(&env, how);
        let ledger = env.conv_dir("agent").join("ledger.log");
        let ledger_before = std::fs::read(&ledger).unwrap();

        let out = env.run(&["recall", "agent", "database password"], b"");
        assert_eq!(code(&out), 1, "{how}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("ctxlog reindex"),
            "{how}: {}",
            stderr(&out)
        );

        let before = snapshot(&env.conv_dir("agent"));
        let (body, report) =
            project_recalling(&env, "When does the database password rotate?", 400);
        assert!(!body.is_empty());
        let why = report["recall"]["unavailable"].as_str().unwrap_or_default();
        assert!(why.contains("damaged"), "{how}: {report}");
        assert_eq!(
            before,
            snapshot(&env.conv_dir("agent")),
            "{how}: the fallback wrote nothing"
        );

        env.ok(&["reindex", "agent"], b"");
        let hits = recall_hits(&env, "database password");
        assert_eq!(hits[0]["seq"], 1, "{how}: repaired");
        assert_eq!(
            std::fs::read(&ledger).unwrap(),
            ledger_before,
            "{how}: ledger untouched"
        );
    }
}

#[test]
fn narrow_projections_recall_the_old_fact_as_a_page_when_room_is_left() {
    let env = Env::new();
    env.commit(
        "agent",
        "The staging database password rotates every Tuesday.",
        "Noted.",
    );
    for i in 0..6 {
        let chatter = format!("Unrelated chatter number {i} about lunch. ").repeat(8);
        env.commit("agent", &chatter, "Sure.");
    }
    let mut recalled_at = Vec::new();
    for budget in (200..2400).step_by(50) {
        let (body, report) = project_recalling(
            &env,
            "When does the staging database password rotate?",
            budget,
        );
        assert!(
            body.len() <= budget,
            "budget {budget}: {} bytes",
            body.len()
        );
        let first_turn_kept = report["kept"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["first"] == 1);
        let page_included = report["recall"]["included"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["seq"] == 1);
        if page_included {
            assert!(
                !first_turn_kept,
                "a page never repeats history kept in detail"
            );
            assert!(body.contains("rotates every Tuesday"), "{body}");
            recalled_at.push(budget);
        }
    }
    assert!(
        !recalled_at.is_empty(),
        "some narrow budget leaves room for the recalled page"
    );
}

#[test]
fn recalled_pages_never_repeat_a_pinned_note() {
    let env = Env::new();
    env.ok(
        &["commit", "agent"],
        br#"{"events":[{"kind":"note","text":"Deployment region is eu-west-3 always.","pinned":true}]}"#,
    );
    env.commit(
        "agent",
        "Tell me a story about deployment regions",
        &"Once upon a time. ".repeat(50),
    );
    env.commit("agent", "Filler", "Reply");
    for budget in (300..3000).step_by(100) {
        let (body, _) = project_recalling(&env, "Which deployment region?", budget);
        assert_eq!(
            body.matches("eu-west-3").count(),
            1,
            "budget {budget}: {body}"
        );
    }
}

/// `ctxlog project agent --input INPUT --max-bytes BUDGET --recall 2 --report FILE`: the body
/// and the report, which always agree on the body's size.
fn project_recalling(env: &Env, input: &str, budget: usize) -> (String, Value) {
    let report_path = env.root().join("report.json");
    let body = env.ok(
        &[
            "project",
            "agent",
            "--input",
            input,
            "--max-bytes",
            &budget.to_string(),
            "--recall",
            "2",
            "--report",
            report_path.to_str().unwrap(),
        ],
        b"",
    );
    let body = String::from_utf8(body).unwrap();
    let report: Value = serde_json::from_slice(&std::fs::read(&report_path).unwrap()).unwrap();
    assert_eq!(report["bytes"].as_u64().unwrap(), body.len() as u64);
    (body, report)
}

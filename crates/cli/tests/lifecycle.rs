//! Failure class: the lifecycle commands misbehaving at the command line — `gc` erasing
//! without a rule or writing on `--dry-run`, a secret from the environment or a configured
//! pattern reaching the store, a broken `ctxlog.toml` silently ignored.
//!
//! Guarantee: `ctxlog gc` prints the operation's JSON and exits 2 (nothing written) for a
//! missing or bad rule; `--dry-run` changes no byte; the values of secret-named environment
//! variables and of `--redact-var` variables, and `--redact-pattern` matches, never reach a
//! file; `--no-redact-builtin` keeps key shapes; an invalid `ctxlog.toml` is a one-line
//! error (exit 2) for every command.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};

fn turns(env: &Env, n: usize) {
    for i in 0..n {
        env.commit("c", &format!("question {i}"), &format!("answer {i}"));
    }
}

#[test]
fn gc_keeps_the_newest_turns_and_a_dry_run_writes_nothing() {
    let env = Env::new();
    turns(&env, 5);
    let before = snapshot(env.root());
    let dry = env.ok(&["gc", "c", "--keep-turns", "2", "--dry-run"], b"");
    assert_eq!(before, snapshot(env.root()), "--dry-run wrote something");
    let dry: serde_json::Value = serde_json::from_slice(&dry).unwrap();
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["conversations"][0]["removed"][0]["to"], 6);

    let out: serde_json::Value =
        serde_json::from_slice(&env.ok(&["gc", "--all", "--keep-turns", "2"], b"")).unwrap();
    assert_eq!(out["seqs_removed"], 6);
    let log = String::from_utf8(env.ok(&["log", "c"], b"")).unwrap();
    assert!(log.contains("retention: keep newest 2 turns"), "{log}");
    assert!(
        !log.contains("question 0") && log.contains("question 4"),
        "{log}"
    );
}

#[test]
fn gc_without_a_rule_or_with_a_bad_one_exits_2_and_writes_nothing() {
    let env = Env::new();
    turns(&env, 2);
    let before = snapshot(env.root());
    for args in [
        &["gc", "c"][..],
        &["gc", "c", "--older-than", "soon"],
        &["gc", "c", "--max-bytes", "0"],
        &["gc"],
        &["gc", "c", "--all", "--keep-turns", "1"],
    ] {
        let out = env.run(args, b"");
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out).trim().lines().count(),
            1,
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(code(&env.run(&["gc", "nope", "--keep-turns", "1"], b"")), 1);
    assert_eq!(before, snapshot(env.root()));
}

#[test]
fn the_retention_table_of_ctxlog_toml_is_the_default_policy() {
    let env = Env::new();
    turns(&env, 4);
    std::fs::write(
        env.root().join("ctxlog.toml"),
        "[retention]\nkeep_turns = 3\n",
    )
    .unwrap();
    let out: serde_json::Value = serde_json::from_slice(&env.ok(&["gc", "c"], b"")).unwrap();
    assert_eq!(out["policy"]["keep_turns"], 3);
    assert_eq!(out["seqs_removed"], 2);
    std::fs::write(
        env.root().join("ctxlog.toml"),
        "[retention]\nkeep_turn = 3\n",
    )
    .unwrap();
    let bad = env.run(&["log", "c"], b"");
    assert_eq!(code(&bad), 2);
    assert!(
        stderr(&bad).contains("ctxlog.toml") && stderr(&bad).contains("keep_turn"),
        "{}",
        stderr(&bad)
    );
}

/// Runs `ctxlog` with extra environment variables.
fn run_with_env(
    env: &Env,
    args: &[&str],
    vars: &[(&str, &str)],
    stdin: &[u8],
) -> std::process::Output {
    let mut command = env.command(args);
    command.envs(vars.iter().copied());
    common::feed(command, stdin)
}

#[test]
fn environment_values_and_configured_patterns_never_reach_a_file() {
    let env = Env::new();
    let db_password = "correct-horse-battery-staple";
    let plain_var = "postgres://app:pw1234@db.internal/prod";
    let key = "sk-ant-api03-FAKEfakeFAKEfake0123456789";
    let turn = serde_json::json!({
        "user": format!("connect with {db_password} to {plain_var}, ticket TCK-204481, key {key}"),
        "assistant": "connected"
    })
    .to_string();
    let args = [
        "--redact-var",
        "DATABASE_URL",
        "--redact-pattern",
        "ticket=TCK-[0-9]{6}",
        "commit",
        "c",
    ];
    let vars = [
        ("APP_DB_PASSWORD", db_password),
        ("DATABASE_URL", plain_var),
    ];
    let out = run_with_env(&env, &args, &vars, turn.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    let log = String::from_utf8(env.ok(&["log", "c", "--json"], b"")).unwrap();
    assert!(
        log.contains("connect with [redacted:env:APP_DB_PASSWORD] to [redacted:env:DATABASE_URL], ticket [redacted:ticket], key [redacted:anthropic-key]"),
        "{log}"
    );
    for (path, bytes) in snapshot(env.root()) {
        for secret in [db_password, plain_var, "TCK-204481", key] {
            let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(!found, "{secret} is in {}", path.display());
        }
    }
    // Switched off, the shapes and the environment are kept as written.
    let out = run_with_env(
        &env,
        &["--no-redact-builtin", "--no-redact-env", "commit", "d"],
        &vars,
        turn.as_bytes(),
    );
    assert!(out.status.success());
    let log = String::from_utf8(env.ok(&["log", "d", "--json"], b"")).unwrap();
    assert!(log.contains(key) && log.contains(db_password), "{log}");
    let bad = env.run(&["--redact-pattern", "x=(", "log", "d"], b"");
    assert_eq!(code(&bad), 2, "{}", stderr(&bad));
}

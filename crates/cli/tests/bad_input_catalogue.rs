//! The bad-input catalogue (docs/design.md#9-bad-input-and-faults): every way a caller can
//! get input wrong across the CLI, each run against a store holding a conversation (with its recall
//! index built). For each case: the exit code is non-zero (and not a panic's 101), stderr is
//! exactly one line starting `ctxlog: `, and every byte of the store is as it was. Queries made of
//! FTS5 syntax or SQL are not errors (docs/design.md#r3-literal-queries: they are literal words):
//! they must exit 0 with a JSON result and still change nothing.
//!
//! `CTXLOG_WRITE_CATALOGUE=1 cargo test -p ctxlog-cli --test bad_input_catalogue` rewrites the
//! table in `docs/reliability.md` (case, exit code, message) from the run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::Output;

use common::{Env, code, snapshot, stderr};

/// What a case must do.
#[derive(Clone, Copy, PartialEq)]
enum Want {
    /// Refused: non-zero exit, one `ctxlog: ` line.
    Refused,
    /// Accepted literally: exit 0 (queries that look like syntax).
    Literal,
    /// Accepted as harmless: exit 0, an empty or whole answer, nothing written (recorded in
    /// the table so a change of policy is visible).
    Lenient,
}

struct Case {
    name: &'static str,
    args: Vec<OsString>,
    stdin: Vec<u8>,
    want: Want,
    /// A known defect: the case is reported in the table with this note and not asserted.
    defect: Option<&'static str>,
}

fn case(name: &'static str, args: &[&str], stdin: &[u8]) -> Case {
    Case {
        name,
        args: args.iter().map(OsString::from).collect(),
        stdin: stdin.to_vec(),
        want: Want::Refused,
        defect: None,
    }
}

fn commit(name: &'static str, stdin: &[u8]) -> Case {
    case(name, &["commit", "chat"], stdin)
}

fn literal(name: &'static str, query: &str) -> Case {
    Case {
        want: Want::Literal,
        ..case(name, &["recall", "chat", query], b"")
    }
}

fn lenient(name: &'static str, args: &[&str]) -> Case {
    Case {
        want: Want::Lenient,
        ..case(name, args, b"")
    }
}

fn tool_turn(result: &str) -> Vec<u8> {
    format!(
        r#"{{"events":[{{"kind":"user","text":"go"}},{{"kind":"tool_call","call_id":"c1","tool":"sh","arguments":{{}}}},{result}]}}"#
    )
    .into_bytes()
}

fn catalogue(files: &Path) -> Vec<Case> {
    let f = |name: &str| files.join(name).to_string_lossy().into_owned();
    let long_name = "a".repeat(65);
    let long_id = "i".repeat(1000);
    let long_reason = "r".repeat(1025);
    let secret_id = "ghp_0123456789abcdefghij0123456789abcdef";
    let big_user = format!(r#"{{"user":"{}"}}"#, "x".repeat(5 << 20));
    let big_commit = {
        let e = format!(r#"{{"kind":"note","text":"{}"}}"#, "y".repeat(3_600_000));
        format!(r#"{{"events":[{e},{e},{e},{e},{e}]}}"#)
    };
    let deep = format!(
        r#"{{"events":[{{"kind":"user","text":"go"}},{{"kind":"tool_call","call_id":"c9","tool":"sh","arguments":{}1{}}}]}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let mut invalid_utf8_query = case("recall: query not UTF-8", &["recall", "chat"], b"");
    invalid_utf8_query
        .args
        .push(OsString::from_vec(b"caf\xe9".to_vec()));
    let mut invalid_utf8_name = case("name: not UTF-8", &["log"], b"");
    invalid_utf8_name
        .args
        .push(OsString::from_vec(b"ch\xffat".to_vec()));
    let cases = vec![
        // commit: the turn JSON
        commit("commit: malformed JSON", b"{\"user\":"),
        commit("commit: JSON array, not an object", b"[1,2]"),
        commit("commit: JSON string, not an object", b"\"hello\""),
        commit("commit: trailing garbage after the object", br#"{"user":"x"} {"user":"y"}"#),
        commit("commit: invalid UTF-8", b"{\"user\":\"caf\xe9\"}"),
        commit("commit: empty input", b""),
        commit("commit: whitespace only", b"  \n\t "),
        commit("commit: unknown event kind", br#"{"events":[{"kind":"shout","text":"x"}]}"#),
        commit("commit: unknown top-level key", br#"{"usr":"typo"}"#),
        commit("commit: kind missing", br#"{"events":[{"text":"x"}]}"#),
        commit("commit: text not a string", br#"{"user":42}"#),
        commit("commit: empty events", br#"{"events":[]}"#),
        commit("commit: empty user text", br#"{"user":""}"#),
        commit(
            "commit: tool_result without its call",
            br#"{"events":[{"kind":"user","text":"go"},{"kind":"tool_result","call_id":"zz","tool":"sh","status":"ok","text":"x"}]}"#,
        ),
        commit(
            "commit: unknown tool status",
            &tool_turn(r#"{"kind":"tool_result","call_id":"c1","tool":"sh","status":"meh","text":"x"}"#),
        ),
        commit(
            "commit: tool_result names another tool than its call",
            &tool_turn(r#"{"kind":"tool_result","call_id":"c1","tool":"rm","status":"ok","text":"x"}"#),
        ),
        commit(
            "commit: exit_code beyond i64",
            &tool_turn(r#"{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","exit_code":100000000000000000000,"text":"x"}"#),
        ),
        commit(
            "commit: artifact ref with ..",
            &tool_turn(r#"{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","text":"x","artifact":{"name":"../../etc/passwd","bytes":1}}"#),
        ),
        commit(
            "commit: absolute artifact ref",
            &tool_turn(r#"{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","text":"x","artifact":{"name":"/etc/passwd","bytes":1}}"#),
        ),
        commit(
            "commit: artifact ref to a missing artifact",
            &tool_turn(&format!(
                r#"{{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","text":"x","artifact":{{"name":"sha256-{}","bytes":1}}}}"#,
                "0".repeat(64)
            )),
        ),
        commit(
            "commit: system marker from an application",
            br#"{"events":[{"kind":"system","marker":{"type":"import","source":"x"}}]}"#,
        ),
        commit(
            "commit: note superseding a seq that does not exist",
            br#"{"events":[{"kind":"note","text":"n","supersedes":9999}]}"#,
        ),
        commit("commit: record over the 4 MiB cap", big_user.as_bytes()),
        commit("commit: commit over the 16 MiB cap", big_commit.as_bytes()),
        commit("commit: arguments nested 5000 deep", deep.as_bytes()),
        commit("commit: a key given twice", br#"{"user":"a","user":"b"}"#),
        commit(
            "commit: a key given twice in tool arguments",
            br#"{"events":[{"kind":"user","text":"go"},{"kind":"tool_call","call_id":"c9","tool":"sh","arguments":{"cmd":"ls","cmd":"rm"}}]}"#,
        ),
        commit(
            "commit: integer beyond 64 bits in tool arguments",
            br#"{"events":[{"kind":"user","text":"go"},{"kind":"tool_call","call_id":"c9","tool":"sh","arguments":{"n":123456789012345678901234567890}}]}"#,
        ),
        commit(
            "commit: decimal a 64-bit float does not keep",
            br#"{"events":[{"kind":"user","text":"go"},{"kind":"tool_call","call_id":"c9","tool":"sh","arguments":{"x":0.10000000000000001}}]}"#,
        ),
        case("commit: id that looks like a secret", &["commit", "chat", "--id", secret_id], br#"{"user":"x"}"#),
        case("commit: id over the length cap", &["commit", "chat", "--id", &long_id], br#"{"user":"x"}"#),
        case("commit: id reused with other content", &["commit", "chat", "--id", "t1"], br#"{"user":"other"}"#),
        case("commit: input file missing", &["commit", "chat", "/nonexistent/turn.json"], b""),
        case("commit: input file is a directory", &["commit", "chat", "/"], b""),
        // conversation names
        case("name: contains /", &["commit", "a/b"], br#"{"user":"x"}"#),
        case("name: ..", &["commit", ".."], br#"{"user":"x"}"#),
        case("name: .", &["commit", "."], br#"{"user":"x"}"#),
        case("name: ../escape", &["commit", "../escape"], br#"{"user":"x"}"#),
        case("name: over 64 characters", &["commit", &long_name], br#"{"user":"x"}"#),
        case("name: empty", &["commit", ""], br#"{"user":"x"}"#),
        case("name: space", &["commit", "my chat"], br#"{"user":"x"}"#),
        case("name: non-ASCII", &["commit", "café"], br#"{"user":"x"}"#),
        case("name: backslash", &["commit", "a\\b"], br#"{"user":"x"}"#),
        invalid_utf8_name,
        case("name: unknown conversation (log)", &["log", "nosuch"], b""),
        case("name: unknown conversation (verify)", &["verify", "nosuch"], b""),
        case("name: unknown conversation (recall)", &["recall", "nosuch", "x"], b""),
        case("name: unknown conversation (erase)", &["erase", "nosuch", "--all"], b""),
        case("name: unknown conversation (reindex)", &["reindex", "nosuch"], b""),
        // project: budgets, formats, tokenizers
        case("project: --max-bytes 0", &["project", "chat", "--input", "x", "--max-bytes", "0"], b""),
        case("project: --max-bytes -5", &["project", "chat", "--input", "x", "--max-bytes", "-5"], b""),
        case("project: --max-bytes not a number", &["project", "chat", "--input", "x", "--max-bytes", "lots"], b""),
        case("project: --max-tokens 0", &["project", "chat", "--input", "x", "--max-tokens", "0"], b""),
        case("project: --max-tokens -1", &["project", "chat", "--input", "x", "--max-tokens", "-1"], b""),
        case("project: --reserve-output 0", &["project", "chat", "--input", "x", "--reserve-output", "0"], b""),
        case(
            "project: reserve-output above max-tokens",
            &["project", "chat", "--input", "x", "--max-tokens", "10", "--reserve-output", "20"],
            b"",
        ),
        case("project: mandatory input over the byte budget", &["project", "chat", "--input", "x", "--max-bytes", "10"], b""),
        case("project: unknown format", &["project", "chat", "--input", "x", "--format", "gemini"], b""),
        case("project: unknown tokenizer", &["project", "chat", "--input", "x", "--tokenizer", "p50k"], b""),
        case("project: unknown policy", &["project", "chat", "--input", "x", "--policy", "smart"], b""),
        case("project: --recall 51", &["project", "chat", "--input", "x", "--recall", "51"], b""),
        case("project: --recall -1", &["project", "chat", "--input", "x", "--recall", "-1"], b""),
        case("project: --input missing", &["project", "chat"], b""),
        case("project: --tools file missing", &["project", "chat", "--input", "x", "--tools", "/nonexistent/tools.json"], b""),
        case("project: --tools malformed JSON", &["project", "chat", "--input", "x", "--tools", &f("bad.json")], b""),
        case("project: --tools not an array", &["project", "chat", "--input", "x", "--tools", &f("object.json")], b""),
        case("project: --tools with a key given twice", &["project", "chat", "--input", "x", "--tools", &f("twice.json")], b""),
        // count
        case("count: unknown format", &["count", "--format", "gemini"], br#"{"model":"m","messages":[]}"#),
        case("count: unknown tokenizer", &["count", "--tokenizer", "p50k"], br#"{"model":"m","messages":[]}"#),
        case("count: malformed body", &["count"], b"{\"model\":"),
        case("count: body not UTF-8", &["count"], b"{\"model\":\"\xff\"}"),
        // recall arguments
        case("recall: --limit 0", &["recall", "chat", "x", "--limit", "0"], b""),
        case("recall: --limit 51", &["recall", "chat", "x", "--limit", "51"], b""),
        case("recall: --offset -1", &["recall", "chat", "x", "--offset", "-1"], b""),
        case("recall: --seq 0 (seqs start at 1)", &["recall", "chat", "--seq", "0"], b""),
        lenient("recall: --seq beyond the ledger (no hits)", &["recall", "chat", "--seq", "9999"]),
        invalid_utf8_query,
        // log arguments
        case("log: --from 0 (seqs start at 1)", &["log", "chat", "--from", "0"], b""),
        case("log: --from -1", &["log", "chat", "--from", "-1"], b""),
        case("log: --limit not a number", &["log", "chat", "--limit", "ten"], b""),
        // erase arguments
        case("erase: nothing to erase named", &["erase", "chat"], b""),
        case("erase: --seqs 0", &["erase", "chat", "--seqs", "0"], b""),
        case("erase: --seqs reversed 5-3", &["erase", "chat", "--seqs", "5-3"], b""),
        case("erase: --seqs not numbers", &["erase", "chat", "--seqs", "a-b"], b""),
        case("erase: --seqs 1-2-3", &["erase", "chat", "--seqs", "1-2-3"], b""),
        case("erase: --seqs -1", &["erase", "chat", "--seqs", "-1"], b""),
        case("erase: --seqs beyond the ledger", &["erase", "chat", "--seqs", "9000-9999"], b""),
        case("erase: --turn with an unknown id", &["erase", "chat", "--turn", "nope"], b""),
        case("erase: --turn with an id that looks like a secret", &["erase", "chat", "--turn", secret_id], b""),
        case("erase: --turn and --seqs together", &["erase", "chat", "--turn", "t1", "--seqs", "1"], b""),
        case("erase: reason over 1024 bytes", &["erase", "chat", "--seqs", "1", "--reason", &long_reason], b""),
        // the command line itself
        case("cli: unknown subcommand", &["bogus"], b""),
        case("cli: unknown flag", &["log", "chat", "--colour"], b""),
        case("cli: no subcommand", &[], b""),
        case("cli: --root is a regular file", &["--root", &f("object.json"), "log", "chat"], b""),
        // queries that look like syntax are words (docs/design.md#r3-literal-queries)
        literal("recall: FTS5 unbalanced quote", "\"unbalanced"),
        literal("recall: FTS5 NEAR()", "NEAR(zebra code, 2)"),
        literal("recall: FTS5 column filter", "body:zebra"),
        literal("recall: FTS5 column set", "{body ctx}: zebra"),
        literal("recall: FTS5 prefix and boolean", "zeb* OR code AND NOT x"),
        literal("recall: FTS5 caret and parentheses", "^zebra )( ("),
        literal("recall: only operators", "AND OR NOT NEAR"),
        literal("recall: SQL injection", "'; DROP TABLE pages; --"),
        literal("recall: SQL UNION", "x' UNION SELECT * FROM meta --"),
        literal("recall: only punctuation", "\"*():^{}-+"),
    ];
    cases
}

fn run(env: &Env, c: &Case) -> Output {
    // A case that gives its own --root runs without the store's (clap refuses it twice).
    let mut child = if c.args.first().is_some_and(|a| a == "--root") {
        std::process::Command::new(env!("CARGO_BIN_EXE_ctxlog"))
            .args(&c.args)
            .env_remove("CTXLOG_ROOT")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    } else {
        env.spawn(&c.args)
    };
    let mut stdin = child.stdin.take().unwrap();
    let input = c.stdin.clone();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn store() -> (Env, tempfile::TempDir) {
    let env = Env::new();
    env.commit("chat", "The zebra code is ZX-81.", "Noted.");
    env.ok(
        &["commit", "chat", "--id", "t1"],
        br#"{"user":"second","assistant":"ok"}"#,
    );
    env.ok(&["recall", "chat", "zebra"], b"");
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("bad.json"), b"[{").unwrap();
    std::fs::write(files.path().join("object.json"), br#"{"name":"t"}"#).unwrap();
    std::fs::write(
        files.path().join("twice.json"),
        br#"[{"type":"function","function":{"name":"a","name":"b"}}]"#,
    )
    .unwrap();
    (env, files)
}

/// Checks one case; `Err` says what is wrong. Returns the table row otherwise.
fn check(env: &Env, c: &Case) -> (String, Result<(), String>) {
    let before = snapshot(env.root());
    let out = run(env, c);
    let exit = out.status.code().map_or("killed".into(), |c| c.to_string());
    let msg = stderr(&out);
    let line = msg.trim_end().to_string();
    let mut problems = Vec::new();
    if before != snapshot(env.root()) {
        problems.push("stored bytes changed".to_string());
    }
    match c.want {
        Want::Refused => {
            if out.status.success() || code(&out) == 101 {
                problems.push(format!("exit {exit}"));
            }
            if !msg.starts_with("ctxlog: ") || line.lines().count() != 1 {
                problems.push(format!("stderr not one `ctxlog: ` line: {msg:?}"));
            }
        }
        Want::Literal | Want::Lenient => {
            if !out.status.success() || !msg.is_empty() {
                problems.push(format!("exit {exit}, stderr {msg:?}"));
            }
            if c.want == Want::Literal
                && serde_json::from_slice::<serde_json::Value>(&out.stdout).is_err()
            {
                problems.push("stdout is not JSON".into());
            }
        }
    }
    let shown = if c.want == Want::Literal {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        format!(
            "(accepted as literal words: {} hits)",
            v["hits"].as_array().map_or(0, Vec::len)
        )
    } else {
        let mut l = line.replace('|', "\\|");
        if l.chars().count() > 220 {
            l = l.chars().take(220).collect::<String>() + "…";
        }
        format!("`{l}`")
    };
    let note = c
        .defect
        .map_or(String::new(), |d| format!(" **defect:** {d}"));
    let row = format!(
        "| {} | {exit} | {shown}{note} |",
        c.name.replace('|', "\\|")
    );
    let result = if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{}: {}", c.name, problems.join("; ")))
    };
    (row, result)
}

#[test]
fn every_bad_input_is_refused_with_one_line_and_no_bytes_changed() {
    let (env, files) = store();
    let cases = catalogue(files.path());
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for c in &cases {
        let (row, result) = check(&env, c);
        rows.push(row);
        if let Err(e) = result
            && c.defect.is_none()
        {
            failures.push(e);
        }
    }
    if std::env::var_os("CTXLOG_WRITE_CATALOGUE").is_some() {
        write_table(&rows);
    }
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The conversation still works after all that.
    env.commit("chat", "third", "reply");
}

#[test]
/// Regression: an exit code beyond i64 was named as a floating-point number; the message names
/// it as an integer.
fn exit_code_beyond_i64_is_named_as_an_integer() {
    let (env, _files) = store();
    let c = commit(
        "commit: exit_code beyond i64",
        &tool_turn(
            r#"{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","exit_code":100000000000000000000,"text":"x"}"#,
        ),
    );
    let out = run(&env, &c);
    assert!(!stderr(&out).contains("floating point"), "{}", stderr(&out));
}

#[test]
/// Regression: a tool result naming a different tool than its call was accepted; it is refused
/// and nothing is written.
fn tool_result_naming_another_tool_is_refused() {
    let (env, _files) = store();
    let before = snapshot(env.root());
    let out = run(
        &env,
        &commit(
            "commit: tool_result names another tool",
            &tool_turn(
                r#"{"kind":"tool_result","call_id":"c1","tool":"rm","status":"ok","text":"x"}"#,
            ),
        ),
    );
    assert_ne!(code(&out), 0);
    assert_eq!(before, snapshot(env.root()));
}

fn write_table(rows: &[String]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reliability.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let (start, end) = ("<!-- catalogue:start -->", "<!-- catalogue:end -->");
    let table = format!(
        "{start}\n| case | exit | message |\n|---|---|---|\n{}\n{end}",
        rows.join("\n")
    );
    let doc = match (doc.find(start), doc.find(end)) {
        (Some(a), Some(b)) => format!("{}{table}{}", &doc[..a], &doc[b + end.len()..]),
        _ => format!("{doc}\n{table}\n"),
    };
    std::fs::write(path, doc).unwrap();
}

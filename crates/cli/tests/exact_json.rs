//! Failure class: untrusted JSON changed silently on its way in — a key given twice in one
//! object (a parser keeps one and drops the other), an integer beyond 64 bits or a decimal
//! with more digits than a 64-bit float keeps (stored as another number), so that the model
//! is later shown something the caller never wrote.
//!
//! Guarantee: `commit`, `import` and `project --tools` refuse such JSON with exit 1 and one
//! line naming where (the JSON path and byte offset) and what to send instead, and no stored
//! byte changes; every number that a 64-bit integer or float keeps is stored and exported
//! digit for digit as written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};

const BIG: &str = "123456789012345678901234567890";

fn tool_turn(arguments: &str) -> Vec<u8> {
    format!(
        r#"{{"events":[{{"kind":"user","text":"go"}},{{"kind":"tool_call","call_id":"c1","tool":"calc","arguments":{arguments}}}]}}"#
    )
    .into_bytes()
}

/// Runs `args` with `stdin`; asserts a one-line refusal (exit 1) naming `named`, and that no
/// stored byte changed. Returns the message.
fn refused(env: &Env, args: &[&str], stdin: &[u8], named: &str) -> String {
    let before = snapshot(env.root());
    let out = env.run(args, stdin);
    let msg = stderr(&out);
    assert_eq!(code(&out), 1, "{args:?}: {msg}");
    assert!(
        msg.starts_with("ctxlog: ") && msg.trim_end().lines().count() == 1,
        "{msg}"
    );
    assert!(msg.contains(named), "{named}: {msg}");
    assert_eq!(
        before,
        snapshot(env.root()),
        "{args:?}: stored bytes changed"
    );
    msg
}

#[test]
fn json_that_cannot_be_kept_exactly_is_refused_where_it_enters() {
    let env = Env::new();
    env.commit("chat", "first", "reply");
    let commit = ["commit", "chat"];
    let twice = "give each key once";
    refused(
        &env,
        &commit,
        br#"{"user":"a","user":"b"}"#,
        "key \"user\" appears twice in the object at $ (byte 12)",
    );
    let in_event = br#"{"events":[{"kind":"user","text":"a","text":"b"}]}"#;
    refused(
        &env,
        &commit,
        in_event,
        "key \"text\" appears twice in the object at $.events[0]",
    );
    let in_arguments = tool_turn(r#"{"path":"/tmp","path":"/"}"#);
    let msg = refused(
        &env,
        &commit,
        &in_arguments,
        "at $.events[1].arguments (byte",
    );
    assert!(msg.contains(twice), "{msg}");
    let wide = tool_turn(&format!(r#"{{"n":{BIG}}}"#));
    let msg = refused(
        &env,
        &commit,
        &wide,
        &format!("the integer {BIG} at $.events[1].arguments.n"),
    );
    assert!(
        msg.contains("1.2345678901234568e+29") && msg.contains("as a string"),
        "{msg}"
    );
    let decimal = tool_turn(r#"{"pi":3.14159265358979323846264338327950288}"#);
    refused(
        &env,
        &commit,
        &decimal,
        "would be stored as the 64-bit float 3.141592653589793",
    );

    // An import names the line (exports) or the JSON path (one document).
    let file = env.root().join("input.json");
    std::fs::write(&file, format!("{{\"kind\":\"user\",\"text\":\"a\"}}\n{{\"kind\":\"tool_call\",\"call_id\":\"c\",\"tool\":\"t\",\"arguments\":{{\"n\":{BIG}}}}}\n")).unwrap();
    let path = file.to_str().unwrap();
    refused(
        &env,
        &["import", "other", path],
        b"",
        &format!("line 2: invalid JSON: the integer {BIG}"),
    );
    std::fs::write(
        &file,
        r#"[{"role":"user","content":"a","role":"assistant"}]"#,
    )
    .unwrap();
    refused(
        &env,
        &["import", "other", "--from", "openai-chat", path],
        b"",
        "key \"role\" appears twice in the object at $[0]",
    );
    std::fs::remove_file(&file).unwrap();

    // Tool definitions sent to the model are read the same way.
    let tools = env.dir.path().join("tools.json");
    std::fs::write(
        &tools,
        r#"[{"type":"function","function":{"name":"a","name":"b"}}]"#,
    )
    .unwrap();
    let args = [
        "project",
        "chat",
        "--input",
        "x",
        "--tools",
        tools.to_str().unwrap(),
    ];
    let msg = refused(&env, &args, b"", "--tools");
    assert!(
        msg.contains("key \"name\" appears twice in the object at $[0].function"),
        "{msg}"
    );
}

#[test]
fn every_number_a_64_bit_integer_or_float_keeps_is_stored_digit_for_digit() {
    let env = Env::new();
    let arguments = r#"{"max":18446744073709551615,"min":-9223372036854775808,"sum":0.30000000000000004,"tiny":5e-324,"huge":1.7976931348623157e+308,"half":0.5}"#;
    env.ok(&["commit", "chat"], &tool_turn(arguments));
    let exported = String::from_utf8(env.ok(&["export", "chat"], b"")).unwrap();
    assert!(exported.contains(arguments), "{exported}");
}

//! The curl session of `docs/http-api.md` is true: every request in it is sent through the
//! router, in order, with the headers curl sends (its `Host`, and `-d`'s form content type
//! unless `-H` gives one), and its status (and its answer, where the doc gives it in full, or
//! the start of it before `…`) is checked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{call_exact, open_app};

const DOC: &str = include_str!("../../../docs/http-api.md");

/// One request of the doc and what the doc says it answers.
#[derive(Debug)]
struct Example {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
    status: u16,
    answer: String,
}

/// Splits a shell command line into words: single quotes group, nothing else is special.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(word);
    }
    out
}

fn examples() -> Vec<Example> {
    let section = DOC.split("## A curl session").nth(1).unwrap();
    let block = section
        .split("```sh")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let mut examples = Vec::new();
    let mut command = String::new();
    for line in block.lines() {
        if let Some(expect) = line.strip_prefix("# ") {
            let (status, answer) = expect.split_once(' ').unwrap_or((expect, ""));
            examples.push(parse(&command, status.parse().unwrap(), answer));
            command.clear();
        } else if !line.trim().is_empty() {
            command.push_str(line.trim_end().trim_end_matches('\\'));
            command.push(' ');
        }
    }
    examples
}

fn parse(command: &str, status: u16, answer: &str) -> Example {
    let words = words(command);
    assert_eq!(words[0], "curl", "{command}");
    let mut example = Example {
        method: String::new(),
        path: String::new(),
        headers: Vec::new(),
        body: String::new(),
        status,
        answer: answer.to_string(),
    };
    let mut it = words.iter().skip(1);
    while let Some(w) = it.next() {
        match w.as_str() {
            "-s" => {}
            "-X" => example.method = it.next().unwrap().clone(),
            "-H" => {
                let (k, v) = it.next().unwrap().split_once(": ").unwrap();
                example.headers.push((k.to_string(), v.to_string()));
            }
            "-d" => example.body = it.next().unwrap().clone(),
            url => {
                let rest = url.strip_prefix("http://127.0.0.1:7474").expect(url);
                example.path = rest.to_string();
            }
        }
    }
    let typed = example
        .headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    if !example.body.is_empty() && !typed {
        // What curl sends with -d.
        example.headers.push((
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into(),
        ));
    }
    if !example
        .headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("host"))
    {
        example
            .headers
            .push(("Host".into(), "127.0.0.1:7474".into()));
    }
    if example.method.is_empty() {
        example.method = if example.body.is_empty() {
            "GET"
        } else {
            "POST"
        }
        .to_string();
    }
    example
}

#[tokio::test]
async fn every_documented_request_answers_as_documented() {
    let examples = examples();
    assert!(examples.len() >= 12, "{examples:?}");
    let (_dir, app) = open_app();
    for ex in &examples {
        let headers: Vec<(&str, &str)> = ex
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let reply = call_exact(&app, &ex.method, &ex.path, &headers, ex.body.clone()).await;
        let text = String::from_utf8_lossy(&reply.body).to_string();
        assert_eq!(
            reply.status.as_u16(),
            ex.status,
            "{} {}: {text}",
            ex.method,
            ex.path
        );
        match ex.answer.strip_suffix('…') {
            Some(start) => assert!(text.starts_with(start), "{} {}: {text}", ex.method, ex.path),
            None if !ex.answer.is_empty() => {
                assert_eq!(text, ex.answer, "{} {}", ex.method, ex.path)
            }
            None => {}
        }
    }
}

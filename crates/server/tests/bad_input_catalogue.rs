//! The HTTP half of the bad-input catalogue (docs/design.md#9-bad-input-and-faults): every way a
//! client can get a request wrong, sent as raw HTTP/1.1 bytes to a real server on loopback (`run`
//! on a `127.0.0.1:0` listener, the code path of `ctxlog serve`, with a bearer token), against a
//! tenant store holding a conversation with its recall index built. For each case: the status is
//! the expected one (never 500), the body is `{"error":{"class","message"}}` with the expected
//! class and a one-line message that names no server path, and every file and directory under the
//! store is byte for byte as it was. Queries made of FTS5 syntax or SQL are not errors
//! (docs/design.md#r3-literal-queries): they answer 200 and still change nothing.
//!
//! `CTXLOG_WRITE_CATALOGUE=1 cargo test -p ctxlog-server --test bad_input_catalogue` rewrites
//! the HTTP table in `docs/reliability.md` from the run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ctxlog_server::{AppState, Config, Tokens, run};

const TOKEN: &str = "catalogue-token-0123456789";
/// The server's body limit in this test (the default is 64 MiB; the rule is the same).
const BODY_LIMIT: usize = 256 << 10;

/// One request as raw bytes: method, target, extra headers, body.
struct Case {
    name: String,
    method: &'static str,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    /// The status and error class wanted; class `""` means a 200 answer (a literal query).
    want: (u16, &'static str),
    /// Send without the bearer token.
    anonymous: bool,
    /// Send without a `Content-Type` (otherwise `application/json` unless `headers` give one).
    untyped: bool,
}

fn req(
    name: &str,
    method: &'static str,
    target: &str,
    body: &[u8],
    want: (u16, &'static str),
) -> Case {
    Case {
        name: name.to_string(),
        method,
        target: target.to_string(),
        headers: Vec::new(),
        body: body.to_vec(),
        want,
        anonymous: false,
        untyped: false,
    }
}

fn post(name: &str, target: &str, body: &[u8], want: (u16, &'static str)) -> Case {
    req(name, "POST", target, body, want)
}

fn commit(name: &str, body: &[u8], want: (u16, &'static str)) -> Case {
    post(name, "/v1/conversations/chat/commits", body, want)
}

fn with_header(mut c: Case, name: &str, value: &[u8]) -> Case {
    c.headers.push((name.to_string(), value.to_vec()));
    c
}

fn anonymous(mut c: Case) -> Case {
    c.anonymous = true;
    c
}

fn untyped(mut c: Case) -> Case {
    c.untyped = true;
    c
}

fn tool_turn(result: &str) -> Vec<u8> {
    format!(
        r#"{{"events":[{{"kind":"user","text":"go"}},{{"kind":"tool_call","call_id":"c1","tool":"sh","arguments":{{}}}},{result}]}}"#
    )
    .into_bytes()
}

const USAGE: (u16, &str) = (400, "usage");
const BAD: (u16, &str) = (400, "bad_input");
const NOT_FOUND: (u16, &str) = (404, "not_found");
const LITERAL: (u16, &str) = (200, "");
const MEDIA: (u16, &str) = (415, "unsupported_media_type");
const FORBIDDEN: (u16, &str) = (403, "forbidden");

#[rustfmt::skip]
fn catalogue() -> Vec<Case> {
    let long_name = "a".repeat(65);
    let deep = format!(
        r#"{{"events":[{{"kind":"user","text":"go"}},{{"kind":"tool_call","call_id":"c9","tool":"sh","arguments":{}1{}}}]}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let too_big = format!(r#"{{"user":"{}"}}"#, "x".repeat(BODY_LIMIT));
    let long_reason = format!(r#"{{"target":{{"seqs":{{"from":1,"to":1}}}},"reason":"{}"}}"#, "r".repeat(1025));
    let projection = "/v1/conversations/chat/projection";
    let recall = "/v1/conversations/chat/recall";
    let erase = "/v1/conversations/chat/erase";
    vec![
        // authentication
        anonymous(req("auth: no Authorization header", "GET", "/v1/conversations", b"", (401, "unauthorized"))),
        anonymous(with_header(req("auth: wrong bearer token", "GET", "/v1/conversations", b"", (401, "unauthorized")), "authorization", b"Bearer not-the-token-0123456789")),
        anonymous(with_header(req("auth: Basic scheme", "GET", "/v1/conversations", b"", (401, "unauthorized")), "authorization", b"Basic YWxpY2U6cHc=")),
        anonymous(with_header(req("auth: empty bearer token", "GET", "/v1/conversations", b"", (401, "unauthorized")), "authorization", b"Bearer ")),
        anonymous(with_header(commit("auth: commit with a token that is not ASCII", br#"{"user":"x"}"#, (401, "unauthorized")), "authorization", b"Bearer \xff\xfe")),
        // routes and methods
        req("route: unknown path", "GET", "/v1/nothing", b"", NOT_FOUND),
        req("route: unknown operation on a conversation", "POST", "/v1/conversations/chat/delete", b"{}", NOT_FOUND),
        req("route: GET on the commits route", "GET", "/v1/conversations/chat/commits", b"", (405, "method_not_allowed")),
        req("route: DELETE a conversation", "DELETE", "/v1/conversations/chat/events", b"", (405, "method_not_allowed")),
        // the HTTP policy: what a web page could send behind its user's back
        with_header(commit("policy: commit as text/plain (a cross-site page's fetch)", br#"{"user":"planted"}"#, MEDIA), "content-type", b"text/plain;charset=UTF-8"),
        with_header(post("policy: erase as a form post", erase, b"target=all", MEDIA), "content-type", b"application/x-www-form-urlencoded"),
        untyped(post("policy: import without a Content-Type", "/v1/conversations/chat/import?from=openai-chat", br#"[{"role":"user","content":"planted"}]"#, MEDIA)),
        with_header(commit("policy: Origin of another site", br#"{"user":"planted"}"#, FORBIDDEN), "origin", b"https://attacker.example"),
        with_header(req("policy: Origin null (a sandboxed page)", "GET", "/v1/conversations", b"", FORBIDDEN), "origin", b"null"),
        // conversation names in the path
        commit("name: space (%20)", br#"{"user":"x"}"#, USAGE).at("/v1/conversations/a%20b/commits"),
        commit("name: 65 characters", br#"{"user":"x"}"#, USAGE).at(&format!("/v1/conversations/{long_name}/commits")),
        commit("name: `..`", br#"{"user":"x"}"#, USAGE).at("/v1/conversations/../commits"),
        commit("name: encoded slash (%2F)", br#"{"user":"x"}"#, USAGE).at("/v1/conversations/a%2Fb/commits"),
        commit("name: encoded NUL (%00)", br#"{"user":"x"}"#, USAGE).at("/v1/conversations/a%00b/commits"),
        commit("name: not UTF-8 (%FF)", br#"{"user":"x"}"#, BAD).at("/v1/conversations/ch%FFat/commits"),
        commit("name: non-ASCII letter", br#"{"user":"x"}"#, USAGE).at("/v1/conversations/caf%C3%A9/commits"),
        // commit: the turn JSON
        commit("commit: malformed JSON", b"{\"user\":", BAD),
        commit("commit: JSON array, not an object", b"[1,2]", BAD),
        commit("commit: trailing garbage after the object", br#"{"user":"x"} {"user":"y"}"#, BAD),
        commit("commit: invalid UTF-8", b"{\"user\":\"caf\xe9\"}", BAD),
        commit("commit: empty body", b"", BAD),
        commit("commit: unknown event kind", br#"{"events":[{"kind":"shout","text":"x"}]}"#, BAD),
        commit("commit: unknown top-level key", br#"{"usr":"typo"}"#, BAD),
        commit("commit: text not a string", br#"{"user":42}"#, BAD),
        commit("commit: empty events", br#"{"events":[]}"#, BAD),
        commit("commit: empty user text", br#"{"user":""}"#, BAD),
        commit("commit: tool_result without its call", br#"{"events":[{"kind":"user","text":"go"},{"kind":"tool_result","call_id":"zz","tool":"sh","status":"ok","text":"x"}]}"#, BAD),
        commit("commit: tool_result names another tool than its call", &tool_turn(r#"{"kind":"tool_result","call_id":"c1","tool":"rm","status":"ok","text":"x"}"#), BAD),
        commit("commit: exit_code beyond i64", &tool_turn(r#"{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","exit_code":100000000000000000000,"text":"x"}"#), BAD),
        commit("commit: artifact ref with ..", &tool_turn(r#"{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","text":"x","artifact":{"name":"../../etc/passwd","bytes":1}}"#), BAD),
        commit("commit: system marker from an application", br#"{"events":[{"kind":"system","marker":{"type":"import","source":"x"}}]}"#, BAD),
        commit("commit: arguments nested 5,000 deep", deep.as_bytes(), BAD),
        commit("commit: body over the server's limit", too_big.as_bytes(), (413, "too_large")),
        with_header(commit("commit: Idempotency-Key not ASCII", br#"{"user":"x"}"#, BAD), "idempotency-key", b"k\xff"),
        with_header(commit("commit: Idempotency-Key of 1,000 characters", br#"{"user":"x"}"#, BAD), "idempotency-key", "i".repeat(1000).as_bytes()),
        with_header(commit("commit: replayed Idempotency-Key with other content", br#"{"user":"other","assistant":"content"}"#, (409, "conflict")), "idempotency-key", b"turn-1"),
        // events (log)
        req("events: from=0 (seqs start at 1)", "GET", "/v1/conversations/chat/events?from=0", b"", USAGE),
        req("events: from not a number", "GET", "/v1/conversations/chat/events?from=x", b"", BAD),
        req("events: from=-1", "GET", "/v1/conversations/chat/events?from=-1", b"", BAD),
        req("events: limit=0", "GET", "/v1/conversations/chat/events?limit=0", b"", USAGE),
        req("events: limit=10001", "GET", "/v1/conversations/chat/events?limit=10001", b"", USAGE),
        req("events: unknown query parameter", "GET", "/v1/conversations/chat/events?colour=red", b"", BAD),
        req("events: missing conversation", "GET", "/v1/conversations/nosuch/events", b"", NOT_FOUND),
        // projection
        post("projection: malformed JSON", projection, b"{\"input\":", BAD),
        post("projection: JSON array, not an object", projection, b"[]", BAD),
        post("projection: body names another conversation", projection, br#"{"conversation":"other","input":"x","max_bytes":1000}"#, BAD),
        post("projection: unknown field", projection, br#"{"input":"x","max_bytes":1000,"max_byte":1}"#, USAGE),
        post("projection: max_bytes 0", projection, br#"{"input":"x","max_bytes":0}"#, USAGE),
        post("projection: max_bytes negative", projection, br#"{"input":"x","max_bytes":-1}"#, USAGE),
        post("projection: max_bytes a string", projection, br#"{"input":"x","max_bytes":"1000"}"#, USAGE),
        post("projection: recall 51 pages", projection, br#"{"input":"x","max_bytes":1000,"recall":51}"#, USAGE),
        post("projection: unknown format", projection, br#"{"input":"x","max_bytes":1000,"format":"gemini"}"#, USAGE),
        post("projection: unknown tokenizer", projection, br#"{"input":"x","max_bytes":1000,"tokenizer":"p50k"}"#, USAGE),
        post("projection: input alone over the budget", projection, format!(r#"{{"input":"{}","max_bytes":200}}"#, "x".repeat(400)).as_bytes(), (422, "over_budget")),
        post("projection: report=maybe", &format!("{projection}?report=maybe"), br#"{"input":"x","max_bytes":1000}"#, BAD),
        // recall
        post("recall: limit 0", recall, br#"{"query":"x","limit":0}"#, USAGE),
        post("recall: limit 51", recall, br#"{"query":"x","limit":51}"#, USAGE),
        post("recall: seq 0 (seqs start at 1)", recall, br#"{"seq":0}"#, USAGE),
        post("recall: offset -1", recall, br#"{"query":"x","offset":-1}"#, USAGE),
        post("recall: query not a string", recall, br#"{"query":["x"]}"#, USAGE),
        post("recall: unknown field", recall, br#"{"query":"x","limt":5}"#, USAGE),
        post("recall: missing conversation", "/v1/conversations/nosuch/recall", br#"{"query":"x"}"#, NOT_FOUND),
        post("recall: SQL injection", recall, br#"{"query":"x'); DROP TABLE pages; --"}"#, LITERAL),
        post("recall: FTS5 syntax", recall, br#"{"query":"zebra* NEAR(a b) OR body:x ^y"}"#, LITERAL),
        // erase
        post("erase: nothing to erase named", erase, b"{}", USAGE),
        post("erase: unknown target", erase, br#"{"target":"everything"}"#, USAGE),
        post("erase: seqs reversed", erase, br#"{"target":{"seqs":{"from":5,"to":3}}}"#, USAGE),
        post("erase: seqs 0", erase, br#"{"target":{"seqs":{"from":0,"to":0}}}"#, USAGE),
        post("erase: seqs beyond the ledger", erase, br#"{"target":{"seqs":{"from":9000,"to":9999}}}"#, USAGE),
        post("erase: commit id never used", erase, br#"{"target":{"commit":{"id":"nope"}}}"#, USAGE),
        post("erase: unknown field (a misspelt option is not ignored)", erase, br#"{"target":"all","dry_run":true}"#, USAGE),
        post("erase: reason over 1,024 bytes", erase, long_reason.as_bytes(), USAGE),
        post("erase: missing conversation", "/v1/conversations/nosuch/erase", br#"{"target":"all"}"#, NOT_FOUND),
        // verify, reindex
        post("verify: unknown field", "/v1/conversations/chat/verify", br#"{"deep":true}"#, USAGE),
        post("verify: missing conversation", "/v1/conversations/nosuch/verify", b"", NOT_FOUND),
        post("reindex: missing conversation", "/v1/conversations/nosuch/reindex", b"", NOT_FOUND),
        post("reindex: unknown field", "/v1/conversations/chat/reindex", br#"{"force":true}"#, USAGE),
        // count
        post("count: malformed body", "/v1/count", b"{\"model\":", BAD),
        post("count: body not UTF-8", "/v1/count", b"{\"model\":\"\xff\"}", BAD),
        post("count: unknown format", "/v1/count?format=gemini", br#"{"model":"m","messages":[]}"#, BAD),
        post("count: unknown tokenizer", "/v1/count?tokenizer=p50k", br#"{"model":"m","messages":[]}"#, BAD),
        post("count: shape could be either format", "/v1/count", br#"{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}"#, USAGE),
    ]
}

impl Case {
    /// The same case sent to another target.
    fn at(mut self, target: &str) -> Case {
        self.target = target.to_string();
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out =
            format!("{} {} HTTP/1.1\r\nHost: test\r\n", self.method, self.target).into_bytes();
        let mut headers = self.headers.clone();
        if !self.anonymous {
            headers.push((
                "authorization".into(),
                format!("Bearer {TOKEN}").into_bytes(),
            ));
        }
        let typed = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        if !typed && !self.untyped {
            headers.push(("content-type".into(), b"application/json".to_vec()));
        }
        headers.push((
            "content-length".into(),
            self.body.len().to_string().into_bytes(),
        ));
        headers.push(("connection".into(), b"close".to_vec()));
        for (k, v) in headers {
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(&v);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }
}

/// Sends raw bytes on a fresh connection; the status and the body.
fn send(addr: SocketAddr, request: &[u8]) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    // The server may answer 413 and close before reading the whole body.
    let _ = stream.write_all(request);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response: {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let status = head[9..12].parse().unwrap();
    let mut body = raw[head_end + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    (status, body)
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..line_end]).unwrap().trim(), 16)
            .unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[line_end + 2..line_end + 2 + size]);
        raw = &raw[line_end + 2 + size + 2..];
    }
}

/// Every directory and file under `dir`, with each file's bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut all = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                all.insert(path.clone(), None);
                stack.push(path);
            } else {
                all.insert(path.clone(), Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    all
}

/// Runs one case: its table row, and what was wrong with the answer.
fn check(addr: SocketAddr, root: &Path, c: &Case) -> (String, Vec<String>) {
    let before = snapshot(root);
    let (status, body) = send(addr, &c.bytes());
    let mut problems = Vec::new();
    if status != c.want.0 {
        problems.push(format!("status {status}, wanted {}", c.want.0));
    }
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let shown = if c.want.1.is_empty() {
        match json["hits"].as_array() {
            Some(hits) => format!("(accepted as literal words: {} hits)", hits.len()),
            None => {
                problems.push(format!(
                    "not a recall result: {}",
                    String::from_utf8_lossy(&body)
                ));
                String::new()
            }
        }
    } else {
        let error = &json["error"];
        let class = error["class"].as_str().unwrap_or_default();
        let message = error["message"].as_str().unwrap_or_default();
        if class != c.want.1 {
            problems.push(format!(
                "class {class:?}, wanted {:?}: {}",
                c.want.1,
                String::from_utf8_lossy(&body)
            ));
        }
        let keys: Vec<&String> = error
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        // Class over_budget adds its figures (what the mandatory part needs,
        // docs/design.md#p4-mandatory-input); no other class adds keys.
        let extra = keys
            .iter()
            .any(|k| !["class", "message"].contains(&k.as_str()));
        if json.as_object().map(serde_json::Map::len) != Some(1)
            || (extra && class != "over_budget")
        {
            problems.push(format!(
                "not {{\"error\":{{\"class\",\"message\"}}}}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        if message.is_empty() || message.contains('\n') {
            problems.push(format!("message not one line: {message:?}"));
        }
        if message.contains(&*root.to_string_lossy()) {
            problems.push(format!("message names the store's path: {message:?}"));
        }
        let mut shown = message.replace('|', "\\|");
        if shown.chars().count() > 200 {
            shown = shown.chars().take(200).collect::<String>() + "…";
        }
        format!("`{class}`: `{shown}`")
    };
    if snapshot(root) != before {
        problems.push("the store's bytes changed".into());
    }
    let row = format!("| {} | {status} | {shown} |", c.name.replace('|', "\\|"));
    (row, problems)
}

/// Seeds the store through the API: three turns (one with an idempotency key, one with a tool
/// call) and a recall that builds the index.
fn seed(addr: SocketAddr) {
    let turns: [(&str, &[u8]); 3] = [
        (
            "turn-1",
            br#"{"user":"My code is ZX-81","assistant":"Noted."}"#,
        ),
        (
            "",
            &tool_turn(
                r#"{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","text":"a zebra"}"#,
            ),
        ),
        (
            "",
            br#"{"user":"and the zebra?","assistant":"It is striped."}"#,
        ),
    ];
    for (key, body) in turns {
        let mut c = commit("seed", body, (200, ""));
        if !key.is_empty() {
            c = with_header(c, "idempotency-key", key.as_bytes());
        }
        let (status, answer) = send(addr, &c.bytes());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    }
    let (status, answer) = send(
        addr,
        &post(
            "seed",
            "/v1/conversations/chat/recall",
            br#"{"query":"zebra"}"#,
            LITERAL,
        )
        .bytes(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let hits: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert!(!hits["hits"].as_array().unwrap().is_empty(), "{hits}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_request_gets_its_status_one_line_and_no_byte_changed() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path());
    config.tokens = Some(Tokens::parse(&format!("{TOKEN} cat\n")).unwrap());
    config.body_limit = BODY_LIMIT;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run(listener, AppState::new(&config).unwrap(), async move {
        let _ = stopped.await;
    }));
    let root = dir.path().to_path_buf();
    let (rows, failures, count) = tokio::task::spawn_blocking(move || {
        seed(addr);
        let cases = catalogue();
        let mut rows = Vec::new();
        let mut failures = Vec::new();
        for c in &cases {
            let (row, problems) = check(addr, &root, c);
            rows.push(row);
            if !problems.is_empty() {
                failures.push(format!("{}: {}", c.name, problems.join("; ")));
            }
        }
        // The conversation still works after all that.
        let (status, answer) = send(
            addr,
            &commit("after", br#"{"user":"still here"}"#, (200, "")).bytes(),
        );
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        (rows, failures, cases.len())
    })
    .await
    .unwrap();
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    if std::env::var_os("CTXLOG_WRITE_CATALOGUE").is_some() {
        write_table(&rows);
    }
    assert!(count >= 60, "{count} cases");
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn write_table(rows: &[String]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reliability.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let (start, end) = (
        "<!-- http-catalogue:start -->",
        "<!-- http-catalogue:end -->",
    );
    let table = format!(
        "{start}\n| case | status | class: message |\n|---|---|---|\n{}\n{end}",
        rows.join("\n")
    );
    let doc = match (doc.find(start), doc.find(end)) {
        (Some(a), Some(b)) => format!("{}{table}{}", &doc[..a], &doc[b + end.len()..]),
        _ => format!("{doc}\n{table}\n"),
    };
    std::fs::write(path, doc).unwrap();
}

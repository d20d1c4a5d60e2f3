//! The inspector in a real browser (docs/design.md#i4-inspector): Debian's headless `chromium`,
//! driven by `tests/browser/inspector.mjs` (playwright-core, installed with npm on first run),
//! opens a conversation served on a real socket, moves the budget slider under several formats and
//! tokenizers, and checks that the kept-turn count the page draws (the number and the turns marked
//! on the timeline) equals the API's report; it also runs a recall search and saves a screenshot to
//! `target/inspector.png`.
//!
//! Needs `chromium` and `node`/`npm` (`.ci/run` installs chromium). Without them the test
//! fails under CI (`CI` set) and is skipped with a message elsewhere.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use ctxlog_server::{AppState, Config, run};

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn workspace_target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_draws_what_the_api_reports() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() || !have("node") || !have("npm") {
        assert!(
            std::env::var_os("CI").is_none(),
            "the browser test needs {chromium}, node and npm (.ci/run installs chromium)"
        );
        eprintln!("skipped: the browser test needs {chromium}, node and npm");
        return;
    }
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !scripts.join("node_modules/playwright-core").is_dir() {
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent"])
            .current_dir(&scripts)
            .status()
            .unwrap();
        assert!(status.success(), "npm install in {}", scripts.display());
    }

    let dir = tempfile::tempdir().unwrap();
    let store = ctxlog::Store::open(dir.path()).unwrap();
    for i in 0..30 {
        let turn = serde_json::json!({
            "user": format!("Turn {i}: what did we decide about the deployment window for service {i}?"),
            "assistant": format!("For service {i} the window is Tuesday 02:00-04:00 UTC, rollback by 04:30."),
        });
        let request =
            ctxlog::ops::CommitRequest::from_json("inspected", turn.to_string().as_bytes(), None)
                .unwrap();
        store.commit(&request).unwrap();
    }
    drop(store);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run(
        listener,
        AppState::new(&Config::new(dir.path())).unwrap(),
        async move {
            let _ = stopped.await;
        },
    ));

    let shot = workspace_target().join("inspector.png");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg("inspector.mjs")
            .arg(format!("http://{addr}"))
            .arg("inspected")
            .arg(&shot)
            .env("CHROMIUM", &chromium)
            .current_dir(&scripts)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    eprintln!("{stdout}");
    let result: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["ok"], true);
    assert!(workspace_target().join("inspector.png").is_file());
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

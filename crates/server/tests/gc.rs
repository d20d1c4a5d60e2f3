//! Retention over HTTP (docs/design.md#e2-retention, docs/design.md#i3-http-server): `POST
//! /v1/conversations/{name}/gc` and the store-wide `POST /v1/gc` apply the operations layer's
//! policy, a tenant's store-wide gc never touches another tenant's conversations, and a bad policy
//! is 400 with nothing changed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{ALICE, BOB, call};

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn commit_turns(app: &axum::Router, token: &str, n: usize) {
    let auth = bearer(token);
    for i in 0..n {
        let body = format!(r#"{{"user":"q{i} from {token}","assistant":"a{i}"}}"#);
        let r = call(
            app,
            "POST",
            "/v1/conversations/c/commits",
            &[("authorization", &auth)],
            body,
        )
        .await;
        assert_eq!(r.status, 200);
    }
}

#[tokio::test]
async fn store_wide_gc_stays_inside_the_callers_tenant() {
    let (_dir, app) = common::tenant_app();
    commit_turns(&app, ALICE, 4).await;
    commit_turns(&app, BOB, 4).await;
    let alice = bearer(ALICE);
    let r = call(
        &app,
        "POST",
        "/v1/gc",
        &[("authorization", &alice)],
        r#"{"keep_turns":1}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let json = r.json();
    assert_eq!(json["conversations"].as_array().unwrap().len(), 1);
    assert_eq!(
        json["conversations"][0]["removed"][0]["reason"],
        "retention: keep newest 1 turns"
    );
    assert_eq!(json["seqs_removed"], 6);

    // Bob's conversation of the same name is untouched: a dry run would still remove 6 seqs.
    let bob = bearer(BOB);
    let r = call(
        &app,
        "POST",
        "/v1/conversations/c/gc",
        &[("authorization", &bob)],
        r#"{"keep_turns":1,"dry_run":true}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["seqs_removed"], 6);
    let r = call(
        &app,
        "GET",
        "/v1/conversations/c/events",
        &[("authorization", &bob)],
        "",
    )
    .await;
    assert!(!String::from_utf8_lossy(&r.body).contains("tombstone"));
}

#[tokio::test]
async fn bad_policies_are_400_and_missing_conversations_404() {
    let (_dir, app) = common::open_app();
    commit_turns(&app, "t", 2).await;
    for body in [
        "{}",
        r#"{"older_than":"soon"}"#,
        r#"{"keep_turn":1}"#,
        r#"{"max_bytes":0}"#,
        r#"{"keep_turns":-1}"#,
        "[1]",
    ] {
        let r = call(&app, "POST", "/v1/conversations/c/gc", &[], body).await;
        assert_eq!(
            r.status,
            400,
            "{body}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    let r = call(
        &app,
        "POST",
        "/v1/gc",
        &[],
        r#"{"conversation":"c","keep_turns":1}"#,
    )
    .await;
    assert_eq!(r.status, 400);
    let r = call(
        &app,
        "POST",
        "/v1/conversations/nope/gc",
        &[],
        r#"{"keep_turns":1}"#,
    )
    .await;
    assert_eq!(r.status, 404);
    let r = call(&app, "GET", "/v1/conversations/c/events", &[], "").await;
    assert!(!String::from_utf8_lossy(&r.body).contains("tombstone"));
}

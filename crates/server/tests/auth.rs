//! Authentication, tenants and limits (docs/design.md#i3-http-server): a missing or wrong token is
//! 401; a tenant never sees another tenant's conversations (404, not 403); a body over the limit is
//! 413 and writes nothing; beyond loopback the server refuses to run without tokens.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::body::Body;
use common::{ALICE, BOB, call, tenant_app};
use ctxlog_server::{AppState, Config, Tokens, app, check_exposure};

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn missing_or_wrong_tokens_are_401() {
    let (_dir, app) = tenant_app();
    let uri = "/v1/conversations";
    let none = call(&app, "GET", uri, &[], Body::empty()).await;
    assert_eq!(
        (none.status.as_u16(), none.class().as_str()),
        (401, "unauthorized")
    );
    assert_eq!(none.headers["www-authenticate"], "Bearer realm=\"ctxlog\"");
    for header in [
        bearer("wrong-token-0123456789"),
        ALICE.to_string(),
        format!("Basic {ALICE}"),
        bearer(""),
    ] {
        let reply = call(
            &app,
            "GET",
            uri,
            &[("authorization", &header)],
            Body::empty(),
        )
        .await;
        assert_eq!(reply.status, 401, "{header}");
        assert!(!String::from_utf8_lossy(&reply.body).contains(ALICE));
    }
    let ok = call(
        &app,
        "GET",
        uri,
        &[("authorization", &bearer(ALICE))],
        Body::empty(),
    )
    .await;
    assert_eq!(ok.status, 200);
    // Health, the document and the inspector need no token.
    for public in ["/healthz", "/openapi.json", "/"] {
        assert_eq!(
            call(&app, "GET", public, &[], Body::empty()).await.status,
            200,
            "{public}"
        );
    }
    // A commit without a token writes nothing.
    let reply = call(
        &app,
        "POST",
        "/v1/conversations/c/commits",
        &[],
        r#"{"user":"x"}"#,
    )
    .await;
    assert_eq!(reply.status, 401);
    let list = call(
        &app,
        "GET",
        uri,
        &[("authorization", &bearer(ALICE))],
        Body::empty(),
    )
    .await;
    assert_eq!(list.json()["conversations"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn tenants_are_isolated_and_others_conversations_are_404() {
    let (dir, app) = tenant_app();
    let alice = [("authorization", bearer(ALICE))];
    let alice: Vec<(&str, &str)> = alice.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let bob_h = bearer(BOB);
    let bob = [("authorization", bob_h.as_str())];
    let reply = call(
        &app,
        "POST",
        "/v1/conversations/private/commits",
        &alice,
        r#"{"user":"alice's secret","assistant":"ok"}"#,
    )
    .await;
    assert_eq!(reply.status, 200);
    assert!(dir.path().join(".tenants/alice/private").is_dir());

    let list = call(&app, "GET", "/v1/conversations", &bob, Body::empty()).await;
    assert_eq!(list.json()["conversations"].as_array().unwrap().len(), 0);
    let events = call(
        &app,
        "GET",
        "/v1/conversations/private/events",
        &bob,
        Body::empty(),
    )
    .await;
    assert_eq!(
        (events.status.as_u16(), events.class().as_str()),
        (404, "not_found")
    );
    for op in ["recall", "verify", "reindex"] {
        let reply = call(
            &app,
            "POST",
            &format!("/v1/conversations/private/{op}"),
            &bob,
            "{}",
        )
        .await;
        assert_eq!(reply.status, 404, "{op}");
    }
    let erase = call(
        &app,
        "POST",
        "/v1/conversations/private/erase",
        &bob,
        r#"{"target":"all"}"#,
    )
    .await;
    assert_eq!(erase.status, 404);
    // Bob's projection of the same name sees no history of Alice's.
    let body = call(
        &app,
        "POST",
        "/v1/conversations/private/projection",
        &bob,
        r#"{"input":"what did I say?"}"#,
    )
    .await;
    assert!(!String::from_utf8_lossy(&body.body).contains("secret"));
    // Bob's commit to the same name is his own conversation.
    let reply = call(
        &app,
        "POST",
        "/v1/conversations/private/commits",
        &bob,
        r#"{"user":"bob here"}"#,
    )
    .await;
    assert_eq!(reply.json()["first_seq"], 1);
    let events = call(
        &app,
        "GET",
        "/v1/conversations/private/events",
        &alice,
        Body::empty(),
    )
    .await;
    assert_eq!(events.json()["last_seq"], 2);
}

#[tokio::test]
async fn oversized_bodies_are_413_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path());
    config.body_limit = 1024;
    let app = app(AppState::new(&config).unwrap());
    let big = serde_json::json!({"user": "x".repeat(2000)}).to_string();
    let reply = call(
        &app,
        "POST",
        "/v1/conversations/c/commits",
        &[],
        big.clone(),
    )
    .await;
    assert_eq!(
        (reply.status.as_u16(), reply.class().as_str()),
        (413, "too_large")
    );
    let reply = call(&app, "POST", "/v1/conversations/c/projection", &[], big).await;
    assert_eq!(reply.status, 413);
    let list = call(&app, "GET", "/v1/conversations", &[], Body::empty()).await;
    assert_eq!(list.json()["conversations"].as_array().unwrap().len(), 0);
    let small = call(
        &app,
        "POST",
        "/v1/conversations/c/commits",
        &[],
        r#"{"user":"fits"}"#,
    )
    .await;
    assert_eq!(small.status, 200);
}

#[test]
fn tokens_are_required_beyond_loopback() {
    assert!(check_exposure("127.0.0.1:0".parse().unwrap(), false).is_ok());
    assert!(check_exposure("[::1]:0".parse().unwrap(), false).is_ok());
    let e = check_exposure("0.0.0.0:8080".parse().unwrap(), false).unwrap_err();
    assert!(e.to_string().contains("--tokens"), "{e}");
    assert!(check_exposure("0.0.0.0:8080".parse().unwrap(), true).is_ok());
    assert!(Tokens::parse("tooshort alice").is_err());
}

/// The root's own store (no tokens) and the tenants' stores share a directory tree, but no
/// conversation of the root store reaches a tenant's data: erasing a conversation named
/// `tenants` there leaves every tenant's conversations as they were.
#[tokio::test]
async fn a_conversation_named_tenants_at_the_root_cannot_touch_tenant_data() {
    let (dir, app) = tenant_app();
    let alice_h = bearer(ALICE);
    let alice = [("authorization", alice_h.as_str())];
    let reply = call(
        &app,
        "POST",
        "/v1/conversations/notes/commits",
        &alice,
        r#"{"user":"alice's notes","assistant":"ok"}"#,
    )
    .await;
    assert_eq!(reply.status, 200);

    let root = ctxlog::Store::open(dir.path()).unwrap();
    let commit = ctxlog::ops::CommitRequest::from_json("tenants", br#"{"user":"x"}"#, None);
    root.commit(&commit.unwrap()).unwrap();
    root.erase(&ctxlog::ops::EraseRequest {
        conversation: "tenants".into(),
        target: ctxlog::ops::EraseTarget::All,
        reason: "cleanup".into(),
    })
    .unwrap();

    let log = call(
        &app,
        "GET",
        "/v1/conversations/notes/events",
        &alice,
        Body::empty(),
    )
    .await;
    assert_eq!(log.status, 200);
    assert_eq!(log.json()["last_seq"], 2);
}

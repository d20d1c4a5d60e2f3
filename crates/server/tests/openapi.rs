//! The OpenAPI document and the router agree (docs/design.md#i3-http-server): every documented
//! operation is routed, every route is documented, and no other method is answered on a documented
//! path.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use axum::body::Body;
use common::{call, open_app};
use ctxlog_server::{ENDPOINTS, OPENAPI};

fn documented() -> BTreeSet<(String, String)> {
    let doc: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            ops.insert((method.to_uppercase(), path.clone()));
        }
    }
    ops
}

#[test]
fn document_lists_exactly_the_routes() {
    let routed: BTreeSet<(String, String)> = ENDPOINTS
        .iter()
        .map(|e| (e.method.to_string(), e.path.to_string()))
        .collect();
    assert_eq!(documented(), routed);
}

/// The request body types each route takes (the HTTP policy answers 415 to others) are the
/// ones its operation documents, and the policy's statuses are documented where they occur:
/// 403 everywhere, 408 and 415 wherever there is a request body.
#[test]
fn documented_body_types_and_policy_statuses_are_the_routes() {
    let doc: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
    let classes = &doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["class"]
        ["enum"];
    for class in ["forbidden", "timeout", "unsupported_media_type"] {
        assert!(
            classes.as_array().unwrap().contains(&class.into()),
            "{class}"
        );
    }
    for e in ENDPOINTS {
        let op = &doc["paths"][e.path][e.method.to_lowercase()];
        let documented: BTreeSet<&str> = op["requestBody"]["content"]
            .as_object()
            .map(|c| c.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let accepted: BTreeSet<&str> = e.accepts.iter().copied().collect();
        assert_eq!(documented, accepted, "{} {}", e.method, e.path);
        let responses = op["responses"].as_object().unwrap();
        assert!(
            responses.contains_key("403"),
            "{} {}: 403",
            e.method,
            e.path
        );
        for status in ["408", "415"] {
            assert_eq!(
                responses.contains_key(status),
                !e.accepts.is_empty(),
                "{} {}: {status}",
                e.method,
                e.path
            );
        }
    }
}

#[test]
fn every_referenced_component_exists() {
    let doc: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
    for r in OPENAPI.split("\"$ref\": \"#/").skip(1) {
        let path = &r[..r.find('"').unwrap()];
        let mut node = &doc;
        for part in path.split('/') {
            node = &node[part];
        }
        assert!(!node.is_null(), "dangling $ref {path}");
    }
}

#[tokio::test]
async fn every_documented_operation_is_routed_and_other_methods_are_405() {
    let (_dir, app) = open_app();
    for (method, path) in documented() {
        let uri = path.replace("{name}", "probe");
        let reply = call(&app, &method, &uri, &[], Body::empty()).await;
        let text = String::from_utf8_lossy(&reply.body).to_string();
        assert!(
            !text.contains("no such route"),
            "{method} {path} is not routed"
        );
        assert_ne!(reply.status, 405, "{method} {path}");
        let other = if method == "GET" { "POST" } else { "GET" };
        if !documented().contains(&(other.to_string(), path.clone())) {
            let reply = call(&app, other, &uri, &[], Body::empty()).await;
            assert_eq!(reply.status, 405, "{other} {path}");
        }
    }
}

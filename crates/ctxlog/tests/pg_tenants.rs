//! Failure class: tenants of one server sharing a PostgreSQL database see or overwrite each
//! other's conversations: names that fold together (`Acme`/`acme`), names SQL needs quoted
//! (`team-b`), a tenant name too long for a schema name (63 bytes) truncated into another's.
//!
//! Guarantee: each tenant's store (`StoreLocation::for_tenant`, as `ctxlog serve --tokens`
//! opens them) is its own schema: the same conversation name in two tenants is two
//! conversations, each listing only its own, each numbering its seqs from 1.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// The engine under test is compiled only with the `postgres` feature (the default).
#![cfg(feature = "postgres")]

mod common;

use common::pg::PgCluster;
use ctxlog::StoreLocation;
use ctxlog::ops::{CommitRequest, ListRequest, LogRequest};

#[test]
fn tenants_over_one_database_never_see_each_other() {
    let Some(cluster) = PgCluster::start() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let base = StoreLocation::parse(&cluster.url("ctxlog", cache.path())).unwrap();
    let long_a = format!("{}a", "t".repeat(63));
    let long_b = format!("{}b", "t".repeat(63));
    let tenants = ["acme", "Acme", "team-b", long_a.as_str(), long_b.as_str()];
    let stores: Vec<_> = tenants
        .iter()
        .map(|t| {
            ctxlog::StoreBuilder::new(base.for_tenant(t))
                .build()
                .unwrap()
        })
        .collect();
    for (i, store) in stores.iter().enumerate() {
        for turn in 0..=i {
            let json = format!(r#"{{"user":"tenant {i} turn {turn}","assistant":"ok"}}"#);
            let receipt = store
                .commit(&CommitRequest::from_json("c", json.as_bytes(), None).unwrap())
                .unwrap();
            assert_eq!(
                receipt.first_seq,
                2 * turn as u64 + 1,
                "tenant {}",
                tenants[i]
            );
        }
        let own = format!("only-{i}");
        store
            .commit(&CommitRequest::from_json(&own, br#"{"user":"x"}"#, None).unwrap())
            .unwrap();
    }
    for (i, store) in stores.iter().enumerate() {
        let events = store
            .log(&LogRequest {
                conversation: "c".into(),
                from: 1,
                limit: None,
            })
            .unwrap()
            .events;
        assert_eq!(events.len(), 2 * (i + 1), "tenant {}", tenants[i]);
        for e in &events {
            let text = e.body.text().unwrap_or_default();
            assert!(
                text == "ok" || text.starts_with(&format!("tenant {i} ")),
                "tenant {} sees {text:?}",
                tenants[i]
            );
        }
        let mut names: Vec<String> = store
            .list(&ListRequest::default())
            .unwrap()
            .conversations
            .into_iter()
            .map(|c| c.name)
            .collect();
        names.sort();
        assert_eq!(names, vec!["c".to_string(), format!("only-{i}")]);
    }
}

//! Failure class: a store URL read wrong: a password leaking into a message or a location, a
//! TLS request answered in plain text, tenants folded into one schema or one cache directory,
//! a schema name PostgreSQL would truncate.
//!
//! Guarantee: [`PgConfig::parse`] names a store `postgres://user@host:port/db` (never with its
//! password), refuses what it cannot honour before any connection (a usage error), and gives
//! each tenant a schema of at most 63 bytes and a cache directory of its own. No database is
//! needed: nothing here connects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use ctxlog_backend::Error;
use ctxlog_postgres::{DEFAULT_POOL_SIZE, DEFAULT_SCHEMA, PgConfig};

fn refused(url: &str) -> String {
    match PgConfig::parse(url) {
        Err(Error::InvalidRequest { reason }) => reason,
        Err(e) => panic!("{url}: not a usage error: {e:?}"),
        Ok(c) => panic!("{url}: parsed as {c:?}"),
    }
}

#[test]
fn the_location_names_user_host_port_and_database_but_no_password() {
    let c = PgConfig::parse("postgres://app:hunter2@db.internal:6543/ledger").unwrap();
    assert_eq!(c.location(), "postgres://app@db.internal:6543/ledger");
    let c = PgConfig::parse("postgresql://db.internal/ledger").unwrap();
    assert_eq!(c.location(), "postgres://db.internal:5432/ledger");
}

#[test]
fn defaults_and_ctxlogs_own_parameters() {
    let c = PgConfig::parse("postgres://app@db/ledger").unwrap();
    assert_eq!(c.schema, DEFAULT_SCHEMA);
    assert_eq!(c.pool_size, DEFAULT_POOL_SIZE);
    assert!(
        c.cache_dir.ends_with("app_db_5432_ledger"),
        "{}",
        c.cache_dir.display()
    );
    let c = PgConfig::parse(
        "postgres://app@db/ledger?schema=chat&cache_dir=/var/cache/x&connect_timeout=3",
    )
    .unwrap();
    assert_eq!(c.schema, "chat");
    assert_eq!(c.cache_dir, Path::new("/var/cache/x"));
}

#[test]
fn tls_and_bad_urls_are_refused_without_the_password() {
    for mode in ["require", "verify-ca", "verify-full"] {
        let why = refused(&format!("postgres://app:hunter2@db/ledger?sslmode={mode}"));
        assert!(
            why.contains(&format!("sslmode={mode} asks for TLS")),
            "{why}"
        );
        assert!(!why.contains("hunter2") && !why.contains('\n'), "{why}");
    }
    for mode in ["disable", "prefer"] {
        PgConfig::parse(&format!("postgres://app@db/ledger?sslmode={mode}")).unwrap();
    }
    let why = refused("postgres://app:hunter2@db:notaport/ledger");
    assert!(why.contains("app:***@db"), "{why}");
    assert!(!why.contains("hunter2"), "{why}");
    let why = refused(&format!(
        "postgres://app@db/ledger?schema={}",
        "s".repeat(64)
    ));
    assert!(why.contains("schema must be 1 to 63 bytes"), "{why}");
}

#[test]
fn each_tenant_gets_its_own_schema_and_cache_directory() {
    let base = PgConfig::parse("postgres://app@db/ledger?cache_dir=/c").unwrap();
    let a = base.for_tenant("acme");
    assert_eq!(a.schema, "ctxlog_acme");
    assert_eq!(a.cache_dir, Path::new("/c/tenant-acme"));
    assert_eq!(a.location(), base.location());
    // Two long tenants that share their first 63 bytes: hashed, not truncated together.
    let long_a = base.for_tenant(&format!("{}a", "t".repeat(63)));
    let long_b = base.for_tenant(&format!("{}b", "t".repeat(63)));
    assert_ne!(long_a.schema, long_b.schema);
    for c in [&long_a, &long_b] {
        assert!(c.schema.len() <= 63, "{}", c.schema);
        assert!(c.schema.starts_with("ctxlog_t"), "{}", c.schema);
    }
    assert_ne!(long_a.cache_dir, long_b.cache_dir);
}

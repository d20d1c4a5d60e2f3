//! [`PgBackend`]: conversations in PostgreSQL, for many server replicas over one database
//! (many server replicas over one database; docs/postgres.md), behind the same seam as the file store ([`ctxlog_backend::Backend`]). The
//! schema, the guarantees and what erasure leaves are in `docs/postgres.md`.
//!
//! ```
//! use ctxlog_postgres::{PgBackend, PgConfig};
//! # fn main() -> ctxlog_backend::Result<()> {
//! let config = PgConfig::parse("postgres://app:secret@db.internal:5432/ledger?schema=chat")?;
//! assert_eq!(config.location(), "postgres://app@db.internal:5432/ledger");
//! assert_eq!(config.schema, "chat");
//! // Connects lazily: an unreachable server fails the first operation, not this.
//! let backend = PgBackend::new(&config, &ctxlog_ledger::Options::default());
//! # drop(backend);
//! # Ok(()) }
//! ```
//!
//! ```text
//! <schema> (one per tenant; "ctxlog" by default)
//!   migrations     version, name, applied_ms            (versioned, applied once)
//!   conversations  name, ledger_id, last_seq, bytes, last_ts_ms, created_ms
//!   events         conversation, seq, kind, ts_ms, record_len, artifact, payload, crc
//!   commits        conversation, id_hash, digest, first_seq, last_seq   (idempotency)
//!   artifacts      conversation, name (sha256-…), content
//!   recovered      conversation, seq, kind, ts_ms, crc, artifact, content, reason, saved_ms
//!                  (what a repair saved aside: lost rows' stored bytes, unreferenced artifacts)
//!   secrets        name, secret, created_ms   (the store's secrets, created on first use)
//!   places         id, digest, conversation, idx    (the places index: where each stored
//!   place_marks    conversation, generation,          event a client sends back is, and
//!                  last_seq, count, stamp              how far each conversation is indexed)
//! ```
//!
//! Recall indexes stay local SQLite files (one per conversation) under a cache directory of
//! this machine: [`PgBackend::cache_dir`].
//!
//! # Layout
//!
//! `config.rs` reads a store URL ([`PgConfig`]); `db.rs` holds the connection pool, the
//! migrations and database errors as ledger errors; `memory.rs` what a handle keeps between
//! calls (the committed index, the read cache); `ledger.rs` one conversation as a
//! [`ctxlog_backend::LedgerWriter`] ([`PgLedger`]: row-locked commits, erasure); `repair.rs`
//! the repair of damaged rows and missing seqs; `places.rs` the places index; `backend.rs` the store ([`PgBackend`]: open,
//! list, verify, repair, erase whole conversations).

// Layers, lowest first; a module uses only those above it in this list: config, db, memory,
// ledger, repair, places, backend.
mod backend;
mod config;
mod db;
mod ledger;
mod memory;
mod places;
mod repair;

pub use backend::PgBackend;

/// How long an operation waits for a database connection (the pool's checkout, which
/// reconnects meanwhile) before it fails as unavailable: a database back within this wait is
/// a delay, not an error.
pub const CONNECTION_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
pub use config::{DEFAULT_POOL_SIZE, DEFAULT_SCHEMA, PgConfig};
pub use ledger::PgLedger;

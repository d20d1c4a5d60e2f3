//! ctxlog keeps every confirmed turn of an LLM conversation in a durable, checksummed ledger,
//! and builds, for each model call, the exact request body that fits a budget.
//!
//! The entry point is [`Store`]: a long-lived, thread-safe set of conversations over a
//! [`backend::Backend`] (the embedded file store by default), with one method per operation.
//! Each operation takes a typed request and returns a typed response ([`ops`]); the command
//! line, the HTTP server and the Python package are thin adapters over them.
//!
//! ```
//! use ctxlog::ops::{CommitRequest, ProjectRequest, RecallRequest};
//! # fn main() -> ctxlog::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let store = ctxlog::Store::open(dir.path())?;
//! let turn = br#"{"user":"My project code is ZX-81.","assistant":"Noted."}"#;
//! store.commit(&CommitRequest::from_json("support-42", turn, None)?)?;
//! store.commit(&CommitRequest::from_json("support-42", br#"{"user":"Weather?","assistant":"Sunny."}"#, None)?)?;
//!
//! // A narrow request keeps only the newest turn ...
//! let narrow = store.project(&ProjectRequest {
//!     conversation: "support-42".into(),
//!     input: Some("What is my project code?".into()),
//!     max_bytes: Some(200),
//!     ..Default::default()
//! })?;
//! assert!(!String::from_utf8_lossy(&narrow.body).contains("ZX-81"));
//! // ... and nothing is lost: recall finds the rest.
//! let found = store.recall(&RecallRequest {
//!     conversation: "support-42".into(),
//!     query: "project code".into(),
//!     seq: None,
//!     offset: 0,
//!     limit: 5,
//! })?;
//! assert_eq!(found.hits[0].seq, 1);
//! # Ok(()) }
//! ```

// Layers, lowest first; a module uses only those before it in this list (directly or through
// the re-exports below), which `tests/layering.rs` checks: error, json, time, redact, backend,
// retention, config, adapters, transfer, input, ops, call, location, handle, store.
mod adapters;
pub mod backend;
pub mod call;
mod config;
mod error;
mod handle;
mod input;
pub mod json;
mod location;
pub mod ops;
pub mod redact;
mod retention;
mod store;
mod time;
pub mod transfer;

pub use config::{
    CONFIG_FILE, GatewayConfig, LedgerConfig, RecallConfig, RetentionConfig, StoreConfig,
};
pub use ctxlog_event::ConversationName;
pub use error::{Corruption, Error, ErrorClass, Result, Shortfall};
pub use handle::{Conversation, Handle, RecallSetup, Snapshot};
pub use input::parse_commit;
pub use location::{StoreLocation, TENANTS_DIR};
pub use redact::{RedactionConfig, Redactor};
pub use store::{DEFAULT_RECOGNITION_CACHE, Store, StoreBuilder};

// The types that requests and responses are made of, so that front ends name them here.
pub use ctxlog_ledger::{
    ArtifactRef, CommitReceipt, DEFAULT_ERASE_REASON, ErasureReport, Event, EventBody, EventKind,
    MAX_ERASE_REASON_BYTES, NewCommit, Options, SyncMode, SystemMarker, ToolStatus, VerifyReport,
};
pub use ctxlog_projection::{
    Count, DEFAULT_LOW_WATER, DEFAULT_RECALL_RESERVE, Policy, Projection, RecallReserve, Report,
    Tokenizer, Window, WireFormat,
};
pub use ctxlog_recall::{DEFAULT_LIMIT as RECALL_DEFAULT_LIMIT, MAX_LIMIT as RECALL_MAX_LIMIT};
pub use ctxlog_recall::{Hit, Progress, RecallResult, ToolOutput};

/// The lower layers, for applications that need them directly. Front ends never do.
pub use ctxlog_ledger as ledger;
pub use ctxlog_projection as projection;
pub use ctxlog_recall as recall;

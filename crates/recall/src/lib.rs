//! ctxlog's recall index: a disposable, per-conversation SQLite FTS5 index of a ledger's
//! text, searched with literal queries and ranked with BM25, context, supersession and
//! recency (docs/design.md#6-recall). See `docs/recall.md` for the design and measured quality.
//!
//! ```
//! use ctxlog_event::{Event, EventBody};
//! use ctxlog_recall::{NoArtifacts, RecallIndex, SearchOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let mut index = RecallIndex::open(dir.path().join("recall.sqlite"), "ledger-1")?;
//! let note = |seq, text: &str| Event {
//!     seq,
//!     ts_ms: 0,
//!     body: EventBody::Note { text: text.into(), pinned: false, supersedes: None, provider_item: None },
//! };
//! index.update(
//!     [note(1, "The database port is 5432."), note(2, "The database port was changed to 5433.")],
//!     &NoArtifacts,
//! )?;
//! // Operators and SQL are just words here.
//! let result = index.search("database port\"; DROP TABLE pages; --", &SearchOptions::default())?;
//! assert_eq!(result.hits[0].seq, 2); // the update ranks above what it replaces
//! assert!(result.note.contains("does not prove"));
//! # Ok(()) }
//! ```
//!
//! The crate reads only its own index file and what the caller supplies: events (directly or
//! through a [`LedgerSource`]) and artifact texts through an [`ArtifactSource`]
//! (docs/design.md#r7-scope).

mod config;
#[cfg(feature = "semantic")]
pub mod embed;
mod error;
mod hit;
mod index;
mod rank;
mod search;
mod source;
mod stats;
mod store;
pub mod text;
mod tool;
mod vector;
mod writer;

pub use config::{ContextGate, INDEXED_KINDS, IndexConfig, TOOL_NAME};
pub use error::{Error, Result, SourceError};
pub use hit::{ABSENCE_NOTE, Hit, RecallResult};
pub use index::RecallIndex;
pub use rank::{Ranking, SemanticGate};
pub use search::{DEFAULT_LIMIT, MAX_LIMIT, SearchOptions};
pub use source::{ArtifactSource, LedgerSource, MemorySource, NoArtifacts};
pub use stats::{Progress, ResetReason, UpdateStats};
pub use store::{APPLICATION_ID, SCHEMA_VERSION};
pub use tool::{
    ArgsError, TOOL_DEFAULT_LIMIT, TOOL_DESCRIPTION, TOOL_QUERY_ECHO_CHARS, ToolArgs, ToolOutput,
    anthropic_tool, input_schema, openai_tool, responses_tool, tool_error,
};
pub use vector::DIMENSIONS;

//! ctxlog keeps every confirmed turn of an LLM conversation in a durable, checksummed ledger,
//! and builds, for each model call, the exact request body that fits a budget.
//!
//! ```
//! # fn main() -> ctxlog::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let store = ctxlog::Store::open(dir.path());
//! let mut conv = store.conversation("support-42")?;
//! conv.commit_json(br#"{"user":"My project code is ZX-81.","assistant":"Noted."}"#, None)?;
//! assert_eq!(conv.last_seq(), 2);
//! # Ok(()) }
//! ```

mod adapters;
mod conversation;
mod error;
mod input;
mod name;
mod store;

pub use conversation::{CatchUp, Conversation, Erase, Handle, Snapshot};
pub use error::{Error, ErrorClass, Result};
pub use input::parse_commit;
pub use name::ConversationName;
pub use store::Store;

pub use ctxlog_ledger as ledger;
pub use ctxlog_projection as projection;
pub use ctxlog_recall as recall;

//! ctxlog's ledger: the durable, checksummed, append-only record of every confirmed turn.
//!
//! One directory per conversation holds `ledger.log` (the truth: checksummed records, one per
//! event, grouped into atomic commits), four disposable sidecar index files, content-addressed
//! `artifacts/`, the writer's `lock` and `recovered/` tails. The byte format and its crash
//! analysis are in `docs/ledger-format.md`.
//!
//! ```
//! use ctxlog_ledger::{EventBody, Ledger, LedgerRead, NewCommit, Options, Reader};
//! # fn main() -> ctxlog_ledger::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let (mut ledger, recovery) = Ledger::open(dir.path(), &Options::default())?;
//! assert!(recovery.is_clean());
//! let turn = NewCommit {
//!     id: Some("turn-1".into()),
//!     events: vec![
//!         EventBody::User { text: "My project code is ZX-81.".into() },
//!         EventBody::Assistant { text: "Noted.".into() },
//!     ],
//! };
//! let receipt = ledger.commit(&turn)?;
//! assert_eq!((receipt.first_seq, receipt.last_seq), (1, 2));
//! // The same id and content again: the original receipt, nothing written.
//! assert!(ledger.commit(&turn)?.replayed);
//!
//! // Readers take no lock and see committed events.
//! let reader = Reader::open(dir.path())?;
//! assert_eq!(reader.user_seqs(), &[1]);
//! assert_eq!(reader.note_seqs(), &[] as &[u64]);
//! assert_eq!(reader.event(2)?.body, EventBody::Assistant { text: "Noted.".into() });
//! assert!(ctxlog_ledger::verify(dir.path())?.is_clean());
//! # Ok(()) }
//! ```

mod artifact;
mod core;
mod digest;
mod erase;
mod error;
pub use ctxlog_event as event;
pub mod format;
mod hex;
mod ledger;
mod open;
mod reader;
mod scan;
pub mod storage;
mod validate;
mod verify;

pub use artifact::{artifact_name, excerpt, is_valid_artifact_name};
pub use erase::{DEFAULT_ERASE_REASON, ErasureReport, MAX_ERASE_REASON_BYTES};
pub use error::{Error, Result};
pub use event::{
    ArtifactRef, Event, EventBody, EventKind, NewCommit, SystemMarker, ToolStatus, turn_starts,
};
pub use ledger::{CommitReceipt, Ledger, Options, RecoveryReport, SyncMode};
pub use reader::{LedgerRead, Reader};
pub use storage::{DirStorage, FaultPlan, FaultyStorage, MemStorage, Storage, StorageFile};
pub use validate::MAX_COMMIT_ID_BYTES;
pub use verify::{VerifyReport, verify, verify_with};

#[cfg(test)]
mod tests {
    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_can_move_between_threads() {
        send_sync::<crate::Ledger>();
        send_sync::<crate::Reader>();
        send_sync::<crate::Error>();
    }
}

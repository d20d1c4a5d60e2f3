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
//! let turn = NewCommit::new(vec![
//!     EventBody::User { text: "My project code is ZX-81.".into(), parts: vec![], provider_item: None },
//!     EventBody::Assistant { text: "Noted.".into(), provider_item: None },
//! ])
//! .with_id("turn-1");
//! let receipt = ledger.commit(&turn)?;
//! assert_eq!((receipt.first_seq, receipt.last_seq), (1, 2));
//! // The same id and content again: the original receipt, nothing written.
//! assert!(ledger.commit(&turn)?.replayed);
//!
//! // Readers take no lock and see committed events.
//! let reader = Reader::open(dir.path())?;
//! assert_eq!(reader.user_seqs(), &[1]);
//! assert_eq!(reader.note_seqs(), &[] as &[u64]);
//! assert_eq!(reader.event(2)?.body, EventBody::Assistant { text: "Noted.".into(), provider_item: None });
//! assert!(ctxlog_ledger::verify(dir.path())?.is_clean());
//! # Ok(()) }
//! ```

//! # Layout
//!
//! Modules form layers, listed lowest first; each uses only modules listed before it, so no
//! two import each other (`tests/layering.rs` checks every `crate::` path against this list):
//!
//! 1. Foundations: `error`, `hex`, `event` (the `ctxlog-event` crate), `format` (byte
//!    layouts), `digest` (commit digests), `validate` (commit rules), `options`, `storage`
//!    (the file I/O traits; one file per backend).
//! 2. `files`: storage errors as crate errors, opening a file that must exist, the clock,
//!    fresh ledger ids.
//! 3. What the files hold: `scan` (reading the log sequentially), `tombstone` (erased
//!    ranges), `artifact` (content-addressed files), `sidecar` (the four index files, driven
//!    by one table).
//! 4. `rules`: the ledger's rules, one copy of each (commit checks, the idempotency key,
//!    event times, artifact offloading, the caps, erasure ranges, tombstones): the file
//!    store's `commit`, `erase` and `ledger` call them, and so do other storage engines.
//! 5. `state`: `LedgerState`, a ledger's committed state in memory; its fields are private
//!    and change only through its methods.
//! 6. Operations on the state: `recovery` (creating the log, cutting a torn tail), `commit`
//!    (encoding a commit's records), `salvage` (every intact record of a damaged log, writing
//!    nothing), `carry` (what an erasure of intact seqs of a damaged log carries over: the
//!    damaged ranges and their index entries), `erase` (rewriting the log), `verify`
//!    (checking a directory, writing nothing), `repair` (a damaged log rewritten to its
//!    intact records and loss records), `reader` ([`LedgerRead`], [`Reader`]).
//! 7. `ledger`: [`Ledger`], the one writer, which ties them together (group commit is
//!    [`Ledger::commit_batch`]: one append and one sync for many commits).

/// Implements [`LedgerRead`] for a handle by delegating to its `state` field (a
/// `state::LedgerState`): the writer and the reader read the same way.
macro_rules! delegate_ledger_read {
    ($handle:ty) => {
        impl $crate::LedgerRead for $handle {
            fn ledger_id(&self) -> &str {
                self.state.ledger_id()
            }
            fn last_seq(&self) -> u64 {
                self.state.last_seq()
            }
            fn kind(&self, seq: u64) -> Option<$crate::EventKind> {
                self.state.kind(seq)
            }
            fn user_seqs(&self) -> &[u64] {
                self.state.user_seqs()
            }
            fn note_seqs(&self) -> &[u64] {
                self.state.note_seqs()
            }
            fn record_len(&self, seq: u64) -> Option<u64> {
                self.state.record_len(seq)
            }
            fn record_offset(&self, seq: u64) -> Option<u64> {
                self.state.record_offset(seq)
            }
            fn events(
                &self,
                range: std::ops::RangeInclusive<u64>,
            ) -> $crate::Result<Vec<$crate::Event>> {
                self.state.events(range)
            }
            fn artifact(&self, r: &$crate::ArtifactRef) -> $crate::Result<Vec<u8>> {
                self.state.artifact(r)
            }
        }
    };
}

mod artifact;
mod carry;
mod commit;
mod digest;
mod erase;
mod error;
pub use ctxlog_event as event;
mod files;
pub mod format;
mod hex;
mod ledger;
mod options;
mod reader;
mod recovery;
mod repair;
pub mod rules;
mod salvage;
mod scan;
mod sidecar;
mod state;
pub mod storage;
mod tombstone;
mod validate;
mod verify;

pub use artifact::{artifact_name, excerpt, is_valid_artifact_name};
pub use erase::{DEFAULT_ERASE_REASON, ErasureReport, MAX_ERASE_REASON_BYTES, Reach};
pub use error::{Error, Result};
pub use event::{
    ArtifactRef, Event, EventBody, EventKind, NewCommit, OpaqueFormat, SystemMarker, ToolStatus,
    turn_starts,
};
pub use ledger::{CommitReceipt, Ledger};
pub use options::{Options, SyncMode};
pub use reader::{LedgerRead, Reader};
pub use recovery::RecoveryReport;
pub use repair::{AffectedCommit, LostRun, RepairReport, SavedAside, SavedTo, repair_with};
pub use salvage::{DamagedRange, SalvageReport, Salvaged, salvage_with};
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

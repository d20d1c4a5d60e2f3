//! The ledger's errors. Each variant carries what a user needs to act on it.

use std::path::PathBuf;

/// `Result` with the ledger's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the ledger.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another writer holds the conversation (CLI exit 4).
    #[error("conversation is locked by another writer: {}", path.display())]
    Locked {
        /// The conversation directory.
        path: PathBuf,
    },
    /// The log is damaged where it cannot be a torn tail: fail closed (CLI exit 5).
    #[error("ledger corrupt: {} at byte offset {offset}{}: {reason}", path.display(),
        seq.map(|s| format!(" (seq {s})")).unwrap_or_default())]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Byte offset of the first bad byte/record.
        offset: u64,
        /// The seq that record should have had, when known.
        seq: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// The commit id was used before with different content (CLI exit 6).
    #[error("commit id {id:?} was already used with different content")]
    Conflict {
        /// The commit id.
        id: String,
    },
    /// The commit was to follow seq `after` ([`crate::NewCommit::after`]) but the
    /// conversation has moved on to `last_seq`: another writer committed first. Nothing was
    /// written (class conflict, CLI exit 6).
    #[error(
        "the conversation moved on: this commit was to follow seq {after}, but its last seq \
         is {last_seq} (another writer committed first); read it again and decide anew"
    )]
    Moved {
        /// The seq the commit was to follow.
        after: u64,
        /// The conversation's last seq.
        last_seq: u64,
    },
    /// The commit id names a commit whose records were lost to damage and given up by a
    /// repair (docs/design.md#l11-repair): its seqs are covered by a loss record and are
    /// never handed out again (CLI exit 7). Nothing was written.
    #[error(
        "commit id {id:?} was lost: its seqs {from}-{to} were damaged and given up by `ctxlog \
         repair --accept-loss` (see the loss record in `ctxlog log`); commit the content again \
         under a new id if it is still wanted"
    )]
    Lost {
        /// The commit id.
        id: String,
        /// First seq the lost commit held.
        from: u64,
        /// Last seq the lost commit held.
        to: u64,
    },
    /// The commit is not acceptable; nothing was written.
    #[error("invalid commit: {reason}")]
    InvalidCommit {
        /// Why.
        reason: String,
    },
    /// A configured cap would be exceeded; nothing was written.
    #[error("{what} too large: {actual} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// `"record"`, `"commit"` or `"ledger"`.
        what: &'static str,
        /// The configured limit.
        limit: u64,
        /// The size that was refused.
        actual: u64,
    },
    /// An artifact reference that is absolute, contains `..`, is not `sha256-<64 hex>`, or
    /// resolves outside the conversation directory. Nothing was read.
    #[error("refused artifact reference {name:?}: {why}")]
    BadArtifactRef {
        /// The reference as given.
        name: String,
        /// Why: a malformed name, a path resolving outside the conversation, or no such file.
        why: &'static str,
    },
    /// An artifact exists but its content does not match its name.
    #[error("artifact {name} does not match its hash")]
    ArtifactMismatch {
        /// The artifact name.
        name: String,
    },
    /// An event references an artifact that is not stored: the event is intact (with its
    /// excerpt) but the full content is lost. Damage, like a corrupt record (CLI exit 5).
    #[error(
        "artifact {name} is missing: no such artifact in this conversation, though an event references it"
    )]
    ArtifactMissing {
        /// The artifact name.
        name: String,
    },
    /// A write or sync failed earlier; the writer refuses commits until reopened
    /// (docs/design.md#l8-failed-io). After an erasure that failed once its rewritten log was in
    /// place, the writer refuses reads of events and artifacts too: its handle still holds the
    /// erased content.
    #[error("ledger writer is poisoned by an earlier I/O failure; reopen the conversation")]
    Poisoned,
    /// An I/O error on a file.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An erasure range (or reason) that cannot be applied; nothing was changed.
    #[error("cannot erase: {reason}")]
    BadRange {
        /// Why.
        reason: String,
    },
    /// A seq outside the ledger.
    #[error("seq {seq} is not in the ledger (last seq {last_seq})")]
    NoSuchSeq {
        /// The seq asked for.
        seq: u64,
        /// The ledger's last seq.
        last_seq: u64,
    },
}

impl Error {
    /// A batch's failure (its write or sync, [`crate::Ledger::commit_batch`]) as each of its
    /// commits reports it: the same kind and message, for every caller of the batch (damage
    /// found while appending stays [`Error::Corrupt`], never an I/O error without a path).
    pub fn for_each_commit(&self) -> Error {
        match self {
            Error::Poisoned => Error::Poisoned,
            Error::Io { path, source } => Error::Io {
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Locked { path } => Error::Locked { path: path.clone() },
            Error::Corrupt {
                path,
                offset,
                seq,
                reason,
            } => Error::Corrupt {
                path: path.clone(),
                offset: *offset,
                seq: *seq,
                reason: reason.clone(),
            },
            Error::Conflict { id } => Error::Conflict { id: id.clone() },
            Error::Moved { after, last_seq } => Error::Moved {
                after: *after,
                last_seq: *last_seq,
            },
            Error::Lost { id, from, to } => Error::Lost {
                id: id.clone(),
                from: *from,
                to: *to,
            },
            Error::InvalidCommit { reason } => Error::InvalidCommit {
                reason: reason.clone(),
            },
            Error::TooLarge {
                what,
                limit,
                actual,
            } => Error::TooLarge {
                what,
                limit: *limit,
                actual: *actual,
            },
            Error::BadArtifactRef { name, why } => Error::BadArtifactRef {
                name: name.clone(),
                why,
            },
            Error::ArtifactMismatch { name } => Error::ArtifactMismatch { name: name.clone() },
            Error::ArtifactMissing { name } => Error::ArtifactMissing { name: name.clone() },
            Error::BadRange { reason } => Error::BadRange {
                reason: reason.clone(),
            },
            Error::NoSuchSeq { seq, last_seq } => Error::NoSuchSeq {
                seq: *seq,
                last_seq: *last_seq,
            },
        }
    }

    /// The error's message without the file path it names (a client of a server must not
    /// learn server paths): for [`Error::Corrupt`] the offset, seq and reason; for
    /// [`Error::Io`] the file's name within the conversation and the cause.
    pub fn without_path(&self) -> String {
        match self {
            Error::Corrupt {
                offset,
                seq,
                reason,
                ..
            } => format!(
                "ledger corrupt at byte offset {offset}{}: {reason}",
                seq.map(|s| format!(" (seq {s})")).unwrap_or_default()
            ),
            Error::Io { path, source } => format!(
                "I/O error on {}: {source}",
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
            Error::Locked { .. } => "conversation is locked by another writer".into(),
            other => other.to_string(),
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Error {
        Error::InvalidCommit {
            reason: reason.into(),
        }
    }
}

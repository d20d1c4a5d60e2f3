//! Errors of the recall index.

use std::path::{Path, PathBuf};

/// A boxed error from a caller-supplied source (ledger reader, artifact reader).
pub type SourceError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong with the recall index.
///
/// [`Error::Damaged`] is the one callers must handle specially: the index file is unreadable or
/// is not a ctxlog recall index of this version. Automatic recall should then fall back to no
/// recalled pages (and say so); explicit recall should report it and point at `ctxlog reindex`,
/// which calls [`RecallIndex::recreate`](crate::RecallIndex::recreate).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The index file is damaged (truncated, garbage bytes, foreign or future schema). It is a
    /// cache: delete and rebuild it with `RecallIndex::recreate` (`ctxlog reindex`).
    #[error("recall index {path} is damaged ({reason}); run `ctxlog reindex` to rebuild it")]
    Damaged {
        /// The index file.
        path: PathBuf,
        /// What was found wrong.
        reason: String,
    },
    /// The ledger handed to `update` no longer matches what was indexed (the event at `seq`
    /// changed, or the ledger is shorter than what was indexed): the ledger was rewritten and
    /// the index must be rebuilt (`rebuild` or `catch_up` do this on their own).
    #[error("recall index {path} is stale: the ledger changed at or before seq {seq}; rebuild it")]
    Stale {
        /// The index file.
        path: PathBuf,
        /// The first seq found to differ.
        seq: u64,
    },
    /// Events given to one `update` (or by a ledger source) were not in strictly increasing
    /// seq order. Nothing of that call is written: skipping the event would leave a gap that
    /// no later update fills.
    #[error("recall index {path}: events out of order (seq {seq} after seq {after})")]
    OutOfOrder {
        /// The index file.
        path: PathBuf,
        /// The seq that came too late.
        seq: u64,
        /// The seq given before it.
        after: u64,
    },
    /// The caller-supplied ledger or artifact source failed.
    #[error("recall source failed while indexing seq {seq}: {source}")]
    Source {
        /// The seq being read (0 when not about one event).
        seq: u64,
        /// The source's error.
        #[source]
        source: SourceError,
    },
    /// A symbolic link is where the index file (or its temporary file) should be. The index
    /// never follows one: it could make the index write a file outside the conversation.
    #[error(
        "recall index {path} is a symbolic link; refusing to follow it (remove it, then run `ctxlog reindex`)"
    )]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// Another handle (another process) deleted or replaced the index file since this handle
    /// opened it (erasure, `reindex`). What the handle has open is no longer the index, and
    /// may hold erased text: it is not searched. Catching up reopens the new file; retrying
    /// the search after [`RecallIndex::catch_up`](crate::RecallIndex::catch_up) succeeds.
    #[error(
        "recall index {path} was deleted or replaced by another process; catch it up and retry"
    )]
    Replaced {
        /// The index file.
        path: PathBuf,
    },
    /// The sentence-embedding model of the semantic leg cannot be used: a file of its
    /// directory is missing or unreadable, or is not all-MiniLM-L6-v2's (see
    /// `docs/recall.md`, "The semantic leg"), or the build has no semantic leg.
    #[error("embedding model {path}: {reason}")]
    Embeddings {
        /// The model directory.
        path: PathBuf,
        /// What is wrong, and what to do.
        reason: String,
    },
    /// Creating or removing the index file failed.
    #[error("recall index {path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// SQLite failed for a reason that is not damage (busy, full disk, read-only, …). The
    /// message is one line: SQLite's message without the statement text.
    #[error("recall index {path}: sqlite: {}", one_line(source))]
    Sqlite {
        /// The index file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
}

/// Messages of generic SQLite errors that only a damaged schema produces.
const SCHEMA_DAMAGE: &[&str] = &[
    "no such table",
    "no such column",
    "vtable constructor failed",
    "invalid fts5 file format",
    "malformed",
    "no such module",
];

/// SQLite's message on one line: without the statement text rusqlite adds to syntax errors
/// (a schema dump of twenty lines is no error message) and cut at the first line break.
pub(crate) fn one_line(source: &rusqlite::Error) -> String {
    let text = match source {
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or_default().to_owned()
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps a source failure about `seq`.
    pub fn source(seq: u64, error: impl Into<SourceError>) -> Error {
        Error::Source {
            seq,
            source: error.into(),
        }
    }

    /// True when the index file is damaged and must be recreated.
    pub fn is_damaged(&self) -> bool {
        matches!(self, Error::Damaged { .. })
    }

    /// Classifies a SQLite error: corruption-like codes become [`Error::Damaged`].
    pub(crate) fn sqlite(path: &Path, source: rusqlite::Error) -> Error {
        use rusqlite::ErrorCode;
        let damaged = match source.sqlite_error_code() {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => true,
            Some(ErrorCode::SystemIoFailure) => {
                // A short read (truncated file) is damage; other I/O failures are not.
                matches!(&source, rusqlite::Error::SqliteFailure(e, _)
                    if e.extended_code == rusqlite::ffi::SQLITE_IOERR_SHORT_READ)
            }
            // Our statements are fixed and valid for our schema: "no such table", a broken
            // FTS5 table or an unknown FTS5 format means the file's schema was damaged.
            Some(ErrorCode::Unknown) => {
                let message = source.to_string();
                SCHEMA_DAMAGE.iter().any(|m| message.contains(m))
            }
            _ => false,
        };
        if damaged {
            Error::Damaged {
                path: path.to_path_buf(),
                reason: one_line(&source),
            }
        } else {
            Error::Sqlite {
                path: path.to_path_buf(),
                source,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a failed schema statement put the whole statement (twenty lines of SQL)
    /// into the message.
    #[test]
    fn sqlite_errors_are_one_line_without_the_statement() {
        let source = rusqlite::Error::SqlInputError {
            error: rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            msg: "table meta already exists".into(),
            sql: "\nCREATE TABLE meta(key TEXT)\nCREATE TABLE pages(\n id INTEGER\n)".into(),
            offset: 14,
        };
        let message = Error::sqlite(Path::new("r.sqlite"), source).to_string();
        assert_eq!(
            message,
            "recall index r.sqlite: sqlite: table meta already exists"
        );
    }
}

//! What a [`Backend`](crate::Backend) reports besides ledger errors. The facade turns each
//! variant into its own `Error` variant of the same name, so a front end classes an
//! engine's failure exactly as it would the file store's.

use std::path::PathBuf;

/// Everything a backend's own operations (open, list, verify, erase, discard) can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The conversation does not exist (opening it for reading, or for writing without
    /// creating it).
    #[error("no conversation \"{name}\" under {}", root.display())]
    NotFound {
        /// The conversation's name.
        name: String,
        /// Where the store is: its directory, or its database URL without credentials.
        root: PathBuf,
    },
    /// A store location that cannot be used (a database URL that does not parse, or asks
    /// for what this build does not do); nothing was touched.
    #[error("{reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },
    /// A file-system operation of the store itself (not of one ledger) failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The ledger refused or failed. A database that cannot be reached is a ledger I/O
    /// error of kind [`std::io::ErrorKind::NotConnected`] (the facade's class
    /// `unavailable`).
    #[error(transparent)]
    Ledger(#[from] ctxlog_ledger::Error),
    /// Deleting a conversation's local recall cache failed.
    #[error(transparent)]
    Recall(#[from] ctxlog_recall::Error),
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! The facade's error type: one enum over the layers, with a coarse [`ErrorClass`] that the
//! CLI turns into exit codes and the server into HTTP statuses.

use std::path::PathBuf;

/// Everything that can go wrong in a ctxlog operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A conversation name outside `[A-Za-z0-9_-]{1,64}`.
    #[error(
        "invalid conversation name \"{name}\": {why} (use 1-64 characters from A-Z a-z 0-9 _ -)"
    )]
    InvalidName {
        /// The name as given (escaped for display).
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The conversation does not exist (read-only operations never create one).
    #[error("no conversation \"{name}\" under {}", root.display())]
    NotFound {
        /// The conversation's name.
        name: String,
        /// The store's root directory.
        root: PathBuf,
    },
    /// Input that could not be understood (malformed JSON, invalid UTF-8, unknown keys).
    #[error("{reason}")]
    BadInput {
        /// What is wrong, and where.
        reason: String,
    },
    /// The ledger refused or failed.
    #[error(transparent)]
    Ledger(#[from] ctxlog_ledger::Error),
    /// The projector refused (for example, mandatory input over budget).
    #[error(transparent)]
    Projection(#[from] ctxlog_projection::Error),
    /// The recall index failed.
    #[error(transparent)]
    Recall(#[from] ctxlog_recall::Error),
    /// A file-system operation of the store itself failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// The coarse class of an [`Error`], stable for scripts (SPEC I2 exit codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The caller's input is wrong: fix it and retry (CLI exit 2 for flags, 1 for data).
    BadInput,
    /// The mandatory part of a projection exceeds the budget (CLI exit 3).
    OverBudget,
    /// Another writer holds the conversation (CLI exit 4).
    Locked,
    /// The ledger is corrupt; nothing was changed (CLI exit 5).
    Corrupt,
    /// The commit id was used before with different content (CLI exit 6).
    Conflict,
    /// The conversation does not exist.
    NotFound,
    /// Anything else (I/O, a damaged index, …) (CLI exit 1).
    Other,
}

impl Error {
    /// The error's class.
    pub fn class(&self) -> ErrorClass {
        use ctxlog_ledger::Error as L;
        match self {
            Error::InvalidName { .. } | Error::BadInput { .. } => ErrorClass::BadInput,
            Error::NotFound { .. } => ErrorClass::NotFound,
            Error::Ledger(L::Locked { .. }) => ErrorClass::Locked,
            Error::Ledger(L::Corrupt { .. } | L::ArtifactMismatch { .. }) => ErrorClass::Corrupt,
            Error::Ledger(L::Conflict { .. }) => ErrorClass::Conflict,
            Error::Ledger(
                L::InvalidCommit { .. }
                | L::TooLarge { .. }
                | L::BadArtifactRef { .. }
                | L::BadRange { .. },
            ) => ErrorClass::BadInput,
            Error::Projection(e) => projection_class(e),
            _ => ErrorClass::Other,
        }
    }
}

fn projection_class(e: &ctxlog_projection::Error) -> ErrorClass {
    use ctxlog_projection::Error as P;
    match e {
        P::MandatoryExceedsBudget { .. } => ErrorClass::OverBudget,
        P::InvalidBudget { .. } => ErrorClass::BadInput,
        _ => ErrorClass::Other,
    }
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

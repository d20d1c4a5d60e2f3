//! The backend seam: where conversations live.
//!
//! The traits are the `ctxlog-backend` crate's ([`Backend`], [`LedgerView`],
//! [`LedgerWriter`]), re-exported here; an engine implements them and [`crate::Store::with_backend`]
//! gives every front end the new engine. A backend's failures ([`BackendError`]) become the
//! facade's [`crate::Error`] variants of the same names.
//!
//! The embedded default is [`FileBackend`]: one directory per conversation, every byte of it
//! written through the ledger's [`Storage`](ctxlog_ledger::Storage) trait. With the `postgres`
//! feature (on by default), [`PgBackend`] keeps conversations in PostgreSQL (the
//! `ctxlog-postgres` crate).

mod file;
mod places;

pub use ctxlog_backend::{
    Backend, ConversationInfo, Error as BackendError, LedgerView, LedgerWriter, OpenedWriter,
    PlaceDigest, PlaceMark, PlacesUpdate, Secret, SecretName,
};
#[cfg(feature = "postgres")]
pub use ctxlog_postgres::{
    CONNECTION_WAIT, DEFAULT_POOL_SIZE, DEFAULT_SCHEMA, PgBackend, PgConfig, PgLedger,
};
pub use file::FileBackend;

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::BackendError;
    use crate::{Error, ErrorClass};

    /// A backend's failure reads and classes as the facade error of the same name, so the
    /// CLI's exit codes, the HTTP statuses and the Python exceptions do not depend on the
    /// engine.
    #[test]
    fn backend_errors_keep_their_message_and_class() {
        let io = |kind| std::io::Error::new(kind, "gone");
        let unavailable = ctxlog_ledger::Error::Io {
            path: PathBuf::from("postgres://app@db:5432/x"),
            source: io(std::io::ErrorKind::NotConnected),
        };
        let recall = ctxlog_recall::Error::Io {
            path: PathBuf::from("/c/x.recall.sqlite"),
            source: io(std::io::ErrorKind::PermissionDenied),
        };
        let cases = [
            (
                BackendError::NotFound {
                    name: "c".into(),
                    root: PathBuf::from("/s"),
                },
                ErrorClass::NotFound,
            ),
            (
                BackendError::InvalidRequest {
                    reason: "bad URL".into(),
                },
                ErrorClass::Usage,
            ),
            (
                BackendError::Io {
                    path: PathBuf::from("/s/c"),
                    source: io(std::io::ErrorKind::InvalidInput),
                },
                ErrorClass::Other,
            ),
            (BackendError::Ledger(unavailable), ErrorClass::Unavailable),
            (
                BackendError::Ledger(ctxlog_ledger::Error::BadRange {
                    reason: "no".into(),
                }),
                ErrorClass::Usage,
            ),
            (BackendError::Recall(recall), ErrorClass::Other),
        ];
        for (e, class) in cases {
            let message = e.to_string();
            let facade = Error::from(e);
            assert_eq!(facade.to_string(), message);
            assert_eq!(facade.class(), class, "{facade:?}");
        }
    }

    /// Names are checked in the event model; a refusal is still the facade's usage error.
    #[test]
    fn a_refused_name_is_a_usage_error() {
        let name = crate::ConversationName::new("a/b").map_err(Error::from);
        let Err(e @ Error::InvalidName { .. }) = name else {
            panic!("{name:?}");
        };
        assert_eq!(e.class(), ErrorClass::Usage);
    }
}

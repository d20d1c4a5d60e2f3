//! [`StoreLocation`]: the one place a store URL is read and a backend picked (SPEC L9).
//!
//! A location is a directory (the embedded file store, the default) or a
//! `postgres://user@host:port/db` URL (many server replicas over one database; a build with
//! the `postgres` feature, the default). The CLI's `--store`/`CTXLOG_STORE`, `ctxlog serve`
//! and Python's `ctxlog.Store(url)` all go through [`StoreLocation::parse`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxlog_ledger::Options;

use crate::Result;
use crate::backend::{Backend, FileBackend};
#[cfg(feature = "postgres")]
use crate::backend::{PgBackend, PgConfig};

/// Where a store is.
#[derive(Clone, Debug)]
pub enum StoreLocation {
    /// The embedded file store: one directory per conversation under this root.
    Dir(PathBuf),
    /// A PostgreSQL database (and schema).
    #[cfg(feature = "postgres")]
    Postgres(Box<PgConfig>),
}

impl StoreLocation {
    /// `postgres://…` or `postgresql://…` is a database (see
    /// [`PgConfig::parse`](crate::backend::PgConfig::parse)); anything else is a directory.
    ///
    /// # Errors
    /// [`crate::Error::InvalidRequest`] for a database URL that does not parse, or in a build
    /// without the `postgres` feature.
    pub fn parse(location: &str) -> Result<StoreLocation> {
        if location.starts_with("postgres://") || location.starts_with("postgresql://") {
            database(location)
        } else {
            Ok(StoreLocation::Dir(PathBuf::from(location)))
        }
    }

    /// The file store at `root`.
    pub fn dir(root: impl AsRef<Path>) -> StoreLocation {
        StoreLocation::Dir(root.as_ref().to_path_buf())
    }

    /// Where `tenant`'s conversations are: `<root>/tenants/<tenant>/` for a directory, the
    /// schema `<schema>_<tenant>` for a database.
    pub fn for_tenant(&self, tenant: &str) -> StoreLocation {
        match self {
            StoreLocation::Dir(root) => StoreLocation::Dir(root.join("tenants").join(tenant)),
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(config) => {
                StoreLocation::Postgres(Box::new(config.for_tenant(tenant)))
            }
        }
    }

    /// The location for messages: the directory, or the URL without credentials.
    pub fn display(&self) -> String {
        match self {
            StoreLocation::Dir(root) => root.display().to_string(),
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(config) => config.location().to_string(),
        }
    }

    /// The backend of this location; conversations use `options` (caps, sync). Nothing is
    /// created or connected until the first operation: an unreachable database fails that
    /// operation, in one line naming it. A [`crate::StoreBuilder`] opens a store over it.
    pub fn backend(&self, options: &Options) -> Arc<dyn Backend> {
        match self {
            StoreLocation::Dir(root) => Arc::new(FileBackend::new(root, options.clone())),
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(config) => Arc::new(PgBackend::new(config, options)),
        }
    }
}

#[cfg(feature = "postgres")]
fn database(url: &str) -> Result<StoreLocation> {
    Ok(StoreLocation::Postgres(Box::new(PgConfig::parse(url)?)))
}

/// A database URL in a build without a database client: refused before anything is touched,
/// never taken for a directory named `postgres:`.
#[cfg(not(feature = "postgres"))]
fn database(url: &str) -> Result<StoreLocation> {
    let scheme = url.split("://").next().unwrap_or("postgres");
    Err(crate::Error::InvalidRequest {
        reason: format!(
            "store URL {scheme}://…: this build of ctxlog has no PostgreSQL support (it was \
             built without the `postgres` feature of the ctxlog crate); use a directory, or a \
             build with that feature"
        ),
    })
}

#[cfg(all(test, not(feature = "postgres")))]
mod tests {
    use super::*;

    #[test]
    fn a_database_url_is_a_usage_error_naming_the_missing_feature() {
        for url in ["postgres://app:hunter2@db/x", "postgresql://db/x"] {
            let Err(e) = StoreLocation::parse(url) else {
                panic!("{url} parsed in a build without PostgreSQL");
            };
            assert_eq!(e.class(), crate::ErrorClass::Usage, "{e}");
            let msg = e.to_string();
            assert!(msg.contains("no PostgreSQL support"), "{msg}");
            assert!(msg.contains("`postgres` feature"), "{msg}");
            assert!(!msg.contains("hunter2"), "{msg}");
        }
    }
}

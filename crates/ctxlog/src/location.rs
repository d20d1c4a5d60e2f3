//! [`StoreLocation`]: the one place a store URL is read and a backend picked
//! (docs/design.md#l9-backends).
//!
//! A location is a directory (the embedded file store, the default) or a
//! `postgres://user@host:port/db` URL (many server replicas over one database; a build with
//! the `postgres` feature, the default). The CLI's `--store`/`CTXLOG_STORE`, `ctxlog serve`
//! and Python's `ctxlog.Store(url)` all go through [`StoreLocation::parse`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxlog_ledger::Options;

use crate::backend::{Backend, FileBackend};
#[cfg(feature = "postgres")]
use crate::backend::{PgBackend, PgConfig};
use crate::{Error, Result};

/// The directory under a store root that holds the tenants' stores of a server with tokens
/// (`<root>/.tenants/<tenant>/`). A conversation name cannot start with a dot, so nothing the
/// root's own store does (a commit to, or an erasure of, any conversation) can reach it.
pub const TENANTS_DIR: &str = ".tenants";

/// Where tenant stores were kept before [`TENANTS_DIR`]: a conversation named `tenants` of
/// the root's own store was the same directory.
const OLD_TENANTS_DIR: &str = "tenants";

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

    /// Where `tenant`'s conversations are: `<root>/.tenants/<tenant>/` for a directory (see
    /// [`TENANTS_DIR`]), the schema `<schema>_<tenant>` for a database.
    pub fn for_tenant(&self, tenant: &str) -> StoreLocation {
        match self {
            StoreLocation::Dir(root) => StoreLocation::Dir(root.join(TENANTS_DIR).join(tenant)),
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(config) => {
                StoreLocation::Postgres(Box::new(config.for_tenant(tenant)))
            }
        }
    }

    /// Moves the stores of `tenants` kept in the old layout (`<root>/tenants/<tenant>/`) to
    /// [`TENANTS_DIR`], each with one rename (synced), and returns the tenants moved. A server
    /// with tokens calls it before it serves; it is a no-op for a database and once done.
    /// When `<root>/tenants` is itself a conversation (it holds a `ledger.log`), its own
    /// `artifacts` and `recovered` directories stay where they are.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] when a tenant has a store in both places (nothing is moved:
    /// the operator keeps one); [`Error::Io`] when a rename or sync fails.
    pub fn upgrade_tenant_layout(&self, tenants: &[&str]) -> Result<Vec<String>> {
        let StoreLocation::Dir(root) = self else {
            return Ok(Vec::new());
        };
        let (old, new) = (root.join(OLD_TENANTS_DIR), root.join(TENANTS_DIR));
        let is_conversation = old.join("ledger.log").exists();
        let pending: Vec<&str> = tenants
            .iter()
            .copied()
            .filter(|t| old.join(t).is_dir())
            .filter(|t| !(is_conversation && matches!(*t, "artifacts" | "recovered")))
            .collect();
        if let Some(t) = pending.iter().find(|t| new.join(t).exists()) {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "tenant {t} has a store in both {} and {}; the server uses the second: \
                     keep one of them (move or delete the other) and start again",
                    old.join(t).display(),
                    new.join(t).display()
                ),
            });
        }
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        for t in &pending {
            std::fs::create_dir_all(&new).map_err(io(&new))?;
            std::fs::rename(old.join(t), new.join(t)).map_err(io(&old.join(t)))?;
            for dir in [&new, &old] {
                std::fs::File::open(dir)
                    .and_then(|d| d.sync_all())
                    .map_err(io(dir))?;
            }
        }
        Ok(pending.into_iter().map(str::to_string).collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A conversation of the root's own store named `tenants` and a tenant's store cannot be
    /// the same directory, and a store in the old layout moves to the new one.
    #[test]
    fn tenant_stores_live_where_no_conversation_name_reaches_and_move_there() {
        let dir = tempfile::tempdir().unwrap();
        let root = StoreLocation::dir(dir.path());
        let StoreLocation::Dir(alice) = root.for_tenant("alice") else {
            unreachable!()
        };
        assert_eq!(alice, dir.path().join(".tenants/alice"));
        assert!(crate::ConversationName::new(TENANTS_DIR).is_err());

        let old = dir.path().join("tenants/bob");
        std::fs::create_dir_all(old.join("chat")).unwrap();
        std::fs::write(old.join("chat/ledger.log"), b"bob's").unwrap();
        let moved = root.upgrade_tenant_layout(&["alice", "bob"]).unwrap();
        assert_eq!(moved, ["bob"]);
        let bob = dir.path().join(".tenants/bob/chat/ledger.log");
        assert_eq!(std::fs::read(bob).unwrap(), b"bob's");
        assert!(!old.exists());
        assert!(root.upgrade_tenant_layout(&["bob"]).unwrap().is_empty());

        // In both places: refused, nothing moved.
        std::fs::create_dir_all(&old).unwrap();
        let err = root.upgrade_tenant_layout(&["bob"]).unwrap_err();
        assert!(err.to_string().contains("both"), "{err}");
        assert!(old.exists());
    }

    /// When the old directory is itself a conversation, its own subdirectories stay.
    #[test]
    fn a_conversation_named_tenants_keeps_its_own_directories() {
        let dir = tempfile::tempdir().unwrap();
        let conv = dir.path().join("tenants");
        std::fs::create_dir_all(conv.join("artifacts")).unwrap();
        std::fs::write(conv.join("ledger.log"), b"log").unwrap();
        let root = StoreLocation::dir(dir.path());
        assert!(
            root.upgrade_tenant_layout(&["artifacts"])
                .unwrap()
                .is_empty()
        );
        assert!(conv.join("artifacts").is_dir());
    }
}

//! [`StoreBuilder`]: the one way a store is opened and configured.
//!
//! Every front end (the CLI, the server, the Python package) and every embedder builds its
//! [`Store`] here, so that where a store's configuration comes from, what redaction overrides
//! mean and what happens when a configuration cannot be applied are decided once: a
//! configuration that does not check out (an unreadable `ctxlog.toml`, invalid TOML, a
//! redaction pattern that does not compile, an invalid retention rule) makes
//! [`StoreBuilder::build`] fail with the file (and line) named. Nothing falls back to
//! redacting less.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ctxlog_ledger::Options;

use crate::backend::Backend;
use crate::redact::RedactionOverrides;
use crate::{Result, Store, StoreConfig, StoreLocation};

/// Where the store's configuration comes from.
#[derive(Clone, Debug, Default)]
enum ConfigSource {
    /// A directory store's `ctxlog.toml`, if it has one; the defaults for a database.
    #[default]
    Found,
    /// This file, which must exist.
    File(PathBuf),
    /// This configuration, given by the embedder.
    Given(StoreConfig),
}

/// Where the store's conversations live.
#[derive(Clone, Debug)]
enum Engine {
    Location(StoreLocation),
    Backend(Arc<dyn Backend>),
}

/// Opens a [`Store`]: where it is, the ledger options, the configuration (redaction and
/// retention), redaction overrides, and how long commits wait for each other. Setters take
/// `&mut self` and state their default; [`build`](Self::build) can be called again.
///
/// ```
/// # fn main() -> ctxlog::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let mut overrides = ctxlog::redact::RedactionOverrides::default();
/// overrides.env_vars.push("DATABASE_URL".into());
/// let store = ctxlog::StoreBuilder::dir(dir.path())
///     .redaction(overrides)
///     .writer_wait(Some(std::time::Duration::from_secs(30)))
///     .build()?;
/// # drop(store);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct StoreBuilder {
    engine: Engine,
    options: Options,
    config: ConfigSource,
    overrides: RedactionOverrides,
    writer_wait: Option<Duration>,
    recognition_cache: usize,
}

/// How many bytes of recognition state a store keeps in memory, by default
/// ([`StoreBuilder::recognition_cache`]): 64 MiB, the digests of about a million stored
/// events.
pub const DEFAULT_RECOGNITION_CACHE: usize = 64 << 20;

impl StoreBuilder {
    /// A store at `location` (a directory, or a PostgreSQL database).
    pub fn new(location: StoreLocation) -> StoreBuilder {
        StoreBuilder::with_engine(Engine::Location(location))
    }

    /// The embedded file store at `root`.
    pub fn dir(root: impl AsRef<Path>) -> StoreBuilder {
        StoreBuilder::new(StoreLocation::dir(root))
    }

    /// A store over any backend (its configuration is the defaults unless one is given with
    /// [`config`](Self::config) or [`config_file`](Self::config_file)).
    pub fn backend(backend: Arc<dyn Backend>) -> StoreBuilder {
        StoreBuilder::with_engine(Engine::Backend(backend))
    }

    fn with_engine(engine: Engine) -> StoreBuilder {
        StoreBuilder {
            engine,
            options: Options::default(),
            config: ConfigSource::Found,
            overrides: RedactionOverrides::default(),
            writer_wait: None,
            recognition_cache: DEFAULT_RECOGNITION_CACHE,
        }
    }

    /// The ledger options every conversation is opened with (caps, sync mode, the wait for
    /// another process's writer lock) [default: [`Options::default`]]. Ignored for a store
    /// over a given [`backend`](Self::backend), which was opened with its own.
    pub fn options(&mut self, options: Options) -> &mut StoreBuilder {
        self.options = options;
        self
    }

    /// Read the configuration from this file, which must exist [default: a directory
    /// store's `ctxlog.toml` if it has one, else the defaults; a database store has no
    /// configuration file unless one is named here].
    pub fn config_file(&mut self, path: impl AsRef<Path>) -> &mut StoreBuilder {
        self.config = ConfigSource::File(path.as_ref().to_path_buf());
        self
    }

    /// Use this configuration instead of reading a file [default: see
    /// [`config_file`](Self::config_file)].
    pub fn config(&mut self, config: StoreConfig) -> &mut StoreBuilder {
        self.config = ConfigSource::Given(config);
        self
    }

    /// Redaction settings laid over the configuration's ([`RedactionOverrides`])
    /// [default: none].
    pub fn redaction(&mut self, overrides: RedactionOverrides) -> &mut StoreBuilder {
        self.overrides = overrides;
        self
    }

    /// How long a commit waits for other commits of this process to the same conversation
    /// before it fails with [`crate::Error::Busy`] (nothing written) [default: `None`, as
    /// long as it takes].
    pub fn writer_wait(&mut self, wait: Option<Duration>) -> &mut StoreBuilder {
        self.writer_wait = wait;
        self
    }

    /// How many bytes of recognition state (the digests of each stored event of a
    /// conversation, about 65 bytes an event) relayed calls keep in memory
    /// ([`Store::prepare_call`]); the least recently used conversations' are dropped past
    /// it (never the one in use) and read again from the store on their next call. Where
    /// stored events are (to find a client that dropped its oldest messages) is the
    /// backend's places index, not this memory [default: [`DEFAULT_RECOGNITION_CACHE`]].
    pub fn recognition_cache(&mut self, bytes: usize) -> &mut StoreBuilder {
        self.recognition_cache = bytes;
        self
    }

    /// The configuration the store gets: the source's, with the redaction overrides over it.
    ///
    /// # Errors
    /// [`crate::Error::Io`] for a configuration file that cannot be read;
    /// [`crate::Error::InvalidRequest`] naming the file and line for one that does not check
    /// out.
    pub fn resolved_config(&self) -> Result<StoreConfig> {
        let mut config = match (&self.config, &self.engine) {
            (ConfigSource::Given(config), _) => config.clone(),
            (ConfigSource::File(path), _) => StoreConfig::load(path)?,
            (ConfigSource::Found, Engine::Location(StoreLocation::Dir(root))) => {
                StoreConfig::for_root(root)?
            }
            (ConfigSource::Found, _) => StoreConfig::default(),
        };
        config.redaction = config.redaction.overridden(&self.overrides);
        Ok(config)
    }

    /// Opens the store (nothing is created until its first conversation is).
    ///
    /// # Errors
    /// As [`resolved_config`](Self::resolved_config); [`crate::Error::InvalidRequest`] for
    /// overrides or a configuration that do not check out (a pattern that does not compile,
    /// an invalid retention rule).
    pub fn build(&self) -> Result<Store> {
        let config = self.resolved_config()?;
        let mut options = self.options.clone();
        if config.ledger.check_on_open {
            options.check_on_open(true);
        }
        let backend = match &self.engine {
            Engine::Location(location) => location.backend(&options),
            Engine::Backend(backend) => backend.clone(),
        };
        Store::configured(backend, &config, self.writer_wait, self.recognition_cache)
    }
}

impl Store {
    /// The store at `location`: a directory or a `postgres://` URL ([`StoreLocation::parse`]),
    /// with the ledger's default options and the location's configuration
    /// ([`crate::StoreBuilder`] sets the rest).
    ///
    /// # Errors
    /// As [`StoreLocation::parse`] and [`crate::StoreBuilder::build`].
    pub fn open_url(location: &str) -> Result<Store> {
        StoreBuilder::new(StoreLocation::parse(location)?).build()
    }
}

//! [`PgBackend`]: conversations in PostgreSQL, for many server replicas over one database
//! (SPEC L9). The schema, the guarantees and what erasure leaves are in `docs/postgres.md`.
//!
//! ```text
//! <schema> (one per tenant; "ctxlog" by default)
//!   migrations     version, name, applied_ms            (versioned, applied once)
//!   conversations  name, ledger_id, last_seq, bytes, last_ts_ms, created_ms
//!   events         conversation, seq, kind, ts_ms, record_len, artifact, payload, crc
//!   commits        conversation, id_hash, digest, first_seq, last_seq   (idempotency)
//!   artifacts      conversation, name (sha256-…), content
//! ```
//!
//! Recall indexes stay local SQLite files (one per conversation) under a cache directory of
//! this machine: [`PgBackend::cache_dir`].

mod db;
mod ledger;
mod memory;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxlog_ledger::rules::{self, Caps};
use ctxlog_ledger::{Options, RecoveryReport, VerifyReport};

pub use ledger::PgLedger;

use super::{Backend, ConversationInfo, LedgerView, LedgerWriter, OpenedWriter};
use crate::{ConversationName, Error, Result};
use db::Db;

/// The schema used when the URL names none.
pub const DEFAULT_SCHEMA: &str = "ctxlog";

/// The connections a backend keeps open at most, by default.
pub const DEFAULT_POOL_SIZE: u32 = 16;

/// A PostgreSQL store.
pub struct PgBackend {
    db: Arc<Db>,
    caps: Caps,
    sync: bool,
    cache_dir: PathBuf,
}

impl std::fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgBackend")
            .field("location", &self.db.location)
            .field("schema", &self.db.schema_name)
            .finish_non_exhaustive()
    }
}

/// Where a PostgreSQL store is: the URL's connection settings, the schema and the local
/// recall cache directory.
#[derive(Clone, Debug)]
pub struct PgConfig {
    config: postgres::Config,
    location: String,
    /// The schema holding the tables (one per tenant).
    pub schema: String,
    /// Where this machine keeps the recall caches of the store's conversations.
    pub cache_dir: PathBuf,
    /// Connections kept at most [default: [`DEFAULT_POOL_SIZE`]].
    pub pool_size: u32,
}

impl PgConfig {
    /// Parses `postgres://user[:password]@host[:port]/db[?param=value…]`. Besides
    /// libpq's connection parameters (but TLS: an `sslmode` that asks for it is refused),
    /// `schema=NAME` picks the schema [default:
    /// [`DEFAULT_SCHEMA`]] and `cache_dir=PATH` the recall cache directory [default:
    /// `$CTXLOG_CACHE_DIR`, else `$XDG_CACHE_HOME/ctxlog`, else `~/.cache/ctxlog`, else the
    /// temporary directory; then a subdirectory per server, database and schema].
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for a URL that does not parse (the message never repeats a
    /// password).
    pub fn parse(url: &str) -> Result<PgConfig> {
        let (base, params) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        let (mut schema, mut cache_dir) = (None, None);
        for pair in params.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("schema", v)) => schema = Some(v.to_string()),
                Some(("cache_dir", v)) => cache_dir = Some(PathBuf::from(v)),
                Some(("sslmode", v)) if v != "disable" && v != "prefer" => {
                    return Err(Error::InvalidRequest {
                        reason: format!(
                            "store URL {}: sslmode={v} asks for TLS, which this build of ctxlog \
                             does not support: connect over a local socket, a tunnel or a \
                             private network with sslmode=disable (docs/postgres.md)",
                            redact(base)
                        ),
                    });
                }
                _ => kept.push(pair),
            }
        }
        let url = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let config: postgres::Config = url.parse().map_err(|e| Error::InvalidRequest {
            reason: format!("store URL {}: {e}", redact(base)),
        })?;
        let location = location_of(&config);
        let schema = schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_string());
        if schema.is_empty() || schema.len() > 63 {
            return Err(Error::InvalidRequest {
                reason: format!("store URL {location}: schema must be 1 to 63 bytes"),
            });
        }
        let cache_dir =
            cache_dir.unwrap_or_else(|| default_cache_root().join(cache_key(&location)));
        Ok(PgConfig {
            config,
            location,
            schema,
            cache_dir,
            pool_size: DEFAULT_POOL_SIZE,
        })
    }

    /// The same store for `tenant`: its own schema (`<schema>_<tenant>`, or a hash of the
    /// tenant when that would pass PostgreSQL's 63-byte identifier limit) and its own
    /// cache subdirectory.
    pub fn for_tenant(&self, tenant: &str) -> PgConfig {
        let mut schema = format!("{}_{tenant}", self.schema);
        if schema.len() > 63 {
            let hash = ctxlog_ledger::artifact_name(tenant.as_bytes());
            schema = format!(
                "{}_t{}",
                &self.schema[..self.schema.len().min(30)],
                &hash[7..31]
            );
        }
        let mut config = self.clone();
        config.cache_dir = self.cache_dir.join(format!("tenant-{tenant}"));
        config.schema = schema;
        config
    }

    /// `postgres://user@host:port/db` (no password).
    pub fn location(&self) -> &str {
        &self.location
    }
}

fn location_of(config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("");
    let at = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{at}{host}:{port}/{db}")
}

/// `url` with any password replaced by `***`.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

fn default_cache_root() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = env("CTXLOG_CACHE_DIR") {
        return dir;
    }
    if let Some(dir) = env("XDG_CACHE_HOME") {
        return dir.join("ctxlog");
    }
    if let Some(home) = env("HOME") {
        return home.join(".cache").join("ctxlog");
    }
    std::env::temp_dir().join("ctxlog-cache")
}

/// A directory name for a store location: its characters outside `[A-Za-z0-9._-]` as `_`.
fn cache_key(location: &str) -> String {
    let rest = location.trim_start_matches("postgres://");
    rest.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl PgBackend {
    /// A backend over `config`; conversations are opened with `options`' caps, and commits
    /// are acknowledged after PostgreSQL's synchronous commit (unless `options` says never
    /// to sync). Connects lazily: an unreachable server fails the first operation, in one
    /// line naming host, port and what failed.
    pub fn new(config: &PgConfig, options: &Options) -> PgBackend {
        let location = config.location.clone();
        let db = Db::new(
            config.config.clone(),
            location,
            &config.schema,
            config.pool_size,
        );
        PgBackend {
            db: Arc::new(db),
            caps: rules::caps(options),
            sync: rules::syncs(options),
            cache_dir: config.cache_dir.clone(),
        }
    }

    /// The directory of this machine's recall caches for the store.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    fn not_found(&self, name: &ConversationName) -> Error {
        Error::NotFound {
            name: name.to_string(),
            root: PathBuf::from(self.location()),
        }
    }

    /// Opens `name`; `None` when it does not exist, after deleting any recall cache this
    /// machine still has of it (another replica erased it whole).
    fn open(&self, name: &ConversationName) -> Result<Option<PgLedger>> {
        let ledger = PgLedger::open(self.db.clone(), name.as_str(), self.caps, self.sync)?;
        if ledger.is_none() {
            ctxlog_recall::RecallIndex::delete_files(self.recall_cache(name))?;
        }
        Ok(ledger)
    }
}

impl Backend for PgBackend {
    fn location(&self) -> String {
        format!("{}#{}", self.db.location, self.db.schema_name)
    }

    fn open_writer(&self, name: &ConversationName, create: bool) -> Result<OpenedWriter> {
        let (ledger, created) = match self.open(name)? {
            Some(ledger) => (ledger, false),
            None if create => (
                PgLedger::new_empty(self.db.clone(), name.as_str(), self.caps, self.sync),
                true,
            ),
            None => return Err(self.not_found(name)),
        };
        Ok(OpenedWriter {
            writer: Box::new(ledger),
            recovery: RecoveryReport::default(),
            created,
        })
    }

    fn open_view(&self, name: &ConversationName) -> Result<Box<dyn LedgerView>> {
        match self.open(name)? {
            Some(ledger) => Ok(Box::new(ledger)),
            None => Err(self.not_found(name)),
        }
    }

    /// A refused first commit wrote nothing (its transaction rolled back); a row left
    /// without events is removed all the same.
    fn discard_created(
        &self,
        name: &ConversationName,
        writer: Box<dyn LedgerWriter>,
    ) -> Result<()> {
        drop(writer);
        let mut conn = self.db.conn()?;
        let sql = format!(
            "DELETE FROM {}.conversations WHERE name = $1 AND last_seq = 0",
            self.db.schema
        );
        conn.client
            .execute(&sql, &[&name.as_str()])
            .map_err(|e| self.db.err("cannot remove an empty conversation", &e))?;
        Ok(())
    }

    fn list(&self) -> Result<Vec<ConversationInfo>> {
        let mut conn = self.db.conn()?;
        // Last activity: the time of the newest row, a tombstone's placeholder too (an
        // erasure's time), as the file store gives it; `last_ts_ms` is the floor of the next
        // event's time, which an erased tail does not move (SPEC L10).
        let sql = format!(
            "SELECT c.name, c.last_seq, c.bytes, coalesce(e.ts_ms, c.last_ts_ms)
             FROM {s}.conversations c
             LEFT JOIN {s}.events e ON e.conversation = c.name AND e.seq = c.last_seq
             WHERE c.last_seq > 0",
            s = self.db.schema
        );
        let rows = conn
            .client
            .query(&sql, &[])
            .map_err(|e| self.db.err("cannot list conversations", &e))?;
        Ok(rows
            .iter()
            .map(|r| ConversationInfo {
                name: r.get(0),
                events: r.get::<_, i64>(1) as u64,
                bytes: r.get::<_, i64>(2) as u64,
                last_activity_ms: r.get(3),
            })
            .collect())
    }

    fn verify(&self, name: &ConversationName) -> Result<VerifyReport> {
        let mut ledger = self.open(name)?.ok_or_else(|| self.not_found(name))?;
        Ok(ledger.verify()?)
    }

    /// Deletes the conversation's row (its events, commits and artifacts go with it), then
    /// vacuums the tables and deletes this machine's recall cache. Other replicas find the
    /// row gone (or a new ledger id) at their next catch-up and drop their caches.
    fn erase_all(&self, name: &ConversationName, writer: Box<dyn LedgerWriter>) -> Result<()> {
        drop(writer);
        {
            let mut conn = self.db.conn()?;
            let sql = format!(
                "DELETE FROM {}.conversations WHERE name = $1",
                self.db.schema
            );
            conn.client
                .execute(&sql, &[&name.as_str()])
                .map_err(|e| self.db.err("cannot erase the conversation", &e))?;
        }
        ctxlog_recall::RecallIndex::delete_files(self.recall_cache(name))?;
        Ok(self.db.scrub()?)
    }

    /// `<cache_dir>/<name>.recall.sqlite`; the directory is created here if missing (a
    /// failure shows when the index is opened).
    fn recall_cache(&self, name: &ConversationName) -> PathBuf {
        let _ = std::fs::create_dir_all(&self.cache_dir);
        self.cache_dir.join(format!("{name}.recall.sqlite"))
    }
}

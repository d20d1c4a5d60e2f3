//! [`PgConfig`]: a `postgres://` store URL read into connection settings, a schema and a
//! local recall cache directory. Passwords never reach a message: a store is named
//! `postgres://user@host:port/db`.

use std::path::PathBuf;

use ctxlog_backend::{Error, Result};

/// The schema used when the URL names none.
pub const DEFAULT_SCHEMA: &str = "ctxlog";

/// The connections a backend keeps open at most, by default.
pub const DEFAULT_POOL_SIZE: u32 = 16;

/// Where a PostgreSQL store is: the URL's connection settings, the schema and the local
/// recall cache directory.
#[derive(Clone, Debug)]
pub struct PgConfig {
    /// The connection settings (the URL's, without ctxlog's own parameters).
    pub(crate) config: postgres::Config,
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

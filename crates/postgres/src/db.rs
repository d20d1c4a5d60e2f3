//! Connections: a pool of `postgres` clients, each with its own cache of prepared
//! statements, the schema (one per tenant) and its versioned migrations, and database
//! errors as one-line ledger errors that name the server.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use postgres::{Client, GenericClient, NoTls, Statement, Transaction};

/// A pooled connection and the statements prepared on it (keyed by their SQL text).
pub(crate) struct Conn {
    pub(crate) client: Client,
    stmts: HashMap<String, Statement>,
}

/// Opens connections for the pool.
pub(crate) struct Manager {
    config: postgres::Config,
}

/// A failed connection attempt, with the server's message (`postgres::Error` alone
/// displays as "db error").
#[derive(Debug)]
pub(crate) struct ConnectError(String);

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConnectError {}

impl From<postgres::Error> for ConnectError {
    fn from(e: postgres::Error) -> ConnectError {
        ConnectError(describe(&e))
    }
}

/// The message of a database error, with its cause.
fn describe(e: &postgres::Error) -> String {
    match (e.as_db_error(), std::error::Error::source(e)) {
        (Some(db), _) => db.message().to_string(),
        (None, Some(source)) => format!("{e}: {source}"),
        (None, None) => e.to_string(),
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = ConnectError;

    fn connect(&self) -> Result<Conn, ConnectError> {
        Ok(Conn {
            client: self.config.connect(NoTls)?,
            stmts: HashMap::new(),
        })
    }

    fn is_valid(&self, conn: &mut Conn) -> Result<(), ConnectError> {
        Ok(conn.client.simple_query("").map(|_| ())?)
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.client.is_closed()
    }
}

/// The statement for `sql` on the connection behind `client`, prepared once per connection.
pub(crate) fn stmt<C: GenericClient>(
    client: &mut C,
    cache: &mut HashMap<String, Statement>,
    sql: &str,
) -> Result<Statement, postgres::Error> {
    if let Some(s) = cache.get(sql) {
        return Ok(s.clone());
    }
    let s = client.prepare(sql)?;
    cache.insert(sql.to_string(), s.clone());
    Ok(s)
}

/// How a transaction is begun ([`Conn::begin`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum TxMode {
    /// A read-only snapshot (repeatable read): the conversation row and its events agree.
    Read,
    /// A write, acknowledged after PostgreSQL's synchronous commit when `sync` is set.
    Write {
        /// `synchronous_commit` for this transaction.
        sync: bool,
    },
}

/// A transaction, and the statement cache of its connection.
pub(crate) type Tx<'a> = (Transaction<'a>, &'a mut HashMap<String, Statement>);

impl Conn {
    /// Splits the connection into its client and its statement cache (to open a
    /// transaction on the one and prepare through the other).
    pub(crate) fn parts(&mut self) -> (&mut Client, &mut HashMap<String, Statement>) {
        (&mut self.client, &mut self.stmts)
    }

    /// Begins a transaction of `mode` (errors name the server of `db`).
    pub(crate) fn begin(&mut self, db: &Db, mode: TxMode) -> Result<Tx<'_>, ctxlog_ledger::Error> {
        let failed = |e: &postgres::Error| db.err("cannot begin a transaction", e);
        let (client, cache) = self.parts();
        let tx = match mode {
            TxMode::Read => client
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .map_err(|e| failed(&e))?,
            TxMode::Write { sync } => {
                let mut tx = client.transaction().map_err(|e| failed(&e))?;
                let sync = if sync { "on" } else { "off" };
                tx.batch_execute(&format!("SET LOCAL synchronous_commit = {sync}"))
                    .map_err(|e| failed(&e))?;
                tx
            }
        };
        Ok((tx, cache))
    }
}

/// A database, a schema in it, and the pool of connections to it.
pub(crate) struct Db {
    pool: r2d2::Pool<Manager>,
    /// `postgres://user@host:port/db` (no password), for messages.
    pub(crate) location: String,
    /// The schema, quoted for SQL (`"ctxlog"`).
    pub(crate) schema: String,
    /// The schema's name as given.
    pub(crate) schema_name: String,
    migrated: Mutex<bool>,
}

/// Schema migrations, applied in order once per schema (version = index + 1). A migration
/// never changes once released: a change is a new entry. `{s}` is the quoted schema.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "conversations, events, commits, artifacts",
        "CREATE TABLE {s}.conversations (
        name text PRIMARY KEY,
        ledger_id text NOT NULL,
        last_seq bigint NOT NULL DEFAULT 0,
        bytes bigint NOT NULL DEFAULT 0,
        last_ts_ms bigint NOT NULL DEFAULT 0,
        created_ms bigint NOT NULL
     );
     CREATE TABLE {s}.events (
        conversation text NOT NULL REFERENCES {s}.conversations(name) ON DELETE CASCADE,
        seq bigint NOT NULL,
        kind smallint NOT NULL,
        ts_ms bigint NOT NULL,
        record_len integer NOT NULL,
        artifact text,
        payload bytea NOT NULL,
        crc integer NOT NULL,
        PRIMARY KEY (conversation, seq)
     );
     ALTER TABLE {s}.events ALTER COLUMN payload SET STORAGE EXTERNAL;
     CREATE TABLE {s}.commits (
        conversation text NOT NULL REFERENCES {s}.conversations(name) ON DELETE CASCADE,
        id_hash bytea NOT NULL,
        digest bytea NOT NULL,
        first_seq bigint NOT NULL,
        last_seq bigint NOT NULL,
        PRIMARY KEY (conversation, id_hash)
     );
     CREATE TABLE {s}.artifacts (
        conversation text NOT NULL REFERENCES {s}.conversations(name) ON DELETE CASCADE,
        name text NOT NULL,
        content bytea NOT NULL,
        PRIMARY KEY (conversation, name)
     );
     ALTER TABLE {s}.artifacts ALTER COLUMN content SET STORAGE EXTERNAL;",
    ),
    (
        "recovered: what a repair saved aside",
        "CREATE TABLE {s}.recovered (
        id bigserial PRIMARY KEY,
        conversation text NOT NULL REFERENCES {s}.conversations(name) ON DELETE CASCADE,
        seq bigint,
        kind smallint,
        ts_ms bigint,
        crc integer,
        artifact text,
        content bytea NOT NULL,
        reason text NOT NULL,
        saved_ms bigint NOT NULL
     );
     CREATE INDEX ON {s}.recovered (conversation, seq);",
    ),
    (
        "secrets: the store's secrets by name",
        "CREATE TABLE {s}.secrets (
        name text PRIMARY KEY,
        secret bytea NOT NULL,
        created_ms bigint NOT NULL
     );",
    ),
    (
        "places: where each stored event a client sends back is, and each conversation's mark",
        "CREATE TABLE {s}.place_marks (
        conversation text PRIMARY KEY REFERENCES {s}.conversations(name) ON DELETE CASCADE,
        generation bigint NOT NULL,
        last_seq bigint NOT NULL,
        count bigint NOT NULL,
        stamp bigint NOT NULL
     );
     CREATE TABLE {s}.places (
        id bigserial PRIMARY KEY,
        digest bytea NOT NULL,
        conversation text NOT NULL REFERENCES {s}.conversations(name) ON DELETE CASCADE,
        idx bigint NOT NULL,
        UNIQUE (digest, conversation, idx)
     );
     CREATE INDEX ON {s}.places (conversation);",
    ),
];

/// The tables erasure removes rows from (vacuumed after it).
pub(crate) const ERASED_TABLES: &[&str] = &[
    "places",
    "place_marks",
    "events",
    "commits",
    "artifacts",
    "recovered",
    "conversations",
];

impl Db {
    /// A pool over `config` (no connection is made until the first operation).
    pub(crate) fn new(
        config: postgres::Config,
        location: String,
        schema: &str,
        pool_size: u32,
    ) -> Db {
        let pool = r2d2::Pool::builder()
            .max_size(pool_size.max(1))
            .min_idle(Some(0))
            .connection_timeout(crate::CONNECTION_WAIT)
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .build_unchecked(Manager { config });
        Db {
            pool,
            location,
            schema: quote_ident(schema),
            schema_name: schema.to_string(),
            migrated: Mutex::new(false),
        }
    }

    /// A connection from the pool, the schema migrated.
    pub(crate) fn conn(&self) -> Result<r2d2::PooledConnection<Manager>, ctxlog_ledger::Error> {
        let mut conn = self.raw_conn()?;
        let mut migrated = self
            .migrated
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !*migrated {
            self.migrate(&mut conn)
                .map_err(|e| self.err("cannot migrate the schema", &e))?;
            *migrated = true;
        }
        Ok(conn)
    }

    fn raw_conn(&self) -> Result<r2d2::PooledConnection<Manager>, ctxlog_ledger::Error> {
        self.pool.get().map_err(|e| {
            let why = e.to_string();
            let why = why
                .strip_prefix("timed out waiting for connection: ")
                .unwrap_or(&why);
            self.unavailable(format!("cannot connect: {}", one_line(why)))
        })
    }

    /// Applies the missing migrations in one transaction, under an advisory lock on the
    /// schema's name (so replicas starting together migrate once).
    fn migrate(&self, conn: &mut Conn) -> Result<(), postgres::Error> {
        let s = &self.schema;
        let mut tx = conn.client.transaction()?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('ctxlog-migrate:' || $1))",
            &[&self.schema_name],
        )?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {s};
             CREATE TABLE IF NOT EXISTS {s}.migrations (
                version integer PRIMARY KEY, name text NOT NULL, applied_ms bigint NOT NULL)"
        ))?;
        let row = tx.query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {s}.migrations"),
            &[],
        )?;
        let done: i32 = row.get(0);
        for (i, (name, sql)) in MIGRATIONS.iter().enumerate() {
            let version = i as i32 + 1;
            if version <= done {
                continue;
            }
            tx.batch_execute(&sql.replace("{s}", s))?;
            tx.execute(
                &format!("INSERT INTO {s}.migrations VALUES ($1, $2, $3)"),
                &[&version, name, &ctxlog_ledger::rules::now_ms()],
            )?;
        }
        tx.commit()
    }

    /// Vacuums the tables erasure deleted rows from, so dead row versions holding erased
    /// content are removed from the data files (see `docs/postgres.md`, "Erasure").
    pub(crate) fn scrub(&self) -> Result<(), ctxlog_ledger::Error> {
        let mut conn = self.conn()?;
        for t in ERASED_TABLES {
            conn.client
                .batch_execute(&format!("VACUUM (FULL) {}.{t}", self.schema))
                .map_err(|e| self.err("erased, but vacuuming failed (erase again to retry)", &e))?;
        }
        Ok(())
    }

    /// A database failure as a ledger I/O error naming the server: `what: why`, one line.
    /// Lost connections, a server shutting down or starting up are of kind
    /// [`std::io::ErrorKind::NotConnected`] (the facade's class `unavailable`).
    pub(crate) fn err(&self, what: &str, e: &postgres::Error) -> ctxlog_ledger::Error {
        let unavailable = match e.as_db_error() {
            Some(db) => {
                let code = db.code().code();
                code.starts_with("08") || code.starts_with("57")
            }
            None => std::error::Error::source(e).is_some() || e.is_closed(),
        };
        let why = describe(e);
        let message = format!("{what}: {}", one_line(&why));
        if unavailable {
            self.unavailable(message)
        } else {
            self.io(message)
        }
    }

    pub(crate) fn io(&self, message: String) -> ctxlog_ledger::Error {
        ctxlog_ledger::Error::Io {
            path: PathBuf::from(&self.location),
            source: std::io::Error::other(message),
        }
    }

    /// The database cannot be reached: [`std::io::ErrorKind::NotConnected`].
    pub(crate) fn unavailable(&self, message: String) -> ctxlog_ledger::Error {
        ctxlog_ledger::Error::Io {
            path: PathBuf::from(&self.location),
            source: std::io::Error::new(std::io::ErrorKind::NotConnected, message),
        }
    }
}

/// `name` as a quoted SQL identifier.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

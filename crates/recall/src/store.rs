//! The index file: its schema and meta rows, opening (read-write, or read-only when that is
//! all the file allows), creating it safely next to other processes, damage detection, and
//! deleting it with its side files.
//!
//! # Files and processes
//!
//! - A new index is created in a private temporary file (`<name>.tmp-<pid>-<n>`, created with
//!   `O_EXCL`) and hard-linked into place, which fails when a file is already there: two
//!   processes creating the same index never both run `CREATE TABLE` on one file, and no
//!   process ever sees a half-created schema. An existing zero-byte file gets its schema
//!   inside `BEGIN IMMEDIATE`, after checking again that it is still empty.
//! - SQLite never creates the file (no `SQLITE_OPEN_CREATE`) and never follows a symbolic
//!   link (`SQLITE_OPEN_NOFOLLOW`); a link at the path is refused before anything is opened.
//! - Every operation of a handle holds a shared [`FileLock`] (`flock` on the index's
//!   directory), and [`delete_files`] holds it exclusively: the file is never
//!   deleted while a handle is between checking that it still has the file at the path open
//!   and using it. That matters beyond stale answers: SQLite names the journal after the
//!   path, so a connection to a deleted file that took a lock would take the new file's live
//!   journal for a hot journal of its own and delete it. [`delete_files`] also takes SQLite's
//!   exclusive lock before unlinking, so no writer is mid-transaction when the files go.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::config::IndexConfig;
use crate::error::{Error, Result};

/// `PRAGMA application_id` of a recall index ("cxlr").
pub const APPLICATION_ID: i32 = 0x6378_6c72;
/// `PRAGMA user_version`: the schema version this code reads and writes. 2: every page row
/// carries a checksum. 3: the `vectors` table (the semantic leg's page vectors). An index of
/// an older version is deleted and created anew on open; a newer one is reported as damaged.
pub const SCHEMA_VERSION: i32 = 3;
/// How long a connection waits for another process's lock before failing.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) const SCHEMA: &str = "
CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT;
CREATE TABLE pages(
    id INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL,
    page INTEGER NOT NULL,
    pages INTEGER NOT NULL,
    kind TEXT NOT NULL,
    tool TEXT,
    status TEXT,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    ts_ms INTEGER NOT NULL,
    supersedes INTEGER,
    cue INTEGER NOT NULL,
    author TEXT,
    episode INTEGER NOT NULL,
    checksum INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX pages_seq_page ON pages(seq, page);
CREATE INDEX pages_author ON pages(author) WHERE author IS NOT NULL;
CREATE VIRTUAL TABLE pages_fts USING fts5(
    body, ctx, meta, cjk, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE vectors(id INTEGER PRIMARY KEY, vec BLOB NOT NULL) STRICT;
";

/// What the meta table records: whose ledger, how far, and under which configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) ledger_id: String,
    pub(crate) indexed_through: u64,
    /// The fingerprint of the event at `indexed_through`.
    pub(crate) tail: String,
    /// [`IndexConfig::tag`] of the configuration the rows were written with.
    pub(crate) config: String,
}

impl Meta {
    /// An empty index's meta for `ledger_id` under `config`.
    pub(crate) fn empty(ledger_id: &str, config: &IndexConfig) -> Meta {
        Meta {
            ledger_id: ledger_id.to_owned(),
            config: config.tag(),
            ..Meta::default()
        }
    }

    /// Reads the meta rows. A missing row or a non-number `indexed_through` is damage.
    pub(crate) fn read(conn: &Connection, path: &Path) -> Result<Meta> {
        let mut stmt = conn
            .prepare_cached("SELECT value FROM meta WHERE key = ?1")
            .map_err(|e| Error::sqlite(path, e))?;
        let mut get = |key: &str| -> Result<String> {
            stmt.query_row([key], |r| r.get(0))
                .optional()
                .map_err(|e| Error::sqlite(path, e))?
                .ok_or_else(|| damaged(path, format!("meta row {key} missing")))
        };
        let through = get("indexed_through")?;
        Ok(Meta {
            indexed_through: through
                .parse()
                .map_err(|_| damaged(path, format!("indexed_through is {through:?}")))?,
            ledger_id: get("ledger_id")?,
            tail: get("tail_fingerprint")?,
            config: get("config")?,
        })
    }

    /// Writes the meta rows (inside the caller's transaction).
    pub(crate) fn write(&self, conn: &Connection, path: &Path) -> Result<()> {
        let mut stmt = conn
            .prepare_cached("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)")
            .map_err(|e| Error::sqlite(path, e))?;
        for (key, value) in [
            ("ledger_id", self.ledger_id.clone()),
            ("indexed_through", self.indexed_through.to_string()),
            ("tail_fingerprint", self.tail.clone()),
            ("config", self.config.clone()),
        ] {
            stmt.execute(params![key, value])
                .map_err(|e| Error::sqlite(path, e))?;
        }
        Ok(())
    }
}

/// An [`Error::Damaged`] about `path`.
pub(crate) fn damaged(path: &Path, reason: impl Into<String>) -> Error {
    Error::Damaged {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Fails with [`Error::Symlink`] when `path` is a symbolic link (dangling or not).
pub(crate) fn refuse_symlink(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::Symlink {
            path: path.to_path_buf(),
        }),
        _ => Ok(()),
    }
}

/// The identity of the file at a path (device and inode), to notice that the file a
/// connection has open was deleted or replaced by another process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId(u64, u64);

impl FileId {
    /// The identity of what is at `path` now, without following a link (`None` if nothing).
    pub(crate) fn of(path: &Path) -> Option<FileId> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some(FileId(meta.dev(), meta.ino()))
        }
        #[cfg(not(unix))]
        {
            Some(FileId(meta.len(), 0))
        }
    }
}

/// How a connection may use the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read and write; falls back to read-only when the file or its directory does not
    /// allow writing.
    ReadWrite,
    /// Read only (`SQLITE_OPEN_READ_ONLY`).
    ReadOnly,
}

/// Opens the existing file at `path` with the index's pragmas. Never creates it and never
/// follows a link. Returns the connection and whether it is read-only.
pub(crate) fn connect(path: &Path, access: Access) -> Result<(Connection, bool)> {
    refuse_symlink(path)?;
    let base = OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW
        | OpenFlags::SQLITE_OPEN_URI;
    let read_only = base | OpenFlags::SQLITE_OPEN_READ_ONLY;
    let (conn, ro) = match access {
        Access::ReadOnly => (open_flags(path, read_only)?, true),
        Access::ReadWrite if !writable(path) => (open_flags(path, read_only)?, true),
        Access::ReadWrite => match open_flags(path, base | OpenFlags::SQLITE_OPEN_READ_WRITE) {
            Ok(conn) => {
                let ro = conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false);
                (conn, ro)
            }
            Err(Error::Sqlite { .. }) => (open_flags(path, read_only)?, true),
            Err(e) => return Err(e),
        },
    };
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| Error::sqlite(path, e))?;
    conn.execute_batch("PRAGMA secure_delete = ON; PRAGMA synchronous = NORMAL;")
        .map_err(|e| Error::sqlite(path, e))?;
    Ok((conn, ro))
}

fn open_flags(path: &Path, flags: OpenFlags) -> Result<Connection> {
    Connection::open_with_flags(file_uri(path), flags).map_err(|e| Error::sqlite(path, e))
}

/// `path` as an SQLite `file:` URI, every byte but unreserved ones and `/` percent-encoded
/// (so a name with `?`, `#` or `%` is still a plain name).
fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// Whether a write transaction could work: the file is writable and so is its directory
/// (the rollback journal is created next to the file). Decided before opening, because
/// SQLite only learns it at the first write.
fn writable(path: &Path) -> bool {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let ok = |p: &Path| std::fs::metadata(p).is_ok_and(|m| !m.permissions().readonly());
    ok(path) && ok(dir)
}

/// What an opened file holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Contents {
    /// A recall index of [`SCHEMA_VERSION`] (not yet validated).
    Current,
    /// A recall index of an older schema version.
    Outdated(i64),
}

/// Creates the schema if the file is empty (inside `BEGIN IMMEDIATE`, checking emptiness
/// again under the lock), and says what the file holds. A foreign or newer file is damage.
pub(crate) fn prepare(conn: &mut Connection, path: &Path, meta: &Meta) -> Result<Contents> {
    let (app, version) = versions(conn, path)?;
    if app == 0 && version == 0 && is_empty(conn, path)? {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| Error::sqlite(path, e))?;
        if is_empty(&tx, path)? {
            create_schema(&tx, path, meta)?;
        }
        tx.commit().map_err(|e| Error::sqlite(path, e))?;
        return contents(versions(conn, path)?, path);
    }
    contents((app, version), path)
}

/// What the opened file at `path` holds, by its version pragmas (a foreign or newer file is
/// damage).
pub(crate) fn stored_contents(conn: &Connection, path: &Path) -> Result<Contents> {
    contents(versions(conn, path)?, path)
}

fn contents((app, version): (i64, i64), path: &Path) -> Result<Contents> {
    if app == i64::from(APPLICATION_ID) && (1..i64::from(SCHEMA_VERSION)).contains(&version) {
        return Ok(Contents::Outdated(version));
    }
    if app != i64::from(APPLICATION_ID) || version != i64::from(SCHEMA_VERSION) {
        return Err(damaged(
            path,
            format!(
                "not a recall index of schema {SCHEMA_VERSION} (application_id {app:#x}, user_version {version})"
            ),
        ));
    }
    Ok(Contents::Current)
}

fn versions(conn: &Connection, path: &Path) -> Result<(i64, i64)> {
    Ok((
        pragma(conn, path, "application_id")?,
        pragma(conn, path, "user_version")?,
    ))
}

fn pragma(conn: &Connection, path: &Path, name: &str) -> Result<i64> {
    conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .map_err(|e| Error::sqlite(path, e))
}

fn is_empty(conn: &Connection, path: &Path) -> Result<bool> {
    let objects: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
        .map_err(|e| Error::sqlite(path, e))?;
    Ok(objects == 0)
}

/// Creates the tables and meta rows of an empty index (inside the caller's transaction).
fn create_schema(conn: &Connection, path: &Path, meta: &Meta) -> Result<()> {
    let e = |err| Error::sqlite(path, err);
    conn.execute_batch(SCHEMA).map_err(e)?;
    conn.pragma_update(None, "application_id", APPLICATION_ID)
        .map_err(e)?;
    conn.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(e)?;
    meta.write(conn, path)
}

/// Makes sure a file is at `path`: when nothing is there, an empty index for `meta` is built
/// in a temporary file and hard-linked into place (if another process got there first, its
/// file is kept). Refuses a link at `path`.
pub(crate) fn create_if_missing(path: &Path, meta: &Meta) -> Result<()> {
    refuse_symlink(path)?;
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(());
    }
    let tmp = temp_path(path);
    let built = build_empty(&tmp, meta).and_then(|()| match std::fs::hard_link(&tmp, path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => refuse_symlink(path),
        Err(e) => Err(io(path)(e)),
    });
    let removed = remove_if_present(&tmp);
    built.and(removed)
}

/// Builds an empty index in the new file `tmp` (created with `O_EXCL`, so never through a
/// link).
fn build_empty(tmp: &Path, meta: &Meta) -> Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(io(tmp))?;
    let (mut conn, _) = connect(tmp, Access::ReadWrite)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| Error::sqlite(tmp, e))?;
    create_schema(&tx, tmp, meta)?;
    tx.commit().map_err(|e| Error::sqlite(tmp, e))?;
    conn.close().map_err(|(_, e)| Error::sqlite(tmp, e))
}

/// A fresh temporary name next to `path`.
fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut name = path.as_os_str().to_owned();
    name.push(format!(
        "{TEMP_MARK}{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    PathBuf::from(name)
}

/// Age after which a temporary file is taken for a crash's leftover.
const STALE_TEMP: Duration = Duration::from_secs(60);

/// A `flock` on the directory that holds the index (not on the index file: closing any
/// descriptor of the database file would drop SQLite's own `fcntl` locks in this process; and
/// not on a lock file, which would be one more file in the conversation's directory). The
/// ledger never locks the directory itself, so only recall handles meet here. Released on
/// drop. Where the directory cannot be opened or locked (a platform or file system without
/// `flock` on directories), the lock is a no-op: recall still works, without this ordering.
#[derive(Debug)]
#[must_use = "the lock is held until it is dropped"]
pub(crate) struct FileLock {
    /// Held for its lock.
    dir: Option<std::fs::File>,
}

impl Drop for FileLock {
    /// Unlocks before closing: a child process another thread is spawning shares the open
    /// directory until it runs `exec`, and closing ours alone would leave the lock held for
    /// that moment (the ledger's writer lock does the same).
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = dir.unlock();
        }
    }
}

impl FileLock {
    /// Shares the lock with the other handles' operations; waits while a deletion holds it.
    pub(crate) fn shared(path: &Path) -> FileLock {
        let dir = open_dir(path).filter(|d| d.lock_shared().is_ok());
        FileLock { dir }
    }

    /// Takes the lock alone, waiting up to [`BUSY_TIMEOUT`] for the handles' operations to end;
    /// after that, goes on without it (deleting is what erasure and repair need).
    fn exclusive(path: &Path) -> FileLock {
        let Some(dir) = open_dir(path) else {
            return FileLock { dir: None };
        };
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match dir.try_lock() {
                Ok(()) => return FileLock { dir: Some(dir) },
                Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(_) => return FileLock { dir: None },
            }
        }
    }
}

/// The directory holding the index at `path`, opened for locking (`None` if it cannot be).
fn open_dir(path: &Path) -> Option<std::fs::File> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::File::open(dir).ok()
}

/// What follows the index file's name in its temporary files' names.
const TEMP_MARK: &str = ".tmp-";

/// SQLite's side files of the index at `path`.
fn side_files(path: &Path) -> Vec<PathBuf> {
    ["-journal", "-wal", "-shm"]
        .into_iter()
        .map(|suffix| {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            PathBuf::from(p)
        })
        .collect()
}

/// Deletes the index at `path` (holding its [`FileLock`] alone), its SQLite side files and
/// temporary files left next to it by
/// a crash (older than [`STALE_TEMP`]; younger ones may be another process's build in
/// progress, and hold an empty schema only), ignoring those that do not exist. A link at `path` is removed (never its target); an
/// empty directory there is removed, a non-empty one is an error.
///
/// When the file is an SQLite database, its exclusive lock is taken first (waiting up to the
/// busy timeout for other processes' transactions to end), so no writer loses its journal
/// mid-transaction. If the lock cannot be had (damage, a stuck process), the files are
/// deleted anyway: deleting is what erasure and repair need.
pub(crate) fn delete_files(path: &Path) -> Result<()> {
    let _alone = FileLock::exclusive(path);
    let meta = std::fs::symlink_metadata(path).ok();
    if meta.as_ref().is_some_and(std::fs::Metadata::is_dir) {
        // Only an empty directory is removed: anything inside it is not ours to delete.
        std::fs::remove_dir(path).map_err(io(path))?;
    }
    let lock = meta
        .filter(std::fs::Metadata::is_file)
        .and_then(|_| exclusive_lock(path));
    for side in side_files(path) {
        remove_if_present(&side)?;
    }
    remove_if_present(path)?;
    drop(lock);
    for tmp in temp_files(path) {
        remove_if_present(&tmp)?;
        for side in side_files(&tmp) {
            remove_if_present(&side)?;
        }
    }
    Ok(())
}

/// A connection holding the exclusive lock of the database at `path`, if it can be had.
fn exclusive_lock(path: &Path) -> Option<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(file_uri(path), flags).ok()?;
    conn.busy_timeout(BUSY_TIMEOUT).ok()?;
    conn.execute_batch("BEGIN EXCLUSIVE").ok()?;
    Some(conn)
}

/// Stale temporary files of the index at `path` (`<name>.tmp-…` older than [`STALE_TEMP`],
/// without their side files).
fn temp_files(path: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}{TEMP_MARK}", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy())
                .is_some_and(|n| n.starts_with(&prefix) && !n.ends_with("-journal"))
        })
        .filter(|p| {
            std::fs::symlink_metadata(p)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_TEMP))
        })
        .collect()
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(path)(e)),
        _ => Ok(()),
    }
}

/// Checks that an opened file of [`SCHEMA_VERSION`] is a complete recall index: not
/// truncated, every table declared as [`SCHEMA`] declares it, the FTS structure readable.
pub(crate) fn validate(conn: &Connection, path: &Path) -> Result<()> {
    let expected = pragma(conn, path, "page_count")? * pragma(conn, path, "page_size")?;
    let actual = std::fs::metadata(path).map_err(io(path))?.len();
    if i64::try_from(actual).unwrap_or(i64::MAX) < expected {
        return Err(damaged(
            path,
            format!("file is {actual} bytes, its header says {expected}: truncated"),
        ));
    }
    check_schema_text(conn, path)?;
    // Touch the FTS structure and the newest page so gross damage shows now.
    conn.query_row(
        "SELECT count(*) FROM (SELECT rowid FROM pages_fts WHERE pages_fts MATCH '\"ctxlog\"' LIMIT 1)",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map_err(|e| Error::sqlite(path, e))?;
    conn.query_row("SELECT max(id) FROM pages", [], |r| {
        r.get::<_, Option<i64>>(0)
    })
    .map_err(|e| Error::sqlite(path, e))?;
    Ok(())
}

/// Checks that every table and index is declared exactly as [`SCHEMA`] declares it (a
/// table recreated with other columns would otherwise answer every search with nothing).
fn check_schema_text(conn: &Connection, path: &Path) -> Result<()> {
    let mut stmt = conn
        .prepare("SELECT sql FROM sqlite_schema WHERE name = ?1")
        .map_err(|e| Error::sqlite(path, e))?;
    for (name, expected) in schema_statements() {
        let found: Option<String> = stmt
            .query_row([&name], |r| r.get(0))
            .optional()
            .map_err(|e| Error::sqlite(path, e))?;
        match found {
            Some(sql) if normalize_sql(&sql) == expected => {}
            Some(_) => return Err(damaged(path, format!("{name} has another definition"))),
            None => return Err(damaged(path, format!("{name} is missing"))),
        }
    }
    Ok(())
}

/// The name and whitespace-normalized text of each statement of [`SCHEMA`].
fn schema_statements() -> Vec<(String, String)> {
    SCHEMA
        .split(';')
        .map(normalize_sql)
        .filter(|s| !s.is_empty())
        .filter_map(|s| {
            let name = s
                .split(['(', ' '])
                .skip_while(|w| *w != "TABLE" && *w != "INDEX")
                .nth(1)?
                .to_owned();
            Some((name, s))
        })
        .collect()
}

/// `sql` with runs of whitespace made single spaces and the ends trimmed.
fn normalize_sql(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Checks the SQLite integrity of the whole file and the FTS5 index (costs a full read).
pub(crate) fn verify(conn: &Connection, path: &Path) -> Result<()> {
    let ok: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| Error::sqlite(path, e))?;
    if ok != "ok" {
        return Err(damaged(path, format!("quick_check: {ok}")));
    }
    conn.execute(
        "INSERT INTO pages_fts(pages_fts, rank) VALUES('integrity-check', 1)",
        [],
    )
    .map_err(|e| Error::sqlite(path, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_bundled_sqlite_has_fts5_and_the_schema_builds() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let fts5: i64 = conn
            .query_row("SELECT sqlite_compileoption_used('ENABLE_FTS5')", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(fts5, 1);
        conn.execute_batch(super::SCHEMA).unwrap();
    }

    #[test]
    fn uris_escape_query_and_fragment_characters() {
        let uri = super::file_uri(std::path::Path::new("/a/b?c#d%e.sqlite"));
        assert_eq!(uri, "file:/a/b%3Fc%23d%25e.sqlite");
        let uri = super::file_uri(std::path::Path::new("dir é/x"));
        assert_eq!(uri, "file:dir%20%C3%A9/x");
    }
}

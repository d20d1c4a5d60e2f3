//! The file store's places index ([`ctxlog_backend::PlaceMark`] has the rules): one
//! store-wide SQLite file, `<root>/.places.sqlite`, shared by every process over the store.
//!
//! # Format
//!
//! `PRAGMA application_id` [`APPLICATION_ID`] ("cxlp"), `PRAGMA user_version`
//! [`SCHEMA_VERSION`]; WAL journal, `secure_delete` on (deleted rows are overwritten), a 5 s
//! busy timeout, every write in one `BEGIN IMMEDIATE` transaction.
//!
//! ```sql
//! marks (conversation TEXT PRIMARY KEY, generation, last_seq, count, stamp)
//! places (digest BLOB, conversation TEXT, idx, PRIMARY KEY (digest, conversation, idx))
//! ```
//!
//! A place's rowid orders them newest written first. A conversation's stamp is its log's
//! length. The file is disposable: when it is missing, of another application or version,
//! or damaged (`quick_check`, or a corruption error on use), it is deleted with its `-wal`
//! and `-shm` files and created empty, and the next lookup indexes every conversation again
//! from its ledger. Forgetting a conversation's places checkpoints the WAL into the file
//! and truncates it, so no copy of a deleted row stays in the `-wal` file.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use ctxlog_backend::{Error, PlaceDigest, PlaceMark, PlacesUpdate, Result};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

/// The file's name in the store's root.
pub(crate) const PLACES_FILE: &str = ".places.sqlite";

/// `PRAGMA application_id` of a places index ("cxlp").
pub const APPLICATION_ID: i32 = 0x6378_6c70;

/// `PRAGMA user_version`: the schema this code reads and writes.
pub const SCHEMA_VERSION: i32 = 1;

/// How long a connection waits for another process's transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const SCHEMA: &str = "
    CREATE TABLE marks (
        conversation TEXT PRIMARY KEY,
        generation INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        count INTEGER NOT NULL,
        stamp INTEGER NOT NULL
    );
    CREATE TABLE places (
        digest BLOB NOT NULL,
        conversation TEXT NOT NULL,
        idx INTEGER NOT NULL,
        PRIMARY KEY (digest, conversation, idx)
    );
    CREATE INDEX places_conversation ON places (conversation);";

/// The places index file of a store, its connection opened on first use.
#[derive(Debug)]
pub(crate) struct PlacesFile {
    path: PathBuf,
    conn: Mutex<Option<Connection>>,
}

impl PlacesFile {
    pub(crate) fn new(path: PathBuf) -> PlacesFile {
        PlacesFile {
            path,
            conn: Mutex::new(None),
        }
    }

    /// Runs `f` on the connection (opened, and the file rebuilt if it must be, first). A
    /// corruption error deletes the file: `f` runs again once on a new, empty one.
    fn with<T>(&self, f: impl Fn(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        let mut guard = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for attempt in 0..2 {
            if guard.is_none() {
                *guard = Some(self.open()?);
            }
            let Some(conn) = guard.as_mut() else { break };
            match f(conn) {
                Err(e) if is_damage(&e) && attempt == 0 => {
                    *guard = None;
                    self.delete()?;
                }
                result => return result.map_err(|e| self.err(&e)),
            }
        }
        Err(self.err(&rusqlite::Error::InvalidQuery))
    }

    /// Opens the file, creating it when missing; deletes and recreates one of another
    /// application or version, or damaged.
    fn open(&self) -> Result<Connection> {
        match connect(&self.path) {
            Ok(conn) => Ok(conn),
            Err(Opened::Sqlite(e)) if !is_damage(&e) => Err(self.err(&e)),
            Err(_) => {
                self.delete()?;
                connect(&self.path).map_err(|e| match e {
                    Opened::Sqlite(e) => self.err(&e),
                    Opened::Foreign(why) => self.io(why),
                })
            }
        }
    }

    /// Whether the file exists (a link there counts: it is refused on use).
    pub(crate) fn exists(&self) -> bool {
        std::fs::symlink_metadata(&self.path).is_ok()
    }

    /// Deletes the file and its WAL and shared-memory files.
    pub(crate) fn delete(&self) -> Result<()> {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.path.clone().into_os_string();
            path.push(suffix);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::Io {
                        path: PathBuf::from(path),
                        source: e,
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub(crate) fn mark(&self, name: &str) -> Result<Option<PlaceMark>> {
        self.with(|conn| {
            conn.query_row(
                "SELECT generation, last_seq, count, stamp FROM marks WHERE conversation = ?1",
                [name],
                read_mark,
            )
            .optional()
        })
    }

    pub(crate) fn put(
        &self,
        name: &str,
        expected: Option<PlaceMark>,
        update: PlacesUpdate<'_>,
    ) -> Result<bool> {
        self.with(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = tx
                .query_row(
                    "SELECT generation, last_seq, count, stamp FROM marks WHERE conversation = ?1",
                    [name],
                    read_mark,
                )
                .optional()?;
            if now != expected {
                return Ok(false);
            }
            let base = expected.unwrap_or_default();
            {
                let mut insert = tx.prepare_cached(
                    "INSERT OR IGNORE INTO places (digest, conversation, idx) VALUES (?1, ?2, ?3)",
                )?;
                for (i, digest) in update.digests.iter().enumerate() {
                    insert.execute(rusqlite::params![
                        &digest[..],
                        name,
                        to_sql(base.count + i as u64)
                    ])?;
                }
            }
            tx.execute(
                "INSERT OR REPLACE INTO marks (conversation, generation, last_seq, count, stamp)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![
                    name,
                    base.generation,
                    to_sql(update.last_seq),
                    to_sql(base.count + update.digests.len() as u64),
                    update.stamp
                ],
            )?;
            tx.commit()?;
            Ok(true)
        })
    }

    /// Deletes the places of `name` and moves its mark to a new generation (`keep_mark`),
    /// or deletes the mark too (a conversation that no longer exists).
    pub(crate) fn forget(&self, name: &str, keep_mark: bool) -> Result<()> {
        let result = self.with(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute("DELETE FROM places WHERE conversation = ?1", [name])?;
            if keep_mark {
                tx.execute(
                    "INSERT INTO marks (conversation, generation, last_seq, count, stamp)
                     VALUES (?1, 1, 0, 0, -1)
                     ON CONFLICT (conversation) DO UPDATE SET generation = generation + 1,
                     last_seq = 0, count = 0, stamp = -1",
                    [name],
                )?;
            } else {
                tx.execute("DELETE FROM marks WHERE conversation = ?1", [name])?;
            }
            tx.commit()?;
            // The deleted rows' pages leave the WAL: written into the file (zeroed there by
            // secure_delete) and the WAL truncated.
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            })?;
            Ok(())
        });
        // A file that cannot be updated is deleted whole: no digest of the erased events
        // stays, and the index is rebuilt from the ledgers.
        result.or_else(|_| self.delete())
    }

    pub(crate) fn places_of(
        &self,
        digest: &PlaceDigest,
        limit: usize,
    ) -> Result<Vec<(String, u64)>> {
        self.with(|conn| {
            let mut query = conn.prepare_cached(
                "SELECT conversation, idx FROM places WHERE digest = ?1 ORDER BY rowid DESC LIMIT ?2",
            )?;
            let rows = query.query_map(
                rusqlite::params![&digest[..], i64::try_from(limit).unwrap_or(i64::MAX)],
                |r| Ok((r.get::<_, String>(0)?, from_sql(r.get(1)?))),
            )?;
            rows.collect()
        })
    }

    /// Every mark's conversation and stamp.
    pub(crate) fn stamps(&self) -> Result<Vec<(String, i64)>> {
        self.with(|conn| {
            let mut query = conn.prepare_cached("SELECT conversation, stamp FROM marks")?;
            let rows = query.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
    }

    fn err(&self, e: &rusqlite::Error) -> Error {
        self.io(format!("places index: {e}"))
    }

    fn io(&self, message: String) -> Error {
        Error::Io {
            path: self.path.clone(),
            source: std::io::Error::other(message),
        }
    }
}

/// Why a file could not be opened as a places index.
enum Opened {
    Sqlite(rusqlite::Error),
    /// Another application's file, another version, or one `quick_check` finds damaged.
    Foreign(String),
}

impl From<rusqlite::Error> for Opened {
    fn from(e: rusqlite::Error) -> Opened {
        Opened::Sqlite(e)
    }
}

/// Opens (creating it if missing) the places index at `path`, with its pragmas, and checks
/// it is one of this version and intact.
fn connect(path: &Path) -> std::result::Result<Connection, Opened> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let mut conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
    conn.execute_batch("PRAGMA secure_delete = ON; PRAGMA synchronous = NORMAL;")?;
    let versions = |conn: &Connection| -> rusqlite::Result<(i32, i32)> {
        Ok((
            conn.query_row("PRAGMA application_id", [], |r| r.get(0))?,
            conn.query_row("PRAGMA user_version", [], |r| r.get(0))?,
        ))
    };
    if versions(&conn)? == (0, 0) {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let objects: i64 = tx.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
        if objects == 0 {
            tx.execute_batch(SCHEMA)?;
            tx.pragma_update(None, "application_id", APPLICATION_ID)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        }
        tx.commit()?;
    }
    let (app, version) = versions(&conn)?;
    if (app, version) != (APPLICATION_ID, SCHEMA_VERSION) {
        return Err(Opened::Foreign(format!(
            "not a places index of schema {SCHEMA_VERSION} (application_id {app:#x}, \
             user_version {version})"
        )));
    }
    let check: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(Opened::Foreign(format!("damaged: {check}")));
    }
    Ok(conn)
}

/// Whether `e` says the file is not a (sound) database.
fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

fn read_mark(r: &rusqlite::Row<'_>) -> rusqlite::Result<PlaceMark> {
    Ok(PlaceMark {
        generation: r.get(0)?,
        last_seq: from_sql(r.get(1)?),
        count: from_sql(r.get(2)?),
        stamp: r.get(3)?,
    })
}

fn to_sql(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn from_sql(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(last_seq: u64, stamp: i64, digests: &[PlaceDigest]) -> PlacesUpdate<'_> {
        PlacesUpdate {
            last_seq,
            stamp,
            digests,
        }
    }

    #[test]
    fn a_put_applies_only_over_the_mark_it_read_and_a_forget_moves_the_generation() {
        let dir = tempfile::tempdir().unwrap();
        let file = PlacesFile::new(dir.path().join(PLACES_FILE));
        assert_eq!(file.mark("a").unwrap(), None);
        assert!(
            file.put("a", None, update(2, 10, &[[1; 32], [2; 32]]))
                .unwrap()
        );
        let mark = file.mark("a").unwrap().unwrap();
        assert_eq!((mark.last_seq, mark.count, mark.stamp), (2, 2, 10));
        // Another writer that read no mark is refused.
        assert!(!file.put("a", None, update(2, 10, &[[1; 32]])).unwrap());
        assert!(
            file.put("a", Some(mark), update(3, 12, &[[1; 32]]))
                .unwrap()
        );
        assert_eq!(
            file.places_of(&[1; 32], 10).unwrap(),
            [("a".to_string(), 2), ("a".to_string(), 0)]
        );
        assert_eq!(file.places_of(&[1; 32], 1).unwrap().len(), 1);
        let read_before = file.mark("a").unwrap();
        file.forget("a", true).unwrap();
        assert!(file.places_of(&[1; 32], 10).unwrap().is_empty());
        let forgotten = file.mark("a").unwrap().unwrap();
        assert_eq!((forgotten.generation, forgotten.last_seq), (1, 0));
        // A writer that read before the forget puts nothing back.
        assert!(
            !file
                .put("a", read_before, update(4, 13, &[[2; 32]]))
                .unwrap()
        );
        assert!(file.places_of(&[2; 32], 10).unwrap().is_empty());
        file.forget("a", false).unwrap();
        assert_eq!(file.mark("a").unwrap(), None);
    }

    #[test]
    fn a_file_of_another_version_or_damaged_or_deleted_is_rebuilt_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PLACES_FILE);
        let file = PlacesFile::new(path.clone());
        assert!(file.put("a", None, update(1, 5, &[[1; 32]])).unwrap());
        drop(file);
        // Another schema version.
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        let file = PlacesFile::new(path.clone());
        assert_eq!(file.mark("a").unwrap(), None);
        assert!(file.put("a", None, update(1, 5, &[[1; 32]])).unwrap());
        drop(file);
        // Garbage.
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let file = PlacesFile::new(path.clone());
        assert_eq!(file.places_of(&[1; 32], 10).unwrap(), []);
        assert!(file.put("b", None, update(1, 5, &[[1; 32]])).unwrap());
        // Deleted while open: the next open creates it again.
        drop(file);
        PlacesFile::new(path.clone()).delete().unwrap();
        assert!(!path.exists());
        let file = PlacesFile::new(path.clone());
        assert_eq!(file.stamps().unwrap(), []);
        assert!(path.exists());
    }
}

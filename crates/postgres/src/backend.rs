//! [`PgBackend`]: the store's conversations as rows of one schema: open, create, list,
//! verify and erase them, and this machine's recall cache of each.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxlog_backend::{
    Backend, ConversationInfo, ConversationName, Error, LedgerView, LedgerWriter, OpenedWriter,
    PlaceDigest, PlaceMark, PlacesUpdate, Result, Secret, SecretName,
};
use ctxlog_ledger::rules::{self, Caps};
use ctxlog_ledger::{Options, RecoveryReport, VerifyReport};

use crate::PgConfig;
use crate::db::Db;
use crate::ledger::PgLedger;

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

impl PgBackend {
    /// A backend over `config`; conversations are opened with `options`' caps, and commits
    /// are acknowledged after PostgreSQL's synchronous commit (unless `options` says never
    /// to sync). Connects lazily: an unreachable server fails the first operation, in one
    /// line naming host, port and what failed.
    pub fn new(config: &PgConfig, options: &Options) -> PgBackend {
        let location = config.location().to_string();
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

    /// Deletes the conversation's row (its events, commits, artifacts and what a repair saved
    /// aside go with it), then vacuums the tables and deletes this machine's recall cache.
    fn erase_whole(&self, name: &ConversationName) -> Result<()> {
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
        // event's time, which an erased tail does not move (event times never go backwards).
        // Events: the live ones, as the file store counts them (not system markers:
        // tombstones and their placeholders, loss records, import markers).
        let sql = format!(
            "SELECT c.name,
                    (SELECT count(*) FROM {s}.events l
                     WHERE l.conversation = c.name AND l.kind <> {system}),
                    c.bytes, coalesce(e.ts_ms, c.last_ts_ms)
             FROM {s}.conversations c
             LEFT JOIN {s}.events e ON e.conversation = c.name AND e.seq = c.last_seq
             WHERE c.last_seq > 0",
            s = self.db.schema,
            system = ctxlog_ledger::EventKind::System.as_byte()
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
                damage: None,
            })
            .collect())
    }

    fn verify(&self, name: &ConversationName) -> Result<VerifyReport> {
        let mut ledger = self.open(name)?.ok_or_else(|| self.not_found(name))?;
        Ok(ledger.verify()?)
    }

    fn salvage(
        &self,
        name: &ConversationName,
        visit: &mut dyn FnMut(ctxlog_ledger::Salvaged) -> ctxlog_ledger::Result<()>,
    ) -> Result<ctxlog_ledger::SalvageReport> {
        let mut ledger = PgLedger::new_empty(self.db.clone(), name.as_str(), self.caps, self.sync);
        ledger.salvage(visit)?.ok_or_else(|| self.not_found(name))
    }

    /// Plans the repair and, with `accept_loss`, carries it out in one transaction
    /// (`repair.rs`): lost rows' stored bytes go to the `recovered` table, loss records are
    /// rows, the conversation gets a new ledger id (every replica's handles and recall caches
    /// start over at their next catch-up).
    fn repair(
        &self,
        name: &ConversationName,
        accept_loss: bool,
    ) -> Result<ctxlog_ledger::RepairReport> {
        let report = crate::repair::repair(&self.db, name.as_str(), accept_loss)?
            .ok_or_else(|| self.not_found(name))?;
        if report.applied {
            ctxlog_recall::RecallIndex::delete_files(self.recall_cache(name))?;
        }
        Ok(report)
    }

    /// Deletes the conversation's row (its events, commits and artifacts go with it), then
    /// vacuums the tables and deletes this machine's recall cache. Other replicas find the
    /// row gone (or a new ledger id) at their next catch-up and drop their caches.
    fn erase_all(&self, name: &ConversationName, writer: Box<dyn LedgerWriter>) -> Result<()> {
        drop(writer);
        self.erase_whole(name)
    }

    /// As [`Backend::erase_all`]: deleting the row needs no writer, and a commit in flight on
    /// another replica holds the row's lock, which the delete waits for.
    fn erase_all_damaged(&self, name: &ConversationName) -> Result<()> {
        self.erase_whole(name)
    }

    /// The row `name` of the schema's `secrets` table: inserted with new random bytes unless
    /// a row of that name exists (`ON CONFLICT DO NOTHING`, which waits for a concurrent
    /// insert of the same name to commit), then read: replicas that start at once all read
    /// the one row that was inserted first.
    fn secret(&self, name: SecretName<'_>) -> Result<Secret> {
        let new = ctxlog_backend::new_secret()?;
        let mut conn = self.db.conn()?;
        let s = &self.db.schema;
        let failed = |e: &postgres::Error| self.db.err("cannot read or create the secret", e);
        conn.client
            .execute(
                &format!(
                    "INSERT INTO {s}.secrets (name, secret, created_ms) VALUES ($1, $2, $3)
                     ON CONFLICT (name) DO NOTHING"
                ),
                &[&name.as_str(), &&new[..], &rules::now_ms()],
            )
            .map_err(|e| failed(&e))?;
        let row = conn
            .client
            .query_one(
                &format!("SELECT secret FROM {s}.secrets WHERE name = $1"),
                &[&name.as_str()],
            )
            .map_err(|e| failed(&e))?;
        let stored: Vec<u8> = row.get(0);
        Secret::try_from(stored.as_slice()).map_err(|_| {
            Error::Ledger(self.db.io(format!(
                "the secret {name:?} in {s}.secrets is not 32 bytes: delete its row to create \
                 a new one (docs/gateway.md says what a new one changes)"
            )))
        })
    }

    /// `<cache_dir>/<name>.recall.sqlite`; the directory is created here if missing (a
    /// failure shows when the index is opened).
    fn recall_cache(&self, name: &ConversationName) -> PathBuf {
        let _ = std::fs::create_dir_all(&self.cache_dir);
        self.cache_dir.join(format!("{name}.recall.sqlite"))
    }

    /// Its `last_seq`.
    fn place_stamp(&self, name: &ConversationName) -> Result<i64> {
        Ok(crate::places::stamp(&self.db, name.as_str())?)
    }

    fn place_mark(&self, name: &ConversationName) -> Result<Option<PlaceMark>> {
        Ok(crate::places::mark(&self.db, name.as_str())?)
    }

    fn put_places(
        &self,
        name: &ConversationName,
        expected: Option<PlaceMark>,
        update: PlacesUpdate<'_>,
    ) -> Result<bool> {
        Ok(crate::places::put(
            &self.db,
            name.as_str(),
            expected,
            update,
        )?)
    }

    fn forget_places(&self, name: &ConversationName) -> Result<()> {
        Ok(crate::places::forget(&self.db, name.as_str())?)
    }

    fn places_of(&self, digest: &PlaceDigest, limit: usize) -> Result<Vec<(String, u64)>> {
        Ok(crate::places::places_of(&self.db, digest, limit)?)
    }

    /// One query over the conversations and their marks.
    fn places_behind(&self) -> Result<Vec<String>> {
        Ok(crate::places::behind(&self.db)?)
    }
}

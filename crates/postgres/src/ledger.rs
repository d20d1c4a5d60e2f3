//! [`PgLedger`]: one conversation in PostgreSQL, as a [`LedgerView`] and a [`LedgerWriter`].
//!
//! The handle keeps the conversation's index in memory (per seq: kind and record size; the
//! user and note seqs), read once and then caught up by seq; payloads are read on demand and
//! checked against their CRC32C. A commit is one transaction that first locks the
//! conversation's row (`SELECT … FOR UPDATE`): writers on every replica queue there, and the
//! handle catches up with what others committed before it validates and appends.
//!
//! Decoded events are kept in a bounded read cache ([`EventCache`]) tagged with the ledger
//! id they were read under: rows never change under one ledger id (only an erasure rewrites
//! them, and it gives the conversation a new id), so a warm projection reads no payload
//! again. Every read path catches up first, and a catch-up that finds another ledger id
//! (an erasure on any replica) leaves the cache unusable: it is dropped at the next read.

use std::collections::{BTreeMap, HashMap};
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use ctxlog_backend::{LedgerView, LedgerWriter};
use ctxlog_ledger::rules::{self, Caps};
use ctxlog_ledger::{
    ArtifactRef, CommitReceipt, ErasureReport, Error, Event, EventBody, EventKind, LedgerRead,
    NewCommit, Reach, Result,
};
use postgres::types::ToSql;
use postgres::{GenericClient, Statement};

use super::db::{Db, TxMode, stmt};
use super::memory::{EventCache, Index};

/// The conversation's row: what a catch-up compares against.
pub(crate) struct Head {
    pub(crate) ledger_id: String,
    pub(crate) last_seq: u64,
    pub(crate) bytes: u64,
    pub(crate) last_ts_ms: i64,
}

/// One conversation of a PostgreSQL store.
pub struct PgLedger {
    db: Arc<Db>,
    caps: Caps,
    sync: bool,
    name: String,
    index: Index,
    cache: Mutex<EventCache>,
}

/// A prepared statement cache and a client (a transaction or a plain connection).
pub(crate) struct Q<'a, C: GenericClient> {
    pub(crate) c: &'a mut C,
    pub(crate) cache: &'a mut HashMap<String, Statement>,
    pub(crate) db: &'a Db,
}

impl<C: GenericClient> Q<'_, C> {
    fn prep(&mut self, sql: &str) -> Result<Statement> {
        let sql = sql.replace("{s}", &self.db.schema);
        stmt(self.c, self.cache, &sql).map_err(|e| self.db.err("cannot prepare a statement", &e))
    }

    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>> {
        let s = self.prep(sql)?;
        self.c
            .query(&s, params)
            .map_err(|e| self.db.err("query failed", &e))
    }

    pub(crate) fn exec(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let s = self.prep(sql)?;
        self.c
            .execute(&s, params)
            .map_err(|e| self.db.err("statement failed", &e))
    }

    pub(crate) fn head(&mut self, name: &str, lock: bool) -> Result<Option<Head>> {
        let sql = if lock {
            "SELECT ledger_id, last_seq, bytes, last_ts_ms FROM {s}.conversations WHERE name = $1 FOR UPDATE"
        } else {
            "SELECT ledger_id, last_seq, bytes, last_ts_ms FROM {s}.conversations WHERE name = $1"
        };
        Ok(self.query(sql, &[&name])?.first().map(|r| Head {
            ledger_id: r.get(0),
            last_seq: r.get::<_, i64>(1) as u64,
            bytes: r.get::<_, i64>(2) as u64,
            last_ts_ms: r.get(3),
        }))
    }

    /// The content of artifact `r` of conversation `name`, checked against its name. An
    /// event references it: a missing one was lost (damage), not a bad reference.
    pub(crate) fn artifact(&mut self, name: &str, r: &ArtifactRef) -> Result<Vec<u8>> {
        let content = self.stored_artifact(name, r).map_err(|e| match e {
            Error::BadArtifactRef { name, .. } if ctxlog_ledger::is_valid_artifact_name(&name) => {
                Error::ArtifactMissing { name }
            }
            other => other,
        })?;
        rules::check_artifact(&r.name, &content)?;
        Ok(content)
    }

    /// The content stored under the name of `r` in conversation `name`, unchecked.
    fn stored_artifact(&mut self, name: &str, r: &ArtifactRef) -> Result<Vec<u8>> {
        if !ctxlog_ledger::is_valid_artifact_name(&r.name) {
            return Err(Error::BadArtifactRef {
                name: r.name.clone(),
                why: "not sha256-<64 lowercase hex>",
            });
        }
        let rows = self.query(
            "SELECT content FROM {s}.artifacts WHERE conversation = $1 AND name = $2",
            &[&name, &r.name],
        )?;
        rows.first()
            .map(|row| row.get(0))
            .ok_or_else(|| Error::BadArtifactRef {
                name: r.name.clone(),
                why: "no such artifact in this conversation",
            })
    }

    /// Brings `index` up to `head`: the new seqs only, or everything when the ledger id
    /// changed (an erasure rewrote it).
    fn catch_up(&mut self, name: &str, index: &mut Index, head: &Head) -> Result<()> {
        if head.ledger_id != index.ledger_id || head.last_seq < index.last_seq() {
            *index = Index {
                ledger_id: head.ledger_id.clone(),
                ..Index::default()
            };
        }
        let from = index.last_seq() as i64;
        if head.last_seq > index.last_seq() {
            let rows = self.query(
                "SELECT seq, kind, record_len FROM {s}.events
                 WHERE conversation = $1 AND seq > $2 AND seq <= $3 ORDER BY seq",
                &[&name, &from, &(head.last_seq as i64)],
            )?;
            for row in rows {
                let seq = row.get::<_, i64>(0) as u64;
                let kind_byte: i16 = row.get(1);
                let kind = EventKind::from_byte(kind_byte as u8).ok_or_else(|| {
                    corrupt(
                        self.db,
                        name,
                        seq,
                        format!("unknown event kind {kind_byte}"),
                    )
                })?;
                if seq != index.last_seq() + 1 {
                    return Err(corrupt(
                        self.db,
                        name,
                        index.last_seq() + 1,
                        format!("found seq {seq} where seq {} belongs", index.last_seq() + 1),
                    ));
                }
                index.push(seq, kind, row.get::<_, i32>(2) as u32);
            }
            if index.last_seq() != head.last_seq {
                return Err(corrupt(
                    self.db,
                    name,
                    index.last_seq() + 1,
                    "event row missing".into(),
                ));
            }
        }
        index.bytes = head.bytes;
        index.last_ts_ms = head.last_ts_ms;
        Ok(())
    }

    /// Events `range` (placeholders of erased seqs included), each checked against its CRC:
    /// the first row that does not check out fails the read.
    fn raw_events(&mut self, name: &str, range: RangeInclusive<u64>) -> Result<Vec<Event>> {
        self.salvage_rows(name, range)?
            .into_iter()
            .map(|(_, event)| event)
            .collect()
    }

    /// The rows of `range` that exist, each decoded or with why it cannot be.
    #[allow(clippy::type_complexity)]
    fn salvage_rows(
        &mut self,
        name: &str,
        range: RangeInclusive<u64>,
    ) -> Result<Vec<(u64, Result<Event>)>> {
        let rows = self.query(
            "SELECT seq, kind, ts_ms, payload, crc FROM {s}.events
             WHERE conversation = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
            &[&name, &(*range.start() as i64), &(*range.end() as i64)],
        )?;
        Ok(rows
            .iter()
            .map(|row| {
                let seq = row.get::<_, i64>(0) as u64;
                let kind: i16 = row.get(1);
                let ts_ms: i64 = row.get(2);
                let payload: &[u8] = row.get(3);
                let crc = row.get::<_, i32>(4) as u32;
                (seq, decode(self.db, name, seq, kind, ts_ms, payload, crc))
            })
            .collect())
    }
}

/// The CRC32C of an event row: seq, kind and time (little-endian) and the payload.
pub(crate) fn row_crc(seq: u64, kind: u8, ts_ms: i64, payload: &[u8]) -> u32 {
    let mut head = [0u8; 17];
    head[..8].copy_from_slice(&seq.to_le_bytes());
    head[8] = kind;
    head[9..].copy_from_slice(&ts_ms.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&head), payload)
}

pub(crate) fn decode(
    db: &Db,
    name: &str,
    seq: u64,
    kind: i16,
    ts_ms: i64,
    payload: &[u8],
    crc: u32,
) -> Result<Event> {
    if row_crc(seq, kind as u8, ts_ms, payload) != crc {
        return Err(corrupt(db, name, seq, "payload checksum mismatch".into()));
    }
    let body: EventBody = serde_json::from_slice(payload)
        .map_err(|e| corrupt(db, name, seq, format!("undecodable event body: {e}")))?;
    if body.kind().as_byte() as i16 != kind {
        return Err(corrupt(
            db,
            name,
            seq,
            "kind column disagrees with the payload".into(),
        ));
    }
    Ok(Event { seq, ts_ms, body })
}

/// The corrupt error for `seq` of conversation `name` (offset: the seq; rows have no byte
/// offset).
fn corrupt(db: &Db, name: &str, seq: u64, reason: String) -> Error {
    Error::Corrupt {
        path: PathBuf::from(format!("{}#{}.events/{name}", db.location, db.schema_name)),
        offset: seq,
        seq: Some(seq),
        reason,
    }
}

/// Inserts the rows of the erased run `t` (tombstone, then placeholders, all at `t.at_ms`);
/// returns their stored size.
pub(crate) fn insert_run<C: GenericClient>(
    q: &mut Q<'_, C>,
    name: &str,
    t: &rules::Tombstone,
) -> Result<u64> {
    let mut bytes = 0u64;
    for (seq, body) in (t.from..=t.to).zip(t.bodies()) {
        let payload = serde_json::to_vec(&body).map_err(|e| Error::InvalidCommit {
            reason: format!("tombstone cannot be encoded: {e}"),
        })?;
        let len = (rules::RECORD_HEADER_LEN + payload.len()) as u32;
        bytes += u64::from(len);
        let kind = EventKind::System.as_byte();
        let crc = row_crc(seq, kind, t.at_ms, &payload) as i32;
        q.exec(
            "INSERT INTO {s}.events
             (conversation, seq, kind, ts_ms, record_len, artifact, payload, crc)
             VALUES ($1, $2, $3, $4, $5, NULL, $6, $7)",
            &[
                &name,
                &(seq as i64),
                &i16::from(kind),
                &t.at_ms,
                &(len as i32),
                &payload,
                &crc,
            ],
        )?;
    }
    Ok(bytes)
}

/// The time of the last event outside the erased ranges `erased` (sorted), 0 when none: the
/// floor of the next event's time, as the file store computes it (docs/design.md#l10-event-times).
fn last_event_ms<C: GenericClient>(
    q: &mut Q<'_, C>,
    name: &str,
    last_seq: u64,
    erased: &[(u64, u64)],
) -> Result<i64> {
    let mut seq = last_seq;
    while let Some(&(a, _)) = erased.iter().rev().find(|(a, b)| *a <= seq && seq <= *b) {
        seq = a - 1;
    }
    if seq == 0 {
        return Ok(0);
    }
    Ok(q.query(
        "SELECT ts_ms FROM {s}.events WHERE conversation = $1 AND seq = $2",
        &[&name, &(seq as i64)],
    )?
    .first()
    .map_or(0, |r| r.get(0)))
}

/// One encoded event row of a commit.
struct Row {
    seq: u64,
    kind: EventKind,
    payload: Vec<u8>,
    len: u32,
    artifact: Option<String>,
}

/// A stored commit's content digest and its first and last seq.
type StoredCommit = (Vec<u8>, (u64, u64));

impl PgLedger {
    /// Opens `name`: loads its index. `Ok(None)` when it does not exist.
    pub(crate) fn open(
        db: Arc<Db>,
        name: &str,
        caps: Caps,
        sync: bool,
    ) -> Result<Option<PgLedger>> {
        let mut ledger = PgLedger {
            db,
            caps,
            sync,
            name: name.to_string(),
            index: Index::default(),
            cache: Mutex::default(),
        };
        Ok(ledger.refresh()?.then_some(ledger))
    }

    /// A handle on a conversation not created yet (its first commit creates it).
    pub(crate) fn new_empty(db: Arc<Db>, name: &str, caps: Caps, sync: bool) -> PgLedger {
        PgLedger {
            db,
            caps,
            sync,
            name: name.to_string(),
            index: Index::default(),
            cache: Mutex::default(),
        }
    }

    /// Catches up with the database; false when the conversation does not exist (the
    /// index is then empty, with an empty ledger id).
    fn refresh(&mut self) -> Result<bool> {
        let db = self.db.clone();
        let mut conn = db.conn()?;
        let (mut tx, cache) = conn.begin(&db, TxMode::Read)?;
        let mut q = Q {
            c: &mut tx,
            cache,
            db: &db,
        };
        let found = match q.head(&self.name, false)? {
            Some(head) => {
                q.catch_up(&self.name, &mut self.index, &head)?;
                true
            }
            None => {
                self.index = Index::default();
                false
            }
        };
        tx.commit().map_err(|e| db.err("read failed", &e))?;
        Ok(found)
    }

    /// Encodes the commit's rows (large tool outputs offloaded), checking the record cap.
    fn encode(&self, commit: &NewCommit, first_seq: u64) -> Result<(Vec<Row>, Vec<Vec<u8>>)> {
        let meta = rules::commit_meta_len(commit);
        let n = commit.events.len();
        let mut rows = Vec::with_capacity(n);
        let mut artifacts = Vec::new();
        for (i, body) in commit.events.iter().enumerate() {
            let (body, stored) = rules::offload(i + 1, body, self.caps.artifact_threshold)?;
            artifacts.extend(stored);
            let payload = serde_json::to_vec(&body).map_err(|e| Error::InvalidCommit {
                reason: format!("event {} cannot be encoded: {e}", i + 1),
            })?;
            let extra = if i + 1 == n { meta } else { 0 };
            let len = rules::check_record(&self.caps, payload.len() + extra)?;
            let artifact = match &body {
                EventBody::ToolResult {
                    artifact: Some(r), ..
                } => Some(r.name.clone()),
                _ => None,
            };
            rows.push(Row {
                seq: first_seq + i as u64,
                kind: body.kind(),
                payload,
                len: len as u32,
                artifact,
            });
        }
        Ok((rows, artifacts))
    }

    /// In a write transaction (begun with its durability): creates the conversation's row if
    /// missing, locks it (writers on every replica queue here) and returns the index caught
    /// up with what others committed.
    fn lock_for_write<C: GenericClient>(&self, q: &mut Q<'_, C>) -> Result<Index> {
        q.exec(
            "INSERT INTO {s}.conversations (name, ledger_id, created_ms) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO NOTHING",
            &[&self.name, &rules::new_ledger_id(), &rules::now_ms()],
        )?;
        let head = q
            .head(&self.name, true)?
            .ok_or_else(|| self.db.io("conversation row vanished".into()))?;
        let mut index = self.index.clone();
        q.catch_up(&self.name, &mut index, &head)?;
        Ok(index)
    }

    fn commit_tx(&mut self, commit: &NewCommit) -> Result<CommitReceipt> {
        let key = rules::idempotency_key(commit)?;
        let db = self.db.clone();
        let mut conn = db.conn()?;
        let (mut tx, cache) = conn.begin(&db, TxMode::Write { sync: self.sync })?;
        let mut q = Q {
            c: &mut tx,
            cache,
            db: &db,
        };
        let mut index = self.lock_for_write(&mut q)?;
        if let Some((id_hash, digest)) = &key
            && let Some((stored, seqs)) = self.stored_commit(&mut q, id_hash)?
        {
            let lost = self.lost_range(&mut q, seqs)?;
            drop(tx);
            self.index = index;
            let id = commit.id.as_deref().unwrap_or_default();
            if let Some((from, to)) = lost {
                return Err(Error::Lost {
                    id: id.to_string(),
                    from,
                    to,
                });
            }
            return rules::replay(id, digest, &stored, seqs);
        }
        rules::check_after(commit, index.last_seq())?;
        let next = index.last_seq() + 1;
        let rows = self.checked_rows(&mut q, &index, commit, next)?;
        let stamps =
            rules::resolve_times(rows.len(), &commit.times, index.last_ts_ms, rules::now_ms())?;
        self.insert_events(&mut q, &rows, &stamps)?;
        let last = next + rows.len() as u64 - 1;
        if let Some((id_hash, digest)) = &key {
            q.exec(
                "INSERT INTO {s}.commits (conversation, id_hash, digest, first_seq, last_seq)
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &self.name,
                    &id_hash.as_slice(),
                    &digest.as_slice(),
                    &(next as i64),
                    &(last as i64),
                ],
            )?;
        }
        let bytes = index.bytes + rows.iter().map(|r| u64::from(r.len)).sum::<u64>();
        let ts = stamps.last().copied().unwrap_or(index.last_ts_ms);
        q.exec(
            "UPDATE {s}.conversations SET last_seq = $2, bytes = $3, last_ts_ms = $4 WHERE name = $1",
            &[&self.name, &(last as i64), &(bytes as i64), &ts],
        )?;
        tx.commit().map_err(|e| {
            db.err(
                "commit failed (it may or may not have been applied; retry with the same id)",
                &e,
            )
        })?;
        for r in &rows {
            index.push(r.seq, r.kind, r.len);
        }
        index.bytes = bytes;
        index.last_ts_ms = ts;
        self.index = index;
        Ok(CommitReceipt {
            first_seq: next,
            last_seq: last,
            replayed: false,
        })
    }

    /// The digest and seqs of the commit stored under `id_hash`, if any.
    fn stored_commit<C: GenericClient>(
        &self,
        q: &mut Q<'_, C>,
        id_hash: &[u8; 32],
    ) -> Result<Option<StoredCommit>> {
        let rows = q.query(
            "SELECT digest, first_seq, last_seq FROM {s}.commits
             WHERE conversation = $1 AND id_hash = $2",
            &[&self.name, &id_hash.as_slice()],
        )?;
        Ok(rows.first().map(|row| {
            let seqs = (row.get::<_, i64>(1) as u64, row.get::<_, i64>(2) as u64);
            (row.get::<_, Vec<u8>>(0), seqs)
        }))
    }

    /// The lost range of the first seq of `seqs` that a repair gave up (a loss record's or
    /// its placeholder's), if any: a commit that held it answers [`Error::Lost`] whatever its
    /// content (docs/design.md#l11-repair).
    fn lost_range<C: GenericClient>(
        &self,
        q: &mut Q<'_, C>,
        seqs: (u64, u64),
    ) -> Result<Option<(u64, u64)>> {
        let rows = q.query(
            "SELECT seq, kind, ts_ms, payload, crc FROM {s}.events
             WHERE conversation = $1 AND seq >= $2 AND seq <= $3 AND kind = $4 ORDER BY seq",
            &[
                &self.name,
                &(seqs.0 as i64),
                &(seqs.1 as i64),
                &i16::from(EventKind::System.as_byte()),
            ],
        )?;
        for row in &rows {
            let seq = row.get::<_, i64>(0) as u64;
            let crc = row.get::<_, i32>(4) as u32;
            let e = decode(
                q.db,
                &self.name,
                seq,
                row.get(1),
                row.get(2),
                row.get(3),
                crc,
            )?;
            if let Some(range) = rules::lost_range(seq, &e.body) {
                return Ok(Some(range));
            }
        }
        Ok(None)
    }

    /// The rows of the open turn (from its user event to the last seq; the last row alone
    /// when there is no user event), each there and checked against its checksum: the check
    /// a writer makes before every append, so it never writes onto damage it reads. A row
    /// missing or damaged before the open turn is found by opening the conversation afresh
    /// (missing rows: every open reads every seq) or by `verify` (checksums), not here
    /// (docs/reliability.md).
    fn checked_tail<C: GenericClient>(
        &self,
        q: &mut Q<'_, C>,
        index: &Index,
    ) -> Result<Vec<Event>> {
        let last = index.last_seq();
        if last == 0 {
            return Ok(Vec::new());
        }
        let start = index.user_seqs.last().copied().unwrap_or(last);
        let tail = q.raw_events(&self.name, start..=last)?;
        let mut expect = start;
        for e in &tail {
            if e.seq != expect {
                break;
            }
            expect += 1;
        }
        if expect <= last {
            return Err(corrupt(q.db, &self.name, expect, MISSING.into()));
        }
        Ok(tail)
    }

    /// Checks `commit` against the conversation as `index` has it (the ledger's rules: the
    /// turn, the caps, its artifact references), stores its large outputs as artifacts and
    /// returns its rows, numbered from `next`.
    fn checked_rows<C: GenericClient>(
        &self,
        q: &mut Q<'_, C>,
        index: &Index,
        commit: &NewCommit,
        next: u64,
    ) -> Result<Vec<Row>> {
        let tail = self.checked_tail(q, index)?;
        let open_turn = if index.user_seqs.is_empty() {
            Vec::new()
        } else {
            tail
        };
        let kind_of = |seq: u64| index.kinds.get((seq as usize).wrapping_sub(1)).copied();
        rules::check_commit(commit, &open_turn, next, &kind_of)?;
        self.check_artifact_refs(q, commit)?;
        let (rows, artifacts) = self.encode(commit, next)?;
        let records: u64 = rows.iter().map(|r| u64::from(r.len)).sum();
        let artifact_bytes: u64 = artifacts.iter().map(|a| a.len() as u64).sum();
        rules::check_commit_size(&self.caps, records, artifact_bytes, index.bytes)?;
        for a in &artifacts {
            let name = ctxlog_ledger::artifact_name(a);
            q.exec(
                "INSERT INTO {s}.artifacts (conversation, name, content) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING",
                &[&self.name, &name, a],
            )?;
        }
        Ok(rows)
    }

    /// Inserts `rows` with their times `stamps`, each with its checksum.
    fn insert_events<C: GenericClient>(
        &self,
        q: &mut Q<'_, C>,
        rows: &[Row],
        stamps: &[i64],
    ) -> Result<()> {
        for (r, ts) in rows.iter().zip(stamps) {
            let kind = r.kind.as_byte();
            let crc = row_crc(r.seq, kind, *ts, &r.payload) as i32;
            q.exec(
                "INSERT INTO {s}.events
                 (conversation, seq, kind, ts_ms, record_len, artifact, payload, crc)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    &self.name,
                    &(r.seq as i64),
                    &i16::from(kind),
                    ts,
                    &(r.len as i32),
                    &r.artifact,
                    &r.payload,
                    &crc,
                ],
            )?;
        }
        Ok(())
    }

    /// A caller-supplied artifact reference must name an artifact of this conversation with
    /// that length and content.
    fn check_artifact_refs<C: GenericClient>(
        &self,
        q: &mut Q<'_, C>,
        commit: &NewCommit,
    ) -> Result<()> {
        for r in commit.events.iter().flat_map(EventBody::artifact_refs) {
            rules::check_artifact_ref(r, &q.stored_artifact(&self.name, r)?)?;
        }
        Ok(())
    }

    /// The content of artifact `r`, checked against its name.
    fn fetch_artifact<C: GenericClient>(
        &self,
        q: &mut Q<'_, C>,
        r: &ArtifactRef,
    ) -> Result<Vec<u8>> {
        q.artifact(&self.name, r)
    }

    /// Runs `f` on a plain connection (reads outside a transaction).
    fn with_q<T>(&self, f: impl FnOnce(&mut Q<'_, postgres::Client>) -> Result<T>) -> Result<T> {
        let mut conn = self.db.conn()?;
        let (client, cache) = conn.parts();
        let mut q = Q {
            c: client,
            cache,
            db: &self.db,
        };
        f(&mut q)
    }

    /// The tombstones in the ledger: `(from, to)` of each erased range.
    fn leads<C: GenericClient>(&self, q: &mut Q<'_, C>, last_seq: u64) -> Result<Vec<(u64, u64)>> {
        let rows = q.query(
            "SELECT seq, kind, ts_ms, payload, crc FROM {s}.events
             WHERE conversation = $1 AND kind = 6 AND seq <= $2 ORDER BY seq",
            &[&self.name, &(last_seq as i64)],
        )?;
        let mut out = Vec::new();
        for row in &rows {
            let seq = row.get::<_, i64>(0) as u64;
            let e = decode(
                &self.db,
                &self.name,
                seq,
                row.get(1),
                row.get(2),
                row.get(3),
                row.get::<_, i32>(4) as u32,
            )?;
            out.extend(rules::tombstone_range(seq, &e.body));
        }
        Ok(out)
    }

    fn already_erased(
        &self,
        leads: &[(u64, u64)],
        index: &Index,
        range: &RangeInclusive<u64>,
        how: Reach,
    ) -> Option<(u64, u64)> {
        let (from, to) =
            rules::widen_erasure(range, how, &index.user_seqs, leads, index.last_seq());
        let covered: u64 = leads
            .iter()
            .filter(|(a, b)| from <= *a && *b <= to)
            .map(|(a, b)| b - a + 1)
            .sum();
        (covered == to - from + 1).then_some((from, to))
    }

    /// Deletes the events of each run and writes its tombstone and placeholders in their
    /// place (the ids of commits inside a run are forgotten); returns the record bytes
    /// deleted, the bytes written and the events erased.
    fn replace_runs<C: GenericClient>(
        &self,
        q: &mut Q<'_, C>,
        runs: &[(u64, u64)],
        reason: &str,
    ) -> Result<(i64, u64, u64)> {
        let at_ms = rules::now_ms();
        let reason = rules::erase_reason(reason);
        let (mut old_bytes, mut new_bytes, mut events) = (0i64, 0u64, 0u64);
        for &(a, b) in runs {
            let (first, last) = (a as i64, b as i64);
            old_bytes += q
                .query(
                    "SELECT coalesce(sum(record_len), 0)::bigint FROM {s}.events
                     WHERE conversation = $1 AND seq >= $2 AND seq <= $3",
                    &[&self.name, &first, &last],
                )?
                .first()
                .map_or(0, |r| r.get::<_, i64>(0));
            q.exec(
                "DELETE FROM {s}.events WHERE conversation = $1 AND seq >= $2 AND seq <= $3",
                &[&self.name, &first, &last],
            )?;
            let run = rules::Tombstone {
                from: a,
                to: b,
                at_ms,
                reason: reason.to_string(),
                loss_offset: None,
            };
            new_bytes += insert_run(q, &self.name, &run)?;
            q.exec(
                "DELETE FROM {s}.commits WHERE conversation = $1 AND first_seq <= $3 AND last_seq >= $2",
                &[&self.name, &first, &last],
            )?;
            events += b - a + 1;
        }
        Ok((old_bytes, new_bytes, events))
    }

    fn erase_tx(
        &mut self,
        range: RangeInclusive<u64>,
        how: Reach,
        reason: &str,
        before_replace: &mut dyn FnMut() -> Result<()>,
    ) -> Result<ErasureReport> {
        let db = self.db.clone();
        let mut conn = db.conn()?;
        let (mut tx, cache) = conn.begin(&db, TxMode::Write { sync: true })?;
        let mut q = Q {
            c: &mut tx,
            cache,
            db: &db,
        };
        let head = q.head(&self.name, true)?.ok_or_else(|| {
            db.io("the conversation was erased whole meanwhile (by another replica); nothing was erased".into())
        })?;
        let mut index = self.index.clone();
        q.catch_up(&self.name, &mut index, &head)?;
        rules::check_erase(&range, index.last_seq(), reason)?;
        rules::check_reach(&range, how, index.last_seq())?;
        let leads = self.leads(&mut q, index.last_seq())?;
        let requested = (*range.start(), *range.end());
        if let Some((from, to)) = self.already_erased(&leads, &index, &range, how) {
            drop(tx);
            self.index = index;
            return Ok(ErasureReport {
                from,
                to,
                requested,
                events: 0,
                artifacts_deleted: 0,
                recovered_deleted: 0,
                ledger_id: self.index.ledger_id.clone(),
                already_erased: true,
            });
        }
        let (from, to) =
            rules::widen_erasure(&range, how, &index.user_seqs, &leads, index.last_seq());
        // Earlier tombstones inside the range stay as written
        // (docs/design.md#e6-listing-and-tombstones): only the live runs between them are deleted
        // and replaced by a tombstone each.
        let runs = rules::live_runs((from, to), &leads);
        let (old_bytes, new_bytes, events) = self.replace_runs(&mut q, &runs, reason)?;
        // What a repair saved aside of the erased seqs goes too, and every artifact it saved
        // (which lost row referenced one cannot be told): erased text stays nowhere.
        let recovered_deleted = q.exec(
            "DELETE FROM {s}.recovered WHERE conversation = $1
             AND (seq IS NULL OR (seq >= $2 AND seq <= $3))",
            &[&self.name, &(from as i64), &(to as i64)],
        )?;
        let mut erased = leads.clone();
        erased.extend(&runs);
        erased.sort_unstable();
        let last_ts_ms = last_event_ms(&mut q, &self.name, index.last_seq(), &erased)?;
        let artifacts_deleted = q.exec(
            "DELETE FROM {s}.artifacts a WHERE a.conversation = $1 AND NOT EXISTS
             (SELECT 1 FROM {s}.events e WHERE e.conversation = $1 AND (e.artifact = a.name
              OR position(convert_to(a.name, 'UTF8') in e.payload) > 0))",
            &[&self.name],
        )?;
        let ledger_id = rules::new_ledger_id();
        let bytes = (index.bytes as i64 - old_bytes + new_bytes as i64).max(0);
        q.exec(
            "UPDATE {s}.conversations SET ledger_id = $2, bytes = $3, last_ts_ms = $4
             WHERE name = $1",
            &[&self.name, &ledger_id, &bytes, &last_ts_ms],
        )?;
        before_replace()?;
        tx.commit().map_err(|e| db.err("erase failed", &e))?;
        drop(conn);
        self.index = Index::default();
        self.refresh()?;
        db.scrub()?;
        Ok(ErasureReport {
            from,
            to,
            requested,
            events,
            artifacts_deleted,
            recovered_deleted,
            ledger_id,
            already_erased: false,
        })
    }

    /// Appends an erased range decided elsewhere (an import), as the file store's
    /// [`ctxlog_ledger::Ledger::append_tombstone`] does: the same checks (shared rules), the
    /// same rows as an erasure's run, `replayed` when it already stands there. The
    /// conversation's last event time is unchanged (a tombstone's time is the erasure's).
    fn append_tombstone_tx(&mut self, t: &rules::Tombstone) -> Result<CommitReceipt> {
        let db = self.db.clone();
        let mut conn = db.conn()?;
        let (mut tx, cache) = conn.begin(&db, TxMode::Write { sync: self.sync })?;
        let mut q = Q {
            c: &mut tx,
            cache,
            db: &db,
        };
        let mut index = self.lock_for_write(&mut q)?;
        let name = self.name.clone();
        let mut stored =
            |seq: u64| -> Result<Option<Event>> { Ok(q.raw_events(&name, seq..=seq)?.pop()) };
        let replayed = rules::check_tombstone(t, index.last_seq(), &mut stored)?;
        let receipt = CommitReceipt {
            first_seq: t.from,
            last_seq: t.to,
            replayed,
        };
        if replayed {
            drop(tx);
            self.index = index;
            return Ok(receipt);
        }
        let records: u64 = t
            .bodies()
            .map(|body| serde_json::to_vec(&body).map_or(0, |p| p.len()))
            .map(|len| rules::check_record(&self.caps, len))
            .sum::<Result<u64>>()?;
        rules::check_commit_size(&self.caps, records, 0, index.bytes)?;
        insert_run(&mut q, &self.name, t)?;
        let bytes = index.bytes + records;
        q.exec(
            "UPDATE {s}.conversations SET last_seq = $2, bytes = $3 WHERE name = $1",
            &[&self.name, &(t.to as i64), &(bytes as i64)],
        )?;
        tx.commit().map_err(|e| db.err("commit failed", &e))?;
        for seq in t.from..=t.to {
            let len = self.record_len_of(t, seq);
            index.push(seq, EventKind::System, len);
        }
        index.bytes = bytes;
        self.index = index;
        Ok(receipt)
    }

    /// The stored size of seq `seq` of the run `t`.
    fn record_len_of(&self, t: &rules::Tombstone, seq: u64) -> u32 {
        let body = rules::tombstone_body(seq, t.from, t.to, t.at_ms, &t.reason);
        let len = serde_json::to_vec(&body).map_or(0, |p| p.len());
        (rules::RECORD_HEADER_LEN + len) as u32
    }

    /// Every referenced artifact and every event checked (for `verify`).
    pub(crate) fn verify(&mut self) -> Result<ctxlog_ledger::VerifyReport> {
        self.refresh()?;
        let mut report = ctxlog_ledger::VerifyReport {
            ledger_id: self.index.ledger_id.clone(),
            last_seq: self.index.last_seq(),
            bytes: self.index.bytes,
            sidecar_ok: true,
            ..Default::default()
        };
        let mut coverage = rules::CoverageCheck::default();
        let mut referenced = BTreeMap::new();
        let last = self.index.last_seq();
        let mut seq = 1;
        while seq <= last {
            let end = (seq + 999).min(last);
            let events = self.with_q(|q| q.raw_events(&self.name, seq..=end))?;
            for e in &events {
                coverage
                    .check(e.seq, &e.body)
                    .map_err(|why| corrupt(&self.db, &self.name, e.seq, why))?;
                match &e.body {
                    EventBody::User { .. } => report.turns += 1,
                    EventBody::Note { .. } => report.notes += 1,
                    _ => {}
                }
                for r in e.body.artifact_refs() {
                    referenced.insert(r.name.clone(), r.clone());
                }
            }
            report.events += events.len() as u64;
            seq = end + 1;
        }
        coverage
            .finish()
            .map_err(|why| corrupt(&self.db, &self.name, last, why))?;
        report.erased = coverage.erased();
        report.lost = coverage.lost();
        report.artifacts = referenced.len() as u64;
        for r in referenced.values() {
            if let Err(e) = self.with_q(|q| self.fetch_artifact(q, r)) {
                report.artifact_problems.push(e.to_string());
            }
        }
        report.commits_with_id = self.with_q(|q| {
            Ok(q.query(
                "SELECT count(*) FROM {s}.commits WHERE conversation = $1",
                &[&self.name],
            )?
            .first()
            .map_or(0, |r| r.get::<_, i64>(0) as u64))
        })?;
        Ok(report)
    }
}

impl PgLedger {
    /// Every row of the conversation whose checksum holds, in seq order, with the damaged
    /// ranges between them: a row whose checksum fails, and seqs missing (rows deleted), are
    /// damaged ranges (their `offset` is the seq, as in [`Error::Corrupt`]). Writes nothing;
    /// `None` when the conversation does not exist. Works on a handle whose index was never
    /// loaded ([`PgLedger::new_empty`]).
    pub(crate) fn salvage(
        &mut self,
        visit: &mut dyn FnMut(ctxlog_ledger::Salvaged) -> Result<()>,
    ) -> Result<Option<ctxlog_ledger::SalvageReport>> {
        // The row itself, not the index: loading the index fails on a missing seq.
        let Some(head) = self.with_q(|q| q.head(&self.name, false))? else {
            return Ok(None);
        };
        let mut report = ctxlog_ledger::SalvageReport {
            ledger_id: Some(head.ledger_id),
            ..Default::default()
        };
        let last = head.last_seq;
        let mut next = 1;
        let mut from = 1;
        while from <= last {
            let to = (from + 999).min(last);
            let rows = self.with_q(|q| q.salvage_rows(&self.name, from..=to))?;
            for (seq, decoded) in rows {
                if seq > next {
                    let gap = salvage_gap(next, seq - 1, MISSING.into());
                    report.damaged.push(gap.clone());
                    visit(ctxlog_ledger::Salvaged::Damaged(gap))?;
                }
                next = seq + 1;
                match decoded {
                    Ok(event) => self.salvage_event(event, &mut report, visit)?,
                    Err(e) => {
                        let range = salvage_gap(seq, seq, e.without_path());
                        report.damaged.push(range.clone());
                        visit(ctxlog_ledger::Salvaged::Damaged(range))?;
                    }
                }
            }
            from = to + 1;
        }
        if next <= last {
            let gap = salvage_gap(next, last, MISSING.into());
            report.damaged.push(gap.clone());
            visit(ctxlog_ledger::Salvaged::Damaged(gap))?;
        }
        Ok(Some(report))
    }

    fn salvage_event(
        &self,
        event: Event,
        report: &mut ctxlog_ledger::SalvageReport,
        visit: &mut dyn FnMut(ctxlog_ledger::Salvaged) -> Result<()>,
    ) -> Result<()> {
        report.last_seq = event.seq;
        if rules::is_placeholder(event.seq, &event.body) {
            return Ok(());
        }
        report.events += 1;
        let artifact = match &event.body {
            EventBody::ToolResult {
                artifact: Some(r), ..
            } => Some(
                self.with_q(|q| self.fetch_artifact(q, r))
                    .map_err(|e| e.without_path()),
            ),
            _ => None,
        };
        visit(ctxlog_ledger::Salvaged::Event { event, artifact })
    }
}

/// Why seqs with no row up to the conversation's last seq are damaged (rows deleted by hand).
pub(crate) const MISSING: &str = "rows missing (deleted)";

/// The damaged range of rows `from..=to` (rows have no byte offset: the seq stands for it).
fn salvage_gap(from: u64, to: u64, reason: String) -> ctxlog_ledger::DamagedRange {
    ctxlog_ledger::DamagedRange {
        offset: from,
        bytes: 0,
        seqs: Some((from, to)),
        reason,
    }
}

impl LedgerRead for PgLedger {
    fn ledger_id(&self) -> &str {
        &self.index.ledger_id
    }
    fn last_seq(&self) -> u64 {
        self.index.last_seq()
    }
    fn kind(&self, seq: u64) -> Option<EventKind> {
        self.index
            .kinds
            .get((seq as usize).wrapping_sub(1))
            .copied()
    }
    fn user_seqs(&self) -> &[u64] {
        &self.index.user_seqs
    }
    fn note_seqs(&self) -> &[u64] {
        &self.index.note_seqs
    }
    fn record_len(&self, seq: u64) -> Option<u64> {
        self.index
            .lens
            .get((seq as usize).wrapping_sub(1))
            .map(|&l| u64::from(l))
    }
    fn record_offset(&self, seq: u64) -> Option<u64> {
        self.index.offset_of(seq)
    }
    fn events(&self, range: RangeInclusive<u64>) -> Result<Vec<Event>> {
        let (from, to) = (*range.start(), (*range.end()).min(self.last_seq()));
        if from > to {
            return Ok(Vec::new());
        }
        if from == 0 {
            return Err(Error::NoSuchSeq {
                seq: 0,
                last_seq: self.last_seq(),
            });
        }
        let ledger_id = &self.index.ledger_id;
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let events = match cache.get(ledger_id, from, to) {
            Some(events) => events,
            None => {
                let events = self.with_q(|q| q.raw_events(&self.name, from..=to))?;
                cache.put(ledger_id, &self.index, &events);
                events
            }
        };
        Ok(events
            .into_iter()
            .filter(|e| !rules::is_placeholder(e.seq, &e.body))
            .collect())
    }
    fn artifact(&self, r: &ArtifactRef) -> Result<Vec<u8>> {
        self.with_q(|q| self.fetch_artifact(q, r))
    }
}

impl LedgerView for PgLedger {
    fn catch_up(&mut self) -> Result<()> {
        self.refresh().map(|_| ())
    }
    fn exists(&self) -> bool {
        !self.index.ledger_id.is_empty()
    }
}

impl LedgerWriter for PgLedger {
    fn commit(&mut self, commit: &NewCommit) -> Result<CommitReceipt> {
        self.commit_tx(commit)
    }
    fn commit_seqs(&mut self, id: &str) -> Result<Option<(u64, u64)>> {
        let id_hash = rules::commit_id_hash(id);
        self.with_q(|q| {
            Ok(q.query(
                "SELECT first_seq, last_seq FROM {s}.commits WHERE conversation = $1 AND id_hash = $2",
                &[&self.name, &id_hash.as_slice()],
            )?
            .first()
            .map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, i64>(1) as u64)))
        })
    }
    fn check_erase(&self, range: &RangeInclusive<u64>, how: Reach, reason: &str) -> Result<()> {
        rules::check_erase(range, self.last_seq(), reason)?;
        rules::check_reach(range, how, self.last_seq())
    }
    fn is_erased(&self, range: &RangeInclusive<u64>, how: Reach) -> Result<bool> {
        let leads = self.with_q(|q| self.leads(q, self.last_seq()))?;
        Ok(self
            .already_erased(&leads, &self.index, range, how)
            .is_some())
    }
    fn erase(
        &mut self,
        range: RangeInclusive<u64>,
        how: Reach,
        reason: &str,
        before_replace: &mut dyn FnMut() -> Result<()>,
    ) -> Result<ErasureReport> {
        self.erase_tx(range, how, reason, before_replace)
    }
    fn append_tombstone(&mut self, t: &rules::Tombstone) -> Result<CommitReceipt> {
        self.append_tombstone_tx(t)
    }
    fn is_poisoned(&self) -> bool {
        false
    }
}

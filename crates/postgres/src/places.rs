//! The places index in the schema ([`ctxlog_backend::PlaceMark`] has the rules): the tables
//! `places` (digest, conversation, idx; `id` orders them newest written first) and
//! `place_marks` (conversation, generation, last_seq, count, stamp), shared by every
//! replica. Both reference the conversation's row, so erasing it whole deletes them in the
//! same transaction; a conversation's stamp is its `last_seq`.

use ctxlog_backend::{PlaceDigest, PlaceMark, PlacesUpdate};
use ctxlog_ledger::Result;

use super::db::{Db, TxMode};
use super::ledger::Q;

const MARK: &str = "SELECT generation, last_seq, count, stamp FROM {s}.place_marks
                    WHERE conversation = $1";

fn read_mark(row: &postgres::Row) -> PlaceMark {
    PlaceMark {
        generation: row.get(0),
        last_seq: u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
        count: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
        stamp: row.get(3),
    }
}

fn to_sql(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Runs `f` on a plain connection (no transaction).
fn plain<T>(db: &Db, f: impl FnOnce(&mut Q<'_, postgres::Client>) -> Result<T>) -> Result<T> {
    let mut conn = db.conn()?;
    let (c, cache) = conn.parts();
    f(&mut Q { c, cache, db })
}

pub(crate) fn stamp(db: &Db, name: &str) -> Result<i64> {
    plain(db, |q| {
        let rows = q.query(
            "SELECT last_seq FROM {s}.conversations WHERE name = $1",
            &[&name],
        )?;
        Ok(rows.first().map_or(0, |r| r.get(0)))
    })
}

pub(crate) fn mark(db: &Db, name: &str) -> Result<Option<PlaceMark>> {
    plain(db, |q| Ok(q.query(MARK, &[&name])?.first().map(read_mark)))
}

/// Moves the mark on only if it is still `expected` (the update matches it whole, or the
/// insert finds none), then adds the places, in one transaction (not synchronously
/// committed: the index is disposable).
pub(crate) fn put(
    db: &Db,
    name: &str,
    expected: Option<PlaceMark>,
    update: PlacesUpdate<'_>,
) -> Result<bool> {
    let mut conn = db.conn()?;
    let (mut tx, cache) = conn.begin(db, TxMode::Write { sync: false })?;
    let mut q = Q {
        c: &mut tx,
        cache,
        db,
    };
    let base = expected.unwrap_or_default();
    let count = to_sql(base.count + update.digests.len() as u64);
    let last_seq = to_sql(update.last_seq);
    let moved = match expected {
        Some(m) => q.exec(
            "UPDATE {s}.place_marks SET last_seq = $2, count = $3, stamp = $4
             WHERE conversation = $1 AND generation = $5 AND last_seq = $6 AND count = $7
             AND stamp = $8",
            &[
                &name,
                &last_seq,
                &count,
                &update.stamp,
                &m.generation,
                &to_sql(m.last_seq),
                &to_sql(m.count),
                &m.stamp,
            ],
        )?,
        None => q.exec(
            "INSERT INTO {s}.place_marks (conversation, generation, last_seq, count, stamp)
             SELECT $1, 0, $2, $3, $4 WHERE EXISTS
               (SELECT 1 FROM {s}.conversations WHERE name = $1)
             ON CONFLICT (conversation) DO NOTHING",
            &[&name, &last_seq, &count, &update.stamp],
        )?,
    };
    if moved != 1 {
        return Ok(false);
    }
    let digests: Vec<Vec<u8>> = update.digests.iter().map(|d| d.to_vec()).collect();
    q.exec(
        "INSERT INTO {s}.places (digest, conversation, idx)
         SELECT d, $2, $3 + o - 1 FROM unnest($1::bytea[]) WITH ORDINALITY AS t(d, o)
         ORDER BY o
         ON CONFLICT (digest, conversation, idx) DO NOTHING",
        &[&digests, &name, &to_sql(base.count)],
    )?;
    tx.commit()
        .map_err(|e| db.err("cannot write the places index", &e))?;
    Ok(true)
}

/// Deletes the places and moves the mark to a new generation, in one synchronously
/// committed transaction; then vacuums both tables when rows went, so no dead row version
/// keeps a digest in the data files.
pub(crate) fn forget(db: &Db, name: &str) -> Result<()> {
    let deleted = {
        let mut conn = db.conn()?;
        let (mut tx, cache) = conn.begin(db, TxMode::Write { sync: true })?;
        let mut q = Q {
            c: &mut tx,
            cache,
            db,
        };
        let deleted = q.exec("DELETE FROM {s}.places WHERE conversation = $1", &[&name])?;
        q.exec(
            "INSERT INTO {s}.place_marks (conversation, generation, last_seq, count, stamp)
             SELECT $1, 1, 0, 0, -1 WHERE EXISTS
               (SELECT 1 FROM {s}.conversations WHERE name = $1)
             ON CONFLICT (conversation) DO UPDATE SET
               generation = {s}.place_marks.generation + 1, last_seq = 0, count = 0, stamp = -1",
            &[&name],
        )?;
        tx.commit()
            .map_err(|e| db.err("cannot delete from the places index", &e))?;
        deleted
    };
    if deleted > 0 {
        let mut conn = db.conn()?;
        for table in ["places", "place_marks"] {
            conn.client
                .batch_execute(&format!("VACUUM (FULL) {}.{table}", db.schema))
                .map_err(|e| db.err("places deleted, but vacuuming failed", &e))?;
        }
    }
    Ok(())
}

pub(crate) fn places_of(db: &Db, digest: &PlaceDigest, limit: usize) -> Result<Vec<(String, u64)>> {
    plain(db, |q| {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = q.query(
            "SELECT conversation, idx FROM {s}.places WHERE digest = $1
             ORDER BY id DESC LIMIT $2",
            &[&&digest[..], &limit],
        )?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), u64::try_from(r.get::<_, i64>(1)).unwrap_or(0)))
            .collect())
    })
}

/// One query: the conversations whose last seq is not their mark's stamp.
pub(crate) fn behind(db: &Db) -> Result<Vec<String>> {
    plain(db, |q| {
        let rows = q.query(
            "SELECT c.name FROM {s}.conversations c
             LEFT JOIN {s}.place_marks m ON m.conversation = c.name
             WHERE c.last_seq > 0 AND m.stamp IS DISTINCT FROM c.last_seq",
            &[],
        )?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    })
}

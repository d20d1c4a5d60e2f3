//! The semantic leg's storage and scan: one unit-length `f32` vector per page in the `vectors`
//! table (page id → little-endian blob), compared with a query's vector by brute force.
//! Computing vectors needs the model (feature `semantic`, `embed`); storing, scanning and
//! fusing them does not, so this module is always built and costs nothing when no vector is
//! stored.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::{Error, Result};

/// Dimensions of a vector (all-MiniLM-L6-v2's).
pub const DIMENSIONS: usize = 384;

/// The meta row naming the model the stored vectors were computed with.
#[cfg_attr(not(feature = "semantic"), allow(dead_code))] // written only with the model
pub(crate) const MODEL_KEY: &str = "embedder";

/// A vector as stored: `DIMENSIONS` little-endian `f32`s.
#[cfg_attr(not(feature = "semantic"), allow(dead_code))] // written only with the model
pub(crate) fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The dot product of `v` with the vector stored in `blob`; `None` when the blob is not one
/// of [`DIMENSIONS`] floats (a damaged row ranks nothing rather than misrank).
pub(crate) fn dot_blob(v: &[f32], blob: &[u8]) -> Option<f32> {
    if blob.len() != DIMENSIONS * 4 || v.len() != DIMENSIONS {
        return None;
    }
    let mut sum = 0.0f32;
    for (x, b) in v.iter().zip(blob.chunks_exact(4)) {
        sum += x * f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    sum.is_finite().then_some(sum)
}

/// The model fingerprint the stored vectors belong to (`None`: no vector was ever stored).
#[cfg_attr(not(feature = "semantic"), allow(dead_code))] // written only with the model
pub(crate) fn stored_model(conn: &Connection, path: &Path) -> Result<Option<String>> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [MODEL_KEY], |r| {
        r.get(0)
    })
    .optional()
    .map_err(|e| Error::sqlite(path, e))
}

/// The ids of the `n` pages whose vectors are closest to `query` (cosine: the vectors are of
/// unit length), best first, among pages of events before `before` whose kind passes
/// `kinds` (the filter string of a search) and that are at least `min_pages` pages long
/// (1: every event). One pass over the stored vectors: at conversation
/// scale (thousands of pages) a few milliseconds.
pub(crate) fn nearest(
    conn: &Connection,
    path: &Path,
    query: &[f32],
    before: i64,
    kinds: &str,
    min_pages: u64,
    n: usize,
) -> Result<Vec<(i64, f32)>> {
    let e = |err| Error::sqlite(path, err);
    let mut stmt = conn
        .prepare_cached(
            "SELECT v.id, v.vec FROM vectors v JOIN pages p ON p.id = v.id \
             WHERE p.seq < ?1 AND (?2 = '' OR instr(?2, ',' || p.kind || ',') > 0) \
             AND p.pages >= ?3",
        )
        .map_err(e)?;
    let min_pages = i64::try_from(min_pages).unwrap_or(i64::MAX);
    let mut rows = stmt
        .query(rusqlite::params![before, kinds, min_pages])
        .map_err(e)?;
    let mut scored = Vec::new();
    while let Some(row) = rows.next().map_err(e)? {
        let blob = row.get_ref(1).map_err(e)?.as_blob().unwrap_or_default();
        if let Some(s) = dot_blob(query, blob) {
            scored.push((row.get::<_, i64>(0).map_err(e)?, s));
        }
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    scored.truncate(n);
    Ok(scored)
}

/// Up to `n` pages that have no vector yet, oldest first: `(id, checksum, text)`. Vectors are
/// written in page order and removed only all together, so the pages without one are those
/// after the newest vector.
#[cfg_attr(not(feature = "semantic"), allow(dead_code))] // written only with the model
pub(crate) fn missing(conn: &Connection, path: &Path, n: usize) -> Result<Vec<(i64, i64, String)>> {
    let e = |err| Error::sqlite(path, err);
    let mut stmt = conn
        .prepare_cached(
            "SELECT p.id, p.checksum, f.body FROM pages p JOIN pages_fts f ON f.rowid = p.id \
             WHERE p.id > coalesce((SELECT max(id) FROM vectors), 0) ORDER BY p.id LIMIT ?1",
        )
        .map_err(e)?;
    let rows = stmt
        .query_map([i64::try_from(n).unwrap_or(i64::MAX)], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(e)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(e)
}

/// Stores the vectors of `pages` (`(id, checksum, vector)`) computed by model `model`, in one
/// write transaction. A page that is gone or was rewritten meanwhile (another handle cleared
/// and rebuilt the index: ids are reused) has another checksum, and its vector is dropped.
/// Vectors of another model are deleted first. Returns how many were stored.
#[cfg_attr(not(feature = "semantic"), allow(dead_code))] // written only with the model
pub(crate) fn store(
    conn: &Connection,
    path: &Path,
    model: &str,
    pages: &[(i64, i64, Vec<f32>)],
) -> Result<usize> {
    let e = |err| Error::sqlite(path, err);
    let tx =
        rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).map_err(e)?;
    forget_other_model(&tx, path, model)?;
    let mut stored = 0;
    {
        let mut insert = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO vectors(id, vec) SELECT ?1, ?2 \
                 WHERE EXISTS (SELECT 1 FROM pages WHERE id = ?1 AND checksum = ?3)",
            )
            .map_err(e)?;
        for (id, checksum, v) in pages {
            stored += insert
                .execute(rusqlite::params![id, to_blob(v), checksum])
                .map_err(e)?;
        }
    }
    tx.commit().map_err(e)?;
    Ok(stored)
}

/// Deletes the stored vectors when they were computed by a model other than `model`, and
/// records `model` (inside the caller's write transaction).
#[cfg_attr(not(feature = "semantic"), allow(dead_code))] // written only with the model
pub(crate) fn forget_other_model(conn: &Connection, path: &Path, model: &str) -> Result<()> {
    if stored_model(conn, path)?.as_deref() == Some(model) {
        return Ok(());
    }
    conn.execute("DELETE FROM vectors", [])
        .map_err(|e| Error::sqlite(path, e))?;
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
        [MODEL_KEY, model],
    )
    .map_err(|e| Error::sqlite(path, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(i: usize) -> Vec<f32> {
        let mut v = vec![0.0; DIMENSIONS];
        v[i] = 1.0;
        v
    }

    #[test]
    fn a_blob_round_trips_through_the_dot_product() {
        let mut v = vec![0.0f32; DIMENSIONS];
        v[3] = 0.6;
        v[7] = -0.8;
        let blob = to_blob(&v);
        assert_eq!(blob.len(), DIMENSIONS * 4);
        let self_dot = dot_blob(&v, &blob).unwrap_or_default();
        assert!((self_dot - 1.0).abs() < 1e-6, "{self_dot}");
        assert_eq!(dot_blob(&unit(0), &blob), Some(0.0));
        assert_eq!(dot_blob(&unit(7), &blob), Some(-0.8));
    }

    #[test]
    fn a_blob_of_another_length_scores_nothing() {
        assert_eq!(dot_blob(&unit(0), &[0u8; 12]), None);
        assert_eq!(dot_blob(&[1.0], &to_blob(&unit(0))), None);
        let mut nan = unit(0);
        nan[1] = f32::NAN;
        assert_eq!(dot_blob(&unit(1), &to_blob(&nan)), None);
    }
}

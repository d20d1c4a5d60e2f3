//! `verify`: reads everything, writes nothing, and names the first problem.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::event::{ArtifactRef, EventBody};
use crate::files::{io_err, open_file};
use crate::format::{RECORD_HEADER_LEN, RecordHeader, names};
use crate::scan::{self, Scan, ScanStart, Tail, Window};
use crate::storage::{DirStorage, OpenMode, Storage, StorageFile};
use crate::tombstone::Coverage;

/// What [`verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// The ledger id (hex).
    pub ledger_id: String,
    /// Events in complete commits.
    pub events: u64,
    /// Seq of the last event (0 when empty).
    pub last_seq: u64,
    /// Length of the committed log (header + complete commits).
    pub bytes: u64,
    /// Bytes after the last complete commit that the writer's `open` would cut.
    pub torn_tail_bytes: u64,
    /// Why those bytes are a torn tail.
    pub torn_tail_reason: Option<String>,
    /// Bytes past the last complete commit that a writer was still appending while verify
    /// ran (the log's length changed under it, or a writer held the lock): a commit in
    /// progress, neither torn nor checked. Verify checks the log up to what was committed
    /// when it started.
    pub in_progress_bytes: u64,
    /// Distinct artifacts referenced by events.
    pub artifacts: u64,
    /// Referenced artifacts that are missing, refused or do not match their hash.
    pub artifact_problems: Vec<String>,
    /// User events (turns).
    pub turns: u64,
    /// Note events.
    pub notes: u64,
    /// Commits that carried an id.
    pub commits_with_id: u64,
    /// Seqs covered by erasure tombstones (each tombstone and its placeholders).
    pub erased: u64,
    /// Seqs covered by loss records (each loss record and its placeholders): lost to damage
    /// and given up by `repair --accept-loss` (docs/design.md#l11-repair).
    pub lost: u64,
    /// True when every sidecar entry present agrees with the log.
    pub sidecar_ok: bool,
    /// Events the sidecar does not cover yet (the writer's next open adds them).
    pub sidecar_lag: u64,
    /// What is wrong with the sidecar, if anything (the writer's next open rebuilds it).
    pub sidecar_problem: Option<String>,
    /// Torn tails cut by earlier opens and kept for forensics, as paths relative to the
    /// conversation directory (`recovered/tail-<offset>-<ms>.bin`), sorted.
    pub recovered: Vec<String>,
    /// Files an interrupted operation left behind, which the next writer open finishes or
    /// removes (relative paths, sorted): `erase.pending` (an erasure whose deletions of
    /// artifacts and recovered tails may be unfinished: they may still hold erased text) and
    /// temporary files (`*.tmp`, `artifacts/.tmp-*`). Reported only while no writer holds the
    /// lock (a writer's own files are in use, not left over).
    pub leftovers: Vec<String>,
    /// Artifacts no event references (relative paths, sorted): left by a crash between an
    /// artifact's write and its commit, or by an interrupted erasure. They may hold text no
    /// event shows; the next erasure deletes them. Reported only while no writer holds the
    /// lock (a commit writes its artifacts before its records).
    pub orphaned_artifacts: Vec<String>,
}

impl VerifyReport {
    /// True when the log has no torn tail, every artifact checks out and the sidecar agrees.
    pub fn is_clean(&self) -> bool {
        self.torn_tail_bytes == 0
            && self.artifact_problems.is_empty()
            && self.sidecar_ok
            && self.leftovers.is_empty()
            && self.orphaned_artifacts.is_empty()
    }
}

/// Checks the conversation directory `dir`: every record's checksum, seq and body, every
/// referenced artifact, and the sidecar index. Writes nothing. Fails with
/// [`Error::Corrupt`] (offset and seq) where `open` would fail closed.
pub fn verify(dir: &Path) -> Result<VerifyReport> {
    verify_with(Arc::new(DirStorage::new(dir)))
}

/// [`verify`] over any storage backend.
pub fn verify_with(storage: Arc<dyn Storage>) -> Result<VerifyReport> {
    let st = storage.as_ref();
    let log_path = st.location().join(names::LOG);
    let log = open_file(st, names::LOG, OpenMode::Read)?;
    let file_len = log.len().map_err(io_err(st, names::LOG))?;
    let corrupt = |offset, seq, reason| Error::Corrupt {
        path: log_path.clone(),
        offset,
        seq,
        reason,
    };
    let header = crate::state::read_header(st, log.as_ref(), file_len)?;
    // As the writer's open does: what the sidecars prove was acknowledged, read before the
    // log's length, so that a commit acknowledged while this runs is within that length.
    let acked = crate::sidecar::acknowledged(st, Some(&header.ledger_id))
        .map_err(io_err(st, names::EVENT_INDEX))?;
    let witnessed = crate::sidecar::witnessed(st, Some(&header.ledger_id))
        .map_err(io_err(st, names::TURN_INDEX))?;
    let file_len = log.len().map_err(io_err(st, names::LOG))?;
    let found = scan::scan(log.as_ref(), file_len, ScanStart::log_start())
        .map_err(io_err(st, names::LOG))?
        .or_corrupt(log_path.clone())?;
    // As the writer's open does: before a torn tail, every witness counts.
    let acked = if found.good_end < file_len {
        crate::sidecar::later(acked, witnessed)
    } else {
        acked
    };
    crate::sidecar::check_acknowledged(st, acked, found.last_seq, found.good_end)?;
    let mut report = VerifyReport {
        ledger_id: crate::hex::encode(&header.ledger_id),
        events: found.entries.len() as u64,
        last_seq: found.last_seq,
        bytes: found.good_end,
        turns: found.user_seqs.len() as u64,
        notes: found.note_seqs.len() as u64,
        commits_with_id: found.commits.len() as u64,
        ..VerifyReport::default()
    };
    if let Tail::Torn { offset, reason } = found.tail() {
        if tail_in_progress(st, log.as_ref(), file_len) {
            report.in_progress_bytes = file_len - offset;
        } else {
            report.torn_tail_bytes = file_len - offset;
            report.torn_tail_reason = Some(reason);
        }
    }
    let (refs, coverage) = check_bodies(log.as_ref(), file_len, &found, &corrupt)?;
    report.erased = coverage.erased;
    report.lost = coverage.lost;
    report.artifacts = refs.len() as u64;
    for r in refs.values() {
        if let Err(e) = crate::artifact::read(st, r) {
            report.artifact_problems.push(format!("{}: {e}", r.name));
        }
    }
    let (lag, problem) = crate::sidecar::verify(st, &header.ledger_id, &found)
        .map_err(io_err(st, names::EVENT_INDEX))?;
    report.sidecar_lag = lag;
    report.sidecar_ok = problem.is_none();
    report.sidecar_problem = problem;
    let mut recovered = st
        .list(names::RECOVERED)
        .map_err(io_err(st, names::RECOVERED))?;
    recovered.sort();
    report.recovered = recovered
        .into_iter()
        .map(|name| format!("{}/{name}", names::RECOVERED))
        .collect();
    if !writer_holds_lock(st) {
        report.leftovers = leftovers(st)?;
        report.orphaned_artifacts = orphans(st, &refs)?;
    }
    Ok(report)
}

/// What an interrupted operation left in the conversation directory (see
/// [`VerifyReport::leftovers`]), sorted.
fn leftovers(st: &dyn Storage) -> Result<Vec<String>> {
    let mut found: Vec<String> = st
        .list("")
        .map_err(io_err(st, ""))?
        .into_iter()
        .filter(|n| n == names::ERASE_PENDING || n.ends_with(".tmp"))
        .collect();
    if st
        .is_dir(names::ARTIFACTS)
        .map_err(io_err(st, names::ARTIFACTS))?
    {
        found.extend(
            st.list(names::ARTIFACTS)
                .map_err(io_err(st, names::ARTIFACTS))?
                .into_iter()
                .filter(|n| n.starts_with(".tmp-"))
                .map(|n| format!("{}/{n}", names::ARTIFACTS)),
        );
    }
    found.sort();
    Ok(found)
}

/// The files of `artifacts/` (temporary ones aside) that no event references.
fn orphans(st: &dyn Storage, refs: &BTreeMap<String, ArtifactRef>) -> Result<Vec<String>> {
    if !st
        .is_dir(names::ARTIFACTS)
        .map_err(io_err(st, names::ARTIFACTS))?
    {
        return Ok(Vec::new());
    }
    let mut found: Vec<String> = st
        .list(names::ARTIFACTS)
        .map_err(io_err(st, names::ARTIFACTS))?
        .into_iter()
        .filter(|n| !n.starts_with(".tmp-") && !refs.contains_key(n))
        .map(|n| format!("{}/{n}", names::ARTIFACTS))
        .collect();
    found.sort();
    Ok(found)
}

/// True when a writer holds the conversation's lock (tested for an instant; the lock file is
/// never created here).
fn writer_holds_lock(st: &dyn Storage) -> bool {
    if !st.exists(names::LOCK).unwrap_or(false) {
        return false;
    }
    matches!(st.try_lock(None), Ok(None))
}

/// True when the incomplete tail verify saw (at log length `seen`) is a commit a writer is
/// appending, not a torn write. The log's length moving shows it at once. Otherwise the
/// writer lock decides: the writer's open cuts any torn tail before it appends, so while a
/// writer holds the lock an incomplete tail can only be its commit in progress, and when
/// none does (the lock is free; verify holds it only for that instant and never creates the
/// lock file) the tail is torn and stays put until the next open cuts it.
fn tail_in_progress(st: &dyn Storage, log: &dyn StorageFile, seen: u64) -> bool {
    if log.len().map_or(true, |len| len != seen) {
        return true;
    }
    if writer_holds_lock(st) {
        return true;
    }
    log.len().map_or(true, |len| len != seen)
}

/// Decodes every event body and checks erased ranges are covered; returns the artifacts
/// the events reference and the coverage (erased and lost seqs).
fn check_bodies(
    log: &dyn StorageFile,
    file_len: u64,
    found: &Scan,
    corrupt: &dyn Fn(u64, Option<u64>, String) -> Error,
) -> Result<(BTreeMap<String, ArtifactRef>, Coverage)> {
    let mut w = Window::new(log, file_len);
    let mut refs = BTreeMap::new();
    let mut coverage = Coverage::default();
    for (i, e) in found.entries.iter().enumerate() {
        let seq = i as u64 + 1;
        let bytes = w
            .get(e.offset, e.record_len as usize)
            .map_err(|err| corrupt(e.offset, Some(seq), err.to_string()))?
            .ok_or_else(|| corrupt(e.offset, Some(seq), "record past end of file".into()))?;
        let h = RecordHeader::parse(bytes).map_err(|r| corrupt(e.offset, Some(seq), r))?;
        let body_bytes = &bytes[RECORD_HEADER_LEN..RECORD_HEADER_LEN + h.body_len as usize];
        let body: EventBody = serde_json::from_slice(body_bytes).map_err(|err| {
            corrupt(
                e.offset,
                Some(seq),
                format!("undecodable event body: {err}"),
            )
        })?;
        if body.kind() != h.kind {
            return Err(corrupt(
                e.offset,
                Some(seq),
                "body disagrees with header kind".into(),
            ));
        }
        coverage
            .check(seq, &body)
            .map_err(|r| corrupt(e.offset, Some(seq), r))?;
        for r in body.artifact_refs() {
            refs.insert(r.name.clone(), r.clone());
        }
    }
    coverage
        .finish()
        .map_err(|r| corrupt(found.good_end, Some(found.last_seq), r))?;
    Ok((refs, coverage))
}

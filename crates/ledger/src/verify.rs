//! `verify`: reads everything, writes nothing, and names the first problem.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::core::io_err;
use crate::error::{Error, Result};
use crate::event::{ArtifactRef, EventBody};
use crate::format::{
    self, COMMIT_ENTRY_LEN, COMMIT_INDEX_MAGIC, EVENT_ENTRY_LEN, EVENT_INDEX_MAGIC,
    INDEX_HEADER_LEN, LOG_HEADER_LEN, LogHeader, NOTE_ENTRY_LEN, NOTE_INDEX_MAGIC,
    RECORD_HEADER_LEN, RecordHeader, TURN_ENTRY_LEN, TURN_INDEX_MAGIC, names,
};
use crate::scan::{self, Scan, ScanStart, Tail, Window};
use crate::storage::{DirStorage, OpenMode, Storage, StorageFile};

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
    /// True when every sidecar entry present agrees with the log.
    pub sidecar_ok: bool,
    /// Events the sidecar does not cover yet (the writer's next open adds them).
    pub sidecar_lag: u64,
    /// What is wrong with the sidecar, if anything (the writer's next open rebuilds it).
    pub sidecar_problem: Option<String>,
    /// Torn tails cut by earlier opens and kept for forensics, as paths relative to the
    /// conversation directory (`recovered/tail-<offset>-<ms>.bin`), sorted.
    pub recovered: Vec<String>,
}

impl VerifyReport {
    /// True when the log has no torn tail, every artifact checks out and the sidecar agrees.
    pub fn is_clean(&self) -> bool {
        self.torn_tail_bytes == 0 && self.artifact_problems.is_empty() && self.sidecar_ok
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
    let log = crate::core::open_file(st, names::LOG, OpenMode::Read)?;
    let file_len = log.len().map_err(io_err(st, names::LOG))?;
    let corrupt = |offset, seq, reason| Error::Corrupt {
        path: log_path.clone(),
        offset,
        seq,
        reason,
    };
    if file_len < LOG_HEADER_LEN as u64 {
        return Err(corrupt(
            0,
            None,
            format!(
                "file is {file_len} bytes, shorter than its header (a creation cut short: \
                 no record can exist; the next writer open recreates it)"
            ),
        ));
    }
    let mut hb = [0u8; LOG_HEADER_LEN];
    log.read_at(0, &mut hb).map_err(io_err(st, names::LOG))?;
    let header = LogHeader::decode(&hb).map_err(|r| corrupt(0, None, r))?;
    let start = ScanStart {
        offset: LOG_HEADER_LEN as u64,
        ..ScanStart::default()
    };
    let found = scan::scan(log.as_ref(), file_len, start).map_err(io_err(st, names::LOG))?;
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
    match found.tail() {
        Tail::Clean => {}
        Tail::Torn { offset, reason } => {
            report.torn_tail_bytes = file_len - offset;
            report.torn_tail_reason = Some(reason);
        }
        Tail::Corrupt {
            offset,
            seq,
            reason,
        } => return Err(corrupt(offset, Some(seq), reason)),
    }
    let (refs, erased) = check_bodies(log.as_ref(), file_len, &found, &corrupt)?;
    report.erased = erased;
    report.artifacts = refs.len() as u64;
    for r in refs.values() {
        if let Err(e) = crate::artifact::read(st, r) {
            report.artifact_problems.push(format!("{}: {e}", r.name));
        }
    }
    let (lag, problem) =
        check_sidecars(st, &header.ledger_id, &found).map_err(io_err(st, names::EVENT_INDEX))?;
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
    Ok(report)
}

/// Checks every record of the log (checksums, seqs, commit structure); `Corrupt` on damage
/// that is not a torn tail.
pub(crate) fn verify_log_only(st: &dyn Storage) -> Result<()> {
    let log_path = st.location().join(names::LOG);
    let Some(log) = st
        .open(names::LOG, OpenMode::Read)
        .map_err(io_err(st, names::LOG))?
    else {
        return Ok(());
    };
    let file_len = log.len().map_err(io_err(st, names::LOG))?;
    if file_len < LOG_HEADER_LEN as u64 {
        return Ok(()); // no records; the header check that follows reports it
    }
    let start = ScanStart {
        offset: LOG_HEADER_LEN as u64,
        ..ScanStart::default()
    };
    let found = scan::scan(log.as_ref(), file_len, start).map_err(io_err(st, names::LOG))?;
    if let Tail::Corrupt {
        offset,
        seq,
        reason,
    } = found.tail()
    {
        return Err(Error::Corrupt {
            path: log_path,
            offset,
            seq: Some(seq),
            reason,
        });
    }
    Ok(())
}

/// Decodes every event body and checks erased ranges are covered; returns the artifacts
/// the events reference and the number of erased seqs.
fn check_bodies(
    log: &dyn StorageFile,
    file_len: u64,
    found: &Scan,
    corrupt: &dyn Fn(u64, Option<u64>, String) -> Error,
) -> Result<(BTreeMap<String, ArtifactRef>, u64)> {
    let mut w = Window::new(log, file_len);
    let mut refs = BTreeMap::new();
    let mut coverage = crate::erase::Coverage::default();
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
        if let EventBody::ToolResult {
            artifact: Some(r), ..
        } = body
        {
            refs.insert(r.name.clone(), r);
        }
    }
    coverage
        .finish()
        .map_err(|r| corrupt(found.good_end, Some(found.last_seq), r))?;
    Ok((refs, coverage.erased))
}

/// Compares the sidecars with the scan: `(events not yet indexed, first disagreement)`.
fn check_sidecars(
    st: &dyn Storage,
    id: &[u8; 16],
    found: &Scan,
) -> std::io::Result<(u64, Option<String>)> {
    let events = found.entries.len() as u64;
    let Some(idx) = read_sidecar(
        st,
        names::EVENT_INDEX,
        EVENT_INDEX_MAGIC,
        EVENT_ENTRY_LEN,
        id,
    )?
    else {
        return Ok((
            events,
            Some("ledger.idx missing or from another ledger".into()),
        ));
    };
    let n = (idx.len() / EVENT_ENTRY_LEN) as u64;
    for (i, (raw, want)) in idx.chunks(EVENT_ENTRY_LEN).zip(&found.entries).enumerate() {
        if format::EventEntry::decode(raw) != Some(*want) {
            return Ok((
                0,
                Some(format!(
                    "ledger.idx entry for seq {} disagrees with the log",
                    i + 1
                )),
            ));
        }
    }
    let covered = n.min(events);
    let last_covered = found.entries.get(covered.saturating_sub(1) as usize);
    let lists = [
        (
            names::TURN_INDEX,
            TURN_INDEX_MAGIC,
            TURN_ENTRY_LEN,
            last_covered.map_or(0, |e| e.turns),
            &found.user_seqs,
        ),
        (
            names::NOTE_INDEX,
            NOTE_INDEX_MAGIC,
            NOTE_ENTRY_LEN,
            last_covered.map_or(0, |e| e.notes),
            &found.note_seqs,
        ),
    ];
    for (name, magic, entry_len, k, truth) in lists {
        let Some(raw) = read_sidecar(st, name, magic, entry_len, id)? else {
            return Ok((0, Some(format!("{name} missing or from another ledger"))));
        };
        let stored: Vec<u64> = raw.chunks(entry_len).map(format::read_u64).collect();
        let k = k as usize;
        if stored.len() < k || stored[..k] != truth[..k] {
            return Ok((0, Some(format!("{name} disagrees with the log"))));
        }
    }
    let Some(commits) = read_sidecar(
        st,
        names::COMMIT_INDEX,
        COMMIT_INDEX_MAGIC,
        COMMIT_ENTRY_LEN,
        id,
    )?
    else {
        return Ok((0, Some("commits.idx missing or from another ledger".into())));
    };
    let stored: Vec<Option<format::CommitEntry>> = commits
        .chunks(COMMIT_ENTRY_LEN)
        .map(format::CommitEntry::decode)
        .collect();
    let kc = found
        .entries
        .get(covered.saturating_sub(1) as usize)
        .map_or(0, |e| e.commits) as usize;
    let agree = stored.len() >= kc
        && stored[..kc]
            .iter()
            .zip(&found.commits)
            .all(|(s, f)| *s == Some(*f));
    if !agree {
        return Ok((0, Some("commits.idx disagrees with the log".into())));
    }
    Ok((events - covered, None))
}

/// The entry bytes of a sidecar whose header matches, whole entries only.
fn read_sidecar(
    st: &dyn Storage,
    name: &str,
    magic: [u8; 8],
    entry_len: usize,
    id: &[u8; 16],
) -> std::io::Result<Option<Vec<u8>>> {
    let Some(f) = st.open(name, OpenMode::Read)? else {
        return Ok(None);
    };
    let len = f.len()? as usize;
    if len < INDEX_HEADER_LEN {
        return Ok(None);
    }
    let mut all = vec![0u8; len];
    f.read_at(0, &mut all)?;
    if all[..INDEX_HEADER_LEN] != format::encode_index_header(magic, entry_len, id)[..] {
        return Ok(None);
    }
    let whole = (len - INDEX_HEADER_LEN) / entry_len * entry_len;
    Ok(Some(
        all[INDEX_HEADER_LEN..INDEX_HEADER_LEN + whole].to_vec(),
    ))
}

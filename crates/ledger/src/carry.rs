//! Erasure around damage (docs/ledger-format.md, "Erasure on a damaged log"): when the log
//! holds damaged bytes with intact records after them, an erasure of intact seqs carries
//! each damaged range into the rewritten log byte for byte, where the rewrite moves it, so
//! `verify` still names it (same reason and seqs, offset shifted) and `repair` can still
//! salvage around it.
//!
//! The rules, all checked before anything is written:
//! - the damage must lie between intact records: the log's last record is intact and is the
//!   writer's last (a log cut inside acknowledged commits, or a damaged header, is repaired
//!   first);
//! - the erased range must not *reach* a damaged range: hold one of its seqs, or share a
//!   commit with one (a commit with a damaged record), or, for damaged bytes that hold no seq
//!   of their own, hold a record next to them. The damaged bytes may hold text of those seqs,
//!   and nothing could prove it erased: such an erasure is refused, naming
//!   `repair --accept-loss`;
//! - the sidecar index must still describe every damaged seq (its entry lies inside the
//!   damaged range): the rewritten log's sidecars are built from those entries, moved with
//!   the range, because no scan can read past the damage.
//!
//! Artifacts whose name occurs in the damaged bytes are kept (a later repair saves them
//! aside); every other artifact no intact record references is deleted, as by any erasure.
//!
//! Crash safety: the entries of the damaged seqs are written into `erase.pending` (synced)
//! before the rename. A crash after the rename, before the new sidecars are in place, leaves
//! a log no bounded open can index; the next writer open ([`restore_index`]) finds the
//! pending marker stamped with the log's (new) ledger id and rebuilds the sidecars from it.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::files::{io_err, open_file, open_log};
use crate::format::{CommitEntry, Counts, EventEntry, LOG_HEADER_LEN, names};
use crate::salvage::{DamagedRange, KeptRecord, TORN_TAIL};
use crate::scan::{Pending, Scan, Tail, Window};
use crate::state::LedgerState;
use crate::storage::{OpenMode, Storage, StorageFile};

/// A damaged range of the old log, carried verbatim into the new one.
pub(crate) struct Carried {
    /// Where it lay in the old log.
    pub old_offset: u64,
    /// Its length in bytes.
    pub bytes: u64,
    /// Where it lies in the new log (set by [`Carried::move_to`]).
    pub offset: u64,
    /// The first seq it holds (when `entries` is not empty).
    pub first_seq: u64,
    /// The `ledger.idx` entries of the seqs it holds, in seq order (offsets in the log it is
    /// in).
    pub entries: Vec<EventEntry>,
    /// The `commits.idx` entries of id-carrying commits that end at a seq it holds.
    pub commits: Vec<CommitEntry>,
}

impl Carried {
    /// Places the range at `offset` of the new log; its entries move with it.
    pub(crate) fn move_to(&mut self, offset: u64) {
        for e in &mut self.entries {
            e.offset = e.offset - self.offset + offset;
        }
        self.offset = offset;
    }
}

/// The old log as an erasure around damage reads it: every intact record and the damaged
/// ranges between them.
pub(crate) struct Layout {
    /// The intact records (covered placeholders included), in log order.
    pub kept: Vec<KeptRecord>,
    /// The damaged ranges, in log order.
    pub carried: Vec<Carried>,
}

impl Layout {
    /// Reads the writer's log around its damage. With `erasing = Some((from, to))`, refuses
    /// (an [`Error::Corrupt`] at the damage, before anything is written) when the damage
    /// cannot be carried or the range reaches it; see the module docs.
    pub(crate) fn plan(state: &LedgerState, erasing: Option<(u64, u64)>) -> Result<Layout> {
        let st = state.storage().as_ref();
        let mut kept = Vec::new();
        let found = crate::salvage::salvage_scan(st, &mut |_| Ok(()), Some(&mut kept))?;
        let refuse = |offset, seq, reason| Error::Corrupt {
            path: state.log_path(),
            offset,
            seq,
            reason,
        };
        if let Some(problem) = found.header_problem {
            return Err(refuse(0, None, problem));
        }
        let ends_intact = kept.last().is_some_and(|k| {
            k.header.seq == state.last_seq() && k.offset + k.header.record_len() == state.log_len()
        });
        let Some(first) = found.damaged.first() else {
            return Err(refuse(
                state.log_len(),
                None,
                "the log changed while the erasure read it".into(),
            ));
        };
        if !ends_intact || found.damaged.iter().any(|d| d.reason == TORN_TAIL) {
            return Err(refuse(
                first.offset,
                first.seqs.map(|s| s.0),
                format!(
                    "{}; the log does not end with the writer's last intact commit, and an \
                     erasure of some seqs works around damage only between intact records",
                    first.reason
                ),
            ));
        }
        let mut carried = Vec::new();
        for d in &found.damaged {
            let (lo, hi) = reach_of(&kept, d);
            if let Some((from, to)) = erasing
                && from <= hi
                && lo <= to
            {
                return Err(refuse(
                    d.offset,
                    d.seqs.map(|s| s.0),
                    format!(
                        "{}; the erasure of seqs {from}-{to} reaches seqs {lo}-{hi}, which \
                         damaged bytes hold or share a commit with: those bytes may hold text \
                         of the seqs to erase, so they could not be proven erased",
                        d.reason
                    ),
                ));
            }
            carried.push(carry(state, d).map_err(|why| {
                refuse(
                    d.offset,
                    d.seqs.map(|s| s.0),
                    format!("{}; {why}", d.reason),
                )
            })?);
        }
        add_commits(st, &mut carried);
        Ok(Layout { kept, carried })
    }

    /// The names of `candidates` (artifact file names) that occur in the damaged bytes of
    /// `log` (old offsets): artifacts a damaged record may reference.
    pub(crate) fn named_in_damage(
        &self,
        log: &dyn StorageFile,
        candidates: &BTreeSet<String>,
    ) -> std::io::Result<BTreeSet<String>> {
        const CHUNK: u64 = 1 << 20;
        let overlap = candidates.iter().map(String::len).max().unwrap_or(0) as u64;
        let mut found = BTreeSet::new();
        for c in &self.carried {
            let mut at = c.old_offset;
            let end = c.old_offset + c.bytes;
            while at < end {
                let len = (end - at).min(CHUNK + overlap);
                let mut buf = vec![0u8; len as usize];
                log.read_at(at, &mut buf)?;
                for name in candidates {
                    let n = name.as_bytes();
                    if buf.windows(n.len()).any(|w| w == n) {
                        found.insert(name.clone());
                    }
                }
                at += CHUNK;
            }
        }
        Ok(found)
    }
}

/// The seqs a damaged range reaches: those it holds, the whole commit of an intact record
/// next to it that the damage cut (the record before it does not end its commit, or the
/// record after it does not start one), and, for bytes that hold no seq of their own, the
/// intact records on either side.
fn reach_of(kept: &[KeptRecord], d: &DamagedRange) -> (u64, u64) {
    let i = kept.partition_point(|k| k.offset < d.offset);
    let prev = i.checked_sub(1).map(|j| &kept[j]);
    let next = kept.get(i);
    let (mut lo, mut hi) = d.seqs.unwrap_or((
        prev.map_or(1, |p| p.header.seq),
        next.map_or(u64::MAX, |n| n.header.seq),
    ));
    if let Some(p) = prev
        && !p.header.ends_commit()
    {
        lo = lo.min(p.header.seq - u64::from(p.header.index_in_commit));
    }
    if let Some(n) = next
        && n.header.index_in_commit > 0
    {
        let end = kept[i..].iter().find(|k| k.header.ends_commit());
        hi = hi.max(end.map_or(u64::MAX, |k| k.header.seq));
    }
    (lo, hi)
}

/// The damaged range `d` with the index entries of the seqs it holds, each checked to lie
/// inside it; `Err` says why the index cannot describe them.
fn carry(state: &LedgerState, d: &DamagedRange) -> std::result::Result<Carried, String> {
    let end = d.offset + d.bytes;
    let mut entries = Vec::new();
    if let Some((a, b)) = d.seqs {
        for seq in a..=b {
            let e = state
                .entry(seq)
                .ok()
                .filter(|e| e.offset >= d.offset && e.end() <= end)
                .ok_or_else(|| {
                    format!(
                        "the sidecar index no longer describes damaged seq {seq}, which the \
                         rewritten log's index needs"
                    )
                })?;
            entries.push(e);
        }
    }
    Ok(Carried {
        old_offset: d.offset,
        bytes: d.bytes,
        offset: d.offset,
        first_seq: d.seqs.map_or(0, |s| s.0),
        entries,
        commits: Vec::new(),
    })
}

/// Adds to each range the intact `commits.idx` entries of the commits that end at a seq it
/// holds (their ids stay known: a later repair answers a replay of one with `lost`).
fn add_commits(st: &dyn Storage, carried: &mut [Carried]) {
    let claims = crate::sidecar::commit_claims(st).unwrap_or_default();
    for c in carried.iter_mut().filter(|c| !c.entries.is_empty()) {
        let last = c.first_seq + c.entries.len() as u64 - 1;
        c.commits = claims
            .iter()
            .filter(|e| c.first_seq <= e.last_seq && e.last_seq <= last)
            .copied()
            .collect();
    }
}

/// Indexes a log whose damaged ranges `carried` are known (new offsets): every other byte
/// run must be intact records, seqs contiguous. `Err(reason)` when it is not.
fn scan_around(
    log: &dyn StorageFile,
    file_len: u64,
    carried: &[Carried],
) -> std::io::Result<std::result::Result<Scan, String>> {
    let mut w = Window::new(log, file_len);
    let mut out = Scan::default();
    let mut counts = Counts::default();
    let mut pos = LOG_HEADER_LEN as u64;
    let mut ranges = carried.iter().peekable();
    while pos < file_len {
        let mut pending = Pending::default();
        if let Some(c) = ranges.next_if(|c| c.offset == pos) {
            for (i, e) in c.entries.iter().enumerate() {
                let seq = c.first_seq + i as u64;
                let commit = c.commits.iter().find(|k| k.last_seq == seq).copied();
                pending.add_entry(e, seq, commit, &mut counts);
            }
            pos += c.bytes;
            let last = out.last_seq + pending.len();
            out.complete(&mut pending, last, pos);
            continue;
        }
        let rec = match crate::scan::read_record(&mut w, pos)? {
            Ok(rec) if rec.header.seq == out.last_seq + 1 => rec,
            Ok(rec) => return Ok(Err(format!("seq {} at byte offset {pos}", rec.header.seq))),
            Err(reason) => return Ok(Err(format!("{reason} at byte offset {pos}"))),
        };
        pending.add(&rec, pos, &mut counts);
        pos += rec.header.record_len();
        out.complete(&mut pending, rec.header.seq, pos);
    }
    if ranges.next().is_some() || pos != file_len {
        return Ok(Err("a damaged range lies past the end of the log".into()));
    }
    out.tail = Some(Tail::Clean);
    Ok(Ok(out))
}

/// Rebuilds the sidecars of the log in `storage` (every earlier one deleted first) from its
/// intact records and the entries of its damaged ranges `carried`, syncs them, and returns
/// the writer's state over it.
pub(crate) fn index_around(storage: Arc<dyn Storage>, carried: &[Carried]) -> Result<LedgerState> {
    let st = storage.as_ref();
    crate::sidecar::remove_all(st)?;
    let log = open_file(st, names::LOG, OpenMode::Write)?;
    let file_len = log.len().map_err(io_err(st, names::LOG))?;
    let found = scan_around(log.as_ref(), file_len, carried)
        .map_err(io_err(st, names::LOG))?
        .map_err(|reason| Error::Corrupt {
            path: st.location().join(names::LOG),
            offset: file_len,
            seq: None,
            reason: format!("the rewritten log does not match its damaged ranges: {reason}"),
        })?;
    let mut state = LedgerState::with_scan(storage.clone(), log, found)?;
    state.attach_sidecars()?;
    state
        .flush_sidecars()
        .map_err(io_err(st, names::EVENT_INDEX))?;
    state.sync_sidecars()?;
    Ok(state)
}

// ---- erase.pending: what a crash after the rename needs -----------------------------------

/// The content of `erase.pending` for an erasure around damage (JSON; the marker is empty
/// for any other erasure).
#[derive(Serialize, Deserialize)]
struct PendingIndex {
    /// The rewritten log's ledger id (hex): the entries apply only to that log.
    ledger_id: String,
    ranges: Vec<PendingRange>,
}

/// One damaged range of the rewritten log: where, and the sidecar entries of its seqs (hex of
/// their encoded bytes, as in `ledger.idx` and `commits.idx`).
#[derive(Serialize, Deserialize)]
struct PendingRange {
    offset: u64,
    bytes: u64,
    first_seq: u64,
    entries: Vec<String>,
    commits: Vec<String>,
}

/// The content of `erase.pending` for the rewritten log `ledger_id` with damaged ranges
/// `carried` (new offsets).
pub(crate) fn pending_bytes(ledger_id: &[u8; 16], carried: &[Carried]) -> Vec<u8> {
    let index = PendingIndex {
        ledger_id: crate::hex::encode(ledger_id),
        ranges: carried
            .iter()
            .map(|c| PendingRange {
                offset: c.offset,
                bytes: c.bytes,
                first_seq: c.first_seq,
                entries: c
                    .entries
                    .iter()
                    .map(|e| crate::hex::encode(&e.encode()))
                    .collect(),
                commits: c
                    .commits
                    .iter()
                    .map(|e| crate::hex::encode(&e.encode()))
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_vec(&index).unwrap_or_default()
}

/// The damaged ranges `erase.pending` records for the log stamped `ledger_id`; `None` when
/// it records none, or for another log (the crash came before the rename).
fn pending_ranges(st: &dyn Storage, ledger_id: &[u8; 16]) -> Result<Option<Vec<Carried>>> {
    let name = names::ERASE_PENDING;
    let Some(f) = st.open(name, OpenMode::Read).map_err(io_err(st, name))? else {
        return Ok(None);
    };
    let len = f.len().map_err(io_err(st, name))?;
    let mut b = vec![0u8; len.min(1 << 26) as usize];
    f.read_at(0, &mut b).map_err(io_err(st, name))?;
    let Ok(index) = serde_json::from_slice::<PendingIndex>(&b) else {
        return Ok(None);
    };
    if index.ledger_id != crate::hex::encode(ledger_id) {
        return Ok(None);
    }
    let decode = |s: &String| crate::hex::decode(s);
    let mut out = Vec::new();
    for r in index.ranges {
        let entries = r
            .entries
            .iter()
            .map(|s| decode(s).and_then(|b| EventEntry::decode(&b)));
        let commits = r
            .commits
            .iter()
            .map(|s| decode(s).and_then(|b| CommitEntry::decode(&b)));
        out.push(Carried {
            old_offset: r.offset,
            bytes: r.bytes,
            offset: r.offset,
            first_seq: r.first_seq,
            entries: entries.collect::<Option<_>>().ok_or_else(bad_pending(st))?,
            commits: commits.collect::<Option<_>>().ok_or_else(bad_pending(st))?,
        });
    }
    Ok(Some(out))
}

fn bad_pending(st: &dyn Storage) -> impl FnOnce() -> Error + use<> {
    let path = st.location().join(names::ERASE_PENDING);
    move || Error::Corrupt {
        path,
        offset: 0,
        seq: None,
        reason: "an index entry it records fails its checksum".into(),
    }
}

/// At a writer's open, before the log is loaded: when an erasure around damage stopped after
/// its rename (its `erase.pending` is stamped with the log's ledger id), rebuilds the
/// sidecars from the entries it recorded. Anything else is left to the ordinary open.
pub(crate) fn restore_index(storage: &Arc<dyn Storage>) -> Result<()> {
    let st = storage.as_ref();
    let Some((log, file_len)) = open_log(st)? else {
        return Ok(());
    };
    let Ok(header) = crate::state::read_header(st, log.as_ref(), file_len) else {
        return Ok(());
    };
    drop(log);
    if let Some(carried) = pending_ranges(st, &header.ledger_id)? {
        index_around(storage.clone(), &carried)?;
    }
    Ok(())
}

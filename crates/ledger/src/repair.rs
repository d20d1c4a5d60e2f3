//! Repair (docs/design.md#l11-repair): a damaged log rewritten to its intact records, every
//! lost seq covered by a *loss record* so the seq counter never goes back.
//!
//! [`repair_with`] plans first, from a salvage scan (resync on record boundaries and
//! checksums, never on a length from a damaged header): every intact record is kept; the seqs
//! between them that no intact record holds, and those the sidecars prove were acknowledged
//! past the log's end, are lost; a commit that damage cut keeps its intact records only when
//! its tool calls and results still pair up among them. A dry run stops there. With
//! `accept_loss` it writes, under the writer lock: the damaged bytes to `recovered/` (synced),
//! the new log to `ledger.log.tmp` (synced), renamed over `ledger.log` (directory synced), then
//! the sidecars rebuilt. A crash at any point leaves the damaged original or the repaired log.
//!
//! A loss record is laid out like a tombstone (`tombstone.rs`): seq `from` holds
//! `{"type":"loss","from","to","at_ms","offset","reason"}`, every later seq of the run a covered
//! placeholder. The idempotency id of every commit the loss touched rides on a placeholder (or
//! the record) of its run as commit metadata by hash (`{"id_sha256","digest"}`), so the
//! rebuilt `commits.idx` still knows it and a replay of it is [`Error::Lost`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::event::{EventBody, EventKind};
use crate::files::{io_err, new_ledger_id, now_ms, open_file};
use crate::format::{
    self, FLAG_END_OF_COMMIT, LOG_HEADER_LEN, LogHeader, RECORD_HEADER_LEN, names,
};
use crate::rules::{UNPAIRED, seq_runs as runs, unpaired};
use crate::salvage::{DamagedRange, KeptRecord, TORN_TAIL};
use crate::storage::{OpenMode, Storage, StorageFile};

/// A run of lost seqs, as its loss record states it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LostRun {
    /// First lost seq.
    pub from: u64,
    /// Last lost seq (inclusive).
    pub to: u64,
    /// Byte offset in the damaged log where the damage lay (PostgreSQL: the run's first seq;
    /// rows have no byte offset).
    pub offset: u64,
    /// What was wrong.
    pub reason: String,
}

/// A commit the damage touched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AffectedCommit {
    /// Its first seq.
    pub first_seq: u64,
    /// Its last seq, when known (its end record or `commits.idx` says).
    pub last_seq: Option<u64>,
    /// Its idempotency id, when its end record is intact.
    pub id: Option<String>,
    /// SHA-256 (hex) of its idempotency id, when it had one and the id is known by hash.
    pub id_sha256: Option<String>,
    /// Its seqs kept (`[first, last]`), if any.
    pub kept: Option<(u64, u64)>,
    /// What happens to it, in words.
    pub outcome: String,
}

/// Bytes of the damaged log saved under `recovered/` for forensics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SavedAside {
    /// Where they lay in the damaged log (PostgreSQL: the lost row's seq).
    pub offset: u64,
    /// How many.
    pub bytes: u64,
    /// The file they were saved to, relative to the conversation directory (PostgreSQL: the
    /// table, `<schema>.recovered`; `None` in a dry run).
    pub file: Option<String>,
}

/// What a repair found and did (or, in a dry run, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    /// True when the log was rewritten (`accept_loss` and something to repair).
    pub applied: bool,
    /// True when the log needs a repair (damaged records, a damaged header, lost seqs, or a
    /// torn tail); false when only the sidecars are rebuilt.
    pub needed: bool,
    /// What is wrong with the log header, if anything.
    pub header_problem: Option<String>,
    /// The seq runs kept (`[first, last]`), every intact record in them byte for byte unless
    /// its commit was cut (then re-framed as a commit of its own).
    pub kept: Vec<(u64, u64)>,
    /// Seqs kept (covered placeholders of erased ranges included).
    pub kept_seqs: u64,
    /// The lost runs, each covered by one loss record.
    pub lost: Vec<LostRun>,
    /// Seqs lost.
    pub lost_seqs: u64,
    /// The conversation's last seq after the repair.
    pub last_seq: u64,
    /// The commits the damage touched.
    pub commits: Vec<AffectedCommit>,
    /// The damaged ranges the scan found.
    pub damaged: Vec<DamagedRange>,
    /// Bytes saved (or to save) under `recovered/`.
    pub saved_aside: Vec<SavedAside>,
    /// Total bytes saved aside.
    pub bytes_saved: u64,
    /// Artifacts no kept event references (those of lost records, or left by an interrupted
    /// commit or erasure), moved (or, in a dry run, to move) to `recovered/artifact-<name>`.
    pub artifacts_saved_aside: Vec<String>,
    /// Artifacts referenced by kept tool results but missing or altered (`"<name>: <what is
    /// wrong>"`): each such result keeps its event and excerpt, loses its artifact reference,
    /// and says so in its text, so projection and export read it.
    pub artifacts_lost: Vec<String>,
    /// The new ledger id (hex) when applied.
    pub ledger_id: Option<String>,
    /// True when the sidecars were (or will be) rebuilt from the log.
    pub sidecars_rebuilt: bool,
    /// Where saved-aside bytes and unreferenced artifacts go, which also says what an
    /// `offset` counts.
    pub saved_to: SavedTo,
}

/// Where a repair saves what it gives up, and so what its offsets count (JSON
/// `{"kind":"directory","path":"recovered"}` or `{"kind":"table","table":"<schema>.recovered"}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SavedTo {
    /// The file store: files under this directory of the conversation (damaged bytes as
    /// `repair-<offset>-<ms>.bin`, an artifact as `artifact-<name>`); an `offset` is a byte
    /// offset in the damaged log.
    Directory {
        /// The directory, relative to the conversation directory.
        path: String,
    },
    /// PostgreSQL: rows of this table (a lost row with its seq, an artifact with its name); an
    /// `offset` is a seq (rows have no byte offsets).
    Table {
        /// The table, `<schema>.recovered`.
        table: String,
    },
}

impl Default for SavedTo {
    fn default() -> SavedTo {
        SavedTo::Directory {
            path: names::RECOVERED.into(),
        }
    }
}

/// The file under `dir` an unreferenced artifact `name` is moved to.
fn artifact_aside(dir: &str, name: &str) -> String {
    format!("{dir}/artifact-{name}")
}

impl RepairReport {
    /// Where damage at `offset` (of a lost run, a damaged range or a saved range) lay, in
    /// words: `byte offset N` on the file store, `seq N` on PostgreSQL.
    pub fn position(&self, offset: u64) -> String {
        match self.saved_to {
            SavedTo::Directory { .. } => format!("byte offset {offset}"),
            SavedTo::Table { .. } => format!("seq {offset}"),
        }
    }

    /// Where the unreferenced artifact `name` is (or, in a dry run, would be) moved, in
    /// words: `recovered/artifact-<name>`, or `<schema>.recovered`.
    pub fn artifact_saved_as(&self, name: &str) -> String {
        match &self.saved_to {
            SavedTo::Directory { path } => artifact_aside(path, name),
            SavedTo::Table { table } => table.clone(),
        }
    }
}

/// One item of the repaired log, in seq order.
enum Item {
    /// An intact record copied byte for byte.
    Copy(KeptRecord),
    /// An intact record of a cut commit, re-framed: position `index`, `ends` its commit.
    Reframe(KeptRecord, u32, bool),
    /// A lost run, with the commit metadata (id hash, digest) to carry at some of its seqs.
    Loss(LostRun, BTreeMap<u64, ([u8; 32], [u8; 32])>),
    /// An intact tool result whose artifact is lost, with its new body (the excerpt and a
    /// note of the loss, no artifact reference), framed as [`Item::Copy`] or
    /// [`Item::Reframe`] would frame it.
    Rebody(KeptRecord, Option<(u32, bool)>, Vec<u8>),
}

/// Plans the repair of the conversation in `storage`; with `accept_loss`, carries it out
/// under the writer lock, syncing files and directories as `options`' sync mode says.
///
/// # Errors
/// [`Error::Locked`] when a writer holds the conversation (accept only); `NotFound`-kind I/O
/// when there is no log; I/O.
pub fn repair_with(
    storage: Arc<dyn Storage>,
    accept_loss: bool,
    options: &crate::Options,
) -> Result<RepairReport> {
    let syncs = options.syncs();
    let st = storage.as_ref();
    let _lock = if accept_loss {
        let lock = st.try_lock(None).map_err(io_err(st, names::LOCK))?;
        Some(lock.ok_or_else(|| Error::Locked {
            path: st.location(),
        })?)
    } else {
        None
    };
    let log = open_file(st, names::LOG, OpenMode::Read)?;
    let (mut report, items) = plan(st, log.as_ref())?;
    report.sidecars_rebuilt = true;
    if !accept_loss {
        return Ok(report);
    }
    if report.needed {
        let created = read(log.as_ref(), 0, LOG_HEADER_LEN as u64)
            .ok()
            .and_then(|b| LogHeader::decode(&b).ok())
            .map_or_else(now_ms, |h| h.created_ms);
        save_aside(st, log.as_ref(), &mut report)?;
        let id = new_ledger_id();
        write_log(st, log.as_ref(), &items, id, created, syncs)?;
        report.ledger_id = Some(crate::hex::encode(&id));
        report.applied = true;
    }
    drop(log);
    move_aside(st, &report.artifacts_saved_aside, syncs)?;
    crate::sidecar::remove_all(st)?;
    let loaded = crate::state::LedgerState::load(storage.clone(), true)?;
    let mut state = loaded.state;
    state.attach_sidecars()?;
    state
        .flush_sidecars()
        .map_err(io_err(st, names::EVENT_INDEX))?;
    Ok(report)
}

/// Reads `len` bytes of `f` at `offset`.
fn read(f: &dyn StorageFile, offset: u64, len: u64) -> Result<Vec<u8>> {
    let mut b = vec![0u8; len as usize];
    f.read_at(offset, &mut b).map_err(|e| Error::Io {
        path: names::LOG.into(),
        source: e,
    })?;
    Ok(b)
}

/// The plan: the report (what is saved aside: the damaged ranges, and intact records dropped
/// because their cut commit no longer pairs up) and the items of the new log.
fn plan(st: &dyn Storage, log: &dyn StorageFile) -> Result<(RepairReport, Vec<Item>)> {
    let mut kept = Vec::new();
    let salvage = crate::salvage::salvage_scan(st, &mut |_| Ok(()), Some(&mut kept))?;
    let acked = crate::sidecar::later(
        crate::sidecar::acknowledged(st, None).ok().flatten(),
        crate::sidecar::witnessed(st, None).ok().flatten(),
    )
    .map_or(0, |a| a.last_seq);
    let mut report = RepairReport {
        header_problem: salvage.header_problem.clone(),
        damaged: salvage.damaged.clone(),
        ..RepairReport::default()
    };
    let last_damaged = salvage
        .damaged
        .iter()
        .filter(|d| d.reason != TORN_TAIL)
        .filter_map(|d| d.seqs.map(|s| s.1))
        .max()
        .unwrap_or(0);
    let last_kept = kept.last().map_or(0, |k| k.header.seq);
    let last = last_kept.max(acked).max(last_damaged);
    let mut commits = Vec::new();
    let (kept, dropped) = check_cut_commits(log, kept, &mut commits)?;
    let kept_set: BTreeSet<u64> = kept.iter().map(|(k, ..)| k.header.seq).collect();
    let lost = lost_runs(&kept, &dropped, &salvage.damaged, last);
    let claims = crate::sidecar::commit_claims(st).unwrap_or_default();
    let carried = lost_ids(&claims, &kept_set, &lost, &mut commits);
    let mut items = Vec::new();
    for &(k, index, ends) in &kept {
        items.push(match (lost_artifact(st, log, &k)?, index) {
            (Some((lost, body)), _) => {
                report.artifacts_lost.extend(lost);
                Item::Rebody(k, index.map(|i| (i, ends)), body)
            }
            (None, Some(i)) => Item::Reframe(k, i, ends),
            (None, None) => Item::Copy(k),
        });
    }
    for run in &lost {
        let metas = carried
            .iter()
            .filter(|(seq, _)| run.from <= **seq && **seq <= run.to)
            .map(|(s, m)| (*s, *m))
            .collect();
        items.push(Item::Loss(run.clone(), metas));
    }
    items.sort_by_key(|i| match i {
        Item::Copy(k) | Item::Reframe(k, ..) | Item::Rebody(k, ..) => k.header.seq,
        Item::Loss(run, _) => run.from,
    });
    report.kept = runs(kept_set.iter().copied());
    report.kept_seqs = kept_set.len() as u64;
    report.lost_seqs = lost.iter().map(|r| r.to - r.from + 1).sum();
    report.lost = lost;
    report.last_seq = last;
    commits.sort_by_key(|c| c.first_seq);
    report.commits = commits;
    for d in salvage.damaged.iter().filter(|d| d.bytes > 0) {
        report.saved_aside.push(SavedAside {
            offset: d.offset,
            bytes: d.bytes,
            file: None,
        });
    }
    for k in &dropped {
        report.saved_aside.push(SavedAside {
            offset: k.offset,
            bytes: k.header.record_len(),
            file: None,
        });
    }
    report.saved_aside.sort_by_key(|s| s.offset);
    report.bytes_saved = report.saved_aside.iter().map(|s| s.bytes).sum();
    report.needed = report.header_problem.is_some()
        || !report.damaged.is_empty()
        || !report.artifacts_lost.is_empty();
    report.artifacts_saved_aside = unreferenced(st, log, &kept)?;
    Ok((report, items))
}

/// When the intact record `k` references an artifact that is missing or altered (a tool
/// result's output, an image or document part of a user message or tool result): what is
/// wrong (`"<name>: <why>"` each) and its new body ([`crate::rules::artifacts_lost`]).
fn lost_artifact(
    st: &dyn Storage,
    log: &dyn StorageFile,
    k: &KeptRecord,
) -> Result<Option<(Vec<String>, Vec<u8>)>> {
    if !matches!(k.header.kind, EventKind::ToolResult | EventKind::User) {
        return Ok(None);
    }
    let body = body_of(log, k)?;
    let lost = crate::rules::artifacts_lost(&body, |r| {
        crate::artifact::read(st, r).err().map(|e| e.without_path())
    });
    let Some((body, notes)) = lost else {
        return Ok(None);
    };
    let json = serde_json::to_vec(&body)
        .map_err(|e| Error::invalid(format!("event cannot be encoded: {e}")))?;
    Ok(Some((notes, json)))
}

/// The artifacts (temporary files aside) no kept record references (a lost artifact's file,
/// when altered, included).
fn unreferenced(st: &dyn Storage, log: &dyn StorageFile, kept: &[Framed]) -> Result<Vec<String>> {
    if !st
        .is_dir(names::ARTIFACTS)
        .map_err(io_err(st, names::ARTIFACTS))?
    {
        return Ok(Vec::new());
    }
    let mut referenced = BTreeSet::new();
    for (k, ..) in kept
        .iter()
        .filter(|(k, ..)| matches!(k.header.kind, EventKind::ToolResult | EventKind::User))
    {
        let body = body_of(log, k)?;
        for r in body.artifact_refs() {
            if crate::artifact::read(st, r).is_ok() {
                referenced.insert(r.name.clone());
            }
        }
    }
    let mut out: Vec<String> = st
        .list(names::ARTIFACTS)
        .map_err(io_err(st, names::ARTIFACTS))?
        .into_iter()
        .filter(|n| !n.starts_with(".tmp-") && !referenced.contains(n))
        .collect();
    out.sort();
    Ok(out)
}

/// Moves each artifact of `names` to `recovered/artifact-<name>` (directories synced).
fn move_aside(st: &dyn Storage, artifacts: &[String], syncs: bool) -> Result<()> {
    if artifacts.is_empty() {
        return Ok(());
    }
    crate::artifact::ensure_dir(st, names::RECOVERED, syncs, &mut false)?;
    for name in artifacts {
        let from = format!("{}/{name}", names::ARTIFACTS);
        let to = artifact_aside(names::RECOVERED, name);
        st.rename(&from, &to).map_err(io_err(st, &from))?;
    }
    if syncs {
        st.sync_dir(names::ARTIFACTS)
            .map_err(io_err(st, names::ARTIFACTS))?;
        st.sync_dir(names::RECOVERED)
            .map_err(io_err(st, names::RECOVERED))?;
    }
    Ok(())
}

/// A kept record with its new framing: `None` copied as it is, `Some(index)` re-framed at
/// that position of its cut commit, ending it when the bool says so.
type Framed = (KeptRecord, Option<u32>, bool);

/// Splits `kept` into commits (records with the same first seq, before its end record); a
/// commit with a record missing was cut by damage. A cut commit keeps its intact records
/// when its tool calls and results still pair up among them (each contiguous piece re-framed
/// as a commit of its own, a loss record standing between them); else they are dropped.
/// Each cut commit is reported in `commits`.
fn check_cut_commits(
    log: &dyn StorageFile,
    kept: Vec<KeptRecord>,
    commits: &mut Vec<AffectedCommit>,
) -> Result<(Vec<Framed>, Vec<KeptRecord>)> {
    let mut groups: Vec<Vec<KeptRecord>> = Vec::new();
    for k in kept {
        let first = k.header.seq - u64::from(k.header.index_in_commit);
        match groups.last_mut() {
            Some(g)
                if g.last().is_some_and(|p| {
                    !p.header.ends_commit()
                        && p.header.seq - u64::from(p.header.index_in_commit) == first
                }) =>
            {
                g.push(k)
            }
            _ => groups.push(vec![k]),
        }
    }
    let (mut out, mut dropped) = (Vec::new(), Vec::new());
    for g in groups {
        let (head, tail) = (g[0], g[g.len() - 1]);
        let whole = (tail.header.seq - head.header.seq) as usize + 1 == g.len();
        if whole && head.header.index_in_commit == 0 && tail.header.ends_commit() {
            out.extend(g.into_iter().map(|k| (k, None, false)));
            continue;
        }
        let bodies = g
            .iter()
            .map(|k| body_of(log, k))
            .collect::<Result<Vec<_>>>()?;
        let unpaired = unpaired(&bodies);
        let (from, to) = (head.header.seq, tail.header.seq);
        let id = if tail.header.ends_commit() {
            meta_id(log, &tail)?
        } else {
            None
        };
        commits.push(AffectedCommit {
            first_seq: from - u64::from(head.header.index_in_commit),
            last_seq: tail.header.ends_commit().then_some(to),
            id,
            id_sha256: None,
            kept: unpaired.is_none().then_some((from, to)),
            outcome: match &unpaired {
                None => format!(
                    "cut by damage: its intact seqs {from}-{to} are kept as a commit of their own \
                     (their tool calls and results still pair up)"
                ),
                Some(why) => format!(
                    "cut by damage: its intact seqs {from}-{to} are lost too ({why}); their bytes \
                     are saved aside"
                ),
            },
        });
        if unpaired.is_some() {
            dropped.extend(g);
            continue;
        }
        let mut index = 0u32;
        for (i, k) in g.iter().enumerate() {
            let ends = g
                .get(i + 1)
                .is_none_or(|n| n.header.seq != k.header.seq + 1);
            out.push((*k, Some(index), ends));
            index = if ends { 0 } else { index + 1 };
        }
    }
    Ok((out, dropped))
}

/// The body of the intact record `k`.
fn body_of(log: &dyn StorageFile, k: &KeptRecord) -> Result<EventBody> {
    let b = read(
        log,
        k.offset + RECORD_HEADER_LEN as u64,
        u64::from(k.header.body_len),
    )?;
    serde_json::from_slice(&b).map_err(|e| Error::invalid(format!("undecodable body: {e}")))
}

/// The idempotency id in the commit metadata of the intact record `k`, if any.
fn meta_id(log: &dyn StorageFile, k: &KeptRecord) -> Result<Option<String>> {
    if k.header.meta_len == 0 {
        return Ok(None);
    }
    let at = k.offset + RECORD_HEADER_LEN as u64 + u64::from(k.header.body_len);
    let b = read(log, at, u64::from(k.header.meta_len))?;
    Ok(serde_json::from_slice::<crate::scan::CommitMeta>(&b)
        .ok()
        .and_then(|m| m.id))
}

/// The lost runs of `1..=last`: every seq no kept record holds, each run with the offset and
/// reason of the damage that took it.
fn lost_runs(
    kept: &[Framed],
    dropped: &[KeptRecord],
    damaged: &[DamagedRange],
    last: u64,
) -> Vec<LostRun> {
    let held: BTreeMap<u64, &KeptRecord> = kept.iter().map(|(k, ..)| (k.header.seq, k)).collect();
    let lost = (1..=last).filter(|s| !held.contains_key(s));
    runs(lost)
        .into_iter()
        .map(|(from, to)| {
            let after = held
                .range(..from)
                .next_back()
                .map_or(LOG_HEADER_LEN as u64, |(_, k)| {
                    k.offset + k.header.record_len()
                });
            let hit = damaged.iter().filter(|d| d.reason != TORN_TAIL).find(|d| {
                d.seqs.is_some_and(|(a, b)| a <= to && from <= b)
                    || (d.seqs.is_none() && d.offset >= after)
            });
            let unpaired = dropped.iter().find(|k| (from..=to).contains(&k.header.seq));
            match (hit, unpaired) {
                (Some(d), _) => LostRun {
                    from,
                    to,
                    offset: d.offset,
                    reason: d.reason.clone(),
                },
                (None, Some(k)) => LostRun {
                    from,
                    to,
                    offset: k.offset,
                    reason: UNPAIRED.into(),
                },
                (None, None) => LostRun {
                    from,
                    to,
                    offset: after,
                    reason: "missing from the log".into(),
                },
            }
        })
        .collect()
}

/// The idempotency ids of the commits the loss touched, from `claims` (the old `commits.idx`):
/// each is reported in `commits` and carried on one lost seq of its commit (its last seq when
/// that is lost, else its last lost seq), returned as seq → (id hash, digest).
fn lost_ids(
    claims: &[format::CommitEntry],
    kept: &BTreeSet<u64>,
    lost: &[LostRun],
    commits: &mut Vec<AffectedCommit>,
) -> BTreeMap<u64, ([u8; 32], [u8; 32])> {
    let is_lost = |s: u64| lost.iter().any(|r| r.from <= s && s <= r.to);
    let mut carried = BTreeMap::new();
    for c in claims {
        let Some(at) = (c.first_seq..=c.last_seq).rev().find(|s| is_lost(*s)) else {
            continue;
        };
        if c.last_seq - c.first_seq > 1 << 20 || carried.contains_key(&at) {
            continue;
        }
        carried.insert(at, (c.id_hash, c.digest));
        let hash = crate::hex::encode(&c.id_hash);
        let kept_part = runs((c.first_seq..=c.last_seq).filter(|s| kept.contains(s)));
        match commits.iter_mut().find(|a| a.first_seq == c.first_seq) {
            Some(a) => {
                a.id_sha256 = Some(hash);
                a.last_seq = Some(c.last_seq);
                a.kept = None;
                a.outcome.push_str("; replaying its id answers `lost`");
            }
            None => commits.push(AffectedCommit {
                first_seq: c.first_seq,
                last_seq: Some(c.last_seq),
                id: None,
                id_sha256: Some(hash),
                kept: kept_part.first().copied(),
                outcome: "lost: its seqs are covered by a loss record; replaying its id answers \
                          `lost`"
                    .into(),
            }),
        }
    }
    carried
}

/// Saves every damaged range and every dropped record under `recovered/` (synced), filling in
/// the files in `report.saved_aside`.
fn save_aside(st: &dyn Storage, log: &dyn StorageFile, report: &mut RepairReport) -> Result<()> {
    for s in &mut report.saved_aside {
        let bytes = read(log, s.offset, s.bytes)?;
        let path = crate::recovery::save_aside_as(st, "repair", s.offset, &bytes)?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        s.file = name.map(|n| format!("{}/{n}", names::RECOVERED));
    }
    Ok(())
}

/// Writes the repaired log to `ledger.log.tmp`, syncs it, renames it over `ledger.log` and
/// syncs the directory.
fn write_log(
    st: &dyn Storage,
    log: &dyn StorageFile,
    items: &[Item],
    ledger_id: [u8; 16],
    created_ms: i64,
    syncs: bool,
) -> Result<()> {
    let tmp = format!("{}.tmp", names::LOG);
    let io = |e| io_err(st, &tmp)(e);
    let mut f = crate::files::create_fresh(st, &tmp)?;
    let mut out = LogHeader::new(ledger_id, created_ms).encode().to_vec();
    let at_ms = now_ms();
    let mut at = 0u64;
    for item in items {
        encode_item(log, item, at_ms, &mut out)?;
        if out.len() >= 1 << 20 {
            f.write_at(at, &out).map_err(io)?;
            at += out.len() as u64;
            out.clear();
        }
    }
    f.write_at(at, &out).map_err(io)?;
    if syncs {
        f.sync().map_err(io)?;
    }
    drop(f);
    st.rename(&tmp, names::LOG)
        .map_err(io_err(st, names::LOG))?;
    if syncs {
        st.sync_dir("").map_err(io_err(st, ""))?;
    }
    Ok(())
}

/// Appends the records of `item` to `out`.
fn encode_item(log: &dyn StorageFile, item: &Item, at_ms: i64, out: &mut Vec<u8>) -> Result<()> {
    match item {
        Item::Copy(k) => out.extend(read(log, k.offset, k.header.record_len())?),
        Item::Reframe(k, index, ends) => {
            let h = &k.header;
            let body = read(
                log,
                k.offset + RECORD_HEADER_LEN as u64,
                u64::from(h.body_len),
            )?;
            let flags = if *ends { FLAG_END_OF_COMMIT } else { 0 };
            format::encode_record(out, h.kind, flags, *index, h.seq, h.ts_ms, &body, &[]);
        }
        Item::Rebody(k, framing, body) => {
            let h = &k.header;
            let (index, flags, meta) = match framing {
                Some((i, ends)) => (*i, if *ends { FLAG_END_OF_COMMIT } else { 0 }, Vec::new()),
                None => {
                    let at = k.offset + RECORD_HEADER_LEN as u64 + u64::from(h.body_len);
                    let meta = read(log, at, u64::from(h.meta_len))?;
                    (h.index_in_commit, h.flags & FLAG_END_OF_COMMIT, meta)
                }
            };
            format::encode_record(out, h.kind, flags, index, h.seq, h.ts_ms, body, &meta);
        }
        Item::Loss(run, metas) => {
            for seq in run.from..=run.to {
                let body = crate::tombstone::loss_body(
                    seq,
                    run.from,
                    run.to,
                    at_ms,
                    run.offset,
                    &run.reason,
                );
                let json = serde_json::to_vec(&body)
                    .map_err(|e| Error::invalid(format!("loss record cannot be encoded: {e}")))?;
                let meta = match metas.get(&seq) {
                    Some((id_hash, digest)) => serde_json::to_vec(&crate::scan::CommitMeta {
                        id: None,
                        id_sha256: Some(crate::hex::encode(id_hash)),
                        digest: crate::hex::encode(digest),
                    })
                    .map_err(|e| Error::invalid(format!("commit metadata: {e}")))?,
                    None => Vec::new(),
                };
                let flags = if seq == run.to { FLAG_END_OF_COMMIT } else { 0 };
                let index = (seq - run.from) as u32;
                format::encode_record(
                    out,
                    EventKind::System,
                    flags,
                    index,
                    seq,
                    at_ms,
                    &json,
                    &meta,
                );
            }
        }
    }
    Ok(())
}

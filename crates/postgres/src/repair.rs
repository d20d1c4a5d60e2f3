//! Repair of a conversation stored as rows (docs/design.md#l11-repair), with the plan and the
//! results of the file store's repair (`ctxlog_ledger::repair_with`).
//!
//! The plan reads every row: a row whose checksum fails (or whose payload does not decode, or
//! whose kind column disagrees with it) is damaged; a seq with no row up to the
//! conversation's last seq (a row deleted by hand) is missing. Both are lost. Around each lost
//! run, the intact tool calls and results of its turn must still pair up (a projection never
//! shows a call without its result): those that no longer do are given up too. A kept tool
//! result whose artifact is missing or altered keeps its excerpt and says so. A dry run reads
//! in one read-only snapshot and writes nothing.
//!
//! With `accept_loss`, one transaction, holding the conversation's row lock (writers on every
//! replica queue behind it): every lost row's stored bytes and every artifact no kept row
//! references are copied to the `recovered` table (the PostgreSQL form of "saved aside"), the
//! lost rows are deleted, each lost run gets loss-record rows (a loss record at its first seq,
//! covered placeholders after it, as an erasure's tombstone), and the conversation gets a new
//! ledger id; its last seq never goes back. The `commits` rows of commits the loss touched
//! stay, so a replay of one of their ids is answered `lost` ([`ctxlog_ledger::Error::Lost`]).
//! Rows have no byte offsets: a loss record's `offset`, like a corrupt row's, is its seq.

use std::collections::{BTreeMap, BTreeSet};

use ctxlog_ledger::rules::{self, Tombstone};
use ctxlog_ledger::{
    AffectedCommit, DamagedRange, EventBody, EventKind, LostRun, RepairReport, Result, SavedAside,
    SavedTo,
};
use postgres::GenericClient;

use crate::db::{Db, TxMode};
use crate::ledger::{MISSING, Q, decode, insert_run, row_crc};

/// Rows read per query.
const CHUNK: u64 = 1000;

/// What the plan keeps of an intact row.
struct Intact {
    kind: EventKind,
    record_len: u64,
    /// The body of a tool call or result (what pairing looks at).
    tool: Option<EventBody>,
    /// The artifacts the event references and holds intact (a tool result's output, its
    /// and a user message's image and document parts).
    artifacts: Vec<String>,
}

/// The plan: the report, and what applying it changes.
struct Plan {
    report: RepairReport,
    /// Lost seqs that have a row, with why (damaged, or given up because unpaired).
    saved: Vec<(u64, String)>,
    /// Kept tool results whose artifact is lost: seq, time, the new payload.
    rebody: Vec<(u64, i64, Vec<u8>)>,
}

/// Plans the repair of conversation `name` and, with `accept_loss`, carries it out in one
/// transaction; `None` when the conversation does not exist.
///
/// # Errors
/// Database failures; nothing is changed on error.
pub(crate) fn repair(db: &Db, name: &str, accept_loss: bool) -> Result<Option<RepairReport>> {
    let mut conn = db.conn()?;
    let mode = if accept_loss {
        TxMode::Write { sync: true }
    } else {
        TxMode::Read
    };
    let (mut tx, cache) = conn.begin(db, mode)?;
    let mut q = Q {
        c: &mut tx,
        cache,
        db,
    };
    let Some(head) = q.head(name, accept_loss)? else {
        return Ok(None);
    };
    let mut plan = plan(&mut q, name, head.last_seq)?;
    if !(accept_loss && plan.report.needed) {
        return Ok(Some(plan.report));
    }
    apply(&mut q, name, &mut plan)?;
    tx.commit()
        .map_err(|e| db.err("repair failed (nothing was changed)", &e))?;
    Ok(Some(plan.report))
}

/// Reads every row of `name` up to its last seq (`last`, or a later row's) and plans.
fn plan<C: GenericClient>(q: &mut Q<'_, C>, name: &str, last: u64) -> Result<Plan> {
    let max_row = q
        .query(
            "SELECT coalesce(max(seq), 0)::bigint FROM {s}.events WHERE conversation = $1",
            &[&name],
        )?
        .first()
        .map_or(0, |r| r.get::<_, i64>(0) as u64);
    let last = last.max(max_row);
    let mut intact = BTreeMap::new();
    let mut damaged: BTreeMap<u64, (String, u64)> = BTreeMap::new();
    let mut rebody = Vec::new();
    let mut artifacts_lost = Vec::new();
    let mut from = 1;
    while from <= last {
        let to = (from + CHUNK - 1).min(last);
        let rows = q.query(
            "SELECT seq, kind, ts_ms, payload, crc, record_len FROM {s}.events
             WHERE conversation = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
            &[&name, &(from as i64), &(to as i64)],
        )?;
        for row in &rows {
            let seq = row.get::<_, i64>(0) as u64;
            let ts_ms: i64 = row.get(2);
            let payload: &[u8] = row.get(3);
            let crc = row.get::<_, i32>(4) as u32;
            match decode(q.db, name, seq, row.get(1), ts_ms, payload, crc) {
                Err(e) => {
                    damaged.insert(seq, (row_problem(&e), payload.len() as u64));
                }
                Ok(event) => {
                    let mut kept = keep(q, name, event.body, row.get::<_, i32>(5) as u64)?;
                    if let Some((lost, payload)) = kept.1 {
                        // The lost artifacts are no longer referenced; the intact ones are.
                        kept.0
                            .artifacts
                            .retain(|a| !lost.iter().any(|l| l.starts_with(&format!("{a}: "))));
                        artifacts_lost.extend(lost);
                        rebody.push((seq, ts_ms, payload));
                    }
                    intact.insert(seq, kept.0);
                }
            }
        }
        from = to + 1;
    }
    let unpaired = unpaired(&intact, last);
    let mut given_up = Vec::new();
    for seq in &unpaired {
        if let Some(i) = intact.remove(seq) {
            given_up.push((*seq, i.record_len));
        }
    }
    let mut report = RepairReport {
        saved_to: SavedTo::Table {
            table: recovered_table(&q.db.schema_name),
        },
        kept: rules::seq_runs(intact.keys().copied()),
        kept_seqs: intact.len() as u64,
        last_seq: last,
        artifacts_lost,
        ..RepairReport::default()
    };
    let why = |seq: u64| -> String {
        match damaged.get(&seq) {
            Some((why, _)) => why.clone(),
            None if unpaired.contains(&seq) => rules::UNPAIRED.into(),
            None => MISSING.into(),
        }
    };
    let lost = rules::seq_runs((1..=last).filter(|s| !intact.contains_key(s)));
    for &(a, b) in &lost {
        let mut reasons: Vec<String> = Vec::new();
        for seq in a..=b {
            let r = why(seq);
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        }
        report.lost.push(LostRun {
            from: a,
            to: b,
            offset: a,
            reason: reasons.join("; "),
        });
    }
    report.lost_seqs = report.lost.iter().map(|r| r.to - r.from + 1).sum();
    report.damaged = damaged_ranges(&damaged, &intact, &unpaired, last);
    let mut saved = Vec::new();
    for (seq, (why, bytes)) in &damaged {
        saved.push((*seq, why.clone(), *bytes));
    }
    for (seq, bytes) in given_up {
        saved.push((seq, rules::UNPAIRED.to_string(), bytes));
    }
    saved.sort_by_key(|s| s.0);
    for (seq, _, bytes) in &saved {
        report.saved_aside.push(SavedAside {
            offset: *seq,
            bytes: *bytes,
            file: None,
        });
    }
    report.bytes_saved = report.saved_aside.iter().map(|s| s.bytes).sum();
    report.commits = affected_commits(q, name, &report.lost, &intact)?;
    report.artifacts_saved_aside = unreferenced(q, name, &intact)?;
    report.needed = !report.lost.is_empty() || !report.artifacts_lost.is_empty();
    Ok(Plan {
        report,
        saved: saved.into_iter().map(|(seq, why, _)| (seq, why)).collect(),
        rebody,
    })
}

/// What the plan keeps of the intact row `body` (stored size `record_len`), and, for an
/// event referencing an artifact that is missing or altered (a tool result's output, an image
/// or document part), what is wrong (`"<name>: <why>"` each) and its new payload.
#[allow(clippy::type_complexity)]
fn keep<C: GenericClient>(
    q: &mut Q<'_, C>,
    name: &str,
    body: EventBody,
    record_len: u64,
) -> Result<(Intact, Option<(Vec<String>, Vec<u8>)>)> {
    let kind = body.kind();
    let artifacts = body
        .artifact_refs()
        .iter()
        .map(|r| r.name.clone())
        .collect();
    let mut lost = None;
    if let Some((body, notes)) = rules::artifacts_lost(&body, |r| {
        q.artifact(name, r).err().map(|e| e.without_path())
    }) {
        let payload =
            serde_json::to_vec(&body).map_err(|e| ctxlog_ledger::Error::InvalidCommit {
                reason: format!("event cannot be encoded: {e}"),
            })?;
        lost = Some((notes, payload));
    }
    let tool = matches!(kind, EventKind::ToolCall | EventKind::ToolResult).then_some(body);
    Ok((
        Intact {
            kind,
            record_len,
            tool,
            artifacts,
        },
        lost,
    ))
}

/// The intact seqs given up because, in a turn with lost seqs, their tool call or result
/// lost its partner. A turn runs from an intact user event to the seq before the next one.
fn unpaired(intact: &BTreeMap<u64, Intact>, last: u64) -> BTreeSet<u64> {
    let users: Vec<u64> = intact
        .iter()
        .filter(|(_, i)| i.kind == EventKind::User)
        .map(|(s, _)| *s)
        .collect();
    let lost = rules::seq_runs((1..=last).filter(|s| !intact.contains_key(s)));
    let mut turns = BTreeSet::new();
    for (a, b) in lost {
        let start = users.iter().rev().find(|u| **u < a).copied().unwrap_or(1);
        let end = users.iter().find(|u| **u > b).map_or(last, |u| u - 1);
        turns.insert((start, end));
    }
    let mut out = BTreeSet::new();
    for (start, end) in turns {
        let tools: Vec<(u64, &EventBody)> = intact
            .range(start..=end)
            .filter_map(|(s, i)| i.tool.as_ref().map(|b| (*s, b)))
            .collect();
        let bodies: Vec<EventBody> = tools.iter().map(|(_, b)| (*b).clone()).collect();
        let lone: BTreeSet<String> = rules::unpaired_ids(&bodies)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        for (seq, body) in tools {
            let (EventBody::ToolCall { call_id, .. } | EventBody::ToolResult { call_id, .. }) =
                body
            else {
                continue;
            };
            if lone.contains(call_id) {
                out.insert(seq);
            }
        }
    }
    out
}

/// The damaged ranges found: each damaged row, each run of missing seqs (as a salvage
/// reports them: the seq stands for the offset).
fn damaged_ranges(
    damaged: &BTreeMap<u64, (String, u64)>,
    intact: &BTreeMap<u64, Intact>,
    unpaired: &BTreeSet<u64>,
    last: u64,
) -> Vec<DamagedRange> {
    let missing = (1..=last)
        .filter(|s| !intact.contains_key(s) && !damaged.contains_key(s) && !unpaired.contains(s));
    let mut out: Vec<DamagedRange> = rules::seq_runs(missing)
        .into_iter()
        .map(|(a, b)| DamagedRange {
            offset: a,
            bytes: 0,
            seqs: Some((a, b)),
            reason: MISSING.into(),
        })
        .collect();
    out.extend(damaged.iter().map(|(seq, (why, bytes))| DamagedRange {
        offset: *seq,
        bytes: *bytes,
        seqs: Some((*seq, *seq)),
        reason: why.clone(),
    }));
    out.sort_by_key(|d| d.offset);
    out
}

/// The commits with an id that the loss touches (from the `commits` table: commits without
/// an id leave no trace of their bounds).
fn affected_commits<C: GenericClient>(
    q: &mut Q<'_, C>,
    name: &str,
    lost: &[LostRun],
    intact: &BTreeMap<u64, Intact>,
) -> Result<Vec<AffectedCommit>> {
    let mut out = Vec::new();
    for run in lost {
        let rows = q.query(
            "SELECT id_hash, first_seq, last_seq FROM {s}.commits
             WHERE conversation = $1 AND first_seq <= $3 AND last_seq >= $2 ORDER BY first_seq",
            &[&name, &(run.from as i64), &(run.to as i64)],
        )?;
        for row in rows {
            let (first, last) = (row.get::<_, i64>(1) as u64, row.get::<_, i64>(2) as u64);
            if out.iter().any(|c: &AffectedCommit| c.first_seq == first) {
                continue;
            }
            let kept = rules::seq_runs((first..=last).filter(|s| intact.contains_key(s)));
            out.push(AffectedCommit {
                first_seq: first,
                last_seq: Some(last),
                id: None,
                id_sha256: Some(rules::hex(row.get::<_, &[u8]>(0))),
                kept: kept.first().copied(),
                outcome: "lost: its lost seqs are covered by a loss record; replaying its id \
                          answers `lost`"
                    .into(),
            });
        }
    }
    out.sort_by_key(|c| c.first_seq);
    Ok(out)
}

/// The artifacts of `name` no kept row references intact (those of lost rows, and altered
/// ones), in name order.
fn unreferenced<C: GenericClient>(
    q: &mut Q<'_, C>,
    name: &str,
    intact: &BTreeMap<u64, Intact>,
) -> Result<Vec<String>> {
    let referenced: BTreeSet<&str> = intact
        .values()
        .flat_map(|i| i.artifacts.iter().map(String::as_str))
        .collect();
    let rows = q.query(
        "SELECT name FROM {s}.artifacts WHERE conversation = $1 ORDER BY name",
        &[&name],
    )?;
    Ok(rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|n| !referenced.contains(n.as_str()))
        .collect())
}

/// What is wrong with a damaged row, as the file store words a damaged record's problem (the
/// reason alone: the seq is the lost run's, and rows have no byte offset).
fn row_problem(e: &ctxlog_ledger::Error) -> String {
    match e {
        ctxlog_ledger::Error::Corrupt { reason, .. } => reason.clone(),
        e => e.without_path(),
    }
}

/// The table lost rows and unreferenced artifacts are saved to: `<schema>.recovered`.
fn recovered_table(schema: &str) -> String {
    format!("{schema}.recovered")
}

/// Carries `plan` out inside the transaction of `q`.
fn apply<C: GenericClient>(q: &mut Q<'_, C>, name: &str, plan: &mut Plan) -> Result<()> {
    let at_ms = rules::now_ms();
    for (seq, why) in &plan.saved {
        q.exec(
            "INSERT INTO {s}.recovered
             (conversation, seq, kind, ts_ms, crc, artifact, content, reason, saved_ms)
             SELECT conversation, seq, kind, ts_ms, crc, artifact, payload, $3, $4
             FROM {s}.events WHERE conversation = $1 AND seq = $2",
            &[&name, &(*seq as i64), why, &at_ms],
        )?;
    }
    for artifact in &plan.report.artifacts_saved_aside {
        q.exec(
            "INSERT INTO {s}.recovered (conversation, artifact, content, reason, saved_ms)
             SELECT conversation, name, content, 'an artifact no kept event references', $3
             FROM {s}.artifacts WHERE conversation = $1 AND name = $2",
            &[&name, artifact, &at_ms],
        )?;
        q.exec(
            "DELETE FROM {s}.artifacts WHERE conversation = $1 AND name = $2",
            &[&name, artifact],
        )?;
    }
    for run in &plan.report.lost {
        q.exec(
            "DELETE FROM {s}.events WHERE conversation = $1 AND seq >= $2 AND seq <= $3",
            &[&name, &(run.from as i64), &(run.to as i64)],
        )?;
        let loss = Tombstone {
            from: run.from,
            to: run.to,
            at_ms,
            reason: run.reason.clone(),
            loss_offset: Some(run.offset),
        };
        insert_run(q, name, &loss)?;
    }
    for (seq, ts_ms, payload) in &plan.rebody {
        // The new body: a tool result or a user message whose lost artifacts it no longer
        // references (the `artifact` column is a tool result's output that is still intact).
        let body: EventBody =
            serde_json::from_slice(payload).map_err(|e| ctxlog_ledger::Error::InvalidCommit {
                reason: format!("repaired event cannot be read back: {e}"),
            })?;
        let artifact = match &body {
            EventBody::ToolResult {
                artifact: Some(r), ..
            } => Some(r.name.clone()),
            _ => None,
        };
        let kind = body.kind().as_byte();
        let crc = row_crc(*seq, kind, *ts_ms, payload) as i32;
        let len = (rules::RECORD_HEADER_LEN + payload.len()) as i32;
        q.exec(
            "UPDATE {s}.events SET payload = $3, crc = $4, record_len = $5, artifact = $6
             WHERE conversation = $1 AND seq = $2",
            &[&name, &(*seq as i64), payload, &crc, &len, &artifact],
        )?;
    }
    let ledger_id = rules::new_ledger_id();
    q.exec(
        "UPDATE {s}.conversations SET ledger_id = $2, last_seq = $3,
         bytes = (SELECT coalesce(sum(record_len), 0)::bigint FROM {s}.events
                  WHERE conversation = $1)
         WHERE name = $1",
        &[&name, &ledger_id, &(plan.report.last_seq as i64)],
    )?;
    let table = recovered_table(&q.db.schema_name);
    for s in &mut plan.report.saved_aside {
        s.file = Some(table.clone());
    }
    plan.report.ledger_id = Some(ledger_id);
    plan.report.applied = true;
    Ok(())
}

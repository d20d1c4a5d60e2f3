//! Erasure (SPEC E1): the log is rewritten without a seq range, atomically, and every file
//! that could still hold the erased bytes is deleted.
//!
//! The erased seqs are not reused and leave no gap: seq `from` becomes the *tombstone* (a
//! `system` record whose marker is [`SystemMarker::Tombstone`] `{from, to, at_ms, reason}`)
//! and every seq in `from+1..=to` becomes a *covered placeholder* (the same marker with an
//! empty reason). So record *k* still holds seq *k*, the sidecar index still maps a seq to its
//! record in O(1), and open stays bounded (SPEC L7). Readers skip placeholders
//! ([`is_placeholder`]); `verify` checks that every placeholder is covered by its tombstone.
//! The byte layout is in `docs/ledger-format.md` ("Erasure").

use std::collections::BTreeSet;
use std::ops::RangeInclusive;

use serde::Serialize;

use crate::core::{Core, io_err};
use crate::error::{Error, Result};
use crate::event::{EventBody, EventKind, SystemMarker};
use crate::format::{
    self, FLAG_END_OF_COMMIT, LOG_HEADER_LEN, LogHeader, RECORD_HEADER_LEN, RecordHeader, names,
};
use crate::ledger::Ledger;
use crate::open::{Sidecars, new_ledger_id, now_ms, prepare_sidecars};
use crate::scan::{Tail, Window};
use crate::storage::{OpenMode, Storage};

/// The longest `reason` an erasure accepts, in bytes.
pub const MAX_ERASE_REASON_BYTES: usize = 1024;

/// The reason recorded when the caller gives none.
pub const DEFAULT_ERASE_REASON: &str = "erased on request";

/// Bytes buffered before each write of the rewritten log.
const WRITE_CHUNK: usize = 1 << 20;

/// What [`Ledger::erase`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ErasureReport {
    /// First seq erased (after widening to whole turns and earlier tombstones).
    pub from: u64,
    /// Last seq erased (inclusive).
    pub to: u64,
    /// The range that was asked for.
    pub requested: (u64, u64),
    /// Events whose content was removed (earlier tombstones and placeholders in the range
    /// are not counted).
    pub events: u64,
    /// Artifacts deleted because nothing kept references them any more.
    pub artifacts_deleted: u64,
    /// Files deleted from `recovered/` (all of them: they may hold erased bytes).
    pub recovered_deleted: u64,
    /// The ledger's new id (every cache built from the old log is now stale).
    pub ledger_id: String,
}

/// True when `body` at `seq` is a covered placeholder of an erased seq: a tombstone marker
/// with `from < seq <= to`. Readers skip such records.
pub(crate) fn is_placeholder(seq: u64, body: &EventBody) -> bool {
    matches!(body, EventBody::System { marker: SystemMarker::Tombstone { from, to, .. } }
        if *from < seq && seq <= *to)
}

/// The tombstone marker of `body` when it leads an erased range (`seq == from`).
fn lead_range(seq: u64, body: &EventBody) -> Option<(u64, u64)> {
    match body {
        EventBody::System {
            marker: SystemMarker::Tombstone { from, to, .. },
        } if *from == seq && *to >= *from => Some((*from, *to)),
        _ => None,
    }
}

/// Checks, record by record in seq order, that erased ranges are covered (used by `verify`):
/// a tombstone leading `from..=to` must be followed by placeholders for exactly
/// `from+1..=to` (same range and time, empty reason: readers skip placeholders, so one must
/// not carry text), and no placeholder may appear outside such a run.
#[derive(Debug, Default)]
pub(crate) struct Coverage {
    open: Option<(u64, u64, i64)>,
    /// Seqs covered by tombstones (tombstones included).
    pub erased: u64,
}

impl Coverage {
    /// Feeds the event at `seq`; says what is wrong when coverage breaks there.
    pub(crate) fn check(&mut self, seq: u64, body: &EventBody) -> std::result::Result<(), String> {
        let marker = match body {
            EventBody::System {
                marker:
                    SystemMarker::Tombstone {
                        from, to, at_ms, ..
                    },
            } => Some((*from, *to, *at_ms)),
            _ => None,
        };
        let silent = matches!(body, EventBody::System {
            marker: SystemMarker::Tombstone { reason, .. },
        } if reason.is_empty());
        if let Some((from, to, at)) = self.open {
            if marker == Some((from, to, at)) && is_placeholder(seq, body) && silent {
                self.erased += 1;
                if seq == to {
                    self.open = None;
                }
                return Ok(());
            }
            return Err(format!(
                "seq {seq} lies in the erased range {from}-{to} but is not covered by its tombstone"
            ));
        }
        if is_placeholder(seq, body) {
            return Err(format!(
                "seq {seq} is a placeholder of an erased range without its leading tombstone"
            ));
        }
        if let (Some((from, to)), Some((_, _, at))) = (lead_range(seq, body), marker) {
            self.erased += 1;
            if to > from {
                self.open = Some((from, to, at));
            }
        }
        Ok(())
    }

    /// Fails when the last tombstone covers seqs past the end of the log.
    pub(crate) fn finish(&self) -> std::result::Result<(), String> {
        match self.open {
            Some((from, to, _)) => Err(format!(
                "the tombstone at seq {from} covers seqs up to {to}, past the end of the log"
            )),
            None => Ok(()),
        }
    }
}

/// One record of the old log, as pass 2 needs it.
struct Old {
    header: RecordHeader,
    bytes: Vec<u8>,
}

impl Ledger {
    /// The seqs written by the commit that carried idempotency id `id`, if any (from the
    /// idempotency table, which is rebuilt from the log: an erased commit's id is gone).
    ///
    /// # Errors
    /// Log corruption or I/O while loading the table.
    pub fn commit_seqs(&mut self, id: &str) -> Result<Option<(u64, u64)>> {
        let key = crate::hex::sha256(id.as_bytes());
        Ok(self.ids()?.get(&key).map(|e| (e.first_seq, e.last_seq)))
    }

    /// Checks, without changing anything, that [`Ledger::erase`] would accept `range` and
    /// `reason`: a non-empty range inside `1..=last_seq`, a reason of at most
    /// [`MAX_ERASE_REASON_BYTES`], and `artifacts/` and `recovered/` inside the conversation
    /// directory. Callers that must prepare (e.g. drop a cache) before erasing check first.
    ///
    /// # Errors
    /// [`Error::BadRange`]; [`Error::Io`] for an escaping directory.
    pub fn check_erase(&self, range: &RangeInclusive<u64>, reason: &str) -> Result<()> {
        check_range(*range.start(), *range.end(), self.core.last_seq, reason)?;
        check_dirs_inside(self.core.storage.as_ref())
    }

    /// Erases `range` (SPEC E1): rewrites the log without its content, atomically, and deletes
    /// every file that could still hold erased bytes.
    ///
    /// The range is first **widened to whole turns** (a turn runs from a user event to the
    /// event before the next one), so a tool call is never separated from its result, and to
    /// cover any earlier tombstone it overlaps; the report gives the range actually erased.
    /// Seqs are preserved: seq `from` becomes a tombstone recording the range, the time and
    /// `reason` (never the content), seqs `from+1..=to` become covered placeholders that
    /// readers skip. Commits cut by the range lose their id (so an erased commit's id, or a
    /// partly erased one's, no longer replays: a retry writes it again).
    ///
    /// Steps: the new log (fresh ledger id) is written to `ledger.log.tmp` and synced; the
    /// marker `erase.pending` is created (directory synced); the new log is renamed over
    /// `ledger.log` and the directory synced: a crash before the rename leaves the old ledger,
    /// after it the new one. Then every artifact no kept event references is deleted (with any
    /// `artifacts/.tmp-*`), every file under `recovered/` is deleted, the marker is removed,
    /// and the four sidecars are deleted and rebuilt. A crash between the rename and the
    /// marker's removal is finished by the next writer open ([`Ledger::open`] sees the
    /// marker and deletes what is still unreferenced), so erased artifacts and recovered
    /// tails do not outlive an interrupted erasure.
    ///
    /// ```
    /// use ctxlog_ledger::{EventBody, Ledger, LedgerRead, NewCommit, Options};
    /// # fn main() -> ctxlog_ledger::Result<()> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let (mut ledger, _) = Ledger::open(dir.path(), &Options::default())?;
    /// for text in ["keep this", "my password is hunter2", "keep this too"] {
    ///     ledger.commit(&NewCommit {
    ///         id: None,
    ///         events: vec![
    ///             EventBody::User { text: text.into() },
    ///             EventBody::Assistant { text: "ok".into() },
    ///         ],
    ///     })?;
    /// }
    /// // Seq 4 is asked for; its whole turn (3-4) is erased.
    /// let report = ledger.erase(4..=4, "secret shared by mistake")?;
    /// assert_eq!((report.from, report.to, report.events), (3, 4, 2));
    /// let seqs: Vec<u64> = ledger.events(1..=6)?.iter().map(|e| e.seq).collect();
    /// assert_eq!(seqs, [1, 2, 3, 5, 6]); // 3 is the tombstone, 4 is skipped
    /// assert!(ctxlog_ledger::verify(dir.path())?.is_clean());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::BadRange`] (nothing changed) when `from` is 0, `from > to`, `to` is past the
    /// last seq, or `reason` is over [`MAX_ERASE_REASON_BYTES`]; [`Error::Poisoned`];
    /// [`Error::Corrupt`] when the log does not check out (including a tombstone that claims
    /// seqs past the end); [`Error::Io`] (nothing changed) when `artifacts/` or `recovered/`
    /// resolves outside the conversation directory; I/O. A failure before the rename
    /// leaves the old ledger; one after it poisons this writer (reopen to continue) and makes
    /// its reads of events and artifacts fail with [`Error::Poisoned`] too (the handle it
    /// holds on the replaced log still holds the erased content).
    pub fn erase(&mut self, range: RangeInclusive<u64>, reason: &str) -> Result<ErasureReport> {
        self.check_usable()?;
        self.check_erase(&range, reason)?;
        let (req_from, req_to) = (*range.start(), *range.end());
        let leads = self.tombstones()?;
        self.check_leads(&leads)?;
        let (from, to) = widen(
            req_from,
            req_to,
            &self.core.user_seqs,
            &leads,
            self.core.last_seq,
        );
        let st = self.core.storage.clone();
        let tmp = format!("{}.tmp", names::LOG);
        let ledger_id = new_ledger_id();
        let rewrite = self.write_rewritten(&tmp, ledger_id, from, to, reason);
        let (events, referenced) = match rewrite {
            Ok(v) => v,
            Err(e) => {
                let _ = st.remove(&tmp);
                return Err(e);
            }
        };
        if let Err(e) = self.mark_pending() {
            let _ = st.remove(&tmp);
            let _ = st.remove(names::ERASE_PENDING);
            return Err(e);
        }
        if let Err(e) = st.rename(&tmp, names::LOG) {
            let _ = st.remove(&tmp);
            let _ = st.remove(names::ERASE_PENDING);
            return Err(io_err(st.as_ref(), names::LOG)(e));
        }
        // From here on the old log is gone: any failure leaves this writer unusable, and its
        // open handle on the old log (which still holds the erased content) unreadable.
        self.poisoned = true;
        self.core.retired = true;
        if self.syncs() {
            st.sync_dir("").map_err(io_err(st.as_ref(), ""))?;
        }
        let artifacts_deleted = delete_unreferenced(st.as_ref(), &referenced, self.syncs())?;
        let recovered_deleted = delete_recovered(st.as_ref(), self.syncs(), None)?;
        // Nothing erased is left outside the log: a crash from here on needs no cleanup (and
        // if this removal is lost, the next open only repeats deletions already done).
        let _ = st.remove(names::ERASE_PENDING);
        self.reload()?;
        self.poisoned = false;
        Ok(ErasureReport {
            from,
            to,
            requested: (req_from, req_to),
            events,
            artifacts_deleted,
            recovered_deleted,
            ledger_id: crate::hex::encode(&ledger_id),
        })
    }

    /// Creates [`names::ERASE_PENDING`], durably (directory synced) before the rename that
    /// it must precede: a crash after the rename then always finds it.
    fn mark_pending(&self) -> Result<()> {
        let st = self.core.storage.as_ref();
        let name = names::ERASE_PENDING;
        crate::core::open_file(st, name, OpenMode::Create)?;
        if self.syncs() {
            st.sync_dir("").map_err(io_err(st, ""))?;
        }
        Ok(())
    }

    /// Finishes an erasure that a crash (or a failure past its rename) left unfinished: when
    /// [`names::ERASE_PENDING`] exists, deletes every artifact no event of the log references,
    /// every file under `recovered/` except `keep` (a tail this very open saved), and
    /// `ledger.log.tmp`, then removes the marker. Costs one read of the whole log, only then.
    /// Returns true when there was something to finish.
    pub(crate) fn finish_pending_erasure(&mut self, keep: Option<&str>) -> Result<bool> {
        let st = self.core.storage.clone();
        let pending = names::ERASE_PENDING;
        if !st.exists(pending).map_err(io_err(st.as_ref(), pending))? {
            return Ok(false);
        }
        check_dirs_inside(st.as_ref())?;
        let referenced = self.referenced_artifacts()?;
        delete_unreferenced(st.as_ref(), &referenced, self.syncs())?;
        delete_recovered(st.as_ref(), self.syncs(), keep)?;
        let tmp = format!("{}.tmp", names::LOG);
        st.remove(&tmp).map_err(io_err(st.as_ref(), &tmp))?;
        st.remove(pending).map_err(io_err(st.as_ref(), pending))?;
        Ok(true)
    }

    /// Every artifact name the events of the log reference (one sequential read).
    fn referenced_artifacts(&self) -> Result<BTreeSet<String>> {
        let mut referenced = BTreeSet::new();
        let mut w = Window::new(self.core.log.as_ref(), self.core.log_len);
        let mut pos = LOG_HEADER_LEN as u64;
        for seq in 1..=self.core.last_seq {
            let offset = pos;
            let old = read_old(&mut w, offset, seq).map_err(|e| self.corrupt(offset, seq, e))?;
            pos += old.header.record_len();
            if old.header.kind != EventKind::ToolResult {
                continue;
            }
            if let EventBody::ToolResult {
                artifact: Some(r), ..
            } = decode_body(&old).map_err(|e| self.corrupt(offset, seq, e))?
            {
                referenced.insert(r.name);
            }
        }
        Ok(referenced)
    }

    /// The leading tombstones already in the log: `(from, to)` ranges. The seqs a tombstone
    /// covers are stepped over unread (anything inside its range is absorbed by it anyway),
    /// so an erased range costs one read, not one per placeholder.
    fn tombstones(&self) -> Result<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        let mut seq = 1;
        while seq <= self.core.last_seq {
            if self.core.kind(seq) == Some(EventKind::System)
                && let Some((from, to)) = lead_range(seq, &self.core.raw_event(seq)?.body)
            {
                out.push((from, to));
                seq = to.saturating_add(1);
                continue;
            }
            seq += 1;
        }
        Ok(out)
    }

    /// Refuses (before anything is written) a tombstone that claims seqs past the end of the
    /// log: the rewrite would end inside its run, i.e. with an incomplete commit that the
    /// next open cuts. `verify` reports such a log as corrupt.
    fn check_leads(&self, leads: &[(u64, u64)]) -> Result<()> {
        match leads.iter().find(|(_, to)| *to > self.core.last_seq) {
            Some(&(from, to)) => Err(Error::Corrupt {
                path: self.core.log_path(),
                offset: self.core.entry(from)?.offset,
                seq: Some(from),
                reason: format!(
                    "the tombstone at seq {from} covers seqs up to {to}, past the end of the \
                     log ({})",
                    self.core.last_seq
                ),
            }),
            None => Ok(()),
        }
    }

    /// Pass 2: writes the new log to `tmp` (synced per the sync mode). Returns the number of
    /// content events erased and the artifacts the kept events reference.
    fn write_rewritten(
        &self,
        tmp: &str,
        ledger_id: [u8; 16],
        from: u64,
        to: u64,
        reason: &str,
    ) -> Result<(u64, BTreeSet<String>)> {
        let st = self.core.storage.as_ref();
        let io = |e| io_err(st, tmp)(e);
        let mut f = crate::core::open_file(st, tmp, OpenMode::Create)?;
        f.set_len(0).map_err(io)?;
        let header = LogHeader {
            ledger_id,
            created_ms: self.core.header.created_ms,
        };
        let mut out = header.encode().to_vec();
        let mut at = 0u64;
        let mut referenced = BTreeSet::new();
        let mut erased = 0u64;
        let at_ms = now_ms();
        let mut w = Window::new(self.core.log.as_ref(), self.core.log_len);
        let mut pos = LOG_HEADER_LEN as u64;
        // index_in_commit of seq to+1, when its commit began inside the erased range.
        let mut shift: Option<u32> = None;
        for seq in 1..=self.core.last_seq {
            let offset = pos;
            let old = read_old(&mut w, offset, seq).map_err(|e| self.corrupt(offset, seq, e))?;
            pos += old.header.record_len();
            let body = decode_body(&old).map_err(|e| self.corrupt(offset, seq, e))?;
            if (from..=to).contains(&seq) {
                let placeholder_or_lead =
                    is_placeholder(seq, &body) || lead_range(seq, &body).is_some();
                if !placeholder_or_lead {
                    erased += 1;
                }
                let marker = SystemMarker::Tombstone {
                    from,
                    to,
                    at_ms,
                    reason: if seq == from {
                        reason.to_string()
                    } else {
                        String::new()
                    },
                };
                let json = serde_json::to_vec(&EventBody::System { marker })
                    .map_err(|e| Error::invalid(format!("tombstone cannot be encoded: {e}")))?;
                let flags = if seq == to { FLAG_END_OF_COMMIT } else { 0 };
                let index = (seq - from) as u32;
                format::encode_record(
                    &mut out,
                    EventKind::System,
                    flags,
                    index,
                    seq,
                    at_ms,
                    &json,
                    &[],
                );
            } else {
                if let EventBody::ToolResult {
                    artifact: Some(r), ..
                } = &body
                {
                    referenced.insert(r.name.clone());
                }
                if seq == to + 1 && old.header.index_in_commit != 0 {
                    shift = Some(old.header.index_in_commit);
                }
                let cut_before = seq + 1 == from && !old.header.ends_commit();
                match (cut_before, shift) {
                    (true, _) => reframe(&mut out, &old, old.header.index_in_commit, true),
                    (false, Some(s)) => {
                        reframe(&mut out, &old, old.header.index_in_commit - s, false);
                    }
                    (false, None) => out.extend_from_slice(&old.bytes),
                }
                if shift.is_some() && old.header.ends_commit() {
                    shift = None;
                }
            }
            if out.len() >= WRITE_CHUNK {
                f.write_at(at, &out).map_err(io)?;
                at += out.len() as u64;
                out.clear();
            }
        }
        f.write_at(at, &out).map_err(io)?;
        if self.syncs() {
            f.sync().map_err(io)?;
        }
        Ok((erased, referenced))
    }

    fn corrupt(&self, offset: u64, seq: u64, reason: String) -> Error {
        Error::Corrupt {
            path: self.core.log_path(),
            offset,
            seq: Some(seq),
            reason,
        }
    }

    /// Reloads the state from the new log and rebuilds the sidecars (deleted first, so
    /// nothing of the old ones survives).
    fn reload(&mut self) -> Result<()> {
        let st = self.core.storage.clone();
        for name in [
            names::EVENT_INDEX,
            names::TURN_INDEX,
            names::NOTE_INDEX,
            names::COMMIT_INDEX,
        ] {
            st.remove(name).map_err(io_err(st.as_ref(), name))?;
            let tmp = format!("{name}.tmp");
            st.remove(&tmp).map_err(io_err(st.as_ref(), &tmp))?;
        }
        let loaded = Core::load(st.clone(), true)?;
        if loaded.tail != Tail::Clean {
            return Err(Error::Corrupt {
                path: loaded.core.log_path(),
                offset: loaded.core.log_len,
                seq: None,
                reason: "the rewritten log does not end with a complete commit".into(),
            });
        }
        let mut core = loaded.core;
        let Sidecars {
            turns,
            notes,
            commits,
        } = prepare_sidecars(&mut core)?;
        self.core = core;
        self.turns_file = turns;
        self.notes_file = notes;
        self.commits_file = commits;
        self.ids = None;
        self.turn = None;
        let _ = self.flush_sidecars();
        Ok(())
    }
}

fn check_range(from: u64, to: u64, last_seq: u64, reason: &str) -> Result<()> {
    let bad = |reason: String| Err(Error::BadRange { reason });
    if from == 0 {
        return bad("seqs start at 1".into());
    }
    if from > to {
        return bad(format!("range {from}-{to} is empty (first > last)"));
    }
    if to > last_seq {
        return bad(format!(
            "range {from}-{to} goes past the last seq ({last_seq})"
        ));
    }
    if reason.len() > MAX_ERASE_REASON_BYTES {
        return bad(format!(
            "reason is {} bytes, the limit is {MAX_ERASE_REASON_BYTES}",
            reason.len()
        ));
    }
    Ok(())
}

/// Widens `from..=to` to whole turns and over earlier tombstones. An end inside an earlier
/// erased range snaps to that range's bound (the range is already whole); an end in live
/// content moves to the bound of its turn (a turn runs from a user event to the event before
/// the next one; events before the first user event belong to no turn and are not widened).
/// Earlier ranges inside the result are absorbed.
pub(crate) fn widen(
    from: u64,
    to: u64,
    user_seqs: &[u64],
    leads: &[(u64, u64)],
    last_seq: u64,
) -> (u64, u64) {
    let erased_range = |s: u64| leads.iter().find(|(a, b)| *a <= s && s <= *b).copied();
    let mut from = match erased_range(from) {
        Some((a, _)) => a,
        None => user_seqs
            .iter()
            .rev()
            .find(|&&s| s <= from)
            .copied()
            .unwrap_or(from),
    };
    let mut to = match erased_range(to) {
        Some((_, b)) => b,
        None => match user_seqs.iter().find(|&&s| s > to) {
            Some(&next) => next - 1,
            None => last_seq,
        },
    };
    loop {
        let before = (from, to);
        for &(a, b) in leads {
            if a <= to && from <= b {
                from = from.min(a);
                to = to.max(b);
            }
        }
        if (from, to) == before {
            return (from, to);
        }
    }
}

fn read_old(w: &mut Window<'_>, pos: u64, seq: u64) -> std::result::Result<Old, String> {
    let header_bytes = w
        .get(pos, RECORD_HEADER_LEN)
        .map_err(|e| e.to_string())?
        .ok_or("record past the end of the log")?;
    let header = RecordHeader::parse(header_bytes)?;
    let len = header.record_len() as usize;
    let bytes = w
        .get(pos, len)
        .map_err(|e| e.to_string())?
        .ok_or("record past the end of the log")?
        .to_vec();
    if format::record_crc(&bytes, &bytes[RECORD_HEADER_LEN..]) != header.crc {
        return Err("record checksum mismatch".into());
    }
    if header.seq != seq {
        return Err(format!("found seq {} where seq {seq} belongs", header.seq));
    }
    Ok(Old { header, bytes })
}

fn decode_body(old: &Old) -> std::result::Result<EventBody, String> {
    let end = RECORD_HEADER_LEN + old.header.body_len as usize;
    serde_json::from_slice(&old.bytes[RECORD_HEADER_LEN..end])
        .map_err(|e| format!("undecodable event body: {e}"))
}

/// Re-encodes a kept record with a new position in its (cut) commit. A record that now ends
/// its commit gets `END_OF_COMMIT`; commit metadata is dropped (the commit is no longer the
/// one its id named).
fn reframe(out: &mut Vec<u8>, old: &Old, index: u32, ends: bool) {
    let h = &old.header;
    let flags = if ends || h.ends_commit() {
        FLAG_END_OF_COMMIT
    } else {
        0
    };
    let body = &old.bytes[RECORD_HEADER_LEN..RECORD_HEADER_LEN + h.body_len as usize];
    format::encode_record(out, h.kind, flags, index, h.seq, h.ts_ms, body, &[]);
}

/// Fails unless `artifacts/` and `recovered/` (when present) resolve inside the conversation
/// directory: erasure deletes every unreferenced file in them, and must never delete files
/// elsewhere through a symlink (SPEC R7). Checked before anything is written.
fn check_dirs_inside(st: &dyn Storage) -> Result<()> {
    for dir in [names::ARTIFACTS, names::RECOVERED] {
        let io = |e| io_err(st, dir)(e);
        if st.exists(dir).map_err(io)? && !st.resolves_inside(dir, "").map_err(io)? {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "it resolves outside the conversation directory (a symlink?): erasure deletes \
                 files in it and refuses to delete files elsewhere",
            )));
        }
    }
    Ok(())
}

/// Deletes every file in `artifacts/` that `referenced` does not name (temporary files too).
fn delete_unreferenced(st: &dyn Storage, referenced: &BTreeSet<String>, sync: bool) -> Result<u64> {
    let dir = names::ARTIFACTS;
    let mut deleted = 0;
    for name in st.list(dir).map_err(io_err(st, dir))? {
        if referenced.contains(&name) {
            continue;
        }
        let path = format!("{dir}/{name}");
        st.remove(&path).map_err(io_err(st, &path))?;
        deleted += 1;
    }
    if deleted > 0 && sync {
        st.sync_dir(dir).map_err(io_err(st, dir))?;
    }
    Ok(deleted)
}

/// Deletes every file under `recovered/` but `keep`: cut tails may hold erased bytes.
fn delete_recovered(st: &dyn Storage, sync: bool, keep: Option<&str>) -> Result<u64> {
    let dir = names::RECOVERED;
    let mut deleted = 0;
    for name in st.list(dir).map_err(io_err(st, dir))? {
        if keep == Some(name.as_str()) {
            continue;
        }
        let path = format!("{dir}/{name}");
        st.remove(&path).map_err(io_err(st, &path))?;
        deleted += 1;
    }
    if deleted > 0 && sync {
        st.sync_dir(dir).map_err(io_err(st, dir))?;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_covers_whole_turns_and_old_tombstones() {
        // turns start at 1, 4, 8; last seq 10
        let users = [1, 4, 8];
        assert_eq!(widen(5, 5, &users, &[], 10), (4, 7));
        assert_eq!(widen(4, 8, &users, &[], 10), (4, 10));
        assert_eq!(widen(1, 1, &users, &[], 10), (1, 3));
        // preamble before the first user event stays as asked
        assert_eq!(widen(1, 1, &[3], &[], 5), (1, 2));
        // an earlier tombstone 1..=3 (no user event left there) is absorbed
        assert_eq!(widen(2, 2, &[4], &[(1, 3)], 6), (1, 3));
        assert_eq!(widen(3, 4, &[4], &[(1, 3)], 6), (1, 6));
        // an end inside an earlier range does not reach back to the turn before it
        assert_eq!(widen(4, 4, &[1, 7], &[(3, 6)], 8), (3, 6));
        assert_eq!(widen(4, 7, &[1, 7], &[(3, 6)], 8), (3, 8));
    }

    #[test]
    fn placeholders_are_the_covered_seqs_only() {
        let t = |from, to| EventBody::System {
            marker: SystemMarker::Tombstone {
                from,
                to,
                at_ms: 0,
                reason: String::new(),
            },
        };
        assert!(!is_placeholder(3, &t(3, 5)));
        assert!(is_placeholder(4, &t(3, 5)));
        assert!(is_placeholder(5, &t(3, 5)));
        assert!(!is_placeholder(9, &t(3, 5)));
        assert_eq!(lead_range(3, &t(3, 5)), Some((3, 5)));
        assert_eq!(lead_range(4, &t(3, 5)), None);
    }
}

//! Erasure (docs/design.md#e1-erasure): the log is rewritten without a seq range, atomically, and
//! every file that could still hold the erased bytes is deleted. [`crate::Ledger::erase`] is the
//! entry point; this module does the work on the writer's [`LedgerState`].
//!
//! The erased seqs are not reused and leave no gap: seq `from` becomes the *tombstone* and
//! every seq in `from+1..=to` a *covered placeholder* (see `tombstone.rs`). So record *k*
//! still holds seq *k*, the sidecar index still maps a seq to its record in O(1), and open
//! stays bounded (docs/design.md#l7-bounded-memory). The byte layout is in `docs/ledger-format.md`
//! ("Erasure").

use std::collections::BTreeSet;
use std::ops::RangeInclusive;

use serde::Serialize;

use crate::carry::Layout;
use crate::error::{Error, Result};
use crate::event::{EventBody, EventKind};
use crate::files::{io_err, new_ledger_id, now_ms};
use crate::format::{
    self, FLAG_END_OF_COMMIT, LOG_HEADER_LEN, LogHeader, RECORD_HEADER_LEN, RecordHeader, names,
};
use crate::scan::{Tail, Window};
use crate::state::LedgerState;
use crate::storage::{Storage, StorageFile};
use crate::tombstone::{erase_reason, is_placeholder, lead_range, live_runs, reach, run_body};

pub use crate::tombstone::{DEFAULT_ERASE_REASON, MAX_ERASE_REASON_BYTES, Reach};

/// Bytes buffered before each write of the rewritten log.
const WRITE_CHUNK: usize = 1 << 20;

/// What [`crate::Ledger::erase`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ErasureReport {
    /// First seq of the erased range (after widening to whole turns and over earlier
    /// tombstones). Earlier tombstones inside `from..=to` stay as written
    /// (docs/design.md#e6-listing-and-tombstones): each run of live seqs between them got its own
    /// tombstone, with this erasure's reason and time.
    pub from: u64,
    /// Last seq of the erased range (inclusive).
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
    /// The ledger's new id (every cache built from the old log is now stale); unchanged
    /// when `already_erased`.
    pub ledger_id: String,
    /// True when earlier erasures already covered the whole (widened) range: nothing was
    /// written or deleted, and their tombstones keep their reason and time
    /// (docs/design.md#e6-listing-and-tombstones).
    pub already_erased: bool,
}

/// One piece of the old log, in log order.
enum Piece<'a> {
    /// An intact record and its seq.
    Record(u64, &'a Old),
    /// The damaged range `Layout::carried[i]`, copied verbatim.
    Damaged(usize),
}

/// One record of the old log, as pass 2 needs it.
struct Old {
    /// Where it starts in the log.
    offset: u64,
    header: RecordHeader,
    bytes: Vec<u8>,
}

/// Pass 2 in progress: the new log's records, encoded one old record at a time.
struct Rewrite<'a> {
    /// The live runs erased, in seq order (earlier tombstones between them are kept).
    runs: &'a [(u64, u64)],
    reason: &'a str,
    at_ms: i64,
    /// Encoded bytes not yet written.
    out: Vec<u8>,
    /// Artifacts the kept events reference.
    referenced: BTreeSet<String>,
    /// Content events erased (earlier tombstones and placeholders not counted).
    erased: u64,
    /// `index_in_commit` of the seq after a run, while its commit (begun inside the run)
    /// lasts: its kept records move up by that much.
    shift: Option<u32>,
}

impl<'a> Rewrite<'a> {
    fn new(runs: &'a [(u64, u64)], reason: &'a str) -> Rewrite<'a> {
        Rewrite {
            runs,
            reason,
            at_ms: now_ms(),
            out: Vec::new(),
            referenced: BTreeSet::new(),
            erased: 0,
            shift: None,
        }
    }

    /// The run that erases `seq`, if any.
    fn run_of(&self, seq: u64) -> Option<(u64, u64)> {
        self.runs
            .iter()
            .find(|(a, b)| *a <= seq && seq <= *b)
            .copied()
    }

    /// Writes the tombstone (at the run's start) or a covered placeholder in place of `seq`
    /// of run `from..=to`.
    fn erase(&mut self, seq: u64, (from, to): (u64, u64), body: &EventBody) -> Result<()> {
        if !is_placeholder(seq, body) && lead_range(seq, body).is_none() {
            self.erased += 1;
        }
        let tomb = run_body(seq, from, to, self.at_ms, self.reason);
        let json = serde_json::to_vec(&tomb)
            .map_err(|e| Error::invalid(format!("tombstone cannot be encoded: {e}")))?;
        let flags = if seq == to { FLAG_END_OF_COMMIT } else { 0 };
        let index = (seq - from) as u32;
        let (kind, ts) = (EventKind::System, self.at_ms);
        format::encode_record(&mut self.out, kind, flags, index, seq, ts, &json, &[]);
        Ok(())
    }

    /// Copies a kept record (earlier tombstones byte for byte), re-framed when a run cut its
    /// commit.
    fn keep(&mut self, seq: u64, old: &Old, body: &EventBody) {
        for r in body.artifact_refs() {
            self.referenced.insert(r.name.clone());
        }
        let h = &old.header;
        let after_run = self.runs.iter().any(|(_, b)| seq == b + 1);
        if after_run && h.index_in_commit != 0 {
            self.shift = Some(h.index_in_commit);
        }
        let before_run = self.runs.iter().any(|(a, _)| seq + 1 == *a);
        let cut_before = before_run && !h.ends_commit();
        match (cut_before, self.shift) {
            (true, _) => reframe(&mut self.out, old, h.index_in_commit, true),
            (false, Some(s)) => reframe(&mut self.out, old, h.index_in_commit - s, false),
            (false, None) => self.out.extend_from_slice(&old.bytes),
        }
        if self.shift.is_some() && h.ends_commit() {
            self.shift = None;
        }
    }
}

/// Checks, without changing anything, that an erasure reaching as `how` says would accept
/// `range` and `reason`.
pub(crate) fn check(
    state: &LedgerState,
    range: &RangeInclusive<u64>,
    how: Reach,
    reason: &str,
) -> Result<()> {
    crate::rules::check_erase(range, state.last_seq(), reason)?;
    crate::rules::check_reach(range, how, state.last_seq())?;
    check_dirs_inside(state.storage().as_ref())
}

/// The widened range when earlier tombstones already cover all of it: erasing it again
/// must change nothing (a tombstone is an audit record, never rewritten;
/// docs/design.md#e6-listing-and-tombstones).
pub(crate) fn already_erased(
    state: &LedgerState,
    range: &RangeInclusive<u64>,
    how: Reach,
) -> Result<Option<(u64, u64)>> {
    let leads = tombstones(state)?;
    let (from, to) = reach(
        *range.start(),
        *range.end(),
        how,
        state.user_seqs(),
        &leads,
        state.last_seq(),
    );
    let covered: u64 = leads
        .iter()
        .filter(|(a, b)| from <= *a && *b <= to)
        .map(|(a, b)| b - a + 1)
        .sum();
    Ok((covered == to - from + 1).then_some((from, to)))
}

/// The leading tombstones already in the log: `(from, to)` ranges. The seqs a tombstone
/// covers are stepped over unread (anything inside its range is absorbed by it anyway),
/// so an erased range costs one read, not one per placeholder.
fn tombstones(state: &LedgerState) -> Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut seq = 1;
    while seq <= state.last_seq() {
        if state.kind(seq) == Some(EventKind::System) {
            match state.raw_event(seq) {
                Ok(e) => {
                    if let Some((from, to)) = lead_range(seq, &e.body) {
                        out.push((from, to));
                        seq = to.saturating_add(1);
                        continue;
                    }
                }
                // A damaged record leads nothing an erasure could keep; an erasure that
                // reaches it is refused before anything is written (`carry.rs`).
                Err(Error::Corrupt { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        seq += 1;
    }
    Ok(out)
}

/// Erases `range` from the writer's `state` (see [`crate::Ledger::erase`]). Sets `poisoned`
/// while the state's log has been replaced but not yet reloaded.
pub(crate) fn erase(
    state: &mut LedgerState,
    (range, how, reason): (RangeInclusive<u64>, Reach, &str),
    syncs: bool,
    poisoned: &mut bool,
    before_replace: &mut dyn FnMut() -> Result<()>,
) -> Result<ErasureReport> {
    Eraser {
        state,
        syncs,
        poisoned,
    }
    .run(range, how, reason, before_replace)
}

/// Finishes an erasure that a crash (or a failure past its rename) left unfinished; see
/// [`Eraser::finish_pending`]. Returns true when there was something to finish.
pub(crate) fn finish_pending(
    state: &mut LedgerState,
    syncs: bool,
    keep: Option<&str>,
) -> Result<bool> {
    let mut unused = false;
    Eraser {
        state,
        syncs,
        poisoned: &mut unused,
    }
    .finish_pending(keep)
}

/// An erasure over the writer's state.
struct Eraser<'a> {
    state: &'a mut LedgerState,
    syncs: bool,
    poisoned: &'a mut bool,
}

impl Eraser<'_> {
    fn syncs(&self) -> bool {
        self.syncs
    }

    /// Runs the erasure of `range`; see [`crate::Ledger::erase`] for the steps and what a
    /// failure at each leaves.
    fn run(
        &mut self,
        range: RangeInclusive<u64>,
        how: Reach,
        reason: &str,
        before_replace: &mut dyn FnMut() -> Result<()>,
    ) -> Result<ErasureReport> {
        check(self.state, &range, how, reason)?;
        let (req_from, req_to) = (*range.start(), *range.end());
        let leads = tombstones(self.state)?;
        self.check_leads(&leads)?;
        if let Some((from, to)) = already_erased(self.state, &range, how)? {
            return Ok(ErasureReport {
                from,
                to,
                requested: (req_from, req_to),
                events: 0,
                artifacts_deleted: 0,
                recovered_deleted: 0,
                ledger_id: crate::hex::encode(self.state.header().ledger_id.as_slice()),
                already_erased: true,
            });
        }
        let (from, to) = reach(
            req_from,
            req_to,
            how,
            self.state.user_seqs(),
            &leads,
            self.state.last_seq(),
        );
        let runs = live_runs(from, to, &leads);
        let st = self.state.storage().clone();
        let tmp = format!("{}.tmp", names::LOG);
        let ledger_id = new_ledger_id();
        let reason = erase_reason(reason);
        let rewrite = self.rewrite(&tmp, ledger_id, &runs, reason, (from, to));
        let (events, referenced, layout) = match rewrite {
            Ok(v) => v,
            Err(e) => {
                let _ = st.remove(&tmp);
                return Err(e);
            }
        };
        // Every refusal is behind us: the caller drops what it derived from the old log (a
        // refused erasure leaves it, like every byte, as it was).
        if let Err(e) = before_replace() {
            let _ = st.remove(&tmp);
            return Err(e);
        }
        let index = layout
            .as_ref()
            .map(|l| crate::carry::pending_bytes(&ledger_id, &l.carried));
        if let Err(e) = self.mark_pending(index.as_deref()) {
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
        *self.poisoned = true;
        self.state.retire();
        if self.syncs() {
            st.sync_dir("").map_err(io_err(st.as_ref(), ""))?;
        }
        if let Some(layout) = &layout {
            // No scan indexes a log past its damage: the sidecars are built from the entries
            // carried with it, and synced, while `erase.pending` still records them.
            *self.state = crate::carry::index_around(st.clone(), &layout.carried)?;
        }
        let artifacts_deleted = delete_unreferenced(st.as_ref(), &referenced, self.syncs())?;
        let recovered_deleted = delete_recovered(st.as_ref(), self.syncs(), None)?;
        // Nothing erased is left outside the log: a crash from here on needs no cleanup (and
        // if this removal is lost, the next open only repeats deletions already done).
        let _ = st.remove(names::ERASE_PENDING);
        if layout.is_none() {
            self.reload()?;
        }
        *self.poisoned = false;
        Ok(ErasureReport {
            from,
            to,
            requested: (req_from, req_to),
            events,
            artifacts_deleted,
            recovered_deleted,
            ledger_id: crate::hex::encode(&ledger_id),
            already_erased: false,
        })
    }

    /// Creates [`names::ERASE_PENDING`] holding `index` (what an erasure around damage needs
    /// to index the new log, `carry.rs`; empty otherwise), durably (file and directory
    /// synced) before the rename that it must precede: a crash after the rename then always
    /// finds it.
    fn mark_pending(&self, index: Option<&[u8]>) -> Result<()> {
        let st = self.state.storage().as_ref();
        let name = names::ERASE_PENDING;
        let mut f = crate::files::create_fresh(st, name)?;
        if let Some(index) = index {
            f.write_at(0, index).map_err(io_err(st, name))?;
            if self.syncs() {
                f.sync().map_err(io_err(st, name))?;
            }
        }
        drop(f);
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
    fn finish_pending(&mut self, keep: Option<&str>) -> Result<bool> {
        let st = self.state.storage().clone();
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

    /// Every artifact name the events of the log reference (one sequential read). On a
    /// damaged log: those its intact records reference, and those named in its damaged bytes.
    fn referenced_artifacts(&self) -> Result<BTreeSet<String>> {
        match self.references(None) {
            Err(Error::Corrupt { .. }) => {
                let layout = Layout::plan(self.state, None)?;
                let mut referenced = self.references(Some(&layout))?;
                referenced.extend(self.named_in_damage(&layout, &referenced)?);
                Ok(referenced)
            }
            other => other,
        }
    }

    /// The artifact names the intact records of the log reference.
    fn references(&self, layout: Option<&Layout>) -> Result<BTreeSet<String>> {
        let mut referenced = BTreeSet::new();
        self.for_each_piece(layout, |piece| {
            if let Piece::Record(seq, old) = piece
                && matches!(old.header.kind, EventKind::ToolResult | EventKind::User)
            {
                let body = self.body(seq, old)?;
                referenced.extend(body.artifact_refs().into_iter().map(|r| r.name.clone()));
            }
            Ok(())
        })?;
        Ok(referenced)
    }

    /// The artifacts (temporary files aside) that `referenced` does not name but the damaged
    /// bytes of `layout` do: a damaged record may reference them, so a later repair must
    /// still find them.
    fn named_in_damage(
        &self,
        layout: &Layout,
        referenced: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>> {
        let st = self.state.storage().as_ref();
        let dir = names::ARTIFACTS;
        if !st.is_dir(dir).map_err(io_err(st, dir))? {
            return Ok(BTreeSet::new());
        }
        let candidates = st
            .list(dir)
            .map_err(io_err(st, dir))?
            .into_iter()
            .filter(|n| !n.starts_with(".tmp-") && !referenced.contains(n))
            .collect();
        layout
            .named_in_damage(self.state.log(), &candidates)
            .map_err(io_err(st, names::LOG))
    }

    /// Hands every piece of the log to `f` in log order: with no `layout`, every record (the
    /// log must have no damage); with one, its intact records and damaged ranges.
    fn for_each_piece(
        &self,
        layout: Option<&Layout>,
        mut f: impl FnMut(Piece<'_>) -> Result<()>,
    ) -> Result<()> {
        let Some(layout) = layout else {
            return self.for_each_old(|seq, old| f(Piece::Record(seq, old)));
        };
        let mut w = Window::new(self.state.log(), self.state.log_len());
        let mut ranges = layout.carried.iter().enumerate().peekable();
        for k in &layout.kept {
            while let Some((i, _)) = ranges.next_if(|(_, c)| c.old_offset < k.offset) {
                f(Piece::Damaged(i))?;
            }
            let seq = k.header.seq;
            let old =
                read_old(&mut w, k.offset, seq).map_err(|e| self.corrupt(k.offset, seq, e))?;
            f(Piece::Record(seq, &old))?;
        }
        ranges.try_for_each(|(i, _)| f(Piece::Damaged(i)))
    }

    /// Hands every record of the log to `f`, in seq order (one sequential read), each checked
    /// against its checksum and seq.
    fn for_each_old(&self, mut f: impl FnMut(u64, &Old) -> Result<()>) -> Result<()> {
        let mut w = Window::new(self.state.log(), self.state.log_len());
        let mut pos = LOG_HEADER_LEN as u64;
        for seq in 1..=self.state.last_seq() {
            let old = read_old(&mut w, pos, seq).map_err(|e| self.corrupt(pos, seq, e))?;
            pos += old.header.record_len();
            f(seq, &old)?;
        }
        Ok(())
    }

    /// The event body of `old`, the record of `seq`.
    fn body(&self, seq: u64, old: &Old) -> Result<EventBody> {
        decode_body(old).map_err(|e| self.corrupt(old.offset, seq, e))
    }

    /// Refuses (before anything is written) a tombstone that claims seqs past the end of the
    /// log: the rewrite would end inside its run, i.e. with an incomplete commit that the
    /// next open cuts. `verify` reports such a log as corrupt.
    fn check_leads(&self, leads: &[(u64, u64)]) -> Result<()> {
        match leads.iter().find(|(_, to)| *to > self.state.last_seq()) {
            Some(&(from, to)) => Err(Error::Corrupt {
                path: self.state.log_path(),
                offset: self.state.entry(from)?.offset,
                seq: Some(from),
                reason: format!(
                    "the tombstone at seq {from} covers seqs up to {to}, past the end of the \
                     log ({})",
                    self.state.last_seq()
                ),
            }),
            None => Ok(()),
        }
    }

    /// Pass 2 ([`Eraser::write_rewritten`]); when it finds damage, again around it
    /// ([`Layout::plan`] refuses first when `range` reaches the damage). Returns what pass 2
    /// does, plus artifacts named in the damaged bytes, and the layout when there was damage.
    fn rewrite(
        &self,
        tmp: &str,
        ledger_id: [u8; 16],
        runs: &[(u64, u64)],
        reason: &str,
        range: (u64, u64),
    ) -> Result<(u64, BTreeSet<String>, Option<Layout>)> {
        match self.write_rewritten(tmp, ledger_id, runs, reason, None) {
            Err(Error::Corrupt { .. }) => {}
            done => return done.map(|(events, referenced)| (events, referenced, None)),
        }
        let mut layout = Layout::plan(self.state, Some(range))?;
        let (events, mut referenced) =
            self.write_rewritten(tmp, ledger_id, runs, reason, Some(&mut layout))?;
        referenced.extend(self.named_in_damage(&layout, &referenced)?);
        Ok((events, referenced, Some(layout)))
    }

    /// Pass 2: writes the new log to `tmp` (synced per the sync mode), `runs` erased, each
    /// damaged range of `layout` copied verbatim (and moved to where it now lies). Returns
    /// the number of content events erased and the artifacts the kept events reference.
    fn write_rewritten(
        &self,
        tmp: &str,
        ledger_id: [u8; 16],
        runs: &[(u64, u64)],
        reason: &str,
        mut layout: Option<&mut Layout>,
    ) -> Result<(u64, BTreeSet<String>)> {
        let st = self.state.storage().as_ref();
        let io = |e| io_err(st, tmp)(e);
        let mut f = crate::files::create_fresh(st, tmp)?;
        f.set_len(0).map_err(io)?;
        let header = LogHeader::new(ledger_id, self.state.header().created_ms);
        let mut r = Rewrite::new(runs, reason);
        r.out.extend_from_slice(&header.encode());
        let mut at = 0u64;
        let mut moved = Vec::new();
        let view = layout.as_deref();
        self.for_each_piece(view, |piece| {
            match piece {
                Piece::Record(seq, old) => {
                    let body = self.body(seq, old)?;
                    if let Some(run) = r.run_of(seq) {
                        r.erase(seq, run, &body)?;
                    } else {
                        r.keep(seq, old, &body);
                    }
                }
                Piece::Damaged(i) => {
                    f.write_at(at, &r.out).map_err(io)?;
                    at += r.out.len() as u64;
                    r.out.clear();
                    let c = view.map(|l| &l.carried[i]);
                    let (from, len) = c.map_or((0, 0), |c| (c.old_offset, c.bytes));
                    copy_bytes(self.state.log(), from, len, f.as_mut(), at).map_err(io)?;
                    moved.push((i, at));
                    at += len;
                }
            }
            if r.out.len() >= WRITE_CHUNK {
                f.write_at(at, &r.out).map_err(io)?;
                at += r.out.len() as u64;
                r.out.clear();
            }
            Ok(())
        })?;
        f.write_at(at, &r.out).map_err(io)?;
        if self.syncs() {
            f.sync().map_err(io)?;
        }
        if let Some(layout) = layout.as_mut() {
            for (i, at) in moved {
                layout.carried[i].move_to(at);
            }
        }
        Ok((r.erased, r.referenced))
    }

    fn corrupt(&self, offset: u64, seq: u64, reason: String) -> Error {
        Error::Corrupt {
            path: self.state.log_path(),
            offset,
            seq: Some(seq),
            reason,
        }
    }

    /// Reloads the state from the new log and rebuilds the sidecars (deleted first, so
    /// nothing of the old ones survives).
    fn reload(&mut self) -> Result<()> {
        let st = self.state.storage().clone();
        crate::sidecar::remove_all(st.as_ref())?;
        let loaded = LedgerState::load(st, true)?;
        if loaded.tail != Tail::Clean {
            return Err(Error::Corrupt {
                path: loaded.state.log_path(),
                offset: loaded.state.log_len(),
                seq: None,
                reason: "the rewritten log does not end with a complete commit".into(),
            });
        }
        let mut state = loaded.state;
        state.attach_sidecars()?;
        let _ = state.flush_sidecars();
        *self.state = state;
        Ok(())
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
    Ok(Old {
        offset: pos,
        header,
        bytes,
    })
}

/// Copies `len` bytes of `from` at `offset` to `to` at `at`, in chunks.
fn copy_bytes(
    from: &dyn StorageFile,
    offset: u64,
    len: u64,
    to: &mut dyn StorageFile,
    at: u64,
) -> std::io::Result<()> {
    let mut done = 0;
    while done < len {
        let n = (len - done).min(WRITE_CHUNK as u64);
        let mut buf = vec![0u8; n as usize];
        from.read_at(offset + done, &mut buf)?;
        to.write_at(at + done, &buf)?;
        done += n;
    }
    Ok(())
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
/// elsewhere through a symlink (docs/design.md#r7-scope). Checked before anything is written.
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
    delete_all_but(st, names::ARTIFACTS, sync, |name| referenced.contains(name))
}

/// Deletes every file under `recovered/` but `keep`: cut tails may hold erased bytes.
fn delete_recovered(st: &dyn Storage, sync: bool, keep: Option<&str>) -> Result<u64> {
    delete_all_but(st, names::RECOVERED, sync, |name| keep == Some(name))
}

/// Deletes every file in `dir` that `kept` does not pick, then syncs `dir` (when `sync` and
/// something was deleted); returns how many were deleted.
fn delete_all_but(
    st: &dyn Storage,
    dir: &str,
    sync: bool,
    kept: impl Fn(&str) -> bool,
) -> Result<u64> {
    let mut deleted = 0;
    for name in st.list(dir).map_err(io_err(st, dir))? {
        if kept(&name) {
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

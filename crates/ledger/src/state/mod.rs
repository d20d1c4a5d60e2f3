//! [`LedgerState`]: the committed state of one ledger as a reader or the writer holds it in
//! memory, and the only code that changes it. Loading it (the log header, the sidecars
//! checked against the log, a scan of what they do not cover) is here; reading events by
//! seq is in `read.rs`.

mod read;

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::files::{io_err, open_file};
use crate::format::{
    CommitEntry, Counts, EventEntry, FORMAT_VERSION, LOG_HEADER_LEN, LogHeader, names,
};
use crate::scan::{self, Scan, ScanStart, Tail};
use crate::sidecar::{self, Kind, SidecarFiles, Trusted, WRITE_ORDER};
use crate::storage::{OpenMode, Storage, StorageFile};

/// The committed state visible to a reader or the writer.
///
/// Invariants (kept by every method; nothing outside this module writes a field):
/// - `log_len` is the end of the last complete commit and `last_seq` the seq of its last
///   event; the log file may be longer only by a torn tail the reader ignores.
/// - Seqs `1..=indexed` are read through `ledger.idx` (`indexed = persisted[Events]`), and
///   `overlay[i]` is the entry of seq `indexed + 1 + i`, up to `last_seq`.
/// - `persisted[kind]` entries of each sidecar are in its file (what open trusted, plus what
///   flushes wrote); `indexed` never exceeds the seqs the other sidecars cover, because
///   `ledger.idx` is written last ([`WRITE_ORDER`]). What a sidecar lacks is in memory:
///   `user_seqs[persisted[Turns]..]`, `note_seqs[persisted[Notes]..]`, `pending_commits`.
/// - `turns_crc` / `notes_crc` are the running CRCs of all of `user_seqs` / `note_seqs`.
/// - `sidecar_files` is `Some` only in the writer, after [`LedgerState::attach_sidecars`].
/// - Once `retired`, the open log may hold erased content: reads fail with
///   [`Error::Poisoned`].
pub(crate) struct LedgerState {
    storage: Arc<dyn Storage>,
    log: Box<dyn StorageFile>,
    header: LogHeader,
    id_hex: String,
    /// `ledger.idx` open for reading, when it was found valid (or rebuilt).
    idx: Option<Box<dyn StorageFile>>,
    /// Entries in each sidecar file, by [`Kind`].
    persisted: [u64; 4],
    overlay: Vec<EventEntry>,
    user_seqs: Vec<u64>,
    note_seqs: Vec<u64>,
    /// Id-carrying commits not (yet) in `commits.idx`.
    pending_commits: Vec<CommitEntry>,
    log_len: u64,
    last_seq: u64,
    turns_crc: u32,
    notes_crc: u32,
    /// False when the sidecars were missing or did not match the log (rebuilt by the writer).
    sidecars_valid: bool,
    sidecar_files: Option<SidecarFiles>,
    /// True once an erasure has renamed its rewritten log over the one this state reads and
    /// then failed before reloading: the open file still holds the erased content.
    retired: bool,
}

/// What [`LedgerState::load`] found past the last complete commit.
pub(crate) struct Loaded {
    pub state: LedgerState,
    pub tail: Tail,
    pub file_len: u64,
}

/// The state's position before commits were staged: see [`LedgerState::mark`].
pub(crate) struct Mark {
    log_len: u64,
    last_seq: u64,
    overlay: usize,
    user_seqs: usize,
    note_seqs: usize,
    pending_commits: usize,
    turns_crc: u32,
    notes_crc: u32,
}

/// What a successful append added to the log, for [`LedgerState::apply`].
pub(crate) struct Appended {
    /// Bytes written at the old end of the log.
    pub bytes: u64,
    /// The `ledger.idx` entries of the new records.
    pub entries: Vec<EventEntry>,
    pub user_seqs: Vec<u64>,
    pub note_seqs: Vec<u64>,
    /// The commit, when it carried an id.
    pub commit: Option<CommitEntry>,
}

impl LedgerState {
    /// Opens the log and sidecars. Fails closed on corruption; a torn tail is returned in
    /// [`Loaded::tail`] for the caller to cut (writer) or ignore (reader).
    pub(crate) fn load(storage: Arc<dyn Storage>, writable: bool) -> Result<Loaded> {
        let mode = if writable {
            OpenMode::Write
        } else {
            OpenMode::Read
        };
        let st = storage.as_ref();
        let log = st
            .open(names::LOG, mode)
            .map_err(io_err(st, names::LOG))?
            .ok_or_else(|| Error::Io {
                path: st.location().join(names::LOG),
                source: io::Error::new(io::ErrorKind::NotFound, "no ledger in this directory"),
            })?;
        let file_len = log.len().map_err(io_err(st, names::LOG))?;
        let header = read_header(st, log.as_ref(), file_len)?;
        // What the sidecars prove was acknowledged, read before the log's length (a writer
        // appends them only after the log), then checked against what the log holds.
        let acked = sidecar::acknowledged(st, Some(&header.ledger_id))
            .map_err(io_err(st, names::EVENT_INDEX))?;
        let witnessed = sidecar::witnessed(st, Some(&header.ledger_id))
            .map_err(io_err(st, names::TURN_INDEX))?;
        let file_len = log.len().map_err(io_err(st, names::LOG))?;
        let trusted = sidecar::load(st, mode, &header.ledger_id, log.as_ref(), file_len)
            .map_err(io_err(st, names::EVENT_INDEX))?;
        let start = trusted.as_ref().map_or(ScanStart::log_start(), scan_start);
        let found = scan::scan(log.as_ref(), file_len, start)
            .map_err(io_err(st, names::LOG))?
            .or_corrupt(st.location().join(names::LOG))?;
        let tail = found.tail();
        // Before a torn tail is cut, every surviving witness of acknowledged seqs counts.
        let acked = if found.good_end < file_len {
            sidecar::later(acked, witnessed)
        } else {
            acked
        };
        sidecar::check_acknowledged(st, acked, found.last_seq, found.good_end)?;
        let state = LedgerState::assemble(storage.clone(), log, header, trusted, found);
        Ok(Loaded {
            state,
            tail,
            file_len,
        })
    }

    /// The writer's state over `log` (open for writing) as `found` indexes it: a scan built
    /// by its caller, because no ordinary scan reads the whole log (an erasure around damage,
    /// `carry.rs`). No sidecar is trusted: [`LedgerState::attach_sidecars`] rebuilds them.
    pub(crate) fn with_scan(
        storage: Arc<dyn Storage>,
        log: Box<dyn StorageFile>,
        found: Scan,
    ) -> Result<LedgerState> {
        let st = storage.as_ref();
        let file_len = log.len().map_err(io_err(st, names::LOG))?;
        let header = read_header(st, log.as_ref(), file_len)?;
        Ok(LedgerState::assemble(storage, log, header, None, found))
    }

    fn assemble(
        storage: Arc<dyn Storage>,
        log: Box<dyn StorageFile>,
        header: LogHeader,
        trusted: Option<Trusted>,
        found: Scan,
    ) -> LedgerState {
        let id_hex = crate::hex::encode(&header.ledger_id);
        let last = found
            .entries
            .last()
            .or(trusted.as_ref().and_then(|t| t.last.as_ref()));
        let (turns_crc, notes_crc) = last.map_or((0, 0), |e| (e.turns_crc, e.notes_crc));
        let sidecars_valid = trusted.is_some();
        let (idx, indexed, mut user_seqs, mut note_seqs, commits) = match trusted {
            Some(t) => (Some(t.idx), t.indexed, t.user_seqs, t.note_seqs, t.commits),
            None => (None, 0, Vec::new(), Vec::new(), 0),
        };
        let mut persisted = [0u64; 4];
        persisted[Kind::Events as usize] = indexed;
        persisted[Kind::Turns as usize] = user_seqs.len() as u64;
        persisted[Kind::Notes as usize] = note_seqs.len() as u64;
        persisted[Kind::Commits as usize] = commits;
        user_seqs.extend_from_slice(&found.user_seqs);
        note_seqs.extend_from_slice(&found.note_seqs);
        LedgerState {
            storage,
            log,
            header,
            id_hex,
            idx,
            persisted,
            overlay: found.entries,
            user_seqs,
            note_seqs,
            pending_commits: found.commits,
            log_len: found.good_end,
            last_seq: found.last_seq,
            turns_crc,
            notes_crc,
            sidecars_valid,
            sidecar_files: None,
            retired: false,
        }
    }

    // ---- what it holds ------------------------------------------------------------------

    pub(crate) fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }
    /// The open log (for sequential reads: erasure, the commit-table rebuild).
    pub(crate) fn log(&self) -> &dyn StorageFile {
        self.log.as_ref()
    }
    pub(crate) fn header(&self) -> &LogHeader {
        &self.header
    }
    pub(crate) fn ledger_id(&self) -> &str {
        &self.id_hex
    }
    pub(crate) fn log_path(&self) -> PathBuf {
        self.storage.location().join(names::LOG)
    }
    /// End of the last complete commit.
    pub(crate) fn log_len(&self) -> u64 {
        self.log_len
    }
    pub(crate) fn last_seq(&self) -> u64 {
        self.last_seq
    }
    /// Seqs of the user events (turn starts), ascending.
    pub(crate) fn user_seqs(&self) -> &[u64] {
        &self.user_seqs
    }
    /// Seqs of the note events, ascending.
    pub(crate) fn note_seqs(&self) -> &[u64] {
        &self.note_seqs
    }
    /// Running CRCs of `user_seqs` and `note_seqs` as sidecar entries.
    pub(crate) fn seq_crcs(&self) -> (u32, u32) {
        (self.turns_crc, self.notes_crc)
    }
    /// False when open found the sidecars missing or stale.
    pub(crate) fn sidecars_valid(&self) -> bool {
        self.sidecars_valid
    }
    /// True when some committed events are not in `ledger.idx` yet.
    pub(crate) fn has_unindexed(&self) -> bool {
        !self.overlay.is_empty()
    }
    /// Id-carrying commits so far.
    pub(crate) fn commit_count(&self) -> u32 {
        (self.persisted[Kind::Commits as usize] + self.pending_commits.len() as u64) as u32
    }
    fn indexed(&self) -> u64 {
        self.persisted[Kind::Events as usize]
    }

    // ---- the log ------------------------------------------------------------------------

    /// Truncates the log at `offset` (the start of a torn tail, saved aside by the caller)
    /// and syncs it.
    pub(crate) fn truncate_log(&mut self, offset: u64) -> Result<()> {
        let io = || io_err(self.storage.as_ref(), names::LOG);
        self.log.set_len(offset).map_err(io())?;
        self.log.sync().map_err(io())
    }

    /// Syncs the log.
    pub(crate) fn sync_log(&mut self) -> Result<()> {
        let io = io_err(self.storage.as_ref(), names::LOG);
        self.log.sync().map_err(io)
    }

    /// Where the state stands now, so that commits applied ahead of their write (staged, see
    /// [`LedgerState::write_staged`]) can be taken back.
    pub(crate) fn mark(&self) -> Mark {
        Mark {
            log_len: self.log_len,
            last_seq: self.last_seq,
            overlay: self.overlay.len(),
            user_seqs: self.user_seqs.len(),
            note_seqs: self.note_seqs.len(),
            pending_commits: self.pending_commits.len(),
            turns_crc: self.turns_crc,
            notes_crc: self.notes_crc,
        }
    }

    /// Takes back every commit applied since `mark` (none of them was written).
    pub(crate) fn rollback(&mut self, mark: &Mark) {
        self.log_len = mark.log_len;
        self.last_seq = mark.last_seq;
        self.overlay.truncate(mark.overlay);
        self.user_seqs.truncate(mark.user_seqs);
        self.note_seqs.truncate(mark.note_seqs);
        self.pending_commits.truncate(mark.pending_commits);
        self.turns_crc = mark.turns_crc;
        self.notes_crc = mark.notes_crc;
    }

    /// Checks, before a write at `mark`, what a writer can see without a full scan: the log
    /// ends exactly where the last commit ended (not cut, nothing appended by anyone else)
    /// and the last record checks out. Damage earlier in the log is found by reads of it and
    /// by `verify`, not here.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming what was found; I/O.
    pub(crate) fn check_tail(&self, mark: &Mark) -> Result<()> {
        let len = self
            .log
            .len()
            .map_err(io_err(self.storage.as_ref(), names::LOG))?;
        if len != mark.log_len {
            let how = if len < mark.log_len {
                "shorter than the commits acknowledged so far: it was cut under the writer"
            } else {
                "longer than the commits acknowledged so far: something else wrote to it"
            };
            return Err(Error::Corrupt {
                path: self.log_path(),
                offset: len.min(mark.log_len),
                seq: Some(mark.last_seq + 1).filter(|_| len > mark.log_len),
                reason: format!(
                    "the log is {len} bytes, {how} ({} bytes); nothing was written",
                    mark.log_len
                ),
            });
        }
        if mark.last_seq > 0 {
            self.raw_event(mark.last_seq)?;
        }
        Ok(())
    }

    /// Writes `bytes`, the records of the commits applied (staged) since `mark`, at the
    /// mark's end of the log in one write, then syncs when `sync`. On failure the state is
    /// rolled back to `mark` and the log as [`LedgerState::append`] leaves it. Between
    /// staging and this call nothing may read the staged events from the log (they are not
    /// written yet) or flush the sidecars.
    pub(crate) fn write_staged(
        &mut self,
        mark: &Mark,
        bytes: &[u8],
        sync: bool,
        poisoned: &mut bool,
    ) -> Result<()> {
        let staged_len = self.log_len;
        self.log_len = mark.log_len;
        match self.append(bytes, sync, poisoned) {
            Ok(()) => {
                self.log_len = staged_len;
                Ok(())
            }
            Err(e) => {
                self.rollback(mark);
                Err(e)
            }
        }
    }

    /// Writes `bytes` at the end of the last complete commit, then syncs when `sync`. On a
    /// failed write the log is truncated back; a failed sync (or a failed truncation) sets
    /// `poisoned`. The state itself changes only in [`LedgerState::apply`].
    pub(crate) fn append(&mut self, bytes: &[u8], sync: bool, poisoned: &mut bool) -> Result<()> {
        self.upgrade_header(sync, poisoned)?;
        let io = io_err(self.storage.as_ref(), names::LOG);
        let at = self.log_len;
        if let Err(e) = self.log.write_at(at, bytes) {
            if self.log.set_len(at).is_err() {
                *poisoned = true;
            }
            return Err(io(e));
        }
        if sync && let Err(e) = self.log.sync() {
            *poisoned = true;
            let _ = self.log.set_len(at);
            return Err(io(e));
        }
        Ok(())
    }

    /// Takes in a commit that [`LedgerState::append`] wrote.
    pub(crate) fn apply(&mut self, a: Appended) {
        self.log_len += a.bytes;
        self.last_seq += a.entries.len() as u64;
        if let Some(last) = a.entries.last() {
            self.turns_crc = last.turns_crc;
            self.notes_crc = last.notes_crc;
        }
        self.overlay.extend(a.entries);
        self.user_seqs.extend(a.user_seqs);
        self.note_seqs.extend(a.note_seqs);
        self.pending_commits.extend(a.commit);
    }

    /// Marks the open log as replaced by a rewrite that kept none of its erased content: reads
    /// fail with [`Error::Poisoned`] from now on.
    pub(crate) fn retire(&mut self) {
        self.retired = true;
    }

    /// Takes in the commits made since this state was loaded (a reader's refresh).
    pub(crate) fn catch_up(&mut self) -> Result<()> {
        let st = self.storage.clone();
        let io = || io_err(st.as_ref(), names::LOG);
        let file_len = self.log.len().map_err(io())?;
        let last = self.entry(self.last_seq).ok();
        let start = ScanStart {
            offset: self.log_len.max(LOG_HEADER_LEN as u64),
            last_seq: self.last_seq,
            counts: Counts {
                turns: self.user_seqs.len() as u32,
                commits: last.map_or(0, |e| e.commits),
                turns_crc: self.turns_crc,
                notes: self.note_seqs.len() as u32,
                notes_crc: self.notes_crc,
            },
        };
        let found = scan::scan(self.log.as_ref(), file_len, start)
            .map_err(io())?
            .or_corrupt(self.log_path())?;
        self.take_scanned(found);
        Ok(())
    }

    fn take_scanned(&mut self, found: Scan) {
        if let Some(e) = found.entries.last() {
            self.turns_crc = e.turns_crc;
            self.notes_crc = e.notes_crc;
        }
        self.overlay.extend(found.entries);
        self.user_seqs.extend(found.user_seqs);
        self.note_seqs.extend(found.note_seqs);
        self.log_len = found.good_end;
        self.last_seq = found.last_seq;
    }

    /// True when `f` is the log this state has open (same header, not shorter).
    pub(crate) fn is_same_log(&self, f: &dyn StorageFile) -> Result<bool> {
        let io = || io_err(self.storage.as_ref(), names::LOG);
        let len = f.len().map_err(io())?;
        if len < self.log_len || len < LOG_HEADER_LEN as u64 {
            return Ok(false);
        }
        let mut b = [0u8; LOG_HEADER_LEN];
        f.read_at(0, &mut b).map_err(io())?;
        // The version is not compared: the writer raises it in place (see `upgrade_header`).
        Ok(LogHeader::decode(&b).is_ok_and(|h| {
            (h.ledger_id, h.created_ms) == (self.header.ledger_id, self.header.created_ms)
        }))
    }

    /// Raises an older log's header version to [`FORMAT_VERSION`] before the first record of
    /// this version is appended: the header is rewritten in place (only its version and
    /// checksum change) and synced first, so no newer record ever follows an older header
    /// once synced, and older code refuses the log instead of taking a newer record for a
    /// torn tail. A write stopped part way reads as version 1 ([`LogHeader::decode`]). A failed
    /// write or sync poisons the writer.
    fn upgrade_header(&mut self, sync: bool, poisoned: &mut bool) -> Result<()> {
        if self.header.version >= FORMAT_VERSION {
            return Ok(());
        }
        let io = io_err(self.storage.as_ref(), names::LOG);
        let upgraded = LogHeader::new(self.header.ledger_id, self.header.created_ms);
        let written = self.log.write_at(0, &upgraded.encode());
        let synced = written.and_then(|()| if sync { self.log.sync() } else { Ok(()) });
        if let Err(e) = synced {
            *poisoned = true;
            return Err(io(e));
        }
        self.header = upgraded;
        Ok(())
    }

    // ---- the sidecars (writer) ------------------------------------------------------------

    /// Makes the sidecar files match this state and opens them for appending: rebuilds all
    /// four when open found them missing or stale, else trims entries past what was
    /// validated.
    pub(crate) fn attach_sidecars(&mut self) -> Result<()> {
        let st = self.storage.clone();
        if !self.sidecars_valid {
            sidecar::rebuild(st.as_ref(), &self.header.ledger_id)?;
            self.persisted = [0; 4];
            self.sidecars_valid = true;
        }
        self.sidecar_files = Some(SidecarFiles::open_trimmed(st.as_ref(), self.persisted)?);
        self.idx = Some(open_file(st.as_ref(), names::EVENT_INDEX, OpenMode::Read)?);
        Ok(())
    }

    /// Appends what the sidecars lack, `ledger.idx` last. Failures are harmless: the entries
    /// stay in memory and the next flush (or the next open's tail scan) supplies them.
    pub(crate) fn flush_sidecars(&mut self) -> io::Result<()> {
        for kind in WRITE_ORDER {
            let bytes = self.unsaved(kind);
            let Some(files) = &mut self.sidecar_files else {
                return Ok(());
            };
            if !bytes.is_empty() {
                files.append(kind, self.persisted[kind as usize], &bytes)?;
                self.mark_saved(kind);
            }
        }
        Ok(())
    }

    /// Syncs every sidecar file and the directory (for sidecars no scan could rebuild: see
    /// `carry.rs`).
    pub(crate) fn sync_sidecars(&mut self) -> Result<()> {
        let st = self.storage.as_ref();
        if let Some(files) = &mut self.sidecar_files {
            files.sync_all().map_err(io_err(st, names::EVENT_INDEX))?;
        }
        st.sync_dir("").map_err(io_err(st, ""))
    }

    /// The encoded entries of `kind` that its file lacks.
    fn unsaved(&self, kind: Kind) -> Vec<u8> {
        let from = self.persisted[kind as usize] as usize;
        let seqs = |s: &[u64]| s[from..].iter().flat_map(|s| s.to_le_bytes()).collect();
        match kind {
            Kind::Events => self.overlay.iter().flat_map(|e| e.encode()).collect(),
            Kind::Turns => seqs(&self.user_seqs),
            Kind::Notes => seqs(&self.note_seqs),
            Kind::Commits => self
                .pending_commits
                .iter()
                .flat_map(|c| c.encode())
                .collect(),
        }
    }

    fn mark_saved(&mut self, kind: Kind) {
        let n = &mut self.persisted[kind as usize];
        match kind {
            Kind::Events => {
                *n += self.overlay.len() as u64;
                self.overlay.clear();
            }
            Kind::Turns => *n = self.user_seqs.len() as u64,
            Kind::Notes => *n = self.note_seqs.len() as u64,
            Kind::Commits => {
                *n += self.pending_commits.len() as u64;
                self.pending_commits.clear();
            }
        }
    }

    /// Every id-carrying commit: the persisted entries of `commits.idx` (one read), then
    /// those not yet in it. A damaged entry (it is a cache) is repaired from the log instead
    /// of failing: the table is rebuilt by one sequential scan and the sidecar rewritten.
    pub(crate) fn commit_entries(&mut self) -> Result<Vec<CommitEntry>> {
        let mut all = match self.read_commit_index()? {
            Some(entries) => entries,
            None => self.rebuild_commit_index()?,
        };
        all.extend_from_slice(&self.pending_commits);
        Ok(all)
    }

    /// The persisted entries of `commits.idx`; `None` when one fails its checksum.
    fn read_commit_index(&self) -> Result<Option<Vec<CommitEntry>>> {
        let n = self.persisted[Kind::Commits as usize];
        let raw = match &self.sidecar_files {
            Some(files) => files.read(Kind::Commits, n),
            None => Ok(Vec::new()),
        };
        let raw = raw.map_err(io_err(self.storage.as_ref(), names::COMMIT_INDEX))?;
        let len = sidecar::spec(Kind::Commits).entry_len;
        Ok(raw.chunks(len).map(CommitEntry::decode).collect())
    }

    /// Re-derives the commit table from the log's commit metadata and rewrites `commits.idx`
    /// with it. Returns the entries now in the file (all of them, or none if the rewrite
    /// failed, in which case they all wait in `pending_commits` for the next flush). Fails
    /// only on log corruption or I/O.
    fn rebuild_commit_index(&mut self) -> Result<Vec<CommitEntry>> {
        let found = self.rescan()?;
        let buf: Vec<u8> = found.commits.iter().flat_map(|c| c.encode()).collect();
        let written = match &mut self.sidecar_files {
            Some(files) => files.rewrite(Kind::Commits, &buf),
            None => Err(io::ErrorKind::NotFound.into()),
        };
        // The sidecar is a cache: if the rewrite failed, the next flush writes it all again.
        let persisted = if written.is_ok() {
            self.pending_commits.clear();
            found.commits
        } else {
            self.pending_commits = found.commits;
            Vec::new()
        };
        self.persisted[Kind::Commits as usize] = persisted.len() as u64;
        Ok(persisted)
    }

    /// One sequential scan of the committed log, which must still match this state.
    fn rescan(&self) -> Result<Scan> {
        let found = scan::scan(self.log.as_ref(), self.log_len, ScanStart::log_start())
            .map_err(io_err(self.storage.as_ref(), names::LOG))?
            .or_corrupt(self.log_path())?;
        if found.last_seq != self.last_seq {
            return Err(Error::Corrupt {
                path: self.log_path(),
                offset: found.good_end,
                seq: Some(found.last_seq + 1),
                reason: "the log no longer matches the state it was opened in".to_string(),
            });
        }
        Ok(found)
    }
}

fn scan_start(t: &Trusted) -> ScanStart {
    match t.last {
        Some(e) => ScanStart {
            offset: e.end(),
            last_seq: t.indexed,
            counts: Counts::of(&e),
        },
        None => ScanStart::log_start(),
    }
}

/// The log's header, or [`Error::Corrupt`] when the file (`file_len` bytes) is shorter than
/// one or it does not decode.
pub(crate) fn read_header(
    st: &dyn Storage,
    log: &dyn StorageFile,
    file_len: u64,
) -> Result<LogHeader> {
    let corrupt = |reason: String| Error::Corrupt {
        path: st.location().join(names::LOG),
        offset: 0,
        seq: None,
        reason,
    };
    if file_len < LOG_HEADER_LEN as u64 {
        // One verdict with the writer's open: commits the sidecars prove were acknowledged
        // mean the log lost them, not a creation cut short.
        let acked =
            crate::sidecar::acknowledged(st, None).map_err(io_err(st, names::EVENT_INDEX))?;
        crate::sidecar::check_acknowledged(st, acked, 0, 0)?;
        return Err(corrupt(format!(
            "file is {file_len} bytes, shorter than its header (a creation cut short: no \
             record can exist; the next writer open recreates it)"
        )));
    }
    let mut b = [0u8; LOG_HEADER_LEN];
    log.read_at(0, &mut b).map_err(io_err(st, names::LOG))?;
    LogHeader::decode(&b).map_err(corrupt)
}

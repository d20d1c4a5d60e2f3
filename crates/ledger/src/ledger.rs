//! The one writer of a conversation: open (lock, recover), commit (validate, store artifacts,
//! append, sync, update the sidecars).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::core::{Core, io_err};
use crate::error::{Error, Result};
use crate::event::{EventBody, NewCommit, SystemMarker};
use crate::format::{
    self, COMMIT_ENTRY_LEN, CommitEntry, EVENT_ENTRY_LEN, EventEntry, FLAG_END_OF_COMMIT,
    INDEX_HEADER_LEN, NOTE_ENTRY_LEN, RECORD_HEADER_LEN, TURN_ENTRY_LEN, names,
};
use crate::open::{
    Sidecars, check_whole_log, create_log_if_missing, cut_tail, now_ms, prepare_sidecars,
    recreate_if_torn_at_creation,
};
use crate::scan::{CommitMeta, Tail};
use crate::storage::{DirStorage, LockGuard, OpenMode, Storage, StorageFile};
use crate::validate::{self, Origin, TurnState};

/// When `commit` makes its bytes durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncMode {
    /// fsync (fdatasync) the log after every commit, and artifacts before it. The default:
    /// `commit` returns only after the batch is on disk (SPEC L1).
    #[default]
    PerCommit,
    /// Never sync. A crash of the machine (not just the process) may lose acknowledged commits;
    /// a torn tail is still detected and cut. For tests and bulk imports.
    Never,
}

/// Settings for [`Ledger::open`]. Build with `Options::default()` and the setters.
#[derive(Clone, Debug)]
pub struct Options {
    sync: SyncMode,
    max_record_bytes: u64,
    max_commit_bytes: u64,
    max_ledger_bytes: u64,
    artifact_threshold: u64,
    lock_wait: Option<Duration>,
    check_on_open: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            sync: SyncMode::PerCommit,
            max_record_bytes: 4 << 20,
            max_commit_bytes: 16 << 20,
            max_ledger_bytes: 64 << 30,
            artifact_threshold: 16 << 10,
            lock_wait: None,
            check_on_open: false,
        }
    }
}

impl Options {
    /// Sync policy. Default [`SyncMode::PerCommit`].
    pub fn sync(&mut self, mode: SyncMode) -> &mut Options {
        self.sync = mode;
        self
    }
    /// Largest record (40-byte header + event JSON + commit metadata). Default 4 MiB.
    pub fn max_record_bytes(&mut self, bytes: u64) -> &mut Options {
        self.max_record_bytes = bytes;
        self
    }
    /// Largest commit: its records plus the artifacts it creates. Default 16 MiB.
    pub fn max_commit_bytes(&mut self, bytes: u64) -> &mut Options {
        self.max_commit_bytes = bytes;
        self
    }
    /// Largest `ledger.log`. Default 64 GiB.
    pub fn max_ledger_bytes(&mut self, bytes: u64) -> &mut Options {
        self.max_ledger_bytes = bytes;
        self
    }
    /// A tool result whose text is longer than this many bytes is stored as an artifact and
    /// the event keeps a head/tail excerpt. Default 16 KiB.
    pub fn artifact_threshold(&mut self, bytes: u64) -> &mut Options {
        self.artifact_threshold = bytes;
        self
    }
    /// How long `open` waits for another writer to let go. Default `None`: fail at once with
    /// [`Error::Locked`].
    pub fn lock_wait(&mut self, wait: Option<Duration>) -> &mut Options {
        self.lock_wait = wait;
        self
    }
    /// Check every record's checksum on open (one sequential read of the whole log), so that
    /// corruption anywhere fails the open. Default `false`: open reads only what the sidecar
    /// index does not cover (SPEC L7); damage inside the indexed part is then found when the
    /// damaged record is read (every read checks its CRC) and by [`crate::verify`].
    pub fn check_on_open(&mut self, check: bool) -> &mut Options {
        self.check_on_open = check;
        self
    }
    /// A copy of these options (the builder is reusable).
    pub fn build(&self) -> Options {
        self.clone()
    }
}

/// What a commit wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CommitReceipt {
    /// Seq of the first event written.
    pub first_seq: u64,
    /// Seq of the last event written.
    pub last_seq: u64,
    /// True when this is the receipt of an earlier commit with the same id and content:
    /// nothing was written this time.
    pub replayed: bool,
}

/// What `open` repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    /// Bytes cut from the end of the log (an incomplete commit or a torn record).
    pub bytes_cut: u64,
    /// Seq of the last event of the last complete commit kept.
    pub last_good_seq: u64,
    /// Where the cut bytes were saved, if any were cut.
    pub saved_to: Option<PathBuf>,
    /// Why the tail was cut.
    pub reason: Option<String>,
    /// True when the sidecar index was missing or stale and rebuilt from the log.
    pub index_rebuilt: bool,
}

impl RecoveryReport {
    /// True when nothing was cut.
    pub fn is_clean(&self) -> bool {
        self.bytes_cut == 0
    }
}

/// The one writer of a conversation. Holds the directory's OS lock until dropped.
pub struct Ledger {
    pub(crate) core: Core,
    options: Options,
    pub(crate) turns_file: Box<dyn StorageFile>,
    pub(crate) notes_file: Box<dyn StorageFile>,
    pub(crate) commits_file: Box<dyn StorageFile>,
    pub(crate) ids: Option<HashMap<[u8; 32], CommitEntry>>,
    pub(crate) turn: Option<TurnState>,
    pub(crate) poisoned: bool,
    _lock: LockGuard,
}

struct Prepared {
    bytes: Vec<u8>,
    entries: Vec<EventEntry>,
    user_seqs: Vec<u64>,
    note_seqs: Vec<u64>,
    commit: Option<CommitEntry>,
    artifacts: Vec<Vec<u8>>,
}

impl Ledger {
    /// Opens (creating if missing) the conversation directory `dir` for writing.
    ///
    /// Takes the directory's lock (fails with [`Error::Locked`] if another writer holds it,
    /// after `lock_wait`), cuts and saves a torn tail, rebuilds a stale sidecar index, and
    /// fails closed with [`Error::Corrupt`] if a bad record has valid records after it.
    /// When an erasure was interrupted after replacing the log (`erase.pending` exists), it
    /// finishes it first: unreferenced artifacts and recovered tails are deleted (one read of
    /// the whole log, only in that case; see [`Ledger::erase`]).
    pub fn open(dir: &Path, options: &Options) -> Result<(Ledger, RecoveryReport)> {
        Ledger::open_with(Arc::new(DirStorage::new(dir)), options)
    }

    /// [`Ledger::open`] over any storage backend.
    pub fn open_with(
        storage: Arc<dyn Storage>,
        options: &Options,
    ) -> Result<(Ledger, RecoveryReport)> {
        let st = storage.as_ref();
        st.create_dir("").map_err(io_err(st, ""))?;
        let lock = st
            .try_lock(options.lock_wait)
            .map_err(io_err(st, names::LOCK))?
            .ok_or_else(|| Error::Locked {
                path: st.location(),
            })?;
        let recreated = recreate_if_torn_at_creation(st, options.sync)?;
        create_log_if_missing(st, options.sync)?;
        if options.check_on_open {
            check_whole_log(st)?;
        }
        let loaded = Core::load(storage.clone(), true)?;
        let mut report = recreated.unwrap_or_default();
        let mut core = loaded.core;
        if let Tail::Torn { offset, reason } = loaded.tail {
            report = cut_tail(&mut core, offset, loaded.file_len, reason)?;
        }
        report.last_good_seq = core.last_seq;
        report.index_rebuilt = !core.sidecars_valid;
        if options.sync == SyncMode::PerCommit && !core.overlay.is_empty() {
            // Commits past the index may be those of a process killed before its sync: make
            // them durable before this writer builds on them or acknowledges a retry of one.
            core.log.sync().map_err(io_err(st, names::LOG))?;
        }
        let Sidecars {
            turns: turns_file,
            notes: notes_file,
            commits: commits_file,
        } = prepare_sidecars(&mut core)?;
        let mut ledger = Ledger {
            core,
            options: options.clone(),
            turns_file,
            notes_file,
            commits_file,
            ids: None,
            turn: None,
            poisoned: false,
            _lock: lock,
        };
        let _ = ledger.flush_sidecars();
        let keep = report
            .saved_to
            .as_ref()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .map(str::to_owned);
        ledger.finish_pending_erasure(keep.as_deref())?;
        Ok((ledger, report))
    }

    /// The options this writer was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// True after a failed sync (or an unrecoverable failed write): commits are refused with
    /// [`Error::Poisoned`] until the conversation is reopened.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Appends `commit` atomically and, by default, durably.
    ///
    /// Validates first (nothing is written on any error but I/O), answers a repeated id from
    /// the idempotency table (same content → the original receipt, different → [`Error::Conflict`]),
    /// stores large tool outputs as synced artifacts, then appends all records in one write
    /// and syncs per [`SyncMode`]. On a failed write the log is truncated back; on a failed
    /// sync the writer is poisoned. In-memory state changes only after success.
    pub fn commit(&mut self, commit: &NewCommit) -> Result<CommitReceipt> {
        self.commit_from(commit, Origin::Application)
    }

    /// Appends one system marker (retention, import). Applications cannot write these through
    /// [`Ledger::commit`].
    ///
    /// # Errors
    /// [`Error::InvalidCommit`] for a [`SystemMarker::Tombstone`]: tombstones are written only
    /// by [`Ledger::erase`], which also writes the placeholders they cover. A tombstone
    /// appended alone would hide itself from readers (`from < seq`) or claim seqs it does not
    /// cover (`to > seq`), which `verify` rejects and a later erasure would trip over.
    /// Otherwise as [`Ledger::commit`].
    pub fn commit_marker(&mut self, marker: SystemMarker) -> Result<CommitReceipt> {
        if matches!(marker, SystemMarker::Tombstone { .. }) {
            return Err(Error::invalid(
                "tombstones are written by erase only (with the placeholders they cover)",
            ));
        }
        let commit = NewCommit {
            id: None,
            events: vec![EventBody::System { marker }],
        };
        self.commit_from(&commit, Origin::Internal)
    }

    /// Stores `content` as an artifact (synced per the sync mode) and returns its reference,
    /// for applications that attach artifacts themselves.
    pub fn put_artifact(&mut self, content: &[u8]) -> Result<crate::event::ArtifactRef> {
        self.check_usable()?;
        let sync = self.syncs();
        crate::artifact::write(
            self.core.storage.as_ref(),
            content,
            sync,
            &mut self.poisoned,
        )
    }

    pub(crate) fn syncs(&self) -> bool {
        self.options.sync == SyncMode::PerCommit
    }

    pub(crate) fn check_usable(&self) -> Result<()> {
        if self.poisoned {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }

    fn commit_from(&mut self, commit: &NewCommit, origin: Origin) -> Result<CommitReceipt> {
        self.check_usable()?;
        let key = match &commit.id {
            Some(id) => {
                validate::check_id(id)?;
                let key = (
                    crate::hex::sha256(id.as_bytes()),
                    crate::digest::commit_digest(&commit.events)?,
                );
                if let Some(receipt) = self.replay(id, &key)? {
                    return Ok(receipt);
                }
                Some(key)
            }
            None => None,
        };
        let state = self.turn_state()?.clone();
        let next = self.core.last_seq + 1;
        let core = &self.core;
        let kind_of = |seq: u64| core.kind(seq);
        let new_state = validate::check_events(&commit.events, &state, next, origin, &kind_of)?;
        let prepared = self.prepare(commit, key)?;
        self.check_caps(&prepared)?;
        self.write(&prepared)?;
        let receipt = CommitReceipt {
            first_seq: next,
            last_seq: next + commit.events.len() as u64 - 1,
            replayed: false,
        };
        self.apply(prepared, new_state);
        let _ = self.flush_sidecars();
        Ok(receipt)
    }

    /// The receipt of an earlier commit with this id, or a conflict.
    fn replay(&mut self, id: &str, key: &([u8; 32], [u8; 32])) -> Result<Option<CommitReceipt>> {
        let ids = self.ids()?;
        match ids.get(&key.0) {
            None => Ok(None),
            Some(e) if e.digest == key.1 => Ok(Some(CommitReceipt {
                first_seq: e.first_seq,
                last_seq: e.last_seq,
                replayed: true,
            })),
            Some(_) => Err(Error::Conflict { id: id.to_string() }),
        }
    }

    /// The idempotency table, loaded on first use (one read of `commits.idx`). A damaged
    /// `commits.idx` entry (it is a cache) is repaired from the log instead of failing: the
    /// table is rebuilt by one sequential scan and the sidecar rewritten.
    pub(crate) fn ids(&mut self) -> Result<&HashMap<[u8; 32], CommitEntry>> {
        if self.ids.is_none() {
            let persisted = match self.read_commit_index()? {
                Some(entries) => entries,
                None => self.rebuild_commit_index()?,
            };
            let mut map = HashMap::with_capacity(persisted.len() + self.core.pending_commits.len());
            for e in persisted.iter().chain(&self.core.pending_commits) {
                map.insert(e.id_hash, *e);
            }
            self.ids = Some(map);
        }
        Ok(self.ids.get_or_insert_with(HashMap::new))
    }

    /// The `commits_persisted` entries of `commits.idx`; `None` when one fails its checksum.
    fn read_commit_index(&self) -> Result<Option<Vec<CommitEntry>>> {
        let n = self.core.commits_persisted as usize;
        let mut raw = vec![0u8; n * COMMIT_ENTRY_LEN];
        let st = self.core.storage.as_ref();
        self.commits_file
            .read_at(INDEX_HEADER_LEN as u64, &mut raw)
            .map_err(io_err(st, names::COMMIT_INDEX))?;
        Ok(raw
            .chunks(COMMIT_ENTRY_LEN)
            .map(CommitEntry::decode)
            .collect())
    }

    /// Re-derives the commit table from the log's commit metadata and rewrites `commits.idx`
    /// with it. Returns the entries now in the file (all of them, or none if the rewrite
    /// failed, in which case they all wait in `pending_commits` for the next flush). Fails
    /// only on log corruption or I/O.
    fn rebuild_commit_index(&mut self) -> Result<Vec<CommitEntry>> {
        let st = self.core.storage.clone();
        let start = crate::scan::ScanStart {
            offset: format::LOG_HEADER_LEN as u64,
            ..crate::scan::ScanStart::default()
        };
        let found = crate::scan::scan(self.core.log.as_ref(), self.core.log_len, start)
            .map_err(io_err(st.as_ref(), names::LOG))?;
        let problem = match found.tail() {
            Tail::Corrupt {
                offset,
                seq,
                reason,
            } => Some((offset, seq, reason)),
            _ if found.last_seq != self.core.last_seq => Some((
                found.good_end,
                found.last_seq + 1,
                "the log no longer matches the state it was opened in".to_string(),
            )),
            _ => None,
        };
        if let Some((offset, seq, reason)) = problem {
            return Err(Error::Corrupt {
                path: self.core.log_path(),
                offset,
                seq: Some(seq),
                reason,
            });
        }
        let buf: Vec<u8> = found.commits.iter().flat_map(|c| c.encode()).collect();
        let at = INDEX_HEADER_LEN as u64;
        let written = self
            .commits_file
            .write_at(at, &buf)
            .and_then(|()| self.commits_file.set_len(at + buf.len() as u64));
        // The sidecar is a cache: if the rewrite failed, the next flush writes it all again.
        let persisted = if written.is_ok() {
            self.core.pending_commits.clear();
            found.commits
        } else {
            self.core.pending_commits = found.commits;
            Vec::new()
        };
        self.core.commits_persisted = persisted.len() as u64;
        Ok(persisted)
    }

    /// The open turn, rebuilt on first use from the last user event onward.
    fn turn_state(&mut self) -> Result<&TurnState> {
        if self.turn.is_none() {
            let mut state = TurnState::default();
            if let Some(&start) = self.core.user_seqs.last() {
                for e in self.core.events(start..=self.core.last_seq)? {
                    state.apply(&e.body);
                }
            }
            self.turn = Some(state);
        }
        Ok(self.turn.get_or_insert_with(TurnState::default))
    }

    /// Turns large tool outputs into artifacts and encodes the records.
    fn prepare(&self, commit: &NewCommit, key: Option<([u8; 32], [u8; 32])>) -> Result<Prepared> {
        let ts = now_ms();
        let first_seq = self.core.last_seq + 1;
        let mut p = Prepared {
            bytes: Vec::new(),
            entries: Vec::new(),
            user_seqs: Vec::new(),
            note_seqs: Vec::new(),
            commit: None,
            artifacts: Vec::new(),
        };
        let n = commit.events.len();
        let mut turns = self.core.user_seqs.len() as u32;
        let mut turns_crc = self.core.turns_crc;
        let mut notes = self.core.note_seqs.len() as u32;
        let mut notes_crc = self.core.notes_crc;
        let commits_before = self.commit_count();
        for (i, body) in commit.events.iter().enumerate() {
            let seq = first_seq + i as u64;
            self.check_artifact_ref(body)?;
            let body = self.offload(body, &mut p.artifacts)?;
            let json = serde_json::to_vec(&body)
                .map_err(|e| Error::invalid(format!("event {} cannot be encoded: {e}", i + 1)))?;
            let last = i + 1 == n;
            let meta = match (&commit.id, &key) {
                (Some(id), Some(k)) if last => serde_json::to_vec(&CommitMeta {
                    id: id.clone(),
                    digest: crate::hex::encode(&k.1),
                })
                .map_err(|e| Error::invalid(format!("commit id cannot be encoded: {e}")))?,
                _ => Vec::new(),
            };
            self.check_record(json.len() + meta.len())?;
            let offset = self.core.log_len + p.bytes.len() as u64;
            let flags = if last { FLAG_END_OF_COMMIT } else { 0 };
            let crc = format::encode_record(
                &mut p.bytes,
                body.kind(),
                flags,
                i as u32,
                seq,
                ts,
                &json,
                &meta,
            );
            if body.kind() == crate::event::EventKind::User {
                turns += 1;
                turns_crc = format::seq_crc_append(turns_crc, seq);
                p.user_seqs.push(seq);
            }
            if body.kind() == crate::event::EventKind::Note {
                notes += 1;
                notes_crc = format::seq_crc_append(notes_crc, seq);
                p.note_seqs.push(seq);
            }
            let commits = commits_before + u32::from(last && !meta.is_empty());
            let record_len = (RECORD_HEADER_LEN + json.len() + meta.len()) as u32;
            let kind = body.kind();
            let flags = flags
                | if meta.is_empty() {
                    0
                } else {
                    format::FLAG_COMMIT_META
                };
            p.entries.push(EventEntry {
                offset,
                record_len,
                record_crc: crc,
                kind,
                flags,
                turns,
                commits,
                turns_crc,
                notes,
                notes_crc,
            });
        }
        if let Some((id_hash, digest)) = key {
            let last_seq = first_seq + n as u64 - 1;
            p.commit = Some(CommitEntry {
                id_hash,
                digest,
                first_seq,
                last_seq,
            });
        }
        Ok(p)
    }

    fn commit_count(&self) -> u32 {
        (self.core.commits_persisted + self.core.pending_commits.len() as u64) as u32
    }

    fn check_record(&self, payload: usize) -> Result<()> {
        let actual = (RECORD_HEADER_LEN + payload) as u64;
        let limit = self.options.max_record_bytes.min(u64::from(u32::MAX));
        if actual > limit {
            return Err(Error::TooLarge {
                what: "record",
                limit,
                actual,
            });
        }
        Ok(())
    }

    /// A tool result over the threshold becomes an artifact plus an excerpt.
    fn offload(&self, body: &EventBody, artifacts: &mut Vec<Vec<u8>>) -> Result<EventBody> {
        match body {
            EventBody::ToolResult {
                call_id,
                tool,
                status,
                exit_code,
                text,
                artifact: None,
            } if text.len() as u64 > self.options.artifact_threshold => {
                let name = crate::artifact::artifact_name(text.as_bytes());
                let r = crate::event::ArtifactRef {
                    name: name.clone(),
                    bytes: text.len() as u64,
                };
                artifacts.push(text.as_bytes().to_vec());
                Ok(EventBody::ToolResult {
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    status: *status,
                    exit_code: *exit_code,
                    text: crate::artifact::excerpt(text, self.options.artifact_threshold, &name),
                    artifact: Some(r),
                })
            }
            other => Ok(other.clone()),
        }
    }

    /// A caller-supplied artifact reference must name an artifact already stored here.
    fn check_artifact_ref(&self, body: &EventBody) -> Result<()> {
        if let EventBody::ToolResult {
            artifact: Some(r), ..
        } = body
        {
            let st = self.core.storage.as_ref();
            let path = crate::artifact::check_ref(st, &r.name)?;
            let len = st
                .open(&path, OpenMode::Read)
                .and_then(|f| f.map(|f| f.len()).transpose())
                .map_err(io_err(st, &path))?;
            if len != Some(r.bytes) {
                return Err(Error::invalid(format!(
                    "artifact {} holds {} bytes, the reference says {}",
                    r.name,
                    len.unwrap_or(0),
                    r.bytes
                )));
            }
            // The content must match its name too, or the commit would reference an
            // artifact every later read rejects as tampered.
            if let Err(Error::ArtifactMismatch { name }) = crate::artifact::read(st, r) {
                return Err(Error::invalid(format!(
                    "artifact {name} does not match its hash"
                )));
            }
        }
        Ok(())
    }

    fn check_caps(&self, p: &Prepared) -> Result<()> {
        let artifact_bytes: u64 = p.artifacts.iter().map(|a| a.len() as u64).sum();
        let commit = p.bytes.len() as u64 + artifact_bytes;
        if commit > self.options.max_commit_bytes {
            let limit = self.options.max_commit_bytes;
            return Err(Error::TooLarge {
                what: "commit",
                limit,
                actual: commit,
            });
        }
        let ledger = self.core.log_len + p.bytes.len() as u64;
        if ledger > self.options.max_ledger_bytes {
            let limit = self.options.max_ledger_bytes;
            return Err(Error::TooLarge {
                what: "ledger",
                limit,
                actual: ledger,
            });
        }
        Ok(())
    }

    /// Artifacts first (synced), then the records in one write, then the sync (SPEC L6, L8).
    fn write(&mut self, p: &Prepared) -> Result<()> {
        let sync = self.syncs();
        for a in &p.artifacts {
            crate::artifact::write(self.core.storage.as_ref(), a, sync, &mut self.poisoned)?;
        }
        let st = self.core.storage.clone();
        let at = self.core.log_len;
        if let Err(e) = self.core.log.write_at(at, &p.bytes) {
            if self.core.log.set_len(at).is_err() {
                self.poisoned = true;
            }
            return Err(io_err(st.as_ref(), names::LOG)(e));
        }
        if sync && let Err(e) = self.core.log.sync() {
            self.poisoned = true;
            let _ = self.core.log.set_len(at);
            return Err(io_err(st.as_ref(), names::LOG)(e));
        }
        Ok(())
    }

    fn apply(&mut self, p: Prepared, state: TurnState) {
        self.core.log_len += p.bytes.len() as u64;
        self.core.last_seq += p.entries.len() as u64;
        if let Some(last) = p.entries.last() {
            self.core.turns_crc = last.turns_crc;
            self.core.notes_crc = last.notes_crc;
        }
        self.core.overlay.extend(p.entries);
        self.core.user_seqs.extend(p.user_seqs);
        self.core.note_seqs.extend(p.note_seqs);
        if let Some(c) = p.commit {
            self.core.pending_commits.push(c);
            if let Some(ids) = &mut self.ids {
                ids.insert(c.id_hash, c);
            }
        }
        self.turn = Some(state);
    }

    /// Appends what the sidecars lack. Failures are harmless: the entries stay in memory and
    /// the next flush (or the next open's tail scan) supplies them.
    pub(crate) fn flush_sidecars(&mut self) -> std::io::Result<()> {
        let core = &mut self.core;
        if !core.pending_commits.is_empty() {
            let buf: Vec<u8> = core
                .pending_commits
                .iter()
                .flat_map(|c| c.encode())
                .collect();
            let at = INDEX_HEADER_LEN as u64 + core.commits_persisted * COMMIT_ENTRY_LEN as u64;
            self.commits_file.write_at(at, &buf)?;
            core.commits_persisted += core.pending_commits.len() as u64;
            core.pending_commits.clear();
        }
        let unsaved = &core.user_seqs[core.turns_persisted as usize..];
        if !unsaved.is_empty() {
            let buf: Vec<u8> = unsaved.iter().flat_map(|s| s.to_le_bytes()).collect();
            let at = INDEX_HEADER_LEN as u64 + core.turns_persisted * TURN_ENTRY_LEN as u64;
            self.turns_file.write_at(at, &buf)?;
            core.turns_persisted = core.user_seqs.len() as u64;
        }
        let unsaved = &core.note_seqs[core.notes_persisted as usize..];
        if !unsaved.is_empty() {
            let buf: Vec<u8> = unsaved.iter().flat_map(|s| s.to_le_bytes()).collect();
            let at = INDEX_HEADER_LEN as u64 + core.notes_persisted * NOTE_ENTRY_LEN as u64;
            self.notes_file.write_at(at, &buf)?;
            core.notes_persisted = core.note_seqs.len() as u64;
        }
        if !core.overlay.is_empty() {
            let buf: Vec<u8> = core.overlay.iter().flat_map(|e| e.encode()).collect();
            let at = INDEX_HEADER_LEN as u64 + core.indexed * EVENT_ENTRY_LEN as u64;
            if let Some(idx) = &mut core.idx {
                idx.write_at(at, &buf)?;
                core.indexed += core.overlay.len() as u64;
                core.overlay.clear();
            }
        }
        Ok(())
    }
}

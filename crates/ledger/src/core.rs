//! The read side shared by [`crate::Ledger`] and [`crate::Reader`]: opening the log, checking
//! the sidecars against it, scanning only what the sidecars do not cover, and reading events.

use std::io;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::event::{ArtifactRef, Event, EventBody, EventKind};
use crate::format::{
    self, COMMIT_ENTRY_LEN, COMMIT_INDEX_MAGIC, EVENT_ENTRY_LEN, EVENT_INDEX_MAGIC,
    FLAG_END_OF_COMMIT, INDEX_HEADER_LEN, LOG_HEADER_LEN, LogHeader, NOTE_ENTRY_LEN,
    NOTE_INDEX_MAGIC, RECORD_HEADER_LEN, RecordHeader, TURN_ENTRY_LEN, TURN_INDEX_MAGIC, names,
};
use crate::scan::{self, Scan, ScanStart, Tail};
use crate::storage::{OpenMode, Storage, StorageFile};

/// How many trailing sidecar entries open may step back over (a torn sidecar append).
const MAX_INDEX_WALKBACK: u64 = 4096;

pub(crate) fn io_err(storage: &dyn Storage, name: &str) -> impl FnOnce(io::Error) -> Error + use<> {
    let path = storage.location().join(name);
    move |source| Error::Io { path, source }
}

/// Opens `name` in `mode`; a file that is not there is an I/O `NotFound` error naming its
/// path.
pub(crate) fn open_file(
    storage: &dyn Storage,
    name: &str,
    mode: crate::storage::OpenMode,
) -> Result<Box<dyn StorageFile>> {
    storage
        .open(name, mode)
        .map_err(io_err(storage, name))?
        .ok_or_else(|| io_err(storage, name)(io::ErrorKind::NotFound.into()))
}

/// The committed state visible to a reader or writer.
pub(crate) struct Core {
    pub storage: Arc<dyn Storage>,
    pub log: Box<dyn StorageFile>,
    pub header: LogHeader,
    pub id_hex: String,
    /// `ledger.idx`, when it was found valid (entries `1..=indexed` are read from it).
    pub idx: Option<Box<dyn StorageFile>>,
    pub indexed: u64,
    /// Entries for seqs `indexed+1..=last_seq`, not (yet) in `ledger.idx`.
    pub overlay: Vec<format::EventEntry>,
    pub user_seqs: Vec<u64>,
    /// How many of `user_seqs` are stored in `turns.idx`.
    pub turns_persisted: u64,
    /// Seqs of the note events, ascending.
    pub note_seqs: Vec<u64>,
    /// How many of `note_seqs` are stored in `notes.idx`.
    pub notes_persisted: u64,
    /// Id-carrying commits in `commits.idx`.
    pub commits_persisted: u64,
    /// Id-carrying commits found by scanning, not yet in `commits.idx`.
    pub pending_commits: Vec<format::CommitEntry>,
    /// End of the last complete commit.
    pub log_len: u64,
    pub last_seq: u64,
    /// Running CRC of `user_seqs` as `turns.idx` entries (stored in every index entry).
    pub turns_crc: u32,
    /// Running CRC of `note_seqs` as `notes.idx` entries (stored in every index entry).
    pub notes_crc: u32,
    /// False when the sidecars were missing or did not match the log (rebuilt by the writer).
    pub sidecars_valid: bool,
    /// True once an erasure has renamed its rewritten log over the one this core reads and
    /// then failed before reloading: the open file still holds the erased content, so reads
    /// of events and artifacts fail with [`Error::Poisoned`] instead of serving it.
    pub retired: bool,
}

/// What [`Core::load`] found past the last complete commit.
pub(crate) struct Loaded {
    pub core: Core,
    pub tail: Tail,
    pub file_len: u64,
}

struct Sidecars {
    idx: Box<dyn StorageFile>,
    indexed: u64,
    last: Option<format::EventEntry>,
    user_seqs: Vec<u64>,
    note_seqs: Vec<u64>,
    commits: u64,
}

impl Core {
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
        let sidecars = load_sidecars(st, mode, &header.ledger_id, log.as_ref(), file_len)
            .map_err(io_err(st, names::EVENT_INDEX))?;
        let start = match &sidecars {
            Some(s) => scan_start(s),
            None => ScanStart {
                offset: LOG_HEADER_LEN as u64,
                ..ScanStart::default()
            },
        };
        let found = scan::scan(log.as_ref(), file_len, start).map_err(io_err(st, names::LOG))?;
        let tail = found.tail();
        if let Tail::Corrupt {
            offset,
            seq,
            reason,
        } = &tail
        {
            return Err(Error::Corrupt {
                path: st.location().join(names::LOG),
                offset: *offset,
                seq: Some(*seq),
                reason: reason.clone(),
            });
        }
        let core = Core::assemble(storage.clone(), log, header, sidecars, found);
        Ok(Loaded {
            core,
            tail,
            file_len,
        })
    }

    fn assemble(
        storage: Arc<dyn Storage>,
        log: Box<dyn StorageFile>,
        header: LogHeader,
        sidecars: Option<Sidecars>,
        found: Scan,
    ) -> Core {
        let id_hex = crate::hex::encode(&header.ledger_id);
        let last = found
            .entries
            .last()
            .or(sidecars.as_ref().and_then(|s| s.last.as_ref()));
        let (turns_crc, notes_crc) = last.map_or((0, 0), |e| (e.turns_crc, e.notes_crc));
        let (idx, indexed, mut user_seqs, mut note_seqs, commits, valid) = match sidecars {
            Some(s) => (
                Some(s.idx),
                s.indexed,
                s.user_seqs,
                s.note_seqs,
                s.commits,
                true,
            ),
            None => (None, 0, Vec::new(), Vec::new(), 0, false),
        };
        let turns_persisted = user_seqs.len() as u64;
        user_seqs.extend_from_slice(&found.user_seqs);
        let notes_persisted = note_seqs.len() as u64;
        note_seqs.extend_from_slice(&found.note_seqs);
        Core {
            storage,
            log,
            header,
            id_hex,
            idx,
            indexed,
            overlay: found.entries,
            user_seqs,
            turns_persisted,
            note_seqs,
            notes_persisted,
            commits_persisted: commits,
            pending_commits: found.commits,
            log_len: found.good_end,
            last_seq: found.last_seq,
            turns_crc,
            notes_crc,
            sidecars_valid: valid,
            retired: false,
        }
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.storage.location().join(names::LOG)
    }

    /// The index entry of `seq`.
    pub(crate) fn entry(&self, seq: u64) -> Result<format::EventEntry> {
        if seq == 0 || seq > self.last_seq {
            return Err(Error::NoSuchSeq {
                seq,
                last_seq: self.last_seq,
            });
        }
        if seq > self.indexed {
            return Ok(self.overlay[(seq - self.indexed - 1) as usize]);
        }
        let offset = INDEX_HEADER_LEN as u64 + (seq - 1) * EVENT_ENTRY_LEN as u64;
        let mut b = [0u8; EVENT_ENTRY_LEN];
        let idx_err = io_err(self.storage.as_ref(), names::EVENT_INDEX);
        match &self.idx {
            Some(idx) => idx.read_at(offset, &mut b).map_err(idx_err)?,
            None => return Err(self.index_corrupt(offset, seq, "index file missing")),
        }
        match format::EventEntry::decode(&b).filter(|e| self.plausible(e)) {
            Some(e) => Ok(e),
            None => self
                .entry_from_log(seq)
                .ok()
                .filter(|e| self.plausible(e))
                .ok_or_else(|| self.index_corrupt(offset, seq, "index entry damaged")),
        }
    }

    /// Locates `seq` without its (damaged) index entry: from the nearest earlier valid entry,
    /// step over record headers in the log. The record's own CRC is checked when it is read.
    fn entry_from_log(&self, seq: u64) -> Result<format::EventEntry> {
        let mut from = seq - 1;
        let mut pos = LOG_HEADER_LEN as u64;
        let mut prev = None;
        while from > 0 && seq - from <= 64 {
            if let Ok(e) = self.stored_entry(from) {
                pos = e.end();
                prev = Some(e);
                break;
            }
            from -= 1;
        }
        if from > 0 && prev.is_none() {
            return Err(Error::NoSuchSeq {
                seq,
                last_seq: self.last_seq,
            });
        }
        let (mut turns, mut notes) = prev.map_or((0, 0), |e| (e.turns, e.notes));
        let commits = prev.map_or(0, |e| e.commits);
        for s in from + 1..=seq {
            let mut b = [0u8; RECORD_HEADER_LEN];
            self.log
                .read_at(pos, &mut b)
                .map_err(|e| self.corrupt_or_io(pos, s, e))?;
            let h = RecordHeader::parse(&b).map_err(|reason| Error::Corrupt {
                path: self.log_path(),
                offset: pos,
                seq: Some(s),
                reason,
            })?;
            turns += u32::from(h.kind == EventKind::User);
            notes += u32::from(h.kind == EventKind::Note);
            if s == seq {
                return Ok(format::EventEntry {
                    offset: pos,
                    record_len: h.record_len() as u32,
                    record_crc: h.crc,
                    kind: h.kind,
                    flags: h.flags,
                    turns,
                    commits,
                    turns_crc: 0,
                    notes,
                    notes_crc: 0,
                });
            }
            pos += h.record_len();
        }
        Err(Error::NoSuchSeq {
            seq,
            last_seq: self.last_seq,
        })
    }

    fn stored_entry(&self, seq: u64) -> Result<format::EventEntry> {
        if seq > self.indexed {
            return self.entry(seq);
        }
        let offset = INDEX_HEADER_LEN as u64 + (seq - 1) * EVENT_ENTRY_LEN as u64;
        let mut b = [0u8; EVENT_ENTRY_LEN];
        if let Some(idx) = &self.idx {
            idx.read_at(offset, &mut b)
                .map_err(io_err(self.storage.as_ref(), names::EVENT_INDEX))?;
        }
        format::EventEntry::decode(&b)
            .filter(|e| self.plausible(e))
            .ok_or(Error::NoSuchSeq {
                seq,
                last_seq: self.last_seq,
            })
    }

    /// True when an index entry (checksum already verified) points inside the committed log.
    /// A checksum-valid entry can still be crafted or stale; trusting it would let a cache
    /// file decide how much memory a read allocates.
    fn plausible(&self, e: &format::EventEntry) -> bool {
        e.offset >= LOG_HEADER_LEN as u64
            && u64::from(e.record_len) >= RECORD_HEADER_LEN as u64
            && e.end() <= self.log_len
    }

    fn index_corrupt(&self, offset: u64, seq: u64, reason: &str) -> Error {
        Error::Corrupt {
            path: self.storage.location().join(names::EVENT_INDEX),
            offset,
            seq: Some(seq),
            reason: format!(
                "{reason} (delete ledger.idx, turns.idx, notes.idx and commits.idx: the next writer open \
                 rebuilds them from the log)"
            ),
        }
    }

    pub(crate) fn kind(&self, seq: u64) -> Option<EventKind> {
        self.entry(seq).ok().map(|e| e.kind)
    }

    /// Reads events `range`, with one read of the contiguous bytes. Covered placeholders of
    /// erased seqs are skipped (the tombstone that leads their range is returned), so the
    /// result can be shorter than the range.
    pub(crate) fn events(&self, range: RangeInclusive<u64>) -> Result<Vec<Event>> {
        let mut out = self.raw_events(range)?;
        out.retain(|e| !crate::erase::is_placeholder(e.seq, &e.body));
        Ok(out)
    }

    /// Reads one event as stored, placeholders included.
    pub(crate) fn raw_event(&self, seq: u64) -> Result<Event> {
        self.raw_events(seq..=seq)?.pop().ok_or(Error::NoSuchSeq {
            seq,
            last_seq: self.last_seq,
        })
    }

    /// Reads events `range` as stored (placeholders included), with one contiguous read.
    fn raw_events(&self, range: RangeInclusive<u64>) -> Result<Vec<Event>> {
        if self.retired {
            return Err(Error::Poisoned);
        }
        let (first, last) = (*range.start(), *range.end());
        if first > last {
            return Ok(Vec::new());
        }
        let a = self.entry(first)?;
        let b = self.entry(last)?;
        let len = b.end().saturating_sub(a.offset);
        let mut buf = vec![0u8; len as usize];
        self.log
            .read_at(a.offset, &mut buf)
            .map_err(|e| self.corrupt_or_io(a.offset, first, e))?;
        let mut out = Vec::with_capacity((last - first + 1) as usize);
        let mut at = 0usize;
        for seq in first..=last {
            let (event, used) = self.decode_at(&buf[at..], a.offset + at as u64, seq)?;
            out.push(event);
            at += used;
        }
        Ok(out)
    }

    fn corrupt_or_io(&self, offset: u64, seq: u64, e: io::Error) -> Error {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            return Error::Corrupt {
                path: self.log_path(),
                offset,
                seq: Some(seq),
                reason: "indexed record lies past the end of the log".into(),
            };
        }
        Error::Io {
            path: self.log_path(),
            source: e,
        }
    }

    /// Decodes the record at the start of `buf` (log offset `offset`) and checks it is `seq`.
    fn decode_at(&self, buf: &[u8], offset: u64, seq: u64) -> Result<(Event, usize)> {
        let corrupt = |reason: String| Error::Corrupt {
            path: self.log_path(),
            offset,
            seq: Some(seq),
            reason,
        };
        let h = RecordHeader::parse(buf).map_err(corrupt)?;
        let len = h.record_len() as usize;
        if buf.len() < len {
            return Err(corrupt("record shorter than its header says".into()));
        }
        let payload = &buf[RECORD_HEADER_LEN..len];
        if format::record_crc(buf, payload) != h.crc {
            return Err(corrupt("record checksum mismatch".into()));
        }
        if h.seq != seq {
            return Err(corrupt(format!(
                "index points at seq {} for seq {seq}",
                h.seq
            )));
        }
        let body: EventBody = serde_json::from_slice(&payload[..h.body_len as usize])
            .map_err(|e| corrupt(format!("undecodable event body: {e}")))?;
        if body.kind() != h.kind {
            return Err(corrupt(
                "event body disagrees with the header's kind".into(),
            ));
        }
        Ok((
            Event {
                seq,
                ts_ms: h.ts_ms,
                body,
            },
            len,
        ))
    }

    /// Reads an artifact after checking its name and that it stays inside the directory.
    pub(crate) fn artifact(&self, r: &ArtifactRef) -> Result<Vec<u8>> {
        if self.retired {
            return Err(Error::Poisoned);
        }
        crate::artifact::read(self.storage.as_ref(), r)
    }
}

fn scan_start(s: &Sidecars) -> ScanStart {
    match s.last {
        Some(e) => ScanStart {
            offset: e.end(),
            last_seq: s.indexed,
            turns: e.turns,
            commits: e.commits,
            turns_crc: e.turns_crc,
            notes: e.notes,
            notes_crc: e.notes_crc,
        },
        None => ScanStart {
            offset: LOG_HEADER_LEN as u64,
            ..ScanStart::default()
        },
    }
}

fn read_header(st: &dyn Storage, log: &dyn StorageFile, file_len: u64) -> Result<LogHeader> {
    let corrupt = |reason: String| Error::Corrupt {
        path: st.location().join(names::LOG),
        offset: 0,
        seq: None,
        reason,
    };
    if file_len < LOG_HEADER_LEN as u64 {
        return Err(corrupt(format!(
            "file is {file_len} bytes, shorter than its header (a creation cut short: no \
             record can exist; the next writer open recreates it)"
        )));
    }
    let mut b = [0u8; LOG_HEADER_LEN];
    log.read_at(0, &mut b).map_err(io_err(st, names::LOG))?;
    LogHeader::decode(&b).map_err(corrupt)
}

/// Opens a sidecar and checks its header; returns it and its count of whole entries.
fn open_sidecar(
    st: &dyn Storage,
    name: &str,
    mode: OpenMode,
    magic: [u8; 8],
    entry_len: usize,
    ledger_id: &[u8; 16],
) -> io::Result<Option<(Box<dyn StorageFile>, u64)>> {
    let Some(file) = st.open(name, mode)? else {
        return Ok(None);
    };
    let len = file.len()?;
    if len < INDEX_HEADER_LEN as u64 {
        return Ok(None);
    }
    let mut h = vec![0u8; INDEX_HEADER_LEN];
    file.read_at(0, &mut h)?;
    if h != format::encode_index_header(magic, entry_len, ledger_id) {
        return Ok(None);
    }
    Ok(Some((
        file,
        (len - INDEX_HEADER_LEN as u64) / entry_len as u64,
    )))
}

/// Loads the sidecars when they agree with the log; `None` means "rebuild from the log".
fn load_sidecars(
    st: &dyn Storage,
    mode: OpenMode,
    id: &[u8; 16],
    log: &dyn StorageFile,
    log_len: u64,
) -> io::Result<Option<Sidecars>> {
    let Some((idx, n)) = open_sidecar(
        st,
        names::EVENT_INDEX,
        mode,
        EVENT_INDEX_MAGIC,
        EVENT_ENTRY_LEN,
        id,
    )?
    else {
        return Ok(None);
    };
    let Some((indexed, last)) = last_good_entry(idx.as_ref(), n, log, log_len)? else {
        return Ok(None);
    };
    let commits = last.map_or(0, |e| u64::from(e.commits));
    let turns = SeqList {
        name: names::TURN_INDEX,
        magic: TURN_INDEX_MAGIC,
        entry_len: TURN_ENTRY_LEN,
        count: last.map_or(0, |e| u64::from(e.turns)),
        crc: last.map_or(0, |e| e.turns_crc),
    };
    let Some(user_seqs) = load_seq_list(st, mode, id, &turns, indexed)? else {
        return Ok(None);
    };
    let notes = SeqList {
        name: names::NOTE_INDEX,
        magic: NOTE_INDEX_MAGIC,
        entry_len: NOTE_ENTRY_LEN,
        count: last.map_or(0, |e| u64::from(e.notes)),
        crc: last.map_or(0, |e| e.notes_crc),
    };
    let Some(note_seqs) = load_seq_list(st, mode, id, &notes, indexed)? else {
        return Ok(None);
    };
    match open_sidecar(
        st,
        names::COMMIT_INDEX,
        mode,
        COMMIT_INDEX_MAGIC,
        COMMIT_ENTRY_LEN,
        id,
    )? {
        Some((_, count)) if count >= commits => {}
        _ => return Ok(None),
    }
    Ok(Some(Sidecars {
        idx,
        indexed,
        last,
        user_seqs,
        note_seqs,
        commits,
    }))
}

/// The last entry that closes a commit and matches the log, stepping back over a torn append.
/// `Some((0, None))` for an empty index; `None` when nothing trustworthy is found.
fn last_good_entry(
    idx: &dyn StorageFile,
    n: u64,
    log: &dyn StorageFile,
    log_len: u64,
) -> io::Result<Option<(u64, Option<format::EventEntry>)>> {
    let floor = n.saturating_sub(MAX_INDEX_WALKBACK);
    let mut seq = n;
    while seq > floor {
        let mut b = [0u8; EVENT_ENTRY_LEN];
        idx.read_at(
            INDEX_HEADER_LEN as u64 + (seq - 1) * EVENT_ENTRY_LEN as u64,
            &mut b,
        )?;
        if let Some(e) = format::EventEntry::decode(&b)
            && e.flags & FLAG_END_OF_COMMIT != 0
        {
            return Ok(entry_matches_log(&e, seq, log, log_len)?.then_some((seq, Some(e))));
        }
        seq -= 1;
    }
    Ok((n == 0).then_some((0, None)))
}

fn entry_matches_log(
    e: &format::EventEntry,
    seq: u64,
    log: &dyn StorageFile,
    log_len: u64,
) -> io::Result<bool> {
    if e.end() > log_len || e.offset < LOG_HEADER_LEN as u64 {
        return Ok(false);
    }
    let mut b = [0u8; RECORD_HEADER_LEN];
    log.read_at(e.offset, &mut b)?;
    Ok(RecordHeader::parse(&b).is_ok_and(|h| {
        h.seq == seq && h.crc == e.record_crc && h.record_len() == u64::from(e.record_len)
    }))
}

/// A seq-list sidecar (`turns.idx`, `notes.idx`) and what the last trusted `ledger.idx`
/// entry says about it: how many entries it must hold and their CRC32C.
struct SeqList {
    name: &'static str,
    magic: [u8; 8],
    entry_len: usize,
    count: u64,
    crc: u32,
}

/// Loads the first `list.count` entries of a seq-list sidecar, checked against the running
/// CRC stored in the last index entry; `None` when they do not match (the caller rebuilds).
/// Reads `8 × count` bytes: the only part of opening that grows with the ledger.
fn load_seq_list(
    st: &dyn Storage,
    mode: OpenMode,
    id: &[u8; 16],
    list: &SeqList,
    indexed: u64,
) -> io::Result<Option<Vec<u64>>> {
    let Some((file, count)) = open_sidecar(st, list.name, mode, list.magic, list.entry_len, id)?
    else {
        return Ok(None);
    };
    if count < list.count {
        return Ok(None);
    }
    let mut raw = vec![0u8; (list.count as usize) * list.entry_len];
    file.read_at(INDEX_HEADER_LEN as u64, &mut raw)?;
    if crc32c::crc32c(&raw) != list.crc {
        return Ok(None);
    }
    let seqs: Vec<u64> = raw.chunks(list.entry_len).map(format::read_u64).collect();
    let increasing = seqs.windows(2).all(|w| w[0] < w[1]);
    let in_range = seqs.last().is_none_or(|&s| s >= 1 && s <= indexed);
    Ok((increasing && in_range).then_some(seqs))
}

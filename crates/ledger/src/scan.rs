//! Sequential scanning of the log: finds complete commits, and classifies whatever follows the
//! last one as clean, a torn tail (cut by the writer, ignored by readers) or corruption.

use std::io;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::format::{
    self, CommitEntry, Counts, EventEntry, LOG_HEADER_LEN, RECORD_HEADER_LEN, RECORD_MAGIC,
    RecordHeader,
};

/// A window over a file that refills in large chunks, so scanning costs few syscalls.
pub(crate) struct Window<'a> {
    file: &'a dyn crate::storage::StorageFile,
    file_len: u64,
    start: u64,
    buf: Vec<u8>,
}

const WINDOW: usize = 1 << 20;

impl<'a> Window<'a> {
    pub(crate) fn new(file: &'a dyn crate::storage::StorageFile, file_len: u64) -> Window<'a> {
        Window {
            file,
            file_len,
            start: 0,
            buf: Vec::new(),
        }
    }

    /// The bytes `[at, at+len)`, or `None` when the file is shorter.
    pub(crate) fn get(&mut self, at: u64, len: usize) -> io::Result<Option<&[u8]>> {
        let Some(end) = at.checked_add(len as u64) else {
            return Ok(None);
        };
        if end > self.file_len {
            return Ok(None);
        }
        let have = self.start + self.buf.len() as u64;
        if at < self.start || end > have {
            let want = (len.max(WINDOW) as u64).min(self.file_len - at) as usize;
            self.buf.resize(want, 0);
            self.file.read_at(at, &mut self.buf)?;
            self.start = at;
        }
        let from = (at - self.start) as usize;
        Ok(Some(&self.buf[from..from + len]))
    }
}

/// Where a scan begins, and the counters carried into it from the last indexed event.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ScanStart {
    /// Where the scan begins (end of the last known-good commit).
    pub offset: u64,
    /// Seq of the last known-good event (0 for none).
    pub last_seq: u64,
    /// The counts of the last known-good event (user events, id-carrying commits, notes,
    /// and the running CRCs of the turn and note entries).
    pub counts: Counts,
}

impl ScanStart {
    /// The first record of the log, nothing counted yet.
    pub(crate) fn log_start() -> ScanStart {
        ScanStart {
            offset: LOG_HEADER_LEN as u64,
            ..ScanStart::default()
        }
    }
}

/// What follows the last complete commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tail {
    /// Nothing: the file ends exactly after a complete commit.
    Clean,
    /// An incomplete or bad tail with nothing valid after it, starting at `offset`.
    Torn { offset: u64, reason: String },
    /// A bad record followed by valid records: corruption.
    Corrupt {
        offset: u64,
        seq: u64,
        reason: String,
    },
}

/// The result of scanning from a [`ScanStart`] to the end of the file.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Entries of the complete commits found, in seq order.
    pub entries: Vec<EventEntry>,
    /// Seqs of user events among them.
    pub user_seqs: Vec<u64>,
    /// Seqs of note events among them.
    pub note_seqs: Vec<u64>,
    /// Id-carrying commits among them.
    pub commits: Vec<CommitEntry>,
    /// End offset of the last complete commit.
    pub good_end: u64,
    /// Seq of the last event of the last complete commit.
    pub last_seq: u64,
    /// How the file ends.
    pub tail: Option<Tail>,
}

impl Scan {
    /// The tail classification (never `None` once `scan` returned).
    pub(crate) fn tail(&self) -> Tail {
        self.tail.clone().unwrap_or(Tail::Clean)
    }

    /// The scan, or [`Error::Corrupt`] at the bad record when it found corruption (a bad
    /// record with valid records after it) in the log at `log_path`. A torn tail is kept.
    pub(crate) fn or_corrupt(self, log_path: PathBuf) -> Result<Scan> {
        match self.tail() {
            Tail::Corrupt {
                offset,
                seq,
                reason,
            } => Err(Error::Corrupt {
                path: log_path,
                offset,
                seq: Some(seq),
                reason,
            }),
            _ => Ok(self),
        }
    }
}

/// Commit metadata stored in the payload of the last record of an id-carrying commit.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct CommitMeta {
    /// The id as given (every commit the application wrote).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The id's SHA-256 (hex) instead of the id: a lost commit's id as a repair carries it
    /// on a placeholder of its loss record, known only by the hash `commits.idx` kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_sha256: Option<String>,
    pub digest: String,
}

/// What the commit being scanned has so far: it becomes visible only at its end record.
#[derive(Default)]
pub(crate) struct Pending {
    entries: Vec<EventEntry>,
    user_seqs: Vec<u64>,
    note_seqs: Vec<u64>,
    commits: Vec<CommitEntry>,
}

impl Pending {
    /// Adds the record `rec` found at `pos`, advancing `counts` by it.
    pub(crate) fn add(&mut self, rec: &RawRecord, pos: u64, counts: &mut Counts) {
        let h = &rec.header;
        let commit = rec.meta.map(|(id_hash, digest)| CommitEntry {
            id_hash,
            digest,
            first_seq: h.seq - u64::from(h.index_in_commit),
            last_seq: h.seq,
        });
        let at = (pos, h.record_len() as u32, h.crc, h.kind, h.flags);
        self.push(h.seq, commit, counts, at);
    }

    /// Adds seq `seq`, whose record cannot be read (it is damaged), from its index entry `e`
    /// and the id-carrying commit it ends, if any; advances `counts` as its record would.
    pub(crate) fn add_entry(
        &mut self,
        e: &EventEntry,
        seq: u64,
        commit: Option<CommitEntry>,
        counts: &mut Counts,
    ) {
        let at = (e.offset, e.record_len, e.record_crc, e.kind, e.flags);
        self.push(seq, commit, counts, at);
    }

    /// How many records it holds.
    pub(crate) fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    fn push(
        &mut self,
        seq: u64,
        commit: Option<CommitEntry>,
        counts: &mut Counts,
        (offset, len, crc, kind, flags): (u64, u32, u32, EventKind, u8),
    ) {
        counts.add(kind, seq);
        match kind {
            EventKind::User => self.user_seqs.push(seq),
            EventKind::Note => self.note_seqs.push(seq),
            _ => {}
        }
        if let Some(c) = commit {
            counts.commits += 1;
            self.commits.push(c);
        }
        self.entries
            .push(counts.entry(offset, len, crc, kind, flags));
    }

    /// How the file ends when it ends here (at `good_end`, the end of the last complete
    /// commit, plus what is pending).
    fn tail_at_end(&self, good_end: u64) -> Tail {
        if self.entries.is_empty() {
            Tail::Clean
        } else {
            Tail::Torn {
                offset: good_end,
                reason: "commit without its end record".into(),
            }
        }
    }

    /// Corruption when `h` (at `pos`) is not the record expected next: seq `expected_seq`,
    /// at the next position of the pending commit.
    fn misplaced(&self, h: &RecordHeader, pos: u64, expected_seq: u64) -> Option<Tail> {
        let index_ok = h.index_in_commit as usize == self.entries.len();
        if h.seq == expected_seq && index_ok {
            return None;
        }
        let reason = format!(
            "record has seq {} (position {} in commit), expected seq {expected_seq} (position {})",
            h.seq,
            h.index_in_commit,
            self.entries.len()
        );
        Some(Tail::Corrupt {
            offset: pos,
            seq: expected_seq,
            reason,
        })
    }
}

impl Scan {
    /// Makes the pending commit, ending with seq `last_seq` at offset `end`, complete.
    pub(crate) fn complete(&mut self, pending: &mut Pending, last_seq: u64, end: u64) {
        self.last_seq = last_seq;
        self.good_end = end;
        self.entries.append(&mut pending.entries);
        self.user_seqs.append(&mut pending.user_seqs);
        self.note_seqs.append(&mut pending.note_seqs);
        self.commits.append(&mut pending.commits);
    }
}

/// Scans `[start.offset, file_len)`.
pub(crate) fn scan(
    file: &dyn crate::storage::StorageFile,
    file_len: u64,
    start: ScanStart,
) -> io::Result<Scan> {
    let mut w = Window::new(file, file_len);
    let mut out = Scan {
        good_end: start.offset,
        last_seq: start.last_seq,
        ..Scan::default()
    };
    let mut pos = start.offset;
    let mut counts = start.counts;
    let mut pending = Pending::default();
    loop {
        if pos == file_len {
            out.tail = Some(pending.tail_at_end(out.good_end));
            return Ok(out);
        }
        let expected_seq = out.last_seq + pending.entries.len() as u64 + 1;
        let rec = match read_record(&mut w, pos)? {
            Ok(rec) => rec,
            Err(reason) => {
                let tail = classify_bad(&mut w, pos, expected_seq, out.good_end, reason)?;
                out.tail = Some(tail);
                return Ok(out);
            }
        };
        if let Some(corrupt) = pending.misplaced(&rec.header, pos, expected_seq) {
            out.tail = Some(corrupt);
            return Ok(out);
        }
        pending.add(&rec, pos, &mut counts);
        pos += rec.header.record_len();
        if rec.header.ends_commit() {
            out.complete(&mut pending, rec.header.seq, pos);
        }
    }
}

/// A record read from the log: header and the commit metadata (hashed), if any.
pub(crate) struct RawRecord {
    pub header: RecordHeader,
    pub meta: Option<([u8; 32], [u8; 32])>,
}

/// Reads and checks one record at `pos`. `Ok(Err(reason))` when it is not a valid record.
pub(crate) fn read_record(w: &mut Window<'_>, pos: u64) -> io::Result<Result<RawRecord, String>> {
    let Some(hb) = w.get(pos, RECORD_HEADER_LEN)? else {
        return Ok(Err("incomplete record header".into()));
    };
    let hb = hb.to_vec();
    let h = match RecordHeader::parse(&hb) {
        Ok(h) => h,
        Err(reason) => return Ok(Err(reason)),
    };
    let payload_len = (h.record_len() - RECORD_HEADER_LEN as u64) as usize;
    let Some(payload) = w.get(pos + RECORD_HEADER_LEN as u64, payload_len)? else {
        return Ok(Err("record extends past the end of the file".into()));
    };
    if format::record_crc(&hb, payload) != h.crc {
        return Ok(Err("record checksum mismatch".into()));
    }
    let meta = if h.meta_len > 0 {
        let raw = &payload[h.body_len as usize..];
        match parse_meta(raw) {
            Some(m) => Some(m),
            None => return Ok(Err("unreadable commit metadata".into())),
        }
    } else {
        None
    };
    Ok(Ok(RawRecord { header: h, meta }))
}

fn parse_meta(raw: &[u8]) -> Option<([u8; 32], [u8; 32])> {
    let meta: CommitMeta = serde_json::from_slice(raw).ok()?;
    let digest = crate::hex::decode32(&meta.digest)?;
    let id_hash = match (meta.id, meta.id_sha256) {
        (Some(id), None) => crate::hex::sha256(id.as_bytes()),
        (None, Some(hash)) => crate::hex::decode32(&hash)?,
        _ => return None,
    };
    Some((id_hash, digest))
}

/// A bad record at `pos`: corruption if any valid record with a later seq follows, else a
/// torn tail starting at the end of the last complete commit.
fn classify_bad(
    w: &mut Window<'_>,
    pos: u64,
    expected_seq: u64,
    good_end: u64,
    reason: String,
) -> io::Result<Tail> {
    if let Some(found) = find_valid_after(w, pos + 1, expected_seq)? {
        let reason = format!("{reason}; a valid record follows at offset {found}");
        return Ok(Tail::Corrupt {
            offset: pos,
            seq: expected_seq,
            reason,
        });
    }
    Ok(Tail::Torn {
        offset: good_end,
        reason,
    })
}

/// Looks for a checksum-valid record starting at or after `from` whose seq is at least
/// `min_seq`; returns its offset.
fn find_valid_after(w: &mut Window<'_>, from: u64, min_seq: u64) -> io::Result<Option<u64>> {
    let mut at = from;
    loop {
        let len = (w.file_len - at).min(WINDOW as u64) as usize;
        if len < RECORD_HEADER_LEN {
            return Ok(None);
        }
        let Some(bytes) = w.get(at, len)? else {
            return Ok(None);
        };
        let hits: Vec<u64> = bytes
            .windows(4)
            .enumerate()
            .filter(|(_, win)| *win == RECORD_MAGIC)
            .map(|(i, _)| at + i as u64)
            .collect();
        for magic_at in hits {
            let Some(start) = magic_at.checked_sub(format::R_MAGIC as u64) else {
                continue;
            };
            if start < from {
                continue;
            }
            if let Ok(rec) = read_record(w, start)?
                && rec.header.seq >= min_seq
            {
                return Ok(Some(start));
            }
        }
        if at + len as u64 >= w.file_len {
            return Ok(None);
        }
        at += (len - 3) as u64;
    }
}

//! Sequential scanning of the log: finds complete commits, and classifies whatever follows the
//! last one as clean, a torn tail (cut by the writer, ignored by readers) or corruption.

use std::io;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::format::{self, CommitEntry, EventEntry, RECORD_HEADER_LEN, RECORD_MAGIC, RecordHeader};

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

/// Counters carried from the last indexed event into a scan.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ScanStart {
    /// Where the scan begins (end of the last known-good commit).
    pub offset: u64,
    /// Seq of the last known-good event (0 for none).
    pub last_seq: u64,
    /// User events so far.
    pub turns: u32,
    /// Id-carrying commits so far.
    pub commits: u32,
    /// Running CRC of the turn entries so far.
    pub turns_crc: u32,
    /// Note events so far.
    pub notes: u32,
    /// Running CRC of the note entries so far.
    pub notes_crc: u32,
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
    pub id: String,
    pub digest: String,
}

/// What the commit being scanned has so far: it becomes visible only at its end record.
struct Pending {
    entries: Vec<EventEntry>,
    user_seqs: Vec<u64>,
    note_seqs: Vec<u64>,
    commits: Vec<CommitEntry>,
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
    let (mut turns, mut commits, mut turns_crc) = (start.turns, start.commits, start.turns_crc);
    let (mut notes, mut notes_crc) = (start.notes, start.notes_crc);
    let mut pending = Pending {
        entries: Vec::new(),
        user_seqs: Vec::new(),
        note_seqs: Vec::new(),
        commits: Vec::new(),
    };
    loop {
        if pos == file_len {
            out.tail = Some(if pending.entries.is_empty() {
                Tail::Clean
            } else {
                Tail::Torn {
                    offset: out.good_end,
                    reason: "commit without its end record".into(),
                }
            });
            return Ok(out);
        }
        let expected_seq = out.last_seq + pending.entries.len() as u64 + 1;
        let rec = match read_record(&mut w, pos)? {
            Ok(rec) => rec,
            Err(reason) => {
                out.tail = Some(classify_bad(
                    &mut w,
                    pos,
                    expected_seq,
                    out.good_end,
                    reason,
                )?);
                return Ok(out);
            }
        };
        let h = rec.header;
        let index_ok = h.index_in_commit as usize == pending.entries.len();
        if h.seq != expected_seq || !index_ok {
            let reason = format!(
                "record has seq {} (position {} in commit), expected seq {expected_seq} (position {})",
                h.seq,
                h.index_in_commit,
                pending.entries.len()
            );
            out.tail = Some(Tail::Corrupt {
                offset: pos,
                seq: expected_seq,
                reason,
            });
            return Ok(out);
        }
        if h.kind == EventKind::User {
            turns += 1;
            turns_crc = format::seq_crc_append(turns_crc, h.seq);
            pending.user_seqs.push(h.seq);
        }
        if h.kind == EventKind::Note {
            notes += 1;
            notes_crc = format::seq_crc_append(notes_crc, h.seq);
            pending.note_seqs.push(h.seq);
        }
        if let Some((id_hash, digest)) = rec.meta {
            commits += 1;
            let first_seq = h.seq - u64::from(h.index_in_commit);
            pending.commits.push(CommitEntry {
                id_hash,
                digest,
                first_seq,
                last_seq: h.seq,
            });
        }
        pending.entries.push(EventEntry {
            offset: pos,
            record_len: h.record_len() as u32,
            record_crc: h.crc,
            kind: h.kind,
            flags: h.flags,
            turns,
            commits,
            turns_crc,
            notes,
            notes_crc,
        });
        pos += h.record_len();
        if h.ends_commit() {
            out.last_seq = h.seq;
            out.good_end = pos;
            out.entries.append(&mut pending.entries);
            out.user_seqs.append(&mut pending.user_seqs);
            out.note_seqs.append(&mut pending.note_seqs);
            out.commits.append(&mut pending.commits);
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
    Some((crate::hex::sha256(meta.id.as_bytes()), digest))
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

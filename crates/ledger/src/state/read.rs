//! Reading events by seq: the index entry (from `ledger.idx` or the in-memory overlay, or
//! re-derived from the log when an entry is damaged), then one read of the records, each
//! checked against its CRC.

use std::io;
use std::ops::RangeInclusive;

use crate::error::{Error, Result};
use crate::event::{ArtifactRef, Event, EventBody, EventKind};
use crate::files::io_err;
use crate::format::{
    self, EVENT_ENTRY_LEN, LOG_HEADER_LEN, RECORD_HEADER_LEN, RecordHeader, names,
};
use crate::sidecar;

use super::LedgerState;

impl LedgerState {
    /// The index entry of `seq`.
    pub(crate) fn entry(&self, seq: u64) -> Result<format::EventEntry> {
        if seq == 0 || seq > self.last_seq {
            return Err(Error::NoSuchSeq {
                seq,
                last_seq: self.last_seq,
            });
        }
        if seq > self.indexed() {
            return Ok(self.overlay[(seq - self.indexed() - 1) as usize]);
        }
        let offset = sidecar::event_entry_offset(seq);
        let b = match &self.idx {
            Some(idx) => sidecar::read_event_entry(idx.as_ref(), seq).map_err(self.idx_err())?,
            None => return Err(self.index_corrupt(offset, seq, "index file missing")),
        };
        match format::EventEntry::decode(&b).filter(|e| self.plausible(e)) {
            Some(e) => Ok(e),
            None => self
                .entry_from_log(seq)
                .ok()
                .filter(|e| self.plausible(e))
                .ok_or_else(|| self.index_corrupt(offset, seq, "index entry damaged")),
        }
    }

    /// How many seqs hold something other than a system marker (a tombstone and the
    /// placeholders it covers, a loss record and its placeholders, an import or retention
    /// marker): the events an application committed that are still there. From the index,
    /// read in chunks of 4096 entries (memory stays bounded; no record is read unless its
    /// entry is damaged).
    pub(crate) fn live_events(&self) -> Result<u64> {
        const CHUNK: u64 = 4096;
        let mut live = 0;
        let mut seq = 1;
        while seq <= self.last_seq {
            let end = if seq <= self.indexed() {
                (seq + CHUNK - 1).min(self.indexed())
            } else {
                self.last_seq
            };
            let mut buf = vec![0u8; ((end - seq + 1) as usize) * EVENT_ENTRY_LEN];
            let stored = seq <= self.indexed()
                && self.idx.as_ref().is_some_and(|idx| {
                    idx.read_at(sidecar::event_entry_offset(seq), &mut buf)
                        .is_ok()
                });
            for (i, s) in (seq..=end).enumerate() {
                let entry = buf[i * EVENT_ENTRY_LEN..(i + 1) * EVENT_ENTRY_LEN]
                    .try_into()
                    .ok()
                    .filter(|_| stored)
                    .and_then(|b: [u8; EVENT_ENTRY_LEN]| format::EventEntry::decode(&b))
                    .filter(|e| self.plausible(e));
                let kind = match entry {
                    Some(e) => e.kind,
                    None => self.entry(s)?.kind,
                };
                live += u64::from(kind != EventKind::System);
            }
            seq = end + 1;
        }
        Ok(live)
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
                // Only the counts are rebuilt; the seq lists' running CRCs are left 0.
                let counts = format::Counts {
                    turns,
                    commits,
                    notes,
                    ..format::Counts::default()
                };
                return Ok(counts.entry(pos, h.record_len() as u32, h.crc, h.kind, h.flags));
            }
            pos += h.record_len();
        }
        Err(Error::NoSuchSeq {
            seq,
            last_seq: self.last_seq,
        })
    }

    fn stored_entry(&self, seq: u64) -> Result<format::EventEntry> {
        if seq > self.indexed() {
            return self.entry(seq);
        }
        let b = match &self.idx {
            Some(idx) => sidecar::read_event_entry(idx.as_ref(), seq).map_err(self.idx_err())?,
            None => [0u8; EVENT_ENTRY_LEN],
        };
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

    fn idx_err(&self) -> impl FnOnce(io::Error) -> Error + use<> {
        io_err(self.storage.as_ref(), names::EVENT_INDEX)
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
        out.retain(|e| !crate::tombstone::is_placeholder(e.seq, &e.body));
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

    /// The stored size in bytes of event `seq`'s record (header + payload).
    pub(crate) fn record_len(&self, seq: u64) -> Option<u64> {
        self.entry(seq).ok().map(|e| u64::from(e.record_len))
    }

    /// Where event `seq`'s record starts in the log: the stored size of every record before it
    /// (and the log's header).
    pub(crate) fn record_offset(&self, seq: u64) -> Option<u64> {
        self.entry(seq).ok().map(|e| e.offset)
    }
}

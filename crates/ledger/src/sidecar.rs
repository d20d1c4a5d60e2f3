//! The four sidecar index files (`ledger.idx`, `turns.idx`, `notes.idx`, `commits.idx`):
//! disposable caches of what the log holds, so that open and reads stay bounded
//! (docs/design.md#l7-bounded-memory).
//!
//! One table, [`SIDECARS`], describes each file: its name, magic, entry length, how many
//! entries a log prefix holds and how an entry is derived from a record. Every path that
//! touches the files goes through it: checking them at open ([`load`]), rebuilding them
//! ([`rebuild`]), appending to them ([`SidecarFiles`]) and comparing them with the log
//! ([`verify`]). The byte layout is in `docs/ledger-format.md`.

use std::io;

use crate::error::Result;
use crate::event::EventKind;
use crate::files::{io_err, open_file};
use crate::format::{
    self, COMMIT_ENTRY_LEN, COMMIT_INDEX_MAGIC, CommitEntry, EVENT_ENTRY_LEN, EVENT_INDEX_MAGIC,
    EventEntry, FLAG_END_OF_COMMIT, INDEX_HEADER_LEN, LOG_HEADER_LEN, NOTE_ENTRY_LEN,
    NOTE_INDEX_MAGIC, RECORD_HEADER_LEN, RecordHeader, TURN_ENTRY_LEN, TURN_INDEX_MAGIC, names,
};
use crate::scan::Scan;
use crate::storage::{OpenMode, Storage, StorageFile};

/// How many trailing `ledger.idx` entries open may step back over (a torn sidecar append).
const MAX_INDEX_WALKBACK: u64 = 4096;

/// Which sidecar; the index of its row in [`SIDECARS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `ledger.idx`: one [`EventEntry`] per seq.
    Events = 0,
    /// `turns.idx`: the seq of each user event.
    Turns = 1,
    /// `notes.idx`: the seq of each note event.
    Notes = 2,
    /// `commits.idx`: one [`CommitEntry`] per id-carrying commit.
    Commits = 3,
}

/// The order sidecars are written in: `ledger.idx` last, so that it never claims what the
/// others lack (open trusts the others up to what its last entry counts).
pub(crate) const WRITE_ORDER: [Kind; 4] = [Kind::Commits, Kind::Turns, Kind::Notes, Kind::Events];

/// One record of the log as the sidecars see it.
pub(crate) struct Record<'a> {
    pub seq: u64,
    /// Its `ledger.idx` entry.
    pub entry: &'a EventEntry,
    /// The commit it closes, when that commit carried an id.
    pub commit: Option<&'a CommitEntry>,
}

/// One sidecar file.
pub(crate) struct Sidecar {
    pub kind: Kind,
    pub name: &'static str,
    pub magic: [u8; 8],
    pub entry_len: usize,
    /// How many entries the file holds for the log prefix ending at `seq`, whose `ledger.idx`
    /// entry is `last`.
    pub count_at: fn(u64, &EventEntry) -> u64,
    /// Appends the entry (if any) that `record` contributes to this file.
    pub derive: fn(&Record<'_>, &mut Vec<u8>),
}

/// Every sidecar, in the order open checks them (`ledger.idx` first: it says how much of the
/// others to trust).
pub(crate) const SIDECARS: [Sidecar; 4] = [
    Sidecar {
        kind: Kind::Events,
        name: names::EVENT_INDEX,
        magic: EVENT_INDEX_MAGIC,
        entry_len: EVENT_ENTRY_LEN,
        count_at: |seq, _| seq,
        derive: |r, out| out.extend_from_slice(&r.entry.encode()),
    },
    Sidecar {
        kind: Kind::Turns,
        name: names::TURN_INDEX,
        magic: TURN_INDEX_MAGIC,
        entry_len: TURN_ENTRY_LEN,
        count_at: |_, e| u64::from(e.turns),
        derive: |r, out| seq_of_kind(r, EventKind::User, out),
    },
    Sidecar {
        kind: Kind::Notes,
        name: names::NOTE_INDEX,
        magic: NOTE_INDEX_MAGIC,
        entry_len: NOTE_ENTRY_LEN,
        count_at: |_, e| u64::from(e.notes),
        derive: |r, out| seq_of_kind(r, EventKind::Note, out),
    },
    Sidecar {
        kind: Kind::Commits,
        name: names::COMMIT_INDEX,
        magic: COMMIT_INDEX_MAGIC,
        entry_len: COMMIT_ENTRY_LEN,
        count_at: |_, e| u64::from(e.commits),
        derive: |r, out| {
            if let Some(c) = r.commit {
                out.extend_from_slice(&c.encode());
            }
        },
    },
];

fn seq_of_kind(r: &Record<'_>, kind: EventKind, out: &mut Vec<u8>) {
    if r.entry.kind == kind {
        out.extend_from_slice(&r.seq.to_le_bytes());
    }
}

/// The row of `kind`.
pub(crate) fn spec(kind: Kind) -> &'static Sidecar {
    &SIDECARS[kind as usize]
}

impl Sidecar {
    /// The file offset of entry number `count` (0-based).
    pub(crate) fn offset_of(&self, count: u64) -> u64 {
        INDEX_HEADER_LEN as u64 + count * self.entry_len as u64
    }

    /// The 32-byte header stamped with `ledger_id`.
    fn header(&self, ledger_id: &[u8; 16]) -> Vec<u8> {
        format::encode_index_header(self.magic, self.entry_len, ledger_id)
    }

    /// Opens the file and checks its header; returns it and its count of whole entries.
    /// `None` when it is missing, too short or stamped for another ledger or version.
    fn open_checked(
        &self,
        st: &dyn Storage,
        mode: OpenMode,
        ledger_id: &[u8; 16],
    ) -> io::Result<Option<(Box<dyn StorageFile>, u64)>> {
        let Some(file) = st.open(self.name, mode)? else {
            return Ok(None);
        };
        let len = file.len()?;
        if len < INDEX_HEADER_LEN as u64 {
            return Ok(None);
        }
        let mut h = vec![0u8; INDEX_HEADER_LEN];
        file.read_at(0, &mut h)?;
        if h != self.header(ledger_id) {
            return Ok(None);
        }
        Ok(Some((
            file,
            (len - INDEX_HEADER_LEN as u64) / self.entry_len as u64,
        )))
    }

    /// The bytes of the first `count` entries of `file`.
    fn read_entries(&self, file: &dyn StorageFile, count: u64) -> io::Result<Vec<u8>> {
        let mut raw = vec![0u8; count as usize * self.entry_len];
        file.read_at(INDEX_HEADER_LEN as u64, &mut raw)?;
        Ok(raw)
    }
}

/// The file offset of the `ledger.idx` entry of `seq` (from 1).
pub(crate) fn event_entry_offset(seq: u64) -> u64 {
    spec(Kind::Events).offset_of(seq - 1)
}

/// The raw `ledger.idx` entry of `seq` (decode with [`EventEntry::decode`]).
pub(crate) fn read_event_entry(
    idx: &dyn StorageFile,
    seq: u64,
) -> io::Result<[u8; EVENT_ENTRY_LEN]> {
    let mut b = [0u8; EVENT_ENTRY_LEN];
    idx.read_at(event_entry_offset(seq), &mut b)?;
    Ok(b)
}

/// The records of a scan, in seq order, each with the id-carrying commit it closes.
fn records(found: &Scan) -> impl Iterator<Item = Record<'_>> {
    let mut commits = found.commits.iter().peekable();
    found.entries.iter().enumerate().map(move |(i, entry)| {
        let seq = i as u64 + 1;
        let commit = commits.next_if(|c| c.last_seq == seq);
        Record { seq, entry, commit }
    })
}

// ---- open: what of the sidecars can be trusted ------------------------------------------

/// What open found the sidecars to agree on with the log.
pub(crate) struct Trusted {
    /// `ledger.idx`, open for reading its entries.
    pub idx: Box<dyn StorageFile>,
    /// Seqs `1..=indexed` have a trusted `ledger.idx` entry.
    pub indexed: u64,
    /// The entry of seq `indexed`.
    pub last: Option<EventEntry>,
    pub user_seqs: Vec<u64>,
    pub note_seqs: Vec<u64>,
    /// Entries of `commits.idx` covered by `last`.
    pub commits: u64,
}

/// Loads the sidecars when they agree with the log; `None` means "rebuild from the log".
/// Reads the last `ledger.idx` entries, and `turns.idx` and `notes.idx` whole (8 bytes per
/// turn and per note: the only part of opening that grows with the ledger).
pub(crate) fn load(
    st: &dyn Storage,
    mode: OpenMode,
    id: &[u8; 16],
    log: &dyn StorageFile,
    log_len: u64,
) -> io::Result<Option<Trusted>> {
    let Some((idx, n)) = spec(Kind::Events).open_checked(st, mode, id)? else {
        return Ok(None);
    };
    let Some((indexed, last)) = last_good_entry(idx.as_ref(), n, log, log_len)? else {
        return Ok(None);
    };
    let count = |kind| last.map_or(0, |e| (spec(kind).count_at)(indexed, &e));
    let crc = |turns: bool| last.map_or(0, |e| if turns { e.turns_crc } else { e.notes_crc });
    let list = |kind, crc| load_seq_list(st, mode, id, spec(kind), count(kind), crc, indexed);
    let Some(user_seqs) = list(Kind::Turns, crc(true))? else {
        return Ok(None);
    };
    let Some(note_seqs) = list(Kind::Notes, crc(false))? else {
        return Ok(None);
    };
    let commits = count(Kind::Commits);
    match spec(Kind::Commits).open_checked(st, mode, id)? {
        Some((_, stored)) if stored >= commits => {}
        _ => return Ok(None),
    }
    Ok(Some(Trusted {
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
) -> io::Result<Option<(u64, Option<EventEntry>)>> {
    let floor = n.saturating_sub(MAX_INDEX_WALKBACK);
    let mut seq = n;
    while seq > floor {
        let b = read_event_entry(idx, seq)?;
        if let Some(e) = EventEntry::decode(&b)
            && e.flags & FLAG_END_OF_COMMIT != 0
        {
            return Ok(entry_matches_log(&e, seq, log, log_len)?.then_some((seq, Some(e))));
        }
        seq -= 1;
    }
    Ok((n == 0).then_some((0, None)))
}

fn entry_matches_log(
    e: &EventEntry,
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

/// Loads the first `count` entries of a seq-list sidecar (`turns.idx`, `notes.idx`),
/// checked against the running CRC `crc` stored in the last trusted `ledger.idx` entry;
/// `None` when they do not match (the caller rebuilds).
fn load_seq_list(
    st: &dyn Storage,
    mode: OpenMode,
    id: &[u8; 16],
    list: &Sidecar,
    count: u64,
    crc: u32,
    indexed: u64,
) -> io::Result<Option<Vec<u64>>> {
    let Some((file, stored)) = list.open_checked(st, mode, id)? else {
        return Ok(None);
    };
    if stored < count {
        return Ok(None);
    }
    let raw = list.read_entries(file.as_ref(), count)?;
    if crc32c::crc32c(&raw) != crc {
        return Ok(None);
    }
    let seqs: Vec<u64> = raw.chunks(list.entry_len).map(format::read_u64).collect();
    let increasing = seqs.windows(2).all(|w| w[0] < w[1]);
    let in_range = seqs.last().is_none_or(|&s| s >= 1 && s <= indexed);
    Ok((increasing && in_range).then_some(seqs))
}

// ---- what the sidecars prove was acknowledged --------------------------------------------

/// The most a sidecar proves was acknowledged: a writer appends sidecar entries only after
/// the log's sync, so an intact entry means its commit was in the log, durable, before any
/// caller was told (with [`crate::SyncMode::PerCommit`]). A torn write can only cut what was
/// never acknowledged: a log that ends before such a commit lost acknowledged data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Acknowledged {
    /// The last seq an intact sidecar entry records as committed.
    pub last_seq: u64,
    /// The sidecar that records it.
    pub source: &'static str,
}

/// How many trailing `commits.idx` entries [`acknowledged`] steps back over.
const MAX_COMMIT_WALKBACK: u64 = 64;

/// What the sidecars stamped with `ledger_id` (any id when `None`: the log header is gone)
/// prove was acknowledged: the last intact end-of-commit entry of `ledger.idx` and the last
/// intact entry of `commits.idx` (each read from the end, bounded). `None` when neither has
/// one. Read it *before* the log's length: whatever it claims is then within that length
/// unless the log lost it (a concurrent writer appends sidecars only after the log).
pub(crate) fn acknowledged(
    st: &dyn Storage,
    ledger_id: Option<&[u8; 16]>,
) -> io::Result<Option<Acknowledged>> {
    let mut best: Option<Acknowledged> = None;
    let events = spec(Kind::Events);
    if let Some((file, n)) = open_for_claims(st, events, ledger_id)? {
        let floor = n.saturating_sub(MAX_INDEX_WALKBACK);
        for seq in (floor + 1..=n).rev() {
            let b = read_event_entry(file.as_ref(), seq)?;
            if EventEntry::decode(&b).is_some_and(|e| e.flags & FLAG_END_OF_COMMIT != 0) {
                best = Some(Acknowledged {
                    last_seq: seq,
                    source: events.name,
                });
                break;
            }
        }
    }
    let commits = spec(Kind::Commits);
    if let Some((file, n)) = open_for_claims(st, commits, ledger_id)? {
        let floor = n.saturating_sub(MAX_COMMIT_WALKBACK);
        for i in (floor..n).rev() {
            let mut b = vec![0u8; COMMIT_ENTRY_LEN];
            file.read_at(commits.offset_of(i), &mut b)?;
            if let Some(c) = CommitEntry::decode(&b) {
                if best.is_none_or(|a| c.last_seq > a.last_seq) {
                    best = Some(Acknowledged {
                        last_seq: c.last_seq,
                        source: commits.name,
                    });
                }
                break;
            }
        }
    }
    Ok(best)
}

/// What `turns.idx` and `notes.idx` stamped with `ledger_id` witness was acknowledged: the
/// seq of their last entry (a user event or a note is listed only once its commit was
/// synced), when their last two entries ascend. These entries carry no checksum of their
/// own, so the caller counts them only where a wrong one cannot do harm: before a torn tail
/// is cut (a flipped entry then makes the open fail closed, never lose data).
pub(crate) fn witnessed(
    st: &dyn Storage,
    ledger_id: Option<&[u8; 16]>,
) -> io::Result<Option<Acknowledged>> {
    let mut best: Option<Acknowledged> = None;
    for kind in [Kind::Turns, Kind::Notes] {
        let s = spec(kind);
        let Some((file, n)) = open_for_claims(st, s, ledger_id)? else {
            continue;
        };
        if n == 0 {
            continue;
        }
        let mut b = [0u8; 8];
        file.read_at(s.offset_of(n - 1), &mut b)?;
        let last = u64::from_le_bytes(b);
        let before = if n >= 2 {
            file.read_at(s.offset_of(n - 2), &mut b)?;
            u64::from_le_bytes(b)
        } else {
            0
        };
        if last > before && best.is_none_or(|a| last > a.last_seq) {
            best = Some(Acknowledged {
                last_seq: last,
                source: s.name,
            });
        }
    }
    Ok(best)
}

/// The later of two claims of what was acknowledged.
pub(crate) fn later(a: Option<Acknowledged>, b: Option<Acknowledged>) -> Option<Acknowledged> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.last_seq > a.last_seq { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// Every intact entry of `commits.idx` (any ledger id: the log header may be damaged), in file
/// order; entries whose checksum fails are skipped. A repair reads which idempotency ids the
/// lost seqs belonged to from it. Empty when the file is missing or not a commit index.
pub(crate) fn commit_claims(st: &dyn Storage) -> io::Result<Vec<CommitEntry>> {
    let commits = spec(Kind::Commits);
    let Some((file, n)) = open_for_claims(st, commits, None)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for i in 0..n {
        let mut b = vec![0u8; COMMIT_ENTRY_LEN];
        file.read_at(commits.offset_of(i), &mut b)?;
        out.extend(CommitEntry::decode(&b));
    }
    Ok(out)
}

/// Opens a sidecar read-only when its header matches `ledger_id` (or only its magic, when
/// `None`); returns it with its count of whole entries.
fn open_for_claims(
    st: &dyn Storage,
    s: &Sidecar,
    ledger_id: Option<&[u8; 16]>,
) -> io::Result<Option<(Box<dyn StorageFile>, u64)>> {
    if let Some(id) = ledger_id {
        return s.open_checked(st, OpenMode::Read, id);
    }
    let Some(file) = st.open(s.name, OpenMode::Read)? else {
        return Ok(None);
    };
    let len = file.len()?;
    if len < INDEX_HEADER_LEN as u64 {
        return Ok(None);
    }
    let mut magic = [0u8; 8];
    file.read_at(0, &mut magic)?;
    if magic != s.magic {
        return Ok(None);
    }
    Ok(Some((
        file,
        (len - INDEX_HEADER_LEN as u64) / s.entry_len as u64,
    )))
}

/// Fails closed when `acked` proves that commits past `last_seq` (the log's last complete
/// commit, ending at `good_end`) had been acknowledged: the log lost them (truncated, or
/// damaged where a torn write cannot reach). Cutting the tail would lose them silently and
/// hand their seqs to new commits; nothing is cut, and the error names the missing seqs.
pub(crate) fn check_acknowledged(
    st: &dyn Storage,
    acked: Option<Acknowledged>,
    last_seq: u64,
    good_end: u64,
) -> Result<()> {
    match acked {
        Some(a) if a.last_seq > last_seq => Err(crate::error::Error::Corrupt {
            path: st.location().join(names::LOG),
            offset: good_end,
            seq: Some(last_seq + 1),
            reason: format!(
                "seqs {}-{} were acknowledged as committed ({} records them) but the log's \
                 complete commits end at seq {last_seq}: acknowledged commits were cut or \
                 damaged (a torn write can only cut what was never acknowledged); nothing is \
                 cut and no seq is reused",
                last_seq + 1,
                a.last_seq,
                a.source
            ),
        }),
        _ => Ok(()),
    }
}

// ---- the writer: rebuild, trim, append ----------------------------------------------------

/// Replaces every sidecar with an empty one stamped with `ledger_id` (temporary file and
/// rename each, in [`WRITE_ORDER`]). The writer then appends what the log holds.
pub(crate) fn rebuild(st: &dyn Storage, ledger_id: &[u8; 16]) -> Result<()> {
    for kind in WRITE_ORDER {
        let s = spec(kind);
        let tmp = format!("{}.tmp", s.name);
        let mut f = crate::files::create_fresh(st, &tmp)?;
        f.set_len(0).map_err(io_err(st, &tmp))?;
        f.write_at(0, &s.header(ledger_id))
            .map_err(io_err(st, &tmp))?;
        drop(f);
        st.rename(&tmp, s.name).map_err(io_err(st, s.name))?;
    }
    Ok(())
}

/// Deletes every sidecar and any temporary file of one (nothing of an old log survives).
pub(crate) fn remove_all(st: &dyn Storage) -> Result<()> {
    for s in &SIDECARS {
        st.remove(s.name).map_err(io_err(st, s.name))?;
        let tmp = format!("{}.tmp", s.name);
        st.remove(&tmp).map_err(io_err(st, &tmp))?;
    }
    Ok(())
}

/// The writer's open sidecar files, indexed by [`Kind`].
pub(crate) struct SidecarFiles {
    files: [Box<dyn StorageFile>; 4],
}

impl SidecarFiles {
    /// Opens every sidecar for writing and trims each to `counts[kind]` entries (what open
    /// validated; anything past it is a torn or stale append).
    pub(crate) fn open_trimmed(st: &dyn Storage, counts: [u64; 4]) -> Result<SidecarFiles> {
        let open = |s: &Sidecar| -> Result<Box<dyn StorageFile>> {
            let mut f = open_file(st, s.name, OpenMode::Write)?;
            let len = s.offset_of(counts[s.kind as usize]);
            if f.len().map_err(io_err(st, s.name))? != len {
                f.set_len(len).map_err(io_err(st, s.name))?;
            }
            Ok(f)
        };
        Ok(SidecarFiles {
            files: [
                open(&SIDECARS[0])?,
                open(&SIDECARS[1])?,
                open(&SIDECARS[2])?,
                open(&SIDECARS[3])?,
            ],
        })
    }

    /// Writes `bytes` (whole entries) after the first `count` entries of `kind`.
    pub(crate) fn append(&mut self, kind: Kind, count: u64, bytes: &[u8]) -> io::Result<()> {
        self.files[kind as usize].write_at(spec(kind).offset_of(count), bytes)
    }

    /// Replaces every entry of `kind` with `bytes`.
    pub(crate) fn rewrite(&mut self, kind: Kind, bytes: &[u8]) -> io::Result<()> {
        let at = spec(kind).offset_of(0);
        let f = &mut self.files[kind as usize];
        f.write_at(at, bytes)
            .and_then(|()| f.set_len(at + bytes.len() as u64))
    }

    /// Syncs every file.
    pub(crate) fn sync_all(&mut self) -> io::Result<()> {
        self.files.iter_mut().try_for_each(|f| f.sync())
    }

    /// The bytes of the first `count` entries of `kind`.
    pub(crate) fn read(&self, kind: Kind, count: u64) -> io::Result<Vec<u8>> {
        spec(kind).read_entries(self.files[kind as usize].as_ref(), count)
    }
}

// ---- verify: compare with the log ---------------------------------------------------------

/// Compares the sidecars with a scan of the whole log: `(events not yet indexed, first
/// disagreement)`. Each file must hold, for the prefix `ledger.idx` covers, exactly the
/// entries its row derives from the records.
pub(crate) fn verify(
    st: &dyn Storage,
    id: &[u8; 16],
    found: &Scan,
) -> io::Result<(u64, Option<String>)> {
    let events = found.entries.len() as u64;
    let Some(stored_events) = read_whole(st, spec(Kind::Events), id)? else {
        let why = format!("{} missing or from another ledger", names::EVENT_INDEX);
        return Ok((events, Some(why)));
    };
    let covered = (stored_events.len() / EVENT_ENTRY_LEN) as u64;
    let covered = covered.min(events);
    let last = covered.checked_sub(1).map(|i| &found.entries[i as usize]);
    for s in &SIDECARS {
        let stored = match s.kind {
            Kind::Events => stored_events.clone(),
            _ => match read_whole(st, s, id)? {
                Some(raw) => raw,
                None => {
                    let why = format!("{} missing or from another ledger", s.name);
                    return Ok((0, Some(why)));
                }
            },
        };
        let k = last.map_or(0, |e| (s.count_at)(covered, e)) as usize;
        if let Some(why) = disagreement(s, &stored, found, k) {
            return Ok((0, Some(why)));
        }
    }
    Ok((events - covered, None))
}

/// Where the first `k` entries of `stored` differ from those derived from the log.
fn disagreement(s: &Sidecar, stored: &[u8], found: &Scan, k: usize) -> Option<String> {
    let len = s.entry_len;
    let want = derived(s, found, k);
    if want.len() == k * len && stored.len() >= want.len() {
        match stored
            .chunks(len)
            .zip(want.chunks(len))
            .position(|(a, b)| a != b)
        {
            None => return None,
            Some(i) if s.kind == Kind::Events => {
                let seq = i + 1;
                return Some(format!(
                    "{} entry for seq {seq} disagrees with the log",
                    s.name
                ));
            }
            Some(_) => {}
        }
    }
    Some(format!("{} disagrees with the log", s.name))
}

/// The first `k` entries of `s` (fewer if the log holds fewer), derived from the records.
fn derived(s: &Sidecar, found: &Scan, k: usize) -> Vec<u8> {
    let want = k * s.entry_len;
    let mut out = Vec::with_capacity(want);
    for r in records(found) {
        if out.len() >= want {
            break;
        }
        (s.derive)(&r, &mut out);
    }
    out.truncate(want);
    out
}

/// The entry bytes of a sidecar whose header matches, whole entries only.
fn read_whole(st: &dyn Storage, s: &Sidecar, id: &[u8; 16]) -> io::Result<Option<Vec<u8>>> {
    match s.open_checked(st, OpenMode::Read, id)? {
        Some((file, count)) => Ok(Some(s.read_entries(file.as_ref(), count)?)),
        None => Ok(None),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn each_row_sits_at_its_kind() {
        for (i, s) in SIDECARS.iter().enumerate() {
            assert_eq!(s.kind as usize, i, "{}", s.name);
        }
        assert_eq!(
            WRITE_ORDER.last(),
            Some(&Kind::Events),
            "ledger.idx is written last"
        );
    }

    /// The entries each row derives from a scan are those the scan itself collected.
    #[test]
    fn derived_entries_match_the_scan() {
        let e = |kind, turns, notes, commits| EventEntry {
            offset: 0,
            record_len: 0,
            record_crc: 0,
            kind,
            flags: 0,
            turns,
            commits,
            turns_crc: 0,
            notes,
            notes_crc: 0,
        };
        let commit = CommitEntry {
            id_hash: [1; 32],
            digest: [2; 32],
            first_seq: 1,
            last_seq: 2,
        };
        let found = Scan {
            entries: vec![
                e(EventKind::User, 1, 0, 0),
                e(EventKind::Note, 1, 1, 1),
                e(EventKind::User, 2, 1, 1),
            ],
            user_seqs: vec![1, 3],
            note_seqs: vec![2],
            commits: vec![commit],
            ..Scan::default()
        };
        let seqs = |v: &[u64]| v.iter().flat_map(|s| s.to_le_bytes()).collect::<Vec<_>>();
        let all: Vec<u8> = found.entries.iter().flat_map(|e| e.encode()).collect();
        assert_eq!(derived(spec(Kind::Events), &found, 3), all);
        assert_eq!(derived(spec(Kind::Turns), &found, 2), seqs(&[1, 3]));
        assert_eq!(derived(spec(Kind::Notes), &found, 1), seqs(&[2]));
        assert_eq!(derived(spec(Kind::Commits), &found, 1), commit.encode());
        let last = &found.entries[2];
        let counts: Vec<u64> = SIDECARS.iter().map(|s| (s.count_at)(3, last)).collect();
        assert_eq!(counts, [3, 2, 1, 1]);
    }
}

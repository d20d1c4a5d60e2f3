//! The on-disk format: every offset and width, as chained constants, and the codecs.
//!
//! This module is the code side of `docs/ledger-format.md`; a test parses the tables in that
//! document and compares them with [`LAYOUTS`], so the two cannot drift apart.

use crate::event::EventKind;

/// File names inside a conversation directory.
pub mod names {
    /// The append-only log: file header, then records.
    pub const LOG: &str = "ledger.log";
    /// Sidecar: one fixed-size entry per event (seq → offset, length, kind, CRC).
    pub const EVENT_INDEX: &str = "ledger.idx";
    /// Sidecar: the seq of every user event (turn starts).
    pub const TURN_INDEX: &str = "turns.idx";
    /// Sidecar: the seq of every note event (notes are mandatory in every projection).
    pub const NOTE_INDEX: &str = "notes.idx";
    /// Sidecar: one entry per commit that carried an id (idempotency table).
    pub const COMMIT_INDEX: &str = "commits.idx";
    /// The log and its sidecars: the files a commit appends to.
    pub const LEDGER_FILES: [&str; 5] = [LOG, EVENT_INDEX, TURN_INDEX, NOTE_INDEX, COMMIT_INDEX];
    /// The lock file held by the one writer.
    pub const LOCK: &str = "lock";
    /// Content-addressed artifacts.
    pub const ARTIFACTS: &str = "artifacts";
    /// Tails cut by recovery, saved for forensics.
    pub const RECOVERED: &str = "recovered";
    /// Present (empty) while an erasure may have left erased bytes in `artifacts/` or
    /// `recovered/`: created before the rewritten log is renamed into place, removed once
    /// those are deleted. A writer open that finds it finishes the deletions.
    pub const ERASE_PENDING: &str = "erase.pending";
}

/// The log format version written by this code, in the file header and in every record it
/// appends (2: event kind 7, `opaque`). Version-1 logs and records are read as they are; the
/// first append to a version-1 log rewrites its header's version to 2 first (see
/// `docs/ledger-format.md`, "Version history").
pub const FORMAT_VERSION: u16 = 2;
/// The oldest log and record version this code reads.
pub const OLDEST_READ_VERSION: u16 = 1;
/// The first record version that may carry event kind 7 (`opaque`).
pub const OPAQUE_SINCE_VERSION: u16 = 2;
/// The sidecar format version (2: `ledger.idx` entries carry note counters; `notes.idx`).
/// Sidecars of another version are ignored and rebuilt from the log.
pub const INDEX_VERSION: u16 = 2;

/// Magic bytes at offset 0 of `ledger.log`.
pub const LOG_MAGIC: [u8; 8] = *b"CTXLEDGR";
/// Magic bytes at offset 4 of every record.
pub const RECORD_MAGIC: [u8; 4] = *b"ctxR";
/// Magic bytes of `ledger.idx`.
pub const EVENT_INDEX_MAGIC: [u8; 8] = *b"CTXIDX\0E";
/// Magic bytes of `turns.idx`.
pub const TURN_INDEX_MAGIC: [u8; 8] = *b"CTXIDX\0T";
/// Magic bytes of `notes.idx`.
pub const NOTE_INDEX_MAGIC: [u8; 8] = *b"CTXIDX\0N";
/// Magic bytes of `commits.idx`.
pub const COMMIT_INDEX_MAGIC: [u8; 8] = *b"CTXIDX\0C";

/// Record flag: the last record of a commit. A commit is visible only once this record is.
pub const FLAG_END_OF_COMMIT: u8 = 0x01;
/// Record flag: the record carries commit metadata (`meta_len > 0`).
pub const FLAG_COMMIT_META: u8 = 0x02;
/// Flags this version understands; any other bit makes the record invalid.
pub const KNOWN_FLAGS: u8 = FLAG_END_OF_COMMIT | FLAG_COMMIT_META;

// ---- ledger.log file header -------------------------------------------------------------
pub const H_MAGIC: usize = 0;
pub const H_VERSION: usize = H_MAGIC + 8;
pub const H_HEADER_LEN: usize = H_VERSION + 2;
pub const H_FLAGS: usize = H_HEADER_LEN + 2;
pub const H_LEDGER_ID: usize = H_FLAGS + 4;
pub const H_CREATED_MS: usize = H_LEDGER_ID + 16;
pub const H_RESERVED: usize = H_CREATED_MS + 8;
pub const H_CRC: usize = H_RESERVED + 20;
/// Length of the log file header; records start here.
pub const LOG_HEADER_LEN: usize = H_CRC + 4;

// ---- record header ------------------------------------------------------------------------
pub const R_CRC: usize = 0;
pub const R_MAGIC: usize = R_CRC + 4;
pub const R_VERSION: usize = R_MAGIC + 4;
pub const R_KIND: usize = R_VERSION + 2;
pub const R_FLAGS: usize = R_KIND + 1;
pub const R_INDEX_IN_COMMIT: usize = R_FLAGS + 1;
pub const R_SEQ: usize = R_INDEX_IN_COMMIT + 4;
pub const R_TS_MS: usize = R_SEQ + 8;
pub const R_BODY_LEN: usize = R_TS_MS + 8;
pub const R_META_LEN: usize = R_BODY_LEN + 4;
/// Length of a record header; the payload (body, then meta) follows.
pub const RECORD_HEADER_LEN: usize = R_META_LEN + 4;

// ---- sidecar file header (all four sidecars) ----------------------------------------------
pub const X_MAGIC: usize = 0;
pub const X_VERSION: usize = X_MAGIC + 8;
pub const X_ENTRY_LEN: usize = X_VERSION + 2;
pub const X_LEDGER_ID: usize = X_ENTRY_LEN + 2;
pub const X_CRC: usize = X_LEDGER_ID + 16;
/// Length of a sidecar header; entries follow.
pub const INDEX_HEADER_LEN: usize = X_CRC + 4;

// ---- ledger.idx entry ---------------------------------------------------------------------
pub const E_OFFSET: usize = 0;
pub const E_RECORD_LEN: usize = E_OFFSET + 8;
pub const E_RECORD_CRC: usize = E_RECORD_LEN + 4;
pub const E_KIND: usize = E_RECORD_CRC + 4;
pub const E_FLAGS: usize = E_KIND + 1;
pub const E_RESERVED: usize = E_FLAGS + 1;
pub const E_TURNS: usize = E_RESERVED + 2;
pub const E_COMMITS: usize = E_TURNS + 4;
pub const E_TURNS_CRC: usize = E_COMMITS + 4;
pub const E_NOTES: usize = E_TURNS_CRC + 4;
pub const E_NOTES_CRC: usize = E_NOTES + 4;
pub const E_CRC: usize = E_NOTES_CRC + 4;
/// Length of one `ledger.idx` entry (entry `i` describes seq `i + 1`).
pub const EVENT_ENTRY_LEN: usize = E_CRC + 4;

// ---- turns.idx entry ----------------------------------------------------------------------
pub const T_SEQ: usize = 0;
/// Length of one `turns.idx` entry.
pub const TURN_ENTRY_LEN: usize = T_SEQ + 8;

// ---- notes.idx entry ----------------------------------------------------------------------
pub const N_SEQ: usize = 0;
/// Length of one `notes.idx` entry.
pub const NOTE_ENTRY_LEN: usize = N_SEQ + 8;

// ---- commits.idx entry --------------------------------------------------------------------
pub const C_ID_HASH: usize = 0;
pub const C_DIGEST: usize = C_ID_HASH + 32;
pub const C_FIRST_SEQ: usize = C_DIGEST + 32;
pub const C_LAST_SEQ: usize = C_FIRST_SEQ + 8;
pub const C_RESERVED: usize = C_LAST_SEQ + 8;
pub const C_CRC: usize = C_RESERVED + 4;
/// Length of one `commits.idx` entry.
pub const COMMIT_ENTRY_LEN: usize = C_CRC + 4;

/// One field of a layout: (name, offset, width in bytes).
pub type Field = (&'static str, usize, usize);

/// Every documented layout: (table name, fields). The doc test checks that
/// `docs/ledger-format.md` states exactly these.
pub const LAYOUTS: &[(&str, &[Field])] = &[
    (
        "log_header",
        &[
            ("magic", H_MAGIC, 8),
            ("version", H_VERSION, 2),
            ("header_len", H_HEADER_LEN, 2),
            ("flags", H_FLAGS, 4),
            ("ledger_id", H_LEDGER_ID, 16),
            ("created_ms", H_CREATED_MS, 8),
            ("reserved", H_RESERVED, 20),
            ("header_crc", H_CRC, 4),
        ],
    ),
    (
        "record_header",
        &[
            ("crc", R_CRC, 4),
            ("magic", R_MAGIC, 4),
            ("version", R_VERSION, 2),
            ("kind", R_KIND, 1),
            ("flags", R_FLAGS, 1),
            ("index_in_commit", R_INDEX_IN_COMMIT, 4),
            ("seq", R_SEQ, 8),
            ("ts_ms", R_TS_MS, 8),
            ("body_len", R_BODY_LEN, 4),
            ("meta_len", R_META_LEN, 4),
        ],
    ),
    (
        "index_header",
        &[
            ("magic", X_MAGIC, 8),
            ("version", X_VERSION, 2),
            ("entry_len", X_ENTRY_LEN, 2),
            ("ledger_id", X_LEDGER_ID, 16),
            ("header_crc", X_CRC, 4),
        ],
    ),
    (
        "event_entry",
        &[
            ("offset", E_OFFSET, 8),
            ("record_len", E_RECORD_LEN, 4),
            ("record_crc", E_RECORD_CRC, 4),
            ("kind", E_KIND, 1),
            ("flags", E_FLAGS, 1),
            ("reserved", E_RESERVED, 2),
            ("turns", E_TURNS, 4),
            ("commits", E_COMMITS, 4),
            ("turns_crc", E_TURNS_CRC, 4),
            ("notes", E_NOTES, 4),
            ("notes_crc", E_NOTES_CRC, 4),
            ("entry_crc", E_CRC, 4),
        ],
    ),
    ("turn_entry", &[("seq", T_SEQ, 8)]),
    ("note_entry", &[("seq", N_SEQ, 8)]),
    (
        "commit_entry",
        &[
            ("id_hash", C_ID_HASH, 32),
            ("digest", C_DIGEST, 32),
            ("first_seq", C_FIRST_SEQ, 8),
            ("last_seq", C_LAST_SEQ, 8),
            ("reserved", C_RESERVED, 4),
            ("entry_crc", C_CRC, 4),
        ],
    ),
];

fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get_u16(buf: &[u8], at: usize) -> u16 {
    let mut b = [0u8; 2];
    b.copy_from_slice(&buf[at..at + 2]);
    u16::from_le_bytes(b)
}
fn get_u32(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}
fn get_u64(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}

/// The decoded `ledger.log` file header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogHeader {
    /// The format version in the header: [`FORMAT_VERSION`] for a log this code created,
    /// older for one it has not appended to yet.
    pub version: u16,
    /// Random id written at creation.
    pub ledger_id: [u8; 16],
    /// Creation time, ms since the Unix epoch.
    pub created_ms: i64,
}

impl LogHeader {
    /// Encodes the header (64 bytes).
    pub fn encode(&self) -> [u8; LOG_HEADER_LEN] {
        let mut b = [0u8; LOG_HEADER_LEN];
        b[H_MAGIC..H_MAGIC + 8].copy_from_slice(&LOG_MAGIC);
        put_u16(&mut b, H_VERSION, self.version);
        put_u16(&mut b, H_HEADER_LEN, LOG_HEADER_LEN as u16);
        b[H_LEDGER_ID..H_LEDGER_ID + 16].copy_from_slice(&self.ledger_id);
        put_u64(&mut b, H_CREATED_MS, self.created_ms as u64);
        let crc = crc32c::crc32c(&b[..H_CRC]);
        put_u32(&mut b, H_CRC, crc);
        b
    }

    /// A header for a new log, at [`FORMAT_VERSION`].
    pub fn new(ledger_id: [u8; 16], created_ms: i64) -> LogHeader {
        LogHeader {
            version: FORMAT_VERSION,
            ledger_id,
            created_ms,
        }
    }

    /// Decodes a header, or says why it is not one this version can read.
    ///
    /// A header whose version was being raised from 1 to 2 in place when the machine stopped
    /// (the new version bytes written, its checksum not yet wholly) is read as version 1: the
    /// upgrade is synced before any version-2 record is appended, so none follows it, and the
    /// next append raises it again.
    pub fn decode(b: &[u8]) -> Result<LogHeader, String> {
        if b.len() < LOG_HEADER_LEN {
            return Err(format!(
                "file header is {} bytes, expected {LOG_HEADER_LEN}",
                b.len()
            ));
        }
        if b[H_MAGIC..H_MAGIC + 8] != LOG_MAGIC {
            return Err("not a ctxlog ledger (bad magic)".into());
        }
        let mut version = get_u16(b, H_VERSION);
        if crc32c::crc32c(&b[..H_CRC]) != get_u32(b, H_CRC) {
            if !is_torn_upgrade(b) {
                return Err("file header checksum mismatch".into());
            }
            version = OLDEST_READ_VERSION;
        }
        if !(OLDEST_READ_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(format!(
                "unsupported format version {version} (this ctxlog reads versions \
                 {OLDEST_READ_VERSION} to {FORMAT_VERSION}: use a newer ctxlog)"
            ));
        }
        if get_u16(b, H_HEADER_LEN) as usize != LOG_HEADER_LEN || get_u32(b, H_FLAGS) != 0 {
            return Err("unsupported file header layout or flags".into());
        }
        let mut ledger_id = [0u8; 16];
        ledger_id.copy_from_slice(&b[H_LEDGER_ID..H_LEDGER_ID + 16]);
        Ok(LogHeader {
            version,
            ledger_id,
            created_ms: get_u64(b, H_CREATED_MS) as i64,
        })
    }
}

/// True when `b` is a version-1 header caught while its version was raised to 2 in place:
/// the version field reads 2 and the checksum's first bytes are the new one's, the rest the
/// old one's (a write stopped part way holds a prefix of what was written).
fn is_torn_upgrade(b: &[u8]) -> bool {
    if get_u16(b, H_VERSION) != FORMAT_VERSION {
        return false;
    }
    let mut old = [0u8; H_CRC];
    old.copy_from_slice(&b[..H_CRC]);
    put_u16(&mut old, H_VERSION, OLDEST_READ_VERSION);
    let (new_crc, old_crc) = (
        crc32c::crc32c(&b[..H_CRC]).to_le_bytes(),
        crc32c::crc32c(&old).to_le_bytes(),
    );
    let stored = &b[H_CRC..H_CRC + 4];
    (0..4).any(|k| stored[..k] == new_crc[..k] && stored[k..] == old_crc[k..])
}

/// The fixed part of a record, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Stored CRC32C (over header bytes 4..40 and the payload).
    pub crc: u32,
    /// Event kind.
    pub kind: EventKind,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// 0-based position of this record within its commit.
    pub index_in_commit: u32,
    /// The event's seq.
    pub seq: u64,
    /// Commit time, ms since the Unix epoch.
    pub ts_ms: i64,
    /// Length of the body JSON.
    pub body_len: u32,
    /// Length of the commit metadata JSON (0 unless `FLAG_COMMIT_META`).
    pub meta_len: u32,
}

impl RecordHeader {
    /// Total record length: header plus payload.
    pub fn record_len(&self) -> u64 {
        RECORD_HEADER_LEN as u64 + u64::from(self.body_len) + u64::from(self.meta_len)
    }

    /// True when this record closes its commit.
    pub fn ends_commit(&self) -> bool {
        self.flags & FLAG_END_OF_COMMIT != 0
    }

    /// Parses the 40 header bytes, checking magic, version, kind and flags (not the CRC,
    /// which covers the payload too).
    pub fn parse(b: &[u8]) -> Result<RecordHeader, String> {
        if b.len() < RECORD_HEADER_LEN {
            return Err("incomplete record header".into());
        }
        if b[R_MAGIC..R_MAGIC + 4] != RECORD_MAGIC {
            return Err("bad record magic".into());
        }
        let version = get_u16(b, R_VERSION);
        if !(OLDEST_READ_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(format!("unsupported record version {version}"));
        }
        let kind = EventKind::from_byte(b[R_KIND])
            .ok_or_else(|| format!("unknown kind byte {}", b[R_KIND]))?;
        if kind == EventKind::Opaque && version < OPAQUE_SINCE_VERSION {
            return Err(format!(
                "kind byte {} in a version-{version} record",
                b[R_KIND]
            ));
        }
        let flags = b[R_FLAGS];
        if flags & !KNOWN_FLAGS != 0 {
            return Err(format!("unknown record flags {flags:#04x}"));
        }
        let meta_len = get_u32(b, R_META_LEN);
        if (meta_len > 0) != (flags & FLAG_COMMIT_META != 0) {
            return Err("commit-metadata flag disagrees with meta_len".into());
        }
        Ok(RecordHeader {
            crc: get_u32(b, R_CRC),
            kind,
            flags,
            index_in_commit: get_u32(b, R_INDEX_IN_COMMIT),
            seq: get_u64(b, R_SEQ),
            ts_ms: get_u64(b, R_TS_MS) as i64,
            body_len: get_u32(b, R_BODY_LEN),
            meta_len,
        })
    }
}

/// Encodes one record (header, body, meta) onto `out`; returns its CRC.
#[allow(clippy::too_many_arguments)]
pub fn encode_record(
    out: &mut Vec<u8>,
    kind: EventKind,
    flags: u8,
    index_in_commit: u32,
    seq: u64,
    ts_ms: i64,
    body: &[u8],
    meta: &[u8],
) -> u32 {
    let start = out.len();
    out.resize(start + RECORD_HEADER_LEN, 0);
    let h = &mut out[start..];
    h[R_MAGIC..R_MAGIC + 4].copy_from_slice(&RECORD_MAGIC);
    put_u16(h, R_VERSION, FORMAT_VERSION);
    h[R_KIND] = kind.as_byte();
    h[R_FLAGS] = flags | if meta.is_empty() { 0 } else { FLAG_COMMIT_META };
    put_u32(h, R_INDEX_IN_COMMIT, index_in_commit);
    put_u64(h, R_SEQ, seq);
    put_u64(h, R_TS_MS, ts_ms as u64);
    put_u32(h, R_BODY_LEN, body.len() as u32);
    put_u32(h, R_META_LEN, meta.len() as u32);
    out.extend_from_slice(body);
    out.extend_from_slice(meta);
    let crc = crc32c::crc32c(&out[start + R_MAGIC..]);
    put_u32(&mut out[start..], R_CRC, crc);
    crc
}

/// The CRC a record should carry, computed from its header bytes and payload.
pub fn record_crc(header: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&header[R_MAGIC..RECORD_HEADER_LEN]), payload)
}

/// The header shared by the four sidecar files.
pub fn encode_index_header(magic: [u8; 8], entry_len: usize, ledger_id: &[u8; 16]) -> Vec<u8> {
    let mut b = vec![0u8; INDEX_HEADER_LEN];
    b[X_MAGIC..X_MAGIC + 8].copy_from_slice(&magic);
    put_u16(&mut b, X_VERSION, INDEX_VERSION);
    put_u16(&mut b, X_ENTRY_LEN, entry_len as u16);
    b[X_LEDGER_ID..X_LEDGER_ID + 16].copy_from_slice(ledger_id);
    let crc = crc32c::crc32c(&b[..X_CRC]);
    put_u32(&mut b, X_CRC, crc);
    b
}

/// One `ledger.idx` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventEntry {
    /// Byte offset of the record in `ledger.log`.
    pub offset: u64,
    /// Record length (header + payload).
    pub record_len: u32,
    /// The record's CRC, to check the index against the log cheaply.
    pub record_crc: u32,
    /// Event kind.
    pub kind: EventKind,
    /// Record flags.
    pub flags: u8,
    /// Number of user events with seq ≤ this one.
    pub turns: u32,
    /// Number of id-carrying commits whose last seq ≤ this one.
    pub commits: u32,
    /// CRC32C of the first `turns` entries of `turns.idx` (see [`seq_crc_append`]).
    pub turns_crc: u32,
    /// Number of note events with seq ≤ this one.
    pub notes: u32,
    /// CRC32C of the first `notes` entries of `notes.idx` (see [`seq_crc_append`]).
    pub notes_crc: u32,
}

/// The running counts an [`EventEntry`] carries: what the events up to and including it add
/// up to. The log's scan and the commit encoder both advance them with [`Counts::add`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub turns: u32,
    pub commits: u32,
    pub turns_crc: u32,
    pub notes: u32,
    pub notes_crc: u32,
}

impl Counts {
    /// The counts `e` carries.
    pub(crate) fn of(e: &EventEntry) -> Counts {
        Counts {
            turns: e.turns,
            commits: e.commits,
            turns_crc: e.turns_crc,
            notes: e.notes,
            notes_crc: e.notes_crc,
        }
    }

    /// Counts event `seq` of `kind`: a user event is a turn, a note a note (each also extends
    /// its sidecar's running CRC).
    pub(crate) fn add(&mut self, kind: EventKind, seq: u64) {
        if kind == EventKind::User {
            self.turns += 1;
            self.turns_crc = seq_crc_append(self.turns_crc, seq);
        }
        if kind == EventKind::Note {
            self.notes += 1;
            self.notes_crc = seq_crc_append(self.notes_crc, seq);
        }
    }

    /// The entry of the record at `offset` (`record_len` bytes, checksum `record_crc`) that
    /// these counts end at.
    pub(crate) fn entry(
        self,
        offset: u64,
        record_len: u32,
        record_crc: u32,
        kind: EventKind,
        flags: u8,
    ) -> EventEntry {
        EventEntry {
            offset,
            record_len,
            record_crc,
            kind,
            flags,
            turns: self.turns,
            commits: self.commits,
            turns_crc: self.turns_crc,
            notes: self.notes,
            notes_crc: self.notes_crc,
        }
    }
}

/// Extends the running CRC of a seq-list sidecar (`turns.idx`, `notes.idx`) with the entry
/// for `seq`: the CRC32C of all entries so far, as stored (8 bytes little-endian each).
pub fn seq_crc_append(crc: u32, seq: u64) -> u32 {
    crc32c::crc32c_append(crc, &seq.to_le_bytes())
}

impl EventEntry {
    /// Encodes the entry (44 bytes).
    pub fn encode(&self) -> [u8; EVENT_ENTRY_LEN] {
        let mut b = [0u8; EVENT_ENTRY_LEN];
        put_u64(&mut b, E_OFFSET, self.offset);
        put_u32(&mut b, E_RECORD_LEN, self.record_len);
        put_u32(&mut b, E_RECORD_CRC, self.record_crc);
        b[E_KIND] = self.kind.as_byte();
        b[E_FLAGS] = self.flags;
        put_u32(&mut b, E_TURNS, self.turns);
        put_u32(&mut b, E_COMMITS, self.commits);
        put_u32(&mut b, E_TURNS_CRC, self.turns_crc);
        put_u32(&mut b, E_NOTES, self.notes);
        put_u32(&mut b, E_NOTES_CRC, self.notes_crc);
        let crc = crc32c::crc32c(&b[..E_CRC]);
        put_u32(&mut b, E_CRC, crc);
        b
    }

    /// Decodes an entry; `None` when its checksum or kind is wrong.
    pub fn decode(b: &[u8]) -> Option<EventEntry> {
        if b.len() < EVENT_ENTRY_LEN || crc32c::crc32c(&b[..E_CRC]) != get_u32(b, E_CRC) {
            return None;
        }
        Some(EventEntry {
            offset: get_u64(b, E_OFFSET),
            record_len: get_u32(b, E_RECORD_LEN),
            record_crc: get_u32(b, E_RECORD_CRC),
            kind: EventKind::from_byte(b[E_KIND])?,
            flags: b[E_FLAGS],
            turns: get_u32(b, E_TURNS),
            commits: get_u32(b, E_COMMITS),
            turns_crc: get_u32(b, E_TURNS_CRC),
            notes: get_u32(b, E_NOTES),
            notes_crc: get_u32(b, E_NOTES_CRC),
        })
    }

    /// The log offset just past this record (saturating: a crafted entry near `u64::MAX`
    /// must not overflow; such an entry lies past any log and is treated as damaged).
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(u64::from(self.record_len))
    }
}

/// One `commits.idx` entry: an id-carrying commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitEntry {
    /// SHA-256 of the commit id's UTF-8 bytes.
    pub id_hash: [u8; 32],
    /// SHA-256 of the submitted events' canonical JSON (keys sorted; see the format doc).
    pub digest: [u8; 32],
    /// First seq the commit wrote.
    pub first_seq: u64,
    /// Last seq the commit wrote.
    pub last_seq: u64,
}

impl CommitEntry {
    /// Encodes the entry (88 bytes).
    pub fn encode(&self) -> [u8; COMMIT_ENTRY_LEN] {
        let mut b = [0u8; COMMIT_ENTRY_LEN];
        b[C_ID_HASH..C_ID_HASH + 32].copy_from_slice(&self.id_hash);
        b[C_DIGEST..C_DIGEST + 32].copy_from_slice(&self.digest);
        put_u64(&mut b, C_FIRST_SEQ, self.first_seq);
        put_u64(&mut b, C_LAST_SEQ, self.last_seq);
        let crc = crc32c::crc32c(&b[..C_CRC]);
        put_u32(&mut b, C_CRC, crc);
        b
    }

    /// Decodes an entry; `None` when its checksum is wrong.
    pub fn decode(b: &[u8]) -> Option<CommitEntry> {
        if b.len() < COMMIT_ENTRY_LEN || crc32c::crc32c(&b[..C_CRC]) != get_u32(b, C_CRC) {
            return None;
        }
        let mut id_hash = [0u8; 32];
        id_hash.copy_from_slice(&b[C_ID_HASH..C_ID_HASH + 32]);
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&b[C_DIGEST..C_DIGEST + 32]);
        Some(CommitEntry {
            id_hash,
            digest,
            first_seq: get_u64(b, C_FIRST_SEQ),
            last_seq: get_u64(b, C_LAST_SEQ),
        })
    }
}

/// Reads a little-endian u64 (used for `turns.idx` and `notes.idx`).
pub fn read_u64(b: &[u8]) -> u64 {
    get_u64(b, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_contiguous_and_match_lengths() {
        let totals = [
            ("log_header", LOG_HEADER_LEN),
            ("record_header", RECORD_HEADER_LEN),
            ("index_header", INDEX_HEADER_LEN),
            ("event_entry", EVENT_ENTRY_LEN),
            ("turn_entry", TURN_ENTRY_LEN),
            ("note_entry", NOTE_ENTRY_LEN),
            ("commit_entry", COMMIT_ENTRY_LEN),
        ];
        for (name, fields) in LAYOUTS {
            let mut at = 0;
            for (_, off, width) in *fields {
                assert_eq!(*off, at, "{name}");
                at += width;
            }
            let total = totals.iter().find(|(n, _)| n == name).unwrap().1;
            assert_eq!(at, total, "{name}");
        }
        assert_eq!(LOG_HEADER_LEN, 64);
        assert_eq!(RECORD_HEADER_LEN, 40);
        assert_eq!(EVENT_ENTRY_LEN, 44);
    }

    #[test]
    fn record_round_trips_and_crc_covers_payload() {
        let mut out = Vec::new();
        let crc = encode_record(
            &mut out,
            EventKind::User,
            FLAG_END_OF_COMMIT,
            0,
            7,
            99,
            b"{}",
            b"",
        );
        let h = RecordHeader::parse(&out).unwrap();
        assert_eq!(h.crc, crc);
        assert_eq!(h.seq, 7);
        assert_eq!(record_crc(&out, &out[RECORD_HEADER_LEN..]), crc);
        out[RECORD_HEADER_LEN] ^= 1;
        assert_ne!(record_crc(&out, &out[RECORD_HEADER_LEN..]), crc);
    }

    fn record(kind: EventKind, version: u16) -> Vec<u8> {
        let mut out = Vec::new();
        encode_record(&mut out, kind, FLAG_END_OF_COMMIT, 0, 1, 0, b"{}", b"");
        put_u16(&mut out, R_VERSION, version);
        out
    }

    #[test]
    fn records_of_both_versions_read_and_opaque_needs_version_2() {
        assert_eq!(FORMAT_VERSION, 2);
        for v in [1, 2] {
            assert!(RecordHeader::parse(&record(EventKind::User, v)).is_ok());
        }
        assert!(RecordHeader::parse(&record(EventKind::Opaque, 2)).is_ok());
        let err = RecordHeader::parse(&record(EventKind::Opaque, 1)).unwrap_err();
        assert_eq!(err, "kind byte 7 in a version-1 record");
        for v in [0, 3] {
            let err = RecordHeader::parse(&record(EventKind::User, v)).unwrap_err();
            assert_eq!(err, format!("unsupported record version {v}"));
        }
    }

    #[test]
    fn headers_of_both_versions_read_and_a_torn_upgrade_reads_as_version_1() {
        let mut old = LogHeader::new([7; 16], 42);
        old.version = 1;
        let (v1, v2) = (old.encode(), LogHeader::new([7; 16], 42).encode());
        assert_eq!(LogHeader::decode(&v1).unwrap(), old);
        assert_eq!(LogHeader::decode(&v2).unwrap().version, 2);
        // Every prefix of the in-place upgrade: v2's first `k` bytes over v1.
        for k in 0..=LOG_HEADER_LEN {
            let mut torn = v1;
            torn[..k].copy_from_slice(&v2[..k]);
            let got = LogHeader::decode(&torn).unwrap();
            let want = if k == LOG_HEADER_LEN { 2 } else { 1 };
            assert_eq!((got.version, got.ledger_id), (want, [7; 16]), "prefix {k}");
        }
        let mut flipped = v2;
        flipped[H_CRC] ^= 0x55;
        flipped[H_CRC + 3] ^= 0x55;
        assert!(LogHeader::decode(&flipped).is_err());
        let mut v3 = LogHeader::new([7; 16], 42);
        v3.version = 3;
        let err = LogHeader::decode(&v3.encode()).unwrap_err();
        assert!(err.starts_with("unsupported format version 3"), "{err}");
    }
}

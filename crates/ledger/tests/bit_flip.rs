//! Failure class: bit rot or a stray write inside records that have valid records after them.
//!
//! Guarantee (docs/design.md#l2-recovery): this is corruption, never a torn tail. Nothing is cut or
//! skipped. An open that reads the damaged record (any open without a usable sidecar index, or with
//! `Options::check_on_open`) fails closed with `Error::Corrupt` naming the record's offset and the
//! seq it should have; `verify` names the same offset and seq; reading the event fails the same way
//! even when open trusted the index; and the files are left byte-identical.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use ctxlog_ledger::{Error, Ledger, LedgerRead, Options, Reader, SyncMode};

fn build(dir: &Path) -> Vec<u8> {
    let mut opts = Options::default();
    opts.sync(SyncMode::Never);
    let (mut ledger, _) = Ledger::open(dir, &opts).unwrap();
    ledger.commit(&turn(1)).unwrap();
    ledger
        .commit(&commit(vec![
            user("go"),
            call("c1"),
            result("c1", "ok"),
            assistant("done"),
        ]))
        .unwrap();
    ledger.commit(&turn(3)).unwrap();
    std::fs::read(dir.join("ledger.log")).unwrap()
}

fn assert_corrupt(e: Error, offset: u64, seq: u64) {
    match e {
        Error::Corrupt {
            offset: o, seq: s, ..
        } => {
            assert_eq!((o, s), (offset, Some(seq)));
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn a_flipped_bit_before_the_last_record_fails_closed_with_offset_and_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    let log = build(&dir);
    let pristine = snapshot_dir(&dir);
    let records = record_offsets(&log);
    let last = records.len() - 1;
    for &(offset, seq) in &records[..last] {
        let next = records.iter().find(|(_, s)| *s == seq + 1).unwrap().0;
        // Bits in the CRC, the magic, the seq field and the payload.
        for byte in [offset, offset + 5, offset + 16, next - 1] {
            let mut bad = log.clone();
            bad[byte as usize] ^= 0x10;
            std::fs::write(dir.join("ledger.log"), &bad).unwrap();
            let before = snapshot_dir(&dir);
            assert_corrupt(ctxlog_ledger::verify(&dir).unwrap_err(), offset, seq);
            let mut check = Options::default();
            check.check_on_open(true);
            assert_corrupt(Ledger::open(&dir, &check).err().unwrap(), offset, seq);
            // Trusting the index, open succeeds without reading the record, but reading it
            // fails closed, from the writer and from a reader.
            let (ledger, report) = Ledger::open(&dir, &Options::default()).unwrap();
            assert!(report.is_clean());
            assert_corrupt(ledger.event(seq).unwrap_err(), offset, seq);
            drop(ledger);
            let reader = Reader::open(&dir).unwrap();
            assert_corrupt(
                reader.events(1..=reader.last_seq()).unwrap_err(),
                offset,
                seq,
            );
            // Without a sidecar, open must read the record: it fails closed.
            for side in ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"] {
                std::fs::remove_file(dir.join(side)).unwrap();
            }
            assert_corrupt(Reader::open(&dir).err().unwrap(), offset, seq);
            assert_corrupt(
                Ledger::open(&dir, &Options::default()).err().unwrap(),
                offset,
                seq,
            );
            let mut after = snapshot_dir(&dir);
            for side in ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"] {
                after.insert(side.to_string(), before[side].clone());
            }
            assert_eq!(after, before, "nothing was cut or rewritten");
            // Restore for the next round.
            for (name, bytes) in &pristine {
                if !name.ends_with('/') {
                    std::fs::write(dir.join(name), bytes).unwrap();
                }
            }
        }
    }
}

/// A flipped bit in the last record looks like a torn tail. It is cut (and reported) only
/// when nothing proves its commit was acknowledged; when the sidecars record it as committed,
/// open and verify fail closed naming the missing seqs, and nothing is cut.
#[test]
fn a_flipped_bit_in_the_last_record_is_a_torn_tail_and_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let log = build(tmp.path());
    let records = record_offsets(&log);
    let &(last, _) = records.last().unwrap();
    let &(offset, _) = records.iter().find(|(_, s)| *s == 7).unwrap(); // its commit's start
    let mut bad = log.clone();
    bad[last as usize + 20] ^= 1;
    std::fs::write(tmp.path().join("ledger.log"), &bad).unwrap();
    for e in [
        Ledger::open(tmp.path(), &Options::default()).err().unwrap(),
        ctxlog_ledger::verify(tmp.path()).unwrap_err(),
    ] {
        assert_corrupt(e, offset, 7);
    }
    assert!(std::fs::read(tmp.path().join("ledger.log")).unwrap() == bad);
    for sidecar in ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"] {
        std::fs::remove_file(tmp.path().join(sidecar)).unwrap();
    }
    let (ledger, report) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    assert_eq!(report.bytes_cut, log.len() as u64 - offset);
    assert_eq!(ledger.last_seq(), 6);
    assert_eq!(
        std::fs::read(report.saved_to.unwrap()).unwrap(),
        bad[offset as usize..]
    );
}

#[test]
fn a_damaged_header_fails_closed_at_offset_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = build(tmp.path());
    log[3] ^= 1;
    std::fs::write(tmp.path().join("ledger.log"), &log).unwrap();
    for e in [
        Ledger::open(tmp.path(), &Options::default()).err().unwrap(),
        ctxlog_ledger::verify(tmp.path()).unwrap_err(),
    ] {
        assert!(
            matches!(
                e,
                Error::Corrupt {
                    offset: 0,
                    seq: None,
                    ..
                }
            ),
            "{e:?}"
        );
    }
}

#[test]
fn a_damaged_index_entry_is_worked_around_and_rebuilt_from_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path());
    let idx_path = tmp.path().join("ledger.idx");
    let mut idx = std::fs::read(&idx_path).unwrap();
    let at = ctxlog_ledger::format::INDEX_HEADER_LEN + ctxlog_ledger::format::EVENT_ENTRY_LEN * 3;
    idx[at + 3] ^= 0x40; // entry of seq 4
    std::fs::write(&idx_path, &idx).unwrap();
    let report = ctxlog_ledger::verify(tmp.path()).unwrap();
    assert!(!report.sidecar_ok);
    let reader = Reader::open(tmp.path()).unwrap();
    assert_eq!(reader.event(4).unwrap().seq, 4);
    assert_eq!(reader.kind(4), Some(ctxlog_ledger::EventKind::ToolCall));
    // The last entry is intact, so open trusts the index; deleting it forces a rebuild.
    std::fs::remove_file(&idx_path).unwrap();
    let (ledger, report) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    assert!(report.index_rebuilt);
    assert_eq!(ledger.last_seq(), 8);
    drop(ledger);
    assert!(ctxlog_ledger::verify(tmp.path()).unwrap().is_clean());
}

/// `notes.idx` (the seqs of note events, which every projection must include) has no
/// per-entry checksum: the running CRC in the last `ledger.idx` entry covers it, as for
/// `turns.idx`. A flipped bit, a torn append or a missing file is caught at open: readers
/// fall back to scanning the log, the writer rebuilds all sidecars, and the seqs are right.
#[test]
fn a_damaged_torn_or_missing_notes_index_is_rebuilt_from_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = Options::default();
    opts.sync(SyncMode::Never);
    let (mut ledger, _) = Ledger::open(tmp.path(), &opts).unwrap();
    ledger.commit(&commit(vec![note("first")])).unwrap();
    ledger.commit(&turn(1)).unwrap();
    ledger
        .commit(&commit(vec![note("second"), user("go"), note("third")]))
        .unwrap();
    ledger.commit(&turn(2)).unwrap();
    assert_eq!(ledger.note_seqs(), &[1, 4, 6]);
    drop(ledger);
    let path = tmp.path().join("notes.idx");
    let good = std::fs::read(&path).unwrap();
    assert_eq!(good.len(), 32 + 3 * 8);
    let mut flipped = good.clone();
    flipped[32 + 8] ^= 0x04; // seq 4 → 0
    let damages: [(&str, Option<Vec<u8>>); 4] = [
        ("flipped bit", Some(flipped)),
        ("torn append", Some(good[..good.len() - 3].to_vec())),
        ("header only", Some(good[..32].to_vec())),
        ("missing", None),
    ];
    for (what, bytes) in damages {
        match &bytes {
            Some(b) => std::fs::write(&path, b).unwrap(),
            None => std::fs::remove_file(&path).unwrap(),
        }
        let report = ctxlog_ledger::verify(tmp.path()).unwrap();
        assert!(!report.sidecar_ok, "{what}: {report:?}");
        let reader = Reader::open(tmp.path()).unwrap();
        assert_eq!(reader.note_seqs(), &[1, 4, 6], "{what}");
        let (mut ledger, report) = Ledger::open(tmp.path(), &opts).unwrap();
        assert!(report.index_rebuilt, "{what}");
        assert_eq!(ledger.note_seqs(), &[1, 4, 6], "{what}");
        ledger.commit(&commit(vec![note("fourth")])).unwrap();
        assert_eq!(ledger.note_seqs(), &[1, 4, 6, 9], "{what}");
        drop(ledger);
        assert!(
            ctxlog_ledger::verify(tmp.path()).unwrap().is_clean(),
            "{what}"
        );
        let reader = Reader::open(tmp.path()).unwrap();
        assert_eq!(reader.note_seqs(), &[1, 4, 6, 9], "{what}");
        // Back to the state the damage applies to (the extra note is cut off the log).
        let log = tmp.path().join("ledger.log");
        let bytes = std::fs::read(&log).unwrap();
        let cut = record_offsets(&bytes).last().unwrap().0 as usize;
        std::fs::write(&log, &bytes[..cut]).unwrap();
        for side in ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"] {
            std::fs::remove_file(tmp.path().join(side)).unwrap();
        }
        let (ledger, _) = Ledger::open(tmp.path(), &opts).unwrap();
        assert_eq!(ledger.note_seqs(), &[1, 4, 6]);
        drop(ledger);
        assert_eq!(std::fs::read(&path).unwrap(), good, "rebuilt byte for byte");
    }
}

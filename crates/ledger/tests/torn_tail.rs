//! Failure class: a torn write (crash in the middle of appending a commit).
//!
//! Guarantee (docs/design.md#l1-durable-append, docs/design.md#l2-recovery): whatever prefix of the
//! last commit reached the disk, open keeps exactly the earlier commits, cuts the partial commit
//! entirely (commits are atomic), saves the cut bytes under `recovered/` byte for byte, and reports
//! it. Checked at every byte offset inside a multi-event commit, in memory and on disk, with the
//! sidecar index lagging behind the log. With the sidecar index running ahead of the log (recording
//! the torn commit as committed, which proves it was acknowledged), nothing is cut: reader, verify
//! and writer fail closed naming the missing seqs. A log cut inside its 64-byte file header
//! (possible only without syncs: a creation cut short) holds no record; the writer saves the bytes
//! aside, reports them and creates the log afresh. A log with a whole header is never re-created: a
//! bad header there fails closed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use ctxlog_ledger::{
    Event, Ledger, LedgerRead, MemStorage, Options, Reader, Storage, SyncMode, verify_with,
};

const SIDECARS: [&str; 4] = ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"];

fn last_commit() -> ctxlog_ledger::NewCommit {
    let mut c = commit(vec![
        user("run the tests"),
        call("c1"),
        result("c1", "all 12 passed"),
        assistant("All tests pass."),
    ]);
    c.id = Some("last".into());
    c
}

struct Images {
    base: MemStorage,
    before_log: Vec<u8>,
    after_log: Vec<u8>,
    before_sidecars: Vec<(String, Vec<u8>)>,
    after_sidecars: Vec<(String, Vec<u8>)>,
    earlier: Vec<Event>,
}

fn sidecars(m: &MemStorage) -> Vec<(String, Vec<u8>)> {
    SIDECARS
        .iter()
        .map(|n| (n.to_string(), m.file_bytes(n).unwrap()))
        .collect()
}

fn build_images() -> Images {
    let (m, s) = mem();
    let mut opts = Options::default();
    opts.sync(SyncMode::Never);
    let (mut ledger, _) = Ledger::open_with(s, &opts).unwrap();
    ledger.commit(&turn(1)).unwrap();
    ledger
        .commit(&commit(vec![note("remember ZX-81")]))
        .unwrap();
    let earlier = ledger.events(1..=3).unwrap();
    let before_log = m.file_bytes("ledger.log").unwrap();
    let before_sidecars = sidecars(&m);
    ledger.commit(&last_commit()).unwrap();
    drop(ledger);
    let after_log = m.file_bytes("ledger.log").unwrap();
    let after_sidecars = sidecars(&m);
    Images {
        base: m,
        before_log,
        after_log,
        before_sidecars,
        after_sidecars,
        earlier,
    }
}

fn check_cut(images: &Images, keep: usize, sidecars_after: bool) {
    let m = images.base.deep_clone();
    let l0 = images.before_log.len();
    m.set_file_bytes("ledger.log", images.after_log[..l0 + keep].to_vec());
    let side = if sidecars_after {
        &images.after_sidecars
    } else {
        &images.before_sidecars
    };
    for (name, bytes) in side {
        m.set_file_bytes(name, bytes.clone());
    }
    let s: Arc<dyn Storage> = Arc::new(m.clone());
    if sidecars_after {
        // The sidecars record the torn commit as committed: it had been acknowledged (they
        // are written after the log's sync), so this is not a torn write but lost data.
        // Reader, verify and writer all fail closed and name the missing seqs; nothing is cut.
        let log = m.file_bytes("ledger.log").unwrap();
        let is_lost = |e: ctxlog_ledger::Error| {
            matches!(&e, ctxlog_ledger::Error::Corrupt { seq: Some(4), reason, .. }
                if reason.contains("seqs 4-7"))
        };
        assert!(
            is_lost(Reader::open_with(s.clone()).err().unwrap()),
            "keep={keep}"
        );
        assert!(is_lost(verify_with(s.clone()).unwrap_err()), "keep={keep}");
        let opened = Ledger::open_with(s.clone(), &Options::default());
        assert!(is_lost(opened.err().unwrap()), "keep={keep}");
        assert!(
            m.file_bytes("ledger.log").unwrap() == log,
            "keep={keep}: log changed"
        );
        return;
    }
    // A reader never cuts, and sees only the complete commits.
    let reader = Reader::open_with(s.clone()).unwrap();
    assert_eq!(reader.last_seq(), 3, "keep={keep}");
    assert_eq!(reader.note_seqs(), &[3]);
    let torn = verify_with(s.clone()).unwrap();
    assert_eq!(torn.torn_tail_bytes, keep as u64);
    let (mut ledger, report) = Ledger::open_with(s.clone(), &Options::default()).unwrap();
    assert_eq!(report.bytes_cut, keep as u64, "keep={keep}");
    assert_eq!(report.last_good_seq, 3);
    assert_eq!(ledger.last_seq(), 3);
    assert_eq!(ledger.events(1..=3).unwrap(), images.earlier);
    assert_eq!(ledger.user_seqs(), &[1]);
    assert_eq!(ledger.note_seqs(), &[3]);
    assert_eq!(m.file_bytes("ledger.log").unwrap(), images.before_log);
    let saved = report.saved_to.as_ref().expect("cut bytes are saved");
    let saved_name = saved
        .to_string_lossy()
        .trim_start_matches("mem:/")
        .to_string();
    assert_eq!(
        m.file_bytes(&saved_name).unwrap(),
        images.after_log[l0..l0 + keep].to_vec()
    );
    // The ledger continues at the next seq, and the commit id is free again.
    let receipt = ledger.commit(&last_commit()).unwrap();
    assert_eq!(
        (receipt.first_seq, receipt.last_seq, receipt.replayed),
        (4, 7, false)
    );
    drop(ledger);
    assert!(verify_with(s).unwrap().is_clean());
}

#[test]
fn every_torn_prefix_of_the_last_commit_is_cut_in_memory() {
    let images = build_images();
    let n = images.after_log.len() - images.before_log.len();
    assert!(n > 200);
    for keep in 1..n {
        check_cut(&images, keep, false);
        check_cut(&images, keep, true);
    }
}

#[test]
fn complete_or_absent_last_commit_is_not_a_torn_tail() {
    let images = build_images();
    let n = images.after_log.len() - images.before_log.len();
    for (keep, want) in [(0usize, 3u64), (n, 7)] {
        let m = images.base.deep_clone();
        m.set_file_bytes(
            "ledger.log",
            images.after_log[..images.before_log.len() + keep].to_vec(),
        );
        // The sidecars as they were when that log was whole.
        let side = if keep == 0 {
            &images.before_sidecars
        } else {
            &images.after_sidecars
        };
        for (name, bytes) in side {
            m.set_file_bytes(name, bytes.clone());
        }
        let (ledger, report) = Ledger::open_with(Arc::new(m), &Options::default()).unwrap();
        assert!(report.is_clean());
        assert_eq!(ledger.last_seq(), want);
    }
}

#[test]
fn every_torn_prefix_of_the_last_commit_is_cut_on_disk() {
    let images = build_images();
    let l0 = images.before_log.len();
    let n = images.after_log.len() - l0;
    let tmp = tempfile::tempdir().unwrap();
    for keep in 1..n {
        let dir = tmp.path().join(format!("k{keep}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("ledger.log"), &images.after_log[..l0 + keep]).unwrap();
        for (name, bytes) in &images.before_sidecars {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        let (mut ledger, report) = Ledger::open(&dir, &Options::default()).unwrap();
        assert_eq!(report.bytes_cut, keep as u64);
        assert_eq!(report.last_good_seq, 3);
        assert_eq!(ledger.events(1..=3).unwrap(), images.earlier);
        assert_eq!(
            std::fs::read(dir.join("ledger.log")).unwrap(),
            images.before_log
        );
        let saved = std::fs::read(report.saved_to.unwrap()).unwrap();
        assert_eq!(saved, images.after_log[l0..l0 + keep].to_vec());
        assert_eq!(ledger.commit(&last_commit()).unwrap().last_seq, 7);
        drop(ledger);
        assert!(ctxlog_ledger::verify(&dir).unwrap().is_clean());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Regression: the scan recorded a commit's id (its metadata) as soon as it read the record
/// carrying it, even when the commit never got its end record. After the tail was cut, the
/// id table still held that commit, and a retry of it was "replayed" with seqs that did not
/// exist. Ids now become visible with their commit, at its end record.
#[test]
fn an_id_in_a_cut_tail_is_not_remembered() {
    use ctxlog_ledger::{EventKind, format::encode_record};
    use sha2::Digest;
    let m = MemStorage::new();
    let o = Options::default();
    let (mut ledger, _) = Ledger::open_with(Arc::new(m.clone()), &o).unwrap();
    ledger.commit(&turn(1)).unwrap();
    drop(ledger);
    let retry = ctxlog_ledger::NewCommit {
        id: Some("x".into()),
        events: vec![user("hello")],
        ..Default::default()
    };
    let digest = sha2::Sha256::digest(serde_json::to_vec(&retry.events).unwrap());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let meta = serde_json::to_vec(&serde_json::json!({"id": "x", "digest": hex})).unwrap();
    let body = serde_json::to_vec(&retry.events[0]).unwrap();
    let mut log = m.file_bytes("ledger.log").unwrap();
    // A checksum-valid record carrying the id's metadata, without END_OF_COMMIT: a torn tail.
    encode_record(&mut log, EventKind::User, 0, 0, 3, 0, &body, &meta);
    m.set_file_bytes("ledger.log", log);
    let (mut ledger, report) = Ledger::open_with(Arc::new(m.clone()), &o).unwrap();
    assert!(report.bytes_cut > 0);
    let receipt = ledger.commit(&retry).unwrap();
    assert_eq!((receipt.first_seq, receipt.replayed), (3, false));
    assert_eq!(ledger.event(3).unwrap().body, user("hello"));
}

fn is_corrupt_at_zero(e: &ctxlog_ledger::Error) -> bool {
    matches!(
        e,
        ctxlog_ledger::Error::Corrupt {
            offset: 0,
            seq: None,
            ..
        }
    )
}

/// A no-sync crash right after creation can leave `ledger.log` shorter than its header.
#[test]
fn a_log_cut_inside_its_header_is_created_afresh_and_the_bytes_saved() {
    let (m, s) = mem();
    let mut never = Options::default();
    never.sync(SyncMode::Never);
    drop(Ledger::open_with(s, &never).unwrap());
    let header = m.file_bytes("ledger.log").unwrap();
    assert_eq!(header.len(), 64);
    let garbage = vec![0u8; 40];
    let mut images: Vec<Vec<u8>> = (0..64).map(|k| header[..k].to_vec()).collect();
    images.push(garbage);
    for (i, partial) in images.iter().enumerate() {
        let m = MemStorage::new();
        m.set_file_bytes("ledger.log", partial.clone());
        let s: Arc<dyn Storage> = Arc::new(m.clone());
        // Readers and verify never write: they fail closed, saying what the writer will do.
        assert!(is_corrupt_at_zero(
            &Reader::open_with(s.clone()).err().unwrap()
        ));
        assert!(is_corrupt_at_zero(&verify_with(s.clone()).unwrap_err()));
        assert_eq!(m.file_bytes("ledger.log").unwrap(), *partial);
        let mut opts = Options::default();
        opts.check_on_open(i % 2 == 0);
        let (mut ledger, report) = Ledger::open_with(s.clone(), &opts).unwrap();
        assert_eq!(report.bytes_cut, partial.len() as u64, "image {i}");
        assert_eq!(report.last_good_seq, 0);
        assert!(
            report
                .reason
                .as_deref()
                .unwrap()
                .contains("shorter than its")
        );
        match &report.saved_to {
            None => assert!(partial.is_empty()),
            Some(path) => {
                let name = path
                    .to_string_lossy()
                    .trim_start_matches("mem:/")
                    .to_string();
                assert!(name.starts_with("recovered/tail-0-"), "{name}");
                assert_eq!(m.file_bytes(&name).unwrap(), *partial);
            }
        }
        assert_eq!(ledger.last_seq(), 0);
        assert_eq!(ledger.commit(&turn(1)).unwrap().last_seq, 2);
        drop(ledger);
        assert!(verify_with(s.clone()).unwrap().is_clean());
        let (ledger, again) = Ledger::open_with(s, &Options::default()).unwrap();
        assert_eq!(
            again,
            ctxlog_ledger::RecoveryReport {
                last_good_seq: 2,
                ..Default::default()
            }
        );
        assert_eq!(ledger.user_seqs(), &[1]);
    }
}

#[test]
fn a_log_cut_inside_its_header_is_created_afresh_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    for len in [0usize, 1, 63] {
        let dir = tmp.path().join(format!("l{len}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("ledger.log"), vec![b'C'; len]).unwrap();
        let (mut ledger, report) = Ledger::open(&dir, &Options::default()).unwrap();
        assert_eq!(report.bytes_cut, len as u64);
        if len > 0 {
            assert_eq!(
                std::fs::read(report.saved_to.unwrap()).unwrap(),
                vec![b'C'; len]
            );
        }
        assert_eq!(std::fs::metadata(dir.join("ledger.log")).unwrap().len(), 64);
        ledger.commit(&turn(1)).unwrap();
        drop(ledger);
        assert!(ctxlog_ledger::verify(&dir).unwrap().is_clean());
    }
}

/// The other side of the rule: 64 bytes or more is never re-created, whatever they hold.
#[test]
fn a_log_with_a_whole_header_is_never_created_afresh() {
    let (m, s) = mem();
    let (ledger, _) = Ledger::open_with(s.clone(), &Options::default()).unwrap();
    let id = ledger.ledger_id().to_string();
    drop(ledger);
    // A valid header and no records: an empty ledger, kept as it is.
    let header = m.file_bytes("ledger.log").unwrap();
    let (ledger, report) = Ledger::open_with(s.clone(), &Options::default()).unwrap();
    assert!(report.is_clean() && report.reason.is_none());
    assert_eq!(ledger.ledger_id(), id);
    drop(ledger);
    assert_eq!(m.file_bytes("ledger.log").unwrap(), header);
    // A bad header of full length, with or without records after it: corruption.
    let (mut ledger, _) = Ledger::open_with(s.clone(), &Options::default()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    drop(ledger);
    let full = m.file_bytes("ledger.log").unwrap();
    let mut zeroed = full.clone();
    zeroed[..64].fill(0);
    let mut flipped = full.clone();
    flipped[20] ^= 1;
    for bad in [vec![0u8; 64], flipped[..64].to_vec(), zeroed, flipped] {
        let m = MemStorage::new();
        m.set_file_bytes("ledger.log", bad.clone());
        let s: Arc<dyn Storage> = Arc::new(m.clone());
        let err = Ledger::open_with(s, &Options::default()).err().unwrap();
        assert!(is_corrupt_at_zero(&err), "{err:?}");
        assert_eq!(m.file_bytes("ledger.log").unwrap(), bad);
        assert!(m.list("recovered").unwrap_or_default().is_empty());
    }
}

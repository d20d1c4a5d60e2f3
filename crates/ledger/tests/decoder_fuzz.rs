//! Failure class: arbitrary damage to any file of a conversation (bit flips, truncation,
//! garbage appended), as a fuzzer would produce.
//!
//! Guarantee (docs/design.md#9-bad-input-and-faults): no decoder panics. Opening (reader or writer)
//! and `verify` either fail with a typed error or present a prefix of the true history: every event
//! they return is the true event for its seq, turn starts are the true ones, and a damaged record
//! is reported as `Corrupt`, never returned. Property-tested with proptest over all five files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use ctxlog_ledger::{
    Error, Event, Ledger, LedgerRead, MemStorage, NewCommit, Options, Reader, Storage,
};
use proptest::prelude::*;

const FILES: [&str; 5] = [
    "ledger.log",
    "ledger.idx",
    "turns.idx",
    "notes.idx",
    "commits.idx",
];

fn base() -> (MemStorage, Vec<Event>) {
    let m = MemStorage::new();
    let mut o = Options::default();
    o.artifact_threshold(256);
    let (mut ledger, _) = Ledger::open_with(Arc::new(m.clone()), &o).unwrap();
    ledger
        .commit(&NewCommit {
            id: Some("one".into()),
            events: turn(1).events,
            ..Default::default()
        })
        .unwrap();
    ledger.commit(&commit(vec![note("n")])).unwrap();
    ledger
        .commit(&NewCommit {
            id: Some("two".into()),
            events: vec![
                user("go"),
                call("c"),
                result("c", &"r".repeat(600)),
                assistant("ok"),
            ],
            ..Default::default()
        })
        .unwrap();
    ledger.commit(&turn(3)).unwrap();
    let truth = ledger.events(1..=ledger.last_seq()).unwrap();
    (m, truth)
}

#[derive(Clone, Debug)]
struct Damage {
    file: usize,
    flips: Vec<(usize, u8)>,
    truncate: Option<usize>,
    append: Vec<u8>,
}

fn damage() -> impl Strategy<Value = Damage> {
    (
        0..FILES.len(),
        proptest::collection::vec((any::<usize>(), 1u8..=255), 0..4),
        proptest::option::of(any::<usize>()),
        proptest::collection::vec(any::<u8>(), 0..3),
    )
        .prop_map(|(file, flips, truncate, append)| Damage {
            file,
            flips,
            truncate,
            append,
        })
}

fn apply(m: &MemStorage, d: &Damage) -> MemStorage {
    let m = m.deep_clone();
    let name = FILES[d.file];
    let mut bytes = m.file_bytes(name).unwrap();
    for (at, x) in &d.flips {
        let len = bytes.len();
        bytes[at % len] ^= x;
    }
    if let Some(t) = d.truncate {
        bytes.truncate(t % (bytes.len() + 1));
    }
    bytes.extend_from_slice(&d.append);
    m.set_file_bytes(name, bytes);
    m
}

fn typed(e: &Error) -> bool {
    matches!(
        e,
        Error::Corrupt { .. } | Error::Io { .. } | Error::NoSuchSeq { .. }
    )
}

/// Whatever `r` shows must be true.
fn check_view(r: &dyn LedgerRead, truth: &[Event]) {
    let last = r.last_seq();
    assert!(last <= truth.len() as u64);
    let users: Vec<u64> = truth
        .iter()
        .filter(|e| e.kind() == ctxlog_ledger::EventKind::User && e.seq <= last)
        .map(|e| e.seq)
        .collect();
    assert_eq!(r.user_seqs(), users.as_slice());
    let notes: Vec<u64> = truth
        .iter()
        .filter(|e| e.kind() == ctxlog_ledger::EventKind::Note && e.seq <= last)
        .map(|e| e.seq)
        .collect();
    assert_eq!(r.note_seqs(), notes.as_slice());
    for seq in 1..=last {
        match r.event(seq) {
            Ok(e) => assert_eq!(e, truth[seq as usize - 1]),
            Err(e) => assert!(matches!(e, Error::Corrupt { .. }), "{e:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]
    #[test]
    fn damaged_files_never_panic_and_never_lie(d in damage()) {
        let (m, truth) = base();
        let damaged = apply(&m, &d);
        let s: Arc<dyn Storage> = Arc::new(damaged.deep_clone());
        match ctxlog_ledger::verify_with(s.clone()) {
            Ok(_) => {}
            Err(e) => assert!(typed(&e), "{e:?}"),
        }
        match Reader::open_with(s.clone()) {
            Ok(r) => check_view(&r, &truth),
            Err(e) => assert!(typed(&e), "{e:?}"),
        }
        let w: Arc<dyn Storage> = Arc::new(damaged.deep_clone());
        match Ledger::open_with(w, &Options::default()) {
            Ok((mut ledger, _)) => {
                check_view(&ledger, &truth);
                // The writer keeps working (or refuses with a typed error).
                let r = ledger.commit(&NewCommit { id: Some("one".into()), events: turn(1).events, ..Default::default() });
                if let Err(e) = r {
                    assert!(typed(&e) || matches!(e, Error::InvalidCommit { .. }), "{e:?}");
                }
            }
            Err(e) => assert!(typed(&e), "{e:?}"),
        }
    }
}

/// Regression: a `ledger.idx` entry with a valid checksum but an offset or length outside
/// the log (crafted, or written by a buggy tool) overflowed `offset + record_len` (a panic
/// in debug builds) or made a read allocate whatever the entry claimed. Such an entry is
/// now treated like a damaged one: open rebuilds or steps around it, reads locate the record
/// from the log.
#[test]
fn checksum_valid_index_entries_pointing_outside_the_log_are_not_trusted() {
    use ctxlog_ledger::format::{EVENT_ENTRY_LEN, EventEntry, INDEX_HEADER_LEN};
    let (m, truth) = base();
    let idx = m.file_bytes("ledger.idx").unwrap();
    let n = (idx.len() - INDEX_HEADER_LEN) / EVENT_ENTRY_LEN;
    let lies: [fn(&mut EventEntry); 3] = [
        |e| e.offset = u64::MAX - 10,
        |e| e.record_len = u32::MAX,
        |e| e.offset = 1 << 40,
    ];
    for i in 0..n {
        for lie in lies {
            let at = INDEX_HEADER_LEN + i * EVENT_ENTRY_LEN;
            let mut entry = EventEntry::decode(&idx[at..at + EVENT_ENTRY_LEN]).unwrap();
            lie(&mut entry);
            let mut bytes = idx.clone();
            bytes[at..at + EVENT_ENTRY_LEN].copy_from_slice(&entry.encode());
            let damaged = m.deep_clone();
            damaged.set_file_bytes("ledger.idx", bytes);
            let s: Arc<dyn Storage> = Arc::new(damaged.deep_clone());
            let r = Reader::open_with(s).unwrap();
            assert_eq!(r.last_seq(), truth.len() as u64);
            check_view(&r, &truth);
            let w: Arc<dyn Storage> = Arc::new(damaged.deep_clone());
            let (ledger, _) = Ledger::open_with(w, &Options::default()).unwrap();
            assert_eq!(ledger.events(1..=ledger.last_seq()).unwrap(), truth);
            ctxlog_ledger::verify_with(Arc::new(damaged)).unwrap();
        }
    }
}

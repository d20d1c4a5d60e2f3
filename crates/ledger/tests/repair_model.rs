//! Failure class: a repair that loses an intact acknowledged record, hands a seq out twice,
//! or leaves a lost seq uncovered (docs/design.md#l11-repair).
//!
//! Guarantee, property-tested over random commits (with and without ids, some with tool
//! pairs) and random damage (bit flips anywhere past the log header, a cut anywhere): after
//! `repair_with(accept_loss)`, `verify` is clean; every record whose commit is intact is
//! kept byte for byte; every intact record of a cut commit is kept as the same event or its
//! seq is covered by a loss record; every seq up to the last acknowledged one is either kept
//! or covered by exactly one loss record; the next commit gets the next seq after the last
//! acknowledged one; a replayed id answers with its original receipt when its commit is
//! whole and `Lost` when any of its seqs was lost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use ctxlog_ledger::{
    Error, EventBody, Ledger, LedgerRead, NewCommit, Options, SyncMode, SystemMarker, repair_with,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn options() -> Options {
    let mut o = Options::default();
    o.sync(SyncMode::Never);
    o
}

fn shape(i: usize, kind: u8) -> Vec<EventBody> {
    match kind % 3 {
        0 => vec![user(&format!("q{i}")), assistant(&format!("a{i}"))],
        1 => vec![
            user(&format!("run {i}")),
            call("c1"),
            result("c1", &format!("out {i}")),
            assistant(&format!("done {i}")),
        ],
        _ => vec![assistant(&format!("more {i}"))],
    }
}

#[derive(Clone, Debug)]
enum Damage {
    Flip(u16, u8),
    Cut(u16),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => (any::<u16>(), 0u8..8).prop_map(|(at, bit)| Damage::Flip(at, bit)),
        1 => any::<u16>().prop_map(Damage::Cut),
    ]
}

fn run(kinds: &[(u8, bool)], damages: &[Damage]) -> Result<(), TestCaseError> {
    let (mem, st) = mem();
    let (mut l, _) = Ledger::open_with(st.clone(), &options()).unwrap();
    let mut commits: Vec<(NewCommit, (u64, u64))> = Vec::new();
    for (i, (kind, with_id)) in kinds.iter().enumerate() {
        let mut c = NewCommit::new(shape(i, *kind));
        if *with_id {
            c = c.with_id(format!("id{i}"));
        }
        let r = l.commit(&c).unwrap();
        commits.push((c, (r.first_seq, r.last_seq)));
    }
    let last = l.last_seq();
    let before: BTreeMap<u64, _> = l
        .events(1..=last)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e))
        .collect();
    drop(l);
    let original = mem.file_bytes("ledger.log").unwrap();
    let records = record_offsets(&original);
    let mut log = original.clone();
    for d in damages {
        let span = (log.len() - 64).max(1);
        match d {
            Damage::Flip(at, bit) => {
                let i = 64 + *at as usize % span;
                if i < log.len() {
                    log[i] ^= 1 << bit;
                }
            }
            Damage::Cut(at) => log.truncate(64 + *at as usize % span),
        }
    }
    mem.set_file_bytes("ledger.log", log.clone());
    // Which records are intact in the damaged image.
    let ends: Vec<u64> = records
        .iter()
        .skip(1)
        .map(|(o, _)| *o)
        .chain([original.len() as u64])
        .collect();
    let intact: BTreeMap<u64, bool> = records
        .iter()
        .zip(&ends)
        .map(|((o, seq), end)| {
            let (o, end) = (*o as usize, *end as usize);
            (*seq, end <= log.len() && log[o..end] == original[o..end])
        })
        .collect();

    let report = repair_with(st.clone(), true, &options()).unwrap();
    let v = ctxlog_ledger::verify_with(st.clone()).unwrap();
    prop_assert!(v.is_clean(), "verify after repair: {v:?}\n{report:?}");
    let (mut l, _) = Ledger::open_with(st.clone(), &options()).unwrap();
    prop_assert_eq!(l.last_seq(), last, "{:?}", report);
    let after: BTreeMap<u64, _> = l
        .events(1..=last)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e))
        .collect();
    // Coverage: every seq kept or in exactly one loss record.
    let mut covered = vec![0u32; last as usize + 1];
    for e in after.values() {
        if let EventBody::System {
            marker: SystemMarker::Loss { from, to, .. },
        } = &e.body
        {
            for s in *from..=*to {
                covered[s as usize] += 1;
            }
        } else {
            covered[e.seq as usize] += 1;
        }
    }
    prop_assert!(
        covered[1..].iter().all(|c| *c == 1),
        "coverage {covered:?}\n{report:?}"
    );
    let new_log = mem.file_bytes("ledger.log").unwrap();
    for (c, (a, b)) in &commits {
        let whole = (*a..=*b).all(|s| intact[&s]);
        for s in *a..=*b {
            let lost = !matches!(after.get(&s), Some(e) if Some(e) == before.get(&s));
            if whole {
                prop_assert!(!lost, "seq {s} of an intact commit lost\n{report:?}");
                let (o, end) = span_of(&records, &ends, s);
                prop_assert!(
                    new_log.windows(end - o).any(|w| w == &original[o..end]),
                    "seq {s} not kept byte for byte"
                );
            }
        }
        if let Some(id) = &c.id {
            let replay = l.commit(c);
            if whole {
                let r = replay.unwrap();
                prop_assert!(r.replayed && (r.first_seq, r.last_seq) == (*a, *b));
            } else {
                prop_assert!(
                    matches!(replay, Err(Error::Lost { .. })),
                    "id {id}: {replay:?}\n{report:?}"
                );
            }
        }
    }
    prop_assert_eq!(l.commit(&turn(99)).unwrap().first_seq, last + 1);
    Ok(())
}

fn span_of(records: &[(u64, u64)], ends: &[u64], seq: u64) -> (usize, usize) {
    let i = records.iter().position(|(_, s)| *s == seq).unwrap();
    (records[i].0 as usize, ends[i] as usize)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn repair_keeps_every_intact_record_and_covers_every_lost_seq(
        kinds in proptest::collection::vec((0u8..3, any::<bool>()), 1..8),
        damages in proptest::collection::vec(damage(), 1..4),
    ) {
        run(&kinds, &damages)?;
    }
}

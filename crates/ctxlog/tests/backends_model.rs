//! Failure class: an interleaving of commits, replays with the same id, conflicts, refused
//! commits, reopens and (on PostgreSQL) commits through another replica that leaves a
//! storage engine's conversation different from what it acknowledged.
//!
//! Guarantee: one suite, two backends. After every step, on every open store, the
//! conversation's events equal a plain `Vec` model of the acknowledged commits, seqs are
//! contiguous from 1, the turn and note indexes agree, receipts and conflicts agree with the
//! model's id table, and a refused commit changes nothing. Property-tested with proptest
//! through the operations layer (`Store`), against the file store and against PostgreSQL
//! (fewer cases there: each step is a few round trips to a real server). The file-only
//! faults (torn tails, failed writes and syncs) are `crates/ledger/tests/model.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::engines::*;
use ctxlog::ledger::Error as LedgerError;
use ctxlog::ops::ListRequest;
use ctxlog::{ErrorClass, EventBody, Store};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

#[derive(Clone, Debug)]
enum Op {
    /// A commit of one of four shapes through store `via`, with an id from a small set (so
    /// ids repeat: shape 3 is the same content every time, a replay).
    Commit { shape: u8, id: Option<u8>, via: u8 },
    /// A commit the ledger refuses (a result for no call).
    Invalid { via: u8 },
    /// Every store closed and opened again.
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..4, proptest::option::of(0u8..5), any::<u8>())
            .prop_map(|(shape, id, via)| Op::Commit { shape, id, via }),
        1 => any::<u8>().prop_map(|via| Op::Invalid { via }),
        1 => Just(Op::Reopen),
    ]
}

fn shaped(shape: u8, n: usize) -> Vec<EventBody> {
    match shape {
        0 => vec![user(&format!("q{n}")), assistant(&format!("a{n}"))],
        1 => vec![
            user(&format!("run {n}")),
            call(&format!("k{n}")),
            result(&format!("k{n}"), "ok"),
            assistant("done"),
        ],
        2 => vec![note(&format!("fact {n}"))],
        _ => vec![user("same question every time")],
    }
}

struct Acked {
    events: Vec<EventBody>,
    id: Option<String>,
}

struct World<'a> {
    engine: &'a dyn Engine,
    conv: String,
    /// The stores open at once: one per replica the engine allows.
    stores: Vec<Store>,
    model: Vec<Acked>,
    counter: usize,
}

impl World<'_> {
    fn reopen(&mut self) {
        self.stores.clear();
        for _ in 0..self.engine.replicas() {
            self.stores.push(self.engine.store("model", &options()));
        }
    }

    fn via(&self, via: u8) -> &Store {
        &self.stores[via as usize % self.stores.len()]
    }

    fn model_events(&self) -> Vec<EventBody> {
        self.model.iter().flat_map(|a| a.events.clone()).collect()
    }

    fn commit(&mut self, shape: u8, id: Option<u8>, via: u8) {
        self.counter += 1;
        let id = id.map(|i| format!("id-{i}"));
        let events = shaped(shape, if shape == 3 { 0 } else { self.counter });
        let mut first = 1;
        let mut earlier = None;
        for a in &self.model {
            if id.is_some() && a.id == id {
                earlier = Some((first, a.events.clone()));
                break;
            }
            first += a.events.len() as u64;
        }
        let result = commit_events(
            self.via(via),
            &self.conv,
            events.clone(),
            id.as_deref(),
            &[],
        );
        match earlier {
            Some((first, before)) if before == events => {
                let r = result.unwrap();
                assert_eq!((r.first_seq, r.replayed), (first, true));
            }
            Some(_) => {
                let err = result.unwrap_err();
                assert!(
                    matches!(err.ledger_cause(), Some(LedgerError::Conflict { .. })),
                    "{err}"
                );
            }
            None => {
                let r = result.unwrap();
                let next = self.model_events().len() as u64 + 1;
                assert_eq!((r.first_seq, r.replayed), (next, false));
                assert_eq!(r.last_seq, next + events.len() as u64 - 1);
                self.model.push(Acked { events, id });
            }
        }
    }

    fn invalid(&mut self, via: u8) {
        let err = commit_events(
            self.via(via),
            &self.conv,
            vec![result("nope", "x")],
            None,
            &[],
        )
        .unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    }

    fn check(&self) {
        let want = self.model_events();
        let seqs_of = |pick: fn(&EventBody) -> bool| -> Vec<u64> {
            (1..)
                .zip(&want)
                .filter(|(_, b)| pick(b))
                .map(|(s, _)| s)
                .collect()
        };
        let users = seqs_of(|b| matches!(b, EventBody::User { .. }));
        let notes = seqs_of(|b| matches!(b, EventBody::Note { .. }));
        for store in &self.stores {
            if want.is_empty() {
                let err = log(store, &self.conv).unwrap_err();
                assert_eq!(err.class(), ErrorClass::NotFound, "{err}");
                continue;
            }
            let log = log(store, &self.conv).unwrap();
            assert_eq!(log.last_seq, want.len() as u64);
            let seqs: Vec<u64> = log.events.iter().map(|e| e.seq).collect();
            assert_eq!(seqs, (1..=want.len() as u64).collect::<Vec<_>>());
            let got: Vec<EventBody> = log.events.into_iter().map(|e| e.body).collect();
            assert_eq!(got, want);
            let snapshot = store.snapshot(&self.conv).unwrap();
            assert_eq!(snapshot.ledger().user_seqs(), users.as_slice());
            assert_eq!(snapshot.ledger().note_seqs(), notes.as_slice());
            let list = store.list(&ListRequest {}).unwrap().conversations;
            let info = list.iter().find(|c| c.name == self.conv).unwrap();
            assert_eq!(info.events, want.len() as u64);
        }
    }
}

fn run(engine: &dyn Engine, conv: String, ops: Vec<Op>) {
    let mut w = World {
        engine,
        conv,
        stores: Vec::new(),
        model: Vec::new(),
        counter: 0,
    };
    w.reopen();
    for op in ops {
        match op {
            Op::Commit { shape, id, via } => w.commit(shape, id, via),
            Op::Invalid { via } => w.invalid(via),
            Op::Reopen => w.reopen(),
        }
        w.check();
    }
    w.reopen();
    w.check();
}

/// Runs `cases` random op sequences on `engine`, each on a conversation of its own.
fn property(engine: &dyn Engine, cases: u32) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let n = std::cell::Cell::new(0);
    runner
        .run(&proptest::collection::vec(op(), 1..30), |ops| {
            n.set(n.get() + 1);
            run(engine, format!("m{}", n.get()), ops);
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_file_store_matches_a_vec_of_acknowledged_commits() {
    property(&Files::new(), 64);
}

#[test]
#[cfg(feature = "postgres")]
fn postgres_matches_a_vec_of_acknowledged_commits() {
    let Some(pg) = Postgres::start() else {
        return;
    };
    property(&pg, 24);
}

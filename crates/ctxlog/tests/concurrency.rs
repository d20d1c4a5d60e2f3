//! Failure class: a long-lived store shared by many threads losing, reordering or refusing
//! commits, or a reader seeing a partial commit, while writers and readers overlap.
//!
//! Guarantee: one `Store` is `Send + Sync`; commits to one conversation from many threads are
//! queued, never refused, and all land with contiguous seqs; projections and recalls run at
//! the same time and only ever see whole commits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use ctxlog::ops::{CommitRequest, LogRequest, ProjectRequest, RecallRequest, VerifyRequest};
use ctxlog::{ErrorClass, EventBody, NewCommit, Store};

const CONVERSATIONS: usize = 4;
const THREADS: usize = 8;
const COMMITS_PER_THREAD: usize = 25;

fn turn(conversation: &str, thread: usize, i: usize) -> CommitRequest {
    CommitRequest {
        conversation: conversation.into(),
        commit: NewCommit {
            id: Some(format!("t{thread}-{i}")),
            events: vec![
                EventBody::User {
                    text: format!("thread {thread} turn {i} marker-{thread}-{i}"),
                    parts: Vec::new(),
                    provider_item: None,
                },
                EventBody::Assistant {
                    text: format!("ack {thread}/{i}"),
                    provider_item: None,
                },
            ],
            ..Default::default()
        },
    }
}

#[test]
fn the_store_is_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Store>();
}

#[test]
fn eight_threads_commit_to_four_conversations_while_others_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let names: Vec<String> = (0..CONVERSATIONS).map(|c| format!("conv-{c}")).collect();
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let store = Arc::clone(&store);
            let name = names[thread % CONVERSATIONS].clone();
            scope.spawn(move || {
                for i in 0..COMMITS_PER_THREAD {
                    let receipt = store.commit(&turn(&name, thread, i)).unwrap();
                    assert_eq!(receipt.last_seq, receipt.first_seq + 1);
                    assert_eq!(receipt.first_seq % 2, 1, "a commit never splits a turn");
                }
            });
        }
        // Readers run at the same time: every body they get is whole turns.
        for reader in 0..THREADS {
            let store = Arc::clone(&store);
            let name = names[reader % CONVERSATIONS].clone();
            scope.spawn(move || {
                for round in 0..COMMITS_PER_THREAD {
                    let projection = store.project(&ProjectRequest {
                        conversation: name.clone(),
                        input: Some("what happened?".into()),
                        max_bytes: Some(2_000),
                        ..Default::default()
                    });
                    match projection {
                        Ok(p) => assert!(p.body.len() <= 2_000),
                        Err(e) => panic!("projection failed: {e}"),
                    }
                    if round % 5 == 0 {
                        match store.recall(&RecallRequest {
                            conversation: name.clone(),
                            query: "marker".into(),
                            seq: None,
                            offset: 0,
                            limit: 5,
                        }) {
                            Ok(_) => {}
                            Err(e) if e.class() == ErrorClass::NotFound => {}
                            Err(e) => panic!("recall failed: {e}"),
                        }
                    }
                }
            });
        }
    });
    let per_conversation = THREADS / CONVERSATIONS * COMMITS_PER_THREAD;
    for name in &names {
        let log = store
            .log(&LogRequest {
                conversation: name.clone(),
                from: 1,
                limit: None,
            })
            .unwrap();
        assert_eq!(log.last_seq, 2 * per_conversation as u64, "{name}");
        let seqs: Vec<u64> = log.events.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=log.last_seq).collect::<Vec<_>>(),
            "{name}: contiguous"
        );
        let mut markers: Vec<String> = log
            .events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::User { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect();
        markers.sort();
        markers.dedup();
        assert_eq!(
            markers.len(),
            per_conversation,
            "{name}: every commit present once"
        );
        let report = store
            .verify(&VerifyRequest {
                conversation: name.clone(),
            })
            .unwrap();
        assert!(report.is_clean(), "{name}: {report:?}");
    }
}

#[test]
fn a_bounded_writer_wait_fails_with_busy_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = ctxlog::StoreBuilder::dir(dir.path())
        .writer_wait(Some(Duration::from_millis(0)))
        .build()
        .unwrap();
    let store = Arc::new(store);
    store.commit(&turn("c", 0, 0)).unwrap();
    // Commits race with a zero wait: each either lands or is refused as busy, never lost.
    let outcomes: Vec<Result<u64, ErrorClass>> = on_threads(1..=8, 20, |t, i| {
        store
            .commit(&turn("c", t, i))
            .map(|r| r.first_seq)
            .map_err(|e| e.class())
    });
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Ok(_) | Err(ErrorClass::Busy)))
    );
    let landed = outcomes.iter().filter(|o| o.is_ok()).count() as u64;
    let log = store
        .log(&LogRequest {
            conversation: "c".into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    assert_eq!(log.last_seq, 2 * (landed + 1), "busy commits wrote nothing");
}

/// Runs `work(thread, i)` for `i` in `0..per_thread` on one scoped thread per number in
/// `threads`, all at once; every result, thread after thread.
fn on_threads<T: Send>(
    threads: impl IntoIterator<Item = usize>,
    per_thread: usize,
    work: impl Fn(usize, usize) -> T + Sync,
) -> Vec<T> {
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = threads
            .into_iter()
            .map(|t| scope.spawn(move || (0..per_thread).map(|i| work(t, i)).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// Every acknowledged commit of `log` by its first seq: the user text of that seq.
fn user_texts(store: &Store, conversation: &str) -> (u64, std::collections::BTreeMap<u64, String>) {
    let log = store
        .log(&LogRequest {
            conversation: conversation.into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    let seqs: Vec<u64> = log.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=log.last_seq).collect::<Vec<_>>(), "contiguous");
    let texts = log
        .events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::User { text, .. } => Some((e.seq, text.clone())),
            _ => None,
        })
        .collect();
    (log.last_seq, texts)
}

/// Group commit (queued commits written as one batch by whoever holds the writer): sixteen
/// threads on one conversation each get their own receipt, the seqs are contiguous, and the
/// log holds exactly the acknowledged commits, each at the seqs its receipt names.
#[test]
fn sixteen_threads_on_one_conversation_each_get_their_own_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let receipts: Vec<(String, u64, u64)> = on_threads(0..16, COMMITS_PER_THREAD, |t, i| {
        let request = turn("shared", t, i);
        let receipt = store.commit(&request).unwrap();
        assert!(!receipt.replayed);
        let EventBody::User { text, .. } = &request.commit.events[0] else {
            unreachable!()
        };
        (text.clone(), receipt.first_seq, receipt.last_seq)
    });
    assert_eq!(receipts.len(), 16 * COMMITS_PER_THREAD);
    let mut firsts: Vec<u64> = receipts.iter().map(|r| r.1).collect();
    firsts.sort_unstable();
    firsts.dedup();
    assert_eq!(firsts.len(), receipts.len(), "every receipt distinct");
    let (last_seq, texts) = user_texts(&store, "shared");
    assert_eq!(last_seq, 2 * receipts.len() as u64);
    for (text, first, last) in &receipts {
        assert_eq!(last - first, 1);
        assert_eq!(texts.get(first), Some(text), "seq {first} holds its commit");
    }
    assert_eq!(
        texts.len(),
        receipts.len(),
        "the log is the acknowledged set"
    );
    let report = store
        .verify(&VerifyRequest {
            conversation: "shared".into(),
        })
        .unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// A refused commit among concurrent ones fails alone: an empty turn and an id reused with
/// other content are refused with their own errors; every other commit lands.
#[test]
fn an_invalid_commit_among_concurrent_ones_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    store.commit(&turn("mixed", 99, 0)).unwrap();
    let outcomes: Vec<(usize, usize, Result<u64, ErrorClass>)> =
        on_threads(0..8, COMMITS_PER_THREAD, |t, i| {
            let mut request = turn("mixed", t, i);
            if i == 10 && t == 0 {
                request.commit.events.clear();
            }
            if i == 10 && t == 1 {
                // The id of the first commit, with other content.
                request.commit.id = Some("t99-0".into());
            }
            let outcome = store
                .commit(&request)
                .map(|r| r.first_seq)
                .map_err(|e| e.class());
            (t, i, outcome)
        });
    for (t, i, outcome) in &outcomes {
        match (t, i) {
            (0, 10) => assert!(outcome.is_err(), "the empty turn is refused"),
            (1, 10) => assert_eq!(*outcome, Err(ErrorClass::Conflict)),
            _ => assert!(outcome.is_ok(), "thread {t} commit {i}: {outcome:?}"),
        }
    }
    let landed = outcomes.iter().filter(|o| o.2.is_ok()).count();
    assert_eq!(landed, 8 * COMMITS_PER_THREAD - 2);
    let (last_seq, texts) = user_texts(&store, "mixed");
    assert_eq!(
        last_seq,
        2 * (landed as u64 + 1),
        "refused commits wrote nothing"
    );
    for (t, i, outcome) in &outcomes {
        if let Ok(first) = outcome {
            let marker = format!("marker-{t}-{i}");
            assert!(
                texts[first].ends_with(&marker),
                "seq {first}: {}",
                texts[first]
            );
        }
    }
}

/// A batch whose sync fails acknowledges none of its commits: the callers whose commits it
/// carried all get the I/O error, the next commit reopens the writer, and every commit that
/// was acknowledged is in the log at the seqs its receipt names.
#[test]
fn a_failed_sync_fails_its_whole_batch_and_acknowledges_nothing_of_it() {
    use ctxlog::backend::FileBackend;
    use ctxlog::ledger::{FaultPlan, FaultyStorage, MemStorage};

    let caches = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::new(MemStorage::new());
    let backend = FileBackend::with_storage(
        Arc::new(storage.clone()),
        caches.path(),
        ctxlog::Options::default(),
    );
    let store = Arc::new(Store::with_backend(Arc::new(backend)).unwrap());
    store.commit(&turn("faulty", 99, 0)).unwrap();
    storage.set_plan(FaultPlan {
        fail_sync: Some(20),
        only_files: Some("ledger.log".into()),
        ..Default::default()
    });
    let outcomes: Vec<(String, Result<u64, ErrorClass>)> =
        on_threads(0..8, COMMITS_PER_THREAD, |t, i| {
            let outcome = store
                .commit(&turn("faulty", t, i))
                .map(|r| r.first_seq)
                .map_err(|e| e.class());
            (format!("marker-{t}-{i}"), outcome)
        });
    assert_eq!(storage.plan().fired, 1, "the planned sync failed");
    let failed: Vec<_> = outcomes.iter().filter(|o| o.1.is_err()).collect();
    assert!(!failed.is_empty(), "the failed sync's batch failed");
    for (marker, outcome) in &failed {
        assert_eq!(*outcome, Err(ErrorClass::Other), "{marker}");
    }
    let (_, texts) = user_texts(&store, "faulty");
    for (marker, outcome) in &outcomes {
        if let Ok(first) = outcome {
            assert!(
                texts[first].ends_with(marker.as_str()),
                "seq {first}: {marker}"
            );
        }
    }
    let acknowledged = outcomes.iter().filter(|o| o.1.is_ok()).count();
    assert!(
        texts.len() > acknowledged,
        "the log holds every acknowledged commit"
    );
}

/// A thread that panics while writing a batch (here: inside the log's write) answers every
/// commit of that batch with an error instead of leaving its callers waiting, hands the
/// writer back, and the next commit reopens the conversation from disk and is acknowledged.
/// Nothing acknowledged is lost and nothing unacknowledged is half written.
#[test]
fn a_panic_while_writing_a_batch_answers_its_commits_and_frees_the_writer() {
    use ctxlog::backend::FileBackend;
    use ctxlog::ledger::{FaultPlan, FaultyStorage, MemStorage};
    use std::panic::{AssertUnwindSafe, catch_unwind};

    let caches = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::new(MemStorage::new());
    let backend = FileBackend::with_storage(
        Arc::new(storage.clone()),
        caches.path(),
        ctxlog::Options::default(),
    );
    let store = Arc::new(Store::with_backend(Arc::new(backend)).unwrap());
    store.commit(&turn("panicky", 99, 0)).unwrap();
    storage.set_plan(FaultPlan {
        panic_write: Some(10),
        only_files: Some("ledger.log".into()),
        ..Default::default()
    });
    // Ok(first seq), Err(class) or None: this caller's thread was the one that panicked.
    let outcomes: Vec<(String, Option<Result<u64, ErrorClass>>)> =
        on_threads(0..8, COMMITS_PER_THREAD, |t, i| {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                store
                    .commit(&turn("panicky", t, i))
                    .map(|r| r.first_seq)
                    .map_err(|e| e.class())
            }));
            (format!("marker-{t}-{i}"), outcome.ok())
        });
    assert_eq!(storage.plan().fired, 1, "the planned write panicked");
    let panicked = outcomes.iter().filter(|o| o.1.is_none()).count();
    assert_eq!(
        panicked, 1,
        "exactly one caller was writing when it panicked"
    );
    for (marker, outcome) in &outcomes {
        if let Some(Err(class)) = outcome {
            assert_eq!(*class, ErrorClass::Other, "{marker}");
        }
    }
    // The writer is free again and reopens from disk: a new commit is acknowledged.
    let after = store.commit(&turn("panicky", 98, 0)).unwrap();
    let (_, texts) = user_texts(&store, "panicky");
    for (marker, outcome) in &outcomes {
        if let Some(Ok(first)) = outcome {
            assert!(
                texts[first].ends_with(marker.as_str()),
                "seq {first}: {marker}"
            );
        }
    }
    assert!(texts[&after.first_seq].ends_with("marker-98-0"));
    let acknowledged = outcomes
        .iter()
        .filter(|o| matches!(o.1, Some(Ok(_))))
        .count();
    assert_eq!(
        texts.len(),
        acknowledged + 2,
        "the log holds the acknowledged commits and nothing of the batch that panicked"
    );
}

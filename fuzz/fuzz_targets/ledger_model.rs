//! Model-based target (STYLE practice 3): random sequences of commit (with reused idempotency
//! ids), reopen, torn unacknowledged writes and cuts into acknowledged data on `MemStorage`,
//! compared after every step with a plain `Vec` of what was acknowledged.
//!
//! Guarantees checked: the ledger's events always equal the acknowledged prefix that survives;
//! a torn (never acknowledged) tail is cut and loses nothing; a cut into acknowledged data
//! either makes open fail closed or leaves a prefix of *whole* commits (no partial commit).
//! With `CTXLOG_FUZZ_STRICT=1` the second outcome is a failure too (the sidecar
//! index proves those commits were acknowledged).
#![no_main]

use std::sync::Arc;

use arbitrary::Arbitrary;
use ctxlog_event::{EventBody, NewCommit};
use ctxlog_ledger::{Error, Ledger, LedgerRead, MemStorage, Options, Storage};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    Commit { shape: u8, id: Option<u8> },
    Reopen,
    TornWrite(Vec<u8>),
    CutTail(u16),
}

struct Acked {
    events: Vec<EventBody>,
    end: u64,
    id: Option<String>,
}

fn shaped(shape: u8, n: usize) -> Vec<EventBody> {
    let user = |t: String| EventBody::User {
        text: t,
        parts: Vec::new(),
        provider_item: None,
    };
    match shape % 4 {
        0 => vec![user(format!("q{n}")), EventBody::Assistant { text: format!("a{n}"), provider_item: None }],
        1 => vec![
            user(format!("run {n}")),
            EventBody::ToolCall {
                call_id: format!("k{n}"),
                tool: "sh".into(),
                arguments: serde_json::json!({}),
                provider_item: None,
            },
            EventBody::ToolResult {
                call_id: format!("k{n}"),
                tool: "sh".into(),
                status: ctxlog_event::ToolStatus::Ok,
                exit_code: Some(0),
                text: "ok".repeat(n % 50),
                artifact: None,
                parts: Vec::new(),
                provider_item: None,
            },
        ],
        2 => vec![EventBody::Note { text: format!("fact {n}"), pinned: n % 2 == 0, supersedes: None, provider_item: None }],
        _ => vec![user("same question every time".into())],
    }
}

struct World {
    mem: MemStorage,
    ledger: Option<Ledger>,
    model: Vec<Acked>,
    counter: usize,
    dead: bool,
}

impl World {
    fn log(&self) -> Vec<u8> {
        self.mem.file_bytes("ledger.log").unwrap_or_default()
    }

    fn reopen(&mut self, after_acked_cut: bool) {
        self.ledger = None;
        let s: Arc<dyn Storage> = Arc::new(self.mem.clone());
        match Ledger::open_with(s, &Options::default()) {
            Ok((l, report)) => {
                let want: u64 = self.model.iter().map(|a| a.events.len() as u64).sum();
                if !after_acked_cut {
                    assert_eq!(report.last_good_seq, want);
                }
                self.ledger = Some(l);
            }
            Err(e) if after_acked_cut => {
                assert!(matches!(e, Error::Corrupt { .. }), "fail closed as Corrupt: {e:?}");
                self.dead = true;
            }
            Err(e) => panic!("reopen failed with nothing acknowledged lost: {e:?}"),
        }
    }

    fn commit(&mut self, shape: u8, id: Option<u8>) {
        self.counter += 1;
        let c = NewCommit {
            id: id.map(|i| format!("id-{}", i % 6)),
            events: shaped(shape, if shape % 4 == 3 { 0 } else { self.counter }), ..Default::default() };
        let earlier = c.id.as_ref().and_then(|id| {
            let mut first = 1;
            for a in &self.model {
                if a.id.as_ref() == Some(id) {
                    return Some((first, a.events.clone()));
                }
                first += a.events.len() as u64;
            }
            None
        });
        let next: u64 = self.model.iter().map(|a| a.events.len() as u64).sum::<u64>() + 1;
        let Some(ledger) = self.ledger.as_mut() else { return };
        let result = ledger.commit(&c);
        match (earlier, result) {
            (Some((first, events)), Ok(r)) if events == c.events => {
                assert!(r.replayed);
                assert_eq!(r.first_seq, first);
            }
            (Some((_, events)), Err(Error::Conflict { .. })) if events != c.events => {}
            (Some(_), other) => panic!("replay/conflict mismatch: {other:?}"),
            (None, Ok(r)) => {
                assert!(!r.replayed);
                assert_eq!(r.first_seq, next);
                let end = self.log().len() as u64;
                self.model.push(Acked { events: c.events, end, id: c.id });
            }
            // An id whose commit was cut away may be remembered by the id table: the ledger
            // may refuse it, but must never return seqs it cannot read (checked below).
            (None, Err(_)) => {}
        }
    }

    fn check(&self) {
        let Some(ledger) = self.ledger.as_ref() else { return };
        let want: Vec<EventBody> = self.model.iter().flat_map(|a| a.events.clone()).collect();
        assert_eq!(ledger.last_seq(), want.len() as u64, "last_seq vs model");
        if want.is_empty() {
            return;
        }
        let got: Vec<EventBody> = ledger
            .events(1..=want.len() as u64)
            .unwrap_or_else(|e| panic!("acknowledged events unreadable: {e}"))
            .into_iter()
            .map(|e| e.body)
            .collect();
        assert_eq!(got, want);
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let strict = std::env::var_os("CTXLOG_FUZZ_STRICT").is_some();
    let mut w = World { mem: MemStorage::new(), ledger: None, model: Vec::new(), counter: 0, dead: false };
    w.reopen(false);
    for op in ops.into_iter().take(64) {
        match op {
            Op::Commit { shape, id } => w.commit(shape, id),
            Op::Reopen => w.reopen(false),
            Op::TornWrite(bytes) => {
                // A write that never returned: bytes after the last acknowledged commit.
                w.ledger = None;
                let mut log = w.log();
                log.extend_from_slice(&bytes[..bytes.len().min(300)]);
                w.mem.set_file_bytes("ledger.log", log);
                w.reopen(false);
            }
            Op::CutTail(n) => {
                w.ledger = None;
                let mut log = w.log();
                let len = log.len().saturating_sub(usize::from(n % 512));
                let acked_end = w.model.last().map_or(0, |a| a.end) as usize;
                log.truncate(len);
                w.mem.set_file_bytes("ledger.log", log);
                let cut_acked = len < acked_end;
                w.model.retain(|a| a.end <= len as u64);
                w.reopen(cut_acked);
                if cut_acked && strict {
                    assert!(w.dead, "acknowledged commits silently lost after a cut to {len}");
                }
            }
        }
        if w.dead {
            return;
        }
        w.check();
    }
});

//! Repair (docs/design.md#l11-repair) of a small ledger damaged as the input says: the first
//! byte picks the mode. Mode 0: the input, after that byte, is the whole `ledger.log` (no
//! sidecars); mode 1: a fixed ledger of six commits (ids, a tool pair) is damaged by the
//! input's (offset, xor) byte pairs, and a last odd byte cuts the log there.
//! Guarantees checked: no panic; a repair that succeeds leaves a log `verify` finds clean;
//! in mode 1 the seq counter never goes back (the next commit gets the seq after the last
//! acknowledged one) and every seq up to it is kept or covered by exactly one loss record.
#![no_main]

use std::sync::Arc;

use ctxlog_ledger::{
    EventBody, Ledger, LedgerRead, MemStorage, NewCommit, Options, Storage, SyncMode,
    SystemMarker, ToolStatus, repair_with,
};
use libfuzzer_sys::fuzz_target;

fn options() -> Options {
    let mut o = Options::default();
    o.sync(SyncMode::Never);
    o
}

fn fixture(st: Arc<dyn Storage>) -> u64 {
    let (mut l, _) = Ledger::open_with(st, &options()).unwrap();
    for i in 0..6 {
        let mut events = vec![EventBody::User {
            text: format!("q{i}"),
            parts: Vec::new(),
            provider_item: None,
        }];
        if i % 3 == 1 {
            events.push(EventBody::ToolCall {
                call_id: "c".into(),
                tool: "t".into(),
                arguments: serde_json::json!({}),
                provider_item: None,
            });
            events.push(EventBody::ToolResult {
                call_id: "c".into(),
                tool: "t".into(),
                status: ToolStatus::Ok,
                exit_code: None,
                text: format!("r{i}"),
                artifact: None,
                parts: Vec::new(),
                provider_item: None,
            });
        }
        events.push(EventBody::Assistant { text: format!("a{i}"), provider_item: None });
        l.commit(&NewCommit::new(events).with_id(format!("id{i}"))).unwrap();
    }
    l.last_seq()
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mem = MemStorage::new();
    let st: Arc<dyn Storage> = Arc::new(mem.clone());
    let last = if mode % 2 == 0 {
        mem.set_file_bytes("ledger.log", rest.to_vec());
        None
    } else {
        let last = fixture(st.clone());
        let mut log = mem.file_bytes("ledger.log").unwrap();
        for pair in rest.chunks(2) {
            match pair {
                [at, x] => {
                    let i = 64 + *at as usize * (log.len() - 64) / 256;
                    if i < log.len() {
                        log[i] ^= *x;
                    }
                }
                [cut] => log.truncate(64 + *cut as usize * (log.len() - 64) / 256),
                _ => {}
            }
        }
        mem.set_file_bytes("ledger.log", log);
        Some(last)
    };
    if repair_with(st.clone(), true, &options()).is_err() {
        assert!(last.is_none(), "repair of a damaged fixture failed");
        return;
    }
    let report = ctxlog_ledger::verify_with(st.clone()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    let Some(last) = last else { return };
    let (mut l, _) = Ledger::open_with(st, &options()).unwrap();
    assert_eq!(l.last_seq(), last);
    let mut covered = vec![0u32; last as usize + 1];
    for e in l.events(1..=last).unwrap() {
        match e.body {
            EventBody::System {
                marker: SystemMarker::Loss { from, to, .. },
            } => (from..=to).for_each(|s| covered[s as usize] += 1),
            _ => covered[e.seq as usize] += 1,
        }
    }
    assert!(covered[1..].iter().all(|c| *c == 1), "{covered:?}");
    let next = l.commit(&NewCommit::new(vec![EventBody::User {
        text: "n".into(),
        parts: Vec::new(),
        provider_item: None,
    }]));
    assert_eq!(next.unwrap().first_seq, last + 1);
});

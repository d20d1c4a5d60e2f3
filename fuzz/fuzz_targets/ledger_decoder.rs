//! The ledger's record decoder on arbitrary bytes: the fixed-width decoders
//! (`RecordHeader::parse`, `LogHeader::decode`, `EventEntry::decode`, `CommitEntry::decode`)
//! and a whole scan of the bytes as `ledger.log` (reader open, reading every event, verify).
//! Guarantee checked: no panic; whatever opens presents ascending seqs within `1..=last_seq`.
#![no_main]

use std::sync::Arc;

use ctxlog_ledger::format::{CommitEntry, EventEntry, LogHeader, RecordHeader};
use ctxlog_ledger::{LedgerRead, MemStorage, Reader, Storage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = RecordHeader::parse(data);
    let _ = LogHeader::decode(data);
    let _ = EventEntry::decode(data);
    let _ = CommitEntry::decode(data);
    // Every suffix offset the scanner might try, for the fixed-width decoders.
    for start in 0..data.len().min(64) {
        let _ = RecordHeader::parse(&data[start..]);
        if let Ok(h) = RecordHeader::parse(&data[start..]) {
            let _ = h.record_len();
            let _ = h.ends_commit();
        }
    }

    let mem = MemStorage::new();
    mem.set_file_bytes("ledger.log", data.to_vec());
    let storage: Arc<dyn Storage> = Arc::new(mem.clone());
    if let Ok(reader) = Reader::open_with(storage.clone()) {
        let last = reader.last_seq();
        if last > 0 {
            if let Ok(events) = reader.events(1..=last.min(10_000)) {
                let mut prev = 0;
                for e in &events {
                    assert!(e.seq > prev && e.seq <= last, "seq {} out of order", e.seq);
                    prev = e.seq;
                }
            }
        }
    }
    let _ = ctxlog_ledger::verify_with(storage);
});

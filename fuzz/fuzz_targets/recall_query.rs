//! The recall query sanitizer (`ctxlog_recall::text::Terms::parse` + `quote`,
//! docs/design.md#r3-literal-queries) on arbitrary text. The FTS5 expression is the index's own
//! (`text::match_expression`: quoted terms OR-ed, CJK runs as quoted phrases, a lone CJK gram as a
//! quoted prefix), run against an in-memory FTS5 table with the index's schema; the same query also
//! goes through a real `RecallIndex::search`. Guarantee checked: SQLite never reports a syntax
//! error, nothing panics, and the search returns `Ok`.
#![no_main]

use std::sync::{Mutex, OnceLock};

use ctxlog_event::{Event, EventBody};
use ctxlog_recall::text::{Terms, match_expression};
use ctxlog_recall::{MemorySource, RecallIndex, SearchOptions};
use libfuzzer_sys::fuzz_target;

struct World {
    mem: rusqlite::Connection,
    index: RecallIndex,
    _dir: tempfile::TempDir,
}

fn world() -> &'static Mutex<World> {
    static W: OnceLock<Mutex<World>> = OnceLock::new();
    W.get_or_init(|| {
        let mem = rusqlite::Connection::open_in_memory().unwrap_or_else(|e| panic!("{e}"));
        mem.execute_batch(
            "CREATE VIRTUAL TABLE pages_fts USING fts5(body, ctx, meta, cjk, \
             tokenize = 'porter unicode61 remove_diacritics 2');
             INSERT INTO pages_fts VALUES ('the zebra code is ZX-81', '', '', '');
             INSERT INTO pages_fts VALUES ('deploy to staging', 'ctx', 'meta', '部署 署到');",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let id = "0123456789abcdef0123456789abcdef";
        let mut index =
            RecallIndex::open(dir.path().join("recall.sqlite"), id).unwrap_or_else(|e| panic!("{e}"));
        let texts = ["My project code is ZX-81.", "部署到生产环境", "select * from pages; -- note"];
        let source = MemorySource {
            ledger_id: id.into(),
            events: texts
                .iter()
                .enumerate()
                .map(|(i, t)| Event {
                    seq: i as u64 + 1,
                    ts_ms: 1_700_000_000_000,
                    body: EventBody::User {
                        text: (*t).into(),
                        parts: Vec::new(),
                        provider_item: None,
                    },
                })
                .collect(),
            artifacts: Default::default(),
        };
        index.catch_up(&source).unwrap_or_else(|e| panic!("{e}"));
        Mutex::new(World { mem, index, _dir: dir })
    })
}

fuzz_target!(|data: &[u8]| {
    let query = String::from_utf8_lossy(data);
    let terms = Terms::parse(&query);
    let _ = Terms::parse_keeping_stop_words(&query);
    let w = world().lock().unwrap_or_else(|e| e.into_inner());
    if !terms.is_empty() {
        let expr = match_expression(&terms);
        for e in [expr.clone(), format!("{{body cjk}} : ({expr})")] {
            let r: rusqlite::Result<i64> = w.mem.query_row(
                "SELECT count(*) FROM pages_fts WHERE pages_fts MATCH ?1",
                [&e],
                |row| row.get(0),
            );
            if let Err(err) = r {
                panic!("FTS5 refused the sanitized expression {e:?} for {query:?}: {err}");
            }
        }
    }
    if let Err(err) = w.index.search(&query, &SearchOptions::default()) {
        panic!("search({query:?}) failed: {err}");
    }
});

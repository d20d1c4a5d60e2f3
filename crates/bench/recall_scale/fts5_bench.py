"""Python's sqlite3 FTS5 on the pages of one ctxlog recall index (docs/benchmarks.md,
"Recall at scale"). Run by scripts/bench-recall-scale after `recall_scale build PAGES DIR`.

Reads the page texts ctxlog stored (DIR/recall.sqlite, the `body` column of its FTS5 table,
read from the plain shadow table `pages_fts_content`, so this side needs no ctxlog code),
indexes them in a plain FTS5 table (one column, the same `porter unicode61` tokenizer),
then runs the queries of DIR/queries.json, each as ctxlog's FTS5 expression for it (the
query's literal words quoted and OR-ed, CJK bigrams), ranked by bm25 with `ORDER BY rank
LIMIT k`. Prints one JSON line.
"""

import json
import os
import resource
import sqlite3
import sys
import time

K = 10
# Timed runs of every query after one untimed warm-up pass; scripts/bench-recall-scale sets 1
# at 1M pages, where every query scores every matching page (seconds each).
RUNS = int(os.environ.get("CTXLOG_RECALL_PY_RUNS", "5"))
CHUNK = 10_000


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: fts5_bench.py DIR")
    directory = sys.argv[1]
    source = sqlite3.connect(f"file:{os.path.join(directory, 'recall.sqlite')}?mode=ro", uri=True)
    options = [r[0] for r in source.execute("pragma compile_options")]
    if "ENABLE_FTS5" not in options:
        sys.exit(f"this Python's sqlite3 ({sqlite3.sqlite_version}) has no FTS5")
    path = os.path.join(directory, "python-fts5.sqlite")
    for suffix in ("", "-journal", "-wal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    db = sqlite3.connect(path)
    db.execute(
        "CREATE VIRTUAL TABLE pages USING fts5(body, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    db.commit()
    rows = source.execute("SELECT id, c0 FROM pages_fts_content ORDER BY id")
    pages = page_bytes = 0
    took = 0.0
    while True:
        chunk = rows.fetchmany(CHUNK)
        if not chunk:
            break
        pages += len(chunk)
        page_bytes += sum(len(body.encode()) for _, body in chunk)
        start = time.perf_counter()
        db.executemany("INSERT INTO pages(rowid, body) VALUES (?, ?)", chunk)
        db.commit()
        took += time.perf_counter() - start
    source.close()
    with open(os.path.join(directory, "queries.json")) as f:
        queries = json.load(f)
    sql = "SELECT rowid, body, bm25(pages) FROM pages WHERE pages MATCH ? ORDER BY rank LIMIT ?"
    for q in queries:
        db.execute(sql, (q["expr"], K)).fetchall()
    times = []
    hits = 0
    for _ in range(RUNS):
        for q in queries:
            start = time.perf_counter()
            result = db.execute(sql, (q["expr"], K)).fetchall()
            times.append([q["category"], (time.perf_counter() - start) * 1e3])
            hits += len(result)
    db.close()
    print(json.dumps({
        "side": "python-fts5",
        "sqlite": sqlite3.sqlite_version,
        "python": sys.version.split()[0],
        "pages": pages,
        "page_bytes": page_bytes,
        "build_s": took,
        "pages_per_s": pages / took,
        "mb_per_s": page_bytes / 1e6 / took,
        "index_bytes": os.path.getsize(path),
        "runs": RUNS,
        "query_ms": times,
        "hits": hits,
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


if __name__ == "__main__":
    main()

"""What a `project` call costs from Python beyond the same call from Rust.

Builds a 1,000-turn conversation, then times `chat.project(input=..., max_bytes=8192)` from
Python and the same request through `ctxlog::Store::project` in the Rust program
`project_call` (crates/bench), on the same store, in one run. Prints medians and the
difference (argument conversion, GIL release, bytes and report dict creation).

Run from the repository root:
    cargo build --release -p ctxlog-bench --bin project_call
    target/py-venv/bin/python crates/python/bench/project_overhead.py
"""

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List

import ctxlog

TURNS = 1000
BUDGET = 8192
ITERATIONS = 2000
WARMUP = 50
INPUT = "What did we decide about the deployment window?"
REPO = Path(__file__).resolve().parents[3]


def build(root: str) -> None:
    with ctxlog.Store(root) as store:
        chat = store.conversation("bench")
        for i in range(TURNS):
            chat.commit(
                user=f"Question {i}: what about item {i} of the release checklist, and why?",
                assistant=f"Answer {i}: item {i} is done; the notes say it passed review on day {i % 30}.",
            )


def python_median(root: str) -> float:
    with ctxlog.Store(root) as store:
        chat = store.conversation("bench")
        for _ in range(WARMUP):
            chat.project(input=INPUT, max_bytes=BUDGET)
        times: List[float] = []
        for _ in range(ITERATIONS):
            start = time.perf_counter_ns()
            chat.project(input=INPUT, max_bytes=BUDGET)
            times.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(times)


def rust_median(root: str) -> float:
    binary = os.environ.get("PROJECT_CALL_BIN", str(REPO / "target/release/project_call"))
    out = subprocess.run(
        [binary, root, "bench", str(ITERATIONS), str(BUDGET), INPUT],
        capture_output=True, text=True, check=True,
    )
    return float(json.loads(out.stdout)["median_us"])


def main() -> None:
    root = tempfile.mkdtemp(prefix="ctxlog-py-bench-")
    build(root)
    body, report = ctxlog.Store(root).conversation("bench").project(input=INPUT, max_bytes=BUDGET)
    rust = rust_median(root)
    py = python_median(root)
    print(f"project, {TURNS}-turn conversation, {BUDGET}-byte budget, {ITERATIONS} calls "
          f"(body {len(body)} bytes, {report['turns']['kept']} turns kept)\n")
    print("| caller | median µs |")
    print("|---|---:|")
    print(f"| Rust `Store::project` | {rust:.1f} |")
    print(f"| Python `chat.project` | {py:.1f} |")
    print(f"| overhead (Python - Rust) | {py - rust:.1f} ({py / rust:.2f}×) |")


if __name__ == "__main__":
    main()

"""Threads share one Store: eight threads commit to eight conversations at once (the GIL is
released during each call) and every commit lands, in order."""

import sys
import threading
from typing import List

import ctxlog

THREADS = 8
COMMITS = 25


def test_eight_threads_commit_to_different_conversations(store: ctxlog.Store) -> None:
    errors: List[BaseException] = []
    start = threading.Barrier(THREADS)

    def worker(n: int) -> None:
        try:
            chat = store.conversation(f"thread-{n}")
            start.wait()
            for i in range(COMMITS):
                receipt = chat.commit(user=f"t{n} q{i}", assistant=f"t{n} a{i}")
                assert receipt["last_seq"] == 2 * (i + 1)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    listed = {c["name"]: c["events"] for c in store.list()}
    assert listed == {f"thread-{n}": 2 * COMMITS for n in range(THREADS)}
    for n in range(THREADS):
        texts = [e["text"] for e in store.conversation(f"thread-{n}").log()]
        assert texts[-1] == f"t{n} a{COMMITS - 1}"


def test_one_conversation_shared_between_threads(store: ctxlog.Store) -> None:
    chat = store.conversation("shared")

    def worker(n: int) -> None:
        for i in range(10):
            chat.commit(user=f"{n}.{i}", assistant="ok")
            chat.project(input="next?", max_bytes=2000)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(chat.log()) == 80
    assert chat.verify()["events"] == 80


def test_the_gil_is_released_during_store_calls(store: ctxlog.Store) -> None:
    """With a switch interval far longer than the test, another thread can only run while
    the worker is inside a store call, if those calls release the GIL."""
    chat = store.conversation("gil")
    for i in range(50):
        chat.commit(user=f"question {i}", assistant=f"answer {i}")
    calls = 200
    done: List[int] = []
    started = threading.Event()

    def worker() -> None:
        started.set()
        for _ in range(calls):
            chat.project(input="next?", max_bytes=4000)
            done.append(1)

    previous = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        t = threading.Thread(target=worker)
        t.start()
        started.wait()
        seen_while_working = len(done)
        t.join()
    finally:
        sys.setswitchinterval(previous)
    assert seen_while_working < calls
    assert len(done) == calls

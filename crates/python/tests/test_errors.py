"""Each error class is its own exception under ctxlog.Error, carrying what a caller acts on,
and a refused call changes nothing."""

import threading
import time
from pathlib import Path
from typing import Callable, List

import pytest

import ctxlog
from conftest import ledger_files


def test_usage_errors(store: ctxlog.Store) -> None:
    with pytest.raises(ctxlog.UsageError):
        ctxlog.Store("postgres://ctxlog@127.0.0.1:notaport/ctxlog")
    # A database store connects on its first operation: an unreachable one says where, in one line.
    remote = ctxlog.Store("postgres://ctxlog@127.0.0.1:1/ctxlog")
    with pytest.raises(ctxlog.Error, match="127.0.0.1:1") as failed:
        remote.list()
    assert "\n" not in str(failed.value)
    for bad in ["a/b", "..", "", "x" * 65, "nul\0"]:
        with pytest.raises(ctxlog.UsageError):
            store.conversation(bad)
    chat = store.conversation("c")
    chat.commit(user="hi", assistant="hello")
    with pytest.raises(ctxlog.UsageError, match="limit"):
        chat.recall("hi", limit=0)
    with pytest.raises(ctxlog.UsageError, match="format"):
        chat.project(input="x", format="gemini")  # type: ignore[arg-type]
    with pytest.raises(ctxlog.UsageError, match="budget"):
        chat.project(input="x", max_bytes=0)
    with pytest.raises(ctxlog.UsageError, match="exactly one"):
        chat.erase(seqs=(1, 2), all=True)
    with pytest.raises(ctxlog.UsageError):
        chat.erase(seqs=(3, 1))
    assert issubclass(ctxlog.UsageError, ctxlog.Error)


def test_bad_input_writes_nothing(root: Path, store: ctxlog.Store) -> None:
    chat = store.conversation("c")
    with pytest.raises(ctxlog.BadInput) as raised:
        chat.commit(events=[{"kind": "bogus", "text": "?"}])
    assert raised.value.error_class == "bad_input"
    with pytest.raises(ctxlog.BadInput):
        chat.commit()
    with pytest.raises(ctxlog.BadInput):
        chat.commit(events=[{"kind": "user", "text": object()}])
    # An integer only a float could hold (it would lose digits) is refused, not rounded.
    call = {"kind": "tool_call", "call_id": "c", "tool": "t", "arguments": {"n": 10**30}}
    with pytest.raises(ctxlog.BadInput, match=r"\$\[1\]\.arguments\.n .* beyond 64 bits"):
        chat.commit(events=[{"kind": "user", "text": "go"}, call])
    # Ids are stored as given, never redacted: a secret-like one is refused.
    with pytest.raises(ctxlog.BadInput, match="looks like a secret"):
        chat.commit(user="hi", id="sk-proj-Zq8WfakeFAKEfake0123456789abcdefXYZ")
    assert store.list() == []
    assert ledger_files(root) == {}


def test_not_found(store: ctxlog.Store) -> None:
    nobody = store.conversation("nobody")
    calls: List[Callable[[], object]] = [
        nobody.log, nobody.verify, nobody.reindex, lambda: nobody.recall("x"),
    ]
    for call in calls:
        with pytest.raises(ctxlog.NotFound):
            call()
    with pytest.raises(ctxlog.NotFound):
        nobody.erase(all=True)


def test_conflict_and_idempotent_replay(store: ctxlog.Store) -> None:
    chat = store.conversation("c")
    first = chat.commit(user="hi", assistant="hello", id="turn-1")
    again = chat.commit(user="hi", assistant="hello", id="turn-1")
    assert again == {**first, "replayed": True}
    with pytest.raises(ctxlog.Conflict):
        chat.commit(user="hi", assistant="something else", id="turn-1")
    assert len(chat.log()) == 2


def test_locked_by_another_writer(root: Path) -> None:
    with ctxlog.Store(root) as one, ctxlog.Store(root) as two:
        one.conversation("c").commit(user="hi", assistant="hello")
        with pytest.raises(ctxlog.Locked) as raised:
            two.conversation("c").commit(user="me too", assistant="no")
        assert raised.value.error_class == "locked"
    # Closing the first store released its lock.
    with ctxlog.Store(root) as three:
        assert three.conversation("c").commit(user="now", assistant="ok")["first_seq"] == 3


def test_busy_when_the_writer_wait_runs_out(root: Path) -> None:
    with ctxlog.Store(root, writer_wait=0.0) as store:
        chat = store.conversation("c")
        busy: List[ctxlog.Busy] = []
        deadline = time.monotonic() + 20

        def hammer() -> None:
            while not busy and time.monotonic() < deadline:
                try:
                    chat.commit(user="x" * 100_000, assistant="ok")
                except ctxlog.Busy as e:
                    busy.append(e)

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert busy, "no commit ever had to wait"
        assert busy[0].error_class == "busy"


def test_corrupt_names_offset_and_seq(root: Path, store: ctxlog.Store) -> None:
    chat = store.conversation("chat")
    for i in range(4):
        chat.commit(user=f"question {i} alpha", assistant=f"answer {i}")
    store.close()
    log = root / "chat" / "ledger.log"
    data = bytearray(log.read_bytes())
    at = data.index(b"question 1")
    data[at] ^= 0x01
    log.write_bytes(bytes(data))
    before = ledger_files(root)

    with ctxlog.Store(root) as again:
        chat = again.conversation("chat")
        calls: List[Callable[[], object]] = [
            chat.log, chat.verify, lambda: chat.project(input="hi"),
        ]
        for call in calls:
            with pytest.raises(ctxlog.Corrupt) as raised:
                call()
            assert raised.value.seq == 3
            assert isinstance(raised.value.offset, int) and 0 < raised.value.offset < at
            # What to run next, as the CLI says it.
            assert "`ctxlog verify chat`" in str(raised.value)
            assert "`ctxlog export chat --salvage`" in str(raised.value)
        # The salvage: every other record, the damaged one marked where it lies.
        lines = [line for line in chat.export(salvage=True).splitlines() if line]
        assert len(lines) == 8
        assert b'"damaged"' in lines[2] and b'"seqs":[3,3]' in lines[2]
    assert ledger_files(root) == before


def test_a_closed_store_refuses_calls(root: Path) -> None:
    store = ctxlog.Store(root)
    chat = store.conversation("c")
    assert not store.closed
    store.close()
    assert store.closed
    with pytest.raises(ctxlog.UsageError, match="closed"):
        chat.commit(user="hi")


def test_tools_must_be_a_list_of_dicts(store: ctxlog.Store) -> None:
    chat = store.conversation("c")
    with pytest.raises(ctxlog.BadInput, match="tools"):
        chat.project(input="hi", tools={"not": "a list"})  # type: ignore[arg-type]
    with pytest.raises(ctxlog.BadInput, match="tools"):
        chat.project(input="hi", tools=["shell"])  # type: ignore[list-item]

"""The Python API on the PostgreSQL backend (docs/design.md#l9-backends):
`ctxlog.Store("postgres://…")` commits, projects, recalls, erases (also on another replica's
cache), exports, imports and applies retention like the file store. A throwaway cluster per session (conftest.pg_server); skipped
where PostgreSQL is missing, a failure under CI."""

import json
from pathlib import Path

import pytest

import ctxlog


def test_commit_project_recall_and_verify(pg_url: str) -> None:
    with ctxlog.Store(pg_url) as store:
        chat = store.conversation("chat")
        first = chat.commit(user="My project code is ZX-81.", assistant="Noted.", id="t1")
        assert first == {"first_seq": 1, "last_seq": 2, "replayed": False}
        assert chat.commit(user="My project code is ZX-81.", assistant="Noted.", id="t1") == {
            **first,
            "replayed": True,
        }
        with pytest.raises(ctxlog.Conflict):
            chat.commit(user="something else", id="t1")
        chat.commit(user="List files", assistant="a.txt b.txt")
        body, report = chat.project(input="What is my project code?", max_bytes=400)
        assert len(body) <= 400 and report["bytes"] == len(body)
        assert json.loads(body)["messages"][-1]["content"] == "What is my project code?"
        hits = chat.recall("project code")["hits"]
        assert hits and hits[0]["seq"] == 1
        recalled, _ = chat.project(input="What is my project code?", max_bytes=300, recall=2)
        assert b"ZX-81" in recalled
        assert [e["seq"] for e in chat.log()] == [1, 2, 3, 4]
        assert chat.verify()["events"] == 4
        assert [c["name"] for c in store.list()] == ["chat"]


def test_erasure_reaches_another_replicas_cache(pg_url: str) -> None:
    with ctxlog.Store(pg_url) as store, ctxlog.Store(pg_url) as replica:
        chat = store.conversation("chat")
        chat.commit(user="walrus facts", assistant="tusks")
        chat.commit(user="my secret-narwhal-7731", assistant="noted")
        chat.commit(user="walrus again", assistant="yes")
        other = replica.conversation("chat")
        assert other.recall("narwhal")["hits"]
        erased = chat.erase(seqs=(3, 4), reason="user request")
        assert erased["erased"] == {"from": 3, "to": 4}
        assert other.recall("narwhal")["hits"] == []
        assert other.recall("walrus")["hits"]
        assert "narwhal" not in json.dumps(other.log())
        chat.erase(all=True)
        with pytest.raises(ctxlog.NotFound):
            other.log()
        with pytest.raises(ctxlog.NotFound):
            other.recall("walrus")
        assert replica.list() == []


def test_export_and_import_between_postgres_and_files(pg_url: str, tmp_path: Path) -> None:
    with ctxlog.Store(pg_url) as store, ctxlog.Store(tmp_path / "files") as files:
        chat = store.conversation("orig")
        chat.commit(user="My project code is ZX-81.", assistant="Noted.")
        chat.commit(
            events=[
                {"kind": "user", "text": "List files", "ts": "2100-01-01T00:00:00Z"},
                {"kind": "tool_call", "call_id": "c1", "tool": "shell", "arguments": {}},
                {"kind": "tool_result", "call_id": "c1", "tool": "shell", "status": "ok",
                 "text": "x" * 40000},
                {"kind": "assistant", "text": "One big file."},
            ]
        )
        exported = chat.export()
        assert files.conversation("copy").import_(exported)["events_written"] == 6
        assert files.conversation("copy").export() == exported
        back = store.conversation("back")
        assert back.import_(files.conversation("copy").export())["events_written"] == 6
        assert back.export() == exported
        assert back.import_(exported)["events_written"] == 0
        with pytest.raises(ctxlog.BadInput, match="line 2"):
            store.conversation("bad").import_('{"kind":"user","text":"a"}\n{"kind":"shout"}\n')
        assert sorted(c["name"] for c in store.list()) == ["back", "orig"]


def test_gc_keeps_the_newest_turns(pg_url: str) -> None:
    with ctxlog.Store(pg_url) as store:
        chat = store.conversation("chat")
        for i in range(5):
            chat.commit(user=f"question {i}", assistant=f"answer {i}")
        before = chat.log()
        dry = store.gc(keep_turns=2, dry_run=True)
        assert dry["dry_run"] is True and chat.log() == before
        assert store.gc(keep_turns=2)["seqs_removed"] == 6
        kinds = [e["kind"] for e in chat.log()]
        assert kinds == ["system", "user", "assistant", "user", "assistant"]
        hits = chat.recall("question")["hits"]
        assert hits and all(h["seq"] >= 7 for h in hits), hits  # only the two kept turns
        assert chat.verify()["erased"] == 6

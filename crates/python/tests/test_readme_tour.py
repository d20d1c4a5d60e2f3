"""The README's tour, in Python: commit (shorthand and full form), log, verify, project at
a narrow budget, recall, project with recall, erase."""

import json
from pathlib import Path
from typing import Any, Dict

import pytest

import ctxlog
from conftest import REPO


def test_the_tour(store: ctxlog.Store) -> None:
    chat = store.conversation("chat1")
    first = chat.commit(user="My project code is ZX-81.", assistant="Noted: ZX-81.")
    assert first == {"first_seq": 1, "last_seq": 2, "replayed": False}
    second = chat.commit(
        events=[
            {"kind": "user", "text": "List the files"},
            {"kind": "tool_call", "call_id": "c1", "tool": "shell", "arguments": {"cmd": "ls"}},
            {
                "kind": "tool_result",
                "call_id": "c1",
                "tool": "shell",
                "status": "ok",
                "exit_code": 0,
                "text": "a.txt b.txt",
            },
            {"kind": "assistant", "text": "Two files: a.txt and b.txt."},
        ]
    )
    assert (second["first_seq"], second["last_seq"]) == (3, 6)

    events = chat.log()
    assert [e["kind"] for e in events] == [
        "user", "assistant", "user", "tool_call", "tool_result", "assistant",
    ]
    assert events[0]["text"] == "My project code is ZX-81."
    report = chat.verify()
    assert report["events"] == 6 and report["recall_index"] == {"state": "absent"}

    body, report = chat.project(input="What is my project code?", max_bytes=400)
    assert isinstance(body, bytes) and len(body) <= 400
    assert report["bytes"] == len(body)
    assert b"ZX-81" not in body and b"a.txt b.txt" in body
    assert json.loads(body)["messages"][-1] == {
        "role": "user", "content": "What is my project code?",
    }

    hits = chat.recall("project code")["hits"]
    assert hits and hits[0]["seq"] == 1
    recalled, _ = chat.project(input="What is my project code?", max_bytes=300, recall=2)
    assert b"ZX-81" in recalled and len(recalled) <= 300

    erased = chat.erase(seqs=(1, 2), reason="user request")
    assert erased["erased"] == {"from": 1, "to": 2}
    assert chat.recall("ZX-81")["hits"] == []
    assert chat.log()[0]["kind"] == "system"

    assert [c["name"] for c in store.list()] == ["chat1"]
    assert chat.reindex()["indexed_through"] == 6
    index = chat.verify()["recall_index"]
    assert index["state"] == "ok" and index["pages"] > 0


def test_a_long_reply_is_one_hit_naming_its_other_pages(store: ctxlog.Store) -> None:
    chat = store.conversation("long")
    # About 4 pages of 2,048 characters, each saying "deployment".
    reply = " ".join(f"Step {i}: the deployment runs the migration script." for i in range(150))
    chat.commit(user="How do we ship it?", assistant=reply)
    chat.commit(user="Thanks", assistant="Any time.")
    hits = chat.recall("deployment migration", limit=10)["hits"]
    seqs = [h["seq"] for h in hits]
    assert seqs[0] == 2 and len(seqs) == len(set(seqs)), seqs
    hit = hits[0]
    assert hit["pages"] >= 3
    others = hit["other_pages"]
    assert hit["page"] not in others
    assert sorted(others + [hit["page"]]) == list(range(hit["pages"]))


def test_body_as_a_dict_for_an_sdk(store: ctxlog.Store) -> None:
    chat = store.conversation("sdk")
    chat.commit(user="hi", assistant="hello")
    body, report = chat.project_dict(input="and now?", max_tokens=8000, reserve_output=1024)
    assert body["model"] == "gpt-4o"
    assert body["messages"][0] == {"role": "user", "content": "hi"}
    assert report["turns"]["kept"] == 1
    raw, _ = chat.project(input="and now?", max_tokens=8000, reserve_output=1024)
    assert json.loads(raw) == body


def test_the_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## From Python"):]
    start = section.index("```python\n") + len("```python\n")
    code = section[start:section.index("```", start)]
    monkeypatch.chdir(tmp_path)
    scope: Dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["report"]["bytes"] == len(scope["body"])
    assert scope["hits"]["hits"][0]["seq"] == 1
    assert (tmp_path / ".ctxlog" / "chat1" / "ledger.log").exists()

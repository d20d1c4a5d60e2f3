"""Export and import from Python: the same operations as `ctxlog export` / `ctxlog import`."""

import json
from pathlib import Path

import pytest

import ctxlog


def test_export_then_import_rebuilds_the_conversation(store: ctxlog.Store) -> None:
    chat = store.conversation("orig")
    chat.commit(user="My project code is ZX-81.", assistant="Noted.")
    chat.commit(
        events=[
            {"kind": "user", "text": "List files", "ts": "2100-01-01T00:00:00Z"},
            {"kind": "tool_call", "call_id": "c1", "tool": "shell", "arguments": {"cmd": "ls"}},
            {"kind": "tool_result", "call_id": "c1", "tool": "shell", "status": "ok", "text": "x" * 40000},
            {"kind": "assistant", "text": "One big file."},
        ]
    )
    exported = chat.export()
    lines = [json.loads(line) for line in exported.decode().splitlines()]
    assert [line["seq"] for line in lines] == [1, 2, 3, 4, 5, 6]
    assert lines[2]["ts"] == "2100-01-01T00:00:00.000Z"
    assert lines[4]["text"] == "x" * 40000 and "artifact" not in lines[4]

    copy = store.conversation("copy")
    done = copy.import_(exported)
    assert done["events_written"] == 6
    assert copy.export() == exported
    assert copy.import_(exported)["events_written"] == 0


def test_a_bad_record_raises_bad_input_and_writes_nothing(store: ctxlog.Store) -> None:
    with pytest.raises(ctxlog.BadInput, match="line 2"):
        store.conversation("bad").import_('{"kind":"user","text":"a"}\n{"kind":"shout"}\n')
    assert store.list() == []


def test_import_file_of_a_dataset_names_conversations_after_samples(
    store: ctxlog.Store, tmp_path: Path
) -> None:
    data = [
        {
            "sample_id": "s1",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bob",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "text": "We painted the shed green."},
                    {"speaker": "Bob", "text": "Looks good."},
                ],
            },
        }
    ]
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps(data))
    done = store.import_file(path, format="conversation-dataset", conversation="ds")
    assert [c["conversation"] for c in done["conversations"]] == ["ds-s1"]
    events = store.conversation("ds-s1").log()
    assert events[0]["ts_ms"] == 1683554160000
    assert events[1]["text"] == "Bob: Looks good."
    with pytest.raises(ctxlog.UsageError, match="unknown import format"):
        store.import_file(path, format="csv")

"""Retention (gc) and redaction from Python: the same operations as the CLI
(docs/design.md#e2-retention, docs/design.md#e5-redaction)."""

from pathlib import Path

import pytest

import ctxlog

KEY = "sk-proj-Zq8WfakeFAKEfake0123456789abcdefXYZ"


def files(root: Path) -> "list[tuple[Path, bytes]]":
    return [(p, p.read_bytes()) for p in root.rglob("*") if p.is_file()]


def test_gc_keeps_the_newest_turns_and_a_dry_run_writes_nothing(
    store: ctxlog.Store, root: Path
) -> None:
    chat = store.conversation("chat")
    for i in range(5):
        chat.commit(user=f"question {i}", assistant=f"answer {i}")
    before = files(root)
    dry = chat.gc(keep_turns=2, dry_run=True)
    assert files(root) == before
    assert dry["dry_run"] is True
    assert dry["conversations"][0]["removed"] == [
        {"from": 1, "to": 6, "turns": 3, "reason": "retention: keep newest 2 turns"}
    ]
    done = store.gc(keep_turns=2)
    assert done["seqs_removed"] == 6
    kinds = [e["kind"] for e in chat.log()]
    assert kinds == ["system", "user", "assistant", "user", "assistant"]
    with pytest.raises(ctxlog.UsageError, match="no retention rule"):
        chat.gc()
    with pytest.raises(ctxlog.UsageError):
        chat.gc(older_than="soon")


def test_a_key_is_redacted_everywhere_and_patterns_are_configurable(root: Path) -> None:
    with ctxlog.Store(root, redact_patterns={"ticket": "TCK-[0-9]{6}"}) as store:
        chat = store.conversation("chat")
        chat.commit(
            events=[
                {"kind": "user", "text": f"deploy with {KEY}, ticket TCK-123456"},
                {
                    "kind": "tool_call",
                    "call_id": "c1",
                    "tool": "shell",
                    "arguments": {"env": {"OPENAI_API_KEY": KEY}},
                },
                {
                    "kind": "tool_result",
                    "call_id": "c1",
                    "tool": "shell",
                    "status": "ok",
                    "text": "x" * 30_000 + KEY + "y" * 30_000,
                },
                {"kind": "assistant", "text": "deployed"},
            ]
        )
        first = chat.log()[0]["text"]
        assert first == "deploy with [redacted:openai-key], ticket [redacted:ticket]"
        hits = chat.recall("deploy")["hits"]
        assert any("[redacted:openai-key]" in h["text"] for h in hits), hits
    for path, data in files(root):
        assert KEY.encode() not in data, path
        assert b"TCK-123456" not in data, path
    with ctxlog.Store(root / "plain", redact_builtin=False) as store:
        chat = store.conversation("chat")
        chat.commit(user=KEY)
        assert chat.log()[0]["text"] == KEY
    with pytest.raises(ctxlog.UsageError, match="invalid regex"):
        ctxlog.Store(root, redact_patterns={"bad": "("})

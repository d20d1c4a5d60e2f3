"""The agent loop (docs/design.md#p11-the-agent-loop) in both wire formats: commit the user
message and the model's tool call, then the tool's result, projecting each request; the body
pairs the call with its result in the provider's shape. The recall tool's definition and
handler close the loop, and examples/agent_loop.py runs end to end against a stand-in model."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import ctxlog

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "agent_loop.py"
FORMATS: List[ctxlog.WireFormat] = ["openai-chat", "anthropic-messages"]


def tool_results(body: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The tool results in a body, in the format's own shape."""
    found = []
    for message in body["messages"]:
        if message["role"] == "tool":
            found.append(message)
        elif isinstance(message.get("content"), list):
            found += [b for b in message["content"] if b["type"] == "tool_result"]
    return found


@pytest.mark.parametrize("format", FORMATS)
def test_tool_loop_projects_each_step(store: ctxlog.Store, format: ctxlog.WireFormat) -> None:
    chat = store.conversation("agent")
    question = "How big is /srv?"
    first, _ = chat.project_dict(input=question, format=format, max_bytes=4000)
    assert tool_results(first) == []

    chat.commit(
        events=[
            {"kind": "user", "text": question},
            {"kind": "tool_call", "call_id": "c1", "tool": "shell",
             "arguments": {"cmd": "du -sh /srv"}},
        ]
    )
    chat.commit(
        events=[{"kind": "tool_result", "call_id": "c1", "tool": "shell", "status": "ok",
                 "exit_code": 0, "text": "12G\t/srv"}]
    )
    # No input: the open turn is the request, ending with the pending result
    # (docs/design.md#p11-the-agent-loop). The default policy, auto, sees the tool call and
    # chooses the agent policy; the body still ends with the pending result.
    body, report = chat.project_dict(format=format, max_bytes=4000)
    assert report["policy"] == "agent"
    assert report["policy_reason"].startswith("policy auto chose agent")
    assert tool_results(body)[-1]["content"] == "12G\t/srv"
    # Whole turns, as the turns policy sends them.
    body, report = chat.project_dict(format=format, max_bytes=4000, policy="turns")
    [result] = tool_results(body)
    messages = body["messages"]
    if format == "openai-chat":
        assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
        assert messages[0]["content"] == question
        assert messages[1]["tool_calls"][0]["id"] == "c1"
        assert messages[-1] == result == {"role": "tool", "tool_call_id": "c1", "content": "12G\t/srv"}
    else:
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert messages[0]["content"] == [{"type": "text", "text": question}]
        assert [b["type"] for b in messages[1]["content"]] == ["tool_use"]
        assert messages[1]["content"][0]["id"] == "c1"
        assert messages[-1]["content"] == [result]
        assert result["tool_use_id"] == "c1" and result["content"] == "12G\t/srv"
        assert "max_tokens" in body
    assert report["bytes"] == len(json.dumps(body, ensure_ascii=False, separators=(",", ":")))
    assert report["turns"]["kept"] == 1

    chat.commit(events=[{"kind": "assistant", "text": "/srv holds 12 GB."}])
    assert [e["kind"] for e in chat.log()] == ["user", "tool_call", "tool_result", "assistant"]


@pytest.mark.parametrize("format", FORMATS)
def test_recall_tool_definition_and_handler(store: ctxlog.Store, format: ctxlog.WireFormat) -> None:
    chat = store.conversation("agent")
    chat.commit(user="My project code is ZX-81.", assistant="Noted.")
    definition = chat.recall_tool_definition(format)
    if format == "openai-chat":
        assert definition["function"]["name"] == "recall"
    else:
        assert definition["name"] == "recall" and "input_schema" in definition
    body, _ = chat.project_dict(input="hi", format=format, recall_tool=True)
    assert definition in body["tools"]

    answer = json.loads(chat.answer_recall_tool('{"query": "project code"}'))
    assert answer["hits"][0]["seq"] == 1 and "ZX-81" in answer["hits"][0]["text"]
    assert json.loads(chat.answer_recall_tool({"query": "project code"})) == answer
    error = json.loads(chat.answer_recall_tool("not json at all"))
    assert "error" in error


@pytest.mark.parametrize("format", FORMATS)
def test_the_example_agent_loop_runs(tmp_path: Path, format: ctxlog.WireFormat) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--format", format, "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    answers = json.loads(out.stdout.splitlines()[-1])["answers"]
    assert "a.txt" in answers[0]
    assert "ZX-81" in answers[1], out.stdout
    with ctxlog.Store(tmp_path) as store:
        kinds = [e["kind"] for e in store.conversation("agent").log()]
    assert kinds.count("tool_call") == kinds.count("tool_result") == 2

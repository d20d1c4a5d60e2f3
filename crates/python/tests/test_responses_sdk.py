"""`openai-responses` bodies against the official `openai` SDK's request types
(docs/design.md#p14-more-wire-formats): every body ctxlog projects in this format, with either
policy, with and without input (the agent loop), with the recall tool, the notice and tight
budgets, validates as the SDK's `ResponseCreateParamsNonStreaming`; a body the API rejects does
not."""

from typing import Any, Dict, List, Optional

import pydantic
import pytest
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

import ctxlog

ADAPTER: "pydantic.TypeAdapter[ResponseCreateParamsNonStreaming]" = pydantic.TypeAdapter(
    ResponseCreateParamsNonStreaming
)


def commit_history(chat: ctxlog.Conversation) -> None:
    chat.commit(events=[{"kind": "note", "text": "deploy only on Fridays", "pinned": True}])
    chat.commit(user="What is in /srv?", assistant="Let me look. " * 30)
    chat.commit(
        events=[
            {"kind": "user", "text": "List and size it"},
            {"kind": "assistant", "text": "Checking."},
            {"kind": "tool_call", "call_id": "c1", "tool": "shell", "arguments": {"cmd": "ls"}},
            {"kind": "tool_call", "call_id": "c2", "tool": "shell", "arguments": "{\"cmd\":\"du\"}"},
            {"kind": "tool_result", "call_id": "c1", "tool": "shell", "status": "ok",
             "text": "a.txt\n" * 400},
            {"kind": "tool_result", "call_id": "c2", "tool": "shell", "status": "error",
             "exit_code": 1, "text": "du: denied"},
            {"kind": "assistant", "text": "Done."},
        ]
    )
    chat.commit(
        events=[
            {"kind": "user", "text": "Clean the logs"},
            {"kind": "tool_call", "call_id": "c3", "tool": "shell", "arguments": {"cmd": "rm logs"}},
            {"kind": "tool_call", "call_id": "c4", "tool": "shell", "arguments": {"cmd": "df"}},
            {"kind": "tool_result", "call_id": "c4", "tool": "shell", "status": "ok", "text": "90%"},
        ]
    )


@pytest.mark.parametrize("policy", ["auto", "turns", "agent"])
@pytest.mark.parametrize("input", [None, "And now?"])
@pytest.mark.parametrize("max_bytes", [None, 3000])
def test_every_body_is_a_valid_sdk_request(
    store: ctxlog.Store, policy: ctxlog.PolicyName, input: Optional[str], max_bytes: Optional[int]
) -> None:
    chat = store.conversation("agent")
    commit_history(chat)
    for extras, reserve in [(False, None), (True, 256)]:
        body, report = chat.project_dict(
            input, format="openai-responses", policy=policy, max_bytes=max_bytes,
            system="You are a build agent.", recall_tool=extras, notice=extras,
            reserve_output=reserve,
        )
        assert report["format"] == "openai-responses"
        ADAPTER.validate_python(body)
        items: List[Dict[str, Any]] = body["input"]
        if input is None:
            assert items[-1]["type"] == "function_call_output"


def test_a_body_the_api_rejects_is_refused_by_the_sdk_types() -> None:
    with pytest.raises(pydantic.ValidationError):
        ADAPTER.validate_python(
            {"model": "gpt-4o",
             "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}
        )

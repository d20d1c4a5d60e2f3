"""`openai-responses` bodies against the official `openai` SDK's request types
(docs/design.md#p14-more-wire-formats): every body ctxlog projects in this format, with either
policy, with and without input (the agent loop), with the recall tool, the notice and tight
budgets, carrying reasoning items committed as opaque events, validates as the SDK's
`ResponseCreateParamsNonStreaming`; a body the API rejects does not."""

import json
from typing import Any, Dict, List, Optional

import pydantic
import pytest
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

import ctxlog

ADAPTER: "pydantic.TypeAdapter[ResponseCreateParamsNonStreaming]" = pydantic.TypeAdapter(
    ResponseCreateParamsNonStreaming
)


REASONING: Dict[str, Any] = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Clean only what is safe."}],
    "encrypted_content": "gAAAAABoX1sample==",
}


def reasoning(item_id: str) -> Dict[str, Any]:
    return {"kind": "opaque", "format": "openai-responses", "item": {**REASONING, "id": item_id}}


def commit_history(chat: ctxlog.Conversation) -> None:
    chat.commit(events=[{"kind": "note", "text": "deploy only on Fridays", "pinned": True}])
    chat.commit(user="What is in /srv?", assistant="Let me look. " * 30)
    chat.commit(
        events=[
            {"kind": "user", "text": "List and size it"},
            reasoning("rs_1"),
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
            reasoning("rs_2"),
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


def test_reasoning_items_go_back_verbatim_before_their_calls(store: ctxlog.Store) -> None:
    chat = store.conversation("agent")
    commit_history(chat)
    body, report = chat.project_dict(format="openai-responses", policy="turns")
    ADAPTER.validate_python(body)
    items: List[Dict[str, Any]] = body["input"]
    at = items.index({**REASONING, "id": "rs_2"})
    assert items[at + 1]["type"] == "function_call"
    assert {**REASONING, "id": "rs_1"} in items
    assert report["opaque"]["sent"] == 2
    chat_body, chat_report = chat.project_dict(format="openai-chat", policy="turns")
    assert "reasoning" not in json.dumps(chat_body)
    assert chat_report["opaque"]["left_out_other_format"] == 2


def test_a_body_the_api_rejects_is_refused_by_the_sdk_types() -> None:
    with pytest.raises(pydantic.ValidationError):
        ADAPTER.validate_python(
            {"model": "gpt-4o",
             "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}
        )

"""Provider cache hints projected through the Python API (docs/projection.md, "Cache hints")
against the official SDKs' request types: the hints come from the model table (Anthropic
`cache_control`, OpenAI's `prompt_cache_key`, and for the models that take them OpenAI's
explicit `prompt_cache_breakpoint`s), every body validates as the SDK's create request, the
SDK's content-part types name the hint fields the body writes, and a hint in a shape the SDK
does not take is refused."""

import json
from typing import Any, Dict, Iterator

import pydantic
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from anthropic.types.text_block_param import TextBlockParam
from openai.types.chat.chat_completion_content_part_text_param import (
    ChatCompletionContentPartTextParam,
)
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from openai.types.responses.response_input_text_param import ResponseInputTextParam

import ctxlog

ADAPTERS: Dict[str, "pydantic.TypeAdapter[Any]"] = {
    "openai-chat": pydantic.TypeAdapter(CompletionCreateParamsNonStreaming),
    "openai-responses": pydantic.TypeAdapter(ResponseCreateParamsNonStreaming),
    "anthropic-messages": pydantic.TypeAdapter(MessageCreateParamsNonStreaming),
}

BREAKPOINT = '"prompt_cache_breakpoint": {"mode": "explicit"}'
CACHE_CONTROL = '"cache_control": {"type": "ephemeral"}'

PARTS: Dict[str, "pydantic.TypeAdapter[Any]"] = {
    "openai-chat": pydantic.TypeAdapter(ChatCompletionContentPartTextParam),
    "openai-responses": pydantic.TypeAdapter(ResponseInputTextParam),
    "anthropic-messages": pydantic.TypeAdapter(TextBlockParam),
}


def hinted_parts(value: Any) -> Iterator[Dict[str, Any]]:
    """Every object of `value` that carries a breakpoint field."""
    if isinstance(value, dict):
        if "prompt_cache_breakpoint" in value or ("cache_control" in value and "text" in value):
            yield value
        for v in value.values():
            yield from hinted_parts(v)
    elif isinstance(value, list):
        for v in value:
            yield from hinted_parts(v)

# (format, model, the hints the model table gives, the marker, how many the body carries:
# the system prompt's (Chat Completions and Anthropic) and the stable prefix's end).
CASES = [
    ("openai-chat", "gpt-5.6-sol", "prompt_cache_breakpoints", BREAKPOINT, 2),
    ("openai-responses", "gpt-5.6-sol", "prompt_cache_breakpoints", BREAKPOINT, 1),
    ("anthropic-messages", "claude-sonnet-4-5", "cache_control", CACHE_CONTROL, 2),
    ("openai-chat", "gpt-4o", "prompt_cache_key", BREAKPOINT, 0),
]


def conversation(store: ctxlog.Store) -> ctxlog.Conversation:
    chat = store.conversation("hints")
    for i in range(30):
        chat.commit(
            f"message {i}: the weather was fine and we walked to the harbour",
            f"reply {i}: that sounds lovely, tell me more about the harbour",
        )
    return chat


@pytest.mark.parametrize("format,model,kind,marker,marks", CASES)
def test_bodies_with_cache_hints_are_valid_sdk_requests(
    store: ctxlog.Store, format: ctxlog.WireFormat, model: str, kind: str, marker: str,
    marks: int,
) -> None:
    chat = conversation(store)
    body, report = chat.project_dict(
        "And now?", format=format, model=model, system="Be brief.", max_tokens=1_200,
        reserve_output=200, policy="turns", window="stable", cache_hints=True,
    )
    ADAPTERS[format].validate_python(body)
    text = json.dumps(body)
    assert text.count(marker) == marks, text
    assert report["cache_hints"]["kind"] == kind, report["cache_hints"]
    assert report["cache_hints"]["breakpoints"] == marks, report["cache_hints"]
    assert "model table row" in report["cache_hints"]["source"], report["cache_hints"]
    assert ("prompt_cache_key" in body) == format.startswith("openai"), text[:300]
    parts = list(hinted_parts(body))
    assert len(parts) == marks, parts
    for part in parts:
        PARTS[format].validate_python(part)
        # A hint in a shape the SDK does not take is refused: the check can fail.
        wrong = json.loads(
            json.dumps(part).replace('"explicit"', '"never"').replace('"ephemeral"', '"never"')
        )
        with pytest.raises(pydantic.ValidationError):
            PARTS[format].validate_python(wrong)


def test_the_sdk_types_name_the_hint_fields() -> None:
    assert "prompt_cache_breakpoint" in ChatCompletionContentPartTextParam.__annotations__
    assert "prompt_cache_breakpoint" in ResponseInputTextParam.__annotations__
    assert "cache_control" in TextBlockParam.__annotations__


def test_a_model_in_no_row_gets_the_format_default(store: ctxlog.Store) -> None:
    chat = conversation(store)
    body, report = chat.project_dict(
        "And now?", format="openai-chat", model="my-local-model", max_tokens=1_200,
        window="stable", cache_hints=True,
    )
    ADAPTERS["openai-chat"].validate_python(body)
    assert report["cache_hints"]["kind"] == "prompt_cache_key", report["cache_hints"]
    assert "no row for model" in report["cache_hints"]["source"], report["cache_hints"]
    assert "prompt_cache_breakpoint" not in json.dumps(body)

"""Images and documents committed through the Python API, projected in each wire format,
against the official SDKs' request types (docs/projection.md, "Images and documents"): every
body validates as the SDK's create request, carries each part in its format's shape, and
the report names the image token rule."""

import base64
import json
import zlib
from typing import Any, Dict, List

import pydantic
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

import ctxlog

ADAPTERS: Dict[str, "pydantic.TypeAdapter[Any]"] = {
    "openai-chat": pydantic.TypeAdapter(CompletionCreateParamsNonStreaming),
    "openai-responses": pydantic.TypeAdapter(ResponseCreateParamsNonStreaming),
    "anthropic-messages": pydantic.TypeAdapter(MessageCreateParamsNonStreaming),
}
MODELS = {
    "openai-chat": "gpt-4o",
    "openai-responses": "gpt-4o",
    "anthropic-messages": "claude-sonnet-4-5",
}


def png(width: int, height: int) -> bytes:
    """A whole PNG of ``width`` × ``height`` black pixels (8-bit RGB): ctxlog decodes an image
    once before storing it, so its bytes must hold the size its header claims."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    rows = (b"\x00" + bytes(3 * width)) * height  # filter byte 0, then the row's pixels
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


IMAGE = base64.b64encode(png(1024, 1024)).decode()
PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj <</Type /Page>> endobj\n").decode()


def commit_media(chat: ctxlog.Conversation) -> None:
    chat.commit(
        events=[
            {
                "kind": "user",
                "text": "What does this chart and report say?",
                "parts": [
                    {"type": "image", "data": IMAGE, "media_type": "image/png", "detail": "high"},
                    {"type": "document", "data": PDF, "media_type": "application/pdf",
                     "name": "walrus-report.pdf"},
                ],
            },
            {"kind": "assistant", "text": "Walrus numbers are up."},
        ]
    )


@pytest.mark.parametrize("format", sorted(ADAPTERS))
def test_a_body_with_media_is_a_valid_sdk_request_in_each_format(
    store: ctxlog.Store, format: ctxlog.WireFormat
) -> None:
    chat = store.conversation("media")
    commit_media(chat)
    body, report = chat.project_dict(
        "And the trend?", format=format, model=MODELS[format], max_tokens=20_000,
        reserve_output=1024 if format == "anthropic-messages" else None,
    )
    ADAPTERS[format].validate_python(body)
    text = json.dumps(body)
    assert IMAGE in text and PDF in text, text[:400]
    assert report["media"]["images"] == 1 and report["media"]["documents"] == 1, report
    assert report["media"]["rule"], report
    shapes = {
        "openai-chat": ('"image_url"', '"file"'),
        "openai-responses": ('"input_image"', '"input_file"'),
        "anthropic-messages": ('"image"', '"document"'),
    }[format]
    for shape in shapes:
        assert shape in text, (shape, text[:400])


def test_an_image_is_stored_once_and_never_in_the_log(store: ctxlog.Store) -> None:
    chat = store.conversation("media")
    commit_media(chat)
    commit_media(chat)
    events: List[Dict[str, Any]] = chat.log()
    part = events[0]["parts"][0]
    assert part["type"] == "image" and "data" not in part and part["artifact"]["name"].startswith("sha256-")
    assert events[2]["parts"][0]["artifact"] == part["artifact"]
    assert IMAGE not in json.dumps(events)

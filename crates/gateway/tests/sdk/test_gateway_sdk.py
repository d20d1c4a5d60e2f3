"""`ctxlog gateway` with the official `openai` and `anthropic` SDKs as clients, unchanged but
for `base_url` and `default_headers`, against the stand-in provider (standin.py), which checks
every request it gets. After each test the ledger holds exactly what the client sent and
received."""

import json
import zlib
from typing import Any, Dict, List, Optional

import anthropic
import http.client
import openai
import pytest

from conftest import WINDOW, Gateway
from standin import StandIn, call_reply, text_reply

SYSTEM = "You are a careful shell agent."
STEPS = 12
TOOLS_OPENAI: List[Any] = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    }
]
TOOLS_ANTHROPIC: List[Any] = [
    {
        "name": "shell",
        "description": "Run a shell command",
        "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    }
]


def output(step: int) -> str:
    """An 8 KB tool output."""
    line = f"step {step}: /dev/sda{step} 91% used /var/log/syslog.{step}\n"
    return (line * (8192 // len(line) + 1))[:8192]


def headers(conversation: str) -> Dict[str, str]:
    return {"X-Ctxlog-Conversation": conversation, "X-Ctxlog-Max-Tokens": str(WINDOW)}


def openai_client(gateway: Gateway, conversation: str, key: str = "sk-test-one") -> openai.OpenAI:
    return openai.OpenAI(
        api_key=key,
        base_url=f"{gateway.url}/v1",
        default_headers=headers(conversation),
        max_retries=0,
    )


def anthropic_client(gateway: Gateway, conversation: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="sk-ant-test",
        base_url=gateway.url,
        default_headers=headers(conversation),
        max_retries=0,
    )


def openai_expected(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The events the ledger must hold for an OpenAI message list (the system prompt aside)."""
    out: List[Dict[str, Any]] = []
    tools: Dict[str, str] = {}
    for m in messages:
        if m["role"] == "user":
            out.append({"kind": "user", "text": m["content"]})
        elif m["role"] == "assistant":
            if m.get("content"):
                out.append({"kind": "assistant", "text": m["content"]})
            for c in m.get("tool_calls") or []:
                tools[c["id"]] = c["function"]["name"]
                args = json.loads(c["function"]["arguments"])
                out.append({"kind": "tool_call", "call_id": c["id"], "tool": c["function"]["name"], "arguments": args})
        elif m["role"] == "tool":
            out.append({"kind": "tool_result", "call_id": m["tool_call_id"], "tool": tools[m["tool_call_id"]], "text": m["content"]})
    return out


def anthropic_expected(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    tools: Dict[str, str] = {}
    for m in messages:
        content = m["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        results = [b for b in blocks if b["type"] == "tool_result"]
        others = [b for b in blocks if b["type"] != "tool_result"]
        for b in results + others:
            if b["type"] == "text":
                out.append({"kind": m["role"], "text": b["text"]})
            elif b["type"] == "tool_use":
                tools[b["id"]] = b["name"]
                out.append({"kind": "tool_call", "call_id": b["id"], "tool": b["name"], "arguments": b["input"]})
            elif b["type"] == "tool_result":
                out.append({"kind": "tool_result", "call_id": b["tool_use_id"], "tool": tools[b["tool_use_id"]], "text": b["content"]})
    return out


def stored(gateway: Gateway, conversation: str) -> List[Dict[str, Any]]:
    """The ledger's events in the comparison's shape."""
    keys = ("kind", "text", "call_id", "tool", "arguments")
    events = gateway.export(conversation)
    out = []
    for e in events:
        event = {k: e[k] for k in keys if k in e}
        if isinstance(event.get("arguments"), str):
            event["arguments"] = json.loads(str(event["arguments"]))
        out.append(event)
    return out


def openai_message(completion: openai.types.chat.ChatCompletion) -> Dict[str, Any]:
    return completion.choices[0].message.model_dump(exclude_none=True)


def openai_streamed(stream: openai.Stream[openai.types.chat.ChatCompletionChunk]) -> Dict[str, Any]:
    """An assistant message rebuilt from a stream, as an application does."""
    text: Optional[str] = None
    calls: Dict[int, Dict[str, Any]] = {}
    for chunk in stream:
        delta = chunk.choices[0].delta
        if delta.content:
            text = (text or "") + delta.content
        for c in delta.tool_calls or []:
            call = calls.setdefault(c.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
            call["id"] += c.id or ""
            if c.function:
                call["function"]["name"] += c.function.name or ""
                call["function"]["arguments"] += c.function.arguments or ""
    message: Dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_openai_tool_loop_is_stored_once_and_fits_the_window(
    gateway: Gateway, standin: StandIn, stream: bool
) -> None:
    client = openai_client(gateway, "loop")
    messages: List[Dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Find what fills the disks."},
    ]
    for step in range(STEPS + 1):
        last = step == STEPS
        standin.replies.append(
            text_reply("The logs fill the disks.") if last else call_reply(f"call_{step}", "shell", {"cmd": f"du -sh /var/{step}"})
        )
        sent: Any = messages
        if stream:
            chunks = client.chat.completions.create(
                model="gpt-4o", messages=sent, tools=TOOLS_OPENAI, temperature=0.2, stream=True
            )
            message = openai_streamed(chunks)
        else:
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o", messages=sent, tools=TOOLS_OPENAI, temperature=0.2
            )
            assert raw.headers["x-ctxlog-conversation"] == "loop"
            # The seq of the reply: every event sent so far, and the reply's one.
            assert int(raw.headers["x-ctxlog-seq"]) == len(openai_expected(messages)) + 1
            message = openai_message(raw.parse())
        messages.append(message)
        if not last:
            call = message["tool_calls"][0]
            assert json.loads(call["function"]["arguments"]) == {"cmd": f"du -sh /var/{step}"}
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output(step)})
    assert messages[-1]["content"] == "The logs fill the disks."
    assert stored(gateway, "loop") == openai_expected(messages)
    # Every field the client set went upstream as given; the history was cut to the window.
    assert all(r["temperature"] == 0.2 and r["tools"] == TOOLS_OPENAI for r in standin.requests)
    assert all(r["messages"][0] == {"role": "system", "content": SYSTEM} for r in standin.requests)
    # The whole loop is one open turn: the oldest outputs were clipped to fit.
    assert len(json.dumps(standin.requests[-1])) < len(json.dumps(messages)) - 4 * 8192


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_anthropic_tool_loop_is_stored_once_and_fits_the_window(
    gateway: Gateway, standin: StandIn, stream: bool
) -> None:
    client = anthropic_client(gateway, "loop")
    messages: List[Dict[str, Any]] = [{"role": "user", "content": "Find what fills the disks."}]
    for step in range(STEPS + 1):
        last = step == STEPS
        standin.replies.append(
            text_reply("The logs fill the disks.") if last else call_reply(f"toolu_{step}", "shell", {"cmd": f"du -sh /var/{step}"})
        )
        args: Dict[str, Any] = dict(
            model="claude-sonnet-4-5", max_tokens=1024, system=SYSTEM, messages=messages, tools=TOOLS_ANTHROPIC
        )
        if stream:
            with client.messages.stream(**args) as events:
                reply = events.get_final_message()
        else:
            reply = client.messages.create(**args)
        content = [b.model_dump(exclude_none=True) for b in reply.content]
        messages.append({"role": "assistant", "content": content})
        if not last:
            use = content[-1]
            assert use["type"] == "tool_use" and use["input"] == {"cmd": f"du -sh /var/{step}"}
            result = {"type": "tool_result", "tool_use_id": use["id"], "content": output(step)}
            messages.append({"role": "user", "content": [result]})
    assert messages[-1]["content"] == [{"type": "text", "text": "The logs fill the disks."}]
    assert stored(gateway, "loop") == anthropic_expected(messages)
    assert all(r["system"] == SYSTEM and r["max_tokens"] == 1024 for r in standin.requests)
    assert len(json.dumps(standin.requests[-1])) < len(json.dumps(messages)) - 4 * 8192


TOOLS_RESPONSES: List[Any] = [
    {
        "type": "function",
        "name": "shell",
        "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        "strict": False,
    }
]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_responses_tool_loop_chained_by_previous_response_id_is_served_from_the_ledger(
    gateway: Gateway, standin: StandIn, stream: bool
) -> None:
    client = openai_client(gateway, "rloop")
    items: Any = "Find what fills the disks."
    previous: Optional[str] = None
    expected: List[Dict[str, Any]] = [{"kind": "user", "text": items}]
    final: Any = None
    for step in range(STEPS + 1):
        last = step == STEPS
        standin.replies.append(
            text_reply("The logs fill the disks.") if last else call_reply(f"call_{step}", "shell", {"cmd": f"du -sh /var/{step}"})
        )
        args: Dict[str, Any] = dict(
            model="gpt-4o", instructions=SYSTEM, input=items, tools=TOOLS_RESPONSES,
            temperature=0.2, max_output_tokens=512, store=False,
        )
        if previous is not None:
            args["previous_response_id"] = previous
        if stream:
            final = None
            for event in client.responses.create(stream=True, **args):
                if event.type == "response.completed":
                    final = event.response
            assert final is not None
        else:
            final = client.responses.create(**args)
        assert final.id.startswith("resp_ctxlog.rloop."), final.id
        previous = final.id
        if not last:
            call = [o for o in final.output if o.type == "function_call"][0]
            assert json.loads(call.arguments) == {"cmd": f"du -sh /var/{step}"}
            expected.append({"kind": "tool_call", "call_id": call.call_id, "tool": "shell", "arguments": {"cmd": f"du -sh /var/{step}"}})
            expected.append({"kind": "tool_result", "call_id": call.call_id, "tool": "shell", "text": output(step)})
            items = [{"type": "function_call_output", "call_id": call.call_id, "output": output(step)}]
    assert final.output_text == "The logs fill the disks."
    expected.append({"kind": "assistant", "text": "The logs fill the disks."})
    assert stored(gateway, "rloop") == expected
    # The provider got the whole chain, stateless: never previous_response_id; the client's
    # fields as given; the oldest outputs clipped to fit the window.
    assert len(standin.requests) == STEPS + 1
    for r in standin.requests:
        assert "previous_response_id" not in r
        assert r["instructions"] == SYSTEM and r["temperature"] == 0.2 and r["store"] is False
        assert r["tools"] == TOOLS_RESPONSES and r["max_output_tokens"] == 512
    whole = sum(len(json.dumps(e)) for e in expected)
    assert len(json.dumps(standin.requests[-1])) < whole - 4 * 8192
    # An id the gateway did not give is OpenAI's own 400, and nothing is stored.
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model="gpt-4o", input="Again?", previous_response_id="resp_unknown")
    body: Any = raised.value.body
    assert body["code"] == "previous_response_not_found" and body["param"] == "previous_response_id"
    assert stored(gateway, "rloop") == expected


def test_provider_errors_reach_the_client_in_its_shape_and_store_no_reply(
    gateway: Gateway, standin: StandIn
) -> None:
    client = openai_client(gateway, "errors")
    error = {"error": {"message": "model overloaded: pick another", "type": "invalid_request_error", "param": None, "code": "bad_model"}}
    standin.fail = (400, error)
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hello"}])
    assert raised.value.status_code == 400
    assert raised.value.body == error["error"]
    assert raised.value.response.headers["x-ctxlog-conversation"] == "errors"
    assert raised.value.response.headers["x-ctxlog-seq"] == "1"
    # The input is stored, no reply; the retry continues the same conversation.
    assert stored(gateway, "errors") == [{"kind": "user", "text": "hello"}]
    standin.replies.append(text_reply("Hi."))
    done = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hello"}])
    assert done.choices[0].message.content == "Hi."
    assert stored(gateway, "errors") == [{"kind": "user", "text": "hello"}, {"kind": "assistant", "text": "Hi."}]
    assert standin.requests[-1]["messages"] == [{"role": "user", "content": "hello"}]


def test_an_unreachable_provider_is_a_502_in_the_provider_shape(
    gateway: Gateway, standin: StandIn
) -> None:
    standin.close()
    client = anthropic_client(gateway, "down")
    with pytest.raises(anthropic.APIStatusError) as raised:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hello"}])
    assert raised.value.status_code == 502
    body: Any = raised.value.body
    assert body["type"] == "error" and "could not be reached" in body["error"]["message"]
    assert stored(gateway, "down") == [{"kind": "user", "text": "hello"}]


def test_a_client_that_leaves_mid_stream_gets_no_reply_stored(
    gateway: Gateway, standin: StandIn
) -> None:
    standin.stream_pause = 0.2
    standin.replies.append(text_reply("A long answer, streamed slowly, piece by piece."))
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "Tell me."}]}
    host, port = gateway.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port))
    connection.request(
        "POST", "/v1/chat/completions", json.dumps(body),
        {**headers("left"), "Authorization": "Bearer sk-test-one", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    assert response.status == 200
    assert response.read1(64)
    connection.close()
    # The gateway cancels the upstream request: the stand-in's stream breaks off.
    assert standin.cancelled.wait(timeout=30)
    assert stored(gateway, "left") == [{"kind": "user", "text": "Tell me."}]


def test_without_the_header_chats_are_recognised_and_a_diverged_history_forks(
    gateway: Gateway, standin: StandIn
) -> None:
    client = openai.OpenAI(
        api_key="sk-test-one", base_url=f"{gateway.url}/v1", max_retries=0,
        default_headers={"X-Ctxlog-Max-Tokens": str(WINDOW)},
    )

    def ask(messages: List[Dict[str, Any]], answer: str) -> tuple[str, Dict[str, Any]]:
        standin.replies.append(text_reply(answer))
        sent: Any = messages
        raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=sent)
        return raw.headers["x-ctxlog-conversation"], openai_message(raw.parse())

    def texts(conversation: str) -> List[Any]:
        return [e["text"] for e in gateway.export(conversation)]

    oslo: List[Dict[str, Any]] = [{"role": "user", "content": "Plan a trip to Oslo."}]
    rome: List[Dict[str, Any]] = [{"role": "user", "content": "Plan a trip to Rome."}]
    name, reply = ask(oslo, "Oslo plan.")
    oslo.append(reply)
    other, reply = ask(rome, "Rome plan.")
    rome.append(reply)
    # Two chats, two conversations; each continues in its own.
    assert name != other
    oslo.append({"role": "user", "content": "And the budget?"})
    again, reply = ask(oslo, "Oslo budget.")
    assert again == name
    oslo.append(reply)
    # A regenerated reply (the history resent without it) forks: the original stays.
    fork, reply = ask(oslo[:-1], "A cheaper Oslo budget.")
    assert fork not in (name, other)
    branch = oslo[:-1] + [reply, {"role": "user", "content": "Thanks."}]
    assert ask(branch, "You are welcome.")[0] == fork
    # An edited earlier message forks from where it differs.
    edited = [oslo[0], oslo[1], {"role": "user", "content": "And the weather?"}]
    weather, _ = ask(edited, "Cold.")
    assert weather not in (name, other, fork)
    assert texts(name) == ["Plan a trip to Oslo.", "Oslo plan.", "And the budget?", "Oslo budget."]
    assert texts(other) == ["Plan a trip to Rome.", "Rome plan."]
    assert texts(fork) == [
        "Plan a trip to Oslo.", "Oslo plan.", "And the budget?", "A cheaper Oslo budget.",
        "Thanks.", "You are welcome.",
    ]
    assert texts(weather) == ["Plan a trip to Oslo.", "Oslo plan.", "And the weather?", "Cold."]
    # A restarted gateway recognises the same conversations (the names are the transcript's).
    gateway.restart()
    client = openai.OpenAI(
        api_key="sk-test-one", base_url=f"{gateway.url}/v1", max_retries=0,
        default_headers={"X-Ctxlog-Max-Tokens": str(WINDOW)},
    )
    oslo.append({"role": "user", "content": "Pack what?"})
    assert ask(oslo, "Wool.")[0] == name


def test_keys_do_not_share_conversations(gateway: Gateway, standin: StandIn) -> None:
    for key in ["sk-test-one", "sk-test-two"]:
        standin.replies.append(text_reply("Hi."))
        openai_client(gateway, "same", key).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hello"}]
        )
    tenants = sorted((gateway.root / ".tenants").iterdir())
    assert len(tenants) == 2
    assert all((t / "same" / "ledger.log").exists() for t in tenants)
    text = b"".join(p.read_bytes() for p in gateway.root.rglob("*") if p.is_file())
    assert b"sk-test-one" not in text and b"sk-test-two" not in text


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


def test_an_image_the_client_resends_is_stored_once_and_sent_upstream(
    gateway: Gateway, standin: StandIn
) -> None:
    import base64

    client = openai_client(gateway, "photo")
    data = base64.b64encode(png(1024, 1024)).decode()
    url = f"data:image/png;base64,{data}"
    messages: List[Any] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this photo?"},
                {"type": "image_url", "image_url": {"url": url, "detail": "high"}},
            ],
        }
    ]
    for question in ["And its colour?", "Thanks."]:
        standin.replies.append(text_reply("A walrus."))
        reply = client.chat.completions.create(model="gpt-4o", messages=messages)
        messages.append(openai_message(reply))
        messages.append({"role": "user", "content": question})
    # The resent image was recognised (no conflict), stored once, and went upstream each time.
    events = gateway.export("photo")
    assert [e["kind"] for e in events] == ["user", "assistant", "user", "assistant"]
    assert len(list((gateway.root / ".tenants").rglob("artifacts/sha256-*"))) == 1
    for request in standin.requests:
        parts = request["messages"][0]["content"]
        assert {"type": "image_url", "image_url": {"url": url, "detail": "high"}} in parts, parts

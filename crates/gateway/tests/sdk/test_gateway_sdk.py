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


def ask_chat(
    client: openai.OpenAI, standin: StandIn, messages: List[Dict[str, Any]], answer: str
) -> tuple[str, Dict[str, Any]]:
    """One chat call the stand-in answers with `answer`: the conversation the response
    names, and the reply message."""
    standin.replies.append(text_reply(answer))
    sent: Any = messages
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=sent)
    return raw.headers["x-ctxlog-conversation"], openai_message(raw.parse())


def anthropic_content(client: anthropic.Anthropic, stream: bool, args: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The content blocks of one Messages call's reply, plain or streamed (as an application
    rebuilds it: the SDK's final message)."""
    if stream:
        with client.messages.stream(**args) as events:
            reply = events.get_final_message()
    else:
        reply = client.messages.create(**args)
    return [b.model_dump(exclude_none=True) for b in reply.content]


def texts_of(gateway: Gateway, conversation: str) -> List[Any]:
    """The texts of a conversation's events."""
    return [e["text"] for e in gateway.export(conversation)]


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
    # /metrics: the tokens the client resent (counted after each call went on) are more than
    # those sent upstream in their place.
    resent = metric_eventually(gateway, 'ctxlog_gateway_client_tokens_total{route="chat"}', lambda n: n > 0)
    sent = metric_eventually(gateway, 'ctxlog_gateway_upstream_input_tokens_total{route="chat"}', lambda n: n > 0)
    assert resent > sent + 4 * 1000, (resent, sent)


def metric_eventually(gateway: Gateway, series: str, ready: Any) -> int:
    """A series of /metrics once `ready` holds for it (counts made off the request path
    land a moment after the answer)."""
    import time

    for _ in range(100):
        values = [int(float(line.split()[-1])) for line in gateway.metrics().splitlines() if line.startswith(series + " ")]
        if values and ready(values[0]):
            return values[0]
        time.sleep(0.05)
    raise AssertionError(f"{series} never ready")


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
        content = anthropic_content(client, stream, args)
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
        return ask_chat(client, standin, messages, answer)

    def texts(conversation: str) -> List[Any]:
        return texts_of(gateway, conversation)

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


def headerless_client(gateway: Gateway) -> openai.OpenAI:
    """An OpenAI client that names no conversation."""
    return openai.OpenAI(
        api_key="sk-test-one", base_url=f"{gateway.url}/v1", max_retries=0,
        default_headers={"X-Ctxlog-Max-Tokens": str(WINDOW)},
    )


def test_without_the_header_a_client_that_trims_its_oldest_messages_continues(
    gateway: Gateway, standin: StandIn
) -> None:
    client = headerless_client(gateway)

    def ask(messages: List[Dict[str, Any]], answer: str) -> tuple[str, Dict[str, Any]]:
        return ask_chat(client, standin, messages, answer)

    def user(text: str) -> Dict[str, Any]:
        return {"role": "user", "content": text}

    chat = [user("Plan a trip to Oslo.")]
    name, reply = ask(chat, "Oslo plan.")
    chat += [reply, user("And the budget?")]
    assert ask(chat, "Oslo budget.")[0] == name
    # Another chat that starts with one of Oslo's messages is a chat of its own: the
    # model's reply that follows it in Oslo's conversation is not part of it.
    other, _ = ask([user("And the budget?")], "Which budget?")
    assert other != name
    # The client keeps only its newest messages (its first is now the one the other chat
    # starts with): it continues Oslo's conversation after the stored part it resends.
    chat = [user("And the budget?"), {"role": "assistant", "content": "Oslo budget."}, user("Pack what?")]
    again, reply = ask(chat, "Wool.")
    assert again == name
    chat.append(reply)
    # A restarted gateway finds it again (the places of the stored events are read from the
    # ledger), with an even shorter history.
    gateway.restart()
    client = headerless_client(gateway)
    chat = chat[-2:] + [user("And shoes?")]
    assert ask(chat, "Boots.")[0] == name
    assert texts_of(gateway, name) == [
        "Plan a trip to Oslo.", "Oslo plan.", "And the budget?", "Oslo budget.",
        "Pack what?", "Wool.", "And shoes?", "Boots.",
    ]
    assert texts_of(gateway, other) == ["And the budget?", "Which budget?"]


def test_a_regenerated_reply_retried_after_a_failed_call_lands_in_the_same_fork(
    gateway: Gateway, standin: StandIn
) -> None:
    client = headerless_client(gateway)
    chat: List[Dict[str, Any]] = [{"role": "user", "content": "Name a colour."}]
    name, reply = ask_chat(client, standin, chat, "Blue.")
    # The client regenerates the reply; the provider fails, and the client sends the same
    # request again: one fork, holding the question once.
    error = {"error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}}
    standin.fail = (500, error)
    sent: Any = chat
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model="gpt-4o", messages=sent)
    fork = raised.value.response.headers["x-ctxlog-conversation"]
    assert fork != name
    again, _ = ask_chat(client, standin, chat, "Red.")
    assert again == fork
    assert texts_of(gateway, fork) == ["Name a colour.", "Red."]
    assert texts_of(gateway, name) == ["Name a colour.", "Blue."]


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


def recall_tool_names(route: str, request: Dict[str, Any]) -> List[str]:
    return [t["function"]["name"] if route == "chat" else t["name"] for t in request.get("tools", [])]


def recall_results(route: str, request: Dict[str, Any]) -> List[str]:
    """The texts of the gateway's recall results in an upstream body."""
    out: List[str] = []
    if route == "chat":
        for m in request["messages"]:
            if m["role"] == "tool" and m["tool_call_id"].startswith("ctxlog-recall-"):
                out.append(m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]))
    elif route == "messages":
        for m in request["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b["type"] == "tool_result" and b["tool_use_id"].startswith("ctxlog-recall-"):
                    out.append(json.dumps(b["content"]))
    else:
        for item in request["input"]:
            if item.get("type") == "function_call_output" and item["call_id"].startswith("ctxlog-recall-"):
                out.append(json.dumps(item["output"]))
    return out


@pytest.mark.parametrize(
    "route,stream",
    [("chat", False), ("chat", True), ("messages", False), ("messages", True), ("responses", True)],
    ids=["chat-plain", "chat-stream", "messages-plain", "messages-stream", "responses-stream"],
)
def test_the_gateway_answers_the_models_recall_calls_and_the_client_never_sees_them(
    recall_gateway: Gateway, standin: StandIn, route: str, stream: bool
) -> None:
    gateway = recall_gateway
    history: List[Dict[str, Any]] = []
    previous: Optional[str] = None

    def ask(text: str) -> str:
        """One user message and the answer the client gets (the history resent, or for
        Responses chained by previous_response_id)."""
        nonlocal previous
        history.append({"role": "user", "content": text})
        if route == "chat":
            client = openai_client(gateway, "mem")
            sent: Any = history
            if stream:
                message = openai_streamed(client.chat.completions.create(model="gpt-4o", messages=sent, stream=True))
            else:
                message = openai_message(client.chat.completions.create(model="gpt-4o", messages=sent))
            assert "tool_calls" not in message, message
            history.append(message)
            return str(message["content"])
        if route == "messages":
            aclient = anthropic_client(gateway, "mem")
            args: Dict[str, Any] = dict(model="claude-sonnet-4-5", max_tokens=256, messages=history)
            content = anthropic_content(aclient, stream, args)
            assert [b["type"] for b in content] == ["text"], content
            history.append({"role": "assistant", "content": content})
            return str(content[0]["text"])
        client = openai_client(gateway, "mem")
        final: Any = None
        extra: Dict[str, Any] = {"previous_response_id": previous} if previous else {}
        for event in client.responses.create(model="gpt-4o", input=text, stream=True, **extra):
            if event.type == "response.completed":
                final = event.response
            assert event.type != "response.function_call_arguments.delta", event
        assert final is not None and [o.type for o in final.output] == ["message"], final
        previous = final.id
        return str(final.output_text)

    standin.replies.append(text_reply("Noted."))
    assert ask("The vault path is /srv/vault-7, remember it.") == "Noted."
    # The model looks it up once: the gateway answers, the provider is called again. It
    # writes a line before its call, where the gateway can tell the answer is a step before
    # sending any of it (a whole answer; an Anthropic stream, held until its first tool use).
    recall_id = "toolu_r1" if route == "messages" else "call_r1"
    step_text = "Let me look." if route == "messages" or not stream else None
    standin.replies.append({**call_reply(recall_id, "recall", {"query": "vault path"}), "text": step_text})
    standin.replies.append(text_reply("It is /srv/vault-7."))
    assert ask("Where is the vault?") == "It is /srv/vault-7."
    assert len(standin.requests) == 3
    # The recall tool was offered from the first request on, the same in every one.
    assert all(recall_tool_names(route, r).count("recall") == 1 for r in standin.requests)
    assert len({json.dumps(r["tools"]) for r in standin.requests}) == 1
    # The stand-in got the recall's answer back: the hit from the first message.
    assert recall_results(route, standin.requests[0]) == []
    results = recall_results(route, standin.requests[2])
    assert len(results) == 1 and "/srv/vault-7" in results[0], results
    assert f'ctxlog_gateway_recall_calls_total{{route="{route}"}} 1' in gateway.metrics().splitlines()
    # The client resends its history (without the step it never saw): recognised, no fork.
    standin.replies.append(text_reply("You are welcome."))
    assert ask("Thanks.") == "You are welcome."
    events = gateway.export("mem")
    kinds = [(e["kind"], e.get("tool")) for e in events]
    # The step's own text is stored in its place, as the gateway's.
    step = [("assistant", None)] if step_text else []
    assert kinds == [
        ("user", None), ("assistant", None), ("user", None), *step, ("tool_call", "recall"),
        ("tool_result", "recall"), ("assistant", None), ("user", None), ("assistant", None),
    ], kinds
    events = [e for e in events if not step_text or e.get("text") != step_text]
    assert events[3]["call_id"] == events[4]["call_id"] and str(events[3]["call_id"]).startswith("ctxlog-recall-")
    # The step stays in the conversation the provider sees (the model's own lookup).
    assert len(recall_results(route, standin.requests[3])) == 1


def test_recall_calls_past_the_limit_reach_the_client(recall_gateway: Gateway, standin: StandIn) -> None:
    client = openai_client(recall_gateway, "limit")
    for n in range(3):
        standin.replies.append(call_reply(f"call_r{n}", "recall", {"query": f"thing {n}"}))
    message = openai_message(client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Look."}]))
    # --recall-calls 2: two answered by the gateway, the third relayed as the model made it.
    assert message["tool_calls"][0]["id"] == "call_r2", message
    assert len(standin.requests) == 3
    kinds = [(e["kind"], str(e.get("call_id", ""))[:14]) for e in recall_gateway.export("limit")]
    assert kinds == [("user", "")] + [("tool_call", "ctxlog-recall-"), ("tool_result", "ctxlog-recall-")] * 2 + [
        ("tool_call", "call_r2")
    ], kinds


def test_a_named_conversation_whose_history_diverges_forks_and_keeps_its_original(
    gateway: Gateway, standin: StandIn
) -> None:
    client = openai_client(gateway, "named")

    def ask(messages: List[Dict[str, Any]], answer: str) -> tuple[str, Dict[str, Any]]:
        return ask_chat(client, standin, messages, answer)

    def texts(conversation: str) -> List[Any]:
        return texts_of(gateway, conversation)

    chat: List[Dict[str, Any]] = [{"role": "user", "content": "Name a colour."}]
    name, reply = ask(chat, "Blue.")
    assert name == "named"
    chat += [reply, {"role": "user", "content": "Another?"}]
    assert ask(chat, "Green.")[0] == "named"
    # The client regenerates the last reply (it resends the history without it), still
    # naming "named": a fork holding the common part, named in the response.
    fork, reply = ask(chat, "Red.")
    assert fork not in ("named", "") and fork.startswith("auto-"), fork
    # It goes on sending the same header: its history continues the fork, and lands there.
    branch = chat + [reply, {"role": "user", "content": "Thanks."}]
    assert ask(branch, "Welcome.")[0] == fork
    assert texts("named") == ["Name a colour.", "Blue.", "Another?", "Green."]
    assert texts(fork) == ["Name a colour.", "Blue.", "Another?", "Red.", "Thanks.", "Welcome."]
    # The same regeneration again is the same fork's sibling, never a merge.
    sibling, _ = ask(chat, "Yellow.")
    assert sibling not in ("named", fork)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_anthropic_replys_thinking_block_goes_back_verbatim(
    gateway: Gateway, standin: StandIn, stream: bool
) -> None:
    from standin import thinking_block

    client = anthropic_client(gateway, "think")
    messages: List[Dict[str, Any]] = [{"role": "user", "content": "How full is the disk?"}]
    standin.replies.append(call_reply("toolu_t1", "shell", {"cmd": "df -h"}, thought="Check df first."))
    standin.replies.append(text_reply("It is 91% full."))
    for _ in range(2):
        args: Dict[str, Any] = dict(model="claude-sonnet-4-5", max_tokens=256, messages=messages, tools=TOOLS_ANTHROPIC)
        content = anthropic_content(client, stream, args)
        messages.append({"role": "assistant", "content": content})
        if content[-1]["type"] == "tool_use":
            result = {"type": "tool_result", "tool_use_id": "toolu_t1", "content": "91% used"}
            messages.append({"role": "user", "content": [result]})
    # The thinking block (with its signature) went back in its place, as the provider sent
    # it, before the call it led to: recognised in the client's resent history, not forked.
    assert standin.requests[1]["messages"][1]["content"][0] == thinking_block("Check df first.")
    assert standin.requests[1]["messages"][1]["content"][1]["type"] == "tool_use"
    kinds = [e["kind"] for e in gateway.export("think")]
    assert kinds == ["user", "opaque", "tool_call", "tool_result", "assistant"], kinds


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_anthropic_replys_text_block_goes_back_with_its_citations(
    gateway: Gateway, standin: StandIn, stream: bool
) -> None:
    client = anthropic_client(gateway, "cite")
    cited = {
        "type": "char_location", "cited_text": "The sky is blue.", "document_index": 0,
        "document_title": "Facts", "start_char_index": 0, "end_char_index": 16,
    }
    standin.replies.append({**text_reply("The sky is blue."), "citations": [cited]})
    standin.replies.append(call_reply("toolu_c1", "shell", {"cmd": "date"}))
    standin.replies.append(text_reply("It is noon."))
    messages: List[Dict[str, Any]] = [{"role": "user", "content": "What colour is the sky?"}]
    for follow_up in ["And the time?", None, "Thanks."]:
        args: Dict[str, Any] = dict(model="claude-sonnet-4-5", max_tokens=256, messages=messages, tools=TOOLS_ANTHROPIC)
        content = anthropic_content(client, stream, args)
        messages.append({"role": "assistant", "content": content})
        if follow_up is None:
            result = {"type": "tool_result", "tool_use_id": "toolu_c1", "content": "12:00"}
            messages.append({"role": "user", "content": [result]})
        elif follow_up != "Thanks.":
            messages.append({"role": "user", "content": follow_up})
    # The text block went back with its citations, the tool use block as it came, each in
    # its place: the SDK's resent blocks were recognised (nothing forked or stored twice).
    assert standin.requests[1]["messages"][1]["content"] == [
        {"type": "text", "text": "The sky is blue.", "citations": [cited]}
    ]
    assert standin.requests[2]["messages"][3]["content"] == [
        {"type": "tool_use", "id": "toolu_c1", "name": "shell", "input": {"cmd": "date"}}
    ]
    events = gateway.export("cite")
    assert [e["kind"] for e in events] == ["user", "assistant", "user", "tool_call", "tool_result", "assistant"]
    kept: Any = events[1]["provider_item"]
    assert kept["item"]["citations"] == [cited]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_responses_replys_reasoning_item_and_call_go_back_verbatim(
    gateway: Gateway, standin: StandIn, stream: bool
) -> None:
    from standin import reasoning_item

    client = openai_client(gateway, "reason")
    standin.replies.append(call_reply("call_t1", "shell", {"cmd": "df -h"}, thought="Check df first."))
    standin.replies.append(text_reply("It is 91% full."))
    items: Any = "How full is the disk?"
    previous: Optional[str] = None
    for _ in range(2):
        extra: Dict[str, Any] = {"previous_response_id": previous} if previous else {}
        if stream:
            final: Any = None
            for event in client.responses.create(model="o4-mini", input=items, tools=TOOLS_RESPONSES, stream=True, **extra):
                if event.type == "response.completed":
                    final = event.response
        else:
            final = client.responses.create(model="o4-mini", input=items, tools=TOOLS_RESPONSES, **extra)
        previous = final.id
        items = [{"type": "function_call_output", "call_id": "call_t1", "output": "91% used"}]
    # The whole chain went upstream statelessly: the reasoning item (its encrypted content)
    # and the function call item (its own id) as the provider sent them.
    sent = standin.requests[1]["input"]
    assert sent[1] == reasoning_item("Check df first."), sent
    assert sent[2]["type"] == "function_call" and sent[2]["id"] == "fc_0" and sent[2]["call_id"] == "call_t1", sent
    kinds = [e["kind"] for e in gateway.export("reason")]
    assert kinds == ["user", "opaque", "tool_call", "tool_result", "assistant"], kinds


def test_a_configured_window_fits_a_model_the_table_lacks_and_an_evicted_conversation_continues(
    configured_gateway: Gateway, standin: StandIn
) -> None:
    gateway = configured_gateway
    chats: Dict[str, List[Dict[str, Any]]] = {"one": [], "two": []}
    for step in range(4):
        for name, messages in chats.items():
            # No X-Ctxlog-Max-Tokens: the window is --model-window's (the stand-in checks it).
            client = openai.OpenAI(
                api_key="sk-test-one", base_url=f"{gateway.url}/v1", max_retries=0,
                default_headers={"X-Ctxlog-Conversation": name},
            )
            messages.append({"role": "user", "content": f"{name} {step}: {output(step)}"})
            standin.replies.append(text_reply(f"{name} reply {step}"))
            sent: Any = messages
            reply = client.chat.completions.create(model="test-model-7b", messages=sent)
            messages.append(openai_message(reply))
    # --recognition-cache 1: each call evicted the other conversation's digests, and each
    # was read again from the store: recognised, every message stored once.
    for name, messages in chats.items():
        assert stored(gateway, name) == openai_expected(messages)
    # The history (4 × 8 KB per chat) was cut to the configured window.
    assert len(json.dumps(standin.requests[-1])) < len(json.dumps(chats["two"])) - 8192


def test_windows_configured_in_ctxlog_toml_fit_and_the_flag_wins(toml_gateway: Gateway, standin: StandIn) -> None:
    client = openai.OpenAI(
        api_key="sk-test-one", base_url=f"{toml_gateway.url}/v1", max_retries=0,
        default_headers={"X-Ctxlog-Conversation": "toml"},
    )
    messages: List[Dict[str, Any]] = []
    for step, model in enumerate(["test-model-2", "test-model-2", "test-model-2", "test-model-7b"]):
        # No X-Ctxlog-Max-Tokens: the window is the file's (the stand-in checks it), and for
        # test-model-7b the flag's, over the file's 1 token.
        messages.append({"role": "user", "content": f"{step}: {output(step)}"})
        standin.replies.append(text_reply(f"reply {step}"))
        sent: Any = messages
        messages.append(openai_message(client.chat.completions.create(model=model, messages=sent)))
    assert stored(toml_gateway, "toml") == openai_expected(messages)
    # The history (4 × 8 KB) was cut to the configured window.
    assert len(json.dumps(standin.requests[-1])) < len(json.dumps(messages)) - 8192


def test_a_responses_branch_from_an_earlier_response_forks(gateway: Gateway, standin: StandIn) -> None:
    client = openai_client(gateway, "chain")

    def ask(text: str, previous: Optional[str], answer: str) -> Any:
        standin.replies.append(text_reply(answer))
        extra: Dict[str, Any] = {"previous_response_id": previous} if previous else {}
        raw = client.responses.with_raw_response.create(model="gpt-4o", input=text, **extra)
        return raw.headers["x-ctxlog-conversation"], raw.parse()

    def texts(conversation: str) -> List[Any]:
        return texts_of(gateway, conversation)

    _, first = ask("Pick a city.", None, "Oslo.")
    _, second = ask("Why?", first.id, "Fjords.")
    # A branch from the first response (the client went back one step): a fork holding the
    # conversation up to it, never a rewrite of "chain".
    fork, branched = ask("Another city?", first.id, "Rome.")
    assert fork.startswith("auto-") and branched.id.startswith(f"resp_ctxlog.{fork}."), (fork, branched.id)
    assert texts("chain") == ["Pick a city.", "Oslo.", "Why?", "Fjords."]
    assert texts(fork) == ["Pick a city.", "Oslo.", "Another city?", "Rome."]
    # The fork's own chain goes on in it, and upstream gets the fork's whole history.
    again, _ = ask("Why Rome?", branched.id, "Food.")
    assert again == fork
    assert texts(fork) == ["Pick a city.", "Oslo.", "Another city?", "Rome.", "Why Rome?", "Food."]
    assert [i["content"][0]["text"] for i in standin.requests[-1]["input"]] == texts(fork)[:-1]
    # A second branch from the same response is a fork of its own.
    other, _ = ask("A third city?", first.id, "Lima.")
    assert other not in ("chain", fork)
    assert texts(other) == ["Pick a city.", "Oslo.", "A third city?", "Lima."]
    # A branch call whose provider call fails, sent again, lands in the same fork: its
    # input stored once, then the reply.
    standin.fail = (500, {"error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}})
    with pytest.raises(openai.InternalServerError) as raised:
        client.responses.create(model="gpt-4o", input="A fourth city?", previous_response_id=first.id)
    failed = raised.value.response.headers["x-ctxlog-conversation"]
    assert failed not in ("chain", fork, other)
    retried, kyiv = ask("A fourth city?", first.id, "Kyiv.")
    assert retried == failed
    assert texts(retried) == ["Pick a city.", "Oslo.", "A fourth city?", "Kyiv."]
    # The same for a call that continues the latest response: sent again, it stays where
    # its chain is.
    standin.fail = (500, {"error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}})
    with pytest.raises(openai.InternalServerError):
        client.responses.create(model="gpt-4o", input="Why Kyiv?", previous_response_id=kyiv.id)
    assert ask("Why Kyiv?", kyiv.id, "Chestnuts.")[0] == retried
    assert texts(retried)[-2:] == ["Why Kyiv?", "Chestnuts."]


def test_an_empty_answer_with_the_recall_tool_on_is_relayed(recall_gateway: Gateway, standin: StandIn) -> None:
    standin.replies.append(text_reply(""))
    client = openai_client(recall_gateway, "empty")
    message = openai_message(client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hm?"}]))
    assert message["content"] == "" and len(standin.requests) == 1

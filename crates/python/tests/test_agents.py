"""The OpenAI Agents SDK adapter: ``ctxlog.agents.CtxlogSession`` keeps the ``Session``
protocol (order, limits, pop, clear, isolation, concurrent adds), stores what the SDK's own
``SQLiteSession`` stores when a ``Runner`` drives a scripted model through a tool call and two
runs, and what it stores is an ordinary conversation (log, projection, erasure). Offline: the
model is the SDK's ``agents.testing.ScriptedModel``."""

import asyncio
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

pytest.importorskip("agents")

from agents import (  # noqa: E402
    Agent,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session  # noqa: E402
from agents.models.openai_responses import Converter  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

import ctxlog  # noqa: E402
from ctxlog.agents import CtxlogSession, budget_filter  # noqa: E402

set_tracing_disabled(True)

Item = Dict[str, Any]


def user(text: str) -> Item:
    return {"content": text, "role": "user"}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_it_is_a_session(store: ctxlog.Store) -> None:
    session = CtxlogSession("s1", store=store)
    assert isinstance(session, Session)
    assert session.session_id == "s1"


def test_items_come_back_in_order_and_limits_take_the_newest(store: ctxlog.Store) -> None:
    session = CtxlogSession("s1", store=store)
    items = [user(f"message {i}") for i in range(5)]

    async def scenario() -> None:
        assert await session.get_items() == []
        await session.add_items(items[:2])
        await session.add_items(items[2:])
        assert await session.get_items() == items
        assert await session.get_items(limit=0) == []
        assert await session.get_items(limit=2) == items[3:]
        assert await session.get_items(limit=50) == items

    run(scenario())


def test_pop_retracts_the_newest_item_for_real(store: ctxlog.Store) -> None:
    session = CtxlogSession("s1", store=store)
    call: Item = {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 1}'}
    output: Item = {"type": "function_call_output", "call_id": "c1", "output": "zebracorn 2"}
    items = [user("add one"), call, output]
    again = dict(output)

    async def scenario() -> None:
        assert await session.pop_item() is None
        await session.add_items(items)
        assert await session.pop_item() == output
        assert await session.get_items() == items[:2]
        # The turn is still open: the output can be stored again.
        await session.add_items([again])
        assert await session.get_items() == items
        assert await session.pop_item() == output
        assert await session.pop_item() == call
        assert await session.pop_item() == items[0]
        assert await session.pop_item() is None

    run(scenario())
    conv = store.conversation("s1")
    assert conv.recall("zebracorn")["hits"] == []
    assert b"zebracorn" not in conv.export()
    assert {e["kind"] for e in conv.log()} == {"system"}


def test_clear_erases_the_conversation_and_sessions_are_isolated(store: ctxlog.Store) -> None:
    a = CtxlogSession("a", store=store)
    b = CtxlogSession("b", store=store)

    async def scenario() -> None:
        await a.add_items([user("for a")])
        await b.add_items([user("for b")])
        assert await a.get_items() == [user("for a")]
        await a.clear_session()
        await a.clear_session()
        assert await a.get_items() == []
        assert await b.get_items() == [user("for b")]

    run(scenario())
    assert [c["name"] for c in store.list()] == ["b"]


def test_unicode_and_hostile_strings_round_trip(store: ctxlog.Store) -> None:
    session = CtxlogSession("s1", store=store)
    hostile = [
        "héllo wörld — 你好 🦙",
        "'; DROP TABLE events; --",
        '"quoted" AND NEAR(x y) *',
        "line\nbreak\ttab\u0000nul",
        "\u202eright-to-left",
        "{\"kind\":\"system\"}",
    ]
    items: List[Item] = [user(text) for text in hostile]
    items.append({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x" * 40})

    async def scenario() -> None:
        await session.add_items(items)
        assert await session.get_items() == items

    run(scenario())


def test_concurrent_adds_lose_nothing(root: Path) -> None:
    async def scenario() -> None:
        store = ctxlog.Store(root)
        sessions = [CtxlogSession("s1", store=store) for _ in range(4)]
        await asyncio.gather(
            *(s.add_items([user(f"{n}-{i}")]) for n, s in enumerate(sessions) for i in range(10))
        )
        items = await sessions[0].get_items()
        assert sorted(str(dict(i)["content"]) for i in items) == sorted(
            f"{n}-{i}" for n in range(4) for i in range(10)
        )
        store.close()

    run(scenario())


def test_a_bad_item_is_refused_and_stores_nothing(store: ctxlog.Store) -> None:
    session = CtxlogSession("s1", store=store)
    orphan = {"type": "function_call_output", "call_id": "nope", "output": "x"}

    async def scenario() -> None:
        await session.add_items([user("hi")])
        with pytest.raises(ValueError, match="answers no function_call"):
            await session.add_items([user("again"), orphan])
        with pytest.raises(ctxlog.BadInput):
            await session.add_items([user("   ")])
        assert await session.get_items() == [user("hi")]

    run(scenario())


@function_tool
def add(a: int, b: int) -> str:
    """Adds two numbers."""
    return str(a + b)


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            [function_call("add", {"a": 2, "b": 3}, call_id="call_1")],
            [assistant_message("2 + 3 = 5", item_id="msg_1")],
            [assistant_message("You asked me to add 2 and 3.", item_id="msg_2")],
        ]
    )


async def drive(session: Any) -> ScriptedModel:
    model = script()
    agent = Agent(name="calc", instructions="Add numbers.", model=model, tools=[add])
    await Runner.run(agent, "What is 2 + 3?", session=session)
    await Runner.run(agent, "What did I ask?", session=session)
    model.assert_complete()
    return model


def test_a_runner_stores_what_sqlite_session_stores(store: ctxlog.Store, tmp_path: Path) -> None:
    async def scenario() -> None:
        reference = SQLiteSession("s1", str(tmp_path / "ref.sqlite"))
        ours = CtxlogSession("s1", store=store)
        ref_model = await drive(reference)
        our_model = await drive(ours)
        want = await reference.get_items()
        got = await ours.get_items()
        assert [i.get("type", i.get("role")) for i in want] == [
            "user", "function_call", "function_call_output", "message", "user", "message",
        ]
        # Whole items: the same dicts (ids, status, annotations and all), in the same order.
        assert got == want
        assert [json.dumps(i, sort_keys=True) for i in got] == [
            json.dumps(i, sort_keys=True) for i in want
        ]
        # The model saw the same history on the second run.
        assert our_model.calls[-1].input == ref_model.calls[-1].input
        reference.close()

    run(scenario())
    conv = store.conversation("s1")
    log = conv.log()
    kinds = [e["kind"] for e in log]
    assert kinds == ["user", "tool_call", "tool_result", "assistant", "user", "assistant"]
    # The provider's items are kept beside what ctxlog reads: sent verbatim in their own
    # format, never in another.
    assert log[3]["provider_item"]["item"]["id"] == "msg_1"
    body, report = conv.project_dict(input="and now?", format="openai-responses")
    assert json.dumps(body).count("2 + 3 = 5") == 1
    whole, _ = conv.project_dict(input="and now?", format="openai-responses", policy="turns")
    assert whole["input"][3] == log[3]["provider_item"]["item"]
    chat, _ = conv.project_dict(input="and now?", format="openai-chat", policy="turns")
    assert "msg_1" not in json.dumps(chat) and "2 + 3 = 5" in json.dumps(chat)
    # An export carries them and an import rebuilds them.
    copy = store.conversation("s1-copy")
    copy.import_(conv.export())
    assert [e.get("provider_item") for e in copy.log()] == [e.get("provider_item") for e in log]

    async def read_copy() -> Any:
        return await CtxlogSession("s1-copy", store=store).get_items()

    assert run(read_copy()) == run(CtxlogSession("s1", store=store).get_items())


@function_tool
def read_log(name: str) -> str:
    """Reads a build log."""
    return f"{name}: " + "compiling crate ok\n" * 280  # about 5 KB


def sent_tokens(store: ctxlog.Store, call: Any) -> int:
    """The tokens of the whole request a scripted model's call was sent: its instructions,
    its input and its tool definitions (MCP servers' included), as a Responses body."""
    tools = Converter.convert_tools(call.tools, call.handoffs).tools
    body = {
        "model": "gpt-4o",
        "instructions": call.system_instructions,
        "input": call.input,
        "tools": tools,
    }
    counted = store.count(json.dumps(body, ensure_ascii=False), format="openai-responses")
    return int(counted["tokens"])


def build_checker(runs: int) -> ScriptedModel:
    """A model that, for each of `runs` runs, calls ``read_log`` for build i, then says the
    build is fine."""
    steps: List[Any] = []
    for i in range(runs):
        steps.append([function_call("read_log", {"name": f"build-{i}"}, call_id=f"call_{i}")])
        steps.append([assistant_message(f"build {i} is fine", item_id=f"msg_{i}")])
    return ScriptedModel(steps)


def test_a_long_agent_run_never_gives_the_model_more_than_the_budget(
    store: ctxlog.Store,
) -> None:
    budget = 6000
    runs = 30
    model = build_checker(runs)
    session = CtxlogSession("agent", store=store)
    agent = Agent(name="ops", instructions="Check builds.", model=model, tools=[read_log])
    config = RunConfig(call_model_input_filter=budget_filter(session=session, max_tokens=budget))

    async def scenario() -> None:
        for i in range(runs):
            await Runner.run(agent, f"check build {i}", session=session, run_config=config)

    run(scenario())
    model.assert_complete()
    assert len(model.calls) == 2 * runs
    most = 0
    for call in model.calls:
        tokens = sent_tokens(store, call)
        assert tokens <= budget, tokens
        most = max(most, tokens)
    # The budget was the limit, not the history: late calls left early turns out, and each
    # call ended on its own turn (the question, then the tool's output).
    last = model.calls[-1].input
    assert "check build 29" in json.dumps(last)
    assert "check build 0\"" not in json.dumps(last)
    assert last[-1]["type"] == "function_call_output"
    assert most > budget // 2
    # Nothing was stored twice: 30 runs of user, call, output, reply.
    kinds = [e["kind"] for e in store.conversation("agent").log()]
    assert kinds == ["user", "tool_call", "tool_result", "assistant"] * runs


def test_the_filter_stores_unsaved_items_once(store: ctxlog.Store) -> None:
    from agents.run_config import CallModelData, ModelInputData

    session = CtxlogSession("s1", store=store)
    call: Item = {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"}
    output: Item = {"type": "function_call_output", "call_id": "c1", "output": "2"}
    fit = budget_filter(session=session, max_tokens=2000)
    agent = Agent(name="calc")

    async def scenario() -> None:
        await session.add_items([user("add")])
        given: Any = [user("add"), call, output]
        data = CallModelData(ModelInputData(input=given, instructions="Add."), agent, None)
        fitted = await fit(data)
        assert fitted.instructions == "Add."
        # The body ends with the current turn (the agent policy may open with a status note).
        tail = [dict(i).get("type") for i in fitted.input[-3:]]
        assert tail == ["message", "function_call", "function_call_output"]
        # The runner now saves what the filter already stored: nothing is stored twice.
        await session.add_items([dict(call), dict(output)])
        assert await session.get_items() == [user("add"), call, output]

    run(scenario())


def test_with_redaction_items_come_back_up_to_the_markers(store: ctxlog.Store) -> None:
    session = CtxlogSession("s1", store=store)
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3

    async def scenario() -> List[Any]:
        await session.add_items([user(f"my key is {key}, keep it")])
        return await session.get_items()

    (item,) = run(scenario())
    assert key not in json.dumps(item)
    assert item["role"] == "user" and item["content"].startswith("my key is [redacted:")
    assert item["content"].endswith(", keep it")


PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
    "z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def parts_items() -> List[Item]:
    """Items whose content is a list of parts, and outputs with keys ctxlog does not read."""
    return [
        {"role": "developer", "content": [{"type": "input_text", "text": "Answer briefly."}]},
        {"role": "system", "content": "Plain system text."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is on this walrus chart?"},
                {"type": "input_image", "image_url": PNG, "detail": "low"},
                {"type": "input_file", "file_id": "file-9", "filename": "walrus.pdf"},
            ],
            "type": "message",
        },
        {"type": "function_call", "call_id": "c1", "name": "read_chart", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": "walrus counts by year",
            "id": "fco_1",
            "status": "completed",
            "x_sdk_extra": {"kept": True},
        },
        {"type": "function_call", "call_id": "c2", "name": "read_chart", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "a second chart"}],
        },
        {"role": "user", "content": [{"type": "input_image", "image_url": PNG}]},
    ]


def test_messages_of_parts_and_outputs_with_extra_keys_come_back_as_given(
    store: ctxlog.Store, tmp_path: Path
) -> None:
    items = parts_items()

    async def scenario() -> None:
        reference = SQLiteSession("s1", str(tmp_path / "ref.sqlite"))
        ours = CtxlogSession("s1", store=store)
        sessions: List[Any] = [reference, ours]
        for session in sessions:
            await session.add_items(items[:3])
            await session.add_items(items[3:])
        want = await reference.get_items()
        assert want == items
        assert await ours.get_items() == want
        assert await ours.get_items(limit=3) == want[-3:]
        # pop_item gives the newest item back whole, and it is gone for real.
        assert await ours.pop_item() == items[-1]
        assert await ours.get_items() == items[:-1]
        reference.close()

    run(scenario())
    conv = store.conversation("s1")
    # (The popped message left its tombstone.)
    log = [e for e in conv.log() if e["kind"] != "system"]
    assert [e["kind"] for e in log] == [
        "note", "note", "user", "tool_call", "tool_result", "tool_call", "tool_result",
    ]
    # The events read what the items say; the items are kept beside them (the image's bytes
    # as an artifact: the log shows the URL's head and the reference; the export all of it).
    assert log[2]["text"] == "What is on this walrus chart?"
    assert log[2]["provider_item"]["item"]["content"][1]["image_url"] == "data:image/png;base64,"
    assert [o["at"] for o in log[2]["provider_item"]["offloaded"]] == ["/content/1/image_url"]
    exported = [json.loads(line) for line in conv.export().splitlines()]
    assert exported[2]["provider_item"] == {"format": "openai-responses", "item": items[2]}
    assert "provider_item" not in log[1] or log[1]["provider_item"]["item"] == items[1]
    # In their own format the items are sent as given; in any other, the events' fields.
    body, _ = conv.project_dict(format="openai-responses", policy="turns")
    for item in items[2:7]:
        assert item in body["input"], item
    chat, _ = conv.project_dict(format="openai-chat", policy="turns")
    text = json.dumps(chat)
    assert "walrus counts by year" in text and "fco_1" not in text and "input_image" not in text
    # An export carries them, an import rebuilds them.
    copy = store.conversation("s1-copy")
    copy.import_(conv.export())

    async def read_copy() -> Any:
        return await CtxlogSession("s1-copy", store=store).get_items()

    assert run(read_copy()) == items[:-1]


def image_items() -> List[Item]:
    """A user message with an image given as a ``data:`` URL, and the model's reply."""
    return [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is on this walrus chart?"},
                {"type": "input_image", "image_url": PNG, "detail": "high"},
            ],
            "type": "message",
        },
        {
            "id": "msg_1",
            "content": [{"annotations": [], "text": "A walrus.", "type": "output_text"}],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        },
    ]


@pytest.fixture(params=["files", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A store on each engine: the file store, and PostgreSQL (a throwaway cluster)."""
    if request.param == "files":
        url = str(tmp_path / "store")
    else:
        url = request.getfixturevalue("pg_url")
    with ctxlog.Store(url) as s:
        yield s


def test_an_image_message_is_stored_once_and_reaches_every_format(
    any_store: ctxlog.Store, tmp_path: Path
) -> None:
    store = any_store
    items = image_items()
    png_b64 = PNG.split(",", 1)[1]

    async def scenario() -> List[Any]:
        reference = SQLiteSession("s1", str(tmp_path / "ref.sqlite"))
        ours = CtxlogSession("s1", store=store)
        sessions: List[Any] = [reference, ours]
        for session in sessions:
            await session.add_items(items)
        want = await reference.get_items()
        reference.close()
        return [want, await ours.get_items()]

    want, got = run(scenario())
    assert want == items and got == want
    conv = store.conversation("s1")
    # Stored once: the event's image part and its item's URL share one artifact.
    assert conv.verify()["artifacts"] == 1
    assert png_b64 not in json.dumps(conv.log())
    # Every format sends the image: Responses the item as given, the others an image part.
    responses, _ = conv.project_dict("And now?", format="openai-responses", policy="turns")
    assert responses["input"][:2] == items
    chat, _ = conv.project_dict("And now?", format="openai-chat", policy="turns")
    user_content = [m for m in chat["messages"] if m["role"] == "user"][0]["content"]
    assert {"type": "image_url", "image_url": {"url": PNG, "detail": "high"}} in user_content
    anthropic, _ = conv.project_dict(
        "And now?", format="anthropic-messages", policy="turns", model="claude-sonnet-4-5"
    )
    blocks = anthropic["messages"][0]["content"]
    assert {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": png_b64},
    } in blocks
    # A Responses list with the image imports and exports byte for byte.
    copy = store.conversation("s1-list")
    copy.import_(json.dumps(items), format="openai-responses")
    listed, _ = copy.project_dict("And now?", format="openai-responses", policy="turns")
    assert listed["input"][:2] == items
    assert copy.verify()["artifacts"] == 1
    again = store.conversation("s1-again")
    again.import_(copy.export())
    assert again.export() == copy.export()
    # Erasing the image's turn erases its bytes.
    conv.erase(seqs=(1, 1))
    assert conv.verify()["artifacts"] == 0

    async def after() -> Any:
        return await CtxlogSession("s1", store=store).get_items()

    assert run(after()) == []


def test_the_filter_sends_a_message_of_parts_as_given(store: ctxlog.Store) -> None:
    from agents.run_config import CallModelData, ModelInputData

    session = CtxlogSession("s1", store=store)
    fit = budget_filter(session=session, max_tokens=4000)
    question: Any = parts_items()[2]

    async def scenario() -> None:
        given: Any = [question]
        data = CallModelData(ModelInputData(input=given, instructions="Look."), Agent(name="a"), None)
        fitted = await fit(data)
        # The model gets the message once, as given (its image included).
        assert [i for i in fitted.input if dict(i).get("role") == "user"] == [question]
        await session.add_items([question])
        assert await session.get_items() == [question]

    run(scenario())


MCP_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("walrus-docs")


@server.tool()
def search_walrus_docs(query: str) -> str:
    """DESCRIPTION"""
    return "walruses: " + query


server.run("stdio")
'''


def test_the_filter_counts_the_tools_of_mcp_servers(store: ctxlog.Store, tmp_path: Path) -> None:
    import sys

    from agents.mcp import MCPServerStdio

    from ctxlog.agents import agent_tool_definitions

    # A tool whose definition alone is about a third of the budget: left uncounted, the
    # history the filter packs would push the request over.
    description = "Searches the walrus documentation by keyword. " * 120
    script = tmp_path / "walrus_docs_server.py"
    script.write_text(MCP_SERVER.replace("DESCRIPTION", description))
    budget = 3500
    runs = 6
    model = build_checker(runs)
    session = CtxlogSession("mcp", store=store)
    config = RunConfig(call_model_input_filter=budget_filter(session=session, max_tokens=budget))

    async def scenario() -> None:
        server = MCPServerStdio(
            params={"command": sys.executable, "args": [str(script)]},
            cache_tools_list=True,
            client_session_timeout_seconds=30,
        )
        async with server:
            agent = Agent(
                name="ops", instructions="Check builds.", model=model, tools=[read_log],
                mcp_servers=[server],
            )
            names = [t["name"] for t in await agent_tool_definitions(agent)]
            assert names == ["read_log", "search_walrus_docs"]
            for i in range(runs):
                await Runner.run(agent, f"check build {i}", session=session, run_config=config)

    run(scenario())
    model.assert_complete()
    for call in model.calls:
        tools = Converter.convert_tools(call.tools, call.handoffs).tools
        assert "search_walrus_docs" in [dict(t)["name"] for t in tools]
        tokens = sent_tokens(store, call)
        assert tokens <= budget, tokens

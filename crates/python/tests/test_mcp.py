"""The archive over the Model Context Protocol (docs/design.md#i7-mcp), driven by the official
MCP Python SDK as the client: `ctxlog mcp` over stdio, and the `/mcp` route of `ctxlog serve`
with tokens and tenants.

The tools answer what the command line answers for the same store (`ctxlog list --json`,
`ctxlog recall`, `ctxlog log --json`), because both call the same operations; a request the
store refuses is a tool error (`isError`, `CLASS: MESSAGE`, no data), an unknown method a
JSON-RPC error; stdout carries protocol messages only. Both protocol generations connect: the
`initialize` handshake (`mode="legacy"`) and the stateless `server/discover` (`"auto"`)."""

import asyncio
import json
import re
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from conftest import cli_binary

ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789ab"
TOOLS = ["list_conversations", "recall", "read"]


def cli(root: Path, *args: str, stdin: Optional[str] = None) -> str:
    """Runs `ctxlog --root ROOT ARGS…` and returns its stdout (it must succeed)."""
    out = subprocess.run(
        [str(cli_binary()), "--root", str(root), *args],
        input=stdin, capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def commit(root: Path, conv: str, user: str, assistant: str) -> None:
    cli(root, "commit", conv, stdin=json.dumps({"user": user, "assistant": assistant}))


def seed(root: Path) -> None:
    for i in range(6):
        commit(root, "chat1", f"question {i} about the deploy key", f"answer {i}: vault ops/{i}")
    commit(root, "notes", "what did we pick for the cache?", "redis, with a 5 minute ttl")


def stdio(root: Path, mode: str = "legacy") -> Client:
    params = StdioServerParameters(command=str(cli_binary()), args=["--root", str(root), "mcp"])
    return Client(params, mode=mode)


def structured(result: CallToolResult) -> Dict[str, Any]:
    assert result.is_error is False, text(result)
    assert isinstance(result.structured_content, dict)
    # The text block is the same JSON, for hosts that read text only.
    assert json.loads(text(result)) == result.structured_content
    return result.structured_content


def text(result: CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return result.content[0].text


def tool_error(result: CallToolResult) -> str:
    assert result.is_error is True
    assert result.structured_content is None
    return text(result)


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    seed(root)
    return root


# ------------------------------------------------------------------------------------------
# stdio


def test_handshake_and_tools_over_stdio(seeded: Path) -> None:
    async def run() -> None:
        async with stdio(seeded) as client:
            assert client.protocol_version == "2025-11-25"
            assert client.server_info is not None and client.server_info.name == "ctxlog"
            assert client.server_capabilities.tools is not None
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == TOOLS
            for tool in tools:
                assert tool.input_schema["type"] == "object"
                assert tool.output_schema is not None and tool.output_schema["type"] == "object"
                assert tool.annotations is not None and tool.annotations.read_only_hint is True

    asyncio.run(run())


def test_discover_generation_connects_without_initialize(seeded: Path) -> None:
    async def run() -> None:
        async with stdio(seeded, mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            listed = structured(await client.call_tool("list_conversations", {}))
            assert {c["name"] for c in listed["conversations"]} == {"chat1", "notes"}

    asyncio.run(run())


def test_results_equal_the_cli(seeded: Path) -> None:
    cli_list = json.loads(cli(seeded, "list", "--json"))
    cli_search = json.loads(cli(seeded, "recall", "chat1", "deploy key", "--limit", "3"))
    cli_next = json.loads(
        cli(seeded, "recall", "chat1", "deploy key", "--limit", "3", "--offset", "3")
    )
    cli_seq = json.loads(cli(seeded, "recall", "chat1", "--seq", "4"))
    cli_log = [json.loads(line) for line in cli(seeded, "log", "chat1", "--json").splitlines()]

    async def run() -> None:
        async with stdio(seeded) as client:
            assert structured(await client.call_tool("list_conversations", {})) == cli_list
            search = structured(await client.call_tool(
                "recall", {"conversation": "chat1", "query": "deploy key", "limit": 3}))
            assert search == cli_search and len(search["hits"]) == 3
            assert search["next_offset"] == 3
            following = structured(await client.call_tool(
                "recall", {"conversation": "chat1", "query": "deploy key", "limit": 3, "offset": 3}))
            assert following == cli_next
            by_seq = structured(await client.call_tool("recall", {"conversation": "chat1", "seq": 4}))
            assert by_seq == cli_seq and by_seq["hits"][0]["seq"] == 4
            read = structured(await client.call_tool(
                "read", {"conversation": "chat1", "from_seq": 1, "to_seq": 12}))
            assert read == {"last_seq": 12, "events": cli_log}
            part = structured(await client.call_tool(
                "read", {"conversation": "chat1", "from_seq": 5, "to_seq": 100}))
            assert part["events"] == cli_log[4:]

    asyncio.run(run())


ERRORS: List[Tuple[str, Dict[str, Any], str, str]] = [
    ("read", {"conversation": "nope", "from_seq": 1, "to_seq": 5}, "not_found", 'no conversation "nope"'),
    ("recall", {"conversation": "nope", "query": "x"}, "not_found", 'no conversation "nope"'),
    ("read", {"conversation": "../x", "from_seq": 1, "to_seq": 5}, "usage", "invalid conversation name"),
    ("recall", {"conversation": "../x"}, "usage", "invalid conversation name"),
    ("read", {"conversation": "chat1", "from_seq": 1, "to_seq": 20000}, "usage", "over the cap of 10000"),
    ("read", {"conversation": "chat1", "from_seq": 9, "to_seq": 3}, "usage", "before from_seq"),
    ("read", {"conversation": "chat1", "from_seq": 0, "to_seq": 3}, "usage", "seqs start at 1"),
    ("read", {"conversation": "chat1", "from_seq": 1}, "usage", "missing field `to_seq`"),
    ("recall", {"conversation": "chat1", "limit": 51}, "usage", "limit"),
    ("recall", {"conversation": "chat1", "colour": "red"}, "usage", "unknown field `colour`"),
    ("list_conversations", {"all": True}, "usage", "unknown field `all`"),
]


def test_refusals_are_tool_errors(seeded: Path) -> None:
    async def run() -> None:
        async with stdio(seeded) as client:
            for name, arguments, cls, words in ERRORS:
                message = tool_error(await client.call_tool(name, arguments))
                assert message.startswith(f"{cls}: "), (name, arguments, message)
                assert words in message, (name, arguments, message)
            # The session is still up after every refusal.
            assert structured(await client.call_tool("list_conversations", {}))["conversations"]

    asyncio.run(run())


def test_a_damaged_ledger_serves_no_data(seeded: Path) -> None:
    log = seeded / "chat1" / "ledger.log"
    data = bytearray(log.read_bytes())
    data[data.index(b"question 1 about")] ^= 0x01
    log.write_bytes(bytes(data))

    async def run() -> None:
        async with stdio(seeded) as client:
            damaged = tool_error(await client.call_tool(
                "read", {"conversation": "chat1", "from_seq": 1, "to_seq": 12}))
            assert damaged.startswith("corrupt: ") and "seq 3" in damaged, damaged
            assert "question" not in damaged
            # The untouched records before it, and the other conversation, still read.
            before = structured(await client.call_tool(
                "read", {"conversation": "chat1", "from_seq": 1, "to_seq": 2}))
            assert [e["seq"] for e in before["events"]] == [1, 2]
            other = structured(await client.call_tool(
                "read", {"conversation": "notes", "from_seq": 1, "to_seq": 2}))
            assert len(other["events"]) == 2

    asyncio.run(run())


def test_unknown_methods_get_a_json_rpc_error_and_stdout_is_protocol_only(seeded: Path) -> None:
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "ctxlog/not-a-method", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "no_such_tool", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "read", "arguments": {"conversation": "nope", "from_seq": 1, "to_seq": 1}}},
        {"jsonrpc": "2.0", "id": 5, "method": "ping"},
    ]
    proc = subprocess.Popen(
        [str(cli_binary()), "--root", str(seeded), "mcp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    for message in messages:
        proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    answers: Dict[int, Dict[str, Any]] = {}
    while len(answers) < 5:
        line = proc.stdout.readline()
        assert line, "ctxlog mcp closed stdout early"
        reply = json.loads(line)
        assert reply["jsonrpc"] == "2.0" and "id" in reply, line
        answers[reply["id"]] = reply
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    rest = proc.stdout.read()
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in rest.splitlines())
    assert answers[1]["result"]["protocolVersion"] == "2025-06-18"
    assert answers[2]["error"]["code"] == -32601
    assert answers[3]["error"]["code"] == -32602
    assert "no_such_tool" in answers[3]["error"]["message"]
    assert answers[4]["result"]["isError"] is True
    assert answers[5]["result"] == {}


def test_a_commit_while_serving_is_seen_by_the_next_call(seeded: Path) -> None:
    async def run() -> None:
        async with stdio(seeded) as client:
            first = structured(await client.call_tool("list_conversations", {}))
            assert "later" not in {c["name"] for c in first["conversations"]}
            commit(seeded, "later", "a fresh question about zebras", "zebras are striped")
            commit(seeded, "chat1", "one more about the deploy key", "still in vault")
            listed = structured(await client.call_tool("list_conversations", {}))
            assert "later" in {c["name"] for c in listed["conversations"]}
            found = structured(await client.call_tool(
                "recall", {"conversation": "later", "query": "zebras"}))
            assert found["hits"] and all(h["text"] for h in found["hits"])
            read = structured(await client.call_tool(
                "read", {"conversation": "chat1", "from_seq": 13, "to_seq": 14}))
            assert read["last_seq"] == 14
            assert [e["text"] for e in read["events"]] == [
                "one more about the deploy key", "still in vault"]

    asyncio.run(run())


def test_concurrent_calls_in_one_session(seeded: Path) -> None:
    cli_log = [json.loads(line) for line in cli(seeded, "log", "chat1", "--json").splitlines()]

    async def run() -> None:
        async with stdio(seeded) as client:
            calls = []
            for i in range(12):
                seq = i + 1
                calls.append(client.call_tool(
                    "read", {"conversation": "chat1", "from_seq": seq, "to_seq": seq}))
                calls.append(client.call_tool(
                    "recall", {"conversation": "chat1", "query": f"answer {i % 6}", "limit": 1}))
            results = await asyncio.gather(*calls)
            for i in range(12):
                assert structured(results[2 * i])["events"] == [cli_log[i]]
                hit = structured(results[2 * i + 1])["hits"][0]
                assert f"answer {i % 6}" in hit["text"]

    asyncio.run(run())


# ------------------------------------------------------------------------------------------
# streamable HTTP: /mcp on ctxlog serve, with tokens and tenants


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[str, Path]]:
    """`ctxlog serve` with two tenants (alice, bob); alice has one conversation."""
    root = tmp_path_factory.mktemp("served")
    tokens = root.parent / "tokens"
    tokens.write_text(f"{ALICE} alice\n{BOB} bob\n")
    proc = subprocess.Popen(
        [str(cli_binary()), "--root", str(root), "serve", "--addr", "127.0.0.1:0",
         "--tokens", str(tokens)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    assert proc.stderr is not None
    addr = None
    for line in proc.stderr:
        found = re.search(r"listening on http://([0-9.:]+)/", line)
        if found:
            addr = found.group(1)
            break
    assert addr, "ctxlog serve did not say where it listens"
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    base = f"http://{addr}"
    for i in range(3):
        body = json.dumps({"user": f"alice asks {i} about the deploy key", "assistant": f"reply {i}"})
        answer = httpx2.post(f"{base}/v1/conversations/chat1/commits", content=body,
                             headers={"Authorization": f"Bearer {ALICE}",
                                      "Content-Type": "application/json"})
        assert answer.status_code == 200, answer.text
    try:
        yield base, root
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def over_http(base: str, token: Optional[str], mode: str = "legacy") -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    transport = streamable_http_client(f"{base}/mcp", http_client=http)
    return Client(transport, mode=mode)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_http_tenants_see_only_their_own(served: Tuple[str, Path], mode: str) -> None:
    base, root = served

    async def run() -> None:
        async with over_http(base, ALICE, mode) as alice:
            assert alice.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            assert [t.name for t in (await alice.list_tools()).tools] == TOOLS
            listed = structured(await alice.call_tool("list_conversations", {}))
            assert [c["name"] for c in listed["conversations"]] == ["chat1"]
            hits = structured(await alice.call_tool(
                "recall", {"conversation": "chat1", "query": "deploy key"}))["hits"]
            assert {h["seq"] for h in hits} >= {1, 3, 5}
            read = structured(await alice.call_tool(
                "read", {"conversation": "chat1", "from_seq": 1, "to_seq": 6}))
            assert [e["seq"] for e in read["events"]] == [1, 2, 3, 4, 5, 6]
            missing = tool_error(await alice.call_tool(
                "read", {"conversation": "nope", "from_seq": 1, "to_seq": 1}))
            assert missing.startswith("not_found: ") and str(root) not in missing
        async with over_http(base, BOB, mode) as bob:
            assert structured(await bob.call_tool("list_conversations", {})) == {"conversations": []}
            calls: List[Tuple[str, Dict[str, Any]]] = [
                ("read", {"conversation": "chat1", "from_seq": 1, "to_seq": 6}),
                ("recall", {"conversation": "chat1", "query": "deploy key"}),
            ]
            for name, arguments in calls:
                refused = tool_error(await bob.call_tool(name, arguments))
                assert refused.startswith("not_found: ") and "alice" not in refused
                assert "deploy" not in refused

    asyncio.run(run())


def test_http_without_a_valid_token_is_refused(served: Tuple[str, Path]) -> None:
    base, _ = served
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}
    for headers in [{}, {"Authorization": "Bearer not-a-known-token-at-all"}]:
        answer = httpx2.post(f"{base}/mcp", json=initialize, headers={
            **headers, "Accept": "application/json, text/event-stream"})
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["class"] == "unauthorized"

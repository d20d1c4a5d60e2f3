"""One answer per request: the same bad request, sent through the command line, the HTTP
server, the Python package and (for the requests its read-only tools can make) the MCP server,
gets the same error class and the same message from all of them, because each rule lives once,
in the operations layer. A front end may add its own
remedy after the message (the CLI's hint), and the server keeps store paths out of its
messages; the core, the operation's own words, is the same.

Each case states the request once per front end (the way that front end spells it) and the
class all must answer with."""

import asyncio
import json
import re
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import TextContent

import ctxlog
from conftest import cli_binary

CONV = "chat"
# Far over the tombstone's reason limit (1,024 bytes).
LONG_REASON = "r" * 4096


@dataclass
class Case:
    name: str
    cls: str
    cli: List[str]
    http: Tuple[str, str, Optional[Dict[str, Any]]]
    py: Callable[[ctxlog.Store], object]
    stdin: bytes = b""
    # The MCP tool and its arguments, for requests the MCP tools can make.
    mcp: Optional[Tuple[str, Dict[str, Any]]] = None


def chat(store: ctxlog.Store) -> ctxlog.Conversation:
    return store.conversation(CONV)


def project(**options: Any) -> Tuple[str, str, Dict[str, Any]]:
    return ("POST", f"/v1/conversations/{CONV}/projection", {"input": "hi", **options})


CASES = [
    Case("project: zero byte budget", "usage",
         ["project", CONV, "--input", "hi", "--max-bytes", "0"],
         project(max_bytes=0), lambda s: chat(s).project("hi", max_bytes=0)),
    Case("project: zero token budget", "usage",
         ["project", CONV, "--input", "hi", "--max-tokens", "0"],
         project(max_tokens=0), lambda s: chat(s).project("hi", max_tokens=0)),
    Case("project: output reservation leaves no input", "usage",
         ["project", CONV, "--input", "hi", "--max-tokens", "100", "--reserve-output", "100"],
         project(max_tokens=100, reserve_output=100),
         lambda s: chat(s).project("hi", max_tokens=100, reserve_output=100)),
    Case("project: more recalled pages than the recall limit", "usage",
         ["project", CONV, "--input", "hi", "--recall", "51"],
         project(recall=51), lambda s: chat(s).project("hi", recall=51)),
    Case("project: the mandatory input alone is over budget", "over_budget",
         ["project", CONV, "--input", "a question far longer than ten bytes", "--max-bytes", "10"],
         ("POST", f"/v1/conversations/{CONV}/projection",
          {"input": "a question far longer than ten bytes", "max_bytes": 10}),
         lambda s: chat(s).project("a question far longer than ten bytes", max_bytes=10)),
    Case("recall: limit 0", "usage",
         ["recall", CONV, "zebra", "--limit", "0"],
         ("POST", f"/v1/conversations/{CONV}/recall", {"query": "zebra", "limit": 0}),
         lambda s: chat(s).recall("zebra", limit=0),
         mcp=("recall", {"conversation": CONV, "query": "zebra", "limit": 0})),
    Case("recall: limit over the maximum", "usage",
         ["recall", CONV, "zebra", "--limit", "51"],
         ("POST", f"/v1/conversations/{CONV}/recall", {"query": "zebra", "limit": 51}),
         lambda s: chat(s).recall("zebra", limit=51),
         mcp=("recall", {"conversation": CONV, "query": "zebra", "limit": 51})),
    Case("recall: seq 0", "usage",
         ["recall", CONV, "--seq", "0"],
         ("POST", f"/v1/conversations/{CONV}/recall", {"seq": 0}),
         lambda s: chat(s).recall(seq=0),
         mcp=("recall", {"conversation": CONV, "seq": 0})),
    Case("log: from seq 0", "usage",
         ["log", CONV, "--from", "0"],
         ("GET", f"/v1/conversations/{CONV}/events?from=0", None),
         lambda s: chat(s).log(start=0),
         mcp=("read", {"conversation": CONV, "from_seq": 0, "to_seq": 2})),
    Case("erase: a range starting at seq 0", "usage",
         ["erase", CONV, "--seqs", "0-2"],
         ("POST", f"/v1/conversations/{CONV}/erase", {"target": {"seqs": {"from": 0, "to": 2}}}),
         lambda s: chat(s).erase(seqs=(0, 2))),
    Case("erase: a reversed range", "usage",
         ["erase", CONV, "--seqs", "5-3"],
         ("POST", f"/v1/conversations/{CONV}/erase", {"target": {"seqs": {"from": 5, "to": 3}}}),
         lambda s: chat(s).erase(seqs=(5, 3))),
    Case("erase: a range past the last seq", "usage",
         ["erase", CONV, "--seqs", "9000-9999"],
         ("POST", f"/v1/conversations/{CONV}/erase",
          {"target": {"seqs": {"from": 9000, "to": 9999}}}),
         lambda s: chat(s).erase(seqs=(9000, 9999))),
    Case("retract: more events than the conversation holds", "usage",
         ["erase", CONV, "--last", "9000"],
         ("POST", f"/v1/conversations/{CONV}/erase", {"target": {"last": {"events": 9000}}}),
         lambda s: chat(s).retract(9000)),
    Case("retract: no events", "usage",
         ["erase", CONV, "--last", "0"],
         ("POST", f"/v1/conversations/{CONV}/erase", {"target": {"last": {"events": 0}}}),
         lambda s: chat(s).retract(0)),
    Case("erase: a reason over the limit", "usage",
         ["erase", CONV, "--seqs", "1-2", "--reason", LONG_REASON],
         ("POST", f"/v1/conversations/{CONV}/erase",
          {"target": {"seqs": {"from": 1, "to": 2}}, "reason": LONG_REASON}),
         lambda s: chat(s).erase(seqs=(1, 2), reason=LONG_REASON)),
    Case("erase: a commit id no commit carries", "usage",
         ["erase", CONV, "--turn", "nope"],
         ("POST", f"/v1/conversations/{CONV}/erase", {"target": {"commit": {"id": "nope"}}}),
         lambda s: chat(s).erase(commit_id="nope")),
    Case("name: not allowed characters", "usage",
         ["log", "bad.name"],
         ("GET", "/v1/conversations/bad.name/events", None),
         lambda s: s.conversation("bad.name").log(),
         mcp=("read", {"conversation": "bad.name", "from_seq": 1, "to_seq": 2})),
    Case("name: no such conversation", "not_found",
         ["log", "nosuch"],
         ("GET", "/v1/conversations/nosuch/events", None),
         lambda s: s.conversation("nosuch").log(),
         mcp=("read", {"conversation": "nosuch", "from_seq": 1, "to_seq": 2})),
    Case("commit: an unknown event kind", "bad_input",
         ["commit", CONV],
         ("POST", f"/v1/conversations/{CONV}/commits",
          {"events": [{"kind": "bogus", "text": "x"}]}),
         lambda s: chat(s).commit(events=[{"kind": "bogus", "text": "x"}]),
         stdin=b'{"events":[{"kind":"bogus","text":"x"}]}'),
    Case("commit: a tool result answering no call", "bad_input",
         ["commit", CONV],
         ("POST", f"/v1/conversations/{CONV}/commits",
          {"events": [{"kind": "user", "text": "x"},
                      {"kind": "tool_result", "call_id": "c9", "tool": "sh", "status": "ok",
                       "text": "y"}]}),
         lambda s: chat(s).commit(events=[
             {"kind": "user", "text": "x"},
             {"kind": "tool_result", "call_id": "c9", "tool": "sh", "status": "ok", "text": "y"},
         ]),
         stdin=(b'{"events":[{"kind":"user","text":"x"},{"kind":"tool_result","call_id":"c9",'
                b'"tool":"sh","status":"ok","text":"y"}]}')),
]


def seed(root: Path) -> None:
    with ctxlog.Store(root) as store:
        for i in range(3):
            chat(store).commit(user=f"the zebra code is ZX-{i}", assistant="Noted.")


def core(message: str) -> str:
    """The operation's own words: the message without a store path (`under <root>`) and
    without a remedy a front end appends after `; `."""
    message = re.sub(r" under [^;]+", "", message)
    return message.split("; ")[0]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("served")
    seed(root)
    proc = subprocess.Popen(
        [str(cli_binary()), "--root", str(root), "serve", "--addr", "127.0.0.1:0"],
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
    # Keep draining its log so the server never blocks on a full pipe.
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    try:
        yield f"http://{addr}"
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def via_cli(root: Path, case: Case) -> Tuple[str, str]:
    out = subprocess.run(
        [str(cli_binary()), "--root", str(root), "--json", *case.cli],
        input=case.stdin, capture_output=True, check=False,
    )
    assert out.returncode != 0, f"{case.name}: the CLI accepted it"
    error = json.loads(out.stderr)
    return str(error["error"]), str(error["message"])


def via_http(base: str, case: Case) -> Tuple[str, str]:
    method, path, body = case.http
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=60)
    error = json.loads(raised.value.read())["error"]
    return str(error["class"]), str(error["message"])


def via_python(root: Path, case: Case) -> Tuple[str, str]:
    with ctxlog.Store(root) as store:
        with pytest.raises(ctxlog.Error) as raised:
            case.py(store)
    return str(getattr(raised.value, "error_class")), str(raised.value)


def via_mcp(root: Path, case: Case) -> Tuple[str, str]:
    """`ctxlog mcp` over stdio, driven by the official MCP client: a refused request is a
    tool error whose one text block reads `CLASS: MESSAGE`."""
    assert case.mcp is not None
    tool, arguments = case.mcp
    params = StdioServerParameters(command=str(cli_binary()), args=["--root", str(root), "mcp"])

    async def call() -> str:
        async with Client(params, mode="legacy") as client:
            result = await client.call_tool(tool, arguments)
        assert result.is_error is True, f"{case.name}: the MCP tool accepted it"
        [block] = result.content
        assert isinstance(block, TextContent)
        return block.text

    cls, _, message = asyncio.run(call()).partition(": ")
    return cls, message


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_one_answer_per_request(case: Case, server: str, tmp_path: Path) -> None:
    root = tmp_path / "store"
    seed(root)
    answers = {
        "cli": via_cli(root, case),
        "http": via_http(server, case),
        "python": via_python(root, case),
    }
    if case.mcp is not None:
        answers["mcp"] = via_mcp(root, case)
    classes = {front: cls for front, (cls, _) in answers.items()}
    assert set(classes.values()) == {case.cls}, classes
    cores = {front: core(message) for front, (_, message) in answers.items()}
    assert len(set(cores.values())) == 1, cores
    assert "/v1/" not in cores["http"] and str(root) not in answers["http"][1]


"""The body Python gets is the body `ctxlog project` prints for the same request, byte for
byte, in both formats and with every option that shapes it."""

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest

import ctxlog
from conftest import cli_binary


def cli(root: Path, *args: str, stdin: bytes = b"") -> bytes:
    out = subprocess.run(
        [str(cli_binary()), "--root", str(root), *args],
        input=stdin,
        capture_output=True,
        check=True,
    )
    return out.stdout


def seed(root: Path) -> None:
    with ctxlog.Store(root) as store:
        chat = store.conversation("parity")
        chat.commit(user="My project code is ZX-81 — «ünïcode» 😀", assistant='Noted "ZX-81".')
        for i in range(30):
            chat.commit(user=f"question {i} about the weather", assistant=f"answer {i}\nline two")
        chat.commit(
            events=[
                {"kind": "user", "text": "List the files"},
                {"kind": "tool_call", "call_id": "c1", "tool": "shell", "arguments": {"cmd": "ls"}},
                {"kind": "tool_result", "call_id": "c1", "tool": "shell", "status": "ok",
                 "exit_code": 0, "text": "a.txt b.txt"},
            ]
        )


CASES: List[Dict[str, Any]] = [
    {"max_bytes": 800},
    {"max_bytes": 8192, "notice": True, "system": "Be brief.", "model": "my-model"},
    {"max_tokens": 900, "reserve_output": 200, "tokenizer": "cl100k"},
    {"format": "anthropic-messages", "max_bytes": 1500, "recall": 2},
    {"format": "anthropic-messages", "max_tokens": 5000, "policy": "agent", "recall_tool": True},
    {"max_bytes": 3000, "tools": [{"type": "function", "function": {"name": "shell"}}]},
]


def flags(options: Dict[str, Any], tools_file: Path) -> List[str]:
    out: List[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if key == "tools":
            tools_file.write_text(json.dumps(value))
            out += [flag, str(tools_file)]
        elif value is True:
            out.append(flag)
        else:
            out += [flag, str(value)]
    return out


@pytest.mark.parametrize("options", CASES, ids=lambda o: ",".join(o))
def test_body_equals_the_cli_byte_for_byte(tmp_path: Path, options: Dict[str, Any]) -> None:
    root = tmp_path / "store"
    seed(root)
    question = "What is my project code?"
    expected = cli(
        root, "project", "parity", "--input", question,
        *flags(options, tmp_path / "tools.json"),
    )
    with ctxlog.Store(root) as store:
        body, report = store.conversation("parity").project(input=question, **options)
    assert body == expected
    assert report["bytes"] == len(body)

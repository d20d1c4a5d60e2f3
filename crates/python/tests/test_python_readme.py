"""Every Python code block of crates/python/README.md runs, in a fresh directory: the
OpenAI-SDK path against a stand-in client, then the three ways in (plain, Agents SDK,
LangChain) as written."""

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest

from conftest import REPO

README = REPO / "crates" / "python" / "README.md"


def blocks() -> List[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


class StandInClient:
    """What the first block needs of `openai.OpenAI()`: it answers from the body it gets."""

    def __init__(self) -> None:
        self.bodies: List[Dict[str, Any]] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **body: Any) -> Any:
        self.bodies.append(body)
        message = SimpleNamespace(content="Your code is ZX-81.")
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


def test_the_readme_opens_with_the_three_ways_in() -> None:
    assert len(blocks()) >= 4
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "`pip install ctxlog` installs another project" in text


@pytest.mark.parametrize("index", range(4))
def test_each_block_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agents = pytest.importorskip("agents")
    pytest.importorskip("langchain_core")
    agents.set_tracing_disabled(True)
    monkeypatch.chdir(tmp_path)
    client = StandInClient()
    namespace: Dict[str, Any] = {"client": client}
    exec(compile(blocks()[index], f"README block {index}", "exec"), namespace)
    if index == 0:
        assert client.bodies and client.bodies[0]["messages"][-1]["content"] == "What is my code?"
        log = namespace["chat"].log()
        assert [e["kind"] for e in log] == ["user", "assistant"]

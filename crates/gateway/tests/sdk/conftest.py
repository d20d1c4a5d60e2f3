"""Fixtures of the gateway's SDK tests: the stand-in provider, and a `ctxlog gateway`
process relaying to it over loopback."""

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from standin import StandIn  # noqa: E402

REPO = Path(__file__).resolve().parents[4]

#: The window every test gives the gateway (X-Ctxlog-Max-Tokens): small enough that a tool
#: loop of 12 steps with 8 KB outputs must be cut to fit.
WINDOW = 9000


def ctxlog_bin() -> Path:
    """$CTXLOG_BIN (scripts/check-python sets it), else the debug build."""
    given = os.environ.get("CTXLOG_BIN")
    if given:
        return Path(given)
    binary = REPO / "target" / "debug" / "ctxlog"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "ctxlog-cli"], cwd=REPO, check=True)
    return binary


@pytest.fixture
def standin() -> Iterator[StandIn]:
    provider = StandIn(ctxlog_bin(), WINDOW)
    yield provider
    provider.close()
    assert provider.problems == [], provider.problems


class Gateway:
    """A running `ctxlog gateway` over a store directory."""

    def __init__(self, root: Path, upstream_port: int, options: tuple[str, ...] = ()) -> None:
        self.root = root
        self.upstream_port = upstream_port
        self.options = options
        self.start()

    def start(self) -> None:
        base = f"http://127.0.0.1:{self.upstream_port}"
        self.process = subprocess.Popen(
            [str(ctxlog_bin()), "--root", str(self.root), "gateway", "--addr", "127.0.0.1:0",
             "--openai-upstream", f"{base}/v1", "--anthropic-upstream", base,
             "--upstream-timeout", "5", *self.options],
            stderr=subprocess.PIPE,
            env={**os.environ, "NO_COLOR": "1"},
        )
        assert self.process.stderr is not None
        line = self.process.stderr.readline().decode()
        found = re.search(r"listening on http://([0-9.:]+)/", line)
        assert found, line
        self.url = f"http://{found.group(1)}"

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)

    def restart(self) -> None:
        """A new gateway process on the same store (on a new port)."""
        self.close()
        self.start()

    def metrics(self) -> str:
        """The text of GET /metrics."""
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/metrics") as response:
            return str(response.read().decode())

    def export(self, conversation: str) -> list[dict[str, object]]:
        """The conversation's events (artifacts inlined) in the only tenant of the store."""
        import json

        tenants = sorted((self.root / ".tenants").iterdir())
        assert len(tenants) == 1, tenants
        out = subprocess.run(
            [str(ctxlog_bin()), "--root", str(tenants[0]), "export", conversation],
            capture_output=True, check=True,
        )
        return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.fixture
def gateway(tmp_path: Path, standin: StandIn) -> Iterator[Gateway]:
    running = Gateway(tmp_path / "store", standin.port)
    yield running
    running.close()


@pytest.fixture
def recall_gateway(tmp_path: Path, standin: StandIn) -> Iterator[Gateway]:
    """A gateway that offers the recall tool and answers the model's recall calls."""
    running = Gateway(tmp_path / "store", standin.port, ("--recall-tool", "--recall-calls", "2"))
    yield running
    running.close()


@pytest.fixture
def configured_gateway(tmp_path: Path, standin: StandIn) -> Iterator[Gateway]:
    """A gateway with the window of its test model configured (no header needed) and room
    for one conversation's recognition state (a byte bound of 1: only the one in use)."""
    options = ("--model-window", f"test-model={WINDOW}", "--recognition-cache", "1")
    running = Gateway(tmp_path / "store", standin.port, options)
    yield running
    running.close()


@pytest.fixture
def toml_gateway(tmp_path: Path, standin: StandIn) -> Iterator[Gateway]:
    """A gateway whose windows come from the store's ctxlog.toml ([gateway.model_windows]),
    one of them replaced by --model-window (a window of 1 token that would refuse every
    call)."""
    root = tmp_path / "store"
    root.mkdir()
    (root / "ctxlog.toml").write_text(
        f'[gateway.model_windows]\n"test-model" = {WINDOW}\n"test-model-7b" = 1\n'
    )
    running = Gateway(root, standin.port, ("--model-window", f"test-model-7b={WINDOW}"))
    yield running
    running.close()

"""Shared fixtures: a fresh store per test, and the `ctxlog` binary for parity checks."""

import os
import subprocess
from pathlib import Path
from typing import Dict, Iterator

import pytest

import ctxlog

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A store directory that does not exist yet."""
    return tmp_path / "store"


@pytest.fixture
def store(root: Path) -> Iterator[ctxlog.Store]:
    with ctxlog.Store(root) as s:
        yield s


def cli_binary() -> Path:
    """The `ctxlog` binary: $CTXLOG_BIN (scripts/check-python sets it), else a debug build."""
    given = os.environ.get("CTXLOG_BIN")
    if given:
        return Path(given)
    binary = REPO / "target" / "debug" / "ctxlog"
    if not binary.exists():
        subprocess.run(
            ["cargo", "build", "-q", "-p", "ctxlog-cli"], cwd=REPO, check=True
        )
    return binary


def ledger_files(root: Path) -> Dict[str, bytes]:
    """Every file under `root` but the recall index (a disposable cache), with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "recall" not in p.name
    }

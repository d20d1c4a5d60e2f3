"""Shared fixtures: a fresh store per test, the `ctxlog` binary for parity checks, and a
throwaway PostgreSQL server for the tests of the PostgreSQL backend."""

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, NoReturn, Optional

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


def pg_unavailable(why: str) -> NoReturn:
    """Skips the PostgreSQL tests (with why), or fails them under CI: CI runs them."""
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL tests cannot run under CI: {why}")
    pytest.skip(f"PostgreSQL not available: {why}")


def pg_bin() -> Optional[Path]:
    """The directory holding initdb and pg_ctl, found as the Rust test harness finds it
    (crates/ctxlog/tests/common/pg.rs): $PG_BIN, the newest /usr/lib/postgresql/*/bin, $PATH."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A PostgreSQL server URL: $CTXLOG_TEST_PG_URL when given, else a throwaway cluster
    started like the Rust harness's (initdb into a temporary directory, pg_ctl on a free
    loopback port, as the postgres OS user when running as root), stopped at the end."""
    given = os.environ.get("CTXLOG_TEST_PG_URL")
    if given:
        yield given
        return
    bin_dir = pg_bin()
    if bin_dir is None:
        pg_unavailable("no initdb found (install the postgresql package, or set PG_BIN)")
    root = Path(tempfile.mkdtemp(prefix="ctxlog-pg-"))
    prefix: List[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]

    def run(tool: str, *args: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run(
            [*prefix, str(bin_dir / tool), *args], cwd=root, capture_output=True, text=True
        )

    data = str(root / "data")
    done = run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pg_unavailable(f"initdb failed: {done.stderr.strip()}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1"
    log = str(root / "server.log")
    started = run("pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "-o", opts, "start")
    assert started.returncode == 0, started.stderr
    try:
        yield f"postgres://postgres@127.0.0.1:{port}/postgres"
    finally:
        run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str, tmp_path: Path) -> str:
    """A store URL on the server: a schema of its own per test, recall caches in tmp_path."""
    schema = "py_" + uuid.uuid4().hex[:16]
    sep = "&" if "?" in pg_server else "?"
    return f"{pg_server}{sep}schema={schema}&cache_dir={tmp_path / 'recall-cache'}"

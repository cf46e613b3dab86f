"""Shared pytest fixtures.

Tests run from the repository root (`python -m pytest tests/...`); the root is put on sys.path
as well so that `pytest` alone finds the `evaluators` package.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import streamlit as st

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from openai_server import OpenAIServer  # noqa: E402  (tests/ is on sys.path under pytest's default import mode)

from tests.seed import seed  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def derived_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The files the dashboard derives from its database (reads.cache_dir) go to the session's temporary
    folder, for the servers the tests start too, not to the machine's."""
    folder = tmp_path_factory.mktemp("derived")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAG_TRIAGE_CACHE", str(folder))
        yield folder


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started loopback OpenAI-protocol server (format-aware replies, no faults), stopped afterwards.

    A responder that raised is answered with a 500, which a judge may retry past; fail the test
    here so such a bug is never mistaken for an injected fault.
    """
    with OpenAIServer() as server:
        yield server
    assert not server.errors, f"the test server's responder raised: {server.errors!r}"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeded dashboard database (tests/seed.py), built once per test module."""
    return seed(tmp_path_factory.mktemp("db") / "seed.duckdb")


@pytest.fixture
def db(seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private copy of the seeded database, configured as the app's DB, with a cold cache."""
    path = tmp_path / "triage.duckdb"
    shutil.copy(seeded, path)
    yield from app_db(path, monkeypatch)


def app_db(path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Serve `path` as the app's database (writable) with a cold cache, and no derived file, for one test:
    `yield from` it."""
    monkeypatch.setenv("RAG_TRIAGE_DB", str(path))
    monkeypatch.setenv("RAG_TRIAGE_CACHE", str(path.parent / "derived"))
    monkeypatch.delenv("RAG_TRIAGE_READ_ONLY", raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield path
    st.cache_data.clear()
    st.cache_resource.clear()


def hold_write_lock(path: Path, seconds: float) -> subprocess.Popen:
    """Another process that opens the DB read-write (as a running evaluation does) for `seconds`."""
    code = ("import sys, time; from evaluators.storage import store\n"
            "with store.connect(sys.argv[1]):\n    print('locked', flush=True); time.sleep(float(sys.argv[2]))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(seconds)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc

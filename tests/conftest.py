"""Shared pytest fixtures.

Tests run from the repository root (`python -m pytest tests/...`); the root is put on sys.path
as well so that `pytest` alone finds the `evaluators` package.
"""
from __future__ import annotations

import shutil
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
    """Serve `path` as the app's database (writable) with a cold cache for one test: `yield from` it."""
    monkeypatch.setenv("RAG_TRIAGE_DB", str(path))
    monkeypatch.delenv("RAG_TRIAGE_READ_ONLY", raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield path
    st.cache_data.clear()
    st.cache_resource.clear()

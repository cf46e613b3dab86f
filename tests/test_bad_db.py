"""Every dashboard page on every kind of bad database: no exception box, one message that says what
is wrong and what to do."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Callable

import duckdb
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from evaluators.dashboard import ui
from evaluators.storage import health, queries, store, writes
from tests.seed import seed


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _text(path: Path) -> None:
    path.write_text("id,query\n1,what?\n" * 50)


def _sqlite(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (run_id TEXT)")
    con.commit()
    con.close()


def _truncated(path: Path) -> None:
    seed(path.with_suffix(".full"))
    data = path.with_suffix(".full").read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _foreign(path: Path) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE users (id INTEGER, name VARCHAR)")


def _older(path: Path) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for version, sql in enumerate(store.MIGRATIONS[:-1], start=1):
            con.execute(sql)
            con.execute("INSERT INTO schema_version VALUES (?)", [version])


def _newer(path: Path) -> None:
    seed(path)
    with duckdb.connect(str(path)) as con:
        con.execute("INSERT INTO schema_version VALUES (?)", [len(store.MIGRATIONS) + 1])


def _missing_columns(path: Path) -> None:
    seed(path)
    with duckdb.connect(str(path)) as con:
        con.execute("ALTER TABLE runs DROP COLUMN stats")
        con.execute("DROP TABLE triage")


def _folder(path: Path) -> None:
    path.mkdir()


def _absent(path: Path) -> None:
    pass


# kind: (how to make it, the message's words, the alert that carries it)
KINDS: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "empty file": (_empty, "is not a RAG Triage database (an empty file)", "error"),
    "text file": (_text, "is not a RAG Triage database (not a DuckDB file)", "error"),
    "sqlite file": (_sqlite, "is not a RAG Triage database (a SQLite database)", "error"),
    "truncated duckdb": (_truncated, "is a damaged database that DuckDB cannot read", "error"),
    "another app's duckdb": (_foreign, "is not a RAG Triage database (a DuckDB file with other tables: users)",
                             "error"),
    "older schema": (_older, f"was made by an older version of RAG Triage (schema {len(store.MIGRATIONS) - 1}, "
                             f"this version reads {len(store.MIGRATIONS)}): evaluating a file into it upgrades it",
                     "error"),
    "newer schema": (_newer, f"was made by a newer version of RAG Triage (schema {len(store.MIGRATIONS) + 1}",
                     "error"),
    "missing columns and tables": (_missing_columns, "is a RAG Triage database with missing parts (runs.stats, "
                                                     "triage)", "error"),
    "folder": (_folder, "is a folder, not a RAG Triage database", "error"),
    "missing file": (_absent, "No database at", "warning"),
}
APP = str(Path(__file__).resolve().parents[1] / "app.py")
_MANAGER: list[object] = []


def new_app() -> AppTest:
    """An AppTest of the app that reuses the first one's component registry: each new AppTest
    rescans every installed package for components (about 1.5 s), and the app uses none."""
    at = AppTest.from_file(APP, default_timeout=30)
    if _MANAGER:
        at._bidi_component_manager = _MANAGER[0]
    else:
        _MANAGER.append(at._bidi_component_manager)
    return at


READERS = [p.file for k, p in ui.PAGES.items() if k != "evaluate"]


@pytest.fixture(scope="module")
def bad_dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bad")
    paths = {}
    for i, (kind, (make, _, _)) in enumerate(KINDS.items()):
        paths[kind] = folder / f"db{i}.duckdb"
        make(paths[kind])
    return paths


def _open(page: str, db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("RAG_TRIAGE_DB", str(db))
    monkeypatch.delenv("RAG_TRIAGE_READ_ONLY", raising=False)
    at = new_app()
    if page != ui.PAGES["runs"].file:
        at.switch_page(page)
    at.query_params.update({"run": "weak-retriever", "item": "q01", "other": "llm-judge"})
    at.run()
    return at


def _unescape(text: str) -> str:
    return text.replace("\\", "")


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_reading_page_says_what_is_wrong(kind: str, bad_dbs: dict[str, Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _, words, alert = KINDS[kind]
    for page in READERS:
        st.cache_data.clear()
        at = _open(page, bad_dbs[kind], monkeypatch)
        assert not at.exception, (kind, page, [e.value for e in at.exception])
        shown = [_unescape(e.value) for e in getattr(at, alert)]
        assert len(shown) == 1 and words in shown[0], (kind, page, shown)
        assert "\n" not in shown[0]
        assert not at.dataframe and not at.get("plotly_chart"), (kind, page)


@pytest.mark.parametrize("kind", list(KINDS))
def test_evaluate_page_on_a_bad_database(kind: str, bad_dbs: dict[str, Path],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Evaluate may start a missing database and upgrades an older one; anything else stops it."""
    st.cache_data.clear()
    at = _open(ui.PAGES["evaluate"].file, bad_dbs[kind], monkeypatch)
    assert not at.exception, (kind, [e.value for e in at.exception])
    uploader = at.get("file_uploader")
    if kind == "missing file":
        assert uploader and not at.error and not at.warning
    elif kind == "older schema":
        assert uploader and any(KINDS[kind][1] in _unescape(i.value) for i in at.info)
    else:
        assert not uploader and len(at.error) == 1 and KINDS[kind][1] in _unescape(at.error[0].value)


def test_an_empty_duckdb_file_reads_as_no_runs_yet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "blank.duckdb"
    duckdb.connect(str(path)).close()
    for page in READERS:
        st.cache_data.clear()
        at = _open(page, path, monkeypatch)
        assert not at.exception, (page, [e.value for e in at.exception])
        assert [_unescape(w.value) for w in at.warning] == [
            f"The database {path} is empty: evaluate a file on the Evaluate page or with "
            "`python -m evaluators evaluate`."], page


def test_a_locked_database_says_so_and_offers_a_retry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = seed(tmp_path / "seed.duckdb")
    monkeypatch.setattr(health, "check_database", _busy)
    st.cache_data.clear()
    at = _open(ui.PAGES["run"].file, path, monkeypatch)
    assert not at.exception
    assert len(at.warning) == 1 and "is locked by another process" in at.warning[0].value
    assert [b.label for b in at.button] == ["Retry"] and not at.dataframe


def _busy(path: object, deadline_s: float = 3.0) -> health.Health:
    raise store.StoreBusy(f"{path}: busy")


def test_check_database_reads_a_good_database_as_ok(tmp_path: Path) -> None:
    path = seed(tmp_path / "seed.duckdb")
    assert health.check_database(path) == health.Health("ok", version=len(store.MIGRATIONS))
    copy = tmp_path / "copy.duckdb"
    shutil.copy(path, copy)
    assert health.check_database(copy).state == "ok"


def test_a_database_shrunk_by_a_delete_is_not_read_as_cut_short(tmp_path: Path) -> None:
    path = seed(tmp_path / "seed.duckdb")
    for run in queries.runs.runs(path)["run_id"]:
        writes.delete_run(path, run)
    with duckdb.connect(str(path)) as con:
        con.execute("CHECKPOINT")  # cuts the trailing free blocks off the file
    assert health.check_database(path).state == "ok"

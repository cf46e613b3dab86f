"""The DuckDB store: the only module that imports duckdb.

Connections are short-lived. DuckDB lets one read-write process lock the file, so writers open,
write one batch from DataFrames in a single transaction, and close; readers open read-only.
Both retry lock errors with jitter until a deadline, then raise StoreBusy.

This module holds the connections, the migrations' application and every write; query() and
frame_query() run the named reads of evaluators/storage/queries/. Beside it: schema.py (the
migrations), health.py (what a file is), ownership.py (a run's owner) and wide.py (each run's
per-item score table).
"""
from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Mapping
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

import duckdb
import pandas as pd

from evaluators.core.records import (
    IMPORTED,
    Component,
    Item,
    JudgeCall,
    Label,
    Score,
    Status,
    Verdict,
)
from evaluators.storage.schema import MIGRATIONS
from evaluators.storage.wide import column, count_column, refresh_wide, written_ids

# Replacement scans off: a table missing from the file is an error, not a lookup of a Python
# variable of that name (a missing runs table would find this module's runs() function).
_CONFIG: dict[str, str | bool | int | float | list[str]] = {"autoinstall_known_extensions": False, "autoload_known_extensions": False,
           "python_enable_replacements": False}


class StoreBusy(RuntimeError):
    """Another process holds the DuckDB file past our deadline."""


class StoreMissing(FileNotFoundError):
    """A reader was pointed at a database file that does not exist."""


class NotADatabase(ValueError):
    """The path is not a RAG Triage database: a folder, a file of another format, another app's DuckDB file."""


# DuckDB's base error: what reading a damaged file raises (health.py tells it from a busy file).
Error = duckdb.Error


def _is_busy(exc: Exception) -> bool:
    """Another process holds the file lock, or (in this process) a read-only and a read-write
    connection to one file refuse each other: both pass when the other side closes."""
    text = str(exc).lower()
    return ("lock" in text and ("could not set" in text or "conflicting" in text)) or "different configuration" in text


@contextmanager
def connect(path: str | Path, read_only: bool = False, deadline_s: float = 20.0) -> Iterator[Any]:
    """Open a short-lived connection, retrying DuckDB's file lock with jitter until `deadline_s`."""
    path = str(path)
    if read_only and not Path(path).exists():
        raise StoreMissing(f"{path}: no such database file")
    give_up = time.monotonic() + deadline_s
    delay = 0.02
    while True:
        try:
            con = duckdb.connect(path, read_only=read_only, config=_CONFIG)
            break
        except (duckdb.IOException, duckdb.ConnectionException) as exc:
            if not _is_busy(exc):
                raise
            if time.monotonic() >= give_up:
                raise StoreBusy(f"{path}: busy, another process is writing (gave up after {deadline_s:g} s)") from None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)
    try:
        yield con
    finally:
        con.close()


@contextmanager
def transaction(con: Any) -> Iterator[Any]:
    """BEGIN, then COMMIT, or ROLLBACK on any exception: a write is whole or absent."""
    con.execute("BEGIN")
    try:
        yield con
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def migrate(path: str | Path) -> int:
    """Create or upgrade the schema; returns the schema version."""
    with connect(path) as con:
        con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = con.execute("SELECT max(version) FROM schema_version").fetchone()
        current = row[0] or 0
        for version in range(current + 1, len(MIGRATIONS) + 1):
            with transaction(con):
                had_wide = has_table(con, "run_wide")
                con.execute(MIGRATIONS[version - 1])
                if not had_wide and has_table(con, "run_wide"):  # the runs written before it
                    for (run_id,) in con.execute("SELECT DISTINCT run_id FROM items").fetchall():
                        refresh_wide(con, run_id)
                con.execute("INSERT INTO schema_version VALUES (?)", [version])
        return len(MIGRATIONS)


def has_table(con: Any, table: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ?",
                            [table]).fetchone()[0])


# ---------------------------------------------------------------- writes

def _frame(records: Sequence[Any], columns: list[str]) -> pd.DataFrame:
    # The fields themselves, not asdict(): its recursive deep copy was most of a group commit's CPU.
    frame = pd.DataFrame([[getattr(r, c) for c in columns] for r in records], columns=columns)
    if "status" in frame:
        frame["status"] = frame["status"].map(lambda s: s.value if isinstance(s, Status) else s)
    return frame


def insert(con: Any, table: str, frame: pd.DataFrame) -> None:
    if frame.empty:
        return
    con.register("_batch", frame)
    try:
        if table == "judge_calls":
            # An answered call replaces a failed one under its key (a step asked again); the first answer stays.
            sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in frame.columns if c != "key")
            con.execute(f"""INSERT INTO judge_calls BY NAME SELECT * FROM _batch
                            ON CONFLICT (key) DO UPDATE SET {sets} WHERE judge_calls.reply IS NULL""")
        else:
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _batch")
    finally:
        con.unregister("_batch")


def _calls_frame(calls: Sequence[JudgeCall]) -> pd.DataFrame:
    frame = _frame(calls, [
        "key", "model", "prompt_name", "prompt_hash", "messages", "params", "reply", "status",
        "prompt_tokens", "completion_tokens", "cost", "latency_ms", "error", "endpoint"])
    frame["endpoint"] = frame["endpoint"].astype("object")
    frame["messages"] = frame["messages"].map(lambda m: json.dumps(m, ensure_ascii=False))
    frame["params"] = frame["params"].map(lambda p: json.dumps(p, sort_keys=True))
    frame["cost"] = frame["cost"].astype("float64")
    frame["created_at"] = pd.Timestamp.now(tz="UTC").tz_localize(None)
    # One row per key, an answered one where the batch has both (the upsert cannot see its own rows).
    return frame.sort_values("reply", key=lambda r: r.isna(), kind="stable").drop_duplicates("key")


def _items_frame(run_id: str, items: Sequence[Item]) -> pd.DataFrame:
    return pd.DataFrame({
        "run_id": run_id,
        "item_id": [i.id for i in items],
        "query": [i.query for i in items],
        "sources": [list(i.sources) for i in items],
        "response": [i.response for i in items],
        "reference": [i.reference for i in items],
        "metadata": [json.dumps(i.metadata, ensure_ascii=False, sort_keys=True) for i in items],
        "content_hash": [i.content_hash() for i in items],
    })


def _with_run(run_id: str, frame: pd.DataFrame) -> pd.DataFrame:
    frame.insert(0, "run_id", run_id)
    return frame


def write_batch(
    path: str | Path,
    run_id: str,
    items: Sequence[Item] = (),
    components: Sequence[Component] = (),
    verdicts: Sequence[Verdict] = (),
    scores: Sequence[Score] = (),
    calls: Sequence[JudgeCall] = (),
) -> None:
    """Write finished items with all their intermediates, and judge calls, in ONE transaction.

    An item row is only ever written together with its components, verdicts and scores, so a
    reader sees an item whole or not at all.
    """
    frames = batch_frames(run_id, items, components, verdicts, scores, calls)
    with connect(path) as con:
        with transaction(con):
            for table, frame in frames:
                insert(con, table, frame)
            refresh_wide(con, run_id, written_ids(frames[1:]))


# The tables holding an item's results: a replaced or removed item's rows go from all of them.
ITEM_TABLES = ("items", "components", "verdicts", "scores", "imported_scores", "run_wide")


def batch_frames(run_id: str, items: Sequence[Item], components: Sequence[Component], verdicts: Sequence[Verdict],
                  scores: Sequence[Score], calls: Sequence[JudgeCall]) -> list[tuple[str, pd.DataFrame]]:
    """The tables of one write, judge calls first."""
    frames = [
        ("judge_calls", _calls_frame(calls) if calls else pd.DataFrame()),
        ("components", _with_run(run_id, _frame(components, ["item_id", "kind", "idx", "text", "parent", "call_key"]))),
        ("verdicts", _with_run(run_id, _frame(verdicts, [
            "item_id", "metric", "component_kind", "component_idx", "target", "value", "status",
            "evidence", "call_key", "detail", "p", "p_kind", "tier"]))),
        ("scores", _with_run(run_id, _frame(scores, ["item_id", "metric", "value", "n_scored", "n_total", "status",
                                                     "n_unsure"]))),
        ("imported_scores", imported_frame(run_id, items)),
        ("items", _items_frame(run_id, items)),
    ]
    for _, frame in frames:
        for col in ("parent", "component_idx", "n_scored", "n_total", "n_unsure", "idx"):
            if col in frame:
                frame[col] = frame[col].astype("Int64")
        for col in ("value", "evidence", "p"):
            if col in frame:
                frame[col] = frame[col].astype("float64")
    return frames


FAILED_STATUSES = ("unparsed", "error", "timeout")  # a judge step that produced no verdict


def add_triage(path: str | Path, run_id: str, item_id: str, label: str, component: str,
               note: str, author: str, deadline_s: float = 5.0) -> None:
    """Append one triage note. Raises StoreBusy if the file stays locked past the deadline."""
    with connect(path, deadline_s=deadline_s) as con:
        con.execute("INSERT INTO triage VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
                    [run_id, item_id, label, component, note, author])


def add_labels(path: str | Path, run_id: str, labels: Sequence[Label], deadline_s: float = 20.0) -> None:
    """Append labels to a run in ONE transaction: all of them or, on any error, none.

    Raises StoreBusy if the file stays locked past the deadline.
    """
    frame = _with_run(run_id, _frame(labels, ["item_id", "rule", "metric", "component_idx", "label", "note",
                                             "author", "origin"]))
    frame["component_idx"] = frame["component_idx"].astype("Int64")
    frame["created_at"] = pd.Timestamp.now(tz="UTC").tz_localize(None)
    with connect(path, deadline_s=deadline_s) as con:
        with transaction(con):
            insert(con, "labels", frame)


def delete_run(path: str | Path, run_id: str, deadline_s: float = 20.0) -> dict[str, int]:
    """Delete a run and every row that belongs to it (items, verdicts, scores, triage notes...) in ONE
    transaction; returns the rows deleted per table. Judge calls stay: they are a cache shared by runs.

    Raises StoreMissing for a missing file and KeyError when the run does not exist.
    """
    if not Path(path).exists():
        raise StoreMissing(f"{path}: no such database file")
    with connect(path, deadline_s=deadline_s) as con:
        # Every table with a run_id column, so a table a later migration adds is covered too.
        tables = [t for (t,) in con.execute("""
            SELECT c.table_name FROM information_schema.columns c JOIN information_schema.tables t
              ON t.table_schema = c.table_schema AND t.table_name = c.table_name
            WHERE c.column_name = 'run_id' AND c.table_schema = 'main' AND t.table_type = 'BASE TABLE'
            ORDER BY c.table_name""").fetchall()]
        if "runs" not in tables:
            raise NotADatabase(f"{path}: not a RAG Triage database (no runs table)")
        with transaction(con):
            if con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchone()[0] == 0:
                raise KeyError(run_id)
            counts = {t: con.execute(f'DELETE FROM "{t}" WHERE run_id = ?', [run_id]).fetchone()[0] for t in tables}
    return counts


# ---------------------------------------------------------------- reads

# Opening a DuckDB connection costs about 0.1 s here, more than most dashboard queries, so a page
# reads its cache misses through one connection: reading() shares it within a block, then closes it.
_SHARED: ContextVar[dict[str, Any] | None] = ContextVar("shared_reader", default=None)


@contextmanager
def reading(path: str | Path) -> Iterator[None]:
    """Let the reads of `path` inside this block share one read-only connection, opened on first use."""
    outer = _SHARED.get()
    if outer is not None and outer["path"] == str(path):
        yield
        return
    with ExitStack() as stack:
        token = _SHARED.set({"path": str(path), "con": None, "stack": stack})
        try:
            yield
        finally:
            _SHARED.reset(token)


@contextmanager
def _reader(path: str | Path, deadline_s: float = 10.0) -> Iterator[Any]:
    """A read-only connection to `path`: the one reading() shares inside its block, else a new one."""
    shared = _SHARED.get()
    if shared is not None and shared["path"] == str(path):
        if shared["con"] is None:
            shared["con"] = shared["stack"].enter_context(connect(path, read_only=True, deadline_s=deadline_s))
        yield shared["con"]
        return
    with connect(path, read_only=True, deadline_s=deadline_s) as con:
        yield con


def query(path: str | Path, sql: str, params: Mapping[str, Any] | Sequence[Any] = (),
          deadline_s: float = 10.0, arrow: bool = False) -> pd.DataFrame:
    """Run one read-only query and return a DataFrame; named $params may be given as a dict.

    Inside reading(path) it runs on the block's shared connection. `arrow`: fetched through Arrow (a
    million rows in a tenth of a second, where building Python rows takes seconds); numbers come as
    floats, NULL as NaN or None.
    """
    with _reader(path, deadline_s) as con:
        return _fetch(con, sql, params if isinstance(params, Mapping) else list(params), arrow)


def _fetch(con: Any, sql: str, params: Mapping[str, Any] | list[Any], arrow: bool) -> pd.DataFrame:
    if arrow:
        return con.sql(sql, params=params or None).to_arrow_table().to_pandas()
    return con.execute(sql, params).df()


# In-memory queries over DataFrames (the dashboard's cached run tables): a process-wide in-memory
# DuckDB (no file, so no lock), one cursor per call so sessions on other threads do not share state.
_MEMORY: list[Any] = []
_MEMORY_LOCK = threading.Lock()


class StoredRun(NamedTuple):
    """A run's stored per-item score table (run_wide) in a database file, as a relation frame_query()
    reads where it lies, with a score column and its two count columns for each of these metrics (the
    caller names them all, in order: queries.runs.stored_table())."""

    path: str
    run_id: str
    metrics: tuple[str, ...]


def _stored_view(con: Any, name: str, run: StoredRun) -> None:
    """A temporary view `name` on this connection: the run's rows of run_wide, a NULL column for a
    metric no run has (so the run tables of one view have the same columns)."""
    stored = {d[0] for d in con.execute("SELECT * FROM run_wide LIMIT 0").description}
    cols = ", ".join(c if c.strip('"') in stored else f"NULL::{kind} AS {c}"
                     for m in run.metrics
                     for c, kind in ((column(m), "DOUBLE"), (count_column(m, "scored"), "INTEGER"),
                                     (count_column(m, "unsure"), "INTEGER")))
    literal = "'" + run.run_id.replace("'", "''") + "'"  # a view takes no parameters
    con.execute(f"""CREATE OR REPLACE TEMP VIEW {name} AS SELECT item_id, query, {cols}, n_failed, failed_metrics
                    FROM run_wide WHERE run_id = {literal}""")


def frame_query(sql: str, frames: Mapping[str, pd.DataFrame | StoredRun],
                params: Mapping[str, Any] | Sequence[Any] = (), arrow: bool = False) -> pd.DataFrame:
    """Run SQL over the relations given by name: DataFrames (in memory), or stored run tables, which
    are read in their file (with the DataFrames beside them), never pulled into memory whole.
    `arrow` as for query()."""
    stored = [f for f in frames.values() if isinstance(f, StoredRun)]
    args = params if isinstance(params, Mapping) else list(params)
    if stored:
        with _reader(stored[0].path) as con:
            for name, frame in frames.items():
                if isinstance(frame, StoredRun):
                    _stored_view(con, name, frame)
                else:
                    con.register(name, frame)
            try:
                return _fetch(con, sql, args, arrow)
            finally:
                for name, frame in frames.items():
                    if isinstance(frame, StoredRun):
                        con.execute(f"DROP VIEW IF EXISTS {name}")
                    else:
                        con.unregister(name)
    with _MEMORY_LOCK:
        if not _MEMORY:
            _MEMORY.append(duckdb.connect(":memory:", config=_CONFIG))
        cursor = _MEMORY[0].cursor()
    try:
        for name, frame in frames.items():
            cursor.register(name, frame)
        return _fetch(cursor, sql, args, arrow)
    finally:
        cursor.close()


def write_frames(path: str | Path, frames: Mapping[str, pd.DataFrame]) -> None:
    """Bulk-insert prepared DataFrames ({table: frame}, columns by name) in ONE transaction.

    For generated data (the scale benchmark) where building a record object per row would cost more
    than the insert itself; the engine writes through write_batch().
    """
    with connect(path) as con:
        with transaction(con):
            for table, frame in frames.items():
                if table not in ("runs", "items", "components", "verdicts", "scores", "judge_calls", "triage"):
                    raise ValueError(f"unknown table {table!r}")
                insert(con, table, frame)
            written = [(t, f) for t, f in frames.items() if t in ("items", "verdicts", "scores") and not f.empty]
            for run_id in sorted({r for _, f in written for r in f["run_id"].unique()}):
                refresh_wide(con, run_id, written_ids([(t, f[f["run_id"] == run_id]) for t, f in written]))


def replace_grammar_correctness(path: str | Path, run_id: str, frame: pd.DataFrame) -> None:
    """Replace the run's rows of grammar_correctness with `frame` (columns by name), in one transaction."""
    migrate(path)
    with connect(path) as con:
        with transaction(con):
            con.execute("DELETE FROM grammar_correctness WHERE run_id = ?", [run_id])
            insert(con, "grammar_correctness", frame)


# ---------------------------------------------------------------- imported peer scores

def imported_frame(run_id: str, items: Sequence[Item]) -> pd.DataFrame:
    """The imported_scores rows of these items, from their metadata (records.IMPORTED: {origin: {metric:
    value or None}}); written in the transaction of the items' rows. Values that are not numbers are
    left out: a plain input's own metadata may use the key for something else."""
    rows = []
    for item in items:
        imported = item.metadata.get(IMPORTED)
        for origin, scores in imported.items() if isinstance(imported, dict) else ():
            for metric, value in scores.items() if isinstance(scores, dict) else ():
                if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
                    rows.append((run_id, item.id, str(origin), str(metric), value))
    frame = pd.DataFrame(rows, columns=["run_id", "item_id", "origin", "metric", "value"])
    frame["value"] = frame["value"].astype("float64")
    return frame

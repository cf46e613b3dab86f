"""The DuckDB store: the only module that imports duckdb.

Connections are short-lived. DuckDB lets one read-write process lock the file, so writers open,
write one batch from DataFrames in a single transaction, and close; readers open read-only.
Both retry lock errors with jitter until a deadline, then raise StoreBusy.

This module holds the engine's side: the schema, the writes and the reads the engine and its CLI
need. The dashboard's reads are in evaluators/queries.py and run through query() here.
"""
from __future__ import annotations

import functools
import json
import random
import threading
import time
from collections.abc import Mapping
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

import duckdb
import pandas as pd

from evaluators.records import Component, Item, JudgeCall, Run, Score, Status, Verdict
from evaluators.vocabulary import THELMA, order_metrics

_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


class StoreBusy(RuntimeError):
    """Another process holds the DuckDB file past our deadline."""


class StoreMissing(FileNotFoundError):
    """A reader was pointed at a database file that does not exist."""


class RunConflict(ValueError):
    """A run of that name exists, started with another judge, other options or other prompt files.

    The message speaks of the engine; a front end adds how its user picks another name.
    """

    def __init__(self, run: str, message: str) -> None:
        super().__init__(message)
        self.run = run


# Numbered migrations: append, never edit. Version N is MIGRATIONS[N - 1].
MIGRATIONS: list[str] = [
    """
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,
        judge VARCHAR NOT NULL,
        params VARCHAR NOT NULL,          -- JSON
        prompt_hashes VARCHAR NOT NULL,   -- JSON {prompt name: sha256[:12]}
        status VARCHAR NOT NULL,          -- running | finished | failed
        n_items INTEGER NOT NULL,
        created_at TIMESTAMP NOT NULL,
        finished_at TIMESTAMP,
        stats VARCHAR NOT NULL DEFAULT '{}',  -- JSON: calls, cache hits, tokens, cost
        error VARCHAR NOT NULL DEFAULT ''
    );
    CREATE TABLE items (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        query VARCHAR NOT NULL,
        sources VARCHAR[] NOT NULL,
        response VARCHAR NOT NULL,
        reference VARCHAR,
        metadata VARCHAR NOT NULL,        -- JSON object
        PRIMARY KEY (run_id, item_id)
    );
    CREATE TABLE components (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        kind VARCHAR NOT NULL,
        idx INTEGER NOT NULL,
        text VARCHAR NOT NULL,
        parent INTEGER,
        call_key VARCHAR
    );
    CREATE TABLE verdicts (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        metric VARCHAR NOT NULL,
        component_kind VARCHAR NOT NULL,
        component_idx INTEGER NOT NULL,
        target VARCHAR NOT NULL,
        value DOUBLE,
        status VARCHAR NOT NULL,
        score DOUBLE,                     -- renamed to evidence by migration 3
        call_key VARCHAR,
        detail VARCHAR NOT NULL
    );
    CREATE TABLE scores (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        metric VARCHAR NOT NULL,
        value DOUBLE,
        n_scored INTEGER NOT NULL,
        n_total INTEGER NOT NULL,
        status VARCHAR NOT NULL,
        PRIMARY KEY (run_id, item_id, metric)
    );
    CREATE TABLE judge_calls (
        key VARCHAR PRIMARY KEY,
        model VARCHAR NOT NULL,
        prompt_name VARCHAR NOT NULL,
        prompt_hash VARCHAR NOT NULL,
        messages VARCHAR NOT NULL,        -- JSON list of {role, content}
        params VARCHAR NOT NULL,          -- JSON
        reply VARCHAR,
        status VARCHAR NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        cost DOUBLE,
        latency_ms DOUBLE NOT NULL,
        error VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL
    );
    CREATE TABLE triage (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        label VARCHAR NOT NULL,
        component VARCHAR NOT NULL,
        note VARCHAR NOT NULL,
        author VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL
    );
    CREATE INDEX verdicts_item ON verdicts (run_id, item_id);
    CREATE INDEX components_item ON components (run_id, item_id);
    """,
    # 2: GRAMMAR's per-item correctness against SQL ground truth (evaluators/grammar.py).
    """
    CREATE TABLE grammar_correctness (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        group_id VARCHAR NOT NULL,
        sql_template VARCHAR NOT NULL,
        text_template VARCHAR NOT NULL,
        correct BOOLEAN,                  -- NULL unless status = 'ok'
        status VARCHAR NOT NULL,
        judge VARCHAR NOT NULL,
        detail VARCHAR NOT NULL,
        call_key VARCHAR,
        retrieved_doc_ids VARCHAR[] NOT NULL,
        true_doc_ids VARCHAR[] NOT NULL,
        retrieval_hit BOOLEAN,            -- NULL when the item has no true document ids
        created_at TIMESTAMP NOT NULL,
        PRIMARY KEY (run_id, item_id)
    );
    """,
    # 3: verdicts.score held the judge's continuous evidence (P("1"), a cosine, a rating), not a score.
    # DuckDB will not rename a column an index depends on, so the index is rebuilt around the rename.
    """
    DROP INDEX verdicts_item;
    ALTER TABLE verdicts RENAME COLUMN score TO evidence;
    CREATE INDEX verdicts_item ON verdicts (run_id, item_id);
    """,
]


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


def migrate(path: str | Path) -> int:
    """Create or upgrade the schema; returns the schema version."""
    with connect(path) as con:
        con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = con.execute("SELECT max(version) FROM schema_version").fetchone()
        current = row[0] or 0
        for version in range(current + 1, len(MIGRATIONS) + 1):
            con.execute("BEGIN")
            con.execute(MIGRATIONS[version - 1])
            con.execute("INSERT INTO schema_version VALUES (?)", [version])
            con.execute("COMMIT")
        return len(MIGRATIONS)


class Health(NamedTuple):
    """What check_database() found: a state, and for a problem the detail a message names."""

    state: str  # ok | missing | empty | folder | not_duckdb | damaged | foreign | older | newer | incomplete
    detail: str = ""
    version: int | None = None


_HEADER_BYTES = 3 * 4096  # DuckDB's file header and its two database headers, before the first block


@functools.cache
def _expected_columns() -> dict[str, frozenset[str]]:
    """The tables and columns the migrations build, read from an in-memory database they built."""
    con = duckdb.connect(":memory:", config=_CONFIG)
    try:
        for sql in MIGRATIONS:
            con.execute(sql)
        return _columns(con)
    finally:
        con.close()


def _columns(con: Any) -> dict[str, frozenset[str]]:
    rows = con.execute("""SELECT table_name, list(column_name) FROM information_schema.columns
                          WHERE table_schema = 'main' GROUP BY table_name""").fetchall()
    return {table: frozenset(cols) for table, cols in rows}


def check_database(path: str | Path, deadline_s: float = 3.0) -> Health:
    """Whether `path` is a RAG Triage database this version reads, checked without writing to it.

    Raises StoreBusy when another process holds the file past `deadline_s`; every other problem is
    a Health state. The file's first bytes are checked before DuckDB opens it, so a SQLite file or a
    text file never makes DuckDB look for a reader extension.
    """
    file = Path(path)
    if not file.exists():
        return Health("missing")
    if file.is_dir():
        return Health("folder")
    try:
        with open(file, "rb") as f:
            head = f.read(16)
    except OSError as exc:
        return Health("damaged", exc.strerror or str(exc))
    if not head:
        return Health("not_duckdb", "an empty file")
    if head[8:12] != b"DUCK":  # DuckDB's magic bytes
        kind = "a SQLite database" if head.startswith(b"SQLite format 3") else "not a DuckDB file"
        return Health("not_duckdb", kind)
    try:
        with connect(file, read_only=True, deadline_s=deadline_s) as con:
            found = _columns(con)
            if not found:
                return Health("empty")
            if "schema_version" not in found or "runs" not in found:
                return Health("foreign", ", ".join(sorted(found)[:5]) + (", ..." if len(found) > 5 else ""))
            version = con.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0
            # A cut-off copy opens and lists its tables, then fails on the first read of a lost block.
            block_size, blocks = con.execute("SELECT block_size, total_blocks FROM pragma_database_size()").fetchone()
            if file.stat().st_size < _HEADER_BYTES + block_size * blocks:
                return Health("damaged", f"the file is cut short: {file.stat().st_size} of "
                                         f"{_HEADER_BYTES + block_size * blocks} bytes")
    except duckdb.Error as exc:
        return Health("damaged", str(exc).splitlines()[0][:200])
    if version < len(MIGRATIONS):
        return Health("older", version=version)
    if version > len(MIGRATIONS):
        return Health("newer", version=version)
    missing: list[str] = []
    for table, cols in _expected_columns().items():
        missing += [f"{table}.{c}" for c in sorted(cols - found[table])] if table in found else [table]
    if missing:
        return Health("incomplete", ", ".join(missing[:6]) + (", ..." if len(missing) > 6 else ""), version)
    return Health("ok", version=version)


# ---------------------------------------------------------------- writes

def _frame(records: Sequence[Any], columns: list[str]) -> pd.DataFrame:
    rows = [asdict(r) for r in records]
    frame = pd.DataFrame(rows, columns=columns)
    if "status" in frame:
        frame["status"] = frame["status"].map(lambda s: s.value if isinstance(s, Status) else s)
    return frame


def _insert(con: Any, table: str, frame: pd.DataFrame, ignore: bool = False) -> None:
    if frame.empty:
        return
    con.register("_batch", frame)
    try:
        verb = "INSERT OR IGNORE INTO" if ignore else "INSERT INTO"
        con.execute(f"{verb} {table} BY NAME SELECT * FROM _batch")
    finally:
        con.unregister("_batch")


def _calls_frame(calls: Sequence[JudgeCall]) -> pd.DataFrame:
    frame = _frame(calls, [
        "key", "model", "prompt_name", "prompt_hash", "messages", "params", "reply", "status",
        "prompt_tokens", "completion_tokens", "cost", "latency_ms", "error"])
    frame["messages"] = frame["messages"].map(lambda m: json.dumps(m, ensure_ascii=False))
    frame["params"] = frame["params"].map(lambda p: json.dumps(p, sort_keys=True))
    frame["cost"] = frame["cost"].astype("float64")
    frame["created_at"] = pd.Timestamp.now(tz="UTC").tz_localize(None)
    return frame.drop_duplicates("key")


def _items_frame(run_id: str, items: Sequence[Item]) -> pd.DataFrame:
    return pd.DataFrame({
        "run_id": run_id,
        "item_id": [i.id for i in items],
        "query": [i.query for i in items],
        "sources": [list(i.sources) for i in items],
        "response": [i.response for i in items],
        "reference": [i.reference for i in items],
        "metadata": [json.dumps(i.metadata, ensure_ascii=False, sort_keys=True) for i in items],
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
    frames = [
        ("judge_calls", _calls_frame(calls) if calls else pd.DataFrame(), True),
        ("components", _with_run(run_id, _frame(components, ["item_id", "kind", "idx", "text", "parent", "call_key"])), False),
        ("verdicts", _with_run(run_id, _frame(verdicts, [
            "item_id", "metric", "component_kind", "component_idx", "target", "value", "status",
            "evidence", "call_key", "detail"])), False),
        ("scores", _with_run(run_id, _frame(scores, ["item_id", "metric", "value", "n_scored", "n_total", "status"])), False),
        ("items", _items_frame(run_id, items), False),
    ]
    for _, frame, _ in frames:
        for col in ("parent", "component_idx", "n_scored", "n_total", "idx"):
            if col in frame:
                frame[col] = frame[col].astype("Int64")
        for col in ("value", "evidence"):
            if col in frame:
                frame[col] = frame[col].astype("float64")
    with connect(path) as con:
        con.execute("BEGIN")
        try:
            for table, frame, ignore in frames:
                _insert(con, table, frame, ignore)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise



def start_run(path: str | Path, run: Run, n_items: int) -> None:
    """Create the run row, or check that an existing run of that name is the same evaluation.

    Raises RunConflict when it is not: resuming it would mix two evaluations in one run.
    """
    migrate(path)
    with connect(path) as con:
        row = con.execute("SELECT judge, params, prompt_hashes FROM runs WHERE run_id = ?", [run.name]).fetchone()
        if row is None:
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, 'running', ?, now()::TIMESTAMP, NULL, '{}', '')",
                [run.name, run.judge, json.dumps(run.params, sort_keys=True),
                 json.dumps(run.prompt_hashes, sort_keys=True), n_items])
            return
        judge, params, hashes = row
        if judge != run.judge or json.loads(params) != run.params:
            raise RunConflict(run.name, f"run {run.name!r} already exists with judge {judge} and params {params}; "
                                        "resume it with the same judge and options, or give this evaluation "
                                        "another run name")
        if json.loads(hashes) != run.prompt_hashes:
            raise RunConflict(run.name, f"run {run.name!r} was started with other prompt files; finish it with "
                                        "those, or give this evaluation another run name")
        con.execute("UPDATE runs SET status = 'running', n_items = ?, error = '' WHERE run_id = ?",
                    [n_items, run.name])


def finish_run(path: str | Path, run_id: str, status: str, stats: dict[str, Any], error: str = "") -> None:
    """Mark a run finished or failed, with its call statistics."""
    with connect(path) as con:
        con.execute(
            "UPDATE runs SET status = ?, finished_at = now()::TIMESTAMP, stats = ?, error = ? WHERE run_id = ?",
            [status, json.dumps(stats, sort_keys=True), error, run_id])


def add_triage(path: str | Path, run_id: str, item_id: str, label: str, component: str,
               note: str, author: str, deadline_s: float = 5.0) -> None:
    """Append one triage note. Raises StoreBusy if the file stays locked past the deadline."""
    with connect(path, deadline_s=deadline_s) as con:
        con.execute("INSERT INTO triage VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
                    [run_id, item_id, label, component, note, author])


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


def query(path: str | Path, sql: str, params: Mapping[str, Any] | Sequence[Any] = (),
          deadline_s: float = 10.0) -> pd.DataFrame:
    """Run one read-only query and return a DataFrame; named $params may be given as a dict.

    Inside reading(path) it runs on the block's shared connection.
    """
    args = params if isinstance(params, Mapping) else list(params)
    shared = _SHARED.get()
    if shared is not None and shared["path"] == str(path):
        if shared["con"] is None:
            shared["con"] = shared["stack"].enter_context(connect(path, read_only=True, deadline_s=deadline_s))
        return shared["con"].execute(sql, args).df()
    with connect(path, read_only=True, deadline_s=deadline_s) as con:
        return con.execute(sql, args).df()


# In-memory queries over DataFrames (the dashboard's cached run tables): a process-wide in-memory
# DuckDB (no file, so no lock), one cursor per call so sessions on other threads do not share state.
_MEMORY: list[Any] = []
_MEMORY_LOCK = threading.Lock()


def frame_query(sql: str, frames: Mapping[str, pd.DataFrame], params: Mapping[str, Any] | Sequence[Any] = ()
                ) -> pd.DataFrame:
    """Run SQL over DataFrames registered under the given names, in memory."""
    with _MEMORY_LOCK:
        if not _MEMORY:
            _MEMORY.append(duckdb.connect(":memory:", config=_CONFIG))
        cursor = _MEMORY[0].cursor()
    try:
        for name, frame in frames.items():
            cursor.register(name, frame)
        return cursor.execute(sql, params if isinstance(params, Mapping) else list(params)).df()
    finally:
        cursor.close()


def column(metric: str) -> str:
    """A metric id as a quoted SQL identifier; ids are lower-case words, anything else is refused."""
    if not metric or not all(ch.isalnum() or ch == "_" for ch in metric) or metric.lower() != metric:
        raise ValueError(f"not a metric id: {metric!r}")
    return f'"{metric}"'


# Statuses that are not a failure: scored, or the metric does not apply to this item.
NOT_FAILED = "('ok', 'not_applicable')"


def done_item_ids(path: str | Path, run_id: str) -> set[str]:
    """Ids of the items of a run that are completely written."""
    if not Path(path).exists():
        return set()
    frame = query(path, "SELECT item_id FROM items WHERE run_id = ?", [run_id])
    return set(frame["item_id"])


def load_cache(path: str | Path, model: str) -> dict[str, JudgeCall]:
    """Every stored call of `model` that got a reply: the request cache, keyed by call key."""
    if not Path(path).exists():
        return {}
    frame = query(path, """
        SELECT key, model, prompt_name, prompt_hash, params, reply, status,
               prompt_tokens, completion_tokens, cost, latency_ms, error
        FROM judge_calls WHERE model = ? AND reply IS NOT NULL""", [model])
    cache: dict[str, JudgeCall] = {}
    for row in frame.itertuples(index=False):
        cache[row.key] = JudgeCall(
            key=row.key, model=row.model, prompt_name=row.prompt_name, prompt_hash=row.prompt_hash,
            messages=[], params=json.loads(row.params), reply=row.reply, status=Status(row.status),
            prompt_tokens=int(row.prompt_tokens), completion_tokens=int(row.completion_tokens),
            cost=None if pd.isna(row.cost) else float(row.cost), latency_ms=float(row.latency_ms),
            error=row.error)
    return cache


def runs(path: str | Path) -> pd.DataFrame:
    """All runs with their item counts, newest first."""
    return query(path, """
        SELECT r.run_id, r.judge, r.status, r.n_items,
               (SELECT count(*) FROM items i WHERE i.run_id = r.run_id) AS n_done,
               r.created_at, r.finished_at, r.prompt_hashes, r.params, r.stats, r.error
        FROM runs r ORDER BY r.created_at DESC""")


def row_counts(path: str | Path, tables: Sequence[str] = ("items", "components", "verdicts", "judge_calls")
               ) -> dict[str, int]:
    """Rows per table, for reports on a database's size."""
    unknown = set(tables) - {"runs", "items", "components", "verdicts", "scores", "judge_calls", "triage"}
    if unknown:
        raise ValueError(f"unknown tables {sorted(unknown)}")
    row = query(path, "SELECT " + ", ".join(f"(SELECT count(*) FROM {t}) AS {t}" for t in tables)).iloc[0]
    return {t: int(row[t]) for t in tables}


def run_items(path: str | Path, run_ids: Sequence[str]) -> pd.DataFrame:
    """The items stored for these runs: run_id, item_id, query, sources, response and metadata (JSON)."""
    return query(path, """SELECT run_id, item_id, query, sources, response, metadata FROM items
                          WHERE list_contains(?, run_id)""", [list(run_ids)])


def run_scores_wide(path: str | Path, run_id: str, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per item of a run, grouped in DuckDB: item_id, a query snippet, one column per metric
    (THELMA's seven always, then `metrics`; NULL when unscored, NaN included), n_failed (failed
    verdicts) and failed_metrics (the unscored metrics with their status: 'gr:timeout, sqc:error').

    The CLI's export and diagnosis read it, and the dashboard caches it per run and answers filters,
    sorting, Table 2 and Compare from it in memory (store.frame_query), without re-scanning the file.
    """
    cols = ",\n".join(
        f"max(value) FILTER (WHERE metric = '{m}' AND NOT isnan(value)) AS {column(m)}"  # ids checked
        for m in order_metrics([*metrics, *THELMA]))
    return query(path, f"""
        WITH wide AS (SELECT item_id, {cols} FROM scores WHERE run_id = $run GROUP BY item_id),
        failed AS (SELECT item_id, string_agg(metric || ':' || status, ', ' ORDER BY metric) AS failed_metrics
                   FROM scores WHERE run_id = $run AND status NOT IN {NOT_FAILED} GROUP BY item_id),
        verdicts_failed AS (SELECT item_id, count(*) AS n_failed FROM verdicts
                            WHERE run_id = $run AND status NOT IN {NOT_FAILED} GROUP BY item_id)
        SELECT i.item_id, left(i.query, 120) AS query, w.* EXCLUDE (item_id),
               coalesce(v.n_failed, 0) AS n_failed, coalesce(f.failed_metrics, '') AS failed_metrics
        FROM items i LEFT JOIN wide w ON w.item_id = i.item_id LEFT JOIN failed f ON f.item_id = i.item_id
        LEFT JOIN verdicts_failed v ON v.item_id = i.item_id
        WHERE i.run_id = $run ORDER BY i.item_id""", {"run": run_id})


def write_frames(path: str | Path, frames: Mapping[str, pd.DataFrame]) -> None:
    """Bulk-insert prepared DataFrames ({table: frame}, columns by name) in ONE transaction.

    For generated data (the scale benchmark) where building a record object per row would cost more
    than the insert itself; the engine writes through write_batch().
    """
    with connect(path) as con:
        con.execute("BEGIN")
        try:
            for table, frame in frames.items():
                if table not in ("runs", "items", "components", "verdicts", "scores", "judge_calls", "triage"):
                    raise ValueError(f"unknown table {table!r}")
                _insert(con, table, frame)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

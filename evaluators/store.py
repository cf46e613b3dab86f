"""The DuckDB store: the only module that imports duckdb.

Connections are short-lived. DuckDB lets one read-write process lock the file, so writers open,
write one batch from DataFrames in a single transaction, and close; readers open read-only.
Both retry lock errors with jitter until a deadline, then raise StoreBusy.
"""
from __future__ import annotations

import json
import random
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator, Sequence

import duckdb
import pandas as pd

from evaluators.records import Component, Item, JudgeCall, Run, Score, Status, Verdict

_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


class StoreBusy(RuntimeError):
    """Another process holds the DuckDB file past our deadline."""


class StoreMissing(FileNotFoundError):
    """A reader was pointed at a database file that does not exist."""


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
        score DOUBLE,
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
]


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("could not set" in text or "conflicting" in text)


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
        except duckdb.IOException as exc:  # another process holds the write lock
            if not _is_lock_error(exc) or time.monotonic() >= give_up:
                if _is_lock_error(exc):
                    raise StoreBusy(f"{path}: busy, another process is writing (gave up after {deadline_s:.0f} s)") from None
                raise
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
            "score", "call_key", "detail"])), False),
        ("scores", _with_run(run_id, _frame(scores, ["item_id", "metric", "value", "n_scored", "n_total", "status"])), False),
        ("items", _items_frame(run_id, items), False),
    ]
    for _, frame, _ in frames:
        for col in ("parent", "component_idx", "n_scored", "n_total", "idx"):
            if col in frame:
                frame[col] = frame[col].astype("Int64")
        for col in ("value", "score"):
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
    """Create the run row, or check that an existing run of that name is the same evaluation."""
    migrate(path)
    with connect(path) as con:
        row = con.execute("SELECT judge, params FROM runs WHERE run_id = ?", [run.name]).fetchone()
        if row is None:
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, 'running', ?, now()::TIMESTAMP, NULL, '{}', '')",
                [run.name, run.judge, json.dumps(run.params, sort_keys=True),
                 json.dumps(run.prompt_hashes, sort_keys=True), n_items])
            return
        judge, params = row
        if judge != run.judge or json.loads(params) != run.params:
            raise ValueError(
                f"run {run.name!r} already exists with judge {judge} and params {params}; "
                "resume it with the same options or choose another --run name")
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
    migrate_deadline = deadline_s
    with connect(path, deadline_s=migrate_deadline) as con:
        con.execute("INSERT INTO triage VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
                    [run_id, item_id, label, component, note, author])


# ---------------------------------------------------------------- reads

def query(path: str | Path, sql: str, params: Sequence[Any] = (), deadline_s: float = 10.0) -> pd.DataFrame:
    """Run one read-only query and return a DataFrame."""
    with connect(path, read_only=True, deadline_s=deadline_s) as con:
        return con.execute(sql, list(params)).df()


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


def run_scores_wide(path: str | Path, run_id: str, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per item: item_id, one column per metric (NULL when not scored), n_failed verdicts."""
    cols = ", ".join(
        f"max(CASE WHEN s.metric = '{m}' THEN s.value END) AS \"{m}\"" for m in metrics)
    return query(path, f"""
        WITH failed AS (
            SELECT item_id, count(*) AS n_failed FROM verdicts
            WHERE run_id = ? AND status <> 'ok' GROUP BY item_id)
        SELECT i.item_id, {cols}, coalesce(any_value(f.n_failed), 0) AS n_failed
        FROM items i
        LEFT JOIN scores s ON s.run_id = i.run_id AND s.item_id = i.item_id
        LEFT JOIN failed f ON f.item_id = i.item_id
        WHERE i.run_id = ?
        GROUP BY i.item_id ORDER BY i.item_id""", [run_id, run_id])

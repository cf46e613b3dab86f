"""The DuckDB store: the only module that imports duckdb.

Connections are short-lived. DuckDB lets one read-write process lock the file, so writers open,
write one batch from DataFrames in a single transaction, and close; readers open read-only.
Both retry lock errors with jitter until a deadline, then raise StoreBusy.
"""
from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Collection, Mapping
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import duckdb
import pandas as pd

from evaluators.diagnosis import CONDITIONS, DEFAULT_THRESHOLDS
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
    # 4: who evaluates a run and whether it still lives, and which input each run and item is for.
    # runs.status: running | finished | finished with failures | failed; RUN_STATUS_SQL reads a
    # running run whose owner stopped beating as interrupted.
    """
    ALTER TABLE runs ADD COLUMN owner VARCHAR;           -- host:pid:token of the evaluating process
    ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
    ALTER TABLE runs ADD COLUMN owner_host VARCHAR;
    ALTER TABLE runs ADD COLUMN heartbeat_at TIMESTAMP;  -- refreshed by the owner's every write
    ALTER TABLE runs ADD COLUMN heartbeat_s DOUBLE;      -- the owner's longest pause between writes
    ALTER TABLE items ADD COLUMN content_hash VARCHAR;   -- Item.content_hash() these results are for
    CREATE TABLE run_inputs (                            -- the run's input: item ids and content hashes
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        content_hash VARCHAR NOT NULL,
        PRIMARY KEY (run_id, item_id)
    );
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


# ---------------------------------------------------------------- writes

def _frame(records: Sequence[Any], columns: list[str]) -> pd.DataFrame:
    rows = [asdict(r) for r in records]
    frame = pd.DataFrame(rows, columns=columns)
    if "status" in frame:
        frame["status"] = frame["status"].map(lambda s: s.value if isinstance(s, Status) else s)
    return frame


def _insert(con: Any, table: str, frame: pd.DataFrame) -> None:
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
        "prompt_tokens", "completion_tokens", "cost", "latency_ms", "error"])
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
    frames = _batch_frames(run_id, items, components, verdicts, scores, calls)
    with connect(path) as con:
        con.execute("BEGIN")
        try:
            for table, frame in frames:
                _insert(con, table, frame)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


def _batch_frames(run_id: str, items: Sequence[Item], components: Sequence[Component], verdicts: Sequence[Verdict],
                  scores: Sequence[Score], calls: Sequence[JudgeCall]) -> list[tuple[str, pd.DataFrame]]:
    """The tables of one write, judge calls first."""
    frames = [
        ("judge_calls", _calls_frame(calls) if calls else pd.DataFrame()),
        ("components", _with_run(run_id, _frame(components, ["item_id", "kind", "idx", "text", "parent", "call_key"]))),
        ("verdicts", _with_run(run_id, _frame(verdicts, [
            "item_id", "metric", "component_kind", "component_idx", "target", "value", "status",
            "evidence", "call_key", "detail"]))),
        ("scores", _with_run(run_id, _frame(scores, ["item_id", "metric", "value", "n_scored", "n_total", "status"]))),
        ("items", _items_frame(run_id, items)),
    ]
    for _, frame in frames:
        for col in ("parent", "component_idx", "n_scored", "n_total", "idx"):
            if col in frame:
                frame[col] = frame[col].astype("Int64")
        for col in ("value", "evidence"):
            if col in frame:
                frame[col] = frame[col].astype("float64")
    return frames


def start_run(path: str | Path, run: Run, n_items: int) -> None:
    """Create the run row, or check that an existing run of that name is the same evaluation."""
    migrate(path)
    with connect(path) as con:
        row = con.execute("SELECT judge, params, prompt_hashes FROM runs WHERE run_id = ?", [run.name]).fetchone()
        if row is None:
            _insert_run(con, run, n_items)
            return
        _check_same_run(run, row)
        con.execute("UPDATE runs SET status = 'running', n_items = ?, error = '' WHERE run_id = ?",
                    [n_items, run.name])


def finish_run(path: str | Path, run_id: str, status: str, stats: dict[str, Any], error: str = "",
               owner: Owner | None = None, deadline_s: float = 20.0) -> None:
    """Mark a run finished, finished with failures or failed, with its call statistics.

    With `owner`, only while that process still owns the run: one that took it over keeps its status.
    """
    token = owner.token if owner else None
    with connect(path, deadline_s=deadline_s) as con:
        con.execute(
            "UPDATE runs SET status = ?, finished_at = now()::TIMESTAMP, stats = ?, error = ? "
            "WHERE run_id = ? AND (? IS NULL OR owner = ?)",
            [status, json.dumps(stats, sort_keys=True), error, run_id, token, token])


# ---------------------------------------------------------------- a run's owner and input

FAILED_STATUSES = ("unparsed", "error", "timeout")  # a judge step that produced no verdict
STALE_BEATS = 3  # a running run whose owner missed this many heartbeats was interrupted

# A run's status as readers show it, over `runs r`: a running run whose owner stopped writing
# (killed, crashed, machine gone) reads as interrupted. The CLI's run list and the dashboard's use it.
RUN_STATUS_SQL = (
    "CASE WHEN r.status = 'running' AND (r.heartbeat_at IS NULL OR r.heartbeat_at < "
    f"now()::TIMESTAMP - to_seconds({STALE_BEATS} * coalesce(r.heartbeat_s, 0))) "
    "THEN 'interrupted' ELSE r.status END")


class RunBusy(ValueError):
    """Another live process is evaluating the run."""


class InputChanged(ValueError):
    """The items given for an existing run differ from the input it recorded."""

    def __init__(self, run_id: str, changed: list[str], added: list[str], removed: list[str]) -> None:
        self.changed, self.added, self.removed = changed, added, removed
        parts = [f"{label} {_id_list(ids)}" for label, ids in
                 (("changed", changed), ("added", added), ("removed", removed)) if ids]
        super().__init__(f"run {run_id!r} was evaluated on other content: {'; '.join(parts)}")


def _id_list(ids: Sequence[str], shown: int = 10) -> str:
    head = ", ".join(repr(i) for i in ids[:shown])
    return head + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


@dataclass(frozen=True)
class Owner:
    """The process evaluating a run: its host, its pid, and a token unique to one evaluation."""

    host: str
    pid: int
    token: str

    @staticmethod
    def this_process() -> "Owner":
        """A new owner identity for one evaluation in this process."""
        host, pid = socket.gethostname(), os.getpid()
        return Owner(host, pid, f"{host}:{pid}:{uuid.uuid4().hex[:8]}")


@dataclass(frozen=True)
class Claim:
    """What an evaluation that owns its run must do: item ids to evaluate, in input order, and
    which of them replace results already stored."""

    todo: list[str]
    replace: frozenset[str]


def claim_run(path: str | Path, run: Run, hashes: Mapping[str, str], owner: Owner, heartbeat_s: float,
              update: bool = False, retry_failed: bool = False) -> Claim:
    """Create or take over a run for one evaluation, in ONE transaction, so two processes never both own it.

    hashes: the input, {item id: Item.content_hash()} in input order. Raises RunBusy while another
    live process owns the run (same host: its pid runs; another host: it wrote within STALE_BEATS
    heartbeats), ValueError when judge, params or prompts differ, and InputChanged when the input
    differs from the one the run recorded, unless `update`: then this input is recorded, removed items
    are deleted and changed or added ones evaluated. `retry_failed` adds the items with a failed step.
    Items whose stored results are for other content (an interrupted update) are always evaluated.
    """
    migrate(path)
    with connect(path) as con:
        con.execute("BEGIN")
        try:
            claim = _claim(con, run, dict(hashes), owner, heartbeat_s, update, retry_failed)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return claim


def _claim(con: Any, run: Run, hashes: dict[str, str], owner: Owner, heartbeat_s: float,
           update: bool, retry_failed: bool) -> Claim:
    # fetchall, not fetchone: DuckDB refuses a register() while a result is unfinished.
    rows = con.execute("""SELECT judge, params, prompt_hashes, status, owner, owner_pid, owner_host,
                                 epoch(now()::TIMESTAMP - heartbeat_at), heartbeat_s
                          FROM runs WHERE run_id = ?""", [run.name]).fetchall()
    row = rows[0] if rows else None
    recorded: dict[str, str] = {}
    stored: dict[str, str] = {}
    if row is None:
        _insert_run(con, run, len(hashes))
    else:
        _check_same_run(run, row[:3])
        _check_not_owned(run.name, owner, *row[3:])
        recorded = dict(con.execute("SELECT item_id, content_hash FROM run_inputs WHERE run_id = ?",
                                    [run.name]).fetchall())
        stored = _stored_hashes(con, run.name)
        if not recorded:  # a run from before migration 4: it knows its stored items, not its whole input
            recorded = {**{i: h for i, h in hashes.items() if i not in stored}, **stored}
        changed = [i for i, h in hashes.items() if i in recorded and recorded[i] != h]
        added = [i for i in hashes if i not in recorded]
        removed = [i for i in recorded if i not in hashes]
        if (changed or added or removed) and not update:
            raise InputChanged(run.name, changed, added, removed)
        for table in ("items", "components", "verdicts", "scores") if removed else ():
            con.execute(f"DELETE FROM {table} WHERE run_id = ? AND list_contains(?, item_id)", [run.name, removed])
    if recorded != hashes:
        con.execute("DELETE FROM run_inputs WHERE run_id = ?", [run.name])
        _insert(con, "run_inputs", pd.DataFrame(
            {"run_id": run.name, "item_id": list(hashes), "content_hash": list(hashes.values())}))
    failed: set[str] = set()
    if retry_failed:
        failed = {r[0] for r in con.execute(f"""
            SELECT item_id FROM verdicts WHERE run_id = $run AND status IN {FAILED_STATUSES}
            UNION SELECT item_id FROM scores WHERE run_id = $run AND status IN {FAILED_STATUSES}""",
            {"run": run.name}).fetchall()}
    con.execute("""UPDATE runs SET status = 'running', n_items = ?, error = '', owner = ?, owner_pid = ?,
                   owner_host = ?, heartbeat_at = now()::TIMESTAMP, heartbeat_s = ? WHERE run_id = ?""",
                [len(hashes), owner.token, owner.pid, owner.host, heartbeat_s, run.name])
    todo = [i for i, h in hashes.items() if stored.get(i) != h or i in failed]
    return Claim(todo, frozenset(i for i in todo if i in stored))


def _insert_run(con: Any, run: Run, n_items: int) -> None:
    con.execute("""INSERT INTO runs (run_id, judge, params, prompt_hashes, status, n_items, created_at)
                   VALUES (?, ?, ?, ?, 'running', ?, now()::TIMESTAMP)""",
                [run.name, run.judge, json.dumps(run.params, sort_keys=True),
                 json.dumps(run.prompt_hashes, sort_keys=True), n_items])


def _check_same_run(run: Run, row: Sequence[Any]) -> None:
    """An existing run continues only with the judge, params and prompt files it was started with."""
    judge, params, hashes = row
    if judge != run.judge or json.loads(params) != run.params:
        raise ValueError(f"run {run.name!r} already exists with judge {judge} and params {params}; "
                         "resume it with the same options or choose another run name")
    if json.loads(hashes) != run.prompt_hashes:
        raise ValueError(f"run {run.name!r} was started with other prompt files; "
                         "finish it with those or choose another run name")


def _check_not_owned(run_id: str, owner: Owner, status: str, current: str | None, pid: int | None,
                     host: str | None, age_s: float | None, heartbeat_s: float | None) -> None:
    if status != "running" or current is None or current == owner.token:
        return
    if host == owner.host:  # the pid answers for itself, however long the owner waited for the file
        alive = pid is not None and _pid_alive(pid)
    else:
        alive = age_s is not None and age_s <= STALE_BEATS * (heartbeat_s or 0.0)
    if alive:
        last = "" if age_s is None else f", last write {age_s:.0f} s ago"
        raise RunBusy(f"run {run_id!r} is being evaluated by another process (pid {pid} on {host}{last})")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _stored_hashes(con: Any, run_id: str) -> dict[str, str]:
    """Content hashes of a run's stored items; rows from before migration 4 are hashed from their content."""
    hashes = dict(con.execute("SELECT item_id, content_hash FROM items WHERE run_id = ? AND content_hash IS NOT NULL",
                              [run_id]).fetchall())
    legacy = con.execute("""SELECT item_id, query, sources, response, reference, metadata FROM items
                            WHERE run_id = ? AND content_hash IS NULL""", [run_id]).fetchall()
    for item_id, query, sources, response, reference, metadata in legacy:
        hashes[item_id] = Item(item_id, query, tuple(sources), response, reference, json.loads(metadata)).content_hash()
    return hashes


def write_results(
    path: str | Path,
    run_id: str,
    owner: Owner,
    items: Sequence[Item] = (),
    components: Sequence[Component] = (),
    verdicts: Sequence[Verdict] = (),
    scores: Sequence[Score] = (),
    calls: Sequence[JudgeCall] = (),
    replace: Collection[str] = (),
    deadline_s: float = 20.0,
) -> None:
    """One group commit of an owned run, in ONE transaction, refreshing its heartbeat (also when empty).

    Items in `replace` have results stored already: those go in the same transaction, so a reader
    sees the old item or the new one, never neither. If another process has taken the run over,
    only the judge calls are stored, then RunBusy is raised.
    """
    frames = _batch_frames(run_id, items, components, verdicts, scores, calls)
    with connect(path, deadline_s=deadline_s) as con:
        con.execute("BEGIN")
        try:
            rows = con.execute("SELECT owner FROM runs WHERE run_id = ?", [run_id]).fetchall()
            owned = bool(rows) and rows[0][0] == owner.token
            if owned:
                stale = [i.id for i in items if i.id in replace]
                for table in ("items", "components", "verdicts", "scores") if stale else ():
                    con.execute(f"DELETE FROM {table} WHERE run_id = ? AND list_contains(?, item_id)", [run_id, stale])
                con.execute("UPDATE runs SET heartbeat_at = now()::TIMESTAMP WHERE run_id = ?", [run_id])
            for table, frame in frames if owned else frames[:1]:
                _insert(con, table, frame)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    if not owned:
        raise RunBusy(f"run {run_id!r} was taken over by another process; this evaluation stopped "
                      "(its judge calls are stored)")


def add_triage(path: str | Path, run_id: str, item_id: str, label: str, component: str,
               note: str, author: str, deadline_s: float = 5.0) -> None:
    """Append one triage note. Raises StoreBusy if the file stays locked past the deadline."""
    with connect(path, deadline_s=deadline_s) as con:
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
    """All runs with their item counts, newest first; a run whose process died reads `interrupted`."""
    return query(path, f"""
        SELECT r.run_id, r.judge, {RUN_STATUS_SQL} AS status, r.n_items,
               (SELECT count(*) FROM items i WHERE i.run_id = r.run_id) AS n_done,
               r.created_at, r.finished_at, r.prompt_hashes, r.params, r.stats, r.error
        FROM runs r ORDER BY r.created_at DESC""")


def run_scores_wide(path: str | Path, run_id: str, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per item: item_id, one column per metric (NULL when not scored), n_failed verdicts."""
    cols = ", ".join(
        f"max(CASE WHEN s.metric = '{m}' THEN s.value END) AS {_ident(m)}" for m in metrics)  # ids checked
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


# ---------------------------------------------------------------- dashboard reads

# Read models for the Streamlit dashboard. Every grouping happens here in SQL, so a page never
# pulls a whole table into pandas. Metric ids become SQL identifiers only after _ident() checks
# them; thresholds are checked finite floats; every other value is a query parameter.

THELMA_METRICS: tuple[str, ...] = tuple(DEFAULT_THRESHOLDS)  # sp1, sp2, sqc, rp, rqc, sd, gr
# Statuses that are not a failure: scored, or the metric does not apply to this item.
_NOT_FAILED = "('ok', 'not_applicable')"
# Table 2 in SQL, from diagnosis.CONDITIONS; tests/test_dashboard_reads.py checks that these SQL
# rules and diagnosis.diagnose() agree on every item.
RULE_IDS: tuple[str, ...] = tuple(CONDITIONS)
_DEFAULT_THRESHOLD = 0.5


# Opening a DuckDB connection costs about 0.1 s here, more than most dashboard queries, so a page
# reads its cache misses through one connection: reading() shares it within a block, then closes it.
_SHARED: ContextVar[dict[str, Any] | None] = ContextVar("dashboard_reader", default=None)


@contextmanager
def reading(path: str | Path) -> Iterator[None]:
    """Let the dashboard reads inside this block share one read-only connection, opened on first use."""
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


def _open_reader(stack: ExitStack, path: str | Path, deadline_s: float = 10.0) -> Any:
    return stack.enter_context(connect(path, read_only=True, deadline_s=deadline_s))


def _read(path: str | Path, sql: str, params: Mapping[str, Any] | Sequence[Any] = ()) -> pd.DataFrame:
    """One read-only query (on the shared connection inside reading()); named $params may be a dict."""
    args = params if isinstance(params, Mapping) else list(params)
    shared = _SHARED.get()
    if shared is not None and shared["path"] == str(path):
        if shared["con"] is None:
            shared["con"] = _open_reader(shared["stack"], path)
        return shared["con"].execute(sql, args).df()
    with ExitStack() as stack:
        return _open_reader(stack, path).execute(sql, args).df()


def order_metrics(names: Sequence[str]) -> list[str]:
    """THELMA's metrics first in their paper order, then any others alphabetically."""
    names = set(names)
    return [m for m in THELMA_METRICS if m in names] + sorted(names - set(THELMA_METRICS))


def _ident(metric: str) -> str:
    """A metric id as a quoted SQL identifier; ids are lower-case words, anything else is refused."""
    if not metric or not all(ch.isalnum() or ch == "_" for ch in metric) or metric.lower() != metric:
        raise ValueError(f"not a metric id: {metric!r}")
    return f'"{metric}"'


def _threshold(thresholds: Mapping[str, float], metric: str) -> str:
    """A metric's threshold as a SQL literal: the given one, else Table 2's default, else 0.5."""
    value = float(thresholds.get(metric, DEFAULT_THRESHOLDS.get(metric, _DEFAULT_THRESHOLD)))
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"threshold for {metric} is not finite")
    return repr(value)


def catalog(path: str | Path) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """All runs (newest first, as runs() gives them) and, per run, its metric ids in display order."""
    with reading(path):
        frame = _read(path, """
            SELECT r.run_id, r.judge, r.status, r.n_items,
                   (SELECT count(*) FROM items i WHERE i.run_id = r.run_id) AS n_done,
                   r.created_at, r.finished_at, r.prompt_hashes, r.params, r.stats, r.error
            FROM runs r ORDER BY r.created_at DESC""")
        pairs = _read(path, "SELECT DISTINCT run_id, metric FROM scores")
    metrics = {run: order_metrics(list(group["metric"])) for run, group in pairs.groupby("run_id")}
    return frame, metrics


def _wide_cte(metrics: Sequence[str]) -> str:
    """`wide`: one row per scored item of run $run with one column per metric (NaN read as unscored),
    and `failed`: the items with an unscored metric, as 'gr:timeout, sqc:error'."""
    cols = ",\n".join(
        f"max(value) FILTER (WHERE metric = '{m}' AND NOT isnan(value)) AS {_ident(m)}"
        for m in order_metrics([*metrics, *THELMA_METRICS]))
    return f"""wide AS (SELECT item_id, {cols} FROM scores WHERE run_id = $run GROUP BY item_id),
    failed AS (SELECT item_id, string_agg(metric || ':' || status, ', ' ORDER BY metric) AS failed_metrics
               FROM scores WHERE run_id = $run AND status NOT IN {_NOT_FAILED} GROUP BY item_id)"""


def run_table(path: str | Path, run_id: str, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per item of a run, grouped in DuckDB: item_id, a query snippet, one column per metric
    (NULL when unscored) and failed_metrics ('gr:timeout, ...').

    The dashboard caches this per run and answers filters, sorting, Table 2 and Compare from it in
    memory (see frame_query), so an interaction does not re-scan the file.
    """
    return _read(path, f"""WITH {_wide_cte(metrics)}
        SELECT i.item_id, left(i.query, 120) AS query, w.* EXCLUDE (item_id),
               coalesce(f.failed_metrics, '') AS failed_metrics
        FROM items i LEFT JOIN wide w ON w.item_id = i.item_id LEFT JOIN failed f ON f.item_id = i.item_id
        WHERE i.run_id = $run ORDER BY i.item_id""", {"run": run_id})


def failed_verdicts(path: str | Path, run_id: str) -> pd.DataFrame:
    """Items of a run with failed verdicts (judge failures): item_id, n_failed."""
    return _read(path, f"""SELECT item_id, count(*) AS n_failed FROM verdicts
                           WHERE run_id = ? AND status NOT IN {_NOT_FAILED} GROUP BY item_id""", [run_id])


def search_ids(path: str | Path, run_id: str, search: str = "",
               meta: tuple[str, str] | None = None) -> pd.DataFrame:
    """Ids of the items whose id, query or response contains `search` (any case) and whose metadata
    field meta[0] equals meta[1]."""
    where, params = ["run_id = $run"], {"run": run_id}
    if search:
        params["q"] = search.lower()
        where.append("(contains(lower(item_id), $q) OR contains(lower(query), $q) OR contains(lower(response), $q))")
    if meta:
        params["mk"], params["mv"] = f'$."{meta[0]}"', meta[1]
        where.append("json_extract_string(metadata, $mk) = $mv")
    return _read(path, f"SELECT item_id FROM items WHERE {' AND '.join(where)}", params)


# In-memory queries over per-item tables that came out of run_table(): a process-wide in-memory
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


def _level_sql(metric: str, want: str, thresholds: Mapping[str, float]) -> str:
    """SQL for 'metric is low/high': NULL when unscored, like diagnosis.level()."""
    if metric == "sp":  # SP1 when scored, else SP2, as diagnosis.level() reads "sp"
        return (f"(CASE WHEN sp1 IS NOT NULL THEN {_level_sql('sp1', want, thresholds)} "
                f"ELSE {_level_sql('sp2', want, thresholds)} END)")
    op = "<" if want == "low" else ">="
    return f"({_ident(metric)} {op} {_threshold(thresholds, metric)})"


def rule_sql(rule_id: str, thresholds: Mapping[str, float]) -> str:
    """A boolean SQL expression over run_table() columns: does this Table-2 rule fire?"""
    conds = " AND ".join(_level_sql(m, want, thresholds) for m, want in CONDITIONS[rule_id])
    return f"coalesce({conds}, FALSE)"


def _rules_cte(thresholds: Mapping[str, float]) -> str:
    """`base`: the run table `wide` plus one flag per Table-2 rule and the list of rules fired."""
    flags = ", ".join(f'{rule_sql(r, thresholds)} AS "{r}"' for r in RULE_IDS)
    fired = ", ".join(f"CASE WHEN {rule_sql(r, thresholds)} THEN '{r}' END" for r in RULE_IDS)
    return f"WITH base AS (SELECT *, {flags}, concat_ws(', ', {fired}) AS rules FROM wide)"


def filter_items(
    table: pd.DataFrame, metrics: Sequence[str], thresholds: Mapping[str, float], *,
    below: Sequence[str] = (), rules: Sequence[str] = (), levels: Mapping[str, str] | None = None,
    failed: pd.DataFrame | None = None, failed_only: bool = False, ids: pd.DataFrame | None = None,
    sort: str = "item_id", descending: bool = False, limit: int = 200, offset: int = 0,
) -> tuple[pd.DataFrame, int]:
    """One page of a run table, filtered and sorted, and the number of matching items.

    below: below threshold on ANY of these metrics; rules: firing ANY of these rules; levels:
    {metric: 'low'|'high'} that must ALL hold (a quadrant); failed: failed_verdicts() to count and
    filter judge failures; ids: only these item ids (a search_ids() result).
    """
    frames = {"wide": table, "failed": failed if failed is not None else pd.DataFrame(
        {"item_id": pd.Series([], dtype=str), "n_failed": pd.Series([], dtype="int64")})}
    where = ["TRUE"]
    if below:
        where.append("(" + " OR ".join(_level_sql(m, "low", thresholds) for m in below) + ")")
    known = [r for r in rules if r in CONDITIONS]
    if known:
        where.append("(" + " OR ".join(f'"{r}"' for r in known) + ")")
    for m, want in (levels or {}).items():
        where.append(f"coalesce({_level_sql(m, 'low' if want == 'low' else 'high', thresholds)}, FALSE)")
    if failed_only:
        where.append("(coalesce(f.n_failed, 0) > 0 OR b.failed_metrics <> '')")
    if ids is not None:
        frames["ids"] = ids
        where.append("b.item_id IN (SELECT item_id FROM ids)")
    order = "b.item_id" if sort == "item_id" else ("n_failed" if sort == "n_failed" else f"b.{_ident(sort)}")
    sql = f"""{_rules_cte(thresholds)}
        SELECT b.item_id, b.query, {', '.join('b.' + _ident(m) for m in metrics)},
               coalesce(f.n_failed, 0) AS n_failed, b.failed_metrics, b.rules, count(*) OVER () AS n_match
        FROM base b LEFT JOIN failed f ON f.item_id = b.item_id
        WHERE {' AND '.join(where)}
        ORDER BY {order} {'DESC' if descending else 'ASC'} NULLS LAST, b.item_id
        LIMIT {int(limit)} OFFSET {int(offset)}"""
    frame = frame_query(sql, frames)
    if len(frame) or offset == 0:
        return frame.drop(columns="n_match"), int(frame["n_match"].iloc[0]) if len(frame) else 0
    count = frame_query(f"SELECT count(*) AS n FROM ({sql.rsplit('LIMIT', 1)[0]})", frames)
    return frame.drop(columns="n_match"), int(count["n"].iloc[0])


def rule_counts(table: pd.DataFrame, thresholds: Mapping[str, float],
                pairs: Sequence[tuple[str, str]] = ()) -> pd.DataFrame:
    """Items per combination of fired Table-2 rules (one bool column per rule) and n.

    For each metric pair (x, y) in `pairs` it adds columns "x_low:x|y" and "y_low:x|y": True/False for
    low/high, NULL when unscored, so quadrant counts come from the same pass.
    """
    flags = [f'"{r}"' for r in RULE_IDS]
    for x, y in pairs:
        flags.append(f'{_level_sql(x, "low", thresholds)} AS "x_low:{x}|{y}"')
        flags.append(f'{_level_sql(y, "low", thresholds)} AS "y_low:{x}|{y}"')
    return frame_query(f"""{_rules_cte(thresholds)}
        SELECT {', '.join(flags)}, count(*) AS n FROM base GROUP BY ALL ORDER BY n DESC""", {"wide": table})


def sample_points(table: pd.DataFrame, metrics: Sequence[str], limit: int = 2000) -> pd.DataFrame:
    """At most `limit` items with their scores: a stable pseudo-random sample for scatter plots."""
    cols = ", ".join(_ident(m) for m in metrics)
    return frame_query(f"SELECT item_id, {cols} FROM wide ORDER BY hash(item_id) LIMIT {int(limit)}",
                       {"wide": table})


def correlations(table: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """Pearson correlation of every metric pair over the items that have both: columns a, b, r, n."""
    pairs = [(a, b) for i, a in enumerate(metrics) for b in metrics[i + 1:]]
    if not pairs:
        return pd.DataFrame(columns=["a", "b", "r", "n"])
    cols = ", ".join(f"corr({_ident(a)}, {_ident(b)}) AS \"r{i}\", count({_ident(a)} + {_ident(b)}) AS \"n{i}\""
                     for i, (a, b) in enumerate(pairs))
    row = frame_query(f"SELECT {cols} FROM wide", {"wide": table}).iloc[0]
    return pd.DataFrame([{"a": a, "b": b, "r": row[f"r{i}"], "n": int(row[f"n{i}"])}
                         for i, (a, b) in enumerate(pairs)])


def metric_overview(path: str | Path, run_id: str) -> pd.DataFrame:
    """Per metric: items in the run, items scored, and the mean score."""
    return _read(path, """
        SELECT metric, (SELECT count(*) FROM items WHERE run_id = $run) AS n_items,
               count(value) FILTER (WHERE NOT isnan(value)) AS n_scored,
               avg(value) FILTER (WHERE NOT isnan(value)) AS mean
        FROM scores WHERE run_id = $run GROUP BY metric""", {"run": run_id})


def score_distribution(path: str | Path, run_id: str) -> pd.DataFrame:
    """Scored values per metric with their counts (exact values, grouped): histograms, the share below
    any threshold and the bootstrap all come from this one small table."""
    return _read(path, """
        SELECT metric, value, count(*) AS n FROM scores
        WHERE run_id = $run AND value IS NOT NULL AND NOT isnan(value)
        GROUP BY ALL ORDER BY metric, value""", {"run": run_id})


def failure_counts(path: str | Path, run_id: str) -> pd.DataFrame:
    """Failures per metric and status, from scores (items) and from verdicts: metric, grain, status, n."""
    return _read(path, f"""
        SELECT metric, 'items' AS grain, status, count(*) AS n FROM scores
        WHERE run_id = $run AND status NOT IN {_NOT_FAILED} GROUP BY ALL
        UNION ALL
        SELECT metric, 'verdicts' AS grain, status, count(*) AS n FROM verdicts
        WHERE run_id = $run AND status NOT IN {_NOT_FAILED} GROUP BY ALL
        ORDER BY metric, grain, status""", {"run": run_id})


def metadata_keys(path: str | Path, run_id: str) -> list[str]:
    """The metadata field names used by a run's items."""
    frame = _read(path, """SELECT DISTINCT unnest(json_keys(metadata)) AS k FROM items
                           WHERE run_id = ? ORDER BY k LIMIT 100""", [run_id])
    return list(frame["k"])


def metadata_values(path: str | Path, run_id: str, key: str, limit: int = 200) -> pd.DataFrame:
    """The most common values of one metadata field, with counts."""
    return _read(path, f"""
        SELECT value, count(*) AS n
        FROM (SELECT json_extract_string(metadata, ?) AS value FROM items WHERE run_id = ?)
        WHERE value IS NOT NULL GROUP BY value ORDER BY n DESC, value LIMIT {int(limit)}""",
        [f'$."{key}"', run_id])


def item_detail(path: str | Path, run_id: str, item_id: str) -> dict[str, pd.DataFrame]:
    """Everything stored for one item: item, scores, components, verdicts, and the judge calls behind them."""
    ids = {"run": run_id, "item": item_id}
    with reading(path):
        item = _read(path, "SELECT * FROM items WHERE run_id = $run AND item_id = $item", ids)
        scores = _read(path, """SELECT metric, value, n_scored, n_total, status FROM scores
                                WHERE run_id = $run AND item_id = $item""", ids)
        comps = _read(path, """SELECT kind, idx, text, coalesce(parent, -1) AS parent, call_key FROM components
                               WHERE run_id = $run AND item_id = $item ORDER BY kind, idx""", ids)
        verdicts = _read(path, """
            SELECT metric, component_kind, component_idx, target, value, status, evidence, call_key, detail
            FROM verdicts WHERE run_id = $run AND item_id = $item
            ORDER BY metric, component_kind, component_idx, target""", ids)
        keys = sorted({k for k in verdicts["call_key"].dropna()} | {k for k in comps["call_key"].dropna()})
        calls = pd.DataFrame(columns=["key"])
        if keys:  # an IN list of constants lets DuckDB use the primary-key index, not scan every message
            marks = ", ".join("?" for _ in keys)
            calls = _read(path, f"""SELECT key, model, prompt_name, prompt_hash, messages, params, reply, status,
                                           prompt_tokens, completion_tokens, cost, latency_ms, error
                                    FROM judge_calls WHERE key IN ({marks})""", keys)
    return {"item": item, "scores": scores, "components": comps, "verdicts": verdicts, "calls": calls}


def item_neighbours(path: str | Path, run_id: str, item_id: str) -> tuple[str | None, str | None]:
    """The previous and next item ids of a run, in id order."""
    frame = _read(path, """SELECT (SELECT max(item_id) FROM items WHERE run_id = $run AND item_id < $item) AS prev,
                                  (SELECT min(item_id) FROM items WHERE run_id = $run AND item_id > $item) AS next""",
                  {"run": run_id, "item": item_id})
    prev, nxt = frame.iloc[0]
    return (None if pd.isna(prev) else prev, None if pd.isna(nxt) else nxt)


def _pairs_cte(metrics: Sequence[str]) -> str:
    """`pairs`: per metric and item id, the scores in run tables a and b, where both scored it
    (one join on item id, then one row per metric)."""
    cols = ", ".join(f"a.{_ident(m)} AS \"a:{m}\", b.{_ident(m)} AS \"b:{m}\"" for m in metrics)
    rows = " UNION ALL ".join(
        f"SELECT '{m}' AS metric, item_id, \"a:{m}\" AS a, \"b:{m}\" AS b FROM joined "
        f"WHERE \"a:{m}\" IS NOT NULL AND \"b:{m}\" IS NOT NULL" for m in metrics)
    return f"joined AS MATERIALIZED (SELECT item_id, {cols} FROM a JOIN b USING (item_id)), pairs AS ({rows})"


def compare_tables(a: pd.DataFrame, b: pd.DataFrame, metrics: Sequence[str],
                   thresholds: Mapping[str, float]) -> dict[str, pd.DataFrame]:
    """Two run tables aligned by item id, per metric over the items both scored, in one pass.

    summary: n_pairs, mean_a, mean_b, delta (b - a), n_worse (fell below the threshold in b),
    n_better (rose above it); deltas: per-item deltas rounded to 1e-3 with counts (for a paired bootstrap).
    """
    cases = " ".join(f"WHEN '{m}' THEN {_threshold(thresholds, m)}" for m in metrics)
    grouped = frame_query(f"""WITH {_pairs_cte(metrics)},
        t AS (SELECT *, CASE metric {cases} END AS th FROM pairs)
        SELECT metric, round(b - a, 3) AS delta, count(*) AS n, sum(a) AS sum_a, sum(b) AS sum_b,
               sum(b - a) AS sum_delta, count(*) FILTER (WHERE a >= th AND b < th) AS n_worse,
               count(*) FILTER (WHERE a < th AND b >= th) AS n_better
        FROM t GROUP BY ALL ORDER BY metric, delta""", {"a": a, "b": b})
    sums = grouped.groupby("metric", as_index=False)[["n", "sum_a", "sum_b", "sum_delta", "n_worse", "n_better"]].sum()
    summary = pd.DataFrame({
        "metric": sums["metric"], "n_pairs": sums["n"], "mean_a": sums["sum_a"] / sums["n"],
        "mean_b": sums["sum_b"] / sums["n"], "delta": sums["sum_delta"] / sums["n"],
        "n_worse": sums["n_worse"], "n_better": sums["n_better"]})
    return {"summary": summary, "deltas": grouped[["metric", "delta", "n"]]}


def crossed_items(a: pd.DataFrame, b: pd.DataFrame, metric: str, threshold: float, direction: str,
                  limit: int = 200) -> pd.DataFrame:
    """Items whose `metric` crossed `threshold` from a to b: direction 'worse' or 'better'."""
    th = _threshold({metric: threshold}, metric)
    cond = f"a >= {th} AND b < {th}" if direction == "worse" else f"a < {th} AND b >= {th}"
    return frame_query(f"""WITH {_pairs_cte([metric])}
        SELECT item_id, a, b, b - a AS delta FROM pairs WHERE {cond}
        ORDER BY abs(b - a) DESC, item_id LIMIT {int(limit)}""", {"a": a, "b": b})


def preference_agreement(better: pd.DataFrame, worse: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """Per metric, over items scored in both runs: how often the declared better run scores strictly higher."""
    return frame_query(f"""WITH {_pairs_cte(metrics)}
        SELECT metric, count(*) AS n_pairs, count(*) FILTER (WHERE a > b) AS agree,
               count(*) FILTER (WHERE a = b) AS ties, count(*) FILTER (WHERE a < b) AS disagree
        FROM pairs GROUP BY metric""", {"a": better, "b": worse})


def claim_verdicts(path: str | Path, run_id: str, item_id: str) -> pd.DataFrame:
    """The response claims of one item with their RP and GR verdicts (value, status) side by side."""
    return _read(path, """
        SELECT c.idx, c.text,
               any_value(v.value) FILTER (WHERE v.metric = 'rp') AS rp,
               any_value(v.status) FILTER (WHERE v.metric = 'rp') AS rp_status,
               any_value(v.value) FILTER (WHERE v.metric = 'gr') AS gr,
               any_value(v.status) FILTER (WHERE v.metric = 'gr') AS gr_status
        FROM components c LEFT JOIN verdicts v
          ON v.run_id = c.run_id AND v.item_id = c.item_id AND v.component_kind = 'claim'
         AND v.component_idx = c.idx
        WHERE c.run_id = ? AND c.item_id = ? AND c.kind = 'claim'
        GROUP BY c.idx, c.text ORDER BY c.idx""", [run_id, item_id])


def triage_notes(path: str | Path, run_id: str | None = None, item_id: str | None = None) -> pd.DataFrame:
    """Triage notes, newest first, optionally for one run or one item."""
    return _read(path, """
        SELECT created_at, run_id, item_id, label, component, note, author FROM triage
        WHERE ($run IS NULL OR run_id = $run) AND ($item IS NULL OR item_id = $item)
        ORDER BY created_at DESC""", {"run": run_id, "item": item_id})


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

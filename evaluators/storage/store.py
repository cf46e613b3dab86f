"""The DuckDB store: the only module that imports duckdb.

Connections are short-lived. DuckDB lets one read-write process lock the file, so writers open,
write one batch from DataFrames in a single transaction, and close; readers open read-only.
Both retry lock errors with jitter until a deadline, then raise StoreBusy.

This module holds the engine's side: the schema, the writes and the reads the engine and its CLI
need. The dashboard's reads are in evaluators/queries.py and run through query() here.
"""
from __future__ import annotations

import functools
import getpass
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
from dataclasses import dataclass
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
    Run,
    Score,
    Status,
    Verdict,
    check_run_name,
)

# Replacement scans off: a table missing from the file is an error, not a lookup of a Python
# variable of that name (a missing runs table would find this module's runs() function).
_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False,
           "python_enable_replacements": False}


class StoreBusy(RuntimeError):
    """Another process holds the DuckDB file past our deadline."""


class StoreMissing(FileNotFoundError):
    """A reader was pointed at a database file that does not exist."""


class NotADatabase(ValueError):
    """The path is not a RAG Triage database: a folder, a file of another format, another app's DuckDB file."""


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
    # 5: who started each run: the dashboard's login email, else the OS user; '' for older runs.
    """
    ALTER TABLE runs ADD COLUMN started_by VARCHAR DEFAULT '';
    """,
    # 6: how sure each verdict is (p = P(match is 1), how p was obtained, the judge tier that
    # decided it), and how many verdicts of a score fell inside the uncertainty band.
    """
    ALTER TABLE verdicts ADD COLUMN p DOUBLE;
    ALTER TABLE verdicts ADD COLUMN p_kind VARCHAR;
    ALTER TABLE verdicts ADD COLUMN tier VARCHAR;
    ALTER TABLE scores ADD COLUMN n_unsure INTEGER DEFAULT 0;
    """,
    # 7: people's labels of the judge: a Table-2 rule right or wrong on an item, or one verdict
    # corrected. Appended, never updated: the latest label per target counts, the history stays.
    """
    CREATE TABLE labels (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        rule VARCHAR,                     -- a rule label: 'T2.5'; else NULL
        metric VARCHAR,                   -- a verdict correction: the metric and component index
        component_idx INTEGER,
        label INTEGER NOT NULL,           -- 1 or 0
        note VARCHAR NOT NULL,
        author VARCHAR NOT NULL,
        origin VARCHAR NOT NULL,          -- review | import
        created_at TIMESTAMP NOT NULL
    );
    """,
    # 8: peer scores imported with a run's input (RAGAS result columns, DeepEval metric results,
    # Langfuse scores), kept beside ours and never mixed into them. Written with their item's row.
    """
    CREATE TABLE imported_scores (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        origin VARCHAR NOT NULL,          -- ragas | deepeval | langfuse
        metric VARCHAR NOT NULL,          -- the peer tool's own metric name
        value DOUBLE,                     -- NULL: the peer tool gave no score
        PRIMARY KEY (run_id, item_id, origin, metric)
    );
    """,
    # 9: the endpoint (api base) that answered each judge call, for judges behind several replicas;
    # NULL for the provider's own endpoint and for calls stored before.
    """
    ALTER TABLE judge_calls ADD COLUMN endpoint VARCHAR;
    """,
    # 10: each run's scores kept pivoted, one row per item, so the dashboard reads a run of a million
    # items without regrouping its scores and verdicts. Rewritten for the items of every write
    # (refresh_wide); the metric columns are added as metrics appear: "m" (the score, NULL when
    # unscored), "m:scored" and "m:unsure" (the verdicts behind it). migrate() fills it for old runs.
    """
    CREATE TABLE run_wide (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        query VARCHAR NOT NULL,           -- the first 120 characters
        n_failed BIGINT NOT NULL,         -- failed verdicts
        failed_metrics VARCHAR NOT NULL   -- the unscored metrics with their status: 'gr:timeout, sqc:unsure'
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


@contextmanager
def _transaction(con: Any) -> Iterator[Any]:
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
            with _transaction(con):
                had_wide = _has_table(con, "run_wide")
                con.execute(MIGRATIONS[version - 1])
                if not had_wide and _has_table(con, "run_wide"):  # the runs written before it
                    for (run_id,) in con.execute("SELECT DISTINCT run_id FROM items").fetchall():
                        refresh_wide(con, run_id)
                con.execute("INSERT INTO schema_version VALUES (?)", [version])
        return len(MIGRATIONS)


def _has_table(con: Any, table: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ?",
                            [table]).fetchone()[0])


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


def _file_problem(file: Path) -> Health | None:
    """What is wrong with a path as a DuckDB file, judged from its first bytes; None when it is one.

    Checked before DuckDB opens the file: DuckDB would open a CSV, JSON or Parquet path as an
    in-memory database of views, and look for a reader extension on a SQLite file.
    """
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
    return None


def check_duckdb_file(path: str | Path) -> None:
    """Refuse a path that is not an existing DuckDB database file, without opening it.

    Raises StoreMissing or NotADatabase naming what the path is.
    """
    problem = _file_problem(Path(path))
    if problem is not None:
        raise _refusal(Path(path), problem)


def require_database(path: str | Path, create: bool = False, deadline_s: float = 10.0) -> None:
    """Refuse, before any work and without writing, a path that is not a RAG Triage database.

    With `create` (a command that writes runs and so migrates), a file that does not exist yet is
    accepted when its folder exists, and so are a DuckDB file without any table and a database made
    by an older version. Raises StoreMissing, NotADatabase, or StoreBusy when another process holds
    the file past `deadline_s`.
    """
    file = Path(path)
    if create and not file.exists():
        if not file.parent.is_dir():
            raise NotADatabase(f"{file}: no such folder {file.parent}")
        if not os.access(file.parent, os.W_OK | os.X_OK):
            raise NotADatabase(f"{file}: cannot create a file in {file.parent} (permission denied)")
        return
    health = check_database(file, deadline_s)
    if health.state == "ok" or (create and health.state in ("empty", "older")):
        return
    raise _refusal(file, health)


def _refusal(file: Path, health: Health) -> Exception:
    """The one-line error for a path that is not a database this version can use."""
    if health.state == "missing":
        return StoreMissing(f"{file}: no such database file")
    why = {
        "folder": "is a folder, not a database file",
        "not_duckdb": f"not a DuckDB database file ({'a SQLite file' if 'SQLite' in health.detail else health.detail})",
        "damaged": f"a damaged database that DuckDB cannot read ({health.detail})",
        "empty": "not a RAG Triage database (no tables)",
        "foreign": f"not a RAG Triage database (a DuckDB file with other tables: {health.detail})",
        "older": f"made by an older version of RAG Triage (schema {health.version}, this version reads "
                 f"{len(MIGRATIONS)}): evaluating a file into it upgrades it",
        "newer": f"made by a newer version of RAG Triage (schema {health.version}, this version reads "
                 f"{len(MIGRATIONS)})",
        "incomplete": f"a RAG Triage database with missing parts ({health.detail})",
    }[health.state]
    return NotADatabase(f"{file}: {why}")


def check_database(path: str | Path, deadline_s: float = 3.0) -> Health:
    """Whether `path` is a RAG Triage database this version reads, checked without writing to it.

    Raises StoreBusy when another process holds the file past `deadline_s`; every other problem is
    a Health state. The file's first bytes are checked before DuckDB opens it, so a SQLite file or a
    text file never makes DuckDB look for a reader extension.
    """
    file = Path(path)
    problem = _file_problem(file)
    if problem is not None:
        return problem
    try:
        with connect(file, read_only=True, deadline_s=deadline_s) as con:
            found = _columns(con)
            if not found:
                return Health("empty")
            if "schema_version" not in found or "runs" not in found:
                return Health("foreign", ", ".join(sorted(found)[:5]) + (", ..." if len(found) > 5 else ""))
            version = con.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0
            # A cut-off copy opens and lists its tables, then fails on the first read of a lost block.
            # Used blocks, not total: a checkpoint cuts trailing free blocks off a healthy file.
            block_size, used = con.execute("SELECT block_size, used_blocks FROM pragma_database_size()").fetchone()
            if file.stat().st_size < _HEADER_BYTES + block_size * used:
                return Health("damaged", f"the file is cut short: {file.stat().st_size} of at least "
                                         f"{_HEADER_BYTES + block_size * used} bytes")
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
    # The fields themselves, not asdict(): its recursive deep copy was most of a group commit's CPU.
    frame = pd.DataFrame([[getattr(r, c) for c in columns] for r in records], columns=columns)
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
    frames = _batch_frames(run_id, items, components, verdicts, scores, calls)
    with connect(path) as con:
        with _transaction(con):
            for table, frame in frames:
                _insert(con, table, frame)
            refresh_wide(con, run_id, _written_ids(frames[1:]))


# The tables holding an item's results: a replaced or removed item's rows go from all of them.
_ITEM_TABLES = ("items", "components", "verdicts", "scores", "imported_scores", "run_wide")


def _batch_frames(run_id: str, items: Sequence[Item], components: Sequence[Component], verdicts: Sequence[Verdict],
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



def start_run(path: str | Path, run: Run, n_items: int) -> None:
    """Create the run row, or check that an existing run of that name is the same evaluation.

    Raises RunConflict when it is not: resuming it would mix two evaluations in one run.
    """
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
        owner = Owner(host, pid, f"{host}:{pid}:{uuid.uuid4().hex[:8]}")
        _MINTED.add(owner.token)
        return owner


# The owner tokens of the evaluations this process started: an owner with this process's host and pid
# but another token was a process before it that had the same pid (pid 1 in a restarted container).
_MINTED: set[str] = set()


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
    live process owns the run (it wrote within STALE_BEATS heartbeats and, on this host, its pid still
    runs: see _check_not_owned), ValueError when judge, params or prompts differ, and InputChanged when the input
    differs from the one the run recorded, unless `update`: then this input is recorded, removed items
    are deleted and changed or added ones evaluated. `retry_failed` adds the items with a failed step.
    Items whose stored results are for other content (an interrupted update) are always evaluated.
    """
    migrate(path)
    with connect(path) as con:
        with _transaction(con):
            claim = _claim(con, run, dict(hashes), owner, heartbeat_s, update, retry_failed)
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
        for table in _ITEM_TABLES if removed else ():
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
    check_run_name(run.name)  # every way into a new run: the CLI and the Evaluate page check it first
    con.execute("""INSERT INTO runs (run_id, judge, params, prompt_hashes, status, n_items, created_at, started_by)
                   VALUES (?, ?, ?, ?, 'running', ?, now()::TIMESTAMP, ?)""",
                [run.name, run.judge, json.dumps(run.params, sort_keys=True),
                 json.dumps(run.prompt_hashes, sort_keys=True), n_items, _STARTED_BY.get() or os_user()])


def _check_same_run(run: Run, row: Sequence[Any]) -> None:
    """An existing run continues only with the judge, params and prompt files it was started with."""
    judge, params, hashes = row
    if judge != run.judge or json.loads(params) != run.params:
        raise RunConflict(run.name, f"run {run.name!r} already exists with judge {judge} and params {params}")
    if json.loads(hashes) != run.prompt_hashes:
        raise RunConflict(run.name, f"run {run.name!r} was started with other prompt files")


def _check_not_owned(run_id: str, owner: Owner, status: str, current: str | None, pid: int | None,
                     host: str | None, age_s: float | None, heartbeat_s: float | None) -> None:
    """Raise RunBusy while another live evaluation owns the run.

    An owner lives only while its heartbeat is fresh (it wrote within STALE_BEATS heartbeats), whatever
    its pid: a pid that runs may be another process's by now (pid 1 in every container, on one hostname).
    On this host a fresh owner whose pid is gone is dead too, and so is one with this process's pid that
    this process did not start (the process before it had the pid).
    """
    if status != "running" or current is None or current == owner.token:
        return
    alive = age_s is not None and age_s <= STALE_BEATS * (heartbeat_s or 0.0)
    if alive and host == owner.host and pid is not None:
        alive = current in _MINTED if pid == owner.pid else _pid_alive(pid)
    if alive:
        last = "" if age_s is None else f", last write {age_s:.0f} s ago"
        raise RunBusy(f"run {run_id!r} is being evaluated by another process (pid {pid} on {host}{last}; "
                      f"one that stops writing for {STALE_BEATS * (heartbeat_s or 0.0):.0f} s counts as gone)")


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
        with _transaction(con):
            rows = con.execute("SELECT owner FROM runs WHERE run_id = ?", [run_id]).fetchall()
            owned = bool(rows) and rows[0][0] == owner.token
            if owned:
                stale = [i.id for i in items if i.id in replace]
                for table in _ITEM_TABLES if stale else ():
                    con.execute(f"DELETE FROM {table} WHERE run_id = ? AND list_contains(?, item_id)", [run_id, stale])
                con.execute("UPDATE runs SET heartbeat_at = now()::TIMESTAMP WHERE run_id = ?", [run_id])
            for table, frame in frames if owned else frames[:1]:
                _insert(con, table, frame)
            if owned:
                refresh_wide(con, run_id, _written_ids(frames[1:]))
    if not owned:
        raise RunBusy(f"run {run_id!r} was taken over by another process; this evaluation stopped "
                      "(its judge calls are stored)")


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
        with _transaction(con):
            _insert(con, "labels", frame)


def os_user() -> str:
    """The OS login name, or '' where there is none."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container user without a passwd entry or login name
        return ""


# Who start_run() records as starting a run: the OS user, unless a caller says otherwise for the
# runs it starts (the dashboard names its logged-in user; see started_by()).
_STARTED_BY: ContextVar[str | None] = ContextVar("started_by", default=None)


@contextmanager
def started_by(user: str) -> Iterator[None]:
    """Record `user` as the one who starts the runs begun inside this block (in this thread)."""
    token = _STARTED_BY.set(user)
    try:
        yield
    finally:
        _STARTED_BY.reset(token)


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
        with _transaction(con):
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


def column(metric: str) -> str:
    """A metric id as a quoted SQL identifier; ids are lower-case words, anything else is refused."""
    if not metric or not all(ch.isalnum() or ch == "_" for ch in metric) or metric.lower() != metric:
        raise ValueError(f"not a metric id: {metric!r}")
    return f'"{metric}"'


# Statuses that are not a failure: scored, or the metric does not apply to this item.
NOT_FAILED = "('ok', 'not_applicable')"












def count_column(metric: str, count: str) -> str:
    """The quoted name of a run table's count column: '"gr:scored"' or '"gr:unsure"' (checked metric id)."""
    if count not in ("scored", "unsure"):
        raise ValueError(f"not a count column: {count!r}")
    return f'"{column(metric)[1:-1]}:{count}"'


def wide_sql(metrics: Sequence[str], scores: str, items: str = "") -> str:
    """The per-item score table of run $run as SQL (run_scores_wide() describes its columns); `items`
    narrows it to some items: a condition on the column {id}, added to every scan."""
    cols = ",\n".join(
        f"max(value) FILTER (WHERE metric = '{m}' AND NOT isnan(value)) AS {column(m)}, "  # ids checked
        f"max(n_scored) FILTER (WHERE metric = '{m}') AS {count_column(m, 'scored')}, "
        f"max(coalesce(n_unsure, 0)) FILTER (WHERE metric = '{m}') AS {count_column(m, 'unsure')}"
        for m in metrics)
    mine, theirs = items.format(id="item_id"), items.format(id="i.item_id")
    return f"""
        WITH s AS (SELECT * FROM {scores} WHERE run_id = $run {mine}),
        wide AS (SELECT item_id{', ' + cols if cols else ''} FROM s GROUP BY item_id),
        failed AS (SELECT item_id, string_agg(metric || ':' || status, ', ' ORDER BY metric) AS failed_metrics
                   FROM s WHERE status NOT IN {NOT_FAILED} GROUP BY item_id),
        verdicts_failed AS (SELECT item_id, count(*) AS n_failed FROM verdicts
                            WHERE run_id = $run {mine} AND status NOT IN {NOT_FAILED} GROUP BY item_id)
        SELECT i.item_id, left(i.query, 120) AS query, {'w.* EXCLUDE (item_id),' if cols else ''}
               coalesce(v.n_failed, 0) AS n_failed, coalesce(f.failed_metrics, '') AS failed_metrics
        FROM items i LEFT JOIN wide w ON w.item_id = i.item_id LEFT JOIN failed f ON f.item_id = i.item_id
        LEFT JOIN verdicts_failed v ON v.item_id = i.item_id
        WHERE i.run_id = $run {theirs} ORDER BY i.item_id"""






def _written_ids(frames: Sequence[tuple[str, pd.DataFrame]]) -> list[str]:
    """The item ids a write touched: those of its items, verdicts and scores rows."""
    return sorted({i for table, frame in frames if table in ("items", "verdicts", "scores") and not frame.empty
                   for i in frame["item_id"].unique()})


def is_metric_id(metric: str) -> bool:
    """Whether a stored metric id can become a column: a file from elsewhere may hold anything."""
    try:
        column(metric)
    except ValueError:
        return False
    return True


_WIDE_FIXED = ("run_id", "item_id", "query", "n_failed", "failed_metrics")  # run_wide's own columns
_INLINE_IDS = 1000  # up to this many ids go into the SQL as constants (an index lookup), more as a joined frame


def refresh_wide(con: Any, run_id: str, item_ids: Sequence[str] | None = None) -> None:
    """Rewrite the run_wide rows of these items of a run (None: every item) from its stored items,
    scores and verdicts, inside the caller's transaction: run_wide equals run_scores_wide() after
    every write. A metric seen for the first time gets its columns; an id that is not a metric id
    (a file from elsewhere) gets none and stays in the scores table only."""
    if item_ids is not None and not item_ids:
        return
    params: dict[str, Any] = {"run": run_id}
    items = ""
    if item_ids is not None and len(item_ids) <= _INLINE_IDS:
        params.update({f"i{k}": i for k, i in enumerate(item_ids)})
        items = f"AND {{id}} IN ({', '.join(f'$i{k}' for k in range(len(item_ids)))})"
    elif item_ids is not None:
        con.register("_wide_ids", pd.DataFrame({"item_id": list(item_ids)}))
        items = "AND {id} IN (SELECT item_id FROM _wide_ids)"
    mine = items.format(id="item_id")
    try:
        found = [m for (m,) in con.execute(f"SELECT DISTINCT metric FROM scores WHERE run_id = $run {mine}",
                                           params).fetchall()]
        metrics = [m for m in found if is_metric_id(m) and m not in _WIDE_FIXED]
        present = {c for (c,) in con.execute("""SELECT column_name FROM duckdb_columns()
                                               WHERE schema_name = 'main' AND table_name = 'run_wide'""").fetchall()}
        for m in metrics:
            for name, kind in ((column(m), "DOUBLE"), (count_column(m, "scored"), "INTEGER"),
                               (count_column(m, "unsure"), "INTEGER")):
                if name.strip('"') not in present:
                    con.execute(f"ALTER TABLE run_wide ADD COLUMN {name} {kind}")
        con.execute(f"DELETE FROM run_wide WHERE run_id = $run {mine}", params)
        rows = wide_sql(metrics, "scores", items)
        con.execute(f"INSERT INTO run_wide BY NAME SELECT $run AS run_id, * FROM ({rows})", params)
    finally:
        if item_ids is not None and len(item_ids) > _INLINE_IDS:
            con.unregister("_wide_ids")


def write_frames(path: str | Path, frames: Mapping[str, pd.DataFrame]) -> None:
    """Bulk-insert prepared DataFrames ({table: frame}, columns by name) in ONE transaction.

    For generated data (the scale benchmark) where building a record object per row would cost more
    than the insert itself; the engine writes through write_batch().
    """
    with connect(path) as con:
        with _transaction(con):
            for table, frame in frames.items():
                if table not in ("runs", "items", "components", "verdicts", "scores", "judge_calls", "triage"):
                    raise ValueError(f"unknown table {table!r}")
                _insert(con, table, frame)
            written = [(t, f) for t, f in frames.items() if t in ("items", "verdicts", "scores") and not f.empty]
            for run_id in sorted({r for _, f in written for r in f["run_id"].unique()}):
                refresh_wide(con, run_id, _written_ids([(t, f[f["run_id"] == run_id]) for t, f in written]))


def replace_grammar_correctness(path: str | Path, run_id: str, frame: pd.DataFrame) -> None:
    """Replace the run's rows of grammar_correctness with `frame` (columns by name), in one transaction."""
    migrate(path)
    with connect(path) as con:
        with _transaction(con):
            con.execute("DELETE FROM grammar_correctness WHERE run_id = ?", [run_id])
            _insert(con, "grammar_correctness", frame)


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

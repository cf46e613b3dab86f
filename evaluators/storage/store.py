"""The DuckDB store: the only module that imports duckdb.

Connections are short-lived. DuckDB lets one read-write process lock the file, so writers open,
write one batch from DataFrames in a single transaction, and close; readers open read-only (the
dashboard's reader is parked between page runs, until a writer waits for the file or for KEEP_S
seconds: reading()). Both retry lock errors with jitter until a deadline, then raise StoreBusy.

This module holds the connections, transactions and the migrations' application; query() and
frame_query() run the named reads of evaluators/storage/queries/. Beside it: writes.py (every
write), schema.py (the migrations), health.py (what a file is), ownership.py (a run's owner) and
wide.py (each run's per-item score table).
"""

from __future__ import annotations

import atexit
import os
import random
import threading
import time
from collections.abc import Mapping
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

import duckdb
import pandas as pd

from evaluators.storage.schema import MIGRATIONS
from evaluators.storage.wide import add_columns, metric_columns, refresh_wide, wide_metrics

# Replacement scans off: a table missing from the file is an error, not a lookup of a Python
# variable of that name (a missing runs table would find this module's runs() function).
_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "python_enable_replacements": False,
}


# A database from another machine is opened with no access to this machine's files, so that a view, macro
# or generated column in it cannot read them; the configuration is locked so that nothing turns it back on.
_SEALED: dict[str, str | bool | int | float | list[str]] = {"enable_external_access": False, "lock_configuration": True}


class StoreBusy(RuntimeError):
    """Another process holds the DuckDB file past our deadline."""


class StoreMissing(FileNotFoundError):
    """A reader was pointed at a database file that does not exist."""


class NotADatabase(ValueError):
    """The path is not a RAG Triage database: a folder, a file of another format, another app's DuckDB file."""


# DuckDB's base error: what reading a damaged file raises (health.py tells it from a busy file).
Error = duckdb.Error


class TimeUp(RuntimeError):
    """A sealed() connection's time ran out: the statement running was interrupted."""


def _is_busy(exc: Exception) -> bool:
    """Another process holds the file lock, or (in this process) a read-only and a read-write
    connection to one file refuse each other: both pass when the other side closes."""
    text = str(exc).lower()
    return ("lock" in text and ("could not set" in text or "conflicting" in text)) or "different configuration" in text


def _open(path: str, read_only: bool, deadline_s: float, sealed: bool = False) -> Any:
    """A new connection, retrying DuckDB's file lock with jitter until `deadline_s` (a reader of a file
    that does not exist raises StoreMissing: DuckDB would create it); `sealed`: with no file access."""
    if read_only and not Path(path).exists():
        raise StoreMissing(f"{path}: no such database file")
    give_up = time.monotonic() + deadline_s
    delay, signalled = 0.02, False
    while True:
        if not read_only:  # this process's parked reader refuses a writer: close it on every try
            _unpark(path)
        try:
            con = duckdb.connect(path, read_only=read_only, config={**_CONFIG, **(_SEALED if sealed else {})})
        except (duckdb.IOException, duckdb.ConnectionException) as exc:
            if not _is_busy(exc):
                raise
            if time.monotonic() >= give_up:
                raise StoreBusy(f"{path}: busy, another process is writing (gave up after {deadline_s:g} s)") from None
            if not read_only:  # another process's parked reader sees it and lets the file go
                signalled = _signal_waiting(path) or signalled
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)
        else:
            if signalled:  # best effort, as the signal: a later writer's touch is newer than any reader
                with suppress(OSError):
                    _waiting_file(path).unlink()
            return con


@contextmanager
def connect(path: str | Path, read_only: bool = False, deadline_s: float = 20.0, sealed: bool = False) -> Iterator[Any]:
    """Open a short-lived connection, retrying DuckDB's file lock with jitter until `deadline_s`. `sealed`:
    a database from another machine, opened with no access to any other file."""
    path = str(path)
    if not read_only:
        _release_shared(path)
    con = _open(path, read_only, deadline_s, sealed)
    try:
        yield con
    finally:
        con.close()


@contextmanager
def sealed(attach: Mapping[str, tuple[str | Path, bool]], seconds: float) -> Iterator[Sealed]:
    """An in-memory connection with each database of `attach` ({alias: (path, writable)}) attached, then
    sealed: no access to any other file, the configuration locked. Past `seconds` the statement running
    is interrupted and raises TimeUp, as does every later one."""
    con = duckdb.connect(":memory:", config=_CONFIG)
    timed = Sealed(con, seconds)
    timer = threading.Timer(max(seconds, 0.0), timed.stop)
    try:
        for alias, (path, writable) in attach.items():
            con.execute(f"ATTACH ? AS {alias} ({'READ_WRITE' if writable else 'READ_ONLY'})", [str(path)])
        for name, value in _SEALED.items():  # after ATTACH, which opens a file itself
            con.execute(f"SET {name} = {str(value).lower()}")
        timer.start()
        yield timed
    finally:
        timer.cancel()
        con.close()


class Sealed:
    """A sealed() connection whose time may run out: execute() raises TimeUp once it has."""

    def __init__(self, con: Any, seconds: float) -> None:
        self._con, self.seconds, self._up = con, seconds, threading.Event()

    def stop(self) -> None:
        """The time is up: interrupt the statement running, refuse every later one."""
        self._up.set()
        self._con.interrupt()

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """As DuckDB's execute(), or TimeUp."""
        try:
            if not self._up.is_set():
                return self._con.execute(sql, params) if params is not None else self._con.execute(sql)
        except duckdb.InterruptException:
            if not self._up.is_set():
                raise
        raise TimeUp(f"stopped after {self.seconds:g} s")


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


def migrate(path: str | Path, sealed: bool = False) -> int:
    """Create or upgrade the schema; returns the schema version. `sealed`: a database from another machine
    (see connect)."""
    with connect(path, sealed=sealed) as con:
        con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = con.execute("SELECT max(version) FROM schema_version").fetchone()
        current = row[0] or 0
        for version in range(current + 1, len(MIGRATIONS) + 1):
            with transaction(con):
                con.execute(MIGRATIONS[version - 1])
                if version == len(MIGRATIONS) and has_table(con, "run_wide"):
                    _complete_wide(con)
                con.execute("INSERT INTO schema_version VALUES (?)", [version])
        return len(MIGRATIONS)


def _complete_wide(con: Any) -> None:
    """Once the schema is whole: run_wide gets the columns a later migration adds for the metrics it holds,
    and the rows of the runs written before it (queries written for this schema, so only at its end)."""
    add_columns(con, wide_metrics(con))
    for (run_id,) in con.execute(
        "SELECT DISTINCT run_id FROM items EXCEPT SELECT DISTINCT run_id FROM run_wide"
    ).fetchall():
        refresh_wide(con, run_id)


def has_table(con: Any, table: str) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ?", [table]
        ).fetchone()[0]
    )


FAILED_STATUSES = ("unparsed", "error", "timeout")  # a judge step that produced no verdict


# ---------------------------------------------------------------- reads

# Opening a DuckDB connection costs about 0.1 s here, more than most dashboard queries, so a page
# reads its cache misses through one connection: reading() shares it within a block.
_SHARED: ContextVar[dict[str, Any] | None] = ContextVar("shared_reader", default=None)

# A page run's reader, parked when its block ends, is taken by the next block that keeps it: DuckDB
# then neither loads the file's catalog again (30-100 ms at a million items) nor drops the blocks it
# has read. Parked, it holds the file's read lock, so it lets the file go as soon as a writer waits for
# it: a writer in this process closes it first, and one in another process, refused, touches the file's
# waiting file (_signal_waiting), which the parked reader looks for every WAIT_POLL_S. Idle for KEEP_S,
# it is closed anyway (a writer that is not ours waits that long at most).
KEEP_S, WAIT_POLL_S = 60.0, 0.1


class _Parked(NamedTuple):
    con: Any
    version: int  # the file's, when parked (version())
    since_ns: int  # when parked (time.time_ns(), as a waiting file's mtime)
    stop: threading.Event  # set when it is taken or closed: its watcher returns


_PARKED: dict[str, _Parked] = {}
_PARKED_LOCK = threading.Lock()


def _waiting_file(path: str) -> Path:
    """The file a refused writer touches beside the database (a dot file: the inbox skips it)."""
    return Path(path).with_name(f".{Path(path).name}.writer-waiting")


def _signal_waiting(path: str) -> bool:
    """Tell other processes' parked readers that a writer waits for `path`; whether it could (best effort:
    a folder we cannot write to leaves the writer to wait for their KEEP_S)."""
    try:
        _waiting_file(path).touch()
    except OSError:
        return False
    return True


def _writer_waits(path: str, since_ns: int) -> bool:
    """Whether a writer was refused `path` since `since_ns` (time.time_ns())."""
    try:
        return _waiting_file(path).stat().st_mtime_ns >= since_ns
    except OSError:
        return False


def _take(path: str) -> Any | None:
    """The reader parked on `path`, if the file is unchanged since it was parked and no writer waits for it
    (else it is closed)."""
    with _PARKED_LOCK:
        parked = _PARKED.pop(path, None)
    if parked is None:
        return None
    parked.stop.set()
    if parked.version == version(path) and not _writer_waits(path, parked.since_ns):
        return parked.con
    parked.con.close()
    return None


def _park(path: str, con: Any) -> None:
    """Park a reader on `path` until a writer waits for the file or it is idle for KEEP_S (_watch); closed at
    once when one is parked there already."""
    with _PARKED_LOCK:
        if path not in _PARKED:
            parked = _PARKED[path] = _Parked(con, version(path), time.time_ns(), threading.Event())
            threading.Thread(target=_watch, args=(path, parked), daemon=True).start()
            return
    con.close()


def _watch(path: str, parked: _Parked) -> None:
    """Close the reader parked on `path` once a writer has waited for the file since it was parked, or
    after KEEP_S; return when it is taken or closed first (its `stop`)."""
    idle_until = time.monotonic() + KEEP_S
    while not parked.stop.wait(WAIT_POLL_S):
        if time.monotonic() >= idle_until or _writer_waits(path, parked.since_ns):
            _unpark(path, parked.con)
            return


def _unpark(path: str, con: Any = None) -> None:
    """Close the reader parked on `path` (only if it is `con`, when given: a watcher's own reader)."""
    with _PARKED_LOCK:
        parked = _PARKED.get(path)
        if parked is None or (con is not None and parked.con is not con):
            return
        del _PARKED[path]
    parked.stop.set()
    parked.con.close()


@atexit.register
def _unpark_all() -> None:  # a process that ends within KEEP_S of a page run closes its reader itself
    for path in list(_PARKED):
        _unpark(path)


@contextmanager
def reading(path: str | Path, keep: bool = False) -> Iterator[None]:
    """Let the reads of `path` inside this block share one read-only connection, opened on first use
    (or taken from where the last block that kept it parked it). With `keep` the connection is parked
    when the block ends, however it ends (st.stop() and st.switch_page() end a page run by raising),
    unless DuckDB raised in it: then it is closed. A block inside another on the same file is part of it."""
    outer = _SHARED.get()
    if outer is not None and outer["path"] == str(path):
        yield
        return
    shared: dict[str, Any] = {"path": str(path), "con": None}
    token = _SHARED.set(shared)
    failed = False
    try:
        yield
    except duckdb.Error:
        failed = True  # a reader that failed a read is not handed on
        raise
    finally:
        _SHARED.reset(token)
        con = shared["con"]
        if con is not None:
            if keep and not failed:
                _park(str(path), con)
            else:
                con.close()


def _release_shared(path: str) -> None:
    """Close the read-only connection that reading() holds open on `path` in this context, if any: in one
    process DuckDB refuses a writer while a reader of the file is open, so a write inside the block would
    wait for itself. The block's next read opens another."""
    shared = _SHARED.get()
    if shared is not None and shared["path"] == path and shared["con"] is not None:
        shared["con"].close()
        shared["con"] = None


@contextmanager
def _reader(path: str | Path, deadline_s: float = 10.0) -> Iterator[Any]:
    """A read-only connection to `path`: the one reading() shares inside its block, else a new one."""
    shared = _SHARED.get()
    if shared is not None and shared["path"] == str(path):
        if shared["con"] is None:
            shared["con"] = _take(str(path)) or _open(str(path), True, deadline_s)
        yield shared["con"]
        return
    with connect(path, read_only=True, deadline_s=deadline_s) as con:
        yield con


def query(
    path: str | Path,
    sql: str,
    params: Mapping[str, Any] | Sequence[Any] = (),
    deadline_s: float = 10.0,
    arrow: bool = False,
) -> pd.DataFrame:
    """Run one read-only query and return a DataFrame; named $params may be given as a dict.

    Inside reading(path) it runs on the block's shared connection. `arrow`: fetched through Arrow (a
    million rows in a tenth of a second, where building Python rows takes seconds); numbers come as
    floats, NULL as NaN or None.
    """
    with _reader(path, deadline_s) as con:
        return _fetch(con, sql, params if isinstance(params, Mapping) else list(params), arrow)


def literal(text: str) -> str:
    """A text as an SQL string literal, for the statements that take no parameter (a view, COPY's file)."""
    return "'" + text.replace("'", "''") + "'"


def version(path: str | Path) -> int:
    """When the database or its write-ahead log was last written (the newest mtime in ns, 0 when neither
    exists): a read of the file is current while this is unchanged."""
    return max((p.stat().st_mtime_ns for p in (Path(path), Path(f"{path}.wal")) if p.exists()), default=0)


def write_parquet(path: str | Path, sql: str, params: Mapping[str, Any], target: Path) -> None:
    """Write one read-only query's rows to a Parquet file outside the database, whole or not at all (a
    temporary file, then renamed). Raises OSError when the file cannot be written."""
    part = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        with _reader(path) as con:
            con.execute(f"COPY ({sql}) TO {literal(str(part))} (FORMAT parquet, COMPRESSION zstd)", params)
        os.replace(part, target)
    except duckdb.IOException as exc:
        raise OSError(f"{target}: {exc}") from exc
    finally:
        part.unlink(missing_ok=True)


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
    reads where it lies, with a score column, its two count columns and its expected value for each of
    these metrics (the caller names them all, in order: queries.runs.stored_table())."""

    path: str
    run_id: str
    metrics: tuple[str, ...]


def _stored_view(con: Any, name: str, run: StoredRun) -> None:
    """A temporary view `name` on this connection: the run's rows of run_wide, a NULL column for a
    metric no run has (so the run tables of one view have the same columns)."""
    stored = {d[0] for d in con.execute("SELECT * FROM run_wide LIMIT 0").description}
    cols = ", ".join(
        c if c.strip('"') in stored else f"NULL::{kind} AS {c}" for m in run.metrics for c, kind in metric_columns(m)
    )
    con.execute(f"""CREATE OR REPLACE TEMP VIEW {name} AS SELECT item_id, query, {cols}, n_failed, failed_metrics
                    FROM run_wide WHERE run_id = {literal(run.run_id)}""")


def frame_query(
    sql: str,
    frames: Mapping[str, pd.DataFrame | StoredRun],
    params: Mapping[str, Any] | Sequence[Any] = (),
    arrow: bool = False,
) -> pd.DataFrame:
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

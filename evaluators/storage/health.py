"""What a database file is, checked before anything is written: a RAG Triage database of this version,
or what else (missing, a folder, another format, damaged, another application's, older or newer)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, NamedTuple

from evaluators.storage import store
from evaluators.storage.schema import MIGRATIONS
from evaluators.storage.store import NotADatabase, StoreMissing, connect


class Health(NamedTuple):
    """What check_database() found: a state, and for a problem the detail a message names."""

    state: str  # ok | missing | empty | folder | not_duckdb | damaged | foreign | older | newer | incomplete
    detail: str = ""
    version: int | None = None


_HEADER_BYTES = 3 * 4096  # DuckDB's file header and its two database headers, before the first block


@functools.cache
def _expected_columns() -> dict[str, frozenset[str]]:
    """The tables and columns the migrations build, read from an in-memory database they built."""
    with store.connect(":memory:") as con:
        for sql in MIGRATIONS:
            con.execute(sql)
        return _columns(con)


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
                return Health(
                    "damaged",
                    f"the file is cut short: {file.stat().st_size} of at least "
                    f"{_HEADER_BYTES + block_size * used} bytes",
                )
    except store.Error as exc:
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

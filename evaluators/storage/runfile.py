"""A run as one file (docs/run-file.md): export_run() writes a run with every row of it into a DuckDB file
of its own, a RAG Triage database holding that run only, with a run_file table saying what it is;
import_run() adds such a file's run to another database in one transaction.

Every table with a run_id column travels (a table a later migration adds too), with the judge calls behind
the run's components, verdicts and GRAMMAR rows. run_wide, the per-item score table, is rebuilt on both
sides by refresh_wide(), as every write does. A file of an older schema is upgraded on a copy by the
store's own migrations; a newer one is refused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from evaluators.core.records import run_name_problem
from evaluators.storage import health
from evaluators.storage.ownership import os_user
from evaluators.storage.schema import MIGRATIONS
from evaluators.storage.store import Error, NotADatabase, StoreMissing, connect, migrate, transaction
from evaluators.storage.wide import refresh_wide

META = "run_file"  # the file's own table: one row saying which run it holds, from what and whom
REBUILT = ("run_wide", META)  # per-run tables not copied: rebuilt (run_wide) or the file's own
# The runs row's fields that tell one evaluation from another: equal, a second import changes nothing.
SAME_RUN = ("judge", "params", "prompt_hashes", "status", "n_items", "created_at", "finished_at", "stats")


class RunFileError(ValueError):
    """A file that is not a run file this version imports, or a run name already taken: one line."""


@dataclass(frozen=True)
class RunFileInfo:
    """What a run file's run_file row says."""

    run_id: str
    schema_version: int
    tool_version: str
    exported_at: datetime
    started_by: str


@dataclass(frozen=True)
class Imported:
    """What import_run() did: the run's name here, whether it was added (False: already here, a no-op),
    the rows added per table and who sent it."""

    run_id: str
    added: bool
    rows: dict[str, int]
    started_by: str


def tool_version() -> str:
    """The installed package's version; 'checkout' when run from a source tree."""
    try:
        return metadata.version("rag-triage")
    except metadata.PackageNotFoundError:
        return "checkout"


def _run_tables(con: Any, database: str) -> list[str]:
    """The base tables of a database (attached under `database`) with a run_id column, but REBUILT."""
    return [
        t
        for (t,) in con.execute(
            """SELECT DISTINCT table_name FROM duckdb_columns() JOIN duckdb_tables() USING (database_name, schema_name, table_name)
               WHERE database_name = ? AND schema_name = 'main' AND column_name = 'run_id' ORDER BY table_name""",
            [database],
        ).fetchall()
        if t not in REBUILT
    ]


def _calls_sql(calls: str, rows: str) -> str:
    """The judge calls in database `calls` behind the run rows in database `rows` (its components,
    verdicts and GRAMMAR rows): the run's only rows without a run_id."""
    return f"""SELECT * FROM {calls}.judge_calls WHERE key IN (
                   SELECT call_key FROM {rows}.components UNION SELECT call_key FROM {rows}.verdicts
                   UNION SELECT call_key FROM {rows}.grammar_correctness)"""


def export_run(db: str | Path, run_id: str, out: str | Path) -> dict[str, int]:
    """Write run `run_id` of `db` with every row of it into the run file `out`; returns the rows per table.

    The file is written under a temporary name beside `out` (a leading dot and '.part') and renamed into
    place, so an inbox that watches the folder never sees it half-written. Raises KeyError when the run
    does not exist; the source is only read, through a read-only connection that waits out a writer.
    """
    out = Path(out)
    part = out.with_name(f".{out.name}.part")
    part.unlink(missing_ok=True)
    try:
        migrate(part)
        rows = _copy_out(db, run_id, part)
        with connect(part) as con:
            with transaction(con):
                refresh_wide(con, run_id)
                who = con.execute("SELECT started_by FROM runs").fetchone()[0] or os_user()
                con.execute("UPDATE runs SET started_by = ?", [who])  # who sent it, where the run named nobody
                con.execute(f"""CREATE TABLE {META} (run_id VARCHAR NOT NULL, schema_version INTEGER NOT NULL,
                                tool_version VARCHAR NOT NULL, exported_at TIMESTAMP NOT NULL, started_by VARCHAR NOT NULL)""")
                con.execute(
                    f"INSERT INTO {META} VALUES (?, ?, ?, ?, ?)",
                    [run_id, len(MIGRATIONS), tool_version(), datetime.now(timezone.utc).replace(tzinfo=None), who],
                )
            con.execute("CHECKPOINT")
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)
        Path(f"{part}.wal").unlink(missing_ok=True)
    return rows


def _copy_out(db: str | Path, run_id: str, part: Path) -> dict[str, int]:
    """Copy the run's rows and its judge calls from `db` into the new file `part`, in one transaction."""
    with connect(db, read_only=True) as con:
        con.execute("ATTACH ? AS _run_file (READ_WRITE)", [str(part)])
        try:
            with transaction(con):
                if not con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchone()[0]:
                    raise KeyError(run_id)
                mine = con.execute("SELECT current_database()").fetchone()[0]  # the file's stem
                theirs = set(_run_tables(con, "_run_file"))
                rows = {
                    t: con.execute(
                        f'INSERT INTO _run_file."{t}" BY NAME SELECT * FROM main."{t}" WHERE run_id = ?', [run_id]
                    ).fetchone()[0]
                    for t in _run_tables(con, mine)
                    if t in theirs
                }
                rows["judge_calls"] = con.execute(
                    f"INSERT INTO _run_file.judge_calls BY NAME {_calls_sql(_quoted(mine), '_run_file')}"
                ).fetchone()[0]
        finally:
            con.execute("DETACH _run_file")
    return rows


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_info(file: str | Path) -> RunFileInfo:
    """What run file `file` holds, checked: a DuckDB file, not damaged, a RAG Triage database of this
    schema or an older one, with a run_file row naming a run it holds. Raises RunFileError (one line
    naming the file) for anything else; StoreBusy when it is held past the store's deadline."""
    file = Path(file)
    state = health.check_database(file)
    if state.state == "newer":
        raise RunFileError(
            f"{file}: a run file from a newer version of RAG Triage (schema {state.version}, this version "
            f"reads {len(MIGRATIONS)}): upgrade RAG Triage here to import it"
        )
    if state.state not in ("ok", "older"):
        try:
            health.require_database(file)
        except (StoreMissing, NotADatabase) as exc:
            raise RunFileError(f"not a run file: {exc}") from None
    try:
        with connect(file, read_only=True) as con:
            has_meta = con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ?", [META]
            ).fetchone()[0]
            if not has_meta:
                raise RunFileError(f"{file}: not a run file (a RAG Triage database without its {META} table)")
            meta = con.execute(f"SELECT run_id, tool_version, exported_at, started_by FROM {META}").fetchall()
            version = con.execute("SELECT max(version) FROM schema_version").fetchone()[0]
            held = meta and con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [meta[0][0]]).fetchone()[0]
    except Error as exc:
        raise RunFileError(f"{file}: a damaged run file ({str(exc).splitlines()[0][:200]})") from None
    if len(meta) != 1 or not held:
        raise RunFileError(f"{file}: a damaged run file (its {META} table names no run it holds)")
    run_id, tool, exported_at, who = meta[0]
    return RunFileInfo(run_id, int(version), tool, exported_at, who)


def import_run(file: str | Path, db: str | Path, name: str | None = None) -> Imported:
    """Add the run of run file `file` to database `db` (created or upgraded first) in ONE transaction,
    under its own name or `name`. A run of that name that is the same evaluation (the runs row's
    SAME_RUN fields) makes this a no-op; any other refuses it with RunFileError. A file of an older
    schema is upgraded on a copy first, the file itself untouched."""
    info = read_info(file)
    name = name or info.run_id
    problem = run_name_problem(name)
    if problem:  # a file from elsewhere may name its run anything
        raise RunFileError(f"{file}: its run's name {problem}: import it under another name with --as NEW_NAME")
    migrate(db)
    with tempfile.TemporaryDirectory(prefix="run-file-") as tmp:
        source = Path(file)
        if info.schema_version < len(MIGRATIONS):
            source = Path(tmp) / "upgraded.duckdb"
            shutil.copyfile(file, source)
            migrate(source)
        try:
            return _copy_in(source, db, info, name)
        except Error as exc:  # rolled back: the database is as it was
            raise RunFileError(f"{file}: cannot be imported ({str(exc).splitlines()[0][:200]})") from None


def _copy_in(source: Path, db: str | Path, info: RunFileInfo, name: str) -> Imported:
    with connect(db) as con:
        con.execute("ATTACH ? AS _run_file (READ_ONLY)", [str(source)])
        try:
            with transaction(con):
                if con.execute("SELECT count(*) FROM main.runs WHERE run_id = ?", [name]).fetchone()[0]:
                    same = " AND ".join(f"m.{c} IS NOT DISTINCT FROM f.{c}" for c in SAME_RUN)
                    if con.execute(
                        f"SELECT count(*) FROM main.runs m, _run_file.runs f WHERE m.run_id = ? AND f.run_id = ? AND {same}",
                        [name, info.run_id],
                    ).fetchone()[0]:
                        return Imported(name, False, {}, info.started_by)
                    raise RunFileError(
                        f"{db}: a different run is already named {name!r}: import it under another name with --as NEW_NAME"
                    )
                mine = con.execute("SELECT current_database()").fetchone()[0]
                theirs = set(_run_tables(con, "_run_file"))
                rows = {
                    t: con.execute(
                        f'INSERT INTO main."{t}" BY NAME SELECT * REPLACE (? AS run_id) FROM _run_file."{t}" WHERE run_id = ?',
                        [name, info.run_id],
                    ).fetchone()[0]
                    for t in _run_tables(con, mine)
                    if t in theirs
                }
                # A judge call is a cache entry keyed by its request: one already here is the same call.
                rows["judge_calls"] = con.execute(
                    f"INSERT INTO main.judge_calls BY NAME {_calls_sql('_run_file', '_run_file')} ON CONFLICT (key) DO NOTHING"
                ).fetchone()[0]
                refresh_wide(con, name)
        finally:
            con.execute("DETACH _run_file")
    return Imported(name, True, rows, info.started_by)

"""A run as one file (docs/run-file.md): export_run() writes a run with every row of it into a DuckDB file
of its own, a RAG Triage database holding that run only, with a run_file table saying what it is;
import_run() adds such a file's run to another database in one transaction.

Every table with a run_id column travels (a table a later migration adds too), with the judge calls behind
the run's components, verdicts and GRAMMAR rows. run_wide, the per-item score table, is rebuilt on both
sides by refresh_wide(), as every write does.

A run file comes from another machine, so it is input, never trusted: runfile_check.stage() reads it as
data on a sealed connection, checks every row and copies the run into a database of our own before the
import takes the write lock. What the file says of people (who sent it, the authors of its notes and
labels) is kept as its claim ("written as ... in the file"); who imported it, when, how and from which
file is recorded in run_imports. Its judge calls come under keys of their own, marked as imported, so
they never answer this database's own evaluations.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from evaluators.core.records import run_name_problem
from evaluators.storage.ownership import os_user, twin_of
from evaluators.storage.runfile_check import (
    META,
    META_DDL,
    Limits,
    RunFileError,
    RunFileInfo,
    calls_sql,
    read_info,
    run_tables,
    stage,
)
from evaluators.storage.schema import MIGRATIONS
from evaluators.storage.store import Error, connect, migrate, transaction
from evaluators.storage.wide import refresh_wide

__all__ = ["Imported", "Limits", "RunFileError", "RunFileInfo", "export_run", "import_run", "read_info"]

# The runs row's fields that tell one evaluation from another: equal, a second import changes nothing.
SAME_RUN = ("judge", "params", "prompt_hashes", "status", "n_items", "created_at", "finished_at", "stats")
VIA = ("cli", "upload", "inbox")  # how a run file reached this database


@dataclass(frozen=True)
class Imported:
    """What import_run() did: the run's name here, whether it was added (False: already here, a no-op),
    the rows added per table, and who the file says sent it (its claim, not a fact)."""

    run_id: str
    added: bool
    rows: dict[str, int]
    claimed_by: str


def tool_version() -> str:
    """The installed package's version; 'checkout' when run from a source tree."""
    try:
        return metadata.version("rag-triage")
    except metadata.PackageNotFoundError:
        return "checkout"


def export_run(db: str | Path, run_id: str, out: str | Path) -> dict[str, int]:
    """Write run `run_id` of `db` with every row of it into the run file `out`; returns the rows per table.

    The file is written under a temporary name beside `out` (a leading dot and '.part') and renamed into
    place, so an inbox that watches the folder never sees it half-written. Raises KeyError when the run
    does not exist; the source is only read, through a read-only connection that waits out a writer.
    """
    out = Path(out)
    _check_out(Path(db), out)
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
                con.execute(META_DDL)
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
                theirs = set(run_tables(con, "_run_file"))
                rows = {
                    t: con.execute(
                        f'INSERT INTO _run_file."{t}" BY NAME SELECT * FROM main."{t}" WHERE run_id = ?', [run_id]
                    ).fetchone()[0]
                    for t in run_tables(con, mine)
                    if t in theirs
                }
                rows["judge_calls"] = con.execute(
                    f"INSERT INTO _run_file.judge_calls BY NAME {calls_sql(_quoted(mine), '_run_file')}"
                ).fetchone()[0]
        finally:
            con.execute("DETACH _run_file")
    return rows


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _check_out(db: Path, out: Path) -> None:
    """Refuse to write over the database itself, or over any file that is not a run file."""
    if not out.exists():
        return
    if db.exists() and os.path.samefile(db, out):
        raise RunFileError(f"{out}: is the database {db} itself: export the run to another file")
    try:
        read_info(out)
    except RunFileError:
        raise RunFileError(
            f"{out}: exists and is not a run file: export-run writes a new file, or over a run file"
        ) from None


def import_run(
    file: str | Path,
    db: str | Path,
    name: str | None = None,
    imported_by: str | None = None,
    via: str = "cli",
    limits: Limits = Limits(),
) -> Imported:
    """Add the run of run file `file` to database `db` (created or upgraded first) in ONE transaction,
    under its own name or `name`, recording who imported it (`imported_by`, by default this OS user),
    `via` what and from which file. The file is checked whole as data first (runfile_check.stage(),
    within `limits`), outside the write lock. A run of that name that is the same evaluation (the runs
    row's SAME_RUN fields) makes this a no-op; any other, or a name that looks like another run's, refuses
    it with RunFileError, as does anything wrong with the file; nothing is written then."""
    if via not in VIA:
        raise ValueError(f"via must be one of {', '.join(VIA)}, got {via!r}")
    file = Path(file)
    with tempfile.TemporaryDirectory(prefix="run-file-") as tmp:
        staged = stage(file, Path(tmp), limits)
        info = staged.info
        name = name or info.run_id
        problem = run_name_problem(name)
        if problem:  # a file from elsewhere may name its run anything
            raise RunFileError(f"{file}: its run's name {problem}: import it under another name with --as NEW_NAME")
        record = (imported_by or os_user(), via, file.name, _sha256(file), info.started_by)
        migrate(db)
        try:
            return _copy_in(staged.path, db, info, name, record)
        except Error as exc:  # rolled back: the database is as it was
            raise RunFileError(f"{file}: cannot be imported ({str(exc).splitlines()[0][:200]})") from None


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _copy_in(staged: Path, db: str | Path, info: RunFileInfo, name: str, record: tuple[str, ...]) -> Imported:
    """Copy the staged run into `db` as `name`, in one transaction (see import_run)."""
    with connect(db) as con:
        con.execute("ATTACH ? AS _run_file (READ_ONLY)", [str(staged)])
        try:
            with transaction(con):
                if con.execute("SELECT count(*) FROM main.runs WHERE run_id = ?", [name]).fetchone()[0]:
                    same = " AND ".join(f"m.{c} IS NOT DISTINCT FROM f.{c}" for c in SAME_RUN)
                    if con.execute(
                        f"SELECT count(*) FROM main.runs m, _run_file.runs f WHERE m.run_id = ? AND {same}", [name]
                    ).fetchone()[0]:
                        return Imported(name, False, {}, info.started_by)
                    raise RunFileError(
                        f"{db}: a different run is already named {name!r}: import it under another name with --as NEW_NAME"
                    )
                twin = twin_of(con, name)
                if twin is not None:
                    raise RunFileError(
                        f"{db}: the name {name!r} looks like that of the run {twin!r} already here: import it under "
                        "another name with --as NEW_NAME"
                    )
                rows = _insert_rows(con, name)
                con.execute("INSERT INTO main.run_imports VALUES (?, ?, now()::TIMESTAMP, ?, ?, ?, ?)", [name, *record])
                refresh_wide(con, name)
        finally:
            con.execute("DETACH _run_file")
    return Imported(name, True, rows, info.started_by)


def _insert_rows(con: Any, name: str) -> dict[str, int]:
    """Insert the staged run's rows as run `name`, with its people as claims, no owner here, and its judge
    calls under keys of this run's own (sha256 of the name and the key) marked as imported for it."""
    mine = con.execute("SELECT current_database()").fetchone()[0]
    prefix = f"{name}\n"
    rows: dict[str, int] = {}
    for table in run_tables(con, mine):
        columns = {
            c
            for (c,) in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND table_name = ?", [mine, table]
            ).fetchall()
        }
        replace, params = ["? AS run_id"], [name]
        if "call_key" in columns:
            replace.append("CASE WHEN call_key IS NOT NULL THEN sha256(? || call_key) END AS call_key")
            params.append(prefix)
        for who in {"author", "started_by"} & columns:
            replace.append(f"CASE WHEN {who} <> '' THEN 'written as ' || {who} || ' in the file' ELSE '' END AS {who}")
        if table == "runs":  # evaluated elsewhere: no process here owns it
            replace.extend(f"NULL AS {c}" for c in ("owner", "owner_pid", "owner_host", "heartbeat_at"))
        rows[table] = con.execute(
            f'INSERT INTO main."{table}" BY NAME SELECT * REPLACE ({", ".join(replace)}) FROM _run_file."{table}"',
            params,
        ).fetchone()[0]
    # Left by a run of this name deleted before: its calls go with it.
    con.execute("DELETE FROM main.judge_calls WHERE imported_for = ?", [name])
    rows["judge_calls"] = con.execute(
        """INSERT INTO main.judge_calls BY NAME
           SELECT * REPLACE (sha256(? || key) AS key, ? AS imported_for) FROM _run_file.judge_calls""",
        [prefix, name],
    ).fetchone()[0]
    return rows

"""A run file from another machine, read as data and checked whole before any of it is written.

A run file (storage/runfile.py) is a DuckDB database, and a database can hold code: a view runs its query
when it is read, a macro when it is called, a generated column when its table is read. So the file is only
ever read through store.sealed(): attached read-only to a connection of its own whose access to any other
file is off and locked, past a time limit. Before anything of it is written, stage():
- takes a regular file of at most a size limit that starts as a DuckDB file does;
- refuses every object but base tables and their indexes (a view, macro, sequence, type or schema of the
  file's own), naming them;
- holds its tables and columns (names, types, defaults) to those its schema version's migrations build;
- upgrades a file of an older schema on a copy, by the store's migrations on a sealed connection;
- checks every row of every table it reads: one run only, types and ranges (scores, p and shares in
  [0, 1], or null with a failure status), statuses from the known sets, JSON that parses to what it
  should hold, times between 2000 and tomorrow; the first bad field refuses the file in one line naming
  the table, the row and the field;
- copies the run's rows into a new database built by our own migrations, which the import then reads
  under the write lock: the file itself is never read while the database is locked.
"""

from __future__ import annotations

import json
import shutil
import stat
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from evaluators.core.records import CALIBRATED, LABEL, LABEL_ORIGINS, LOGPROB, Status
from evaluators.metrics.diagnosis import COMPONENTS, RULES, TRIAGE_LABELS
from evaluators.storage import health
from evaluators.storage.ownership import RUN_STATUSES
from evaluators.storage.schema import MIGRATIONS
from evaluators.storage.store import Error, TimeUp, connect, literal, migrate, sealed

META = "run_file"  # the file's own table: one row saying which run it holds, from what and whom
META_DDL = f"""CREATE TABLE {META} (run_id VARCHAR NOT NULL, schema_version INTEGER NOT NULL,
               tool_version VARCHAR NOT NULL, exported_at TIMESTAMP NOT NULL, started_by VARCHAR NOT NULL)"""
# Per-run tables a run file does not carry: rebuilt from the others (run_wide), the file's own (run_file),
# or this database's own record of where its runs came from (run_imports).
NOT_CARRIED = ("run_wide", META, "run_imports")
# A run file larger than this, or one whose checks take longer, is refused (import-run --max-bytes,
# --max-seconds): a 10k-item run of an LLM judge is about 100 MB and checks in seconds.
MAX_BYTES = 16 << 30
MAX_SECONDS = 900.0
_SHOWN = 80  # characters of a refused value quoted in its message


class RunFileError(ValueError):
    """A file that is not a run file this version imports, or a run name already taken: one line."""


@dataclass(frozen=True)
class Limits:
    """How large a run file may be, and how long its checks and staging may take."""

    max_bytes: int = MAX_BYTES
    max_seconds: float = MAX_SECONDS


@dataclass(frozen=True)
class RunFileInfo:
    """What a run file's run_file row says."""

    run_id: str
    schema_version: int
    tool_version: str
    exported_at: datetime
    started_by: str


def _share(col: str) -> str:
    return f"{col} BETWEEN 0 AND 1 AND isfinite({col})"


def _time(col: str) -> str:
    return f"{col} BETWEEN TIMESTAMP '2000-01-01' AND now()::TIMESTAMP + INTERVAL 1 DAY"


def _one_of(col: str, values: Any) -> str:
    return f"{col} IN ({', '.join(literal(v) for v in values)})"


def _nullable(col: str, condition: str) -> str:
    return f"{col} IS NULL OR ({condition})"


def _json(col: str, kind: str) -> str:
    return f"json_valid({col}) AND json_type({col}) = '{kind}'"


_ID = "regexp_full_match({0}, '[a-z][a-z0-9_]{{0,63}}')"  # a metric or component kind: a lower-case word
_STATUS = _one_of("status", [s.value for s in Status])
_MESSAGES = (
    _json("messages", "ARRAY")
    + " AND list_bool_and(list_transform(json_extract(messages, '$[*]'), lambda m: json_type(m) = 'OBJECT'"
    " AND json_type(m, '$.role') = 'VARCHAR' AND json_type(m, '$.content') = 'VARCHAR'))"
)
# What every field of every row a run file carries must hold (SQL over the file's table), with what that
# is in words. The run_id of every per-run table is checked apart: it must be the file's one run.
ROWS: dict[str, list[tuple[str, str, str]]] = {
    "runs": [
        ("judge", "length(judge) BETWEEN 1 AND 500", "a judge's name"),
        ("status", _one_of("status", RUN_STATUSES), f"one of {', '.join(RUN_STATUSES)}"),
        ("n_items", "n_items >= 0", "0 or more"),
        ("created_at", _time("created_at"), "a time between 2000 and tomorrow"),
        ("finished_at", _nullable("finished_at", _time("finished_at")), "empty or a time between 2000 and tomorrow"),
        ("heartbeat_at", _nullable("heartbeat_at", _time("heartbeat_at")), "empty or a time before tomorrow"),
        ("heartbeat_s", _nullable("heartbeat_s", "heartbeat_s BETWEEN 0 AND 86400"), "empty or 0 to 86,400 s"),
        ("params", _json("params", "OBJECT"), "a JSON object"),
        ("prompt_hashes", _json("prompt_hashes", "OBJECT"), "a JSON object of prompt names and hashes"),
        ("stats", _json("stats", "OBJECT"), "a JSON object"),
    ],
    "run_inputs": [("content_hash", "length(content_hash) <= 128", "a content hash")],
    "items": [
        ("item_id", "length(item_id) BETWEEN 1 AND 1000", "an id of 1 to 1,000 characters"),
        ("sources", "list_bool_and(list_transform(sources, lambda s: s IS NOT NULL)) IS NOT FALSE", "texts"),
        ("metadata", _json("metadata", "OBJECT"), "a JSON object"),
        ("content_hash", _nullable("content_hash", "length(content_hash) <= 128"), "a content hash"),
    ],
    "components": [
        ("kind", _ID.format("kind"), "a component kind (a lower-case word)"),
        ("idx", "idx >= 0", "0 or more"),
        ("parent", _nullable("parent", "parent >= 0"), "empty or 0 or more"),
    ],
    "verdicts": [
        ("metric", _ID.format("metric"), "a metric id (a lower-case word)"),
        ("component_kind", _ID.format("component_kind"), "a component kind (a lower-case word)"),
        ("component_idx", "component_idx >= 0", "0 or more"),
        ("target", "length(target) BETWEEN 1 AND 200", "a target"),
        ("status", _STATUS, "a verdict status"),
        (
            "value",
            f"CASE WHEN status = 'ok' THEN {_share('value')} ELSE value IS NULL END",
            "in [0, 1] when its status is ok, else empty",
        ),
        ("evidence", _nullable("evidence", "isfinite(evidence)"), "empty or a finite number"),
        ("p", _nullable("p", _share("p")), "empty or in [0, 1]"),
        ("p_kind", _nullable("p_kind", _one_of("p_kind", (LOGPROB, CALIBRATED, LABEL))), "empty or a p kind"),
        ("tier", _nullable("tier", "length(tier) BETWEEN 1 AND 500"), "empty or a judge's name"),
    ],
    "scores": [
        ("metric", _ID.format("metric"), "a metric id (a lower-case word)"),
        ("status", _STATUS, "a score status"),
        (
            "value",
            f"CASE WHEN status = 'ok' THEN {_share('value')} ELSE value IS NULL END",
            "in [0, 1] when its status is ok, else empty",
        ),
        ("n_total", "n_total >= 0", "0 or more"),
        ("n_scored", "n_scored BETWEEN 0 AND n_total", "between 0 and n_total"),
        ("n_unsure", _nullable("n_unsure", "n_unsure BETWEEN 0 AND n_total"), "between 0 and n_total"),
        ("expected", _nullable("expected", _share("expected")), "empty or in [0, 1]"),
    ],
    "imported_scores": [
        ("origin", _ID.format("origin"), "a peer tool's name (a lower-case word)"),
        ("value", _nullable("value", "isfinite(value)"), "empty or a finite number"),
    ],
    "grammar_correctness": [
        ("status", _STATUS, "a status"),
        ("correct", "status = 'ok' OR correct IS NULL", "empty unless its status is ok"),
        ("created_at", _time("created_at"), "a time between 2000 and tomorrow"),
    ],
    "triage": [
        ("label", _one_of("label", TRIAGE_LABELS), f"one of {', '.join(TRIAGE_LABELS)}"),
        ("component", _one_of("component", COMPONENTS), f"one of {', '.join(COMPONENTS)}"),
        ("created_at", _time("created_at"), "a time between 2000 and tomorrow"),
    ],
    "labels": [
        ("label", "label IN (0, 1)", "0 or 1"),
        ("rule", _nullable("rule", _one_of("rule", RULES)), f"empty or a rule ({', '.join(RULES)})"),
        (
            "metric",
            f"(rule IS NULL) = (metric IS NOT NULL) AND {_nullable('metric', _ID.format('metric'))}",
            "a metric id, given exactly when no rule is",
        ),
        (
            "component_idx",
            "(metric IS NULL) = (component_idx IS NULL) AND coalesce(component_idx >= 0, TRUE)",
            "0 or more, given exactly with a metric",
        ),
        ("origin", _one_of("origin", LABEL_ORIGINS), f"one of {', '.join(LABEL_ORIGINS)}"),
        ("created_at", _time("created_at"), "a time between 2000 and tomorrow"),
    ],
    "judge_calls": [
        ("key", "length(key) BETWEEN 1 AND 200", "a call key"),
        ("model", "length(model) BETWEEN 1 AND 500", "a model's name"),
        ("messages", _MESSAGES, "a JSON list of {role, content} texts"),
        ("params", _json("params", "OBJECT"), "a JSON object"),
        ("status", _STATUS, "a call status"),
        ("prompt_tokens", "prompt_tokens >= 0", "0 or more"),
        ("completion_tokens", "completion_tokens >= 0", "0 or more"),
        ("cost", _nullable("cost", "cost >= 0 AND isfinite(cost)"), "empty or a finite cost of 0 or more"),
        ("latency_ms", "latency_ms >= 0 AND isfinite(latency_ms)", "a finite number of 0 or more"),
        ("created_at", _time("created_at"), "a time between 2000 and tomorrow"),
    ],
}


@dataclass(frozen=True)
class Staged:
    """A run file checked and copied into a database of our own (`path`), with what its run_file row says."""

    path: Path
    info: RunFileInfo


def stage(file: Path, folder: Path, limits: Limits) -> Staged:
    """Check run file `file` as data and copy its run into a new database in `folder`; RunFileError (one
    line naming the file) for anything it must not hold, or when it is over `limits`."""
    _check_file(file, limits)
    give_up = time.monotonic() + limits.max_seconds
    try:
        version = _check_objects(file, give_up - time.monotonic())
        source = file
        if version < len(MIGRATIONS):  # an older schema: upgraded on a copy, the file itself untouched
            source = folder / "upgraded.duckdb"
            shutil.copyfile(file, source)
            migrate(source, sealed=True)
        staged = folder / "staged.duckdb"
        migrate(staged)
        with sealed({"f": (source, False), "s": (staged, True)}, give_up - time.monotonic()) as con:
            info = _meta(con, file, version)
            tables = run_tables(con, "f")
            for table in (*tables, "judge_calls"):
                _check_rows(con, file, table, info.run_id)
            _copy(con, tables)
    except TimeUp:
        raise RunFileError(
            f"{file}: its checks took longer than {limits.max_seconds:g} s, the limit: nothing was imported"
        ) from None
    except Error as exc:
        raise RunFileError(f"{file}: a damaged run file ({str(exc).splitlines()[0][:200]})") from None
    return Staged(staged, info)


def read_info(file: Path, limits: Limits = Limits()) -> RunFileInfo:
    """What run file `file` holds, checked as stage() checks its objects and shape (not its rows)."""
    _check_file(file, limits)
    try:
        version = _check_objects(file, limits.max_seconds)
        with sealed({"f": (file, False)}, limits.max_seconds) as con:
            return _meta(con, file, version)
    except TimeUp:
        raise RunFileError(f"{file}: reading it took longer than {limits.max_seconds:g} s, the limit") from None
    except Error as exc:
        raise RunFileError(f"{file}: a damaged run file ({str(exc).splitlines()[0][:200]})") from None


def _check_file(file: Path, limits: Limits) -> None:
    """A regular file of at most the size limit that starts as a DuckDB database does."""
    try:
        info = file.stat()
    except OSError as exc:
        raise RunFileError(f"{file}: cannot read the run file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise RunFileError(f"{file}: not a run file (not a regular file)")
    if info.st_size > limits.max_bytes:
        raise RunFileError(
            f"{file}: {info.st_size:,} bytes, over the limit of {limits.max_bytes:,} for a run file (--max-bytes)"
        )
    try:
        health.check_duckdb_file(file)
    except Exception as exc:  # StoreMissing, NotADatabase: what the bytes are instead
        raise RunFileError(f"not a run file: {exc}") from None


def _check_objects(file: Path, seconds: float) -> int:
    """The file's schema version, once its objects are only base tables (and their indexes) and its
    tables and columns are exactly those that version's migrations build, with the run_file table."""
    with sealed({"f": (file, False)}, seconds) as con:
        others = con.execute("""
            SELECT 'view ' || view_name FROM duckdb_views() WHERE database_name = 'f' AND NOT internal
            UNION ALL SELECT function_type || ' ' || function_name FROM duckdb_functions() WHERE database_name = 'f'
            UNION ALL SELECT 'sequence ' || sequence_name FROM duckdb_sequences() WHERE database_name = 'f'
            UNION ALL SELECT 'type ' || type_name FROM duckdb_types() WHERE database_name = 'f' AND NOT internal
            UNION ALL SELECT 'schema ' || schema_name FROM duckdb_schemas()
                      WHERE database_name = 'f' AND NOT internal AND schema_name <> 'main'
            ORDER BY 1""").fetchall()
        if others:
            names = ", ".join(name for (name,) in others[:5]) + (
                f" and {len(others) - 5} more" if len(others) > 5 else ""
            )
            raise RunFileError(
                f"{file}: a run file holds tables only, and this one holds {names}: nothing was imported"
            )
        columns = _columns(con, "f")
        version = _version(con, file, columns)
    expected = _expected(version)
    for table in sorted(set(columns) | set(expected)):
        if table == "run_wide":  # rebuilt here, never read: its metric columns vary with the run
            continue
        theirs, ours = columns.get(table), expected.get(table)
        if ours is None or theirs is None:
            what = "a table this version does not know" if ours is None else "no table"
            raise RunFileError(f"{file}: not a run file of schema {version}: {what} {table!r}")
        if theirs != ours:
            column = next(c for c in sorted(set(theirs) | set(ours)) if theirs.get(c) != ours.get(c))
            raise RunFileError(
                f"{file}: not a run file of schema {version}: table {table}, column {column!r} is "
                f"{_shape(theirs.get(column))} where schema {version} has {_shape(ours.get(column))}"
            )
    return version


def _columns(con: Any, database: str) -> dict[str, dict[str, tuple[str, str | None]]]:
    """Every table's columns in `database`: {table: {column: (type, default or generating expression)}}."""
    found: dict[str, dict[str, tuple[str, str | None]]] = {}
    for table, column, kind, default in con.execute(
        """SELECT table_name, column_name, data_type, column_default FROM duckdb_columns()
           WHERE database_name = ? AND NOT internal""",
        [database],
    ).fetchall():
        found.setdefault(table, {})[column] = (kind, default)
    return found


_EXPECTED: dict[int, dict[str, dict[str, tuple[str, str | None]]]] = {}


def _expected(version: int) -> dict[str, dict[str, tuple[str, str | None]]]:
    """The tables and columns that migrations 1..version build, with the run_file table."""
    if version not in _EXPECTED:
        with connect(":memory:") as con:
            con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            for sql in MIGRATIONS[:version]:
                con.execute(sql)
            con.execute(META_DDL)
            _EXPECTED[version] = _columns(con, "memory")
    return _EXPECTED[version]


def _shape(column: tuple[str, str | None] | None) -> str:
    if column is None:
        return "missing"
    kind, default = column
    return f"{kind}" + (f" computed as {default}" if default else "")


def _version(con: Any, file: Path, columns: dict[str, dict[str, tuple[str, str | None]]]) -> int:
    """The schema version the file says it has: schema_version's largest, a known version."""
    if columns.get("schema_version", {}).get("version", ("",))[0] != "INTEGER" or META not in columns:
        what = "its schema_version table" if META in columns else f"its {META} table"
        raise RunFileError(f"{file}: not a run file (a database without {what} as RAG Triage writes it)")
    version = con.execute("SELECT max(version) FROM f.schema_version").fetchone()[0]
    if version is None or version < 1:
        raise RunFileError(f"{file}: not a run file (its schema_version is {version!r}, not a version)")
    if version > len(MIGRATIONS):
        raise RunFileError(
            f"{file}: a run file from a newer version of RAG Triage (schema {version}, this version "
            f"reads {len(MIGRATIONS)}): upgrade RAG Triage here to import it"
        )
    return int(version)


def _meta(con: Any, file: Path, version: int) -> RunFileInfo:
    """The run_file row, checked: one row naming a run the file holds, and the file's schema version."""
    meta = con.execute(f"SELECT run_id, schema_version, tool_version, exported_at, started_by FROM f.{META}").fetchall()
    if len(meta) != 1:
        raise RunFileError(f"{file}: a damaged run file (its {META} table has {len(meta)} rows, not 1)")
    run_id, said, tool, exported_at, who = meta[0]
    held = con.execute("SELECT count(*) FROM f.runs WHERE run_id = ?", [run_id]).fetchone()[0]
    if held != 1:
        raise RunFileError(
            f"{file}: a damaged run file (its {META} table names run {run_id!r}, which it does not hold)"
        )
    if said != version:
        raise RunFileError(
            f"{file}: a damaged run file ({META} says schema {said}, its tables are of schema {version})"
        )
    if not con.execute(f"SELECT {_time('exported_at')} FROM f.{META}").fetchone()[0]:
        raise RunFileError(
            f"{file}: table {META}, row 1, field exported_at: {exported_at} is not a time between 2000 and tomorrow"
        )
    for field in ("params", "prompt_hashes", "stats"):  # read as Python objects by every page
        (text,) = con.execute(f"SELECT {field} FROM f.runs").fetchone()
        value = _parsed(text)
        if not isinstance(value, dict) or (
            field == "prompt_hashes" and not all(isinstance(v, str) for v in value.values())
        ):
            kind = "a JSON object of prompt names and hashes" if field == "prompt_hashes" else "a JSON object"
            raise RunFileError(f"{file}: table runs, row 1, field {field}: {_quote(text)} is not {kind}")
    return RunFileInfo(run_id, version, tool, exported_at, who)


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def run_tables(con: Any, database: str) -> list[str]:
    """The base tables of a database (attached under `database`) with a run_id column, but those a run
    file does not carry."""
    return [
        t
        for (t,) in con.execute(
            """SELECT DISTINCT table_name FROM duckdb_columns() JOIN duckdb_tables() USING (database_name, schema_name, table_name)
               WHERE database_name = ? AND schema_name = 'main' AND column_name = 'run_id' ORDER BY table_name""",
            [database],
        ).fetchall()
        if t not in NOT_CARRIED
    ]


def calls_sql(calls: str, rows: str) -> str:
    """The judge calls in database `calls` behind the run rows in database `rows` (its components,
    verdicts and GRAMMAR rows): the run's only rows without a run_id."""
    return f"""SELECT * FROM {calls}.judge_calls WHERE key IN (
                   SELECT call_key FROM {rows}.components UNION SELECT call_key FROM {rows}.verdicts
                   UNION SELECT call_key FROM {rows}.grammar_correctness)"""


def _check_rows(con: Any, file: Path, table: str, run_id: str) -> None:
    """Refuse the file at the first row of `table` with a field that is not what ROWS says it must be."""
    checks = list(ROWS.get(table, []))
    if table != "judge_calls":  # a run file holds one run
        checks.insert(0, ("run_id", f"run_id = {literal(run_id)}", f"the file's run, {run_id!r}"))
    if not checks:
        return
    flags = [f"coalesce({condition}, FALSE)" for _, condition, _ in checks]
    source = f'f.main."{table}"'
    bad = con.execute(f"SELECT rowid FROM {source} WHERE NOT ({' AND '.join(flags)}) LIMIT 1").fetchone()
    if bad is None:
        return
    (rowid,) = bad
    (passed,) = con.execute(f"SELECT [{', '.join(flags)}] FROM {source} WHERE rowid = ?", [rowid]).fetchone()
    field, _, must = checks[passed.index(False)]
    (value,) = con.execute(f'SELECT "{field}" FROM {source} WHERE rowid = ?', [rowid]).fetchone()
    raise RunFileError(f"{file}: table {table}, row {rowid + 1:,}, field {field}: {_quote(value)} is not {must}")


def _quote(value: Any) -> str:
    """A refused value as its message quotes it: short, on one line."""
    text = repr(value) if not isinstance(value, str) else repr(value[:_SHOWN] + ("…" if len(value) > _SHOWN else ""))
    return text if value is not None else "empty"


def _copy(con: Any, tables: list[str]) -> None:
    """Copy the file's run rows, and the judge calls behind its components, verdicts and GRAMMAR rows, into
    the staged database (built by our migrations, so every table the file has is there)."""
    for table in tables:
        con.execute(f'INSERT INTO s.main."{table}" BY NAME SELECT * FROM f.main."{table}"')
    con.execute(f"INSERT INTO s.main.judge_calls BY NAME {calls_sql('f.main', 'f.main')}")

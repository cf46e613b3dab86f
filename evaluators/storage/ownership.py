"""A run's row and its owner: starting and finishing a run, claiming it for one evaluation (one owner
per run, in one transaction), the heartbeat every owned write refreshes, and who started it.

A run's owner lives only while its heartbeat is fresh; a running run whose owner stopped writing
reads as interrupted (RUN_STATUS_SQL), and the next evaluation takes it over.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import uuid
from collections.abc import Collection, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd

from evaluators.core.records import Component, Item, JudgeCall, Run, Score, Verdict, check_run_name, looks_like
from evaluators.storage.store import FAILED_STATUSES, connect, migrate, transaction
from evaluators.storage.wide import refresh_wide, written_ids
from evaluators.storage.writes import ITEM_TABLES, batch_frames, insert


class RunConflict(ValueError):
    """A run of that name exists, started with another judge, other options or other prompt files.

    The message speaks of the engine; a front end adds how its user picks another name.
    """

    def __init__(self, run: str, message: str) -> None:
        super().__init__(message)
        self.run = run


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
        con.execute("UPDATE runs SET status = 'running', n_items = ?, error = '' WHERE run_id = ?", [n_items, run.name])


def finish_run(
    path: str | Path,
    run_id: str,
    status: str,
    stats: dict[str, Any],
    error: str = "",
    owner: Owner | None = None,
    deadline_s: float = 20.0,
) -> None:
    """Mark a run finished, finished with failures or failed, with its call statistics.

    With `owner`, only while that process still owns the run: one that took it over keeps its status.
    """
    token = owner.token if owner else None
    with connect(path, deadline_s=deadline_s) as con:
        con.execute(
            "UPDATE runs SET status = ?, finished_at = now()::TIMESTAMP, stats = ?, error = ? "
            "WHERE run_id = ? AND (? IS NULL OR owner = ?)",
            [status, json.dumps(stats, sort_keys=True), error, run_id, token, token],
        )


# What runs.status holds; readers show a running run whose owner stopped beating as interrupted.
RUN_STATUSES = RUNNING, FINISHED, FINISHED_WITH_FAILURES, FAILED = (
    "running",
    "finished",
    "finished with failures",
    "failed",
)
STALE_BEATS = 3  # a running run whose owner missed this many heartbeats was interrupted


# A run's status as readers show it, over `runs r`: a running run whose owner stopped writing
# (killed, crashed, machine gone) reads as interrupted. The CLI's run list and the dashboard's use it.
RUN_STATUS_SQL = (
    "CASE WHEN r.status = 'running' AND (r.heartbeat_at IS NULL OR r.heartbeat_at < "
    f"now()::TIMESTAMP - to_seconds({STALE_BEATS} * coalesce(r.heartbeat_s, 0))) "
    "THEN 'interrupted' ELSE r.status END"
)


class LookAlike(ValueError):
    """A new run's name looks the same as another run's ('weak-rеtriever' with a Cyrillic е)."""

    def __init__(self, run: str, twin: str) -> None:
        super().__init__(f"run name {run!r} looks like that of the run {twin!r} already here: choose another name")
        self.run, self.twin = run, twin


class RunBusy(ValueError):
    """Another live process is evaluating the run."""


class InputChanged(ValueError):
    """The items given for an existing run differ from the input it recorded."""

    def __init__(self, run_id: str, changed: list[str], added: list[str], removed: list[str]) -> None:
        self.changed, self.added, self.removed = changed, added, removed
        parts = [
            f"{label} {_id_list(ids)}"
            for label, ids in (("changed", changed), ("added", added), ("removed", removed))
            if ids
        ]
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


# The key of a run's params that lists where each sitting of it judged (a Ray cluster, or a process): not
# an option that defines the results, so a run started on Ray resumes without it, and the other way round.
SITTINGS = "judged_on"


def claim_run(
    path: str | Path,
    run: Run,
    hashes: Mapping[str, str],
    owner: Owner,
    heartbeat_s: float,
    update: bool = False,
    retry_failed: bool = False,
    sitting: Mapping[str, Any] | None = None,
    record_new: bool = False,
) -> Claim:
    """Create or take over a run for one evaluation, in ONE transaction, so two processes never both own it.

    hashes: the input, {item id: Item.content_hash()} in input order. Raises RunBusy while another
    live process owns the run (it wrote within STALE_BEATS heartbeats and, on this host, its pid still
    runs: see _check_not_owned), ValueError when judge, params or prompts differ, and InputChanged when the input
    differs from the one the run recorded, unless `update`: then this input is recorded, removed items
    are deleted and changed or added ones evaluated. `retry_failed` adds the items with a failed step.
    Items whose stored results are for other content (an interrupted update) are always evaluated.

    `sitting` records where this evaluation judges, with the items it has to judge (and its shards, when
    it names a `shard_size`), in the run's params under SITTINGS: added when the run lists sittings
    already, or started when `record_new` (a sitting on Ray).
    """
    migrate(path)
    with connect(path) as con:
        with transaction(con):
            claim = _claim(con, run, dict(hashes), owner, heartbeat_s, update, retry_failed)
            if sitting is not None:
                _record_sitting(con, run.name, sitting, len(claim.todo), record_new)
    return claim


def _record_sitting(con: Any, run_id: str, sitting: Mapping[str, Any], todo: int, record_new: bool) -> None:
    params = json.loads(con.execute("SELECT params FROM runs WHERE run_id = ?", [run_id]).fetchall()[0][0])
    if SITTINGS not in params and not record_new:
        return
    record = {**sitting, "items": todo}
    if record.get("shard_size"):
        record["shards"] = -(-todo // int(record["shard_size"]))
    params[SITTINGS] = [*params.get(SITTINGS, []), record]
    con.execute("UPDATE runs SET params = ? WHERE run_id = ?", [json.dumps(params, sort_keys=True), run_id])


def _claim(
    con: Any, run: Run, hashes: dict[str, str], owner: Owner, heartbeat_s: float, update: bool, retry_failed: bool
) -> Claim:
    # fetchall, not fetchone: DuckDB refuses a register() while a result is unfinished.
    rows = con.execute(
        """SELECT judge, params, prompt_hashes, status, owner, owner_pid, owner_host,
                                 epoch(now()::TIMESTAMP - heartbeat_at), heartbeat_s
                          FROM runs WHERE run_id = ?""",
        [run.name],
    ).fetchall()
    row = rows[0] if rows else None
    recorded: dict[str, str] = {}
    stored: dict[str, str] = {}
    if row is None:
        _insert_run(con, run, len(hashes))
    else:
        _check_same_run(run, row[:3])
        _check_not_owned(run.name, owner, *row[3:])
        recorded = dict(
            con.execute("SELECT item_id, content_hash FROM run_inputs WHERE run_id = ?", [run.name]).fetchall()
        )
        stored = _stored_hashes(con, run.name)
        if not recorded:  # a run from before migration 4: it knows its stored items, not its whole input
            recorded = {**{i: h for i, h in hashes.items() if i not in stored}, **stored}
        changed = [i for i, h in hashes.items() if i in recorded and recorded[i] != h]
        added = [i for i in hashes if i not in recorded]
        removed = [i for i in recorded if i not in hashes]
        if (changed or added or removed) and not update:
            raise InputChanged(run.name, changed, added, removed)
        for table in ITEM_TABLES if removed else ():
            con.execute(f"DELETE FROM {table} WHERE run_id = ? AND list_contains(?, item_id)", [run.name, removed])
    if recorded != hashes:
        con.execute("DELETE FROM run_inputs WHERE run_id = ?", [run.name])
        insert(
            con,
            "run_inputs",
            pd.DataFrame({"run_id": run.name, "item_id": list(hashes), "content_hash": list(hashes.values())}),
        )
    failed: set[str] = set()
    if retry_failed:
        failed = {
            r[0]
            for r in con.execute(
                f"""
            SELECT item_id FROM verdicts WHERE run_id = $run AND status IN {FAILED_STATUSES}
            UNION SELECT item_id FROM scores WHERE run_id = $run AND status IN {FAILED_STATUSES}""",
                {"run": run.name},
            ).fetchall()
        }
    con.execute(
        """UPDATE runs SET status = 'running', n_items = ?, error = '', owner = ?, owner_pid = ?,
                   owner_host = ?, heartbeat_at = now()::TIMESTAMP, heartbeat_s = ? WHERE run_id = ?""",
        [len(hashes), owner.token, owner.pid, owner.host, heartbeat_s, run.name],
    )
    todo = [i for i, h in hashes.items() if stored.get(i) != h or i in failed]
    return Claim(todo, frozenset(i for i in todo if i in stored))


def _insert_run(con: Any, run: Run, n_items: int) -> None:
    check_run_name(run.name)  # every way into a new run: the CLI and the Evaluate page check it first
    twin = twin_of(con, run.name)
    if twin is not None:
        raise LookAlike(run.name, twin)
    con.execute(
        """INSERT INTO runs (run_id, judge, params, prompt_hashes, status, n_items, created_at, started_by)
                   VALUES (?, ?, ?, ?, 'running', ?, now()::TIMESTAMP, ?)""",
        [
            run.name,
            run.judge,
            json.dumps(run.params, sort_keys=True),
            json.dumps(run.prompt_hashes, sort_keys=True),
            n_items,
            _STARTED_BY.get() or os_user(),
        ],
    )


def twin_of(con: Any, name: str) -> str | None:
    """The run of the database on `con` whose name looks the same as `name` but is another, or None."""
    return looks_like(name, (r for (r,) in con.execute("SELECT run_id FROM runs").fetchall()))


def _check_same_run(run: Run, row: Sequence[Any]) -> None:
    """An existing run continues only with the judge, params and prompt files it was started with."""
    judge, params, hashes = row
    if judge != run.judge or _defining(json.loads(params)) != _defining(run.params):
        shown = json.dumps(_defining(json.loads(params)), sort_keys=True)
        raise RunConflict(run.name, f"run {run.name!r} already exists with judge {judge} and params {shown}")
    if json.loads(hashes) != run.prompt_hashes:
        raise RunConflict(run.name, f"run {run.name!r} was started with other prompt files")


def _defining(params: Mapping[str, Any]) -> dict[str, Any]:
    """The params that define a run's results: all but where its sittings judged."""
    return {k: v for k, v in params.items() if k != SITTINGS}


def _check_not_owned(
    run_id: str,
    owner: Owner,
    status: str,
    current: str | None,
    pid: int | None,
    host: str | None,
    age_s: float | None,
    heartbeat_s: float | None,
) -> None:
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
        raise RunBusy(
            f"run {run_id!r} is being evaluated by another process (pid {pid} on {host}{last}; "
            f"one that stops writing for {STALE_BEATS * (heartbeat_s or 0.0):.0f} s counts as gone)"
        )


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
    hashes = dict(
        con.execute(
            "SELECT item_id, content_hash FROM items WHERE run_id = ? AND content_hash IS NOT NULL", [run_id]
        ).fetchall()
    )
    legacy = con.execute(
        """SELECT item_id, query, sources, response, reference, metadata FROM items
                            WHERE run_id = ? AND content_hash IS NULL""",
        [run_id],
    ).fetchall()
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
    frames = batch_frames(run_id, items, components, verdicts, scores, calls)
    with connect(path, deadline_s=deadline_s) as con:
        with transaction(con):
            rows = con.execute("SELECT owner FROM runs WHERE run_id = ?", [run_id]).fetchall()
            owned = bool(rows) and rows[0][0] == owner.token
            if owned:
                stale = [i.id for i in items if i.id in replace]
                for table in ITEM_TABLES if stale else ():
                    con.execute(f"DELETE FROM {table} WHERE run_id = ? AND list_contains(?, item_id)", [run_id, stale])
                con.execute("UPDATE runs SET heartbeat_at = now()::TIMESTAMP WHERE run_id = ?", [run_id])
            for table, frame in frames if owned else frames[:1]:
                insert(con, table, frame)
            if owned:
                refresh_wide(con, run_id, written_ids(frames[1:]))
    if not owned:
        raise RunBusy(
            f"run {run_id!r} was taken over by another process; this evaluation stopped (its judge calls are stored)"
        )


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

"""The database's runs: `runs` (list them with their status) and `delete-run`."""

from __future__ import annotations

import argparse

import evaluators.cli.arguments as options
from evaluators.cli.common import fail
from evaluators.storage import queries, writes


def add_runs(sub: argparse._SubParsersAction) -> None:
    """Register `runs` and `delete-run`."""
    rs = sub.add_parser("runs", help="list the runs in a database")
    rs.add_argument("--db", required=True, type=options.database)
    rs.set_defaults(handler=list_runs)
    dr = sub.add_parser("delete-run", help="delete a run with its items, scores and triage notes (one transaction)")
    dr.add_argument("--db", required=True, type=options.database)
    dr.add_argument("--run", required=True)
    dr.set_defaults(handler=delete_run)


def list_runs(args: argparse.Namespace) -> int:
    """runs: one line per run, newest first: name, judge, status, items done of all, start time."""
    frame = queries.runs.runs(args.db)
    if frame.empty:
        print("no runs")
        return 0
    for row in queries.sql.rows(frame):
        print(
            f"{row.run_id}\t{row.judge}\t{row.status}\t{row.n_done}/{row.n_items} items\t{row.created_at:%Y-%m-%d %H:%M}"
        )
    return 0


def delete_run(args: argparse.Namespace) -> int:
    """delete-run: the run and every row of it, in one transaction; the rows deleted per table."""
    try:
        counts = writes.delete_run(args.db, args.run)
    except KeyError:
        return fail(f"{args.db}: no run named {args.run!r} (see: python -m evaluators runs --db {args.db})")
    rows = ", ".join(f"{n} {table}" for table, n in counts.items() if table != "runs")
    print(f"deleted run {args.run}: {rows}")
    return 0

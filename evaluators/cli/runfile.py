"""Runs as files: `export-run` writes a run with every row of it into one file, `import-run` adds such a
file's run to a database (docs/run-file.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

import evaluators.cli.arguments as options
from evaluators.cli.common import fail
from evaluators.storage import runfile


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register `export-run` and `import-run`."""
    ex = sub.add_parser("export-run", help="write a run with all its rows into one file (docs/run-file.md)")
    ex.add_argument("--db", required=True, type=options.database)
    ex.add_argument("--run", required=True)
    ex.add_argument("--out", required=True, type=options.output_file, help="the run file to write (a DuckDB file)")
    ex.set_defaults(handler=export_run)
    im = sub.add_parser("import-run", help="add the run of a run file to a database, in one transaction")
    im.add_argument("file", type=options.input_file, help="a run file written by export-run")
    im.add_argument("--db", required=True, type=options.new_database)
    im.add_argument(
        "--as",
        dest="name",
        type=options.run_name,
        default=None,
        metavar="NEW_NAME",
        help="the name to give the run here (default: its name in the file)",
    )
    im.add_argument(
        "--max-bytes",
        type=options.count,
        default=runfile.Limits.max_bytes,
        help="refuse a larger file (default: %(default)s)",
    )
    im.add_argument(
        "--max-seconds",
        type=options.duration,
        default=runfile.Limits.max_seconds,
        help="stop checking the file after this long, importing nothing (default: %(default)s)",
    )
    im.set_defaults(handler=import_run)


def export_run(args: argparse.Namespace) -> int:
    """export-run: the file, its size and its rows per table."""
    try:
        rows = runfile.export_run(args.db, args.run, args.out)
    except KeyError:
        return fail(f"{args.db}: no run named {args.run!r} (see: python -m evaluators runs --db {args.db})")
    size = Path(args.out).stat().st_size
    print(f"exported run {args.run} to {args.out} ({size / 1e6:.1f} MB): {_rows(rows)}")
    return 0


def import_run(args: argparse.Namespace) -> int:
    """import-run: the run added with its rows, or that it was already there (a no-op)."""
    try:
        done = runfile.import_run(
            args.file, args.db, args.name, limits=runfile.Limits(args.max_bytes, args.max_seconds)
        )
    except runfile.RunFileError as exc:
        return fail(str(exc))
    who = f" (the file says it was sent by {done.claimed_by})" if done.claimed_by else ""
    if not done.added:
        print(f"run {done.run_id} is already in {args.db}, the same evaluation: nothing imported")
    else:
        print(f"imported run {done.run_id} into {args.db}: {_rows(done.rows)}{who}")
    return 0


def _rows(rows: dict[str, int]) -> str:
    return ", ".join(f"{n} {table}" for table, n in rows.items() if n and table != "runs")

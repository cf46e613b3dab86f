"""What the commands share: one-line errors, the --band and share options, CSV rows, the run check."""

from __future__ import annotations

import argparse
import csv
import sys
from typing import Sequence

from evaluators.core import confidence
from evaluators.core.masking import mask_secrets
from evaluators.storage import queries

BAND_HELP = (
    "read the verdicts with this uncertainty band: a verdict with LO < p < HI is unsure and left "
    "out of its score (default: each judge kind's band, "
    + ", ".join(f"{k} {confidence.format_band(b)}" for k, b in confidence.DEFAULT_BANDS.items())
    + ")"
)


def band(text: str) -> confidence.Band:
    """--band LO,HI: the uncertainty band to read the run's verdicts with."""
    try:
        return confidence.parse_band(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("band ")) from None


def add_band(parser: argparse.ArgumentParser) -> None:
    """--band LO,HI, for a command that reads a run's scores."""
    parser.add_argument("--band", type=band, default=None, metavar="LO,HI", help=BAND_HELP)


def share(text: str) -> float:
    """A share within [0, 1] (the ledger's list thresholds, the gate's unscored rise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must lie within [0, 1], got {text!r}")
    return value


def fail(message: str, code: int = 2) -> int:
    """Print one error line (masked: judge errors may quote a key) and return the exit code."""
    print(f"error: {mask_secrets(message)}", file=sys.stderr)
    return code


def check_run(db: str, run: str) -> None:
    """ValueError (exit 2) naming the way to list the runs when `db` has no run `run`."""
    if not queries.runs.run_exists(db, run):
        raise ValueError(f"{db}: no run named {run!r} (see: python -m evaluators runs --db {db})")


def write_csv(path: str, header: Sequence[str], rows: list[list[object]]) -> None:
    """Write a header and rows as CSV (UTF-8)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def cell(value: object) -> object:
    """A CSV cell: None and NaN (not scored) are empty."""
    return "" if value is None or value != value else value

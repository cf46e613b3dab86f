"""The command line's checks at the door: argparse types for every path, number, name and URL option.

Each type refuses a bad value with ArgumentTypeError, which the CLI's parser prints as one line
naming the option (exit 2), so a command does no work and writes nothing on a bad option.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from evaluators.core.records import run_name_problem
from evaluators.dashboard.access import ENV_NAME, url_problem
from evaluators.judges import cascade
from evaluators.metrics import diagnosis
from evaluators.storage import health, store

MAX_CONCURRENCY = 1024  # judge calls in flight: each holds two tasks and a connection


def count(text: str) -> int:
    """A whole number of at least 1 (workers, calls in flight, variants, groups)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def concurrency(text: str) -> int:
    """Judge calls in flight: a whole number from 1 to MAX_CONCURRENCY."""
    value = count(text)
    if value > MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_CONCURRENCY}, got {value}")
    return value


def run_name(text: str) -> str:
    """The name of a run to write: not empty, and every character shows (see records.run_name_problem)."""
    problem = run_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def api_base(text: str) -> str:
    """An endpoint's base URL: http or https, with a host."""
    problem = url_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def ray_address(text: str) -> str:
    """--ray's ADDRESS: auto, ray://HOST:PORT or HOST:PORT; "" (--ray alone) is a local instance."""
    from evaluators.runs.cluster import address_problem

    problem = address_problem(text) if text else None
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def env_name(text: str) -> str:
    """--key-env: the NAME of an environment variable (its value is the key), never the key itself."""
    if not ENV_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            "must be the name of an environment variable (its value is the key), not the key itself"
        )
    return text


def add_endpoint(parser: argparse.ArgumentParser, replicas: bool = False) -> None:
    """--api-base (repeatable for replicas of one model with `replicas`) and --key-env, for a litellm judge."""
    if replicas:
        parser.add_argument(
            "--api-base",
            action="append",
            type=api_base,
            default=None,
            metavar="URL",
            help="base URL for an OpenAI-compatible endpoint (every litellm tier of a cascade); "
            "repeat it for replicas of one model: calls are spread over them, a failing one "
            "is routed around",
        )
    else:
        parser.add_argument(
            "--api-base", type=api_base, default=None, metavar="URL", help="base URL for an OpenAI-compatible endpoint"
        )
    parser.add_argument(
        "--key-env",
        type=env_name,
        default=None,
        metavar="NAME",
        help="the environment variable holding the judge's key: its value is the only key sent "
        "(without it, an --api-base is sent no key, never a provider's key such as "
        "OPENAI_API_KEY)",
    )


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):  # float() reads nan, inf and 1e999
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def duration(text: str) -> float:
    """A positive, finite length of time (seconds or minutes, as the option says)."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def cosine(text: str) -> float:
    """A cosine similarity threshold, within [-1, 1]."""
    value = _finite(text)
    if not -1.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"is a cosine similarity and must lie within [-1, 1], got {text!r}")
    return value


def thresholds(text: str) -> dict[str, float]:
    """Per-metric Table 2 thresholds such as 'sqc=0.75,gr=0.9', each within [0, 1]."""
    try:
        return diagnosis.parse_thresholds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def judge(text: str) -> str:
    """--judge: one judge or a chain of them, weakest first ('offline>openai/gpt-4o-mini'), spaces trimmed."""
    try:
        return cascade.SEPARATOR.join(cascade.parse_chain(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def input_file(text: str) -> str:
    """A file to read: it exists and is not a folder."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, not a file")
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: cannot read (permission denied)")
    return text


def output_file(text: str) -> str:
    """A file to write: not a folder, in a folder that exists and is writable."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, not a file")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such folder {path.parent}")
    if not os.access(path.parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"{text}: cannot write (permission denied)")
    return text


def _database(text: str, create: bool) -> str:
    try:
        health.require_database(text, create=create)
    except (store.StoreMissing, store.NotADatabase) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text  # StoreBusy passes through: the CLI exits 4, as for any busy database


def database(text: str) -> str:
    """--db of a command that reads runs: an existing RAG Triage database."""
    return _database(text, create=False)


def new_database(text: str) -> str:
    """--db of a command that writes runs: a RAG Triage database, or a new file in an existing folder."""
    return _database(text, create=True)


def duckdb_source(text: str) -> str:
    """GRAMMAR's domain data: a .sql script, or a DuckDB database file."""
    input_file(text)
    if Path(text).suffix.lower() != ".sql":
        try:
            health.check_duckdb_file(text)
        except (store.StoreMissing, store.NotADatabase) as exc:
            raise argparse.ArgumentTypeError(f"{exc}; give a DuckDB file or a .sql script") from None
    return text

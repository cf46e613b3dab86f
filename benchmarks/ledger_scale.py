"""Scale benchmark for the source ledger and trends reads on a big DB.

    .venv/bin/python benchmarks/ledger_scale.py [--items 100000] [--db /tmp/dashboard_scale.duckdb] [--reuse]

Uses the dashboard_scale database (two runs "base" and "candidate" of N items, two distinct sources
per item, so 2N sources per run: the ledger's worst case, every source its own row). Times, best of
three, each read the Sources and Trends pages make, beside the Runs page's run_summary on the same
run as the yardstick (ratios are measured in the same process, at the same load), and prints the load.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from dashboard_scale import generate  # noqa: E402

from evaluators.metrics import ledger
from evaluators.storage import queries, store  # noqa: E402


def best_of(fn: Callable[[], Any], n: int = 3) -> tuple[float, Any]:
    """The fastest of n calls in seconds, and the last result."""
    times, result = [], None
    for _ in range(n):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--db", type=Path, default=Path("/tmp/dashboard_scale.duckdb"))
    parser.add_argument("--reuse", action="store_true", help="reuse an existing generated DB")
    args = parser.parse_args()
    if not (args.reuse and args.db.exists()):
        args.db.unlink(missing_ok=True)
        start = time.perf_counter()
        generate(args.db, "base", args.items, 0.7, 1)
        generate(args.db, "candidate", args.items, 0.75, 2)
        print(f"generated {args.items} items x 2 runs in {time.perf_counter() - start:.1f} s")
    db = args.db
    key = ledger.source_key("Source 1 text for item 7.")
    # A threshold moved on the Sources page reads the grouped ledger's file (written by the first of the three
    # calls); at these thresholds each of the three lists is full.
    cache, full = Path(tempfile.mkdtemp()), ledger.Thresholds(1, 0.3, 0.5)
    cases = [
        ("Runs: run_summary (yardstick)", lambda: queries.runs.run_summary(db, "base")),
        ("Sources: ledger lists, 1 run", lambda: queries.ledger.source_ledger(db, ["base"])),
        ("Sources: ledger lists, 2 runs", lambda: queries.ledger.source_ledger(db, ["base", "candidate"])),
        (
            "Sources: lists moved, 2 runs (file)",
            lambda: queries.ledger.source_ledger(db, ["base", "candidate"], full, cache=cache),
        ),
        ("Sources: one source's retrievals", lambda: queries.ledger.source_retrievals(db, ["base", "candidate"], key)),
        (
            "Sources: whole ledger (export), 2 runs",
            lambda: queries.ledger.source_ledger(db, ["base", "candidate"], limit=None),
        ),
        ("Trends: 2 runs with a baseline", lambda: queries.trends.trend_scores(db, ["base", "candidate"], "base")),
    ]
    print(f"load average before: {os.getloadavg()}")
    base_s = None
    print(f"{'read':<42} {'best of 3':>10} {'x yardstick':>12} {'rows':>8}")
    for label, fn in cases:
        with store.reading(db):
            seconds, result = best_of(fn)
        base_s = base_s or seconds
        rows = sum(len(v) for v in result.values()) if isinstance(result, dict) else len(result)
        print(f"{label:<42} {seconds:>9.2f}s {seconds / base_s:>11.1f}x {rows:>8}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

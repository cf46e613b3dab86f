"""Flip attribution and the CI gate on two generated runs of the same items (dashboard_scale's generator).

Prints the seconds of queries.compare.flip_rows (the SQL), flips.between (SQL plus attribution) and
gate.run_gate (scores, intervals, crossings and flips), each beside the read Compare already makes
(queries.runs.run_scores_wide of one run) measured in the same run, as a ratio, with the load average.

    .venv/bin/python benchmarks/flips_scale.py --items 20000
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.dashboard_scale import generate  # noqa: E402
from evaluators.runs import flips, gate
from evaluators.storage import queries  # noqa: E402

METRICS = ["sp1", "sqc", "rp", "rqc", "gr"]


def _timed(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--db", type=Path, default=None, help="default: /tmp/flips_scale_N.duckdb")
    args = parser.parse_args()
    db = args.db or Path(f"/tmp/flips_scale_{args.items}.duckdb")
    if not db.exists():
        seconds, _ = _timed(lambda: (generate(db, "a", args.items, 0.7, 1), generate(db, "b", args.items, 0.72, 2)))
        print(f"generated 2 runs of {args.items} items in {seconds:.1f} s")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    base, _ = _timed(queries.runs.run_scores_wide, db, "a", METRICS)
    sql, rows = _timed(queries.compare.flip_rows, db, "a", "b")
    attributed, result = _timed(flips.between, db, "a", "b")
    gated, outcome = _timed(gate.run_gate, str(db), "a", "b", METRICS, {})
    print(f"run_scores_wide (one run, Compare's read)  {base:7.2f} s   1.0x")
    print(f"flip_rows (SQL, {len(rows['rows'])} rows)            {sql:7.2f} s  {sql / base:5.1f}x")
    print(f"flips.between ({result.n_flips} flips, {len(result.items)} items)  {attributed:7.2f} s  {attributed / base:5.1f}x")
    print(f"gate.run_gate (exit {outcome.exit_code})                   {gated:7.2f} s  {gated / base:5.1f}x")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

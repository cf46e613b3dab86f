"""What a parked reader saves a page run: the reads of an Item page opened from the Run table, as one
reading() block each, with the block's connection closed at its end or parked for the next (store.KEEP_S).

    .venv/bin/python benchmarks/parked_reader.py [--db /tmp/scale1m.duckdb] [--rounds 20]

Uses a dashboard_scale database (build it with `python -m benchmarks.dashboard_scale --items 1000000
--db /tmp/scale1m.duckdb --build-only --labels 0`). Each round opens a different item of run "base" (so
no read repeats a block's own), once per way, the two ways alternating so both see the same load: the
item's detail and its Run-table page (the count, the page's ids and its rows). Prints the median and
best wall ms of a block each way, their ratio, and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluators.metrics.registry import THELMA  # noqa: E402
from evaluators.storage import queries, store  # noqa: E402


def page_run(db: str, item: int, keep: bool) -> float:
    """Wall seconds of one Item page's reads of item i{item:06d}, as one reading() block."""
    table = store.StoredRun(db, "base", tuple(THELMA))
    if not keep:
        store._unpark(db)  # the other way's last reader: a closed run opens its own, as before parking
    started = time.perf_counter()
    with store.reading(db, keep=keep):
        queries.items.item_detail(db, "base", f"i{item:06d}")
        queries.diagnosis.filter_items(table, THELMA, {m: 0.5 for m in THELMA}, offset=(item // 200) * 200)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=Path("/tmp/scale1m.duckdb"))
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    if not args.db.exists():
        sys.exit(f"{args.db}: no such database; build it as the docstring says")
    db = str(args.db)
    page_run(db, 0, False)  # the first open of the file pays for the page cache
    times: dict[bool, list[float]] = {False: [], True: []}
    for k in range(args.rounds):
        for keep in (False, True):
            times[keep].append(page_run(db, 1 + 997 * (2 * k + keep), keep))
    closed, parked = (statistics.median(times[w]) * 1000 for w in (False, True))
    print(f"{args.rounds} page runs each way on {args.db.name}; load average {os.getloadavg()[0]:.2f}")
    print(f"  closed at the end of the run: median {closed:.1f} ms, best {min(times[False]) * 1000:.1f} ms")
    print(f"  parked for the next run:      median {parked:.1f} ms, best {min(times[True]) * 1000:.1f} ms")
    print(f"  parked / closed: {parked / closed:.2f}")


if __name__ == "__main__":
    main()

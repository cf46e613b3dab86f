"""Runs as files at scale: export-run and import-run of a 10k-item run, and how big a hosted database grows
per imported item with an LLM judge's calls.

    nice -n 10 .venv/bin/python benchmarks/run_file.py [--items 10000] [--llm-items 300]

1. A synthetic run of --items items built as benchmarks/dashboard_scale.py builds its runs (about 20
   verdicts, 12 components, 7 scores and 4 judge calls per item), exported to a run file and imported into
   a new database: seconds of each (target: both under 30 s), the file's size and its bytes per item.
2. A run of --llm-items items judged by the real engine through litellm against the loopback
   OpenAI-protocol test server (tests/openai_server.py): the THELMA suite's real prompts and replies are
   stored with every call. Its run file is imported into a new database and into the hosted database of
   step 1, and each one's growth per imported item is printed (what a host's disk pays per item).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("OPENAI_API_KEY", "x")

from openai_server import OpenAIServer  # noqa: E402
from test_runner import TRIPLET  # noqa: E402

from benchmarks.dashboard_scale import generate  # noqa: E402
from evaluators.runs import runner  # noqa: E402
from evaluators.storage import runfile, store  # noqa: E402

TARGET_S = 30.0


def _size(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, Path(f"{db}.wal")) if p.exists())


def synthetic(folder: Path, items: int) -> None:
    """Export and import one synthetic run of `items` items; print the seconds and the file's size."""
    db = folder / "ci.duckdb"
    start = time.perf_counter()
    generate(db, "nightly", items, quality=0.7, seed=1)
    print(
        f"synthetic run of {items:,} items generated in {time.perf_counter() - start:.1f} s "
        f"(database {_size(db) / 1e6:.1f} MB)"
    )
    file = folder / "nightly.duckdb"
    start = time.perf_counter()
    rows = runfile.export_run(db, "nightly", file)
    export_s = time.perf_counter() - start
    start = time.perf_counter()
    done = runfile.import_run(file, folder / "hosted.duckdb")
    import_s = time.perf_counter() - start
    assert done.added and done.rows == rows, (done.rows, rows)
    size = file.stat().st_size
    total = export_s + import_s
    print(
        f"export {export_s:.1f} s, import {import_s:.1f} s, together {total:.1f} s "
        f"(target < {TARGET_S:.0f} s: {'met' if total < TARGET_S else 'MISSED'}); run file {size / 1e6:.1f} MB, "
        f"{size / items:,.0f} bytes per item; rows: {rows}"
    )


def llm(folder: Path, items: int) -> None:
    """A run judged through litellm, imported into a new database and into the synthetic hosted one: the
    bytes each pays per item, judge calls included."""
    db = folder / "llm.duckdb"
    triplets = [
        dataclasses.replace(
            TRIPLET,
            id=f"t{i:04d}",
            query=f"{TRIPLET.query} (case {i})",
            sources=tuple(f"{s} Case {i}." for s in TRIPLET.sources),
            response=f"{TRIPLET.response} Case {i}.",
        )
        for i in range(items)
    ]
    with OpenAIServer() as server:
        start = time.perf_counter()
        summary = runner.evaluate(triplets, db, "llm", "openai/test-judge", api_base=server.base_url)
        print(
            f"LLM-judged run of {items} items: {summary.stats['calls']} judge calls in "
            f"{time.perf_counter() - start:.1f} s"
        )
    file = folder / "llm-run.duckdb"
    rows = runfile.export_run(db, "llm", file)
    print(f"its run file: {file.stat().st_size / 1e6:.1f} MB; rows: {rows}")
    empty = folder / "empty.duckdb"
    store.migrate(empty)
    for name, hosted in (
        ("a new database", empty),
        ("the hosted database of the synthetic run", folder / "hosted.duckdb"),
    ):
        before = _size(hosted)
        runfile.import_run(file, hosted)
        grown = _size(hosted) - before
        print(f"imported into {name}: it grew {grown / 1e6:.2f} MB, {grown / items:,.0f} bytes per item")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--llm-items", type=int, default=300)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="run-file-bench-") as tmp:
        synthetic(Path(tmp), args.items)
        llm(Path(tmp), args.llm_items)
    print(f"load average {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()

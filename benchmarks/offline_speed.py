"""How fast the offline judge scores the full THELMA suite on WikiEval-sized triplets.

Measures, after the model is loaded and one warm-up item is scored:
- the engine in process (`evaluate_item` with the offline judge, all seven metrics), and
- the same items end to end through `runner.evaluate` into a temporary DuckDB file,
each time with an empty embedding cache, on distinct triplets (question, context_v1, answer) of
../shared/datasets/wikieval. Prints triplets per second, CPU seconds per triplet and the start-up
time (import plus model load).

    python -m benchmarks.offline_speed [--rows 50] [--responses answer,ungrounded_answer,poor_answer]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WIKIEVAL = ROOT.parent / "shared" / "datasets" / "wikieval" / "wikieval.jsonl"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=50, help="WikiEval rows to use (default all 50)")
    p.add_argument("--responses", default="answer_text",
                   help="WikiEval response fields, comma-separated: each row gives one triplet per field")
    args = p.parse_args(argv)
    if not WIKIEVAL.exists():
        print(f"error: {WIKIEVAL} not found", file=sys.stderr)
        return 2

    t0, c0 = time.perf_counter(), time.process_time()
    from evaluators import embeddings, evidence, metrics, offline, registry, runner
    from evaluators.records import Item
    from evaluators.vocabulary import THELMA

    embeddings.embed(["warm the model"])
    startup = time.perf_counter() - t0, time.process_time() - c0

    rows = [json.loads(line) for line in WIKIEVAL.open(encoding="utf-8")][: args.rows]
    items = [Item(f"{r['row_idx']}-{field}", r["question_text"], tuple(r["context_v1"]), r[field])
             for r in rows for field in args.responses.split(",")]
    judge = offline.OfflineJudge()

    async def score(batch: Sequence[Item]) -> None:
        for item in batch:
            await metrics.evaluate_item(item, registry.THELMA_METRICS, judge)

    asyncio.run(score(items[:1]))  # warm-up: first-call costs are not steady state

    def cold() -> None:
        embeddings._EMBED_CACHE.clear()
        evidence._PASSAGES.clear()
        evidence._query.cache_clear()

    cold()
    w, c = time.perf_counter(), time.process_time()
    asyncio.run(score(items))
    engine = time.perf_counter() - w, time.process_time() - c

    cold()
    with tempfile.TemporaryDirectory() as tmp:
        w, c = time.perf_counter(), time.process_time()
        runner.evaluate(items, Path(tmp) / "speed.duckdb", "speed", judge=runner.OFFLINE, metrics=THELMA)
        stored = time.perf_counter() - w, time.process_time() - c

    n = len(items)
    print(f"offline judge, full THELMA suite (sp1 sp2 sqc rp rqc sd gr), {n} WikiEval triplets, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"  start-up (import + model load): {startup[0]:.1f} s wall, {startup[1]:.1f} s CPU")
    for label, (wall, cpu) in (("engine in process", engine), ("runner into DuckDB", stored)):
        print(f"  {label:<20} {n / wall:6.1f} triplets/s  ({wall:.1f} s wall, {cpu / n:.2f} CPU s per triplet)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

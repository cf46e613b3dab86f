"""How fast the offline judge scores the full THELMA suite on WikiEval-sized triplets.

Measures, after the model is loaded and one warm-up item is scored:
- the engine in process (`evaluate_item` with the offline judge, all seven metrics), one item
  at a time and 16 items side by side (as many as the runner keeps in flight), and
- the same items end to end through `runner.evaluate` into a temporary DuckDB file,
each time with empty caches (embeddings and every per-text split), on distinct triplets
(question, context_v1, answer) of ../shared/datasets/wikieval. Prints triplets per second, CPU
seconds per triplet, the cores kept busy (CPU over wall time: compare it with the load average
on this shared machine) and the start-up time (import plus model load); then, counted on one more
pass, the encoder's work per triplet (calls, forward passes, texts, tokens), which load does not move.

With --write-verdicts FILE or --check-against FILE it also evaluates the development check set
through the runner (WikiEval rows 0-19 with answer, ungrounded_answer and poor_answer, and the
three demo runs of data/demo/runs) and writes its verdicts and scores as sorted JSON lines, or
compares them with a FILE written before a change: every value, p and evidence within 1e-6, every
detail text equal. A speed-up must leave the offline judge's verdicts as they were.

    python -m benchmarks.offline_speed [--rows 50] [--responses answer,ungrounded_answer,poor_answer]
    python -m benchmarks.offline_speed --write-verdicts before.jsonl   # on the old code
    python -m benchmarks.offline_speed --check-against before.jsonl    # on the new code; exit 1 on a change
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
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WIKIEVAL = ROOT.parent / "shared" / "datasets" / "wikieval" / "wikieval.jsonl"
CHECK_ROWS = 20  # WikiEval's development rows: 20-49 are held out
CHECK_RESPONSES = ("answer", "ungrounded_answer", "poor_answer")
TOLERANCE = 1e-6
RUNNER_ITEMS = 16  # items the runner keeps in flight at its default concurrency (8)
# What identifies a stored verdict or score, what must match exactly, and what within TOLERANCE.
VERDICT_KEY = ("run", "item_id", "metric", "component_kind", "component_idx", "target")
SCORE_KEY = ("run", "item_id", "metric")
NUMBERS = ("value", "evidence", "p")


def clear_caches() -> None:
    """Empty the offline judge's per-text caches (embeddings, passages, splits), as in a new process;
    MiniLM's word list stays."""
    from evaluators.core import text
    from evaluators.judges import embeddings, evidence, signals

    embeddings._EMBED_CACHE.clear()
    signals._PASSAGES.clear()
    for module in (evidence, signals, text):
        for name, function in vars(module).items():
            if hasattr(function, "cache_clear") and name != "_vocabulary":
                function.cache_clear()


def check_set() -> dict[str, list]:
    """The development check set by run name: WikiEval rows 0-19 (three responses each) and the demo runs."""
    from data.build_demo import run_items
    from evaluators.core.records import Item

    rows = [json.loads(line) for line in WIKIEVAL.open(encoding="utf-8")][:CHECK_ROWS]
    wikieval = [
        Item(f"{r['row_idx']}-{field}", r["question_text"], tuple(r["context_v1"]), r[field])
        for r in rows
        for field in CHECK_RESPONSES
    ]
    return {"wikieval": wikieval, **run_items()}


def stored_verdicts(db: Path) -> list[dict]:
    """Every verdict and score of a check database as plain records, sorted; the run named, not its id."""
    from evaluators.storage import store

    verdicts = store.query(
        db,
        """SELECT 'verdict' AS kind, run_id AS run, item_id, metric, component_kind,
                                  component_idx, target, value, status, evidence, detail, p, p_kind, tier
                                  FROM verdicts""",
    )
    scores = store.query(
        db,
        """SELECT 'score' AS kind, run_id AS run, item_id, metric, value, n_scored, n_total,
                                n_unsure, status FROM scores""",
    )
    records = [
        {k: (None if v != v else v) for k, v in r.items()}  # NaN (a missing float) as None
        for frame in (verdicts, scores)
        for r in frame.to_dict("records")
    ]
    return sorted(records, key=lambda r: json.dumps([r["kind"], *(r.get(k) for k in VERDICT_KEY)], default=str))


class _OneAtATime:
    """A judge whose prompts are answered one at a time, in the order the engine asks them."""

    def __init__(self, judge: Any) -> None:
        self.judge, self.name, self.lock = judge, judge.name, asyncio.Lock()

    async def ask(self, prompt: str, **variables: Any) -> Any:
        async with self.lock:
            return await self.judge.ask(prompt, **variables)


def evaluate_check_set(tmp: Path, sets: dict[str, list] | None = None) -> list[dict]:
    """The check set evaluated by the offline judge through the runner into a fresh DuckDB.

    A text's vector moves by up to about 3e-7 with the batch it is encoded in (its padding), and
    the runner's concurrent items race to encode shared texts (a query, the sources), so two runs
    of the same code could differ in a calibrated p near a steep point. A
    first pass encodes every text deterministically (one item, one prompt at a time, in order);
    the runner pass then reads the vectors from the cache, so only a change of the code moves them.
    """
    from evaluators.judges import factory, offline
    from evaluators.metrics import registry
    from evaluators.metrics import thelma as metrics
    from evaluators.metrics.registry import THELMA
    from evaluators.runs import runner

    sets = check_set() if sets is None else sets
    judge = _OneAtATime(offline.OfflineJudge())
    for items in sets.values():
        for item in items:
            asyncio.run(metrics.evaluate_item(item, registry.THELMA_METRICS, judge))
    db = tmp / "check.duckdb"
    for run, items in sets.items():
        runner.evaluate(items, db, run, judge=factory.OFFLINE, metrics=THELMA)
    return stored_verdicts(db)


def differences(before: list[dict], after: list[dict], shown: int = 10) -> list[str]:
    """What differs between two exports: missing or added records, values beyond TOLERANCE, other fields."""

    def keyed(records: list[dict]) -> dict[tuple, dict]:
        return {
            (r["kind"], *(r.get(k) for k in (VERDICT_KEY if r["kind"] == "verdict" else SCORE_KEY))): r for r in records
        }

    old, new = keyed(before), keyed(after)
    problems = [f"missing: {k}" for k in old.keys() - new.keys()] + [f"added: {k}" for k in new.keys() - old.keys()]
    for key in sorted(old.keys() & new.keys(), key=str):
        a, b = old[key], new[key]
        for field in sorted(a.keys() | b.keys()):
            x, y = a.get(field), b.get(field)
            same = (
                (x is None and y is None)
                or (field in NUMBERS and x is not None and y is not None and abs(x - y) <= TOLERANCE)
                or x == y
            )
            if not same:
                problems.append(f"{key} {field}: {x!r} -> {y!r}")
    return problems[:shown] + ([f"... and {len(problems) - shown} more"] if len(problems) > shown else [])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=50, help="WikiEval rows to use (default all 50)")
    p.add_argument(
        "--responses",
        default="answer_text",
        help="WikiEval response fields, comma-separated: each row gives one triplet per field",
    )
    p.add_argument(
        "--write-verdicts",
        type=Path,
        metavar="FILE",
        help="evaluate the development check set and write its verdicts to FILE (JSON lines)",
    )
    p.add_argument(
        "--check-against",
        type=Path,
        metavar="FILE",
        help="evaluate the development check set and compare its verdicts with FILE; exit 1 if any changed",
    )
    args = p.parse_args(argv)
    if not WIKIEVAL.exists():
        print(f"error: {WIKIEVAL} not found", file=sys.stderr)
        return 2
    if args.write_verdicts or args.check_against:
        return check(args.write_verdicts, args.check_against)

    t0, c0 = time.perf_counter(), time.process_time()
    from evaluators.core.records import Item
    from evaluators.judges import embeddings, factory, offline
    from evaluators.metrics import registry
    from evaluators.metrics import thelma as metrics
    from evaluators.metrics.registry import THELMA
    from evaluators.runs import runner

    embeddings.embed(["warm the model"])
    startup = time.perf_counter() - t0, time.process_time() - c0

    rows = [json.loads(line) for line in WIKIEVAL.open(encoding="utf-8")][: args.rows]
    items = [
        Item(f"{r['row_idx']}-{field}", r["question_text"], tuple(r["context_v1"]), r[field])
        for r in rows
        for field in args.responses.split(",")
    ]
    judge = offline.OfflineJudge()

    async def score(batch: Sequence[Item], side_by_side: int = 1) -> None:
        slots = asyncio.Semaphore(side_by_side)

        async def one(item: Item) -> None:
            async with slots:
                await metrics.evaluate_item(item, registry.THELMA_METRICS, judge)

        await asyncio.gather(*(one(item) for item in batch))

    asyncio.run(score(items[:1]))  # warm-up: first-call costs are not steady state

    measured: list[tuple[str, float, float]] = []
    for label, side_by_side in (
        ("engine, 1 item at a time", 1),
        (f"engine, {RUNNER_ITEMS} items at a time", RUNNER_ITEMS),
    ):
        clear_caches()
        w, c = time.perf_counter(), time.process_time()
        asyncio.run(score(items, side_by_side))
        measured.append((label, time.perf_counter() - w, time.process_time() - c))

    clear_caches()
    with tempfile.TemporaryDirectory() as tmp:
        w, c = time.perf_counter(), time.process_time()
        runner.evaluate(items, Path(tmp) / "speed.duckdb", "speed", judge=factory.OFFLINE, metrics=THELMA)
        measured.append(("runner into DuckDB", time.perf_counter() - w, time.process_time() - c))

    n = len(items)
    print(
        f"offline judge, full THELMA suite (sp1 sp2 sqc rp rqc sd gr), {n} WikiEval triplets, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"  start-up (import + model load): {startup[0]:.1f} s wall, {startup[1]:.1f} s CPU")
    for label, wall, cpu in measured:
        print(
            f"  {label:<26} {n / wall:6.1f} triplets/s  ({wall:.1f} s wall, {cpu / n:.2f} CPU s per triplet, "
            f"{cpu / wall:.1f} cores busy)"
        )
    print(f"  load average after: {os.getloadavg()[0]:.1f}")
    print(encoder_work(items, judge))
    return 0


def encoder_work(items: Sequence[Any], judge: Any) -> str:
    """What MiniLM is asked to do per triplet, the engine scoring one item at a time from empty caches:
    encoder calls, forward passes, texts, their real tokens, and the tokens the passes run (padding
    included). Counts, not times, so a shared machine's load does not move them."""
    from evaluators.judges import embeddings
    from evaluators.metrics import registry
    from evaluators.metrics import thelma as metrics

    counted = {"calls": 0, "passes": 0, "texts": 0, "tokens": 0, "padded": 0}
    encode = embeddings._encode

    def counting(texts: list[str]) -> Any:
        lengths = [len(e.ids) for e in embeddings._loaded()[1].encode_batch(texts)]
        groups = embeddings._batches(lengths)
        counted["calls"] += 1
        counted["passes"] += len(groups)
        counted["texts"] += len(texts)
        counted["tokens"] += sum(lengths)
        counted["padded"] += sum(len(g) * max(lengths[i] for i in g) for g in groups)
        return encode(texts)

    clear_caches()
    embeddings._encode = counting
    try:
        for item in items:
            asyncio.run(metrics.evaluate_item(item, registry.THELMA_METRICS, judge))
    finally:
        embeddings._encode = encode
    per = {k: v / len(items) for k, v in counted.items()}
    return (
        f"  encoder work per triplet: {per['calls']:.2f} calls, {per['passes']:.2f} passes, {per['texts']:.1f} "
        f"texts of {per['tokens']:.0f} tokens, {per['padded']:.0f} with padding"
    )


def check(write: Path | None, against: Path | None) -> int:
    """Evaluate the check set; write its verdicts to `write`, compare them with `against`."""
    if against is not None and not against.exists():
        print(f"error: {against} not found", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        records = evaluate_check_set(Path(tmp))
    n = sum(r["kind"] == "verdict" for r in records)
    if write is not None:
        write.write_text("".join(json.dumps(r, default=str) + "\n" for r in records), encoding="utf-8")
        print(f"wrote {n} verdicts and {len(records) - n} scores to {write}")
    if against is None:
        return 0
    before = [json.loads(line) for line in against.open(encoding="utf-8")]
    problems = differences(before, json.loads(json.dumps(records, default=str)))
    if problems:
        print(f"verdicts changed against {against}:", *problems, sep="\n  ")
        return 1
    print(f"identical: {n} verdicts and {len(records) - n} scores match {against} (numbers within {TOLERANCE:g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

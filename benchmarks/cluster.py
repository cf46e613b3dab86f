"""What judging on Ray costs and gains (`evaluate --ray`), measured in one sitting on this machine.

One local Ray instance (as many CPUs as the machine has) serves every measurement; each run is a fresh
database, so nothing is cached. Printed, each with the load average beside it:

1. Triplets per second on WikiEval triplets (benchmarks/endpoint.py's set) with the offline judge: the
   plain runner (one process), 1 Ray worker and 2 Ray workers, in alternating rounds; each run's whole
   wall time (worker start-up included), its steady rate (the whole run less the same configuration's run
   of one item: start-up), and the CPU seconds a triplet of this process (on Ray: the driver) and of the
   Ray workers (sampled from /proc).
2. The same with the loopback LLM judge (tests/openai_server.py in its own process, --latency per call)
   at --concurrency C: the plain runner with C calls in flight, each worker with its share.
3. Ray's overhead per shard: trivial items (nothing to judge) through one worker, one item per shard
   against one shard of them all.
4. The driver's write rate: finished items of WikiEval shape (the offline judge's, and the LLM judge's
   with their judge calls) pushed through the runner's Writer into DuckDB as fast as it takes them, in
   verdicts per second; beside it, the driver's cost to unpickle one item's results from a worker.
5. On paper, from those figures: the workers (one CPU each) that judge 1M items in an hour with each
   judge, and the worker count at which the single writer becomes the limit.

    nice -n 10 .venv/bin/python benchmarks/cluster.py [--items 150] [--rounds 2] [--latency 0.2]
                                                      [--concurrency 32] [--write-items 20000]
                                                      [--parts offline,llm,shards,write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # one machine: Ray on the loopback address
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_worker_niceness", "0")  # the workers at this process's priority, as --ray starts them
os.environ.setdefault("OPENAI_API_KEY", "x")

from benchmarks.endpoint import WIKIEVAL, triplets  # noqa: E402
from benchmarks.offline_speed import clear_caches  # noqa: E402
from evaluators.core.records import Item  # noqa: E402
from evaluators.judges.factory import JudgeConfig  # noqa: E402
from evaluators.runs import runner  # noqa: E402
from evaluators.runs.cluster import ClusterOptions  # noqa: E402
from evaluators.runs.runner import RunOptions  # noqa: E402

MODEL = "openai/test-judge"
HOUR_ITEMS = 1_000_000  # the target: a million items judged in an hour


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def wikieval(n: int) -> list[Item]:
    return [Item(t["id"], t["query"], tuple(t["sources"]), t["response"]) for t in triplets(n)]  # type: ignore[arg-type]


class WorkerCPU:
    """The CPU seconds of this machine's Ray worker processes (`ray::_Worker`), sampled from /proc while a
    run lasts (a worker's process is gone once its run ends)."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> "WorkerCPU":
        self.before = self._read()  # a worker process of an earlier run, still ending, counts from now
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _sample(self) -> None:
        while not self.stop.wait(0.2):
            self.seen.update(self._read())

    @staticmethod
    def _read() -> dict[int, float]:
        found = {}
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            try:
                if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::_Worker"):
                    continue
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            found[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return found

    @property
    def seconds(self) -> float:
        return sum(cpu - self.before.get(pid, 0.0) for pid, cpu in self.seen.items())


def timed(
    items: list[Item], db: Path, options: RunOptions, log: Path | None = None
) -> tuple[float, float, float, float, str]:
    """(whole wall s, steady triplets/s, this process's CPU s a triplet, the Ray workers' CPU s a triplet,
    load after). Steady: over the middle half of the items (middle_rate), or with the judge's request `log`,
    from the first request's arrival to the last reply (the judged span: start-up, imports and Ray workers,
    left out). On Ray this process is the driver: its CPU is the cache, the results' arrival and the writer's
    group commits."""
    stamps: list[float] = []
    if log is not None:
        log.write_text("")

    def seen(progress: runner.Progress) -> None:
        if progress.done > progress.skipped and len(stamps) < progress.done:
            stamps.append(time.perf_counter())

    t0, c0 = time.perf_counter(), time.process_time()
    with WorkerCPU() as workers:
        runner.evaluate(items, db, "bench", options=options, on_progress=seen)
    wall, cpu = time.perf_counter() - t0, (time.process_time() - c0) / len(items)
    if log is not None:
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        span = max(x["finished"] for x in lines) - min(x["arrived"] for x in lines)
        return wall, len(items) / span, cpu, workers.seconds / len(items), load()
    return wall, middle_rate(stamps), cpu, workers.seconds / len(items), load()


def middle_rate(stamps: list[float]) -> float:
    """Items a second over the middle half of a run (from the item a quarter in to the one three quarters in):
    what start-up, the first wave of items in flight and the last stragglers leave of the steady rate."""
    a, b = len(stamps) // 4, (3 * len(stamps)) // 4
    return (b - a) / (stamps[b] - stamps[a]) if b > a and stamps[b] > stamps[a] else 0.0


def compare(
    items: list[Item], judge: JudgeConfig, rounds: int, tmp: Path, label: str, log: Path | None = None
) -> dict[str, float]:
    """Plain runner, 1 and 2 Ray workers, alternating, `rounds` times; prints each run, returns the best
    steady rate of each."""
    ways: dict[str, Callable[[], RunOptions]] = {
        "plain runner": lambda: RunOptions(judge),
        "1 Ray worker": lambda: RunOptions(judge, cluster=ClusterOptions(None, 1)),
        "2 Ray workers": lambda: RunOptions(judge, cluster=ClusterOptions(None, 2)),
    }
    best: dict[str, float] = {}
    print(f"\n{label}: {len(items)} WikiEval triplets, {rounds} alternating rounds ({load()} before)")
    for r in range(rounds):
        for name, options in ways.items():
            start_up = 0.0
            if log is None:  # the same configuration on one item: start-up (Ray's workers, imports, the model)
                clear_caches()
                start_up = timed(items[:1], tmp / f"{label[:3]}-{name[:1]}-{r}-one.duckdb", options())[0]
            clear_caches()  # the plain runner's process keeps its texts' vectors; a worker starts empty
            wall, steady, cpu, worker_cpu, after = timed(items, tmp / f"{label[:3]}-{name[:1]}-{r}.duckdb",
                                                         options(), log)
            if log is None:
                steady = (len(items) - 1) / (wall - start_up)
            best[name] = max(best.get(name, 0.0), steady)
            print(f"  round {r + 1}  {name:<14} {len(items) / wall:6.2f} triplets/s whole run ({wall:5.1f} s), "
                  f"{steady:6.2f} steady; CPU s a triplet: {cpu:.3f} this process, {worker_cpu:.3f} Ray workers "
                  f"(start-up included)  [{after}]")
    plain, one, two = best["plain runner"], best["1 Ray worker"], best["2 Ray workers"]
    print(f"  best steady: plain {plain:.2f}, 1 worker {one:.2f}, 2 workers {two:.2f} triplets/s; "
          f"2 workers / 1 worker = {two / one:.2f}, 1 worker / plain = {one / plain:.2f}, "
          f"2 workers / plain = {two / plain:.2f}")
    return best


def shard_overhead(n: int, tmp: Path) -> float:
    """Seconds of Ray overhead per shard: `n` trivial items (an empty response: nothing to judge) through
    one worker as n shards of one item against one shard of n."""
    items = [Item(f"t{k}", f"question {k}?", ("a source.",), "...") for k in range(n)]
    spans: dict[int, float] = {}
    for size in (n, 1, n, 1):
        options = RunOptions(JudgeConfig(), metrics=("rp",), cluster=ClusterOptions(None, 1, size))
        _, steady, _, _, _ = timed(items, tmp / f"shards-{size}-{time.monotonic_ns()}.duckdb", options)
        spans[size] = min(spans.get(size, float("inf")), (n // 2) / steady)  # the middle half of the items
    per = (spans[1] - spans[n]) / (n // 2)
    print(f"\nRay's overhead per shard: {n} trivial items (nothing to judge) through 1 worker, over the middle "
          f"half of the items: {n} shards of 1 item in {spans[1]:.2f} s against 1 shard of {n} in {spans[n]:.2f} s "
          f"(best of 2 each): {per * 1000:.1f} ms a shard  [{load()}]")
    return per


def sample_results(items: list[Item], judge: JudgeConfig) -> list[tuple[Item, Any, list[Any]]]:
    """Real results of a few items (with the judge calls each made): the shapes the write rate copies."""
    from evaluators.judges.factory import open_chain
    from evaluators.metrics import registry
    from evaluators.metrics import thelma as metrics

    async def run() -> list[tuple[Item, Any, list[Any]]]:
        from contextlib import AsyncExitStack

        found = []
        async with AsyncExitStack() as stack:
            calls: list[Any] = []
            judge_, _ = await open_chain(stack, judge, {}, calls.append)
            for item in items:
                calls.clear()
                result = await metrics.evaluate_item(item, registry.THELMA_METRICS, judge_)
                found.append((item, result, list(calls)))
        return found

    return asyncio.run(run())


def copies(samples: list[tuple[Item, Any, list[Any]]], n: int) -> list[tuple[Item, Any, list[Any]]]:
    """`n` items copied from the samples under new ids (their calls under new keys)."""
    out = []
    for k in range(n):
        item, result, calls = samples[k % len(samples)]
        new_id = f"w{k}"

        def moved(records: list[Any]) -> list[Any]:
            return [replace(r, item_id=new_id) for r in records]

        keyed = {c.key: f"{k:08d}{c.key[8:]}" for c in calls}
        out.append((replace(item, id=new_id),
                    replace(result, components=[replace(c, item_id=new_id, call_key=keyed.get(c.call_key))
                                                for c in result.components],
                            verdicts=[replace(v, item_id=new_id, call_key=keyed.get(v.call_key))
                                      for v in result.verdicts],
                            scores=moved(result.scores)),
                    [replace(c, key=keyed[c.key]) for c in calls]))
    return out


def write_rate(results: list[tuple[Item, Any, list[Any]]], db: Path, label: str) -> float:
    """Verdicts per second the runner's Writer puts into DuckDB, fed as fast as it takes them."""
    from evaluators.core.records import Run
    from evaluators.runs.writer import Writer
    from evaluators.storage import ownership

    owner = ownership.Owner.this_process()
    items = [i for i, _, _ in results]
    ownership.claim_run(db, Run("w", "bench", {}, {}), {i.id: i.content_hash() for i in items}, owner, 20.0)
    writer = Writer(db, "w", owner, 20.0, lambda: None)
    n_verdicts = sum(len(r.verdicts) for _, r, _ in results)
    n_calls = sum(len(c) for _, _, c in results)

    async def feed() -> None:
        loop = asyncio.create_task(writer.loop())
        for k, (item, result, calls) in enumerate(results):
            for call in calls:
                writer.add_call(call)
            writer.add_item(item, result)
            if k % 500 == 499:
                await asyncio.sleep(0)  # the writer takes what has come, as answers arrive from workers
        writer.close()
        await loop

    t0 = time.perf_counter()
    asyncio.run(feed())
    wall = time.perf_counter() - t0
    blob = [pickle.dumps((i.id, r)) for i, r, _ in results[:200]]
    t1 = time.perf_counter()
    for b in blob:
        pickle.loads(b)
    unpickle = (time.perf_counter() - t1) / len(blob)
    rate = n_verdicts / wall
    print(f"  {label}: {len(results)} items, {n_verdicts / len(results):.1f} verdicts and {n_calls / len(results):.1f} "
          f"judge calls each, in {wall:.2f} s: {rate:,.0f} verdicts/s ({len(results) / wall:,.0f} items/s, "
          f"{n_calls / wall:,.0f} calls/s); unpickling one item's results {unpickle * 1e6:.0f} µs  [{load()}]")
    return rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--items", type=int, default=150, help="WikiEval triplets per run (several times the items in flight)")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of plain, 1 and 2 workers")
    p.add_argument("--latency", type=float, default=0.2, help="seconds the loopback judge takes per call")
    p.add_argument("--concurrency", type=int, default=32, help="the LLM judge's calls in flight in all")
    p.add_argument("--write-items", type=int, default=20000, help="items pushed through the writer")
    p.add_argument("--shards", type=int, default=100, help="trivial items (and shards) for the overhead")
    p.add_argument("--parts", default="offline,llm,shards,write", help="what to measure (default: all of it)")
    args = p.parse_args()
    if not WIKIEVAL.exists():
        raise SystemExit(f"error: {WIKIEVAL} not found")
    import ray

    print(f"benchmarks/cluster.py, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {load()}")
    t0 = time.perf_counter()
    ray.init(include_dashboard=False, configure_logging=False, logging_level="ERROR", log_to_driver=False)
    print(f"a local Ray instance of {int(ray.cluster_resources()['CPU'])} CPUs started in "
          f"{time.perf_counter() - t0:.1f} s")
    items = wikieval(args.items)
    tmp = Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "openai_server.py"), "--latency",
                               str(args.latency), "--log", str(tmp / "requests.jsonl")], stdout=subprocess.PIPE,
                              text=True)
    try:
        url = server.stdout.readline().strip()  # type: ignore[union-attr]
        parts = set(args.parts.split(","))
        llm_judge = JudgeConfig(MODEL, url, concurrency=args.concurrency)
        offline = compare(items, JudgeConfig(), args.rounds, tmp, "offline judge") if "offline" in parts else {}
        llm = {}
        if "llm" in parts:
            llm = compare(items, llm_judge, args.rounds, tmp,
                          f"loopback LLM judge ({args.latency * 1000:.0f} ms a call, {args.concurrency} in flight)",
                          tmp / "requests.jsonl")
        per_shard = shard_overhead(args.shards, tmp) if "shards" in parts else None
        rates, per_item = {}, {}
        if "write" in parts:
            print("\nthe driver's write rate (the runner's Writer, group commits into one DuckDB file):")
            samples = wikieval(12)
            shaped = {"offline-judged": copies(sample_results(samples, JudgeConfig()), args.write_items),
                      "LLM-judged": copies(sample_results(samples, llm_judge), args.write_items // 4)}
            rates = {label: write_rate(found, tmp / f"w-{label}.duckdb", label + " items")
                     for label, found in shaped.items()}
            per_item = {label: sum(len(r.verdicts) for _, r, _ in found) / len(found) for label, found in shaped.items()}
    finally:
        server.terminate()
        server.wait(timeout=10)
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    if parts >= {"offline", "llm", "shards", "write"}:
        on_paper(offline, llm, per_shard or 0.0, rates, per_item)


def on_paper(offline: dict[str, float], llm: dict[str, float], per_shard: float, rates: dict[str, float],
             per_item: dict[str, float]) -> None:
    """Workers for 1M items an hour with each judge, and where one writer stops keeping up."""
    need = HOUR_ITEMS / 3600
    print(f"\non paper: 1M items in an hour is {need:.0f} triplets/s")
    for label, best, shape in (("offline judge", offline, "offline-judged"), ("loopback LLM judge", llm, "LLM-judged")):
        per_worker = best["2 Ray workers"] / 2
        workers = need / per_worker
        writer_items = rates[shape] / per_item[shape]
        print(f"  {label}: {per_worker:.2f} triplets/s a worker (half of 2 workers' steady rate) -> "
              f"{workers:,.0f} workers (one CPU each, so {workers:,.0f} cores) for 1M in an hour; one writer "
              f"takes {writer_items:,.0f} items/s, so it becomes the limit past {writer_items / per_worker:,.0f} "
              f"workers ({writer_items * 3600 / 1e6:.1f}M items an hour)")
    print(f"  Ray's overhead per shard ({per_shard * 1000:.1f} ms) against a shard of 256 offline items "
          f"({256 / (offline['2 Ray workers'] / 2):.0f} s of a worker): "
          f"{per_shard / (256 / (offline['2 Ray workers'] / 2)):.2%}")


if __name__ == "__main__":
    main()

"""Big responses evaluated offline: time and peak memory for 150 KB and 1 MB responses.

Each case runs in a child process of its own, so its peak RSS (VmHWM) is its own: one big item
among two ordinary ones, all seven THELMA metrics, the offline judge, `runner.evaluate` into a
temporary DuckDB file, as `evaluate` does. Responses:
- yes:      "Yes. " repeated (the input that used to segfault SD; it states nothing now, so it is empty);
- repeated: a five-sentence paragraph repeated to the size (a bloated, repetitive answer);
- distinct: every sentence different (the most the encoder has to do).
Prints, per case: wall and CPU seconds, peak RSS, sentences, and the big item's scores; the
target is <= 60 s and <= 2 GB for a 1 MB response. On a shared machine, CPU seconds are the
steadier figure.

    python -m benchmarks.big_input [--sizes 150000,1000000] [--kinds yes,repeated,distinct]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QUERY = "When was the Chimnabai Clock Tower completed? And who was it named after?"
SOURCE = ("The Chimnabai Clock Tower is a clock tower in Vadodara, India. It was completed in 1896. "
          "It was named in memory of Chimnabai I, a queen of Baroda State.")
PARAGRAPH = ("The Chimnabai Clock Tower was completed in 1896. It was named after Chimnabai I. "
             "Chimnabai I was a queen of Baroda State. The tower was a stop for horse drawn trams. "
             "Vadodara is known for its gardens. ")


def response(kind: str, size: int) -> str:
    """A response of about `size` characters of the given kind."""
    if kind == "yes":
        return "Yes. " * (size // 5)
    if kind == "repeated":
        return PARAGRAPH * (size // len(PARAGRAPH))
    parts: list[str] = []
    length, i = 0, 0
    while length < size:
        parts.append(f"Tower {i} in district {i % 97} was finished in {1800 + i % 200} "
                     f"and stands {i % 400} metres tall. ")
        length += len(parts[-1])
        i += 1
    return "".join(parts)


def peak_rss_mb() -> float:
    """The process's peak resident set (VmHWM), in MB; ru_maxrss where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(kind: str, size: int) -> dict[str, Any]:
    """One case, in this process: evaluate and measure."""
    from evaluators.core.records import Item
    from evaluators.core.text import split_sentences
    from evaluators.judges import embeddings, factory
    from evaluators.metrics.registry import THELMA
    from evaluators.runs import runner
    from evaluators.storage import store

    embeddings.embed(["warm the model"])  # model loading is not the case's cost
    text = response(kind, size)
    items = [Item("small-1", QUERY, (SOURCE,), PARAGRAPH), Item("big", QUERY, (SOURCE,), text),
             Item("small-2", QUERY, (SOURCE,), "The tower was completed in 1896.")]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.duckdb"
        t0, c0 = time.perf_counter(), time.process_time()
        runner.evaluate(items, db, "big", factory.OFFLINE, metrics=THELMA)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rows = store.query(db, "SELECT item_id, metric, value, n_total, status FROM scores").to_dict("records")
    big = {r["metric"]: r["status"] if r["status"] != "ok" else f"{r['value']:.2f} of {r['n_total']}"
           for r in rows if r["item_id"] == "big"}
    return {"kind": kind, "bytes": len(text.encode()), "sentences": len(split_sentences(text)), "wall_s": wall,
            "cpu_s": cpu, "peak_mb": peak_rss_mb(), "items_stored": len({r["item_id"] for r in rows}), "big": big}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="150000,1000000", help="response sizes in characters, comma-separated")
    p.add_argument("--kinds", default="yes,repeated,distinct", help="response kinds, comma-separated")
    p.add_argument("--child", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]))))
        return 0
    print(f"{'kind':<9} {'size':>9} {'sentences':>9} {'wall s':>7} {'cpu s':>7} {'peak MB':>8} {'items':>5}  big item")
    worst = 0
    for size in (int(s) for s in args.sizes.split(",")):
        for kind in args.kinds.split(","):
            done = subprocess.run([sys.executable, "-m", "benchmarks.big_input", "--child", kind, str(size)],
                                  cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{kind:<9} {size:>9} FAILED (exit {done.returncode}): {done.stderr.strip()[-300:]}")
                worst = 1
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            scores = ", ".join(f"{m} {v}" for m, v in r["big"].items())
            print(f"{r['kind']:<9} {r['bytes']:>9,} {r['sentences']:>9,} {r['wall_s']:>7.1f} {r['cpu_s']:>7.1f} "
                  f"{r['peak_mb']:>8.0f} {r['items_stored']:>5}  {scores}")
    return worst


if __name__ == "__main__":
    sys.exit(main())

"""Speed of the local judge: seconds per triplet for the THELMA suite, and where the time goes.

Scores WikiEval rows (question, context_v1, answer) with the local judge exactly as `--judge local`
builds it (local_llm.judge: one component per call, logprob scoring) through the runner's per-item
step (metrics.evaluate_item), one item after another on one server. For each triplet it prints
the wall time, the judge calls, the prompt tokens the calls carried, and from the server's own
counters how many of them it processed and how many it reused from its prompt cache, and the
seconds it spent reading prompts and generating. The server start is timed on its own and left
out of the per-triplet figures. The first triplet also reads every prompt's instructions once;
the later ones find them in the server's prompt cache, so both figures are printed.

The figures depend heavily on other load on the two cores: the load average is printed beside
them. `--save FILE` keeps the verdicts and scores; `--compare FILE` prints how far this run's agree
with a saved one (for a change of prompts or server settings; use development rows 0-19 only).

    .venv/bin/python benchmarks/local_speed.py [--rows 0-2] [--threads 1] [--parallel 1]
        [--metrics sp1,sp2,sqc,rp,rqc,sd,gr] [--calls] [--save FILE] [--compare FILE]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evaluators.core.records import Answer, Item, JudgeCall  # noqa: E402
from evaluators.judges import local_llm, registry
from evaluators.judges.llm import LLMJudge  # noqa: E402
from evaluators.metrics import registry as metric_registry
from evaluators.metrics import thelma as metrics
from evaluators.metrics.registry import THELMA  # noqa: E402
from evaluators.runs import runner  # noqa: E402

WIKIEVAL = ROOT.parent / "shared" / "datasets" / "wikieval" / "wikieval.jsonl"
DEV_ROWS = range(0, 20)  # development rows; 20-49 are held out and never used to tune anything


def wikieval_items(rows: range) -> list[Item]:
    """WikiEval rows as triplets: the question, its context_v1 passages, and the grounded answer."""
    lines = WIKIEVAL.read_text(encoding="utf-8").splitlines()
    items = []
    for k in rows:
        row = json.loads(lines[k])
        items.append(Item(f"wikieval-{k}", row["question_text"], tuple(row["context_v1"]), row["answer_text"]))
    return items


def parse_rows(spec: str) -> range:
    """"0-2" or "3" as a range of rows."""
    first, _, last = spec.partition("-")
    return range(int(first), int(last or first) + 1)


def load() -> str:
    """The load average, to print beside every time."""
    return "load average {:.1f} / {:.1f} / {:.1f} (1 / 5 / 15 min) on {} cores".format(*os.getloadavg(), os.cpu_count())


def reading(prompt: str) -> str:
    """How the judge reads a prompt's answer: the first token's logprobs, or a generated reply."""
    if prompt in registry.BINARY_PROMPTS:
        return "logprob 0/1"
    return "logprob label" if prompt in registry.LABEL_PROMPTS else "generated"


async def timed_calls(judge: LLMJudge, item: Item) -> list[tuple[str, str, float, Answer]]:
    """One call of each prompt the suite uses, one after another, each timed on its own."""
    claim = item.response.split(". ")[0].rstrip(".") + "."
    asks: list[tuple[str, dict[str, object]]] = [
        ("subquestions", {"input": item.query}),
        ("claims", {"input": item.response}),
        ("essential", {"query": item.query, "response": claim}),
        ("source_essential", {"query": item.query, "source": item.sources[0]}),
        ("source_answers", {"source": item.sources[0], "question": item.query}),
        ("response_addresses", {"question": item.query, "response": item.response}),
        ("groundedness", {"sources": "\n\n".join(item.sources), "claim": claim}),
    ]
    out = []
    for prompt, variables in asks:
        t0 = time.monotonic()
        answer = await judge.ask(prompt, **variables)
        out.append((prompt, reading(prompt), time.monotonic() - t0, answer))
    return out


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What the server's counters grew by."""
    return {k: after[k] - before.get(k, 0.0) for k in after}


Spent = list[tuple[JudgeCall, dict[str, float]]]


async def suite(server: local_llm.LocalServer, items: list[Item], chosen: dict[str, metrics.Metric],
                timeout: float) -> tuple[list[dict[str, Any]], Spent, list[dict[str, Any]]]:
    """Score each item in turn: per item its seconds, calls and what the server's counters grew by;
    each call with what they grew by since the call before; each item's verdicts and scores.

    The counters are read as each call returns. With one slot the calls run one at a time, so
    that is exactly the call's own work; with more slots the calls overlap and it is approximate.
    """
    calls: Spent = []
    last = [server.counters()]

    def on_call(call: JudgeCall) -> None:
        now = server.counters()
        calls.append((call, delta(last[0], now)))
        last[0] = now

    judge = local_llm.judge(server, timeout, on_call=on_call)
    rows, results = [], []
    for item in items:
        first_call, before = len(calls), server.counters()
        t0 = time.monotonic()
        result = await metrics.evaluate_item(item, chosen, judge, per_component=True)
        seconds = time.monotonic() - t0
        grew = delta(before, server.counters())
        mine = calls[first_call:]
        rows.append({"item": item.id, "seconds": seconds, "calls": len(mine),
                     "prompt_tokens": sum(c.prompt_tokens for c, _ in mine),
                     "processed": grew["prompt_tokens_total"], "cached": grew["prompt_tokens_cached_total"],
                     "prompt_s": grew["prompt_seconds_total"], "generated": grew["tokens_predicted_total"],
                     "generate_s": grew["tokens_predicted_seconds_total"], "load": os.getloadavg()[0]})
        results.append(as_record(item, result))
    return rows, calls, results


def as_record(item: Item, result: metrics.ItemResult) -> dict[str, Any]:
    """An item's scores and verdicts as JSON, each verdict keyed by its component's text."""
    texts = {(c.kind, c.idx): c.text for c in result.components}
    verdicts = [{"metric": v.metric, "component": texts.get((v.component_kind, v.component_idx), ""),
                 "target": v.target, "value": v.value, "p": v.p, "status": v.status.value}
                for v in result.verdicts]
    return {"item": item.id, "scores": {s.metric: s.value for s in result.scores}, "verdicts": verdicts}


def compare(now: list[dict[str, Any]], saved: list[dict[str, Any]]) -> None:
    """Agreement of scores and verdicts with a saved run, per metric, over the items both scored."""
    old = {r["item"]: r for r in saved}
    scores: dict[str, list[tuple[float, float]]] = defaultdict(list)
    verdicts: dict[str, list[bool]] = defaultdict(list)
    for record in now:
        before = old.get(record["item"])
        if before is None:
            continue
        for metric, value in record["scores"].items():
            was = before["scores"].get(metric)
            if value is not None and was is not None:
                scores[metric].append((value, was))
        earlier = {(v["metric"], v["component"], v["target"]): v["value"] for v in before["verdicts"]}
        for v in record["verdicts"]:
            key = (v["metric"], v["component"], v["target"])
            if v["value"] is not None and earlier.get(key) is not None:
                verdicts[v["metric"]].append(v["value"] == earlier[key])
    print("\n## Agreement with the saved run\n")
    print("| metric | items scored by both | equal scores | mean abs score difference | "
          "verdicts on the same component | equal verdicts |")
    print("|---|---|---|---|---|---|")
    for metric in sorted(set(scores) | set(verdicts)):
        pairs, same = scores[metric], verdicts[metric]
        equal = sum(a == b for a, b in pairs)
        diff = sum(abs(a - b) for a, b in pairs) / len(pairs) if pairs else float("nan")
        print(f"| {metric} | {len(pairs)} | {equal} | {diff:.2f} | {len(same)} | {sum(same)} |")


def main() -> int:
    """Run the benchmark and print its tables."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="0-2", help="WikiEval rows, e.g. 0-2 (default)")
    p.add_argument("--metrics", default=",".join(THELMA), help="metrics to score (default: the THELMA suite)")
    p.add_argument("--threads", type=int, help="server threads (default: the idle cores, local_llm.idle_cores)")
    p.add_argument("--parallel", type=int, help=f"server slots (default {local_llm.N_PARALLEL})")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per judge call")
    p.add_argument("--calls", action="store_true", help="first time one call of each prompt on a fresh server")
    p.add_argument("--save", type=Path, help="write the verdicts and scores to this JSON file")
    p.add_argument("--compare", type=Path, help="print agreement with verdicts saved by --save")
    args = p.parse_args()
    missing = local_llm.available()
    if missing:
        print(f"local judge unavailable: {missing}", file=sys.stderr)
        return 2
    if not WIKIEVAL.exists():
        print(f"WikiEval not found at {WIKIEVAL}", file=sys.stderr)
        return 2
    rows = parse_rows(args.rows)
    if args.save and not set(rows) <= set(DEV_ROWS):
        print("--save keeps verdicts to tune against: use development rows 0-19 only", file=sys.stderr)
        return 2
    items = wikieval_items(rows)
    chosen = {m: metric_registry.METRICS[m] for m in runner.check_metrics(args.metrics.split(","))}

    print(load())
    t0 = time.monotonic()
    local_llm.ensure_model()
    t_model = time.monotonic() - t0
    if args.calls:
        with local_llm.LocalServer(n_threads=args.threads, n_parallel=args.parallel) as server:
            print(f"\n## Seconds per call (row {items[0].id}, one call at a time, fresh server)\n")
            print("| prompt | kind | seconds | status | answer |")
            print("|---|---|---|---|---|")
            judge = local_llm.judge(server, args.timeout)
            for prompt, kind, seconds, answer in asyncio.run(timed_calls(judge, items[0])):
                shown = f"P(1)={answer.prob:.2f}" if answer.prob is not None else str(answer.value)[:60]
                print(f"| {prompt} | {kind} | {seconds:.1f} | {answer.status.value} | {shown} |")
        print(load())

    t0 = time.monotonic()
    with local_llm.LocalServer(n_threads=args.threads, n_parallel=args.parallel) as server:
        t_start = time.monotonic() - t0
        print(f"model file ready in {t_model:.1f} s; server start (load + health) {t_start:.1f} s; "
              f"{server.n_threads} thread(s), {server.n_parallel} slot(s)")
        per_item, calls, results = asyncio.run(suite(server, items, chosen, args.timeout))

    print(f"\n## Full suite ({','.join(chosen)}), one component per call, WikiEval rows {args.rows}\n")
    print("| triplet | seconds | calls | prompt tokens | processed | from cache | prompt s | generated tokens "
          "| generate s | load 1 min |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in per_item:
        print(f"| {r['item']} | {r['seconds']:.0f} | {r['calls']} | {r['prompt_tokens']} | {r['processed']:.0f} | "
              f"{r['cached']:.0f} | {r['prompt_s']:.0f} | {r['generated']:.0f} | {r['generate_s']:.0f} | {r['load']:.1f} |")
    mean = sum(r["seconds"] for r in per_item) / len(per_item)
    warm = per_item[1:]
    warm_text = f"; after the first: {sum(r['seconds'] for r in warm) / len(warm):.0f} s" if warm else ""
    print(f"\nmean {mean:.0f} s per triplet{warm_text}; {len(calls) / len(items):.1f} judge calls and "
          f"{sum(c.prompt_tokens for c, _ in calls) / len(items):.0f} prompt tokens per triplet")

    by_prompt: dict[str, Spent] = defaultdict(list)
    for call, grew in calls:
        by_prompt[call.prompt_name].append((call, grew))
    print("\n## Where the time goes, per prompt (all triplets)\n")
    print("| prompt | kind | calls | mean prompt tokens | mean processed | mean from cache | prompt s (sum) "
          "| mean completion tokens | generate s (sum) | call seconds (sum) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, group in sorted(by_prompt.items(), key=lambda kv: -sum(c.latency_ms for c, _ in kv[1])):
        n = len(group)

        def total(key: str) -> float:
            return sum(g[key] for _, g in group)

        print(f"| {name} | {reading(name)} | {n} | {sum(c.prompt_tokens for c, _ in group) / n:.0f} | "
              f"{total('prompt_tokens_total') / n:.0f} | {total('prompt_tokens_cached_total') / n:.0f} | "
              f"{total('prompt_seconds_total'):.0f} | {sum(c.completion_tokens for c, _ in group) / n:.1f} | "
              f"{total('tokens_predicted_seconds_total'):.0f} | {sum(c.latency_ms for c, _ in group) / 1000:.0f} |")
    print(load())
    if args.save:
        args.save.write_text(json.dumps(results, indent=1))
    if args.compare:
        compare(results, json.loads(args.compare.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

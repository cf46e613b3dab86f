"""Speed of the local judge: seconds per triplet for the THELMA suite, and seconds per judge call.

First times one call of each prompt the suite uses, one at a time. Then scores a few WikiEval
rows (question, context_v1, answer) with `--judge local` through the real runner (one component
per call, as the local judge always does) into a fresh DuckDB file, so no call is answered from
a cache. The server start is timed on its own and left out of the per-triplet figure. The
figures depend heavily on other load on the two cores: the load average is printed beside them.

    .venv/bin/python benchmarks/local_speed.py [--rows 0-2] [--metrics sp1,sp2,sqc,rp,rqc,sd,gr]
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

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evaluators import local_llm, registry, runner, store  # noqa: E402
from evaluators.judge import LLMJudge  # noqa: E402
from evaluators.records import Answer, Item  # noqa: E402
from evaluators.vocabulary import THELMA  # noqa: E402

WIKIEVAL = ROOT.parent / "shared" / "datasets" / "wikieval" / "wikieval.jsonl"


def wikieval_items(rows: range) -> list[Item]:
    """WikiEval rows as triplets: the question, its context_v1 passages, and the grounded answer."""
    lines = WIKIEVAL.read_text(encoding="utf-8").splitlines()
    items = []
    for k in rows:
        row = json.loads(lines[k])
        items.append(Item(f"wikieval-{k}", row["question_text"], tuple(row["context_v1"]), row["answer_text"]))
    return items


def parse_rows(spec: str) -> range:
    first, _, last = spec.partition("-")
    return range(int(first), int(last or first) + 1)


def load() -> str:
    return "load average {:.1f} / {:.1f} / {:.1f} (1 / 5 / 15 min) on {} cores".format(*os.getloadavg(), os.cpu_count())


async def timed_calls(item: Item) -> list[tuple[str, str, float, Answer]]:
    """One call of each prompt the suite uses, one after another, each timed on its own.

    The runner's stored latencies include the wait for the single concurrency slot, so they
    cannot give the time of one call.
    """
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
    with local_llm.LocalServer() as server:
        judge = LLMJudge(server.model, api_base=server.base_url, api_key="local", concurrency=1,
                         timeout=600.0, logprob_binary=True)
        for prompt, variables in asks:
            t0 = time.monotonic()
            answer = await judge.ask(prompt, **variables)
            kind = "logprob 0/1" if prompt in registry.BINARY_PROMPTS else "generated"
            out.append((prompt, kind, time.monotonic() - t0, answer))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="0-2", help="WikiEval rows, e.g. 0-2 (default)")
    p.add_argument("--metrics", default=",".join(THELMA), help="metrics to score (default: the THELMA suite)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per judge call")
    p.add_argument("--db", type=Path, help="DuckDB file to keep (default: a temporary file)")
    args = p.parse_args()
    missing = local_llm.available()
    if missing:
        print(f"local judge unavailable: {missing}", file=sys.stderr)
        return 2
    if not WIKIEVAL.exists():
        print(f"WikiEval not found at {WIKIEVAL}", file=sys.stderr)
        return 2
    items = wikieval_items(parse_rows(args.rows))
    metrics = runner.check_metrics(args.metrics.split(","))

    print(load())
    t0 = time.monotonic()
    local_llm.ensure_model()
    t_model = time.monotonic() - t0
    t0 = time.monotonic()
    with local_llm.LocalServer() as server:
        t_start = time.monotonic() - t0
        threads = server.n_threads
    print(f"model file ready in {t_model:.1f} s; server start (load + health) {t_start:.1f} s; {threads} thread(s)")

    print(f"\n## Seconds per call (row {items[0].id}, one call at a time, fresh server)\n")
    print("| prompt | kind | seconds | status | answer |")
    print("|---|---|---|---|---|")
    for prompt, kind, seconds, answer in asyncio.run(timed_calls(items[0])):
        shown = f"P(1)={answer.prob:.2f}" if answer.prob is not None else str(answer.value)[:60]
        print(f"| {prompt} | {kind} | {seconds:.1f} | {answer.status.value} | {shown} |")
    print(load())

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "local_speed.duckdb"
        t0 = time.monotonic()
        summary = runner.evaluate(items, db, "local-speed", runner.LOCAL, metrics=metrics, timeout=args.timeout,
                                  on_progress=runner.print_progress)
        wall = time.monotonic() - t0
        calls = store.query(db, """
            SELECT prompt_name, count(*) AS n, avg(prompt_tokens) AS p_tok, avg(completion_tokens) AS c_tok
            FROM judge_calls GROUP BY prompt_name ORDER BY n DESC""")
    n_calls = int(calls["n"].sum())
    judged = wall - t_start  # the runner starts its own server
    print(f"\n## Full suite ({','.join(metrics)}), per component, {len(items)} WikiEval triplets (rows {args.rows})\n")
    print(summary.text())
    print(f"\nwall time {wall:.0f} s including one server start: {judged / len(items):.0f} s per triplet, "
          f"{n_calls / len(items):.1f} judge calls per triplet, {judged / max(1, n_calls):.1f} s per call "
          "(calls run one at a time)")
    print("\n| prompt | kind | calls | mean prompt tokens | mean completion tokens |")
    print("|---|---|---|---|---|")
    for r in calls.itertuples():
        kind = "logprob 0/1" if r.prompt_name in registry.BINARY_PROMPTS else "generated"
        print(f"| {r.prompt_name} | {kind} | {r.n} | {r.p_tok:.0f} | {r.c_tok:.1f} |")
    print(load())
    return 0


if __name__ == "__main__":
    sys.exit(main())

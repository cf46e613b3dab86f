"""How well a judge keeps each prompt's reply format: per prompt kind, the share of asks re-asked for their
format (repaired) and the share still unreadable after the re-ask (unparsed).

Scores WikiEval development rows (0-19 only: rows 20-49 are held out and refused here) through the real
runner, each row's answer, ungrounded answer and poor answer with context_v1 as the sources and the answer as
the reference, with every metric that asks a judge (THELMA's seven and the three suites'). The runs and the
judge's calls go into a DuckDB file, so a killed run resumes where it stopped and a second run of the same
command only reads. Every stored reply of the prompts as they are now (their content hash) is read again
with the prompt's own parser (evaluators/judges/registry.py):

- asks: first attempts (an element asked again by itself, after a batch reply left it out, is an ask too);
- repaired: asks whose reply could not be read, so the judge asked once more for the format;
- unparsed: asks still unreadable after that re-ask (or, for a one-token logprob answer, with neither
  answer among its top tokens): a visible `unparsed` status in the run;
- capped: replies that stopped at the reply's token bound;
- partial: batch replies that left out some of the elements asked.

    nice -n 10 .venv/bin/python -m benchmarks.prompt_health [--judge local] [--rows 0-19] \\
        [--variants answer,ungrounded,poor] [--db benchmarks/out/prompt_health.duckdb]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evaluators.core.records import Item, JudgeCall, Status  # noqa: E402
from evaluators.judges import prompts, registry, replies  # noqa: E402
from evaluators.judges.factory import judge_name  # noqa: E402
from evaluators.metrics import registry as metric_registry  # noqa: E402
from evaluators.runs import runner  # noqa: E402
from evaluators.storage import store  # noqa: E402

WIKIEVAL = ROOT.parent / "shared" / "datasets" / "wikieval" / "wikieval.jsonl"
OUT = ROOT / "benchmarks" / "out"
DEV = range(0, 20)  # WikiEval's development rows; 20-49 are held out
VARIANTS = {"answer": "answer_text", "ungrounded": "ungrounded_answer", "poor": "poor_answer"}
REASK = "Your reply could not be read"


def parse_rows(text: str) -> list[int]:
    """Rows "0-4,7" as a sorted list; a held-out row (20-49) is refused."""
    rows: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        rows.update(range(int(lo), int(hi or lo) + 1))
    held_out = sorted(r for r in rows if r not in DEV)
    if held_out:
        raise SystemExit(f"--rows: rows {held_out} are not development rows (0-19): WikiEval rows 20-49 are held out")
    return sorted(rows)


def strip_prefix(text: str, prefix: str) -> str:
    """WikiEval keeps "Question: " / "Answer: " before some texts."""
    return text[len(prefix) :] if text.startswith(prefix) else text


def wikieval_items(rows: Sequence[int], variants: Sequence[str], path: Path = WIKIEVAL) -> list[Item]:
    """One item per row and variant: the question, context_v1, the variant's answer, the answer as reference."""
    data = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = []
    for r in rows:
        row = data[r]
        for variant in variants:
            items.append(
                Item(
                    f"wikieval-{r}-{variant}",
                    row["question_text"],
                    tuple(s for s in row["context_v1"] if s.strip()),
                    strip_prefix(row[VARIANTS[variant]], "Answer: "),
                    reference=row["answer_text"],
                    metadata={"row": r, "variant": variant},
                )
            )
    return items


def about(call: JudgeCall, items: Sequence[Item]) -> bool:
    """Whether a call asked about one of `items` (its prompt carries one of their texts), or about none
    (G-Eval's steps read only the criteria)."""
    prompt = call.messages[0]["content"] if call.messages else ""
    texts = [t for i in items for t in (i.query, i.response, i.reference or "", *(s[:200] for s in i.sources))]
    if any(prompts.escape(t.strip()) in prompt for t in texts if t.strip()):
        return True
    return not (prompts.load(call.prompt_name).variables & registry.EVALUATED_TEXTS)


def stored_calls(db: Path, model: str, items: Sequence[Item] | None = None) -> list[JudgeCall]:
    """The answered calls of `model` in `db` made with the prompt files as they are now (about `items`,
    when given: a database may hold the calls of other rows too)."""
    hashes = prompts.prompt_hashes()
    frame = store.query(
        db,
        "SELECT key, model, prompt_name, prompt_hash, messages, params, reply, status, prompt_tokens, "
        "completion_tokens, latency_ms FROM judge_calls WHERE model = ? AND reply IS NOT NULL",
        [model],
    )
    calls = [
        JudgeCall(
            key=r.key,
            model=r.model,
            prompt_name=r.prompt_name,
            prompt_hash=r.prompt_hash,
            messages=json.loads(r.messages),
            params=json.loads(r.params),
            reply=r.reply,
            status=Status(r.status),
            prompt_tokens=int(r.prompt_tokens),
            completion_tokens=int(r.completion_tokens),
            latency_ms=float(r.latency_ms),
        )
        for r in frame.itertuples(index=False)
        if hashes.get(r.prompt_name) == r.prompt_hash
    ]
    return calls if items is None else [c for c in calls if about(c, items)]


def readable(call: JudgeCall) -> bool:
    """Whether the prompt's own reading of this reply succeeds, as the judge read it."""
    name = call.prompt_name
    if call.params.get("logprobs"):
        if name in registry.BINARY_PROMPTS or name in registry.LABEL_PROMPTS:
            words = registry.LABEL_PROMPTS.get(name, ("1", "0"))
            return replies.logprob_answer(call, "t", words).status is Status.OK
        top = json.loads(call.reply or "{}").get("top_logprobs", {})
        return any(str(s) in top for s in range(1, 6))
    reply = full_reply(call)
    try:
        registry.PARSERS[name](reply)
    except prompts.ParseError:
        return False
    return True


def full_reply(call: JudgeCall) -> str:
    """The reply as the judge read it: a reply to a prefilled request continues the prefill."""
    last = call.messages[-1] if call.messages else {}
    return replies.continued(last.get("content", "") if last.get("role") == "assistant" else "", call.reply or "")


def is_reask(call: JudgeCall) -> bool:
    """A call that asked again for the format of a reply that could not be read."""
    return any(m["role"] == "user" and m["content"].startswith(REASK) for m in call.messages)


def asked_elements(call: JudgeCall) -> int | None:
    """How many numbered elements a batch prompt asked about (None for other prompts)."""
    variable = registry.BATCH_ELEMENTS.get(call.prompt_name)
    if variable is None or call.prompt_name == "source_answers_batch":
        return None
    tag = {"facts": "fact", "sources": "source", "claims": "claim", "questions": "question", "texts": "text"}[variable]
    return len(re.findall(rf'<{tag} id="\d+">', call.messages[0]["content"]))


def health(calls: Sequence[JudgeCall]) -> dict[str, Counter[str]]:
    """Per prompt kind: asks, repaired, unparsed, capped, partial, and the calls, tokens and seconds."""
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for call in calls:
        c = out[call.prompt_name]
        c["calls"] += 1
        c["prompt_tokens"] += call.prompt_tokens
        c["completion_tokens"] += call.completion_tokens
        c["ms"] += int(call.latency_ms)
        bound = call.params.get("max_tokens")
        if bound and bound > 1 and call.completion_tokens >= bound:
            c["capped"] += 1
        ok = readable(call)
        if is_reask(call):
            c["unparsed"] += not ok
            continue
        c["asks"] += 1
        if not ok:
            # A logprob answer is never re-asked: unreadable is unparsed at once.
            c["unparsed" if call.params.get("logprobs") else "repaired"] += 1
        else:
            asked = asked_elements(call)
            if asked is not None and asked > 1:
                got = registry.PARSERS[call.prompt_name](full_reply(call))
                c["partial"] += len(got) < asked
    return out


def table(counts: dict[str, Counter[str]]) -> str:
    """The markdown table, one row per prompt kind and a total."""

    def pct(n: int, d: int) -> str:
        return f"{n / d:.0%}" if d else "–"

    lines = [
        "| prompt kind | asks | calls | repaired | unparsed | capped | partial | completion tokens / call | s / call |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    total: Counter[str] = Counter()
    for name in sorted(counts):
        c = counts[name]
        total.update(c)
        lines.append(_row(name, c, pct))
    lines.append(_row("**all**", total, pct))
    return "\n".join(lines)


def _row(name: str, c: Counter[str], pct: Any) -> str:
    return (
        f"| {name} | {c['asks']} | {c['calls']} | {c['repaired']} ({pct(c['repaired'], c['asks'])}) "
        f"| {c['unparsed']} ({pct(c['unparsed'], c['asks'])}) | {c['capped']} | {c['partial']} "
        f"| {c['completion_tokens'] / max(c['calls'], 1):.0f} | {c['ms'] / 1000 / max(c['calls'], 1):.1f} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--judge", default="local", help="local (default) or a litellm model with --api-base")
    p.add_argument("--api-base", default=None)
    p.add_argument("--rows", default="0-19", help="WikiEval development rows, e.g. 0-4 (default 0-19)")
    p.add_argument("--variants", default=",".join(VARIANTS), help="answer,ungrounded,poor (default all)")
    p.add_argument("--metrics", default=None, help="metric ids (default: THELMA's and the three suites')")
    p.add_argument("--db", type=Path, default=OUT / "prompt_health.duckdb")
    p.add_argument("--report-only", action="store_true", help="read the stored calls, judge nothing")
    args = p.parse_args(argv)
    if not WIKIEVAL.exists():
        print(f"error: {WIKIEVAL} not found (the shared data sets sit beside the checkout)", file=sys.stderr)
        return 2
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        print(f"error: --variants: unknown {unknown}; known: {list(VARIANTS)}", file=sys.stderr)
        return 2
    items = wikieval_items(parse_rows(args.rows), variants)
    names = args.metrics.split(",") if args.metrics else [*metric_registry.THELMA, *metric_registry.SUITE_METRICS]
    args.db.parent.mkdir(parents=True, exist_ok=True)
    started, load = time.monotonic(), os.getloadavg()
    if not args.report_only:
        run = f"prompt-health/{args.judge}"
        summary = runner.evaluate(items, args.db, run, judge=args.judge, api_base=args.api_base, metrics=names,
                                  update=True, on_progress=lambda pr: print(pr.line(), file=sys.stderr, flush=True))
        print(summary.text(), file=sys.stderr)
    counts = health(stored_calls(args.db, judge_name(args.judge), items))
    end_load = os.getloadavg()
    print(f"Prompt kinds with judge {args.judge}, {len(items)} items (WikiEval rows {args.rows}, {','.join(variants)}); "
          f"{time.monotonic() - started:.0f} s, load {load[0]:.1f} -> {end_load[0]:.1f}\n")
    print(table(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
